"""Exporting one `awc tick`'s metrics (SPEC §2, §9): a node_exporter textfile
and/or a Prometheus Pushgateway.

A failed run must never overwrite the last success: the textfile carries the
previous `awc_tick_last_success_timestamp_seconds` forward, and the push of
the success gauge (from its own registry) happens only after a success.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tick.metrics import Metrics

SUCCESS_METRIC = "awc_tick_last_success_timestamp_seconds"


def _previous_success(path: Path) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == SUCCESS_METRIC and sample.labels.get("driver") == "tick":
                    return float(sample.value)
    except ValueError:
        return None
    return None


def write_textfile(metrics: Metrics, path: str, ok: bool) -> None:
    """Replace `path` atomically with the run's metrics."""
    target = Path(path)
    if not ok:
        previous = _previous_success(target)
        if previous is not None:
            metrics.last_success.labels("tick").set(previous)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(metrics.exposition())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)  # node_exporter never reads half a file
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def push(metrics: Metrics, url: str, worker_id: str, ok: bool) -> None:
    """POST the run's metrics to the Pushgateway; the success gauge only on success."""
    from prometheus_client import pushadd_to_gateway

    grouping = {"instance": worker_id}
    pushadd_to_gateway(url, job="awc_tick", registry=metrics.registry, grouping_key=grouping,
                       timeout=10)
    if ok:
        pushadd_to_gateway(url, job="awc_tick", registry=metrics.success_registry,
                           grouping_key=grouping, timeout=10)

"""Exporting one `awc tick`'s metrics (SPEC §2, §9): a node_exporter textfile
and/or a Prometheus Pushgateway.

A failed run must never overwrite the last success: the textfile carries the
previous `awc_tick_last_success_timestamp_seconds` forward, and the push of
the success gauge (from its own registry) happens only after a success.

Each `awc tick` is a new process, but Prometheus reads a counter as one
series that only grows: the textfile's counters and histograms are the
previous file's values plus this run's, so `rate()` and `increase()` are
right. The file is replaced atomically (a reader sees the old file or the
new) under a lock beside it, so two overlapping ticks cannot lose counts.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tick.errors import SettingsError
from tick.events import LABEL_SET_LIMIT, OVERFLOW
from tick.metrics import Metrics

SUCCESS_METRIC = "awc_tick_last_success_timestamp_seconds"
CUMULATIVE = frozenset({"counter", "histogram", "summary"})


def check_textfile(path: str) -> None:
    """At startup, before any job runs (SPEC §2): the textfile must be a
    `.prom` file (node_exporter's textfile collector reads no other) in a
    directory that exists and awc can write to. awc creates no directory: a
    typo in the path would otherwise put the metrics where node_exporter
    never looks, and the alert on staleness would be the first sign."""
    from tick.text import for_terminal

    target = Path(path)
    if target.is_dir():
        raise SettingsError("AWC_METRICS_TEXTFILE: is a directory; name the .prom file "
                            "node_exporter reads inside it")
    if target.suffix != ".prom":
        raise SettingsError("AWC_METRICS_TEXTFILE: must name a .prom file "
                            "(node_exporter's textfile collector reads no other)")
    if target.exists() and not target.is_file():
        raise SettingsError("AWC_METRICS_TEXTFILE: exists and is not a regular file")
    shown = for_terminal(str(target.parent))
    if not target.parent.is_dir():
        raise SettingsError(f"AWC_METRICS_TEXTFILE: the directory {shown} does not exist "
                            "(awc creates none)")
    try:
        fd, probe = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise SettingsError(f"AWC_METRICS_TEXTFILE: cannot write to {shown} "
                            f"({error.strerror or error})") from None


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    # A sibling lock file: node_exporter reads only *.prom files.
    with open(target.parent / f".{target.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _key(sample: Any) -> tuple[str, tuple[tuple[str, str], ...]]:
    return sample.name, tuple(sorted(sample.labels.items()))


def _previous_totals(text: str) -> dict[str, dict[Any, Any]]:
    """The previous file's cumulative samples, by family name."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, dict[Any, Any]] = {}
    try:
        for family in text_string_to_metric_families(text):
            if family.type in CUMULATIVE:
                totals[family.name] = {_key(smp): smp for smp in family.samples
                                       if not smp.name.endswith("_created")}
    except ValueError:  # an unreadable file starts the counts afresh
        return {}
    return totals


class _Cumulative:
    """This run's registry with the previous file's counts added in."""

    def __init__(self, metrics: Metrics, previous: str) -> None:
        self._metrics = metrics
        self._previous = _previous_totals(previous)

    def collect(self) -> Iterator[Any]:
        for family in self._metrics.registry.collect():
            if family.type in CUMULATIVE:
                old = dict(self._previous.get(family.name, {}))
                samples = []
                for smp in family.samples:
                    if smp.name.endswith("_created"):
                        continue  # one run's start would read as a counter reset
                    before = old.pop(_key(smp), None)
                    samples.append(smp._replace(value=smp.value + before.value)
                                   if before is not None else smp)
                samples.extend(old.values())  # label sets this run did not touch
                family.samples = _capped(samples)
            yield family


def _capped(samples: list[Any]) -> list[Any]:
    """A family's samples with at most `LABEL_SET_LIMIT` label sets (SPEC
    §9): this run's first, then the previous file's, and the sets past the
    limit added into the overflow set, so no count is lost and the file
    stops growing (each run carried every earlier run's sets: 127 more a
    tick of new kinds, without end). A histogram's `le` stays its own."""
    def set_of(smp: Any) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in smp.labels.items() if k != "le"))

    order = list(dict.fromkeys(set_of(smp) for smp in samples))
    if len(order) <= LABEL_SET_LIMIT:
        return samples
    overflow = tuple((name, OVERFLOW) for name, _ in order[0])
    keep = set(order[:LABEL_SET_LIMIT - 1]) - {overflow}
    out: list[Any] = []
    folded: dict[tuple[str, str | None], Any] = {}
    for smp in samples:
        if set_of(smp) in keep:
            out.append(smp)
            continue
        labels = dict(overflow)
        if "le" in smp.labels:
            labels["le"] = smp.labels["le"]
        key = (smp.name, labels.get("le"))
        was = folded.get(key)
        folded[key] = (smp._replace(labels=labels) if was is None
                       else was._replace(value=was.value + smp.value))
    return out + list(folded.values())


def _read(path: Path) -> str:
    """The file's text as written: a carriage return inside a label value
    (a kind written by plain SQL) read as a newline broke the parse, and
    the run started every counter afresh."""
    with open(path, encoding="utf-8", newline="") as source:
        return source.read()


def _previous_success(text: str) -> float | None:
    """The last success a previous file (its text) recorded, if any."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == SUCCESS_METRIC and sample.labels.get("driver") == "tick":
                    return float(sample.value)
    except ValueError:
        return None
    return None


def write_textfile(metrics: Metrics, path: str, ok: bool) -> None:
    """Replace `path` atomically with the run's metrics, counters cumulative."""
    from prometheus_client import generate_latest

    target = Path(path)  # its directory was checked at startup; none is created
    with _locked(target):
        try:
            before = _read(target)  # once: the counters to add to, the last success
        except (OSError, UnicodeDecodeError):
            before = ""
        if not ok:
            previous = _previous_success(before)
            if previous is not None:
                metrics.last_success.labels("tick").set(previous)
        body = (generate_latest(_Cumulative(metrics, before))
                + generate_latest(metrics.success_registry))
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)  # node_exporter never reads half a file
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def push(metrics: Metrics, url: str, worker_id: str, ok: bool) -> None:
    """POST the run's metrics to the Pushgateway; the success gauge only on
    success. A `user:password@` in the URL is sent as HTTP basic auth, never
    as part of the URL (http.client would read the password as a port)."""
    from prometheus_client import pushadd_to_gateway
    from prometheus_client.exposition import basic_auth_handler, default_handler

    from tick.settings import without_credentials

    gateway, user, password = without_credentials(url)

    def handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
                data: bytes) -> Any:
        if user is None:
            return default_handler(url, method, timeout, headers, data)
        return basic_auth_handler(url, method, timeout, headers, data, user, password or "")

    grouping = {"instance": worker_id}
    pushadd_to_gateway(gateway, job="awc_tick", registry=metrics.registry,
                       grouping_key=grouping, timeout=10, handler=handler)
    if ok:
        pushadd_to_gateway(gateway, job="awc_tick", registry=metrics.success_registry,
                           grouping_key=grouping, timeout=10, handler=handler)

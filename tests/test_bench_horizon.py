"""bench.horizon, bench.horizon_steady and bench.prune (SPEC §24, §14) run end to end at a
tiny size, on the server of their own they start (autovacuum on), and write
the figures the README and bench.all read: per-slice rates and ratios, the
claim's buffers per call, dead tuples after the pinned drain, and per-window
throughput of the steady load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench.common
from bench import horizon, horizon_steady, prune


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_horizon_drain_reports_each_slice_free_and_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench.common, "RESULTS", tmp_path)
    figures = horizon.main(["--slices", "2", "--slice-jobs", "1500", "--concurrency", "128"])
    written = json.loads((tmp_path / "horizon.json").read_text())
    assert written["ratio_per_slice"] == figures["ratio_per_slice"]
    # Production defaults: the bench's own server vacuums by itself.
    assert written["autovacuum"] == "on"
    assert "embedded" in written["server"]
    assert written["context"]["server_config"]["autovacuum"] == "on"
    for key in ("free_slice_jobs_per_s", "pinned_slice_jobs_per_s", "ratio_per_slice",
                "claim_buffers_per_call_free", "claim_buffers_per_call_pinned"):
        assert len(written[key]) == 2, key
        assert all(isinstance(v, int | float) and v > 0 for v in written[key]), key
    for run in ("free", "pinned"):
        for at in ("first", "last"):
            explained = written["explain_claim"][run][at]
            # The batch and the claim's mark row, from the start and then from
            # the cursor the first claim returned.
            assert explained["rows"] == 129 and explained["ready_index_scan_buffers"] > 0
            assert explained["next_rows"] == 129
        assert len(written["claim_statements_per_slice"][run]) == 2
        costliest = written["costliest_statements_per_slice"][run]
        assert len(costliest) == 2 and all(slice_ and slice_[0]["calls"] > 0
                                           for slice_ in costliest)
    # The holder really held a snapshot in the bench's database.
    assert isinstance(written["pinned_xmin"], int)
    after = written["after_pinned_drain"]
    assert {"dead_tuples", "dead_tuples_counted", "ready_index_mib", "table_mib"} <= set(after)
    assert isinstance(written["met_every_slice"], bool)
    assert isinstance(written["met_last_over_first"], bool)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_steady_load_reports_windows_clean_pinned_and_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench.common, "RESULTS", tmp_path)
    horizon_steady.main(["--rate", "200", "--consumers", "1", "--clean-secs", "4",
                         "--pinned-secs", "4", "--recovery-secs", "4", "--window-secs", "2"])
    written = json.loads((tmp_path / "horizon_steady.json").read_text())
    phases = [w["phase"] for w in written["windows"]]
    assert phases == ["clean"] * 2 + ["pinned"] * 2 + ["recovery"] * 2
    assert written["autovacuum"] == "on"
    # A paced producer: each window had about the rate enqueued, and a clean
    # phase well below capacity finished about as many.
    assert all(w["produced_per_s"] > 0 for w in written["windows"])
    assert written["clean_jobs_per_s"] > 100
    assert all(w["ratio"] is not None and w["p99_ms"] is not None for w in written["windows"])
    assert isinstance(written["met_pinned"], bool) and isinstance(written["met_recovery"], bool)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_prune_bench_retires_a_part_and_counts_what_the_delete_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench.common, "RESULTS", tmp_path)
    figures = prune.main(["--finished", "3000"])
    written = json.loads((tmp_path / "prune.json").read_text())
    assert written["parts_secs"] == figures["parts_secs"]
    parts, delete = written["parts"], written["delete"]
    assert parts["removed"] == delete["removed"] == 3000
    # By parts: the part is empty on disk, and nothing was left to vacuum.
    assert parts["after"] == {"mib": 0.0, "dead_tuples": 0}
    assert parts["hot_table_after"]["dead_tuples"] == 0
    # By DELETE under the pin: every row stays behind as a dead tuple.
    assert delete["after"]["dead_tuples"] == 3000
    assert written["context"]["server_config"]["autovacuum"] == "on"

"""Smoke test of the persistence benchmark: tiny sizes, every figure present and positive.

It never looks at what the timings are, only that each one was measured.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.persistence import Sizes, format_report, run

TINY = Sizes(
    stream_deltas=40,
    stream_repeats=1,
    turn_lengths=(1_000, 20_000),
    store_deltas=40,
    reducer_deltas=10,
    host_deltas=20,
    turn_deltas=20,
    cost_repeats=1,
    stored_sessions=3,
    chats_per_session=2,
    start_repeats=1,
)


def positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_benchmark_produces_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "persistence.json"
    results = run(TINY, out=out)
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(results))

    machine = results["machine"]
    assert machine["cpu_count"] >= 1
    assert machine["python"]
    assert machine["date"]

    # 1. streaming: every store mode, and the on/off ratio.
    modes = results["streaming"]["modes"]
    assert set(modes) == {"memory", "sqlite-normal", "sqlite-full"}
    for mode in modes.values():
        assert positive(mode["deltas_per_s"])
        assert positive(mode["seconds"])
        assert positive(mode["ratio_vs_memory"])
        assert isinstance(mode["peak_rss_growth_kb"], int)
    for mode in ("sqlite-normal", "sqlite-full"):
        assert positive(modes[mode]["commits"])  # the SQLite modes really committed

    # 2. per-delta cost at each turn length, for every path.
    turn = results["turn_length"]
    lengths = [str(n) for n in TINY.turn_lengths]
    paths = turn["paths"]
    measured = {"store", "reducer", "apply_memory", "apply_sqlite", "turn_memory", "turn_sqlite"}
    assert measured | {"apply_persistence", "turn_persistence"} == set(paths)
    for name, path in paths.items():
        assert path["label"]
        for length in lengths:
            cost = path["us_per_delta"][length]
            if name in measured:
                assert positive(cost), (name, length)
            else:  # derived difference: may be any sign
                assert math.isfinite(cost)
        if name.startswith(("apply_", "turn_")) and name in measured:
            assert all(isinstance(path["peak_rss_growth_kb"][k], int) for k in lengths)

    # 3. start time: an empty data dir and one with stored chats, loaded lazily.
    cases = results["start"]["cases"]
    assert [c["stored_chats"] for c in cases] == [0, 6]
    for case in cases:
        assert positive(case["start_seconds"])
        assert positive(case["process_seconds"])
        assert positive(case["db_bytes"])
        assert isinstance(case["rss_delta_kb"], int | float)
        assert case["chats_loaded"] == 0
    assert cases[1]["chats_indexed"] == 6

    report = format_report(results)
    for heading in ("1. Streaming", "2. Per-delta cost", "3. Host.start()"):
        assert heading in report

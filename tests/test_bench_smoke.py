"""Smoke test of the persistence benchmark: tiny sizes, every figure present and positive.

It never looks at what the timings are, only that each one was measured.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.persistence import Sizes, format_report, run
from bench.suite import Sizes as SuiteSizes
from bench.suite import format_report as format_suite
from bench.suite import run as run_suite

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
    lone_turns=5,
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

    # 4. lone turns: every store mode, and the ratio to the memory store.
    lone = results["lone_turns"]
    assert lone["turns"] == 5
    assert set(lone["modes"]) == set(modes)
    for mode in lone["modes"].values():
        assert positive(mode["p50_ms"])
        assert mode["p90_ms"] >= mode["p50_ms"]
        assert positive(mode["ratio_vs_memory"])

    report = format_report(results)
    for heading in ("1. Streaming", "2. Per-delta cost", "3. Host.start()", "4. Lone turns"):
        assert heading in report


# -- the host-vs-floor suite (bench/suite.py) -------------------------------------------------

SUITE_TINY = SuiteSizes(
    stream_words=300,
    stream_repeats=1,
    fanout_connections=5,
    fanout_words=150,
    many_connections=5,
    many_words=60,
    rtt_round_trips=20,
    rtt_repeats=2,
    replay_words=300,
    snapshot_turns=(5, 10),
    idle_connections=20,
    idle_chats=20,
    turn_chats=5,
    turn_words=50,
    chats_per_session=10,
    other_modes=("off",),
    token_words=60,
    token_chats=(1, 2),
    short_sessions=3,
    short_turns=3,
)


def test_suite_produces_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "suite.json"
    results = run_suite(SUITE_TINY, out=out, coalesce_ms=5.0)
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(results))

    scenarios = results["scenarios"]
    expected = {
        *(
            f"{kind}/{mode}"
            for kind in ("stream-1", "fanout", "dispatch-rtt")
            for mode in ("off", "on")
        ),
        "many-chats/off",
        "reconnect/off",
        "memory/off",
        "startup/off",
        *(f"tokens-{n}/{mode}" for n in (1, 2) for mode in ("off", "on")),
        "short-turns/off",
        "short-turns/on",
        "fanout-1.0/off",
        "fanout-mixed/off",
    }
    assert expected <= set(scenarios)
    for mix in ("1.0", "mixed"):
        data = scenarios[f"fanout-{mix}/off"]
        assert data["mix"] == mix
        # Every subscriber got every delta, whatever version it speaks.
        assert data["host"]["deliveries"] == scenarios["fanout/off"]["host"]["deliveries"]
    versus = [r for r in results["rows"] if r["metric"] == "deliveries/s vs 0.7"]
    assert len(versus) == 2
    assert [r["target"] for r in versus if "1.0" in r["scenario"]] == [">= 0.9x 0.7"]
    for mode in ("off", "on"):
        data = scenarios[f"short-turns/{mode}"]
        assert data["host"]["turns"] == data["floor"]["turns"] == 9
        assert data["host"]["frames_per_turn"] > 1
        for side in ("host", "floor"):
            assert positive(data[side]["turns_per_s"])
            assert data[side]["cpu_us_per_turn"] >= 0
    for n in (1, 2):
        for mode in ("off", "on"):
            data = scenarios[f"tokens-{n}/{mode}"]
            assert data["host"]["deliveries"] == data["floor"]["deliveries"] > 0
            for side in ("host", "floor"):
                assert positive(data[side]["deliveries_per_s"])
                # CPU time comes in clock ticks: a tiny run may measure none.
                assert data[side]["cpu_us_per_delta"] >= 0
    for kind in ("stream-1", "fanout"):
        for mode in ("off", "on"):
            data = scenarios[f"{kind}/{mode}"]
            for side in ("host", "floor"):
                assert positive(data[side]["deliveries_per_s"]), (kind, mode, side)
                assert positive(data[side]["deliveries"])
            assert data["floor"]["deliveries"] == data["host"]["deliveries"]
    for mode in ("off", "on"):
        data = scenarios[f"dispatch-rtt/{mode}"]
        for side in ("host", "floor"):
            assert positive(data[side]["p50_us"])
            assert positive(data[side]["p99_us"])
            runs = data[side]["runs"]
            assert len(runs) == 2
            assert data[side]["p50_us"] == min(run["p50_us"] for run in runs)
    many = scenarios["many-chats/off"]
    for side in ("host", "floor"):
        assert positive(many[side]["deliveries_per_s"])
        assert positive(many[side]["gap_p99_ms"])
    reconnect = scenarios["reconnect/off"]
    assert reconnect["replay"]["type"] == "replay"
    assert positive(reconnect["replay"]["envelopes"])
    assert positive(reconnect["replay"]["ms"])
    assert positive(reconnect["replay"]["bytes"])
    assert [s["turns"] for s in reconnect["snapshots"]] == list(SUITE_TINY.snapshot_turns)
    for snap in reconnect["snapshots"]:
        assert positive(snap["ms"])
        assert positive(snap["bytes"])
    memory = scenarios["memory/off"]
    assert memory["idle_connection"]["connections"] == SUITE_TINY.idle_connections
    assert memory["idle_chat"]["chats"] == SUITE_TINY.idle_chats
    assert memory["chat_after_turn"]["chats"] == SUITE_TINY.turn_chats
    assert memory["chat_after_turn"]["words"] == SUITE_TINY.turn_words
    assert memory["chat_after_turn"]["next"]["chats"] == SUITE_TINY.turn_chats
    assert isinstance(memory["chat_after_turn"]["next"]["kib_per_item"], float)
    for key in ("idle_connection", "idle_chat", "chat_after_turn"):
        assert isinstance(memory[key]["kib_per_item"], float)  # RSS may even shrink
    startup = scenarios["startup/off"]
    for side in ("host", "floor"):
        assert positive(startup[side]["seconds"])
        assert positive(startup[side]["cpu_s"])
    coalesce = scenarios["coalesce"]
    if coalesce["supported"]:
        for side in ("on", "off"):
            assert positive(coalesce[side]["words_per_s"])
            assert positive(coalesce[side]["frames"])

    assert results["rows"]
    for row in results["rows"]:
        assert isinstance(row["host"], int | float), row
        assert math.isfinite(row["host"]), row
    report = format_suite(results)
    for heading in (
        "stream-1",
        "fanout-5",
        "dispatch-rtt",
        "many-chats-5",
        "tokens-2",
        "short-turns-3",
        "reconnect",
        "memory",
    ):
        assert heading in report


def test_bridge_benchmark_produces_every_figure(tmp_path: Path) -> None:
    from bench.bridge import Sizes as BridgeSizes
    from bench.bridge import run as run_bridge

    out = tmp_path / "bridge.json"
    results = run_bridge(BridgeSizes(chunks=50, repeats=1, turns=5), out=out)
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(results))
    assert set(results["rows"]) == {"in-process", "acp-bridge", "acp-direct"}
    for row in results["rows"].values():
        for figure in ("us_per_chunk", "chunks_per_s", "turn_p50_ms", "turn_p99_ms"):
            assert positive(row[figure])
    assert set(results["bridge_added"]) == {"us_per_chunk", "turn_p50_ms", "turn_p99_ms"}


def test_model_benchmark_produces_every_figure(tmp_path: Path) -> None:
    from bench.model import Sizes as ModelSizes
    from bench.model import run as run_model

    out = tmp_path / "model.json"
    results = run_model(ModelSizes(tokens=50, repeats=1, turns=5), out=out)
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(results))
    assert set(results["rows"]) == {"direct", "through host"}
    for row in results["rows"].values():
        for figure in ("ttft_p50_ms", "ttft_p99_ms", "us_per_token", "tokens_per_s"):
            assert positive(row[figure])
    assert set(results["host_added"]) == {"ttft_p50_ms", "ttft_p99_ms", "us_per_token"}


def test_profile_subtracts_a_small_run_from_a_large_one(tmp_path: Path) -> None:
    from bench.profile import marginal, report

    rows = marginal("short-turns", persist=True, workdir=tmp_path, sizes=(1, 3))
    calls = {name: n for name, n, _, _ in rows}
    # Per extra turn: the turn runner started once, and the store committed something.
    # (A plain function: cProfile counts each resumption of a coroutine as a call, and
    # on a loaded machine the turnstile holds a turn's coroutine more often.)
    start = next(
        n for name, n in calls.items() if name.startswith("turns.py") and "(start)" in name
    )
    assert start == 1.0
    assert any(name.startswith("sqlite.py") and n > 0 for name, n in calls.items())
    assert sum(calls.values()) > 100
    assert calls["<file bytes written>"] > 0  # persistence on: the store wrote
    assert "marginal cost per turn" in report("short-turns", rows, True, 10)


def test_soak_holds_connections_with_churn_and_reports_every_figure() -> None:
    from bench.soak import format_report
    from bench.soak import run as run_soak

    result = run_soak(connections=12, seconds=2.0, chats=3, workers=4)
    assert result["churned"] > 0
    assert result["churned_abruptly"] > 0
    assert result["turns_streamed"] > 0
    assert result["deliveries_to_current_clients"] > 0
    for moment in ("start", "end"):
        sample = result[moment]
        assert sample["connections"] == 13  # the clients and the driver, nothing left over
        assert positive(sample["rss_kb"])
        assert positive(sample["fds"])
        assert positive(sample["tasks"])
    assert result["exceeded"] == []
    assert "bounds held" in format_report(result)


def test_cluster_benchmark_produces_every_figure(tmp_path: Path) -> None:
    from bench.cluster import QUICK, report, run_async
    from tests.cluster.helpers import nats_or_skip

    nats_or_skip()
    asyncio.run(_postgres_answers())  # skip (or fail under CI) when it does not
    results = asyncio.run(run_async(QUICK))
    for count in (1, 3):
        entry = results[f"nodes_{count}"]
        assert positive(entry["short_turns"]["turns_per_s"])
        assert positive(entry["fan_out"]["deliveries_per_s"])
        # CPU time counts in clock ticks (10 ms): a tiny run may use none of one.
        assert entry["short_turns"]["cpu_us_per_turn_all_nodes"] >= 0
        assert entry["fan_out"]["cpu_us_per_delivery_primary"] >= 0
    failover = results["nodes_3"]["failover"]
    assert positive(failover["lease_taken_after_s"])
    assert positive(failover["client_served_after_s"])
    assert failover["new_primary"]
    assert "failover" in report(results)


def test_scaleout_benchmark_spreads_chats_and_times_a_failover(tmp_path: Path) -> None:
    """The quick run of ``bench.scaleout`` on the real PostgreSQL and NATS: every word
    of every chat arrives once, in order, with 1 node and with 2 (each pinned to a
    core); both have a knee; after node 1's SIGKILL node 0 owns its sessions and
    serves one again, and node 0's own streams lose nothing."""
    from bench.scaleout import QUICK, format_report, run
    from tests.cluster.helpers import nats_or_skip

    nats_or_skip()
    asyncio.run(_postgres_answers())  # skip (or fail under CI) when it does not
    results = run(QUICK, tmp_path / "scaleout.json")
    for rows in results["capacity"]["rows"].values():
        for row in rows:
            assert row["words_received"] == row["words_expected"]
            assert row["in_order"]
    assert all(knee > 0 for knee in results["capacity"]["knees"].values())
    failover = results["failover"]
    assert failover["sessions_moved"] == QUICK.failover_chats
    assert positive(failover["taken_over_s"])
    assert positive(failover["served_again_s"])
    assert failover["survivors_whole"]
    assert "failover" in format_report(results)


def test_a_cpu_budget_holds_a_busy_process_to_its_share_of_a_core() -> None:
    """``bench/cgroup.py`` (``bench.scaleout --node-cpu``): a process spinning in a budget
    of 0.2 core gets at most that (and a tick of slack), and the group counts the time
    it was held back. Needs a writable cgroup cpu controller (root)."""
    import subprocess
    import uuid

    from bench import cgroup
    from bench.suite import cpu_seconds

    if not cgroup.available():
        pytest.skip("no writable cgroup cpu controller")
    budget = cgroup.CpuBudget(f"ahp-test-{uuid.uuid4().hex[:8]}", 0.2)
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        budget.add(spin.pid)
        before, started = cpu_seconds(spin.pid), time.monotonic()
        time.sleep(1.5)
        used = cpu_seconds(spin.pid) - before
        wall = time.monotonic() - started
        assert used <= 0.2 * wall + 0.05, (used, wall)
        assert budget.throttled_s() > 0
    finally:
        spin.kill()
        spin.wait()
        budget.close()
    assert not budget.path.exists()


async def _postgres_answers() -> None:
    from tests.postgres import postgres_schema

    async with postgres_schema():
        pass


# -- serverSeq across owners (bench/serverseq.py): the design's sequencing, measured -----------


def test_serverseq_benchmark_delivers_every_number_once_in_order() -> None:
    """The quick run on the real PostgreSQL and NATS: both mechanisms deliver every
    number once and in order at the consumer (the pg repair phase included, its gaps
    filled from the database), and the engine behaviours docs/scale-out.md relies on
    hold: a stale epoch is fenced, a rollback leaves no gap; JetStream's expected-last
    headers refuse a stale expectation and a repeated Msg-Id is a duplicate."""
    from bench.serverseq import QUICK, report, run_async
    from tests.cluster.helpers import nats_or_skip

    nats_or_skip()
    asyncio.run(_postgres_answers())  # skip (or fail under CI) when it does not
    results = asyncio.run(run_async(QUICK))
    pg, js = results["pg"], results["js"]
    for series, phases in (
        (pg, ("commit1_ceiling_1", "commit1_ceiling_3", "ceiling_1", "ceiling_3")),
        (js, ("ceiling_1", "ceiling_3")),
    ):
        for name in phases:
            assert positive(series[name]["delivered_in_order_per_s"]), name
        for name in (*phases, "light_3", "heavy_3", "half_ceiling_3"):
            entry = series[name]
            assert entry["out_of_order"] == 0, name
            assert entry["delivered"] == entry["committed"], name
        for name in ("light_3", "heavy_3"):
            latency = series[name]["latency_ms"]
            assert 0 < latency["to_consumer_p50"] <= latency["to_consumer_p99"], name
    # The counter is the number of envelopes committed: no gap, none delivered twice.
    assert pg["counter"] == pg["total_delivered_in_order"]
    assert pg["repair_3"]["repaired"] > 0
    assert pg["repair_3"]["delivered"] == pg["repair_3"]["committed"]
    assert pg["repair_3"]["out_of_order"] == 0
    assert all(pg["checks"].values()), pg["checks"]
    assert all(v for k, v in js["checks"].items() if not k.endswith("_error")), js["checks"]
    assert "pg checks" in report(results)


# -- capacity (bench/capacity.py): model-paced streams, host beside the floor ------------------


def test_capacity_measures_every_series_and_computes_the_knee(tmp_path: Path) -> None:
    from bench.capacity import SMOKE
    from bench.capacity import format_report as format_capacity
    from bench.capacity import run as run_capacity

    out = tmp_path / "capacity.json"
    results = run_capacity(SMOKE, out=out)
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(results))
    assert list(results["series"]) == ["floor-1", "memory-1"]
    for name, rows in results["series"].items():
        # no series stops at these sizes, unless the machine is far behind: then N=1 is there
        assert rows, name
        assert [r["n"] for r in rows] == list(SMOKE.ns)[: len(rows)], name
        for row in rows:
            # every word of every subscription came, once, in order
            assert row["words_received"] == row["words_expected"] == row["n"] * SMOKE.words
            assert row["in_order"] is True
            for figure in ("rss_mb", "deltas_per_s", "seconds"):
                assert positive(row[figure]), (name, figure)
            # lateness is counted from each stream's own word 0: when word 0 came late the
            # rest come "early", so p50 and p99 may be zero or below; p99* is anchored
            assert math.isfinite(row["p50_ms"]), name
            assert math.isfinite(row["p99_ms"]), name
            assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
            assert row["p99_anchored_ms"] >= 0
            for figure in ("server_cpu_pct", "runqueue_wait_ms_per_s", "generator_cpu_pct"):
                assert math.isfinite(row[figure]), (name, figure)
                assert row[figure] >= 0, (name, figure)
            if name.startswith("memory"):  # the host's loop-lag ticker was read from /metrics
                lag = row["loop_lag_ms"]
                assert all(math.isfinite(lag[k]) for k in ("p50", "p99", "max"))
                assert all(lag[k] >= 0 for k in ("p50", "p99", "max"))
                # the steady part of the window is within the whole of it
                assert not lag["steady_max"] > lag["max"]
                # the loop's own share (less its waits for a CPU) is within the lag itself
                assert math.isfinite(lag["own_max"])
                assert 0 <= lag["own_max"] <= lag["max"]
                assert not lag["own_steady_max"] > lag["own_max"]
                # collections between the scrapes, per generation, read from /metrics too
                assert [g["count"] >= 0 for g in row["gc_pause_ms"]] == [True] * 3
    knees = results["knees"]
    assert set(knees) == {"floor-1", "memory-1"}
    assert knees["floor-1"]["knee"] in (0, *SMOKE.ns)
    host = knees["memory-1"]
    assert host["knee"] in (0, *SMOKE.ns)
    assert host["floor"] == "floor-1"
    assert host["floor_knee"] == knees["floor-1"]["knee"]
    if host["floor_knee"]:
        assert host["ratio"] == host["knee"] / host["floor_knee"]
    assert math.isfinite(host["max_loop_stall_ms"])
    assert not host["max_own_stall_ms_at_half_knee"] > host["max_loop_stall_ms_at_half_knee"]
    report = format_capacity(results)
    for text in ("knee", "memory-1", "floor-1"):
        assert text in report
    # the capacity curve (bench/plot.py) is drawn from this run's JSON: a line per series,
    # a point per N measured
    from xml.etree import ElementTree

    from bench.plot import capacity_svg

    lines = ElementTree.fromstring(capacity_svg(results)).findall(
        "{http://www.w3.org/2000/svg}polyline"
    )
    assert [len(line.attrib["points"].split()) for line in lines] == [
        len(rows) for rows in results["series"].values()
    ]


def test_capacity_rounds_keep_the_median_round_and_every_rounds_words() -> None:
    from bench.capacity import median_round

    def row(p99: float, received: int = 10, in_order: bool = True) -> dict[str, object]:
        return {
            "p99_ms": p99,
            "words_received": received,
            "words_expected": 10,
            "in_order": in_order,
            "cpu": p99 * 2,
        }

    once = row(5.0)
    assert median_round([once]) is once  # one round: the row itself, no "rounds"
    rounds = [row(300.0), row(20.0, received=9), row(40.0)]
    median = median_round(rounds)
    assert median["p99_ms"] == 40.0
    assert median["cpu"] == 80.0  # every figure from that one round
    assert median["rounds"] == rounds
    assert median["words_received"] == 9  # a round that lost a word: not delivered
    assert median_round([row(50.0), row(float("nan")), row(10.0)])["p99_ms"] == 50.0
    assert median_round([row(7.0), row(3.0, in_order=False)])["in_order"] is False
    assert median_round([row(7.0), row(3.0)])["p99_ms"] == 3.0  # the lower middle


def test_capacity_refuses_fewer_than_one_round(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.capacity import main as capacity_main

    with pytest.raises(SystemExit) as exited:
        capacity_main(["--smoke", "--repeat", "0"])
    assert exited.value.code == 2
    assert "--repeat: at least 1, not 0" in capsys.readouterr().err


def test_capacity_repeats_each_n_in_interleaved_rounds() -> None:
    import dataclasses

    from bench.capacity import SMOKE
    from bench.capacity import format_report as format_capacity
    from bench.capacity import run as run_capacity

    results = run_capacity(dataclasses.replace(SMOKE, ns=(1,), repeat=3))
    for name, rows in results["series"].items():
        (row,) = rows
        p99s = sorted(r["p99_ms"] for r in row["rounds"])
        assert len(p99s) == 3, name
        assert row["p99_ms"] == p99s[1], name
        assert all(r["words_received"] == r["words_expected"] for r in row["rounds"])
    lags = [r["loop_lag_ms"]["max"] for r in results["series"]["memory-1"][0]["rounds"]]
    assert results["knees"]["memory-1"]["max_loop_stall_ms"] == max(lags)
    assert "p99 by round" in format_capacity(results)

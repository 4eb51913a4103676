"""Event-loop lag (host/core/looplag.py): recorded into buckets, a real stall of a
running host's loop shows in its ``/metrics``, and a thread that waited for a CPU is
told apart from a loop that was held."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from ahp_server.client import AhpClient
from ahp_server.host.core.looplag import BUCKETS, PERIOD, LoopLag, RunQueueWait
from ahp_server.host.metrics import render
from tests.conftest import RunningHost


def test_lateness_goes_into_cumulative_buckets_with_its_sum_and_maximum() -> None:
    lag = LoopLag()
    for late in (0.0, 0.0004, 0.003, 0.003, 0.07, 3.0, -0.001):
        lag.record(late)
    cumulative = dict(lag.cumulative())
    assert list(cumulative) == [*map(str, BUCKETS), "+Inf"]
    assert cumulative["0.001"] == 3  # 0, 0.0004 and a negative lateness (counted as 0)
    assert cumulative["0.005"] == 5
    assert cumulative["0.05"] == 5
    assert cumulative["0.1"] == 6
    assert cumulative["2.5"] == 6
    assert cumulative["+Inf"] == lag.count == 7
    assert lag.max == 3.0
    assert abs(lag.sum - 3.0764) < 1e-9


def test_a_tick_records_the_lateness_and_the_loops_own_share_without_the_cpu_wait() -> None:
    lag = LoopLag()
    lag.tick(0.030, 0.025)  # 30 ms late, 25 of them waiting for a CPU: 5 ms the loop's own
    lag.tick(0.060, 0.0)  # held 60 ms (a blocking call): all of it the loop's own
    lag.tick(0.002, 0.004)  # the wait came before the tick was due: none its own
    lag.tick(0.040, None)  # no wait known: the lateness only
    assert lag.count == 4
    assert lag.max == 0.060
    assert lag.own.count == 3
    assert lag.own.max == 0.060
    assert abs(lag.own.sum - 0.065) < 1e-9
    assert abs(lag.cpu_wait - 0.029) < 1e-9
    assert dict(lag.own.cumulative())["0.005"] == 2  # the 5 ms and the 0 (clamped)


async def test_a_stalled_loop_shows_in_the_metrics(running_host: RunningHost) -> None:
    """The loop blocked for 150 ms (as a long commit would): the ticker, due within
    PERIOD, wakes at least 150 - PERIOD ms late, and /metrics says so."""
    async with AhpClient.connect(running_host.url) as client:
        await client.open_chat()  # the host's loop has run a while
        time.sleep(0.15)  # noqa: ASYNC251 - the stall under test
        await client.open_chat()  # the loop runs again: the ticker has woken
    text = render(running_host.host)
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("ahp_event_loop_")
    }
    assert values["ahp_event_loop_lag_max_seconds"] >= 0.15 - PERIOD
    assert (
        values['ahp_event_loop_lag_seconds_bucket{le="+Inf"}']
        == values["ahp_event_loop_lag_seconds_count"]
    )
    assert (
        values['ahp_event_loop_lag_seconds_bucket{le="0.1"}']
        < values['ahp_event_loop_lag_seconds_bucket{le="+Inf"}']
    )
    assert values["ahp_event_loop_lag_seconds_sum"] >= 0.15 - PERIOD
    if running_host.host.loop_lag.measures_cpu_wait:  # Linux
        # A blocking call is not a wait for a CPU: the stall is the loop's own (the
        # thread may still have waited a little for a core once the call returned).
        assert values["ahp_event_loop_stall_max_seconds"] >= 0.1
        assert (
            values['ahp_event_loop_stall_seconds_bucket{le="0.1"}']
            < values['ahp_event_loop_stall_seconds_bucket{le="+Inf"}']
            == values["ahp_event_loop_stall_seconds_count"]
            == values["ahp_event_loop_lag_seconds_count"]
        )
        assert (
            values["ahp_event_loop_stall_max_seconds"] <= values["ahp_event_loop_lag_max_seconds"]
        )
        assert values["ahp_event_loop_cpu_wait_seconds_total"] >= 0


#: A loop with nothing to do whose thread shares one CPU with a busy process at a
#: higher priority: the ticker is late because the thread waits for the CPU.
_CROWDED = textwrap.dedent(
    """
    import asyncio, json, os, subprocess, sys
    from ahp_server.host.core.looplag import LoopLag

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # same CPU, nice 0
    os.nice(19)  # this thread only (Linux): it yields the CPU to the hog


    async def main():
        lag = LoopLag()
        ticker = asyncio.create_task(lag.run())
        await asyncio.sleep(1.0)
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
        return lag


    try:
        lag = asyncio.run(main())
    finally:
        hog.kill()
        hog.wait()
    print(json.dumps({
        "measures": lag.measures_cpu_wait, "ticks": lag.count, "cpu_wait": lag.cpu_wait,
        "lag_sum": lag.sum, "lag_max": lag.max, "own_sum": lag.own.sum, "own_max": lag.own.max,
    }))
    """
)


@pytest.mark.skipif(RunQueueWait.open() is None, reason="the kernel does not tell run-queue waits")
def test_a_thread_waiting_for_a_cpu_is_lag_but_not_the_loops_own_stall() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CROWDED],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    figures = json.loads(result.stdout)
    assert figures["measures"] is True
    assert figures["ticks"] >= 5
    # the thread waited for the CPU, and the ticker was late by (at least) that much
    assert figures["cpu_wait"] >= 0.05
    assert figures["lag_sum"] >= figures["cpu_wait"] * 0.9
    # none of it is counted as the loop's own: it had nothing to do
    assert figures["lag_sum"] - figures["own_sum"] >= figures["cpu_wait"] * 0.5
    assert figures["own_max"] <= figures["lag_max"]


async def test_a_garbage_collection_on_the_loop_shows_in_the_metrics_by_generation(
    running_host: RunningHost,
) -> None:
    """A full collection of many cycles, run on the loop, is timed as generation 2
    and counted once more; the younger generations' counts are their own."""

    def values() -> dict[str, float]:
        text = render(running_host.host)
        return {
            line.split()[0]: float(line.split()[1])
            for line in text.splitlines()
            if line.startswith("ahp_gc_pause")
        }

    async with AhpClient.connect(running_host.url) as client:
        await client.open_chat()  # the ticker (and its gc callback) runs
        before = values()
        cycles = []
        for _ in range(200_000):
            a: list[object] = []
            a.append(a)
            cycles.append(a)
        del cycles, a
        started = time.perf_counter()
        gc.collect(2)
        took = time.perf_counter() - started
        after = values()
    count = 'ahp_gc_pause_seconds_count{generation="2"}'
    total = 'ahp_gc_pause_seconds_sum{generation="2"}'
    assert after[count] >= before[count] + 1
    # Nearly all of gc.collect's wall time is the collection the callback timed.
    assert after[total] - before[total] >= 0.5 * took
    assert after['ahp_gc_pause_max_seconds{generation="2"}'] >= 0.5 * took
    assert after['ahp_gc_pause_seconds_bucket{generation="2",le="+Inf"}'] == after[count]

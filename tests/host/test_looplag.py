"""Event-loop lag (host/core/looplag.py): recorded into buckets, and a real stall of a
running host's loop shows in its ``/metrics``."""

from __future__ import annotations

import gc
import time

from ahp_server.client import AhpClient
from ahp_server.host.core.looplag import BUCKETS, PERIOD, LoopLag
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
        if line.startswith("ahp_event_loop_lag")
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

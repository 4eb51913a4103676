"""Event-loop lag, and the collector's pauses: what keeps the host's loop from running.

Layer: host, at the bottom (asyncio and ``gc``, no other host module). One
task sleeps :data:`PERIOD` at a time and records how much later than asked it
woke: the time the loop was busy with something else. A stall anywhere on the
loop — a long commit, a fold, a large encode, a garbage collection — shows up
there, whoever caused it. While it runs, a ``gc`` callback times every
collection by generation, so ``/metrics`` can tell a collector's pause from
the host's own work. Recording is an increment and a comparison; scraping
reads the numbers.
"""

from __future__ import annotations

import asyncio
import bisect
import gc
import time
from typing import Any

__all__ = ["BUCKETS", "PERIOD", "Durations", "GcPauses", "LoopLag"]

#: How long the ticker sleeps each time (seconds): about 100 wake-ups a second.
PERIOD = 0.01
#: Histogram bucket bounds (seconds), Prometheus ``le`` labels.
BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Durations:
    """A histogram of durations (seconds) over :data:`BUCKETS`, its sum and the maximum."""

    __slots__ = ("counts", "max", "sum")

    def __init__(self) -> None:
        #: Per bucket (and one past the last), how many durations fell there.
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0
        self.max = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def record(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds
        if seconds > self.max:
            self.max = seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count)`` for each bucket bound and ``+Inf``, counts cumulative."""
        out, total = [], 0
        for bound, count in zip((*map(str, BUCKETS), "+Inf"), self.counts, strict=True):
            total += count
            out.append((bound, total))
        return out


class GcPauses:
    """How long each garbage collection took, per generation (0, 1, 2).

    Collections run on whichever thread allocates; on the loop's thread (nearly
    all of them in the host) a pause is a stall of the loop.
    """

    __slots__ = ("_started", "generations")

    def __init__(self) -> None:
        self.generations = (Durations(), Durations(), Durations())
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started:
            self.generations[int(info["generation"]) % 3].record(
                time.perf_counter() - self._started
            )
            self._started = 0.0


class LoopLag(Durations):
    """Lateness of a ticker on the event loop, and the collector's pauses meanwhile."""

    __slots__ = ("gc",)

    def __init__(self) -> None:
        super().__init__()
        self.gc = GcPauses()

    async def run(self) -> None:
        """Tick until cancelled (the host runs it as a background task)."""
        loop = asyncio.get_running_loop()
        gc.callbacks.append(self.gc)
        try:
            while True:
                due = loop.time() + PERIOD
                await asyncio.sleep(PERIOD)
                self.record(loop.time() - due)
        finally:
            gc.callbacks.remove(self.gc)

"""Event-loop lag: how late the host's event loop runs what is due (``/metrics``).

Layer: host, at the bottom (asyncio, no other host module). One task sleeps
:data:`PERIOD` at a time and records how much later than asked it woke: the
time the loop was busy with something else. A stall anywhere on the loop — a
long commit, a fold, a large encode — shows up here, whoever caused it.
Recording is an increment and a comparison; scraping reads the numbers.
"""

from __future__ import annotations

import asyncio
import bisect

__all__ = ["BUCKETS", "PERIOD", "LoopLag"]

#: How long the ticker sleeps each time (seconds): about 100 wake-ups a second.
PERIOD = 0.01
#: Histogram bucket bounds (seconds), Prometheus ``le`` labels.
BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class LoopLag:
    """Lateness of a ticker on the event loop: a histogram, its sum and the maximum."""

    __slots__ = ("counts", "max", "sum")

    def __init__(self) -> None:
        #: Per bucket (and one past the last), how many wake-ups were that late.
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0
        self.max = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def record(self, late: float) -> None:
        late = max(late, 0.0)
        self.counts[bisect.bisect_left(BUCKETS, late)] += 1
        self.sum += late
        if late > self.max:
            self.max = late

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count)`` for each bucket bound and ``+Inf``, counts cumulative."""
        out, total = [], 0
        for bound, count in zip((*map(str, BUCKETS), "+Inf"), self.counts, strict=True):
            total += count
            out.append((bound, total))
        return out

    async def run(self) -> None:
        """Tick until cancelled (the host runs it as a background task)."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + PERIOD
            await asyncio.sleep(PERIOD)
            self.record(loop.time() - due)

"""Event-loop lag, and the collector's pauses: what keeps the host's loop from running.

Layer: host, at the bottom (asyncio, ``gc`` and ``/proc``, no other host module).
One task sleeps :data:`PERIOD` at a time and records how much later than asked
it woke: the time the loop was busy with something else. A stall anywhere on
the loop — a long commit, a fold, a large encode, a garbage collection — shows
up there, whoever caused it. So does a loop that had nothing to do but whose
thread waited for a CPU (a machine whose cores other processes keep busy): on
Linux the ticker also reads how long its thread waited on a run queue meanwhile
(``/proc/thread-self/schedstat``) and records the lateness less that wait — the
loop's *own* stall, what the host did or blocked on — beside the lateness itself
(docs/deploy.md "Event-loop lag"). While it runs, a ``gc`` callback times every
collection by generation, so ``/metrics`` can tell a collector's pause from
the host's own work. Recording is an increment and a comparison; scraping
reads the numbers.
"""

from __future__ import annotations

import asyncio
import bisect
import gc
import os
import time
from typing import Any

__all__ = ["BUCKETS", "PERIOD", "Durations", "GcPauses", "LoopLag", "RunQueueWait"]

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


class RunQueueWait:
    """How long the calling thread has waited on a run queue, runnable but not running.

    Reads ``/proc/thread-self/schedstat`` (its second field, nanoseconds) through one
    descriptor opened on the thread it measures: a ``pread``, under a microsecond.
    :meth:`open` returns ``None`` where the kernel does not say (no ``/proc``, or a
    kernel built without scheduler statistics).
    """

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls) -> RunQueueWait | None:
        """The calling thread's clock, or ``None`` where there is none."""
        try:
            fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        clock = cls(fd)
        try:
            clock.seconds()
        except (OSError, ValueError, IndexError):
            clock.close()
            return None
        return clock

    def seconds(self) -> float:
        """The thread's run-queue wait so far."""
        return int(os.pread(self._fd, 64, 0).split()[1]) / 1e9

    def close(self) -> None:
        os.close(self._fd)


class LoopLag(Durations):
    """Lateness of a ticker on the event loop, the loop's own share of it (:attr:`own`),
    and the collector's pauses meanwhile."""

    __slots__ = ("cpu_wait", "gc", "measures_cpu_wait", "own")

    def __init__(self) -> None:
        super().__init__()
        self.gc = GcPauses()
        #: Each tick's lateness less the time the loop's thread waited meanwhile for a
        #: CPU: what held the loop itself (its own work, a blocking call, a collection,
        #: the GIL held by another of the host's threads). A lower bound — a wait for a
        #: CPU before the tick was due is taken off too — where the lateness is the
        #: upper. Recorded only where :attr:`measures_cpu_wait`.
        self.own = Durations()
        #: Seconds the loop's thread, runnable, waited for a CPU while the ticker ran.
        self.cpu_wait = 0.0
        #: Whether this kernel tells the wait (:class:`RunQueueWait`); set by :meth:`run`.
        self.measures_cpu_wait = False

    def tick(self, late: float, waited: float | None) -> None:
        """One tick: ``late`` seconds after it was due, its thread having waited
        ``waited`` seconds for a CPU since it went to sleep (``None``: not known)."""
        self.record(late)
        if waited is not None:
            self.cpu_wait += waited
            self.own.record(late - waited)

    async def run(self) -> None:
        """Tick until cancelled (the host runs it as a background task)."""
        loop = asyncio.get_running_loop()
        clock = RunQueueWait.open()  # here: on the loop's thread
        self.measures_cpu_wait = clock is not None
        gc.callbacks.append(self.gc)
        try:
            while True:
                due = loop.time() + PERIOD
                before = clock.seconds() if clock is not None else 0.0
                await asyncio.sleep(PERIOD)
                waited = clock.seconds() - before if clock is not None else None
                self.tick(loop.time() - due, waited)
        finally:
            gc.callbacks.remove(self.gc)
            if clock is not None:
                clock.close()

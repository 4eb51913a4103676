"""A turnstile: a burst of ready work spread over turns of the event loop.

Layer: host core (asyncio only). The host keeps one (``Host.turnstile``); the turn
runners pass it before each action an agent emits, and the WebSocket transport
before each frame a client sent (docs/performance.md "Capacity").

asyncio runs, in one turn of its loop, every callback that was ready when the
turn began. When many tasks wake together — N chats' words due at the same
instant, N clients' requests read in one poll — their work runs back to back,
and everything else the loop serves (a timer, another socket's read, a ping)
waits behind all of it: a stall of N times one task's work.

A task passes the turnstile before each piece of such work. The first passage
in a turn of the loop opens a *slice*; while less than ``seconds`` have
passed since, every task goes on at once (the check costs a clock read). Past
it, a task yields to the next turn of the loop, where a new slice opens, and
tries again. The work is the same; it runs in slices, with I/O and timers
between them.

Order: a task's own work keeps its order (it waits where it is). Tasks that
yield in one turn resume in the order they yielded (``call_soon`` is FIFO),
ahead of what becomes ready in the next turn's poll and timers, so a task that
was held is not passed by newer work for long.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["SLICE", "Turnstile"]

#: Seconds of work per turn of the loop before tasks passing the turnstile yield.
SLICE = 0.004


class Turnstile:
    """See the module docstring. ``clock``: seconds, monotonic (injected in tests)."""

    __slots__ = ("_clock", "_opened", "held", "seconds")

    def __init__(self, seconds: float = SLICE, clock: Callable[[], float] = time.perf_counter):
        self.seconds = seconds
        self._clock = clock
        #: When the current turn's slice opened (``None``: none opened in this turn yet).
        self._opened: float | None = None
        #: How many times a task was held (yielded to a later turn): for the metrics.
        self.held = 0

    def closed(self) -> bool:
        """Whether this turn's slice is spent: then ``await wait()`` before the work."""
        opened = self._opened
        if opened is None:
            self._opened = self._clock()
            # Runs first in the next turn (queued before anything held in this one).
            asyncio.get_running_loop().call_soon(self._reopen)
            return False
        return self._clock() - opened > self.seconds

    async def wait(self) -> None:
        """Yield to later turns of the loop until one's slice has room."""
        while True:
            self.held += 1
            await asyncio.sleep(0)
            if not self.closed():
                return

    def _reopen(self) -> None:
        self._opened = None

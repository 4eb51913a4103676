"""Delivering a numbered feed in number order, once each, and finding what it lost: pure, no I/O.

Layer: transport (a leaf, like ``relay_format.py``: numbers and items in,
numbers and items out; the clock is passed in). docs/scale-out.md,
"Sharded mode (design)", "One ``serverSeq``: the commit counter".

In sharded mode every owner commits its batches under one counter, so the
committed log holds every ``serverSeq`` from 1 up, without gaps, and commit
order is number order. Owners then publish each committed batch on the feed
(core NATS: a record may be lost, and records of different owners
arrive in any order). Every node must deliver to its clients **every number once, in
order, never skipping one**. :class:`FeedOrder` decides what to deliver and
what to read back from the log; the caller does the reading and the timing.

The state of each number ``n`` (a state table, as in h11):

=============  ==========================================  ==========================
state          meaning                                     leaves by
=============  ==========================================  ==========================
delivered      ``n < next``                                —
held           received, ``n >= next``, waiting for a      delivery, when every number
               lower number                                below it is delivered
missing        ``next <= n <= horizon``, not held: known   a record or a repair
               committed (a higher number was seen, or     bringing it (held or
               the counter says so), not received          delivered)
requested      missing, and its range was handed out as    the same; a request not
               a repair at ``requested_at``                answered within ``retry``
                                                           is handed out again
unknown        ``n > horizon``                             a record or a counter
                                                           reading at or above it
=============  ==========================================  ==========================

A missing number is handed out for repair once it has been missing for
``grace`` seconds (a record late on the bus usually comes within it): the
caller reads that range from the log and gives the items to
:meth:`FeedOrder.receive` like any record. Only numbers within ``window``
of ``next`` are held or repaired: memory stays bounded whatever the gap, and
what lies beyond is read again once delivery gets there (it is committed,
so it is still in the log). :meth:`FeedOrder.stalled` says how long delivery
has been blocked without progress, for the caller's give-up bound
(``cluster.feed_stall``: close clients with 1012 rather than skip a number).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["FeedOrder", "Gap"]

T = TypeVar("T")


@dataclasses.dataclass(slots=True)
class Gap:
    """Numbers ``lo..hi`` (inclusive) known committed and not received."""

    lo: int
    hi: int
    #: When they were first known missing.
    since: float
    #: When their range was last handed out as a repair (``None``: never).
    requested_at: float | None = None


class FeedOrder(Generic[T]):
    """The next number to deliver, the items held above it, and the gaps between.

    ``receive(first, items, now)`` takes a record (or a repair's answer):
    ``items[i]`` is number ``first + i``. It returns what can now be
    delivered, in number order, each number once: ``[(n, item), …]``.
    """

    def __init__(
        self,
        next_seq: int,
        *,
        grace: float,
        retry: float,
        window: int,
        now: float,
    ) -> None:
        if next_seq < 1 or grace < 0 or retry <= 0 or window < 1:
            raise ValueError("next_seq ≥ 1, grace ≥ 0, retry > 0 and window ≥ 1")
        self.next = next_seq
        #: The highest number known committed (``next - 1``: nothing known beyond).
        self.horizon = next_seq - 1
        self.grace = grace
        self.retry = retry
        self.window = window
        self._held: dict[int, T] = {}
        #: Missing ranges, sorted, disjoint, each within ``next..horizon``.
        self._gaps: list[Gap] = []
        #: When delivery last moved, or became blocked.
        self._progress_at = now

    # -- what comes in -------------------------------------------------------------------------

    def receive(self, first: int, items: Sequence[T], now: float) -> list[tuple[int, T]]:
        """A record or a repair's answer: numbers ``first..first+len(items)-1``.

        Numbers already delivered or held are dropped (a repair may overlap a
        late record); numbers beyond the window stay missing.
        """
        if not items:
            return []
        last = first + len(items) - 1
        self._know(last, now)
        lo = max(first, self.next)
        hi = min(last, self.next + self.window - 1)
        if lo > hi:
            return []
        self._cover(lo, hi)
        held = self._held
        for n in range(lo, hi + 1):
            held.setdefault(n, items[n - first])
        return self._deliver(now)

    def counter(self, value: int, now: float) -> None:
        """The commit counter read ``value``: every number up to it is committed."""
        self._know(value, now)

    # -- what goes out -------------------------------------------------------------------------

    def repairs(self, now: float) -> list[tuple[int, int]]:
        """Ranges ``(lo, hi)`` to read from the log now (each marked requested).

        A range is due once it has been missing for ``grace``, and again
        ``retry`` after it was last handed out; only numbers within
        ``window`` of ``next`` are handed out.
        """
        limit = self.next + self.window - 1
        due: list[tuple[int, int]] = []
        gaps = self._gaps
        for index, gap in enumerate(gaps):
            if gap.lo > limit:
                break
            if gap.since + self.grace > now:
                continue
            if gap.requested_at is not None and gap.requested_at + self.retry > now:
                continue
            if gap.hi > limit:
                # Only the part within the window is asked for: the rest is not
                # requested yet, and is due as soon as delivery reaches it.
                gaps.insert(index + 1, Gap(limit + 1, gap.hi, gap.since, gap.requested_at))
                gap.hi = limit
            gap.requested_at = now
            due.append((gap.lo, gap.hi))
        return due

    def deadline(self) -> float | None:
        """When :meth:`repairs` will next hand something out (``None``: nothing missing)."""
        limit = self.next + self.window - 1
        times = [
            gap.since + self.grace if gap.requested_at is None else gap.requested_at + self.retry
            for gap in self._gaps
            if gap.lo <= limit
        ]
        return min(times) if times else None

    def stalled(self, now: float) -> float:
        """Seconds delivery has been blocked on a missing number without moving (0: it is not)."""
        if self.horizon < self.next:
            return 0.0
        return now - self._progress_at

    @property
    def held(self) -> int:
        """Items waiting for a lower number."""
        return len(self._held)

    @property
    def gaps(self) -> list[tuple[int, int]]:
        """The missing ranges, lowest first."""
        return [(gap.lo, gap.hi) for gap in self._gaps]

    # -- inside ----------------------------------------------------------------------------------

    def _know(self, value: int, now: float) -> None:
        """Numbers up to ``value`` are committed: those above the horizon become missing."""
        if value <= self.horizon:
            return
        if self.horizon < self.next:
            self._progress_at = now  # blocked from now on, until delivery moves
        # Above every gap and held number: appended, the list stays sorted.
        self._gaps.append(Gap(self.horizon + 1, value, now))
        self.horizon = value

    def _cover(self, lo: int, hi: int) -> None:
        """``lo..hi`` arrived: cut it out of the gaps (a partly answered gap keeps its times)."""
        kept: list[Gap] = []
        for gap in self._gaps:
            if gap.hi < lo or gap.lo > hi:
                kept.append(gap)
                continue
            if gap.lo < lo:
                kept.append(Gap(gap.lo, lo - 1, gap.since, gap.requested_at))
            if gap.hi > hi:
                kept.append(Gap(hi + 1, gap.hi, gap.since, gap.requested_at))
        self._gaps = kept

    def _deliver(self, now: float) -> list[tuple[int, T]]:
        held = self._held
        out: list[tuple[int, T]] = []
        n = self.next
        while n in held:
            out.append((n, held.pop(n)))
            n += 1
        if out:
            self.next = n
            self._progress_at = now
        return out

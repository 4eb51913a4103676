"""What every group-committing store shares: log segments and the commit ledger.

Layer: store (asyncio on the event loop; no database driver). The SQLite store
(``sqlite.py``) and the PostgreSQL store (``postgres.py``) queue writes on the
loop and commit them in batches; both keep

* the action log in *segments*: a run of one channel's envelopes from one
  commit as one row, ``[[serverSeq, clock ms, envelope], …]``
  (:func:`segments`, :data:`SEGMENT`);
* the same ledger (:class:`GroupCommit`): how many writes were queued and how
  many committed, who waits in :meth:`~GroupCommit.flush` for which, when
  producers must wait for room (above :data:`HIGH_WATER` queued, until below
  :data:`LOW_WATER`), delivery of committed envelopes in order, and what a
  failed commit does to those waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from ahp_server.store.base import Store, StoreError

__all__ = [
    "DELIVERY_SLICE",
    "HIGH_WATER",
    "LOW_WATER",
    "SEGMENT",
    "Callback",
    "GroupCommit",
    "Row",
    "merge_segments",
    "segments",
]

log = structlog.get_logger(__name__)

#: Producers wait (``wait_for_room``) once this many writes are queued ...
HIGH_WATER = 50_000
#: ... until fewer than this many are.
LOW_WATER = 10_000

#: Delivery of committed batches runs at most about this long (seconds) in one
#: turn of the event loop (:meth:`GroupCommit._committed_batch`).
DELIVERY_SLICE = 0.004

#: An envelope row: (serverSeq, channel, clock ms, envelope JSON).
Row = tuple[int, str, float, bytes]
#: A callback to run on the loop once committed, and its arguments.
Callback = tuple[Callable[..., None], tuple[object, ...]]

#: A stored segment: its entries as (serverSeq, clock ms, envelope JSON).
SEGMENT = msgspec.json.Decoder(list[tuple[int, float, msgspec.Raw]])
_ENTRIES = msgspec.json.Encoder()


def segments(rows: list[Row]) -> list[tuple[str, int, int, bytes]]:
    """Envelope rows (in ``serverSeq`` order) as one log segment per channel.

    One row per channel per commit instead of one per envelope: far less
    database work, and fewer trips through the driver. Each segment is the JSON
    array of its ``[serverSeq, clock ms, envelope]`` entries (:data:`SEGMENT`),
    encoded in one call: a batch held back behind a transaction (thousands of
    rows) costs the loop about a microsecond a row.
    """
    by_channel: dict[str, list[tuple[int, float, msgspec.Raw]]] = {}
    for seq, channel, at_ms, envelope in rows:
        entries = by_channel.get(channel)
        if entries is None:
            entries = by_channel[channel] = []
        entries.append((seq, at_ms, msgspec.Raw(envelope)))
    encode = _ENTRIES.encode
    return [
        (channel, entries[0][0], entries[-1][0], encode(entries))
        for channel, entries in by_channel.items()
    ]


#: A merged log row holds at most about this many bytes of entries (:func:`merge_segments`).
MERGED_SEGMENT_BYTES = 64 * 1024


def merge_segments(
    runs: list[tuple[str, int, int, bytes]], max_bytes: int = MERGED_SEGMENT_BYTES
) -> list[tuple[str, int, int, bytes]]:
    """Many commits' segments as few rows: each channel's consecutive segments
    joined into one, up to about ``max_bytes`` of entries a row, in order of
    their first ``serverSeq``.

    ``runs`` are in commit order (so each channel's are in ``serverSeq``
    order). N chats streaming at once commit a word or two of each per commit;
    a fold of the SQLite store's tail (one transaction for many commits) would
    insert a row per chat per commit — thousands of B-tree and index entries
    for a megabyte. Joined, a fold inserts about one row per chat. A row's
    entries stay what they were, in order; a reader decodes a joined row like
    any other (:data:`SEGMENT`), and a snapshot's deletion (``last_seq`` at or
    below its number) keeps a joined row until all of it is covered.
    """
    if len(runs) < 2:
        return runs
    rows: list[_Joined] = []
    filling: dict[str, _Joined] = {}  # each channel's row being filled
    for channel, first, last, entries in runs:
        if len(entries) <= 2:  # an empty array: nothing to keep
            continue
        row = filling.get(channel)
        if (
            row is not None
            and first > row.last  # in order (a number twice is left to the table to refuse)
            and row.size + len(entries) <= max_bytes
        ):
            row.last = last
            row.size += len(entries)
            row.parts.append(memoryview(entries)[1:-1])
            continue
        row = filling[channel] = _Joined(channel, first, last, len(entries), [])
        row.parts.append(memoryview(entries)[1:-1])
        rows.append(row)
    joined = [(r.channel, r.first, r.last, b"[" + b",".join(r.parts) + b"]") for r in rows]
    joined.sort(key=lambda row: row[1])
    return joined


@dataclass(slots=True)
class _Joined:
    """A log row :func:`merge_segments` is filling: its entries' arrays without brackets."""

    channel: str
    first: int
    last: int
    size: int
    parts: list[memoryview]


class GroupCommit(Store):
    """The ledger of a store that commits queued writes in batches (a mixin).

    The store counts ``_queued`` as it queues (and clears ``_room`` above
    :data:`HIGH_WATER`); after each commit it calls :meth:`_committed_batch`
    on the loop, after a failed one it sets ``_failure`` and calls
    :meth:`_failed`. :meth:`_describe` names the store in error messages
    (never with a password).
    """

    _queued: int
    _committed: int
    _room: asyncio.Event
    _flushes: list[tuple[int, asyncio.Future[None]]]
    #: Committed batches whose callbacks have not all run, and their last write.
    _deliveries: deque[tuple[deque[Callback], int]]
    _draining: bool = False
    _drain_scheduled: bool = False

    def _describe(self) -> str:
        raise NotImplementedError

    def _enqueue(
        self, write: Any, row: Row | None = None, on_commit: Callback | None = None
    ) -> None:
        raise NotImplementedError

    def commit_soon(self) -> None:
        raise NotImplementedError

    def after_queued(self, callback: Callable[..., None], *args: object) -> None:
        """``Store.after_queued``: at once if nothing waits for a commit, else queued.

        Queued as an entry with neither a write nor a row: the commit that
        takes it writes nothing for it, and runs the callback where it stands
        among the others. Someone waits for it (a client, for its echo), so
        the commit is not held back for the window.
        """
        if self._queued == self._committed:
            callback(*args)
            return
        self._enqueue(None, None, (callback, args))
        self.commit_soon()

    def _committed_batch(self, callbacks: list[Callback], last: int) -> None:
        """On the loop: deliver what was committed, in order; wake who waited for it.

        In slices of :data:`DELIVERY_SLICE` seconds, one per turn of the loop, the
        batches in commit order: a batch of N streams' words (or N turns that start
        or end together) delivered in one callback held the loop for tens of ms,
        and every other task, timer and socket waited (docs/performance.md
        "Capacity"). A commit made meanwhile is delivered after what is still
        pending; its writes count as committed (:meth:`flush`, ``after_queued``)
        once its callbacks have run.
        """
        self._deliveries.append((deque(callbacks), last))
        if not self._draining and not self._drain_scheduled:
            self._drain()

    def _drain(self) -> None:
        """Run pending deliveries until the slice is spent; the rest in the loop's next turn."""
        self._drain_scheduled = False
        self._draining = True
        deadline = time.perf_counter() + DELIVERY_SLICE
        deliveries = self._deliveries
        try:
            while deliveries:
                callbacks, last = deliveries[0]
                while callbacks:
                    callback, args = callbacks.popleft()
                    try:
                        callback(*args)
                    except Exception:  # a delivery's bug must not stall every later one
                        name = getattr(callback, "__qualname__", "?")
                        log.exception("delivery failed", callback=name)
                    if callbacks and time.perf_counter() >= deadline:
                        self._drain_later()
                        return
                deliveries.popleft()
                self._settled(last)
                if deliveries and time.perf_counter() >= deadline:
                    self._drain_later()
                    return
        finally:
            self._draining = False

    def _drain_later(self) -> None:
        self._drain_scheduled = True
        asyncio.get_running_loop().call_soon(self._drain)

    def _settled(self, last: int) -> None:
        """Every write up to ``last`` is committed and its callbacks have run."""
        self._committed = last
        if self._queued - self._committed < LOW_WATER:
            self._room.set()
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, future in self._flushes:
            if target <= last:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((target, future))
        self._flushes = still

    def _failed(self, error: BaseException) -> None:
        """On the loop: a commit failed; nothing more will commit, nobody waits forever.

        The one place a store's failure is announced (``Store.failed``), whichever
        store and whichever of its commits failed.
        """
        self._stopped_by(error)
        self._room.set()
        for _, future in self._flushes:
            if not future.done():
                future.set_exception(StoreError(f"{self._describe()}: commit failed: {error}"))
        self._flushes = []

    @property
    def backlog(self) -> int:
        return self._queued - self._committed

    @property
    def has_room(self) -> bool:
        return self._room.is_set()

    async def wait_for_room(self) -> None:
        await self._room.wait()

    async def flush(self) -> None:
        """Wait until everything queued so far is committed (``StoreError`` if it never will be)."""
        if self._failure is not None:
            raise StoreError(f"{self._describe()}: commit failed: {self._failure}")
        if self._committed >= self._queued:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flushes.append((self._queued, future))
        await future

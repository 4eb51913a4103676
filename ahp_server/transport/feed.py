"""The sharded feed: committed batches published on the bus, delivered in ``serverSeq`` order.

Layer: transport (nats-py and the store's log reads around the pure
``feed_order.py``; no host or protocol types). docs/scale-out.md, "Sharded
mode (design)", "One ``serverSeq``: the commit counter".

* :class:`FeedPublisher`: an owner publishes each batch it committed
  (``store.ownership.commit_batch``) as records (``feed_format.py``) on
  ``ahp.<cluster>.feed``, core NATS, signed (``relay_format.Signer``).
  :meth:`~FeedPublisher.publish` never waits and never fails: records go
  through a bounded queue to one sender task, and one that cannot be sent
  (queue full, NATS down, too large) is logged and forgotten — every reader
  fills it in from the log.
* :class:`FeedReader`: a node's delivery of every committed envelope, once
  each, in number order, never skipping one. Records that verify go through
  :class:`~ahp_server.transport.feed_order.FeedOrder`; one task reads the
  ranges it hands out as repairs from the ``log`` table
  (:class:`~ahp_server.store.ownership.LogReader`), polls the commit counter
  every ``poll_interval`` (a lost *last* record shows only there), and calls
  ``on_stall`` once delivery has been blocked for ``stall`` seconds (the node
  then closes its clients with 1012, rather than skip a number).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from ahp_server.store.base import StoreError
from ahp_server.store.ownership import LogReader
from ahp_server.transport.feed_format import RecordLimits, decode_record, encode_record, split
from ahp_server.transport.feed_order import FeedOrder
from ahp_server.transport.relay import BusWarnings, payload_limit, send, unsealed
from ahp_server.transport.relay_format import Signer

__all__ = ["FeedPublisher", "FeedReader", "FeedStats", "feed_subject"]

log = structlog.get_logger(__name__)

_Nats = Any  # nats.aio.client.Client
_Msg = Any

#: Records a publisher keeps queued for its sender before it drops new ones.
PUBLISH_QUEUE = 1_024
#: A reader's subscription: messages and bytes NATS keeps for it before it drops
#: (a slow consumer loses records; the log fills them in).
PENDING_MSGS = 65_536
PENDING_BYTES = 64 * 1024 * 1024


def feed_subject(cluster: str) -> str:
    return f"ahp.{cluster}.feed"


class FeedPublisher:
    """An owner's side of the feed: committed batches out as signed records.

    ``publish(first, envelopes)`` after each commit, in commit order; it only
    queues (at most ``queue`` records). :meth:`aclose` sends what is queued
    (bounded by ``timeout``) and stops.
    """

    def __init__(
        self,
        nats: _Nats,
        cluster: str,
        signer: Signer | None,
        *,
        limits: RecordLimits | None = None,
        queue: int = PUBLISH_QUEUE,
        close_timeout: float = 5.0,
    ) -> None:
        self._close_timeout = close_timeout
        self._nc = nats
        self._subject = feed_subject(cluster)
        self._signer = signer
        limit = payload_limit(nats, signer)
        self._limits = limits or RecordLimits(max_bytes=limit)
        if self._limits.max_bytes > limit:
            self._limits = RecordLimits(self._limits.max_count, limit)
        self._queue: deque[tuple[int, list[bytes]]] = deque()
        self._capacity = queue
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._sending = False
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._warnings = BusWarnings()
        #: Records sent, and records not sent (queue full, publish failed, too large).
        self.sent = 0
        self.dropped = 0

    def publish(self, first: int, envelopes: Sequence[bytes]) -> None:
        """Queue the committed batch numbered ``first..first+len(envelopes)-1``; never waits."""
        if self._closing or not envelopes:
            return
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        records = list(split(first, envelopes, self._limits))
        if sum(len(r[1]) for r in records) < len(envelopes):
            self._dropped("feed envelope too large for a record")
        for record in records:
            if len(self._queue) >= self._capacity:
                self._dropped("feed publish queue full")
                continue
            self._queue.append(record)
        self._wake.set()

    async def flush(self) -> None:
        """Wait until what is queued is sent and the server has it (benchmarks, tests)."""
        while self._task is not None and (self._queue or self._sending):
            self._idle.clear()
            await self._idle.wait()
        await self._nc.flush()

    async def aclose(self) -> None:
        """Send what is queued (for at most ``close_timeout`` seconds), then stop."""
        self._closing = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), self._close_timeout)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _dropped(self, why: str) -> None:
        self.dropped += 1
        self._warnings.warn(why, subject=self._subject)

    async def _run(self) -> None:
        queue = self._queue
        while True:
            while queue:
                self._sending = True
                first, envelopes = queue.popleft()
                try:
                    record = encode_record(first, envelopes)
                    await send(self._nc, self._subject, record, self._signer)
                    self.sent += 1
                except Exception as error:  # noqa: BLE001  -- forgotten: readers repair it
                    self._dropped("feed publish failed")
                    log.debug("feed publish failed", error=str(error), first=first)
            self._sending = False
            self._idle.set()
            if self._closing:
                with contextlib.suppress(Exception):
                    await self._nc.flush(timeout=1)
                return
            self._wake.clear()
            await self._wake.wait()


@dataclass
class FeedStats:
    """What a reader did (counts only)."""

    #: Records that verified and decoded.
    records: int = 0
    #: Messages dropped: not signed by the cluster's key, or not a record.
    rejected: int = 0
    #: Envelopes delivered, and of those, read from the log.
    delivered: int = 0
    repaired: int = 0
    #: Range reads from the log that answered, and that failed (tried again later).
    repairs: int = 0
    repair_failures: int = 0
    #: Counter readings that answered, and that failed.
    polls: int = 0
    poll_failures: int = 0
    #: Times ``on_stall`` was called.
    stalls: int = 0


class FeedReader:
    """A node's in-order delivery of the feed: ``deliver(n, envelope)`` for every committed
    number from ``next_seq`` on, once each, in order.

    ``envelope`` is as stored (without ``serverSeq``), or for this node's own
    numbers the item :meth:`local` was given. ``deliver`` runs on the
    loop, must not block, and should not raise (an exception is logged and the
    number counts as delivered). ``grace``, ``retry``, ``window`` are
    :class:`FeedOrder`'s; ``poll_interval``: seconds between counter readings;
    ``stall``: seconds delivery may stay blocked before ``on_stall()`` is called,
    once until delivery moves again. ``log_reader`` reads the counter and the
    ranges (its own connection, bounded by its timeout); ``signer=None`` only
    for tests that play a raw peer (nothing verified then).
    """

    def __init__(
        self,
        nats: _Nats,
        log_reader: LogReader,
        cluster: str,
        signer: Signer | None,
        next_seq: int,
        deliver: Callable[[int, Any], None],
        *,
        grace: float = 0.05,
        retry: float = 1.0,
        window: int = 100_000,
        poll_interval: float = 1.0,
        stall: float = 5.0,
        on_stall: Callable[[], None] = lambda: None,
        limits: RecordLimits | None = None,
        pending_msgs: int = PENDING_MSGS,
        pending_bytes: int = PENDING_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if poll_interval <= 0 or stall <= 0:
            raise ValueError("poll_interval and stall must be positive")
        self._nc = nats
        self._log = log_reader
        self._subject = feed_subject(cluster)
        self._signer = signer
        self._deliver = deliver
        self._poll_interval = poll_interval
        self._stall = stall
        self._on_stall = on_stall
        self._limits = limits or RecordLimits()
        self._pending = (pending_msgs, pending_bytes)
        self._clock = clock
        self.order: FeedOrder[Any] = FeedOrder(
            next_seq, grace=grace, retry=retry, window=window, now=clock()
        )
        self.stats = FeedStats()
        self._warnings = BusWarnings()
        self._wake = asyncio.Event()
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None
        #: ``order.next`` when ``on_stall`` was last called (``None``: armed).
        self._stalled_at: int | None = None

    @property
    def next_seq(self) -> int:
        """The next number to deliver (everything below it is delivered)."""
        return self.order.next

    async def start(self) -> None:
        """Subscribe, then start the timer task (its first step reads the counter)."""
        msgs, size = self._pending
        self._sub = await self._nc.subscribe(
            self._subject, cb=self._on_message, pending_msgs_limit=msgs, pending_bytes_limit=size
        )
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def aclose(self) -> None:
        """Stop: the timer task cancelled and awaited, the subscription drained."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):  # the connection may be closed already
                await sub.drain()
        await self._log.close()

    # -- records ---------------------------------------------------------------------------

    async def _on_message(self, msg: _Msg) -> None:
        message = unsealed(self._signer, self._warnings, self._subject, msg.data)
        record = None if message is None else decode_record(message, self._limits)
        if record is None:
            self.stats.rejected += 1
            if message is not None:
                self._warnings.warn("malformed feed record dropped", subject=self._subject)
            return
        self.stats.records += 1
        first, envelopes = record
        self._receive(first, envelopes)

    def local(self, first: int, items: Sequence[object]) -> None:
        """This node's own committed batch, numbered ``first…``: into the same order as
        everyone's, without the bus hop (docs/scale-out.md "One ``serverSeq``").

        ``items`` are what ``deliver`` gets for those numbers (the node's envelopes
        with their callbacks); the copy of the batch that comes back on the bus is
        then a duplicate, dropped.
        """
        self._receive(first, items)

    def _receive(self, first: int, envelopes: Sequence[Any], repaired: bool = False) -> None:
        before = self.order.deadline()
        out = self.order.receive(first, envelopes, self._clock())
        for n, envelope in out:
            try:
                self._deliver(n, envelope)
            except Exception:  # the feed goes on; the caller's bug is logged
                log.exception("feed delivery failed", seq=n)
        self.stats.delivered += len(out)
        if repaired:
            self.stats.repaired += len(out)
        if self.order.deadline() != before:
            self._wake.set()

    # -- the timer: repairs, the counter poll, the stall bound ------------------------------

    async def _run(self) -> None:
        order = self.order
        next_poll = self._clock()
        while True:
            now = self._clock()
            if now >= next_poll:
                await self._poll()
                next_poll = self._clock() + self._poll_interval
            for lo, hi in order.repairs(self._clock()):
                await self._repair(lo, hi)
            now = self._clock()
            self._check_stall(now)
            wake = next_poll
            deadline = order.deadline()
            if deadline is not None:
                wake = min(wake, deadline)
            if order.horizon >= order.next and self._stalled_at is None:
                wake = min(wake, now + self._stall - order.stalled(now))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, wake - self._clock()))

    async def _poll(self) -> None:
        try:
            value = await self._log.counter()
        except StoreError as error:
            self.stats.poll_failures += 1
            self._warnings.warn("feed counter poll failed", error=str(error))
            return
        self.stats.polls += 1
        self.order.counter(value, self._clock())

    async def _repair(self, lo: int, hi: int) -> None:
        """Read ``lo..hi`` from the log; each contiguous run found goes in like a record.

        A failed read leaves the range requested: FeedOrder hands it out again
        after ``retry``. Never a skip.
        """
        try:
            found = await self._log.read(lo, hi)
        except StoreError as error:
            self.stats.repair_failures += 1
            self._warnings.warn("feed repair failed", error=str(error))
            return
        self.stats.repairs += 1
        run: list[bytes] = []
        start = lo
        for n in range(lo, hi + 2):
            envelope = found.get(n) if n <= hi else None
            if envelope is not None:
                if not run:
                    start = n
                run.append(envelope)
            elif run:
                self._receive(start, run, repaired=True)
                run = []

    def _check_stall(self, now: float) -> None:
        order = self.order
        if self._stalled_at is not None and order.next != self._stalled_at:
            self._stalled_at = None  # delivery moved: armed again
        if self._stalled_at is None and order.stalled(now) >= self._stall:
            self._stalled_at = order.next
            self.stats.stalls += 1
            log.warning("feed delivery stalled", next_seq=order.next, seconds=self._stall)
            try:
                self._on_stall()
            except Exception:
                log.exception("feed on_stall failed")

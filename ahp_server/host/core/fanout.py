"""Per-connection outbox and its single writer task: the only path frames take to a client.

Layer: host (asyncio).

Every frame for a connection — responses, action envelopes, notifications —
goes through :meth:`Connection.send`, which never blocks: it appends the
already-encoded bytes to a bounded outbox. One writer task per connection
drains the outbox in order into the transport, so frames for a connection are
never reordered and a slow socket never slows the actor that produced the
frame.

The idle case skips the queue: when the writer is parked (nothing queued,
nothing being written) and the transport takes frames without waiting
(``write_now``), what a connection is sent in one turn of the event loop,
if small (``WRITE_NOW_MAX_BYTES`` in all), is held and handed to the
transport when that turn ends — with every other connection's, one after
the other, in one callback (:meth:`OutboxBudget.write_held`) — without
waking the writer. Written together, N streams' frames reach their readers
in a burst, and a reader that wakes finds several of its sockets ready,
where frames written one by one as each was made would wake it for each:
the load generator of the capacity benchmark spent some 10 % less CPU on
the same words, the host some 5 % less (docs/performance.md "Capacity").
A frame is held for the rest of that turn of the loop; more than
``WRITE_NOW_MAX_BYTES`` in a turn, and what is held joins the queue, in
order, ahead of the frame that made it too much, and leaves in the
writer's batch. Order is unchanged: a frame is held only when the queue is
empty and no batch is leaving, and nothing is queued while one is held.

Full-outbox policy (docs/architecture.md): a connection that falls more than
``outbox_max_frames`` frames or ``outbox_max_bytes`` bytes behind is a slow
consumer. Its outbox is dropped and it is closed with **1013 (Try Again
Later)**; the client reconnects and gets a replay or snapshots. Other
connections and the chat are unaffected.

Host-wide budget (docs/reliability.md "Memory"): every connection's queued
bytes — its outbox and the batch its writer is handing to the socket — count
against one :class:`OutboxBudget` (``limits.outbox_total_bytes``). When a
frame takes the total past it, the **slowest** connections go first: the one
furthest behind (the most bytes queued) is closed with 1013, then the next,
until the total fits again. One whose writer is stuck on a
socket the client does not read is aborted at once (its unread batch is freed
with it; the client sees the TCP connection drop). Memory the host is about to
fill for a connection (a ``resourceRead`` answer) is reserved first
(:meth:`OutboxBudget.reserved`), under the same policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import structlog

__all__ = [
    "CLOSE_GOING_AWAY",
    "CLOSE_OVER_BUDGET_REASON",
    "CLOSE_POLICY",
    "CLOSE_SERVICE_RESTART",
    "CLOSE_SLOW_CONSUMER",
    "WRITE_NOW_MAX_BYTES",
    "ConnState",
    "Connection",
    "OutboxBudget",
    "Transport",
    "close_reason",
]

log = structlog.get_logger(__name__)

#: RFC 6455 close codes the host uses.
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_SLOW_CONSUMER = 1013
#: RFC 6455 "service restart": reconnect (cluster mode: to the current primary; the
#: host's store failed: to the host its supervisor starts again).
CLOSE_SERVICE_RESTART = 1012
#: The longest close reason a close frame carries (RFC 6455 §5.5: 125 bytes, less the code).
_REASON_BYTES = 123

#: The close reason of a connection evicted to keep the host within its budget.
CLOSE_OVER_BUDGET_REASON = "the host is short of memory: reconnect to resume"

_ids = itertools.count(1)


def close_reason(text: str) -> str:
    """``text`` as a close frame's reason: cut (on a character) to what one carries."""
    data = text.encode()
    if len(data) <= _REASON_BYTES:
        return text
    return data[: _REASON_BYTES - 3].decode(errors="ignore") + "..."


#: The writer sends at most this much per write (then waits for the socket).
_BATCH_FRAMES = 512
_BATCH_BYTES = 1024 * 1024
#: The most a connection may be sent in one turn of the loop and skip the queue.
#: Bytes held for the turn's end and handed to the transport then are not
#: counted against the outbox budget: what one connection's transport buffer
#: may hold so is this, past its high-water mark (below it, the connection's
#: own buffers, docs/reliability.md "Memory"); more waits in the outbox,
#: counted, until the writer has written and drained it.
WRITE_NOW_MAX_BYTES = 16 * 1024


class Transport(Protocol):
    """What the host needs from a connection's transport (a WebSocket, or a test double)."""

    async def send_text(self, frame: bytes) -> None:
        """Send one complete JSON-RPC message as one text frame."""
        ...

    async def send_texts(self, frames: list[bytes]) -> None:
        """Send several messages, one text frame each, in order (one write, one drain)."""
        ...

    async def close(self, code: int, reason: str) -> None:
        """Close the connection with a WebSocket close code."""
        ...

    def abort(self) -> None:
        """Drop the connection now, and whatever it has not yet written."""
        ...

    # Optional: ``write_now(frames) -> bool`` hands frames (one text frame each,
    # in order) to the socket without waiting, or returns False (nothing
    # written) when it would have to wait or the connection is not in a state
    # to take them (Connection.send).


class OutboxBudget:
    """The bytes queued for clients across every connection, held under one limit.

    Not thread-safe: used from the event loop only. ``limit`` ``None``: counted,
    never enforced (a connection made without a host, in tests).
    """

    def __init__(self, limit: int | None, *, headroom: int = 0) -> None:
        self.limit = limit
        #: Room reads may never reserve: kept for ordinary frames, so a small
        #: answer is not what passes the limit while reads hold the rest (then
        #: a connection holding more is there to go first).
        self.headroom = headroom
        #: Bytes queued now (outboxes, batches being written, reservations).
        self.used = 0
        #: The most ``used`` has been (for the metrics).
        self.peak = 0
        #: Connections evicted to keep within ``limit``.
        self.evictions = 0
        #: Bytes of evicted connections' batches, freed when their writer stops.
        self._freeing = 0
        #: Reservations running, and those waiting for one of them to end.
        self._reserving = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        #: Connections holding bytes now.
        self._holders: set[Connection] = set()
        #: Connections holding frames sent in this turn of the loop, to be written
        #: when it ends (:meth:`write_held`), in the order they were first sent one.
        self.holding: list[Connection] = []

    def write_held(self) -> None:
        """The turn of the loop in which frames were held has ended: write them,
        every connection's one after the other (see the module's docstring)."""
        holding, self.holding = self.holding, []
        for connection in holding:
            try:
                connection.write_held()
            except Exception:  # callback boundary: the other connections still get theirs
                log.exception("writing held frames failed", conn=connection.id)
                connection.close(CLOSE_GOING_AWAY, "connection lost")

    def add(self, connection: Connection, size: int) -> None:
        self.used += size
        if self.used > self.peak:
            self.peak = self.used
        if connection.held_bytes == size:  # it held nothing before
            self._holders.add(connection)
        if self.limit is not None and self.used > self.limit:
            self._evict(self.limit, spare=None)

    def release(self, connection: Connection, size: int, *, evicted: bool = False) -> None:
        self.used -= size
        if evicted:
            self._freeing -= size
        if not connection.held_bytes:
            self._holders.discard(connection)

    @contextlib.asynccontextmanager
    async def reserved(self, connection: Connection, size: int) -> AsyncIterator[None]:
        """Count ``size`` bytes against the budget while the block builds them.

        Reservations together stay within the limit less ``headroom``. Slower
        connections are evicted to make room (``connection`` itself is spared:
        it is the one asking). When that is not enough because other
        reservations hold the room, the block waits for one of them to end; a
        reservation alone never waits, so one larger than the budget still runs.
        """
        if self.limit is not None:
            room = max(self.limit - self.headroom, 0)
            while self.used + size > room:
                # While other reads hold the room, evict only if the others' queues
                # can make it: closing a client that holds a small answer would free
                # nothing that matters, and the read would wait all the same.
                if not self._reserving or self._held_by_others(connection) >= (
                    self.used - self._freeing + size - room
                ):
                    self.used += size  # evict as if it were held already
                    try:
                        self._evict(room, spare=connection)
                    finally:
                        self.used -= size
                    if self.used + size <= room or not self._reserving:
                        break
                freed = asyncio.get_running_loop().create_future()
                self._waiting.append(freed)
                await freed
        self.used += size
        self.peak = max(self.peak, self.used)
        self._reserving += 1
        try:
            yield
        finally:
            self.used -= size
            self._reserving -= 1
            while self._waiting:
                waiter = self._waiting.popleft()
                if not waiter.done():
                    waiter.set_result(None)

    def _held_by_others(self, spare: Connection) -> int:
        return sum(c.held_bytes for c in self._holders if c is not spare)

    def _evict(self, limit: int, spare: Connection | None) -> None:
        """Close the slowest connections until the total fits ``limit`` (docs/reliability.md)."""
        while self.used - self._freeing > limit:
            candidates = [c for c in self._holders if c is not spare and c.held_bytes]
            if not candidates:
                return
            slowest = max(candidates, key=lambda c: (c.held_bytes, -c.id))
            log.warning(
                "outbox budget spent: slowest connection evicted",
                conn=slowest.id,
                client_id=slowest.client_id,
                held_bytes=slowest.held_bytes,
                budget_used=self.used,
            )
            self.evictions += 1
            self._freeing += slowest.evict()
            self._holders.discard(slowest)


class ConnState(enum.Enum):
    """Connection lifecycle (WIRE-SUMMARY §3): only ``ping``, ``initialize`` and
    ``reconnect`` are allowed before the handshake."""

    NEW = "new"
    READY = "ready"
    CLOSING = "closing"


class Connection:
    """One client connection: identity, subscriptions, and the bounded outbox."""

    def __init__(
        self,
        transport: Transport,
        *,
        max_frames: int,
        max_bytes: int,
        budget: OutboxBudget | None = None,
    ) -> None:
        self.id = next(_ids)
        self.transport = transport
        self.state = ConnState.NEW
        self.client_id: str | None = None
        #: Who the door admitted (multi-user mode: the user whose token it was;
        #: ``None`` in single-token and no-token mode). Never what the client claims.
        self.user: str | None = None
        #: An admin user sees every session (multi-user mode).
        self.admin = False
        self.protocol_version: str | None = None
        self.subscriptions: set[str] = set()
        #: Action types newer than the negotiated version: never sent to this client.
        self.blocked_actions: frozenset[str] = frozenset()
        #: It negotiated a 0.7-era version: every frame it gets is projected to
        #: the 0.7 view, and what it sends is translated to 1.0 (host/core/edge.py).
        self.legacy = False
        #: Sharded mode: another node's client, its requests forwarded here by that
        #: node (``transport/routing.py``). Its envelopes reach it from its own node's
        #: feed; only what this node decides for it (answers, rejections) goes back.
        self.forwarded = False
        self._max_frames = max_frames
        self._max_bytes = max_bytes
        self._outbox: deque[bytes] = deque()
        self._outbox_bytes = 0
        #: Frames sent in this turn of the loop while the writer was parked, held
        #: for the turn's end (``None``: none), and their bytes.
        self._held: list[bytes] | None = None
        self._held_size = 0
        #: Bytes of the batch the writer is handing to the transport now.
        self._leaving = 0
        self._budget = budget if budget is not None else OutboxBudget(None)
        self._evicted = False
        #: What the writer waits on while it has nothing to write (``None``: it
        #: is busy, and takes a new frame on its next round without a wake-up).
        self._parked: asyncio.Future[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        #: The transport's non-waiting write, if it has one (see the module's docstring).
        self._write_now: Callable[[list[bytes]], bool] | None = getattr(
            transport, "write_now", None
        )
        self._closer: asyncio.Task[None] | None = None
        self._on_drained: asyncio.Future[None] | None = None
        self.close_code: int | None = None
        self.frames_sent = 0
        #: dispatchAction token bucket (see Connection.take_dispatch_token).
        self._tokens: float | None = None
        self._tokens_at = 0.0

    @property
    def queued_frames(self) -> int:
        return len(self._outbox)

    @property
    def queued_bytes(self) -> int:
        return self._outbox_bytes

    @property
    def held_bytes(self) -> int:
        """Bytes queued for this client: its outbox and the batch being written."""
        return self._outbox_bytes + self._leaving

    def take_dispatch_token(self, rate: float, burst: int, now: float) -> bool:
        """One ``dispatchAction`` from the per-connection token bucket (False: over the limit)."""
        if self._tokens is None:
            self._tokens, self._tokens_at = float(burst), now
        self._tokens = min(float(burst), self._tokens + (now - self._tokens_at) * rate)
        self._tokens_at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def start(self) -> None:
        """Start the writer task (call once, from the event loop)."""
        self._writer = asyncio.get_running_loop().create_task(
            self._write_loop(), name=f"writer#{self.id}"
        )

    def send(self, frame: bytes) -> bool:
        """Queue one encoded frame; never blocks. False when the frame was dropped."""
        if self.state is ConnState.CLOSING:
            return False
        held = self._held
        if held is not None:  # (so the outbox is empty and the writer parked)
            if self._held_size + len(frame) <= WRITE_NOW_MAX_BYTES:
                held.append(frame)
                self._held_size += len(frame)
                return True
            self._unhold()  # too much for one turn: the writer takes it all, in order
        elif (
            self._parked is not None
            and self._write_now is not None
            and len(frame) <= WRITE_NOW_MAX_BYTES
        ):
            # The writer is idle: its outbox is empty and nothing is leaving.
            holding = self._budget.holding
            if not holding:  # the first in this turn of the loop: written when it ends
                self._parked.get_loop().call_soon(self._budget.write_held)
            holding.append(self)
            self._held = [frame]
            self._held_size = len(frame)
            return True
        self._outbox.append(frame)
        self._outbox_bytes += len(frame)
        self._budget.add(self, len(frame))
        if self._evicted:
            return False  # the budget evicted this connection: the slowest
        if len(self._outbox) > self._max_frames or self._outbox_bytes > self._max_bytes:
            log.warning(
                "slow consumer disconnected",
                conn=self.id,
                client_id=self.client_id,
                queued_frames=len(self._outbox),
                queued_bytes=self._outbox_bytes,
            )
            self.close(CLOSE_SLOW_CONSUMER, "too far behind: reconnect to resume")
            return False
        if self._parked is not None:
            self._wake()
        return True

    def write_held(self) -> None:
        """Hand the frames held in the turn that ended to the transport
        (:meth:`OutboxBudget.write_held`); the writer takes them if it would
        have to wait."""
        frames = self._held
        if frames is None:  # queued meanwhile (_unhold), or closed
            return
        self._held = None
        if self._parked is not None and self._write_now is not None and self._write_now(frames):
            self.frames_sent += len(frames)
            return
        self._queue(frames)

    def _unhold(self) -> None:
        """Queue what is held, in order, for the writer (woken if parked)."""
        frames = self._held
        if frames is not None:
            self._held = None
            self._queue(frames)

    def _queue(self, frames: list[bytes]) -> None:
        size = sum(map(len, frames))
        self._outbox.extend(frames)
        self._outbox_bytes += size
        self._budget.add(self, size)
        if self._parked is not None:
            self._wake()

    def _wake(self) -> None:
        """Wake the writer if it is parked (a bare future: cheaper than an Event per frame)."""
        parked, self._parked = self._parked, None
        if parked is not None and not parked.done():
            parked.set_result(None)

    def close(self, code: int, reason: str) -> None:
        """Stop delivering and close the transport (idempotent, non-blocking)."""
        if self.state is ConnState.CLOSING:
            return
        frames = self._held
        if frames is not None and self._write_now is not None:
            # Sent before the close: they go first, as if written when sent (the
            # socket takes them at once, or they go the way of the outbox).
            self._held = None
            try:
                self._write_now(frames)
            except Exception:  # closing anyway: the frames go the way of the outbox
                log.debug("held frames not written at close", conn=self.id, exc_info=True)
        self.state = ConnState.CLOSING
        self.close_code = code
        self._drop_outbox()
        self._wake()
        self._closer = asyncio.get_running_loop().create_task(
            self._close(code, reason), name=f"close#{self.id}"
        )

    def evict(self) -> int:
        """Close to keep the host within its outbox budget (OutboxBudget._evict);
        the bytes still held (a batch being written), freed when the writer stops.

        A writer stuck handing a batch to a socket the client does not read
        would hold that batch (and the transport's buffer) until the close
        handshake timed out: that connection is aborted at once instead.
        """
        self._evicted = True
        self.close(CLOSE_SLOW_CONSUMER, CLOSE_OVER_BUDGET_REASON)
        if self._leaving:
            self.transport.abort()
        return self._leaving

    def _drop_outbox(self) -> None:
        self._outbox.clear()
        dropped, self._outbox_bytes = self._outbox_bytes, 0
        if dropped:
            self._budget.release(self, dropped)

    async def flush_and_close(self, code: int, reason: str, grace: float) -> None:
        """Let the writer drain what is queued (for at most ``grace`` seconds), then close."""
        self._unhold()  # the writer drains it with the rest
        if self.state is not ConnState.CLOSING and self._outbox:
            drained: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._on_drained = drained
            self._wake()
            try:
                async with asyncio.timeout(grace):
                    await drained
            except TimeoutError:
                log.info("outbox not drained before close", conn=self.id)
        self.close(code, reason)
        if self._closer is not None:
            await asyncio.shield(self._closer)

    async def _close(self, code: int, reason: str) -> None:
        try:
            await self.transport.close(code, reason)
        except Exception:  # task boundary: a failed close must not leak out
            log.debug("close failed", conn=self.id, exc_info=True)

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.state is not ConnState.CLOSING:
                if not self._outbox:
                    if self._on_drained is not None and not self._on_drained.done():
                        self._on_drained.set_result(None)
                    parked = self._parked = loop.create_future()
                    try:
                        await parked
                    finally:
                        self._parked = None
                    continue
                # Everything queued so far (bounded) goes out in one write.
                batch: list[bytes] = []
                size = 0
                while self._outbox and len(batch) < _BATCH_FRAMES and size < _BATCH_BYTES:
                    frame = self._outbox.popleft()
                    batch.append(frame)
                    size += len(frame)
                self._outbox_bytes -= size
                self._leaving = size
                try:
                    await self.transport.send_texts(batch)
                finally:
                    self._leaving = 0
                    self._budget.release(self, size, evicted=self._evicted)
                self.frames_sent += len(batch)
        except asyncio.CancelledError:
            raise
        except Exception:  # task boundary: the peer went away mid-send
            log.debug("writer stopped", conn=self.id, client_id=self.client_id, exc_info=True)
            self.close(CLOSE_GOING_AWAY, "connection lost")

    async def stop(self) -> None:
        """Cancel the writer (after the transport is gone)."""
        self.state = ConnState.CLOSING
        self._held = None
        self._drop_outbox()
        for task in (self._writer, self._closer):
            if task is not None and not task.done():
                task.cancel()
        for task in (self._writer, self._closer):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

"""The cluster relay: a client's WebSocket on one node, its session on the primary, over NATS.

Layer: transport (nats-py and websockets; no protocol types). docs/scale-out.md.

In cluster mode one node at a time is the *primary* (it holds the lease in
PostgreSQL and owns every channel); every node accepts connections. A node
that is not the primary is an *edge* for its clients: :class:`EdgeRelay`
forwards each client frame, in order, to the primary, and writes what the
primary sends back to the socket. On the primary, :class:`PrimaryRelay` gives
each relayed client a :class:`~ahp_server.host.core.fanout.Connection` of its own
(a :class:`BusTransport` in place of the socket) and feeds its frames to the
same gateway as the primary's own sockets: one implementation of the
protocol, and the primary's :class:`~ahp_server.host.core.sequencer.Hub` orders
every connection's envelopes by ``serverSeq`` whichever node holds its socket.

The subjects and the message format are in ``relay_format.py``.

Bounded everywhere: an edge writes to its client through a ``Connection``
outbox (closed with 1013 when it overflows, as on the primary); the primary
feeds each relayed connection from a bounded inbox (``cluster.relay_inbox``
frames; a client that outruns it is closed with 1013).

Authenticated (``cluster.secret``; a node always passes a
:class:`~ahp_server.transport.relay_format.Signer`): everything a node
publishes is signed and everything it hears is checked, the primary's record
in JetStream included; what does not verify is dropped, with a warning at
most once per ``WARN_INTERVAL`` seconds of each kind. The primary accepts an
open once and only while it is fresh (``OpenGuard``). In multi-user mode
(``users``) it serves a relayed client only as one of its own users, and an
open with no identity is refused with 1008: no identity never means "sees
everything". Built without a signer (tests that play a raw peer), messages
are neither signed nor checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from nats.errors import Error as NatsError
from nats.js.errors import NotFoundError
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ahp_server.host.core.fanout import CLOSE_SLOW_CONSUMER, Connection, OutboxBudget, Transport
from ahp_server.transport.relay_format import (
    BUCKET,
    CLOSE_INVALID_DATA,
    CLOSE_POLICY,
    CLOSE_PRIMARY_GONE,
    CLOSE_RELAY_GAP,
    CLOSE_TOO_BIG,
    CLOSE_TRY_AGAIN,
    FROM_EDGE,
    MAC_BYTES,
    OpenGuard,
    Pieces,
    Signer,
    Subjects,
    decode,
    encode,
    fresh_open,
    pack_frames,
    parse_fresh_open,
    parse_primary,
    same_frames,
    sendable,
    unpack_frames,
)

__all__ = [
    "CLOSE_PRIMARY_GONE",
    "BusTransport",
    "EdgeLink",
    "EdgeRelay",
    "FrameSink",
    "OwnerRole",
    "Pieces",
    "PrimaryRelay",
    "Signer",
    "Subjects",
    "decode",
    "encode",
    "forget_primary",
    "pack_frames",
    "publish",
    "unpack_frames",
    "unpack_group",
]

log = structlog.get_logger(__name__)

#: Bytes queued on the way to one edge (``EdgeLink``) before writers wait.
LINK_MAX_BYTES = 16 * 1024 * 1024
#: Seconds between two warnings of one kind about what arrived on the bus.
WARN_INTERVAL = 10.0
_Nats = Any  # nats.aio.client.Client (nats-py is typed, but imported lazily)
_Msg = Any


class BusWarnings:
    """Warnings about what arrived on the bus, at most one per ``interval`` of each kind.

    Whoever can publish on the NATS server can send any number of forged or
    broken messages; the log gets one line per kind and interval, with the
    ``count`` it stands for. Never a message's content, never the secret.
    """

    def __init__(self, interval: float = WARN_INTERVAL) -> None:
        self._interval = interval
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}

    def warn(self, event: str, kind: str = "", **fields: object) -> None:
        """Log ``event`` unless one of its ``kind`` (a few fixed words) was logged lately."""
        key = (event, kind)
        count = self._held.get(key, 0) + 1
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._held[key] = count
            return
        self._last[key] = now
        self._held[key] = 0
        log.warning(event, count=count, **fields)


def unsealed(
    signer: Signer | None, warnings: BusWarnings, subject: str, data: bytes
) -> bytes | None:
    """A message heard on ``subject``, if it verifies (as is, without a signer); else None."""
    if signer is None:
        return data
    message = signer.unseal(subject, data)
    if message is None:
        warnings.warn("unauthenticated bus message dropped", subject=subject[:200])
    return message


async def send(nc: _Nats, subject: str, data: bytes, signer: Signer | None) -> None:
    """Publish one message, signed when there is a signer."""
    await nc.publish(subject, data if signer is None else signer.seal(subject, data))


def payload_limit(nc: _Nats, signer: Signer | None) -> int:
    """The most payload one message may carry: room for the header line (and the MAC)."""
    return max(1024, int(nc.max_payload) - 64 - (0 if signer is None else MAC_BYTES))


async def forget_primary(nc: _Nats, subjects: Subjects) -> None:
    """Remove a cluster's primary record (a cluster taken down for good; tests, benchmarks)."""
    with contextlib.suppress(NotFoundError):  # no bucket yet: nothing to forget
        record = await nc.jetstream().key_value(BUCKET)
        await record.purge(subjects.primary_key)


async def primary_record(nc: _Nats) -> Any:
    """The JetStream key-value bucket of primary records (made if absent; one value per key)."""
    return await nc.jetstream().create_key_value(bucket=BUCKET, history=1)


async def publish(
    nc: _Nats,
    subject: str,
    kind: str,
    conn: int,
    n: int,
    payload: bytes,
    epoch: int | None,
    *,
    signer: Signer | None = None,
) -> int:
    """Publish one message, in ``k`` pieces first if it is too large; returns the last ``n``."""
    limit = payload_limit(nc, signer)
    while len(payload) > limit:
        await send(nc, subject, encode("k", conn, n, payload[:limit], epoch), signer)
        n += 1
        payload = payload[limit:]
    await send(nc, subject, encode(kind, conn, n, payload, epoch), signer)
    return n


def unpack_group(payload: bytes) -> tuple[list[tuple[int, int]], bytes, list[bytes]]:
    """A ``g`` message (``EdgeLink``): ``<conn>:<n>,…``, a newline, the packed frames —
    the ``(conn, n)`` it names, the packed bytes, and the frames. ``ValueError``: not that."""
    names, sep, data = payload.partition(b"\n")
    if not sep:
        raise ValueError("no frames")
    targets = []
    for name in names.split(b","):
        conn, colon, n = name.partition(b":")
        if not colon:
            raise ValueError("a target without its number")
        targets.append((int(conn), int(n)))
    return targets, data, unpack_frames(data)


# -- the primary's side ------------------------------------------------------------------------


class FrameSink(Protocol):
    """What the relay feeds: the gateway (``host/gateway.py``)."""

    def open(self, transport: Transport) -> Connection: ...

    async def handle_frame(self, connection: Connection, frame: str | bytes) -> None: ...

    async def close(self, connection: Connection) -> None: ...


class EdgeLink:
    """The primary's one way out to an edge: every relayed connection of it writes here.

    Connections' batches and closes go out in the order they were put, so each
    connection's stay in order, numbered per connection as before; the same
    frames put for several connections one after the other — an envelope fanned
    out to that edge's subscribers — go as **one** ``g`` message naming each
    connection and its number: the bytes cross the bus once per edge, and the
    edge hands them to each of its clients. Bounded in bytes: a connection's
    writer waits for room (:meth:`room`), and then its own outbox bounds it.
    """

    def __init__(
        self,
        nc: _Nats,
        subject: str,
        epoch: int,
        *,
        max_bytes: int,
        signer: Signer | None = None,
    ) -> None:
        self._nc = nc
        self._subject = subject
        self._epoch = epoch
        self._signer = signer
        self._max_bytes = max_bytes
        self._queue: deque[tuple[str, int, list[bytes] | bytes]] = deque()
        self._queued_bytes = 0
        self._numbers: dict[int, int] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._room = asyncio.Event()
        self._room.set()
        self._failing = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"link {subject}")
        self.messages = 0

    def put(self, kind: str, conn: int, payload: list[bytes] | bytes) -> None:
        """Queue a connection's frames (``f``: a list) or its close (``x``: bytes)."""
        size = sum(map(len, payload)) if isinstance(payload, list) else len(payload)
        self._queue.append((kind, conn, payload))
        self._queued_bytes += size
        if self._queued_bytes > self._max_bytes:
            self._room.clear()
        self._idle.clear()
        self._wake.set()

    async def room(self) -> None:
        await self._room.wait()

    def put_message(self, data: bytes) -> None:
        """Publish a message made elsewhere (a refusal), after what was put before it."""
        self._queue.append(("r", 0, data))
        self._idle.clear()
        self._wake.set()

    def forget(self, conn: int) -> None:
        """``conn`` is gone: its numbering goes once what was put for it went out."""
        self._queue.append(("-", conn, b""))
        self._idle.clear()
        self._wake.set()

    async def drain(self) -> None:
        """Until everything put so far is published."""
        await self._idle.wait()

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def _next(self, conn: int) -> int:
        n = self._numbers.get(conn, 0) + 1
        self._numbers[conn] = n
        return n

    async def _run(self) -> None:
        queue = self._queue
        limit = payload_limit(self._nc, self._signer)
        while True:
            if not queue:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            kind, conn, payload = queue.popleft()
            if kind == "-":  # the connection is gone, and all it was sent went out
                self._numbers.pop(conn, None)
                continue
            if kind == "r":  # a message made elsewhere, after what was put before it
                assert isinstance(payload, bytes)
                with contextlib.suppress(NatsError):  # a reply about nothing: best effort
                    await send(self._nc, self._subject, payload, self._signer)
                continue
            sent = [payload]
            group = [conn]
            if isinstance(payload, list):
                while queue and queue[0][0] == "f":
                    other = queue[0][2]
                    if not isinstance(other, list) or not same_frames(other, payload):
                        break
                    group.append(queue.popleft()[1])
                    sent.append(other)
                data = pack_frames(payload)
            else:
                data = payload
            try:
                await self._publish(kind, group, data, limit)
            except NatsError as error:
                # The bus is away: what these connections were sent is lost, and
                # their numbering says so to the edge (a gap closes them with 1012).
                # Said once per outage, not once per message.
                if not self._failing:
                    log.warning("relay to an edge failed", subject=self._subject, error=str(error))
                self._failing = True
            else:
                self._failing = False
            for item in sent:
                self._queued_bytes -= sum(map(len, item)) if isinstance(item, list) else len(item)
            if self._queued_bytes <= self._max_bytes:
                self._room.set()

    async def _publish(self, kind: str, group: list[int], data: bytes, limit: int) -> None:
        self.messages += 1
        numbers = self._numbers
        if len(group) > 1:
            names = b",".join(b"%d:%d" % (conn, numbers.get(conn, 0) + 1) for conn in group)
            if len(names) + 1 + len(data) <= limit:  # the names count too
                for conn in group:
                    numbers[conn] = numbers.get(conn, 0) + 1
                message = encode("g", 0, 0, names + b"\n" + data, self._epoch)
                await send(self._nc, self._subject, message, self._signer)
                return
        for conn in group:
            n = await publish(
                self._nc,
                self._subject,
                kind,
                conn,
                self._next(conn),
                data,
                self._epoch,
                signer=self._signer,
            )
            numbers[conn] = n  # pieces took numbers too


class BusTransport:
    """A relayed client's transport on the primary: its frames go out by its edge's link."""

    def __init__(self, link: EdgeLink, conn: int) -> None:
        self._link = link
        self._conn = conn

    async def send_text(self, frame: bytes) -> None:
        await self.send_texts([frame])

    async def send_texts(self, frames: list[bytes]) -> None:
        await self._link.room()
        self._link.put("f", self._conn, frames)

    async def close(self, code: int, reason: str) -> None:
        self._link.put("x", self._conn, b"%d %s" % (code, reason.encode()[:120]))

    def abort(self) -> None:
        # The edge holds the client's socket: it closes it (its own outbox, and
        # the budget of the edge's node, bound what waits there).
        self._link.put("x", self._conn, b"%d %s" % (CLOSE_SLOW_CONSUMER, b"aborted"))


@dataclass(frozen=True, slots=True)
class OwnerRole:
    """What makes a :class:`PrimaryRelay` the sharded mode's end of forwarded requests
    (``transport/routing.py``): it listens on ``ahp.<c>.o.<node>.*`` and answers on
    ``ahp.<c>.r.<edge>``, announces nothing (nodes find owners in PostgreSQL), writes
    through ``transport(link, conn)``, marks its connections ``forwarded``, and drops
    the clients of a node ``alive`` no longer vouches for (checked every ``check_every``)."""

    transport: Callable[[EdgeLink, int], Transport]
    alive: Callable[[str], bool]
    check_every: float


@dataclass(slots=True)
class _Remote:
    """One relayed client on the primary: its connection and its ordered inbox."""

    edge: str
    conn: int
    connection: Connection
    inbox: asyncio.Queue[tuple[str, bytes]]
    pieces: Pieces
    n: int = 1  # the open message was 1
    task: asyncio.Task[None] | None = None


class PrimaryRelay:
    """The primary's end: relayed clients become connections of the local gateway."""

    def __init__(
        self,
        nc: _Nats,
        subjects: Subjects,
        node: str,
        epoch: int,
        sink: FrameSink,
        *,
        heartbeat: float,
        edge_timeout: float,
        inbox: int,
        max_message_bytes: int,
        signer: Signer | None = None,
        users: Mapping[str, bool] | None = None,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        owner: OwnerRole | None = None,
    ) -> None:
        """``signer``: sign and check everything (a node always has one); ``users``: in
        multi-user mode each user's name and whether they are an admin (``None``:
        single-user, an open without identity is that one user, as a local socket).
        ``owner``: the sharded mode's end of forwarded requests instead (:class:`OwnerRole`)."""
        self._nc = nc
        self._subjects = subjects
        self._owner = owner
        self.node = node
        self.epoch = epoch
        self._sink = sink
        self._signer = signer
        self._users = users
        self._clock_ms = clock_ms
        #: Which opens were already accepted (signed clusters: a replay is refused).
        self._guard = OpenGuard() if signer is not None else None
        self._warnings = BusWarnings()
        self._heartbeat = heartbeat
        self._edge_timeout = edge_timeout
        self._inbox = inbox
        self._max_message = max_message_bytes
        self._remotes: dict[tuple[str, int], _Remote] = {}
        #: One outgoing link per edge (``EdgeLink``), made with its first connection.
        self._links: dict[str, EdgeLink] = {}
        #: Connections being closed from this side (``_end``), held until they are.
        self._ending: set[asyncio.Task[None]] = set()
        #: ... and which they are: what their edge still relays for them is
        #: dropped, not refused — a refusal (1012) would overtake their close.
        self._ending_conns: set[tuple[str, int]] = set()
        self._edges_seen: dict[str, float] = {}
        self._subs: list[Any] = []
        self._ticker: asyncio.Task[None] | None = None
        self.relayed_frames = 0

    @property
    def connections(self) -> int:
        return len(self._remotes)

    async def start(self) -> None:
        subjects = self._subjects
        if self._owner is not None:
            listen = subjects.owner_all(self.node)
            self._subs.append(await self._nc.subscribe(listen, cb=self._on_message))
            await self._nc.flush()
            self._ticker = asyncio.get_running_loop().create_task(
                self._watch_edges(self._owner), name="relay-owner"
            )
            return
        self._subs.append(
            await self._nc.subscribe(subjects.primary_all(self.epoch), cb=self._on_message)
        )
        self._subs.append(await self._nc.subscribe(subjects.hb_edge, cb=self._on_edge_heartbeat))
        await self._beat()
        try:
            # The record edges read when they start and watch for a change: a
            # new primary is known at once, not a heartbeat later.
            record = await primary_record(self._nc)
            value = b"%s %d" % (self.node.encode(), self.epoch)
            if self._signer is not None:
                value = self._signer.seal(subjects.record, value)
            await record.put(subjects.primary_key, value)
        except NatsError as error:
            log.warning("cannot write the primary's record (JetStream)", error=str(error))
        await self._nc.flush()
        self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="relay-primary")

    async def stop(self) -> None:
        """Stop listening; relayed connections are closed by the host (1001 on shutdown)."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for sub in self._subs:
            with contextlib.suppress(NatsError):  # the bus may be gone already
                await sub.unsubscribe()
        self._subs.clear()
        for remote in list(self._remotes.values()):
            await self._drop(remote)
        if self._ending:  # connections closing from this side: let them finish
            await asyncio.gather(*self._ending, return_exceptions=True)
        for link in self._links.values():  # what was put (closes above all) goes out
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    await link.drain()
            await link.stop()
        self._links.clear()

    async def _beat(self) -> None:
        beat = b"%s %d" % (self.node.encode(), self.epoch)
        await send(self._nc, self._subjects.hb_primary, beat, self._signer)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat)
            try:
                await self._beat()
            except NatsError as error:  # the bus reconnects by itself
                log.warning("primary heartbeat failed", error=str(error))
            now = time.monotonic()
            for edge, seen in list(self._edges_seen.items()):
                if now - seen > self._edge_timeout:
                    del self._edges_seen[edge]
                    gone = [r for r in self._remotes.values() if r.edge == edge]
                    if gone:
                        log.warning("edge silent: dropping its clients", edge=edge, n=len(gone))
                    for remote in gone:
                        await self._drop(remote)
                    link = self._links.pop(edge, None)
                    if link is not None:
                        await link.stop()

    async def _watch_edges(self, owner: OwnerRole) -> None:
        """Owner role: drop the forwarded clients of nodes no longer alive."""
        while True:
            await asyncio.sleep(owner.check_every)
            for edge in {remote.edge for remote in self._remotes.values()}:
                if not owner.alive(edge):
                    gone = [r for r in self._remotes.values() if r.edge == edge]
                    log.warning("node silent: dropping its forwarded clients", edge=edge)
                    for remote in gone:
                        await self._drop(remote)
                    link = self._links.pop(edge, None)
                    if link is not None:
                        await link.stop()

    def _reply(self, edge: str) -> str:
        return self._subjects.edge(edge) if self._owner is None else self._subjects.routed(edge)

    async def _on_edge_heartbeat(self, msg: _Msg) -> None:
        beat = unsealed(self._signer, self._warnings, msg.subject, msg.data)
        if beat is not None:
            self._edges_seen[beat.decode(errors="replace")] = time.monotonic()

    async def _on_message(self, msg: _Msg) -> None:
        data = unsealed(self._signer, self._warnings, msg.subject, msg.data)
        if data is None:
            return
        edge = msg.subject.rsplit(".", 1)[-1]
        self._edges_seen[edge] = time.monotonic()
        try:
            kind, conn, n, _, payload = decode(data)
        except ValueError:
            log.warning("malformed relay message dropped", edge=edge)
            return
        if kind not in FROM_EDGE:
            log.warning("relay message of an unknown kind dropped", edge=edge, kind=kind)
            return
        key = (edge, conn)
        remote = self._remotes.get(key)
        if kind == "o":
            identity = self._fresh(edge, payload)
            if identity is None:  # stale or replayed: whatever runs under that number stays
                return
            if remote is not None:
                await self._drop(remote)
            refused = self._open(edge, conn, identity)
            if refused == "bad identity":
                log.warning("relayed open with a bad identity refused", edge=edge, conn=conn)
                await self._refuse(edge, conn, b"bad open")
            elif refused is not None:
                self._warnings.warn("relayed open refused", refused, edge=edge, why=refused)
                self._refuse_policy(edge, conn, refused)
            return
        if remote is None:
            # An edge still relaying a connection this primary does not have
            # (but one it is closing gets its own close).
            if kind != "x" and key not in self._ending_conns:
                await self._refuse(edge, conn, b"unknown connection")
            return
        if n <= remote.n:  # NATS never repeats a message: a replay, which changes nothing
            self._warnings.warn("replayed relay message dropped", edge=edge)
            return
        if n != remote.n + 1:
            log.warning("relay gap: closing the connection", edge=edge, conn=conn)
            self._end(remote, CLOSE_RELAY_GAP, "relay lost frames: reconnect")
            return
        remote.n = n
        if kind == "k":
            if not remote.pieces.add(payload):
                log.warning("relayed frame over the size limit", edge=edge, conn=conn)
                self._end(remote, CLOSE_TOO_BIG, "message too big")
            return
        payload = remote.pieces.join(payload)
        if kind == "x":
            await self._drop(remote)
            return
        if len(payload) > self._max_message:  # the last piece counts too
            log.warning("relayed frame over the size limit", edge=edge, conn=conn)
            self._end(remote, CLOSE_TOO_BIG, "message too big")
            return
        try:
            remote.inbox.put_nowait((kind, payload))
        except asyncio.QueueFull:
            log.warning("relayed client outran the primary", edge=edge, conn=conn)
            self._end(remote, CLOSE_TRY_AGAIN, "too many frames in flight")

    async def _refuse(self, edge: str, conn: int, why: bytes) -> None:
        """Tell an edge to close ``conn`` with 1012 (``x`` numbered 0: outside any sequence).

        By the edge's link when it has one, so that it comes after whatever that
        connection was sent before (a close with the real reason, say).
        """
        data = encode("x", conn, 0, b"%d %s" % (CLOSE_PRIMARY_GONE, why), self.epoch)
        link = self._links.get(edge)
        if link is not None:
            link.put_message(data)
        else:
            await send(self._nc, self._reply(edge), data, self._signer)

    def _fresh(self, edge: str, payload: bytes) -> bytes | None:
        """A signed open's identity, if the open is fresh and new (else None, logged)."""
        if self._guard is None:
            return payload
        parsed = parse_fresh_open(payload)
        if parsed is None:
            self._warnings.warn("relayed open refused", "no stamp", edge=edge, why="no stamp")
            return None
        stamp, nonce, identity = parsed
        now = self._clock_ms()
        why = self._guard.admit(stamp, nonce, now)
        if why is not None:
            # A replay, or an edge whose clock is off by more than the bound.
            self._warnings.warn(
                "relayed open refused", why, edge=edge, why=why, skew_ms=now - stamp
            )
            return None
        return identity

    def _link(self, edge: str) -> EdgeLink:
        link = self._links.get(edge)
        if link is None:
            link = self._links[edge] = EdgeLink(
                self._nc,
                self._reply(edge),
                self.epoch,
                max_bytes=LINK_MAX_BYTES,
                signer=self._signer,
            )
        return link

    def _refuse_policy(self, edge: str, conn: int, why: str) -> None:
        """Tell an edge to close ``conn`` with 1008: the first (and last) message it gets."""
        link = self._link(edge)
        link.put("x", conn, b"%d %s" % (CLOSE_POLICY, why.encode()))
        link.forget(conn)

    def _open(self, edge: str, conn: int, payload: bytes) -> str | None:
        """A relayed connection; else why not (nothing opened).

        ``"bad identity"``: unreadable. In multi-user mode a connection is one of
        this node's users, an admin only if this node says so; no identity, or
        a user it does not know, is refused (never the view of everything).
        """
        user_text, _, admin_flag = payload.partition(b"\n")
        try:
            user = user_text.decode() if user_text else None
        except UnicodeDecodeError:
            return "bad identity"
        admin = admin_flag == b"1"
        if self._users is not None:
            if user is None:
                return "no identity (multi-user mode)"
            if user not in self._users:
                return "unknown user"
            admin = self._users[user]
        link = self._link(edge)
        owner = self._owner
        transport = BusTransport(link, conn) if owner is None else owner.transport(link, conn)
        connection = self._sink.open(transport)
        connection.forwarded = owner is not None
        if user is not None:
            connection.user = user
            connection.admin = admin
        remote = _Remote(
            edge, conn, connection, asyncio.Queue(self._inbox), Pieces(self._max_message)
        )
        self._remotes[(edge, conn)] = remote
        remote.task = asyncio.get_running_loop().create_task(
            self._feed(remote), name=f"relay {edge}/{conn}"
        )
        return None

    async def _feed(self, remote: _Remote) -> None:
        """One relayed connection's frames into the gateway, in order (its reader task)."""
        structlog.contextvars.bind_contextvars(conn=remote.connection.id, edge=remote.edge)
        try:
            while True:
                kind, payload = await remote.inbox.get()
                self.relayed_frames += 1
                try:
                    frame: str | bytes = payload.decode() if kind == "t" else payload
                except UnicodeDecodeError:
                    # What the door answers a text frame that is not UTF-8 with.
                    self._end(remote, CLOSE_INVALID_DATA, "invalid UTF-8")
                    return
                await self._sink.handle_frame(remote.connection, frame)
        except asyncio.CancelledError:
            raise
        except Exception:  # task boundary: one connection's failure is its own
            log.exception("relayed connection failed", edge=remote.edge)
            self._end(remote, CLOSE_RELAY_GAP, "internal error")

    def _end(self, remote: _Remote, code: int, reason: str) -> None:
        """Close a relayed connection from this side, and forget it.

        It is forgotten at once (later messages for it are dropped until its
        close is sent); in a task of its own, what its outbox holds goes
        first, then the ``x`` with ``code`` reaches the edge, then the host
        lets go of it — never blocking the subscription that feeds every
        connection.
        """
        key = (remote.edge, remote.conn)
        if self._remotes.get(key) is remote:
            del self._remotes[key]
        self._ending_conns.add(key)
        task = asyncio.get_running_loop().create_task(
            self._finish(remote, code, reason), name=f"relay end {remote.edge}/{remote.conn}"
        )
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def _finish(self, remote: _Remote, code: int, reason: str) -> None:
        feeder = remote.task
        if feeder is not None and feeder is not asyncio.current_task():
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeder
        try:
            await remote.connection.flush_and_close(code, reason, grace=2.0)
        finally:
            self._ending_conns.discard((remote.edge, remote.conn))
        await self._sink.close(remote.connection)
        self._forget(remote)

    async def _drop(self, remote: _Remote) -> None:
        if self._remotes.get((remote.edge, remote.conn)) is not remote:
            return
        del self._remotes[(remote.edge, remote.conn)]
        if remote.task is not None:
            remote.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await remote.task
        await self._sink.close(remote.connection)
        self._forget(remote)

    def _forget(self, remote: _Remote) -> None:
        link = self._links.get(remote.edge)
        if link is not None:
            link.forget(remote.conn)


# -- the edge's side -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Relayed:
    """One client of this edge, relayed to the primary of ``epoch``."""

    id: int
    epoch: int
    connection: Connection
    pieces: Pieces
    n_out: int = 0
    n_in: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    #: Being closed: what the primary sends it from now on is dropped.
    closing: bool = False


class EdgeRelay:
    """An edge's end: its clients' frames to the primary, the primary's back to them."""

    def __init__(
        self,
        nc: _Nats,
        subjects: Subjects,
        node: str,
        *,
        heartbeat: float,
        primary_timeout: float,
        max_frames: int,
        max_bytes: int,
        budget: OutboxBudget | None = None,
        on_primary: Callable[[str, int], None] | None = None,
        signer: Signer | None = None,
    ) -> None:
        self._nc = nc
        #: The node's host-wide outbox budget: its relayed clients count in it.
        self._budget = budget
        self._subjects = subjects
        self.node = node
        self._signer = signer
        self._warnings = BusWarnings()
        self._heartbeat = heartbeat
        self._primary_timeout = primary_timeout
        self._max_frames = max_frames
        self._max_bytes = max_bytes
        self._on_primary = on_primary
        #: The primary this edge relays to: (node, epoch), or None while none is known.
        self.primary: tuple[str, int] | None = None
        self._primary_seen = 0.0
        self._relayed: dict[int, _Relayed] = {}
        # Signed, connection numbers start anywhere in 48 bits, anew at each
        # start: a message captured from an earlier run of this node never
        # names a connection of this one (relay_format.py).
        self._ids = 0 if signer is None else secrets.randbits(48)
        self._closers: set[asyncio.Task[None]] = set()  # strong references
        self._subs: list[Any] = []
        self._ticker: asyncio.Task[None] | None = None
        self._watcher: Any = None
        self._watching: asyncio.Task[None] | None = None
        self._rewatching: asyncio.Task[None] | None = None
        #: False once this node serves clients itself (it became the primary).
        self.active = True
        #: The bus went away and nats-py has not finished reconnecting (bus_lost).
        self._bus_away = False

    @property
    def ready(self) -> bool:
        """A primary is known and the bus is here: new clients can be relayed."""
        return self.active and self.primary is not None and not self._bus_away

    def bus_lost(self) -> None:
        """The bus went away (nats-py's disconnect): not ready until :meth:`bus_reconnected`.

        nats-py delivers messages again — the primary's heartbeats among them —
        before it calls back that it has reconnected, and the reconnect then
        closes every relayed client (``Node._bus_reconnected``): a client let
        in meanwhile would be closed at once.
        """
        self._bus_away = True

    @property
    def connections(self) -> int:
        return len(self._relayed)

    async def start(self) -> None:
        subjects = self._subjects
        self._subs.append(await self._nc.subscribe(subjects.edge(self.node), cb=self._on_message))
        self._subs.append(
            await self._nc.subscribe(subjects.hb_primary, cb=self._on_primary_heartbeat)
        )
        await send(self._nc, subjects.hb_edge, self.node.encode(), self._signer)
        await self._nc.flush()
        loop = asyncio.get_running_loop()
        self._ticker = loop.create_task(self._tick(), name="relay-edge")
        try:
            record = await primary_record(self._nc)
            self._watcher = await record.watch(subjects.primary_key)
        except NatsError as error:
            log.warning("cannot watch the primary's record (JetStream)", error=str(error))
        else:
            self._watching = loop.create_task(self._watch(self._watcher), name="relay-record")

    async def _watch(self, watcher: Any) -> None:
        """The primary's record in JetStream: its current value, then every change."""
        try:
            async for entry in watcher:
                if entry is not None and entry.value:
                    value = unsealed(
                        self._signer, self._warnings, self._subjects.record, bytes(entry.value)
                    )
                    found = None if value is None else parse_primary(value)
                    if found is not None:
                        self._announced(*found)
        except NatsError as error:
            log.warning("watching the primary's record stopped", error=str(error))

    def bus_reconnected(self) -> None:
        """The bus is back (nats-py reconnected): watch the primary's record afresh.

        nats-py restores core subscriptions by itself, but after a NATS server
        restart the watch's ordered consumer stays deaf until its idle
        heartbeats time out (about 15 s): a new primary's record would be
        missed meanwhile (heartbeats would still find it, a heartbeat later).
        The edge is ready again (once a primary is known).
        """
        self._bus_away = False
        if not self.active or (self._rewatching is not None and not self._rewatching.done()):
            return
        self._rewatching = asyncio.get_running_loop().create_task(
            self._rewatch(), name="relay-record-rewatch"
        )

    async def _rewatch(self) -> None:
        """A new watch of the record (retried: JetStream may not be up yet), then the old stops."""
        while True:
            try:
                record = await primary_record(self._nc)
                watcher = await record.watch(self._subjects.primary_key)
                break
            except NatsError as error:  # also a timeout: JetStream is not answering yet
                log.warning("cannot watch the primary's record again; retrying", error=str(error))
                await asyncio.sleep(self._heartbeat)
        old_watcher, old_watching = self._watcher, self._watching
        self._watcher = watcher
        self._watching = asyncio.get_running_loop().create_task(
            self._watch(watcher), name="relay-record"
        )
        if old_watching is not None:
            old_watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await old_watching
        if old_watcher is not None:
            with contextlib.suppress(NatsError):
                await old_watcher.stop()
        log.info("watching the primary's record again")

    async def stop(self, code: int = CLOSE_PRIMARY_GONE, reason: str = "node stopping") -> None:
        self.active = False
        if self._rewatching is not None:
            self._rewatching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rewatching
            self._rewatching = None
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching
            self._watching = None
        if self._watcher is not None:
            with contextlib.suppress(NatsError):
                await self._watcher.stop()
            self._watcher = None
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        for sub in self._subs:
            with contextlib.suppress(NatsError):  # the bus may be gone already
                await sub.unsubscribe()
        self._subs.clear()
        self.drop_all(code, reason)

    def drop_all(self, code: int, reason: str) -> None:
        """Close every relayed client (they reconnect, to this node or another)."""
        for relayed in list(self._relayed.values()):
            relayed.closing = True
            relayed.connection.close(code, reason)
            relayed.done.set()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat)
            try:
                await send(self._nc, self._subjects.hb_edge, self.node.encode(), self._signer)
            except NatsError as error:  # the bus reconnects by itself
                log.warning("edge heartbeat failed", error=str(error))
            if (
                self.primary is not None
                and time.monotonic() - self._primary_seen > self._primary_timeout
            ):
                log.warning("primary silent: closing relayed clients", primary=self.primary[0])
                self.primary = None
                self.drop_all(CLOSE_PRIMARY_GONE, "primary unavailable: reconnect")

    async def _on_primary_heartbeat(self, msg: _Msg) -> None:
        beat = unsealed(self._signer, self._warnings, msg.subject, msg.data)
        found = None if beat is None else parse_primary(beat)
        if found is not None:
            self._announced(*found)

    def _announced(self, node_text: str, epoch: int) -> None:
        """A primary made itself known (heartbeat or record): follow the newest epoch."""
        current = self.primary
        if current is not None and epoch < current[1]:
            return  # a deposed primary still beating: ignore it
        self._primary_seen = time.monotonic()
        if current is None or epoch > current[1]:
            if current is not None:
                log.info("primary changed: closing relayed clients", primary=node_text, epoch=epoch)
                self.drop_all(CLOSE_PRIMARY_GONE, "primary changed: reconnect")
            self.primary = (node_text, epoch)
            log.info("relaying to the primary", primary=node_text, epoch=epoch)
            if self._on_primary is not None:
                self._on_primary(node_text, epoch)

    async def _on_message(self, msg: _Msg) -> None:
        data = unsealed(self._signer, self._warnings, msg.subject, msg.data)
        if data is None:
            return
        try:
            kind, conn, n, epoch, payload = decode(data)
        except ValueError:
            log.warning("malformed relay message dropped")
            return
        if kind == "g":
            self._on_group(epoch, payload)
            return
        self._receive(kind, conn, n, epoch, payload)

    def _on_group(self, epoch: int | None, payload: bytes) -> None:
        """The same frames for several clients (:func:`unpack_group`)."""
        try:
            targets, data, frames = unpack_group(payload)
        except ValueError:
            log.warning("malformed relay group dropped")
            return
        for conn, n in targets:
            self._receive("f", conn, n, epoch, data, frames)

    def _receive(
        self,
        kind: str,
        conn: int,
        n: int,
        epoch: int | None,
        payload: bytes,
        frames: list[bytes] | None = None,
    ) -> None:
        """One message for one client (``frames``: already unpacked, from a group)."""
        relayed = self._relayed.get(conn)
        if relayed is None or epoch != relayed.epoch or relayed.closing:
            return  # a closed connection's, or a deposed primary's
        if n == 0 and kind == "x":  # the primary does not know it
            self._end(relayed, CLOSE_PRIMARY_GONE, "primary changed: reconnect")
            return
        if n <= relayed.n_in:  # NATS never repeats a message: a replay, which changes nothing
            self._warnings.warn("replayed relay message dropped")
            return
        if n != relayed.n_in + 1:
            # What came before the gap is whole and in order: it goes out first.
            log.warning("relay gap: closing the client", conn=conn)
            self._end(relayed, CLOSE_PRIMARY_GONE, "relay lost frames: reconnect")
            return
        relayed.n_in = n
        if kind == "k":
            if not relayed.pieces.add(payload):
                relayed.closing = True
                relayed.connection.close(CLOSE_TRY_AGAIN, "too far behind: reconnect to resume")
                relayed.done.set()
            return
        payload = relayed.pieces.join(payload)
        if kind == "f":
            try:
                if frames is None:
                    frames = unpack_frames(payload)
            except ValueError:
                log.warning("unreadable frames from the primary: closing the client", conn=conn)
                self._end(relayed, CLOSE_PRIMARY_GONE, "relay error: reconnect")
                return
            for frame in frames:
                relayed.connection.send(frame)
        elif kind == "x":
            code_text, _, reason = payload.partition(b" ")
            code = int(code_text) if code_text.isdigit() else CLOSE_PRIMARY_GONE
            if not sendable(code):  # 1005, 1006, 1015 or out of range: a close frame can't
                code = CLOSE_PRIMARY_GONE
            self._end(relayed, code, reason.decode(errors="replace"))

    def _end(self, relayed: _Relayed, code: int, reason: str) -> None:
        """Close a client once what it was sent before has gone out (bounded)."""
        relayed.closing = True
        task = asyncio.get_running_loop().create_task(
            self._close_after_flush(relayed, code, reason), name=f"relay-close {relayed.id}"
        )
        self._closers.add(task)
        task.add_done_callback(self._closers.discard)

    async def _close_after_flush(self, relayed: _Relayed, code: int, reason: str) -> None:
        # What the primary sent before its close goes out first (e.g. -32005, then 1008).
        try:
            await relayed.connection.flush_and_close(code, reason, grace=2.0)
        finally:
            relayed.done.set()

    async def serve(
        self, websocket: ServerConnection, transport: Transport, user: tuple[str, bool] | None
    ) -> None:
        """Relay one client for as long as its socket and the primary last."""
        primary = self.primary
        if primary is None:
            await websocket.close(CLOSE_PRIMARY_GONE, "no primary: try again")
            return
        self._ids += 1
        connection = Connection(
            transport, max_frames=self._max_frames, max_bytes=self._max_bytes, budget=self._budget
        )
        connection.start()
        relayed = _Relayed(self._ids, primary[1], connection, Pieces(self._max_bytes))
        self._relayed[relayed.id] = relayed
        subject = self._subjects.primary(primary[1], self.node)
        opening = b"" if user is None else user[0].encode() + b"\n" + (b"1" if user[1] else b"")
        if self._signer is not None:  # fresh, once: the primary refuses a replay
            stamp = time.time_ns() // 1_000_000
            opening = fresh_open(opening, stamp, secrets.token_hex(16).encode())
        signer = self._signer
        try:
            try:
                relayed.n_out = await publish(
                    self._nc,
                    subject,
                    "o",
                    relayed.id,
                    relayed.n_out + 1,
                    opening,
                    None,
                    signer=signer,
                )
            except NatsError as error:
                log.warning("bus unavailable: refusing a relayed client", error=str(error))
                await websocket.close(CLOSE_PRIMARY_GONE, "bus unavailable: try again")
                return
            reader = asyncio.ensure_future(self._read(websocket, relayed, subject))
            ended = asyncio.ensure_future(relayed.done.wait())
            try:
                await asyncio.wait({reader, ended}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (reader, ended):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                        await task
            if relayed.done.is_set() and connection.close_code is not None:
                with contextlib.suppress(ConnectionClosed, OSError):  # already gone
                    await websocket.close(connection.close_code, "")
        finally:
            del self._relayed[relayed.id]
            if self.primary is not None and self.primary[1] == relayed.epoch:
                with contextlib.suppress(NatsError):  # the bus may be gone already
                    await publish(
                        self._nc,
                        subject,
                        "x",
                        relayed.id,
                        relayed.n_out + 1,
                        b"",
                        None,
                        signer=signer,
                    )
            await connection.stop()

    async def _read(self, websocket: ServerConnection, relayed: _Relayed, subject: str) -> None:
        nc = self._nc
        signer = self._signer
        try:
            async for frame in websocket:
                kind, data = ("t", frame.encode()) if isinstance(frame, str) else ("b", frame)
                relayed.n_out = await publish(
                    nc, subject, kind, relayed.id, relayed.n_out + 1, data, None, signer=signer
                )
        except NatsError as error:
            # The bus is down (nats-py reconnects by itself; its buffer is full or
            # it gave up): this client's frames cannot reach the primary. Close it
            # with 1012 so it comes back once a path exists, rather than hang.
            log.warning("bus unavailable: closing a relayed client", error=str(error))
            relayed.connection.close(CLOSE_PRIMARY_GONE, "bus unavailable: reconnect")

"""Sharded mode: a client's requests for another node's sessions, forwarded to their owner.

Layer: transport (nats-py; implements ``host/core/routing.py``'s ``Router``).
docs/scale-out.md "Routing: commands to the owner, envelopes back on the feed".

The node holding a client's socket runs the gateway for it. A request whose
channel belongs to a session another node owns (``host/core/routing.py``
``ROUTED``) goes to that node over a **route**: one relayed connection per
(client connection, owner), opened on first use with the client's identity in
a signed, fresh open and its ``initialize`` replayed (answer swallowed). The
owner's end is the relay's :class:`~ahp_server.transport.relay.PrimaryRelay`
in its :class:`~ahp_server.transport.relay.OwnerRole`: the route is a
connection of the owner's own gateway (``forwarded``), so the owner decides
everything — access, limits, rejections — exactly as for a local socket.

What comes back on the route is answers and rejections only: the owner's
:class:`StampedTransport` drops envelopes (the client's node delivers every
envelope from its feed, in ``serverSeq`` order with everyone else's) and puts
the owner's watermark before each batch. The client's node holds what comes
back until its own watermark has reached that mark (``NodeFeed.when``), so an
answer or a rejection never overtakes an envelope the owner had delivered
before it — the echo of the client's earlier dispatch, a chat's
``chat/turnsLoaded`` before the ``fetchTurns`` answer.

A route that fails — the owner went silent or restarted, the relay lost a
message, an answer did not come within ``timeout`` — closes the client with
1012: it reconnects (to any node) and replays from its last number, as after a
node's loss. Owners are found in PostgreSQL (``ShardedStore.locate``) and
cached per session until a route to that node fails, its heartbeat stops, or it says
it leaves (a graceful stop, ``Routes.check``).
New sessions are placed on the least-loaded live node (heartbeat load: running
turns, then sessions, then this node); one whose route cannot be opened within
``open_timeout`` is :class:`~ahp_server.host.core.routing.Unreachable` — the
client stays, and the next candidate is tried (docs/scale-out.md "Placement").
File requests (``resource*``, ``createResourceWatch``) take the same routes to a node
serving their paths, when this one does not (``resource_routes.py`` decides which).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import structlog
from msgspec import UNSET, UnsetType
from nats.errors import Error as NatsError

from ahp_server.host.core import edge as legacy_edge
from ahp_server.host.core.fanout import CLOSE_SERVICE_RESTART, Connection, ConnState, Transport
from ahp_server.host.core.routing import Unreachable
from ahp_server.host.core.sequencer import action_frame
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol.errors import InternalError, ProtocolError
from ahp_server.protocol.uris import (
    CHANGESET_SCHEME,
    default_chat_session,
    parse_chat_changeset,
    session_of,
)
from ahp_server.protocol.versions import SUPPORTED_VERSIONS
from ahp_server.store.base import StoreError
from ahp_server.store.ownership import Node, choose_owner
from ahp_server.store.sharded import ROOT, ShardedStore
from ahp_server.transport.node_feed import NodeFeed
from ahp_server.transport.node_heartbeat import Beat
from ahp_server.transport.relay import (
    BusTransport,
    BusWarnings,
    EdgeLink,
    publish,
    unpack_group,
    unsealed,
)
from ahp_server.transport.relay_format import (
    Pieces,
    Signer,
    Subjects,
    decode,
    fresh_open,
    unpack_frames,
)
from ahp_server.transport.resource_routes import request_paths, serves, serving_node
from ahp_server.workspace.paths import inside

__all__ = ["Placement", "Routes", "StampedTransport"]

log = structlog.get_logger(__name__)

_Nats = Any
Placement = Literal["least-loaded", "local"]

#: Seconds a channel the catalogue did not have is answered here without reading it again.
UNKNOWN_FOR = 1.0
#: The most such channels remembered (past it, all are forgotten).
UNKNOWN_MAX = 10_000
#: Seconds the nodes' declared roots, read for a file request, are used without reading again.
NODES_FOR = 1.0
#: The most resource watches made elsewhere whose node is remembered (the oldest forgotten).
WATCHES_MAX = 10_000

_ACTION = b'{"jsonrpc":"2.0","method":"action","params":'
_REJECTED = b',"rejectionReason":'
#: The newest version: what a route negotiates (this node translates for a 0.7 client).
_VERSION = SUPPORTED_VERSIONS[0]


class StampedTransport:
    """The owner's end of a route: answers and rejections, each batch after the owner's
    watermark (``@<n>``); envelopes are dropped (the client's node has them from its feed)."""

    def __init__(self, link: EdgeLink, conn: int, watermark: Callable[[], int]) -> None:
        self._bus = BusTransport(link, conn)
        self._watermark = watermark

    async def send_text(self, frame: bytes) -> None:
        await self.send_texts([frame])

    async def send_texts(self, frames: list[bytes]) -> None:
        kept = [f for f in frames if not f.startswith(_ACTION) or _REJECTED in f]
        if kept:
            await self._bus.send_texts([b"@%d" % self._watermark(), *kept])

    async def close(self, code: int, reason: str) -> None:
        await self._bus.close(code, reason)

    def abort(self) -> None:
        self._bus.abort()


class _Error(msgspec.Struct):
    code: int
    message: str
    data: Any = None


class _Frame(msgspec.Struct):
    """What a node reads of a frame on a route: a response's id and outcome, or a method."""

    id: int | str | None = None
    method: str | UnsetType = UNSET
    result: msgspec.Raw | UnsetType = UNSET
    error: _Error | None = None


_FRAME = msgspec.json.Decoder(_Frame)


class _Made(msgspec.Struct):
    """What a ``createSession`` / ``createChat`` made: its channel, and the new chat."""

    channel: str = ""
    chat: str = ""


_MADE = msgspec.json.Decoder(_Made)


class _Moved(msgspec.Struct):
    """What a ``moveChat`` answered: the session holding the chat now."""

    session: str


_MOVED = msgspec.json.Decoder(_Moved)


@dataclass(slots=True, eq=False)
class _Route:
    """One client connection's relayed connection to one owner."""

    id: int
    node: str
    connection: Connection
    subject: str
    pieces: Pieces
    n_out: int = 0
    n_in: int = 0
    requests: int = 0
    pending: dict[int, asyncio.Future[_Frame]] = field(default_factory=dict)
    #: What came back, with the owner's watermark, not yet handed over.
    held: deque[tuple[int, bytes]] = field(default_factory=deque)
    waiting: bool = False
    closed: bool = False
    opened: asyncio.Lock = field(default_factory=asyncio.Lock)
    ready: bool = False
    #: Being opened for a ``createSession``: failing, it leaves the client open
    #: (placement tries the next node).
    placing: bool = False


class Routes:
    """One sharded node's routes to the owners of other nodes' sessions (the ``Router``)."""

    def __init__(
        self,
        nc: _Nats,
        subjects: Subjects,
        node: str,
        host: Host,
        store: ShardedStore,
        feed: NodeFeed,
        peers: Callable[[], dict[str, Beat]],
        silent: Callable[[str], bool],
        *,
        signer: Signer | None,
        max_bytes: int,
        timeout: float = 30.0,
        open_timeout: float | None = None,
        check_every: float = 1.0,
        catch_up: float = 5.0,
        placement: Placement = "least-loaded",
        turns: Callable[[], int] = lambda: 0,
        nodes: Callable[[], Awaitable[list[Node]]] | None = None,
        roots: Sequence[str] = (),
        declared: Callable[[], Awaitable[list[tuple[Node, bool]]]] | None = None,
    ) -> None:
        """``nodes``: the live nodes with their roots (``Ownership.live_nodes``);
        ``declared``: every node's roots and whether it is live (``Ownership.declared_roots``:
        where a file request goes);
        ``roots``: the roots this node serves; ``timeout``: seconds a request waits for
        its answer; ``open_timeout``: seconds a route opened for a ``createSession``
        waits for the node's answer before the next candidate is tried (default
        ``timeout``)."""
        self._nc = nc
        self._subjects = subjects
        self.node = node
        self._host = host
        self._store = store
        self._feed = feed
        self._peers = peers
        self._silent = silent
        self._signer = signer
        self._max_bytes = max_bytes
        self._timeout = timeout
        self._open_timeout = timeout if open_timeout is None else open_timeout
        self._check_every = check_every
        self._catch_up = catch_up
        self._placement = placement
        self._turns = turns
        self._roots = tuple(roots)
        self._live_nodes = nodes
        self._declared = declared
        #: The nodes' declared roots as last read (for :data:`NODES_FOR`), and when.
        self._declared_rows: list[tuple[Node, bool]] = []
        self._declared_at = -NODES_FOR
        #: Resource watches made on another node for a client of this one: that node.
        self._watch_nodes: dict[str, str] = {}
        self._warnings = BusWarnings()
        # Route numbers start anywhere in 48 bits at each start (as the relay's).
        self._ids = 0 if signer is None else secrets.randbits(48)
        self._routes: dict[tuple[int, str], _Route] = {}
        self._by_id: dict[int, _Route] = {}
        #: session -> the node owning it, as last read (dropped when a route to it fails).
        self._owners: dict[str, str] = {}
        #: Channels the catalogue did not have, and when that was read (bounded).
        self._unknown: dict[str, float] = {}
        #: The nodes that reported terminals and are silent now.
        self._silent_nodes: frozenset[str] = frozenset()
        self._sub: Any = None
        self._ticker: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: Requests forwarded, and routes failed (closing their client).
        self.forwarded = 0
        self.failed = 0
        #: Nodes placement chose whose route could not be opened (the next was tried).
        self.unreachable = 0

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(self._subjects.routed(self.node), cb=self._on_message)
        self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="routes")

    async def aclose(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for route in list(self._by_id.values()):
            self._fail(route, "node stopping", close_client=False)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._sub is not None:
            with contextlib.suppress(NatsError):
                await self._sub.unsubscribe()
            self._sub = None

    def alive(self, node: str) -> bool:
        """Whether ``node`` may be answering: this node, one heard lately, or one not heard
        yet (a node starting hears the others within a heartbeat; a dead one's lease,
        which ``owner`` reads, says so before that)."""
        return node == self.node or not self._silent(node)

    # -- Router -------------------------------------------------------------------------------

    async def owner(
        self,
        method: str,
        channel: str,
        *,
        directory: str | None = None,
        exclude: frozenset[str] = frozenset(),
    ) -> str | None:
        if method == "createSession":
            return await self._place(directory, exclude)
        if channel == ROOT and method == "dispatchAction":
            return await self._root_owner()
        changeset = channel.startswith(CHANGESET_SCHEME)
        if channel == ROOT or (channel in self._host.workspace_channels and not changeset):
            return None  # the root and this node's terminals and watches
        terminal = self._host.terminal_node(channel)
        if terminal is not None:
            return self._terminal_owner(channel, terminal)
        watching = self._watch_nodes.get(channel)
        if watching is not None:
            return self._watch_owner(channel, watching)
        # A changeset is its session's channel (a chat's: its chat's, wherever that moved),
        # whichever node loaded it (docs/scale-out.md "Routing").
        channel = parse_chat_changeset(channel) or channel
        session = self._host.session_of_channel(channel)
        if session is not None:
            if session in self._store.held:
                return None
            cached = self._owners.get(session)
            if cached is not None:
                return cached
        unknown_since = self._unknown.get(channel)
        if unknown_since is not None and time.monotonic() - unknown_since < UNKNOWN_FOR:
            return None
        named = session or session_of(channel) or default_chat_session(channel)
        located = await self._store.locate(channel, named)
        rows, owner, live = located.rows, located.owner, located.live
        if owner is None and not rows:
            # Nobody has it: this node answers (not found), and does not ask the
            # database again for a while (a client repeating it costs no reads).
            if len(self._unknown) >= UNKNOWN_MAX:
                self._unknown.clear()
            self._unknown[channel] = time.monotonic()
            return None
        self._unknown.pop(channel, None)
        self._host.learn(rows)
        session = located.session
        if owner is None or owner == self.node or session is None:
            return None
        if not live or not self.alive(owner):
            directory = located.directory
            if directory is not None and not any(
                inside(directory, root) for node in await self._nodes() for root in node.roots
            ):
                # docs/scale-out.md "Working directories": it cannot move.
                raise InternalError(
                    f"{session} is on node {owner}, which is not answering, and its working "
                    f"directory {directory} is on no other live node: it cannot move until "
                    f"{owner} (or a node serving that directory) is back"
                )
            raise InternalError(
                f"{session} is on node {owner}, which is not answering: it moves to another "
                "node within cluster.lease_ttl, try again"
            )
        self._owners[session] = owner
        return owner

    def _terminal_owner(self, channel: str, node: str) -> str:
        """The node that reported the terminal ``channel`` (its ``node/terminals`` notice):
        a terminal is a channel of no session, and lives and ends with its node
        (docs/scale-out.md "Routing")."""
        if not self.alive(node):
            raise InternalError(
                f"{channel} is a terminal of node {node}, which is not answering: "
                "a terminal ends with its node"
            )
        return node

    def _watch_owner(self, channel: str, node: str) -> str:
        """The node a resource watch made through this one runs on: like a terminal, a
        channel of no session that ends with its node (docs/scale-out.md "Routing")."""
        if not self.alive(node):
            raise InternalError(
                f"{channel} is a resource watch of node {node}, which is not answering: "
                "a watch ends with its node"
            )
        return node

    async def _root_owner(self) -> str | None:
        """The root channel's owner, for a client's action on it: only the owner writes
        the root (docs/scale-out.md "Root state: one view"). ``None``: this node — it
        owns the root, or no live owner is known (the root actor then refuses it)."""
        if ROOT in self._store.held:
            return None
        cached = self._owners.get(ROOT)
        if cached is not None:
            return cached
        located = await self._store.locate(ROOT, ROOT)
        owner = located.owner
        if owner is None or owner == self.node or not located.live or not self.alive(owner):
            return None
        self._owners[ROOT] = owner
        return owner

    def mine(self, channel: str) -> bool:
        if channel == ROOT:
            return ROOT in self._store.held
        if channel in self._host.workspace_channels and not channel.startswith(CHANGESET_SCHEME):
            return True  # this node's terminal or watch: it stays here
        session = self._host.session_of_channel(channel)
        return session is not None and session in self._store.held

    async def request(
        self,
        connection: Connection,
        node: str,
        method: str,
        params: bytes,
        *,
        client: tuple[str, str] | None = None,
    ) -> bytes:
        route = await self._open(connection, node, client, placing=method == "createSession")
        frame = await self._ask(route, method, params)
        self.forwarded += 1
        if frame.error is not None:
            error = frame.error
            raise ProtocolError(error.message, code=error.code, data=error.data)
        if isinstance(frame.result, UnsetType):
            raise InternalError(f"node {node} answered {method} with nothing")
        if method in ("createSession", "createChat"):
            made = _MADE.decode(params)
            for channel in (made.channel, made.chat):
                self._unknown.pop(channel, None)
            if method == "createSession":
                self._owners[made.channel] = node  # where placement put it
        elif method == "moveChat":
            # The chat's session now, on the same node (the owner moves a chat only there).
            session = _MOVED.decode(frame.result).session
            self._host.chat_index[_MADE.decode(params).channel] = session
            self._owners[session] = node
        return bytes(frame.result)

    async def notify(self, connection: Connection, node: str, method: str, params: bytes) -> None:
        route = await self._open(connection, node, None)
        await self._send(
            route, b'{"jsonrpc":"2.0","method":%s,"params":%s}' % (codec.encode(method), params)
        )
        self.forwarded += 1

    async def resource(self, connection: Connection, method: str, params: bytes) -> bytes | None:
        paths = request_paths(params)
        if all(serves(self._roots, path) for path in paths):
            return None  # served here (a shared root, or one of this node's): no hop, no read
        nodes = await self._declared_roots()
        node = serving_node(method, paths, self.node, self._roots, nodes, self.alive)
        if node is None:
            return None
        result = await self.request(connection, node, method, params)
        if method == "createResourceWatch":
            self._remember_watch(_MADE.decode(result).channel, node)
        return result

    async def _declared_roots(self) -> list[tuple[Node, bool]]:
        """Every node's declared roots and liveness, read at most every :data:`NODES_FOR` s."""
        if self._declared is None:
            return []
        if time.monotonic() - self._declared_at >= NODES_FOR:
            try:
                self._declared_rows = await self._declared()
            except StoreError as error:
                raise InternalError(f"cannot read the nodes' roots ({error}): try again") from None
            self._declared_at = time.monotonic()
        return self._declared_rows

    def _remember_watch(self, channel: str, node: str) -> None:
        """``channel``, a watch ``node`` made for a client of this node: its ``subscribe`` and
        ``unsubscribe`` go there (:meth:`owner`). Bounded: the oldest is forgotten first."""
        if len(self._watch_nodes) >= WATCHES_MAX:
            del self._watch_nodes[next(iter(self._watch_nodes))]
        self._watch_nodes[channel] = node

    async def caught_up(self, seq: int) -> bool:
        if seq <= self._feed.delivered:
            return True
        reached: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not reached.done():
                reached.set_result(None)

        self._feed.when(seq, done)
        try:
            async with asyncio.timeout(self._catch_up):
                await reached
        except TimeoutError:
            return False
        return True

    async def client(self, client_id: str) -> tuple[str, str | None] | None:
        return await self._store.client(client_id)

    async def catalogue(self) -> None:
        self._host.learn(await self._store.channels(), whole=True)

    def forget(self, connection: Connection) -> None:
        for key in [k for k in self._routes if k[0] == connection.id]:
            self._fail(self._routes[key], "client gone", close_client=False)

    # -- placement ----------------------------------------------------------------------------

    async def _nodes(self) -> list[Node]:
        if self._live_nodes is None:
            return []
        try:
            return await self._live_nodes()
        except StoreError as error:
            log.warning("cannot read the live nodes", error=str(error))
            return []

    async def _place(self, directory: str | None, exclude: frozenset[str]) -> str | None:
        """The node a new session goes to (docs/scale-out.md "Placement"); ``None``: here.

        Among this node and the live ones (PostgreSQL's node rows: their roots) not in
        ``exclude`` (tried, not answering), those serving a root that holds
        ``directory``; by the load their last heartbeat said. "local" placement keeps a
        session here when this node serves its directory. No node serving it: here,
        whose roots check then refuses it, naming the setting — or, when the nodes
        serving it were tried and did not answer, an error naming them.
        """
        me = Node(self.node, len(self._store.held), self._turns(), self._roots)
        if self._placement == "local" and (
            directory is None or any(inside(directory, root) for root in self._roots)
        ):
            return None
        beats = self._peers()
        nodes = [me]
        for row in await self._nodes():
            if row.node == self.node or row.node in exclude or not self.alive(row.node):
                continue  # a node that left or fell silent is no candidate
            beat = beats.get(row.node)
            sessions, turns = (
                (row.sessions, row.turns) if beat is None else (beat.sessions, beat.turns)
            )
            nodes.append(Node(row.node, sessions, turns, row.roots))
        chosen = choose_owner(nodes, directory, self.node)
        if chosen is None and exclude:
            raise InternalError(
                f"no node serving {directory} answered (tried {', '.join(sorted(exclude))}): "
                "try again"
            )
        return None if chosen in (None, self.node) else chosen

    # -- routes -------------------------------------------------------------------------------

    async def _open(
        self,
        connection: Connection,
        node: str,
        client: tuple[str, str] | None,
        *,
        placing: bool = False,
    ) -> _Route:
        """``connection``'s route to ``node``, opened on first use. ``placing`` (a
        ``createSession``): a route that cannot be opened — no answer within
        ``open_timeout``, the bus failing, the node not knowing it — leaves the client
        open and raises :class:`Unreachable`, so placement tries the next node."""
        if connection.state is ConnState.CLOSING:
            raise InternalError("the connection is closing")
        key = (connection.id, node)
        route = self._routes.get(key)
        if route is None:
            self._ids += 1
            route = _Route(
                self._ids,
                node,
                connection,
                self._subjects.owner(node, self.node),
                Pieces(self._max_bytes),
            )
            self._routes[key] = route
            self._by_id[route.id] = route
        async with route.opened:
            if route.closed:
                raise InternalError(f"the route to node {node} closed: reconnect")
            if route.ready:
                return route
            route.placing = placing
            identity = b""
            if connection.user is not None:
                identity = connection.user.encode() + b"\n" + (b"1" if connection.admin else b"")
            if self._signer is not None:  # fresh, once: the owner refuses a replay
                identity = fresh_open(
                    identity, time.time_ns() // 1_000_000, secrets.token_hex(16).encode()
                )
            try:
                route.n_out = await publish(
                    self._nc, route.subject, "o", route.id, 1, identity, None, signer=self._signer
                )
            except NatsError as error:
                self._fail(route, f"bus unavailable: {error}")
                if placing:
                    self.unreachable += 1
                    raise Unreachable(node, "the bus is unavailable") from None
                raise InternalError("the bus is unavailable: try again") from None
            client_id, version = client or (connection.client_id, connection.protocol_version)
            opening = codec.encode(
                {"channel": ROOT, "protocolVersions": [_VERSION], "clientId": client_id or ""}
            )
            try:
                answer = await self._ask(
                    route,
                    "initialize",
                    opening,
                    within=self._open_timeout if placing else self._timeout,
                )
            except InternalError as error:
                if not placing:
                    raise
                self.unreachable += 1
                raise Unreachable(node, error.message) from None
            if answer.error is not None:
                self._fail(route, "initialize refused", close_client=False)
                raise ProtocolError(answer.error.message, code=answer.error.code)
            route.ready = True
            route.placing = False
            log.debug("route opened", node=node, client_id=client_id, version=version)
        return route

    async def _ask(
        self, route: _Route, method: str, params: bytes, *, within: float | None = None
    ) -> _Frame:
        limit = self._timeout if within is None else within
        route.requests += 1
        number = route.requests
        answered: asyncio.Future[_Frame] = asyncio.get_running_loop().create_future()
        route.pending[number] = answered
        try:
            await self._send(
                route,
                b'{"jsonrpc":"2.0","id":%d,"method":%s,"params":%s}'
                % (number, codec.encode(method), params),
            )
            async with asyncio.timeout(limit):
                return await answered
        except TimeoutError:
            self._fail(route, f"no answer to {method} within {limit:g} s")
            raise InternalError(f"node {route.node} did not answer: reconnect") from None
        finally:
            route.pending.pop(number, None)

    async def _send(self, route: _Route, frame: bytes) -> None:
        if route.closed:
            raise InternalError(f"the route to node {route.node} closed: reconnect")
        try:
            route.n_out = await publish(
                self._nc,
                route.subject,
                "t",
                route.id,
                route.n_out + 1,
                frame,
                None,
                signer=self._signer,
            )
        except NatsError as error:
            self._fail(route, f"bus unavailable: {error}")
            raise InternalError("the bus is unavailable: reconnect") from None

    def _fail(self, route: _Route, why: str, *, close_client: bool = True) -> None:
        """Close a route: its waiting requests fail; the client is closed (1012) unless it
        is the one going. The owner is told (its connection for the client ends)."""
        if route.closed:
            return
        route.closed = True
        self._routes.pop((route.connection.id, route.node), None)
        self._by_id.pop(route.id, None)
        for answered in route.pending.values():
            if not answered.done():
                answered.set_exception(InternalError(f"the route to node {route.node} closed"))
        route.pending.clear()
        route.held.clear()
        for session in [s for s, n in self._owners.items() if n == route.node]:
            del self._owners[session]
        if route.placing:  # a createSession's route: the client stays, the next node is tried
            log.warning("route not opened: placing elsewhere", node=route.node, why=why)
        elif close_client:
            self.failed += 1
            log.warning("route failed: closing the client", node=route.node, why=why)
            route.connection.close(
                CLOSE_SERVICE_RESTART, "the node holding a session went away: reconnect"
            )
        task = asyncio.get_running_loop().create_task(self._close_remote(route))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close_remote(self, route: _Route) -> None:
        with contextlib.suppress(NatsError):  # the bus may be gone: the owner drops it then
            await publish(
                self._nc,
                route.subject,
                "x",
                route.id,
                route.n_out + 1,
                b"",
                None,
                signer=self._signer,
            )

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._check_every)
            self.check()

    def check(self) -> None:
        """Act on the nodes no longer alive: their routes fail (clients closed, 1012),
        cached owners on them go, their terminals leave the root. Every ``check_every``,
        and at once when a node says it leaves (``ShardedNode``)."""
        for route in list(self._by_id.values()):
            if not self.alive(route.node):
                self._fail(route, "node silent or gone")
        for session in [s for s, n in self._owners.items() if not self.alive(n)]:
            del self._owners[session]
        silent = frozenset(n for n in self._host.node_terminals if not self.alive(n))
        if silent != self._silent_nodes:
            self._silent_nodes = silent
            self._host.terminals_changed()  # a dead node's terminals leave the root

    # -- what comes back ----------------------------------------------------------------------

    async def _on_message(self, msg: Any) -> None:
        data = unsealed(self._signer, self._warnings, msg.subject, msg.data)
        if data is None:
            return
        try:
            kind, conn, n, _, payload = decode(data)
        except ValueError:
            log.warning("malformed route message dropped")
            return
        if kind == "g":  # the same frames for several routes
            try:
                targets, packed, frames = unpack_group(payload)
            except ValueError:
                log.warning("malformed route group dropped")
                return
            for target, n in targets:
                self._receive("f", target, n, packed, frames)
            return
        self._receive(kind, conn, n, payload)

    def _receive(
        self, kind: str, conn: int, n: int, payload: bytes, frames: list[bytes] | None = None
    ) -> None:
        route = self._by_id.get(conn)
        if route is None or route.closed:
            return
        if n == 0 and kind == "x":  # the owner does not know the route (it restarted)
            self._fail(route, "unknown to the owner")
            return
        if n <= route.n_in:
            self._warnings.warn("replayed route message dropped")
            return
        if n != route.n_in + 1:
            self._fail(route, "lost messages")
            return
        route.n_in = n
        if kind == "k":
            if not route.pieces.add(payload):
                self._fail(route, "message over the size limit")
            return
        payload = route.pieces.join(payload)
        if kind == "x":
            self._fail(route, f"closed by the owner: {payload[:120]!r}")
            return
        if kind != "f":
            return
        try:
            if frames is None:
                frames = unpack_frames(payload)
            if not frames or not frames[0].startswith(b"@"):
                raise ValueError("no watermark")
            stamp = int(frames[0][1:])
        except ValueError:
            self._fail(route, "unreadable frames")
            return
        route.held.extend((stamp, frame) for frame in frames[1:])
        self._release(route)

    def _release(self, route: _Route) -> None:
        """Hand over what came back, in order, as far as this node's watermark allows."""
        delivered = self._feed.delivered
        held = route.held
        while held and held[0][0] <= delivered and not route.closed:
            self._hand_over(route, held.popleft()[1])
        if held and not route.waiting and not route.closed:
            route.waiting = True
            self._feed.when(held[0][0], lambda: self._woken(route))

    def _woken(self, route: _Route) -> None:
        route.waiting = False
        self._release(route)

    def _hand_over(self, route: _Route, frame: bytes) -> None:
        try:
            head = _FRAME.decode(frame)
        except msgspec.DecodeError:
            log.warning("unreadable frame on a route dropped", node=route.node)
            return
        if isinstance(head.method, UnsetType):  # an answer
            answered = route.pending.get(head.id) if isinstance(head.id, int) else None
            if answered is not None and not answered.done():
                answered.set_result(head)
            return
        connection = route.connection
        if head.method == "action" and connection.legacy:
            envelope = frame[len(_ACTION) : -1]
            projected = legacy_edge.project_envelope(envelope) or envelope
            connection.send(action_frame(projected))
            return
        connection.send(frame)


def stamped(feed: NodeFeed) -> Callable[[EdgeLink, int], Transport]:
    """The owner role's transport for this node: stamped with its feed's watermark."""
    return lambda link, conn: StampedTransport(link, conn, lambda: feed.delivered)

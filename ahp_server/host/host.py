"""The host: owns the hub, the store, every channel actor, the providers and known clients.

Layer: host (asyncio). The registry at the top of the state side: it builds
and owns the actors (which see it only as a
:class:`~ahp_server.host.core.runtime.Runtime`), and the agent sessions. It knows
nothing of frames: the gateway (above it) routes them, and ``ahp_server.app``
assembles host, gateway and transport into a running server.

Channels are loaded lazily from the store: at start the host reads only the
catalogue (one row per session and chat), so a host with thousands of stored
chats starts fast and keeps in memory only the chats in use. Recovery at start
ends every turn that was running when the host stopped with ``chat/error``
(``interrupted``) — a turn is never silently re-run — and takes a session a
crash left in ``creating`` through its agent's ``open_session`` again, to
``ready`` or ``creationFailed`` (``host/sessions.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import msgspec
import structlog
from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from ahp_server import __version__
from ahp_server.agents.base import AgentError, AgentTerminal, FileChange, Provider, TurnRequest
from ahp_server.agents.echo import EchoAgent
from ahp_server.config import Settings
from ahp_server.host.actors import (
    OWNER_META,
    ROOT,
    ChannelActor,
    ChatActor,
    RootActor,
    SessionActor,
    chat_summary,
    turns_cursor,
)
from ahp_server.host.core.fanout import (
    CLOSE_GOING_AWAY,
    CLOSE_POLICY,
    CLOSE_SERVICE_RESTART,
    CLOSE_SLOW_CONSUMER,
    Connection,
    OutboxBudget,
    Transport,
    close_reason,
)
from ahp_server.host.core.looplag import LoopLag
from ahp_server.host.core.routing import Router
from ahp_server.host.core.runtime import Counters
from ahp_server.host.core.sequencer import Hub
from ahp_server.host.core.turnstile import Turnstile
from ahp_server.host.sessions import CREATING, AgentSessions
from ahp_server.protocol import codec
from ahp_server.protocol.errors import AhpErrorCode, InternalError, ProtocolError
from ahp_server.protocol.reducers import reduce_chat, reduce_session
from ahp_server.protocol.types import (
    ActionEnvelope,
    ChatState,
    ConfigPropertySchema,
    ConfigSchema,
    Implementation,
    PartialSessionSummary,
    RootActiveSessionsChangedAction,
    RootConfigState,
    RootState,
    RootTerminalsChangedAction,
    SessionActiveClientRemovedAction,
    SessionAddedParams,
    SessionChatAddedAction,
    SessionChatRemovedAction,
    SessionRemovedParams,
    SessionState,
    SessionStatus,
    SessionSummary,
    SessionSummaryChangedParams,
    TerminalClientClaim,
    TerminalInfo,
    TerminalSessionClaim,
    Turn,
)
from ahp_server.protocol.uris import parse_channel
from ahp_server.store.base import ChannelRow, LoadedChannel, Store, StoreError
from ahp_server.store.sqlite import SqliteStore
from ahp_server.workspace.paths import file_uri
from ahp_server.workspace.roots import Roots

__all__ = ["DB_FILE", "Host", "HostFailed", "MetricFamily", "WorkspaceService"]

log = structlog.get_logger(__name__)

#: One ``/metrics`` family: name, type ("counter", "gauge"), help, ``[(labels, value)]``.
MetricFamily = tuple[str, str, str, list[tuple[str, float]]]

#: What every encoded ``root/terminalsChanged`` envelope holds (a cheap first test).
_TERMINALS_CHANGED = b'"root/terminalsChanged"'

DB_FILE = "ahp-server.db"


class HostFailed(StoreError):
    """The host had to stop: its store failed (:attr:`Host.failure` says how), or, in
    cluster mode, this node lost its lease. ``ahp-server serve`` exits with status 1."""


#: Sharded mode: the notice with which a node tells the others its terminals.
NODE_TERMINALS = "node/terminals"
#: Sharded mode: the most nodes whose terminals are remembered (the oldest told forgotten
#: first); as many as a heartbeat remembers (``transport/node_heartbeat.py`` MAX_PEERS).
MAX_TERMINAL_NODES = 1_024


class _Terminals(msgspec.Struct, frozen=True):
    terminals: tuple[TerminalInfo, ...]
    #: The node's first since it started: every other node tells its own in turn.
    hello: bool = False
    #: The user of each client holding one of ``terminals`` (a client's claim) that the
    #: node knows: the root's owner may never have met that client, and lists the
    #: terminal for its user only (multi-user mode, :meth:`Host.may_see_claim`).
    claimants: dict[str, str] = {}


#: Sharded mode: the notice with which the root channel's owner tells every node which
#: sessions are stranded (their owner dead, their directory on no live node).
NODE_STRANDED = "node/stranded"
#: The activity bits of ``SessionStatus`` (spec-1.0 state schema ``SessionStatus``:
#: ``Idle`` … ``InputNeeded``); the others (``IsRead``, ``IsArchived``) are kept.
_ACTIVITY_BITS = SessionStatus.Idle | SessionStatus.Error | SessionStatus.InputNeeded


class _Stranded(msgspec.Struct, frozen=True):
    #: Session -> why it cannot be served (names its directory and its dead owner).
    sessions: dict[str, str]


#: What one node tells the others (sharded mode), by method: the ``root/session*``
#: notifications it sends, its terminals, and (the root owner) the stranded sessions.
_NOTICES: dict[str, type[Any]] = {
    NODE_TERMINALS: _Terminals,
    NODE_STRANDED: _Stranded,
    "root/sessionAdded": SessionAddedParams,
    "root/sessionRemoved": SessionRemovedParams,
    "root/sessionSummaryChanged": SessionSummaryChangedParams,
}


def wall_clock_ms() -> float:
    return time.time() * 1000


def _at(ms: float) -> Callable[[], float]:
    """The clock an action was first applied with: a replay stamps the same times."""
    return lambda: ms


async def _nothing() -> None:
    """A no-op run inside an actor: a barrier for what was queued before it."""


def make_store(settings: Settings) -> Store:
    """The store the settings ask for: PostgreSQL (``store``), SQLite in ``data_dir``, or memory."""
    if settings.store is not None:
        # Imported here: the PostgreSQL driver is needed only when configured.
        from ahp_server.store.postgres import PostgresStore

        return PostgresStore(
            settings.store,
            commit_window=settings.commit_window_ms / 1000,
            commit_timeout=settings.commit_timeout,
        )
    if settings.data_dir is None or settings.data_dir == ":memory:":
        return Store()
    return SqliteStore(
        Path(settings.data_dir) / DB_FILE,
        synchronous=settings.synchronous,
        commit_window=settings.commit_window_ms / 1000,
    )


class WorkspaceService(Protocol):
    """A service that keeps workspace channels (terminals…): told of the host's lifecycle.

    Services sit above the host (``host/channels/terminals.py``) and add themselves to
    :attr:`Host.services`.
    """

    async def start(self, rows: Sequence[ChannelRow]) -> None:
        """The host starts: take back this service's channels among the stored ``rows``."""
        ...

    async def session_disposed(self, session: str) -> None:
        """``session`` was disposed: end what it owned."""
        ...

    async def chat_disposed(self, chat: str) -> None:
        """``chat`` was disposed (alone or with its session): end what it owned."""
        ...

    async def stop(self) -> None:
        """The host stops: end every process, keep the final state (before the last commit)."""
        ...


@runtime_checkable
class OwnedChannel(Protocol):
    """A workspace channel that is its creator's user's, whatever it holds (a resource
    watch, ``host/channels/watches.py``): ``owner`` is that user in multi-user mode, ``None``
    when its creator had none (docs/protocol.md "Identity and ownership")."""

    owner: str | None


class Host:
    """One AHP host: sessions, chats and connections in one event loop."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        providers: Sequence[Provider] | None = None,
        clock: Callable[[], float] = wall_clock_ms,
        store: Store | None = None,
    ) -> None:
        self.settings = settings or Settings()
        #: Where working directories may lie, and what is refused inside them
        #: (docs/workspace.md "Roots").
        self.roots = Roots.from_settings(self.settings)
        self.now = clock
        self.store = store or make_store(self.settings)
        #: Bursts of ready work (N turns' actions, N clients' frames) run in slices of
        #: the event loop (host/core/turnstile.py).
        self.turnstile = Turnstile()
        self.hub = Hub(
            replay_max_envelopes=self.settings.replay_max_envelopes,
            replay_max_bytes=self.settings.replay_max_bytes,
            store=self.store,
            clock=clock,
        )
        self.hub.visible = self.may_see
        if self.settings.users:
            # Multi-user mode: each connection sees only its user's terminals in the
            # root channel's envelopes (docs/protocol.md "Identity and ownership").
            self.hub.views[ROOT] = self._root_envelope_view
        provider_list = list(providers) if providers is not None else [EchoAgent()]
        self.providers: dict[str, Provider] = {p.info.provider: p for p in provider_list}
        self._agents = tuple(p.info for p in provider_list)
        self.root = RootActor(self, ROOT, self._root_state(active_sessions=0))
        #: Loaded actors.
        self.sessions: dict[str, SessionActor] = {}
        self.chats: dict[str, ChatActor] = {}
        #: Every session the host knows (loaded or not), with a created-at time,
        #: and the stored summary of the unloaded ones.
        self.session_index: dict[str, tuple[str, SessionSummary | None]] = {}
        #: Every chat the host knows: chat URI -> session URI.
        self.chat_index: dict[str, str] = {}
        #: Live channels of the workspace services: terminals, changesets,
        #: resource watches (registered by those services).
        self.workspace_channels: dict[str, ChannelActor[Any]] = {}
        #: The services that keep them, told of start, session disposal and stop.
        self.services: list[WorkspaceService] = []
        #: Shows an agent's command as a terminal channel (set by the terminal service).
        self.agent_terminals: Callable[[TurnRequest, AgentTerminal], Awaitable[None]] | None = None
        #: Records a file an agent changed in its turn's changeset (set by the changeset service).
        self.file_changes: Callable[[TurnRequest, FileChange], Awaitable[None]] | None = None
        #: Told when a turn ends (``Runtime.turn_ended``): the terminal service.
        self.turn_ends: Callable[[str, str], Coroutine[Any, Any, None]] | None = None
        #: Workspace channels a service serves without keeping them live: loaded
        #: from the store, or made, on first use (changesets). ``None``: not theirs.
        self.channel_resolvers: list[Callable[[str], Awaitable[ChannelActor[Any] | None]]] = []
        self._loading: dict[str, asyncio.Future[Any]] = {}
        #: client id -> negotiated protocol version, for ``reconnect`` (bounded per
        #: user: :attr:`_known`, :meth:`remember_client`).
        self.clients: dict[str, str] = {}
        #: The remembered client ids of each user, least recently seen first: a
        #: bucket per user in multi-user mode (``None``: ids with no user), one
        #: bucket (``None``) otherwise. Each holds ``known_clients`` ids, beyond
        #: which only live ids and those a terminal's claim names are kept
        #: (docs/protocol.md "Client identity").
        self._known: dict[str | None, OrderedDict[str, None]] = {}
        self.connections: set[Connection] = set()
        #: What every connection's outbox holds, under one host-wide limit
        #: (host/core/fanout.py; docs/reliability.md "Memory").
        # Reads leave one outbox of room to ordinary answers (OutboxBudget.headroom).
        #: How late the event loop runs what is due (``/metrics``).
        self.loop_lag = LoopLag()
        self.outbox_budget = OutboxBudget(
            self.settings.outbox_total_bytes, headroom=self.settings.outbox_max_bytes
        )
        #: client id -> its one live connection (a newer one takes over; docs/protocol.md).
        self.live_clients: dict[str, Connection] = {}
        #: client id -> the task releasing it when its grace period ends (§3.4).
        self._releases: dict[str, asyncio.Task[None]] = {}
        #: client id -> the user that first claimed it (multi-user mode; kept with the
        #: remembered clients, so it survives restarts as long as they do).
        self.client_users: dict[str, str | None] = {}
        self.server_info = Implementation(name="ahp-server", version=__version__)
        self.agent_sessions = AgentSessions(self)
        self.accepting = False
        #: Why the host can serve no more — its store failed (a commit could not
        #: be written) — once it cannot; ``None`` while it can. Set once, from
        #: ``Store.failed``: connections are closed with 1012, new ones refused,
        #: the health endpoints answer 503 with it (docs/deploy.md).
        self.failure: str | None = None
        #: Set with :attr:`failure`: what ``ahp-server serve`` waits on to stop.
        self.failed = asyncio.Event()
        self._failure_close = ""  # the close reason clients get then
        self.counters = Counters()
        #: Sharded mode: every live node's workspace roots (``ShardedNode.cluster_roots``),
        #: offered as the root state's ``workspaceRoots`` (:meth:`root_view`).
        self.cluster_roots: Callable[[], Sequence[str]] | None = None
        #: More ``/metrics`` families from outside the host (a sharded node's
        #: feed): each call answers ``(name, type, help, [(labels, value), …])``.
        self.metric_sources: list[Callable[[], list[MetricFamily]]] = []
        self._background: set[asyncio.Task[Any]] = set()
        #: Sharded mode (docs/scale-out.md): whether this node owns a session now —
        #: only those are recovered here — and how a new session is claimed before
        #: it is stored (``False``: another node has it). One node owns everything
        #: otherwise.
        self.owns: Callable[[str], bool] = lambda session: True
        self.claim_session: Callable[[str, str | None], Awaitable[bool]] | None = None
        #: Sharded mode: where requests for other nodes' sessions go (host/core/routing.py).
        self.router: Router | None = None
        #: Sharded mode: told of every ``root/session*`` notification this node sends
        #: (method, params, session, its creator), for the other nodes' clients.
        self.root_notices: Callable[[str, object, str, str | None], None] | None = None
        #: Sharded mode: the terminals every other node reported, by node, and whether a
        #: node is still there (the root owner lists the live ones' terminals).
        self.node_terminals: dict[str, tuple[TerminalInfo, ...]] = {}
        #: Whether this node's next ``node/terminals`` is its first (``_Terminals.hello``).
        self._hello = True
        #: The same by terminal: the node that reported it (where its requests go).
        self._terminal_nodes: dict[str, str] = {}
        #: The users of the clients holding those terminals, as their nodes told them
        #: (``_Terminals.claimants``), by node and merged.
        self._node_claimants: dict[str, dict[str, str]] = {}
        self._claimants: dict[str, str] = {}
        self.node_alive: Callable[[str], bool] = lambda node: True
        #: Sharded mode: told when another node says it (re)started (its ``hello``).
        self.node_started: Callable[[str], None] = lambda node: None
        #: Sharded mode: the sessions the root owner said are stranded, and why
        #: (:meth:`set_stranded`): listed failed, whatever their stored summary says.
        self.stranded: dict[str, str] = {}
        #: Asks for the root's terminal catalogue to be published again (the terminal
        #: service: ``TerminalService.catalogue_changed``).
        self.terminals_changed: Callable[[], None] = lambda: None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store, read the catalogue, recover interrupted turns, start serving."""
        self.hub.restart_at(await self.store.start())
        self.store.failed.add_done_callback(self._store_failed)
        for client_id, version, user in await self.store.clients():  # least recently seen first
            self.clients[client_id] = version  # reconnect works across restarts
            bound = self.multi_user and user is not None
            if bound:
                # A client id stays its first user's across restarts (docs/protocol.md,
                # "Client identity"). Users remembered in single-token mode (None) bind
                # nothing, and single-token mode ignores them all: it has one user.
                self.client_users[client_id] = user
            self._known.setdefault(user if bound else None, OrderedDict())[client_id] = None
        rows = await self.store.channels()
        interrupted, creating = self._index(rows, self.owns)
        self.root = RootActor(
            self,
            ROOT,
            self._root_state(active_sessions=len(self.session_index)),
        )
        self.root.start()
        self.spawn(self.loop_lag.run())
        await self._recover(interrupted, creating)
        for service in self.services:
            await service.start(rows)
        await self.store.flush()
        self.accepting = True
        log.info(
            "host started",
            sessions=len(self.session_index),
            chats=len(self.chat_index),
            server_seq=self.hub.server_seq,
            recovered_turns=len(interrupted),
            repaired_sessions=len(creating),
            store=self.store.path,
        )

    def _index(
        self, rows: Sequence[ChannelRow], owned: Callable[[str], bool]
    ) -> tuple[list[str], list[str]]:
        """Know the catalogue's sessions and chats; the chats with a turn a stop cut
        short and the sessions left in ``creating``, among the sessions ``owned``."""
        interrupted: list[str] = []
        creating: list[str] = []
        for row in rows:
            if row.kind == "session":
                summary = (
                    codec.decode(row.summary, SessionSummary) if row.summary is not None else None
                )
                self.session_index[row.uri] = (row.created_at, summary)
                if row.unfinished == CREATING and owned(row.uri):
                    creating.append(row.uri)
            elif row.kind == "chat" and row.session is not None:
                self.chat_index[row.uri] = row.session
                if row.unfinished is not None and owned(row.session):
                    interrupted.append(row.uri)
        return interrupted, creating

    def learn(self, rows: Sequence[ChannelRow], *, whole: bool = False) -> None:
        """Sharded mode: know catalogue rows other nodes wrote (sessions and chats this node
        routes requests for; nothing is loaded). ``whole``: ``rows`` is the whole catalogue,
        so sessions and chats not in it and not loaded here are gone (disposed elsewhere)."""
        self._index(rows, lambda session: False)
        if whole:
            present = {row.uri for row in rows}
            for uri in [u for u in self.session_index if u not in present]:
                if uri not in self.sessions:
                    del self.session_index[uri]
            for uri in [u for u in self.chat_index if u not in present]:
                if uri not in self.chats:
                    del self.chat_index[uri]

    async def _recover(self, interrupted: Sequence[str], creating: Sequence[str]) -> None:
        """End the turns a stop cut short (``chat/error``), reopen sessions left creating."""
        for uri in interrupted:
            chat = await self.chat(uri)
            if chat is not None:
                await chat.call(chat.interrupt)
                # The session mirrors the chat from its inbox: let it catch up
                # before anyone can subscribe.
                await chat.session.call(_nothing)
        for uri in creating:
            await self._repair_creating(uri)

    async def adopt(self, sessions: Collection[str]) -> None:
        """Sharded mode: ``sessions`` became this node's (taken over from a node that
        died). The catalogue is read again (it also learns sessions made on other
        nodes meanwhile); their interrupted turns end with ``chat/error`` and those
        left ``creating`` are opened again, as after a restart (docs/scale-out.md)."""
        adopted = set(sessions)
        rows = await self.store.channels()
        interrupted, creating = self._index(rows, adopted.__contains__)
        await self._recover(interrupted, creating)
        log.info(
            "sessions adopted",
            sessions=len(adopted),
            recovered_turns=len(interrupted),
            repaired_sessions=len(creating),
        )

    async def release(self, sessions: Collection[str]) -> None:
        """Sharded mode: ``sessions`` are another node's now (taken over while this node
        was cut off; it learned so from a refused commit or its owner rows). Their turns
        stop here (nothing of them can commit any more), their agent sessions close and
        their actors go; the catalogue keeps them, so requests route to the new owner.
        Clients here that follow them are closed with 1012: they replay from what was
        committed — the new owner's — never from what this node could not commit."""
        # Only what is still here: a loss is told again by each refused commit, and a
        # client that came back since follows the new owner already.
        gone = {s for s in sessions if s != ROOT and s in self.sessions}
        chats = [chat for chat in self.chats.values() if chat.session.uri in gone]
        actors = [self.sessions[s] for s in gone]
        channels = gone | {chat.uri for chat in chats}
        for connection in list(self.connections):
            if connection.subscriptions & channels:
                connection.close(CLOSE_SERVICE_RESTART, "the session moved to another node")
        for chat in chats:
            self.chats.pop(chat.uri, None)
            chat.session.chats.pop(chat.uri, None)
            await chat.stop()  # its running turn's agent work is aborted
        for actor in actors:
            with contextlib.suppress(StoreError):
                await self.agent_sessions.close(actor, disposed=False)
            self.sessions.pop(actor.uri, None)
            await actor.stop()
        if gone:
            log.warning("sessions released to another node", sessions=len(gone), chats=len(chats))

    async def _repair_creating(self, uri: str) -> None:
        """A session a crash left in ``creating``: open it again (to ready or failed)."""
        session = await self.session(uri)
        if session is None:
            return
        if session.state.lifecycle == "creating":
            log.info("repairing a session left in creating", session=uri)
            self.spawn(self.agent_sessions.initialize(session))
        else:
            self.store.set_unfinished(uri, None)  # a marker older than the outcome

    def _store_failed(self, future: asyncio.Future[BaseException]) -> None:
        """The store failed: nothing more can commit, so nothing more is delivered.

        Every client is closed at once with 1012 and a reason naming the store
        (it reconnects to the host its supervisor starts again, where all it
        saw is kept); requests in flight end with the connection instead of
        waiting for a commit that never comes. What stops the process is
        whoever waits on :attr:`failed` (``ahp-server serve``: exit status 1).
        """
        if future.cancelled() or self.failure is not None:
            return
        error = future.result()
        where, text = self.store.path, str(error) or type(error).__name__
        self.failure = f"the store failed: {text if text.startswith(where) else f'{where}: {text}'}"
        self.accepting = False
        log.critical("host failed: its store can commit nothing more", reason=self.failure)
        self._failure_close = close_reason(f"the store failed: {text}")
        for connection in list(self.connections):
            connection.close(CLOSE_SERVICE_RESTART, self._failure_close)
        self.failed.set()

    async def stop(self, *, close_timeout: float = 5.0) -> None:
        """Graceful shutdown: end running turns, commit everything, close with 1001."""
        self.accepting = False
        for task in list(self._background):
            task.cancel()
        for chat in list(self.chats.values()):
            if chat.runner is not None:
                await chat.call(chat.interrupt)
        await self.agent_sessions.close_all(self.sessions.values())
        for service in self.services:
            await service.stop()
        for chat in self.chats.values():
            chat.snapshot()
        for session in self.sessions.values():
            session.snapshot()
        await self.store.flush()
        connections = list(self.connections)
        await asyncio.gather(
            *(
                c.flush_and_close(CLOSE_GOING_AWAY, "server shutting down", close_timeout)
                for c in connections
            ),
            return_exceptions=True,
        )
        for chat in list(self.chats.values()):
            await chat.stop()
        for session in list(self.sessions.values()):
            await session.stop()
        await self.root.stop()
        await self.store.close()

    async def abort(self) -> None:
        """Stop after a fatal failure (cluster mode: the lease lost, the store failed).

        Nothing more can commit, so nothing more is delivered: every connection
        is closed with 1012 (reconnect — to the node that holds the lease now),
        and every agent and terminal process is still ended and reaped; what
        they would record is refused by the failed store and dropped.
        """
        self.accepting = False
        for task in list(self._background):
            task.cancel()
        for connection in list(self.connections):
            connection.close(CLOSE_SERVICE_RESTART, "host stopped: reconnect")
        with contextlib.suppress(StoreError):
            await self.agent_sessions.close_all(self.sessions.values())
        for service in self.services:
            with contextlib.suppress(StoreError):
                await service.stop()
        actors: list[ChannelActor[Any]] = [*self.chats.values(), *self.sessions.values()]
        for actor in (*actors, self.root):
            await actor.stop()

    async def commit_now(self) -> None:
        """Wait until everything queued so far is durable, committing it at once.

        For an answer that promises a change is kept (``disposeSession``,
        ``disposeChat``: docs/durability.md): the store's next group commit
        takes it, not held back for ``commit_window_ms``, and this returns
        once that commit is done (``StoreError`` if the store failed).
        """
        self.store.commit_soon()
        await self.store.flush()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a background coroutine owned by the host (cancelled on stop)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- connections ------------------------------------------------------------------------------

    def open_connection(self, transport: Transport) -> Connection:
        connection = Connection(
            transport,
            max_frames=self.settings.outbox_max_frames,
            max_bytes=self.settings.outbox_max_bytes,
            budget=self.outbox_budget,
        )
        connection.start()
        self.connections.add(connection)
        if self.failure is not None:  # admitted at the door just before the store failed
            connection.close(CLOSE_SERVICE_RESTART, self._failure_close)
        return connection

    async def close_connection(self, connection: Connection) -> None:
        if connection.close_code == CLOSE_SLOW_CONSUMER:
            self.counters.slow_consumers += 1
        self.connections.discard(connection)
        self.hub.drop_connection(connection)
        if self.router is not None:
            self.router.forget(connection)
        client_id = connection.client_id
        if client_id is not None and self.live_clients.get(client_id) is connection:
            del self.live_clients[client_id]
            if self.accepting:
                self._release_later(client_id)
        await connection.stop()

    def claim_client(self, connection: Connection, client_id: str) -> None:
        """``connection`` is now ``client_id``'s live connection (initialize/reconnect).

        A pending release is called off (it came back within the grace). A
        connection still holding that id is closed with 1008: one client id, one
        live connection — the newer one wins, so a client whose old socket is
        half-open can always come back (docs/protocol.md, "Client identity").
        """
        # Multi-user mode: a client id is its first user's; another user's
        # connection may not take it over (docs/protocol.md "Client identity").
        # Checked before anything changes: a refusal leaves no trace.
        first = self.client_users.get(client_id, connection.user)
        if first != connection.user:
            raise ProtocolError(
                "this clientId is used by another user", code=AhpErrorCode.PermissionDenied
            )
        self.client_users[client_id] = first
        pending = self._releases.pop(client_id, None)
        if pending is not None:
            pending.cancel()
        old = self.live_clients.get(client_id)
        if old is not None and old is not connection:
            log.info("client id taken over", client_id=client_id, old=old.id, new=connection.id)
            old.close(CLOSE_POLICY, "clientId taken over by a newer connection")
            self.hub.drop_connection(old)
        self.live_clients[client_id] = connection

    def _release_later(self, client_id: str) -> None:
        async def release() -> None:
            await asyncio.sleep(self.settings.active_client_grace)
            self._releases.pop(client_id, None)
            await self.release_client(client_id)

        task = asyncio.get_running_loop().create_task(release(), name=f"release {client_id}")
        self._releases[client_id] = task
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def release_client(
        self, client_id: str, keep: frozenset[str] = frozenset(), *, only: str | None = None
    ) -> None:
        """The client is gone: fail its client tools, drop it from activeClients.

        After its grace period (WIRE-SUMMARY §3.4 / §14.10); for every session
        but ``keep`` when it reconnects without listing a session (§3.3); for
        ``only`` that session when it unsubscribes from it (§14.10, guide
        "Active-Client Lifecycle"). Only loaded channels can hold a running
        tool call or a live active-client entry of this process's clients.
        """

        def released(session: str) -> bool:
            return session not in keep and (only is None or session == only)

        log.info("client released", client_id=client_id, kept=len(keep), only=only)
        for chat in list(self.chats.values()):
            if released(chat.session.uri):
                await chat.fail_client_tools(
                    client_id,
                    "The client that runs this tool disconnected"
                    if only is None
                    else "The client that runs this tool left the session",
                )
        for session in list(self.sessions.values()):
            if released(session.uri) and any(
                c.client_id == client_id for c in session.state.active_clients
            ):
                await session.apply_server(SessionActiveClientRemovedAction(client_id=client_id))

    async def unsubscribed(self, connection: Connection, channel: str) -> None:
        """``connection`` unsubscribed from ``channel``: a session's channel releases it there.

        WIRE-SUMMARY §14.10 and the reference (``session/activeClientRemoved``:
        "when it unsubscribes from the session channel"): its active-client
        entry goes and its running client tools in that session's chats fail.
        Only the session channel itself counts (not a chat or the annotations
        channel), and only from the client's live connection.
        """
        client_id = connection.client_id
        session = self.sessions.get(channel)
        if (
            client_id is None
            or session is None
            or self.live_clients.get(client_id) is not connection
        ):
            return
        if any(c.client_id == client_id for c in session.state.active_clients):
            await self.release_client(client_id, only=channel)

    # -- lookups (loading on demand) ----------------------------------------------------------

    def provider(self, name: str) -> Provider:
        try:
            return self.providers[name]
        except KeyError:
            raise ProtocolError(
                f"unknown provider {name!r}", code=AhpErrorCode.ProviderNotFound
            ) from None

    async def actor(self, channel: str) -> ChannelActor[Any] | None:
        """The actor of ``channel``, loading it from the store if needed."""
        if channel == ROOT:
            return self.root
        if channel in self.session_index:
            return await self.session(channel)
        if channel in self.chat_index:
            return await self.chat(channel)
        actor = self.workspace_channels.get(channel)
        if actor is None:
            for resolve in self.channel_resolvers:
                actor = await resolve(channel)
                if actor is not None:
                    break
        return actor

    async def agent_session_ready(self, session: str) -> None:
        """``Runtime``: the provider holds ``session`` (restored once after a restart)."""
        actor = self.sessions.get(session)
        if actor is None:
            raise AgentError("The session is gone.", error_type="sessionNotFound")
        await self.agent_sessions.ready(actor.state.provider, actor)

    async def agent_terminal_started(self, request: TurnRequest, terminal: AgentTerminal) -> None:
        """``Runtime``: show an agent's command as a terminal channel (if a service does that)."""
        if self.agent_terminals is not None:
            await self.agent_terminals(request, terminal)

    def turn_ended(self, chat: str, turn_id: str) -> None:
        """``Runtime``: run the turn-end listener in a task of its own (it may apply
        actions to the very chat whose actor calls this)."""
        if self.turn_ends is not None:
            self.spawn(self.turn_ends(chat, turn_id))

    async def file_changed(self, request: TurnRequest, change: FileChange) -> None:
        """``Runtime``: list a file an agent changed in its turn's changeset (if a service does)."""
        if self.file_changes is not None:
            await self.file_changes(request, change)

    def working_directories(
        self, *, excluding: str | None = None, viewer: Connection | None = None
    ) -> list[str]:
        """Every working directory of every session the host knows, loaded or not, and
        of their chats (loaded sessions' catalogues, loaded chats): the roots the
        workspace services confine paths to (docs/workspace.md). ``excluding``
        leaves one session out (one being disposed); ``viewer`` keeps only the
        sessions that connection's user may see (multi-user mode). A directory
        outside the configured roots (stored before they were configured, say)
        is left out: the configuration decides (docs/workspace.md "Roots")."""
        found: dict[str, None] = {}

        def add(directories: Sequence[str] | UnsetType | None) -> None:
            if directories is not None and not isinstance(directories, UnsetType):
                found.update(dict.fromkeys(directories))

        for uri, (_, stored) in self.session_index.items():
            if uri == excluding or (viewer is not None and not self.may_see(viewer, uri)):
                continue
            session = self.sessions.get(uri)
            if session is not None:
                add(session.state.working_directories)
                for chat_summary in session.state.chats:
                    add(chat_summary.working_directories)
            elif stored is not None:
                add(stored.working_directories)
        for chat in self.chats.values():
            if chat.session.uri != excluding and (
                viewer is None or self.may_see(viewer, chat.session.uri)
            ):
                add(chat.state.working_directories)
        user = None if viewer is None or viewer.admin else viewer.user
        return self.roots.usable(found, user)

    # -- ownership (multi-user mode; docs/protocol.md "Identity and ownership") ------------------

    def owner_of(self, session: str) -> str | None:
        """The user who created ``session`` (kept in its ``_meta``), if any."""
        actor = self.sessions.get(session)
        meta: object = None
        if actor is not None:
            meta = actor.state.meta
        elif session in self.session_index:
            stored = self.session_index[session][1]
            meta = None if stored is None else stored.meta
        owner = meta.get(OWNER_META) if isinstance(meta, dict) else None
        return owner if isinstance(owner, str) else None

    def session_of_channel(self, channel: str) -> str | None:
        """The session a session, annotations, chat or changeset channel belongs to (else
        ``None``).

        The URI is read by ``protocol/uris.py`` — the one reading the changeset
        service uses too, so the session checked is the session served (a
        percent-encoded key is decoded by both; docs/protocol.md "Identity and
        ownership"). A chat's session is the catalogue's.
        """
        if channel in self.session_index:
            return channel  # a session is its own (whatever its URI looks like)
        ref = parse_channel(channel)
        if ref.kind == "chat":
            return self.chat_index.get(channel)
        if ref.chat is not None:  # a chat's changeset: the chat's session, wherever it moved
            return self.chat_index.get(ref.chat)
        if ref.session is not None:
            return ref.session
        # A terminal claimed by a session is that session's (its claim says so).
        actor = self.workspace_channels.get(channel)
        claim = getattr(getattr(actor, "state", None), "claim", None)
        session = getattr(claim, "session", None)
        return session if isinstance(session, str) else None

    @property
    def multi_user(self) -> bool:
        """Multi-user mode (``[[users]]``). Without it everyone is the one user and
        sees everything (docs/protocol.md "Identity and ownership")."""
        return bool(self.settings.users)

    def sees_everything(self, connection: Connection) -> bool:
        """Not multi-user mode (the one user), or an admin of multi-user mode.

        In multi-user mode, no user never means "everything": a connection
        whose identity is unknown (a relayed one that lost it, say) is nobody.
        """
        return not self.multi_user or (connection.user is not None and connection.admin)

    def may_see_owned(self, connection: Connection, owner: str | None) -> bool:
        """Whether ``connection``'s user may see what ``owner`` owns (no owner: admins only)."""
        if self.sees_everything(connection):
            return True
        return connection.user is not None and owner == connection.user

    def may_see(self, connection: Connection, session: str | None) -> bool:
        """Whether ``connection``'s user may see (and act on) ``session``.

        Single-token and no-token mode: everyone may. Multi-user mode: the
        session's creator and admins; a session with no owner (made before
        multi-user mode) only admins; a connection with no user nothing; and a
        channel whose session cannot be told (``None``) nobody but admins.
        """
        if self.sees_everything(connection):
            return True
        return session is not None and self.may_see_owned(connection, self.owner_of(session))

    def may_see_claim(self, connection: Connection, claim: object) -> bool:
        """Whether ``connection``'s user may see a terminal held by ``claim``.

        A session's claim: that session's (:meth:`may_see`). A client's claim:
        the user that client id belongs to (:attr:`client_users`, kept with the
        remembered clients). Single-token mode and admins: every terminal; a
        connection with no user in multi-user mode: none.
        """
        if self.sees_everything(connection):
            return True
        if connection.user is None:
            return False
        if isinstance(claim, TerminalSessionClaim):
            return self.may_see(connection, claim.session)
        if isinstance(claim, TerminalClientClaim):
            user = self.client_users.get(claim.client_id)
            if user is None:  # a client of another node (sharded mode): as that node told
                user = self._claimants.get(claim.client_id)
            return user == connection.user
        return False

    def may_access(self, connection: Connection, channel: str) -> bool:
        """Whether ``connection``'s user may see (and act on) ``channel``.

        The root channel: everyone. A resource watch is its creator's user's
        (:class:`OwnedChannel`); a terminal its claim's (:meth:`may_see_claim`);
        any other channel its session's (:meth:`session_of_channel`,
        :meth:`may_see`) — refused in multi-user mode when that cannot be told.
        """
        if channel == ROOT or self.sees_everything(connection):
            return True
        actor: object = self.workspace_channels.get(channel)
        if isinstance(actor, OwnedChannel):
            return self.may_see_owned(connection, actor.owner)
        claim = getattr(getattr(actor, "state", None), "claim", None)
        if claim is not None:
            return self.may_see_claim(connection, claim)
        return self.may_see(connection, self.session_of_channel(channel))

    def _root_state(self, active_sessions: int) -> RootState:
        """The root state at start: the agents, and the host's configuration values.

        ``config.values.defaultProvider`` is the agent a ``createSession``
        without ``provider`` gets (``providers.default``), so a client can
        preselect it; ``workspaceRoots`` (single-user mode only: in multi-user
        mode each user has their own, and the root state is shared) are the
        ``file:`` URIs a session's working directories must lie inside
        (``workspace.roots``), for a folder picker. Both are read-only: they
        change only with the host's configuration (docs/web.md "The default
        agent").
        """
        properties: dict[str, ConfigPropertySchema] = {}
        values: dict[str, Any] = {}
        default = self.settings.default_provider
        if default in self.providers:  # else a host built with other providers (tests)
            properties["defaultProvider"] = ConfigPropertySchema(
                type="string",
                title="Default agent",
                description="The agent a new session gets when it names none (providers.default)",
                default=default,
                enum=tuple(self.providers),
                read_only=True,
            )
            values["defaultProvider"] = default
        if not self.multi_user:
            properties["workspaceRoots"] = ConfigPropertySchema(
                type="array",
                title="Workspace roots",
                description="Where a session's working directories may lie (workspace.roots)",
                items=ConfigPropertySchema(type="string", title="Root"),
                read_only=True,
            )
            values["workspaceRoots"] = [file_uri(root) for root in self.roots.allowed(None)]
        if not values:
            return RootState(agents=self._agents, active_sessions=active_sessions)
        return RootState(
            agents=self._agents,
            active_sessions=active_sessions,
            config=RootConfigState(schema=ConfigSchema(properties=properties), values=values),
        )

    def root_view(self, connection: Connection, state: RootState) -> RootState:
        """The root state as ``connection`` may see it: only its user's terminals; in a
        sharded cluster, every live node's roots as ``workspaceRoots``.

        Multi-user mode (docs/protocol.md "Identity and ownership"): the root
        channel is shared, its terminal catalogue is not. Sharded mode
        (docs/scale-out.md "Working directories"): the stored value names the
        roots of the node that wrote the root state; a client of any node is
        offered every live node's (:attr:`cluster_roots`), since a session in any
        of them is placed on a node serving it.
        """
        state = self._cluster_roots_view(state)
        terminals = state.terminals
        if self.sees_everything(connection) or isinstance(terminals, UnsetType):
            return state
        mine = tuple(t for t in terminals if self.may_see_claim(connection, t.claim))
        return state if len(mine) == len(terminals) else replace(state, terminals=mine)

    def _cluster_roots_view(self, state: RootState) -> RootState:
        """``state`` with ``config.values.workspaceRoots`` the cluster's (sharded mode)."""
        roots = self.cluster_roots
        config = state.config
        if roots is None or isinstance(config, UnsetType):
            return state
        if "workspaceRoots" not in config.values:
            return state  # multi-user mode: each user has their own
        uris = [file_uri(root) for root in roots()]
        if uris == config.values["workspaceRoots"]:
            return state
        values = {**config.values, "workspaceRoots": uris}
        return replace(state, config=replace(config, values=values))

    def _root_envelope_view(self, connection: Connection, envelope: bytes) -> bytes:
        """``Hub.views`` for the root channel: ``root/terminalsChanged`` as ``connection``
        may see it — the same envelope (same ``serverSeq``) with only its user's
        terminals. A pure function of the envelope and of ownership that never
        changes (a session's creator, a client id's first user), so a replay
        shows exactly what live delivery showed (docs/protocol.md)."""
        if self.sees_everything(connection) or _TERMINALS_CHANGED not in envelope:
            return envelope
        decoded = codec.decode(envelope, ActionEnvelope)
        action = decoded.action
        if not isinstance(action, RootTerminalsChangedAction):
            return envelope
        mine = tuple(t for t in action.terminals if self.may_see_claim(connection, t.claim))
        if len(mine) == len(action.terminals):
            return envelope
        return codec.encode(replace(decoded, action=replace(action, terminals=mine)))

    def check_access(self, connection: Connection, channel: str) -> None:
        """Raise -32009 PermissionDenied when ``channel`` is another user's."""
        if not self.may_access(connection, channel):
            raise ProtocolError(
                f"{channel} belongs to another user", code=AhpErrorCode.PermissionDenied
            )

    async def accessible_chat(self, connection: Connection, uri: str) -> ChatActor:
        """The chat ``uri`` names, loaded: -32008 NotFound when there is none, -32009
        PermissionDenied when it is another user's (:meth:`check_access`)."""
        chat = await self.chat(uri)
        if chat is None:
            raise ProtocolError(f"no chat {uri}", code=AhpErrorCode.NotFound)
        self.check_access(connection, uri)
        return chat

    def knows(self, channel: str) -> bool:
        return (
            channel == ROOT
            or channel in self.session_index
            or channel in self.chat_index
            or channel in self.workspace_channels
        )

    async def session(self, uri: str) -> SessionActor | None:
        actor = self.sessions.get(uri)
        if actor is not None or uri not in self.session_index:
            return actor
        loaded: SessionActor | None = await self._load_once(uri, self._load_session)
        return loaded

    async def chat(self, uri: str) -> ChatActor | None:
        actor = self.chats.get(uri)
        if actor is not None or uri not in self.chat_index:
            return actor
        loaded: ChatActor | None = await self._load_once(uri, self._load_chat)
        return loaded

    def add_session(self, actor: SessionActor) -> None:
        """Register, store and start a new session (``creating`` until its agent opens it)."""
        self.sessions[actor.uri] = actor
        self.session_index[actor.uri] = (actor.created_at, None)
        actor.persist_new()
        self.store.set_unfinished(actor.uri, CREATING)
        actor.start()

    def announce_session(self, actor: SessionActor) -> None:
        """A new session's chats are in place: tell the root's subscribers, count it, and
        have its agent open it (``creating`` → ``ready``; host/sessions.py)."""
        self.notify_root(
            "root/sessionAdded",
            SessionAddedParams(channel=ROOT, summary=actor.summary),
            session=actor.uri,
            owner=self.owner_of(actor.uri),
        )
        self.session_count_changed()
        self.spawn(self.agent_sessions.initialize(actor))

    def notify_root(
        self,
        method: str,
        params: Any,
        *,
        session: str,
        owner: str | None,
    ) -> None:
        """A ``root/session*`` notification about ``session`` (created by ``owner``), to the
        root's subscribers who may see it — every node's in sharded mode (:attr:`root_notices`)."""
        self.hub.notify(ROOT, method, params, only=lambda c: self.may_see_owned(c, owner))
        if self.root_notices is not None:
            # Told to the other nodes once what came before it is committed: a node
            # that hears of a session finds it in the catalogue.
            self.store.after_queued(self.root_notices, method, params, session, owner)

    def root_terminals(self, mine: tuple[TerminalInfo, ...]) -> tuple[TerminalInfo, ...] | None:
        """The root channel's terminal catalogue, given this node's terminals ``mine``;
        ``None``: not this node's to publish. Sharded mode: ``mine`` is told to the other
        nodes, and the root channel's owner lists every live node's, its own first."""
        if self.root_notices is None:
            return mine
        hello, self._hello = self._hello, False
        claimants = {
            t.claim.client_id: user
            for t in mine
            if isinstance(t.claim, TerminalClientClaim)
            and (user := self.client_users.get(t.claim.client_id)) is not None
        }
        told = _Terminals(terminals=mine, hello=hello, claimants=claimants)
        self.root_notices(NODE_TERMINALS, told, "", None)
        if not self.owns(ROOT):
            return None
        others = (
            self.node_terminals[node]
            for node in sorted(self.node_terminals)
            if self.node_alive(node)
        )
        return mine + tuple(t for listed in others for t in listed)

    def terminal_node(self, channel: str) -> str | None:
        """Sharded mode: the other node that reported the terminal ``channel``, live or not
        (``None``: no other node did)."""
        return self._terminal_nodes.get(channel)

    def _node_told(self, node: str, told: _Terminals) -> None:
        """``node``'s terminals are ``told``'s now (the newest told kept last)."""
        self._forget_terminals(node)
        self.node_terminals[node] = told.terminals
        for info in told.terminals:
            self._terminal_nodes[info.resource] = node
        held = {
            t.claim.client_id for t in told.terminals if isinstance(t.claim, TerminalClientClaim)
        }
        self._node_claimants[node] = {c: u for c, u in told.claimants.items() if c in held}
        if len(self.node_terminals) > MAX_TERMINAL_NODES:
            self._forget_terminals(next(iter(self.node_terminals)))
        self._claimants = {
            c: u for users in self._node_claimants.values() for c, u in users.items()
        }

    def _forget_terminals(self, node: str) -> None:
        for info in self.node_terminals.pop(node, ()):
            if self._terminal_nodes.get(info.resource) == node:
                del self._terminal_nodes[info.resource]
        self._node_claimants.pop(node, None)

    def noticed(
        self, method: str, params: bytes, session: str, owner: str | None, node: str = ""
    ) -> None:
        """Sharded mode: another node's ``root/session*`` notification, told to this node's
        root subscribers; the catalogue it keeps follows (and the count, on the root owner).
        ``node/terminals``: that node's terminals, for the root's catalogue;
        ``node/stranded``: the root owner's stranded sessions (:meth:`set_stranded`)."""
        kind = _NOTICES.get(method)
        if kind is None:
            return
        try:
            decoded = codec.decode(params, kind)
        except ValueError:  # msgspec's DecodeError and ValidationError are ValueErrors
            log.warning("unreadable notice from another node dropped", method=method, node=node)
            return
        if isinstance(decoded, _Terminals):
            self._node_told(node, decoded)
            if self.owns(ROOT) or decoded.hello:
                # A node that (re)started is told this node's terminals in turn: it routes
                # requests for them here (docs/scale-out.md "Routing").
                self.terminals_changed()
            if decoded.hello:
                self.node_started(node)
            return
        if isinstance(decoded, _Stranded):
            self.set_stranded(decoded.sessions, tell=False)
            return
        if isinstance(decoded, SessionAddedParams) and session not in self.session_index:
            self.session_index[session] = (decoded.summary.created_at, decoded.summary)
        elif isinstance(decoded, SessionRemovedParams) and session not in self.sessions:
            self.session_index.pop(session, None)
        self.hub.notify(ROOT, method, decoded, only=lambda c: self.may_see_owned(c, owner))
        if not isinstance(decoded, SessionSummaryChangedParams):
            self.session_count_changed()

    def set_stranded(self, stranded: dict[str, str], *, tell: bool = True) -> None:
        """Sharded mode: ``stranded`` (session -> why) are the sessions no node can serve
        now — their owner is dead and no live node serves their working directory
        (docs/scale-out.md "Working directories"). Only the root channel's owner decides
        it (``tell``: it tells the other nodes); every node tells its own root
        subscribers each session that became stranded (``status`` Error, the reason as
        its ``activity``) or was served again (its stored status and activity), with
        ``root/sessionSummaryChanged``, and lists them so (:meth:`listed`)."""
        if tell and self.root_notices is not None:
            self.root_notices(NODE_STRANDED, _Stranded(sessions=stranded), "", None)
        before, self.stranded = self.stranded, dict(stranded)
        for session in sorted(before.keys() | stranded.keys()):
            if before.get(session) == stranded.get(session) or session not in self.session_index:
                continue
            stored = self.session_index[session][1]
            if session in stranded:
                status = (0 if stored is None else stored.status & ~_ACTIVITY_BITS) | int(
                    SessionStatus.Error
                )
                changes = PartialSessionSummary(status=status, activity=stranded[session])
            elif stored is not None:
                changes = PartialSessionSummary(
                    status=stored.status,
                    activity=None if isinstance(stored.activity, UnsetType) else stored.activity,
                )
            else:
                continue
            self._summary_changed(session, changes)

    def _summary_changed(self, session: str, changes: PartialSessionSummary) -> None:
        """Tell this node's root subscribers who may see ``session`` that its summary
        changed (``root/sessionSummaryChanged``), and nobody else."""
        owner = self.owner_of(session)
        self.hub.notify(
            ROOT,
            "root/sessionSummaryChanged",
            SessionSummaryChangedParams(channel=ROOT, session=session, changes=changes),
            only=lambda c: self.may_see_owned(c, owner),
        )

    def listed(self, session: str, summary: SessionSummary) -> SessionSummary:
        """``session``'s summary as ``listSessions`` gives it: failed while it is stranded
        (:meth:`set_stranded`), else as it is."""
        why = self.stranded.get(session)
        if why is None:
            return summary
        status = (summary.status & ~_ACTIVITY_BITS) | int(SessionStatus.Error)
        return msgspec.structs.replace(summary, status=status, activity=why)

    def add_chat(self, chat: ChatActor) -> None:
        """Register, store and start a new chat of a loaded session."""
        self.chats[chat.uri] = chat
        self.chat_index[chat.uri] = chat.session.uri
        chat.session.chats[chat.uri] = chat
        chat.persist_new(chat.state.modified_at)
        chat.start()

    async def forget(self, uri: str) -> None:
        """Dispose a session or chat: stop it, drop its subscribers, delete its data."""
        actor: SessionActor | ChatActor | None = self.sessions.pop(uri, None)
        self.session_index.pop(uri, None)
        was_chat = self.chat_index.pop(uri, None) is not None
        chat = self.chats.pop(uri, None)
        if chat is not None:
            chat.session.chats.pop(uri, None)
            actor = chat
        if actor is not None:
            await actor.stop()
        self.hub.drop_channel(uri)
        self.store.delete_channel(uri)
        if was_chat:
            for service in self.services:
                await service.chat_disposed(uri)

    def chats_of(self, session: str) -> list[str]:
        return [chat for chat, owner in self.chat_index.items() if owner == session]

    async def _load_once(self, uri: str, load: Callable[[str], Awaitable[Any]]) -> Any:
        pending = self._loading.get(uri)
        if pending is None:
            pending = self._loading[uri] = asyncio.ensure_future(load(uri))
            pending.add_done_callback(lambda _: self._loading.pop(uri, None))
        return await asyncio.shield(pending)

    async def rebuild_session(self, uri: str) -> tuple[SessionActor, LoadedChannel] | None:
        """A stored session rebuilt from the store: its snapshot, then the log after it
        reduced with the session reducer at the times first applied.

        The actor is neither registered nor started: :meth:`_load_session` does
        that; the fuzzer compares it with the live one (tests/fuzz).
        """
        loaded = await self.store.load(uri, retained_turns=0)
        if loaded is None or loaded.snapshot is None:
            log.error("stored session cannot be loaded", session=uri)
            return None
        state = codec.decode(loaded.snapshot, SessionState)
        last = loaded.snapshot_seq
        for seq, at, envelope in loaded.envelopes:
            if seq > loaded.snapshot_seq:
                action = codec.decode(envelope, ActionEnvelope).action
                state = reduce_session(state, action, _at(at))
                last = seq
        created_at = self.session_index[uri][0]
        actor = SessionActor(self, uri, state, created_at=created_at)
        actor.last_seq = last
        return actor, loaded

    async def _load_session(self, uri: str) -> SessionActor | None:
        rebuilt = await self.rebuild_session(uri)
        if rebuilt is None:
            return None
        actor, loaded = rebuilt
        await self._delivered_through(uri, loaded)
        self.hub.seed_replay(uri, loaded.log_floor, ((s, e) for s, _, e in loaded.envelopes))
        self.sessions[uri] = actor
        actor.start()
        log.debug("session loaded", session=uri, replayed=len(loaded.envelopes))
        if self._catalogue_drift(actor):
            self.spawn(self._mend_catalogue(actor))
        return actor

    async def _delivered_through(self, uri: str, loaded: LoadedChannel) -> None:
        """Sharded mode: a channel read from the shared log may hold numbers this node
        has not delivered yet — another node committed them and this node's feed is still
        filling them in (a record lost on the bus, docs/scale-out.md "Failure cases").
        Loaded now, its replay and snapshot would give a client those numbers, and the
        feed would then deliver them to it again: wait (bounded) until delivery has
        passed them. ``InternalError`` ("try again") when it does not in time."""
        last = max((seq for seq, _, _ in loaded.envelopes), default=loaded.snapshot_seq)
        last = max(last, loaded.snapshot_seq)
        if self.router is None or last <= self.hub.delivered_seq:
            return
        if not await self.router.caught_up(last):
            raise InternalError(
                f"{uri}: this node has not yet received everything committed for it: try again"
            )

    def _catalogue_drift(self, session: SessionActor) -> bool:
        """Whether a ready session's chat catalogue disagrees with the ownership rows:
        a ``moveChat`` or ``disposeChat`` that a crash cut short (host/commands/moves.py)."""
        if session.state.lifecycle != "ready":
            return False  # a session being created lists its default chat only when ready
        return {c.resource for c in session.state.chats} != set(self.chats_of(session.uri))

    async def _mend_catalogue(self, session: SessionActor) -> None:
        """Bring ``session``'s catalogue in step with the ownership rows: chats owned
        elsewhere or gone leave it, its own chats join it."""
        listed = {c.resource for c in session.state.chats}
        for uri in sorted(listed):
            if self.chat_index.get(uri) != session.uri:
                await session.apply_server(SessionChatRemovedAction(chat=uri))
        for uri in self.chats_of(session.uri):
            if uri not in listed:
                chat = await self.chat(uri)
                if chat is not None:
                    summary = chat_summary(chat.state)
                    await session.apply_server(SessionChatAddedAction(summary=summary))
        log.warning("session catalogue mended", session=session.uri)

    async def _load_chat(self, uri: str) -> ChatActor | None:
        session = await self.session(self.chat_index[uri])
        if session is None:
            return None
        rebuilt = await self.rebuild_chat(uri, session)
        if rebuilt is None:
            return None
        actor, loaded = rebuilt
        await self._delivered_through(uri, loaded)
        self.hub.seed_replay(uri, loaded.log_floor, ((s, e) for s, _, e in loaded.envelopes))
        self.chats[uri] = actor
        session.chats[uri] = actor
        actor.start()
        log.debug(
            "chat loaded", chat=uri, turns=len(actor.state.turns), replayed=len(loaded.envelopes)
        )
        return actor

    async def rebuild_chat(
        self, uri: str, session: SessionActor
    ) -> tuple[ChatActor, LoadedChannel] | None:
        """A stored chat rebuilt from the store: its snapshot and newest stored turns,
        then the log after the snapshot reduced with the chat reducer, its memory
        trimmed as a live chat's is.

        Not registered nor started (:meth:`_load_chat` does that; the fuzzer
        compares it with the live one, tests/fuzz).
        """
        # The newest turns within both bounds, count and bytes (docs/durability.md "History").
        loaded = await self.store.load_chat(
            uri,
            retained_turns=self.settings.retained_turns,
            retained_bytes=self.settings.memory_turn_bytes,
        )
        if loaded is None or loaded.snapshot is None:
            log.error("stored chat cannot be loaded", chat=uri)
            return None
        turns = tuple(codec.decode(t, Turn) for t in loaded.turns)
        sizes = {turn.id: len(raw) for turn, raw in zip(turns, loaded.turns, strict=True)}
        state = replace(codec.decode(loaded.snapshot, ChatState), turns=turns)
        last = loaded.snapshot_seq
        for seq, at, envelope in loaded.envelopes:
            if seq > loaded.snapshot_seq:
                action = codec.decode(envelope, ActionEnvelope).action
                state = reduce_chat(state, action, _at(at))
                last = seq
        if turns and state.turns and state.turns[0] is not turns[0]:
            # A replayed chat/turnsLoaded prepended older turns: they are on disk
            # and need not be in memory; state.turns[0] must be the turn at
            # first_turn_position (turn_offset).
            first = next((i for i, t in enumerate(state.turns) if t is turns[0]), 0)
            state = replace(state, turns=state.turns[first:])
        if loaded.first_turn_position > 0 and state.turns:
            state = replace(state, turns_next_cursor=turns_cursor(state.turns[0].id))
        elif loaded.first_turn_position == 0:
            state = replace(state, turns_next_cursor=UNSET)
        actor = ChatActor(self, uri, state, session=session, turn_sizes=sizes)
        actor.last_seq = last
        actor.turn_offset = loaded.first_turn_position
        actor.trim_memory()  # turns the replay completed count too
        actor.agent_state = loaded.agent_state
        return actor, loaded

    def learn_client(self, client_id: str, version: str, user: str | None) -> None:
        """Sharded mode: a client another node remembers, reconnecting here (its id stays
        its first user's: :meth:`claim_client` checks it as for one remembered here)."""
        self.clients[client_id] = version
        if self.multi_user and user is not None:
            self.client_users.setdefault(client_id, user)

    def remember_client(self, client_id: str, version: str) -> None:
        """Remember ``client_id`` (for ``reconnect``) as its user's most recently seen id.

        Each user's ids are bounded by ``limits.known_clients`` in a bucket of
        their own (one bucket without multi-user mode, and one for ids with no
        user), so one user's new ids never evict another user's. Past the
        bound the least recently seen are forgotten — but never a live id nor
        one a terminal's client claim names: forgetting either would hand it,
        with its terminals, to the next user to claim it (docs/protocol.md
        "Client identity"). The host decides; the store forgets what it is told.
        """
        user = self.client_users.get(client_id)
        key = user if self.multi_user else None
        if key is not None and None in self._known:
            # An id remembered with no user (before multi-user mode) is now its
            # user's: it moves to that user's bucket (an id is in one bucket only).
            self._known[None].pop(client_id, None)
        bucket = self._known.setdefault(key, OrderedDict())
        bucket[client_id] = None
        bucket.move_to_end(client_id)
        self.clients[client_id] = version
        forget = self._forgettable(bucket, len(bucket) - self.settings.known_clients)
        for forgotten in forget:
            del bucket[forgotten]
            self.clients.pop(forgotten, None)
            self.client_users.pop(forgotten, None)
        self.store.put_client(client_id, version, user, forget=forget)

    def _forgettable(self, bucket: OrderedDict[str, None], excess: int) -> tuple[str, ...]:
        """Up to ``excess`` of ``bucket``'s ids, least recently seen first, that are
        neither live nor named by a terminal's client claim."""
        if excess <= 0:
            return ()
        claims = (
            getattr(getattr(a, "state", None), "claim", None)
            for a in self.workspace_channels.values()
        )
        named = {claim.client_id for claim in claims if isinstance(claim, TerminalClientClaim)}
        forget: list[str] = []
        for candidate in bucket:
            if len(forget) == excess:
                break
            if candidate not in self.live_clients and candidate not in named:
                forget.append(candidate)
        return tuple(forget)

    def session_count_changed(self) -> None:
        if not self.owns(ROOT):
            return  # sharded mode: the root channel's owner counts every node's sessions
        count = len(self.session_index)
        self.spawn(self.root.apply_server(RootActiveSessionsChangedAction(active_sessions=count)))

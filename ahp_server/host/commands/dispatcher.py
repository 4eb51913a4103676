"""The command dispatcher: every JSON-RPC method the host answers.

Layer: host (asyncio).

Each handler decodes its params (``-32602`` on mismatch), does its work —
through the owning actor whenever state changes — and returns the encoded
result. Handlers raise :class:`~ahp_server.protocol.errors.ProtocolError` for
anything the client should hear about; the gateway turns it into the error
response.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import msgspec
import structlog
from msgspec import UNSET, UnsetType

from ahp_server.host.actors import (
    CHAT_SCHEME,
    ROOT,
    SESSION_SCHEME,
    ChannelActor,
    ChatActor,
    SessionActor,
    SourceContext,
    chat_summary,
    turns_cursor,
)
from ahp_server.host.core import edge
from ahp_server.host.core.fanout import CLOSE_SERVICE_RESTART, Connection, ConnState
from ahp_server.host.core.routing import RESOURCES, ROUTED, Router, Unreachable
from ahp_server.host.host import Host
from ahp_server.host.sessions import new_default_chat, new_session_actor
from ahp_server.protocol import codec
from ahp_server.protocol.dispatch_rules import RejectionCode, duplicate_turn
from ahp_server.protocol.errors import (
    AhpErrorCode,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ProtocolError,
)
from ahp_server.protocol.jsonrpc import decode_params
from ahp_server.protocol.reducers import (
    iso_timestamp,
    reduce_annotations,
    reduce_changeset,
    reduce_chat,
    reduce_resource_watch,
    reduce_session,
    reduce_terminal,
)
from ahp_server.protocol.types import (
    ActionEnvelope,
    ActionOrigin,
    ActiveTurn,
    AgentInfo,
    AnnotationsState,
    ChangesetState,
    ChatOriginFork,
    ChatOriginSideChat,
    ChatOriginUser,
    ChatState,
    ChatTurnStartedAction,
    CreateChatParams,
    CreateSessionParams,
    DisposeChatParams,
    DisposeSessionParams,
    FetchTurnsParams,
    ForkChatSource,
    Implementation,
    InitializeParams,
    ListSessionsParams,
    ReconnectParams,
    ResourceWatchState,
    SessionActiveClient,
    SessionChatAddedAction,
    SessionChatRemovedAction,
    SessionRemovedParams,
    SessionState,
    SessionStatus,
    SessionSummary,
    SideChatSource,
    Snapshot,
    StateAction,
    SubscribeParams,
    SubscribeResult,
    TerminalState,
    Turn,
    UnsubscribeParams,
)
from ahp_server.protocol.uris import (
    DEFAULT_CHAT_PREFIX,
    default_chat,
    normal_form,
    session_uri_problem,
)
from ahp_server.protocol.versions import (
    SUPPORTED_VERSIONS,
    blocked_action_types,
    negotiate,
    row_for,
)
from ahp_server.protocol.views import v0_7
from ahp_server.store.base import newest_within
from ahp_server.workspace.paths import PathInvalid, PathRefused, directory_path, file_uri

__all__ = ["Commands"]

log = structlog.get_logger(__name__)

P = TypeVar("P")

#: Turns per ``fetchTurns`` page.
FETCH_PAGE = 50
LIST_LIMIT = 1000
#: The most bytes of summaries one ``listSessions`` page carries (the first always goes).
LIST_PAGE_BYTES = 1024 * 1024


class _RawDispatch(msgspec.Struct, kw_only=True):
    """``dispatchAction`` params with the action still raw, so a bad action can be echoed."""

    channel: str
    client_seq: int = msgspec.field(name="clientSeq")
    action: msgspec.Raw


class _ReplayResult(msgspec.Struct, kw_only=True, tag_field="type", tag="replay"):
    """``ReconnectReplayResult`` built from the replay buffer's encoded envelopes."""

    actions: list[msgspec.Raw]
    missing: list[str]


class _InitializeResult(msgspec.Struct, kw_only=True):
    """``InitializeResult`` built from snapshots encoded one by one (``_snapshots``)."""

    protocol_version: str = msgspec.field(name="protocolVersion")
    server_seq: int = msgspec.field(name="serverSeq")
    server_info: Implementation | UnsetType = msgspec.field(name="serverInfo", default=UNSET)
    snapshots: list[msgspec.Raw]


class _ListSessionsResult(msgspec.Struct, kw_only=True):
    """``ListSessionsResult`` built from summaries encoded one by one (a page bounded in bytes)."""

    items: list[msgspec.Raw]
    next_cursor: str | UnsetType = msgspec.field(name="nextCursor", default=UNSET)


class _SnapshotResult(msgspec.Struct, kw_only=True, tag_field="type", tag="snapshot"):
    """``ReconnectSnapshotResult`` built from snapshots encoded one by one."""

    snapshots: list[msgspec.Raw]


class _Channel(msgspec.Struct):
    channel: str


class _Subscribed(msgspec.Struct):
    """A ``SubscribeResult`` as a node reads another node's: the snapshot kept encoded."""

    snapshot: msgspec.Raw


_CHANNEL = msgspec.json.Decoder(_Channel)
_SUBSCRIBED = msgspec.json.Decoder(_Subscribed)
#: The pure reducer of each kind of state another node's snapshot may hold (sharded
#: mode: a snapshot brought forward to this node's watermark).
_REDUCERS: dict[type[Any], Callable[[Any, object, Callable[[], float]], Any]] = {
    ChatState: reduce_chat,
    SessionState: reduce_session,
    AnnotationsState: reduce_annotations,
    ChangesetState: reduce_changeset,
    TerminalState: reduce_terminal,
    ResourceWatchState: reduce_resource_watch,
}

#: Errors of a subscription forwarded within initialize / reconnect that make the
#: channel absent (as a local one that is unknown or another user's), not the answer fail.
_ABSENT = frozenset(
    {AhpErrorCode.SessionNotFound, AhpErrorCode.NotFound, AhpErrorCode.PermissionDenied}
)
#: Times a forwarded subscription is asked again when this node's history of the
#: channel no longer reaches back to the owner's snapshot.
_RESUBSCRIBE = 3

#: Requests whose answer says a channel exists (``moveChat``: the chat's session, maybe
#: a new one): forwarded from another node, they are answered once the catalogue has it
#: (sharded mode).
_CATALOGUED = frozenset({"createSession", "createChat", "moveChat"})

_NULL = b"null"
_EMPTY = b"{}"


#: What a connection with no user may ask in multi-user mode: the handshake, a
#: ping, and the root channel (whose sessions and terminals it does not see).
_NOBODY_MAY = frozenset(
    {"initialize", "reconnect", "ping", "subscribe", "listSessions", "fetchTurns"}
)


class Commands:
    """Handlers for requests and client notifications."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._requests: dict[str, Callable[[Connection, Any], Awaitable[bytes]]] = {
            "ping": self.ping,
            "initialize": self.initialize,
            "reconnect": self.reconnect,
            "subscribe": self.subscribe,
            "createSession": self.create_session,
            "disposeSession": self.dispose_session,
            "createChat": self.create_chat,
            "disposeChat": self.dispose_chat,
            "fetchTurns": self.fetch_turns,
            "listSessions": self.list_sessions,
            "completions": self.completions,
            "resolveSessionConfig": self.resolve_session_config,
            "sessionConfigCompletions": self.completions,
            "authenticate": self.authenticate,
        }
        # ``ping`` takes whatever params it gets: a keepalive never fails.
        self._params: dict[str, type[Any]] = {
            "initialize": InitializeParams,
            "reconnect": ReconnectParams,
            "subscribe": SubscribeParams,
            "createSession": CreateSessionParams,
            "disposeSession": DisposeSessionParams,
            "createChat": CreateChatParams,
            "disposeChat": DisposeChatParams,
            "fetchTurns": FetchTurnsParams,
            "listSessions": ListSessionsParams,
        }

    def register(
        self,
        method: str,
        handler: Callable[[Connection, Any], Awaitable[bytes]],
        params_type: type[Any] | None = None,
    ) -> None:
        """Answer ``method`` with ``handler`` (params decoded as ``params_type``, if given).

        The workspace services (resources, terminals, resource watches,
        changesets) register their commands here.
        """
        if method in self._requests:
            raise ValueError(f"{method!r} is already handled")
        self._requests[method] = handler
        if params_type is not None:
            self._params[method] = params_type

    # -- routing ------------------------------------------------------------------------------

    async def handle(
        self, connection: Connection, method: str, params: msgspec.Raw | UnsetType
    ) -> bytes:
        handler = self._requests.get(method)
        if handler is None:
            raise MethodNotFound(f"method {method!r} is not supported by this host")
        if connection.user is None and self.host.multi_user and method not in _NOBODY_MAY:
            # Multi-user mode: no identity is nobody, who may look at the root
            # channel and nothing else (docs/protocol.md "Identity and ownership").
            raise ProtocolError(
                "this connection has no user: it may not " + method,
                code=AhpErrorCode.PermissionDenied,
            )
        fork: tuple[str, str] | None = None
        if connection.legacy:
            # A 0.7 client: its params in 1.0 terms first (host/core/edge.py).
            if method in v0_7.METHODS_NOT_IN_0_7:
                raise MethodNotFound(f"method {method!r} is not part of protocol 0.7")
            if not isinstance(params, UnsetType):
                await self._before_translation(method, params)
                translated = edge.inbound_params(method, params, self._chat_of)
                if translated is None:
                    raise InvalidParams(f"{method}: not a protocol 0.7 request")
                params, original = translated
                if method == "createSession":
                    fork = v0_7.fork_source(original)
        router = self.host.router
        routed: bytes | None = None
        if router is not None and method in ROUTED and fork is None:
            routed = await self._route(connection, router, method, params)
        elif (
            router is not None
            and method in RESOURCES
            and not connection.forwarded
            and not isinstance(params, UnsetType)
        ):
            # A file request: to a node serving its paths (docs/scale-out.md "Routing").
            routed = await router.resource(connection, method, bytes(params))
        if routed is not None:
            result: bytes = routed
        else:
            params_type = self._params.get(method)
            decoded: Any = decode_params(params, params_type) if params_type else params
            if fork is not None:
                result = await self.create_session(connection, decoded, fork=fork)
            else:
                result = await handler(connection, decoded)
            if connection.forwarded and method in _CATALOGUED:
                # Another node's client: that node finds what was made in the catalogue
                # (PostgreSQL) when its client next names it.
                await self.host.commit_now()
        return edge.result(method, result) if connection.legacy else result

    # -- sharded mode: requests for other nodes' sessions (host/core/routing.py) --------------

    async def _route(
        self,
        connection: Connection,
        router: Router,
        method: str,
        params: msgspec.Raw | UnsetType,
    ) -> bytes | None:
        """The answer of the node owning the request's channel; ``None``: answer here."""
        channel = _channel_param(params)
        if channel is None:
            return None  # the handler's decoding says what is wrong
        if connection.forwarded:
            self._still_mine(connection, router, method, channel)
            return None
        if method == "createSession":
            assert not isinstance(params, UnsetType)
            return await self._place(connection, router, channel, params)
        node = await router.owner(method, channel)
        if node is None:
            return None
        assert not isinstance(params, UnsetType)
        if method == "subscribe":
            return await self._subscribe_elsewhere(connection, router, node, channel, params)
        return await router.request(connection, node, method, bytes(params))

    async def _place(
        self, connection: Connection, router: Router, channel: str, params: msgspec.Raw
    ) -> bytes | None:
        """``createSession`` on the node placement picks by the session's working
        directory (``None``: this one). A node whose route cannot be opened is left
        out and the next candidate tried, each once (docs/scale-out.md "Placement")."""
        directory = directory_path(_first_directory(params))
        tried: frozenset[str] = frozenset()
        while True:
            node = await router.owner("createSession", channel, directory=directory, exclude=tried)
            if node is None:
                return None
            if node in tried:  # each candidate once, whatever the router says
                raise InternalError(f"node {node} did not answer: try again")
            try:
                return await router.request(connection, node, "createSession", bytes(params))
            except Unreachable:
                log.warning("placement: node not answering, trying the next", node=node)
                tried |= {node}

    def _still_mine(
        self, connection: Connection, router: Router, method: str, channel: str
    ) -> None:
        """A request forwarded here for a session another node took over meanwhile: the
        client's node closes the client (1012), and it finds the new owner on reconnect."""
        if method == "createSession" or router.mine(channel) or not self.host.knows(channel):
            return
        connection.close(CLOSE_SERVICE_RESTART, "the session moved to another node: reconnect")
        raise InternalError(f"{channel} moved to another node")

    async def _subscribe_elsewhere(
        self, connection: Connection, router: Router, node: str, channel: str, params: bytes
    ) -> bytes:
        """``subscribe`` to a channel ``node`` owns: its snapshot (as of its watermark S),
        brought forward to this node's watermark W with the channel's envelopes in
        (S, W] (:meth:`_rebased`) and answered with the subscription made in the same
        step (no ``await`` between): every envelope after W follows, none before it
        (docs/scale-out.md "Routing")."""
        hub = self.host.hub
        limit = self.host.settings.max_subscriptions
        if channel not in connection.subscriptions and len(connection.subscriptions) >= limit:
            raise InvalidParams(f"subscription limit reached ({limit} per connection)")
        if channel in connection.subscriptions:
            # Subscribed already: the envelopes until the new snapshot are in it.
            hub.unsubscribe(connection, channel)
        for _ in range(_RESUBSCRIBE):
            result = await router.request(connection, node, "subscribe", params)
            rebased = self._rebased(connection, channel, _SUBSCRIBED.decode(result).snapshot)
            if rebased is not None:
                hub.subscribe(connection, channel)
                return codec.encode(_Subscribed(snapshot=rebased))
        raise InternalError(
            f"the history of {channel} moved on while it was fetched: subscribe again"
        )

    async def _split(
        self, connection: Connection, channels: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """``channels`` this node answers for, and those another node owns (with the node)."""
        router = self.host.router
        if router is None or connection.forwarded:
            return channels, {}
        local: list[str] = []
        remote: dict[str, str] = {}
        for channel in channels:
            node = await router.owner("subscribe", channel)
            if node is None:
                local.append(channel)
            else:
                remote[channel] = node
        return local, remote

    async def _snapshots_elsewhere(
        self, connection: Connection, remote: dict[str, str], client: tuple[str, str]
    ) -> dict[str, msgspec.Raw]:
        """The snapshots of channels other nodes own (initialize, reconnect), as they sent
        them; a channel unknown there or another user's is left out (missing)."""
        found: dict[str, msgspec.Raw] = {}
        router = self.host.router
        if router is None or not remote:
            return found
        for channel, node in remote.items():
            params = codec.encode(SubscribeParams(channel=channel))
            try:
                result = await router.request(connection, node, "subscribe", params, client=client)
            except ProtocolError as error:
                if error.code in _ABSENT:
                    continue
                raise
            found[channel] = _SUBSCRIBED.decode(result).snapshot
        return found

    async def _rejoin(self, connection: Connection, sessions: dict[str, str]) -> None:
        """Subscribe ``connection``'s client again on the nodes owning ``sessions`` (their
        answers are not needed: the client has what it missed from this node)."""
        router = self.host.router
        assert router is not None
        for session, node in sessions.items():
            params = codec.encode(SubscribeParams(channel=session))
            try:
                await router.request(connection, node, "subscribe", params)
            except ProtocolError as error:
                log.info("could not rejoin a session's owner", node=node, error=error.message)

    def _rebased(
        self, connection: Connection, channel: str, snapshot: msgspec.Raw
    ) -> msgspec.Raw | None:
        """Another node's snapshot of ``channel`` (as of its ``fromSeq`` S) as of this
        node's watermark W: the channel's envelopes in (S, W] from this node's replay
        buffer applied with the channel's pure reducer — what a client would do with
        them — and ``fromSeq`` W. ``None`` when the buffer no longer reaches back to S,
        or the channel has no reducer here (the caller asks again)."""
        hub = self.host.hub
        try:
            decoded = codec.decode(snapshot, Snapshot)
        except ValueError:
            return None
        envelopes = hub.replay_each({channel: decoded.from_seq}, viewer=connection)
        if envelopes is None:
            return None
        state: Any = decoded.state
        if envelopes:
            reducer = _REDUCERS.get(type(state))
            if reducer is None:
                return None
            for envelope in envelopes:
                state = reducer(state, codec.decode(envelope, ActionEnvelope).action, self.host.now)
        rebased = Snapshot(resource=decoded.resource, state=state, from_seq=hub.delivered_seq)
        return msgspec.Raw(codec.encode(rebased))

    def _rebase_all(
        self, connection: Connection, fetched: dict[str, msgspec.Raw]
    ) -> list[msgspec.Raw]:
        """:meth:`_rebased` for every snapshot of ``fetched`` (initialize, reconnect),
        in one step; -32603 when one cannot be (the client tries again)."""
        out: list[msgspec.Raw] = []
        for channel, snapshot in fetched.items():
            rebased = self._rebased(connection, channel, snapshot)
            if rebased is None:
                raise InternalError(
                    f"the history of {channel} moved on while it was fetched: try again"
                )
            out.append(rebased)
        return out

    async def _before_translation(self, method: str, params: msgspec.Raw) -> None:
        """What a 0.7 request needs checked before it becomes 1.0: the rules
        1.0 expresses differently, with the errors 0.7 gave."""
        if method not in ("createSession", "createChat", "createTerminal"):
            return
        value = msgspec.json.decode(params)
        if not isinstance(value, dict):
            return
        primary = value.get("primaryWorkingDirectory")
        directories = value.get("workingDirectories")
        if (
            isinstance(primary, str)
            and isinstance(directories, list)
            and primary not in directories
        ):
            # 1.0 has no such field: the primary is index 0 (views/v0_7.py).
            raise InvalidParams("primaryWorkingDirectory must be one of workingDirectories")
        claim = value.get("claim")
        if (
            method == "createTerminal"
            and isinstance(claim, dict)
            and claim.get("kind") == "session"
        ):
            session = claim.get("session")
            # A 1.0 session claim names its chat: load the session so that
            # its chat can be found; one that does not exist is -32001, as at 0.7.
            if isinstance(session, str) and await self.host.session(session) is None:
                raise ProtocolError(f"no session {session}", code=AhpErrorCode.SessionNotFound)

    def _chat_of(self, session: str, turn_id: str | None) -> str | None:
        """The chat of ``session`` that holds ``turn_id`` (its default chat for
        ``None``): what a 0.7 client's terminal claim or annotation means."""
        actor = self.host.sessions.get(session)
        if actor is None:
            # Sharded mode: a session of another node, known from the catalogue. A 0.7
            # client has one chat per session: its default chat (protocol/uris.py).
            known = self.host.router is not None and session in self.host.session_index
            return default_chat(session) if known else None
        chats = [c for c in self.host.chats.values() if c.session is actor]
        if turn_id is not None:
            for chat in chats:
                active = chat.state.active_turn
                if (isinstance(active, ActiveTurn) and active.id == turn_id) or any(
                    turn.id == turn_id for turn in chat.state.turns
                ):
                    return chat.uri
        default = actor.state.default_chat
        if isinstance(default, str):
            return default
        # A session still being created: its default chat is not in the
        # catalogue yet, but it is the session's first chat.
        return chats[0].uri if chats else None

    async def notify(
        self, connection: Connection, method: str, params: msgspec.Raw | UnsetType
    ) -> None:
        if method == "dispatchAction":
            await self.dispatch_action(connection, params)
        elif method == "unsubscribe":
            unsubscribe = decode_params(params, UnsubscribeParams)
            was_subscribed = unsubscribe.channel in connection.subscriptions
            self.host.hub.unsubscribe(connection, unsubscribe.channel)
            router = self.host.router
            if router is not None and not connection.forwarded:
                node = await router.owner(method, unsubscribe.channel)
                if node is not None:  # its owner releases the client there (§14.10)
                    assert not isinstance(params, UnsetType)
                    await router.notify(connection, node, method, bytes(params))
                    return
            if was_subscribed:  # §14.10: leaving a session releases the client there
                await self.host.unsubscribed(connection, unsubscribe.channel)
        else:
            log.info("unknown notification ignored", conn=connection.id, method=method)

    # -- connection lifecycle -----------------------------------------------------------------

    async def ping(self, connection: Connection, params: object) -> bytes:
        return _NULL

    def _handshake(self, connection: Connection, client_id: str, version: str) -> None:
        if connection.state is not ConnState.NEW:
            raise InvalidRequest("this connection is already initialized (or closing)")
        if not client_id:
            raise InvalidParams("clientId must not be empty")
        # Check first, then change: a claim refused (-32009, another user's id)
        # leaves the connection as it was, uninitialized — never READY under an
        # id it may not hold (docs/protocol.md "Client identity"). Nothing after
        # the claim raises.
        self.host.claim_client(connection, client_id)
        connection.client_id = client_id
        connection.protocol_version = version
        connection.blocked_actions = blocked_action_types(version)
        row = row_for(version)
        connection.legacy = row is not None and edge.is_legacy(row.view)
        connection.state = ConnState.READY
        if not connection.forwarded:  # a route negotiates 1.0 whatever its client did
            self.host.remember_client(client_id, version)
        # Every later log line of this connection's task names its client.
        structlog.contextvars.bind_contextvars(client_id=client_id)

    async def initialize(self, connection: Connection, params: InitializeParams) -> bytes:
        _root_channel(params.channel)
        if connection.state is ConnState.READY:
            raise InvalidRequest("this connection is already initialized")
        version = negotiate(params.protocol_versions)
        if version is None:
            # WIRE-SUMMARY §3.1: -32005 and close the connection.
            raise ProtocolError(
                f"none of {list(params.protocol_versions)} is supported",
                code=AhpErrorCode.UnsupportedProtocolVersion,
                data={"supportedVersions": list(SUPPORTED_VERSIONS)},
                close=True,
            )
        channels = (
            []
            if isinstance(params.initial_subscriptions, UnsetType)
            else list(dict.fromkeys(params.initial_subscriptions))
        )
        local, remote = await self._split(connection, channels)
        actors = self._permitted(connection, await self._actors(local))
        fetched = await self._snapshots_elsewhere(connection, remote, (params.client_id, version))
        # Built and bounded before anything changes: one over the limit leaves
        # the connection as it was. From here on nothing awaits (gateway.py).
        snapshots = self._snapshots(
            connection,
            [c for c in local if c in actors],
            actors,
            self._rebase_all(connection, fetched),
        )
        self._handshake(connection, params.client_id, version)
        for channel in [*actors, *fetched]:
            self.host.hub.subscribe(connection, channel)
        log.info(
            "client initialized",
            conn=connection.id,
            client_id=params.client_id,
            version=version,
        )
        return codec.encode(
            _InitializeResult(
                protocol_version=version,
                server_seq=self.host.hub.delivered_seq,
                server_info=self.host.server_info,
                snapshots=snapshots,
            )
        )

    async def reconnect(self, connection: Connection, params: ReconnectParams) -> bytes:
        _root_channel(params.channel)
        version = self.host.clients.get(params.client_id)
        if version is None and self.host.router is not None and not connection.forwarded:
            # Sharded mode: a client of another node, reconnecting here.
            found = await self.host.router.client(params.client_id)
            if found is not None:
                self.host.learn_client(params.client_id, *found)
                version = found[0]
        if version is None:
            # The client falls back to initialize on any error (WIRE-SUMMARY §3.3).
            raise ProtocolError(
                f"unknown client {params.client_id!r}: initialize instead",
                code=AhpErrorCode.NotFound,
            )
        # Another user's channels are "no longer permitted": missing (§3.3).
        channels = list(dict.fromkeys(params.subscriptions))
        local, remote = await self._split(connection, channels)
        actors = self._permitted(connection, await self._actors(local))
        # Other nodes' channels this node delivers too: known from the catalogue.
        elsewhere = {c: n for c, n in remote.items() if self.host.may_access(connection, c)}
        hub = self.host.hub
        last_seen = params.last_seen_server_seq
        router = self.host.router
        if elsewhere and router is not None and last_seen > hub.delivered_seq:
            # It was on a node further ahead: replay once this one has delivered as
            # far, or it would send what the client has as new (docs/scale-out.md).
            await router.caught_up(last_seen)
        present = [c for c in channels if c in actors or c in elsewhere]
        # The answer is built and bounded before anything changes (as for
        # initialize): a replay past one outbox falls back to snapshots, and
        # snapshots past it are refused with the connection left as it was.
        replayed = None
        if 0 <= last_seen <= hub.delivered_seq:
            replayed = hub.replay(
                last_seen,
                present,
                viewer=connection,
                max_bytes=self.host.settings.outbox_max_bytes,
            )
        snapshots = None
        if replayed is None:
            fetched = await self._snapshots_elsewhere(
                connection, elsewhere, (params.client_id, version)
            )
            present = [c for c in channels if c in actors or c in fetched]
            snapshots = self._snapshots(
                connection,
                [c for c in present if c in actors],
                actors,
                self._rebase_all(connection, fetched),
            )
        missing = [c for c in channels if c not in present]
        self._handshake(connection, params.client_id, version)
        # §3.3: a session whose URI it no longer lists loses it as an active
        # client (and its client tools there fail), as after the grace period.
        # The session URI itself (guide "Active-Client Lifecycle": "the
        # `reconnect` command's `subscriptions` omit that session URI"); a chat
        # of the session does not keep it there, as unsubscribing from the
        # session channel alone releases it (§14.10).
        listed = frozenset(c for c in present if c in self.host.session_index)
        if any(
            s.uri not in listed
            and any(a.client_id == params.client_id for a in s.state.active_clients)
            for s in self.host.sessions.values()
        ):
            self.host.spawn(self.host.release_client(params.client_id, keep=listed))
        for channel in present:
            hub.subscribe(connection, channel)
        rejoined = {c: n for c, n in elsewhere.items() if c in present and c in listed}
        if replayed is not None and rejoined:
            # Replayed from this node's buffers: the owners of its sessions learn it is
            # back (within the grace, it stays their active client: §3.4, §14.10).
            self.host.spawn(self._rejoin(connection, rejoined))
        if snapshots is None:
            assert replayed is not None
            self.host.counters.reconnect_replay += 1
            log.info("client resumed by replay", client_id=params.client_id, count=len(replayed))
            return codec.encode(
                _ReplayResult(actions=[msgspec.Raw(e) for e in replayed], missing=missing)
            )
        self.host.counters.reconnect_snapshot += 1
        log.info("client resumed by snapshot", client_id=params.client_id)
        return codec.encode(_SnapshotResult(snapshots=snapshots))

    # -- subscriptions ------------------------------------------------------------------------

    async def _actors(self, channels: Iterable[str]) -> dict[str, Any]:
        """Load every known channel of ``channels`` (before the one-step snapshot)."""
        channels = list(dict.fromkeys(channels))
        limit = self.host.settings.max_subscriptions
        if len(channels) > limit:
            raise InvalidParams(f"subscription limit reached ({limit} per connection)")
        actors: dict[str, Any] = {}
        for channel in channels:
            actor = await self.host.actor(channel)
            if actor is not None:
                actors[channel] = actor
        return actors

    def _permitted(self, connection: Connection, actors: dict[str, Any]) -> dict[str, Any]:
        """``actors`` without the channels of sessions ``connection``'s user may not see."""
        return {c: a for c, a in actors.items() if self.host.may_access(connection, c)}

    def _snapshot(
        self, connection: Connection, channel: str, actor: Any, turns: int | None
    ) -> Snapshot:
        """A channel's snapshot as ``connection`` may see it, as of the last delivered
        envelope: subscribed in the same step (no ``await`` between), every envelope
        after ``fromSeq`` reaches the connection after it."""
        state: Any = actor.snapshot_state(turns) if isinstance(actor, ChatActor) else actor.visible
        if channel == ROOT:
            state = self.host.root_view(connection, state)  # multi-user mode: its terminals
        return Snapshot(resource=channel, state=state, from_seq=self.host.hub.delivered_seq)

    def _snapshots(
        self,
        connection: Connection,
        channels: list[str],
        actors: dict[str, Any],
        fetched: Sequence[msgspec.Raw] = (),
    ) -> list[msgspec.Raw]:
        """``channels``' snapshots, encoded, for one answer (initialize, reconnect).

        The answer is one frame in the client's outbox: snapshots past
        ``limits.outbox_max_bytes`` in all are refused (-32602) as soon as the
        total passes it, before the rest are built (docs/reliability.md "Memory").
        """
        limit = self.host.settings.outbox_max_bytes
        out: list[msgspec.Raw] = []
        size = 0
        encoded_all = (
            *(codec.encode(self._snapshot(connection, c, actors[c], None)) for c in channels),
            *(bytes(raw) for raw in fetched),  # other nodes' (sharded mode)
        )
        for encoded in encoded_all:
            size += len(encoded)
            if size > limit:
                raise InvalidParams(
                    f"the snapshots of these {len(channels)} channels are larger than "
                    f"limits.outbox_max_bytes ({limit} bytes): subscribe to fewer at once"
                )
            out.append(msgspec.Raw(encoded))
        return out

    async def subscribe(self, connection: Connection, params: SubscribeParams) -> bytes:
        turns: int | None = None
        if not isinstance(params.view, UnsetType) and not isinstance(params.view.turns, UnsetType):
            turns = max(0, int(params.view.turns))
        limit = self.host.settings.max_subscriptions
        if (
            params.channel not in connection.subscriptions
            and len(connection.subscriptions) >= limit
        ):
            raise InvalidParams(f"subscription limit reached ({limit} per connection)")
        if self.host.session_of_channel(params.channel) in self.host.session_index:
            # Another user's session: refused before anything is loaded or made
            # for it, whether or not the channel exists (which it must not tell).
            self.host.check_access(connection, params.channel)
        actor = await self.host.actor(params.channel)
        if actor is None:
            if params.channel.startswith(SESSION_SCHEME):
                raise ProtocolError(
                    f"no session {params.channel}", code=AhpErrorCode.SessionNotFound
                )
            raise ProtocolError(f"no channel {params.channel}", code=AhpErrorCode.NotFound)
        self.host.check_access(connection, params.channel)
        snapshot = self._snapshot(connection, params.channel, actor, turns)
        self.host.hub.subscribe(connection, params.channel)
        return codec.encode(SubscribeResult(snapshot=snapshot))

    async def dispatch_action(
        self, connection: Connection, params: msgspec.Raw | UnsetType
    ) -> None:
        raw = decode_params(params, _RawDispatch)
        router = self.host.router
        if router is not None:
            if connection.forwarded:
                try:
                    self._still_mine(connection, router, "dispatchAction", raw.channel)
                except ProtocolError:
                    return  # the client's node closes it: it reconnects and dispatches again
            else:
                node = await router.owner("dispatchAction", raw.channel)
                if node is not None:
                    await self._dispatch_elsewhere(connection, router, node, raw)
                    return
        actor = await self.host.actor(raw.channel)
        if actor is None:
            return  # WIRE-SUMMARY §7.4: unknown channel, silently ignored
        assert connection.client_id is not None
        origin = ActionOrigin(client_id=connection.client_id, client_seq=raw.client_seq)
        if connection.legacy and self.host.may_access(connection, raw.channel):
            # A 0.7 client's action in 1.0 terms (host/core/edge.py); its echo is
            # projected back on the way out.
            translated = edge.inbound_action(raw.action, raw.channel, self._chat_of)
            if translated is None:
                await self._refuse(actor, connection, raw, origin, "not a protocol 0.7 action")
                return
            raw.action = translated
        if not self.host.may_access(connection, raw.channel):
            # Multi-user mode: refused visibly, like any refused action (issue 16).
            # Not through the channel's actor: none of this connection's
            # dispatches to it get there (no echo to wait behind), and another
            # user's flood must not fill the owner's inbox.
            self.host.counters.rejected += 1
            self.host.hub.reject(
                connection,
                raw.channel,
                raw.action,
                origin,
                "permission denied: the channel belongs to another user",
            )
            return
        settings = self.host.settings
        if not connection.take_dispatch_token(
            settings.dispatch_rate, settings.dispatch_burst, time.monotonic()
        ):
            # Over the per-connection rate: refused like any invalid action
            # (echoed to the sender, nothing applied); other clients are unaffected.
            await self._refuse(
                actor,
                connection,
                raw,
                origin,
                f"rate limit exceeded: at most {settings.dispatch_rate:g} actions per second",
            )
            return
        try:
            action = codec.decode(memoryview(raw.action), StateAction)
        except msgspec.ValidationError as error:
            await self._refuse(actor, connection, raw, origin, f"invalid action: {error}")
            return
        if type(action) is ChatTurnStartedAction and await self._paged_out_turn(
            actor, action.turn_id
        ):
            log.info(
                "action rejected",
                channel=raw.channel,
                client_id=origin.client_id,
                action=action.type,
                code=RejectionCode.DuplicateTurn.value,
            )
            await self._refuse(
                actor, connection, raw, origin, duplicate_turn(action.turn_id).reason
            )
            return
        await actor.dispatch(action, origin, connection)

    async def _dispatch_elsewhere(
        self, connection: Connection, router: Router, node: str, raw: _RawDispatch
    ) -> None:
        """A dispatch to a channel ``node`` owns: forwarded, in order with this connection's
        other frames. The owner decides it; its echo comes back on the feed (this node's
        hub acknowledges the sender by the envelope's ``origin``), a rejection on the route."""
        if connection.legacy:
            translated = edge.inbound_action(raw.action, raw.channel, self._chat_of)
            if translated is None:
                assert connection.client_id is not None
                origin = ActionOrigin(client_id=connection.client_id, client_seq=raw.client_seq)
                self.host.counters.rejected += 1
                self.host.hub.reject(
                    connection, raw.channel, raw.action, origin, "not a protocol 0.7 action"
                )
                return
            raw.action = translated
        await router.notify(connection, node, "dispatchAction", codec.encode(raw))

    async def _refuse(
        self,
        actor: ChannelActor[Any],
        connection: Connection,
        raw: _RawDispatch,
        origin: ActionOrigin,
        reason: str,
    ) -> None:
        """Echo a dispatch to its sender as rejected, nothing applied (WIRE-SUMMARY §7).

        Through the channel's actor: behind the dispatches already queued
        there, so that it does not overtake the echoes of this client's
        earlier ones (``ChannelActor.refuse``). (Only a client that may
        dispatch to the channel comes here.)
        """
        self.host.counters.rejected += 1
        await actor.refuse(raw.action, origin, connection, reason)

    async def _paged_out_turn(self, actor: object, turn_id: str) -> bool:
        """Whether ``turn_id`` names one of a chat's turns that are on disk only.

        The chat actor checks a new turn's id against the turns it holds
        (``dispatch_rules``); a long chat's older turns are paged out of memory
        and looked up in the store here, before the dispatch reaches the
        actor — only such chats pay the read. A turn is stored when it ends,
        before its end is delivered (so before a client can start the next),
        and it leaves memory only after that: the two together see them all.
        """
        return (
            isinstance(actor, ChatActor)
            and actor.turn_offset > 0
            and turn_id not in actor.turn_sizes
            and await self.host.hub.store.turn_position(actor.uri, turn_id) is not None
        )

    # -- sessions -----------------------------------------------------------------------------

    async def create_session(
        self,
        connection: Connection,
        params: CreateSessionParams,
        *,
        fork: tuple[str, str] | None = None,
    ) -> bytes:
        """``createSession``; ``fork`` (session, turnId) is a 0.7 client's session
        fork, which 1.0 no longer has on the wire (host/core/edge.py)."""
        host = self.host
        uri = params.channel
        # Any scheme of the client's (VS Code: <provider>:/<uuid>); the kind is
        # what this command makes, never the scheme (protocol/uris.py).
        problem = session_uri_problem(uri)
        if problem is not None:
            raise InvalidParams(problem)
        _normal_channel(uri, "session")
        if uri in host.session_index:
            raise ProtocolError(
                f"session {uri} already exists", code=AhpErrorCode.SessionAlreadyExists
            )
        if host.knows(default_chat(uri)):  # a chat left from before the name was the host's
            raise ProtocolError(
                f"chat {default_chat(uri)} already exists", code=AhpErrorCode.AlreadyExists
            )
        provider_name = (
            host.settings.default_provider
            if isinstance(params.provider, UnsetType)
            else params.provider
        )
        provider = host.provider(provider_name)
        directories, primary = self._session_directories(provider.info, params)
        source_turns: tuple[Turn, ...] = ()
        if fork is not None:
            host.check_access(connection, fork[0])
            source_turns, directories, primary = await self._session_fork(*fork)
        directories, primary = await self._rooted(connection, uri, directories, primary)
        if uri in host.session_index:  # created meanwhile, while the folder was made
            raise ProtocolError(
                f"session {uri} already exists", code=AhpErrorCode.SessionAlreadyExists
            )
        # Sharded mode: this node owns the session from its first write (its owner
        # row, epoch 1); one another node made under the same name is refused.
        if host.claim_session is not None and (
            not await host.claim_session(
                uri, directory_path(primary or (directories[0] if directories else None))
            )
            or uri in host.session_index
        ):
            raise ProtocolError(
                f"session {uri} already exists", code=AhpErrorCode.SessionAlreadyExists
            )
        active_clients: tuple[SessionActiveClient, ...] = ()
        if not isinstance(params.active_client, UnsetType):
            if params.active_client.client_id != connection.client_id:
                raise InvalidParams("activeClient.clientId must be this connection's clientId")
            active_clients = (params.active_client,)
        actor = new_session_actor(
            host, uri, provider_name, directories, connection.user, active_clients
        )
        host.add_session(actor)
        # The default chat is stored with the session: a crash while the agent
        # opens the session loses nothing (host/sessions.py). It joins the
        # catalogue just before session/ready.
        host.add_chat(new_default_chat(host, actor, source_turns, primary))
        host.announce_session(actor)
        log.info(
            "session created", session=uri, provider=provider_name, client_id=connection.client_id
        )
        return _NULL

    async def _rooted(
        self,
        connection: Connection,
        uri: str,
        directories: tuple[str, ...],
        primary: str | None,
    ) -> tuple[tuple[str, ...], str | None]:
        """The session's working directories, each inside its user's configured roots
        (-32009 naming the setting otherwise); none given: a folder of its own, made
        inside the first root (docs/workspace.md "Roots")."""
        roots = self.host.roots
        user = connection.user
        try:
            for directory in directories:
                roots.check_directory(directory, user)
            if directories:
                return directories, primary
            folder = await asyncio.to_thread(
                roots.session_folder, uri.removeprefix(SESSION_SCHEME), user
            )
        except PathInvalid as error:
            raise InvalidParams(str(error)) from None
        except PathRefused as error:
            raise ProtocolError(str(error), code=AhpErrorCode.PermissionDenied) from None
        except OSError as error:
            raise InternalError(f"cannot make the session's folder: {error.strerror}") from None
        made = file_uri(folder)
        return (made,), made

    def _session_directories(
        self, info: AgentInfo, params: CreateSessionParams
    ) -> tuple[tuple[str, ...], str | None]:
        directories = (
            () if isinstance(params.working_directories, UnsetType) else params.working_directories
        )
        if len(set(directories)) != len(directories):
            raise InvalidParams("workingDirectories must not repeat an entry")
        capabilities = info.capabilities
        multiple = not isinstance(capabilities, UnsetType) and not isinstance(
            capabilities.multiple_working_directories, UnsetType
        )
        if len(directories) > 1 and not multiple:
            raise InvalidParams(f"agent {info.provider!r} supports one working directory")
        # 1.0: the primary directory is index 0 (a 0.7 client's
        # primaryWorkingDirectory arrives moved there, views/v0_7.py).
        return directories, directories[0] if directories else None

    async def _session_fork(
        self, session_uri: str, turn_id: str
    ) -> tuple[tuple[Turn, ...], tuple[str, ...], str | None]:
        """``createSession.fork``: the source session's default chat up to ``turn_id``."""
        source = await self.host.session(session_uri)
        if source is None:
            raise ProtocolError(f"no session {session_uri}", code=AhpErrorCode.SessionNotFound)
        default = source.state.default_chat
        chat = await self.host.chat(default) if isinstance(default, str) else None
        if chat is None:
            raise InvalidParams(f"session {session_uri} has no default chat to fork")
        turns = chat.state.turns
        index = next((i for i, t in enumerate(turns) if t.id == turn_id), None)
        if index is None:
            raise InvalidParams(f"no completed turn {turn_id!r} in {chat.uri}")
        directories = source.state.working_directories
        return (
            turns[: index + 1],
            () if isinstance(directories, UnsetType) else directories,
            _primary(chat.state.working_directories),
        )

    async def dispose_session(self, connection: Connection, params: DisposeSessionParams) -> bytes:
        host = self.host
        actor = await host.session(params.channel)
        if actor is None:
            raise ProtocolError(f"no session {params.channel}", code=AhpErrorCode.SessionNotFound)
        host.check_access(connection, params.channel)
        owner = host.owner_of(params.channel)
        for chat_uri in host.chats_of(params.channel):
            await host.forget(chat_uri)
        await host.agent_sessions.close(actor, disposed=True)
        for service in host.services:  # its terminals go with it
            await service.session_disposed(params.channel)
        await host.forget(params.channel)
        # Told to those who could see it (its owner is gone from the index now).
        host.notify_root(
            "root/sessionRemoved",
            SessionRemovedParams(channel=ROOT, session=params.channel),
            session=params.channel,
            owner=owner,
        )
        host.session_count_changed()
        await host.commit_now()  # answered once the deletion is durable (docs/durability.md)
        log.info("session disposed", session=params.channel, client_id=connection.client_id)
        return _NULL

    def _summaries(self, connection: Connection) -> list[SessionSummary]:
        """Every visible session's summary: live for loaded ones, as stored for the rest."""
        out: list[SessionSummary] = []
        for uri, (_, stored) in self.host.session_index.items():
            if not self.host.may_see(connection, uri):
                continue
            actor = self.host.sessions.get(uri)
            if actor is not None:
                out.append(actor.summary)
            elif stored is not None:
                out.append(self.host.listed(uri, stored))  # failed while stranded (sharded)
        return out

    async def list_sessions(self, connection: Connection, params: ListSessionsParams) -> bytes:
        if self.host.router is not None:  # sharded: sessions other nodes made or disposed
            await self.host.router.catalogue()
        summaries = sorted(
            self._summaries(connection), key=lambda s: (s.modified_at, s.resource), reverse=True
        )
        start = 0
        if not isinstance(params.cursor, UnsetType):
            start = _parse_offset(params.cursor)
        limit = LIST_LIMIT if isinstance(params.limit, UnsetType) else int(params.limit)
        if limit < 1:
            raise InvalidParams("limit must be at least 1")
        limit = min(limit, LIST_LIMIT)
        # A page is bounded in bytes too (docs/protocol.md "Bounded answers"):
        # the summaries that fit in LIST_PAGE_BYTES, at least one.
        items: list[msgspec.Raw] = []
        size = 0
        for summary in summaries[start : start + limit]:
            encoded = codec.encode(summary)
            size += len(encoded)
            if items and size > LIST_PAGE_BYTES:
                break
            items.append(msgspec.Raw(encoded))
        end = start + len(items)
        return codec.encode(
            _ListSessionsResult(
                items=items, next_cursor=f"offset:{end}" if end < len(summaries) else UNSET
            )
        )

    # -- chats --------------------------------------------------------------------------------

    async def create_chat(self, connection: Connection, params: CreateChatParams) -> bytes:
        host = self.host
        session = await host.session(params.channel)
        if session is None:
            raise ProtocolError(f"no session {params.channel}", code=AhpErrorCode.SessionNotFound)
        host.check_access(connection, params.channel)
        if session.state.lifecycle != "ready":
            raise InvalidParams(f"session {params.channel} is {session.state.lifecycle}, not ready")
        uri = params.chat
        if not uri.startswith(CHAT_SCHEME) or uri == CHAT_SCHEME:
            raise InvalidParams(f"a chat URI starts with {CHAT_SCHEME!r}")
        if uri.startswith(DEFAULT_CHAT_PREFIX):
            # The host names every session's default chat so (protocol/uris.py):
            # a client could otherwise take the name of another's, before it is made.
            raise InvalidParams(f"chat URIs starting {DEFAULT_CHAT_PREFIX!r} are the host's")
        _normal_channel(uri, "chat")
        if host.knows(uri):
            raise ProtocolError(f"chat {uri} already exists", code=AhpErrorCode.AlreadyExists)
        limit = host.settings.max_chats_per_session
        if len(host.chats_of(session.uri)) >= limit:
            raise InvalidParams(f"session {session.uri} already has {limit} chats (the limit)")
        initial = params.initial_message
        if not isinstance(initial, UnsetType) and initial.origin.kind != "user":
            raise InvalidParams("clients may only send user messages")
        info = host.provider(session.state.provider).info
        origin: Any = ChatOriginUser()
        turns: tuple[Turn, ...] = ()
        source_context = SourceContext()
        inherited: tuple[tuple[str, ...], str | None] | None = None
        if not isinstance(params.source, UnsetType):
            origin, turns, source_context, inherited = await self._chat_source(
                session, uri, params.source, info
            )
        directories, primary = self._chat_directories(session, params, inherited)
        state = ChatState(
            resource=uri,
            title="Chat",
            status=int(SessionStatus.Idle),
            modified_at=iso_timestamp(host.now()),
            origin=origin,
            working_directories=UNSET if directories is None else _first(primary, directories),
            turns=turns,
            movable=True,  # moveChat (host/commands/moves.py): only a default chat is not
        )
        chat = ChatActor(host, uri, state, session=session, source=source_context)
        host.add_chat(chat)
        # "The server adds the chat to the catalogue before returning" (§11.1).
        await session.apply_server(SessionChatAddedAction(summary=chat_summary(state)))
        if not isinstance(params.initial_message, UnsetType):
            message = params.initial_message
            await chat.call(lambda: chat.start_turn(message, connection.client_id))
        log.info("chat created", chat=uri, session=session.uri, client_id=connection.client_id)
        return _NULL

    async def _chat_source(
        self,
        session: SessionActor,
        uri: str,
        source: object,
        info: AgentInfo,
    ) -> tuple[Any, tuple[Turn, ...], SourceContext, tuple[tuple[str, ...], str | None]]:
        """Validate a fork / side-chat source (WIRE-SUMMARY §11.1); build the chat's start."""
        if not isinstance(source, (ForkChatSource, SideChatSource)):
            raise InvalidParams("unknown chat source kind")
        capabilities = info.capabilities
        chats_capability = (
            UNSET if isinstance(capabilities, UnsetType) else capabilities.multiple_chats
        )
        wanted = "fork" if isinstance(source, ForkChatSource) else "side_chat"
        if isinstance(chats_capability, UnsetType) or getattr(chats_capability, wanted) is not True:
            raise InvalidParams(f"agent {info.provider!r} does not support {source.kind} chats")
        if source.chat == uri:
            raise InvalidParams("a chat cannot be its own source")
        source_chat = await self.host.chat(source.chat)
        if source_chat is None or source_chat.session is not session:
            raise InvalidParams(f"source chat {source.chat} is not in session {session.uri}")
        state = source_chat.state
        directories = (
            () if isinstance(state.working_directories, UnsetType) else (state.working_directories)
        )
        primary = _primary(state.working_directories)
        index = next((i for i, t in enumerate(state.turns) if t.id == source.turn_id), None)
        active = state.active_turn
        if isinstance(source, ForkChatSource):
            if index is None:
                raise InvalidParams(f"no completed turn {source.turn_id!r} in {source.chat}")
            origin = ChatOriginFork(chat=source.chat, turn_id=source.turn_id)
            return origin, state.turns[: index + 1], SourceContext(), (directories, primary)
        if not isinstance(source.selection, UnsetType) and not source.selection.text:
            raise InvalidParams("selection.text must not be empty")
        if index is not None:
            context = SourceContext(turns=state.turns[: index + 1])
        elif isinstance(active, ActiveTurn) and active.id == source.turn_id:
            # The active turn: snapshot its partial response now (§11.1).
            context = SourceContext(turns=state.turns, partial=active.response_parts)
        else:
            raise InvalidParams(f"no turn {source.turn_id!r} in {source.chat}")
        origin_side = ChatOriginSideChat(
            chat=source.chat, turn_id=source.turn_id, selection=source.selection
        )
        return origin_side, (), context, (directories, primary)

    def _chat_directories(
        self,
        session: SessionActor,
        params: CreateChatParams,
        inherited: tuple[tuple[str, ...], str | None] | None,
    ) -> tuple[tuple[str, ...] | None, str | None]:
        allowed = session.state.working_directories
        session_dirs = () if isinstance(allowed, UnsetType) else allowed
        if not isinstance(params.working_directories, UnsetType):
            directories: tuple[str, ...] | None = params.working_directories
            outside = [d for d in params.working_directories if d not in session_dirs]
            if outside:
                raise InvalidParams(f"{outside[0]} is not one of the session's working directories")
        elif inherited is not None:
            directories = inherited[0] or None
        else:
            directories = session_dirs or None
        primary: str | None
        if inherited is not None and inherited[1] in (directories or ()):
            primary = inherited[1]  # a fork or side chat keeps its source's primary
        else:
            primary = directories[0] if directories else None
        return directories, primary

    async def dispose_chat(self, connection: Connection, params: DisposeChatParams) -> bytes:
        host = self.host
        chat = await host.accessible_chat(connection, params.channel)
        session = chat.session
        await host.forget(params.channel)
        await session.apply_server(SessionChatRemovedAction(chat=params.channel))
        await session.forget_chat(params.channel)
        await host.commit_now()  # answered once the deletion is durable (docs/durability.md)
        log.info("chat disposed", chat=params.channel, client_id=connection.client_id)
        return _NULL

    async def fetch_turns(self, connection: Connection, params: FetchTurnsParams) -> bytes:
        chat = await self.host.accessible_chat(connection, params.channel)

        store = self.host.store

        async def load() -> asyncio.Future[int]:
            turns = chat.state.turns
            before: str | None = None
            if not isinstance(params.cursor, UnsetType):
                prefix, _, before = params.cursor.partition(":")
                if prefix != "before":
                    raise InvalidParams(f"unknown cursor {params.cursor!r}")
            index = (
                len(turns)
                if not before
                else next((i for i, t in enumerate(turns) if t.id == before), None)
            )
            # A page is bounded in count and in bytes, like a snapshot: fewer
            # turns when they are large, but always at least one.
            budget = self.host.settings.snapshot_turn_bytes
            sizes: dict[str, int] = {}
            if index is not None and index > 0:
                candidates = turns[max(0, index - FETCH_PAGE) : index]
                keep = newest_within([chat.turn_size(t) for t in candidates], budget)
                start = index - keep
                page = turns[start:index]
                more = start > 0 or chat.turn_offset > 0
            else:
                # Older than what is in memory: page from the stored history.
                if index == 0 or not before:
                    position: int | None = chat.turn_offset
                else:
                    position = await store.turn_position(chat.uri, before)
                if position is None:
                    raise InvalidParams(f"unknown cursor {params.cursor!r}")
                rows = await store.turns_within(chat.uri, position, FETCH_PAGE, budget)
                page = tuple(codec.decode(row, Turn) for row in rows)
                sizes = {turn.id: len(row) for turn, row in zip(page, rows, strict=True)}
                more = position - len(page) > 0
            return chat.load_turns(page, sizes, turns_cursor(page[0].id) if more and page else None)

        # §11.2: dispatch chat/turnsLoaded before replying.
        # The reply waits for the envelope's delivery (after its commit), so it
        # cannot overtake it in the connection's outbox.
        delivered = await chat.call(load)
        await delivered
        return _EMPTY

    # -- small commands -----------------------------------------------------------------------

    async def completions(self, connection: Connection, params: object) -> bytes:
        return b'{"items":[]}'

    async def resolve_session_config(self, connection: Connection, params: object) -> bytes:
        return b'{"schema":{"type":"object","properties":{}},"values":{}}'

    async def authenticate(self, connection: Connection, params: object) -> bytes:
        raise InvalidParams("this host advertises no protected resources")


def _normal_channel(uri: str, what: str) -> None:
    """-32602 unless ``uri`` is in RFC 3986 normal form (§6.2.2: no percent-encoded
    unreserved character, uppercase hex in escapes, no dot-segment): two spellings
    must never name one channel (docs/protocol.md "Identity and ownership")."""
    try:
        normal = normal_form(uri)
    except ValueError as error:
        raise InvalidParams(f"the {what} URI is not a URI: {error}") from None
    if normal != uri:
        raise InvalidParams(
            f"the {what} URI is not in RFC 3986 normal form: write it as {normal!r}"
        )


class _Directories(msgspec.Struct):
    working_directories: list[str] = msgspec.field(name="workingDirectories", default_factory=list)


_DIRECTORIES = msgspec.json.Decoder(_Directories)


def _first_directory(params: msgspec.Raw) -> str | None:
    """A ``createSession``'s primary working directory (index 0 at 1.0), if it names one."""
    try:
        directories = _DIRECTORIES.decode(params).working_directories
    except msgspec.DecodeError:
        return None
    return directories[0] if directories else None


def _channel_param(params: msgspec.Raw | UnsetType) -> str | None:
    """The ``channel`` of a request's params, if they have one (routing reads only that)."""
    if isinstance(params, UnsetType):
        return None
    try:
        return _CHANNEL.decode(params).channel
    except msgspec.DecodeError:
        return None


def _root_channel(channel: str) -> None:
    if channel != ROOT:
        raise InvalidParams(f"channel must be {ROOT!r}")


def _parse_offset(cursor: str) -> int:
    # ASCII digits only (str.isdigit admits "²", which int() refuses) and at
    # most 18 of them (int() refuses over 4,300): anything else is a bad
    # cursor, -32602, never an internal error.
    prefix, _, value = cursor.partition(":")
    if prefix != "offset" or not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise InvalidParams(f"unknown cursor {cursor[:64]!r}")
    return int(value)


def _primary(directories: tuple[str, ...] | UnsetType) -> str | None:
    """The primary working directory: index 0 at 1.0 (SCHEMA-DIFF item 1)."""
    return directories[0] if not isinstance(directories, UnsetType) and directories else None


def _first(primary: str | None, directories: tuple[str, ...]) -> tuple[str, ...]:
    """``directories`` with ``primary`` moved to index 0, where 1.0 keeps it."""
    if primary is None or primary not in directories:
        return directories
    return (primary, *(d for d in directories if d != primary))

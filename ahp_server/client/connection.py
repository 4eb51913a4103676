"""``AhpClient``: an asyncio AHP client over WebSocket + JSON-RPC 2.0.

Layer: client (I/O layer on top of protocol). Imports :mod:`ahp_server.protocol`
and :mod:`ahp_server.client.state`; nothing in the host imports it. Used by
end-to-end tests, the CLI and anyone scripting an AHP server.

Protocol versions: the client offers ``1.0.0``, ``0.9.0`` and ``0.7.0`` (most
preferred first; :data:`DEFAULT_PROTOCOL_VERSIONS`) and records the one the
server chose (:attr:`AhpClient.protocol_version`). Whatever it negotiated, it
holds and exposes 1.0 values only (:mod:`ahp_server.protocol.types`, reduced
with the 1.0 reducers). A 0.9 connection carries 1.0-shaped frames (the host
merely withholds the actions newer than 0.9), so it is treated like 1.0. A
connection whose version has the 0.7 view (0.7.0, 0.6.0, 0.5.x) is translated
at this edge by the pure functions of :mod:`ahp_server.protocol.views.v0_7`:
every snapshot, envelope, notification and command result is lifted to 1.0 as
it arrives (``lift_envelope``, ``lift_notification``, ``lift_result``), and
every command and action is projected to 0.7 as it leaves (``client_params``,
``action``; a 1.0-only action type is refused locally with
:class:`ClientError`, since a 0.7 host does not know it).

One connection ("link") has two tasks:

* the **reader** parses each text frame once with
  :func:`~ahp_server.protocol.jsonrpc.parse_message`; it resolves request
  futures by id, reconciles ``action`` envelopes into the
  :class:`~ahp_server.client.state.ClientState`, forwards every other
  notification to listeners, answers server-initiated requests, and after
  each frame re-evaluates :meth:`AhpClient.wait_for` predicates;
* the **writer** drains the outbox (one JSON-RPC message per text frame, in
  order), so the reader never blocks on a send.

Bounded buffers and their policies:

* outbox (``outbox_size`` frames): requests and notifications wait for room
  within their timeout, then fail with :class:`ClientTimeoutError`; replies to
  server-initiated requests are dropped (and logged) when it is full;
* outstanding requests (``max_outstanding_requests``): beyond it a new
  request fails at once with :class:`ClientError`;
* envelopes held while a handshake or subscribe answer is outstanding
  (``max_held_envelopes``): beyond it the connection is closed with 1008, since
  the state could no longer be reconciled; reconnect to recover;
* :attr:`AhpClient.envelopes` / :attr:`AhpClient.notifications` records
  (``history`` entries): the oldest entry is dropped;
* pending optimistic actions: see :class:`~ahp_server.client.state.ClientState`.

Ordering: an ``initialize``/``reconnect``/``subscribe`` result is applied by
the reader the moment it arrives, and envelopes that arrive before it are held
and applied right after it, so the mirrored state never sees actions out of
``serverSeq`` order (duplicates are skipped by ``serverSeq``).
"""

# Every wait takes an explicit ``timeout=`` (seconds) by design: the client is
# used from tests, where a forgotten outer ``asyncio.timeout`` would hang CI.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias, TypeVar, overload

import msgspec
import structlog
import websockets.exceptions
from msgspec import UNSET
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

from ahp_server import __version__
from ahp_server.client.errors import (
    ActionRejectedError,
    ClientError,
    ClientTimeoutError,
    ConnectionClosedError,
    ProtocolViolationError,
    RemoteError,
    TurnFailedError,
)
from ahp_server.client.state import (
    ROOT_CHANNEL,
    ChannelState,
    ClientState,
    channel_kind,
    wall_clock_ms,
)
from ahp_server.protocol import codec, jsonrpc
from ahp_server.protocol.errors import InternalError, MethodNotFound, ProtocolError
from ahp_server.protocol.reducers import Clock, iso_timestamp
from ahp_server.protocol.types import (
    ActionEnvelope,
    ActionOrigin,
    ActiveTurn,
    ChatIsArchivedChangedAction,
    ChatIsReadChangedAction,
    ChatMoveToNewSessionDestination,
    ChatMoveToSessionDestination,
    ChatState,
    ChatTurnResumeAction,
    ChatTurnStartedAction,
    CreateChatParams,
    CreateSessionParams,
    DisposeChatParams,
    DisposeSessionParams,
    ErrorInfo,
    ErrorResponsePart,
    ForkChatSource,
    Implementation,
    InitializeParams,
    InitializeResult,
    ListSessionsParams,
    ListSessionsResult,
    MarkdownResponsePart,
    Message,
    MessageOrigin,
    MoveChatParams,
    MoveChatResult,
    PingParams,
    ReconnectParams,
    ReconnectReplayResult,
    ReconnectSnapshotResult,
    RootState,
    SessionIsArchivedChangedAction,
    SessionIsReadChangedAction,
    SessionState,
    SideChatSource,
    SnapshotState,
    StateAction,
    SubscribeParams,
    SubscribeResult,
    SubscribeView,
    SubscriptionDeliveryOptions,
    Turn,
    UnsubscribeParams,
)
from ahp_server.protocol.versions import View, row_for
from ahp_server.protocol.views import v0_7

__all__ = [
    "CLIENT_NAME",
    "DEFAULT_PROTOCOL_VERSIONS",
    "AhpClient",
    "EnvelopeListener",
    "NotificationListener",
    "Params",
    "ReconnectPath",
    "RequestHandler",
    "ServerNotification",
    "directory_uri",
    "is_resumable",
    "turn_error",
]

log = structlog.get_logger("ahp_server.client")

T = TypeVar("T")
S = TypeVar("S", RootState, SessionState, ChatState)

#: ``clientInfo.name`` sent in ``initialize``.
CLIENT_NAME: Final = "ahp-server-client"

#: The protocol versions offered by default, most preferred first: 1.0 and 0.9
#: (1.0-shaped frames), then 0.7 (lifted to 1.0 at this edge).
DEFAULT_PROTOCOL_VERSIONS: Final[tuple[str, ...]] = ("1.0.0", "0.9.0", "0.7.0")

#: A request's or notification's ``params``: a wire struct or a JSON-like mapping.
Params: TypeAlias = msgspec.Struct | Mapping[str, Any]
#: Which way :meth:`AhpClient.reconnect` restored the state.
ReconnectPath: TypeAlias = Literal["replay", "snapshot", "initialize"]
EnvelopeListener: TypeAlias = Callable[[ActionEnvelope], None]
NotificationListener: TypeAlias = Callable[["ServerNotification"], None]
#: Answers one server-initiated request (``resource*``, ``createResourceWatch``):
#: receives the params as JSON builtins, returns the JSON-able result, or raises
#: :class:`~ahp_server.protocol.errors.ProtocolError` for a JSON-RPC error.
RequestHandler: TypeAlias = Callable[[Any], Awaitable[Any]]

DEFAULT_TIMEOUT: Final = 10.0
DEFAULT_HISTORY: Final = 10_000
DEFAULT_OUTBOX_SIZE: Final = 1024
DEFAULT_MAX_OUTSTANDING_REQUESTS: Final = 1024
DEFAULT_MAX_HELD_ENVELOPES: Final = 10_000
DEFAULT_MAX_SERVER_REQUESTS: Final = 64
DEFAULT_MAX_FRAME_SIZE: Final = 64 * 1024 * 1024
DEFAULT_CLOSE_TIMEOUT: Final = 5.0

#: Close code when the client itself gives up on a connection (RFC 6455 §7.4.1).
_POLICY_VIOLATION: Final = 1008
_INTERNAL_ERROR: Final = 1011


@dataclass(frozen=True, slots=True)
class ServerNotification:
    """A protocol notification other than ``action`` (``root/sessionAdded``, ``root/progress``…).

    ``params`` are the decoded JSON builtins in their 1.0 shape (camelCase
    keys): exactly as sent, or lifted from 0.7 on a 0.7 connection;
    decode them into a wire type with :func:`ahp_server.protocol.codec.convert`
    when needed, e.g. ``codec.convert(n.params, SessionAddedParams)``.
    """

    method: str
    params: dict[str, Any]

    @property
    def channel(self) -> str | None:
        """``params.channel`` (every AHP notification carries one), if present."""
        channel = self.params.get("channel")
        return channel if isinstance(channel, str) else None


class _LinkAbort(Exception):
    """Raised inside the reader to close the connection with a specific code."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(slots=True)
class _Call:
    """One outstanding request: its method, future and optional in-reader result hook."""

    method: str
    future: asyncio.Future[Any]
    on_result: Callable[[Any], Any] | None


@dataclass(slots=True)
class _Waiter:
    predicate: Callable[[AhpClient], bool]
    future: asyncio.Future[None]


class _Link:
    """One WebSocket connection and everything that dies with it."""

    def __init__(self, ws: ClientConnection, outbox_size: int) -> None:
        self.ws = ws
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue(maxsize=outbox_size)
        self.calls: dict[int, _Call] = {}
        self.handlers: set[asyncio.Task[None]] = set()
        self.reader: asyncio.Task[None] | None = None
        self.writer: asyncio.Task[None] | None = None
        self.lost = asyncio.Event()

    def closed_error(self, detail: str = "") -> ConnectionClosedError:
        return ConnectionClosedError(self.ws.close_code, self.ws.close_reason or "", detail=detail)


class _Connecting:
    """What :meth:`AhpClient.connect` returns: awaitable, or an async context manager."""

    def __init__(self, start: Callable[[], Coroutine[Any, Any, AhpClient]]) -> None:
        self._start = start
        self._client: AhpClient | None = None

    def __await__(self) -> Generator[Any, None, AhpClient]:
        return self._start().__await__()

    async def __aenter__(self) -> AhpClient:
        self._client = await self._start()
        return self._client

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._client is not None:
            await self._client.close()


class AhpClient:
    """An AHP client: one ``clientId``, one connection at a time, mirrored channel state.

    Create it with :meth:`connect` (``await AhpClient.connect(url)`` or
    ``async with AhpClient.connect(url) as client``). The state of every
    subscribed root/session/chat channel is mirrored with write-ahead
    reconciliation (:class:`~ahp_server.client.state.ClientState`):
    :meth:`confirmed` is what the server acknowledged, :meth:`view` adds this
    client's not-yet-echoed :meth:`dispatch` es.

    Listeners (:meth:`on_envelope`, :meth:`on_notification`) and
    :meth:`wait_for` predicates run synchronously in the reader, after the
    message was applied; keep them short and non-blocking. A listener that
    raises is logged and otherwise ignored.
    """

    def __init__(
        self,
        url: str,
        *,
        client_id: str | None = None,
        protocol_versions: Sequence[str] = DEFAULT_PROTOCOL_VERSIONS,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        request_timeout: float = DEFAULT_TIMEOUT,
        clock: Clock = wall_clock_ms,
        history: int = DEFAULT_HISTORY,
        outbox_size: int = DEFAULT_OUTBOX_SIZE,
        max_outstanding_requests: int = DEFAULT_MAX_OUTSTANDING_REQUESTS,
        max_held_envelopes: int = DEFAULT_MAX_HELD_ENVELOPES,
        max_frame_size: int | None = DEFAULT_MAX_FRAME_SIZE,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        proxy: str | Literal[True] | None = None,
    ) -> None:
        """Configure a client without connecting; see :meth:`connect` for the parameters."""
        self.url = url
        self.client_id: Final = client_id or str(uuid.uuid4())
        self.protocol_versions: Final = tuple(protocol_versions)
        self.request_timeout = request_timeout
        self.state: Final = ClientState(self.client_id, clock=clock)
        #: The most recent received envelopes (bounded: the oldest is dropped).
        self.envelopes: deque[ActionEnvelope] = deque(maxlen=history)
        #: The most recent non-``action`` notifications (bounded: the oldest is dropped).
        self.notifications: deque[ServerNotification] = deque(maxlen=history)
        self._headers = dict(headers or {})
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout = timeout
        self._clock = clock
        self._outbox_size = outbox_size
        self._max_outstanding = max_outstanding_requests
        self._max_held = max_held_envelopes
        self._max_frame_size = max_frame_size
        self._close_timeout = close_timeout
        self._proxy = proxy
        self._ids = itertools.count(1)
        self._link: _Link | None = None
        self._initialize_result: InitializeResult | None = None
        self._protocol_version: str | None = None
        # Whether the negotiated version has the 0.7 view (lift in, project out).
        self._legacy = False
        # Envelopes held while a handshake answer is outstanding (None: not handshaking).
        self._hold: list[ActionEnvelope] | None = None
        # Envelopes held per channel while its subscribe answer is outstanding.
        self._subscribing: dict[str, list[ActionEnvelope]] = {}
        self._envelope_listeners: list[EnvelopeListener] = []
        self._notification_listeners: list[NotificationListener] = []
        self._request_handlers: dict[str, RequestHandler] = {}
        self._waiters: list[_Waiter] = []
        self._last_close: tuple[int | None, str] = (None, "")

    # -- connecting ------------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        client_id: str | None = None,
        protocol_versions: Sequence[str] = DEFAULT_PROTOCOL_VERSIONS,
        subscriptions: Iterable[str] = (),
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        request_timeout: float = DEFAULT_TIMEOUT,
        clock: Clock = wall_clock_ms,
        history: int = DEFAULT_HISTORY,
        outbox_size: int = DEFAULT_OUTBOX_SIZE,
        max_outstanding_requests: int = DEFAULT_MAX_OUTSTANDING_REQUESTS,
        max_held_envelopes: int = DEFAULT_MAX_HELD_ENVELOPES,
        max_frame_size: int | None = DEFAULT_MAX_FRAME_SIZE,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        proxy: str | Literal[True] | None = None,
    ) -> _Connecting:
        """Open a WebSocket to ``url`` and run ``initialize`` (WIRE-SUMMARY §3.1).

        * ``client_id``: reused on ``reconnect``; a fresh uuid4 by default.
        * ``protocol_versions``: offered, most preferred first; by default
          :data:`DEFAULT_PROTOCOL_VERSIONS`. Restrict it to act as an older
          client (e.g. ``["0.7.0"]``): the state exposed is 1.0 all the same,
          lifted from what the 0.7 connection carries.
        * ``subscriptions``: ``initialSubscriptions`` (e.g. ``["ahp-root://"]``
          to get ``root/*`` notifications); their snapshots are loaded.
        * ``headers`` / ``token``: extra upgrade-request headers; ``token`` is
          sent as ``Authorization: Bearer <token>``.
        * ``timeout``: seconds for opening the socket and for the handshake.
        * ``request_timeout``: default for :meth:`request` and :meth:`wait_for`.
        * ``clock``: the reducers' clock (ms since the epoch), also used for
          ``startedAt`` in :meth:`send_message`.
        * ``history``: size of the :attr:`envelopes`/:attr:`notifications` records.
        * ``proxy``: ``None`` connects directly; ``True`` honours proxy
          environment variables; a URL uses that proxy.

        The result is awaitable and an async context manager (closing on
        exit), but not a coroutine: schedule it with ``asyncio.ensure_future``.

        Raises :class:`ClientTimeoutError`, :class:`RemoteError` (e.g.
        ``-32005`` UnsupportedProtocolVersion), :class:`ConnectionClosedError`,
        :class:`ProtocolViolationError`, or the ``websockets``/``OSError``
        exception when the socket cannot be opened (refused, HTTP 401, …).
        """
        client = cls(
            url,
            client_id=client_id,
            protocol_versions=protocol_versions,
            headers=headers,
            token=token,
            timeout=timeout,
            request_timeout=request_timeout,
            clock=clock,
            history=history,
            outbox_size=outbox_size,
            max_outstanding_requests=max_outstanding_requests,
            max_held_envelopes=max_held_envelopes,
            max_frame_size=max_frame_size,
            close_timeout=close_timeout,
            proxy=proxy,
        )
        initial = tuple(subscriptions)

        async def start() -> AhpClient:
            await client.open(initial)
            return client

        return _Connecting(start)

    async def open(self, subscriptions: Iterable[str] = ()) -> None:
        """Connect to :attr:`url` and ``initialize`` (what :meth:`connect` runs)."""
        if self._link is not None and not self._link.lost.is_set():
            raise ClientError("already connected")
        link = await self._open_link()
        try:
            await self._initialize(tuple(subscriptions))
        except BaseException:
            await self._close_link(link, 1000, "initialize failed")
            raise

    async def reconnect(
        self, url: str | None = None, *, timeout: float | None = None
    ) -> ReconnectPath:
        """Open a new connection and resume with ``reconnect`` (WIRE-SUMMARY §3.3).

        ``reconnect {clientId, lastSeenServerSeq, subscriptions}`` is the first
        message (no ``initialize``). A ``replay`` answer applies the missed
        envelopes (and drops the ``missing`` subscriptions); a ``snapshot``
        answer replaces the mirrored states (state-bearing subscriptions
        without a fresh snapshot are dropped). Any JSON-RPC error — or an answer type this
        client does not know — falls back to a full ``initialize`` with the
        previous subscriptions. Pending optimistic actions are cleared in every
        case. A still-open connection is closed first (code 1000), which
        fails its outstanding requests and waiters. Protocol notifications
        missed meanwhile are not replayed (§3.3): re-fetch with
        :meth:`list_sessions`.

        Returns the path taken: ``"replay"``, ``"snapshot"`` or ``"initialize"``.
        """
        if self._protocol_version is None:
            raise ClientError("reconnect needs an earlier successful initialize")
        if self._link is not None and not self._link.lost.is_set():
            await self._close_link(self._link, 1000, "reconnecting")
        if url is not None:
            self.url = url
        subscriptions = self.state.subscriptions
        link = await self._open_link()
        self._hold = []
        try:
            path: ReconnectPath | None
            try:
                path = await self._call(
                    "reconnect",
                    ReconnectParams(
                        channel=ROOT_CHANNEL,
                        client_id=self.client_id,
                        last_seen_server_seq=self.state.last_seen_server_seq,
                        subscriptions=subscriptions,
                    ),
                    timeout=self._timeout if timeout is None else timeout,
                    on_result=self._apply_reconnect_result,
                )
            except RemoteError as exc:
                log.info("ahp client: reconnect refused, re-initializing", code=exc.code)
                path = None
            if path is None:
                await self._initialize(subscriptions, timeout=timeout)
                path = "initialize"
        except BaseException:
            self._hold = None
            await self._close_link(link, 1000, "reconnect failed")
            raise
        return path

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the connection (idempotent).

        Outstanding requests and :meth:`wait_for` calls fail with
        :class:`ConnectionClosedError`.
        """
        if self._link is not None:
            await self._close_link(self._link, code, reason)

    async def __aenter__(self) -> AhpClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- connection facts ------------------------------------------------------------------

    @property
    def protocol_version(self) -> str:
        """The version the server chose at ``initialize`` (kept across ``reconnect``)."""
        if self._protocol_version is None:
            raise ClientError("not initialized")
        return self._protocol_version

    @property
    def lifts_0_7(self) -> bool:
        """Whether the connection carries the 0.7 view, lifted to 1.0 by this client."""
        return self._legacy

    @property
    def initialize_result(self) -> InitializeResult:
        """The last ``initialize`` result (server info, trigger characters, …)."""
        if self._initialize_result is None:
            raise ClientError("not initialized")
        return self._initialize_result

    @property
    def server_seq(self) -> int:
        """The last ``serverSeq`` seen (sent as ``lastSeenServerSeq`` on reconnect)."""
        return self.state.last_seen_server_seq

    @property
    def subscriptions(self) -> tuple[str, ...]:
        """The subscribed channels, in subscription order."""
        return self.state.subscriptions

    @property
    def closed(self) -> bool:
        """Whether there is no open connection (never opened, closed, or lost)."""
        return self._link is None or self._link.lost.is_set()

    @property
    def close_code(self) -> int | None:
        """The WebSocket close code of the last closed connection (1006: dropped)."""
        return self._last_close[0]

    @property
    def close_reason(self) -> str:
        """The WebSocket close reason of the last closed connection."""
        return self._last_close[1]

    async def wait_closed(self, timeout: float | None = None) -> None:
        """Wait until the current connection is closed (e.g. by the server)."""
        link = self._link
        if link is None:
            return
        await self._bounded(link.lost.wait(), timeout, "the connection to close")

    # -- JSON-RPC --------------------------------------------------------------------------

    @overload
    async def request(
        self, method: str, params: Params, *, timeout: float | None = None
    ) -> Any: ...
    @overload
    async def request(
        self, method: str, params: Params, *, result_type: type[T], timeout: float | None = None
    ) -> T: ...
    async def request(
        self,
        method: str,
        params: Params,
        *,
        result_type: type[T] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send a request and wait for its response.

        Returns the ``result`` as JSON builtins, or decoded into ``result_type``
        (a wire struct). ``params`` must carry ``channel`` (WIRE-SUMMARY §1).
        Both are 1.0: on a 0.7 connection the params are projected to 0.7
        (``v0_7.client_params``) and the result lifted (``v0_7.lift_result``).

        Raises :class:`RemoteError` for a JSON-RPC error response,
        :class:`ClientTimeoutError` after ``timeout`` seconds (default
        :attr:`request_timeout`), :class:`ConnectionClosedError` when the
        connection is or becomes closed, :class:`ProtocolViolationError` when
        the result does not fit ``result_type``.
        """
        on_result: Callable[[Any], Any] | None = None
        if result_type is not None:
            on_result = functools.partial(_convert_result, result_type, method)
        return await self._call(method, params, timeout=timeout, on_result=on_result)

    async def notify(self, method: str, params: Params, *, timeout: float | None = None) -> None:
        """Send a notification (no response). Returns once it is queued for sending."""
        link = self._require_link()
        wire = self._outbound(method, params)
        frame = codec.encode({"jsonrpc": "2.0", "method": method, "params": wire})
        await self._enqueue(link, frame, timeout, method)

    def on_request(self, method: str, handler: RequestHandler | None) -> None:
        """Answer server-initiated requests for ``method`` with ``handler`` (``None`` removes).

        Unhandled methods are answered with ``-32601``. Handlers run in their
        own task, at most ``64`` at a time, each bounded by :attr:`request_timeout`.
        """
        if handler is None:
            self._request_handlers.pop(method, None)
        else:
            self._request_handlers[method] = handler

    # -- listeners and waiting -------------------------------------------------------------

    def on_envelope(self, listener: EnvelopeListener) -> Callable[[], None]:
        """Call ``listener(envelope)`` after each received envelope is reconciled.

        Returns a function that removes the listener.
        """
        self._envelope_listeners.append(listener)
        return lambda: _discard(self._envelope_listeners, listener)

    def on_notification(self, listener: NotificationListener) -> Callable[[], None]:
        """Call ``listener(notification)`` for each non-``action`` server notification.

        Protocol notifications are ephemeral and never replayed (§4.3). Returns
        a function that removes the listener.
        """
        self._notification_listeners.append(listener)
        return lambda: _discard(self._notification_listeners, listener)

    async def wait_for(
        self, predicate: Callable[[AhpClient], bool], *, timeout: float | None = None
    ) -> None:
        """Wait until ``predicate(client)`` holds.

        Checked now, then after every incoming message (and local dispatch),
        in the reader, so short-lived states are not missed. Raises
        :class:`ClientTimeoutError` after ``timeout`` seconds (default
        :attr:`request_timeout`), :class:`ConnectionClosedError` if the
        connection closes first, or whatever ``predicate`` raises.
        """
        if predicate(self):
            return
        self._require_link()
        waiter = _Waiter(predicate, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await self._bounded(waiter.future, timeout, "the predicate")
        finally:
            _discard(self._waiters, waiter)

    # -- channels and state ----------------------------------------------------------------

    async def subscribe(
        self,
        channel: str,
        *,
        turns: int | None = None,
        max_latency_ms: int | None = None,
        timeout: float | None = None,
    ) -> SnapshotState | None:
        """Subscribe to ``channel``; returns its snapshot state (``None`` for stateless ones).

        ``turns`` asks a chat snapshot for about that many recent turns;
        ``max_latency_ms`` is the advisory delivery bound (§5). Root, session
        and chat states are then mirrored (see :meth:`view`); other kinds are
        only returned.
        """
        params = SubscribeParams(
            channel=channel,
            view=SubscribeView(turns=turns) if turns is not None else UNSET,
            delivery=(
                SubscriptionDeliveryOptions(max_latency_ms=max_latency_ms)
                if max_latency_ms is not None
                else UNSET
            ),
        )
        owner = channel not in self._subscribing
        if owner:
            self._subscribing[channel] = []

        def on_result(raw: Any) -> SubscribeResult:
            result = _convert(raw, SubscribeResult, "subscribe")
            held = self._subscribing.pop(channel, []) if owner else []
            if isinstance(result.snapshot, msgspec.UnsetType):
                self.state.add_subscription(channel)
            else:
                if result.snapshot.resource != channel:
                    log.warning(
                        "ahp client: snapshot for another channel",
                        channel=channel,
                        resource=result.snapshot.resource,
                    )
                self.state.load_snapshot(result.snapshot)
            for envelope in held:
                self._deliver_envelope(envelope)
            return result

        try:
            result: SubscribeResult = await self._call(
                "subscribe", params, timeout=timeout, on_result=on_result
            )
        finally:
            if owner:
                self._subscribing.pop(channel, None)
        return None if isinstance(result.snapshot, msgspec.UnsetType) else result.snapshot.state

    async def unsubscribe(self, channel: str, *, timeout: float | None = None) -> None:
        """Stop mirroring ``channel`` and send ``unsubscribe`` (a notification)."""
        self.state.remove_subscription(channel)
        await self.notify("unsubscribe", UnsubscribeParams(channel=channel), timeout=timeout)

    @overload
    def confirmed(self, channel: str) -> ChannelState: ...
    @overload
    def confirmed(self, channel: str, expected: type[S]) -> S: ...
    def confirmed(self, channel: str, expected: type[S] | None = None) -> ChannelState:
        """The server-confirmed state of a mirrored channel (optionally type-checked).

        Raises :class:`~ahp_server.client.errors.UnknownChannelError` when the
        channel is not mirrored.
        """
        if expected is None:
            return self.state.confirmed(channel)
        return self.state.confirmed(channel, expected)

    @overload
    def view(self, channel: str) -> ChannelState: ...
    @overload
    def view(self, channel: str, expected: type[S]) -> S: ...
    def view(self, channel: str, expected: type[S] | None = None) -> ChannelState:
        """The optimistic state of a mirrored channel: confirmed + pending dispatches."""
        if expected is None:
            return self.state.view(channel)
        return self.state.view(channel, expected)

    async def dispatch(
        self, channel: str, action: StateAction | Mapping[str, Any], *, timeout: float | None = None
    ) -> int:
        """Apply ``action`` optimistically and send ``dispatchAction``; returns its ``clientSeq``.

        ``action`` is a 1.0 wire struct or a wire-shaped mapping (``{"type": …}``).
        On a 0.7 connection it is sent in its 0.7 form; an action type 0.7 does
        not have raises :class:`ClientError` before anything is sent.
        The server's echo (same ``clientSeq`` in ``origin``) confirms or
        rejects it (WIRE-SUMMARY §7); watch :meth:`view`/:meth:`confirmed` or
        :attr:`envelopes`.
        """
        link = self._require_link()
        decoded = _build(action, _STATE_ACTION) if isinstance(action, Mapping) else action
        wire: Any = decoded
        if self._legacy:
            builtins = codec.to_builtins(decoded)
            wire = v0_7.action(builtins)
            if wire is None:
                raise ClientError(
                    f"{builtins.get('type')} does not exist at protocol {self._protocol_version}: "
                    "a 0.7 host does not know it"
                )
        entry = self.state.dispatch(channel, decoded)
        frame = codec.encode(
            {
                "jsonrpc": "2.0",
                "method": "dispatchAction",
                "params": {"channel": channel, "clientSeq": entry.client_seq, "action": wire},
            }
        )
        try:
            await self._enqueue(link, frame, timeout, "dispatchAction")
        except BaseException:
            self.state.forget_pending(channel, entry.client_seq)
            raise
        self._check_waiters()
        return entry.client_seq

    # -- conveniences ----------------------------------------------------------------------

    async def ping(self, *, timeout: float | None = None) -> None:
        """``ping`` the server (allowed at any time, §1)."""
        await self.request("ping", PingParams(channel=ROOT_CHANNEL), timeout=timeout)

    async def create_session(
        self,
        provider: str | None = None,
        working_directories: Sequence[str] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        session: str | None = None,
        config: Mapping[str, Any] | None = None,
        subscribe: bool = False,
        timeout: float | None = None,
    ) -> str:
        """``createSession`` on a client-chosen ``ahp-session:/<uuid4>`` URI; returns the URI.

        Index 0 of ``working_directories`` is the primary one, for agents that
        have one (1.0). ``cwd``, a local directory (:func:`directory_uri`),
        comes first when given. Neither: the host gives the session a folder
        of its own (docs/workspace.md "Roots"). A directory outside the host's
        roots is refused (:class:`RemoteError` -32009, naming the setting).
        With ``subscribe=True`` the new session is subscribed right after.
        """
        uri = session or f"ahp-session:/{uuid.uuid4()}"
        if cwd is not None:
            working_directories = [directory_uri(cwd), *(working_directories or ())]
        params = CreateSessionParams(
            channel=uri,
            provider=UNSET if provider is None else provider,
            working_directories=_tuple_or_unset(working_directories),
            config=UNSET if config is None else dict(config),
        )
        await self.request("createSession", params, timeout=timeout)
        if subscribe:
            await self.subscribe(uri, timeout=timeout)
        return uri

    async def create_chat(
        self,
        session: str,
        *,
        chat: str | None = None,
        initial_message: str | None = None,
        source: ForkChatSource | SideChatSource | Mapping[str, Any] | None = None,
        working_directories: Sequence[str] | None = None,
        subscribe: bool = False,
        timeout: float | None = None,
    ) -> str:
        """``createChat`` in ``session`` on a client-chosen ``ahp-chat:/<uuid4>`` URI.

        ``source`` is a ``ChatSource`` struct or its wire shape (``{"kind": "fork", …}``).
        Returns the chat URI; ``subscribe=True`` subscribes to it afterwards.
        """
        uri = chat or f"ahp-chat:/{uuid.uuid4()}"
        data: dict[str, Any] = {"channel": session, "chat": uri}
        if initial_message is not None:
            data["initialMessage"] = codec.to_builtins(_user_message(initial_message))
        if source is not None:
            data["source"] = (
                dict(source) if isinstance(source, Mapping) else codec.to_builtins(source)
            )
        if working_directories is not None:
            data["workingDirectories"] = list(working_directories)
        params = _build(data, CreateChatParams)
        await self.request("createChat", params, timeout=timeout)
        if subscribe:
            await self.subscribe(uri, timeout=timeout)
        return uri

    async def dispose_session(self, session: str, *, timeout: float | None = None) -> None:
        """``disposeSession``."""
        await self.request("disposeSession", DisposeSessionParams(channel=session), timeout=timeout)

    async def dispose_chat(self, chat: str, *, timeout: float | None = None) -> None:
        """``disposeChat``."""
        await self.request("disposeChat", DisposeChatParams(channel=chat), timeout=timeout)

    async def list_sessions(
        self, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None
    ) -> ListSessionsResult:
        """``listSessions`` (one page)."""
        params = ListSessionsParams(
            channel=ROOT_CHANNEL,
            limit=UNSET if limit is None else limit,
            cursor=UNSET if cursor is None else cursor,
        )
        return await self.request(
            "listSessions", params, result_type=ListSessionsResult, timeout=timeout
        )

    async def send_message(
        self, chat: str, text: str, *, turn_id: str | None = None, timeout: float | None = None
    ) -> str:
        """Start a turn: dispatch ``chat/turnStarted`` with a user message; returns the turn id."""
        turn = turn_id or str(uuid.uuid4())
        action = ChatTurnStartedAction(
            turn_id=turn,
            started_at=iso_timestamp(self._clock()),
            message=_user_message(text),
        )
        await self.dispatch(chat, action, timeout=timeout)
        return turn

    async def open_chat(
        self,
        provider: str | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        working_directories: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> str:
        """Create a session, wait until it is ready and subscribe to its default chat.

        ``cwd`` and ``working_directories`` are :meth:`create_session`'s: the
        agent works in ``cwd`` (else the first of ``working_directories``, else
        the session's own folder). Returns the chat URI. Raises
        :class:`RemoteError` when the host refuses the session or it fails to
        start (``session/creationFailed``).
        """
        session = await self.create_session(
            provider, working_directories, cwd=cwd, subscribe=True, timeout=timeout
        )

        def settled(client: AhpClient) -> bool:
            state = client.view(session, SessionState)
            return state.lifecycle != "creating" and isinstance(state.default_chat, str)

        await self.wait_for(
            lambda c: settled(c) or c.view(session, SessionState).lifecycle == "failed",
            timeout=timeout,
        )
        state = self.view(session, SessionState)
        if not isinstance(state.default_chat, str):
            error = state.creation_error
            cause = "" if isinstance(error, msgspec.UnsetType) else f": {error.message}"
            raise RemoteError(-32603, f"session {session} did not start{cause}", error)
        await self.subscribe(state.default_chat, timeout=timeout)
        return state.default_chat

    async def ask(self, chat: str, text: str, *, timeout: float | None = 60.0) -> str:
        """Send ``text`` to a subscribed chat and wait for the turn to end.

        Returns the Markdown of the answer. Raises :class:`TurnFailedError`
        when the turn ends with ``chat/error`` (its message is the error of the
        turn's last response part, :func:`turn_error`) or is cancelled.
        """
        turn_id = await self.send_message(chat, text, timeout=timeout)
        return await self.wait_turn(chat, turn_id, timeout=timeout)

    async def dispatch_and_wait(
        self, channel: str, action: StateAction | Mapping[str, Any], *, timeout: float | None = None
    ) -> ActionEnvelope:
        """:meth:`dispatch` ``action`` and wait for the server's echo of it; return the echo.

        ``channel`` must be mirrored (subscribed): the echo is only guaranteed
        to reach a subscriber. Raises :class:`ActionRejectedError` when the
        echo carries a ``rejectionReason`` (nothing was applied), and what
        :meth:`dispatch` and :meth:`wait_for` raise.
        """
        if not self.state.has_state(channel):
            raise ClientError(
                f"subscribe to {channel} first: only a subscriber is sure of its echo"
            )
        echoes: dict[int, ActionEnvelope] = {}

        def note(envelope: ActionEnvelope) -> None:
            origin = envelope.origin
            if (
                envelope.channel == channel
                and isinstance(origin, ActionOrigin)
                and origin.client_id == self.client_id
            ):
                echoes[origin.client_seq] = envelope

        remove = self.on_envelope(note)
        try:
            seq = await self.dispatch(channel, action, timeout=timeout)
            await self.wait_for(lambda _: seq in echoes, timeout=timeout)
        finally:
            remove()
        echo = echoes[seq]
        if not isinstance(echo.rejection_reason, msgspec.UnsetType):
            kind = str(getattr(echo.action, "type", "action"))
            raise ActionRejectedError(kind, channel, echo.rejection_reason)
        return echo

    async def wait_turn(self, chat: str, turn_id: str, *, timeout: float | None = 60.0) -> str:
        """Wait until turn ``turn_id`` of a subscribed chat has ended; return its Markdown.

        Ended means: listed in the chat's ``turns`` and not its active turn (a
        resumed turn leaves ``turns`` while it runs again). Raises
        :class:`TurnFailedError` when it ended with ``chat/error`` (the error
        of its last response part, :func:`turn_error`) or was cancelled.
        """

        def ended(client: AhpClient) -> bool:
            state = client.confirmed(chat, ChatState)
            active = state.active_turn
            if isinstance(active, ActiveTurn) and active.id == turn_id:
                return False
            return any(t.id == turn_id for t in state.turns)

        await self.wait_for(ended, timeout=timeout)
        turn = next(t for t in self.confirmed(chat, ChatState).turns if t.id == turn_id)
        if turn.state != "complete":
            error = turn_error(turn)
            message = turn.state if error is None else error.message
            raise TurnFailedError(turn_id, turn.state, message)
        parts = turn.response_parts
        return "".join(p.content for p in parts if isinstance(p, MarkdownResponsePart))

    async def resume(
        self, chat: str, turn_id: str | None = None, *, timeout: float | None = 60.0
    ) -> str:
        """Resume a turn that failed resumably (``chat/turnResume``, 1.0) and wait for its end.

        ``turn_id`` defaults to the chat's latest turn; the chat is subscribed
        first when it is not (with its latest turn). Returns the Markdown of
        the whole turn once it ends. Raises :class:`ActionRejectedError` when
        the host refuses (a turn running, not the latest turn, not resumable:
        check with :func:`is_resumable`), :class:`TurnFailedError` when the
        resumed turn fails again.
        """
        await self._mirror(chat, timeout)
        if turn_id is None:
            turns = self.confirmed(chat, ChatState).turns
            if not turns:
                raise ClientError(f"{chat} has no turn to resume")
            turn_id = turns[-1].id
        await self.dispatch_and_wait(chat, ChatTurnResumeAction(turn_id=turn_id), timeout=timeout)
        return await self.wait_turn(chat, turn_id, timeout=timeout)

    async def set_read(
        self, channel: str, read: bool = True, *, timeout: float | None = None
    ) -> None:
        """Mark a chat or a session read (or unread): ``chat/isReadChanged`` or
        ``session/isReadChanged`` (1.0), waiting for the echo.

        The channel is subscribed first when it is not. Raises
        :class:`ActionRejectedError` when the host refuses.
        """
        action: ChatIsReadChangedAction | SessionIsReadChangedAction
        if channel_kind(channel) == "chat":
            action = ChatIsReadChangedAction(is_read=read)
        else:
            action = SessionIsReadChangedAction(is_read=read)
        await self._mirror(channel, timeout)
        await self.dispatch_and_wait(channel, action, timeout=timeout)

    async def set_archived(
        self, channel: str, archived: bool = True, *, timeout: float | None = None
    ) -> None:
        """Archive (or restore) a chat or a session: ``chat/isArchivedChanged`` or
        ``session/isArchivedChanged`` (1.0), waiting for the echo.

        The channel is subscribed first when it is not. Archiving a session's
        default chat archives the session too (the host's rule,
        docs/protocol.md). Raises :class:`ActionRejectedError` when the host refuses.
        """
        action: ChatIsArchivedChangedAction | SessionIsArchivedChangedAction
        if channel_kind(channel) == "chat":
            action = ChatIsArchivedChangedAction(is_archived=archived)
        else:
            action = SessionIsArchivedChangedAction(is_archived=archived)
        await self._mirror(channel, timeout)
        await self.dispatch_and_wait(channel, action, timeout=timeout)

    async def move_chat(
        self,
        chat: str,
        session: str | None = None,
        *,
        after: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """``moveChat`` (1.0): move ``chat`` into ``session`` (within its own session: a
        reorder), or into a new session when ``session`` is ``None``.

        ``after`` places it right after that chat of the destination; without
        it the chat goes first. Returns the session that holds the chat now.
        Raises :class:`RemoteError` when the host refuses (``-32602`` with the
        reason: not movable, a turn running, another agent's session, …).
        """
        destination: ChatMoveToSessionDestination | ChatMoveToNewSessionDestination
        if session is None:
            if after is not None:
                raise ValueError("a new session holds only the moved chat: no 'after'")
            destination = ChatMoveToNewSessionDestination()
        else:
            destination = ChatMoveToSessionDestination(
                session=session, after=UNSET if after is None else after
            )
        result = await self.request(
            "moveChat",
            MoveChatParams(channel=chat, destination=destination),
            result_type=MoveChatResult,
            timeout=timeout,
        )
        return result.session

    async def _mirror(self, channel: str, timeout: float | None) -> None:
        """Subscribe to ``channel`` unless its state is mirrored (a chat: its latest turn)."""
        if not self.state.has_state(channel):
            turns = 1 if channel_kind(channel) == "chat" else None
            await self.subscribe(channel, turns=turns, timeout=timeout)

    # -- internals: handshake --------------------------------------------------------------

    async def _initialize(
        self, subscriptions: tuple[str, ...], *, timeout: float | None = None
    ) -> None:
        params = InitializeParams(
            channel=ROOT_CHANNEL,
            protocol_versions=self.protocol_versions,
            client_id=self.client_id,
            client_info=Implementation(name=CLIENT_NAME, version=__version__),
            initial_subscriptions=subscriptions,
        )

        def on_result(raw: Any) -> InitializeResult:
            chosen = raw.get("protocolVersion") if isinstance(raw, dict) else None
            if isinstance(chosen, str) and chosen not in self.protocol_versions:
                raise ProtocolViolationError(
                    f"server chose protocol version {chosen!r}, "
                    f"which was not offered ({', '.join(self.protocol_versions)})"
                )
            row = row_for(chosen) if isinstance(chosen, str) else None
            legacy = row is not None and row.view is View.V0_7
            if legacy:
                raw = v0_7.lift_result("initialize", raw, chat_of=self._chat_of)
            result = _convert(raw, InitializeResult, "initialize")
            self._legacy = legacy
            self._initialize_result = result
            self._protocol_version = result.protocol_version
            self.state.reset_from_initialize(result.server_seq, result.snapshots, subscriptions)
            self._flush_hold()
            return result

        self._hold = self._hold if self._hold is not None else []
        try:
            await self._call(
                "initialize",
                params,
                timeout=self._timeout if timeout is None else timeout,
                on_result=on_result,
            )
        finally:
            self._hold = None

    def _apply_reconnect_result(self, raw: Any) -> ReconnectPath | None:
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind == "replay":
            replay = _convert(raw, ReconnectReplayResult, "reconnect")
            self.state.reset_for_replay(replay.missing)
            for envelope in replay.actions:
                self._deliver_envelope(envelope)
            self._flush_hold()
            return "replay"
        if kind == "snapshot":
            fresh = _convert(raw, ReconnectSnapshotResult, "reconnect")
            self.state.reset_from_snapshots(fresh.snapshots)
            self._flush_hold()
            return "snapshot"
        log.warning("ahp client: unknown reconnect result, re-initializing", type=kind)
        return None

    def _flush_hold(self) -> None:
        held, self._hold = self._hold, None
        for envelope in held or ():
            self._deliver_envelope(envelope)

    # -- internals: links ------------------------------------------------------------------

    async def _open_link(self) -> _Link:
        try:
            ws = await ws_connect(
                self.url,
                additional_headers=self._headers or None,
                open_timeout=self._timeout,
                close_timeout=self._close_timeout,
                max_size=self._max_frame_size,
                proxy=self._proxy,
            )
        except TimeoutError:
            raise ClientTimeoutError(f"could not open {self.url} within {self._timeout}s") from None
        link = _Link(ws, self._outbox_size)
        self._link = link
        link.reader = asyncio.create_task(self._read(link), name="ahp-client-reader")
        link.writer = asyncio.create_task(self._write(link), name="ahp-client-writer")
        return link

    async def _close_link(self, link: _Link, code: int, reason: str) -> None:
        if not link.lost.is_set():
            try:
                async with asyncio.timeout(self._close_timeout * 2):
                    await link.ws.close(code, reason)
                    await link.lost.wait()
            except TimeoutError:
                log.warning("ahp client: close timed out, aborting", url=self.url)
        for task in (link.reader, link.writer):
            if task is not None and not task.done():
                task.cancel()
        self._on_link_lost(link)

    def _require_link(self) -> _Link:
        link = self._link
        if link is None:
            raise ConnectionClosedError(None, "", detail="not connected")
        if link.lost.is_set():
            raise link.closed_error("not connected")
        return link

    async def _read(self, link: _Link) -> None:
        abort: _LinkAbort | None = None
        try:
            async for frame in link.ws:
                self._on_frame(link, frame)
        except websockets.exceptions.ConnectionClosed:
            pass
        except _LinkAbort as exc:
            abort = exc
        except Exception as exc:  # task boundary: a bug here must still close the link
            log.exception("ahp client: reader failed", url=self.url)
            abort = _LinkAbort(_INTERNAL_ERROR, f"client error: {type(exc).__name__}")
        if abort is not None:
            log.warning("ahp client: closing connection", code=abort.code, reason=abort.reason)
            try:
                async with asyncio.timeout(self._close_timeout * 2):
                    await link.ws.close(abort.code, abort.reason)
            except TimeoutError:
                log.warning("ahp client: close timed out", url=self.url)
        self._on_link_lost(link)

    async def _write(self, link: _Link) -> None:
        try:
            while True:
                frame = await link.outbox.get()
                await link.ws.send(frame, text=True)  # WIRE-SUMMARY §1: text frames
        except websockets.exceptions.ConnectionClosed:
            return
        except Exception:  # task boundary: a bug here must still close the link
            log.exception("ahp client: writer failed", url=self.url)
            try:
                async with asyncio.timeout(self._close_timeout * 2):
                    await link.ws.close(_INTERNAL_ERROR, "client writer error")
            except TimeoutError:
                log.warning("ahp client: close timed out", url=self.url)

    def _on_link_lost(self, link: _Link) -> None:
        """Everything tied to ``link`` ends: requests, handlers, waiters (idempotent)."""
        if link.lost.is_set():
            return
        link.lost.set()
        error = link.closed_error()
        self._last_close = (error.code, error.reason)
        if link.writer is not None and not link.writer.done():
            link.writer.cancel()
        for task in link.handlers:
            task.cancel()
        calls = list(link.calls.values())
        link.calls.clear()
        for call in calls:
            if not call.future.done():
                call.future.set_exception(error)
        if link is self._link:
            self._hold = None
            self._subscribing.clear()
            self._check_waiters(error)

    # -- internals: sending ----------------------------------------------------------------

    async def _call(
        self,
        method: str,
        params: Params,
        *,
        timeout: float | None,
        on_result: Callable[[Any], Any] | None = None,
    ) -> Any:
        link = self._require_link()
        if len(link.calls) >= self._max_outstanding:
            raise ClientError(f"{len(link.calls)} requests are already outstanding")
        wire = self._outbound(method, params)
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        link.calls[request_id] = _Call(method, future, on_result)
        frame = codec.encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": wire})
        limit = self.request_timeout if timeout is None else timeout
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                await link.outbox.put(frame)
                return await future
        except TimeoutError:
            if scope.expired():
                raise ClientTimeoutError(
                    f"{method} (id {request_id}) got no response within {limit}s"
                ) from None
            raise
        finally:
            link.calls.pop(request_id, None)

    def _outbound(self, method: str, params: Params) -> Any:
        """``params`` as the connection's version has them: 1.0 as given, 0.7 projected."""
        if not self._legacy or method not in v0_7.CLIENT_PARAMS:
            return params
        wire = v0_7.client_params(method, codec.to_builtins(params))
        if wire is None:
            raise ClientError(f"{method}: no 0.7 form (protocol {self._protocol_version})")
        return wire

    def _chat_of(self, session: str, turn_id: str | None) -> str:
        """The chat of ``session`` holding turn ``turn_id`` (its default chat when
        ``turn_id`` is ``None`` or no mirrored chat holds it), from the mirrored
        states: what lifting a 0.7 session terminal claim or annotation needs.

        ``""`` when the mirrored states do not tell (the session is not
        subscribed): 0.7 does not carry the chat, and a 1.0 terminal session
        claim must name one, so such a claim names ``""`` (an annotation's
        origin then names no chat).
        """
        state = self.state.confirmed(session) if self.state.has_state(session) else None
        if not isinstance(state, SessionState):
            return ""
        if turn_id is not None:
            for summary in state.chats:
                if self.state.has_state(summary.resource):
                    chat = self.state.confirmed(summary.resource)
                    if isinstance(chat, ChatState) and _holds_turn(chat, turn_id):
                        return summary.resource
        return state.default_chat if isinstance(state.default_chat, str) else ""

    async def _enqueue(self, link: _Link, frame: bytes, timeout: float | None, what: str) -> None:
        limit = self.request_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(limit):
                await link.outbox.put(frame)
        except TimeoutError:
            raise ClientTimeoutError(f"{what}: outbox still full after {limit}s") from None
        if link.lost.is_set():
            raise link.closed_error(what)

    def _post(self, link: _Link, frame: bytes) -> None:
        """Queue a frame without waiting; policy: drop it (logged) when the outbox is full."""
        try:
            link.outbox.put_nowait(frame)
        except asyncio.QueueFull:
            log.error("ahp client: outbox full, dropping a response", size=link.outbox.qsize())

    async def _bounded(self, awaitable: Awaitable[Any], timeout: float | None, what: str) -> Any:
        limit = self.request_timeout if timeout is None else timeout
        scope = asyncio.timeout(limit)
        started = time.monotonic()
        try:
            async with scope:
                return await awaitable
        except TimeoutError:
            if scope.expired():
                # What was waited, measured: not the limit, which a suspended machine
                # or a starved loop can make differ from the time that passed.
                waited = time.monotonic() - started
                message = f"gave up waiting for {what} after {waited:.1f} s"
                raise ClientTimeoutError(message) from None
            raise

    # -- internals: receiving --------------------------------------------------------------

    def _on_frame(self, link: _Link, frame: str | bytes) -> None:
        if isinstance(frame, bytes):
            log.warning("ahp client: ignoring a binary frame", size=len(frame))
            return
        try:
            message = jsonrpc.parse_message(frame)
        except ProtocolError as exc:
            log.warning("ahp client: ignoring an invalid frame", error=exc.message)
            return
        if isinstance(message, jsonrpc.JsonRpcSuccessResponse | jsonrpc.JsonRpcErrorResponse):
            self._on_response(link, message)
        elif isinstance(message, jsonrpc.JsonRpcNotification):
            self._on_notification(message)
        else:
            self._on_server_request(link, message)
        self._check_waiters()

    def _on_response(
        self,
        link: _Link,
        message: jsonrpc.JsonRpcSuccessResponse | jsonrpc.JsonRpcErrorResponse,
    ) -> None:
        request_id = message.id
        call = link.calls.get(request_id) if isinstance(request_id, int) else None
        if call is None or not isinstance(request_id, int):
            log.warning("ahp client: response to no outstanding request", id=message.id)
            return
        # Popped only after on_result ran: if it fails unexpectedly, the reader
        # closes the link and _on_link_lost still fails this call.
        try:
            self._resolve(call, message)
        finally:
            link.calls.pop(request_id, None)

    def _resolve(
        self, call: _Call, message: jsonrpc.JsonRpcSuccessResponse | jsonrpc.JsonRpcErrorResponse
    ) -> None:
        if call.future.done():  # the caller gave up (timeout/cancel)
            return
        if isinstance(message, jsonrpc.JsonRpcErrorResponse):
            error = message.error
            data = None if isinstance(error.data, msgspec.UnsetType) else error.data
            call.future.set_exception(
                RemoteError(error.code, error.message, data, method=call.method)
            )
            return
        result = message.result
        if self._legacy and call.method != "initialize":  # initialize lifts once negotiated
            result = v0_7.lift_result(call.method, result, chat_of=self._chat_of)
        if call.on_result is not None:
            try:
                result = call.on_result(result)
            except ClientError as exc:
                call.future.set_exception(exc)
                return
        call.future.set_result(result)

    def _on_notification(self, message: jsonrpc.JsonRpcNotification) -> None:
        if message.method == "action":
            try:
                if self._legacy:
                    lifted = v0_7.lift_envelope(_raw_params(message.params), chat_of=self._chat_of)
                    envelope = codec.convert(lifted, ActionEnvelope)
                else:
                    envelope = jsonrpc.decode_params(message.params, ActionEnvelope)
            except (ProtocolError, msgspec.ValidationError) as exc:
                log.error("ahp client: dropping an invalid action envelope", error=str(exc))
                return
            self._on_envelope(envelope)
            return
        params = _raw_params(message.params)
        if self._legacy:
            params = v0_7.lift_notification(message.method, params, chat_of=self._chat_of)
        if not isinstance(params, dict):
            log.warning("ahp client: notification params are not an object", method=message.method)
            return
        notification = ServerNotification(message.method, params)
        self.notifications.append(notification)
        for listener in tuple(self._notification_listeners):
            try:
                listener(notification)
            except Exception:  # task boundary: a listener must not kill the reader
                log.exception("ahp client: notification listener failed", method=message.method)

    def _on_envelope(self, envelope: ActionEnvelope) -> None:
        if self._hold is not None:
            held = self._hold
        elif envelope.channel in self._subscribing:
            held = self._subscribing[envelope.channel]
        else:
            self._deliver_envelope(envelope)
            return
        if len(held) >= self._max_held:
            raise _LinkAbort(_POLICY_VIOLATION, "too many envelopes before the snapshot")
        held.append(envelope)

    def _deliver_envelope(self, envelope: ActionEnvelope) -> None:
        self.state.apply_envelope(envelope)
        self.envelopes.append(envelope)
        for listener in tuple(self._envelope_listeners):
            try:
                listener(envelope)
            except Exception:  # task boundary: a listener must not kill the reader
                log.exception("ahp client: envelope listener failed", channel=envelope.channel)

    def _on_server_request(self, link: _Link, message: jsonrpc.JsonRpcRequest) -> None:
        handler = self._request_handlers.get(message.method)
        if handler is None:
            error: ProtocolError = MethodNotFound(f"method not found: {message.method}")
            self._post(link, codec.encode(jsonrpc.error_response(message.id, error)))
            return
        if len(link.handlers) >= DEFAULT_MAX_SERVER_REQUESTS:
            error = InternalError("too many concurrent requests")
            self._post(link, codec.encode(jsonrpc.error_response(message.id, error)))
            return
        task = asyncio.create_task(self._serve_request(link, message, handler))
        link.handlers.add(task)
        task.add_done_callback(link.handlers.discard)

    async def _serve_request(
        self, link: _Link, message: jsonrpc.JsonRpcRequest, handler: RequestHandler
    ) -> None:
        response: jsonrpc.JsonRpcSuccessResponse | jsonrpc.JsonRpcErrorResponse
        try:
            async with asyncio.timeout(self.request_timeout):
                result = await handler(_raw_params(message.params))
        except ProtocolError as exc:
            response = jsonrpc.error_response(message.id, exc)
        except Exception as exc:  # task boundary: report -32603, never leak internals
            log.exception("ahp client: request handler failed", method=message.method)
            response = jsonrpc.error_response(message.id, exc)
        else:
            response = jsonrpc.JsonRpcSuccessResponse(jsonrpc="2.0", id=message.id, result=result)
        self._post(link, codec.encode(response))

    def _check_waiters(self, closed: ConnectionClosedError | None = None) -> None:
        for waiter in tuple(self._waiters):
            if waiter.future.done():
                continue
            try:
                satisfied = waiter.predicate(self)
            except Exception as exc:  # noqa: BLE001 - not swallowed: re-raised in the waiter's task
                waiter.future.set_exception(exc)
                continue
            if satisfied:
                waiter.future.set_result(None)
            elif closed is not None:
                waiter.future.set_exception(closed)


# -- helpers ---------------------------------------------------------------------------------

#: ``StateAction`` is a union alias for type checkers and an open-union class at run time.
_STATE_ACTION: Any = StateAction


def _convert(raw: Any, type_: type[T], what: str) -> T:
    """Decode what the server sent; a misfit is the server's fault."""
    try:
        return codec.convert(raw, type_)
    except msgspec.ValidationError as exc:
        raise ProtocolViolationError(f"{what}: unexpected result shape: {exc}") from None


def _convert_result(type_: type[T], what: str, raw: Any) -> T:
    return _convert(raw, type_, what)


def _build(data: Mapping[str, Any], type_: type[T]) -> T:
    """Decode what the caller passed; a misfit is the caller's fault (``ValueError``)."""
    try:
        return codec.convert(dict(data), type_)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a valid {getattr(type_, '__name__', type_)}: {exc}") from None


def _raw_params(params: msgspec.Raw | msgspec.UnsetType) -> Any:
    if isinstance(params, msgspec.UnsetType):
        return {}
    return msgspec.json.decode(memoryview(params))


def turn_error(turn: Turn) -> ErrorInfo | None:
    """The error a turn ended with: its last response part, when that is of kind
    ``error`` (1.0 appends the ``chat/error`` part there); ``None`` otherwise."""
    parts = turn.response_parts
    if parts and isinstance(parts[-1], ErrorResponsePart):
        return parts[-1].error
    return None


def is_resumable(turn: Turn) -> bool:
    """Whether ``chat/turnResume`` may reopen ``turn`` (when it is its chat's latest
    and nothing runs): it ended in error and its last part is an error part
    with ``resumable: true`` (1.0, REDUCER-CHANGES 10)."""
    parts = turn.response_parts
    return (
        turn.state == "error"
        and bool(parts)
        and isinstance(parts[-1], ErrorResponsePart)
        and parts[-1].resumable is True
    )


def _holds_turn(chat: ChatState, turn_id: str) -> bool:
    active = chat.active_turn
    if not isinstance(active, msgspec.UnsetType) and active.id == turn_id:
        return True
    return any(turn.id == turn_id for turn in chat.turns)


def _user_message(text: str) -> Message:
    return Message(text=text, origin=MessageOrigin(kind="user"))


def directory_uri(directory: str | os.PathLike[str]) -> str:
    """A working directory as the host takes it, a ``file:`` URI: one given is kept; a
    local path becomes one (``~`` expanded, a relative path taken from this process's
    current directory, links left for the host to resolve)."""
    text = os.fspath(directory)
    if text.lower().startswith("file:"):
        return text
    return Path(os.path.abspath(os.path.expanduser(text))).as_uri()


def _tuple_or_unset(items: Sequence[str] | None) -> tuple[str, ...] | msgspec.UnsetType:
    return UNSET if items is None else tuple(items)


def _discard(items: list[Any], item: object) -> None:
    with contextlib.suppress(ValueError):
        items.remove(item)

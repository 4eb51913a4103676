"""The WebSocket server: the door (auth, Origin, limits, health) and frames in and out.

Layer: transport (websockets asyncio API).

Before the upgrade (``process_request``), in this order:

* any plain HTTP request (not an upgrade, or to one of the paths below) whose
  ``Host`` is not a loopback name, on a host without a token → 403 (DNS
  rebinding: a page whose name now resolves to this host must read nothing
  here; the same test as for the page's own origin, below). With a token any
  ``Host`` passes (a proxy's name).
* ``GET /healthz`` → 200 while the process runs; ``GET /readyz`` → 200 once the
  store is open and the host accepts connections, else 503; these need no
  token. Once the store has failed (``Host.failure``) both answer 503
  ``failed: <why>``, and so does every upgrade. ``GET /metrics`` → Prometheus
  text, behind the token when one is configured (``Authorization: Bearer`` or
  ``?tkn=``; 401 otherwise).
* a plain (non-upgrade) ``GET /`` or ``/assets/…`` → the browser client's files
  (``static.py``), when ``web_ui`` is on. They hold no secret: no token needed.
* ``Origin`` not in ``allowed_origins`` → 403 (a web page must not drive a
  local host; clients without an Origin header are not browsers). With
  ``web_ui`` on, the page's own origin is admitted too: an Origin naming the
  host the request was sent to (its ``Host`` header) — when a token is
  configured (it still has to be given), or when that Host is a loopback name
  (``localhost``, ``127.0.0.1``, ``[::1]``: a DNS-rebinding page has its own
  name there, so it stays out). docs/web.md.
* a configured token missing or wrong (``Authorization: Bearer`` or
  ``?tkn=``, compared in constant time) → 401.
  In multi-user mode (``[[users]]``) the token must be one user's (each is
  compared, in constant time); that user is the connection's identity
  (``Connection.user``), whatever the client claims later (issue 16).
* ``max_connections`` reached → 503.
* ``max_connections_per_ip`` connections already open from the client's IP
  address (loopback counts too) → 429 Too Many Requests, with ``Retry-After``.
  A slot is taken when the upgrade is admitted and released when that TCP
  connection closes, however it ends (docs/reliability.md). Behind a proxy in
  ``trusted_proxies`` the client's address is the one its ``X-Forwarded-For``
  names (:func:`forwarded_client`); any other peer's header is ignored.

A client that does not finish its upgrade request within
``handshake_timeout`` seconds (a slow loris) is disconnected by websockets'
``open_timeout``; it holds no slot meanwhile (the hook runs only once the
request is complete).

Then one task per connection reads frames and hands them to the host in order;
the connection's writer task (``host/core/fanout.py``) sends. Close codes: 1009 for
a message over ``max_message_bytes`` (websockets does this), 1001 when the
host shuts down, 1012 when its store failed, 1013 for a slow consumer, 1008
after -32005.
"""

from __future__ import annotations

import hmac
import ipaddress
import struct
from collections import Counter
from collections.abc import Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit
from weakref import WeakKeyDictionary

import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from ahp_server.config import ConfigError, UserConfig, is_loopback
from ahp_server.host import metrics
from ahp_server.host.gateway import Gateway
from ahp_server.host.host import Host
from ahp_server.transport.static import StaticFiles, host_name, same_origin

if TYPE_CHECKING:  # the relay needs nats-py: only cluster nodes import it
    from ahp_server.transport.relay import EdgeRelay

__all__ = ["WebSocketTransport", "start_server"]

log = structlog.get_logger(__name__)

#: Incoming messages a connection may have read but not yet handled.
READ_AHEAD_FRAMES = 4


class WebSocketTransport:
    """Adapts a websockets connection to the host's :class:`Transport`."""

    def __init__(self, websocket: ServerConnection) -> None:
        self._ws = websocket

    async def send_text(self, frame: bytes) -> None:
        # Already-encoded UTF-8 JSON, sent as a text frame without re-decoding.
        await self._ws.send(frame, text=True)

    def _frames_itself(self) -> bool:
        """Whether this transport may frame text itself: the connection is open, with
        no permessage-deflate and nothing of the library's own waiting to go first."""
        protocol = self._ws.protocol
        return (
            protocol.state is State.OPEN
            and not protocol.extensions  # no permessage-deflate negotiated
            and not protocol.writes  # nothing of the library's own waits to go first
            and not protocol.expect_continuation_frame
            and not self._ws.transport.is_closing()
        )

    def write_now(self, frames: list[bytes]) -> bool:
        """Frame ``frames`` and write them now, in one ``write()``, when the socket
        takes them without waiting (``Connection``: its writer is idle); False,
        nothing written, otherwise."""
        ws = self._ws
        if ws.paused or not self._frames_itself():  # paused: over its high-water mark
            return False
        if len(frames) == 1:
            data = _text_header(len(frames[0])) + frames[0]
        else:
            data = b"".join([_text_header(len(f)) + f for f in frames])
        try:
            ws.transport.write(data)
        except (OSError, RuntimeError):  # the writer's path meets it too, and closes
            return False
        return True

    async def send_texts(self, frames: list[bytes]) -> None:
        ws = self._ws
        protocol = ws.protocol
        if self._frames_itself():
            # The hot path: unmasked, unfragmented server text frames (RFC 6455
            # §5.2) framed here and written with one write() for the batch. The
            # library would frame each through its Frame objects and write each
            # separately (a send() system call per frame while the socket keeps
            # up). What it would do after a send is done here too: flow control.
            ws.transport.write(b"".join([_text_header(len(f)) + f for f in frames]))
            if ws.paused:
                await ws.drain()
            return
        # Anything else (compression, a close under way) goes the library's way:
        # frame every message, then write and drain once for the whole batch.
        async with ws.send_context():
            for frame in frames:
                protocol.send_text(frame)
            pending = protocol.data_to_send()
            if all(pending):
                ws.transport.write(b"".join(pending))
            else:  # an end-of-stream marker: only when closing; write it the library's way
                for data in pending:
                    if data:
                        ws.transport.write(data)
                    elif ws.transport.can_write_eof():
                        ws.transport.write_eof()

    async def close(self, code: int, reason: str) -> None:
        await self._ws.close(code, reason)

    def abort(self) -> None:
        self._ws.transport.abort()


def _text_header(length: int) -> bytes:
    """The header of a final, unmasked text frame carrying ``length`` bytes (RFC 6455 §5.2)."""
    if length < 126:
        return bytes((0x81, length))
    if length < 0x10000:
        return _HEADER_16.pack(0x81, 126, length)
    return _HEADER_64.pack(0x81, 127, length)


_HEADER_16 = struct.Struct("!BBH")
_HEADER_64 = struct.Struct("!BBQ")


def _plain(
    status: HTTPStatus, body: str, content_type: str = "text/plain; charset=utf-8"
) -> Response:
    headers = Headers([("Content-Type", content_type), ("Cache-Control", "no-store")])
    return Response(status.value, status.phrase, headers, body.encode())


#: Paths answered over plain HTTP even on an upgrade request.
_HTTP_ROUTES = frozenset(("/healthz", "/readyz", "/metrics"))


def _token_of(request: Request) -> str | None:
    authorization = request.headers.get("Authorization")
    if authorization is not None:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value:
            return value.strip()
    values = parse_qs(urlsplit(request.path).query).get("tkn")
    return values[0] if values else None


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address(entry: str) -> IPAddress | None:
    """One ``X-Forwarded-For`` entry as an address: ``1.2.3.4``, ``1.2.3.4:5``, ``[::1]:5``."""
    entry = entry.strip()
    if entry.startswith("["):  # [v6] or [v6]:port
        entry = entry[1 : entry.find("]")] if "]" in entry else ""
    elif entry.count(":") == 1:  # v4:port (a bare v6 has more colons)
        entry = entry.partition(":")[0]
    try:
        address = ipaddress.ip_address(entry)
    except ValueError:
        return None  # "unknown", an obfuscated name (RFC 7239 §6), garbage
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # a dual-stack socket's IPv4 peer
    return address


def forwarded_client(peer: str, forwarded: Sequence[str], trusted: Sequence[IPNetwork]) -> str:
    """The client's address: ``peer``, or what a trusted proxy says in ``X-Forwarded-For``.

    ``forwarded`` holds the header's values in order. Only a peer within
    ``trusted`` is believed; its list is read from the right (each proxy
    appends the address it saw) past every trusted proxy, and the first
    address that is not one is the client — whatever a client wrote further
    left is its own claim. An entry that is no address ends the walk at the
    last hop that was: the proxy which passed it is all that is known.
    """
    address = _address(peer) if trusted else None
    if address is None or not any(address in network for network in trusted):
        return peer
    client = str(address)
    for value in reversed(forwarded):
        for entry in reversed(value.split(",")):
            hop = _address(entry)
            if hop is None:
                return client
            client = str(hop)
            if not any(hop in network for network in trusted):
                return client
    return client  # proxies all the way: the leftmost is as far as it goes


def client_address(
    connection: ServerConnection, request: Request | None, trusted: Sequence[IPNetwork]
) -> str:
    """The address a connection's client is counted and logged as (:func:`forwarded_client`)."""
    address = connection.remote_address
    peer = str(address[0]) if isinstance(address, tuple) and address else str(address)
    if not trusted or request is None:
        return peer  # (a Unix socket's peer is one bucket)
    return forwarded_client(peer, request.headers.get_all("X-Forwarded-For"), trusted)


def gatekeeper(  # type: ignore[no-untyped-def]
    host: Host,
    identities: WeakKeyDictionary[ServerConnection, UserConfig] | None = None,
    edge: EdgeRelay | None = None,
    addresses: WeakKeyDictionary[ServerConnection, str] | None = None,
):
    """The ``process_request`` hook: health endpoints, Origin, token, connection limit.

    ``edge``: cluster mode (docs/scale-out.md) — while this node is not the
    primary it relays its clients there; it is ready while it knows a primary.
    ``addresses``: where the client address each admitted connection is
    counted under (:func:`client_address`) is kept, for its logs.
    """
    settings = host.settings
    expected = settings.token.encode() if settings.token else None
    users = [(user, user.token.encode()) for user in settings.users]
    if identities is None:
        identities = WeakKeyDictionary()
    origins = frozenset(settings.allowed_origins)
    page = StaticFiles() if settings.web_ui else None
    trusted = [ipaddress.ip_network(network) for network in settings.trusted_proxies]
    # Admitted connections per address. Bounded: an entry exists only while one
    # of its connections is open, and they are at most ``max_connections``.
    per_ip: Counter[str] = Counter()

    def release(ip: str) -> None:
        per_ip[ip] -= 1
        if per_ip[ip] <= 0:
            del per_ip[ip]

    def authorized(connection: ServerConnection, request: Request) -> bool:
        """The single token, or one user's token (multi-user mode: the identity).

        Every configured token is compared, in constant time, whatever matches.
        """
        given = _token_of(request)
        if given is None:
            return False
        raw = given.encode()
        if expected is not None:
            return hmac.compare_digest(raw, expected)
        found: UserConfig | None = None
        for user, token in users:
            if hmac.compare_digest(raw, token):
                found = user
        if found is not None:
            identities[connection] = found
        return found is not None

    def unrebindable(request: Request) -> bool:
        """Whether the request's ``Host`` is one a DNS-rebinding page cannot send: a
        loopback name — or any name once a token guards the door (such a page has
        no token; behind a proxy the Host is the proxy's name)."""
        if expected is not None or users:
            return True
        name = host_name(request.headers.get("Host"))
        return name is not None and is_loopback(name)

    def admitted(origin: str, request: Request) -> bool:
        if origin in origins:
            return True
        if page is None:
            return False
        # The page this host served, from a name that cannot be rebound, or guarded by the token.
        return same_origin(origin, request.headers.get("Host")) and unrebindable(request)

    async def process_request(connection: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        upgrade = "websocket" in request.headers.get("Upgrade", "").lower()
        if (not upgrade or path in _HTTP_ROUTES) and not unrebindable(request):
            # Plain HTTP (the page, health, metrics, anything else): a rebound name
            # reads nothing here, as it could not open a WebSocket (admitted()).
            log.info("host refused", host=request.headers.get("Host"))
            return _plain(HTTPStatus.FORBIDDEN, "host not allowed\n")
        if page is not None and not upgrade:
            answer = page.respond(request)
            if answer is not None:
                return answer
        if path in ("/healthz", "/readyz") and host.failure is not None:
            # Neither alive nor ready: it is about to exit for its supervisor to restart it.
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, f"failed: {host.failure}\n")
        if path == "/healthz":
            return _plain(HTTPStatus.OK, "ok\n")
        if path == "/readyz":
            if host.accepting or (edge is not None and edge.ready):
                return _plain(HTTPStatus.OK, "ready\n")
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, "not ready\n")
        if path == "/metrics":
            # Behind the token when one is configured (issue 16): the counters
            # describe other people's traffic. /healthz and /readyz stay open.
            if (expected is not None or users) and not authorized(connection, request):
                return _plain(HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
            return _plain(HTTPStatus.OK, metrics.render(host), metrics.CONTENT_TYPE)
        origin = request.headers.get("Origin")
        if origin is not None and not admitted(origin, request):
            log.info("origin refused", origin=origin)
            return _plain(HTTPStatus.FORBIDDEN, "origin not allowed\n")
        if (expected is not None or users) and not authorized(connection, request):
            log.info("unauthorized connection refused")
            return _plain(HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
        relayed = edge.connections if edge is not None else 0
        if len(host.connections) + relayed >= settings.max_connections:
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, "too many connections\n")
        if host.failure is not None:
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, f"failed: {host.failure}\n")
        if not host.accepting and not (edge is not None and edge.ready):
            reason = "shutting down\n" if edge is None else "no primary yet: try again\n"
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, reason)
        ip = client_address(connection, request, trusted)
        if per_ip[ip] >= settings.max_connections_per_ip:
            log.info("per-address connection limit reached", remote=ip, open=per_ip[ip])
            answer = _plain(
                HTTPStatus.TOO_MANY_REQUESTS, "too many connections from this address\n"
            )
            answer.headers["Retry-After"] = "1"
            return answer
        per_ip[ip] += 1
        if addresses is not None:
            addresses[connection] = ip
        # Released once the TCP connection is gone, whether or not the handshake
        # completes: a callback on what ``wait_closed()`` awaits, not a task per
        # connection waiting on it.
        connection.connection_lost_waiter.add_done_callback(lambda _: release(ip))
        return None

    return process_request


async def start_server(gateway: Gateway, *, edge: EdgeRelay | None = None) -> Server:
    """Start listening on ``settings.host:port`` (port 0 picks a free one).

    ``edge``: cluster mode; while the host does not accept (this node is not
    the primary), clients are relayed to the primary (``relay.py``).
    """
    host = gateway.host
    settings = host.settings
    if not is_loopback(settings.host) and not settings.token and not settings.users:
        raise ConfigError("server.token", f"required to listen on {settings.host}")

    # Who each admitted connection is (multi-user mode), from its token at the door,
    # and the client address it was admitted under.
    identities: WeakKeyDictionary[ServerConnection, UserConfig] = WeakKeyDictionary()
    addresses: WeakKeyDictionary[ServerConnection, str] = WeakKeyDictionary()

    async def handler(websocket: ServerConnection) -> None:
        user = identities.pop(websocket, None)
        client = addresses.pop(websocket, None)
        if edge is not None and not host.accepting:
            identity = None if user is None else (user.name, user.admin)
            await edge.serve(websocket, WebSocketTransport(websocket), identity)
            return
        connection = gateway.open(WebSocketTransport(websocket))
        if user is not None:
            connection.user, connection.admin = user.name, user.admin
        structlog.contextvars.bind_contextvars(conn=connection.id)
        log.debug(
            "connection opened",
            remote=str(websocket.remote_address),
            client=client,
        )
        try:
            turnstile = host.turnstile
            async for frame in websocket:
                if turnstile.closed():  # N clients' frames read at once: in slices
                    await turnstile.wait()
                await gateway.handle_frame(connection, frame)
        except ConnectionClosed:
            pass
        finally:
            await gateway.close(connection)
            log.debug(
                "connection closed", client_id=connection.client_id, code=websocket.close_code
            )

    return await serve(
        handler,
        settings.host,
        settings.port,
        max_size=settings.max_message_bytes,
        # Frames read ahead of the gateway, which takes one at a time: with
        # max_size, what one connection holds unread (docs/reliability.md "Memory").
        max_queue=READ_AHEAD_FRAMES,
        compression="deflate" if settings.compression else None,
        ping_interval=settings.ping_interval,
        ping_timeout=settings.ping_timeout,
        process_request=gatekeeper(host, identities, edge, addresses),
        server_header=None,
        open_timeout=settings.handshake_timeout,
    )

"""The WebSocket server: the door (auth, Origin, limits, health) and frames in and out.

Layer: transport (websockets asyncio API).

Before the upgrade (``process_request``), in this order:

* ``GET /healthz`` → 200 while the process runs; ``GET /readyz`` → 200 once the
  store is open and the host accepts connections, else 503; ``GET /metrics`` →
  Prometheus text. These need no token (they expose counts, never content).
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
* ``max_connections`` reached → 503.

Then one task per connection reads frames and hands them to the host in order;
the connection's writer task (``host/fanout.py``) sends. Close codes: 1009 for
a message over ``max_message_bytes`` (websockets does this), 1001 when the
host shuts down, 1013 for a slow consumer, 1008 after -32005.
"""

from __future__ import annotations

import hmac
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from ahp_server.config import ConfigError, is_loopback
from ahp_server.host import metrics
from ahp_server.host.gateway import Gateway
from ahp_server.host.host import Host
from ahp_server.transport.static import StaticFiles, host_name, same_origin

__all__ = ["WebSocketTransport", "start_server"]

log = structlog.get_logger(__name__)


class WebSocketTransport:
    """Adapts a websockets connection to the host's :class:`Transport`."""

    def __init__(self, websocket: ServerConnection) -> None:
        self._ws = websocket

    async def send_text(self, frame: bytes) -> None:
        # Already-encoded UTF-8 JSON, sent as a text frame without re-decoding.
        await self._ws.send(frame, text=True)

    async def send_texts(self, frames: list[bytes]) -> None:
        # websockets' documented pattern for writing from user code: frame
        # every message, then write and drain once for the whole batch. On its
        # own the library then writes each frame separately (a send() system
        # call each while the socket keeps up); joined, the batch is one write.
        ws = self._ws
        async with ws.send_context():
            for frame in frames:
                ws.protocol.send_text(frame)
            pending = ws.protocol.data_to_send()
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


def _plain(
    status: HTTPStatus, body: str, content_type: str = "text/plain; charset=utf-8"
) -> Response:
    headers = Headers([("Content-Type", content_type), ("Cache-Control", "no-store")])
    return Response(status.value, status.phrase, headers, body.encode())


def _token_of(request: Request) -> str | None:
    authorization = request.headers.get("Authorization")
    if authorization is not None:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value:
            return value.strip()
    values = parse_qs(urlsplit(request.path).query).get("tkn")
    return values[0] if values else None


def gatekeeper(host: Host):  # type: ignore[no-untyped-def]
    """The ``process_request`` hook: health endpoints, Origin, token, connection limit."""
    settings = host.settings
    expected = settings.token.encode() if settings.token else None
    origins = frozenset(settings.allowed_origins)
    page = StaticFiles() if settings.web_ui else None

    def admitted(origin: str, request: Request) -> bool:
        if origin in origins:
            return True
        if page is None:
            return False
        # The page this host served, from a name that cannot be rebound, or guarded by the token.
        host_header = request.headers.get("Host")
        if not same_origin(origin, host_header):
            return False
        name = host_name(host_header)
        return expected is not None or (name is not None and is_loopback(name))

    async def process_request(connection: ServerConnection, request: Request) -> Response | None:
        if page is not None and "websocket" not in request.headers.get("Upgrade", "").lower():
            answer = page.respond(request)
            if answer is not None:
                return answer
        path = urlsplit(request.path).path
        if path == "/healthz":
            return _plain(HTTPStatus.OK, "ok\n")
        if path == "/readyz":
            if host.accepting:
                return _plain(HTTPStatus.OK, "ready\n")
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, "not ready\n")
        if path == "/metrics":
            return _plain(HTTPStatus.OK, metrics.render(host), metrics.CONTENT_TYPE)
        origin = request.headers.get("Origin")
        if origin is not None and not admitted(origin, request):
            log.info("origin refused", origin=origin)
            return _plain(HTTPStatus.FORBIDDEN, "origin not allowed\n")
        if expected is not None:
            given = _token_of(request)
            if given is None or not hmac.compare_digest(given.encode(), expected):
                log.info("unauthorized connection refused")
                return _plain(HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
        if len(host.connections) >= settings.max_connections:
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, "too many connections\n")
        if not host.accepting:
            return _plain(HTTPStatus.SERVICE_UNAVAILABLE, "shutting down\n")
        return None

    return process_request


async def start_server(gateway: Gateway) -> Server:
    """Start listening on ``settings.host:port`` (port 0 picks a free one)."""
    host = gateway.host
    settings = host.settings
    if not is_loopback(settings.host) and not settings.token:
        raise ConfigError("server.token", f"required to listen on {settings.host}")

    async def handler(websocket: ServerConnection) -> None:
        connection = gateway.open(WebSocketTransport(websocket))
        structlog.contextvars.bind_contextvars(conn=connection.id)
        log.debug("connection opened", remote=str(websocket.remote_address))
        try:
            async for frame in websocket:
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
        compression="deflate" if settings.compression else None,
        ping_interval=settings.ping_interval,
        ping_timeout=settings.ping_timeout,
        process_request=gatekeeper(host),
        server_header=None,
    )

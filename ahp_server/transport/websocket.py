"""The WebSocket server: frames in and out of the host, nothing else.

Layer: transport (websockets asyncio API).

One task per connection reads frames and hands them to the host in order; the
connection's writer task (``host/fanout.py``) sends. Close codes used here:
1009 when a message exceeds ``max_message_bytes`` (websockets does this), 1001
when the host shuts down, 1013 for a slow consumer, 1008 after -32005.
"""

from __future__ import annotations

import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from ahp_server.host.host import Host

__all__ = ["WebSocketTransport", "start_server"]

log = structlog.get_logger(__name__)


class WebSocketTransport:
    """Adapts a websockets connection to the host's :class:`Transport`."""

    def __init__(self, websocket: ServerConnection) -> None:
        self._ws = websocket

    async def send_text(self, frame: bytes) -> None:
        # Already-encoded UTF-8 JSON, sent as a text frame without re-decoding.
        await self._ws.send(frame, text=True)

    async def close(self, code: int, reason: str) -> None:
        await self._ws.close(code, reason)


async def start_server(host: Host) -> Server:
    """Start listening on ``host.settings.host:port`` (port 0 picks a free one)."""
    settings = host.settings

    async def handler(websocket: ServerConnection) -> None:
        connection = host.open_connection(WebSocketTransport(websocket))
        log.debug("connection opened", conn=connection.id, remote=str(websocket.remote_address))
        try:
            async for frame in websocket:
                await host.handle_frame(connection, frame)
        except ConnectionClosed:
            pass
        finally:
            await host.close_connection(connection)
            log.debug(
                "connection closed",
                conn=connection.id,
                client_id=connection.client_id,
                code=websocket.close_code,
            )

    return await serve(
        handler,
        settings.host,
        settings.port,
        max_size=settings.max_message_bytes,
        compression="deflate" if settings.compression else None,
        ping_interval=settings.ping_interval,
        ping_timeout=settings.ping_timeout,
    )

"""The gateway: one JSON-RPC frame in, routed by ``(method, params.channel)``.

Layer: host (asyncio), the top of it: the transport hands it connections and
frames; it builds the command dispatcher over a :class:`~ahp_server.host.host.Host`.

Frames of one connection are handled strictly in order (a pipelined
``createSession`` + ``subscribe`` works). Requests go to the command handler
(:mod:`ahp_server.host.commands.dispatcher`); this module is the one place where an
exception raised while handling a request becomes a JSON-RPC error response.

Connection lifecycle (WIRE-SUMMARY §3), as a transition table::

    state  | ping | initialize / reconnect | other requests      | dispatchAction / unsubscribe
    NEW    | ok   | -> READY               | -32600 "initialize" | ignored (no client id yet)
    READY  | ok   | -32600 "already"       | handled             | handled

Invariant for snapshots: a handler that returns a snapshot registers the
subscription and the gateway queues the response *in the same step* (no
``await`` in between), so every envelope after the snapshot's ``fromSeq``
reaches the client after the response.
"""

from __future__ import annotations

import structlog

from ahp_server.host.channels.changesets import Changesets
from ahp_server.host.channels.terminals import TerminalService
from ahp_server.host.channels.watches import ResourceWatches
from ahp_server.host.commands.dispatcher import Commands
from ahp_server.host.commands.moves import ChatMoves
from ahp_server.host.commands.resources import ResourceCommands
from ahp_server.host.core.fanout import CLOSE_POLICY, Connection, ConnState, Transport
from ahp_server.host.core.sequencer import response_frame
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol.errors import InvalidRequest, ParseError, ProtocolError
from ahp_server.protocol.jsonrpc import (
    JsonRpcNotification,
    JsonRpcRequest,
    RequestId,
    error_response,
    parse_message,
)

__all__ = ["Gateway"]

log = structlog.get_logger(__name__)

_HANDSHAKE = frozenset({"ping", "initialize", "reconnect"})


class Gateway:
    """Parses frames and routes them; turns request failures into JSON-RPC errors."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.commands = Commands(host)
        self.terminals = TerminalService(host)
        self.terminals.register(self.commands.register)
        ResourceCommands(host).register(self.commands)
        self.watches = ResourceWatches(host)
        self.watches.register(self.commands.register)
        self.changesets = Changesets(host)
        self.changesets.register(self.commands.register)
        ChatMoves(host).register(self.commands.register)

    def open(self, transport: Transport) -> Connection:
        """A new connection (its writer task starts now)."""
        return self.host.open_connection(transport)

    async def close(self, connection: Connection) -> None:
        """The connection ended: drop its subscriptions, stop its writer."""
        await self.host.close_connection(connection)

    async def handle_frame(self, connection: Connection, frame: str | bytes) -> None:
        if isinstance(frame, bytes):
            # WIRE-SUMMARY §1: messages are text frames. Refuse, keep the connection.
            self._send_error(
                connection,
                None,
                InvalidRequest("binary frames are not supported: send JSON-RPC as text frames"),
            )
            return
        try:
            message = parse_message(frame)
        except InvalidRequest as error:
            self._send_error(connection, error.request_id, error)
            return
        except ParseError as error:
            self._send_error(connection, None, error)
            return
        match message:
            case JsonRpcRequest():
                await self._request(connection, message)
            case JsonRpcNotification():
                await self._notification(connection, message)
            case _:
                # Responses: the host sends no requests of its own yet; ignore them.
                log.debug("unexpected response ignored", conn=connection.id)

    async def _request(self, connection: Connection, request: JsonRpcRequest) -> None:
        try:
            if connection.state is not ConnState.READY and request.method not in _HANDSHAKE:
                raise InvalidRequest("send initialize (or reconnect) first")
            result = await self.commands.handle(connection, request.method, request.params)
        except ProtocolError as error:
            self._send_error(connection, request.id, error)
            if error.close:
                # Deliver the error first, then close (e.g. -32005, WIRE-SUMMARY §3.1).
                self.host.spawn(
                    connection.flush_and_close(CLOSE_POLICY, error.message[:120], grace=2.0)
                )
            return
        except Exception as error:  # task boundary: a bug must not kill the connection
            log.exception("request failed", conn=connection.id, method=request.method)
            self._send_error(connection, request.id, error)
            return
        connection.send(response_frame(request.id, result))

    async def _notification(self, connection: Connection, message: JsonRpcNotification) -> None:
        if connection.state is not ConnState.READY:
            log.info("notification before initialize ignored", conn=connection.id)
            return
        try:
            await self.commands.notify(connection, message.method, message.params)
        except ProtocolError as error:
            # Notifications get no response (JSON-RPC 2.0 §4.1); log and go on.
            log.info(
                "bad notification ignored",
                conn=connection.id,
                method=message.method,
                error=error.message,
            )
        except Exception:  # task boundary, as for requests: a bug must not kill the connection
            log.exception("notification failed", conn=connection.id, method=message.method)

    def _send_error(
        self, connection: Connection, request_id: RequestId | None, error: BaseException
    ) -> None:
        connection.send(codec.encode(error_response(request_id, error)))

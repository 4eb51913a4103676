"""A scripted AHP server for the client tests (not a host: canned answers only).

It listens on ``127.0.0.1`` port 0 with ``websockets.asyncio.server.serve``.
Every received frame is recorded in :attr:`FakeServer.log`. Methods with a
handler in :attr:`FakeServer.handlers` are answered at once (defaults:
``initialize``, ``subscribe``, ``ping``); every other message goes to the
:attr:`FakeServer.inbox`, where a test takes it with :meth:`FakeServer.next`
and answers when and how it likes — late, out of order, with an error, or
by closing the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tests.client.wire import ROOT, root_json, snapshot_json

WAIT = 5.0


@dataclass(frozen=True)
class Received:
    """One message the server received, and the connection it came on."""

    ws: ServerConnection
    message: dict[str, Any]
    text_frame: bool

    @property
    def method(self) -> str | None:
        return self.message.get("method")

    @property
    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = self.message.get("params", {})
        return params


Handler = Callable[[Received], Awaitable[None]]


class FakeServer:
    def __init__(self) -> None:
        self.url = ""
        self.server_seq = 0
        self.protocol_version = "1.0.0"
        #: Channel URI -> state JSON, for initialize/subscribe snapshots.
        self.states: dict[str, dict[str, Any]] = {ROOT: root_json()}
        self.handlers: dict[str, Handler] = {
            "initialize": self.answer_initialize,
            "subscribe": self.answer_subscribe,
            "ping": self.answer_ping,
        }
        self.log: list[Received] = []
        self.inbox: asyncio.Queue[Received] = asyncio.Queue(maxsize=1000)
        self.connections: asyncio.Queue[ServerConnection] = asyncio.Queue(maxsize=100)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[FakeServer]:
        async with serve(self._serve, "127.0.0.1", 0) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            self.url = f"ws://127.0.0.1:{port}"
            yield self

    async def _serve(self, ws: ServerConnection) -> None:
        await self.connections.put(ws)
        with contextlib.suppress(ConnectionClosed):
            async for frame in ws:
                received = Received(ws, json.loads(frame), isinstance(frame, str))
                self.log.append(received)
                handler = self.handlers.get(received.method or "")
                if handler is not None:
                    await handler(received)
                else:
                    await self.inbox.put(received)

    # -- taking messages -------------------------------------------------------------------

    async def next(self, method: str | None = None) -> Received:
        """The next unhandled message (asserting its method when given)."""
        async with asyncio.timeout(WAIT):
            received = await self.inbox.get()
        if method is not None:
            assert received.method == method, received.message
        return received

    async def connection(self) -> ServerConnection:
        """The next accepted connection."""
        async with asyncio.timeout(WAIT):
            return await self.connections.get()

    def methods(self) -> list[str | None]:
        return [received.method for received in self.log]

    # -- answering -------------------------------------------------------------------------

    @staticmethod
    async def send(ws: ServerConnection, message: dict[str, Any]) -> None:
        async with asyncio.timeout(WAIT):
            await ws.send(json.dumps(message))

    async def reply(self, received: Received, result: Any) -> None:
        await self.send(
            received.ws, {"jsonrpc": "2.0", "id": received.message["id"], "result": result}
        )

    async def reply_error(
        self, received: Received, code: int, message: str, data: Any = None
    ) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await self.send(
            received.ws, {"jsonrpc": "2.0", "id": received.message["id"], "error": error}
        )

    async def notify(self, ws: ServerConnection, method: str, params: dict[str, Any]) -> None:
        await self.send(ws, {"jsonrpc": "2.0", "method": method, "params": params})

    async def action(self, ws: ServerConnection, envelope: dict[str, Any]) -> None:
        await self.notify(ws, "action", envelope)

    def snapshot(self, uri: str) -> dict[str, Any]:
        return snapshot_json(uri, self.states[uri], self.server_seq)

    # -- default handlers ------------------------------------------------------------------

    async def answer_initialize(self, received: Received) -> None:
        subscriptions = received.params.get("initialSubscriptions", [])
        await self.reply(
            received,
            {
                "protocolVersion": self.protocol_version,
                "serverSeq": self.server_seq,
                "snapshots": [self.snapshot(uri) for uri in subscriptions if uri in self.states],
                "serverInfo": {"name": "fake", "version": "0"},
            },
        )

    async def answer_subscribe(self, received: Received) -> None:
        uri = received.params["channel"]
        await self.reply(received, {"snapshot": self.snapshot(uri)} if uri in self.states else {})

    async def answer_ping(self, received: Received) -> None:
        await self.reply(received, None)

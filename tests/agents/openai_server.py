"""A local HTTP server speaking the OpenAI chat-completions streaming wire format, for tests.

Real sockets, real HTTP/1.1, real server-sent events in the shapes OpenAI and
its look-alikes send (content deltas, ``reasoning_content`` deltas, tool-call
deltas split across chunks by ``index``, a final usage chunk, ``[DONE]``).
What it answers is chosen by the last user message (see :meth:`scenario`);
every request is recorded, and a client that goes away mid-stream is noticed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

MODEL = "test-model"


@dataclass
class Recorded:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float


@dataclass
class OpenAIServer:
    requests: list[Recorded] = field(default_factory=list)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None
    _counts: dict[str, int] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def start(self) -> OpenAIServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # -- HTTP ---------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
            self.requests.append(Recorded(body, headers, time.monotonic()))
            if b"/chat/completions" not in request_line:
                await self._status(writer, 404, {"error": {"message": "no such route"}})
                return
            await self.scenario(body, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.disconnected.set()
        finally:
            with contextlib.suppress(ConnectionError, RuntimeError):
                writer.close()

    async def _status(
        self, writer: asyncio.StreamWriter, status: int, body: dict[str, Any], **headers: str
    ) -> None:
        data = json.dumps(body).encode()
        extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n{extra}Connection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _events(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
        )
        await writer.drain()

    async def _send(self, writer: asyncio.StreamWriter, data: dict[str, Any] | str) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        writer.write(f"data: {payload}\n\n".encode())
        await writer.drain()

    @staticmethod
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    @staticmethod
    def usage(prompt: int, completion: int) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": MODEL,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    async def _stream(
        self, writer: asyncio.StreamWriter, deltas: list[dict[str, Any]], *, pause: float = 0.0
    ) -> None:
        await self._events(writer)
        await self._send(writer, self.chunk({"role": "assistant", "content": ""}))
        for delta in deltas:
            await self._send(writer, self.chunk(delta))
            if pause:
                await asyncio.sleep(pause)
        await self._send(writer, self.chunk({}, finish="stop"))
        await self._send(writer, self.usage(11, len(deltas)))
        await self._send(writer, "[DONE]")

    # -- what it answers ----------------------------------------------------------------------

    def _seen(self, key: str) -> int:
        self._counts[key] = self._counts.get(key, 0) + 1
        return self._counts[key]

    async def scenario(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        messages = body["messages"]
        last = messages[-1]
        if body.get("model") != MODEL:
            await self._status(
                writer, 404, {"error": {"message": f"model {body.get('model')!r} not found"}}
            )
            return
        text = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        if last["role"] == "tool" and text != "loop-tools":
            # After tool calls: report what the tools said.
            results = [m["content"] for m in messages if m["role"] == "tool"]
            await self._stream(writer, [{"content": "results: " + " | ".join(results)}])
            return
        match text:
            case "hello":
                await self._stream(
                    writer, [{"content": "Hel"}, {"content": "lo "}, {"content": "there"}]
                )
            case "think":
                await self._stream(
                    writer,
                    [
                        {"reasoning_content": "Let me "},
                        {"reasoning_content": "think."},
                        {"content": "Done thinking."},
                    ],
                )
            case "history":
                users = [m["content"] for m in messages if m["role"] == "user"]
                system = [m["content"] for m in messages if m["role"] == "system"]
                text = f"users={users} system={len(system)}"
                side = [m for m in system if "side conversation" in m]
                if side:  # how many source turns the side chat was given
                    text += f" side={side[0].count('User:')}"
                await self._stream(writer, [{"content": text}])
            case "tools" | "loop-tools":
                await self._tool_calls(writer)
            case "401":
                await self._status(writer, 401, {"error": {"message": "Incorrect API key"}})
            case "403":
                await self._status(writer, 403, {"error": {"message": "forbidden"}})
            case "429":
                if self._seen("429") == 1:
                    await self._status(
                        writer, 429, {"error": {"message": "slow down"}}, retry_after="1"
                    )
                else:
                    await self._stream(writer, [{"content": "after waiting"}])
            case "429-always":
                await self._status(
                    writer, 429, {"error": {"message": "slow down"}}, retry_after="0"
                )
            case "500-once":
                if self._seen("500") == 1:
                    await self._status(writer, 500, {"error": {"message": "oops"}})
                else:
                    await self._stream(writer, [{"content": "recovered"}])
            case "500":
                await self._status(writer, 503, {"error": {"message": "overloaded"}})
            case "malformed":
                await self._events(writer)
                await self._send(writer, self.chunk({"content": "partial "}))
                await self._send(writer, "{this is not json")
                await self._send(writer, "[DONE]")
            case "cut":
                await self._events(writer)
                await self._send(writer, self.chunk({"content": "the beginning "}))
                await asyncio.sleep(0.05)
                transport = writer.transport
                transport.abort()  # no [DONE], no chunked end: the stream just stops
            case "slow":
                await self._events(writer)
                for i in range(400):
                    await self._send(writer, self.chunk({"content": f"{i} "}))
                    await asyncio.sleep(0.05)
                await self._send(writer, "[DONE]")
            case _:
                await self._stream(writer, [{"content": f"echo: {text}"}])

    async def _tool_calls(self, writer: asyncio.StreamWriter) -> None:
        """Two parallel calls, their names and arguments split across chunks."""
        await self._events(writer)
        pieces = [
            {
                "index": 0,
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_", "arguments": ""},
            },
            {"index": 0, "function": {"name": "weather", "arguments": '{"ci'}},
            {
                "index": 1,
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":'},
            },
            {"index": 0, "function": {"arguments": 'ty": "Paris"}'}},
            {"index": 1, "function": {"arguments": ' "Rome"}'}},
        ]
        await self._send(writer, self.chunk({"role": "assistant", "content": None}))
        for piece in pieces:
            await self._send(writer, self.chunk({"tool_calls": [piece]}))
        await self._send(writer, self.chunk({}, finish="tool_calls"))
        await self._send(writer, self.usage(20, 10))
        await self._send(writer, "[DONE]")

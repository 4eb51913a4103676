"""What the host adds between a model endpoint and a client: time to first token, cost per token.

An OpenAI-compatible endpoint in this process (``Endpoint``: real HTTP, real
server-sent events, tokens as fast as the socket takes them, no model) is
called two ways in one run:

* ``direct`` — the ``openai`` SDK streaming from it, as any program would;
* ``through host`` — an AHP client over WebSocket asking a host whose agent
  (``kind = "openai"``) streams from the same endpoint.

Time to first token is from sending the message to the first text arriving
(p50/p99 over short turns); cost per token is a long stream's time over its
tokens. ``host added`` is the difference. Printed, never asserted.

    python -m bench.model [--quick] [--out FILE]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from ahp_server.client import AhpClient
from ahp_server.config import AgentConfig, Settings
from ahp_server.logging import configure_logging
from ahp_server.protocol.types import ChatDeltaAction, ChatResponsePartAction
from bench.persistence import machine_info, publish_results, sized_main

RESULTS = Path(__file__).resolve().parent / "results" / "model.json"
TOKEN = "tok "


@dataclass(frozen=True)
class Sizes:
    tokens: int = 20_000
    repeats: int = 3
    turns: int = 200


FULL = Sizes()
QUICK = Sizes(tokens=2_000, repeats=1, turns=30)


class Endpoint:
    """``POST /v1/chat/completions`` streaming N tokens (N = the last message)."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def start(self) -> Endpoint:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        body = json.loads(await reader.readexactly(length))
        count = int(body["messages"][-1]["content"])
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )

        def event(delta: dict[str, str], finish: str | None) -> bytes:
            chunk = {
                "id": "b",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "bench",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(chunk)}\n\n".encode()

        token = event({"content": TOKEN}, None)
        for i in range(count):
            writer.write(token)
            if i % 64 == 63:
                await writer.drain()
        writer.write(event({}, "stop") + b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()


async def direct(url: str, sizes: Sizes) -> dict[str, float]:
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)

    async def turn(count: int) -> tuple[float, float]:
        started = time.perf_counter()
        first = 0.0
        stream = await client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": str(count)}], stream=True
        )
        async for chunk in stream:
            if not first and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
        return first, time.perf_counter() - started

    await turn(10)
    firsts = [(await turn(1))[0] for _ in range(sizes.turns)]
    totals = [(await turn(sizes.tokens))[1] for _ in range(sizes.repeats)]
    await client.close()
    return _figures(firsts, min(totals), sizes.tokens)


async def through_host(url: str, sizes: Sizes) -> dict[str, float]:
    from ahp_server.app import App

    config = AgentConfig(name="model", kind="openai", base_url=url, model="bench")
    app = App(Settings(host="127.0.0.1", port=0, agents=(config,)))
    await app.start()
    try:
        async with AhpClient.connect(app.urls[0]) as client:
            chat = await client.open_chat("model")
            first_text: list[float] = []

            def on_envelope(envelope: Any) -> None:
                if not first_text and isinstance(
                    envelope.action, ChatResponsePartAction | ChatDeltaAction
                ):
                    first_text.append(time.perf_counter())

            client.on_envelope(on_envelope)

            async def turn(count: int) -> tuple[float, float]:
                first_text.clear()
                started = time.perf_counter()
                await client.ask(chat, str(count), timeout=600)
                return first_text[0] - started, time.perf_counter() - started

            await turn(10)
            firsts = [(await turn(1))[0] for _ in range(sizes.turns)]
            totals = [(await turn(sizes.tokens))[1] for _ in range(sizes.repeats)]
    finally:
        await app.stop(close_timeout=1.0)
    return _figures(firsts, min(totals), sizes.tokens)


def _figures(firsts: list[float], total: float, tokens: int) -> dict[str, float]:
    ordered = sorted(firsts)
    return {
        "ttft_p50_ms": statistics.median(ordered) * 1e3,
        "ttft_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3,
        "us_per_token": total / tokens * 1e6,
        "tokens_per_s": tokens / total,
    }


def format_report(results: dict[str, Any]) -> str:
    machine = results["machine"]
    lines = [
        f"ahp-server {machine['ahp_server']} model endpoint path — {machine['date']}",
        f"machine: {machine['cpu_count']} CPUs ({machine['cpu_model']}), "
        f"{machine['platform']}, Python {machine['python']}",
        f"{results['tokens']} tokens per stream (best of {results['repeats']}); "
        f"{results['turns']} one-token turns for time to first token",
        "",
        f"{'path':<14}{'TTFT p50 ms':>13}{'TTFT p99 ms':>13}{'µs/token':>10}{'tokens/s':>11}",
    ]
    for name, row in results["rows"].items():
        lines.append(
            f"{name:<14}{row['ttft_p50_ms']:>13.2f}{row['ttft_p99_ms']:>13.2f}"
            f"{row['us_per_token']:>10.1f}{row['tokens_per_s']:>11,.0f}"
        )
    added = results["host_added"]
    lines += [
        "",
        f"the host adds {added['ttft_p50_ms']:.2f} ms to the first token (p50) and "
        f"{added['us_per_token']:.1f} µs per token",
    ]
    return "\n".join(lines)


def run(sizes: Sizes, *, out: Path | None = RESULTS) -> dict[str, Any]:
    configure_logging("warning", "console")

    async def measure() -> dict[str, dict[str, float]]:
        endpoint = await Endpoint().start()
        try:
            return {
                "direct": await direct(endpoint.url, sizes),
                "through host": await through_host(endpoint.url, sizes),
            }
        finally:
            await endpoint.stop()

    rows = asyncio.run(measure())
    results: dict[str, Any] = {
        "machine": machine_info(),
        "tokens": sizes.tokens,
        "repeats": sizes.repeats,
        "turns": sizes.turns,
        "rows": rows,
        "host_added": {
            key: rows["through host"][key] - rows["direct"][key]
            for key in ("ttft_p50_ms", "ttft_p99_ms", "us_per_token")
        },
    }
    publish_results(format_report(results), results, out)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    return sized_main("python -m bench.model", __doc__, run, (FULL, QUICK), RESULTS, argv)


if __name__ == "__main__":
    raise SystemExit(main())

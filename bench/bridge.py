"""What the ACP bridge costs: per streamed chunk, and per turn, against the in-process echo path.

Three ways to stream the same N chunks of 16 bytes, each measured in one run:

* ``in-process`` — a provider in the host process calls ``io.text`` N times
  (the echo agent's path): host + WebSocket + client, no bridge;
* ``acp-bridge`` — ``bench/acp_agent.py`` as a child process, through the
  host's ACP bridge (SDK, JSON-RPC over stdio, the ordered update queue):
  everything the in-process row has, plus the bridge and the agent process;
* ``acp-direct`` (the floor of the ACP path) — the same agent process driven by
  the SDK's client side alone, no host: what any ACP client pays.

``bridge cost per chunk`` = acp-bridge − in-process (what the bridge adds on
top of the host); latency per turn is a one-chunk turn, sequential, p50/p99.
Figures are printed, never asserted (``tests/test_bench_smoke.py`` runs a tiny
version to keep the harness working).

    python -m bench.bridge [--quick] [--out FILE]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp.client.connection import ClientSideConnection
from acp.schema import TextContentBlock

from ahp_server.agents.base import StatelessProvider, TurnIO, TurnRequest
from ahp_server.app import App, providers_from
from ahp_server.client import AhpClient
from ahp_server.config import AgentConfig, Settings
from ahp_server.logging import configure_logging
from ahp_server.protocol.types import AgentInfo
from bench.persistence import machine_info, publish_results, sized_main

AGENT = str(Path(__file__).with_name("acp_agent.py"))
RESULTS = Path(__file__).resolve().parent / "results" / "bridge.json"
CHUNK = 16


@dataclass(frozen=True)
class Sizes:
    chunks: int = 20_000
    repeats: int = 3
    turns: int = 300


FULL = Sizes()
QUICK = Sizes(chunks=2_000, repeats=1, turns=50)


class InProcess(StatelessProvider):
    """The same stream, from a provider in the host process."""

    @property
    def info(self) -> AgentInfo:
        return AgentInfo(provider="inproc", display_name="in-process", description="", models=())

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        count, size = (int(word) for word in request.message.text.split())
        chunk = "x" * size
        for _ in range(count):
            await io.text(chunk)


async def through_host(provider: str, sizes: Sizes) -> dict[str, Any]:
    config = AgentConfig(name="acp", command=sys.executable, args=(AGENT,))
    settings = Settings(host="127.0.0.1", port=0, agents=(config,))
    app = App(settings, providers=[*providers_from(settings), InProcess()])
    await app.start()
    try:
        async with AhpClient.connect(app.urls[0]) as client:
            chat = await client.open_chat(provider)
            await client.ask(chat, "10 16", timeout=60)  # warm: process, session, caches
            stream: list[float] = []
            for _ in range(sizes.repeats):
                started = time.perf_counter()
                await client.ask(chat, f"{sizes.chunks} {CHUNK}", timeout=600)
                stream.append(time.perf_counter() - started)
            latencies: list[float] = []
            for _ in range(sizes.turns):
                started = time.perf_counter()
                await client.ask(chat, f"1 {CHUNK}", timeout=60)
                latencies.append(time.perf_counter() - started)
    finally:
        await app.stop(close_timeout=1.0)
    return _figures(min(stream), sizes.chunks, latencies)


class _Sink:
    """The SDK client side with nothing behind it: counts chunks."""

    def __init__(self) -> None:
        self.chunks = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.chunks += 1

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def on_connect(self, conn: Any) -> None:
        return None


async def direct(sizes: Sizes) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        AGENT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    sink = _Sink()
    conn = ClientSideConnection(sink, process.stdin, process.stdout)  # type: ignore[arg-type]
    try:
        await conn.initialize(protocol_version=1)
        session = (await conn.new_session(cwd=str(Path.cwd()), mcp_servers=[])).session_id

        async def turn(text: str) -> None:
            await conn.prompt(session_id=session, prompt=[TextContentBlock(type="text", text=text)])

        await turn("10 16")
        stream: list[float] = []
        for _ in range(sizes.repeats):
            started = time.perf_counter()
            await turn(f"{sizes.chunks} {CHUNK}")
            stream.append(time.perf_counter() - started)
        latencies: list[float] = []
        for _ in range(sizes.turns):
            started = time.perf_counter()
            await turn(f"1 {CHUNK}")
            latencies.append(time.perf_counter() - started)
    finally:
        await conn.close()
        process.kill()
        await process.wait()
    return _figures(min(stream), sizes.chunks, latencies)


def _figures(seconds: float, chunks: int, latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "us_per_chunk": seconds / chunks * 1e6,
        "chunks_per_s": chunks / seconds,
        "turn_p50_ms": statistics.median(ordered) * 1e3,
        "turn_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3,
    }


def format_report(results: dict[str, Any]) -> str:
    machine = results["machine"]
    rows = results["rows"]
    lines = [
        f"ahp-server {machine['ahp_server']} ACP bridge — {machine['date']}",
        f"machine: {machine['cpu_count']} CPUs ({machine['cpu_model']}), "
        f"{machine['platform']}, Python {machine['python']}",
        f"{results['chunks']} chunks of {CHUNK} bytes per stream (best of {results['repeats']}); "
        f"{results['turns']} one-chunk turns",
        "",
        f"{'path':<14}{'µs/chunk':>10}{'chunks/s':>12}{'turn p50 ms':>13}{'turn p99 ms':>13}",
    ]
    for name, row in rows.items():
        lines.append(
            f"{name:<14}{row['us_per_chunk']:>10.1f}{row['chunks_per_s']:>12,.0f}"
            f"{row['turn_p50_ms']:>13.2f}{row['turn_p99_ms']:>13.2f}"
        )
    added = results["bridge_added"]
    lines += [
        "",
        f"the bridge adds {added['us_per_chunk']:.1f} µs per chunk and "
        f"{added['turn_p50_ms']:.2f} ms per turn (p50) to the in-process path",
    ]
    return "\n".join(lines)


def run(sizes: Sizes, *, out: Path | None = RESULTS) -> dict[str, Any]:
    configure_logging("warning", "console")

    async def measure() -> dict[str, Any]:
        return {
            "in-process": await through_host("inproc", sizes),
            "acp-bridge": await through_host("acp", sizes),
            "acp-direct": await direct(sizes),
        }

    rows = asyncio.run(measure())
    results: dict[str, Any] = {
        "machine": machine_info(),
        "chunks": sizes.chunks,
        "repeats": sizes.repeats,
        "turns": sizes.turns,
        "rows": rows,
        "bridge_added": {
            key: rows["acp-bridge"][key] - rows["in-process"][key]
            for key in ("us_per_chunk", "turn_p50_ms", "turn_p99_ms")
        },
    }
    publish_results(format_report(results), results, out)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    return sized_main("python -m bench.bridge", __doc__, run, (FULL, QUICK), RESULTS, argv)


if __name__ == "__main__":
    raise SystemExit(main())

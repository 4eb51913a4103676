"""Soak: 1,000 connections with churn against the real host; no growth allowed.

``python -m bench.soak [--quick] [--connections N] [--seconds S]``

Issue 16 item 4. Starts the real host (``python -m ahp_server serve`` on
loopback, ``bench.suite.host_process``), opens ``connections`` clients (each
initialized and subscribed to one of a few chats), and for ``seconds`` keeps
agents streaming into those chats while workers churn the clients: each churn
step drops a client — abruptly (TCP abort, no close frame) or with a close
frame, at random — and opens a new one in its place that initializes and
subscribes again. Every client keeps reading, so streaming is real load.

The host's RSS (``/proc/<pid>/status``), open file descriptors
(``/proc/<pid>/fd``), asyncio tasks and connections (``GET /metrics``:
``ahp_tasks``, ``ahp_connections``) are sampled with all clients connected
before the churn and again after it (same number of clients), after the host
has had a moment to settle. The bounds (``BOUNDS``) are checked and printed;
the exit status is 1 when one is exceeded. docs/reliability.md has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from bench.suite import Wire, host_process, proc_rss_kb, progress, text_of

__all__ = ["BOUNDS", "Sample", "run"]

#: Allowed growth from start to end: (absolute slack, fraction of the start value).
BOUNDS: dict[str, tuple[float, float]] = {
    "rss_kb": (32 * 1024, 0.25),
    "fds": (16, 0.02),
    "tasks": (16, 0.02),
    "connections": (0, 0.0),
}


@dataclass
class Sample:
    rss_kb: int
    fds: int
    tasks: int
    connections: int


def _metrics(url: str) -> dict[str, float]:
    http = url.replace("ws://", "http://") + "/metrics"
    with urllib.request.urlopen(http, timeout=30) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.split()
            values[name] = float(value)
    return values


async def sample(url: str, pid: int, expected_connections: int) -> Sample:
    """Wait until the host sees ``expected_connections`` (bounded), settle, then measure."""
    deadline = time.monotonic() + 60
    while True:
        metrics = await asyncio.to_thread(_metrics, url)
        if int(metrics["ahp_connections"]) == expected_connections:
            break
        if time.monotonic() > deadline:
            break  # report what it is; the bound check will say so
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # let closing tasks finish and the allocator settle
    metrics = await asyncio.to_thread(_metrics, url)
    return Sample(
        rss_kb=proc_rss_kb(pid),
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        tasks=int(metrics.get("ahp_tasks", -1)),
        connections=int(metrics["ahp_connections"]),
    )


async def _client(url: str, chat: str, client_id: str) -> Wire:
    wire = await Wire.initialized(url, client_id)
    await wire.request("subscribe", {"channel": chat})
    return wire


async def _drop(wire: Wire, abrupt: bool) -> None:
    if abrupt:
        wire.ws.transport.abort()  # no close frame: the TCP connection just ends
        wire.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await wire.reader
    else:
        await wire.close()


async def soak(
    url: str, pid: int, connections: int, seconds: float, chats: int, workers: int
) -> dict[str, Any]:
    driver = await Wire.initialized(url, "soak-driver")
    chat_uris = [await driver.open_chat() for _ in range(chats)]
    semaphore = asyncio.Semaphore(50)
    # A slot's client comes back as itself (same clientId), as a real client does
    # after a drop: the host's per-client grace timer (active_client_grace) is then
    # called off instead of left running; other ids would each hold one for 30 s.
    run_id = uuid.uuid4().hex[:8]
    ids = [f"soak-{run_id}-{index}" for index in range(connections)]

    async def opened(index: int) -> Wire:
        async with semaphore:
            return await _client(url, chat_uris[index % chats], ids[index])

    progress(f"opening {connections} connections")
    clients = list(await asyncio.gather(*(opened(i) for i in range(connections))))
    start = await sample(url, pid, connections + 1)
    progress(f"start: {start}")

    stop = time.monotonic() + seconds
    counts = {"churned": 0, "abrupt": 0, "turns": 0, "deliveries_at_start": 0}
    counts["deliveries_at_start"] = sum(w.deliveries for w in clients)
    rng = random.Random(5)
    text = text_of(200)

    async def stream(chat: str) -> None:
        while time.monotonic() < stop:
            await driver.ask(chat, text)
            counts["turns"] += 1

    async def churn(worker: int) -> None:
        # Each worker owns its own slots (two workers replacing one slot would orphan a client).
        slots = range(worker, connections, workers)
        while time.monotonic() < stop and slots:
            index = rng.choice(slots)
            wire = clients[index]
            abrupt = rng.random() < 0.5
            await _drop(wire, abrupt)
            clients[index] = await _client(url, chat_uris[index % chats], ids[index])
            counts["churned"] += 1
            counts["abrupt"] += abrupt

    await asyncio.gather(*(stream(c) for c in chat_uris), *(churn(w) for w in range(workers)))
    deliveries = sum(w.deliveries for w in clients)
    end = await sample(url, pid, connections + 1)
    progress(f"end: {end}")
    await asyncio.gather(*(w.close() for w in clients))
    await driver.close()

    exceeded = []
    for name, (slack, fraction) in BOUNDS.items():
        before, after = getattr(start, name), getattr(end, name)
        if after > before + slack + fraction * before:
            exceeded.append(f"{name}: {before} -> {after}")
    return {
        "connections": connections,
        "seconds": seconds,
        "chats": chats,
        "churn_workers": workers,
        "churned": counts["churned"],
        "churned_abruptly": counts["abrupt"],
        "turns_streamed": counts["turns"],
        "deliveries_to_current_clients": deliveries,
        "start": asdict(start),
        "end": asdict(end),
        "bounds": {k: {"slack": s, "fraction": f} for k, (s, f) in BOUNDS.items()},
        "exceeded": exceeded,
    }


def run(connections: int, seconds: float, chats: int = 10, workers: int = 20) -> dict[str, Any]:
    with host_process(persist=True) as (url, pid):
        return asyncio.run(soak(url, pid, connections, seconds, min(chats, connections), workers))


def format_report(result: dict[str, Any]) -> str:
    start, end = result["start"], result["end"]
    lines = [
        f"soak: {result['connections']} connections, {result['seconds']:.0f}s,"
        f" {result['churned']} churned ({result['churned_abruptly']} abruptly),"
        f" {result['turns_streamed']} turns streamed into {result['chats']} chats",
        f"{'':12}{'start':>12}{'end':>12}",
    ]
    for key in ("rss_kb", "fds", "tasks", "connections"):
        lines.append(f"{key:12}{start[key]:>12}{end[key]:>12}")
    lines.append("bounds held" if not result["exceeded"] else f"EXCEEDED: {result['exceeded']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100 connections for 10 s")
    parser.add_argument("--connections", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    connections = args.connections or (100 if args.quick else 1_000)
    seconds = args.seconds or (10.0 if args.quick else 120.0)
    result = run(connections, seconds)
    print(format_report(result))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
    return 1 if result["exceeded"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Sharded mode's spread: capacity of 1 node on 1 core vs 2 nodes on 2 cores, and failover.

``python -m bench.scaleout [--quick] [--ns 20,40,80] [--node-cpu CORES] [--ramp-s S]
[--out PATH]`` (issue 32 item 6; docs/scale-out.md "Measured: the spread").

Real ``ahp-server serve`` processes with ``cluster.mode = "sharded"`` (placement
"local": a chat lives on the node its client reached) on the machine's PostgreSQL
(``AHP_BENCH_POSTGRES``) and NATS (``AHP_BENCH_NATS``), each node pinned to one
core with ``taskset`` and, with ``--node-cpu``, held to that much of it by a
cgroup quota (``bench/cgroup.py``): where the cores are too few to give each node
one of its own and leave the load generator, PostgreSQL and NATS theirs, the
spread is measured at an equal budget per node instead.

* **capacity** — the capacity benchmark's load (``bench/capacity.py``): N chats
  each streaming ``--words`` words at one per ``--ms`` (40 tokens/s by default),
  open loop, their clients spread round-robin over the nodes, their turns
  started over ``--ramp-s`` seconds (1 by default; 0: all at the same instant,
  as ``bench.capacity`` does, which measures a burst of N turn starts and hides
  it: the lateness is counted from each stream's word 0). The knee of a
  series is the largest N whose p99 lateness is ≤ ``--bound-ms`` with every word
  delivered once, in order; the figure is the ratio of the 2-node knee to the
  1-node knee. Series interleave at each N, so drifts of a shared machine hit
  both alike.
* **failover** — 2 nodes, ``--failover-chats`` chats on each, streaming; node 1
  is killed with SIGKILL a third into the stream. Reported: seconds until
  node 0 owns every session of node 1 (PostgreSQL's owner rows at epoch 2),
  until a client reconnecting to node 0 sees one of them with its interrupted
  turn ended; and node 0's own streams — every word once, in order — with
  their p99 lateness across the kill.

The load generator, PostgreSQL and NATS share the machine with the nodes
(``taskset`` pins only the nodes): on a small machine they are part of what is
measured, and the report says how busy each was. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg

from bench import cgroup
from bench.capacity import Variant, _ints, _lateness, _quantile, _worker, knee
from bench.cluster import ROOT_DIR, NodeProcess, _drop, _schema, cluster
from bench.persistence import machine_info
from bench.suite import cpu_seconds, progress

__all__ = ["Config", "format_report", "main", "run"]

RESULTS = ROOT_DIR / "bench" / "results" / "scaleout.json"


class Config:
    def __init__(
        self,
        *,
        ns: Sequence[int] = (40, 80, 160, 240, 320, 400, 480, 560, 640),
        words: int = 200,
        ms: float = 25.0,
        bound_ms: float = 100.0,
        workers: int = 2,
        failover_chats: int = 10,
        cores: tuple[int, int] = (0, 1),
        node_cpu: float | None = None,
        commit_window_ms: float | None = None,
        ramp_s: float = 1.0,
    ) -> None:
        self.ns = tuple(ns)
        self.words = words
        self.ms = ms
        self.bound_ms = bound_ms
        self.workers = workers
        self.failover_chats = failover_chats
        self.cores = cores
        #: Each node's CPU budget in cores (a cgroup quota), or ``None``: a whole core.
        self.node_cpu = node_cpu
        #: The nodes' ``cluster.commit_window_ms``, or ``None``: the default.
        self.commit_window_ms = commit_window_ms
        #: Seconds over which the N turns start (0: all at once); each generator
        #: process spreads its own over the whole ramp.
        self.ramp_s = ramp_s

    def settings(self) -> str:
        """The TOML the nodes are started with beyond the benchmark's own."""
        if self.commit_window_ms is None:
            return ""
        return f"commit_window_ms = {self.commit_window_ms:g}\n"  # in [cluster]


QUICK = Config(ns=(4, 8), words=40, ms=25.0, workers=1, failover_chats=3, ramp_s=0.2)
_VARIANT = Variant("sharded", "postgres", 1)


# -- capacity ---------------------------------------------------------------------------------


def measure(nodes: list[NodeProcess], n: int, config: Config) -> dict[str, Any]:
    """N chats spread over ``nodes`` (each worker process on one node), one point."""
    context = multiprocessing.get_context("spawn")
    per_node = max(1, config.workers)
    timeout = config.words * config.ms / 1000 + 60
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    slots = [(node, w) for w in range(per_node) for node in nodes]
    processes = []
    for index, (node, _) in enumerate(slots):
        chats = range(index, n, len(slots))
        if not chats:
            continue
        processes.append(
            context.Process(
                target=_worker,
                args=(
                    "host",
                    node.url,
                    chats,
                    _VARIANT,
                    config.words,
                    config.ms,
                    ready,
                    go,
                    results,
                    timeout,
                    config.ramp_s,
                ),
                daemon=True,
            )
        )
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=300)
    cpu = {node.name: cpu_seconds(node.pid) for node in nodes}
    throttled = {node.name: node.budget.throttled_s() for node in nodes if node.budget}
    started = time.perf_counter()
    go.set()
    parts = [results.get(timeout=timeout + 120) for _ in processes]
    seconds = time.perf_counter() - started
    used = {node.name: (cpu_seconds(node.pid) - cpu[node.name]) / seconds for node in nodes}
    held = {
        node.name: (node.budget.throttled_s() - throttled[node.name]) / seconds
        for node in nodes
        if node.budget
    }
    for process in processes:
        process.join(30)
    errors = [p["error"] for p in parts if "error" in p]
    if errors:
        raise RuntimeError(f"{len(nodes)} node(s) at N={n}: {errors[0]}")
    late = sorted(x for p in parts for x in p["late"])
    anchored = sorted(x for p in parts for x in p["anchored"])
    subscriptions = sum(p["subscriptions"] for p in parts)
    return {
        "n": n,
        "words_expected": subscriptions * config.words,
        "words_received": sum(p["received"] for p in parts),
        "in_order": all(p["in_order"] for p in parts),
        "p50_ms": _quantile(late, 0.5),
        "p99_ms": _quantile(late, 0.99),
        #: From the earliest start the arrivals allow: a late word 0 counts (bench.capacity's
        #: ``p99*``). Printed beside; the knee is judged by ``p99_ms``, as in bench.capacity.
        "p99_anchored_ms": _quantile(anchored, 0.99),
        "node_cpu_cores": used,
        "node_throttled_share": held,
        "generator_cpu_cores": sum(p["cpu"] for p in parts) / seconds,
    }


def series_names(config: Config) -> tuple[str, str]:
    """The two series' names: each node on a core of its own, or on a budget."""
    if config.node_cpu is None:
        return "1 node, 1 core", "2 nodes, 2 cores"
    each = f"{config.node_cpu:g} core"
    return f"1 node, {each}", f"2 nodes, {each} each"


def capacity(config: Config, tmp: Path) -> dict[str, Any]:
    one_name, two_name = series_names(config)
    series = {one_name: 1, two_name: 2}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in series}
    stopped: set[str] = set()
    for n in config.ns:
        for name, count in series.items():
            if name in stopped:
                continue
            schema, store = asyncio.run(_schema())
            try:
                cluster_name = f"so{uuid.uuid4().hex[:8]}"
                cores = list(config.cores[:count])
                with cluster(
                    count,
                    store,
                    tmp,
                    cluster_name,
                    mode="sharded",
                    cores=cores,
                    cpu=config.node_cpu,
                    settings=config.settings(),
                ) as nodes:
                    row = measure(nodes, n, config)
            finally:
                asyncio.run(_drop(schema))
            rows[name].append(row)
            progress(f"{name}: N={n} p99 {row['p99_ms']:.0f} ms")
            if row["p99_ms"] > 2 * config.bound_ms:
                stopped.add(name)
    knees = {name: knee(found, config.bound_ms) for name, found in rows.items()}
    one, two = knees[one_name], knees[two_name]
    return {"rows": rows, "knees": knees, "ratio": two / one if one else math.nan}


# -- failover ---------------------------------------------------------------------------------


async def _owners(store: str) -> dict[str, tuple[str, int]]:
    conn = await asyncpg.connect(store, timeout=5)
    try:
        rows = await conn.fetch("SELECT session, node, epoch FROM session_owner")
    finally:
        await conn.close()
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}


async def _failover(nodes: list[NodeProcess], store: str, config: Config) -> dict[str, Any]:
    from ahp_server.client import AhpClient
    from ahp_server.protocol.types import ChatState

    clients: list[tuple[int, AhpClient, str]] = []
    try:
        for k, node in enumerate(nodes):
            for _ in range(config.failover_chats):
                client = await AhpClient.connect(node.url, request_timeout=60)
                clients.append((k, client, await client.open_chat("echo", timeout=60)))
        owned = await _owners(store)
        victims = {
            s for s, (node, _) in owned.items() if node == nodes[1].name and s != "ahp-root://"
        }
        text = " ".join(f"k{i}z" for i in range(config.words))
        arrivals: dict[str, list[tuple[int, float]]] = {}
        for _, client, chat in clients:
            found: list[tuple[int, float]] = []
            arrivals[chat] = found

            def note(
                envelope: Any, chat: str = chat, found: list[tuple[int, float]] = found
            ) -> None:
                action = envelope.action  # a delta, or the response part word 0 opens
                content = getattr(action, "content", None) or getattr(
                    getattr(action, "part", None), "content", None
                )
                if envelope.channel == chat and isinstance(content, str):
                    now = time.perf_counter()
                    words = (w[1:-1] for w in content.split())
                    found.extend((int(w), now) for w in words if w.isdigit())

            client.on_envelope(note)
            await client.send_message(chat, f"/slow {config.ms:g} {text}", timeout=60)
        await asyncio.sleep(config.words * config.ms / 1000 / 3)
        killed = time.perf_counter()
        nodes[1].process.send_signal(signal.SIGKILL)
        taken = math.nan
        while time.perf_counter() - killed < 60:
            owned = await _owners(store)
            if victims and all(owned.get(s, ("", 0))[0] == nodes[0].name for s in victims):
                taken = time.perf_counter() - killed
                break
            await asyncio.sleep(0.05)
        moved = next(chat for k, _, chat in clients if k == 1)
        served = math.nan
        async with AhpClient.connect(nodes[0].url, request_timeout=60) as again:
            while time.perf_counter() - killed < 90:
                with contextlib.suppress(Exception):
                    await again.subscribe(moved, timeout=10)
                    state = again.view(moved, ChatState)
                    if [t.state for t in state.turns] == ["error"]:
                        served = time.perf_counter() - killed
                        break
                await asyncio.sleep(0.05)
        survivors = [(client, chat) for k, client, chat in clients if k == 0]
        for client, chat in survivors:

            def ended(c: AhpClient, chat: str = chat) -> bool:
                return len(c.view(chat, ChatState).turns) == 1

            await client.wait_for(ended, timeout=120)
        late: list[float] = []
        whole = True
        for _, chat in survivors:
            one = _lateness(arrivals[chat], config.words, config.ms)
            late += one["late"]
            whole = whole and one["in_order"]
        late.sort()
        return {
            "sessions_moved": len(victims),
            "taken_over_s": taken,
            "served_again_s": served,
            "survivors_whole": whole,
            "survivors_p99_ms": _quantile(late, 0.99),
        }
    finally:
        for _, client, _ in clients:
            with contextlib.suppress(Exception):
                await client.close()


def failover(config: Config, tmp: Path) -> dict[str, Any]:
    schema, store = asyncio.run(_schema())
    try:
        name = f"sf{uuid.uuid4().hex[:8]}"
        with cluster(
            2,
            store,
            tmp,
            name,
            mode="sharded",
            cores=list(config.cores),
            cpu=config.node_cpu,
            settings=config.settings(),
        ) as nodes:
            return asyncio.run(_failover(nodes, store, config))
    finally:
        asyncio.run(_drop(schema))


# -- the run ----------------------------------------------------------------------------------


def run(config: Config, out: Path | None = None, *, with_failover: bool = True) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ahp-scaleout-") as tmp:
        results = {
            "machine": machine_info(),
            "config": vars(config),
            "capacity": capacity(config, Path(tmp)),
        }
        if with_failover:
            results["failover"] = failover(config, Path(tmp))
    target = out or RESULTS
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return results


def whole(row: dict[str, Any]) -> bool:
    """Every word of every chat came, once, in order."""
    return bool(row["words_received"] == row["words_expected"] and row["in_order"])


def format_report(results: dict[str, Any]) -> str:
    cap = results["capacity"]
    lines = [
        "N     | series                   | p50 ms | p99 ms | p99* ms | words | node CPU "
        "(throttled) | load generator"
    ]
    for name, rows in cap["rows"].items():
        for r in rows:
            held = r.get("node_throttled_share", {})
            cpu = " ".join(
                f"{v:.2f}" + (f" ({held[k]:.2f})" if k in held else "")
                for k, v in r["node_cpu_cores"].items()
            )
            lines.append(
                f"{r['n']:<5} | {name:<24} | {r['p50_ms']:6.0f} | {r['p99_ms']:6.0f} | "
                f"{r.get('p99_anchored_ms', math.nan):7.0f} | "
                f"{'ok' if whole(r) else 'LOST'}"
                f" | {cpu} | "
                f"{r['generator_cpu_cores']:.2f}"
            )
    knees = cap["knees"]
    lines.append(
        f"knees: {knees}; ratio 2 nodes / 1 node = {cap['ratio']:.2f}"
        if not math.isnan(cap["ratio"])
        else f"knees: {knees}; ratio: no 1-node knee"
    )
    f = results.get("failover")
    if f is None:
        return "\n".join(lines)
    lines.append(
        f"failover: {f['sessions_moved']} sessions owned by node 0 after "
        f"{f['taken_over_s']:.2f} s, served again after {f['served_again_s']:.2f} s; "
        f"survivors whole: {f['survivors_whole']}, p99 {f['survivors_p99_ms']:.0f} ms"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scaleout", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="N = 4, 8; 40 words")
    parser.add_argument("--ns", type=_ints, default=None)
    parser.add_argument("--words", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--node-cpu",
        type=float,
        default=None,
        metavar="CORES",
        help="hold each node to this much of one core (a cgroup CPU quota; needs root): "
        "the spread at an equal budget per node where the cores are too few",
    )
    parser.add_argument(
        "--commit-window-ms",
        type=float,
        default=None,
        help="the nodes' cluster.commit_window_ms (default: the server's default)",
    )
    parser.add_argument(
        "--ramp-s",
        type=float,
        default=None,
        help="start the N turns spread over this many seconds, as users' do (default 1; "
        "0: all at once, as bench.capacity does)",
    )
    parser.add_argument("--skip-failover", action="store_true", help="the capacity series only")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else Config()
    if args.ns is not None:
        config.ns = args.ns
    if args.words is not None:
        config.words = args.words
    if args.node_cpu is not None:
        if not cgroup.available():
            print("--node-cpu needs a writable cgroup cpu controller (root)", file=sys.stderr)
            return 2
        config.node_cpu = args.node_cpu
    if args.ramp_s is not None:
        config.ramp_s = args.ramp_s
    if args.commit_window_ms is not None:
        config.commit_window_ms = args.commit_window_ms
    if (os.cpu_count() or 1) < 2:
        print("bench.scaleout needs two cores", file=sys.stderr)
        return 2
    results = run(config, args.out, with_failover=not args.skip_failover)
    print(format_report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

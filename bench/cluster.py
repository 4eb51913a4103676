"""Cluster throughput, 1 node vs 3, and failover time (issue 17 item 4; docs/scale-out.md).

``python -m bench.cluster [--quick] [--out PATH]``

Starts real node processes (``python -m ahp_server serve`` with ``cluster.bus``
and a PostgreSQL store in a fresh schema) on loopback against the machine's
PostgreSQL (``AHP_BENCH_POSTGRES``, default ``postgres://postgres@127.0.0.1:5432/test``)
and NATS (``AHP_BENCH_NATS``, default ``nats://127.0.0.1:4222``), and runs the
same load against a cluster of one node and one of three, clients spread
round-robin over the nodes:

* **short turns** — ``sessions`` connections, each with its own session,
  asking one-word turns of the echo agent back to back: turns/s, and the CPU
  of every node per turn;
* **fan-out** — ``chats`` chats each streaming ``words`` deltas to
  ``watchers`` subscribers per chat (on every node): deliveries/s, and the
  CPU per delivery of the primary and of all nodes;
* **failover** (3 nodes) — kill -9 the primary: seconds until another node is
  primary (``primary ready`` in its log), and until a client that was
  connected to a surviving edge is served again by ``reconnect``.

Prints a table and writes JSON (``bench/results/cluster.json``). Figures, never
assertions: compare rows of the same run. The exit status is 0 unless a run fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import asyncpg

from bench.cgroup import CpuBudget
from bench.suite import Wire, cpu_seconds, gather_limited, progress, text_of

ROOT_DIR = Path(__file__).resolve().parent.parent
POSTGRES = os.environ.get("AHP_BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
NATS = os.environ.get("AHP_BENCH_NATS", "nats://127.0.0.1:4222")
RESULTS = ROOT_DIR / "bench" / "results" / "cluster.json"


@dataclass(frozen=True)
class Sizes:
    sessions: int
    turns: int
    chats: int
    watchers: int
    words: int


FULL = Sizes(sessions=48, turns=40, chats=12, watchers=6, words=3000)
QUICK = Sizes(sessions=6, turns=5, chats=3, watchers=3, words=60)


@dataclass
class NodeProcess:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    url: str
    budget: CpuBudget | None = None

    def events(self) -> list[dict[str, Any]]:
        found = []
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    found.append(json.loads(line))
        return found

    def has(self, event: str) -> bool:
        return any(e.get("event") == event for e in self.events())

    @property
    def pid(self) -> int:
        return self.process.pid


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _schema() -> tuple[str, str]:
    name = f"ahp_bench_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(POSTGRES, timeout=5)
    try:
        await conn.execute(f"CREATE SCHEMA {name}")
    finally:
        await conn.close()
    return name, f"{POSTGRES}?search_path={name}"


async def _drop(name: str) -> None:
    conn = await asyncpg.connect(POSTGRES, timeout=5)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    finally:
        await conn.close()


@contextlib.contextmanager
def cluster(
    n: int,
    store: str,
    tmp: Path,
    name: str,
    *,
    mode: str = "primary",
    cores: Sequence[int] | None = None,
    cpu: float | None = None,
    settings: str = "",
) -> Iterator[list[NodeProcess]]:
    """``n`` node processes of one new cluster; the first to start becomes the primary
    (``mode`` "sharded": every node owns the sessions its clients make). ``cores``: node
    ``i`` pinned to core ``cores[i]`` (``taskset``). ``cpu``: each node held to that
    much of one core by a cgroup quota (``bench/cgroup.py``). ``settings``: more TOML
    for every node's configuration file: keys of its last table, ``[cluster]``,
    then tables of its own."""
    config = tmp / "node.toml"
    config.write_text(
        "[server]\nping_interval = 0\n"
        "[limits]\nmax_connections = 10000\nmax_connections_per_ip = 10000\n"
        "max_subscriptions = 1000000\ndispatch_rate = 1000000.0\ndispatch_burst = 1000000\n"
        f'[cluster]\nlease_ttl = 3.0\nheartbeat = 0.5\nmode = "{mode}"\nplacement = "local"\n'
        + settings,
        encoding="utf-8",
    )
    nodes: list[NodeProcess] = []
    try:
        for i in range(n):
            port = _free_port()
            log = tmp / f"{name}-n{i}.log"
            env = {k: v for k, v in os.environ.items() if not k.startswith("AHP_SERVER_")}
            env |= {
                "AHP_SERVER_STORE": store,
                "AHP_SERVER_BUS": NATS,
                "AHP_SERVER_NODE_ID": f"n{i}",
                "AHP_SERVER_CLUSTER_NAME": name,
                "AHP_SERVER_CLUSTER_SECRET": "bench-cluster-secret-0123456789",
            }
            pin = [] if cores is None else ["taskset", "-c", str(cores[i % len(cores)])]
            budget = None if cpu is None else CpuBudget(f"ahp-bench-{name}-n{i}", cpu)
            with open(log, "wb") as out:
                process = subprocess.Popen(
                    [
                        *pin,
                        sys.executable,
                        "-m",
                        "ahp_server",
                        "serve",
                        "--config",
                        str(config),
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--log-format",
                        "json",
                        "--log-level",
                        "warning",
                    ],
                    cwd=ROOT_DIR,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=out,
                    env=env,
                )
            nodes.append(NodeProcess(f"n{i}", process, log, f"ws://127.0.0.1:{port}", budget))
            if budget is not None:
                budget.add(process.pid)
        _wait_ready(nodes)
        yield nodes
    finally:
        for node in nodes:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in nodes:
            try:
                node.process.wait(15)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
            if node.budget is not None:
                node.budget.close()


async def _drop_record(cluster: str) -> None:
    """Delete the cluster's primary record in JetStream: leave nothing behind."""
    import nats

    from ahp_server.transport.relay import Subjects, forget_primary

    nc = await nats.connect(NATS, connect_timeout=5)
    try:
        await forget_primary(nc, Subjects(cluster))
    finally:
        await nc.close()


def _ready(url: str) -> bool:
    import urllib.error
    import urllib.request

    http = url.replace("ws://", "http://") + "/readyz"
    try:
        with urllib.request.urlopen(http, timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _wait_ready(nodes: list[NodeProcess], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in nodes:
            if node.process.poll() is not None:
                raise RuntimeError(f"{node.name} exited:\n{node.log.read_text()}")
        if all(_ready(node.url) for node in nodes):
            return
        time.sleep(0.1)
    raise RuntimeError("the cluster never became ready")


async def _lease_holder(store: str) -> str | None:
    conn = await asyncpg.connect(store, timeout=5)
    try:
        row = await conn.fetchrow(
            "SELECT node FROM cluster_lease WHERE name = 'primary' AND expires_at > now()"
        )
    finally:
        await conn.close()
    return None if row is None else str(row[0])


# -- the loads --------------------------------------------------------------------------------


def _cpu(nodes: list[NodeProcess]) -> dict[str, float]:
    """CPU seconds so far of every node, and of the services (all their processes)."""
    used = {n.name: cpu_seconds(n.pid) for n in nodes if n.process.poll() is None}
    used["postgres"] = used["nats"] = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            if comm in ("postgres", "nats-server"):
                used["postgres" if comm == "postgres" else "nats"] += cpu_seconds(int(entry.name))
        except (OSError, ValueError):
            continue  # gone meanwhile
    return used


def _nodes_only(cpu: dict[str, float]) -> float:
    return sum(v for k, v in cpu.items() if k not in ("postgres", "nats"))


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def _busy(cpu: dict[str, float], client: float, seconds: float) -> dict[str, float]:
    """Each process's CPU use over the run, in cores (the load generator included:
    on a small machine it, not the cluster, may be the limit)."""
    busy = {name: used / seconds for name, used in cpu.items()}
    busy["client"] = client / seconds
    return busy


async def short_turns(nodes: list[NodeProcess], sizes: Sizes) -> dict[str, Any]:
    urls = [n.url for n in nodes]

    async def setup(i: int) -> tuple[Wire, str]:
        wire = await Wire.initialized(urls[i % len(urls)])
        return wire, await wire.open_chat()

    pairs = await gather_limited(sizes.sessions, setup)
    for wire, chat in pairs:
        await wire.ask(chat, "hello")

    async def asker(wire: Wire, chat: str) -> None:
        for _ in range(sizes.turns):
            await wire.ask(chat, "hi")

    before = _cpu(nodes)
    client_before = _own_cpu()
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(asker(w, c) for w, c in pairs)), 900)
    seconds = time.perf_counter() - started
    after = _cpu(nodes)
    client_cpu = _own_cpu() - client_before
    await asyncio.gather(*(w.close() for w, _ in pairs))
    total = sizes.sessions * sizes.turns
    cpu = {name: after[name] - before[name] for name in after}
    return {
        "busy_by_process": _busy(cpu, client_cpu, seconds),
        "turns": total,
        "seconds": seconds,
        "turns_per_s": total / seconds,
        "cpu_us_per_turn_all_nodes": _nodes_only(cpu) / total * 1e6,
        "cpu_us_per_turn_by_node": {k: v / total * 1e6 for k, v in cpu.items()},
    }


async def fan_out(nodes: list[NodeProcess], sizes: Sizes, primary: str) -> dict[str, Any]:
    urls = [n.url for n in nodes]
    owners = [await Wire.initialized(urls[i % len(urls)]) for i in range(sizes.chats)]
    chats = [await w.open_chat() for w in owners]
    watchers: list[Wire] = []

    async def watcher(i: int) -> Wire:
        wire = await Wire.initialized(urls[i % len(urls)])
        await wire.request("subscribe", {"channel": chats[i % len(chats)]})
        return wire

    watchers = await gather_limited(sizes.chats * sizes.watchers, watcher)
    everyone = owners + watchers
    for wire in everyone:
        wire.deliveries = 0
        wire.times = []
    text = text_of(sizes.words)
    ends = [owner.turn_end(chat) for owner, chat in zip(owners, chats, strict=True)]
    before = _cpu(nodes)
    client_before = _own_cpu()
    started = time.perf_counter()
    await asyncio.gather(
        *(
            owner.start_turn(chat, f"/slow 0 {text}")
            for owner, chat in zip(owners, chats, strict=True)
        )
    )
    await asyncio.wait_for(asyncio.gather(*ends), 900)
    # Let the watchers catch up with the owners' turn ends.
    expected = sizes.chats * (1 + sizes.watchers)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        per = [w.deliveries for w in everyone]
        await asyncio.sleep(0.2)
        if per == [w.deliveries for w in everyone]:
            break
    # Until the last delivery anywhere (not the settling wait above).
    seconds = max(w.times[-1] for w in everyone if w.times) - started
    after = _cpu(nodes)
    client_cpu = _own_cpu() - client_before
    deliveries = sum(w.deliveries for w in everyone)
    await asyncio.gather(*(w.close() for w in everyone))
    cpu = {name: after[name] - before[name] for name in after}
    return {
        "busy_by_process": _busy(cpu, client_cpu, time.perf_counter() - started),
        "connections": expected,
        "deliveries": deliveries,
        "seconds": seconds,
        "deliveries_per_s": deliveries / seconds,
        "cpu_us_per_delivery_primary": cpu[primary] / max(deliveries, 1) * 1e6,
        "cpu_us_per_delivery_all_nodes": _nodes_only(cpu) / max(deliveries, 1) * 1e6,
    }


async def primary_of(nodes: list[NodeProcess], store: str) -> NodeProcess:
    """The node holding the lease (the nodes log at warning: ask the lease table)."""
    holder = await _lease_holder(store)
    return next(n for n in nodes if n.name == holder)


async def failover(nodes: list[NodeProcess], store: str) -> dict[str, Any]:
    primary = await primary_of(nodes, store)
    edges = [n for n in nodes if n is not primary]
    wire = await Wire.initialized(edges[0].url)
    chat = await wire.open_chat()
    await wire.ask(chat, "before")
    await wire.close()
    killed = time.perf_counter()
    primary.process.kill()
    primary.process.wait()
    new: str | None = None
    while time.perf_counter() - killed < 120:
        holder = await _lease_holder(store)
        if holder is not None and holder != primary.name:
            new = holder
            break
        await asyncio.sleep(0.05)
    leased = time.perf_counter() - killed
    served = None
    while time.perf_counter() - killed < 120:
        try:
            again = await Wire.initialized(edges[-1].url)
        except Exception:  # noqa: BLE001 - 503 or refused while the new primary recovers
            await asyncio.sleep(0.05)
            continue
        try:
            await again.request("subscribe", {"channel": chat})
            await again.ask(chat, "after")
            served = time.perf_counter() - killed
            break
        except Exception:  # noqa: BLE001 - relayed to a primary that just went away
            await asyncio.sleep(0.05)
        finally:
            await again.close()
    return {
        "lease_ttl_s": 3.0,
        "new_primary": new,
        "lease_taken_after_s": leased,
        "client_served_after_s": served,
    }


# -- the run ----------------------------------------------------------------------------------


async def run_async(sizes: Sizes) -> dict[str, Any]:
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": (
            f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}"
        ),
        "sizes": asdict(sizes),
    }
    for count in (1, 3):
        name, store = await _schema()
        cluster_name = f"b{uuid.uuid4().hex[:10]}"
        try:
            with (
                tempfile.TemporaryDirectory(prefix="ahp-cluster-") as tmp,
                cluster(count, store, Path(tmp), cluster_name) as nodes,
            ):
                primary = await primary_of(nodes, store)
                progress(f"{count} node(s): short turns")
                turns = await short_turns(nodes, sizes)
                progress(f"{count} node(s): fan-out")
                fan = await fan_out(nodes, sizes, primary.name)
                entry: dict[str, Any] = {"short_turns": turns, "fan_out": fan}
                if count > 1:
                    progress(f"{count} nodes: failover")
                    entry["failover"] = await failover(nodes, store)
                results[f"nodes_{count}"] = entry
        finally:
            await _drop(name)
            await _drop_record(cluster_name)
    return results


def _busy_row(results: dict[str, Any], scenario: str) -> str:
    """Cores each process kept busy in ``scenario``, with 1 node and with 3."""
    return "; ".join(
        f"{n} node(s): "
        + ", ".join(
            f"{k} {v:.2f}" for k, v in results[f"nodes_{n}"][scenario]["busy_by_process"].items()
        )
        for n in (1, 3)
    )


def report(results: dict[str, Any]) -> str:
    one, three = results["nodes_1"], results["nodes_3"]
    rows = [
        f"cluster benchmark — {results['date']} — {results['machine']}",
        f"sizes: {results['sizes']}",
        "",
        f"{'':34}{'1 node':>14}{'3 nodes':>14}{'3 / 1':>9}",
    ]

    def row(label: str, a: float, b: float, fmt: str = "{:,.0f}") -> None:
        ratio = b / a if a else float("nan")
        rows.append(f"{label:34}{fmt.format(a):>14}{fmt.format(b):>14}{ratio:>8.2f}x")

    row("short turns/s", one["short_turns"]["turns_per_s"], three["short_turns"]["turns_per_s"])
    row(
        "  CPU µs/turn, all nodes",
        one["short_turns"]["cpu_us_per_turn_all_nodes"],
        three["short_turns"]["cpu_us_per_turn_all_nodes"],
    )
    row(
        "fan-out deliveries/s",
        one["fan_out"]["deliveries_per_s"],
        three["fan_out"]["deliveries_per_s"],
    )
    row(
        "  CPU µs/delivery, primary",
        one["fan_out"]["cpu_us_per_delivery_primary"],
        three["fan_out"]["cpu_us_per_delivery_primary"],
        "{:,.1f}",
    )
    row(
        "  CPU µs/delivery, all nodes",
        one["fan_out"]["cpu_us_per_delivery_all_nodes"],
        three["fan_out"]["cpu_us_per_delivery_all_nodes"],
        "{:,.1f}",
    )
    fail = three.get("failover", {})
    rows += [
        "",
        f"failover (3 nodes, lease_ttl {fail.get('lease_ttl_s')} s): lease taken after "
        f"{fail.get('lease_taken_after_s', float('nan')):.2f} s, a client served again after "
        f"{(fail.get('client_served_after_s') or float('nan')):.2f} s",
        "busy (cores) in short turns: " + _busy_row(results, "short_turns"),
        "busy (cores) in fan-out: " + _busy_row(results, "fan_out"),
        "per-node CPU µs/turn (3 nodes): "
        + ", ".join(
            f"{k} {v:,.0f}" for k, v in three["short_turns"]["cpu_us_per_turn_by_node"].items()
        ),
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    args = parser.parse_args(argv)
    results = asyncio.run(run_async(QUICK if args.quick else FULL))
    print(report(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

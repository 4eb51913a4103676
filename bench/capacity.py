"""Capacity: how many model-paced chats one host streams on time, beside the floor (issue 31).

``python -m bench.capacity`` steps N (chats streaming at once) over a list.
At each N, for each series, a fresh server starts and N chats each stream
``--words`` words at one word per ``--ms`` (open loop: word k is due at
start + k × ms and sent at once when behind). On the host the echo agent
paces them (``/slow <ms> <words>``); on the floor (``bench/floor.py``'s
``paced`` op) a bare ``websockets`` server sends host-shaped frames at the
same pace. Series run interleaved: at each N the floor and every host
variant run one after another, so drifts of a shared machine hit them alike.

The clients run in ``--workers`` processes of their own (``multiprocessing``);
each word is a distinct token (``k<index>z``) so a client knows which words a
frame carries, coalesced or not. Lateness of word k on a subscription =
arrival − (arrival of word 0 + k × ms). Per N: p50/p99 lateness, the
server's CPU (``/proc/<pid>/stat``), its main thread's run-queue wait
(``/proc/<pid>/schedstat``), RSS, deltas/s, the host's event-loop lag
(``ahp_event_loop_lag_seconds`` from ``/metrics``) and the loop's own share of
it (``ahp_event_loop_stall_seconds``: less its thread's waits for a CPU), and
the generator's CPU.
The knee of a series is the largest N whose p99 lateness is ≤ ``--bound`` ms;
a series stops once its p99 passes twice the bound. docs/performance.md,
"Capacity", has the full run's command and what each column means.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import re
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

from bench.persistence import machine_info
from bench.suite import (
    FLOOR_PIDS,
    Wire,
    cpu_seconds,
    floor_process,
    host_process,
    proc_rss_kb,
    progress,
)

__all__ = ["FULL_NS", "VARIANTS", "Config", "Variant", "format_report", "main", "run"]

WORD = re.compile(rb"k(\d+)z")
#: A host-shaped chat/delta frame (0.7 projection) for the floor; ``@K@`` is the word's index.
FLOOR_FRAME = (
    '{"jsonrpc":"2.0","method":"action","params":{"channel":'
    '"ahp-chat:/6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f","serverSeq":1234,"action":'
    '{"type":"chat/delta","turnId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",'
    '"content":"k@K@z "},"origin":null}}'
)
FLOOR_END = (
    '{"jsonrpc":"2.0","method":"action","params":{"channel":'
    '"ahp-chat:/6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f","serverSeq":1235,"action":'
    '{"type":"chat/turnComplete","turnId":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"},'
    '"origin":null}}'
)
POSTGRES = os.environ.get("AHP_BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
#: Steps of 50 up to 500, where the host's knees and the three-subscriber floor's
#: lie: a knee ratio is read to that step (with steps of 100, 200 against 300
#: could only read 0.67, 250 against 300 not at all).
FULL_NS = (50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 600, 800, 1000)


@dataclasses.dataclass(frozen=True, slots=True)
class Variant:
    """One series: a store ("floor" for the bare server), subscribers per chat, coalescing."""

    name: str
    store: str
    subscribers: int = 1
    coalesce_ms: float = 0.0

    @property
    def floor(self) -> str:
        return f"floor-{self.subscribers}"


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("floor-1", "floor", 1),
        Variant("floor-3", "floor", 3),
        Variant("memory-1", "memory", 1),
        Variant("sqlite-1", "sqlite", 1),
        Variant("postgres-1", "postgres", 1),
        Variant("memory-3", "memory", 3),
        Variant("sqlite-3", "sqlite", 3),
        Variant("postgres-3", "postgres", 3),
        Variant("memory-1-c50", "memory", 1, 50.0),
        Variant("sqlite-1-c50", "sqlite", 1, 50.0),
        Variant("postgres-1-c50", "postgres", 1, 50.0),
        Variant("sqlite-3-c50", "sqlite", 3, 50.0),
    )
}
DEFAULT_VARIANTS = (
    "memory-1",
    "sqlite-1",
    "postgres-1",
    "sqlite-1-c50",
    "memory-3",
    "sqlite-3",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    ns: tuple[int, ...] = FULL_NS
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    words: int = 400
    ms: float = 25.0
    bound_ms: float = 100.0
    workers: int = 4
    #: Seconds over which the N turns start (0: in one instant; docs/performance.md).
    ramp_s: float = 0.0
    #: Rounds at each N, every series once a round (interleaved): a series' row is its
    #: median round by p99 (``rounds`` keeps them all), so one noisy minute on a shared
    #: machine moves a knee less.
    repeat: int = 1


SMOKE = Config(ns=(1, 2), variants=("memory-1",), words=12, ms=10.0, workers=1)


# -- the load generator (runs in worker processes) ---------------------------------------------


class Receiver(Wire):
    """A :class:`Wire` that also notes, per delivery, the index of every word it carries."""

    def __init__(self, ws: Any) -> None:
        self.arrivals: list[tuple[int, float]] = []
        self.expected = 0
        self.done = asyncio.Event()
        super().__init__(ws)

    def delivered(self, frame: bytes) -> None:
        now = time.perf_counter()
        self.arrivals.extend((int(m[1]), now) for m in WORD.finditer(frame))
        if self.expected and len(self.arrivals) >= self.expected:
            self.done.set()


def _lateness(arrivals: list[tuple[int, float]], words: int, ms: float) -> dict[str, Any]:
    """One subscription's lateness (ms) per word, and whether every word came once, in order."""
    first: dict[int, float] = {}
    indices = [k for k, _ in arrivals]
    for k, at in arrivals:
        first.setdefault(k, at)
    in_order = indices == sorted(indices) and len(indices) == len(set(indices))
    late: list[float] = []
    anchored: list[float] = []
    if 0 in first:
        t0 = first[0]
        late = [(at - (t0 + k * ms / 1000)) * 1000 for k, at in first.items()]
        # against the earliest start the arrivals allow: word 0's own delay counts too
        early = min(late)
        anchored = [x - early for x in late]
    received = len(first)
    return {
        "late": late,
        "anchored": anchored,
        "received": received,
        "in_order": in_order and received == words,
    }


async def _generate(
    kind: str,
    url: str,
    chats: Sequence[int],
    variant: Variant,
    words: int,
    ms: float,
    ready: Any,
    go: EventType,
    wait_s: float,
    ramp_s: float = 0.0,
) -> dict[str, Any]:
    limit = asyncio.Semaphore(16)
    streams: list[tuple[Receiver, str, list[Receiver]]] = []  # (owner, chat or group, all)

    async def setup(index: int) -> None:
        async with limit:
            group = f"{os.getpid()}-{index}"
            if kind == "floor":
                receivers = [await Receiver.connect(url) for _ in range(variant.subscribers)]
                for receiver in receivers:
                    joined = receiver.watch(lambda m: m.get("joined") == group)
                    await receiver.ws.send("!" + json.dumps({"op": "join", "group": group}))
                    await asyncio.wait_for(joined, 60)
                streams.append((receivers[0], group, receivers))  # type: ignore[arg-type]
                return
            owner = await Receiver.initialized(url)
            chat = await owner.open_chat()
            receivers = [owner]
            for _ in range(variant.subscribers - 1):
                other = await Receiver.initialized(url)
                await other.request("subscribe", {"channel": chat})
                receivers.append(other)
            streams.append((owner, chat, receivers))  # type: ignore[arg-type]

    await asyncio.gather(*(setup(i) for i in chats))
    for _, _, receivers in streams:
        for receiver in receivers:
            receiver.expected = words
    ready.put(os.getpid())
    await asyncio.get_running_loop().run_in_executor(None, go.wait)
    cpu = time.process_time()
    started = time.perf_counter()
    text = f"/slow {ms:g} " + " ".join(f"k{k}z" for k in range(words))
    for k, (owner, target, _) in enumerate(streams):
        if ramp_s > 0:  # open loop: stream k starts at its own instant of the ramp
            due = started + ramp_s * k / len(streams)
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        if kind == "floor":
            command = {"op": "paced", "group": target, "n": words, "ms": ms}
            command |= {"frame": FLOOR_FRAME, "end": FLOOR_END}
            await owner.ws.send("!" + json.dumps(command))
        else:
            await owner.start_turn(target, text)
    everyone = [r for _, _, receivers in streams for r in receivers]
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(r.done.wait() for r in everyone)), wait_s)
    seconds = time.perf_counter() - started
    late: list[float] = []
    anchored: list[float] = []
    received = 0
    in_order = True
    for receiver in everyone:
        one = _lateness(receiver.arrivals, words, ms)
        late += one["late"]
        anchored += one["anchored"]
        received += one["received"]
        in_order = in_order and one["in_order"]
    result = {
        "late": late,
        "anchored": anchored,
        "subscriptions": len(everyone),
        "received": received,
        "in_order": in_order,
        "delta_frames": sum(r.deliveries for r in everyone),
        "seconds": seconds,
        "cpu": time.process_time() - cpu,
    }
    await asyncio.gather(*(r.close() for r in everyone), return_exceptions=True)
    return result


def _worker(
    kind: str,
    url: str,
    chats: Sequence[int],
    variant: Variant,
    words: int,
    ms: float,
    ready: Any,
    go: EventType,
    results: Any,
    timeout: float,
    ramp_s: float = 0.0,
) -> None:
    try:
        result = asyncio.run(
            _generate(kind, url, chats, variant, words, ms, ready, go, timeout, ramp_s)
        )
    except BaseException as failure:
        ready.put(os.getpid())
        results.put({"error": f"{type(failure).__name__}: {failure}"})
        raise
    results.put(result)


# -- one point: a fresh server, N chats --------------------------------------------------------


def _schedstat_wait(pid: int) -> float:
    """Seconds the server's main thread has waited on a run queue (``/proc/<pid>/schedstat``)."""
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
        return int(stat.read().split()[1]) / 1e9


def _loop_lag(url: str) -> dict[str, Any]:
    """The host's event-loop lag histogram (cumulative counts by ``le``) and its max (ms),
    and the same for each generation's garbage-collection pauses (``gc``)."""
    http = url.replace("ws://", "http://", 1).rstrip("/") + "/metrics"
    with urllib.request.urlopen(http, timeout=10) as response:
        text = response.read().decode()

    def histogram(name: str, labels: str, maximum: str) -> dict[str, Any]:
        buckets = {
            le: int(float(count))
            for le, count in re.findall(
                rf'^{name}_bucket\{{{labels}le="([^"]+)"\}} (\S+)$', text, flags=re.M
            )
        }
        found = re.search(rf"^{maximum} (\S+)$", text, flags=re.M)
        return {"buckets": buckets, "max_ever": float(found.group(1)) * 1000 if found else math.nan}

    lag = histogram("ahp_event_loop_lag_seconds", "", "ahp_event_loop_lag_max_seconds")
    # The loop's own share of it (less its thread's waits for a CPU), where the kernel
    # tells those waits (Linux): an empty histogram elsewhere.
    lag["own"] = histogram("ahp_event_loop_stall_seconds", "", "ahp_event_loop_stall_max_seconds")
    lag["gc"] = [
        histogram(
            "ahp_gc_pause_seconds",
            f'generation="{g}",',
            re.escape(f'ahp_gc_pause_max_seconds{{generation="{g}"}}'),
        )
        for g in range(3)
    ]
    return lag


def _lag_between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """p50, p99 and max of the ticks between two scrapes (ms), each the upper bound of
    its histogram bucket (past the last bound: the lifetime max)."""
    bounds = list(after["buckets"])
    cumulative = [after["buckets"][b] - before["buckets"].get(b, 0) for b in bounds]
    total = cumulative[-1] if cumulative else 0

    def ms(bound: str) -> float:
        return after["max_ever"] if bound == "+Inf" else float(bound) * 1000

    def at(fraction: float) -> float:
        if not total:
            return math.nan
        return next(ms(b) for b, c in zip(bounds, cumulative, strict=True) if c >= fraction * total)

    return {"p50": at(0.5), "p99": at(0.99), "max": at(1.0), "count": total}


@contextlib.contextmanager
def _server(variant: Variant) -> Iterator[tuple[str, int]]:
    if variant.store == "floor":
        with floor_process() as url:
            yield url, FLOOR_PIDS[url]
        return
    if variant.store == "postgres":
        from bench.cluster import _drop, _schema

        name, store = asyncio.run(_schema())
        try:
            with host_process(True, variant.coalesce_ms, store=store) as (url, pid):
                yield url, pid
        finally:
            asyncio.run(_drop(name))
        return
    with host_process(variant.store == "sqlite", variant.coalesce_ms) as (url, pid):
        yield url, pid


def measure(variant: Variant, n: int, config: Config) -> dict[str, Any]:
    """One series at one N: a fresh server, N streams, every figure of the row."""
    context = multiprocessing.get_context("spawn")
    workers = max(1, min(config.workers, n))
    timeout = config.words * config.ms / 1000 + 60
    kind = "floor" if variant.store == "floor" else "host"
    with _server(variant) as (url, pid):
        ready, results, go = context.Queue(), context.Queue(), context.Event()
        processes = [
            context.Process(
                target=_worker,
                args=(
                    kind,
                    url,
                    range(w, n, workers),
                    variant,
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
            for w in range(workers)
        ]
        for process in processes:
            process.start()
        for _ in processes:
            ready.get(timeout=300)
        lag_before = _loop_lag(url) if kind == "host" else {}
        cpu, wait = cpu_seconds(pid), _schedstat_wait(pid)
        started = time.perf_counter()
        go.set()
        if kind == "host":
            # Once every turn has started (a burst: N turns begin in one loop
            # iteration or a few), the rest of the stream is the steady state.
            time.sleep(config.words * config.ms / 1000 / 5)
            lag_steady = _loop_lag(url)
            time.sleep(config.words * config.ms / 1000 * 3 / 5)
            lag_mid = _loop_lag(url)
        parts = [results.get(timeout=timeout + 120) for _ in processes]
        seconds = time.perf_counter() - started
        cpu, wait = cpu_seconds(pid) - cpu, _schedstat_wait(pid) - wait
        rss_kb = proc_rss_kb(pid)
        lag = _loop_lag(url) if kind == "host" else {}
        for process in processes:
            process.join(30)
    errors = [p["error"] for p in parts if "error" in p]
    if errors:
        raise RuntimeError(f"{variant.name} at N={n}: {errors[0]}")
    late = sorted(x for p in parts for x in p["late"])
    anchored = sorted(x for p in parts for x in p["anchored"])
    subscriptions = sum(p["subscriptions"] for p in parts)
    stream_seconds = max(p["seconds"] for p in parts)
    row: dict[str, Any] = {
        "n": n,
        "subscriptions": subscriptions,
        "words_expected": subscriptions * config.words,
        "words_received": sum(p["received"] for p in parts),
        "in_order": all(p["in_order"] for p in parts),
        "p50_ms": _quantile(late, 0.5),
        "p99_ms": _quantile(late, 0.99),
        "max_ms": late[-1] if late else math.nan,
        "p99_anchored_ms": _quantile(anchored, 0.99),
        "server_cpu_pct": cpu / seconds * 100,
        "runqueue_wait_ms_per_s": wait / seconds * 1000,
        "rss_mb": rss_kb / 1024,
        "deltas_per_s": sum(p["delta_frames"] for p in parts) / stream_seconds,
        "server_cpu_us_per_word": cpu / max(1, len(late)) * 1e6,
        "generator_cpu_pct": sum(p["cpu"] for p in parts) / seconds * 100,
        "generator_workers": workers,
        "seconds": seconds,
    }
    if kind == "host":
        row["loop_lag_ms"] = {
            **_lag_between(lag_before, lag),
            "max_during_setup": lag_before["max_ever"],
            # From a fifth of the stream on: without the burst of N turns starting.
            "steady_max": _lag_between(lag_steady, lag)["max"],
            # The same less the loop thread's waits for a CPU meanwhile: what held the
            # loop itself, not the machine's other work (the load generator's).
            "own_max": _lag_between(lag_before["own"], lag["own"])["max"],
            "own_steady_max": _lag_between(lag_steady["own"], lag["own"])["max"],
            # The stream's middle (a fifth to four fifths), and its last fifth (the
            # N turns ending): where a stall came from.
            "mid": _lag_between(lag_steady, lag_mid),
            "end": _lag_between(lag_mid, lag),
        }
        # Garbage collections between the scrapes, per generation: how many, and the
        # longest (a bucket's upper bound, as for the lag).
        row["gc_pause_ms"] = [
            _lag_between(b, a) for b, a in zip(lag_before["gc"], lag["gc"], strict=True)
        ]
    return row


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the run ----------------------------------------------------------------------------------


def median_round(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One N's row from its rounds: the round with the median p99 (the lower middle of an
    even count), its figures all from that one run; with more than one round, ``rounds``
    holds every round's row, and its words count as delivered only when every round's
    were (the lowest count; in order only if in order each time)."""
    if len(rounds) == 1:
        return rounds[0]
    ordered = sorted(rounds, key=lambda r: r["p99_ms"] if math.isfinite(r["p99_ms"]) else math.inf)
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["words_received"] = min(r["words_received"] for r in rounds)
    row["in_order"] = all(r["in_order"] for r in rounds)
    row["rounds"] = list(rounds)
    return row


def _rounds(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Every round a row stands for (itself, when it ran once)."""
    rounds: list[dict[str, Any]] = row.get("rounds", [row])
    return rounds


def knee(rows: Sequence[dict[str, Any]], bound_ms: float) -> int:
    """The largest N whose p99 lateness is within the bound and whose every word came (0: none)."""
    good = [
        r["n"]
        for r in rows
        if r["p99_ms"] <= bound_ms and r["words_received"] == r["words_expected"]
    ]
    return max(good, default=0)


def run(config: Config, out: Path | None = None) -> dict[str, Any]:
    """Every series over every N, interleaved; the knees and their ratios to the floor's."""
    names = list(config.variants)
    floors = sorted({VARIANTS[name].floor for name in names if VARIANTS[name].store != "floor"})
    series = [*floors, *(n for n in names if n not in floors)]
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in series}
    stopped: set[str] = set()
    for n in config.ns:
        running = [name for name in series if name not in stopped]
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in running}
        for number in range(config.repeat):
            for name in running:
                progress(f"capacity {name} N={n}" + (f" round {number + 1}" * (config.repeat > 1)))
                row = measure(VARIANTS[name], n, config)
                rounds[name].append(row)
                lag = row.get("loop_lag_ms", {}).get("max", math.nan)
                progress(
                    f"  p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
                    f"cpu {row['server_cpu_pct']:.0f}%, loop lag max {lag:.1f} ms, "
                    f"words {row['words_received']}/{row['words_expected']}"
                )
        for name in running:
            row = median_round(rounds[name])
            rows[name].append(row)
            if not row["p99_ms"] <= 2 * config.bound_ms:
                stopped.add(name)
    knees: dict[str, dict[str, Any]] = {}
    for name in series:
        variant = VARIANTS[name]
        own = knee(rows[name], config.bound_ms)
        entry: dict[str, Any] = {"knee": own}
        if variant.store != "floor":
            floor_knee = knee(rows[variant.floor], config.bound_ms)
            entry["floor"] = variant.floor
            entry["floor_knee"] = floor_knee
            entry["ratio"] = own / floor_knee if floor_knee else math.nan
            half = [r for r in rows[name] if r["n"] <= own / 2] or rows[name][:1]
            # Stalls: the worst of every round. The loop's own share (less its thread's
            # waits for a CPU) is NaN where the kernel does not tell those waits.
            every = [x["loop_lag_ms"] for r in rows[name] for x in _rounds(r)]
            at_half = [x["loop_lag_ms"] for r in half for x in _rounds(r)]
            entry["max_loop_stall_ms"] = max(lag["max"] for lag in every)
            entry["max_loop_stall_ms_at_half_knee"] = max(lag["max"] for lag in at_half)
            entry["max_steady_stall_ms_at_half_knee"] = max(lag["steady_max"] for lag in at_half)
            entry["max_own_stall_ms_at_half_knee"] = max(
                (lag["own_max"] for lag in at_half), key=_nan_low
            )
            entry["max_own_steady_stall_ms_at_half_knee"] = max(
                (lag["own_steady_max"] for lag in at_half), key=_nan_low
            )
            reference = f"memory-{variant.subscribers}"
            if variant.store != "memory" and reference in rows:
                memory_knee = knee(rows[reference], config.bound_ms)
                entry["memory_knee"] = memory_knee
                entry["memory_ratio"] = own / memory_knee if memory_knee else math.nan
        knees[name] = entry
    results = {
        "machine": machine_info(),
        "config": dataclasses.asdict(config),
        "series": rows,
        "knees": knees,
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


def _nan_low(value: float) -> float:
    """Sort key: NaN (no figure) below every figure."""
    return -math.inf if math.isnan(value) else value


def _f(value: float, digits: int = 1) -> str:
    return "-" if not math.isfinite(value) else f"{value:.{digits}f}"


def format_report(results: dict[str, Any]) -> str:
    config = results["config"]
    lines = [
        f"capacity: {config['words']} words at one per {config['ms']:g} ms per chat; "
        f"knee = largest N with p99 lateness <= {config['bound_ms']:g} ms",
        f"{'series':<16}{'N':>5}{'p50ms':>8}{'p99ms':>9}{'p99*ms':>9}{'cpu%':>7}{'rqms/s':>8}"
        f"{'rssMB':>8}{'deltas/s':>10}{'us/word':>9}{'lagmax':>8}{'ownmax':>8}{'gcmax':>7}"
        f"{'gen%':>7}{'words':>9}",
    ]
    for name, rows in results["series"].items():
        for r in rows:
            lag = r.get("loop_lag_ms", {}).get("max", math.nan)
            own = r.get("loop_lag_ms", {}).get("own_max", math.nan)
            gcs = [g["max"] for g in r.get("gc_pause_ms", []) if g["count"]]
            gc_max = max(gcs, default=math.nan)
            words = (
                "ok"
                if r["in_order"] and r["words_received"] == r["words_expected"]
                else f"{r['words_received']}/{r['words_expected']}"
            )
            each = "/".join(_f(x["p99_ms"], 0) for x in r.get("rounds", ()))
            lines.append(
                f"{name:<16}{r['n']:>5}{_f(r['p50_ms']):>8}{_f(r['p99_ms']):>9}"
                f"{_f(r.get('p99_anchored_ms', math.nan)):>9}"
                f"{_f(r['server_cpu_pct'], 0):>7}{_f(r['runqueue_wait_ms_per_s'], 0):>8}"
                f"{_f(r['rss_mb']):>8}{_f(r['deltas_per_s'], 0):>10}"
                f"{_f(r['server_cpu_us_per_word'], 0):>9}{_f(lag):>8}{_f(own):>8}{_f(gc_max):>7}"
                f"{_f(r['generator_cpu_pct'], 0):>7}{words:>9}"
                + (f"  p99 by round {each}" if each else "")
            )
    lines.append("")
    lines.append(
        f"{'series':<16}{'knee':>6}{'floor':>8}{'ratio':>8}{'stall ms':>10}{'@half':>8}"
        f"{'steady':>8}{'own@half':>10}{'steady':>8}{'/memory':>9}"
    )
    for name, entry in results["knees"].items():
        if "floor" not in entry:
            lines.append(f"{name:<16}{entry['knee']:>6}")
            continue
        lines.append(
            f"{name:<16}{entry['knee']:>6}{entry['floor_knee']:>8}{_f(entry['ratio'], 2):>8}"
            f"{_f(entry['max_loop_stall_ms']):>10}{_f(entry['max_loop_stall_ms_at_half_knee']):>8}"
            f"{_f(entry['max_steady_stall_ms_at_half_knee']):>8}"
            f"{_f(entry.get('max_own_stall_ms_at_half_knee', math.nan)):>10}"
            f"{_f(entry.get('max_own_steady_stall_ms_at_half_knee', math.nan)):>8}"
            f"{_f(entry.get('memory_ratio', math.nan), 2):>9}"
        )
    return "\n".join(lines)


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"at least 1, not {value}")
    return value


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="N = 1, 2; 12 words; memory only")
    parser.add_argument("--ns", type=_ints, default=FULL_NS, help="N to step over: 25,50,100")
    parser.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help=f"host series (their floors are added): any of {', '.join(VARIANTS)}",
    )
    parser.add_argument("--words", type=int, default=400)
    parser.add_argument("--ms", type=float, default=25.0)
    parser.add_argument("--bound-ms", type=float, default=100.0)
    parser.add_argument("--workers", type=int, default=4, help="load-generator processes")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    parser.add_argument(
        "--repeat",
        type=_at_least_one,
        default=1,
        help="rounds at each N, every series once a round; a row is its median round by p99",
    )
    parser.add_argument(
        "--ramp-s",
        type=float,
        default=0.0,
        help="start the N turns spread over this many seconds (default 0: in one instant, "
        "a burst of starts whose late first words p99 does not count; p99* does)",
    )
    args = parser.parse_args(argv)
    names = tuple(v for v in args.variants.split(",") if v)
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s): {', '.join(unknown)}")
    config = (
        SMOKE
        if args.smoke
        else Config(
            args.ns,
            names,
            args.words,
            args.ms,
            args.bound_ms,
            args.workers,
            args.ramp_s,
            args.repeat,
        )
    )
    results = run(config, out=args.out)
    print(format_report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The real host against a bare WebSocket floor: throughput, latency, reconnect and memory.

Run ``python -m bench [--quick] [--out PATH] [--coalesce-ms N]``. Every
scenario starts the real host as a subprocess (``python -m ahp_server serve``
on loopback, echo agent; persistence off: ``--data-dir :memory:``, on: a
fresh temporary data dir) and measures it from this process with raw
JSON-RPC over ``websockets`` clients. In the same run the same clients
measure the *floor*, ``bench/floor.py``: a bare ``websockets`` server with no
protocol logic that sends the same pre-encoded envelope bytes (captured from
the host) or echoes frames. The table shows host, floor, host/floor, the
target and whether it was met. Targets are printed, never asserted.
``bench/README.md`` explains every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

from ahp_server import config as ahp_config
from bench.persistence import machine_info, publish_results

__all__ = ["FULL", "QUICK", "Sizes", "format_report", "main", "run"]

ROOT_DIR = Path(__file__).resolve().parent.parent
#: The event loop the host and the floor run on (``server.event_loop``; the
#: floor's ``--loop``): ``AHP_BENCH_EVENT_LOOP``, "auto" by default as in the
#: daemon, so host and floor always share one.
EVENT_LOOP = os.environ.get("AHP_BENCH_EVENT_LOOP", "auto")
RESULTS = ROOT_DIR / "bench" / "results" / "suite.json"
ROOT = "ahp-root://"
VERSIONS = ["0.7.0"]
#: What each subscriber of a fan-out offers: every one 0.7 (the figure the
#: floor targets), every one 1.0 (the canonical frames, no projection), or
#: every other one (a 0.7 subscriber's view projected once per delivery).
MIXES: dict[str, tuple[list[str], ...]] = {
    "0.7": (["0.7.0"],),
    "1.0": (["1.0.0"],),
    "mixed": (["1.0.0"], ["0.7.0"]),
}
WORDS = [
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
]

DELTA = b'"type":"chat/delta"'
PART = b'"type":"chat/responsePart"'
RESPONSE = b'{"jsonrpc":"2.0","id":'


@dataclasses.dataclass(frozen=True, slots=True)
class Sizes:
    """How much work each scenario does (``--quick`` uses :data:`QUICK`)."""

    #: stream-1: words in the echoed message (the echo agent sends 3 words per delta).
    stream_words: int = 30_000
    stream_repeats: int = 2
    #: fanout: subscribed connections and words echoed.
    fanout_connections: int = 100
    fanout_words: int = 6_000
    #: many-chats: connections (one session + chat each) and words per chat.
    many_connections: int = 200
    many_words: int = 600
    #: dispatch-rtt: round trips (after 10% warm-up), and runs of host and floor
    #: (interleaved; the lowest p50 of each is reported, every run is kept).
    rtt_round_trips: int = 2_000
    rtt_repeats: int = 3
    #: reconnect: words streamed while the client is away (~words/3 envelopes),
    #: and the chat sizes (completed turns) measured for snapshot reconnects.
    replay_words: int = 2_970
    snapshot_turns: tuple[int, ...] = (1_000, 10_000)
    #: memory: idle initialized connections; loaded chats (one short turn each).
    idle_connections: int = 1_000
    idle_chats: int = 1_000
    chats_per_session: int = 100
    #: memory: loaded chats that each streamed a turn of this many words.
    turn_chats: int = 100
    turn_words: int = 400
    #: persistence modes for the scenarios beyond stream-1, fanout and dispatch-rtt.
    other_modes: tuple[str, ...] = ("off", "on")
    #: tokens: a token-style stream (one delta per loop iteration, echo's
    #: ``/slow 0``) in 1 chat and in N chats at once; words per chat.
    token_words: int = 6_000
    token_chats: tuple[int, ...] = (1, 50)
    #: short-turns: sessions doing short turns in parallel, turns each.
    short_sessions: int = 50
    short_turns: int = 40
    #: tokens and short-turns: runs of host and floor, interleaved; each side
    #: reports its best (this machine's speed drifts by tens of percent).
    cpu_repeats: int = 3
    #: start-up: starts of host and floor, interleaved; each side reports its median.
    startup_repeats: int = 5


FULL = Sizes()
QUICK = Sizes(
    stream_words=6_000,
    stream_repeats=1,
    fanout_words=1_500,
    many_words=150,
    rtt_round_trips=300,
    rtt_repeats=1,
    snapshot_turns=(1_000, 2_000),
    other_modes=("off",),
    token_words=1_500,
    token_chats=(1, 10),
    short_sessions=10,
    short_turns=10,
    cpu_repeats=1,
    startup_repeats=1,
)


# -- processes ---------------------------------------------------------------------------------


def coalescing_supported() -> bool:
    return "server.coalesce_ms" in ahp_config._KEYS


def proc_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def _wait_for_line(path: Path, process: subprocess.Popen[bytes], needle: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"{needle!r} never came: exit {process.returncode}\n{path.read_text()}"
            )
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if needle in line:
                return line
        time.sleep(0.05)
    raise RuntimeError(f"{needle!r} never came:\n{path.read_text()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def host_process(
    persist: bool,
    coalesce_ms: float | None = None,
    profile: Path | None = None,
    store: str | None = None,
) -> Iterator[tuple[str, int]]:
    """The real host (``python -m ahp_server serve``) on loopback; yields (url, pid).

    With ``profile``, the host runs under ``cProfile`` and writes its stats there
    when it stops (``bench/profile.py``). ``store``: a PostgreSQL URL to keep
    everything in (``storage.store``) instead of SQLite.
    """
    with tempfile.TemporaryDirectory(prefix="ahp-suite-") as tmp:
        lines = [
            "[server]",
            # keepalive pings would only add noise to idle-connection figures
            "ping_interval = 0",
            f"event_loop = {json.dumps(EVENT_LOOP)}",
        ]
        if coalesce_ms is not None and coalescing_supported():
            lines.append(f"coalesce_ms = {float(coalesce_ms)}")
        if store is not None:
            lines += ["[storage]", f"store = {json.dumps(store)}"]
        lines += [
            "[limits]",
            "max_connections = 10000",
            # every benchmark client is on loopback: one address
            "max_connections_per_ip = 10000",
            "max_subscriptions = 1000000",
            "max_chats_per_session = 100000",
            "dispatch_rate = 1000000.0",
            "dispatch_burst = 1000000",
        ]
        config = Path(tmp) / "host.toml"
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        data_dir = str(Path(tmp) / "data") if persist else ":memory:"
        log_path = Path(tmp) / "host.log"
        with open(log_path, "wb") as log:
            profiler = ["-m", "cProfile", "-o", str(profile)] if profile else []
            process = subprocess.Popen(
                [
                    sys.executable,
                    *profiler,
                    "-m",
                    "ahp_server",
                    "serve",
                    "--config",
                    str(config),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--log-format",
                    "json",
                    "--data-dir",
                    data_dir,
                ],
                cwd=ROOT_DIR,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env={k: v for k, v in os.environ.items() if not k.startswith("AHP_SERVER_")},
            )
        try:
            line = _wait_for_line(log_path, process, '"listening"')
            yield json.loads(line)["url"], process.pid
        finally:
            _stop(process)


#: The floor process of each floor URL (for its CPU time).
FLOOR_PIDS: dict[str, int] = {}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def floor_process() -> Iterator[str]:
    """``bench/floor.py`` as a subprocess; yields its URL."""
    with tempfile.TemporaryDirectory(prefix="ahp-floor-") as tmp:
        out = Path(tmp) / "floor.out"
        with open(out, "wb") as handle:
            process = subprocess.Popen(
                [sys.executable, "-m", "bench.floor", "--port", "0", "--loop", EVENT_LOOP],
                cwd=ROOT_DIR,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
        try:
            url = _wait_for_line(out, process, "listening").split()[-1]
            FLOOR_PIDS[url] = process.pid
            yield url
        finally:
            _stop(process)


# -- a raw JSON-RPC client ---------------------------------------------------------------------


def _dumps(message: Any) -> str:
    return json.dumps(message, separators=(",", ":"))


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


class Wire:
    """One WebSocket connection speaking raw JSON-RPC; counts deliveries without parsing them.

    A delivery is an ``action`` notification whose action is ``chat/delta`` or
    ``chat/responsePart`` (found by substring, so the same cheap check runs
    for host and floor frames). Other notifications are parsed only while a
    watcher waits.
    """

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.seqs = itertools.count(1)
        self.calls: dict[int, asyncio.Future[Any]] = {}
        self.watchers: list[tuple[Callable[[dict[str, Any]], bool], asyncio.Future[Any]]] = []
        self.frames = 0
        self.deliveries = 0
        self.times: list[float] | None = None
        self.sample_delta: bytes | None = None
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url: str) -> Wire:
        ws = await websockets.connect(
            url, max_size=None, compression=None, ping_interval=None, open_timeout=60
        )
        return cls(ws)

    @classmethod
    async def initialized(
        cls, url: str, client_id: str | None = None, versions: list[str] | None = None
    ) -> Wire:
        wire = await cls.connect(url)
        await wire.request(
            "initialize",
            {
                "channel": ROOT,
                "protocolVersions": VERSIONS if versions is None else versions,
                "clientId": client_id or str(uuid.uuid4()),
            },
        )
        return wire

    async def _read(self) -> None:
        ws = self.ws
        try:
            while True:
                frame = await ws.recv(decode=False)
                self.frames += 1
                if frame.startswith(RESPONSE):
                    message = json.loads(frame)
                    future = self.calls.pop(message["id"], None)
                    if future is not None and not future.done():
                        if "error" in message:
                            future.set_exception(RuntimeError(str(message["error"])))
                        else:
                            future.set_result((message.get("result"), len(frame)))
                    continue
                if DELTA in frame or PART in frame:
                    self.deliveries += 1
                    self.delivered(frame)
                    continue
                if self.watchers:
                    message = json.loads(frame)
                    for watcher in list(self.watchers):
                        predicate, future = watcher
                        if not future.done() and predicate(message):
                            future.set_result((message, frame))
                            self.watchers.remove(watcher)
        except websockets.ConnectionClosed as closed:
            error: BaseException = closed
        except Exception as failure:  # noqa: BLE001 - handed to every waiter
            error = failure
        for future in [*self.calls.values(), *(f for _, f in self.watchers)]:
            if not future.done():
                future.set_exception(error)

    def delivered(self, frame: bytes) -> None:
        """A delivery came (counted already): its time, when asked for, and a sample."""
        if self.times is not None:
            self.times.append(time.perf_counter())
        if self.sample_delta is None and DELTA in frame:
            self.sample_delta = frame

    def watch(self, predicate: Callable[[dict[str, Any]], bool]) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.watchers.append((predicate, future))
        return future

    async def request_sized(self, method: str, params: dict[str, Any]) -> tuple[Any, int]:
        """(result, response bytes)."""
        ident = next(self.ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.calls[ident] = future
        await self.ws.send(
            _dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        )
        return await asyncio.wait_for(future, 600)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        return (await self.request_sized(method, params))[0]

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.ws.send(_dumps({"jsonrpc": "2.0", "method": method, "params": params}))

    def dispatch_frame(self, channel: str, action: dict[str, Any]) -> tuple[int, str]:
        seq = next(self.seqs)
        params = {"channel": channel, "clientSeq": seq, "action": action}
        return seq, _dumps({"jsonrpc": "2.0", "method": "dispatchAction", "params": params})

    async def new_session(self) -> tuple[str, str]:
        """``createSession`` (echo agent), wait until ready; (session URI, default chat URI)."""
        session = f"ahp-session:/{uuid.uuid4()}"
        ready = self.watch(
            lambda m: (
                m.get("method") == "action"
                and m["params"]["channel"] == session
                and m["params"]["action"]["type"] == "session/ready"
            )
        )
        await self.request("createSession", {"channel": session, "provider": "echo"})
        result = await self.request("subscribe", {"channel": session})
        state = result["snapshot"]["state"]
        if state.get("lifecycle") == "ready" and state.get("defaultChat"):
            ready.cancel()
            self.watchers = [w for w in self.watchers if w[1] is not ready]
            return session, state["defaultChat"]
        await asyncio.wait_for(ready, 60)
        result = await self.request("subscribe", {"channel": session})
        return session, result["snapshot"]["state"]["defaultChat"]

    async def open_chat(self) -> str:
        _, chat = await self.new_session()
        await self.request("subscribe", {"channel": chat})
        return chat

    def turn_end(self, chat: str) -> asyncio.Future[Any]:
        return self.watch(
            lambda m: (
                m.get("method") == "action"
                and m["params"]["channel"] == chat
                and m["params"]["action"]["type"] in ("chat/turnComplete", "chat/error")
            )
        )

    async def start_turn(self, chat: str, text: str) -> None:
        _, frame = self.dispatch_frame(
            chat,
            {
                "type": "chat/turnStarted",
                "turnId": str(uuid.uuid4()),
                "startedAt": "2026-01-01T00:00:00.000Z",
                "message": {"text": text, "origin": {"kind": "user"}},
            },
        )
        await self.ws.send(frame)

    async def ask(self, chat: str, text: str) -> None:
        end = self.turn_end(chat)
        await self.start_turn(chat, text)
        message, _ = await asyncio.wait_for(end, 600)
        if message["params"]["action"]["type"] != "chat/turnComplete":
            raise RuntimeError(f"turn failed: {message}")

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader


async def gather_limited(n: int, factory: Callable[[int], Any], limit: int = 50) -> list[Any]:
    semaphore = asyncio.Semaphore(limit)

    async def one(i: int) -> Any:
        async with semaphore:
            return await factory(i)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def open_chats(url: str, n: int) -> list[tuple[Wire, str]]:
    """``n`` initialized connections, each with a new session and its subscribed default chat."""

    async def setup(_: int) -> tuple[Wire, str]:
        wire = await Wire.initialized(url)
        return wire, await wire.open_chat()

    return await gather_limited(n, setup)


def text_of(words: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(words))


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


#: Frames captured from the host (a chat/delta envelope, a chat/turnComplete envelope)
#: for the floor to send; filled by the first stream-1 run.
SAMPLES: dict[str, str] = {}


def _samples() -> tuple[str, str]:
    delta = SAMPLES.get("delta") or json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "action",
            "params": {
                "channel": f"ahp-chat:/{uuid.uuid4()}",
                "action": {
                    "type": "chat/delta",
                    "turnId": str(uuid.uuid4()),
                    "partId": "md1",
                    "content": "lorem ipsum dolor ",
                },
                "serverSeq": 12345,
            },
        },
        separators=(",", ":"),
    )
    end = SAMPLES.get("end") or json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "action",
            "params": {
                "channel": "ahp-chat:/x",
                "action": {"type": "chat/turnComplete", "turnId": "t"},
                "serverSeq": 12346,
            },
        },
        separators=(",", ":"),
    )
    return delta, end


def _is_end(message: dict[str, Any]) -> bool:
    return message.get("method") == "action" and message["params"]["action"]["type"] in (
        "chat/turnComplete",
        "chat/error",
    )


# -- stream-1 / fanout ------------------------------------------------------------------------


async def host_stream(url: str, words: int, subscribers: int, mix: str = "0.7") -> dict[str, Any]:
    """One chat, ``subscribers`` connections subscribed; one echo of ``words`` words.

    ``mix`` (:data:`MIXES`): the protocol versions the subscribers speak.
    """
    offers = MIXES[mix]
    owner = await Wire.initialized(url, versions=offers[0])
    chat = await owner.open_chat()

    async def follower(i: int) -> Wire:
        wire = await Wire.initialized(url, versions=offers[(i + 1) % len(offers)])
        await wire.request("subscribe", {"channel": chat})
        return wire

    wires = [owner, *await gather_limited(subscribers - 1, follower)]
    ends = [w.turn_end(chat) for w in wires]
    for wire in wires:
        wire.deliveries = wire.frames = 0
    started = time.perf_counter()
    await owner.start_turn(chat, text_of(words))
    done = await asyncio.wait_for(asyncio.gather(*ends), 600)
    seconds = time.perf_counter() - started
    if owner.sample_delta is not None and "delta" not in SAMPLES:
        SAMPLES["delta"] = owner.sample_delta.decode()
        SAMPLES["end"] = done[0][1].decode()
    deliveries = sum(w.deliveries for w in wires)
    frames = sum(w.frames for w in wires)
    await asyncio.gather(*(w.close() for w in wires))
    return {
        "seconds": seconds,
        "deliveries": deliveries,
        "deliveries_per_connection": deliveries // len(wires),
        "frames": frames,
        "deliveries_per_s": deliveries / seconds,
        "words_per_s": words * len(wires) / seconds,
    }


async def floor_stream(url: str, per_connection: int, receivers: int) -> dict[str, Any]:
    """The floor's broadcast of ``per_connection`` delta frames to ``receivers`` connections."""
    delta, end = _samples()
    wires = await gather_limited(receivers, lambda _: Wire.connect(url))
    ends = [w.watch(_is_end) for w in wires]
    if receivers == 1:
        command = {"op": "stream", "n": per_connection, "frame": delta, "end": end}
        sender = wires[0]
    else:
        command = {
            "op": "fanout",
            "n": per_connection,
            "expect": receivers,
            "frame": delta,
            "end": end,
        }
        sender = await Wire.connect(url)
    started = time.perf_counter()
    await sender.ws.send("!" + json.dumps(command))
    await asyncio.wait_for(asyncio.gather(*ends), 600)
    seconds = time.perf_counter() - started
    deliveries = sum(w.deliveries for w in wires)
    await asyncio.gather(*(w.close() for w in wires))
    if sender not in wires:
        await sender.close()
    return {"seconds": seconds, "deliveries": deliveries, "deliveries_per_s": deliveries / seconds}


# -- tokens: one delta per loop iteration -----------------------------------------------------


async def host_tokens(
    url: str, pid: int, chats: int, words: int, interval_ms: int = 0
) -> dict[str, Any]:
    """``chats`` connections, each echoing ``/slow <interval_ms>`` words: one delta
    per loop iteration (0), or one per wake-up of the agent's clock (the capacity
    benchmark's pace)."""

    pairs = await open_chats(url, chats)
    text = f"/slow {interval_ms} " + text_of(words)
    ends = [wire.turn_end(chat) for wire, chat in pairs]
    for wire, _ in pairs:
        wire.deliveries = 0
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*(wire.start_turn(chat, text) for wire, chat in pairs))
    await asyncio.wait_for(asyncio.gather(*ends), 600)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu
    deliveries = sum(w.deliveries for w, _ in pairs)
    await asyncio.gather(*(w.close() for w, _ in pairs))
    return {
        "seconds": seconds,
        "deliveries": deliveries,
        "deliveries_per_connection": deliveries // chats,
        "deliveries_per_s": deliveries / seconds,
        "cpu_us_per_delta": cpu / deliveries * 1e6,
    }


async def floor_tokens(url: str, receivers: int, per_connection: int) -> dict[str, Any]:
    """The floor sending ``per_connection`` frames to each, one per loop iteration."""
    delta, end = _samples()
    wires = await gather_limited(receivers, lambda _: Wire.connect(url))
    ends = [w.watch(_is_end) for w in wires]
    command = "!" + json.dumps({"op": "tokens", "n": per_connection, "frame": delta, "end": end})
    pid = FLOOR_PIDS[url]
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*(w.ws.send(command) for w in wires))
    await asyncio.wait_for(asyncio.gather(*ends), 600)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu
    deliveries = sum(w.deliveries for w in wires)
    await asyncio.gather(*(w.close() for w in wires))
    return {
        "seconds": seconds,
        "deliveries": deliveries,
        "deliveries_per_s": deliveries / seconds,
        "cpu_us_per_delta": cpu / deliveries * 1e6,
    }


# -- short turns: many sessions, one short turn after another ---------------------------------


async def host_short_turns(url: str, pid: int, sessions: int, turns: int) -> dict[str, Any]:
    """``sessions`` connections, each asking ``turns`` one-word turns in a row, all at once."""

    pairs = await open_chats(url, sessions)
    for wire, chat in pairs:  # warm: the first turn names the session
        await wire.ask(chat, "hello")
        wire.frames = 0

    async def asker(wire: Wire, chat: str) -> None:
        for _ in range(turns):
            await wire.ask(chat, "hi")

    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(asker(w, c) for w, c in pairs)), 600)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu
    frames = sum(w.frames for w, _ in pairs)
    await asyncio.gather(*(w.close() for w, _ in pairs))
    total = sessions * turns
    return {
        "seconds": seconds,
        "turns": total,
        "frames_per_turn": frames // total,
        "turns_per_s": total / seconds,
        "cpu_us_per_turn": cpu / total * 1e6,
    }


async def floor_short_turns(
    url: str, sessions: int, turns: int, frames_per_turn: int
) -> dict[str, Any]:
    """The floor answering each request frame with a turn's worth of frames."""
    delta, end = _samples()
    command = "!" + json.dumps(
        {"op": "turns", "n": max(0, frames_per_turn - 1), "frame": delta, "end": end}
    )
    wires = await gather_limited(sessions, lambda _: Wire.connect(url))
    for wire in wires:
        await wire.ws.send(command)

    async def asker(wire: Wire) -> None:
        for _ in range(turns):
            ended = wire.watch(_is_end)
            await wire.ws.send("turn")
            await ended

    pid = FLOOR_PIDS[url]
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(asker(w) for w in wires)), 600)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu
    await asyncio.gather(*(w.close() for w in wires))
    total = sessions * turns
    return {
        "seconds": seconds,
        "turns": total,
        "turns_per_s": total / seconds,
        "cpu_us_per_turn": cpu / total * 1e6,
    }


# -- many-chats -------------------------------------------------------------------------------


def _gaps_ms(times: list[float]) -> list[float]:
    return [(b - a) * 1e3 for a, b in itertools.pairwise(times)]


async def host_many(url: str, connections: int, words: int) -> dict[str, Any]:
    pairs = await open_chats(url, connections)
    text = text_of(words)
    ends = []
    for wire, chat in pairs:
        wire.deliveries = 0
        wire.times = []
        ends.append(wire.turn_end(chat))
    started = time.perf_counter()
    await asyncio.gather(*(wire.start_turn(chat, text) for wire, chat in pairs))
    await asyncio.wait_for(asyncio.gather(*ends), 600)
    seconds = time.perf_counter() - started
    result = _many_figures([w for w, _ in pairs], seconds)
    await asyncio.gather(*(w.close() for w, _ in pairs))
    return result


def _many_figures(wires: list[Wire], seconds: float) -> dict[str, Any]:
    gaps = [_gaps_ms(w.times or []) for w in wires]
    every = [g for per in gaps for g in per]
    per_p99 = [percentile(g, 99) for g in gaps if g]
    deliveries = sum(w.deliveries for w in wires)
    return {
        "seconds": seconds,
        "deliveries": deliveries,
        "deliveries_per_connection": deliveries // len(wires),
        "deliveries_per_s": deliveries / seconds,
        "gap_p99_ms": percentile(every, 99),
        "gap_p50_ms": percentile(every, 50),
        "worst_connection_gap_p99_ms": max(per_p99) if per_p99 else 0.0,
    }


async def floor_many(url: str, connections: int, per_connection: int) -> dict[str, Any]:
    delta, end = _samples()
    wires = await gather_limited(connections, lambda _: Wire.connect(url))
    ends = []
    for wire in wires:
        wire.times = []
        ends.append(wire.watch(_is_end))
    command = "!" + json.dumps({"op": "stream", "n": per_connection, "frame": delta, "end": end})
    started = time.perf_counter()
    await asyncio.gather(*(w.ws.send(command) for w in wires))
    await asyncio.wait_for(asyncio.gather(*ends), 600)
    seconds = time.perf_counter() - started
    result = _many_figures(wires, seconds)
    await asyncio.gather(*(w.close() for w in wires))
    return result


# -- dispatch-rtt -----------------------------------------------------------------------------


async def _round_trips(
    ws: ClientConnection, frames: list[tuple[bytes, str]], warmup: int
) -> dict[str, Any]:
    """Send each frame, wait for the reply containing its marker; µs per round trip."""
    samples: list[float] = []
    for i, (marker, frame) in enumerate(frames):
        started = time.perf_counter()
        await ws.send(frame)
        while marker not in await ws.recv(decode=False):
            pass
        if i >= warmup:
            samples.append((time.perf_counter() - started) * 1e6)
    return {
        "round_trips": len(samples),
        "p50_us": percentile(samples, 50),
        "p99_us": percentile(samples, 99),
        "mean_us": statistics.fmean(samples),
        "frame_bytes": len(frames[-1][1]),
    }


def _draft_frames(wire: Wire, chat: str, n: int) -> list[tuple[bytes, str]]:
    frames = []
    for i in range(n):
        action = {
            "type": "chat/draftChanged",
            "draft": {"text": f"draft {i:06d}", "origin": {"kind": "user"}},
        }
        seq, frame = wire.dispatch_frame(chat, action)
        frames.append((f'"clientSeq":{seq}}}'.encode(), frame))
    return frames


async def host_rtt(url: str, n: int) -> dict[str, Any]:
    wire = await Wire.initialized(url)
    chat = await wire.open_chat()
    warmup = max(1, n // 10)
    frames = _draft_frames(wire, chat, n + warmup)
    wire.reader.cancel()  # this loop reads the socket itself
    with contextlib.suppress(asyncio.CancelledError):
        await wire.reader
    result = await _round_trips(wire.ws, frames, warmup)
    await wire.ws.close()
    return result


async def floor_rtt(url: str, n: int) -> dict[str, Any]:
    ws = await websockets.connect(url, max_size=None, compression=None, ping_interval=None)
    warmup = max(1, n // 10)
    dummy = Wire.__new__(Wire)
    dummy.seqs = itertools.count(1)
    frames = _draft_frames(dummy, f"ahp-chat:/{uuid.uuid4()}", n + warmup)
    # The echo is the same frame: the marker matches it (no origin needed).
    frames = [(f'"clientSeq":{i + 1},'.encode(), frame) for i, (_, frame) in enumerate(frames)]
    result = await _round_trips(ws, frames, warmup)
    await ws.close()
    return result


# -- reconnect ----------------------------------------------------------------------------------


async def _away_client(url: str, chat: str) -> tuple[str, int]:
    """A client that subscribes to ``chat`` and leaves; (client id, last seen serverSeq)."""
    client_id = f"bench-away-{uuid.uuid4()}"
    wire = await Wire.initialized(url, client_id)
    result = await wire.request("subscribe", {"channel": chat})
    await wire.close()
    return client_id, int(result["snapshot"]["fromSeq"])


async def _reconnect(url: str, client_id: str, last_seen: int, chat: str) -> dict[str, Any]:
    wire = await Wire.connect(url)
    params = {
        "channel": ROOT,
        "clientId": client_id,
        "lastSeenServerSeq": last_seen,
        "subscriptions": [chat],
    }
    started = time.perf_counter()
    result, size = await wire.request_sized("reconnect", params)
    seconds = time.perf_counter() - started
    await wire.close()
    figures: dict[str, Any] = {"type": result["type"], "ms": seconds * 1e3, "bytes": size}
    if result["type"] == "replay":
        figures["envelopes"] = len(result["actions"])
    else:
        state = result["snapshots"][0]["state"]
        figures["snapshot_turns"] = len(state.get("turns", []))
    return figures


async def host_reconnect(url: str, replay_words: int, turn_counts: Sequence[int]) -> dict[str, Any]:
    owner = await Wire.initialized(url)
    chat = await owner.open_chat()
    client_id, last_seen = await _away_client(url, chat)
    await owner.ask(chat, text_of(replay_words))
    replay = await _reconnect(url, client_id, last_seen, chat)

    chat = await owner.open_chat()
    client_id, last_seen = await _away_client(url, chat)
    snapshots = []
    done = 0
    started = time.perf_counter()
    for count in sorted(turn_counts):
        while done < count:
            await owner.ask(chat, "hi")
            done += 1
        snapshots.append({"turns": count, **await _reconnect(url, client_id, last_seen, chat)})
    build_seconds = time.perf_counter() - started
    await owner.close()
    first, last = snapshots[0]["bytes"], snapshots[-1]["bytes"]
    return {
        "replay": replay,
        "snapshots": snapshots,
        "turns_per_s": done / build_seconds,
        "bytes_ratio_most_vs_fewest_turns": last / first,
    }


# -- memory -------------------------------------------------------------------------------------


async def _settled_rss(pid: int) -> int:
    await asyncio.sleep(1.0)
    return proc_rss_kb(pid)


async def host_idle_connections(url: str, pid: int, n: int) -> dict[str, Any]:
    before = await _settled_rss(pid)
    wires = await gather_limited(n, lambda _: Wire.initialized(url), limit=100)
    after = await _settled_rss(pid)
    await asyncio.gather(*(w.close() for w in wires))
    return {
        "connections": n,
        "rss_before_kb": before,
        "rss_after_kb": after,
        "kib_per_item": (after - before) / n,
    }


async def host_idle_chats(
    url: str, pid: int, n: int, per_session: int, message: str = "hi"
) -> dict[str, Any]:
    sessions = max(1, (n + per_session - 1) // per_session)
    wires = await gather_limited(sessions, lambda _: Wire.initialized(url))
    before = await _settled_rss(pid)

    async def fill(index: int) -> int:
        wire = wires[index]
        session, default_chat = await wire.new_session()
        count = min(per_session, n - index * per_session)
        chats = [default_chat]
        for _ in range(count - 1):
            chat = f"ahp-chat:/{uuid.uuid4()}"
            await wire.request("createChat", {"channel": session, "chat": chat})
            chats.append(chat)
        await wire.notify("unsubscribe", {"channel": session})
        for chat in chats:
            await wire.request("subscribe", {"channel": chat})
            await wire.ask(chat, message)
            await wire.notify("unsubscribe", {"channel": chat})
        return len(chats)

    chats = sum(await asyncio.gather(*(fill(i) for i in range(sessions))))
    after = await _settled_rss(pid)
    await asyncio.gather(*(w.close() for w in wires))
    return {
        "chats": chats,
        "sessions": sessions,
        "rss_before_kb": before,
        "rss_after_kb": after,
        "kib_per_item": (after - before) / chats,
    }


# -- the run ------------------------------------------------------------------------------------


def _on_host(
    persist: bool, job: Callable[[str, int], Any], coalesce_ms: float | None = None
) -> Any:
    with host_process(persist, coalesce_ms) as (url, pid):
        return asyncio.run(asyncio.wait_for(job(url, pid), JOB_TIMEOUT))


def _on_floor(floor_url: str, job: Callable[[str], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(job(floor_url), JOB_TIMEOUT))


MODES = {"off": False, "on": True}
#: No single scenario may take longer than this (seconds).
JOB_TIMEOUT = 300


def _best(runs: list[dict[str, Any]], key: str, *, lower: bool = False) -> dict[str, Any]:
    best = (min if lower else max)(runs, key=lambda r: r[key])
    return {**best, "runs": runs}


def bench_stream(
    sizes: Sizes, floor_url: str, mode: str, subscribers: int, mix: str = "0.7"
) -> dict[str, Any]:
    words = sizes.stream_words if subscribers == 1 else sizes.fanout_words
    repeats = sizes.stream_repeats
    runs = [
        _on_host(MODES[mode], lambda url, _pid: host_stream(url, words, subscribers, mix))
        for _ in range(repeats)
    ]
    host = _best(runs, "deliveries_per_s")
    per_connection = host["deliveries_per_connection"]
    floors = [
        _on_floor(floor_url, lambda url: floor_stream(url, per_connection, subscribers))
        for _ in range(repeats)
    ]
    return {
        "words": words,
        "subscribers": subscribers,
        "mix": mix,
        "host": host,
        "floor": _best(floors, "deliveries_per_s"),
    }


def bench_many(sizes: Sizes, floor_url: str, mode: str) -> dict[str, Any]:
    n, words = sizes.many_connections, sizes.many_words
    host = _on_host(MODES[mode], lambda url, _pid: host_many(url, n, words))
    per_connection = host["deliveries_per_connection"]
    floor = _on_floor(floor_url, lambda url: floor_many(url, n, per_connection))
    return {"connections": n, "words": words, "host": host, "floor": floor}


def bench_rtt(sizes: Sizes, floor_url: str, mode: str) -> dict[str, Any]:
    n = sizes.rtt_round_trips
    hosts: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    for _ in range(sizes.rtt_repeats):  # interleaved, so drift hits both alike
        hosts.append(_on_host(MODES[mode], lambda url, _pid: host_rtt(url, n)))
        floors.append(_on_floor(floor_url, lambda url: floor_rtt(url, n)))
    return {
        "host": _best(hosts, "p50_us", lower=True),
        "floor": _best(floors, "p50_us", lower=True),
    }


def _interleaved(
    repeats: int,
    mode: str,
    floor_url: str,
    host_job: Callable[[str, int], Any],
    floor_job: Callable[[dict[str, Any]], Callable[[str], Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``repeats`` runs of the host and of the floor, interleaved so drift hits both alike.

    ``floor_job(host_figures)`` is the floor's job for that run (it sends what the host sent).
    """
    hosts: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    for _ in range(repeats):
        host = _on_host(MODES[mode], host_job)
        hosts.append(host)
        floors.append(_on_floor(floor_url, floor_job(host)))
    return hosts, floors


def bench_tokens(sizes: Sizes, floor_url: str, mode: str, chats: int) -> dict[str, Any]:
    words = sizes.token_words
    hosts, floors = _interleaved(
        sizes.cpu_repeats,
        mode,
        floor_url,
        lambda url, pid: host_tokens(url, pid, chats, words),
        lambda host: lambda url: floor_tokens(url, chats, host["deliveries_per_connection"]),
    )
    return {
        "chats": chats,
        "words": words,
        "host": _best(hosts, "cpu_us_per_delta", lower=True),
        "floor": _best(floors, "cpu_us_per_delta", lower=True),
    }


def bench_short_turns(sizes: Sizes, floor_url: str, mode: str) -> dict[str, Any]:
    n, turns = sizes.short_sessions, sizes.short_turns
    hosts, floors = _interleaved(
        sizes.cpu_repeats,
        mode,
        floor_url,
        lambda url, pid: host_short_turns(url, pid, n, turns),
        lambda host: lambda url: floor_short_turns(url, n, turns, host["frames_per_turn"]),
    )
    return {
        "sessions": n,
        "turns": turns,
        "host": _best(hosts, "turns_per_s"),
        "floor": _best(floors, "turns_per_s"),
    }


def bench_startup(sizes: Sizes, mode: str) -> dict[str, Any]:
    """From spawning a host (built-in echo agent only) to its "listening" line, beside the floor's.

    Wall seconds (the log is polled every 50 ms) and the process's CPU seconds
    by then; the median of ``startup_repeats`` starts of each, interleaved.
    """

    def median(runs: list[dict[str, float]]) -> dict[str, Any]:
        return {
            key: statistics.median(run[key] for run in runs) for key in ("seconds", "cpu_s")
        } | {"runs": runs}

    hosts: list[dict[str, float]] = []
    floors: list[dict[str, float]] = []
    for _ in range(sizes.startup_repeats):
        started = time.perf_counter()
        with host_process(MODES[mode]) as (_, pid):
            hosts.append({"seconds": time.perf_counter() - started, "cpu_s": cpu_seconds(pid)})
        started = time.perf_counter()
        with floor_process() as url:
            seconds = time.perf_counter() - started
            floors.append({"seconds": seconds, "cpu_s": cpu_seconds(FLOOR_PIDS.pop(url))})
    return {"host": median(hosts), "floor": median(floors)}


def bench_reconnect(sizes: Sizes, mode: str) -> dict[str, Any]:
    figures: dict[str, Any] = _on_host(
        MODES[mode],
        lambda url, _pid: host_reconnect(url, sizes.replay_words, sizes.snapshot_turns),
    )
    return figures


def bench_memory(sizes: Sizes, mode: str) -> dict[str, Any]:
    connections = _on_host(
        MODES[mode],
        lambda url, pid: host_idle_connections(url, pid, sizes.idle_connections),
    )
    chats = _on_host(
        MODES[mode],
        lambda url, pid: host_idle_chats(url, pid, sizes.idle_chats, sizes.chats_per_session),
    )
    turn = f"/slow 0 {text_of(sizes.turn_words)}"  # one delta per word

    async def two_batches(url: str, pid: int) -> dict[str, Any]:
        # The first batch on a fresh host also pays what is paid once: the store's
        # page cache, the writer thread's allocator arena, the allocator's first
        # arenas. The next batch, on the same host, is what a chat adds.
        first = await host_idle_chats(
            url, pid, sizes.turn_chats, sizes.chats_per_session, message=turn
        )
        first["next"] = await host_idle_chats(
            url, pid, sizes.turn_chats, sizes.chats_per_session, message=turn
        )
        return first

    after_turn = _on_host(MODES[mode], two_batches)
    after_turn["words"] = sizes.turn_words
    return {"idle_connection": connections, "idle_chat": chats, "chat_after_turn": after_turn}


def bench_coalesce(sizes: Sizes, coalesce_ms: float) -> dict[str, Any]:
    if not coalescing_supported():
        return {"supported": False, "coalesce_ms": coalesce_ms}
    words = sizes.stream_words
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for _ in range(sizes.stream_repeats):  # interleaved
        for key, window in (("off", 0.0), ("on", coalesce_ms)):
            runs[key].append(_on_host(False, lambda url, _pid: host_stream(url, words, 1), window))
    return {
        "supported": True,
        "coalesce_ms": coalesce_ms,
        "words": words,
        "off": _best(runs["off"], "words_per_s"),
        "on": _best(runs["on"], "words_per_s"),
    }


def collect(sizes: Sizes, coalesce_ms: float | None) -> dict[str, Any]:
    scenarios: dict[str, Any] = {}

    def step(name: str, job: Callable[..., Any]) -> None:
        progress(f"{name} ...")
        scenarios[name] = job()

    with floor_process() as floor_url:
        for mode in ("off", "on"):
            step(f"stream-1/{mode}", lambda mode=mode: bench_stream(sizes, floor_url, mode, 1))
        for mode in ("off", "on"):
            step(
                f"fanout/{mode}",
                lambda mode=mode: bench_stream(sizes, floor_url, mode, sizes.fanout_connections),
            )
        # The same fan-out with 1.0 subscribers, and half 1.0 half 0.7: the
        # cost of one canonical state with a view per connection (issue 27).
        for mix in ("1.0", "mixed"):
            step(
                f"fanout-{mix}/off",
                lambda mix=mix: bench_stream(
                    sizes, floor_url, "off", sizes.fanout_connections, mix
                ),
            )
        for mode in ("off", "on"):
            step(f"dispatch-rtt/{mode}", lambda mode=mode: bench_rtt(sizes, floor_url, mode))
        for mode in sizes.other_modes:
            step(f"many-chats/{mode}", lambda mode=mode: bench_many(sizes, floor_url, mode))
        for mode in ("off", "on"):
            step(
                f"short-turns/{mode}",
                lambda mode=mode: bench_short_turns(sizes, floor_url, mode),
            )
        for chats in sizes.token_chats:
            for mode in ("off", "on"):
                step(
                    f"tokens-{chats}/{mode}",
                    lambda mode=mode, chats=chats: bench_tokens(sizes, floor_url, mode, chats),
                )
    for mode in sizes.other_modes:
        step(f"reconnect/{mode}", lambda mode=mode: bench_reconnect(sizes, mode))
    for mode in sizes.other_modes:
        step(f"memory/{mode}", lambda mode=mode: bench_memory(sizes, mode))
    for mode in sizes.other_modes:
        step(f"startup/{mode}", lambda mode=mode: bench_startup(sizes, mode))
    if coalesce_ms:
        step("coalesce", lambda: bench_coalesce(sizes, coalesce_ms))
    return scenarios


# -- report -------------------------------------------------------------------------------------


def _row(
    scenario: str,
    metric: str,
    host: float,
    floor: float | None = None,
    target: str = "-",
    met: bool | None = None,
    unit: str = "",
) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "metric": metric,
        "unit": unit,
        "host": host,
        "floor": floor,
        "ratio": host / floor if floor else None,
        "target": target,
        "met": met,
    }


def build_rows(scenarios: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, data in scenarios.items():
        kind, _, mode = name.partition("/")
        label = f"{kind} (persist {mode})" if mode else kind
        if kind in ("fanout-1.0", "fanout-mixed"):
            # Beside the all-0.7 fan-out of the same run: the cost of a view per
            # connection (docs/performance.md). 1.0 subscribers get the
            # canonical bytes and must keep within 10 % of the 0.7 figure.
            zero7 = scenarios.get(f"fanout/{mode}")
            if zero7 is None:
                continue
            label = f"fanout-{data['subscribers']} {data['mix']} (persist {mode})"
            host = data["host"]["deliveries_per_s"]
            base = zero7["host"]["deliveries_per_s"]
            if data["mix"] == "1.0":
                rows.append(
                    _row(
                        label, "deliveries/s vs 0.7", host, base, ">= 0.9x 0.7", host >= 0.9 * base
                    )
                )
            else:
                rows.append(_row(label, "deliveries/s vs 0.7", host, base))
        elif kind in ("stream-1", "fanout"):
            name = "stream-1" if kind == "stream-1" else f"fanout-{data['subscribers']}"
            label = f"{name} (persist {mode})"
            host, floor = data["host"]["deliveries_per_s"], data["floor"]["deliveries_per_s"]
            need = 0.5 if mode == "off" else 0.35
            rows.append(
                _row(label, "deliveries/s", host, floor, f">= {need}x floor", host >= need * floor)
            )
        elif kind == "short-turns":
            label = f"short-turns-{data['sessions']} (persist {mode})"
            h, f = data["host"], data["floor"]
            need = 0.7 if mode == "off" else 0.5
            rows.append(
                _row(
                    label,
                    "turns/s",
                    h["turns_per_s"],
                    f["turns_per_s"],
                    f">= {need}x floor",
                    h["turns_per_s"] >= need * f["turns_per_s"],
                )
            )
            rows.append(
                _row(label, "server CPU µs per turn", h["cpu_us_per_turn"], f["cpu_us_per_turn"])
            )
        elif kind.startswith("tokens-"):
            h, f = data["host"], data["floor"]
            rows.append(_row(label, "deliveries/s", h["deliveries_per_s"], f["deliveries_per_s"]))
            target, met = ("<= 2x floor", h["cpu_us_per_delta"] <= 2 * f["cpu_us_per_delta"])
            if mode == "off":
                target, met = "-", None
            rows.append(
                _row(
                    label,
                    "server CPU µs per delta",
                    h["cpu_us_per_delta"],
                    f["cpu_us_per_delta"],
                    target,
                    met,
                )
            )
        elif kind == "many-chats":
            label = f"many-chats-{data['connections']} (persist {mode})"
            h, f = data["host"], data["floor"]
            rows.append(_row(label, "deliveries/s", h["deliveries_per_s"], f["deliveries_per_s"]))
            rows.append(_row(label, "p99 gap ms", h["gap_p99_ms"], f["gap_p99_ms"]))
            rows.append(
                _row(
                    label,
                    "worst conn p99 gap ms",
                    h["worst_connection_gap_p99_ms"],
                    f["worst_connection_gap_p99_ms"],
                )
            )
        elif kind == "dispatch-rtt":
            h, f = data["host"], data["floor"]
            rows.append(
                _row(
                    label,
                    "p50 µs",
                    h["p50_us"],
                    f["p50_us"],
                    "<= 1.5x floor",
                    h["p50_us"] <= 1.5 * f["p50_us"],
                )
            )
            rows.append(
                _row(
                    label,
                    "p99 µs",
                    h["p99_us"],
                    f["p99_us"],
                    "<= 3x floor",
                    h["p99_us"] <= 3 * f["p99_us"],
                )
            )
        elif kind == "reconnect":
            replay = data["replay"]
            rows.append(
                _row(
                    label,
                    f"replay {replay.get('envelopes', 0):,} env ms [{replay['type']}]",
                    replay["ms"],
                    target="<= 50 ms",
                    met=replay["ms"] <= 50 and replay["type"] == "replay",
                )
            )
            rows.append(_row(label, "replay bytes", replay["bytes"]))
            for snap in data["snapshots"]:
                rows.append(_row(label, f"{snap['type']} @ {snap['turns']:,} turns ms", snap["ms"]))
            ratio = data["bytes_ratio_most_vs_fewest_turns"]
            snapshots_only = all(snap["type"] == "snapshot" for snap in data["snapshots"])
            for i, snap in enumerate(data["snapshots"]):
                last = i == len(data["snapshots"]) - 1
                rows.append(
                    _row(
                        label,
                        f"{snap['type']} @ {snap['turns']:,} turns bytes"
                        f" ({snap.get('snapshot_turns', '?')} sent)",
                        snap["bytes"],
                        target="independent of turns" if last else "-",
                        met=(abs(ratio - 1) <= 0.05 and snapshots_only) if last else None,
                    )
                )
        elif kind == "memory":
            for key, what in (("idle_connection", "connection"), ("idle_chat", "loaded chat")):
                value = data[key]["kib_per_item"]
                rows.append(
                    _row(label, f"RSS KiB per idle {what}", value, None, "<= 64 KiB", value <= 64)
                )
            if "chat_after_turn" in data:  # (results of earlier runs lack it)
                turn = data["chat_after_turn"]
                rows.append(
                    _row(
                        label,
                        f"RSS KiB per chat after a {turn['words']}-word turn",
                        turn["kib_per_item"],
                        None,
                    )
                )
                if "next" in turn:
                    rows.append(
                        _row(
                            label,
                            f"  the next {turn['next']['chats']} chats (once-only costs paid)",
                            turn["next"]["kib_per_item"],
                            None,
                        )
                    )
        elif kind == "startup":
            h, f = data["host"], data["floor"]
            rows.append(_row(label, "s to listening (echo agent only)", h["seconds"], f["seconds"]))
            rows.append(_row(label, "CPU s to listening", h["cpu_s"], f["cpu_s"]))
        elif kind == "coalesce":
            if not data["supported"]:
                continue
            label = f"stream-1 coalesce {data['coalesce_ms']:g} ms vs off"
            on, off = data["on"], data["off"]
            rows.append(_row(label, "words/s (on vs off)", on["words_per_s"], off["words_per_s"]))
            rows.append(
                _row(
                    label,
                    "deliveries/s (on vs off)",
                    on["deliveries_per_s"],
                    off["deliveries_per_s"],
                )
            )
            rows.append(_row(label, "frames received (on vs off)", on["frames"], off["frames"]))
    return rows


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def format_report(results: dict[str, Any]) -> str:
    meta = results["machine"]
    lines = [
        f"ahp-server {meta['ahp_server']} suite: host vs bare websockets floor — {meta['date']}",
        f"machine: {meta['cpu_count']} CPUs ({meta['cpu_model']}), {meta['platform']},"
        f" Python {meta['python']}" + ("   [--quick]" if results["quick"] else ""),
        "",
    ]
    header = (
        f"{'scenario':<36}{'metric':<40}{'host':>12}{'floor':>12}{'ratio':>8}"
        f"  {'target':<22}{'met?':<5}"
    )
    lines += [header, "-" * len(header)]
    for row in results["rows"]:
        met = "-" if row["met"] is None else ("yes" if row["met"] else "NO")
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        lines.append(
            f"{row['scenario']:<36}{row['metric']:<40}{_num(row['host']):>12}"
            f"{_num(row['floor']):>12}{ratio:>8}  {row['target']:<22}{met:<5}"
        )
    coalesce = results["scenarios"].get("coalesce")
    if coalesce is not None and not coalesce["supported"]:
        lines.append("(coalescing: this host has no server.coalesce_ms setting; skipped)")
    lines.append(
        "(ratio: host/floor; for the coalescing rows: on/off. Targets are printed, never asserted.)"
    )
    lines.append(f"\ntotal {results['seconds']:.1f} s")
    return "\n".join(lines)


def run(
    sizes: Sizes = FULL,
    *,
    out: Path | None = RESULTS,
    quick: bool = False,
    coalesce_ms: float | None = 5.0,
) -> dict[str, Any]:
    """Run every scenario, print the table, write JSON to ``out`` (if given); return results."""
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": machine_info(),
        "quick": quick,
        "sizes": dataclasses.asdict(sizes),
        "coalesce_ms": coalesce_ms,
        "coalescing_supported": coalescing_supported(),
    }
    results["scenarios"] = collect(sizes, coalesce_ms)
    results["rows"] = build_rows(results["scenarios"])
    results["seconds"] = time.perf_counter() - started
    publish_results(format_report(results), results, out)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (under 60 s)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument(
        "--coalesce-ms",
        type=float,
        default=5.0,
        help="coalescing window for the stream-1 coalescing on/off rows (0: skip them)",
    )
    args = parser.parse_args(argv)
    run(QUICK if args.quick else FULL, out=args.out, quick=args.quick, coalesce_ms=args.coalesce_ms)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What persistence costs: streaming throughput, per-delta cost vs turn length, start time.

Run ``python -m bench.persistence [--quick] [--out PATH]``. It prints a table and
writes every figure (and every individual run) as JSON to
``bench/results/persistence.json``. Figures only: nothing here asserts on a
timing. ``bench/README.md`` explains what each figure means.

1. **Streaming** — a provider streams N small ``io.text`` deltas as fast as the
   host takes them; one :class:`AhpClient` subscribed over a real loopback
   WebSocket waits for the turn to complete. Deltas delivered per second with
   the in-memory store (persistence off) and with SQLite (``synchronous``
   normal, then full), in the same run; the ratio on/off.
2. **Per-delta cost vs turn length** — deltas appended to a markdown part that
   already holds 1k vs 1M characters: the store path alone (``Hub.publish`` +
   SQLite group commit, no reducer), the reducer alone, and end to end through
   a Host's ``ChatActor`` (reducer + actor + store; by ``apply_server`` and by
   a real provider turn) with the memory store and with SQLite.
3. **Start time** — ``Host.start()`` over a data dir holding 10,000 chats
   (1,000 sessions x 10 chats, created through the host's own command
   handlers) vs an empty one, each in a fresh process; wall time and resident
   memory growth.
4. **Lone turns** — one client asks the echo agent short questions, one after
   another, nothing else running: the median and p90 time from sending a
   message to its turn's completion, per store mode. A lone turn is not held
   for the commit window (``store/base.py`` ``CommitWindow``), so SQLite stays
   within 2x of the memory store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import dataclasses
import datetime
import gc
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ahp_server import __version__
from ahp_server.agents.base import StatelessProvider, TurnIO, TurnRequest
from ahp_server.app import App
from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.host.actors import ChatActor
from ahp_server.host.commands.dispatcher import Commands
from ahp_server.host.core.fanout import Connection
from ahp_server.host.core.sequencer import Hub
from ahp_server.host.host import DB_FILE, Host, wall_clock_ms
from ahp_server.logging import configure_logging
from ahp_server.protocol import codec
from ahp_server.protocol.reducers import iso_timestamp, reduce_chat
from ahp_server.protocol.types import (
    ActionEnvelope,
    ActiveTurn,
    AgentCapabilities,
    AgentInfo,
    ChatDeltaAction,
    ChatResponsePartAction,
    ChatState,
    ChatTurnStartedAction,
    CreateChatParams,
    CreateSessionParams,
    MarkdownResponsePart,
    Message,
    MessageOrigin,
    MultipleChatsCapability,
)
from ahp_server.store.sqlite import SqliteStore

__all__ = ["FULL", "QUICK", "FirehoseAgent", "Sizes", "main", "run"]

DEFAULTS = Settings()
ROOT_DIR = Path(__file__).resolve().parent.parent
RESULTS = ROOT_DIR / "bench" / "results" / "persistence.json"

TURN = "turn-bench"
PART = "turn-bench.md1"
#: 16 bytes of Markdown per delta by default (ASCII: characters == bytes).
DELTA_TEXT = "lorem ipsum dol "


@dataclasses.dataclass(frozen=True, slots=True)
class Sizes:
    """How much work each part does (``--quick`` uses :data:`QUICK`)."""

    #: 1. deltas per streamed turn, their size, and measured turns per store mode.
    stream_deltas: int = 20_000
    delta_bytes: int = 16
    stream_repeats: int = 3
    #: 2. characters already in the markdown part, and deltas appended per path.
    turn_lengths: tuple[int, ...] = (1_000, 1_000_000)
    store_deltas: int = 20_000
    reducer_deltas: int = 2_000
    host_deltas: int = 5_000
    turn_deltas: int = 1_000
    cost_repeats: int = 3
    #: 3. stored sessions x chats per session (the default chat included).
    stored_sessions: int = 1_000
    chats_per_session: int = 10
    start_repeats: int = 3
    #: 4. sequential short turns per store mode.
    lone_turns: int = 200


FULL = Sizes()
QUICK = Sizes(
    stream_deltas=2_000,
    stream_repeats=1,
    store_deltas=2_000,
    reducer_deltas=300,
    host_deltas=500,
    turn_deltas=200,
    cost_repeats=1,
    stored_sessions=100,
    start_repeats=1,
    lone_turns=50,
)


# -- helpers ---------------------------------------------------------------------------------


def vm_rss_kb() -> int:
    """Resident memory of this process now (kB); peak RSS where /proc is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def release_memory() -> None:
    """Collect garbage and hand freed heap back to the OS (glibc), so RSS baselines are fair.

    Without it, memory freed by an earlier measurement stays resident and a
    later one reuses it: its growth (and its page-fault cost) would not show.
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: baselines are rougher
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakRss:
    """Samples this process's resident memory from a thread; ``growth_kb`` is peak minus start.

    The baseline is taken after :func:`release_memory`.
    """

    def __init__(self, interval: float = 0.002) -> None:
        release_memory()
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="bench-rss", daemon=True)
        self.baseline_kb = self.peak_kb = vm_rss_kb()

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak_kb = max(self.peak_kb, vm_rss_kb())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, vm_rss_kb())

    @property
    def growth_kb(self) -> int:
        return self.peak_kb - self.baseline_kb


def machine_info() -> dict[str, Any]:
    cpu_model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            cpu_model = next(
                (
                    line.split(":", 1)[1].strip()
                    for line in cpuinfo
                    if line.startswith("model name")
                ),
                "",
            )
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model or platform.processor(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "ahp_server": __version__,
    }


def user_message(text: str) -> Message:
    return Message(text=text, origin=MessageOrigin(kind="user"))


def delta_text(size: int) -> str:
    return (DELTA_TEXT * (size // len(DELTA_TEXT) + 1))[:size]


def chat_with_part(uri: str, length: int) -> ChatState:
    """A chat with a running turn whose markdown part already holds ``length`` characters."""
    now = iso_timestamp(wall_clock_ms())
    return ChatState(
        resource=uri,
        title="Chat",
        status=1,
        modified_at=now,
        turns=(),
        active_turn=ActiveTurn(
            id=TURN,
            started_at=now,
            message=user_message("bench"),
            response_parts=(MarkdownResponsePart(id=PART, content="x" * length),),
        ),
    )


async def until(predicate: Callable[[], bool], limit: float = 300.0) -> None:
    """Poll ``predicate`` every millisecond (the host has no event for what we wait on)."""
    async with asyncio.timeout(limit):
        while not predicate():  # noqa: ASYNC110 - polling host state, no event to wait on
            await asyncio.sleep(0.001)


class _NullTransport:
    """A transport for in-process command calls: nothing is subscribed, nothing is sent."""

    async def send_text(self, frame: bytes) -> None:
        return None

    async def send_texts(self, frames: list[bytes]) -> None:
        return None

    async def close(self, code: int, reason: str) -> None:
        return None

    def abort(self) -> None:
        return None


async def _new_session(host: Host, connection: Connection, provider: str) -> tuple[str, str]:
    """``createSession`` through the host's command handler; (session, default chat) once ready."""
    uri = f"ahp-session:/{uuid.uuid4()}"
    params = CreateSessionParams(channel=uri, provider=provider)
    await Commands(host).create_session(connection, params)
    session = host.sessions[uri]
    await until(
        lambda: (
            session.state.lifecycle != "creating" and isinstance(session.state.default_chat, str)
        )
    )
    chat = session.state.default_chat
    assert isinstance(chat, str)  # what until() waited for
    return uri, chat


async def _new_chat(host: Host, connection: Connection, session: str) -> str:
    uri = f"ahp-chat:/{uuid.uuid4()}"
    await Commands(host).create_chat(connection, CreateChatParams(channel=session, chat=uri))
    return uri


# -- 1. streaming through one chat -------------------------------------------------------------


class FirehoseAgent(StatelessProvider):
    """Streams ``N`` deltas of ``B`` characters (the message is ``"N B"``), never pausing."""

    provider = "bench-firehose"

    @property
    def info(self) -> AgentInfo:
        return AgentInfo(
            provider=self.provider,
            display_name="Benchmark firehose",
            description="Streams N deltas of B characters as fast as the host takes them.",
            models=(),
            capabilities=AgentCapabilities(multiple_chats=MultipleChatsCapability()),
        )

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        count, size = (int(word) for word in request.message.text.split())
        delta = delta_text(size)
        for _ in range(count):
            await io.text(delta)


STORE_MODES: dict[str, dict[str, Any]] = {
    "memory": {"label": "memory (persistence off)"},
    "sqlite-normal": {"label": "SQLite synchronous=normal", "synchronous": "normal"},
    "sqlite-full": {"label": "SQLite synchronous=full", "synchronous": "full"},
}


def mode_settings(mode: str, data_dir: str) -> Settings:
    """A loopback host on a free port with the store of ``mode`` (STORE_MODES) in ``data_dir``."""
    synchronous = STORE_MODES[mode].get("synchronous")
    return Settings(
        host="127.0.0.1",
        port=0,
        data_dir=None if synchronous is None else data_dir,
        synchronous=synchronous or "normal",
    )


async def stream_turn(mode: str, deltas: int, size: int) -> dict[str, Any]:
    """One turn of ``deltas`` text events, host and client in this process over loopback."""
    with tempfile.TemporaryDirectory(prefix="ahp-bench-") as tmp:
        settings = mode_settings(mode, tmp)
        app = App(settings, providers=[FirehoseAgent()])
        await app.start()
        try:
            async with AhpClient.connect(app.urls[0]) as client:
                chat = await client.open_chat(FirehoseAgent.provider)
                received = 0

                def count(envelope: ActionEnvelope) -> None:
                    nonlocal received
                    if getattr(envelope.action, "type", "") in (
                        "chat/delta",
                        "chat/responsePart",
                    ):
                        received += 1

                client.on_envelope(count)
                store = app.host.store
                commits = getattr(store, "commits", 0)
                commit_seconds = getattr(store, "commit_seconds", 0.0)
                with PeakRss() as rss:
                    started = time.perf_counter()
                    answer = await client.ask(chat, f"{deltas} {size}", timeout=600)
                    seconds = time.perf_counter() - started
                commits = getattr(store, "commits", 0) - commits
                commit_seconds = getattr(store, "commit_seconds", 0.0) - commit_seconds
        finally:
            await app.stop(close_timeout=1.0)
    if len(answer) != deltas * size or received != deltas:
        raise RuntimeError(
            f"{mode}: expected {deltas} deltas ({deltas * size} chars), "
            f"got {received} ({len(answer)} chars)"
        )
    return {
        "seconds": seconds,
        "deltas_per_s": deltas / seconds,
        "commits": commits,
        "deltas_per_commit": deltas / commits if commits else None,
        "commit_seconds": commit_seconds,
        "peak_rss_growth_kb": rss.growth_kb,
    }


async def bench_streaming(sizes: Sizes) -> dict[str, Any]:
    await stream_turn("memory", min(500, sizes.stream_deltas), sizes.delta_bytes)  # warm-up
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in STORE_MODES}
    for _ in range(sizes.stream_repeats):
        for mode in STORE_MODES:  # interleaved, so drift hits every mode alike
            release_memory()
            runs[mode].append(await stream_turn(mode, sizes.stream_deltas, sizes.delta_bytes))
    modes: dict[str, Any] = {}
    for mode, mode_runs in runs.items():
        best = max(mode_runs, key=lambda r: r["deltas_per_s"])
        modes[mode] = {"label": STORE_MODES[mode]["label"], **best, "runs": mode_runs}
    off = modes["memory"]["deltas_per_s"]
    for mode in modes.values():
        mode["ratio_vs_memory"] = mode["deltas_per_s"] / off
    return {
        "deltas": sizes.stream_deltas,
        "delta_bytes": sizes.delta_bytes,
        "repeats": sizes.stream_repeats,
        "modes": modes,
    }


# -- 2. per-delta cost vs turn length ------------------------------------------------------


async def store_path_cost(length: int, deltas: int, size: int) -> float:
    """Microseconds per delta: ``Hub.publish`` into a ``SqliteStore``, committed. No reducer."""
    with tempfile.TemporaryDirectory(prefix="ahp-bench-") as tmp:
        store = SqliteStore(Path(tmp) / DB_FILE, synchronous="normal")
        seq = store.open()
        hub = Hub(
            replay_max_envelopes=DEFAULTS.replay_max_envelopes,
            replay_max_bytes=DEFAULTS.replay_max_bytes,
            store=store,
            clock=wall_clock_ms,
            start_seq=seq,
        )
        chat = f"ahp-chat:/{uuid.uuid4()}"
        now = iso_timestamp(wall_clock_ms())
        store.put_channel(chat, "chat", "ahp-session:/bench", now, None)
        store.put_snapshot(chat, seq, codec.encode(chat_with_part(chat, length)), 0)
        store.set_unfinished(chat, TURN)
        await store.flush()
        action = ChatDeltaAction(turn_id=TURN, part_id=PART, content=delta_text(size))
        started = time.perf_counter()
        for i in range(deltas):
            hub.publish(chat, action)
            if i % 256 == 255:  # let the loop breathe, as an actor does between messages
                await asyncio.sleep(0)
                if store.backlog:
                    await store.wait_for_room()
        await store.flush()
        seconds = time.perf_counter() - started
        await store.close()
    return seconds / deltas * 1e6


def reducer_cost(length: int, deltas: int, size: int) -> float:
    """Microseconds per delta: ``reduce_chat`` alone, in memory."""
    state = chat_with_part("ahp-chat:/bench", length)
    action = ChatDeltaAction(turn_id=TURN, part_id=PART, content=delta_text(size))
    clock: Callable[[], float] = wall_clock_ms
    started = time.perf_counter()
    for _ in range(deltas):
        state = reduce_chat(state, action, clock)
    return (time.perf_counter() - started) / deltas * 1e6


class PreloadedAgent(StatelessProvider):
    """Writes ``L`` characters, waits for the benchmark's go, then streams ``K`` deltas of ``B``.

    The message is ``"L K B"``. Between the two phases the benchmark waits until
    the long part is delivered, so only the ``K`` small deltas are timed.
    """

    provider = "bench-preloaded"

    def __init__(self) -> None:
        self.go = asyncio.Event()

    @property
    def info(self) -> AgentInfo:
        return AgentInfo(
            provider=self.provider,
            display_name="Benchmark preloaded stream",
            description="A long markdown part, then small deltas appended to it.",
            models=(),
        )

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        length, count, size = (int(word) for word in request.message.text.split())
        await io.text("x" * length)
        await self.go.wait()
        delta = delta_text(size)
        for _ in range(count):
            await io.text(delta)


def _part_length(chat: ChatActor) -> int:
    turn = chat.visible.active_turn
    if not isinstance(turn, ActiveTurn) or not turn.response_parts:
        return 0
    part = turn.response_parts[-1]
    return len(part.content) if isinstance(part, MarkdownResponsePart) else 0


#: ``apply_server`` calls in flight at once: below the actor inbox (1,024), and
#: about the number of deltas a streamed turn has between two commits (part 1).
APPLY_WINDOW = 256


async def host_path_cost(
    length: int, deltas: int, size: int, *, persist: bool, via: str
) -> dict[str, float]:
    """Per-delta cost through a Host's ``ChatActor`` (reducer included), and peak RSS growth.

    ``via="apply"``: ``ChatActor.apply_server`` of ``chat/delta`` actions,
    :data:`APPLY_WINDOW` at a time. ``via="provider"``: a real turn, the
    provider's ``io.text`` going through the ``TurnRunner`` (nothing waits for
    commits but the actor's store backpressure).
    """
    with tempfile.TemporaryDirectory(prefix="ahp-bench-") as tmp:
        agent = PreloadedAgent()
        host = Host(Settings(data_dir=tmp if persist else None), providers=[agent])
        await host.start()
        connection = host.open_connection(_NullTransport())
        try:
            _, chat_uri = await _new_session(host, connection, agent.provider)
            chat = host.chats[chat_uri]
            if via == "provider":
                message = user_message(f"{length} {deltas} {size}")
                await chat.call(lambda: chat.start_turn(message, None))
                await until(lambda: _part_length(chat) >= length)
            else:
                started_at = iso_timestamp(host.now())
                message = user_message("bench")
                await chat.apply_server(
                    ChatTurnStartedAction(turn_id=TURN, started_at=started_at, message=message)
                )
                part = MarkdownResponsePart(id=PART, content="x" * length)
                await chat.apply_server(ChatResponsePartAction(turn_id=TURN, part=part))
            await host.store.flush()
            action = ChatDeltaAction(turn_id=TURN, part_id=PART, content=delta_text(size))
            with PeakRss() as rss:
                started = time.perf_counter()
                if via == "provider":
                    agent.go.set()
                    await until(lambda: bool(chat.visible.turns))  # complete and committed
                else:
                    for first in range(0, deltas, APPLY_WINDOW):
                        batch = min(APPLY_WINDOW, deltas - first)
                        await asyncio.gather(*(chat.apply_server(action) for _ in range(batch)))
                    await host.store.flush()
                seconds = time.perf_counter() - started
        finally:
            await host.close_connection(connection)
            await host.stop(close_timeout=1.0)
    return {"us_per_delta": seconds / deltas * 1e6, "peak_rss_growth_kb": rss.growth_kb}


#: Part 2's rows: key -> (label, how it is measured).
TURN_LENGTH_PATHS: dict[str, str] = {
    "store": "store only: Hub.publish + SQLite commit (no reducer)",
    "reducer": "reducer only: reduce_chat in memory",
    "apply_memory": "host apply_server, memory store (reducer, no persistence)",
    "apply_sqlite": "host apply_server, SQLite normal (reducer + persistence)",
    "apply_persistence": "  = persistence inside the host (SQLite minus memory)",
    "turn_memory": "host provider turn, memory store (TurnRunner + reducer)",
    "turn_sqlite": "host provider turn, SQLite normal (+ persistence)",
    "turn_persistence": "  = persistence inside the host (SQLite minus memory)",
}


async def bench_turn_length(sizes: Sizes) -> dict[str, Any]:
    size = sizes.delta_bytes
    deltas = {
        "store": sizes.store_deltas,
        "reducer": sizes.reducer_deltas,
        "apply_memory": sizes.host_deltas,
        "apply_sqlite": sizes.host_deltas,
        "turn_memory": sizes.turn_deltas,
        "turn_sqlite": sizes.turn_deltas,
    }
    hosts = {
        "apply_memory": (False, "apply"),
        "apply_sqlite": (True, "apply"),
        "turn_memory": (False, "provider"),
        "turn_sqlite": (True, "provider"),
    }
    keys = [str(length) for length in sizes.turn_lengths]
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {key: [] for key in keys} for name in deltas
    }
    await store_path_cost(1_000, min(500, sizes.store_deltas), size)  # warm-up
    for _ in range(sizes.cost_repeats):
        for length, key in zip(sizes.turn_lengths, keys, strict=True):
            release_memory()
            cost = await store_path_cost(length, sizes.store_deltas, size)
            runs["store"][key].append({"us_per_delta": cost})
            release_memory()
            cost = reducer_cost(length, sizes.reducer_deltas, size)
            runs["reducer"][key].append({"us_per_delta": cost})
            for name, (persist, via) in hosts.items():
                release_memory()
                runs[name][key].append(
                    await host_path_cost(length, deltas[name], size, persist=persist, via=via)
                )
    paths: dict[str, dict[str, Any]] = {}
    for name, label in TURN_LENGTH_PATHS.items():
        path: dict[str, Any] = {"label": label, "deltas": deltas.get(name), "us_per_delta": {}}
        if name in runs:
            path["us_per_delta"] = {
                key: statistics.median(r["us_per_delta"] for r in runs[name][key]) for key in keys
            }
            if name in hosts:
                path["peak_rss_growth_kb"] = {
                    key: max(r["peak_rss_growth_kb"] for r in runs[name][key]) for key in keys
                }
            path["runs"] = runs[name]
        else:  # derived: the SQLite row minus the memory row above it
            base = name.removesuffix("_persistence")
            sqlite_row, memory_row = paths[f"{base}_sqlite"], paths[f"{base}_memory"]
            path["us_per_delta"] = {
                key: sqlite_row["us_per_delta"][key] - memory_row["us_per_delta"][key]
                for key in keys
            }
        paths[name] = path
    shortest, longest = str(min(sizes.turn_lengths)), str(max(sizes.turn_lengths))
    for path in paths.values():
        costs = path["us_per_delta"]
        path["ratio_longest_vs_shortest"] = (
            costs[longest] / costs[shortest] if costs[shortest] > 0 else None
        )
    return {
        "turn_lengths": list(sizes.turn_lengths),
        "delta_bytes": size,
        "repeats": sizes.cost_repeats,
        "apply_window": APPLY_WINDOW,
        "snapshot_every": DEFAULTS.snapshot_every,
        "paths": paths,
    }


# -- 3. host start time with stored chats ---------------------------------------------------


async def build_data_dir(data_dir: str, sessions: int, chats_per_session: int) -> dict[str, Any]:
    """Create ``sessions`` x ``chats_per_session`` chats through the host's command handlers."""
    host = Host(Settings(data_dir=data_dir))
    await host.start()
    connection = host.open_connection(_NullTransport())
    started = time.perf_counter()
    pending = list(range(sessions))

    async def worker() -> None:
        while pending:
            pending.pop()
            session, _ = await _new_session(host, connection, "echo")
            for _ in range(chats_per_session - 1):
                await _new_chat(host, connection, session)

    try:
        await asyncio.gather(*(worker() for _ in range(min(64, sessions))))
        await host.store.flush()
    finally:
        await host.close_connection(connection)
        await host.stop(close_timeout=1.0)
    return {
        "build_seconds": time.perf_counter() - started,
        "sessions": sessions,
        "chats": sessions * chats_per_session,
    }


async def _probe_start(data_dir: str) -> dict[str, Any]:
    gc.collect()
    rss_before = vm_rss_kb()
    started = time.perf_counter()
    host = Host(Settings(data_dir=data_dir))
    await host.start()
    seconds = time.perf_counter() - started
    rss_after = vm_rss_kb()
    result = {
        "start_seconds": seconds,
        "rss_before_kb": rss_before,
        "rss_after_kb": rss_after,
        "rss_delta_kb": rss_after - rss_before,
        "sessions": len(host.session_index),
        "chats": len(host.chat_index),
        "chats_loaded": len(host.chats),
    }
    await host.stop(close_timeout=1.0)
    return result


def probe_start(data_dir: str) -> dict[str, Any]:
    """Time ``Host.start()`` over ``data_dir`` in a fresh interpreter."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.persistence", "--probe-start", data_dir],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    process_seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"start probe failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = process_seconds
    return result


def bench_start(sizes: Sizes) -> dict[str, Any]:
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ahp-bench-") as tmp:
        plans = [(0, 0), (sizes.stored_sessions, sizes.chats_per_session)]
        for sessions, per_session in plans:
            data_dir = str(Path(tmp) / f"data-{sessions}x{per_session}")
            build = asyncio.run(build_data_dir(data_dir, sessions, per_session))
            db = Path(data_dir) / DB_FILE
            db_bytes = sum(p.stat().st_size for p in db.parent.glob(DB_FILE + "*") if p.is_file())
            probes = [probe_start(data_dir) for _ in range(sizes.start_repeats)]
            cases.append(
                {
                    "stored_chats": build["chats"],
                    "stored_sessions": sessions,
                    "build_seconds": build["build_seconds"],
                    "db_bytes": db_bytes,
                    "start_seconds": statistics.median(p["start_seconds"] for p in probes),
                    "process_seconds": statistics.median(p["process_seconds"] for p in probes),
                    "rss_delta_kb": statistics.median(p["rss_delta_kb"] for p in probes),
                    "chats_indexed": probes[-1]["chats"],
                    "chats_loaded": probes[-1]["chats_loaded"],
                    "probes": probes,
                }
            )
    return {"repeats": sizes.start_repeats, "cases": cases}


# -- report ------------------------------------------------------------------------------------


# -- 4. lone turns --------------------------------------------------------------------------


async def lone_turns(mode: str, turns: int) -> dict[str, Any]:
    """``turns`` short echo turns in a row, one client over loopback, in this process."""
    with tempfile.TemporaryDirectory(prefix="ahp-bench-") as tmp:
        settings = mode_settings(mode, tmp)
        app = App(settings)
        await app.start()
        try:
            async with AhpClient.connect(app.urls[0]) as client:
                chat = await client.open_chat()
                await client.ask(chat, "warm up")
                times = []
                for _ in range(turns):
                    started = time.perf_counter()
                    await client.ask(chat, "what does this repository do?")
                    times.append(time.perf_counter() - started)
        finally:
            await app.stop(close_timeout=1.0)
    times.sort()
    return {
        "turns": turns,
        "p50_ms": statistics.median(times) * 1e3,
        "p90_ms": times[int(0.9 * (len(times) - 1))] * 1e3,
    }


async def bench_lone_turns(sizes: Sizes) -> dict[str, Any]:
    modes = {mode: await lone_turns(mode, sizes.lone_turns) for mode in STORE_MODES}
    off = modes["memory"]["p50_ms"]
    for mode, figures in modes.items():
        figures["label"] = STORE_MODES[mode]["label"]
        figures["ratio_vs_memory"] = figures["p50_ms"] / off
    return {"turns": sizes.lone_turns, "modes": modes}


def _chars(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1_000}k" if n >= 1_000 else str(n)


def _mb(kb: float) -> str:
    return f"+{kb / 1024:.0f} MB"


def format_report(results: dict[str, Any]) -> str:
    meta, lines = results["machine"], []
    lines.append(f"ahp-server {meta['ahp_server']} persistence benchmark — {meta['date']}")
    lines.append(
        f"machine: {meta['cpu_count']} CPUs ({meta['cpu_model']}), {meta['platform']}, "
        f"Python {meta['python']}, SQLite {meta['sqlite']}"
        + ("   [--quick]" if results["quick"] else "")
    )

    stream = results["streaming"]
    lines += [
        "",
        f"1. Streaming through one chat: {stream['deltas']:,} deltas x {stream['delta_bytes']} B,"
        f" one client over loopback (best of {stream['repeats']})",
        f"   {'store':<28}{'deltas/s':>10}{'seconds':>9}{'commits':>9}"
        f"{'deltas/commit':>15}{'on/off':>8}{'peak RSS':>10}",
    ]
    for mode in stream["modes"].values():
        per_commit = mode["deltas_per_commit"]
        lines.append(
            f"   {mode['label']:<28}{mode['deltas_per_s']:>10,.0f}{mode['seconds']:>9.2f}"
            f"{mode['commits']:>9,}{'-' if per_commit is None else f'{per_commit:,.0f}':>15}"
            f"{mode['ratio_vs_memory']:>8.2f}{_mb(mode['peak_rss_growth_kb']):>10}"
        )
    lines.append(
        "   (host and client share this process and event loop; on/off: deltas/s over the"
        " memory row's; peak RSS: growth during the turn)"
    )

    turn = results["turn_length"]
    keys = [str(n) for n in turn["turn_lengths"]]
    names = [_chars(int(k)) for k in keys]
    lines += [
        "",
        f"2. Per-delta cost vs characters already in the markdown part"
        f" ({turn['delta_bytes']} B deltas; median of {turn['repeats']}, peak RSS: max)",
        f"   {'path':<58}{'deltas':>7}"
        + "".join(f"{'µs/delta ' + n:>13}" for n in names)
        + f"{'ratio':>7}"
        + "".join(f"{'peak RSS ' + n:>13}" for n in names),
    ]
    for path in turn["paths"].values():
        costs = "".join(f"{path['us_per_delta'][k]:>13.1f}" for k in keys)
        ratio = path["ratio_longest_vs_shortest"]
        deltas = "" if path["deltas"] is None else f"{path['deltas']:,}"
        rss = path.get("peak_rss_growth_kb")
        peaks = "" if rss is None else "".join(f"{_mb(rss[k]):>13}" for k in keys)
        lines.append(
            f"   {path['label']:<58}{deltas:>7}{costs}"
            f"{'-' if ratio is None else f'{ratio:.1f}x':>7}{peaks}"
        )
    lines += [
        "   (store only: encode + append one small row per delta, no reducer. 'reducer only' is the"
        " pure reducer, which",
        "   copies the part per delta; the host's chat actor appends streamed text in O(1) and"
        " folds it lazily, and snapshots",
        f"   after {turn['snapshot_every']} actions and as many log bytes as the last snapshot."
        f" apply_server: {turn['apply_window']} in flight; provider turn:",
        "   io.text -> TurnRunner -> ChatActor, the real streaming path. '=' rows: SQLite minus"
        " memory.)",
    ]

    start = results["start"]
    lines += [
        "",
        f"3. Host.start() over a data dir, fresh process (median of {start['repeats']})",
        f"   {'stored chats':>12}{'sessions':>10}{'built in':>10}{'db size':>10}{'start':>10}"
        f"{'process':>10}{'RSS delta':>11}{'loaded':>8}",
    ]
    for case in start["cases"]:
        lines.append(
            f"   {case['stored_chats']:>12,}{case['stored_sessions']:>10,}"
            f"{case['build_seconds']:>9.1f}s"
            f"{case['db_bytes'] / 1e6:>8.1f}MB{case['start_seconds'] * 1e3:>8.1f}ms"
            f"{case['process_seconds']:>9.2f}s{case['rss_delta_kb'] / 1024:>9.1f}MB"
            f"{case['chats_loaded']:>8}"
        )
    lines.append(
        "   (start: Host(...) + await start() in-process; process: interpreter + imports +"
        " start + stop; loaded: chats loaded at start)"
    )
    lone = results["lone_turns"]
    lines += [
        "",
        f"4. Lone turns: {lone['turns']} short echo turns in a row, one client, nothing else",
        f"   {'store':<28}{'p50 ms':>9}{'p90 ms':>9}{'p50 on/off':>12}",
    ]
    for mode in lone["modes"].values():
        lines.append(
            f"   {mode['label']:<28}{mode['p50_ms']:>9.2f}{mode['p90_ms']:>9.2f}"
            f"{mode['ratio_vs_memory']:>12.2f}"
        )
    lines.append(f"\ntotal {results['seconds']:.1f} s")
    return "\n".join(lines)


def run(sizes: Sizes = FULL, *, out: Path | None = RESULTS, quick: bool = False) -> dict[str, Any]:
    """Run every part, print the table, write JSON to ``out`` (if given); return the results."""
    configure_logging("warning", "console")
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": machine_info(),
        "quick": quick,
        "sizes": dataclasses.asdict(sizes),
    }
    results["streaming"] = asyncio.run(bench_streaming(sizes))
    results["turn_length"] = asyncio.run(bench_turn_length(sizes))
    results["start"] = bench_start(sizes)
    results["lone_turns"] = asyncio.run(bench_lone_turns(sizes))
    results["seconds"] = time.perf_counter() - started
    publish_results(format_report(results), results, out)
    return results


def publish_results(report: str, results: dict[str, Any], out: Path | None) -> None:
    """Print the report and, when ``out`` is given, write the figures there as JSON."""
    print(report, flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"results: {out}")


def sized_main(
    prog: str,
    description: str | None,
    run: Callable[..., Any],
    sizes: tuple[Any, Any],
    results: Path,
    argv: Sequence[str] | None,
) -> int:
    """The command line of a benchmark with full and ``--quick`` sizes and an ``--out`` file."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    parser.add_argument("--out", type=Path, default=results, help="where to write the JSON")
    args = parser.parse_args(argv)
    full, quick = sizes
    run(quick if args.quick else full, out=args.out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.persistence", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (under ~20 s)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument("--probe-start", metavar="DATA_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe_start:
        configure_logging("warning", "console")
        print(json.dumps(asyncio.run(_probe_start(args.probe_start))))
        return 0
    run(QUICK if args.quick else FULL, out=args.out, quick=args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

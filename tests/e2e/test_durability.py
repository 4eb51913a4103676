"""Durability over real processes: kill -9 mid-stream, SIGTERM restarts, bad database files."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ahp_server.client import AhpClient, turn_error
from ahp_server.protocol import codec
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatState,
    MarkdownResponsePart,
    SessionState,
    Turn,
)
from tests.e2e.helpers import TIMEOUT, Daemon, comparable, every_turn
from tests.postgres import postgres_schema, query

ROOT = "ahp-root://"


@pytest.fixture
async def daemon(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Daemon]:
    """A daemon on a data dir; parametrize indirectly with a ``--durability`` value,
    or ``"postgres"`` for a daemon whose store is a fresh PostgreSQL schema."""
    durability = getattr(request, "param", "normal")
    if durability == "postgres":
        async with postgres_schema() as store_url:
            config = tmp_path / "host.toml"
            config.write_text(f'[storage]\nstore = "{store_url}"\n', encoding="utf-8")
            process = Daemon(tmp_path / "data", "--config", str(config))
            try:
                yield process
            finally:
                await process.close()  # before the schema is dropped
            # The daemon really kept its log in PostgreSQL (not in the data dir).
            assert (await query(store_url, "SELECT count(*) FROM log"))[0][0] > 0
            assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
        return
    process = Daemon(tmp_path / "data", "--durability", durability)
    try:
        yield process
    finally:
        await process.close()


def markdown(turn: ActiveTurn | Turn) -> str:
    return "".join(p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart))


def streamed_so_far(client: AhpClient, chat: str) -> str:
    turn = client.confirmed(chat, ChatState).active_turn
    return markdown(turn) if isinstance(turn, ActiveTurn) else ""


# normal commits on the event loop, full in a writer thread, postgres in a writer
# task over a socket to PostgreSQL: all keep the guarantee.
@pytest.mark.parametrize("daemon", ["normal", "full", "postgres"], indirect=True)
async def test_kill_9_mid_stream_loses_nothing_any_client_saw(daemon: Daemon) -> None:
    url = await daemon.start()
    words = " ".join(f"word{i}" for i in range(400))
    async with (
        AhpClient.connect(url) as alice,
        AhpClient.connect(url) as bob,
    ):
        chat = await alice.open_chat()
        await bob.subscribe(chat)
        await alice.ask(chat, "a finished turn first", timeout=TIMEOUT)
        turn_id = await alice.send_message(chat, f"/slow 5 {words}")
        for client in (alice, bob):
            await client.wait_for(
                lambda c: len(streamed_so_far(c, chat).split()) >= 10, timeout=TIMEOUT
            )
        await daemon.kill()
        seen = {c.client_id: (streamed_so_far(c, chat), c.server_seq) for c in (alice, bob)}
        await alice.wait_closed(timeout=TIMEOUT)
        await bob.wait_closed(timeout=TIMEOUT)

        url = await daemon.start()
        for client in (alice, bob):
            text_before, last_seen = seen[client.client_id]
            before = len(client.envelopes)
            assert await client.reconnect(url) == "replay"
            replayed = list(client.envelopes)[before:]
            assert all(e.server_seq > last_seen for e in replayed)  # numbering moved on
            state = client.confirmed(chat, ChatState)
            interrupted = state.turns[-1]
            assert interrupted.id == turn_id
            assert interrupted.state == "error"
            assert getattr(turn_error(interrupted), "error_type", None) == "interrupted"
            assert not isinstance(state.active_turn, ActiveTurn)
            # Everything this client saw before the kill is there, in order.
            assert markdown(interrupted).startswith(text_before)
            assert state.turns[0].state == "complete"
        async with AhpClient.connect(url) as carol:
            fresh = await carol.subscribe(chat)
            assert comparable(fresh) == comparable(alice.confirmed(chat))
            assert comparable(fresh) == comparable(bob.confirmed(chat))
            # New sequence numbers continue above every earlier one.
            assert carol.server_seq > max(last for _, last in seen.values())
            assert await carol.ask(chat, "still works", timeout=TIMEOUT) == "still works"


async def every_turn_text(client: AhpClient, chat: str) -> list[str]:
    """Page every older turn in (``fetchTurns``); the texts of all, oldest first."""
    return [t.message.text for t in await every_turn(client, chat)]


async def exact_states(url: str, channels: list[str]) -> dict[str, Any]:
    """The host's own states, field by field (fresh snapshots, not client folds)."""
    async with AhpClient.connect(url) as observer:
        return {
            channel: json.loads(codec.encode(await observer.subscribe(channel)))
            for channel in channels
        }


@pytest.mark.parametrize("daemon", ["normal", "full"], indirect=True)
async def test_sigterm_restart_keeps_every_state_identical(daemon: Daemon) -> None:
    url = await daemon.start()
    async with AhpClient.connect(url) as client:
        chat = await client.open_chat()
        await client.ask(chat, "one", timeout=TIMEOUT)
        sessions = [uri for uri in [s.resource for s in (await client.list_sessions()).items]]
        session = sessions[0]
        other = await client.create_chat(session, subscribe=True)
        await client.ask(other, "two", timeout=TIMEOUT)
        second_session = await client.create_session(
            working_directories=["file:///tmp/w"], subscribe=True
        )
        await client.wait_for(
            lambda c: c.confirmed(second_session, SessionState).lifecycle == "ready",
            timeout=TIMEOUT,
        )
        default = client.confirmed(second_session, SessionState).default_chat
        assert isinstance(default, str)
    channels = [ROOT, session, chat, other, second_session, default]
    before = await exact_states(url, channels)
    listed_before = None
    async with AhpClient.connect(url) as client:
        listed_before = json.loads(codec.encode(await client.list_sessions()))

    assert await daemon.terminate() == 0
    url = await daemon.start()
    after = await exact_states(url, channels)
    for channel in channels:
        assert after[channel] == before[channel], f"{channel} changed across the restart"
    async with AhpClient.connect(url) as client:
        assert json.loads(codec.encode(await client.list_sessions())) == listed_before


async def test_reconnect_after_restart_resumes(daemon: Daemon) -> None:
    url = await daemon.start()
    async with AhpClient.connect(url) as alice:
        chat = await alice.open_chat()
        await alice.ask(chat, "before the restart", timeout=TIMEOUT)
        assert await daemon.terminate() == 0
        await alice.wait_closed(timeout=TIMEOUT)
        url = await daemon.start()
        assert await alice.reconnect(url) in ("replay", "snapshot")
        assert await alice.ask(chat, "after", timeout=TIMEOUT) == "after"
        assert [t.message.text for t in alice.confirmed(chat, ChatState).turns] == [
            "before the restart",
            "after",
        ]


async def test_old_turns_page_in_from_disk(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "data")
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat()
            for i in range(8):
                await client.ask(chat, f"turn {i}", timeout=TIMEOUT)
        assert await daemon.terminate() == 0
        # Few turns kept in memory: the rest must come from disk.
        daemon.extra = ()
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            state = await client.subscribe(chat, turns=2)
            assert isinstance(state, ChatState)
            assert [t.message.text for t in state.turns] == ["turn 6", "turn 7"]
            texts = await every_turn_text(client, chat)
            assert texts == [f"turn {i}" for i in range(8)]
    finally:
        await daemon.close()


@pytest.mark.parametrize("snapshot_every", ["4", "100000"])
async def test_kill_9_after_many_turns_rebuilds_them_from_turns_and_log(
    tmp_path: Path, snapshot_every: str
) -> None:
    """A turn end writes its turn row, not a snapshot: after kill -9 the chat is its
    snapshot, the stored turns up to the snapshot's count, and the log replayed
    after it (4: snapshots in between; 100000: none since the chat was created)."""
    config = tmp_path / "host.toml"
    config.write_text(f"[storage]\nsnapshot_every = {snapshot_every}\n", encoding="utf-8")
    daemon = Daemon(tmp_path / "data", "--config", str(config))
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat()
            for i in range(10):
                await client.ask(chat, f"turn {i}", timeout=TIMEOUT)
        async with AhpClient.connect(url) as client:
            session = (await client.list_sessions()).items[0].resource
        before = await exact_states(url, [session, chat])
        await daemon.kill()
        url = await daemon.start()
        assert await exact_states(url, [session, chat]) == before
        async with AhpClient.connect(url) as client:
            state = await client.subscribe(chat, turns=2)
            assert isinstance(state, ChatState)
            texts = await every_turn_text(client, chat)
            assert texts == [f"turn {i}" for i in range(10)]
            assert await client.ask(chat, "turn 10", timeout=TIMEOUT) == "turn 10"
        await daemon.kill()
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            await client.subscribe(chat, turns=1)
            texts = await every_turn_text(client, chat)
            assert texts == [f"turn {i}" for i in range(11)]
    finally:
        await daemon.close()


async def test_dispose_deletes_stored_data(daemon: Daemon) -> None:
    url = await daemon.start()
    async with AhpClient.connect(url) as client:
        chat = await client.open_chat()
        await client.ask(chat, "private", timeout=TIMEOUT)
        session = (await client.list_sessions()).items[0].resource
        await client.dispose_session(session)
    assert await daemon.terminate() == 0
    import sqlite3

    conn = sqlite3.connect(daemon.data_dir / "ahp-server.db")
    for table, column in (("channels", "uri"), ("log", "channel"), ("turns", "chat")):
        rows = conn.execute(
            f"SELECT count(*) FROM {table} WHERE {column} IN (?, ?)",
            (session, chat),
        ).fetchone()
        assert rows[0] == 0, table
    url = await daemon.start()
    async with AhpClient.connect(url) as client:
        assert (await client.list_sessions()).items == ()


async def test_a_disposal_is_durable_before_its_answer(daemon: Daemon) -> None:
    """``disposeSession`` and ``disposeChat`` answered, then ``kill -9`` at once: a
    restarted host never brings back what it answered gone (docs/durability.md)."""
    rounds = 6
    kills = 0
    for _ in range(rounds):
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat()
            session = (await client.list_sessions()).items[-1].resource
            extra = await client.create_chat(session)
            await client.dispose_chat(extra)
        await daemon.kill()  # the answer is in: no commit may be left to make
        kills += 1
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            state = await client.subscribe(session)
            assert isinstance(state, SessionState)
            assert [c.resource for c in state.chats] == [chat], "a disposed chat came back"
            await client.dispose_session(session)
        await daemon.kill()
        kills += 1
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            listed = [s.resource for s in (await client.list_sessions()).items]
            assert session not in listed, "a disposed session came back"
        assert await daemon.terminate() == 0
    assert kills == 2 * rounds


async def test_an_unreadable_database_stops_the_start_with_a_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "ahp-server.db"
    garbage = b"\x00\x01 not a database " * 64
    db.write_bytes(garbage)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ahp_server",
        "serve",
        "--port",
        "0",
        "--data-dir",
        str(data),
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        _, stderr = await process.communicate()
    assert process.returncode != 0
    message = stderr.decode().strip().splitlines()[-1]
    assert str(db) in message
    assert db.read_bytes() == garbage  # nothing overwritten


async def test_a_turn_waiting_for_confirmation_is_resolved_on_recovery(daemon: Daemon) -> None:
    url = await daemon.start()
    async with AhpClient.connect(url) as client:
        chat = await client.open_chat()
        session = (await client.list_sessions()).items[0].resource
        await client.subscribe(session)
        await client.send_message(chat, "/tool")
        await client.wait_for(
            lambda c: bool(c.confirmed(session, SessionState).input_needed), timeout=TIMEOUT
        )
    await daemon.kill()
    url = await daemon.start()
    async with AhpClient.connect(url) as client:
        state = await client.subscribe(chat)
        assert isinstance(state, ChatState)
        assert state.turns[-1].state == "error"
        session_state = await client.subscribe(session)
        assert isinstance(session_state, SessionState)
        assert not session_state.input_needed  # nothing left waiting for an answer
        assert session_state.status & 0b11111 != 24


async def restored_states(backup: Path, data_dir: Path, channels: list[str]) -> Any:
    """Restore ``backup`` into a fresh ``data_dir``, start a host on it: the channels' states."""
    restored = Daemon(data_dir)
    restored.data_dir.mkdir()
    await asyncio.to_thread(shutil.copyfile, backup, restored.data_dir / "ahp-server.db")
    try:
        url = await restored.start()
        return await exact_states(url, channels)
    finally:
        await restored.close()


async def test_online_backup_restores_to_the_same_state(daemon: Daemon, tmp_path: Path) -> None:
    url = await daemon.start()
    async with AhpClient.connect(url) as client:
        chat = await client.open_chat()
        await client.ask(chat, "keep me", timeout=TIMEOUT)
    backup = tmp_path / "backup.db"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ahp_server", "backup", str(backup),
        "--data-dir", str(daemon.data_dir),
    )  # fmt: skip
    async with asyncio.timeout(30):
        assert await process.wait() == 0
    before = await exact_states(url, [chat])
    assert await daemon.terminate() == 0
    assert await restored_states(backup, tmp_path / "restored", [chat]) == before


async def test_a_backup_of_a_data_dir_whose_path_has_uri_characters(tmp_path: Path) -> None:
    """``backup`` opens the database by URI (read-only): a folder named with ``?``,
    ``#`` and ``%`` is the folder it names, not a query or a fragment."""
    data_dir = tmp_path / "data #1?mode=rw&x=%41"
    daemon = Daemon(data_dir)
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat()
            await client.ask(chat, "keep me too", timeout=TIMEOUT)
        before = await exact_states(url, [chat])
    finally:
        await daemon.close()
    backup = tmp_path / "copy.db"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ahp_server", "backup", str(backup), "--data-dir", str(data_dir),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(30):
        _, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert await restored_states(backup, tmp_path / "restored", [chat]) == before

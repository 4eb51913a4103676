"""The SQLite store on its own: schema and migrations, refusal of bad files, WAL checkpoints.

The store contract shared with PostgreSQL runs against both in test_stores.py.
"""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ahp_server.store.base import Store, StoreError
from ahp_server.store.sqlite import (
    CHECKPOINT_TRIES,
    MIGRATIONS,
    SCHEMA_VERSION,
    SqliteStore,
    complete_copy,
)
from ahp_server.store.tail import Position, replay
from tests.conftest import captured_logs
from tests.load import FsyncLoop, fsync_loop

TIMEOUT = 10.0


def stored_seqs(path: Path, reader: sqlite3.Connection) -> set[int]:
    """Every serverSeq a store opened now would have: in the log, or in the tail after it."""
    seqs: set[int] = set()
    for (entries,) in reader.execute("SELECT entries FROM log"):
        seqs.update(seq for seq, _, _ in json.loads(entries))
    row = reader.execute("SELECT value FROM meta WHERE key = 'tail'").fetchone()
    for _, first, last, _ in replay(path, Position.decode(row[0]) if row else None).rows:
        seqs.update(range(first, last + 1))
    return seqs


async def test_a_new_store_is_created_and_migrated(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "db" / "ahp.db")
    assert store.open() == 0
    await store.close()
    conn = sqlite3.connect(tmp_path / "db" / "ahp.db")
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert int(version[0]) == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])  # on the loop / in a thread
async def test_envelopes_commit_in_order_before_their_callbacks(
    tmp_path: Path, synchronous: str
) -> None:
    path = tmp_path / "ahp.db"
    store = SqliteStore(path, synchronous=synchronous)
    store.open()
    committed: list[int] = []
    visible_at_callback: list[bool] = []
    reader = sqlite3.connect(path)

    def on_commit(seq: int) -> None:
        committed.append(seq)
        visible_at_callback.append(seq in stored_seqs(path, reader))

    for seq in range(1, 501):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", lambda s=seq: on_commit(s))
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert committed == list(range(1, 501))
    assert all(visible_at_callback)  # durable before anyone is told
    assert stored_seqs(path, reader) == set(range(1, 501))
    assert store.commits < 500  # grouped: many envelopes per transaction
    await store.close()
    assert SqliteStore(path).open() == 500  # the high-water mark survived


def test_a_corrupted_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    garbage = b"definitely not sqlite " * 100
    path.write_bytes(garbage)
    with pytest.raises(StoreError) as caught:
        SqliteStore(path).open()
    assert str(path) in str(caught.value)
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ahp.db"]


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    store = SqliteStore(path)
    store.open()
    await store.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError) as caught:
        SqliteStore(path).open()
    assert "newer" in str(caught.value)
    assert str(path) in str(caught.value)


async def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError):
        SqliteStore(path).open()


async def test_a_channel_deleted_in_the_batch_of_its_envelopes_leaves_no_log(
    tmp_path: Path,
) -> None:
    # A commit writes its envelopes before its other writes: a deletion queued
    # after a channel's envelopes still removes them (no orphaned log rows).
    path = tmp_path / "ahp.db"
    store = SqliteStore(path)
    store.open()
    for uri in ("ahp-chat:/c", "ahp-chat:/d"):
        store.put_channel(uri, "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    for seq in range(1, 7):
        channel = "ahp-chat:/c" if seq % 2 else "ahp-chat:/d"
        store.append_envelope(seq, channel, float(seq), b"{}", lambda: None)
    store.delete_channel("ahp-chat:/c")
    commits = store.commits
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert store.commits == commits + 1  # one transaction
    conn = sqlite3.connect(path)
    channels = [c for (c,) in conn.execute("SELECT DISTINCT channel FROM log ORDER BY channel")]
    assert channels == ["ahp-chat:/d"]
    loaded = await store.load("ahp-chat:/d", retained_turns=10)
    assert loaded is not None
    assert [seq for seq, _, _ in loaded.envelopes] == [2, 4, 6]
    await store.close()
    assert SqliteStore(path).open() == 6


def test_bad_synchronous_setting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        SqliteStore(tmp_path / "x.db", synchronous="sometimes")


async def test_a_schema_1_log_is_migrated_to_segments(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("BEGIN;" + MIGRATIONS[0] + "COMMIT;")
    conn.execute("INSERT INTO meta VALUES ('schema_version', 1)")
    conn.execute("INSERT INTO meta VALUES ('server_seq', 7)")
    conn.execute(
        "INSERT INTO channels (uri, kind, session, created_at) "
        "VALUES ('ahp-chat:/c', 'chat', 'ahp-session:/s', '2026-01-01T00:00:00.000Z')"
    )
    for seq in (5, 6, 7):
        conn.execute(
            "INSERT INTO envelopes VALUES (?, 'ahp-chat:/c', ?, ?)",
            (seq, 1733150000000.5 + seq, b'{"serverSeq":%d}' % seq),
        )
    conn.close()
    store = SqliteStore(path)
    assert store.open() == 7
    loaded = await store.load("ahp-chat:/c", retained_turns=10)
    assert loaded is not None
    assert loaded.envelopes == [
        (seq, 1733150000000.5 + seq, b'{"serverSeq":%d}' % seq) for seq in (5, 6, 7)
    ]
    await store.close()
    check = sqlite3.connect(path)
    assert (
        int(check.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
        == SCHEMA_VERSION
    )
    assert (
        check.execute("SELECT name FROM sqlite_master WHERE name = 'envelopes'").fetchone() is None
    )


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
async def test_a_failed_commit_stops_the_store_and_delivers_nothing_of_it(
    tmp_path: Path, synchronous: str
) -> None:
    store = SqliteStore(tmp_path / "ahp.db", synchronous=synchronous)
    store.open()
    delivered: list[int] = []
    store.append_envelope(1, "ahp-chat:/c", 1.0, b"{}", delivered.append, 1)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    # The same (channel, serverSeq) again: the log refuses it, the commit fails.
    # (With a deletion in the commit, which SQLite's store commits with the
    # tail folded in: the tail takes envelopes unchecked otherwise, and
    # test_sqlite.py fails a tail write and a transaction of writes by itself.)
    store.append_envelope(1, "ahp-chat:/c", 1.0, b"{}", delivered.append, 99)
    store.delete_channel("ahp-chat:/gone")
    with pytest.raises(StoreError, match="commit failed"):
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
    assert delivered == [1]  # what failed was never delivered
    with pytest.raises(StoreError, match="failed"):
        store.append_envelope(2, "ahp-chat:/c", 1.0, b"{}", delivered.append, 2)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


#: The WAL bound the next tests set: 1/16 of the default (docs/durability.md) ...
WAL_LIMIT = 1024 * 1024
#: ... and the most one transaction of theirs adds past it: a fold of the log's
#: tail holds one or two commits of 100 envelopes of ~1 KB (~200 KB of log
#: rows), ~60 pages of 4 KiB; twice that, for the index and the meta row.
ONE_TRANSACTION = 512 * 1024


@pytest.fixture(params=["idle", "slow"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FsyncLoop | None]:
    """The disk to itself, or slowed by a process fsyncing a file beside the database."""
    if request.param == "idle":
        yield None
        return
    with fsync_loop(tmp_path) as loop:
        yield loop


async def wait_fsyncs(loop: FsyncLoop, more_than: int) -> int:
    """Until ``loop`` has done more than ``more_than`` fsyncs (bounded); how many it has."""
    async with asyncio.timeout(60):
        while (done := loop.fsyncs) <= more_than:
            assert loop.process.poll() is None, "the fsync loop died"
            await asyncio.sleep(0.05)
    return done


def small_store(path: Path, synchronous: str = "NORMAL") -> SqliteStore:
    """A store with the WAL thresholds 1/16 of the defaults (with NORMAL: a
    checkpoint every ~256 KB of WAL, the tail folded every 64 KB)."""
    store = SqliteStore(
        path,
        synchronous=synchronous,
        checkpoint_bytes=256 * 1024,
        wal_limit=WAL_LIMIT,
        tail_fold_bytes=64 * 1024,
    )
    store.open()
    store.put_channel("ahp-chat:/c", "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    return store


#: A streamed delta of ~1 KB.
DELTA = b'{"delta":"' + b"x" * 1000 + b'"}'


async def stream(store: SqliteStore, first: int, delivered: list[int]) -> int:
    """Commit 100 envelopes of ~1 KB from ``first`` (delivered into ``delivered``);
    the WAL file's size once committed."""
    for seq in range(first, first + 100):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, DELTA, delivered.append, seq)
    await store.flush()
    return _size(Path(f"{store.path}-wal"))


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
async def test_checkpoints_keep_the_wal_bounded_while_a_chat_streams(
    tmp_path: Path, disk: FsyncLoop | None, synchronous: str
) -> None:
    """The WAL file never passes its bound by more than one transaction, however
    slow the disk makes the checkpoints (docs/durability.md, "The WAL's bound")."""
    # NORMAL: commits on the loop, checkpoints in a thread while they go on;
    # FULL: commits and checkpoints in the writer thread.
    store = small_store(tmp_path / "ahp.db", synchronous)
    delivered: list[int] = []
    largest_wal = 0
    seq = 0
    fsyncs = 0 if disk is None else await wait_fsyncs(disk, 0)
    async with asyncio.timeout(120):
        for _ in range(200):  # ~20 MB of log in commits of 100 envelopes
            largest_wal = max(largest_wal, await stream(store, seq + 1, delivered))
            seq += 100
        if disk is not None:  # the disk was really busy while the chat streamed
            await wait_fsyncs(disk, fsyncs)
        loaded = await store.load("ahp-chat:/c", retained_turns=1)
        await store.close()
    assert delivered == list(range(1, seq + 1))
    # Racing checkpoints cannot let the WAL start over while commits keep
    # coming, and the WAL grows while they fsync; commits waited for a
    # truncating checkpoint whenever it reached the bound. Without that it
    # would hold all ~20 MB.
    assert 0 < largest_wal <= store.wal_peak <= WAL_LIMIT + ONE_TRANSACTION
    assert store.wal_holds > 0
    assert loaded is not None
    assert [s for s, _, _ in loaded.envelopes] == list(range(1, seq + 1))


async def test_a_reader_that_keeps_the_wal_from_being_truncated_is_waited_for_then_logged(
    tmp_path: Path,
) -> None:
    """A reader holding the WAL (a long backup, say) keeps the truncating checkpoint
    from restarting it: the commits wait a bounded time, the store says so in the
    log and commits go on; once the reader has gone, the next hold truncates."""
    path = tmp_path / "ahp.db"
    store = small_store(path)
    delivered: list[int] = []
    seq = 0
    with captured_logs() as logs:
        async with asyncio.timeout(120):
            await stream(store, seq + 1, delivered)
            seq += 100
            reader = sqlite3.connect(path, isolation_level=None)
            reader.execute("BEGIN")
            assert reader.execute("SELECT count(*) FROM channels").fetchone() == (1,)
            # It reads the WAL as it stands now; the WAL grows to its bound.
            while not any(e["event"].startswith("WAL past its bound") for e in logs):
                assert seq < 200 * 100, "no truncating checkpoint was kept from it"
                await stream(store, seq + 1, delivered)
                seq += 100
            assert delivered == list(range(1, seq + 1))  # nothing waits for ever
            reader.execute("COMMIT")
            reader.close()
            # The next hold (another bound's worth of WAL later) truncates it.
            while await stream(store, seq + 1, delivered) > WAL_LIMIT // 2:
                seq += 100
                assert seq < 400 * 100, "the WAL was never truncated again"
            seq += 100
            await store.close()
    assert delivered == list(range(1, seq + 1))
    warnings = [e for e in logs if e["event"].startswith("WAL past its bound")]
    assert len(warnings) == 1
    assert warnings[0]["tries"] == CHECKPOINT_TRIES
    assert warnings[0]["wal_bytes"] >= WAL_LIMIT


async def test_schema_3_marks_sessions_without_a_chat_as_maybe_creating(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("BEGIN;" + MIGRATIONS[0] + MIGRATIONS[1] + "COMMIT;")
    conn.execute("INSERT INTO meta VALUES ('schema_version', 2)")
    rows = [
        ("ahp-session:/lonely", "session", None),
        ("ahp-session:/busy", "session", None),
        ("ahp-chat:/c", "chat", "ahp-session:/busy"),
    ]
    for uri, kind, session in rows:
        conn.execute(
            "INSERT INTO channels (uri, kind, session, created_at) VALUES (?, ?, ?, 'x')",
            (uri, kind, session),
        )
    conn.close()
    store = SqliteStore(path)
    store.open()
    unfinished = {row.uri: row.unfinished for row in await store.channels()}
    await store.close()
    assert unfinished == {
        "ahp-session:/lonely": "creating",
        "ahp-session:/busy": None,
        "ahp-chat:/c": None,
    }


async def test_schema_5_moves_the_log_and_turns_into_serverseq_order(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("BEGIN;" + "".join(MIGRATIONS[n] for n in range(4)) + "COMMIT;")
    conn.execute("INSERT INTO meta VALUES ('schema_version', 4)")
    for uri in ("ahp-chat:/a", "ahp-chat:/b"):
        conn.execute(
            "INSERT INTO channels (uri, kind, session, created_at) VALUES (?, 'chat', 's', 'x')",
            (uri,),
        )
    segments = [("ahp-chat:/b", 1, 2), ("ahp-chat:/a", 3, 3), ("ahp-chat:/b", 4, 5)]
    for channel, first, last in segments:
        entries = b"[" + b",".join(b"[%d,1.0,{}]" % n for n in range(first, last + 1)) + b"]"
        conn.execute("INSERT INTO log VALUES (?, ?, ?, ?)", (channel, first, last, entries))
    for position in (1, 0):
        conn.execute(
            "INSERT INTO turns VALUES ('ahp-chat:/a', ?, ?, ?)",
            (position, f"t{position}", b'{"id":"t%d"}' % position),
        )
    conn.close()
    store = SqliteStore(path)
    assert store.open() == 5
    b = await store.load("ahp-chat:/b", retained_turns=10)
    assert b is not None
    assert [seq for seq, _, _ in b.envelopes] == [1, 2, 4, 5]
    assert await store.turns("ahp-chat:/a", 2, 10) == [b'{"id":"t0"}', b'{"id":"t1"}']
    store.put_turn("ahp-chat:/a", 1, "t1b", b'{"id":"t1b"}')  # a position is replaced
    store.append_envelope(6, "ahp-chat:/a", 1.0, b"{}", lambda: None)
    await store.close()
    check = sqlite3.connect(path)
    version = check.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert int(version[0]) == SCHEMA_VERSION
    assert [r[0] for r in check.execute("SELECT first_seq FROM log ORDER BY rowid")] == [1, 3, 4, 6]
    check.close()
    store = SqliteStore(path)
    assert store.open() == 6  # the trigger keeps the high-water mark on the new table
    assert await store.turns("ahp-chat:/a", 2, 10) == [b'{"id":"t0"}', b'{"id":"t1b"}']
    await store.close()


async def test_schema_6_keeps_the_remembered_clients_and_adds_their_user(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("BEGIN;" + "".join(MIGRATIONS[n] for n in range(5)) + "COMMIT;")
    conn.execute("INSERT INTO meta VALUES ('schema_version', 5)")
    conn.execute("INSERT INTO clients VALUES ('old-client', '0.6.0', 1)")
    conn.close()
    store = SqliteStore(path)
    store.open()
    assert await store.clients() == [("old-client", "0.6.0", None)]  # no user known
    store.put_client("new-client", "0.7.0", user="alice")
    await store.close()
    again = SqliteStore(path)
    again.open()
    assert await again.clients() == [
        ("old-client", "0.6.0", None),
        ("new-client", "0.7.0", "alice"),
    ]
    await again.close()


async def test_history_reads_are_bounded_in_bytes(tmp_path: Path) -> None:
    """``load_chat`` and ``turns_within`` stop at a byte budget, newest first, and
    always give at least one turn; the base class's defaults (read by count,
    then cut) agree with SqliteStore's (docs/durability.md "History")."""
    store = SqliteStore(tmp_path / "ahp.db")
    store.open()
    chat = "ahp-chat:/c"
    store.put_channel(chat, "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    sizes = [100, 100, 100, 1000, 100]
    turns = [b'{"id":"t%d","pad":"%s"}' % (i, b"x" * (n - 20)) for i, n in enumerate(sizes)]
    for position, turn in enumerate(turns):
        store.put_turn(chat, position, f"t{position}", turn)
    store.put_snapshot(chat, 1, b"{}", len(turns))
    await store.flush()

    for load in (store.load_chat, functools.partial(Store.load_chat, store)):
        loaded = await load(chat, retained_turns=10, retained_bytes=500)
        assert loaded is not None
        assert (loaded.turns, loaded.first_turn_position) == (turns[4:], 4)  # 1000 does not fit
        loaded = await load(chat, retained_turns=3, retained_bytes=10_000)
        assert loaded is not None
        assert (loaded.turns, loaded.first_turn_position) == (turns[2:], 2)  # the count bound
        loaded = await load(chat, retained_turns=10, retained_bytes=10)
        assert loaded is not None
        assert (loaded.turns, loaded.first_turn_position) == (turns[4:], 4)  # never none
    for page in (store.turns_within, functools.partial(Store.turns_within, store)):
        assert await page(chat, 4, 10, len(turns[2]) + len(turns[3])) == turns[2:4]
        assert await page(chat, 4, 10, 1) == turns[3:4]
        assert await page(chat, 3, 2, 10_000) == turns[1:3]
        assert await page(chat, 0, 10, 10_000) == []
    await store.close()


async def test_row_writes_within_one_commit_write_each_row_once(tmp_path: Path) -> None:
    # A session's catalogue row and a chat's unfinished-turn marker change
    # twice a turn; within one commit only their newest values are written.
    path = tmp_path / "ahp.db"
    store = SqliteStore(path)
    store.open()
    session, chat = "ahp-session:/s", "ahp-chat:/c"
    created = "2026-01-01T00:00:00.000Z"
    statements: list[str] = []
    store._writer_conn.set_trace_callback(statements.append)  # counts the statements
    store.put_channel(chat, "chat", session, created, None)
    for turn in range(3):
        store.put_channel(session, "session", None, created, b'{"turn":%d}' % turn)
        store.set_unfinished(chat, f"turn-{turn}")
        store.append_envelope(turn + 1, chat, 1.0, b"{}", lambda: None)
        store.set_unfinished(chat, None if turn == 2 else f"turn-{turn}")
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    writes = [s for s in statements if s.startswith(("INSERT INTO channels", "UPDATE channels"))]
    assert len(writes) == 3  # the chat's row, the session's row, the marker: once each
    conn = sqlite3.connect(path)
    rows = dict(conn.execute("SELECT uri, summary FROM channels").fetchall())
    assert rows == {chat: None, session: b'{"turn":2}'}  # the newest values
    (marker,) = conn.execute("SELECT active_turn FROM channels WHERE uri = ?", (chat,)).fetchone()
    assert marker is None
    # After the commit a new value is queued anew, and a deletion is not merged across.
    store.set_unfinished(chat, "turn-9")
    store.delete_channel(session)
    store.put_channel(session, "session", None, created, b'{"again":true}')
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT active_turn FROM channels WHERE uri = ?", (chat,)).fetchone() == (
        "turn-9",
    )
    assert conn.execute("SELECT summary FROM channels WHERE uri = ?", (session,)).fetchone() == (
        b'{"again":true}',
    )


async def test_the_high_water_mark_survives_pruning_every_log_row_of_the_newest_channel(
    tmp_path: Path,
) -> None:
    # Schema 7 keeps no mark per commit: a store opens at the newest of the
    # mark, the log and the snapshots. Pruning can leave a channel's newest
    # number only in its snapshot.
    path = tmp_path / "ahp.db"
    store = SqliteStore(path)
    store.open()
    store.put_channel("ahp-chat:/c", "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    for seq in range(1, 6):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", lambda: None)
    store.put_snapshot("ahp-chat:/c", 5, b"{}", 0)
    async with asyncio.timeout(TIMEOUT):
        await store.channels()  # a read: the snapshot is written first (with the next fold)
    store.put_snapshot("ahp-chat:/c", 5, b"{}", 0)  # prunes the log up to the previous one
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM log").fetchone() == (0,)
    assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == []
    conn.close()
    again = SqliteStore(path)
    assert again.open() == 5
    await again.close()


async def test_schema_7_drops_the_trigger_and_keeps_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("BEGIN;" + "".join(MIGRATIONS[n] for n in range(6)) + "COMMIT;")
    conn.execute("INSERT INTO meta VALUES ('schema_version', 6)")
    conn.execute("INSERT INTO log VALUES (3, 'ahp-chat:/c', 4, '[]')")  # the trigger: mark 4
    conn.execute("DELETE FROM log")  # the newest rows gone; the mark stays
    conn.close()
    store = SqliteStore(path)
    assert store.open() == 4
    store.append_envelope(5, "ahp-chat:/c", 1.0, b"{}", lambda: None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == []
    assert conn.execute("SELECT value FROM meta WHERE key = 'server_seq'").fetchone() == (4,)
    conn.close()
    assert SqliteStore(path).open() == 5  # from the log now


async def interleaved_commit(store: SqliteStore, first: int) -> None:
    """One commit of a chat's envelope, its session's, then the chat's again: two
    log segments whose ranges overlap (the chat's first..first+2, the session's
    first+1), the newest number in the segment with the lower ``first_seq``."""
    for seq, channel in ((first, "ahp-chat:/c"), (first + 1, "ahp-session:/s")):
        store.append_envelope(seq, channel, 1.0, b"{}", lambda: None)
    store.append_envelope(first + 2, "ahp-chat:/c", 1.0, b"{}", lambda: None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()


@pytest.mark.parametrize("synchronous", ["normal", "full"])
async def test_a_store_reopens_above_the_newest_number_of_overlapping_segments(
    tmp_path: Path, synchronous: str
) -> None:
    """The row with the highest ``first_seq`` (the session's, 11) is not the one
    with the newest number (the chat's, 12): a store opening at 11 would number
    the next envelope 12 again, a number clients already hold."""
    path = tmp_path / "ahp.db"
    store = SqliteStore(path, synchronous=synchronous)
    store.open()
    await interleaved_commit(store, 10)
    await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute(
        "SELECT channel, first_seq, last_seq FROM log ORDER BY first_seq"
    ).fetchall() == [
        ("ahp-chat:/c", 10, 12),
        ("ahp-session:/s", 11, 11),
    ]
    conn.close()
    again = SqliteStore(path, synchronous=synchronous)
    assert again.open() == 12
    await again.close()


# -- the log's tail (store/tail.py): commits of envelopes only -------------------------------

WRITER = Path(__file__).with_name("tail_writer.py")
CHAT = "ahp-chat:/c"
OTHER = "ahp-chat:/other"


def write_and_die(path: Path, steps: list[list[object]]) -> dict[str, Any]:
    """Run tail_writer.py's ``steps`` on ``path`` in a process that ends with SIGKILL."""
    done = subprocess.run(
        [sys.executable, str(WRITER), str(path), json.dumps(steps)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])  # after the store's logs
    return result


def logged_seqs(path: Path) -> list[int]:
    """The serverSeqs in the log table itself (not the tail)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT entries FROM log ORDER BY first_seq").fetchall()
    finally:
        conn.close()
    return [seq for (entries,) in rows for seq, _, _ in json.loads(entries)]


async def loaded_seqs(store: SqliteStore) -> list[int]:
    loaded = await store.load(CHAT, retained_turns=0)
    assert loaded is not None
    return [seq for seq, _, _ in loaded.envelopes]


async def test_a_kill_9_keeps_every_envelope_the_tail_took(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    result = write_and_die(path, [["channel", CHAT], ["envelopes", 1, 300]])
    assert result["delivered"] == list(range(1, 301))
    assert logged_seqs(path) == []  # all of them only in the tail when the process died
    (before,) = tail_files(path)
    store = SqliteStore(path)
    assert store.open() == 300  # numbering resumes above them
    assert logged_seqs(path) == list(range(1, 301))  # folded at open
    (after,) = tail_files(path)  # a new file; the old one went once the fold was durable
    assert after != before
    assert await loaded_seqs(store) == list(range(1, 301))
    await store.close()


async def test_a_kill_9_after_overlapping_segments_reopens_above_their_newest_number(
    tmp_path: Path,
) -> None:
    """The same overlap, left in the tail by a killed process: the fold at open
    raises the mark to the newest number too (and an online copy's)."""
    path = tmp_path / "ahp.db"
    result = write_and_die(path, [["channel", CHAT], ["interleaved", 10]])
    assert result["delivered"] == [10, 11, 12]
    assert logged_seqs(path) == []  # only in the tail
    copy = sqlite3.connect(tmp_path / "copy.db", isolation_level=None)
    source = sqlite3.connect(path)
    source.backup(copy)
    source.close()
    assert complete_copy(copy, path) == 2
    copy.close()
    store = SqliteStore(path)
    assert store.open() == 12
    await store.close()
    copied = SqliteStore(tmp_path / "copy.db")
    assert copied.open() == 12
    await copied.close()


async def test_a_full_durability_start_folds_a_tail_left_by_a_normal_run(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    write_and_die(path, [["channel", CHAT], ["envelopes", 1, 50]])
    store = SqliteStore(path, synchronous="FULL")
    assert store.open() == 50
    assert tail_files(path) == []  # FULL keeps no tail: the one read is gone once durable
    assert await loaded_seqs(store) == list(range(1, 51))
    store.append_envelope(51, CHAT, 1.0, b"{}", lambda: None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert logged_seqs(path) == list(range(1, 52))  # straight into the log table
    await store.close()
    again = SqliteStore(path)  # and back to NORMAL: nothing applied twice
    assert again.open() == 51
    assert await loaded_seqs(again) == list(range(1, 52))
    await again.close()


async def with_envelopes_in_the_tail(path: Path, last: int) -> SqliteStore:
    """A store whose chat has envelopes 1..``last``, each its own commit, none folded yet."""
    store = SqliteStore(path, tail_fold_seconds=3600.0)
    store.open()
    store.put_channel(CHAT, "chat", None, "2026-01-01T00:00:00Z", None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    for seq in range(1, last + 1):
        store.append_envelope(seq, CHAT, 1.0, b"{}", lambda: None)
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
    return store


async def test_a_read_folds_the_tail_first(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    store = await with_envelopes_in_the_tail(path, 5)
    assert logged_seqs(path) == []
    assert await loaded_seqs(store) == [1, 2, 3, 4, 5]
    assert logged_seqs(path) == [1, 2, 3, 4, 5]
    await store.close()


async def test_a_database_older_than_its_tail_takes_only_what_preceded_the_commit_it_lacks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ahp.db"
    older = tmp_path / "older.db"
    steps: list[list[object]] = [
        ["channel", CHAT],
        ["envelopes", 1, 10],  # in the tail
        ["copy", str(older)],  # the database as it was here
        ["client", "bob"],  # a commit the older database lacks: a barrier in the tail
        ["envelopes", 11, 20],
    ]
    assert write_and_die(path, steps)["delivered"] == list(range(1, 21))
    # What a restored backup, or a power cut that lost the end of the WAL but
    # not the tail, leaves: the database from before the barrier.
    replace_database(path, older)
    store = SqliteStore(path)
    store.open()
    assert await loaded_seqs(store) == list(range(1, 11))  # never 11-20 without bob
    assert await store.clients() == []
    assert tail_files(path, "-tail-set-aside.") == ["ahp.db-tail-set-aside.00000001"]
    await store.close()


async def test_a_failed_tail_write_stops_the_store_and_delivers_nothing_of_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ahp.db"
    steps: list[list[object]] = [
        ["channel", CHAT],
        ["envelopes", 1, 5],
        ["file_limit", 100],
        ["envelopes", 6, 50],
    ]
    result = write_and_die(path, steps)
    delivered = result["delivered"]
    assert 5 <= len(delivered) < 50
    assert delivered == list(range(1, len(delivered) + 1))
    assert "failed: [Errno 27]" in result["error"]  # EFBIG, as ENOSPC on a full disk
    store = SqliteStore(path)
    store.open()
    # The record cut short by the limit is not applied, nor anything after.
    assert await loaded_seqs(store) == delivered
    await store.close()


async def test_tail_files_roll_over_and_go_once_a_checkpoint_made_them_redundant(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ahp.db"
    store = SqliteStore(
        path, checkpoint_bytes=32 * 1024, tail_fold_bytes=2048, tail_file_bytes=8192
    )
    store.open()
    store.put_channel(CHAT, "chat", None, "2026-01-01T00:00:00Z", None)
    most = 0
    for seq in range(1, 3001):
        store.append_envelope(seq, CHAT, 1.0, b'{"delta":"%d"}' % seq, lambda: None)
        store.commit_soon()
        await asyncio.sleep(0)
        most = max(most, len(tail_files(path)))
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    generation = int(tail_files(path)[-1].rsplit(".", 1)[1])
    assert generation > 10  # it rolled over many times ...
    # ... and the files went as checkpoints completed (3 at most here when
    # idle; the bound leaves room for a checkpointer slowed by a busy machine).
    assert most <= 8
    await store.close()
    again = SqliteStore(path)
    assert again.open() == 3000
    assert await loaded_seqs(again) == list(range(1, 3001))
    await again.close()


def tail_files(path: Path, infix: str = "-tail.") -> list[str]:
    return sorted(p.name for p in path.parent.glob(f"{path.name}{infix}*"))


def replace_database(path: Path, older: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    older.rename(path)


async def test_an_online_copy_takes_in_what_the_tail_holds_and_stands_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "live" / "ahp.db"
    store = await with_envelopes_in_the_tail(path, 20)
    copy_path = tmp_path / "copy" / "ahp.db"
    assert online_copy(path, copy_path) == 20  # every one of them was only in the tail
    await store.close()
    copied = SqliteStore(copy_path)
    assert copied.open() == 20
    assert await loaded_seqs(copied) == list(range(1, 21))
    await copied.close()


def online_copy(path: Path, copy_path: Path) -> int:
    """What ``ahp-server backup`` does, beside a running store."""
    copy_path.parent.mkdir()
    source = sqlite3.connect(path)
    copy = sqlite3.connect(copy_path, isolation_level=None)
    try:
        source.backup(copy)
        added = complete_copy(copy, path)
        assert copy.execute("SELECT value FROM meta WHERE key = 'tail'").fetchone() is None
        return added
    finally:
        copy.close()
        source.close()


async def test_a_waited_for_commit_to_the_tail_is_delivered_at_once_and_in_order(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "ahp.db")
    store.open()
    delivered: list[int] = []

    def on_commit(seq: int) -> None:
        delivered.append(seq)
        if seq == 1:  # a delivery that publishes again, and waits for it
            store.append_envelope(4, CHAT, 1.0, b"{}", on_commit, 4)
            store.commit_soon()

    for seq in (1, 2, 3):
        store.append_envelope(seq, CHAT, 1.0, b"{}", on_commit, seq)
    store.commit_soon()
    # Envelopes only: committed to the tail and delivered within the call,
    # as without persistence; 4 only after the rest of its batch.
    assert delivered == [1, 2, 3]
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert delivered == [1, 2, 3, 4]
    # Another write in the queue: a transaction, grouped in the next loop turn.
    store.put_client("a-client", "0.7.0")
    store.append_envelope(5, CHAT, 1.0, b"{}", on_commit, 5)
    store.commit_soon()
    assert delivered == [1, 2, 3, 4]
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert delivered == [1, 2, 3, 4, 5]
    await store.close()


async def test_a_tail_file_can_be_read_by_whoever_can_read_the_database(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    store = SqliteStore(path)
    store.open()
    (tail,) = tail_files(path)
    assert permissions(tmp_path / tail) == permissions(path)  # (ahp-server backup reads both)
    await store.close()


def permissions(path: Path) -> int:
    return path.stat().st_mode & 0o777


async def test_a_tail_position_that_makes_no_sense_stops_the_start_with_a_clear_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ahp.db"
    store = SqliteStore(path)
    store.open()
    await store.close()
    garble_tail_position(path)
    with pytest.raises(StoreError, match=r"not a readable ahp-server database.*meta\.tail"):
        SqliteStore(path).open()
    assert tail_files(path, "-tail-set-aside.") == []  # nothing was touched


def garble_tail_position(path: Path) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = 'not a position' WHERE key = 'tail'")
    conn.close()


async def test_transactions_run_off_the_loop_and_delivery_keeps_commit_order(
    tmp_path: Path,
) -> None:
    """While another connection holds SQLite's write lock, a transaction waits for it
    in the writer thread, not on the loop: a fold waiting there holds no envelope
    back, and the envelopes queued after a waiting turn wait for that turn, then
    come out in order. Both are in the database after a restart. (Another chat
    streams meanwhile: a lone stream's small transactions run on the loop.)"""
    path = tmp_path / "ahp.db"
    store = SqliteStore(path, tail_fold_seconds=0.01)
    store.open()
    store.put_channel(CHAT, "chat", None, "2026-01-01T00:00:00Z", None)
    delivered: list[int] = []
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # SQLite's one write lock, held
    try:
        for seq in (1, 2, 3):
            store.append_envelope(seq, CHAT, 1.0, b"{}", delivered.append, seq)
        async with asyncio.timeout(TIMEOUT):
            await store.flush()  # to the tail: delivered
            await asyncio.sleep(0.05)  # the fold is due: it waits for the lock in the thread
        assert logged_seqs(path) == []
        for seq in (4, 5):  # meanwhile the loop commits and delivers
            store.append_envelope(seq, CHAT, 1.0, b"{}", delivered.append, seq)
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
        assert delivered == [1, 2, 3, 4, 5]
        # A turn (another write than an envelope) queued, then envelopes after it.
        store.append_envelope(100, OTHER, 1.0, b"{}", lambda: None)
        store.put_turn(CHAT, 0, "turn-1", b'{"id":"turn-1"}')
        for seq in (6, 7):
            store.append_envelope(seq, CHAT, 1.0, b"{}", delivered.append, seq)
        for _ in range(20):  # loop turns pass; the lock is still held
            await asyncio.sleep(0.005)
        assert delivered == [1, 2, 3, 4, 5], "nothing after the turn before the turn"
        assert logged_seqs(path) == []
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert delivered == [1, 2, 3, 4, 5, 6, 7]
    await store.close()
    again = SqliteStore(path)
    again.open()
    assert await loaded_seqs(again) == list(range(1, 8))
    assert await again.turns(CHAT, 1, 1) == [b'{"id":"turn-1"}']
    await again.close()


async def test_a_snapshot_holds_no_envelope_back(tmp_path: Path) -> None:
    """A snapshot waits for the next transaction outside the commit queue: while SQLite's
    write lock is held elsewhere, the envelopes after it are still delivered; once the
    lock is free it is written, after the channel's row queued before it. (Another
    chat streams meanwhile: a lone stream's small transactions run on the loop.)"""
    path = tmp_path / "ahp.db"
    store = SqliteStore(path, tail_fold_seconds=0.01)
    store.open()
    delivered: list[int] = []
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        store.append_envelope(100, OTHER, 1.0, b"{}", lambda: None)
        store.put_channel(CHAT, "chat", None, "2026-01-01T00:00:00Z", None)  # waits
        for seq in (1, 2):
            store.append_envelope(seq, CHAT, 1.0, b"{}", delivered.append, seq)
        store.put_snapshot(CHAT, 2, b'{"at":2}', 0)
        store.put_snapshot(CHAT, 2, b'{"at":2}', 0)
        for seq in (3, 4):
            store.append_envelope(seq, CHAT, 1.0, b"{}", delivered.append, seq)
        for _ in range(20):
            await asyncio.sleep(0.005)
        assert delivered == [], "the channel's row is a write: what follows waits for it"
    finally:
        locker.execute("ROLLBACK")
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert delivered == [1, 2, 3, 4]
    locker.execute("BEGIN IMMEDIATE")
    try:
        store.put_snapshot(CHAT, 4, b'{"at":4}', 0)
        for seq in (5, 6):
            store.append_envelope(seq, CHAT, 1.0, b"{}", delivered.append, seq)
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
        assert delivered == [1, 2, 3, 4, 5, 6], "a snapshot waiting holds nothing back"
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    loaded = await store.load(CHAT, retained_turns=1)
    assert loaded is not None
    assert (loaded.snapshot_seq, loaded.snapshot) == (4, b'{"at":4}')
    assert loaded.log_floor == 2  # the log since the previous snapshot is kept
    assert [seq for seq, _, _ in loaded.envelopes] == [3, 4, 5, 6]
    await store.close()


async def test_a_failed_transaction_of_writes_stops_the_store_and_delivers_nothing_after_it(
    tmp_path: Path,
) -> None:
    """A turn's write fails in the writer thread (its table gone): the store stops,
    and neither the envelopes of its commit nor those queued after it are delivered
    or reach the tail."""
    path = tmp_path / "ahp.db"
    store = SqliteStore(path)
    store.open()
    delivered: list[int] = []
    store.append_envelope(1, CHAT, 1.0, b"{}", delivered.append, 1)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DROP TABLE turns")
    other.close()
    store.put_turn(CHAT, 0, "turn-1", b"{}")
    store.append_envelope(2, CHAT, 1.0, b"{}", delivered.append, 2)
    store.commit_soon()
    store.append_envelope(3, CHAT, 1.0, b"{}", delivered.append, 3)
    with pytest.raises(StoreError, match="commit failed"):
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
    assert delivered == [1]
    assert store.failed.done()
    await store.close()
    conn = sqlite3.connect(path)
    (text,) = conn.execute("SELECT value FROM meta WHERE key = 'tail'").fetchone()
    conn.close()
    # What the tail holds beyond the database: envelope 1 at most, never 2 or 3.
    found = replay(path, Position.decode(text))
    assert [(first, last) for _, first, last, _ in found.rows] in ([], [(1, 1)])


async def test_a_lone_streams_turn_commits_on_the_loop_at_once(tmp_path: Path) -> None:
    """One chat alone: its turn and the envelope after it commit within the loop
    iteration that commits (no handoff to the writer thread), in order."""
    store = SqliteStore(tmp_path / "ahp.db")
    store.open()
    delivered: list[int] = []
    store.put_turn(CHAT, 0, "turn-1", b'{"id":"turn-1"}')
    store.append_envelope(1, CHAT, 1.0, b"{}", delivered.append, 1)
    await asyncio.sleep(0)  # the commit scheduled by the first write runs
    assert delivered == [1]
    assert await store.turns(CHAT, 1, 1) == [b'{"id":"turn-1"}']
    await store.close()


async def test_a_fold_writes_a_row_per_chat_not_one_per_commit(tmp_path: Path) -> None:
    """Three chats streaming at once, a word each per commit: the fold joins each
    chat's commits into one log row (group.py ``merge_segments``), and every
    envelope reads back, in order, after the fold and after a reopen."""
    path = tmp_path / "ahp.db"
    store = SqliteStore(path, tail_fold_seconds=3600.0)
    store.open()
    chats = [f"ahp-chat:/{name}" for name in ("a", "b", "c")]
    for chat in chats:
        store.put_channel(chat, "chat", None, "2026-01-01T00:00:00Z", None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    seq = 0
    for _ in range(40):  # 40 commits, each with one envelope of every chat
        for chat in chats:
            seq += 1
            store.append_envelope(seq, chat, float(seq), b'{"n":%d}' % seq, lambda: None)
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
    assert logged_seqs(path) == []  # all in the tail
    expected = {chat: list(range(1 + i, seq + 1, 3)) for i, chat in enumerate(chats)}
    for chat in chats:
        loaded = await store.load(chat, retained_turns=0)  # folds the tail first
        assert loaded is not None
        assert [s for s, _, _ in loaded.envelopes] == expected[chat]
        assert [e for _, _, e in loaded.envelopes] == [b'{"n":%d}' % s for s in expected[chat]]
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT channel, first_seq, last_seq FROM log ORDER BY first_seq")
        assert rows.fetchall() == [(chat, seqs[0], seqs[-1]) for chat, seqs in expected.items()]
    finally:
        conn.close()
    await store.close()
    again = SqliteStore(path)
    assert again.open() == seq
    for chat in chats:
        loaded = await again.load(chat, retained_turns=0)
        assert loaded is not None
        assert [s for s, _, _ in loaded.envelopes] == expected[chat]
    await again.close()

"""The SQLite store on its own: schema, refusal of bad files, ordered group commit."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from ahp_server.store.base import StoreError
from ahp_server.store.sqlite import MIGRATIONS, SCHEMA_VERSION, SqliteStore

TIMEOUT = 10.0


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
        row = reader.execute(
            "SELECT 1 FROM log WHERE channel = 'ahp-chat:/c' AND first_seq <= ? AND last_seq >= ?",
            (seq, seq),
        ).fetchone()
        visible_at_callback.append(row is not None)

    for seq in range(1, 501):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", lambda s=seq: on_commit(s))
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert committed == list(range(1, 501))
    assert all(visible_at_callback)  # durable before anyone is told
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


async def test_snapshots_prune_the_log_and_channels_are_deleted(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ahp.db")
    store.open()
    store.put_channel("ahp-chat:/c", "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    for seq in range(1, 11):
        store.append_envelope(seq, "ahp-chat:/c", float(seq), b'{"n":%d}' % seq, lambda: None)
        if seq in (4, 8):
            store.put_snapshot("ahp-chat:/c", seq, b"{}", 0)
    store.put_turn("ahp-chat:/c", 0, "t0", b'{"id":"t0"}')
    store.put_turn("ahp-chat:/c", 1, "t1", b'{"id":"t1"}')
    store.truncate_turns("ahp-chat:/c", 1)
    await store.flush()
    loaded = await store.load("ahp-chat:/c", retained_turns=10)
    assert loaded is not None
    assert loaded.snapshot_seq == 8
    assert loaded.log_floor == 4  # the log since the previous snapshot is kept
    assert [seq for seq, _, _ in loaded.envelopes] == [5, 6, 7, 8, 9, 10]
    assert await store.turns("ahp-chat:/c", 5, 10) == [b'{"id":"t0"}']
    assert await store.turn_position("ahp-chat:/c", "t0") == 0
    store.delete_channel("ahp-chat:/c")
    await store.flush()
    assert await store.load("ahp-chat:/c", retained_turns=10) is None
    assert await store.turns("ahp-chat:/c", 5, 10) == []
    await store.close()


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


@pytest.mark.parametrize("other_write", [True, False])  # a transaction of mixed writes, or not
async def test_a_segment_keeps_each_envelope_its_number_and_clock(
    tmp_path: Path, other_write: bool
) -> None:
    store = SqliteStore(tmp_path / "ahp.db")
    store.open()
    store.put_channel("ahp-chat:/a", "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    store.put_channel("ahp-chat:/b", "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    # Two channels interleaved in one commit, maybe with another write in between.
    for seq in range(1, 301):
        channel = "ahp-chat:/a" if seq % 3 else "ahp-chat:/b"
        envelope = b'{"n":%d,"text":"caf\xc3\xa9 \\"q\\""}' % seq
        store.append_envelope(seq, channel, 1733150000000.25 + seq, envelope, lambda: None)
        if seq == 150 and other_write:
            store.put_turn("ahp-chat:/a", 0, "t0", b"{}")
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    a = await store.load("ahp-chat:/a", retained_turns=10)
    b = await store.load("ahp-chat:/b", retained_turns=10)
    assert a is not None
    assert b is not None
    for loaded, keep in ((a, lambda n: n % 3 != 0), (b, lambda n: n % 3 == 0)):
        expected = [n for n in range(1, 301) if keep(n)]
        assert [seq for seq, _, _ in loaded.envelopes] == expected
        assert [at for _, at, _ in loaded.envelopes] == [1733150000000.25 + n for n in expected]
        assert [env for _, _, env in loaded.envelopes] == [
            b'{"n":%d,"text":"caf\xc3\xa9 \\"q\\""}' % n for n in expected
        ]
    await store.close()


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


async def test_the_high_water_mark_survives_deleting_the_newest_envelopes(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    store = SqliteStore(path)
    store.open()
    store.put_channel("ahp-chat:/old", "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    store.put_channel("ahp-chat:/new", "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    for seq in range(1, 6):
        store.append_envelope(seq, "ahp-chat:/old", 1.0, b"{}", lambda: None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    for seq in range(6, 11):  # envelopes alone: committed without touching meta
        store.append_envelope(seq, "ahp-chat:/new", 1.0, b"{}", lambda: None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    await store.close()
    store = SqliteStore(path)
    assert store.open() == 10  # derived from the log
    store.delete_channel("ahp-chat:/new")  # the newest envelopes go away
    await store.close()
    assert SqliteStore(path).open() == 10  # numbering still resumes above them


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
    store.append_envelope(1, "ahp-chat:/c", 1.0, b"{}", delivered.append, 99)
    with pytest.raises(StoreError, match="commit failed"):
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
    assert delivered == [1]  # what failed was never delivered
    with pytest.raises(StoreError, match="failed"):
        store.append_envelope(2, "ahp-chat:/c", 1.0, b"{}", delivered.append, 2)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


async def test_checkpoints_keep_the_wal_bounded_while_a_chat_streams(tmp_path: Path) -> None:
    path = tmp_path / "ahp.db"
    # NORMAL: commits on the loop, checkpoints in a thread; small thresholds
    # (a checkpoint every ~256 KB, holding the commits past 256 pages ~ 1 MB).
    store = SqliteStore(path, checkpoint_bytes=256 * 1024, hold_frames=256)
    store.open()
    store.put_channel("ahp-chat:/c", "chat", "ahp-session:/s", "2026-01-01T00:00:00.000Z", None)
    envelope = b'{"delta":"' + b"x" * 1000 + b'"}'
    delivered: list[int] = []
    largest_wal = 0
    seq = 0
    async with asyncio.timeout(60):
        for _ in range(200):  # ~20 MB of log in commits of 100 envelopes
            for _ in range(100):
                seq += 1
                store.append_envelope(seq, "ahp-chat:/c", 1.0, envelope, delivered.append, seq)
            await store.flush()
            largest_wal = max(largest_wal, _size(Path(f"{path}-wal")))
        loaded = await store.load("ahp-chat:/c", retained_turns=1)
        await store.close()
    assert delivered == list(range(1, seq + 1))
    # Racing checkpoints cannot let the WAL start over while commits keep
    # coming; the holding ones do. Without them it would hold all ~20 MB.
    assert 0 < largest_wal < 12 * 1024 * 1024
    assert loaded is not None
    assert [s for s, _, _ in loaded.envelopes] == list(range(1, seq + 1))


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
    assert int(version[0]) == 5
    assert [r[0] for r in check.execute("SELECT first_seq FROM log ORDER BY rowid")] == [1, 3, 4, 6]
    check.close()
    store = SqliteStore(path)
    assert store.open() == 6  # the trigger keeps the high-water mark on the new table
    assert await store.turns("ahp-chat:/a", 2, 10) == [b'{"id":"t0"}', b'{"id":"t1b"}']
    await store.close()


async def test_a_commit_window_groups_writes_across_loop_iterations(tmp_path: Path) -> None:
    """A stream that yields between envelopes (a model's tokens) commits once per window."""
    store = SqliteStore(tmp_path / "ahp.db", commit_window=0.2)
    store.open()
    committed: list[tuple[int, float]] = []
    loop = asyncio.get_running_loop()
    store.append_envelope(1, "ahp-chat:/c", 1.0, b"{}", lambda: committed.append((1, loop.time())))
    await asyncio.sleep(0.01)  # an idle store commits at once
    assert [seq for seq, _ in committed] == [1]
    queued_at = loop.time()
    for seq in range(2, 22):  # one envelope per loop iteration, as a token stream
        store.append_envelope(
            seq, "ahp-chat:/c", 1.0, b"{}", lambda s=seq: committed.append((s, loop.time()))
        )
        await asyncio.sleep(0)
    assert len(committed) == 1  # held: the window since the last commit is open
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert [seq for seq, _ in committed] == list(range(1, 22))
    assert store.commits == 2  # twenty envelopes, one commit
    assert committed[-1][1] - queued_at <= 0.2 + 0.05  # never held past the window

    # A client's own action is not held back: commit_soon commits now.
    started = loop.time()
    store.append_envelope(
        22, "ahp-chat:/c", 1.0, b"{}", lambda: committed.append((22, loop.time()))
    )
    store.commit_soon()
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert committed[-1][0] == 22
    assert committed[-1][1] - started < 0.1
    await store.close()

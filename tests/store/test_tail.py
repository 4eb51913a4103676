"""The log's tail on its own (store/tail.py): records, torn ends, barriers, the chain of files.

The SQLite store's use of it — commits, folds, recovery, backups — is in
test_sqlite.py.
"""

from __future__ import annotations

from pathlib import Path

from ahp_server.store.tail import HEADER_SIZE, Position, TailFile, files, replay

DB = "ahp.db"


def rows(first: int, last: int, channel: str = "ahp-chat:/c") -> list[tuple[str, int, int, bytes]]:
    entries = b"[" + b",".join(b'[%d,1.0,{"n":%d}]' % (s, s) for s in range(first, last + 1)) + b"]"
    return [(channel, first, last, entries)]


def new_file(
    tmp_path: Path, generation: int = 1, previous: tuple[bytes, int] | None = None
) -> TailFile:
    return TailFile.create(tmp_path / DB, generation, previous or (bytes(16), 0), sync=False)


def at_start(tail: TailFile, barrier: int = 0) -> Position:
    return Position(tail.generation, tail.nonce, HEADER_SIZE, barrier)


def seqs(found_rows: list[tuple[str, int, int, bytes]]) -> list[int]:
    return [s for _, first, last, _ in found_rows for s in range(first, last + 1)]


def test_records_come_back_in_order_with_their_bytes(tmp_path: Path) -> None:
    tail = new_file(tmp_path)
    tail.append_segments(rows(1, 3))
    tail.append_segments(rows(4, 4) + rows(5, 6, "ahp-session:/s"))
    found = replay(tmp_path / DB, at_start(tail))
    assert found.rows == rows(1, 3) + rows(4, 4) + rows(5, 6, "ahp-session:/s")
    assert found.stopped is None
    assert found.foreign == []
    assert found.consumed == [tail.path]
    assert found.reached == Position(1, tail.nonce, tail.size, 0)


def test_replay_starts_where_the_database_stands(tmp_path: Path) -> None:
    tail = new_file(tmp_path)
    tail.append_segments(rows(1, 3))
    folded = tail.size
    tail.append_segments(rows(4, 5))
    found = replay(tmp_path / DB, Position(1, tail.nonce, folded, 0))
    assert seqs(found.rows) == [4, 5]


def test_a_torn_last_record_is_left_out_and_its_file_set_aside(tmp_path: Path) -> None:
    tail = new_file(tmp_path)
    tail.append_segments(rows(1, 3))
    tail.append_segments(rows(4, 5))
    tail.close()
    data = tail.path.read_bytes()
    tail.path.write_bytes(data[:-3])  # a power cut in the middle of the last record
    found = replay(tmp_path / DB, at_start(tail))
    assert seqs(found.rows) == [1, 2, 3]
    assert found.stopped is not None
    assert "torn" in found.stopped
    assert [p for p, _ in found.foreign] == [tail.path]


def test_a_corrupt_record_stops_replay_before_it(tmp_path: Path) -> None:
    tail = new_file(tmp_path)
    tail.append_segments(rows(1, 1))
    middle = tail.size
    tail.append_segments(rows(2, 2))
    tail.append_segments(rows(3, 3))
    tail.close()
    data = bytearray(tail.path.read_bytes())
    data[middle + 12] ^= 0xFF  # a byte of the second record's payload
    tail.path.write_bytes(bytes(data))
    found = replay(tmp_path / DB, at_start(tail))
    assert seqs(found.rows) == [1]  # never the third, after the gap
    assert found.stopped is not None


def test_a_barrier_the_database_lacks_stops_replay(tmp_path: Path) -> None:
    tail = new_file(tmp_path)
    tail.append_segments(rows(1, 2))
    tail.append_barrier(1)  # a commit of other writes went into the database here
    tail.append_segments(rows(3, 4))
    # The database holds that commit: everything applies.
    assert seqs(replay(tmp_path / DB, at_start(tail, barrier=1)).rows) == [1, 2, 3, 4]
    # It does not (a restored backup, a lost WAL): only what came before it.
    lacking = replay(tmp_path / DB, at_start(tail, barrier=0))
    assert seqs(lacking.rows) == [1, 2]
    assert lacking.stopped is not None
    assert "missing" in lacking.stopped


def test_the_chain_follows_files_that_continue_it_and_nothing_else(tmp_path: Path) -> None:
    first = new_file(tmp_path, 1)
    first.append_segments(rows(1, 2))
    second = new_file(tmp_path, 2, (first.nonce, first.size))
    second.append_segments(rows(3, 4))
    stray = new_file(tmp_path, 3, (second.nonce, second.size - 1))  # not where 2 ends
    stray.append_segments(rows(5, 6))
    found = replay(tmp_path / DB, at_start(first))
    assert seqs(found.rows) == [1, 2, 3, 4]
    assert found.consumed == [first.path, second.path]
    assert [p for p, _ in found.foreign] == [stray.path]
    assert found.generation == 3
    assert found.reached == Position(2, second.nonce, second.size, 0)


def test_the_next_file_continues_a_database_whose_own_file_is_gone(tmp_path: Path) -> None:
    first = new_file(tmp_path, 1)
    first.append_segments(rows(1, 2))
    second = new_file(tmp_path, 2, (first.nonce, first.size))
    second.append_segments(rows(3, 3))
    position = Position(1, first.nonce, first.size, 0)  # all of file 1 folded ...
    first.path.unlink()  # ... and deleted
    found = replay(tmp_path / DB, position)
    assert seqs(found.rows) == [3]
    # But not one that starts past where the database stands.
    assert replay(tmp_path / DB, Position(1, first.nonce, first.size - 1, 0)).rows == []


def test_files_the_database_does_not_name_are_never_applied(tmp_path: Path) -> None:
    tail = new_file(tmp_path)
    tail.append_segments(rows(1, 2))
    no_position = replay(tmp_path / DB, None)  # a backup, or a database without a tail
    assert no_position.rows == []
    assert [p for p, _ in no_position.foreign] == [tail.path]
    other = replay(tmp_path / DB, Position(1, bytes(16), HEADER_SIZE, 0))  # another file 1
    assert other.rows == []
    assert [p for p, _ in other.foreign] == [tail.path]
    tail.path.write_bytes(b"not a tail file at all")
    assert replay(tmp_path / DB, at_start(tail)).rows == []


def test_older_files_are_consumed_and_only_tail_files_are_listed(tmp_path: Path) -> None:
    old = new_file(tmp_path, 1)
    current = new_file(tmp_path, 4)
    (tmp_path / f"{DB}-tail-set-aside.00000002").write_bytes(b"")
    (tmp_path / f"{DB}-wal").write_bytes(b"")
    assert files(tmp_path / DB) == [(1, old.path), (4, current.path)]
    found = replay(tmp_path / DB, at_start(current))
    assert found.consumed == [old.path, current.path]

"""The embedded default store: SQLite in WAL mode with group commit.

Layer: store (stdlib ``sqlite3`` + ``threading``; called from the event loop).

Writes are queued from the loop and committed in groups: **everything queued**
goes into one commit, then the envelopes' ``on_commit`` callbacks run on the
loop, in order. Who commits depends on ``synchronous``:

* ``NORMAL`` (the default): a commit of envelopes only — the hot path — is one
  record appended to the log's tail file (``tail.py``) by the loop itself,
  once per loop iteration (:meth:`SqliteStore._commit_on_loop`); no fsync, a
  write into the OS page cache. Every SQLite transaction — folding the tail
  into the log, and any other write (a snapshot, a turn, a deletion) — runs
  in a writer thread, one at a time, so the loop goes on serving while it
  does (a lone stream's small ones run on the loop: nothing waits behind
  it). Commits queued after a transaction with writes wait for it (they
  are delivered in order), a fold holds nothing back, and snapshots wait
  for the next transaction outside the queue. The fsyncs happen at checkpoints, which a
  checkpointer thread runs on its own connection while commits go on. Once
  the WAL file reaches its bound (``wal_limit``, measured after every
  transaction) commits are held until a checkpoint has truncated it, so the
  WAL stays within the bound whatever the disk's speed.
* ``FULL``: a writer thread, since every commit waits for an fsync; SQLite's
  own checkpoints run in line, and past the bound the thread truncates the WAL
  before its next commit.

Reads run in a worker thread (``asyncio.to_thread``) on their own connection,
which WAL lets run beside the writer.

Schema (versioned, forward-migrated; a newer schema is refused):

* ``meta(key, value)`` — ``schema_version`` and ``server_seq``, the high-water
  mark as of the last deletion of log rows that could have held the newest
  number: a channel's deletion raises it to that channel's newest number in
  the same transaction; and as of the last transaction of several log
  segments, whose ranges may overlap (:data:`_RAISE_HIGH_WATER`). The store
  opens at the highest of it, the newest log row (the last by row id: rows go
  in ``serverSeq`` order) and the newest snapshot (pruning keeps the log
  after the previous snapshot, so a pruned number is at most a snapshot's) —
  so numbering never goes back. (Schemas 1–6 raised it with a trigger on
  every log row: a page written per commit.)
* ``channels`` — one row per session and chat: kind, owning session, creation
  time, a session's summary (for ``listSessions`` without loading anything),
  what it was in the middle of (column ``active_turn``: a chat's running turn,
  or ``creating`` for a session whose agent was being opened — for crash
  recovery), and the log floor;
* ``log`` — the action log in *segments*: each row holds a run of one
  channel's consecutive envelopes from one commit, as a JSON array of
  ``[serverSeq, clock ms, envelope]`` (schema 2; schema 1 had a row per
  envelope). A streaming chat is one row per commit, not one per delta.
  Rows go in ``serverSeq`` order (schema 5), indexed by channel;
* ``snapshots`` — per channel, the state at some ``serverSeq`` (chats without
  their completed turns) — the log after it rebuilds the present;
* ``turns`` — each completed turn of each chat, by position (history pages),
  in the order they ended (schema 5), indexed by chat and position;
* ``clients`` — the remembered client ids (for ``reconnect``): protocol
  version, when last seen, and the multi-user mode user that first claimed
  the id (``user_name``, schema 6).

Appending a ``chat/delta`` costs the same whatever the length of the turn or
the chat: its envelope joins its channel's segment of the current commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog

from ahp_server.store.base import ChannelRow, CommitWindow, LoadedChannel, Store, StoreError
from ahp_server.store.group import (
    HIGH_WATER,
    SEGMENT,
    Callback,
    GroupCommit,
    Row,
    merge_segments,
    segments,
)
from ahp_server.store.lift import MARKER, Lifter
from ahp_server.store.lock import not_writable
from ahp_server.store.tail import Position, TailFile, replay

__all__ = ["SCHEMA_VERSION", "SqliteStore", "check_untouched", "complete_copy", "refusal"]

log = structlog.get_logger(__name__)

SCHEMA_VERSION = 8

#: Forward migrations: MIGRATIONS[n] brings schema n to n + 1.
MIGRATIONS: dict[int, str] = {
    0: """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
    CREATE TABLE channels (
        uri TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        session TEXT,
        created_at TEXT NOT NULL,
        summary BLOB,
        active_turn TEXT,
        log_floor INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX channels_session ON channels (session);
    CREATE TABLE envelopes (
        seq INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        at_ms REAL NOT NULL,
        envelope BLOB NOT NULL
    );
    CREATE INDEX envelopes_channel ON envelopes (channel, seq);
    CREATE TABLE snapshots (
        channel TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        turn_count INTEGER NOT NULL,
        state BLOB NOT NULL
    );
    CREATE TABLE clients (
        client_id TEXT PRIMARY KEY,
        version TEXT NOT NULL,
        seen INTEGER NOT NULL
    );
    CREATE INDEX clients_seen ON clients (seen);
    CREATE TABLE turns (
        chat TEXT NOT NULL,
        position INTEGER NOT NULL,
        turn_id TEXT NOT NULL,
        turn BLOB NOT NULL,
        PRIMARY KEY (chat, position)
    ) WITHOUT ROWID;
    """,
    1: """
    CREATE TABLE log (
        channel TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        entries BLOB NOT NULL,
        PRIMARY KEY (channel, first_seq)
    ) WITHOUT ROWID;
    INSERT INTO log (channel, first_seq, last_seq, entries)
        SELECT channel, seq, seq,
               '[[' || seq || ',' || at_ms || ',' || CAST(envelope AS TEXT) || ']]'
        FROM envelopes;
    DROP TABLE envelopes;
    INSERT OR IGNORE INTO meta VALUES ('server_seq', 0);
    CREATE TRIGGER log_high_water AFTER INSERT ON log BEGIN
        UPDATE meta SET value = max(CAST(value AS INTEGER), NEW.last_seq)
        WHERE key = 'server_seq';
    END;
    """,
    # Schema 3 marks sessions being created (``active_turn = 'creating'``) so a
    # crash there is repaired at start. Before it, a session's default chat
    # was created only once the agent had opened the session: a session with
    # no chat may be one a crash left in creating. The host loads each such
    # session at start and re-opens only those really in ``creating``.
    2: """
    UPDATE channels SET active_turn = 'creating'
    WHERE kind = 'session'
      AND NOT EXISTS (
          SELECT 1 FROM channels AS c WHERE c.kind = 'chat' AND c.session = channels.uri
      );
    """,
    # Schema 4: what an agent keeps for a chat across restarts (an ACP
    # session id, say): opaque text, deleted with the channel's row.
    3: """
    ALTER TABLE channels ADD COLUMN agent_state TEXT;
    """,
    # Schema 5: the log and the turns in rowid order, with an index for
    # per-channel reads. Their rows are blobs of hundreds of bytes to many
    # kilobytes; clustered by (channel, ...) (WITHOUT ROWID) every commit
    # wrote into a leaf page per channel and split them as they filled.
    # Appended in serverSeq order (a segment's first serverSeq is unique
    # across channels) a commit writes a few pages at the end of the table
    # and its index entries: commits 2-3x cheaper, the file ~30% smaller
    # (docs/performance.md).
    4: """
    CREATE TABLE log_5 (
        first_seq INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        entries BLOB NOT NULL
    );
    INSERT INTO log_5 (first_seq, channel, last_seq, entries)
        SELECT first_seq, channel, last_seq, entries FROM log ORDER BY first_seq;
    DROP TABLE log;
    ALTER TABLE log_5 RENAME TO log;
    CREATE INDEX log_channel ON log (channel, first_seq);
    CREATE TRIGGER log_high_water AFTER INSERT ON log BEGIN
        UPDATE meta SET value = max(CAST(value AS INTEGER), NEW.last_seq)
        WHERE key = 'server_seq';
    END;
    CREATE TABLE turns_5 (
        id INTEGER PRIMARY KEY,
        chat TEXT NOT NULL,
        position INTEGER NOT NULL,
        turn_id TEXT NOT NULL,
        turn BLOB NOT NULL
    );
    INSERT INTO turns_5 (chat, position, turn_id, turn)
        SELECT chat, position, turn_id, turn FROM turns ORDER BY chat, position;
    DROP TABLE turns;
    ALTER TABLE turns_5 RENAME TO turns;
    CREATE UNIQUE INDEX turns_position ON turns (chat, position);
    """,
    # Schema 6: the user (multi-user mode) that first claimed a client id, so
    # another user cannot claim it after a restart (docs/protocol.md, "Client
    # identity"). NULL: single-token mode, or remembered before schema 6.
    5: """
    ALTER TABLE clients ADD COLUMN user_name TEXT;
    """,
    # Schema 7: no trigger on the log. It rewrote the meta page in every
    # commit (a third of a one-envelope commit's pages); the high-water mark is
    # derived when the store opens and raised when a channel is deleted
    # (docs/performance.md). meta.server_seq is current as the trigger left it.
    6: """
    DROP TRIGGER IF EXISTS log_high_water;
    """,
    # Schema 8: the newest envelopes may be in the log's tail (tail.py), not
    # yet in this file; ``meta.tail`` says where this file stands in it. No
    # table changes — the version keeps an older ahp-server, which would
    # ignore the tail, from opening it.
    7: "",
}

#: synchronous=NORMAL: ask the checkpointer to run after about this much WAL
#: (SQLite's own default is 1,000 pages, ~4 MB) ...
CHECKPOINT_BYTES = 4 * 1024 * 1024
#: ... and once the WAL file is this large, commits wait until a checkpoint has
#: truncated it (docs/durability.md, "The WAL's bound").
WAL_LIMIT = 16 * 1024 * 1024
#: A truncating checkpoint that readers keep from restarting the WAL waits for
#: them this long (SQLite's busy handler), this many times; then commits go on.
CHECKPOINT_BUSY_MS = 1000
CHECKPOINT_TRIES = 5

#: synchronous=NORMAL: fold the log's tail into the database once it holds this
#: many bytes not yet folded ...
TAIL_FOLD_BYTES = 1024 * 1024
#: ... or this many seconds after its oldest record not yet folded ...
TAIL_FOLD_SECONDS = 1.0
#: ... and start a new tail file once the current one is this large.
TAIL_FILE_BYTES = 16 * 1024 * 1024

# A queued write: either an envelope row (``write`` is None) or a function of
# the writer's connection; an optional callback; and its position in the queue.
_Write = tuple[
    Callable[[sqlite3.Connection], object] | None,
    Row | None,
    Callback | None,
    int,
]


def _high_water(conn: sqlite3.Connection) -> int:
    """The highest ``serverSeq`` ever committed (see ``meta`` in the module docstring)."""
    row = conn.execute(
        "SELECT max("
        " coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'server_seq'), 0),"
        " coalesce((SELECT last_seq FROM log ORDER BY first_seq DESC LIMIT 1), 0),"
        " coalesce((SELECT max(seq) FROM snapshots), 0))"
    ).fetchone()
    return int(row[0])


_INSERT_SEGMENT = "INSERT INTO log (channel, first_seq, last_seq, entries) VALUES (?, ?, ?, ?)"
#: Replaying the tail: a row already there (which should not happen) is kept, and counted.
_INSERT_SEGMENT_AGAIN = _INSERT_SEGMENT.replace("INSERT", "INSERT OR IGNORE", 1)
_SET_TAIL = "INSERT OR REPLACE INTO meta VALUES ('tail', ?)"
#: A transaction of several segments raises ``meta.server_seq`` to their newest number.
#: Segments of one commit overlap (a chat's run 10-12 beside its session's 11), so
#: the row with the highest ``first_seq`` need not hold the newest number: read
#: alone at open, it would number the next envelope 12 again.
_RAISE_HIGH_WATER = (
    "UPDATE meta SET value = max(CAST(value AS INTEGER), ?) WHERE key = 'server_seq'"
)


def _raise_high_water(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Within a transaction inserting ``rows`` (log segments): see :data:`_RAISE_HIGH_WATER`."""
    if len(rows) > 1:
        conn.execute(_RAISE_HIGH_WATER, (max(int(row[2]) for row in rows),))


def _tail_position(conn: sqlite3.Connection) -> Position | None:
    """Where the database stands in the log's tail (``None``: it never had one)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'tail'").fetchone()
    if not row or not row[0]:
        return None
    try:
        return Position.decode(str(row[0]))
    except ValueError:
        raise sqlite3.DatabaseError(f"meta.tail is not a tail position: {row[0]!r}") from None


def complete_copy(copy: sqlite3.Connection, database: Path) -> int:
    """Make ``copy`` (an online backup of ``database``) hold what the log's tail adds.

    Reads the tail files beside ``database`` (a running host may be appending
    to them: replay stops at a record not yet whole) and applies what
    continues the copy; the copy then stands alone, with no tail position.
    Returns how many log rows it added.
    """
    found = replay(database, _tail_position(copy))
    copy.execute("BEGIN IMMEDIATE")
    copy.executemany(_INSERT_SEGMENT_AGAIN, found.rows)
    _raise_high_water(copy, found.rows)
    copy.execute("DELETE FROM meta WHERE key = 'tail'")
    copy.execute("COMMIT")
    return len(found.rows)


def refusal(path: Path, error: sqlite3.DatabaseError | OSError) -> StoreError:
    """What is wrong with the database at ``path``, as the one line a refused start prints.

    The one place these start-up errors become messages: a file or folder
    this process cannot write, a file that is no database, a corrupt one.
    """
    if isinstance(error, PermissionError):
        return not_writable(Path(error.filename) if error.filename else path)
    if isinstance(error, OSError):
        return StoreError(f"{path}: {error}")
    text = str(error)
    if "readonly" in text or "unable to open" in text:
        return not_writable(path)
    if "malformed" in text or "corrupt" in text:
        return StoreError(
            f"{path}: the database is corrupt ({text}); refusing to start over it — "
            "restore a backup, or move it aside to start empty"
        )
    return StoreError(
        f"{path}: not a readable ahp-server database ({text}); "
        "refusing to start over it — move it aside or restore a backup"
    )


def check_untouched(path: Path) -> None:
    """Refuse a database this host cannot use, reading it only: nothing is written.

    Before any migration, tail replay or write (``SqliteStore.open``): the
    folder and the files must be writable by this process, and the file must
    pass SQLite's ``quick_check`` (every page of every table and index read
    and its structure checked; cheaper than ``integrity_check``, which also
    matches every index against its table) and be an ahp-server database of
    a schema this version understands. Without a ``-wal`` file the database
    is read as immutable, so not even an empty ``-wal`` or ``-shm`` is
    created; with one (a host that was killed) the WAL is read too.
    """
    if not path.exists():
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise not_writable(path.parent)
        return  # a new database
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    for needed in (path.parent, path, wal, shm):
        if needed.exists() and not os.access(needed, os.W_OK):
            raise not_writable(needed)
    immutable = "" if wal.exists() else "&immutable=1"
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro{immutable}", uri=True)
        try:
            found = conn.execute("PRAGMA quick_check(1)").fetchone()
            if found is None or found[0] != "ok":
                detail = "" if found is None else str(found[0]).splitlines()[0]
                raise sqlite3.DatabaseError(f"database disk image is malformed: {detail}")
            version = SqliteStore._schema_version(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        raise refusal(path, error) from None
    except StoreError as error:  # tables of something else
        raise StoreError(f"{path}: {error}") from None
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: schema version {version} is newer than this ahp-server "
            f"understands ({SCHEMA_VERSION}); upgrade ahp-server or restore a backup"
        )


class SqliteStore(GroupCommit, Store):
    """One SQLite file with group commit: on the event loop (NORMAL) or a writer thread (FULL)."""

    durable = True

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "NORMAL",
        checkpoint_bytes: int = CHECKPOINT_BYTES,
        wal_limit: int = WAL_LIMIT,
        commit_window: float = 0.0,
        tail_fold_bytes: int = TAIL_FOLD_BYTES,
        tail_fold_seconds: float = TAIL_FOLD_SECONDS,
        tail_file_bytes: int = TAIL_FILE_BYTES,
    ) -> None:
        self._path = Path(path)
        #: synchronous=NORMAL: at most one commit per this many seconds while
        #: writes keep coming, unless someone waits (commit_soon); 0: every
        #: loop iteration. The most a delivery can be delayed by it.
        self._window = CommitWindow(commit_window)
        self._timer: asyncio.TimerHandle | None = None
        if synchronous.upper() not in ("NORMAL", "FULL"):
            raise StoreError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self._synchronous = synchronous.upper()
        self._queue: deque[_Write] = deque()
        #: Everything queued is an envelope (on the loop: what a commit to the tail takes).
        self._rows_only = True
        #: synchronous=NORMAL commits on the event loop (_commit_on_loop); FULL, whose
        #: commits wait for fsync, in the writer thread.
        self._on_loop = self._synchronous == "NORMAL"
        self._scheduled = False
        #: The loop is running the callbacks of a commit (commit_soon waits its turn).
        self._delivering = False
        self._ready = threading.Condition()
        self._idle = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._checkpoint_due = False
        self._checkpoint_bytes = checkpoint_bytes
        #: A checkpoint is running (in the checkpointer thread) ...
        self._checkpoint_running = False
        #: ... a truncating one (it runs only while the loop holds its commits).
        self._checkpoint_truncates = False
        #: The WAL file reached the bound: the loop holds its commits until a
        #: checkpoint has truncated it (_bound_wal); set while it does not.
        self._holding = False
        self._unheld = asyncio.Event()
        self._unheld.set()
        #: Roughly what the loop's commits added to the WAL since the last checkpoint.
        self._wal_bytes = 0
        self._wal_path = Path(f"{self._path}-wal")
        self._wal_limit = wal_limit
        #: The WAL file's size at which commits wait: the limit, or more after
        #: readers kept a checkpoint from truncating it (one limit more each time).
        self._wal_hold_at = wal_limit
        #: The largest the WAL file was after a transaction, and how many times
        #: commits waited for a truncating checkpoint (tests, docs/durability.md).
        self.wal_peak = 0
        self.wal_holds = 0
        #: SQLite transactions so far, and how many there were when the running
        #: checkpoint was asked for (a complete one makes them durable).
        self._transactions = 0
        self._checkpoint_mark = 0
        #: synchronous=NORMAL: the log's tail (tail.py), where commits of envelopes
        #: only go; the log rows in it not yet folded into the database, and
        #: about how many bytes they take there.
        self._tail: TailFile | None = None
        self._unfolded: list[tuple[str, int, int, bytes]] = []
        self._unfolded_bytes = 0
        #: synchronous=NORMAL: the transaction running in the writer thread
        #: (one at a time), and whether it has writes other than envelopes
        #: (the commits after it wait for it: _commit_on_loop).
        self._executor: ThreadPoolExecutor | None = None
        self._flight: asyncio.Future[float] | None = None
        self._flight_writes = False
        #: synchronous=NORMAL: where the last fold left the database in the tail
        #: (a transaction without a fold records it, with its own barrier), and
        #: deletions queued (the commit that takes them folds first).
        self._folded_at = Position(0, bytes(16), 0, 0)
        self._deletions = 0
        #: synchronous=NORMAL: snapshots not yet written (channel, the number
        #: of the last write queued before it, write). They wait for the next
        #: transaction outside the commit queue: nothing after them waits for
        #: them (a snapshot lost only means a longer replay from the previous
        #: one), so the stream never does. In the transaction each goes after
        #: the writes queued before it (a channel's row before its snapshot).
        self._snapshots: list[tuple[str, int, Callable[[sqlite3.Connection], object]]] = []
        self._fold_timer: asyncio.TimerHandle | None = None
        self._fold_bytes = tail_fold_bytes
        self._fold_seconds = tail_fold_seconds
        self._tail_file_bytes = tail_file_bytes
        #: The number of the last barrier (a commit of other writes) in the tail.
        self._barrier = 0
        #: Tail files all folded: deleted once a complete checkpoint has made
        #: the transactions up to the mark durable.
        self._retired: list[tuple[int, Path]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queued = 0
        self._committed = 0
        self._room = asyncio.Event()
        self._room.set()
        self._flushes: list[tuple[int, asyncio.Future[None]]] = []
        self._deliveries = deque()
        #: Row writes queued and not yet committed whose newest value is all that
        #: counts, by (kind, channel): a newer value replaces the queued one
        #: (_write_latest). On the loop only, where commits run synchronously.
        self._latest: dict[tuple[str, str], list[Any]] = {}
        self._failure: BaseException | None = None
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()
        self.commits = 0
        self.commit_seconds = 0.0

    @property
    def path(self) -> str:
        return str(self._path)

    def _describe(self) -> str:
        return str(self._path)

    # -- opening -----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA foreign_keys=OFF")
        # When the WAL starts over after a burst, give the disk space back.
        conn.execute("PRAGMA journal_size_limit=67108864")
        return conn

    def open(self) -> int:
        """Open or create the database; refuse, before writing anything, a file this
        process cannot write, a corrupt or foreign one, and a newer schema
        (:func:`check_untouched`)."""
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise not_writable(self._path.parent) from None
        check_untouched(self._path)
        try:
            conn = self._connect()
            version = self._schema_version(conn)
            for step in range(version, SCHEMA_VERSION):
                conn.executescript("BEGIN;" + MIGRATIONS[step] + "COMMIT;")
                conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (step + 1,)
                )
            self._recover_tail(conn)
            _lift_to_1_0(conn)
            server_seq = _high_water(conn)
        except (sqlite3.DatabaseError, OSError) as error:  # OSError: the log's tail or the folder
            raise refusal(self._path, error) from None
        self._writer_conn = conn
        self._reader = self._connect()
        self._loop = asyncio.get_running_loop()
        if self._on_loop:
            # The loop's commits never checkpoint (that fsyncs); a thread of its own does.
            conn.execute("PRAGMA wal_autocheckpoint=0")
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="ahp-store-writer")
            self._checkpointer = self._connect()
            target, name = self._checkpoint_loop, "ahp-store-checkpointer"
        else:
            target, name = self._write_loop, "ahp-store-writer"
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()
        log.info("store opened", path=str(self._path), server_seq=server_seq)
        return server_seq

    def _recover_tail(self, conn: sqlite3.Connection) -> None:
        """At open: fold what the log's tail holds beyond the database; start a new tail file.

        The files read are deleted once a checkpoint has made the fold durable
        (here, or at a later one); files that do not continue where the
        database stands are renamed aside and never applied (tail.py).
        """
        position = _tail_position(conn)
        found = replay(self._path, position)
        for path, why in found.foreign:
            aside = path.with_name(path.name.replace("-tail.", "-tail-set-aside.", 1))
            path.rename(aside)
            log.warning("tail file set aside", file=str(aside), reason=why)
        if found.stopped is not None and not found.foreign:
            log.warning("tail replay stopped", reason=found.stopped)
        if self._on_loop:
            try:
                self._tail = TailFile.create(
                    self._path, found.generation + 1, (bytes(16), 0), sync=True
                )
            except OSError as error:
                raise StoreError(f"{self._path}: cannot create the log's tail: {error}") from None
            self._barrier = position.barrier if position else 0
            self._folded_at = self._tail.position(self._barrier)
            new: Position | None = self._folded_at
        else:  # (FULL commits straight into the database; the position stays put)
            new = found.reached
        conn.execute("BEGIN IMMEDIATE")
        before = conn.total_changes
        conn.executemany(_INSERT_SEGMENT_AGAIN, found.rows)
        if conn.total_changes - before != len(found.rows):
            log.warning(
                "tail replay found rows already in the database",
                rows=len(found.rows),
                inserted=conn.total_changes - before,
            )
        _raise_high_water(conn, found.rows)
        if new is not None:
            conn.execute(_SET_TAIL, (new.encode(),))
        conn.execute("COMMIT")
        if found.rows:
            log.info("tail folded at open", rows=len(found.rows), files=len(found.consumed))
        if found.consumed:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy == 0 and frames == copied:
                for path in found.consumed:
                    path.unlink(missing_ok=True)
            else:
                self._retired = [(0, path) for path in found.consumed]

    @staticmethod
    def _schema_version(conn: sqlite3.Connection) -> int:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone()
        if not exists:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise StoreError("the file holds tables that are not an ahp-server database")
            return 0
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    async def close(self) -> None:
        if self._thread is None:
            return
        if self._failure is None:  # after a failed commit there is nothing to wait for
            await self.flush()
            await self._fold_now()
        if self._flight is not None:  # (the store failed while it ran)
            await asyncio.wait([self._flight])
        if self._executor is not None:
            self._executor.shutdown(wait=False)  # (idle: nothing is in flight)
            self._executor = None
        if self._fold_timer is not None:
            self._fold_timer.cancel()
            self._fold_timer = None
        with self._ready:
            self._stopping = True
            self._ready.notify()
        await asyncio.to_thread(self._thread.join)
        self._thread = None
        if self._on_loop:
            self._checkpointer.close()
        if self._tail is not None:
            self._tail.close()
        self._writer_conn.close()
        if self._reader is not None:
            self._reader.close()
        log.info("store closed", path=str(self._path))

    # -- the writer ------------------------------------------------------------------------

    def _enqueue(
        self,
        write: Callable[[sqlite3.Connection], object] | None,
        row: Row | None = None,
        on_commit: Callback | None = None,
        size: int = 0,
    ) -> None:
        """Queue a write; ``size`` is about how many bytes it stores (for checkpoints)."""
        if self._failure is not None:
            raise StoreError(f"{self._path}: the store failed: {self._failure}")
        self._wal_bytes += size
        self._queued += 1
        self._queue.append((write, row, on_commit, self._queued))  # deque.append is thread-safe
        if write is not None:
            self._rows_only = False
        if self._on_loop:
            loop = self._loop
            assert loop is not None
            if row is not None:
                self._window.wrote(row[1], loop.time)
            if not self._scheduled:
                self._scheduled = True
                # Group across loop iterations while streams run at once: they
                # would otherwise commit each of their deltas alone.
                delay = self._window.delay(loop.time())
                if delay > 0:
                    self._timer = loop.call_later(delay, self._commit_on_loop)
                else:
                    loop.call_soon(self._commit_on_loop)
        elif self._idle:  # wake the writer only when it sleeps (see _write_loop)
            with self._ready:
                self._ready.notify()
        if self._queued - self._committed > HIGH_WATER:
            self._room.clear()

    def _commit_on_loop(self) -> None:
        """Group commit on the event loop: everything queued since the last one.

        Scheduled by the first write after a commit, so it runs once the tasks
        ready now have run: one commit for all they produced. With
        ``synchronous=NORMAL`` a commit is a write into the OS page cache, no
        fsync (a crash of the process loses nothing; a power cut may lose the
        last commits — the same as SQLite's own guarantee for NORMAL).

        A commit of envelopes only — the hot path: a stream's deltas, a
        client's drafts — is one record appended to the log's tail (one
        ``write()``, tail.py), here, on the loop, folded into the database
        later by :meth:`_fold`. Any other commit is a SQLite transaction of
        its writes (:meth:`_transact`) that leaves a barrier in the tail,
        followed there by the batch's envelopes; it runs in the writer
        thread, so the loop goes on serving while it does. The commits
        queued after it wait for it (their order is the order of delivery);
        a fold's transaction holds nothing back.
        Checkpoints, which fsync, run in a thread of their own.
        """
        self._scheduled = False
        self._timer = None
        queue = self._queue
        if self._failure is not None or not queue or self._holding:
            # (After a checkpoint, _checkpoint_done commits what waited. The
            # tail waits too: what it took would pile up unfolded, and the
            # queue's high-water mark is what holds producers back.)
            return
        if self._flight is not None and (
            self._flight_writes or not self._rows_only or self._unfolded_bytes >= self._fold_bytes
        ):
            # After a transaction with writes; a transaction after the fold in
            # flight; and the tail, once it holds a fold's worth again, after
            # it too (the next fold stays one fold's size, which is what keeps
            # the WAL within its bound): _landed commits what waited.
            return
        tail = self._tail
        assert self._loop is not None
        assert tail is not None
        self._window.last_commit = self._loop.time()
        batch = list(queue)
        queue.clear()
        to_tail = self._rows_only
        self._rows_only = True
        if not to_tail:
            # A deletion folds the tail first: rows of the channel left in it
            # would come back with a later fold.
            fold, self._deletions = self._deletions > 0, 0
            self._transact(batch, fold=fold)
            return
        started = time.perf_counter()
        rows = [row for _, row, _, _ in batch if row is not None]
        try:
            if rows:  # (none: only callbacks, Store.after_queued)
                runs = segments(rows)
                self._unfolded_bytes += tail.append_segments(runs)
                self._unfolded.extend(runs)
        except Exception as error:  # callback boundary, as in the writer thread: the store stops
            log.critical("commit failed: stopping the store", path=str(self._path), exc_info=True)
            self._stop_on(error)
            return
        self.commits += 1
        self.commit_seconds += time.perf_counter() - started
        self._deliver(batch)
        self._fold_due()

    def _deliver(self, batch: list[_Write]) -> None:
        """On the loop: run a committed batch's callbacks, in order."""
        if not batch:
            return
        self._delivering = True
        try:
            self._committed_batch([cb for _, _, cb, _ in batch if cb is not None], batch[-1][3])
        finally:
            self._delivering = False

    def _fold_due(self) -> None:
        """Fold now if the tail holds enough unfolded, else within the fold period."""
        assert self._loop is not None
        if self._unfolded_bytes >= self._fold_bytes:
            self._loop.call_soon(self._fold)
        elif (self._unfolded or self._snapshots) and self._fold_timer is None:
            self._fold_timer = self._loop.call_later(self._fold_seconds, self._fold)

    def _stop_on(self, error: BaseException) -> None:
        """A commit failed (logged by the caller): nothing more commits; tell those who wait."""
        if self._flight is None:  # (a transaction in the writer thread rolls back there)
            with contextlib.suppress(sqlite3.Error):
                self._writer_conn.execute("ROLLBACK")
        self._failure = error
        self._unheld.set()
        self._failed(error)

    def _fold(self) -> None:
        """Fold the log's tail into the database: one transaction for many commits.

        Not while the loop holds its transactions for a checkpoint
        (:meth:`_checkpoint_done` folds then; :meth:`_fold_now` waits for it),
        nor while a transaction is in flight (:meth:`_landed` folds then).
        """
        if self._fold_timer is not None:
            self._fold_timer.cancel()
            self._fold_timer = None
        if (
            self._failure is not None
            or not (self._unfolded or self._snapshots)
            or self._holding
            or self._flight is not None
        ):
            return
        self._transact([])

    async def _fold_now(self) -> None:
        """Fold the tail now and wait for it (a read, or closing, needs the log
        complete) — after the truncating checkpoint, if one runs (it locks
        writers out: _bound_wal), and after the transaction in flight."""
        while self._failure is None:
            if self._holding:
                await self._unheld.wait()
            elif self._flight is not None:
                await asyncio.wait([self._flight])
            elif self._unfolded or self._snapshots:
                self._fold()
            else:
                return

    def _transact(self, batch: list[_Write], *, fold: bool = True) -> None:
        """Start a transaction in the writer thread: ``batch``'s writes and the
        snapshots waiting, and with ``fold`` the tail not yet folded and the
        batch's envelopes first.

        The tail's rows and the queued row writes' values are taken here, on
        the loop; the thread only runs SQL. With writes other than envelopes
        the transaction leaves a barrier in the tail once committed (tail.py
        says why), before any later commit goes there. Without ``fold`` (a
        turn, a marker, a catalogue row: small), the tail stays where the
        last fold left it, and the batch's envelopes go to the tail after the
        barrier once the transaction has committed. Past its size bound the
        tail moves to a new file before a fold: that fold takes all of the
        old one, which goes once a checkpoint has made it durable.
        """
        loop, tail, executor = self._loop, self._tail, self._executor
        assert loop is not None
        assert tail is not None
        assert executor is not None
        # The batch takes every queued write: a newer value from now on is queued anew.
        self._latest.clear()
        rows = [row for _, row, _, _ in batch if row is not None]
        ordered = [(float(n), write) for write, _, _, n in batch if write is not None]
        barrier = self._barrier + 1 if ordered else self._barrier
        # Every transaction takes the snapshots waiting, each after the writes
        # queued before it: a write queued after a snapshot is never in the
        # database without it (a turn after the snapshot counting it, say).
        snapshots = [(n + 0.5, write) for _, n, write in self._snapshots]
        writes = [write for _, write in sorted(ordered + snapshots, key=lambda w: w[0])]
        self._snapshots.clear()
        if not fold:
            held = segments(rows) if rows else []
            position = dataclasses.replace(self._folded_at, barrier=barrier).encode()
            folded: list[tuple[str, int, int, bytes]] = []
        else:
            held = []
            if self._fold_timer is not None:
                self._fold_timer.cancel()
                self._fold_timer = None
            # A row per chat, not one per commit (group.py). Joined here, on the
            # loop (about a millisecond a megabyte): joined in the writer thread,
            # the rows' bytes came from that thread's malloc arena, which kept
            # them after the fold (+10 KiB of resident memory a chat after a turn).
            folded = merge_segments(self._unfolded + (segments(rows) if rows else []))
            self._unfolded = []
            self._unfolded_bytes = 0
        retired: TailFile | None = None
        if fold and tail.size >= self._tail_file_bytes:
            try:
                self._tail = TailFile.create(
                    self._path, tail.generation + 1, (tail.nonce, tail.size), sync=False
                )
            except OSError as error:
                log.critical("no new tail file: stopping the store", path=str(self._path))
                self._stop_on(error)
                return
            retired, tail = tail, self._tail
        if fold:
            self._folded_at = tail.position(barrier)
            position = self._folded_at.encode()
        self._flight_writes = bool(ordered)
        if not fold and not self._window.concurrent(loop.time()):
            # A lone stream's small transaction (a turn, a marker) runs here: a
            # handoff to the thread would double a lone turn's commit latency,
            # and no other stream waits behind the loop meanwhile.
            flight = loop.create_future()
            self._flight = flight
            try:
                flight.set_result(self._transaction(folded, writes, position))
            except Exception as error:  # noqa: BLE001 - reported by _landed: the store stops
                flight.set_exception(error)
            self._landed(flight, batch, barrier, retired, held)
            return
        flight = loop.run_in_executor(executor, self._transaction, folded, writes, position)
        self._flight = flight
        flight.add_done_callback(lambda done: self._landed(done, batch, barrier, retired, held))

    def _transaction(
        self,
        rows: list[tuple[str, int, int, bytes]],
        writes: list[Callable[[sqlite3.Connection], object]],
        position: str,
    ) -> float:
        """In the writer thread: one transaction; returns how long it took (seconds).

        Envelopes go in first, as log segments, then the other writes in queue
        order. That order is safe: the other writes only delete log rows at or
        below a snapshot's ``serverSeq`` (earlier envelopes, which they delete
        either way) or of a deleted channel (which queues nothing after its
        deletion).
        """
        conn = self._writer_conn
        started = time.perf_counter()
        try:
            conn.execute("BEGIN IMMEDIATE")
            if rows:
                conn.executemany(_INSERT_SEGMENT, rows)
                _raise_high_water(conn, rows)
            for write in writes:
                write(conn)
            conn.execute(_SET_TAIL, (position,))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        return time.perf_counter() - started

    def _landed(
        self,
        flight: asyncio.Future[float],
        batch: list[_Write],
        barrier: int,
        retired: TailFile | None,
        held: list[tuple[str, int, int, bytes]],
    ) -> None:
        """On the loop: the writer thread's transaction ended. Leave its barrier in the
        tail, and after it the envelopes it held; deliver the batch, then commit what
        waited and fold what came meanwhile."""
        self._flight = None
        self._flight_writes = False
        if self._failure is not None:  # (the store stopped meanwhile: a tail write failed)
            return
        error = BaseException("cancelled") if flight.cancelled() else flight.exception()
        if error is not None:
            log.critical("commit failed: stopping the store", path=str(self._path), exc_info=error)
            self._stop_on(error)
            return
        if batch:
            self.commits += 1
            self.commit_seconds += flight.result()
        tail = self._tail
        assert tail is not None
        try:
            if barrier != self._barrier:
                tail.append_barrier(barrier)
                self._barrier = barrier
            if held:
                self._unfolded_bytes += tail.append_segments(held)
                self._unfolded.extend(held)
        except OSError as failed:
            log.critical("tail write failed: stopping the store", path=str(self._path))
            self._stop_on(failed)
            return
        self._deliver(batch)
        self._transacted(retired)
        assert self._loop is not None
        if self._queue and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._commit_on_loop)
        self._fold_due()

    def _transacted(self, retired: TailFile | None) -> None:
        """After each transaction: checkpoints, and the tail file it retired."""
        self._transactions += 1
        self._wal_bytes += 8192  # each commit writes a page or two besides its data
        if retired is not None:
            # Folded whole: it goes once a checkpoint has made this transaction durable.
            retired.close()
            self._retired.append((self._transactions, retired.path))
        if self._bound_wal():
            # The WAL reached its bound: the loop's commits wait (writes queue;
            # actors run up to their in-flight limit) until a checkpoint has
            # truncated it — the one running, if any, then a truncating one.
            self._holding = True
            self._unheld.clear()
            if not self._checkpoint_running:
                self._ask_checkpoint()
        elif self._wal_bytes >= self._checkpoint_bytes and not self._checkpoint_running:
            # Checkpoints copy the WAL into the database and fsync it, in the
            # checkpointer thread while commits go on, so that the truncating
            # one the bound calls for finds little left to copy. One that races
            # new commits cannot let the WAL start over, so the WAL grows while
            # it runs, for as long as its fsync takes: only the bound caps it.
            # (A writer thread checkpointing in line would hold commits for
            # every checkpoint.)
            self._ask_checkpoint()

    def _bound_wal(self) -> bool:
        """After a transaction: the WAL file's size (one ``stat``); true if it is at the bound.

        Checked after every transaction, and every transaction waits while it
        is true, so the file never passes the bound by more than the one
        transaction that crossed it, however slow the disk (docs/durability.md).
        """
        size = self._wal_size()
        self.wal_peak = max(self.wal_peak, size)
        if size < self._wal_hold_at:
            return False
        self.wal_holds += 1
        return True

    def _wal_size(self) -> int:
        try:
            return os.stat(self._wal_path).st_size
        except FileNotFoundError:
            return 0

    def _ask_checkpoint(self) -> None:
        """Wake the checkpointer: truncating while the loop holds its commits, else passive."""
        self._wal_bytes = 0
        self._checkpoint_running = True
        self._checkpoint_truncates = self._holding
        self._checkpoint_mark = self._transactions
        with self._ready:
            self._checkpoint_due = True
            self._ready.notify()

    def _truncate_wal(self, conn: sqlite3.Connection) -> tuple[int, int, int]:
        """``wal_checkpoint(TRUNCATE)`` on ``conn`` (no transaction writes meanwhile):
        copies the WAL and empties its file, retried while readers keep it from
        restarting the WAL (each try waits for them ``conn``'s busy timeout);
        ``(busy, frames, copied)`` of the last try, ``busy`` 1 if it never could
        (logged)."""
        patience = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        conn.execute(f"PRAGMA busy_timeout = {CHECKPOINT_BUSY_MS}")
        try:
            for _ in range(CHECKPOINT_TRIES):
                busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy == 0:
                    break
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(patience)}")
        if busy:
            log.warning(
                "WAL past its bound: readers kept the checkpoint from truncating it",
                path=str(self._path),
                wal_bytes=self._wal_size(),
                tries=CHECKPOINT_TRIES,
            )
        return int(busy), int(frames), int(copied)

    def _checkpoint_done(self, busy: int, frames: int, copied: int) -> None:
        """On the loop: the checkpoint found ``frames`` pages in the WAL and copied
        ``copied``; ``busy`` (a truncating one) readers kept it from truncating the WAL."""
        truncated = self._checkpoint_truncates and frames >= 0 and busy == 0
        if frames >= 0 and copied == frames and self._retired:
            # (-1: the checkpoint failed; the next one tries again)
            # Complete: the database file holds, fsynced, every transaction
            # up to the mark — and so everything the retired files held.
            mark = self._checkpoint_mark
            for _, path in [r for r in self._retired if r[0] <= mark]:
                path.unlink(missing_ok=True)
            self._retired = [r for r in self._retired if r[0] > mark]
        self._checkpoint_running = False
        if self._holding and not self._checkpoint_truncates:
            self._ask_checkpoint()  # the passive one that ran when the bound was reached
            return
        if self._holding:
            # Truncated: the bound holds again. Not (readers, or an error; logged):
            # commits go on, and wait again once the WAL has grown another limit
            # — never a wait per commit while a long reader (a backup) runs.
            size = 0 if truncated else self._wal_size()
            self._wal_hold_at = size + self._wal_limit
            self._holding = False
            self._unheld.set()
        assert self._loop is not None
        if self._queue and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._commit_on_loop)
        if (self._unfolded or self._snapshots) and (
            self._fold_timer is None or self._unfolded_bytes >= self._fold_bytes
        ):  # (a fold came due while the checkpoint held it)
            self._loop.call_soon(self._fold)

    def _checkpoint_loop(self) -> None:
        """The checkpointer thread (synchronous=NORMAL): copies the WAL into the database."""
        while True:
            with self._ready:
                while not self._checkpoint_due and not self._stopping:
                    self._ready.wait()
                if self._stopping:
                    return
                self._checkpoint_due = False
                truncate = self._checkpoint_truncates
            busy = frames = copied = -1
            try:
                if truncate:  # the loop holds its commits meanwhile
                    busy, frames, copied = self._truncate_wal(self._checkpointer)
                else:  # PASSIVE never waits for the loop's connection (see _commit_on_loop).
                    busy, frames, copied = self._checkpointer.execute(
                        "PRAGMA wal_checkpoint(PASSIVE)"
                    ).fetchone()
            except sqlite3.Error:  # thread boundary: the next checkpoint tries again
                log.warning("checkpoint failed", path=str(self._path), exc_info=True)
            finally:
                assert self._loop is not None
                with contextlib.suppress(RuntimeError):  # the loop is gone: nothing waits
                    self._loop.call_soon_threadsafe(self._checkpoint_done, busy, frames, copied)

    def _write_loop(self) -> None:
        conn = self._writer_conn
        while True:
            with self._ready:
                # `_idle` is set before the queue is checked, and producers append
                # before they read it: an append is never missed.
                self._idle = True
                while not self._queue and not self._stopping:
                    self._ready.wait()
                self._idle = False
                if not self._queue and self._stopping:
                    return
            batch = []
            while self._queue:
                batch.append(self._queue.popleft())
            started = time.perf_counter()
            try:
                self._commit(conn, batch)
            except Exception as error:  # thread boundary: a failed commit stops the store
                log.critical(
                    "commit failed: stopping the store", path=str(self._path), exc_info=True
                )
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                self._failure = error
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._failed, error)
                return
            self.commits += 1
            self.commit_seconds += time.perf_counter() - started
            callbacks = [cb for _, _, cb, _ in batch if cb is not None]
            last = batch[-1][3]
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._committed_batch, callbacks, last)
            if self._bound_wal():  # the next commit waits for a truncating checkpoint
                try:
                    busy, _, _ = self._truncate_wal(conn)
                except sqlite3.Error:  # not a failed commit: the next one tries again
                    log.warning("checkpoint failed", path=str(self._path), exc_info=True)
                    busy = 1
                self._wal_hold_at = (self._wal_size() if busy else 0) + self._wal_limit

    def _commit(self, conn: sqlite3.Connection, batch: list[_Write]) -> None:
        """``synchronous=FULL``, in the writer thread: one batch in one transaction.

        Envelopes first, as one log segment per channel, then the other writes
        in queue order (:meth:`_transaction` says why that order is safe).
        Envelopes only of a single channel are one INSERT in autocommit mode:
        one call into SQLite instead of four.
        """
        rows = [row for _, row, _, _ in batch if row is not None]
        writes = [write for write, _, _, _ in batch if write is not None]
        runs = segments(rows) if rows else []
        if not writes and len(runs) <= 1:
            if runs:  # (none: only callbacks, Store.after_queued)
                conn.execute(_INSERT_SEGMENT, runs[0])
            return
        conn.execute("BEGIN IMMEDIATE")
        if runs:
            conn.executemany(_INSERT_SEGMENT, runs)
            _raise_high_water(conn, runs)
        for write in writes:
            write(conn)
        conn.execute("COMMIT")

    def commit_soon(self) -> None:
        """Someone waits for what was just queued (a client's echo): do not hold it back.

        If all of it goes to the log's tail — one ``write()`` — it is committed
        now, in the caller's step, and delivered as the store without
        persistence delivers (in ``append_envelope``): the echo leaves in this
        loop iteration instead of the next. Not from within a delivery, whose
        remaining envelopes must go out first (``serverSeq`` order).
        """
        timer = self._timer
        if timer is not None:
            timer.cancel()
            self._timer = None
        if self._tail is not None and self._queue and self._rows_only and not self._delivering:
            self._commit_on_loop()  # (a call already scheduled finds nothing left)
        elif timer is not None:
            assert self._loop is not None
            self._loop.call_soon(self._commit_on_loop)

    # -- queued writes ------------------------------------------------------------------------

    def append_envelope(
        self,
        seq: int,
        channel: str,
        at_ms: float,
        envelope: bytes,
        on_commit: Callable[..., None],
        *args: object,
    ) -> None:
        # The hot path (one call per action): a row, not a closure; see _write_loop.
        self._enqueue(None, (seq, channel, at_ms, envelope), (on_commit, args), len(envelope))

    def _write_latest(self, key: tuple[str, str], statement: str, values: tuple[Any, ...]) -> None:
        """Queue ``statement`` with ``values``, or give a queued one these newer values.

        For writes of one row where only the newest value matters — a
        session's catalogue row, rewritten whenever one of its chats changes;
        a chat's unfinished-turn marker, set and cleared — several of them
        before one commit (chats of a session busy within one commit window)
        write the row once. The row is written where the first was queued,
        with the values of the last; a commit takes everything queued before
        it, so those values never run ahead of the envelopes they follow.
        (Only on the loop: a writer thread could take the row while the loop
        gives it a newer value that belongs to a later commit.)
        """
        if not self._on_loop:
            self._enqueue(lambda conn: conn.execute(statement, values))
            return
        if self._failure is not None:
            raise StoreError(f"{self._path}: the store failed: {self._failure}")
        cell = self._latest.get(key)
        if cell is not None:
            cell[0] = values
            return
        cell = [values]
        self._latest[key] = cell

        def write(conn: sqlite3.Connection) -> None:
            if self._latest.get(key) is cell:
                del self._latest[key]  # a newer value from now on is queued anew
            conn.execute(statement, cell[0])

        self._enqueue(write)

    def put_channel(
        self, uri: str, kind: str, session: str | None, created_at: str, summary: bytes | None
    ) -> None:
        self._write_latest(
            ("channel", uri),
            "INSERT INTO channels (uri, kind, session, created_at, summary) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (uri) DO UPDATE SET summary = excluded.summary",
            (uri, kind, session, created_at, summary),
        )

    def set_unfinished(self, uri: str, marker: str | None) -> None:
        # The column keeps its schema-1 name: it held only a chat's turn id then.
        self._write_latest(
            ("unfinished", uri), "UPDATE channels SET active_turn = ? WHERE uri = ?", (marker, uri)
        )

    def set_channel_session(self, uri: str, session: str) -> None:
        self._write_latest(
            ("session", uri), "UPDATE channels SET session = ? WHERE uri = ?", (session, uri)
        )

    def put_agent_state(self, uri: str, state: str | None) -> None:
        self._enqueue(
            lambda conn: conn.execute(
                "UPDATE channels SET agent_state = ? WHERE uri = ?", (state, uri)
            )
        )

    def put_snapshot(self, uri: str, seq: int, state: bytes, turn_count: int) -> None:
        def write(conn: sqlite3.Connection) -> None:
            previous = conn.execute(
                "SELECT seq FROM snapshots WHERE channel = ?", (uri,)
            ).fetchone()
            conn.execute(
                "INSERT OR REPLACE INTO snapshots (channel, seq, turn_count, state) "
                "VALUES (?, ?, ?, ?)",
                (uri, seq, turn_count, state),
            )
            if previous is not None:
                # Keep the log since the previous snapshot: it serves reconnects.
                conn.execute(
                    "DELETE FROM log WHERE channel = ? AND last_seq <= ?", (uri, previous[0])
                )
                conn.execute(
                    "UPDATE channels SET log_floor = max(log_floor, ?) WHERE uri = ?",
                    (previous[0], uri),
                )

        if not self._on_loop:
            self._enqueue(write, size=len(state))
            return
        if self._failure is not None:
            raise StoreError(f"{self._path}: the store failed: {self._failure}")
        self._wal_bytes += len(state)
        self._snapshots.append((uri, self._queued, write))
        self._fold_due()

    def put_turn(self, chat: str, position: int, turn_id: str, turn: bytes) -> None:
        self._enqueue(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO turns (chat, position, turn_id, turn) VALUES (?, ?, ?, ?)",
                (chat, position, turn_id, turn),
            ),
            size=len(turn),
        )

    def truncate_turns(self, chat: str, keep: int) -> None:
        self._enqueue(
            lambda conn: conn.execute(
                "DELETE FROM turns WHERE chat = ? AND position >= ?", (chat, keep)
            )
        )

    def put_client(
        self,
        client_id: str,
        version: str,
        user: str | None = None,
        forget: Sequence[str] = (),
    ) -> None:
        forgotten = [(c,) for c in forget]

        def write(conn: sqlite3.Connection) -> None:
            seen = conn.execute("SELECT coalesce(max(seen), 0) + 1 FROM clients").fetchone()[0]
            conn.execute(
                "INSERT OR REPLACE INTO clients (client_id, version, seen, user_name) "
                "VALUES (?, ?, ?, ?)",
                (client_id, version, seen, user),
            )
            conn.executemany("DELETE FROM clients WHERE client_id = ?", forgotten)

        self._enqueue(write)

    def delete_channel(self, uri: str) -> None:
        # Row writes queued before the deletion stay before it; one after it
        # (the same URI used again) is queued after it, not merged into them.
        for kind in ("channel", "unfinished"):
            self._latest.pop((kind, uri), None)
        self._snapshots = [s for s in self._snapshots if s[0] != uri]
        self._deletions += 1

        def write(conn: sqlite3.Connection) -> None:
            # Its numbers may be the newest ever sent: keep them in the mark.
            conn.execute(
                "UPDATE meta SET value = max(CAST(value AS INTEGER),"
                " coalesce((SELECT max(last_seq) FROM log WHERE channel = ?), 0),"
                " coalesce((SELECT seq FROM snapshots WHERE channel = ?), 0))"
                " WHERE key = 'server_seq'",
                # Plain ``?`` twice: Python 3.12.0-3.12.3 warn that a numbered ``?1`` bound
                # from a sequence will be an error.
                (uri, uri),
            )
            for table, column in (
                ("channels", "uri"),
                ("snapshots", "channel"),
                ("log", "channel"),
                ("turns", "chat"),
            ):
                conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (uri,))  # noqa: S608

        self._enqueue(write)

    # -- reads (worker thread, own connection) -------------------------------------------------

    async def _read(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        reader = self._reader
        assert reader is not None, "store not open"
        if self._unfolded or self._snapshots or self._flight is not None:
            # What was committed to the tail is read from the database.
            await self._fold_now()
        lock = self._read_lock

        def run() -> Any:
            with lock:
                return fn(reader)

        return await asyncio.to_thread(run)

    async def clients(self) -> list[tuple[str, str, str | None]]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT client_id, version, user_name FROM clients ORDER BY seen"
            ).fetchall()
        )
        return [(str(a), str(b), None if u is None else str(u)) for a, b, u in rows]

    async def channels(self) -> list[ChannelRow]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT uri, kind, session, created_at, summary, active_turn FROM channels"
            ).fetchall()
        )
        return [ChannelRow(*row) for row in rows]

    async def load(self, uri: str, *, retained_turns: int) -> LoadedChannel | None:
        def read(conn: sqlite3.Connection) -> LoadedChannel | None:
            row = conn.execute(
                "SELECT log_floor, agent_state FROM channels WHERE uri = ?", (uri,)
            ).fetchone()
            if row is None:
                return None
            snap = conn.execute(
                "SELECT seq, turn_count, state FROM snapshots WHERE channel = ?", (uri,)
            ).fetchone()
            seq, turn_count, state = snap if snap else (0, 0, None)
            log_floor = row[0]
            envelopes = [
                (seq, at_ms, bytes(envelope))
                for (entries,) in conn.execute(
                    "SELECT entries FROM log WHERE channel = ? ORDER BY first_seq", (uri,)
                )
                for seq, at_ms, envelope in SEGMENT.decode(entries)
                # a segment may straddle the floor: only what is after it counts
                if seq > log_floor
            ]
            first = max(0, turn_count - retained_turns)
            turns = conn.execute(
                "SELECT turn FROM turns WHERE chat = ? AND position >= ? AND position < ? "
                "ORDER BY position",
                (uri, first, turn_count),
            ).fetchall()
            return LoadedChannel(
                snapshot=state,
                snapshot_seq=seq,
                turn_count=turn_count,
                envelopes=envelopes,
                log_floor=log_floor,
                turns=[bytes(t[0]) for t in turns],
                first_turn_position=first,
                agent_state=row[1],
            )

        result: LoadedChannel | None = await self._read(read)
        return result

    async def turn_position(self, chat: str, turn_id: str) -> int | None:
        row = await self._read(
            lambda c: c.execute(
                "SELECT position FROM turns WHERE chat = ? AND turn_id = ?", (chat, turn_id)
            ).fetchone()
        )
        return int(row[0]) if row else None

    async def turns(self, chat: str, before: int, limit: int) -> list[bytes]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT turn FROM turns WHERE chat = ? AND position >= ? AND position < ? "
                "ORDER BY position",
                (chat, max(0, before - limit), before),
            ).fetchall()
        )
        return [bytes(r[0]) for r in rows]

    async def load_chat(
        self, uri: str, *, retained_turns: int, retained_bytes: int
    ) -> LoadedChannel | None:
        loaded = await self.load(uri, retained_turns=0)
        if loaded is None:
            return None
        end = loaded.turn_count
        rows = await self._newest(uri, max(0, end - retained_turns), end, retained_bytes)
        loaded.turns = rows
        loaded.first_turn_position = end - len(rows)
        return loaded

    async def turns_within(self, chat: str, before: int, limit: int, max_bytes: int) -> list[bytes]:
        return await self._newest(chat, max(0, before - limit), before, max_bytes)

    async def _newest(self, chat: str, start: int, end: int, budget: int) -> list[bytes]:
        """The newest turns in ``[start, end)`` that fit in ``budget`` (at least one),
        oldest first: read newest first, stopping at the first that does not fit,
        so a huge history costs one turn past the budget, never all of it."""

        def read(conn: sqlite3.Connection) -> list[bytes]:
            rows: list[bytes] = []
            total = 0
            for (turn,) in conn.execute(
                "SELECT turn FROM turns WHERE chat = ? AND position >= ? AND position < ? "
                "ORDER BY position DESC",
                (chat, start, end),
            ):
                if rows and total + len(turn) > budget:
                    break
                total += len(turn)
                rows.append(bytes(turn))
            rows.reverse()
            return rows

        result: list[bytes] = await self._read(read)
        return result


def _lift_to_1_0(conn: sqlite3.Connection) -> None:
    """Rows a host before protocol 1.0 wrote, in the 1.0 shape: once, in one
    transaction, after the tail is folded in (store/lift.py)."""
    if conn.execute("SELECT 1 FROM meta WHERE key = ?", (MARKER,)).fetchone() is not None:
        return
    conn.execute("BEGIN IMMEDIATE")
    kinds = dict(conn.execute("SELECT uri, kind FROM channels").fetchall())
    snapshots = conn.execute("SELECT channel, state FROM snapshots").fetchall()
    sessions = {c: _blob(s) for c, s in snapshots if kinds.get(c) == "session"}
    lifter = Lifter(kinds, sessions)
    lifted = 0
    for channel, state in snapshots:
        out = lifter.snapshot(channel, _blob(state))
        if out is not None:
            conn.execute("UPDATE snapshots SET state = ? WHERE channel = ?", (out, channel))
            lifted += 1
    for chat, position, turn in conn.execute("SELECT chat, position, turn FROM turns").fetchall():
        out = lifter.turn(_blob(turn))
        if out is not None:
            conn.execute(
                "UPDATE turns SET turn = ? WHERE chat = ? AND position = ?", (out, chat, position)
            )
            lifted += 1
    for channel, first, entries in conn.execute(
        "SELECT channel, first_seq, entries FROM log"
    ).fetchall():
        out = lifter.entries(_blob(entries))
        if out is not None:
            conn.execute(
                "UPDATE log SET entries = ? WHERE channel = ? AND first_seq = ?",
                (out, channel, first),
            )
            lifted += 1
    conn.execute("INSERT INTO meta VALUES (?, 1)", (MARKER,))
    conn.execute("COMMIT")
    if lifted:
        log.info("stored rows lifted to protocol 1.0", rows=lifted)


def _blob(value: bytes | str) -> bytes:
    """A JSON column as bytes (rows older migrations built with SQL are TEXT)."""
    return value.encode() if isinstance(value, str) else bytes(value)

"""The PostgreSQL store: the SQLite store's guarantees on a database server.

Layer: store (asyncpg; runs on the event loop). Chosen by ``storage.store =
"postgres://…"`` (``make_store`` in ``host/host.py``); the driver is imported
only then, so the embedded default starts without it. docs/durability.md.

Why asyncpg (and not psycopg 3): the store is all-async on the loop, and
asyncpg speaks the binary protocol directly from the loop with prepared
statements cached per connection — one round trip per group commit on the
hot path, and ``bytea``/``bigint`` without text conversions. psycopg 3's
strengths (a sync API, the libpq feature set) are not needed here.

Guarantees, as the SQLite store (``store/base.py``):

* Writes are queued from the loop and committed in groups by one writer task:
  **everything queued** goes into one transaction; then the envelopes'
  ``on_commit`` callbacks run on the loop, in order. Nothing is delivered
  before its commit returned.
* The ``serverSeq`` high-water mark (``meta.server_seq``) is raised with
  ``GREATEST`` in the same transaction — the envelope-only hot path is one
  statement (a CTE that inserts the segments and raises the mark).
* A commit window (``storage.commit_window_ms``) groups a stream's writes;
  ``commit_soon`` (a client waits) skips it. Backpressure as in SQLite:
  ``wait_for_room`` blocks producers above a high-water mark of queued writes.
* A failed commit stops the store (nothing of it is delivered; later writes
  raise :class:`StoreError`), as with SQLite: the process should restart.
  ``Store.failed`` is resolved with the error, so the store's owner learns it
  without polling. A lost connection is such a failure: the commit in flight
  may or may not have been written, so it is not retried (a retry could
  write it twice); the host stops and its supervisor starts it again.

Fencing (cluster mode, ``store/lease.py``): opened with ``fence=(lease name,
epoch)``, the store begins every commit transaction — the envelope-only one
too, which is then a transaction instead of one statement — with ``SELECT
epoch FROM cluster_lease WHERE name = $1 FOR SHARE`` and raises
:class:`Fenced` before writing anything unless the lease still has our epoch.
The share lock makes a takeover wait for a commit in flight, and every later
commit see the new epoch: a node that lost the lease never commits again (the
full reasoning is in ``lease.py``). ``start`` refuses to open a fenced store
whose epoch is not the lease's. Without a fence nothing changes.

Schema: versioned SQL migrations recorded in ``schema_version`` (one row per
applied version), applied under an advisory lock so two nodes starting at
once do not race; a database with a newer schema is refused. Tables mirror
SQLite schema 5: ``meta``, ``channels``, ``log`` (segments: one row per
channel per commit, a JSON array of ``[serverSeq, clock ms, envelope]``),
``snapshots``, ``turns``, ``clients``. The tables live in the connection's
``search_path`` schema: ``postgres://…/db?search_path=ahp`` puts them in
schema ``ahp`` (asyncpg passes unknown URL parameters as server settings).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import structlog

from ahp_server.store.base import ChannelRow, CommitWindow, LoadedChannel, Store, StoreError
from ahp_server.store.group import HIGH_WATER, SEGMENT, Callback, GroupCommit, Row, segments
from ahp_server.store.lift import MARKER, Lifter

__all__ = [
    "CHANNEL_NODE",
    "CLUSTER_DELIVERED",
    "CLUSTER_DIRECTORY",
    "CLUSTER_TABLES",
    "NUMBERING_KEY",
    "SCHEMA_VERSION",
    "Fenced",
    "PostgresStore",
    "is_postgres_url",
    "masked",
]

log = structlog.get_logger(__name__)

SCHEMA_VERSION = 6

#: ``meta`` row set to 1 once a sharded store (``store/sharded.py``) numbered the log
#: with the commit counter: a single-primary store must not open that database.
NUMBERING_KEY = "numbering"

#: Sharded mode's node leases and session owners (store/ownership.py uses them).
CLUSTER_TABLES = """
CREATE TABLE IF NOT EXISTS cluster_nodes (
    node TEXT PRIMARY KEY,
    incarnation TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    sessions INTEGER NOT NULL DEFAULT 0,
    turns INTEGER NOT NULL DEFAULT 0,
    roots TEXT[] NOT NULL DEFAULT '{}',
    draining BOOLEAN NOT NULL DEFAULT false,
    delivered BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS session_owner (
    session TEXT PRIMARY KEY,
    node TEXT NOT NULL,
    epoch BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS session_owner_node ON session_owner (node);
"""

#: Schema 4's column for a database whose cluster tables schema 3 made.
CLUSTER_DELIVERED = """
ALTER TABLE cluster_nodes ADD COLUMN IF NOT EXISTS delivered BIGINT NOT NULL DEFAULT 0;
"""

#: Schema 5: the working directory each session was made in (sharded mode: only a
#: node serving it may own the session, docs/scale-out.md "Working directories").
CLUSTER_DIRECTORY = """
ALTER TABLE session_owner ADD COLUMN IF NOT EXISTS directory TEXT;
"""

#: Schema 6: the node that made each terminal (sharded mode: a node that starts loads only
#: its own, docs/scale-out.md "Routing"); NULL for every other channel.
CHANNEL_NODE = """
ALTER TABLE channels ADD COLUMN IF NOT EXISTS node TEXT;
"""

#: Forward migrations: MIGRATIONS[n] brings schema n to n + 1 (one transaction each).
MIGRATIONS: dict[int, str] = {
    0: """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
    INSERT INTO meta VALUES ('server_seq', 0);
    CREATE TABLE channels (
        uri TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        session TEXT,
        created_at TEXT NOT NULL,
        summary BYTEA,
        active_turn TEXT,
        log_floor BIGINT NOT NULL DEFAULT 0,
        agent_state TEXT
    );
    CREATE INDEX channels_session ON channels (session);
    CREATE TABLE log (
        first_seq BIGINT PRIMARY KEY,
        channel TEXT NOT NULL,
        last_seq BIGINT NOT NULL,
        entries BYTEA NOT NULL
    );
    CREATE INDEX log_channel ON log (channel, first_seq);
    CREATE TABLE snapshots (
        channel TEXT PRIMARY KEY,
        seq BIGINT NOT NULL,
        turn_count INTEGER NOT NULL,
        state BYTEA NOT NULL
    );
    CREATE TABLE clients (
        client_id TEXT PRIMARY KEY,
        version TEXT NOT NULL,
        seen BIGINT NOT NULL
    );
    CREATE INDEX clients_seen ON clients (seen);
    CREATE TABLE turns (
        chat TEXT NOT NULL,
        position INTEGER NOT NULL,
        turn_id TEXT NOT NULL,
        turn BYTEA NOT NULL,
        PRIMARY KEY (chat, position)
    );
    """,
    # Schema 2: the user (multi-user mode) that first claimed a client id, so
    # another user cannot claim it after a restart (docs/protocol.md, "Client
    # identity"). NULL: single-token mode, or remembered before schema 2.
    1: """
    ALTER TABLE clients ADD COLUMN user_name TEXT;
    """,
    # Schema 3: sharded mode's node leases and session owners (store/ownership.py,
    # docs/scale-out.md "Sharded mode"). Unused by a single-primary host.
    2: CLUSTER_TABLES,
    # Schema 4: each node's delivered watermark, reported with its lease: log rows a
    # live node may still read to fill a gap in the feed are kept (store/sharded.py).
    3: CLUSTER_DELIVERED,
    # Schema 5: the working directory of each session's owner row (sharded mode).
    4: CLUSTER_DIRECTORY,
    # Schema 6: the node that made each terminal (sharded mode).
    5: CHANNEL_NODE,
}

#: Serialises migrations across nodes sharing a database (pg_advisory_xact_lock key).
_MIGRATION_LOCK = 0x41485001

#: The hot path: a batch of envelopes only, as one statement (one round trip).
_INSERT_SEGMENTS = """
WITH inserted AS (
    INSERT INTO log (channel, first_seq, last_seq, entries)
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[])
)
UPDATE meta SET value = GREATEST(value, $5) WHERE key = 'server_seq'
"""

#: A fenced store's first statement in every commit transaction (store/lease.py).
_FENCE = "SELECT epoch FROM cluster_lease WHERE name = $1 FOR SHARE"

#: The fenced hot path, still one statement: the envelopes and the mark are
#: written only if the lease row still has our epoch ($6, $7), share-locked for
#: the statement's transaction like ``_FENCE``. "UPDATE 0": fenced, nothing written.
_INSERT_SEGMENTS_FENCED = """
WITH fence AS (
    SELECT epoch FROM cluster_lease WHERE name = $6 AND epoch = $7 FOR SHARE
), inserted AS (
    INSERT INTO log (channel, first_seq, last_seq, entries)
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[])
    WHERE EXISTS (SELECT 1 FROM fence)
)
UPDATE meta SET value = GREATEST(value, $5)
WHERE key = 'server_seq' AND EXISTS (SELECT 1 FROM fence)
"""

_Connection = Any  # asyncpg.Connection: asyncpg ships no type information
#: A queued write: an envelope row or a function of the writer's connection,
#: an optional callback, and the write's position in the queue.
_Write = tuple[
    Callable[[_Connection], Awaitable[object]] | None,
    Row | None,
    Callback | None,
    int,
]


class Fenced(StoreError):
    """Another node holds the lease this store was fenced with: it must not commit."""


async def connect(url: str) -> _Connection:
    """One connection to ``url``; :class:`StoreError` (never with the password) if none."""
    import asyncpg  # lazily: only hosts configured for PostgreSQL need the driver

    try:
        return await asyncpg.connect(url, timeout=10)
    except (TimeoutError, OSError, ValueError, asyncpg.PostgresError) as error:
        raise StoreError(f"{masked(url)}: cannot connect to PostgreSQL ({error})") from None


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and str(url).split("://", 1)[0] in ("postgres", "postgresql")


def masked(url: str) -> str:
    """The URL with its password replaced by ``***``: the only form ever logged."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class PostgresStore(GroupCommit, Store):
    """A PostgreSQL database with group commit by one writer task on the loop."""

    durable = True

    def __init__(
        self,
        url: str,
        *,
        commit_window: float = 0.0,
        commit_timeout: float | None = None,
        readers: int = 4,
        fence: tuple[str, int] | None = None,
    ) -> None:
        self._url = url
        #: Seconds one commit may take (None: no bound).
        self._commit_timeout = commit_timeout
        #: (lease name, epoch): commit only while the lease has this epoch.
        self._fence = fence
        self._window = CommitWindow(commit_window)
        self._readers = readers
        self._queue: deque[_Write] = deque()
        self._queued = 0
        self._committed = 0
        self._room = asyncio.Event()
        self._room.set()
        self._wake = asyncio.Event()
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._stopping = False
        self._flushes: list[tuple[int, asyncio.Future[None]]] = []
        self._deliveries = deque()
        self._failure: BaseException | None = None
        self._writer_conn: _Connection = None
        self._pool: Any = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.commits = 0
        self.commit_seconds = 0.0

    @property
    def path(self) -> str:
        return masked(self._url)

    def _describe(self) -> str:
        return masked(self._url)

    def set_fence(self, fence: tuple[str, int]) -> None:
        """Fence the store with ``(lease name, epoch)`` before :meth:`start` (cluster mode:
        the node learns its epoch when it takes the lease, after the host was built)."""
        if self._task is not None:
            raise StoreError("fence the store before it is started")
        self._fence = fence

    # -- opening -----------------------------------------------------------------------------

    def open(self) -> int:
        raise StoreError("the PostgreSQL store opens from the event loop: await start()")

    async def start(self) -> int:
        """Connect, migrate (refusing a newer schema), start the writer; the high-water mark."""
        import asyncpg  # lazily: only hosts configured for PostgreSQL need the driver

        where = masked(self._url)
        conn = await connect(self._url)
        try:
            server_seq = await self._migrate(conn, where)
            await self._claim_numbering(conn, where)
            if self._fence is not None:
                await self._check_fence_at_start(conn, self._fence, where)
            self._pool = await asyncpg.create_pool(
                self._url, min_size=1, max_size=self._readers, timeout=10
            )
        except asyncpg.PostgresError as error:
            await conn.close()
            raise StoreError(f"{where}: cannot open the ahp-server database ({error})") from None
        except BaseException:
            await conn.close()
            raise
        self._writer_conn = conn
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._writer(), name="ahp-store-postgres-writer")
        log.info("store opened", store=where, server_seq=server_seq)
        return server_seq

    @staticmethod
    async def _migrate(conn: _Connection, where: str) -> int:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            version = await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_version")
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{where}: schema version {version} is newer than this ahp-server "
                    f"understands ({SCHEMA_VERSION}); upgrade ahp-server or restore a backup"
                )
            if version == 0 and await conn.fetchval(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename IN ('meta', 'log', 'channels')"
            ):
                raise StoreError(f"{where}: holds tables that are not an ahp-server database")
            for step in range(version, SCHEMA_VERSION):
                await conn.execute(MIGRATIONS[step])
                await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", step + 1)
            await _lift_to_1_0(conn)
            server_seq = await conn.fetchval("SELECT value FROM meta WHERE key = 'server_seq'")
        return int(server_seq)

    async def _claim_numbering(self, conn: _Connection, where: str) -> None:
        """Refuse a database a sharded store numbers (``store/sharded.py`` overrides this)."""
        mode = await conn.fetchval("SELECT value FROM meta WHERE key = $1", NUMBERING_KEY)
        if mode == 1:
            raise StoreError(
                f'{where}: is numbered by sharded nodes (cluster.mode = "sharded"); '
                "a single-primary host cannot share it"
            )

    @staticmethod
    async def _check_fence_at_start(conn: _Connection, fence: tuple[str, int], where: str) -> None:
        import asyncpg

        name, epoch = fence
        try:
            current = await conn.fetchval("SELECT epoch FROM cluster_lease WHERE name = $1", name)
        except asyncpg.UndefinedTableError:
            current = None
        if current != epoch:
            raise Fenced(
                f"{where}: lease {name!r} is at epoch {current}, not {epoch}: "
                "another node is primary"
            )

    async def abort(self) -> None:
        """Stop at once, committing nothing more: the writer is cancelled (a commit in
        flight rolls back with its connection) and every connection is terminated. For a
        node that stops after a failure while its process lives on (in-process tests)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self._writer_conn.terminate()
        self._pool.terminate()

    async def close(self) -> None:
        if self._task is None:
            return
        if self._failure is None:
            await self.flush()
        self._stopping = True
        self._wake.set()
        await self._task
        self._task = None
        await self._writer_conn.close()
        await self._pool.close()
        log.info("store closed", store=masked(self._url))

    # -- the writer ------------------------------------------------------------------------

    def _enqueue(
        self,
        write: Callable[[_Connection], Awaitable[object]] | None,
        row: Row | None = None,
        on_commit: Callback | None = None,
        channel: str | None = None,
    ) -> None:
        """Queue one write; ``channel``: the channel it writes for (a sharded store's fence)."""
        if self._failure is not None:
            raise StoreError(f"{masked(self._url)}: the store failed: {self._failure}")
        self._queued += 1
        self._queue.append((write, row, on_commit, self._queued))
        loop = self._loop
        assert loop is not None, "store not open"
        if row is not None:
            self._window.wrote(row[1], loop.time)
        if not self._scheduled:
            self._scheduled = True
            # Group across loop iterations while streams run at once, as SQLite does.
            delay = self._window.delay(loop.time())
            if delay > 0:
                self._timer = loop.call_later(delay, self._wake.set)
            else:
                loop.call_soon(self._wake.set)
        if self._queued - self._committed > HIGH_WATER:
            self._room.clear()

    async def _writer(self) -> None:
        """The one writer task: commit everything queued, then deliver it, in order.

        While a commit is in flight new writes queue up; they form the next
        group, so a busy store commits large groups without any window.
        """
        assert self._loop is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._scheduled = False
            self._timer = None
            if not self._queue:
                if self._stopping:
                    return
                continue
            self._window.last_commit = self._loop.time()
            batch = list(self._queue)
            self._queue.clear()
            started = time.perf_counter()
            try:
                try:
                    async with asyncio.timeout(self._commit_timeout):
                        await self._commit(batch)
                except TimeoutError:
                    raise StoreError(
                        f"{masked(self._url)}: no answer to a commit in "
                        f"{self._commit_timeout:g} s (storage.commit_timeout)"
                    ) from None
            except Exception as error:  # task boundary: a failed commit stops the store
                if isinstance(error, Fenced):
                    log.error("fenced: stopping the store", store=masked(self._url), error=error)
                else:
                    log.critical(
                        "commit failed: stopping the store", store=masked(self._url), exc_info=True
                    )
                self._failure = error
                self._failed(error)
                return
            self.commits += 1
            self.commit_seconds += time.perf_counter() - started
            self._committed_batch([cb for _, _, cb, _ in batch if cb is not None], batch[-1][3])
            if self._queue and not self._scheduled:
                self._scheduled = True
                self._wake.set()

    async def _commit(self, batch: list[_Write]) -> None:
        """One batch, one transaction: envelopes (as segments) and the mark, then the rest.

        The same order as SQLite's (see ``SqliteStore._commit``): the other
        writes only delete log rows at or below a snapshot's ``serverSeq`` or
        of a deleted channel, so writing the envelopes first is safe.
        """
        conn = self._writer_conn
        rows = [row for _, row, _, _ in batch if row is not None]
        writes = [write for write, _, _, _ in batch if write is not None]
        args: tuple[object, ...] = ()
        if rows:
            runs = segments(rows)
            args = (
                [s[0] for s in runs],
                [s[1] for s in runs],
                [s[2] for s in runs],
                [s[3] for s in runs],
                max(s[2] for s in runs),
            )
        fence = self._fence
        if not writes:
            # Envelopes only: one statement, atomic by itself (fenced or not).
            if not rows:
                return  # only callbacks (Store.after_queued): nothing to write
            if fence is None:
                await conn.execute(_INSERT_SEGMENTS, *args)
            elif await conn.execute(_INSERT_SEGMENTS_FENCED, *args, *fence) != "UPDATE 1":
                raise self._fenced(await conn.fetchval(_FENCE, fence[0]), fence)
            return
        async with conn.transaction():
            if fence is not None:
                # Before writing anything; the share lock holds a takeover off until we commit.
                epoch = await conn.fetchval(_FENCE, fence[0])
                if epoch != fence[1]:
                    raise self._fenced(epoch, fence)
            if rows:
                await conn.execute(_INSERT_SEGMENTS, *args)
            for write in writes:
                await write(conn)

    def _fenced(self, epoch: int | None, fence: tuple[str, int]) -> Fenced:
        return Fenced(
            f"{masked(self._url)}: lease {fence[0]!r} is at epoch {epoch}, "
            f"not {fence[1]}: another node is primary"
        )

    def commit_soon(self) -> None:
        """Someone waits for what was just queued: do not hold it for the window."""
        timer = self._timer
        if timer is not None:
            timer.cancel()
            self._timer = None
            self._wake.set()

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
        self._enqueue(None, (seq, channel, at_ms, envelope), (on_commit, args))

    def _statement(self, channel: str, sql: str, *args: object) -> None:
        """Queue one statement writing for ``channel`` (what a sharded store fences it by)."""

        async def write(conn: _Connection) -> None:
            await conn.execute(sql, *args)

        self._enqueue(write, None, None, channel)

    def put_channel(
        self, uri: str, kind: str, session: str | None, created_at: str, summary: bytes | None
    ) -> None:
        self._statement(
            uri,
            "INSERT INTO channels (uri, kind, session, created_at, summary) "
            "VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (uri) DO UPDATE SET summary = excluded.summary",
            uri,
            kind,
            session,
            created_at,
            summary,
        )

    def set_unfinished(self, uri: str, marker: str | None) -> None:
        self._statement(uri, "UPDATE channels SET active_turn = $1 WHERE uri = $2", marker, uri)

    def set_channel_session(self, uri: str, session: str) -> None:
        self._statement(uri, "UPDATE channels SET session = $1 WHERE uri = $2", session, uri)

    def put_agent_state(self, uri: str, state: str | None) -> None:
        self._statement(uri, "UPDATE channels SET agent_state = $1 WHERE uri = $2", state, uri)

    def put_snapshot(self, uri: str, seq: int, state: bytes, turn_count: int) -> None:
        async def write(conn: _Connection) -> None:
            await self._snapshot_write(conn, uri, seq, state, turn_count)

        self._enqueue(write, None, None, uri)

    @staticmethod
    async def _snapshot_write(
        conn: _Connection,
        uri: str,
        seq: int,
        state: bytes,
        turn_count: int,
        bound: Callable[[_Connection, int], Awaitable[int]] | None = None,
    ) -> None:
        """Store ``uri``'s snapshot and delete its log up to the previous one — or up
        to what ``bound(conn, previous)`` allows, if lower (``store/sharded.py``)."""
        previous = await conn.fetchval("SELECT seq FROM snapshots WHERE channel = $1", uri)
        await conn.execute(
            "INSERT INTO snapshots (channel, seq, turn_count, state) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (channel) DO UPDATE SET seq = excluded.seq, "
            "turn_count = excluded.turn_count, state = excluded.state",
            uri,
            seq,
            turn_count,
            state,
        )
        if previous is not None:
            # Keep the log since the previous snapshot: it serves reconnects.
            upto = previous if bound is None else min(previous, await bound(conn, previous))
            await conn.execute("DELETE FROM log WHERE channel = $1 AND last_seq <= $2", uri, upto)
            await conn.execute(
                "UPDATE channels SET log_floor = GREATEST(log_floor, $1) WHERE uri = $2",
                upto,
                uri,
            )

    def put_turn(self, chat: str, position: int, turn_id: str, turn: bytes) -> None:
        self._statement(
            chat,
            "INSERT INTO turns (chat, position, turn_id, turn) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (chat, position) DO UPDATE SET turn_id = excluded.turn_id, "
            "turn = excluded.turn",
            chat,
            position,
            turn_id,
            turn,
        )

    def truncate_turns(self, chat: str, keep: int) -> None:
        self._statement(chat, "DELETE FROM turns WHERE chat = $1 AND position >= $2", chat, keep)

    def put_client(
        self,
        client_id: str,
        version: str,
        user: str | None = None,
        forget: Sequence[str] = (),
    ) -> None:
        forgotten = list(forget)

        async def write(conn: _Connection) -> None:
            seen = await conn.fetchval("SELECT coalesce(max(seen), 0) + 1 FROM clients")
            await conn.execute(
                "INSERT INTO clients (client_id, version, seen, user_name) "
                "VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (client_id) DO UPDATE SET version = excluded.version, "
                "seen = excluded.seen, user_name = excluded.user_name",
                client_id,
                version,
                seen,
                user,
            )
            if forgotten:
                await conn.execute(
                    "DELETE FROM clients WHERE client_id = ANY($1::text[])", forgotten
                )

        self._enqueue(write)

    def delete_channel(self, uri: str) -> None:
        async def write(conn: _Connection) -> None:
            for table, column in (
                ("channels", "uri"),
                ("snapshots", "channel"),
                ("log", "channel"),
                ("turns", "chat"),
            ):
                await conn.execute(f"DELETE FROM {table} WHERE {column} = $1", uri)  # noqa: S608

        self._enqueue(write, None, None, uri)

    # -- reads (a small pool of their own connections) ---------------------------------------

    async def _fetch(self, sql: str, *args: object) -> list[Any]:
        pool = self._pool
        assert pool is not None, "store not open"
        rows: list[Any] = await pool.fetch(sql, *args)
        return rows

    async def clients(self) -> list[tuple[str, str, str | None]]:
        rows = await self._fetch("SELECT client_id, version, user_name FROM clients ORDER BY seen")
        return [(str(a), str(b), None if u is None else str(u)) for a, b, u in rows]

    async def channels(self) -> list[ChannelRow]:
        rows = await self._fetch(
            "SELECT uri, kind, session, created_at, summary, active_turn FROM channels"
        )
        return [ChannelRow(*row) for row in rows]

    async def load(self, uri: str, *, retained_turns: int) -> LoadedChannel | None:
        return await self._load(uri, retained_turns, _numbered_entries)

    async def _load(
        self,
        uri: str,
        retained_turns: int,
        decode: Callable[[int, bytes], list[tuple[int, float, bytes]]],
    ) -> LoadedChannel | None:
        """:meth:`load`, the log's segments read by ``decode(first_seq, entries)``."""
        pool = self._pool
        assert pool is not None, "store not open"
        async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
            # One snapshot of the database: the row, snapshot, log and turns agree.
            row = await conn.fetchrow(
                "SELECT log_floor, agent_state FROM channels WHERE uri = $1", uri
            )
            if row is None:
                return None
            snap = await conn.fetchrow(
                "SELECT seq, turn_count, state FROM snapshots WHERE channel = $1", uri
            )
            seq, turn_count, state = (snap[0], snap[1], snap[2]) if snap else (0, 0, None)
            log_floor = int(row[0])
            segments = await conn.fetch(
                "SELECT first_seq, entries FROM log WHERE channel = $1 ORDER BY first_seq", uri
            )
            envelopes = [
                entry
                for first_seq, entries in segments
                for entry in decode(int(first_seq), bytes(entries))
                if entry[0] > log_floor  # a segment may straddle the floor
            ]
            first = max(0, turn_count - retained_turns)
            turns = await conn.fetch(
                "SELECT turn FROM turns WHERE chat = $1 AND position >= $2 AND position < $3 "
                "ORDER BY position",
                uri,
                first,
                turn_count,
            )
        return LoadedChannel(
            snapshot=state,
            snapshot_seq=int(seq),
            turn_count=int(turn_count),
            envelopes=envelopes,
            log_floor=log_floor,
            turns=[bytes(t[0]) for t in turns],
            first_turn_position=first,
            agent_state=row[1],
        )

    async def turn_position(self, chat: str, turn_id: str) -> int | None:
        rows = await self._fetch(
            "SELECT position FROM turns WHERE chat = $1 AND turn_id = $2", chat, turn_id
        )
        return int(rows[0][0]) if rows else None

    async def turns(self, chat: str, before: int, limit: int) -> list[bytes]:
        rows = await self._fetch(
            "SELECT turn FROM turns WHERE chat = $1 AND position >= $2 AND position < $3 "
            "ORDER BY position",
            chat,
            max(0, before - limit),
            before,
        )
        return [bytes(r[0]) for r in rows]


def _numbered_entries(first_seq: int, entries: bytes) -> list[tuple[int, float, bytes]]:
    """A segment whose entries carry their numbers (``[serverSeq, clock ms, envelope]``)."""
    return [(n, at_ms, bytes(envelope)) for n, at_ms, envelope in SEGMENT.decode(entries)]


async def _lift_to_1_0(conn: _Connection) -> None:
    """Rows a host before protocol 1.0 wrote, in the 1.0 shape: once, inside the
    migration's transaction and lock (store/lift.py)."""
    if await conn.fetchval("SELECT 1 FROM meta WHERE key = $1", MARKER) is not None:
        return
    kinds = {r["uri"]: r["kind"] for r in await conn.fetch("SELECT uri, kind FROM channels")}
    snapshots = await conn.fetch("SELECT channel, state FROM snapshots")
    sessions = {
        r["channel"]: bytes(r["state"]) for r in snapshots if kinds.get(r["channel"]) == "session"
    }
    lifter = Lifter(kinds, sessions)
    lifted = 0
    for row in snapshots:
        out = lifter.snapshot(row["channel"], bytes(row["state"]))
        if out is not None:
            await conn.execute(
                "UPDATE snapshots SET state = $1 WHERE channel = $2", out, row["channel"]
            )
            lifted += 1
    for row in await conn.fetch("SELECT chat, position, turn FROM turns"):
        out = lifter.turn(bytes(row["turn"]))
        if out is not None:
            await conn.execute(
                "UPDATE turns SET turn = $1 WHERE chat = $2 AND position = $3",
                out,
                row["chat"],
                row["position"],
            )
            lifted += 1
    for row in await conn.fetch("SELECT first_seq, entries FROM log"):
        out = lifter.entries(bytes(row["entries"]))
        if out is not None:
            await conn.execute(
                "UPDATE log SET entries = $1 WHERE first_seq = $2", out, row["first_seq"]
            )
            lifted += 1
    await conn.execute("INSERT INTO meta VALUES ($1, 1)", MARKER)
    if lifted:
        log.info("stored rows lifted to protocol 1.0", rows=lifted)

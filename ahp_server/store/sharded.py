"""The sharded node's store: PostgreSQL commits fenced per session and numbered by the counter.

Layer: store (asyncpg on the event loop, as ``postgres.py``; no host or
protocol types). Issue 32, docs/scale-out.md "Sharded mode (design)": every
node owns some sessions and commits for them only; one counter row numbers
every node's commits, so ``serverSeq`` stays one host-wide order.

:class:`ShardedStore` is :class:`~ahp_server.store.postgres.PostgresStore`
with three differences:

* **Numbers are taken in the commit** (``numbers_at_commit``): envelopes are
  queued without ``serverSeq`` (:meth:`append_unnumbered`) and each group
  commit is :func:`~ahp_server.store.ownership.commit_batch` — it raises the
  counter by the batch's size only if this node still holds every session
  the batch writes for at the epoch it holds it, and stores entries as
  ``[offset in the batch, clock ms, envelope without serverSeq]``.
* **Fenced per session**: every queued write is tagged with its channel, and
  a channel belongs to a session (a chat to the session that holds it, an
  annotations or changeset channel to the session its URI names, the root to
  itself) — or to none (a terminal, a resource watch: this node's own
  channels, committed unfenced; :meth:`ShardedStore.session_of`).
  :attr:`held` says which sessions this node owns and at
  which epoch (the cluster loop keeps it, :meth:`hold` / :meth:`release`). A
  commit refused because a session was taken over (or a write for a session
  not held) drops that session's writes — they were never committed, so never
  delivered — tells :attr:`on_lost`, and commits the rest again: nothing was
  written by the refused attempt. Rows that belong to no session (remembered
  clients) are not fenced.
* **Delivery goes through the node's feed**: after a commit,
  :attr:`on_batch` gets the batch's first number and its envelopes with their
  callbacks (:class:`Local`), and delivers them in number order together with
  the other owners' batches (``cluster.py`` wires it to the feed; without it
  the callbacks run here, in order, as in the single-node store).

Snapshots: an actor cannot know the number of its last envelope when it
queues a snapshot, so the snapshot's ``seq`` is resolved in the commit — the
channel's last envelope queued before it (this batch or an earlier one), or
the number the caller gave if that is higher (a channel loaded and not yet
written).

Log compaction: a snapshot deletes its channel's log up to the previous
snapshot (as the single-node store does), but never above the lowest
delivered watermark of the live nodes (``cluster_nodes.delivered``, reported
with each lease renewal): a node behind may still read those rows to fill a
gap in the feed. A node more than ``retention`` numbers behind the counter
no longer holds it back (its feed window is long exceeded: it is stalled and
its clients were told to reconnect elsewhere).

Schema: version 3 of ``postgres.py`` adds ``cluster_nodes`` and
``session_owner``. A database becomes a *counter* database the first time a
sharded store opens it (``meta.numbering``): the active/passive store, which
raises the mark with ``GREATEST`` and writes entries with their numbers,
refuses to open it, and a sharded store refuses a database that already holds
log rows of the other layout (a migration between the modes is not written).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from ahp_server.protocol.uris import parse_channel
from ahp_server.store.base import ChannelRow, LoadedChannel, StoreError, spliced
from ahp_server.store.group import Callback
from ahp_server.store.ownership import (
    SessionsFenced,
    batch_segments,
    commit_batch,
    lost_sessions,
    numbered,
)
from ahp_server.store.postgres import NUMBERING_KEY, PostgresStore, _Write, masked

#: The catalogue's kind of a terminal channel (``host/channels/terminals.py``).
_TERMINAL = "terminal"

__all__ = ["RETENTION", "ROOT", "Local", "Located", "ShardedStore"]

#: A channel's row, its session's row (a chat), and the session's owner node.
_LOCATE = """
SELECT c.uri, c.kind, c.session, c.created_at, c.summary, c.active_turn, o.node,
       n.expires_at > now() AND NOT n.draining, o.directory
FROM channels c LEFT JOIN session_owner o ON o.session = c.uri
LEFT JOIN cluster_nodes n ON n.node = o.node
WHERE c.uri = $1 OR c.uri = (SELECT session FROM channels WHERE uri = $1)
"""

#: A session's owner row, its owner's liveness and its directory (no catalogue row yet).
_CLAIMED = """
SELECT o.node, n.expires_at > now() AND NOT n.draining, o.directory
FROM session_owner o LEFT JOIN cluster_nodes n ON n.node = o.node
WHERE o.session = $1
"""

log = structlog.get_logger(__name__)

#: The root channel: owned like a session (docs/scale-out.md "Root state: one view").
ROOT = "ahp-root://"

#: How far compaction may delete: the previous snapshot ($1), held back to the lowest
#: live node's delivered watermark, but not further back than $2 below the counter.
_READERS_BOUND = """
SELECT LEAST($1::bigint, GREATEST(
    COALESCE(
        (SELECT min(delivered) FROM cluster_nodes WHERE expires_at > now() AND NOT draining),
        $1::bigint
    ),
    (SELECT value FROM meta WHERE key = 'server_seq') - $2::bigint
))
"""

#: Numbers a lagging node may be behind and still hold compaction back: the feed's
#: reorder window (``transport/feed_order.py``), past which that node is stalled anyway.
RETENTION = 100_000

#: Writes for sessions held, with no envelope in the batch: share-lock the owner rows.
_FENCE_ONLY = """
SELECT count(*) FROM (
    SELECT o.session FROM session_owner o
    JOIN unnest($2::text[], $3::bigint[]) AS h(session, epoch)
      ON o.session = h.session AND o.epoch = h.epoch
    WHERE o.node = $1
    FOR SHARE OF o
) AS locked
"""

_Connection = Any


@dataclass(slots=True)
class Local:
    """One of this node's committed envelopes, as the feed delivers it: its body
    (without ``serverSeq``), its delivery callback ``on_commit(seq, *args)``, and
    the callbacks queued after it (``Store.after_queued``) to run once it is delivered."""

    body: bytes
    on_commit: Callback
    after: list[Callback] = field(default_factory=list)

    def deliver(self, seq: int) -> None:
        fn, args = self.on_commit
        fn(seq, *args)
        for fn, args in self.after:
            fn(*args)


@dataclass(frozen=True)
class Located:
    """What :meth:`ShardedStore.locate` read of a channel."""

    rows: list[ChannelRow]
    #: The node owning the channel's session (``None``: no owner row).
    owner: str | None = None
    #: Whether that node's lease is live.
    live: bool = False
    #: The session's working directory, as claimed (``None``: none recorded).
    directory: str | None = None
    #: The session the owner row is for.
    session: str | None = None


class ShardedStore(PostgresStore):
    """A node's store in sharded mode (see the module docstring)."""

    numbers_at_commit = True

    def __init__(
        self,
        url: str,
        node: str,
        *,
        commit_window: float = 0.0,
        commit_timeout: float | None = None,
        readers: int = 4,
        retention: int = RETENTION,
    ) -> None:
        super().__init__(
            url, commit_window=commit_window, commit_timeout=commit_timeout, readers=readers
        )
        self.node = node
        self.retention = retention
        #: The sessions (and the root) this node owns, at their epochs.
        self.held: dict[str, int] = {}
        #: After each commit, on the loop: the batch's first number and its envelopes.
        self.on_batch: Callable[[int, list[Local]], None] | None = None
        #: Callbacks queued in a commit that carried no envelope of ours (delivered once
        #: everything this node committed before them is: the feed decides when).
        self.on_after: Callable[[list[Callback]], None] | None = None
        #: Sessions found lost in a commit (taken over, or never held), on the loop.
        self.on_lost: Callable[[frozenset[str]], None] = lambda sessions: None
        #: Commits refused for a lost session (each retried without it).
        self.refused = 0
        self._session_of: dict[str, str] = {}
        #: Every session this node has held: one it lost stays fenced (its writes are
        #: dropped), never mistaken for a channel of no session.
        self._claimed: set[str] = set()
        #: The channel of each queued write that belongs to one, by queue position.
        self._tags: dict[int, str] = {}
        #: The last committed number of each channel (resolves snapshots' ``seq``).
        self._last: dict[str, int] = {}
        #: What the last ``_commit`` wrote: its base and the writes it kept.
        self._done: tuple[int, list[_Write]] = (0, [])
        self._lost: set[str] = set()
        self._opened: int | None = None

    # -- ownership, as the cluster loop decides it -------------------------------------------

    def hold(self, session: str, epoch: int) -> None:
        """This node owns ``session`` (or the root) at ``epoch``: its writes may commit."""
        self.held[session] = epoch
        self._claimed.add(session)

    def release(self, session: str) -> None:
        """This node no longer owns ``session``: later writes for it are dropped."""
        self.held.pop(session, None)

    def bind(self, channel: str, session: str) -> None:
        """``channel`` (a chat) belongs to ``session``: fenced by its owner row."""
        self._session_of[channel] = session

    def session_of(self, channel: str) -> str | None:
        """The session whose owner row fences ``channel``'s writes: the root's own, a
        session's (whatever its scheme: held once here), a bound chat's, the session an
        annotations or changeset URI names; ``None`` for a channel of no session — a
        terminal, a resource watch: this node's own, committed unfenced."""
        if channel == ROOT or channel in self.held or channel in self._claimed:
            return channel
        bound = self._session_of.get(channel)
        if bound is not None:
            return bound
        ref = parse_channel(channel)
        if ref.session is not None:
            return ref.session
        if ref.chat is not None:  # a chat's changeset: the chat's session
            return self._session_of.get(ref.chat, ref.chat)
        if ref.kind == "chat":
            return channel  # a chat not bound here: fenced by nothing this node holds
        return None

    # -- opening -----------------------------------------------------------------------------

    async def start(self) -> int:
        """Open once; later calls answer the high-water mark of that opening (a sharded
        node opens its store before its host, to read the counter its feed starts at)."""
        if self._opened is None:
            self._opened = await super().start()
        return self._opened

    async def channels(self) -> list[ChannelRow]:
        """The catalogue; every chat in it bound to its session (fenced by its owner row).

        Of the terminals, only this node's: a terminal lives and ends with the node that
        made it, and loaded here (exited: its process is gone with this node's last run)
        another node's running terminal would be ended for every client. A terminal
        made before schema 6 names no node, and is nobody's.
        """
        found = await self._fetch(
            "SELECT uri, kind, session, created_at, summary, active_turn FROM channels "
            "WHERE kind <> $1 OR node = $2",
            _TERMINAL,
            self.node,
        )
        rows = [ChannelRow(*row) for row in found]
        for row in rows:
            if row.kind == "chat" and row.session is not None:
                self.bind(row.uri, row.session)
        return rows

    async def locate(self, channel: str, session: str | None = None) -> Located:
        """``channel``'s catalogue row — with its session's, for a chat — the node owning
        that session, whether that node's lease is live (by the database's clock), and
        the session's working directory. No rows: not in the catalogue — then
        ``session`` (the session the channel's URI names, if any) is looked up among
        the owner rows. What a node reads to route a request for a session it does
        not own."""
        rows = await self._fetch(_LOCATE, channel)
        found = [ChannelRow(*row[:6]) for row in rows]
        owner = next((row for row in rows if row[1] == "session" and row[6] is not None), None)
        if owner is not None:
            return Located(found, str(owner[6]), bool(owner[7]), owner[8], str(owner[0]))
        if found or session is None:
            return Located(found)
        # Not in the catalogue yet (its first commit is on its way), but claimed: a
        # session is owned before its first write.
        claimed = await self._fetch(_CLAIMED, session)
        if not claimed:
            return Located(found)
        node, live, directory = claimed[0]
        return Located(found, str(node), bool(live), directory, session)

    async def client(self, client_id: str) -> tuple[str, str | None] | None:
        """A remembered client's negotiated version and user (another node's client,
        reconnecting here); ``None``: not remembered."""
        rows = await self._fetch(
            "SELECT version, user_name FROM clients WHERE client_id = $1", client_id
        )
        if not rows:
            return None
        version, user = rows[0]
        return str(version), None if user is None else str(user)

    async def _claim_numbering(self, conn: _Connection, where: str) -> None:
        """Make the database a counter database, refusing one with the other layout."""
        mode = await conn.fetchval("SELECT value FROM meta WHERE key = $1", NUMBERING_KEY)
        if mode == 1:
            return
        if await conn.fetchval("SELECT count(*) FROM log"):
            raise StoreError(
                f"{where}: holds a log written by a single-primary host; sharded mode "
                "needs a database of its own (no migration between the modes yet)"
            )
        await conn.execute(
            "INSERT INTO meta VALUES ($1, 1) ON CONFLICT (key) DO UPDATE SET value = 1",
            NUMBERING_KEY,
        )

    # -- queued writes -----------------------------------------------------------------------

    def _enqueue(
        self,
        write: Callable[[_Connection], Any] | None,
        row: Any = None,
        on_commit: Callback | None = None,
        channel: str | None = None,
    ) -> None:
        super()._enqueue(write, row, on_commit)
        if channel is not None:
            self._tags[self._queued] = channel

    def append_envelope(
        self,
        seq: int,
        channel: str,
        at_ms: float,
        envelope: bytes,
        on_commit: Callable[..., None],
        *args: object,
    ) -> None:
        raise StoreError("a sharded store numbers envelopes in the commit: append_unnumbered")

    def append_unnumbered(
        self,
        channel: str,
        at_ms: float,
        body: bytes,
        on_commit: Callable[..., None],
        *args: object,
    ) -> None:
        self._enqueue(None, (0, channel, at_ms, body), (on_commit, args), channel)

    def put_channel(
        self, uri: str, kind: str, session: str | None, created_at: str, summary: bytes | None
    ) -> None:
        if session is not None and kind == "chat":
            self.bind(uri, session)
        super().put_channel(uri, kind, session, created_at, summary)
        if kind == _TERMINAL:  # in the same commit: its maker (see ``channels``)
            self._statement(uri, "UPDATE channels SET node = $1 WHERE uri = $2", self.node, uri)

    def set_channel_session(self, uri: str, session: str) -> None:
        # Fenced by the session it leaves (queued before the move) ...
        super().set_channel_session(uri, session)
        # ... and from now on by the one it joins.
        self.bind(uri, session)

    def put_snapshot(self, uri: str, seq: int, state: bytes, turn_count: int) -> None:
        # Its number is resolved in the commit (see the module docstring).
        self._enqueue(_Snapshot(uri, seq, state, turn_count, self.retention), None, None, uri)

    def delete_channel(self, uri: str) -> None:
        super().delete_channel(uri)
        self._last.pop(uri, None)

    # -- the commit ----------------------------------------------------------------------------

    async def _commit(self, batch: list[_Write]) -> None:
        """Commit ``batch`` fenced and numbered; drop a lost session's writes and retry."""
        tags = self._tags
        channels = [tags.pop(position, None) for _, _, _, position in batch]
        while True:
            sessions = {s for c in channels if c is not None and (s := self.session_of(c))}
            missing = {s for s in sessions if s not in self.held}
            try:
                if missing:
                    raise SessionsFenced(missing)
                base = await self._commit_once(batch, sessions)
            except SessionsFenced as refused:
                self.refused += 1
                lost = set(refused.sessions) or sessions  # nothing named: be safe, drop all
                for session in lost:
                    self.held.pop(session, None)
                self._lost |= lost
                log.warning(
                    "commit refused: sessions lost to another owner",
                    store=masked(self._url),
                    sessions=sorted(lost),
                )
                kept = [
                    (write, channel)
                    for write, channel in zip(batch, channels, strict=True)
                    if channel is None or self.session_of(channel) not in lost
                ]
                batch = [w for w, _ in kept]
                channels = [c for _, c in kept]
                continue
            self._done = (base, batch)
            return

    async def _commit_once(self, batch: list[_Write], sessions: set[str]) -> int:
        conn = self._writer_conn
        entries = [(row[1], row[2], row[3]) for _, row, _, _ in batch if row is not None]
        held = {s: self.held[s] for s in sessions}
        if entries and all(row is not None or write is None for write, row, _, _ in batch):
            # Envelopes only (a stream's hot path): the fenced, numbering
            # statement is atomic by itself — one round trip, not the three of
            # BEGIN, it and COMMIT (as ``PostgresStore._commit``'s fast path).
            base = await commit_batch(conn, self.node, held, len(entries), batch_segments(entries))
            last = self._last
            for n, (channel, _, _) in enumerate(entries, base + 1):
                last[channel] = n
            return base
        async with conn.transaction():
            base = 0
            if entries:
                base = await commit_batch(
                    conn, self.node, held, len(entries), batch_segments(entries)
                )
            elif held:
                names = list(held)
                count = await conn.fetchval(_FENCE_ONLY, self.node, names, [held[s] for s in names])
                if count != len(names):
                    raise SessionsFenced(await lost_sessions(conn, self.node, held))
            last = dict(self._last)
            n = base
            for write, row, _, _ in batch:
                if row is not None:
                    n += 1
                    last[row[1]] = n
                elif write is not None:
                    if isinstance(write, _Snapshot):
                        write.seq = max(write.seq, last.get(write.uri, 0))
                    await write(conn)
        self._last = last
        return base

    def _committed_batch(self, callbacks: list[Callback], last: int) -> None:
        """Hand the committed envelopes to the feed (or deliver them here), in order."""
        base, batch = self._done
        self._done = (0, [])
        lost, self._lost = self._lost, set()
        if lost:
            try:
                self.on_lost(frozenset(lost))
            except Exception:
                log.exception("on_lost failed")
        locals_: list[Local] = []
        before: list[Callback] = []
        for _, row, callback, _ in batch:
            if callback is None:
                continue
            if row is not None:
                locals_.append(Local(row[3], callback))
            elif locals_:
                locals_[-1].after.append(callback)
            else:
                before.append(callback)
        if before:
            if self.on_after is not None:
                self.on_after(before)
            else:
                for fn, args in before:
                    fn(*args)
        if locals_:
            if self.on_batch is not None:
                self.on_batch(base + 1, locals_)
            else:
                for k, local in enumerate(locals_):
                    local.deliver(base + 1 + k)
        super()._committed_batch([], last)

    # -- reads ---------------------------------------------------------------------------------

    async def load(self, uri: str, *, retained_turns: int) -> LoadedChannel | None:
        loaded = await self._load(uri, retained_turns, _entries)
        if loaded is not None and loaded.envelopes:
            self._last[uri] = max(self._last.get(uri, 0), loaded.envelopes[-1][0])
        return loaded


@dataclass(slots=True)
class _Snapshot:
    """A queued snapshot write; ``seq`` is raised to its channel's last number in the commit."""

    uri: str
    seq: int
    state: bytes
    turn_count: int
    retention: int

    async def __call__(self, conn: _Connection) -> None:
        await PostgresStore._snapshot_write(
            conn, self.uri, self.seq, self.state, self.turn_count, self._readers_bound
        )

    async def _readers_bound(self, conn: _Connection, previous: int) -> int:
        """The log may be deleted up to here: nothing a live node may still read."""
        return int(await conn.fetchval(_READERS_BOUND, previous, self.retention))


def _entries(first_seq: int, entries: bytes) -> list[tuple[int, float, bytes]]:
    """A stored segment as ``(serverSeq, clock ms, envelope as sent)``."""
    return [(n, at, spliced(n, body)) for n, at, body in numbered(first_seq, entries)]

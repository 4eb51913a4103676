"""Sharded mode's ownership in PostgreSQL: node leases, an owner row per session, epochs.

Layer: store (asyncpg on the event loop, imported lazily as in ``postgres.py``;
no host or protocol types). Issue 32, docs/scale-out.md "Sharded mode
(design)": every session (and the root, ``ahp-root://``) is owned by one node
at a time, and a node that lost a session can never commit for it again. This
module is that layer on its own: the store's group commit uses it
(``store/sharded.py``), the node's membership loop (``store/membership.py``)
renews and takes over through it, and routing reads placement and the nodes'
roots from it (``transport/routing.py``).

Tables (section "Ownership: a node lease, an owner row per session, epochs"),
created with ``CREATE TABLE IF NOT EXISTS`` in the connection's ``search_path``
schema under the store's migration lock:

* ``cluster_nodes``: one row per node name — its ``incarnation`` (one per
  :class:`Ownership` object, i.e. per process), ``expires_at`` by the
  database's clock, its load (``sessions`` owned, ``turns`` running), the
  ``roots`` it serves and a ``draining`` flag. :meth:`Ownership.join`,
  :meth:`~Ownership.renew` (one statement, whatever the number of sessions),
  :meth:`~Ownership.drain`, :meth:`~Ownership.live_nodes`.
* ``session_owner``: ``(session, node, epoch)``. :meth:`~Ownership.claim`
  (epoch 1, refused if the row exists), :meth:`~Ownership.owner_of`,
  :meth:`~Ownership.held`, :meth:`~Ownership.release`, and
  :meth:`~Ownership.take_over`: ``node = me, epoch = epoch + 1`` for up to
  ``limit`` sessions of a node whose lease has expired by the database's
  clock, picked ``FOR UPDATE SKIP LOCKED`` so survivors taking over at once
  share them, each session taken once.

Fencing (section "Ownership…" and "One ``serverSeq``: the commit counter") is
in :func:`commit_batch`: one statement that share-locks the owner rows of the
batch's sessions, raises ``meta.server_seq`` by the batch's size only if every
row still says ``(this node, the epoch it holds)``, inserts the batch's ``log``
segments numbered from the counter and returns the number before the first
(the *base*). Otherwise nothing is written, no number taken, and
:class:`SessionsFenced` names the sessions lost. The share lock and the
takeover's ``UPDATE`` conflict, so whichever comes second waits for the first
to commit: a takeover never passes a commit in flight — it *skips* that
session (``SKIP LOCKED``) and takes it in a later round, after the commit, so
the new owner loads everything the old one wrote; and a commit that comes
after (or waited on) a takeover re-reads the row (READ COMMITTED), sees the
new epoch and is refused. The counter row serialises every owner's commits,
so commit order is number order and there are no gaps (a refused or
rolled-back commit rolls its increment back). ``bench/serverseq.py`` runs this
same statement (:data:`COMMIT`).

Time. Expiry is decided by the database's clock only (``now()`` in the
statements), as in ``lease.py``. Safety never depends on it: a paused node
whose lease expired still holds its rows until someone takes them, and then
its epoch is stale.

Identity. A node is its name and this object's incarnation. A new
incarnation may join under a name only once the previous one's lease has
expired (or it drained), and joining raises the epoch of every session still
owned under that name: the previous process, maybe paused rather than dead,
is fenced out of them, and the new one gets them at their new epochs (to load,
as after a takeover).

The store side is ``store/sharded.py`` (``ShardedStore``): its group commit
is :func:`commit_batch` with the batch's other writes in the same
transaction, its log entries are :func:`batch_segments`' layout, and schema 3
of ``postgres.py`` creates the two tables (:data:`~ahp_server.store.postgres.CLUSTER_TABLES`,
also what :meth:`Ownership.open` makes sure of).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from ahp_server.store.base import StoreError
from ahp_server.store.group import segments
from ahp_server.store.lease import Connected, LeaseLost
from ahp_server.store.postgres import (
    CLUSTER_DELIVERED,
    CLUSTER_DIRECTORY,
    CLUSTER_TABLES,
    Fenced,
    connect,
    masked,
)
from ahp_server.workspace.paths import inside

__all__ = [
    "COMMIT",
    "COUNTER",
    "RANGE",
    "Load",
    "LogReader",
    "Node",
    "Owner",
    "Ownership",
    "Segment",
    "SessionsFenced",
    "batch_segments",
    "choose_owner",
    "commit_batch",
    "lost_sessions",
    "numbered",
]


# -- the node lease ("Ownership: a node lease, …") ---------------------------------------------

#: Whoever holds the name now ($1): its incarnation and whether its lease expired.
_PREVIOUS = """
SELECT incarnation, expires_at <= now() FROM cluster_nodes WHERE node = $1 FOR UPDATE
"""

#: Join under a name whose row is absent, expired, or already this incarnation's.
#: No row returned: another incarnation holds it unexpired.
_JOIN = """
INSERT INTO cluster_nodes AS n
    (node, incarnation, expires_at, sessions, turns, roots, draining, delivered)
VALUES ($1, $2, now() + make_interval(secs => $3::float8), $4, $5, $6::text[], false, $7)
ON CONFLICT (node) DO UPDATE SET
    incarnation = excluded.incarnation,
    expires_at = excluded.expires_at,
    sessions = excluded.sessions,
    turns = excluded.turns,
    roots = excluded.roots,
    draining = false,
    delivered = excluded.delivered
WHERE n.expires_at <= now() OR n.incarnation = excluded.incarnation
RETURNING node
"""

#: A new incarnation fences the previous one out of the sessions it owned.
_REFENCE = "UPDATE session_owner SET epoch = epoch + 1 WHERE node = $1"

#: One statement whatever the number of sessions: the lease and the load.
_RENEW = """
UPDATE cluster_nodes
SET expires_at = now() + make_interval(secs => $3::float8), sessions = $4, turns = $5,
    delivered = $6
WHERE node = $1 AND incarnation = $2 AND NOT draining
"""

#: A graceful stop: no more placements here, and the others may take over now.
_DRAIN = """
UPDATE cluster_nodes SET draining = true, expires_at = now() WHERE node = $1 AND incarnation = $2
"""

_LIVE = """
SELECT node, sessions, turns, roots, draining FROM cluster_nodes
WHERE expires_at > now() AND NOT draining ORDER BY node
"""

#: Every node that ever joined, with its roots and whether it is live now (the database's
#: clock; a draining node is not): what routes a file request (docs/scale-out.md "Resources").
_DECLARED = """
SELECT node, roots, expires_at > now() AND NOT draining FROM cluster_nodes ORDER BY node
"""

#: Nodes whose lease expired (or who drained) and that still own sessions.
_EXPIRED = """
SELECT n.node FROM cluster_nodes n
WHERE n.expires_at <= now() AND EXISTS (SELECT 1 FROM session_owner o WHERE o.node = n.node)
ORDER BY n.node
"""

#: Sessions with a working directory whose owner's lease expired (or who drained): the
#: ones that stay with a dead node when no live node serves their directory.
_ORPHANED = """
SELECT o.session, o.node, o.directory FROM session_owner o
JOIN cluster_nodes n ON n.node = o.node
WHERE n.expires_at <= now() AND o.directory IS NOT NULL
ORDER BY o.session
"""

# -- owner rows --------------------------------------------------------------------------------

_CLAIM = """
INSERT INTO session_owner (session, node, epoch, directory) VALUES ($1, $2, 1, $3)
ON CONFLICT (session) DO NOTHING RETURNING epoch
"""

_OWNER = "SELECT node, epoch FROM session_owner WHERE session = $1"

_HELD = "SELECT session, epoch FROM session_owner WHERE node = $1"

_COUNT = "SELECT count(*) FROM session_owner WHERE node = $1"

_RELEASE = "DELETE FROM session_owner WHERE node = $1 AND session = ANY($2::text[])"

#: Up to $3 sessions of node $2, only while its lease has expired by the database's
#: clock, and only those whose working directory lies in one of the taker's roots
#: ($4; a session made without one goes anywhere); rows another survivor is taking,
#: or that a commit in flight share-locked, are skipped (taken in a later round).
#: Returns the sessions taken, new epochs.
_TAKE_OVER = """
WITH picked AS (
    SELECT o.session FROM session_owner o
    WHERE o.node = $2
      AND EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.node = $2 AND n.expires_at <= now())
      AND (o.directory IS NULL OR EXISTS (
          SELECT 1 FROM unnest($4::text[]) AS r(root)
          WHERE o.directory = r.root OR starts_with(o.directory, rtrim(r.root, '/') || '/')
      ))
    ORDER BY o.session
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE session_owner o SET node = $1, epoch = o.epoch + 1
FROM picked WHERE o.session = picked.session AND o.node = $2
RETURNING o.session, o.epoch
"""

# -- the fenced, numbering commit ("One `serverSeq`: the commit counter") ---------------------

#: One group commit, one statement: fenced by every session's (node, epoch), numbered
#: by the counter, the segments inserted. Returns the number before the batch's
#: first, or no row when fenced (then nothing was written and no number taken).
#: $1-$4: segments (channel, first offset, last offset, entries); $5: batch size;
#: $6: node; $7, $8: the sessions and the epochs this node holds them at (no repeats).
COMMIT = """
WITH fence AS (
    SELECT o.session FROM session_owner o
    JOIN unnest($7::text[], $8::bigint[]) AS h(session, epoch)
      ON o.session = h.session AND o.epoch = h.epoch
    WHERE o.node = $6
    FOR SHARE OF o
), numbered AS (
    UPDATE meta SET value = value + $5
    WHERE key = 'server_seq' AND (SELECT count(*) FROM fence) = cardinality($7::text[])
    RETURNING value - $5 AS base
), inserted AS (
    INSERT INTO log (channel, first_seq, last_seq, entries)
    SELECT s.channel, n.base + 1 + s.first, n.base + 1 + s.last, s.entries
    FROM numbered n, unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[])
        AS s(channel, first, last, entries)
)
SELECT base FROM numbered
"""

#: The commit counter: every number up to it is committed (and readable, in ``log``).
COUNTER = "SELECT value FROM meta WHERE key = 'server_seq'"

#: The segments holding any number in [$1, $2] (what a node repairs a gap from).
RANGE = """
SELECT first_seq, entries FROM log WHERE last_seq >= $1 AND first_seq <= $2 ORDER BY first_seq
"""

#: After a refusal: which of the sessions ($2, epochs $3) node $1 no longer holds.
_LOST = """
SELECT h.session FROM unnest($2::text[], $3::bigint[]) AS h(session, epoch)
LEFT JOIN session_owner o ON o.session = h.session
WHERE o.session IS NULL OR o.node <> $1 OR o.epoch <> h.epoch
ORDER BY h.session
"""

_Connection = Any  # asyncpg.Connection: asyncpg ships no type information


#: A segment's entries as :func:`commit_batch`'s callers write them (:func:`batch_segments`):
#: ``[offset in the batch, clock ms, envelope JSON without serverSeq]``.
_ENTRIES = msgspec.json.Decoder(list[tuple[int, float, msgspec.Raw]])


class SessionsFenced(Fenced):
    """A commit refused: this node no longer owns ``sessions`` at the epochs it held.

    Nothing of the batch was written and no number taken. The node drops those
    sessions and may commit the rest of the batch again.
    """

    def __init__(self, sessions: Iterable[str]) -> None:
        self.sessions = frozenset(sessions)
        super().__init__(f"sessions lost to another owner: {', '.join(sorted(self.sessions))}")


@dataclass(frozen=True)
class Load:
    """What a node reports in its lease: placement picks the least loaded."""

    sessions: int = 0
    turns: int = 0
    #: The node's delivered watermark (every number up to it delivered): the log
    #: keeps what lies above the lowest live node's (``store/sharded.py``).
    delivered: int = 0


@dataclass(frozen=True)
class Node:
    """A node's row in ``cluster_nodes``, as placement sees it."""

    node: str
    sessions: int = 0
    turns: int = 0
    #: Absolute paths of the workspace roots it serves.
    roots: tuple[str, ...] = ()
    draining: bool = False


@dataclass(frozen=True)
class Owner:
    """A session's owner row."""

    node: str
    epoch: int


class Segment(NamedTuple):
    """One channel's entries in a batch: the offsets (from 0) of its first and last
    entry in the batch, and the entries as stored."""

    channel: str
    first: int
    last: int
    entries: bytes


def batch_segments(batch: Sequence[tuple[str, float, bytes]]) -> list[Segment]:
    """A batch of ``(channel, clock ms, envelope)`` as one :class:`Segment` per channel.

    Entry ``k`` of the batch is stored as ``[k, clock ms, envelope]`` in its
    channel's segment (the envelope without ``serverSeq``: JSON, spliced at
    delivery), so it reads back as number ``base + 1 + k`` (:func:`numbered`).
    """
    rows = [(k, channel, float(at_ms), env) for k, (channel, at_ms, env) in enumerate(batch)]
    return [Segment(*segment) for segment in segments(rows)]


def numbered(first_seq: int, entries: bytes) -> list[tuple[int, float, bytes]]:
    """A stored segment (``log.first_seq``, ``log.entries``) as ``(serverSeq, clock ms,
    envelope)``: the entry at offset ``k`` is ``first_seq + k - `` the first entry's offset.
    ``ValueError`` if the entries are not that layout."""
    try:
        decoded = _ENTRIES.decode(entries)
    except msgspec.DecodeError as error:
        raise ValueError(f"log segment {first_seq}: {error}") from None
    if not decoded:
        return []
    shift = first_seq - decoded[0][0]
    return [(shift + offset, at_ms, bytes(envelope)) for offset, at_ms, envelope in decoded]


def choose_owner(nodes: Iterable[Node], directory: str | None, me: str) -> str | None:
    """Where a new session goes (docs/scale-out.md "Placement" and "Working directories").

    Among the nodes not draining that serve a root containing ``directory``
    (the session's working directory, an absolute, resolved path; ``None``: any
    node): fewest running turns, then fewest sessions, then ``me`` (no hop),
    then by name. ``None`` when no such node.
    """
    candidates = [
        n
        for n in nodes
        if not n.draining
        and (directory is None or any(inside(directory, root) for root in n.roots))
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda n: (n.turns, n.sessions, n.node != me, n.node)).node


async def commit_batch(
    conn: _Connection,
    node: str,
    held: Mapping[str, int],
    size: int,
    segments: Sequence[Segment],
) -> int:
    """The fenced, numbering commit of one batch on ``conn``: the base, or :class:`SessionsFenced`.

    ``held``: every session the batch writes for (the root included), at the
    epoch this node holds it — none for a batch of channels of no session only
    (a node's terminals: numbered, not fenced); ``size``: the batch's number of entries, the
    segments' offsets being in ``range(size)``. Entry ``k`` of the batch is
    number ``base + 1 + k``. Run inside the caller's transaction (with the
    batch's other writes), or alone (then it is its own transaction); the
    numbers are the caller's to deliver once that transaction has committed.
    Refused: nothing written, no number taken, the sessions lost named (the
    caller's transaction, still usable, should roll back what else it wrote).
    Unbounded in time here: the caller bounds it, as the store bounds a commit.
    """
    if size < 1:
        raise ValueError("a batch has at least one entry")
    sessions = list(held)
    epochs = [held[s] for s in sessions]
    base = await conn.fetchval(
        COMMIT,
        [s.channel for s in segments],
        [s.first for s in segments],
        [s.last for s in segments],
        [s.entries for s in segments],
        size,
        node,
        sessions,
        epochs,
    )
    if base is not None:
        return int(base)
    raise SessionsFenced(await lost_sessions(conn, node, held))


async def lost_sessions(conn: _Connection, node: str, held: Mapping[str, int]) -> list[str]:
    """Which of ``held`` (session: epoch) ``node`` no longer owns at that epoch."""
    sessions = list(held)
    lost = await conn.fetch(_LOST, node, sessions, [held[s] for s in sessions])
    return [str(row[0]) for row in lost]


class Ownership(Connected):
    """One node's handle on ``cluster_nodes`` and ``session_owner``, on its own connection.

    Every statement is bounded by ``max(ttl, 1)`` seconds; database and
    connection errors raise ``StoreError``, and :class:`LeaseLost` (one) when
    the node's lease is no longer this incarnation's. A statement runs again
    once on a new connection if the connection was lost: each is safe to
    repeat (a claim or takeover whose reply was lost is found in :meth:`held`;
    a claim repeated that way answers ``None``).
    """

    def __init__(self, url: str, node: str, *, ttl: float, roots: Sequence[str] = ()) -> None:
        super().__init__(
            url,
            node,
            ttl=ttl,
            what=f"node {node!r}",
            create=CLUSTER_TABLES + CLUSTER_DELIVERED + CLUSTER_DIRECTORY,
        )
        self._roots = list(roots)
        #: This process's life under the name: a restart is another incarnation.
        self.incarnation = uuid.uuid4().hex

    # -- the node lease --------------------------------------------------------------------

    async def join(self, load: Load = Load()) -> dict[str, int]:
        """Take the node's row (lease ``ttl``, ``load``, roots); the sessions it owns.

        Refused with :class:`LeaseLost` while another incarnation's lease under
        this name has not expired. Taking over from an expired incarnation
        raises the epoch of every session still owned under the name (fencing
        that process out); the sessions returned are at their new epochs.
        """

        async def join(conn: _Connection) -> dict[str, int]:
            t = self._timeout
            async with conn.transaction():
                previous = await conn.fetchrow(_PREVIOUS, self._node, timeout=t)
                joined = await conn.fetchval(
                    _JOIN,
                    self._node,
                    self.incarnation,
                    self._ttl,
                    load.sessions,
                    load.turns,
                    self._roots,
                    load.delivered,
                    timeout=t,
                )
                if joined is None:
                    raise LeaseLost(f"node {self._node!r}: another incarnation's lease is live")
                if previous is not None and previous[0] != self.incarnation:
                    await conn.execute(_REFENCE, self._node, timeout=t)
                rows = await conn.fetch(_HELD, self._node, timeout=t)
            return {str(r[0]): int(r[1]) for r in rows}

        result: dict[str, int] = await self._call(join)
        return result

    async def renew(self, load: Load = Load()) -> None:
        """Extend the lease to ``now() + ttl`` and report ``load``, in one statement.

        :class:`LeaseLost` if the row is no longer this incarnation's, or it
        drained. A lease that expired but that no other incarnation took is
        renewed: sessions taken over meanwhile are fenced by their epochs.
        """
        status = await self._run(
            "execute",
            _RENEW,
            self._node,
            self.incarnation,
            self._ttl,
            load.sessions,
            load.turns,
            load.delivered,
        )
        if status != "UPDATE 1":
            raise LeaseLost(f"node {self._node!r}: its lease is no longer this incarnation's")

    async def drain(self) -> None:
        """On a graceful stop: mark the node draining and expire its lease now, so the
        others stop placing sessions here and take over its sessions at once."""
        await self._run("execute", _DRAIN, self._node, self.incarnation)

    async def live_nodes(self) -> list[Node]:
        """The nodes whose lease has not expired and that are not draining, with load and roots."""
        rows = await self._run("fetch", _LIVE)
        return [
            Node(
                node=str(r[0]),
                sessions=int(r[1]),
                turns=int(r[2]),
                roots=tuple(r[3]),
                draining=bool(r[4]),
            )
            for r in rows
        ]

    async def declared_roots(self) -> list[tuple[Node, bool]]:
        """Every node's row with the roots it declared, live or not, and whether it is live
        (lease unexpired, not draining): a dead node's roots name who serves a path."""
        rows = await self._run("fetch", _DECLARED)
        return [(Node(node=str(r[0]), roots=tuple(r[1])), bool(r[2])) for r in rows]

    async def expired_nodes(self) -> list[str]:
        """The nodes whose lease expired (or that drained) and that still own sessions:
        what :meth:`take_over` may take from."""
        return [str(r[0]) for r in await self._run("fetch", _EXPIRED)]

    async def orphaned(self) -> list[tuple[str, str, str]]:
        """``(session, owner, directory)`` of every session with a working directory whose
        owner's lease expired (or that drained): taken over only by a node serving it."""
        rows = await self._run("fetch", _ORPHANED)
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]

    # -- owner rows ------------------------------------------------------------------------

    async def claim(self, session: str, directory: str | None = None) -> int | None:
        """Own a new session at epoch 1; ``None`` if it already has an owner row.
        ``directory``: the absolute path of its working directory — only a node
        serving a root that holds it may take the session over."""
        epoch = await self._run("fetchval", _CLAIM, session, self._node, directory)
        return None if epoch is None else int(epoch)

    async def owner_of(self, session: str) -> Owner | None:
        """The session's owner row, or ``None`` if it has none."""
        row = await self._run("fetchrow", _OWNER, session)
        return None if row is None else Owner(node=str(row[0]), epoch=int(row[1]))

    async def held(self) -> dict[str, int]:
        """Every session this node owns, at its epoch."""
        rows = await self._run("fetch", _HELD, self._node)
        return {str(r[0]): int(r[1]) for r in rows}

    async def count(self, node: str) -> int:
        """How many sessions ``node`` owns (a takeover's fair share is a part of it)."""
        return int(await self._run("fetchval", _COUNT, node))

    async def release(self, sessions: Iterable[str]) -> None:
        """Delete the owner rows of ``sessions`` this node owns (deleted sessions).

        Not for handing a session over: a session claimed again after a
        release starts at epoch 1, so only a session that is gone for good is
        released; a draining node's sessions are taken over (epoch + 1).
        """
        await self._run("execute", _RELEASE, self._node, list(sessions))

    async def take_over(self, dead: str, limit: int) -> dict[str, int]:
        """Take up to ``limit`` sessions of node ``dead`` if its lease expired: {session: epoch}.

        Nothing while ``dead``'s lease is live by the database's clock (or it
        has no row). Sessions another survivor is taking at the same moment, or
        whose commit is in flight, are skipped: call again (a campaign round)
        while :meth:`expired_nodes` names ``dead``.
        """
        rows = await self._run("fetch", _TAKE_OVER, self._node, dead, limit, self._roots)
        return {str(r[0]): int(r[1]) for r in rows}


class LogReader:
    """A node's reads of the committed log, on a connection of its own: the counter and
    ranges of numbers (the feed's counter poll and repairs, ``transport/feed.py``).

    Connects on first use and again after a failure; every call is bounded by
    ``timeout`` seconds (connecting included) and raises :class:`StoreError`
    when PostgreSQL cannot answer: the caller tries again later.
    """

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        self._url = url
        self._timeout = timeout
        self._conn: _Connection = None
        #: One read at a time on the connection: the feed's poll and repairs and a
        #: takeover's counter read queue instead of failing each other.
        self._lock = asyncio.Lock()

    async def counter(self) -> int:
        """The commit counter: every number up to it is committed."""
        return int(await self._call("fetchval", COUNTER))

    async def read(self, lo: int, hi: int) -> dict[int, bytes]:
        """Every committed envelope numbered ``lo..hi`` (fewer only above the counter)."""
        rows = await self._call("fetch", RANGE, lo, hi)
        found: dict[int, bytes] = {}
        for first_seq, entries in rows:
            try:
                segment = numbered(int(first_seq), bytes(entries))
            except ValueError as error:
                raise StoreError(f"{masked(self._url)}: {error}") from None
            for n, _, envelope in segment:
                if lo <= n <= hi:
                    found[n] = envelope
        return found

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def _call(self, method: str, sql: str, *args: object) -> Any:
        import asyncpg  # lazily: only cluster nodes need the driver

        try:
            async with asyncio.timeout(self._timeout), self._lock:
                if self._conn is None or self._conn.is_closed():
                    self._conn = None
                    self._conn = await connect(self._url)
                return await getattr(self._conn, method)(sql, *args)
        except (
            TimeoutError,
            OSError,
            StoreError,
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncpg.exceptions.InternalClientError,
        ) as error:
            await self.close()  # in an unknown state: the next call reconnects
            if isinstance(error, StoreError):
                raise
            raise StoreError(f"{masked(self._url)}: cannot read the log ({error})") from None

"""The cluster's leadership lease in PostgreSQL, and the epoch that fences commits.

Layer: store (asyncpg on the event loop, imported lazily as in ``postgres.py``;
no host or protocol types). Cluster mode (issue 17, docs/durability.md "Lease
and fencing"): several nodes share one database and exactly one of them, the
*primary*, owns every channel and commits. Which one is decided here.

The lease is one row of ``cluster_lease`` per lease name (``"primary"``):
the node holding it, its *epoch* and when it expires. A node becomes primary
with :meth:`Lease.try_acquire`, which takes the row when it is absent or
expired and then raises the epoch by one; the primary keeps it with
:meth:`Lease.renew` and hands it over at once on a graceful stop with
:meth:`Lease.release`.

Time. Every expiry decision uses the *database's* clock (``now()`` in the
statement), never a node's: nodes' clocks may disagree, the database has one.
A node renews every ``ttl / 3`` (so two renewals may fail before the lease can
be taken); a standby tries to acquire about as often.

Safety never depends on timing: fencing does. A primary may be paused (a GC,
a stopped VM, a lost network) past its ``ttl`` without noticing; another node
then takes the lease with a higher epoch while the old one still thinks it
holds it. The old one must then never commit again, and that is enforced by
the database, not by the old node's sense of time: a :class:`PostgresStore`
opened with ``fence=(name, epoch)`` begins *every* commit transaction with

    SELECT epoch FROM cluster_lease WHERE name = $1 FOR SHARE

and raises :class:`Fenced` (writing nothing) unless the row still holds its
epoch. ``FOR SHARE`` is what makes this airtight rather than a check-then-act
race. A takeover is an ``UPDATE`` of that row (``epoch = epoch + 1``), whose row
lock conflicts with ``FOR SHARE`` (``FOR KEY SHARE`` would not: the update
changes no key). So:

* a commit of the old primary already in flight (it holds the share lock) makes
  the takeover *wait* until it has committed; when the new primary then opens
  its store, it reads every commit the old one made, including the
  ``serverSeq`` mark, so numbering never goes back;
* a commit that starts after the takeover (or waits on it: READ COMMITTED
  re-reads the newest row version after the wait) sees the new epoch and is
  fenced. The old primary's store fails as on any failed commit: nothing of the
  batch is delivered, and it tells its owner (``PostgresStore.failed``).

An expired lease that nobody took over is still fenced by epoch only, so an old
primary that merely ran late commits safely: nobody else owns anything yet.

Identity. A node is its ``node`` string *and* the epoch it holds in this
object: a restarted process with the same node name does not inherit the
previous incarnation's unexpired lease (that process may still be alive and
committing under the same epoch); it waits for the expiry, or for a release.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ahp_server.store.base import StoreError
from ahp_server.store.postgres import _MIGRATION_LOCK, Fenced, connect, masked

__all__ = ["Connected", "Fenced", "Holder", "Lease", "LeaseLost"]

_CREATE = """
CREATE TABLE IF NOT EXISTS cluster_lease (
    name TEXT PRIMARY KEY,
    node TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL
)
"""

#: Take the lease if it is absent or expired (epoch + 1), or renew it if this
#: object holds it ($4: its epoch, NULL if none). No row returned: someone else
#: holds it unexpired. The row lock of ON CONFLICT DO UPDATE waits for commits
#: in flight (their FOR SHARE), and its WHERE sees the newest row after the wait.
_ACQUIRE = """
INSERT INTO cluster_lease AS l (name, node, epoch, expires_at, acquired_at)
VALUES ($1, $2, 1, now() + make_interval(secs => $3::float8), now())
ON CONFLICT (name) DO UPDATE SET
    node = excluded.node,
    epoch = CASE WHEN l.expires_at <= now() THEN l.epoch + 1 ELSE l.epoch END,
    expires_at = excluded.expires_at,
    acquired_at = CASE WHEN l.expires_at <= now() THEN now() ELSE l.acquired_at END
WHERE l.expires_at <= now() OR (l.node = excluded.node AND l.epoch = $4::bigint)
RETURNING epoch
"""

_RENEW = """
UPDATE cluster_lease SET expires_at = now() + make_interval(secs => $4::float8)
WHERE name = $1 AND node = $2 AND epoch = $3
"""

#: Expire now: the next try_acquire anywhere succeeds (a lease is held until
#: ``expires_at``, exclusive).
_RELEASE = """
UPDATE cluster_lease SET expires_at = now() WHERE name = $1 AND node = $2 AND epoch = $3
"""

_HOLDER = """
SELECT node, epoch, extract(epoch FROM expires_at - now())::float8
FROM cluster_lease WHERE name = $1
"""

_Connection = Any  # asyncpg.Connection: asyncpg ships no type information


class LeaseLost(StoreError):
    """This node no longer holds the lease: another node took it, or it was released."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as the database sees it now."""

    node: str
    epoch: int
    #: Seconds until it expires by the database's clock; negative once expired.
    expires_in: float


class Connected:
    """A handle on the cluster's tables with a connection of its own (a lease, the owner rows).

    :meth:`open` connects and creates the handle's tables (``create``) under the
    store's migration lock. Every statement is bounded by ``max(ttl, 1)``
    seconds (an answer later than a lease lasts is worthless); database and
    connection errors raise :class:`StoreError` naming ``what``.
    """

    def __init__(self, url: str, node: str, *, ttl: float, what: str, create: str) -> None:
        if ttl <= 0:
            raise ValueError("a lease's ttl must be positive")
        self._url = url
        self._node = node
        self._ttl = float(ttl)
        self._timeout = max(self._ttl, 1.0)
        self._what = what
        self._create = create
        self._conn: _Connection = None
        #: One statement at a time: a connection runs one operation at once, and two
        #: callers (a lease renewal, a claim) must queue, not fail each other.
        self._lock = asyncio.Lock()

    @property
    def node(self) -> str:
        return self._node

    @property
    def ttl(self) -> float:
        return self._ttl

    async def open(self) -> None:
        """Connect and create the tables if needed (under the migration lock)."""
        import asyncpg  # lazily: only cluster nodes need the driver

        where = masked(self._url)
        conn = await connect(self._url)
        try:
            async with conn.transaction():
                # The same key as the store's migrations: never races one.
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
                await conn.execute(self._create)
        except asyncpg.PostgresError as error:
            await conn.close()
            raise StoreError(f"{where}: {self._what}: cannot create its tables ({error})") from None
        except BaseException:
            await conn.close()
            raise
        self._conn = conn

    async def close(self) -> None:
        """Close the connection (what it holds in the database is left as it is)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _run(self, method: str, sql: str, *args: object) -> Any:
        """One statement (``conn.<method>(sql, *args)``): see :meth:`_call`."""
        return await self._call(
            lambda conn: getattr(conn, method)(sql, *args, timeout=self._timeout)
        )

    async def _call(self, work: Callable[[_Connection], Awaitable[Any]]) -> Any:
        """``work`` on the handle's connection; reconnected once if it was lost.

        A lost connection (PostgreSQL restarted, a proxy cut it) must not cost
        a node its lease: the work runs again on a new connection. So every
        ``work`` must be safe to run twice (idempotent, or one transaction whose
        second run finds the first one's outcome and accepts it).
        """
        async with self._lock:
            return await self._call_alone(work)

    async def _call_alone(self, work: Callable[[_Connection], Awaitable[Any]]) -> Any:
        import asyncpg

        for attempt in (1, 2):
            conn = self._conn
            if conn is None:
                raise StoreError(f"{self._what} is not open: await open()")
            try:
                if conn.is_closed():
                    self._conn = conn = await connect(self._url)
                return await work(conn)
            except asyncpg.PostgresError as error:
                if attempt == 1 and conn.is_closed():  # e.g. the server restarted under it
                    continue
                raise self._error(error) from None  # the server answered: no retry
            except (
                TimeoutError,
                OSError,
                asyncpg.InterfaceError,
                asyncpg.exceptions.InternalClientError,  # a half-dead connection
            ) as error:
                conn.terminate()  # in an unknown state: the next statement reconnects
                if attempt == 2:
                    raise self._error(error) from None
        raise AssertionError("unreachable")

    def _error(self, error: BaseException) -> StoreError:
        return StoreError(f"{masked(self._url)}: {self._what}: {type(error).__name__}: {error}")


class Lease(Connected):
    """One node's handle on a named lease, on its own connection.

    Database and connection errors raise :class:`StoreError`; :class:`LeaseLost`
    is one, so ``except StoreError`` means "not (or no longer known to be)
    primary". Statements run again once on a new connection when the
    connection was lost: renew and release are idempotent, and an acquire
    whose first reply was lost finds the lease held by this node under an
    epoch it does not know — it waits for the expiry, which is safe.
    """

    def __init__(self, url: str, node: str, *, ttl: float, name: str = "primary") -> None:
        super().__init__(url, node, ttl=ttl, what=f"lease {name!r}", create=_CREATE)
        self._name = name
        self._epoch: int | None = None

    @property
    def epoch(self) -> int | None:
        """The epoch this object holds, or ``None`` (never acquired, lost or released)."""
        return self._epoch

    @property
    def name(self) -> str:
        return self._name

    async def try_acquire(self) -> int | None:
        """Take the lease if it is free or expired, or renew it if held: the epoch, or ``None``.

        A new holder gets the previous epoch + 1 (1 for a new row), and so does
        this object re-taking its own lease once it expired (its store, fenced
        with the old epoch, must be reopened); renewing its own unexpired lease
        keeps the epoch. ``None``: another holder's lease has not expired (by
        the database's clock), or a previous incarnation of this node's holds it.
        """
        epoch = await self._run(
            "fetchval", _ACQUIRE, self._name, self._node, self._ttl, self._epoch
        )
        self._epoch = None if epoch is None else int(epoch)
        return self._epoch

    async def renew(self) -> None:
        """Extend the lease to ``now() + ttl``; :class:`LeaseLost` if it is no longer ours.

        Only the epoch decides: a lease that expired but that nobody took is
        still ours and is renewed.
        """
        if self._epoch is None:
            raise LeaseLost(f"lease {self._name!r}: not held by {self._node!r}")
        status = await self._run("execute", _RENEW, self._name, self._node, self._epoch, self._ttl)
        if status != "UPDATE 1":
            lost, self._epoch = self._epoch, None
            raise LeaseLost(f"lease {self._name!r}: {self._node!r} lost epoch {lost}")

    async def holder(self) -> Holder | None:
        """Who holds the lease (expired or not), or ``None`` if nobody ever took it."""
        row = await self._run("fetchrow", _HOLDER, self._name)
        if row is None:
            return None
        return Holder(node=str(row[0]), epoch=int(row[1]), expires_in=float(row[2]))

    async def release(self) -> None:
        """On a graceful stop: expire the lease now if still ours, so a standby takes over.

        Does nothing (and raises nothing) when the lease was already lost;
        afterwards :attr:`epoch` is ``None`` either way.
        """
        epoch, self._epoch = self._epoch, None
        if epoch is not None:
            await self._run("execute", _RELEASE, self._name, self._node, epoch)

"""The cluster lease and commit fencing (store/lease.py), against the real PostgreSQL.

Each test gets its own schema (tests/postgres.py); without a PostgreSQL server
these tests skip, except under ``CI``. Expiry is decided by the database's
clock, so the tests wait for it by asking the database, never by sleeping a
fixed time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest

from ahp_server.store.base import StoreError
from ahp_server.store.lease import Fenced, Holder, Lease, LeaseLost
from ahp_server.store.postgres import PostgresStore
from tests.postgres import query, until, waits_on_a_lock

TIMEOUT = 10.0
CHAT = "ahp-chat:/c"


@pytest.fixture
async def lease(url: str) -> AsyncIterator[Callable[..., Awaitable[Lease]]]:
    """Opens leases on the test's schema; closes them all afterwards."""
    opened: list[Lease] = []

    async def make(node: str, *, ttl: float = 30.0) -> Lease:
        one = Lease(url, node, ttl=ttl)
        await one.open()
        opened.append(one)
        return one

    yield make
    for one in opened:
        await one.close()


async def mark(url: str) -> int:
    rows = await query(url, "SELECT value FROM meta WHERE key = 'server_seq'")
    return int(rows[0][0])


async def stored_seqs(url: str) -> set[int]:
    rows = await query(url, "SELECT first_seq, last_seq FROM log")
    return {n for first, last in rows for n in range(first, last + 1)}


async def test_nodes_racing_for_the_lease_one_wins_and_epochs_only_go_up(
    url: str, lease: Callable[..., Awaitable[Lease]]
) -> None:
    nodes = [await lease(name) for name in ("a", "b", "c")]
    previous = 0
    async with asyncio.timeout(TIMEOUT):
        for _ in range(5):
            epochs = await asyncio.gather(*(n.try_acquire() for n in nodes))
            winners = [n for n, e in zip(nodes, epochs, strict=True) if e is not None]
            assert len(winners) == 1, epochs
            winner = winners[0]
            assert winner.epoch is not None
            assert winner.epoch > previous
            previous = winner.epoch
            holder = await nodes[0].holder()
            assert holder is not None
            assert (holder.node, holder.epoch) == (winner.node, winner.epoch)
            assert [n.epoch for n in nodes if n is not winner] == [None, None]
            await winner.release()
    assert previous == 5


async def test_an_unexpired_lease_is_kept_and_an_expired_one_is_taken_with_the_next_epoch(
    url: str, lease: Callable[..., Awaitable[Lease]]
) -> None:
    a = await lease("a", ttl=0.5)
    b = await lease("b", ttl=0.5)
    async with asyncio.timeout(TIMEOUT):
        assert await b.holder() is None
        assert await a.try_acquire() == 1
        assert await b.try_acquire() is None
        assert b.epoch is None
        assert await a.try_acquire() == 1  # its own unexpired lease: renewed, same epoch
        holder = await b.holder()
        assert holder is not None
        assert (holder.node, holder.epoch) == ("a", 1)
        assert 0 < holder.expires_in <= 0.5
        # A restarted process with the same node name does not inherit the lease.
        a_again = await lease("a", ttl=0.5)
        assert await a_again.try_acquire() is None
        # a stops renewing (paused): once the database says it expired, b takes it.
        await until(lambda: _expired(b))
        assert await b.try_acquire() == 2
        with pytest.raises(LeaseLost):
            await a.renew()
        assert a.epoch is None
        await a.release()  # lost already: harmless
        with pytest.raises(LeaseLost):
            await a.renew()
        holder = await a.holder()
        assert holder is not None
        assert (holder.node, holder.epoch) == ("b", 2)
        assert holder.expires_in > 0  # a's release did not expire b's lease
        await b.renew()
        assert b.epoch == 2


async def _expired(lease: Lease) -> bool:
    holder = await lease.holder()
    return holder is not None and holder.expires_in < 0


async def test_release_lets_another_node_take_over_at_once(
    lease: Callable[..., Awaitable[Lease]],
) -> None:
    a = await lease("a")  # 30 s ttl: only the release can free it in time
    b = await lease("b")
    async with asyncio.timeout(TIMEOUT):
        assert await a.try_acquire() == 1
        assert await b.try_acquire() is None
        await a.release()
        assert a.epoch is None
        assert await b.try_acquire() == 2
        assert await a.try_acquire() is None
        holder = await a.holder()
        assert isinstance(holder, Holder)
        assert (holder.node, holder.epoch) == ("b", 2)
        assert holder.expires_in > 25


async def test_a_lost_connection_does_not_cost_the_lease(
    url: str, lease: Callable[..., Awaitable[Lease]]
) -> None:
    """The server drops the lease's connection (a restart, a proxy): the next renewal
    reconnects and succeeds, with the same epoch — the primary keeps its lease."""
    a = await lease("a")
    async with asyncio.timeout(TIMEOUT):
        assert await a.try_acquire() == 1
        for _ in range(2):  # twice: a reconnected lease survives the next loss too
            killed = await query(
                url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database() "
                "AND query LIKE '%cluster_lease%' AND application_name = ''",
            )
            assert killed
            assert all(row[0] for row in killed)
            await a.renew()
            assert a.epoch == 1
        holder = await a.holder()
        assert holder is not None
        assert (holder.node, holder.epoch) == ("a", 1)
        assert holder.expires_in > 25


async def test_leases_and_stores_opening_an_empty_database_at_once(url: str) -> None:
    leases = [Lease(url, f"n{i}", ttl=5) for i in range(3)]
    stores = [PostgresStore(url) for _ in range(2)]
    async with asyncio.timeout(TIMEOUT):
        results = await asyncio.gather(
            *(one.open() for one in leases), *(s.start() for s in stores)
        )
        assert results[3:] == [0, 0]
        assert sorted(e for e in [await one.try_acquire() for one in leases] if e) == [1]
    for one in leases:
        await one.close()
    for store in stores:
        await store.close()


async def test_a_fenced_node_cannot_open_its_store(
    url: str, lease: Callable[..., Awaitable[Lease]]
) -> None:
    async with asyncio.timeout(TIMEOUT):
        # No lease table yet: nobody is primary, so neither is this node.
        with pytest.raises(Fenced):
            await PostgresStore(url, fence=("primary", 1)).start()
        a = await lease("a")
        with pytest.raises(Fenced):  # the table, but no lease row
            await PostgresStore(url, fence=("primary", 1)).start()
        assert await a.try_acquire() == 1
        await a.release()
        b = await lease("b")
        assert await b.try_acquire() == 2
        with pytest.raises(Fenced, match="epoch 2"):
            await PostgresStore(url, fence=("primary", 1)).start()
        store = PostgresStore(url)
        store.set_fence(("primary", 2))  # as the node controller does
        assert await store.start() == 0
        with pytest.raises(StoreError, match="before it is started"):
            store.set_fence(("primary", 3))
        await store.close()
        assert not store.failed.done()  # a clean close is not a failure


@pytest.mark.parametrize("batch", ["envelope", "channel", "both"])
async def test_a_fenced_store_commits_nothing_once_another_node_took_the_lease(
    url: str, lease: Callable[..., Awaitable[Lease]], batch: str
) -> None:
    a = await lease("a", ttl=0.5)
    b = await lease("b", ttl=0.5)
    delivered: list[int] = []
    async with asyncio.timeout(TIMEOUT):
        assert await a.try_acquire() == 1
        store = PostgresStore(url, fence=("primary", 1))
        await store.start()
        failed = store.failed
        store.put_channel(CHAT, "chat", None, "2026-01-01", None)
        store.append_envelope(1, CHAT, 1.0, b"{}", delivered.append, 1)
        await store.flush()
        assert delivered == [1]  # epoch 1 holds the lease: it commits
        store.append_envelope(2, CHAT, 1.0, b"{}", delivered.append, 2)
        store.commit_soon()
        await store.flush()  # envelopes only, still ours
        assert delivered == [1, 2]
        # a is paused past its ttl; b takes over.
        await until(lambda: _expired(b))
        assert await b.try_acquire() == 2
        if batch in ("envelope", "both"):
            store.append_envelope(3, CHAT, 1.0, b"{}", delivered.append, 3)
        if batch in ("channel", "both"):
            store.put_channel("ahp-chat:/other", "chat", None, "2026-01-01", None)
        with pytest.raises(StoreError, match="epoch 2"):
            await store.flush()
        error = await asyncio.shield(failed)
        assert isinstance(error, Fenced)
        assert delivered == [1, 2]  # on_commit never ran for the fenced batch
        with pytest.raises(StoreError, match="failed"):
            store.append_envelope(4, CHAT, 1.0, b"{}", delivered.append, 4)
        await store.close()
        # Behind the store's back: nothing of the fenced batch is in the database.
        assert await mark(url) == 2
        assert await stored_seqs(url) == {1, 2}
        channels = await query(url, "SELECT uri FROM channels")
        assert [r[0] for r in channels] == [CHAT]
        # The new primary opens at the old one's mark.
        successor = PostgresStore(url, fence=("primary", 2))
        assert await successor.start() == 2
        await successor.close()
    assert delivered == [1, 2]


async def test_a_takeover_waits_for_the_commit_in_flight_which_the_new_owner_then_reads(
    url: str, lease: Callable[..., Awaitable[Lease]]
) -> None:
    """Deterministic: the old primary's commit is held inside its transaction by a row lock.

    A third connection locks the channel row that commit updates, so the commit
    has passed its ``FOR SHARE`` fence check and waits; the takeover must then
    wait for it, and afterwards the new owner sees its rows.
    """
    a = await lease("a")
    b = await lease("b")
    delivered: list[int] = []
    blocker = await asyncpg.connect(url, timeout=5)
    try:
        async with asyncio.timeout(TIMEOUT):
            assert await a.try_acquire() == 1
            store = PostgresStore(url, fence=("primary", 1))
            await store.start()
            store.put_channel(CHAT, "chat", None, "2026-01-01", None)
            await store.flush()
            # a is paused past its ttl (expired by the database clock, epoch unchanged).
            await query(url, "UPDATE cluster_lease SET expires_at = now() - interval '1 s'")
            blocking = blocker.transaction()
            await blocking.start()
            await blocker.execute("SELECT 1 FROM channels WHERE uri = $1 FOR UPDATE", CHAT)
            # The old primary's commit in flight: fence check, envelope, then the locked row.
            store.append_envelope(1, CHAT, 1.0, b"{}", delivered.append, 1)
            store.set_unfinished(CHAT, "turn-1")
            store.commit_soon()
            writer = store._writer_conn.get_server_pid()
            await until(lambda: waits_on_a_lock(url, writer))
            takeover = asyncio.create_task(b.try_acquire())
            taker = b._conn.get_server_pid()
            await until(lambda: waits_on_a_lock(url, taker))
            await asyncio.sleep(0.2)  # more time would not let it through
            assert not takeover.done()
            assert delivered == []
            await blocking.rollback()  # the old primary's commit goes through ...
            assert await takeover == 2  # ... and only then the takeover
            await store.flush()
            assert delivered == [1]
            # The new owner reads everything the old one committed.
            assert await mark(url) == 1
            assert await stored_seqs(url) == {1}
            rows = await query(url, "SELECT active_turn FROM channels WHERE uri = $1", CHAT)
            assert rows[0][0] == "turn-1"
            # And the old primary never commits again.
            store.append_envelope(2, CHAT, 1.0, b"{}", delivered.append, 2)
            with pytest.raises(StoreError):
                await store.flush()
            assert isinstance(await asyncio.shield(store.failed), Fenced)
            await store.close()
            assert await mark(url) == 1
            assert delivered == [1]
    finally:
        await blocker.close()


async def test_an_unfenced_store_does_not_need_a_lease(url: str) -> None:
    store = PostgresStore(url)
    delivered: list[int] = []
    async with asyncio.timeout(TIMEOUT):
        await store.start()
        store.append_envelope(1, CHAT, 1.0, b"{}", delivered.append, 1)
        await store.flush()
        await store.close()
    assert delivered == [1]
    tables = await query(url, "SELECT to_regclass('cluster_lease') IS NULL")
    assert tables[0][0] is True

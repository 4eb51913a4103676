"""Sharded mode's ownership (store/ownership.py), against the real PostgreSQL.

Each test gets its own schema (tests/postgres.py) with the store's tables
(``meta``, ``log``) and the ownership tables; without a PostgreSQL server these
tests skip, except under ``CI``. Expiry is the database's clock: a node "stops
renewing" by having its row expired with an UPDATE, and waits on the database
(a lock wait, an expiry) are polled within the test's timeout — never a timed
assertion. docs/scale-out.md "Sharded mode (design)".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest

from ahp_server.store.lease import LeaseLost
from ahp_server.store.ownership import (
    _TAKE_OVER,
    Load,
    LogReader,
    Node,
    Owner,
    Ownership,
    Segment,
    SessionsFenced,
    choose_owner,
    commit_batch,
)
from ahp_server.store.postgres import Fenced
from tests.postgres import query, store_schema, until, waits_on_a_lock

TIMEOUT = 10.0

MakeNode = Callable[..., Awaitable[Ownership]]
Connect = Callable[[], Awaitable[asyncpg.Connection]]


@pytest.fixture
async def url() -> AsyncIterator[str]:
    """A fresh schema with the store's tables (the store's own migrations)."""
    async with store_schema() as schema_url:
        yield schema_url


@pytest.fixture
async def node(url: str) -> AsyncIterator[MakeNode]:
    """Opens and joins nodes on the test's schema; closes them afterwards."""
    async with contextlib.AsyncExitStack() as opened:

        async def make(name: str, *, ttl: float = 30.0, roots: tuple[str, ...] = ()) -> Ownership:
            one = Ownership(url, name, ttl=ttl, roots=roots)
            await one.open()
            opened.push_async_callback(one.close)
            await one.join()
            return one

        yield make


@pytest.fixture
async def connect(url: str) -> AsyncIterator[Connect]:
    """Plain connections, as a store's writer would have; closed afterwards."""
    async with contextlib.AsyncExitStack() as opened:

        async def make() -> asyncpg.Connection:
            conn = await asyncpg.connect(url, timeout=5)
            opened.push_async_callback(conn.close)
            return conn

        yield make


async def a_owns_s1_and_s2(node: MakeNode) -> tuple[Ownership, Ownership]:
    """Nodes a and b; a owns s1 and s2 at epoch 1."""
    a = await node("a")
    b = await node("b")
    for s in ("s1", "s2"):
        assert await a.claim(s) == 1
    return a, b


async def expire(url: str, name: str) -> None:
    """Node ``name`` stopped renewing: its lease is over by the database's clock."""
    await query(
        url, "UPDATE cluster_nodes SET expires_at = now() - interval '1 s' WHERE node = $1", name
    )


async def written(url: str) -> tuple[int, list[tuple[str, int, int]]]:
    """The counter and the log's segments (channel, first, last), read in one snapshot."""
    rows = await query(
        url,
        "SELECT (SELECT value FROM meta WHERE key = 'server_seq'), channel, first_seq, last_seq "
        "FROM (SELECT 1) AS one LEFT JOIN log ON true ORDER BY first_seq",
    )
    counter = int(rows[0][0])
    return counter, [(r[1], r[2], r[3]) for r in rows if r[1] is not None]


def one_segment(channel: str, size: int) -> list[Segment]:
    return [Segment(channel, 0, size - 1, b"[" + b",".join([b"[0]"] * size) + b"]")]


async def test_claims_made_at_once_on_one_node_each_take_their_session(node: MakeNode) -> None:
    """Many clients creating sessions at once on one node: its one connection runs one
    statement at a time, so every claim takes its session (none is refused as existing,
    nor fails a renewal running beside it)."""
    a = await node("a")
    connection = a._conn
    sessions = [f"s{i}" for i in range(30)]
    claims = await asyncio.gather(*(a.claim(s) for s in sessions), a.renew(), a.renew())
    assert claims[: len(sessions)] == [1] * len(sessions)
    assert await a.held() == dict.fromkeys(sessions, 1)
    # Queued, not collided: a collision ("another operation is in progress") drops the
    # connection, and a claim run again after its first run committed answers None.
    assert a._conn is connection


async def test_a_survivor_takes_over_only_sessions_whose_directory_it_serves(
    node: MakeNode, url: str
) -> None:
    """docs/scale-out.md "Working directories": b serves /srv/shared and /srv/b; of a's
    sessions it takes the one under /srv/shared (and the one made without a directory),
    never the one under /srv/a, which stays a's — and c, serving "/", takes that."""
    a = await node("a", roots=("/srv/a", "/srv/shared"))
    b = await node("b", roots=("/srv/b", "/srv/shared/"))
    assert await a.claim("only-a", "/srv/a/project") == 1
    assert await a.claim("shared", "/srv/shared/project") == 1
    assert await a.claim("anywhere") == 1
    assert await a.claim("look-alike", "/srv/shared-not/x") == 1
    await expire(url, "a")
    assert await b.take_over("a", 10) == {"shared": 2, "anywhere": 2}
    assert (await a.owner_of("only-a")) == Owner(node="a", epoch=1)
    c = await node("c", roots=("/",))
    assert await c.take_over("a", 10) == {"only-a": 2, "look-alike": 2}


async def test_a_log_reader_serves_readers_at_once_one_after_the_other(url: str) -> None:
    """The feed's counter poll, its repairs and a takeover's counter read share one
    LogReader: at once, each gets its answer (none fails another on the connection)."""
    reader = LogReader(url)
    try:
        assert await reader.counter() == 0  # connected: the reads below share it
        answers = await asyncio.gather(
            *(reader.counter() for _ in range(10)), *(reader.read(1, 5) for _ in range(10))
        )
    finally:
        await reader.close()
    assert answers == [0] * 10 + [{}] * 10


# -- placement: a pure function ------------------------------------------------------------


def test_choose_owner_prefers_fewest_turns_then_fewest_sessions_then_itself() -> None:
    nodes = [
        Node("a", sessions=1, turns=2, roots=("/w",)),
        Node("b", sessions=9, turns=1, roots=("/w",)),
        Node("c", sessions=5, turns=1, roots=("/w",)),
    ]
    assert choose_owner(nodes, "/w/p", "a") == "c"  # turns first, then sessions
    tied = [Node("a", 3, 1, ("/w",)), Node("b", 3, 1, ("/w",)), Node("c", 3, 1, ("/w",))]
    assert choose_owner(tied, "/w/p", "b") == "b"  # a tie: no hop
    assert choose_owner(tied, "/w/p", "z") == "a"  # a tie elsewhere: by name, deterministic


def test_choose_owner_only_places_on_a_node_serving_the_working_directory() -> None:
    nodes = [
        Node("a", sessions=0, turns=0, roots=("/srv/a",)),
        Node("b", sessions=4, turns=3, roots=("/srv/b", "/shared")),
        Node("c", sessions=8, turns=3, roots=("/shared",)),
    ]
    assert choose_owner(nodes, "/srv/b/project", "a") == "b"
    assert choose_owner(nodes, "/srv/a", "c") == "a"  # the root itself
    assert choose_owner(nodes, "/shared/x", "a") == "b"
    assert choose_owner(nodes, "/srv/ab", "a") is None  # a prefix is not a parent
    assert choose_owner(nodes, "/elsewhere", "a") is None
    assert choose_owner(nodes, None, "c") == "a"  # no directory: any node


def test_choose_owner_never_places_on_a_draining_node_and_none_without_nodes() -> None:
    nodes = [Node("a", 0, 0, ("/w",), draining=True), Node("b", 7, 7, ("/w",))]
    assert choose_owner(nodes, "/w", "a") == "b"
    assert choose_owner(nodes[:1], "/w", "a") is None
    assert choose_owner([], "/w", "a") is None


# -- the node lease ------------------------------------------------------------------------


async def test_live_nodes_report_load_and_roots_and_drop_out_when_expired_or_draining(
    url: str, node: MakeNode
) -> None:
    async with asyncio.timeout(TIMEOUT):
        a = await node("a", roots=("/w", "/x"))
        b = await node("b", ttl=0.5)
        c = await node("c")
        await a.renew(Load(sessions=3, turns=1))
        live = await c.live_nodes()
        assert [n.node for n in live] == ["a", "b", "c"]
        assert live[0] == Node("a", sessions=3, turns=1, roots=("/w", "/x"))
        # b stops renewing: gone once the database's clock passes its expiry.
        await until(lambda: _gone(c, "b"))
        assert await c.expired_nodes() == []  # it owns nothing to take
        await c.drain()
        assert [n.node for n in await a.live_nodes()] == ["a"]
        with pytest.raises(LeaseLost):
            await c.renew()  # draining: no renewal brings it back
        await b.renew()  # expired, but nobody took the name: still b's
        assert [n.node for n in await a.live_nodes()] == ["a", "b"]


async def _gone(observer: Ownership, name: str) -> bool:
    return name not in {n.node for n in await observer.live_nodes()}


async def test_a_restarted_node_waits_for_its_previous_lease_and_fences_it_out(
    url: str, node: MakeNode, connect: Connect
) -> None:
    async with asyncio.timeout(TIMEOUT):
        old = await node("a")
        assert await old.claim("s1") == 1
        again = Ownership(url, "a", ttl=30)
        await again.open()
        try:
            with pytest.raises(LeaseLost):
                await again.join()  # the previous process's lease is live
            await expire(url, "a")
            assert await again.join() == {"s1": 2}  # its sessions, at the next epoch
            with pytest.raises(SessionsFenced) as lost:
                await commit_batch(await connect(), "a", {"s1": 1}, 1, one_segment("s1", 1))
            assert lost.value.sessions == {"s1"}
            with pytest.raises(LeaseLost):
                await old.renew()
            assert await commit_batch(await connect(), "a", {"s1": 2}, 1, one_segment("s1", 1)) == 0
        finally:
            await again.close()


# -- owner rows, takeover, fencing ---------------------------------------------------------


async def test_a_session_has_one_owner_and_another_nodes_claim_is_refused(
    node: MakeNode,
) -> None:
    async with asyncio.timeout(TIMEOUT):
        a = await node("a")
        b = await node("b")
        assert await a.claim("s1") == 1
        assert await a.claim("s2") == 1
        assert await b.claim("s1") is None
        assert await a.claim("s1") is None  # not even again by its owner
        assert await b.owner_of("s1") == Owner("a", 1)
        assert await b.owner_of("s3") is None
        assert await a.held() == {"s1": 1, "s2": 1}
        assert await b.held() == {}
        await b.release(["s1"])  # not b's: nothing happens
        await a.release(["s2"])
        assert await a.held() == {"s1": 1}


async def test_after_the_owner_stops_renewing_a_takeover_fences_its_commits(
    url: str, node: MakeNode, connect: Connect
) -> None:
    async with asyncio.timeout(TIMEOUT):
        _, b = await a_owns_s1_and_s2(node)
        a_conn = await connect()
        assert await commit_batch(a_conn, "a", {"s1": 1}, 2, one_segment("s1", 2)) == 0
        await expire(url, "a")
        assert await b.expired_nodes() == ["a"]
        assert await b.take_over("a", 10) == {"s1": 2, "s2": 2}
        assert await b.owner_of("s1") == Owner("b", 2)
        assert await b.expired_nodes() == []
        before = await written(url)
        with pytest.raises(SessionsFenced) as lost:
            await commit_batch(a_conn, "a", {"s1": 1}, 1, one_segment("s1", 1))
        assert lost.value.sessions == {"s1"}
        assert isinstance(lost.value, Fenced)
        assert await written(url) == before  # nothing written, no number taken
        b_conn = await connect()
        assert await commit_batch(b_conn, "b", {"s1": 2}, 1, one_segment("s1", 1)) == 2
        assert await written(url) == (3, [("s1", 1, 2), ("s1", 3, 3)])


async def test_no_takeover_while_the_owners_lease_is_live(url: str, node: MakeNode) -> None:
    async with asyncio.timeout(TIMEOUT):
        a = await node("a")
        b = await node("b")
        assert await a.claim("s1") == 1
        assert await b.take_over("a", 10) == {}
        assert await b.take_over("nobody", 10) == {}  # no lease row: not expired either
        assert await b.expired_nodes() == []
        assert await b.owner_of("s1") == Owner("a", 1)
        await a.drain()  # a graceful stop: taken over at once
        assert await b.take_over("a", 10) == {"s1": 2}


async def test_a_commit_in_flight_wins_over_the_takeover(
    url: str, node: MakeNode, connect: Connect
) -> None:
    """A's commit holds its owner row share-locked until it commits: B's takeover
    (SKIP LOCKED) passes over that session and takes it only in a later round, after
    the commit, and then reads what A wrote with the counter above it."""
    async with asyncio.timeout(TIMEOUT):
        _, b = await a_owns_s1_and_s2(node)
        await expire(url, "a")
        a_conn = await connect()
        in_flight = a_conn.transaction()
        await in_flight.start()
        assert await commit_batch(a_conn, "a", {"s1": 1}, 3, one_segment("s1", 3)) == 0
        assert await asyncio.create_task(b.take_over("a", 10)) == {"s2": 2}
        assert await b.owner_of("s1") == Owner("a", 1)
        assert await written(url) == (0, [])  # not committed yet: nobody sees it
        await in_flight.commit()
        assert await b.take_over("a", 10) == {"s1": 2}
        assert await written(url) == (3, [("s1", 1, 3)])
        with pytest.raises(SessionsFenced):
            await commit_batch(a_conn, "a", {"s1": 1}, 1, one_segment("s1", 1))
        assert await commit_batch(await connect(), "b", {"s1": 2}, 1, one_segment("s1", 1)) == 3


async def test_a_commit_waiting_on_a_takeover_in_flight_is_fenced_once_it_commits(
    url: str, node: MakeNode, connect: Connect
) -> None:
    """The other order: the takeover holds the row; A's commit waits on it, then re-reads
    the row (READ COMMITTED), finds the new epoch and writes nothing."""
    async with asyncio.timeout(TIMEOUT):
        a = await node("a")
        assert await a.claim("s1") == 1
        await expire(url, "a")
        b_conn = await connect()
        taking = b_conn.transaction()
        await taking.start()
        taken = await b_conn.fetch(_TAKE_OVER, "b", "a", 10, [])
        assert [(r[0], r[1]) for r in taken] == [("s1", 2)]
        a_conn = await connect()
        commit = asyncio.create_task(commit_batch(a_conn, "a", {"s1": 1}, 1, one_segment("s1", 1)))
        await until(lambda: waits_on_a_lock(url, a_conn.get_server_pid()))
        assert not commit.done()
        await taking.commit()
        with pytest.raises(SessionsFenced) as lost:
            await commit
        assert lost.value.sessions == {"s1"}
        assert await written(url) == (0, [])


async def test_survivors_share_a_dead_nodes_sessions_each_taken_once(
    url: str, node: MakeNode
) -> None:
    async with asyncio.timeout(TIMEOUT):
        dead = await node("d")
        sessions = {f"s{i:02}" for i in range(30)}
        for s in sorted(sessions):
            assert await dead.claim(s) == 1
        survivors = [await node(name) for name in ("x", "y", "z")]
        await expire(url, "d")

        async def campaign(survivor: Ownership) -> dict[str, int]:
            taken: dict[str, int] = {}
            while True:
                got = await survivor.take_over("d", 4)
                assert not set(got) & set(taken)
                taken |= got
                if not got and "d" not in await survivor.expired_nodes():
                    return taken

        results = await asyncio.gather(*(campaign(s) for s in survivors))
        owners = [s for taken in results for s in taken]
        assert sorted(owners) == sorted(sessions)  # every one, exactly once
        assert {e for taken in results for e in taken.values()} == {2}
        for survivor, taken in zip(survivors, results, strict=True):
            assert await survivor.held() == taken
        assert await dead.held() == {}


async def test_a_batch_with_one_lost_session_writes_nothing(
    url: str, node: MakeNode, connect: Connect
) -> None:
    async with asyncio.timeout(TIMEOUT):
        _, b = await a_owns_s1_and_s2(node)
        await expire(url, "a")
        assert await b.take_over("a", 1) == {"s1": 2}  # by name: s1 first
        # a still holds s2 at 1 and believes it holds s1 at 1.
        conn = await connect()
        segments = [Segment("s2", 0, 1, b"[[0],[1]]"), Segment("s1", 2, 2, b"[[2]]")]
        tx = conn.transaction()
        await tx.start()
        # The batch's other writes go before it, in the same transaction.
        await conn.execute("INSERT INTO clients VALUES ('c', '0.7', 0)")
        with pytest.raises(SessionsFenced) as lost:
            await commit_batch(conn, "a", {"s1": 1, "s2": 1}, 3, segments)
        assert lost.value.sessions == {"s1"}
        await tx.rollback()
        assert await written(url) == (0, [])
        assert await query(url, "SELECT * FROM clients") == []
        # What it still holds commits again, numbered from where nothing was taken.
        assert await commit_batch(conn, "a", {"s2": 1}, 2, segments[:1]) == 0
        assert await written(url) == (2, [("s2", 1, 2)])


async def test_concurrent_owners_commits_are_numbered_contiguously_in_commit_order(
    url: str, node: MakeNode, connect: Connect
) -> None:
    """Two owners commit batches of 1-3 entries as fast as they can while a reader
    keeps looking: every snapshot it takes holds exactly the numbers 1..counter
    (whoever reads N reads every number below it: commit order is number order),
    and at the end every number is there once."""
    rounds = 60
    async with asyncio.timeout(TIMEOUT * 3):
        owners = [await node("a"), await node("b")]
        for owner in owners:
            assert await owner.claim(f"s-{owner.node}") == 1
        done = asyncio.Event()

        async def commits(owner: Ownership) -> list[tuple[int, int]]:
            conn = await connect()
            bases = []
            for i in range(rounds):
                size = 1 + i % 3
                session = f"s-{owner.node}"
                base = await commit_batch(
                    conn, owner.node, {session: 1}, size, one_segment(session, size)
                )
                bases.append((base, size))
            return bases

        async def reader() -> int:
            looks = 0
            while not done.is_set() or looks == 0:
                counter, segments = await written(url)
                numbers = [n for _, first, last in segments for n in range(first, last + 1)]
                assert numbers == list(range(1, counter + 1))
                looks += 1
            return looks

        looking = asyncio.create_task(reader())
        try:
            results = await asyncio.gather(*(commits(owner) for owner in owners))
        finally:
            done.set()
        assert await looking > 0
        for bases in results:
            assert [b for b, _ in bases] == sorted(b for b, _ in bases)
        total = sum(size for bases in results for _, size in bases)
        counter, segments = await written(url)
        assert counter == total == rounds * 2 * 2  # sizes 1, 2, 3 average 2
        numbers = [n for _, first, last in segments for n in range(first, last + 1)]
        assert numbers == list(range(1, total + 1))
        spans = sorted((b + 1, b + size) for bases in results for b, size in bases)
        assert spans == [(first, last) for _, first, last in segments]

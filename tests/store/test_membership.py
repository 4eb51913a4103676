"""A sharded node's membership (store/membership.py) on the real PostgreSQL.

Nodes are :class:`Membership` loops over :class:`Ownership` and a
:class:`ShardedStore` each, in one fresh schema. Waits are bounded by
``TIMEOUT``; assertions are on owner rows, epochs and the stores' ``held`` maps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from ahp_server.store.membership import Membership
from ahp_server.store.ownership import Ownership
from ahp_server.store.sharded import ShardedStore
from tests.postgres import postgres_schema, query, until

TIMEOUT = 20.0


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with postgres_schema() as schema_url:
        yield schema_url


@pytest.fixture
async def stack() -> AsyncIterator[contextlib.AsyncExitStack]:
    async with contextlib.AsyncExitStack() as opened:
        yield opened


async def member(
    stack: contextlib.AsyncExitStack,
    url: str,
    name: str,
    *,
    ttl: float = 30.0,
    interval: float = 3600.0,
    taken: list[dict[str, int]] | None = None,
    lost: list[str] | None = None,
) -> Membership:
    store = ShardedStore(url, name)
    await store.start()
    stack.push_async_callback(store.close)
    ownership = Ownership(url, name, ttl=ttl)
    await ownership.open()
    stack.push_async_callback(ownership.close)
    node = Membership(
        ownership,
        store,
        interval=interval,
        on_taken=(taken if taken is not None else []).append,
        on_lease_lost=(lost if lost is not None else []).append,
    )
    await node.join()
    stack.push_async_callback(node.stop, drain=False)
    return node


SESSIONS = [f"ahp-session:/s{k}" for k in range(6)]


async def test_survivors_split_a_dead_nodes_sessions_by_fair_share(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    a = await member(stack, url, "node-a", ttl=0.5)
    b = await member(stack, url, "node-b")
    c = await member(stack, url, "node-c")
    for session in SESSIONS:
        assert await a.claim(session) == 1
    assert a.store.held == dict.fromkeys(SESSIONS, 1)
    # node-a dies (no renewal, no drain); nothing is taken while its lease lives.
    await a.stop(drain=False)
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _expired(a))
    # Two live survivors: a round takes ceil(left / 2).
    first = await b.take_over_round()
    second = await c.take_over_round()
    third = await b.take_over_round()
    assert (len(first), len(second), len(third)) == (3, 2, 1)
    assert set(first) | set(second) | set(third) == set(SESSIONS)
    assert set(b.store.held) == set(first) | set(third)
    assert set(c.store.held) == set(second)
    assert set(b.store.held) & set(c.store.held) == set()
    rows = await query(url, "SELECT node, epoch FROM session_owner ORDER BY session")
    assert {tuple(r) for r in rows} <= {("node-b", 2), ("node-c", 2)}
    assert await b.take_over_round() == {}


async def test_the_loop_renews_its_lease_and_takes_over_a_dead_node(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    taken: list[dict[str, int]] = []
    # Renewed every 0.2 s, a lease of 3 s lapses only if a node stops renewing.
    a = await member(stack, url, "node-a", ttl=3.0, interval=0.2)
    b = await member(stack, url, "node-b", ttl=3.0, interval=0.2, taken=taken)
    for session in SESSIONS[:3]:
        await a.claim(session)
    # Both loops renew and run takeover rounds: nothing is taken from a live node.
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(min(a.renewals, b.renewals) >= 3))
    assert set(a.store.held) == set(SESSIONS[:3])
    assert b.store.held == {}
    await a.stop(drain=False)  # as after kill -9: the lease just runs out
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(len(b.store.held) == 3))
    assert b.store.held == dict.fromkeys(SESSIONS[:3], 2)
    assert sum(len(t) for t in taken) == 3
    assert b.taken == 3


async def test_a_drained_node_is_taken_over_without_waiting_for_its_ttl(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    a = await member(stack, url, "node-a", ttl=3600.0)
    b = await member(stack, url, "node-b", ttl=3600.0)
    await a.claim(SESSIONS[0])
    assert await b.take_over_round() == {}  # a's lease is live for an hour
    await a.stop(drain=True)
    assert await b.take_over_round() == {SESSIONS[0]: 2}


async def test_a_node_whose_name_another_process_took_is_told_to_stop(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    lost: list[str] = []
    a = await member(stack, url, "node-a", ttl=0.5, interval=0.2, lost=lost)
    await a.claim(SESSIONS[0])
    # A second process under the same name joins once node-a's lease lapsed
    # (node-a paused: simulated by stopping its loop, then resuming it).
    await a.stop(drain=False)
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _expired(a))
    again = await member(stack, url, "node-a", ttl=30.0)
    assert again.store.held == {SESSIONS[0]: 2}  # the epoch rose: the old process is fenced
    a._task = asyncio.get_running_loop().create_task(a._run())
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(bool(lost)))
    assert "no longer this incarnation" in lost[0]


async def _expired(node: Membership) -> bool:
    rows = await query(
        # The dead node's lease has run out by the database's clock.
        node.store._url,
        "SELECT expires_at <= now() FROM cluster_nodes WHERE node = $1",
        node.ownership.node,
    )
    return bool(rows and rows[0][0])


async def _ready(value: bool) -> bool:
    return value

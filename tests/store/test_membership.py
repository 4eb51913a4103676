"""A sharded node's membership (store/membership.py) on the real PostgreSQL.

Nodes are :class:`Membership` loops over :class:`Ownership` and a
:class:`ShardedStore` each, in one fresh schema; where the bus gates renewals,
each node's own :class:`NodeHeartbeat` on the real NATS server. Waits are bounded by
``TIMEOUT``; assertions are on owner rows, epochs and the stores' ``held`` maps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import nats

from ahp_server.store.membership import Membership
from ahp_server.store.ownership import Ownership
from ahp_server.store.sharded import ShardedStore
from ahp_server.transport.node_heartbeat import NodeHeartbeat
from ahp_server.transport.relay_format import Signer
from tests.cluster.helpers import nats_or_skip, new_cluster_name
from tests.postgres import query, until
from tests.proxy import Proxy

TIMEOUT = 20.0


async def member(
    stack: contextlib.AsyncExitStack,
    url: str,
    name: str,
    *,
    ttl: float = 30.0,
    interval: float = 3600.0,
    taken: list[dict[str, int]] | None = None,
    lost: list[str] | None = None,
    bus_ok: Callable[[], bool] = lambda: True,
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
        bus_ok=bus_ok,
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


async def test_a_node_the_bus_does_not_hear_lets_its_sessions_go_and_learns_it_when_back(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    # Each node's gate is its own heartbeat heard on the real NATS server; node-a
    # reaches NATS through a proxy the test cuts (a partition from the bus only:
    # node-a still reaches PostgreSQL).
    bus, cluster = nats_or_skip(), new_cluster_name()
    proxy = Proxy(int(bus.rsplit(":", 1)[1]))
    port = await proxy.start()
    stack.push_async_callback(proxy.close)
    beats: dict[str, NodeHeartbeat] = {}
    for name, at in (("node-a", f"nats://127.0.0.1:{port}"), ("node-b", bus)):
        nc = await nats.connect(
            at, allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=0.1
        )
        stack.push_async_callback(nc.close)
        beats[name] = NodeHeartbeat(nc, cluster, name, Signer(b"s" * 16, cluster), period=0.1)
        await beats[name].start()
        stack.push_async_callback(beats[name].aclose)

    def heard(name: str) -> Callable[[], bool]:
        return lambda: beats[name].heard_within(0.4)

    told: list[frozenset[str]] = []
    a = await member(stack, url, "node-a", ttl=2.0, interval=0.4, bus_ok=heard("node-a"))
    a.store.on_lost = told.append
    b = await member(stack, url, "node-b", ttl=2.0, interval=0.4, bus_ok=heard("node-b"))
    for session in SESSIONS[:3]:
        await a.claim(session)
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(a.renewals >= 2 and b.renewals >= 2))
    proxy.drop()  # node-a's bus connection reset, reconnects refused
    # node-a withholds its renewals, its lease runs out, node-b takes its sessions.
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(len(b.store.held) == 3))
    assert b.store.held == dict.fromkeys(SESSIONS[:3], 2)
    assert a.withheld >= 1
    assert a.taken == 0
    assert set(a.store.held) == set(SESSIONS[:3])  # it has not learnt it yet: no renewal
    assert told == []
    proxy.restore()
    # Heard again, node-a renews, reads its rows, and lets go of what it lost.
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(a.reconciled_lost == 3))
    assert a.store.held == {}
    assert told == [frozenset(SESSIONS[:3])]
    assert "node-a" in {n.node for n in await b.ownership.live_nodes()}
    rows = await query(url, "SELECT DISTINCT node, epoch FROM session_owner")
    assert [tuple(r) for r in rows] == [("node-b", 2)]


async def test_a_session_claimed_while_the_rows_are_read_again_is_kept(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    a = await member(stack, url, "node-a")
    b = await member(stack, url, "node-b")
    await a.claim(SESSIONS[0])
    await b.claim(SESSIONS[1])
    # node-a believes it holds SESSIONS[1] too (as a stale map would after a takeover).
    a.store.hold(SESSIONS[1], 1)
    told: list[frozenset[str]] = []
    a.store.on_lost = told.append
    reconciling = asyncio.ensure_future(a.reconcile())
    claimed = asyncio.ensure_future(a.claim(SESSIONS[2]))
    lost = await reconciling
    await claimed
    assert lost == frozenset({SESSIONS[1]})
    assert told == [lost]
    assert a.store.held == {SESSIONS[0]: 1, SESSIONS[2]: 1}


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

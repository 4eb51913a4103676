"""Sharded nodes (cluster/sharded.py) on the real PostgreSQL and NATS, driven by real clients.

First two :class:`ShardedNode` objects in this process (a node "dies" by
refusing its own writes, then :meth:`ShardedNode.abort`, no drain: its lease
just runs out); then three ``ahp-server serve`` processes with ``cluster.mode
= "sharded"``, one of them killed with SIGKILL while a client of another node
drives a third node's session. Each node listens on a port
of its own with the echo agent; clients are :class:`AhpClient` over real
WebSockets; the bus is the tests' authenticated ``nats-server``. Every wait
is bounded by ``TIMEOUT``; assertions are on owner rows, turn states, words
and numbers. docs/scale-out.md "Sharded mode".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from msgspec import UnsetType

from ahp_server.client import AhpClient
from ahp_server.cluster.sharded import ShardedNode
from ahp_server.config import Settings
from ahp_server.host.metrics import render
from ahp_server.protocol.types import ChatState
from ahp_server.store.sharded import ROOT
from ahp_server.transport.feed import FeedPublisher
from ahp_server.transport.relay_format import Signer
from tests.cluster.helpers import Node, PrivateNats, cluster_config, new_cluster_name
from tests.postgres import query, until

TIMEOUT = 30.0
#: A lease that lapses in seconds, renewed every second: a node that stops renewing is
#: taken over within about LEASE_TTL + LEASE_TTL / 3.
LEASE_TTL = 3.0
SECRET = "sharded-node-test-secret-5d0b9e"


@pytest.fixture
async def cluster(url: str) -> tuple[str, str]:
    return url, new_cluster_name()


def settings(
    url: str, bus: PrivateNats, cluster: str, name: str, *, placement: str = "local"
) -> Settings:
    """A sharded node's settings; ``placement`` "local" by default: each node owns what
    its clients create, so a test knows where a session lives."""
    return Settings(
        port=0,
        store=url,
        bus=bus.url,
        bus_user=bus.user,
        bus_password=bus.password,
        cluster_name=cluster,
        node_id=name,
        lease_ttl=LEASE_TTL,
        heartbeat=0.5,
        cluster_secret=SECRET,
        placement=placement,
    )


@contextlib.asynccontextmanager
async def running(
    url: str, bus: PrivateNats, cluster: str, name: str, *, placement: str = "local", **changes: Any
) -> AsyncIterator[ShardedNode]:
    """A started sharded node (``changes``: other settings), aborted at the end."""
    node = ShardedNode(replace(settings(url, bus, cluster, name, placement=placement), **changes))
    await node.start()
    try:
        yield node
    finally:
        await node.abort()


async def owners(url: str) -> dict[str, tuple[str, int]]:
    rows = await query(url, "SELECT session, node, epoch FROM session_owner")
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}


async def session_of(url: str, chat: str) -> str:
    """The session a chat belongs to, as the shared catalogue says."""
    rows = await query(url, "SELECT session FROM channels WHERE uri = $1", chat)
    return str(rows[0][0])


def answer(client: AhpClient, chat: str) -> str:
    """What the chat's agent said: its finished turns' text, then the running turn's."""
    state = client.view(chat, ChatState)
    active = state.active_turn
    turns = [*state.turns, *(() if isinstance(active, UnsetType) else (active,))]
    return "".join(
        p.content for t in turns for p in t.response_parts if getattr(p, "kind", "") == "markdown"
    )


async def test_each_node_owns_what_it_creates_and_takes_a_dead_nodes_sessions_over(
    cluster: tuple[str, str], nats_bus: PrivateNats
) -> None:
    url, name = cluster
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
    ):
        client_a = await AhpClient.connect(a.urls[0], subscriptions=[ROOT])
        client_b = await AhpClient.connect(b.urls[0], subscriptions=[ROOT])
        try:
            chat_a = await client_a.open_chat("echo", timeout=TIMEOUT)
            chat_b = await client_b.open_chat("echo", timeout=TIMEOUT)
            # Each node owns the session made through it, at epoch 1, and runs its agent.
            session_a, session_b = await session_of(url, chat_a), await session_of(url, chat_b)
            rows = await owners(url)
            assert rows[session_a] == ("node-a", 1)
            assert rows[session_b] == ("node-b", 1)
            assert rows[ROOT] == ("node-a", 1)  # the first node up owns the root channel
            assert "two" in await client_b.ask(chat_b, "/slow 5 one two", timeout=TIMEOUT)
            # A turn streams on node-a's session; node-a dies mid-turn.
            words = " ".join(f"w{i}" for i in range(400))
            await client_a.send_message(chat_a, f"/slow 20 {words}", timeout=TIMEOUT)
            await client_a.wait_for(lambda c: "w10" in answer(c, chat_a), timeout=TIMEOUT)
            # node-b streams meanwhile, on its own session.
            streaming_b = asyncio.ensure_future(
                client_b.ask(
                    chat_b, f"/slow 20 {' '.join(f'v{i}' for i in range(300))}", timeout=TIMEOUT
                )
            )
            # As after kill -9: nothing node-a does from now on reaches the database
            # (every write of its is refused: it holds nothing), then it stops.
            a.store.held.clear()
            await a.abort()
            # node-b takes node-a's sessions (and the root) over at epoch 2 ...
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _taken(url, session_a))
                await until(lambda: _ready(b.adopted == 2))
            # ... its own stream was not interrupted ...
            assert (await streaming_b).split() == [f"v{i}" for i in range(300)]
            # ... and node-a's running turn ended as an error there: a client of node-b
            # sees it, with what had streamed before kept.
            await client_b.subscribe(chat_a, timeout=TIMEOUT)
            await client_b.wait_for(
                lambda c: (
                    (s := c.confirmed(chat_a, ChatState)) is not None
                    and len(s.turns) == 1
                    and s.turns[0].state == "error"
                ),
                timeout=TIMEOUT,
            )
            assert answer(client_b, chat_a).startswith("w0 w1 w2")
            # The session is node-b's now: a new turn there runs on node-b's agent.
            assert "again" in await client_b.ask(chat_a, "/slow 5 once again", timeout=TIMEOUT)
            # Every envelope node-b's client saw came in one increasing order.
            numbers = [e.server_seq for e in client_b.envelopes]
            assert numbers == sorted(set(numbers))
        finally:
            await client_a.close()
            await client_b.close()


async def _taken(url: str, session: str) -> bool:
    return (await owners(url)).get(session) == ("node-b", 2)


async def _ready(value: bool) -> bool:
    return value


async def heard(publisher: FeedPublisher, seq: int, node: ShardedNode) -> None:
    """Publish a record numbered ``seq`` until ``node``'s feed has received it (it then
    knows ``seq`` committed): a message published just as a node subscribes may reach
    NATS before its subscription does."""
    feed = node.feed
    assert feed is not None
    async with asyncio.timeout(TIMEOUT):
        while feed.reader.order.horizon < seq:
            publisher.publish(seq, [b'{"channel":"ahp-root://"}'])
            await publisher.flush()
            await asyncio.sleep(0.05)


def metric(node: ShardedNode, name: str) -> float:
    """One sample of the node's ``/metrics`` (its text, as served), by name and labels."""
    for line in render(node.host).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {name} in /metrics")


async def test_concurrent_streams_share_commits_within_the_cluster_window_and_the_feed_is_counted(
    cluster: tuple[str, str], nats_bus: PrivateNats
) -> None:
    """``cluster.commit_window_ms``: two chats streaming at once on node-a commit at most
    once per window (plus the commits a client waits for: its own actions, at once);
    node-b delivers every one of those numbers from the feed, and says so in /metrics."""
    url, name = cluster
    window = 0.1
    async with (
        running(url, nats_bus, name, "node-a", sharded_commit_window_ms=window * 1000) as a,
        running(url, nats_bus, name, "node-b") as b,
        AhpClient.connect(a.urls[0]) as client,
    ):
        chats = [await client.open_chat("echo", timeout=TIMEOUT) for _ in range(2)]
        words = " ".join(f"w{i}" for i in range(150))
        before = a.store.commits
        started = asyncio.get_running_loop().time()
        answers = await asyncio.gather(
            *(client.ask(chat, f"/slow 2 {words}", timeout=TIMEOUT) for chat in chats)
        )
        seconds = asyncio.get_running_loop().time() - started
        commits = a.store.commits - before
        assert all(text.split() == words.split() for text in answers)
        # 300 words (and the turns' other actions) in at most one commit per window,
        # whatever this machine's speed; a few more for what clients wait on.
        assert commits <= seconds / window + 12, (commits, seconds)
        # node-b heard node-a's records and delivered every number up to node-a's last.
        assert b.feed is not None
        assert a.feed is not None
        last = a.feed.delivered
        caught_up = asyncio.Event()
        b.feed.when(last, caught_up.set)
        await asyncio.wait_for(caught_up.wait(), TIMEOUT)
        assert metric(b, "ahp_feed_delivered_seq") >= last
        assert metric(b, "ahp_feed_records_total") >= 1
        assert (
            metric(b, 'ahp_feed_delivered_total{via="any"}')
            >= last - metric(b, 'ahp_feed_delivered_total{via="log"}') - 1
        )
        assert metric(b, "ahp_feed_stalls_total") == 0
        assert metric(b, "ahp_feed_rejected_total") == 0


async def test_each_node_bounds_a_stalled_feed_by_its_own_configured_feed_stall(
    cluster: tuple[str, str], nats_bus: PrivateNats
) -> None:
    """``cluster.feed_stall``: a record numbered beyond the log (as from an owner whose
    commits this node cannot read) blocks delivery; node-b (feed_stall 600 s) is blocked
    first, node-a (0.5 s) after it, and node-a's alarm fires first: its client is closed
    with 1012 while node-b's stays. With one fixed bound the earlier block fires first."""
    url, name = cluster
    nc = await nats_bus.client()
    publisher = FeedPublisher(nc, name, Signer(SECRET.encode(), name))
    try:
        async with running(url, nats_bus, name, "node-b", feed_stall=600.0) as b:
            assert b.feed is not None
            ahead = b.feed.next_seq + 1_000  # far beyond anything committed in this test
            await heard(publisher, ahead, b)
            async with (
                running(url, nats_bus, name, "node-a", feed_grace=0.2, feed_stall=0.5) as a,
                AhpClient.connect(a.urls[0]) as on_a,
                AhpClient.connect(b.urls[0]) as on_b,
            ):
                assert a.feed is not None
                assert a.feed.reader.order.grace == 0.2  # cluster.feed_grace, as configured
                await heard(publisher, ahead, a)
                await on_a.wait_closed(timeout=TIMEOUT)
                assert on_a.close_code == 1012
                assert a.feed.reader.stats.stalls == 1
                assert b.feed.reader.stats.stalls == 0
                assert metric(a, "ahp_feed_stalls_total") == 1  # /metrics tells
                assert not on_b.closed
                assert a.feed.next_seq < ahead  # nothing was skipped
    finally:
        await publisher.aclose()
        await nc.close()


async def test_three_node_processes_share_sessions_and_survive_a_kill_9(
    cluster: tuple[str, str], nats_bus: PrivateNats, tmp_path: Path
) -> None:
    url, name = cluster
    config = cluster_config(tmp_path, lease_ttl=LEASE_TTL, mode="sharded", placement="local")
    nodes = [
        Node(
            f"node-{n}",
            store=url,
            bus=nats_bus.url,
            cluster=name,
            config=config,
            bus_user=nats_bus.user,
            bus_password=nats_bus.password,
        )
        for n in "abc"
    ]
    clients: list[AhpClient] = []
    try:
        for node in nodes:
            await node.start()
        clients = [await AhpClient.connect(n.url) for n in nodes]
        chats = [await c.open_chat("echo", timeout=TIMEOUT) for c in clients]
        sessions = [await session_of(url, chat) for chat in chats]
        rows = await owners(url)
        # Sessions land on all three nodes: each owns the one made through it.
        assert [rows[s] for s in sessions] == [(n.name, 1) for n in nodes]
        # A client of node-b drives node-c's session: its requests go to node-c, the
        # envelopes come back on node-b's feed.
        cross = await AhpClient.connect(nodes[1].url)
        clients.append(cross)
        await cross.subscribe(chats[2], timeout=TIMEOUT)
        # Every node streams a long turn on its own session (node-c's started through
        # node-b); node-a is killed mid-turn.
        for k, (client, chat) in enumerate(zip([*clients[:2], cross], chats, strict=True)):
            words = " ".join(f"{'abc'[k]}{i}" for i in range(300))
            await client.send_message(chat, f"/slow 20 {words}", timeout=TIMEOUT)
        await clients[0].wait_for(lambda c: "a10" in answer(c, chats[0]), timeout=TIMEOUT)
        await nodes[0].kill()
        # The survivors' streams continue unbroken: every word, once, in order — on
        # node-c's own client and on node-b's client driving it alike.
        await cross.wait_for(lambda c: len(c.view(chats[2], ChatState).turns) == 1, timeout=TIMEOUT)
        assert answer(cross, chats[2]).split() == [f"c{i}" for i in range(300)]
        assert [e.server_seq for e in cross.envelopes] == sorted(
            {e.server_seq for e in cross.envelopes}
        )
        for k in (1, 2):
            await clients[k].wait_for(
                lambda c, k=k: len(c.view(chats[k], ChatState).turns) == 1, timeout=TIMEOUT
            )
            turn = clients[k].view(chats[k], ChatState).turns[0]
            assert turn.state == "complete"
            assert answer(clients[k], chats[k]).split() == [f"{'abc'[k]}{i}" for i in range(300)]
            numbers = [e.server_seq for e in clients[k].envelopes]
            assert numbers == sorted(set(numbers))
        # node-a's session is taken over by a survivor (epoch 2) within the lease ...
        async with asyncio.timeout(TIMEOUT):
            await until(lambda: _moved(url, sessions[0]))
        owner, epoch = (await owners(url))[sessions[0]]
        assert epoch == 2
        new_owner = next(n for n in nodes if n.name == owner)
        # ... which ends its running turn as an error, what streamed before kept.
        async with AhpClient.connect(new_owner.url) as again:
            await again.subscribe(chats[0], timeout=TIMEOUT)
            await again.wait_for(
                lambda c: [t.state for t in c.view(chats[0], ChatState).turns] == ["error"],
                timeout=TIMEOUT,
            )
            assert answer(again, chats[0]).startswith("a0 a1 a2")
            # And it answers there now.
            assert "again" in await again.ask(chats[0], "/slow 5 once again", timeout=TIMEOUT)
    finally:
        for client in clients:
            await client.close()
        for node in nodes:
            await node.close()


async def _moved(url: str, session: str) -> bool:
    owner = (await owners(url)).get(session)
    return owner is not None and owner[0] != "node-a"

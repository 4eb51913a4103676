"""Sharded nodes' delivery (transport/node_feed.py) over the sharded store, on real services.

Each node is what a sharded host runs under its actors: a
:class:`~ahp_server.host.core.sequencer.Hub` whose store numbers in the commit
(:class:`~ahp_server.store.sharded.ShardedStore`), and a :class:`NodeFeed`
delivering its own commits and the other owners' in ``serverSeq`` order to
its subscribers (real :class:`~ahp_server.host.core.fanout.Connection`
objects writing to a recording transport). Owner rows come from
:class:`~ahp_server.store.ownership.Ownership`. Every wait is bounded by
``TIMEOUT``; assertions are on numbers, order, bytes and counts.
docs/scale-out.md "Sharded mode (design)".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

import nats
import pytest

from ahp_server.host.core.fanout import Connection
from ahp_server.host.core.sequencer import Hub
from ahp_server.protocol.types import SessionTitleChangedAction
from ahp_server.store.base import StoreError
from ahp_server.store.ownership import LogReader, Ownership
from ahp_server.store.postgres import PostgresStore
from ahp_server.store.sharded import ShardedStore
from ahp_server.transport.node_feed import NodeFeed
from ahp_server.transport.relay_format import Signer
from tests.cluster.helpers import nats_or_skip, new_cluster_name
from tests.postgres import query, until

TIMEOUT = 20.0
SECRET = b"node-feed-test-secret-41a2"


class Recording:
    """A transport that keeps every frame written to it."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    async def send_text(self, frame: bytes) -> None:
        self.frames.append(frame)

    async def send_texts(self, frames: list[bytes]) -> None:
        self.frames.extend(frames)

    async def close(self, code: int, reason: str) -> None:
        return None

    def abort(self) -> None:
        return None

    def envelopes(self) -> list[dict[str, Any]]:
        out = []
        for frame in self.frames:
            message = json.loads(frame)
            if message.get("method") == "action":
                out.append(message["params"])
        return out


class Publisher:
    """Who published an action hears its number at delivery, as an actor does."""

    def delivered(self, seq: int, token: object, done: asyncio.Future[int] | None) -> None:
        if done is not None and not done.done():
            done.set_result(seq)


@dataclass
class Node:
    name: str
    ownership: Ownership
    store: ShardedStore
    hub: Hub
    feed: NodeFeed
    lost: list[frozenset[str]] = field(default_factory=list)

    async def own(self, session: str) -> None:
        epoch = await self.ownership.claim(session)
        assert epoch == 1
        self.store.hold(session, epoch)

    def publish(self, channel: str, title: str) -> asyncio.Future[int]:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.hub.publish(
            channel, SessionTitleChangedAction(title=title), None, Publisher(), done=done
        )
        return done

    def subscriber(self, *channels: str) -> Recording:
        transport = Recording()
        connection = Connection(transport, max_frames=100_000, max_bytes=100_000_000)
        connection.start()
        for channel in channels:
            self.hub.subscribe(connection, channel)
        return transport


async def start_node(
    stack: contextlib.AsyncExitStack, url: str, cluster: str, name: str, ttl: float = 30.0
) -> Node:
    store = ShardedStore(url, name)
    seq = await store.start()
    stack.push_async_callback(store.close)
    ownership = Ownership(url, name, ttl=ttl)
    await ownership.open()
    await ownership.join()
    stack.push_async_callback(ownership.close)
    hub = Hub(replay_max_envelopes=10_000, replay_max_bytes=10_000_000, store=store)
    hub.restart_at(seq)
    nc = await nats.connect(nats_or_skip(), connect_timeout=TIMEOUT, allow_reconnect=False)
    stack.push_async_callback(nc.close)
    feed = NodeFeed(
        hub, store, nc, LogReader(url), cluster, Signer(SECRET, cluster), next_seq=seq + 1
    )
    await feed.start()
    stack.push_async_callback(feed.aclose)
    node = Node(name, ownership, store, hub, feed)
    store.on_lost = node.lost.append
    return node


async def test_two_owners_are_delivered_everywhere_once_each_in_one_order(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    cluster = new_cluster_name()
    a = await start_node(stack, url, cluster, "node-a")
    b = await start_node(stack, url, cluster, "node-b")
    s1, s2 = "ahp-session:/one", "ahp-session:/two"
    await a.own(s1)
    await b.own(s2)
    seen_a = a.subscriber(s1, s2)
    seen_b = b.subscriber(s1, s2)
    only_s2_on_a = a.subscriber(s2)

    async def stream(node: Node, channel: str, count: int) -> list[int]:
        numbers = []
        for k in range(count):
            numbers.append(await node.publish(channel, f"{channel} {k}"))
            if k % 7 == 0:
                await asyncio.sleep(0)
        return numbers

    per = 60
    async with asyncio.timeout(TIMEOUT):
        got_a, got_b = await asyncio.gather(stream(a, s1, per), stream(b, s2, per))
        total = 2 * per
        await until(lambda: _ready(len(seen_a.envelopes()) >= total))
        await until(lambda: _ready(len(seen_b.envelopes()) >= total))

    # Each publisher learned its numbers at delivery; together they are 1..total, once each.
    assert sorted(got_a + got_b) == list(range(1, total + 1))
    assert got_a == sorted(got_a)
    assert got_b == sorted(got_b)
    for seen in (seen_a, seen_b):
        envelopes = seen.envelopes()
        assert [e["serverSeq"] for e in envelopes] == list(range(1, total + 1))
        # Each envelope is the one its owner published under that number.
        for e in envelopes:
            owner_numbers = got_a if e["channel"] == s1 else got_b
            assert e["serverSeq"] in owner_numbers
            k = owner_numbers.index(e["serverSeq"])
            assert e["action"] == {"type": "session/titleChanged", "title": f"{e['channel']} {k}"}
    # Both nodes sent the same bytes in the same order.
    assert seen_a.frames == seen_b.frames
    # A subscriber of one channel sees that channel's envelopes only, in order.
    assert [e["serverSeq"] for e in only_s2_on_a.envelopes()] == got_b
    # Replay on either node, from any number, is the same committed history.
    for node in (a, b):
        replayed = node.hub.replay(per, [s1, s2])
        assert replayed is not None
        assert [json.loads(r)["serverSeq"] for r in replayed] == list(range(per + 1, total + 1))
    # The log holds every number once, without serverSeq in the stored bodies.
    rows = await query(url, "SELECT value FROM meta WHERE key = 'server_seq'")
    assert rows[0][0] == total


async def test_a_session_taken_over_is_fenced_and_its_writes_never_delivered(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    cluster = new_cluster_name()
    a = await start_node(stack, url, cluster, "node-a", ttl=1.0)
    b = await start_node(stack, url, cluster, "node-b")
    s1, s2 = "ahp-session:/one", "ahp-session:/two"
    await a.own(s1)
    await a.own(s2)
    watch = b.subscriber(s1, s2)
    async with asyncio.timeout(TIMEOUT):
        first = await a.publish(s1, "before")
        assert first == 1
        # node-a's lease expires (it stops renewing), node-b takes s1 only.
        await a.ownership.drain()
        taken = await b.ownership.take_over("node-a", limit=1)
        assert list(taken) == [s1]
        b.store.hold(s1, taken[s1])
        # node-a still believes it owns both: its commit of s1 is refused, the rest commits.
        stale = a.publish(s1, "stale")
        kept = a.publish(s2, "kept")
        assert await kept == 2
        await until(lambda: _ready(bool(a.lost)))
        # The new owner continues the numbering.
        assert await b.publish(s1, "new owner") == 3
        await until(lambda: _ready(len(watch.envelopes()) >= 3))
    assert not stale.done()  # never committed, so never delivered nor numbered
    assert a.lost == [frozenset({s1})]
    assert a.store.refused == 1
    assert s1 not in a.store.held
    titles = [(e["serverSeq"], e["channel"], e["action"]["title"]) for e in watch.envelopes()]
    assert titles == [(1, s1, "before"), (2, s2, "kept"), (3, s1, "new owner")]
    # node-a's further writes for s1 are dropped before reaching the database.
    again = a.publish(s1, "dropped")
    assert await a.publish(s2, "still mine") == 4
    assert not again.done()
    stored = await query(url, "SELECT count(*) FROM log WHERE channel = $1", s1)
    assert stored[0][0] == 2


async def test_a_lost_record_is_read_back_from_the_log(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    cluster = new_cluster_name()
    a = await start_node(stack, url, cluster, "node-a")
    b = await start_node(stack, url, cluster, "node-b")
    s1 = "ahp-session:/one"
    await a.own(s1)
    watch = b.subscriber(s1)
    # node-a's next record never reaches the bus (its publisher is stopped).
    await a.feed.publisher.aclose()
    async with asyncio.timeout(TIMEOUT):
        numbers = [await a.publish(s1, f"t{k}") for k in range(5)]
        await until(lambda: _ready(len(watch.envelopes()) >= 5))
    assert [e["serverSeq"] for e in watch.envelopes()] == numbers == [1, 2, 3, 4, 5]
    assert b.feed.reader.stats.repaired + b.feed.reader.stats.polls >= 1


async def test_a_snapshot_takes_the_number_of_its_channels_last_envelope(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    cluster = new_cluster_name()
    a = await start_node(stack, url, cluster, "node-a")
    s1 = "ahp-session:/one"
    await a.own(s1)
    a.store.put_channel(s1, "session", None, "2026-12-06T00:00:00Z", b"{}")
    async with asyncio.timeout(TIMEOUT):
        pending = [a.publish(s1, f"t{k}") for k in range(3)]
        a.store.put_snapshot(s1, 0, b'{"title":"t2"}', 0)
        numbers = [await p for p in pending]
        await a.store.flush()
    rows = await query(url, "SELECT seq FROM snapshots WHERE channel = $1", s1)
    assert rows[0][0] == numbers[-1] == 3
    loaded = await a.store.load(s1, retained_turns=0)
    assert loaded is not None
    assert loaded.snapshot_seq == 3


async def test_the_two_numberings_never_share_a_database(url: str) -> None:
    sharded = ShardedStore(url, "node-a")
    await sharded.start()
    await sharded.close()
    with pytest.raises(StoreError, match="sharded"):
        await PostgresStore(url).start()


async def test_a_sharded_store_refuses_a_log_numbered_the_other_way(url: str) -> None:
    single = PostgresStore(url)
    await single.start()
    await single.flush()
    done: list[int] = []
    single.append_envelope(1, "ahp-session:/x", 0.0, b'{"serverSeq":1}', done.append, 1)
    await single.flush()
    await single.close()
    with pytest.raises(StoreError, match="single-primary"):
        await ShardedStore(url, "node-a").start()


async def _ready(value: bool) -> bool:
    return value

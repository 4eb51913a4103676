"""The sharded store's log compaction (store/sharded.py) on the real PostgreSQL.

A snapshot deletes its channel's log up to the previous snapshot, but never a
row a live node may still read to fill a gap in the feed: nothing above the
lowest delivered watermark the live nodes report with their leases
(``cluster_nodes.delivered``), unless that node is more than ``retention``
numbers behind. Nodes are :class:`Ownership` rows; assertions are on the log
rows left, the channel's ``log_floor`` and what a :class:`LogReader` reads.
(Commits, fencing and delivery: tests/transport/test_node_feed.py.)
"""

from __future__ import annotations

import contextlib

from ahp_server.store.ownership import Load, LogReader, Ownership
from ahp_server.store.sharded import ShardedStore
from tests.postgres import query

S1 = "ahp-session:/one"


async def node(stack: contextlib.AsyncExitStack, url: str, name: str) -> Ownership:
    ownership = Ownership(url, name, ttl=3600.0)
    await ownership.open()
    stack.push_async_callback(ownership.close)
    await ownership.join()
    return ownership


async def owner(
    stack: contextlib.AsyncExitStack, url: str, *, retention: int = 1_000
) -> tuple[ShardedStore, Ownership]:
    store = ShardedStore(url, "node-a", retention=retention)
    await store.start()
    stack.push_async_callback(store.close)
    ownership = await node(stack, url, "node-a")
    epoch = await ownership.claim(S1)
    assert epoch == 1
    store.hold(S1, epoch)
    store.put_channel(S1, "session", None, "2026-12-06T00:00:00Z", b"{}")
    return store, ownership


async def write(store: ShardedStore, count: int) -> list[int]:
    """``count`` envelopes on S1, one commit (one log row) each: their numbers."""
    numbers: list[int] = []
    for k in range(count):
        store.append_unnumbered(S1, 0.0, b'{"k":%d}' % k, lambda seq: numbers.append(seq))
        await store.flush()
    return numbers


async def snapshot(store: ShardedStore) -> None:
    store.put_snapshot(S1, 0, b"{}", 0)
    await store.flush()


async def rows(url: str) -> list[int]:
    return [int(r[0]) for r in await query(url, "SELECT last_seq FROM log ORDER BY first_seq")]


async def floor(url: str) -> int:
    return int((await query(url, "SELECT log_floor FROM channels WHERE uri = $1", S1))[0][0])


async def test_a_snapshot_keeps_the_rows_a_lagging_live_node_may_still_read(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    store, a = await owner(stack, url)
    behind = await node(stack, url, "node-b")
    assert await write(store, 4) == [1, 2, 3, 4]
    await snapshot(store)  # the first snapshot (at 4): nothing deleted
    assert await write(store, 4) == [5, 6, 7, 8]
    await a.renew(Load(delivered=8))
    await behind.renew(Load(delivered=2))  # node-b has delivered up to 2
    await snapshot(store)  # the previous snapshot is at 4: node-b holds it at 2
    assert await rows(url) == [3, 4, 5, 6, 7, 8]
    assert await floor(url) == 2
    reader = LogReader(url)
    stack.push_async_callback(reader.close)
    assert sorted(await reader.read(3, 8)) == [3, 4, 5, 6, 7, 8]
    # node-b caught up: the next snapshot deletes up to the previous one (at 8).
    await behind.renew(Load(delivered=8))
    await snapshot(store)
    assert await rows(url) == []
    assert await floor(url) == 8


async def test_a_drained_node_and_one_too_far_behind_hold_nothing_back(
    url: str, stack: contextlib.AsyncExitStack
) -> None:
    store, a = await owner(stack, url, retention=3)
    stuck = await node(stack, url, "node-stuck")
    await write(store, 4)
    await snapshot(store)
    await write(store, 4)
    await a.renew(Load(delivered=8))
    await stuck.renew(Load(delivered=0))
    # node-stuck is 8 numbers behind the counter, more than the retention of 3:
    # the log is deleted up to 8 - 3 = 5, capped by the previous snapshot (4).
    await snapshot(store)
    assert await rows(url) == [5, 6, 7, 8]
    assert await floor(url) == 4
    await write(store, 2)  # 9, 10
    await stuck.drain()  # node-stuck stops: no longer a live node
    await snapshot(store)  # the previous snapshot is at 8; only node-a (at 8) is live
    assert await rows(url) == [9, 10]
    assert await floor(url) == 8

"""The sharded feed (transport/feed.py) on the real NATS and PostgreSQL.

Owners are :class:`~ahp_server.store.ownership.Ownership` nodes that claim
their sessions and commit batches with ``commit_batch`` (the fenced, numbering
statement) in a fresh schema (tests/postgres.py), then publish them with a
:class:`FeedPublisher`; readers are :class:`FeedReader` on connections of
their own to the machine's NATS (tests/cluster/helpers.py), each test its
own cluster name. Every wait is bounded by ``TIMEOUT``; the assertions are on
what was delivered (numbers, order, bytes) and on counts, never on times.
docs/scale-out.md "Sharded mode (design)".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import nats
import pytest

from ahp_server.store.ownership import LogReader, Ownership, batch_segments, commit_batch
from ahp_server.transport.feed import FeedPublisher, FeedReader, feed_subject
from ahp_server.transport.feed_format import encode_record
from ahp_server.transport.relay_format import Signer
from tests.cluster.helpers import nats_or_skip, new_cluster_name
from tests.postgres import query, store_schema, until

TIMEOUT = 20.0
SECRET = b"feed-test-secret-7c1d"
#: A port nothing listens on: PostgreSQL "unreachable" for a reader's repairs.
NOWHERE = "postgres://postgres@127.0.0.1:1/test"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    """A fresh schema with the store's tables (``meta``, ``log``)."""
    async with store_schema() as schema_url:
        yield schema_url


@pytest.fixture
def cluster() -> str:
    return new_cluster_name()


@pytest.fixture
def signer(cluster: str) -> Signer:
    return Signer(SECRET, cluster)


async def bus(stack: contextlib.AsyncExitStack) -> Any:
    nc = await nats.connect(nats_or_skip(), connect_timeout=TIMEOUT, allow_reconnect=False)
    stack.push_async_callback(nc.close)
    return nc


@dataclass
class Owner:
    """A session owner: its sessions claimed, its commits, its publisher."""

    name: str
    conn: asyncpg.Connection
    held: dict[str, int]
    publisher: FeedPublisher
    #: Every number it committed, and the envelope stored under it.
    committed: dict[int, bytes] = field(default_factory=dict)
    batches: int = 0

    async def commit(self, size: int, publish: bool = True) -> tuple[int, int]:
        """One batch of ``size`` envelopes round-robin over its sessions; its numbers."""
        sessions = list(self.held)
        batch = []
        for k in range(size):
            session = sessions[k % len(sessions)]
            envelope = json.dumps(
                {"channel": session, "action": {"b": self.batches, "k": k, "by": self.name}},
                separators=(",", ":"),
            ).encode()
            batch.append((session, 1000.5 + k, envelope))
        self.batches += 1
        base = await commit_batch(self.conn, self.name, self.held, size, batch_segments(batch))
        envelopes = [envelope for _, _, envelope in batch]
        for k, envelope in enumerate(envelopes):
            self.committed[base + 1 + k] = envelope
        if publish:
            self.publisher.publish(base + 1, envelopes)
        return base + 1, base + size


async def owner(
    stack: contextlib.AsyncExitStack, url: str, name: str, cluster: str, signer: Signer
) -> Owner:
    node = Ownership(url, name, ttl=30.0)
    await node.open()
    stack.push_async_callback(node.close)
    await node.join()
    for k in range(3):
        assert await node.claim(f"ahp-session:/{name}-{k}") == 1
    conn = await asyncpg.connect(url, timeout=5)
    stack.push_async_callback(conn.close)
    publisher = FeedPublisher(await bus(stack), cluster, signer)
    stack.push_async_callback(publisher.aclose)
    return Owner(name, conn, await node.held(), publisher)


@dataclass
class Sink:
    """What a reader delivered, in the order it did."""

    seen: list[tuple[int, bytes]] = field(default_factory=list)
    stalls: int = 0

    def deliver(self, n: int, envelope: bytes) -> None:
        self.seen.append((n, envelope))

    def stalled(self) -> None:
        self.stalls += 1

    async def reaches(self, last: int) -> None:
        async def done() -> bool:
            return bool(self.seen) and self.seen[-1][0] >= last

        await asyncio.wait_for(until(done), TIMEOUT)


async def reader(
    stack: contextlib.AsyncExitStack,
    url: str,
    cluster: str,
    signer: Signer,
    next_seq: int = 1,
    **options: Any,
) -> tuple[FeedReader, Sink]:
    sink = Sink()
    options = {"grace": 0.05, "retry": 0.2, "poll_interval": 0.1, "stall": 5.0, **options}
    nc = await bus(stack)
    one = FeedReader(
        nc,
        LogReader(url, timeout=2.0),
        cluster,
        signer,
        next_seq,
        sink.deliver,
        on_stall=sink.stalled,
        **options,
    )
    await one.start()
    stack.push_async_callback(one.aclose)
    await nc.flush()  # subscribed at the server before anything is published
    return one, sink


async def counter(url: str) -> int:
    return int((await query(url, "SELECT value FROM meta WHERE key = 'server_seq'"))[0][0])


def everything(*owners: Owner) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for one in owners:
        out.update(one.committed)
    return out


def assert_delivered(sink: Sink, committed: dict[int, bytes], first: int = 1) -> None:
    """Every committed number from ``first`` once, in order, byte for byte."""
    expected = [(n, committed[n]) for n in sorted(committed) if n >= first]
    assert [n for n, _ in sink.seen] == [n for n, _ in expected]
    assert sink.seen == expected


async def commit_many(one: Owner, sizes: list[int], drop: Callable[[int], bool]) -> None:
    for index, size in enumerate(sizes):
        await one.commit(size, publish=not drop(index))
        if index % 5 == 0:
            await asyncio.sleep(0)  # let the other owner's commits interleave


def never(_: int) -> bool:
    return False


# -- the tests ---------------------------------------------------------------------------------


async def two_owners_two_readers(
    url: str,
    stack: contextlib.AsyncExitStack,
    cluster: str,
    signer: Signer,
    sizes: list[int],
    drop: Callable[[int], bool],
) -> list[FeedReader]:
    """Owners a and b commit ``sizes`` concurrently (b in reverse), publishing all but
    the batches ``drop`` names; both readers deliver every number once, in order."""
    readers = [await reader(stack, url, cluster, signer) for _ in range(2)]
    a = await owner(stack, url, "node-a", cluster, signer)
    b = await owner(stack, url, "node-b", cluster, signer)
    await asyncio.wait_for(
        asyncio.gather(commit_many(a, sizes, drop), commit_many(b, sizes[::-1], drop)), TIMEOUT
    )
    committed = everything(a, b)
    last = await counter(url)
    assert sorted(committed) == list(range(1, last + 1))
    assert last == 2 * sum(sizes)
    for _, sink in readers:
        await sink.reaches(last)
        assert_delivered(sink, committed)
    return [one for one, _ in readers]


async def test_two_owners_two_readers_every_number_once_in_order(
    url: str, stack: contextlib.AsyncExitStack, cluster: str, signer: Signer
) -> None:
    sizes = [1 + (i * 7) % 5 for i in range(40)]
    for one in await two_owners_two_readers(url, stack, cluster, signer, sizes, never):
        assert one.stats.records > 0
        assert one.stats.rejected == 0


async def test_lost_records_are_repaired_from_the_log(
    url: str, stack: contextlib.AsyncExitStack, cluster: str, signer: Signer
) -> None:
    def every_7th(index: int) -> bool:
        return index % 7 == 3

    sizes = [1 + i % 4 for i in range(42)]
    for one in await two_owners_two_readers(url, stack, cluster, signer, sizes, every_7th):
        assert one.stats.repaired > 0
        assert one.stats.repairs > 0


async def test_a_lost_last_record_is_found_by_the_counter_poll(
    url: str, stack: contextlib.AsyncExitStack, cluster: str, signer: Signer
) -> None:
    one, sink = await reader(stack, url, cluster, signer)
    a = await owner(stack, url, "node-a", cluster, signer)
    await a.commit(3)
    await a.commit(2)
    _, last = await a.commit(4, publish=False)  # the owner died between commit and publish
    await sink.reaches(last)
    assert_delivered(sink, a.committed)
    assert one.stats.repaired >= 4
    assert one.stats.polls > 0


async def test_a_reader_started_mid_stream_delivers_from_its_next_seq(
    url: str, stack: contextlib.AsyncExitStack, cluster: str, signer: Signer
) -> None:
    a = await owner(stack, url, "node-a", cluster, signer)
    for size in (3, 4, 5, 2):
        await a.commit(size)  # nobody listens: these records are gone
    start = 9
    _, sink = await reader(stack, url, cluster, signer, next_seq=start)
    for size in (2, 3, 1):
        await a.commit(size)
    last = await counter(url)
    await sink.reaches(last)
    assert_delivered(sink, a.committed, first=start)
    assert sink.seen[0][0] == start


async def test_forged_and_garbage_messages_are_dropped_and_the_reader_goes_on(
    url: str, stack: contextlib.AsyncExitStack, cluster: str, signer: Signer
) -> None:
    one, sink = await reader(stack, url, cluster, signer, grace=5.0, poll_interval=30.0)
    subject = feed_subject(cluster)
    forged = encode_record(1, [b'{"channel":"forged"}'] * 3)
    forger = await bus(stack)
    await forger.publish(subject, forged)  # unsigned
    await forger.publish(subject, Signer(b"another secret", cluster).seal(subject, forged))
    await forger.publish(subject, Signer(SECRET, "other-cluster").seal(subject, forged))
    altered = bytearray(signer.seal(subject, forged))
    altered[-2] ^= 1
    await forger.publish(subject, bytes(altered))
    await forger.publish(subject, signer.seal(subject, b"\x93garbage"))  # signed, not a record
    await forger.publish(subject, b"\x00")
    await forger.flush()

    async def all_rejected() -> bool:
        return one.stats.rejected == 6

    await asyncio.wait_for(until(all_rejected), TIMEOUT)
    a = await owner(stack, url, "node-a", cluster, signer)
    for size in (3, 1, 2):
        await a.commit(size)
    await sink.reaches(6)
    assert_delivered(sink, a.committed)
    assert one.stats.repaired == 0  # every number came from a genuine record


async def test_without_postgresql_delivery_holds_at_the_gap_and_stalls_once(
    url: str, stack: contextlib.AsyncExitStack, cluster: str, signer: Signer
) -> None:
    one, sink = await reader(stack, NOWHERE, cluster, signer, retry=0.05, stall=0.3)
    a = await owner(stack, url, "node-a", cluster, signer)
    await a.commit(2)
    _, before_gap = await a.commit(3)
    await a.commit(2, publish=False)  # lost: only the log has it, and the log is unreachable
    await a.commit(4)
    _, last = await a.commit(1)

    async def stalled_and_retried() -> bool:
        return sink.stalls == 1 and one.stats.repair_failures >= 5

    await asyncio.wait_for(until(stalled_and_retried), TIMEOUT)
    failures = one.stats.repair_failures

    async def retried_again() -> bool:
        return one.stats.repair_failures >= failures + 5

    await asyncio.wait_for(until(retried_again), TIMEOUT)
    assert sink.stalls == 1
    assert one.stats.stalls == 1
    assert_delivered(sink, {n: e for n, e in a.committed.items() if n <= before_gap})
    assert one.next_seq == before_gap + 1
    assert one.order.held == 5
    assert one.order.horizon == last

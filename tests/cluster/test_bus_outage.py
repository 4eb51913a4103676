"""Cluster mode through a NATS outage: the bus dies and comes back (docs/scale-out.md).

The cluster runs on a private ``nats-server`` (a child process of the test, on
a free port with its own JetStream store directory, a user and password
required), never the machine's: the test kills it with SIGKILL and starts it
again on the same port and store.
While the bus is gone, the primary serves its own clients (it needs only
PostgreSQL) and keeps its lease; an edge closes its relayed clients with 1012
and refuses new ones with 503. Once the bus is back, nats-py reconnects by
itself, the edge hears the primary again and its clients resume.

It runs alone and with the machine's other core kept busy (``load``): every
wait is for a condition, bounded generously, never a fixed time — but one: the
primary must keep its lease for longer than its TTL without the bus.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus

from ahp_server.client import AhpClient
from ahp_server.protocol.types import ChatState
from ahp_server.transport.relay_format import Signer, Subjects
from tests.cluster.helpers import (
    CLUSTER_SECRET,
    HEARTBEAT,
    LEASE_TTL,
    Node,
    PrivateNats,
    cluster_config,
    new_cluster_name,
    wait_for_primary,
)
from tests.load import BusyCore, busy_core
from tests.postgres import postgres_schema, query

ROOT = "ahp-root://"
TIMEOUT = 30.0


@pytest.fixture
def private_nats(tmp_path: Path) -> Iterator[PrivateNats]:
    """A NATS server of this test alone (authenticated, as the session's): it is killed."""
    server = PrivateNats(tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(params=["idle", "busy"])
def load(request: pytest.FixtureRequest) -> Iterator[BusyCore | None]:
    """The test alone, or with the machine's other core kept busy (``yes``)."""
    if request.param == "idle":
        yield None
        return
    with busy_core() as busy:
        yield busy


async def http_status(port: int, path: str) -> int:
    """The status of ``GET path`` on a node (a plain HTTP request, bounded)."""
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
            writer.write(request.encode())
            await writer.drain()
            status_line = await reader.readline()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    return int(status_line.split()[1])


async def wait_status(node: Node, path: str, status: int, within: float = TIMEOUT) -> None:
    async with asyncio.timeout(within):
        while (got := await http_status(node.port, path)) != status:
            assert alive(node), (
                f"node {node.name} exited waiting for {path} {status} (last {got}):\n"
                + "".join(node.lines[-30:])
            )
            await asyncio.sleep(0.05)


async def reconnect(client: AhpClient, url: str) -> str:
    """Reconnect, retrying while the node answers 503 (not ready yet)."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            try:
                return await client.reconnect(url, timeout=TIMEOUT)
            except InvalidStatus as error:
                if error.response.status_code != 503:
                    raise
                await asyncio.sleep(0.1)


async def announce_primary(
    server: PrivateNats, cluster: str, node: str, epoch: int, *, secret: str | None
) -> None:
    """Write ``cluster``'s primary record in JetStream, as a primary taking over does:
    signed with ``secret`` (None: unsigned, a forgery by a client of NATS)."""
    nc = await server.client()
    try:
        record = await nc.jetstream().key_value("ahp")
        value = f"{node} {epoch}".encode()
        if secret is not None:
            value = Signer(secret.encode(), cluster).seal(Subjects(cluster).record, value)
        await record.put(f"{cluster}.primary", value)
    finally:
        await nc.close()


def alive(node: Node) -> bool:
    return node.process is not None and node.process.returncode is None


def turns(client: AhpClient, chat: str) -> int:
    return len(client.confirmed(chat, ChatState).turns)


async def test_cluster_survives_a_bus_outage_and_recovers(
    tmp_path: Path, private_nats: PrivateNats, load: BusyCore | None
) -> None:
    """kill -9 NATS: the edge's client is closed with 1012, the edge is not ready (503),
    the primary serves its own clients and keeps its lease. NATS back on the same port and
    store: the edge is ready again, its client resumes, and a turn through it is seen by all."""
    config = cluster_config(tmp_path, lease_ttl=LEASE_TTL, heartbeat=HEARTBEAT)
    cluster = new_cluster_name()
    async with postgres_schema() as store:
        nodes = [
            Node(f"n{i}", store=store, bus=private_nats.url, cluster=cluster, config=config)
            for i in range(2)
        ]
        a: AhpClient | None = None
        b: AhpClient | None = None
        try:
            for node in nodes:
                await node.start()
            primary = await wait_for_primary(nodes)
            edge = next(n for n in nodes if n is not primary)
            await wait_status(edge, "/readyz", 200)

            # 1. A on the primary, B through the edge, both on a chat with a completed turn.
            a = await AhpClient.connect(primary.url, subscriptions=[ROOT])
            seen_a: list[tuple[str, int]] = []
            a.on_envelope(lambda e: seen_a.append((e.channel, e.server_seq)))
            chat = await a.open_chat("echo", timeout=TIMEOUT)
            assert "one" in await a.ask(chat, "one", timeout=TIMEOUT)
            b = await AhpClient.connect(edge.url, subscriptions=[ROOT])
            seen_b: list[tuple[str, int]] = []
            b.on_envelope(lambda e: seen_b.append((e.channel, e.server_seq)))
            await b.subscribe(chat, timeout=TIMEOUT)
            await b.wait_for(lambda c: turns(c, chat) == 1, timeout=TIMEOUT)
            await b.ping(timeout=TIMEOUT)

            # 2. The bus dies.
            await asyncio.to_thread(private_nats.kill)
            killed_at = time.monotonic()
            # B is closed with 1012 (the edge stops hearing the primary).
            await b.wait_closed(timeout=TIMEOUT)
            closed_after = time.monotonic() - killed_at
            assert b.close_code == 1012, (b.close_code, b.close_reason)
            # The edge is not ready, and its door refuses new clients with 503.
            await wait_status(edge, "/readyz", 503)
            with pytest.raises(InvalidStatus) as refused:
                await AhpClient.connect(edge.url, subscriptions=[ROOT], timeout=TIMEOUT)
            assert refused.value.response.status_code == 503
            # The primary serves its own client: a whole turn, no bus needed.
            assert "two" in await a.ask(chat, "two", timeout=TIMEOUT)
            assert await http_status(primary.port, "/readyz") == 200
            # Longer than the lease TTL without the bus: the primary keeps its lease
            # (PostgreSQL is fine), does not stop, and the edge does not take over.
            await asyncio.sleep(max(0.0, killed_at + 1.5 * LEASE_TTL - time.monotonic()))
            assert alive(primary)
            assert not primary.has("cluster node failing")
            assert not edge.has("primary ready")
            assert alive(edge)
            lease = await query(store, "SELECT node, epoch FROM cluster_lease")
            assert [(r["node"], r["epoch"]) for r in lease] == [(primary.name, 1)]
            assert "three" in await a.ask(chat, "three", timeout=TIMEOUT)
            assert await http_status(edge.port, "/readyz") == 503

            # 3. The bus comes back on the same port, with the same store.
            await asyncio.to_thread(private_nats.start)
            restarted_at = time.monotonic()
            await wait_status(edge, "/readyz", 200)
            ready_after = time.monotonic() - restarted_at
            print(
                f"\nbus outage: edge closed its client {closed_after:.2f} s after the kill; "
                f"edge ready {ready_after:.2f} s after the restart"
            )
            path = await reconnect(b, edge.url)
            assert path in ("replay", "snapshot"), path
            await b.wait_for(lambda c: turns(c, chat) == 3, timeout=TIMEOUT)
            assert "four" in await b.ask(chat, "four", timeout=TIMEOUT)
            await a.wait_for(lambda c: turns(c, chat) == 4, timeout=TIMEOUT)
            assert [t.state for t in a.confirmed(chat, ChatState).turns] == ["complete"] * 4
            for name, seen in (("A", seen_a), ("B", seen_b)):
                numbers = [seq for _, seq in seen]
                assert numbers == sorted(set(numbers)), (
                    f"{name}: an envelope twice, or out of order"
                )
            # Both saw the chat's last envelope, and the relay still works both ways.
            await b.ping(timeout=TIMEOUT)
            last_a = [seq for channel, seq in seen_a if channel == chat][-1]
            assert last_a == [seq for channel, seq in seen_b if channel == chat][-1]
            print(f"A saw {len(seen_a)} envelopes, B {len(seen_b)}; last of the chat {last_a}")
            assert alive(primary)
            assert not primary.has("cluster node failing")

            # The edge watches the primary's record again (a new primary is known at
            # once, not a heartbeat later): a record of a later epoch is followed at
            # once — a signed one: a record written by a client of NATS without the
            # cluster secret is dropped. (Last: the edge then relays to that primary,
            # which is nobody.) Its new watch may still be waiting for JetStream to
            # answer: a record written before it would be seen only as the latest.
            await edge.wait_event("watching the primary's record again")
            await announce_primary(private_nats, cluster, "mallory", 3, secret=None)
            await edge.wait_event("unauthenticated bus message dropped")
            await announce_primary(private_nats, cluster, "elsewhere", 2, secret=CLUSTER_SECRET)
            await edge.wait_event("relaying to the primary", primary="elsewhere", epoch=2)
            assert not edge.has("relaying to the primary", primary="mallory")
            if load is not None:  # the load really ran beside it
                assert load.cpu_seconds > 1.0
        finally:
            for client in (a, b):
                if client is not None:
                    await client.close()
            for node in nodes:
                await node.close()

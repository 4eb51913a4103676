"""Sharded mode, one node cut off from the bus and back (docs/scale-out.md "Failure cases").

The partition is made on loopback: node-a reaches the tests' ``nats-server``
through a TCP relay of this test (:class:`BusCut`), which the test severs —
every connection through it aborted, new ones closed at once, so nats-py's
reconnection attempts fail — and later heals. node-b reaches the bus directly.
Both run in this process on the real PostgreSQL; clients are :class:`AhpClient`
over real WebSockets. Every wait is bounded by ``TIMEOUT``; what is asserted is
owner rows and epochs, close codes, turn states, words and numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from ahp_server.client import AhpClient
from ahp_server.client.errors import ClientError, RemoteError
from ahp_server.cluster.sharded import ShardedNode
from ahp_server.protocol.types import ChatState
from tests.cluster.helpers import PrivateNats, new_cluster_name
from tests.cluster.test_routing import increasing
from tests.cluster.test_sharded import answer, owners, running, session_of, settings
from tests.postgres import until

TIMEOUT = 30.0


class BusCut:
    """A TCP relay to the bus that a test severs and heals: one node's partition."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._server: asyncio.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.severed = False
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def sever(self) -> None:
        """Every connection through the relay aborted; new ones closed as they come."""
        self.severed = True
        for down, up in list(self._pairs):
            down.transport.abort()
            up.transport.abort()

    def heal(self) -> None:
        self.severed = False

    async def aclose(self) -> None:
        self.sever()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.severed:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            self._pairs.discard(pair)
            writer.transport.abort()
            up_writer.transport.abort()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()


async def _true(value: bool) -> bool:
    return value


async def test_a_node_cut_off_from_the_bus_loses_its_sessions_and_serves_again_when_back(
    url: str, nats_bus: PrivateNats
) -> None:
    """node-a streams a turn in its session (watched by a client of node-b) when its bus
    is cut. It keeps committing on PostgreSQL but, no longer hearing its own heartbeat,
    stops renewing its lease; node-b takes the session over at epoch 2; node-a's next
    commit for it is fenced, and node-a drops it and closes its client (1012). node-b's
    client, its route to node-a failed (1012), resumes on node-b by replay: what it had
    seen is kept, every number once in order, the turn ended as an error, and the
    session answers there. The bus back, node-a renews again and owns and serves the
    sessions made through it, driven from node-b."""
    name = new_cluster_name()
    cut = BusCut(int(nats_bus.url.rsplit(":", 1)[1]))
    await cut.start()
    try:
        async with (
            _through(cut, url, nats_bus, name, "node-a") as a,
            running(url, nats_bus, name, "node-b") as b,
            AhpClient.connect(a.urls[0]) as on_a,
            AhpClient.connect(b.urls[0]) as on_b,
        ):
            chat = await on_a.open_chat("echo", timeout=TIMEOUT)  # node-a's (placement local)
            session = await session_of(url, chat)
            assert (await owners(url))[session] == ("node-a", 1)
            await on_b.subscribe(chat, timeout=TIMEOUT)  # through a route to node-a
            words = " ".join(f"w{i}" for i in range(2000))
            await on_a.send_message(chat, f"/slow 20 {words}", timeout=TIMEOUT)
            await on_b.wait_for(lambda c: "w10" in answer(c, chat), timeout=TIMEOUT)

            # A running cluster: each node has heard the other (one never heard is taken for
            # one starting, not for one gone silent).
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _true("node-a" in _peers(b) and "node-b" in _peers(a)))
            cut.sever()
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _taken(url, session))
            assert a.membership.withheld >= 1  # it stopped renewing: it did not hear itself
            await on_a.wait_closed(timeout=TIMEOUT)  # its next commit for the session fenced
            assert on_a.close_code == 1012
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _true(chat not in a.host.chats))
            assert session not in a.host.sessions

            await on_b.wait_closed(timeout=TIMEOUT)  # its route to the silent node failed
            assert on_b.close_code == 1012
            seen = answer(on_b, chat)
            assert "w10" in seen
            await on_b.reconnect(b.urls[0], timeout=TIMEOUT)
            await on_b.wait_for(
                lambda c: [t.state for t in c.view(chat, ChatState).turns] == ["error"],
                timeout=TIMEOUT,
            )
            assert answer(on_b, chat).startswith(seen)  # nothing it saw was lost
            assert increasing(on_b)
            assert "again" in await on_b.ask(chat, "/slow 1 once again", timeout=TIMEOUT)
            assert chat in b.host.chats

            cut.heal()
            renewed = a.membership.renewals
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _true(a.membership.renewals > renewed))
            async with AhpClient.connect(a.urls[0]) as back:
                fresh = await back.open_chat("echo", timeout=TIMEOUT)
                assert (await owners(url))[await session_of(url, fresh)] == ("node-a", 1)
                await on_b.subscribe(fresh, timeout=TIMEOUT)
                assert "back" in await on_b.ask(fresh, "/slow 1 back on the bus", timeout=TIMEOUT)
            assert fresh in a.host.chats
            assert fresh not in b.host.chats
            assert increasing(on_b)
    finally:
        await cut.aclose()


async def test_a_node_cut_off_before_any_other_heard_it_is_taken_for_silent_not_waited_on(
    url: str, nats_bus: PrivateNats
) -> None:
    """node-a makes a session and is cut off the bus; node-b starts after that, so it never
    hears node-a, whose lease in PostgreSQL still runs (60 s). Once node-b has listened
    for three heartbeats and was first asked about node-a three heartbeats before, a
    client of node-b asking for node-a's session is told at once that node-a is not
    answering (-32603), while node-a still owns it. Before, node-b took a node never
    heard for one starting: every request waited for a route that could not open, until
    the lease ran out (the loop below would time out)."""
    name = new_cluster_name()
    cut = BusCut(int(nats_bus.url.rsplit(":", 1)[1]))
    await cut.start()
    try:
        async with (
            _through(cut, url, nats_bus, name, "node-a", lease_ttl=60.0) as a,
            AhpClient.connect(a.urls[0]) as on_a,
        ):
            chat = await on_a.open_chat("echo", timeout=TIMEOUT)
            session = await session_of(url, chat)
            cut.sever()
            async with running(url, nats_bus, name, "node-b", lease_ttl=60.0) as b:
                refused: RemoteError | None = None
                async with asyncio.timeout(TIMEOUT):
                    while refused is None:
                        async with AhpClient.connect(b.urls[0]) as on_b:
                            try:
                                await on_b.subscribe(chat, timeout=TIMEOUT)
                            except RemoteError as error:
                                if "not answering" in error.message:
                                    refused = error
                            except ClientError:
                                pass  # its route to node-a failed: the client was closed
                assert refused.code == -32603
                assert session in refused.message
                assert "node-a" not in _peers(b)  # never heard
                assert (await owners(url))[session] == ("node-a", 1)  # its lease still runs
    finally:
        await cut.aclose()


@contextlib.asynccontextmanager
async def _through(
    cut: BusCut, url: str, bus: PrivateNats, cluster: str, node: str, **changes: Any
) -> AsyncIterator[ShardedNode]:
    """A started sharded node reaching the bus through ``cut`` (``changes``: other
    settings), aborted at the end."""
    started = ShardedNode(
        replace(settings(url, bus, cluster, node), bus=f"nats://127.0.0.1:{cut.port}", **changes)
    )
    await started.start()
    try:
        yield started
    finally:
        await started.abort()


def _peers(node: ShardedNode) -> list[str]:
    return [] if node.heartbeat is None else list(node.heartbeat.peers)


async def _taken(url: str, session: str) -> bool:
    return (await owners(url)).get(session) == ("node-b", 2)

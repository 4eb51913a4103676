"""A sharded node stopped gracefully is gone for the others at once (cluster/sharded.py).

Sharded nodes in this process (``ShardedNode``) on the real PostgreSQL and the
cluster tests' authenticated ``nats-server``; clients are :class:`AhpClient`
over real WebSockets. The lease is long (``LEASE``, 60 s) and every wait after
a stop is bounded by ``SOON`` (5 s), far below it: what happens within that
bound cannot be the lease running out or a heartbeat falling silent — only
the stopping node's announcement (its last heartbeat, ``leaving``) explains
it. docs/scale-out.md "A graceful stop announced".
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest

from ahp_server.client import AhpClient, RemoteError
from ahp_server.cluster.sharded import ShardedNode
from ahp_server.protocol.types import (
    CreateTerminalParams,
    SessionState,
    SessionStatus,
    SessionSummary,
    TerminalSessionClaim,
    TerminalState,
)
from ahp_server.store.sharded import ROOT
from ahp_server.transport.node_heartbeat import heartbeat_subject
from ahp_server.transport.relay_format import Signer
from ahp_server.workspace.paths import file_uri
from tests.cluster.helpers import PrivateNats, new_cluster_name
from tests.cluster.test_routing import terminals
from tests.cluster.test_sharded import owners, session_of, settings
from tests.postgres import until

#: Longer than any test here: a node's sessions and terminals are not given up by the
#: others for its lease running out, nor for its heartbeat being silent that long.
LEASE = 60.0
#: What the others take to act on a node that said it leaves: far below ``LEASE``.
SOON = 5.0
#: What a start, a session or a terminal takes (machine speed, not the claim tested).
TIMEOUT = 30.0


@pytest.fixture
def name() -> str:
    return new_cluster_name()


def _settings(url: str, bus: PrivateNats, cluster: str, node: str, tmp_path: Path) -> Any:
    return replace(
        settings(url, bus, cluster, node),
        lease_ttl=LEASE,
        terminal_shell=("/bin/sh",),
        workspace_roots=(str(tmp_path),),
    )


@contextlib.asynccontextmanager
async def _nodes(
    url: str, bus: PrivateNats, cluster: str, tmp_path: Path, *names: str
) -> AsyncIterator[list[ShardedNode]]:
    """Started nodes (``names``, in that order: the first owns the root), aborted at the
    end (a node stopped already is left as it is)."""
    nodes: list[ShardedNode] = []
    try:
        for node in names:
            nodes.append(ShardedNode(_settings(url, bus, cluster, node, tmp_path)))
            await nodes[-1].start()
        yield nodes
    finally:
        for started in nodes:
            if started.feed is not None and started._nc is not None:
                await started.abort()


async def _true(value: bool) -> bool:
    return value


async def _terminal_and_session(url: str, client: AhpClient) -> tuple[str, str]:
    """A new session made through ``client`` (on its node), and a terminal there claimed by
    its chat."""
    chat = await client.open_chat("echo", timeout=TIMEOUT)
    session = await session_of(url, chat)
    terminal = f"ahp-terminal:/{uuid.uuid4()}"
    claim = TerminalSessionClaim(session=session, chat=chat)
    await client.request(
        "createTerminal", CreateTerminalParams(channel=terminal, claim=claim), timeout=TIMEOUT
    )
    return terminal, session


async def _told(node: ShardedNode, terminal: str, owner: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _true(node.host.terminal_node(terminal) == owner))


async def _gone(nodes: list[ShardedNode], node: str) -> None:
    """Every one of ``nodes`` takes ``node`` for gone, within ``SOON``."""

    async def gone() -> bool:
        return all(n.routes is not None and not n.routes.alive(node) for n in nodes)

    async with asyncio.timeout(SOON):
        await until(gone)


async def _ended_with(client: AhpClient, terminal: str, node: str) -> None:
    """``client`` asking for ``terminal`` is told at once (within ``SOON``) that it ended
    with ``node``, and stays connected."""
    async with asyncio.timeout(SOON):
        with pytest.raises(RemoteError) as ended:
            await client.subscribe(terminal, timeout=SOON)
    assert ended.value.code == -32603
    assert node in str(ended.value)
    assert not client.closed


async def _bus(nats_bus: PrivateNats) -> Any:
    return await nats.connect(
        nats_bus.url, user=nats_bus.user, password=nats_bus.password, connect_timeout=TIMEOUT
    )


async def test_a_node_stopped_gracefully_is_gone_for_the_others_at_once(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """node-b stops gracefully with a 60 s lease. Within 5 s: a client of node-c routed to
    its session is closed with 1012; node-a's and node-c's
    clients are told its terminal ended with it (-32603 naming node-b), the root state
    (node-a's) lists it no more, placement's load no longer counts it, and its session is
    found on the survivor that took it over, at epoch 2, by a client of node-c.
    (Before, the terminal's request waited for a route to node-b and the client was
    closed with 1012; the session waited for the next takeover round, a third of the
    lease.)"""
    async with _nodes(url, nats_bus, name, tmp_path, "node-a", "node-b", "node-c") as nodes:
        a, b, c = nodes
        async with (
            AhpClient.connect(a.urls[0], subscriptions=[ROOT]) as on_a,
            AhpClient.connect(c.urls[0]) as on_c,
            AhpClient.connect(c.urls[0]) as routed,
        ):
            async with AhpClient.connect(b.urls[0]) as on_b:
                terminal, session = await _terminal_and_session(url, on_b)
            await routed.subscribe(session, timeout=TIMEOUT)  # a route to node-b
            await _told(a, terminal, "node-b")
            await _told(c, terminal, "node-b")
            await on_a.wait_for(lambda client: terminal in terminals(client), timeout=TIMEOUT)
            assert (await owners(url))[session] == ("node-b", 1)
            beats = c.heartbeat
            assert beats is not None
            async with asyncio.timeout(TIMEOUT):  # placement's load: node-b's beat heard
                await until(lambda: _true("node-b" in beats.live_peers(LEASE)))
            await b.stop()
            await _gone([a, c], "node-b")
            await routed.wait_closed(timeout=SOON)  # its route closed, as a dead node's
            assert routed.close_code == 1012
            await _ended_with(on_c, terminal, "node-b")
            await _ended_with(on_a, terminal, "node-b")
            await on_a.wait_for(lambda client: terminal not in terminals(client), timeout=SOON)
            assert "node-b" not in beats.live_peers(LEASE)
            async with asyncio.timeout(SOON):
                await until(lambda: _true(c.adopted + a.adopted >= 1))
            taker, epoch = (await owners(url))[session]
            assert (taker, epoch) in (("node-a", 2), ("node-c", 2))
            async with asyncio.timeout(SOON):
                snapshot = await on_c.subscribe(session, timeout=SOON)
            assert isinstance(snapshot, SessionState)
            holder = a if taker == "node-a" else c
            assert session in holder.host.sessions
            assert not on_c.closed


async def test_a_forged_leaving_beat_evicts_nobody(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """Leaving beats for node-b that are unsigned, or signed with another key, are dropped:
    node-a still routes node-b's terminal. node-b's own, when it stops, is not."""
    async with _nodes(url, nats_bus, name, tmp_path, "node-a", "node-b") as (a, b):
        async with AhpClient.connect(a.urls[0]) as on_a, AhpClient.connect(b.urls[0]) as on_b:
            terminal, _ = await _terminal_and_session(url, on_b)
            await _told(a, terminal, "node-b")
            assert a.heartbeat is not None
            subject = heartbeat_subject(name, "node-b")
            # What node-b's leaving beat says (JSON of a Beat), but not signed by the cluster.
            body = msgspec.json.encode({"node": "node-b", "n": 10**6, "leaving": True})
            dropped = a.heartbeat.dropped
            bus = await _bus(nats_bus)
            try:
                await bus.publish(subject, body)  # unsigned
                await bus.publish(
                    subject, Signer(b"not-the-cluster-secret", name).seal(subject, body)
                )
                await bus.flush()
            finally:
                await bus.close()
            async with asyncio.timeout(TIMEOUT):
                await until(
                    lambda: _true(a.heartbeat is not None and a.heartbeat.dropped >= dropped + 2)
                )
            assert a.routes is not None
            assert a.routes.alive("node-b")
            snapshot = await on_a.subscribe(terminal, timeout=TIMEOUT)  # routed to node-b
            assert isinstance(snapshot, TerminalState)
            await on_a.unsubscribe(terminal, timeout=TIMEOUT)
        await b.stop()
        await _gone([a], "node-b")
        async with AhpClient.connect(a.urls[0]) as again:
            await _ended_with(again, terminal, "node-b")


async def test_a_node_restarted_under_its_name_is_routed_to_again(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """node-b stops gracefully (gone for node-a at once), and starts again under the same
    name: its first beat undoes the leaving, and node-a's client reaches its new terminal
    and session through node-a. Its previous process's leaving beat, replayed on the bus,
    changes nothing."""
    async with _nodes(url, nats_bus, name, tmp_path, "node-a") as (a,):
        first = ShardedNode(_settings(url, nats_bus, name, "node-b", tmp_path))
        await first.start()
        bus = await _bus(nats_bus)
        beats: list[bytes] = []

        async def heard(msg: Any) -> None:
            beats.append(msg.data)

        try:
            await bus.subscribe(heartbeat_subject(name, "node-b"), cb=heard)
            await bus.flush()
            async with AhpClient.connect(first.urls[0]) as on_b:
                old_terminal, _ = await _terminal_and_session(url, on_b)
            await _told(a, old_terminal, "node-b")
            await first.stop()
            await _gone([a], "node-b")
            async with asyncio.timeout(SOON):
                await until(lambda: _true(any(b'"leaving":true' in beat for beat in beats)))
            leaving = next(beat for beat in beats if b'"leaving":true' in beat)
            second = ShardedNode(_settings(url, nats_bus, name, "node-b", tmp_path))
            await second.start()
            try:
                assert a.routes is not None
                routes = a.routes
                async with asyncio.timeout(SOON):
                    await until(lambda: _true(routes.alive("node-b")))
                async with (
                    AhpClient.connect(second.urls[0]) as on_b,
                    AhpClient.connect(a.urls[0]) as on_a,
                ):
                    terminal, session = await _terminal_and_session(url, on_b)
                    await _told(a, terminal, "node-b")
                    assert a.heartbeat is not None
                    dropped = a.heartbeat.dropped
                    await bus.publish(heartbeat_subject(name, "node-b"), leaving)  # replayed
                    await bus.flush()
                    async with asyncio.timeout(TIMEOUT):
                        await until(
                            lambda: _true(a.heartbeat is not None and a.heartbeat.dropped > dropped)
                        )
                    assert routes.alive("node-b")
                    snapshot = await on_a.subscribe(terminal, timeout=TIMEOUT)
                    assert isinstance(snapshot, TerminalState)
                    assert isinstance(await on_a.subscribe(session, timeout=TIMEOUT), SessionState)
                    assert session in second.host.sessions
                    assert session not in a.host.sessions  # routed, not loaded here
                    assert not on_a.closed
            finally:
                await second.abort()
        finally:
            await bus.close()


def _status_told(client: AhpClient, session: str) -> list[dict[str, Any]]:
    """The summary changes ``client`` was told about ``session`` (``root/sessionSummaryChanged``)
    that set its status, oldest first."""
    return [
        n.params["changes"]
        for n in list(client.notifications)
        if n.method == "root/sessionSummaryChanged"
        and n.params.get("session") == session
        and "status" in n.params.get("changes", {})
    ]


async def _listed(client: AhpClient, session: str) -> SessionSummary:
    listed = await client.list_sessions(timeout=TIMEOUT)
    return next(s for s in listed.items if s.resource == session)


async def test_a_session_only_a_dead_node_could_serve_is_listed_failed_until_it_is_back(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """docs/scale-out.md "Working directories": node-a (the root owner) serves a/, node-b
    serves b/. node-b's session in b/ cannot move when node-b stops: node-a's root
    subscriber is told it failed (status Error, its activity naming the directory and
    node-b) and ``listSessions`` on node-a says so; node-b started again under its name
    takes it back, and the session is told and listed as it was."""
    roots = {r: tmp_path / r for r in ("a", "b")}
    for root in roots.values():
        (root / "project").mkdir(parents=True)

    def node(name_: str, root: str) -> ShardedNode:
        configured = replace(
            _settings(url, nats_bus, name, name_, tmp_path), workspace_roots=(str(roots[root]),)
        )
        return ShardedNode(configured)

    a = node("node-a", "a")
    await a.start()
    b = node("node-b", "b")
    await b.start()
    again: ShardedNode | None = None
    directory = str(roots["b"] / "project")
    try:
        async with AhpClient.connect(a.urls[0], subscriptions=[ROOT]) as on_a:
            async with AhpClient.connect(b.urls[0]) as on_b:
                session = await on_b.create_session(
                    "echo", [file_uri(roots["b"] / "project")], timeout=TIMEOUT
                )
                async with asyncio.timeout(TIMEOUT):
                    await until(lambda: _true(session in a.host.session_index))
            assert (await owners(url))[session] == ("node-b", 1)
            before = await _listed(on_a, session)
            assert not before.status & SessionStatus.Error
            await b.stop()
            await on_a.wait_for(lambda c: bool(_status_told(c, session)), timeout=SOON)
            failed = _status_told(on_a, session)[-1]
            assert failed["status"] & SessionStatus.Error
            assert directory in failed["activity"]
            assert "node-b" in failed["activity"]
            listed = await _listed(on_a, session)
            assert listed.status & SessionStatus.Error
            assert listed.activity == failed["activity"]
            assert (await owners(url))[session] == ("node-b", 1)  # nobody could take it
            again = node("node-b", "b")
            await again.start()  # holds its session again, at epoch 2
            await on_a.wait_for(lambda c: len(_status_told(c, session)) >= 2, timeout=SOON)
            restored = _status_told(on_a, session)[-1]
            assert restored["status"] == before.status
            assert (await _listed(on_a, session)).status == before.status
            assert isinstance(await on_a.subscribe(session, timeout=TIMEOUT), SessionState)
    finally:
        for started in (a, b, again):
            if started is not None and started._nc is not None:
                await started.abort()

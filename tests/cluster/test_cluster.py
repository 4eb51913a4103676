"""Cluster mode over real processes: three nodes, one PostgreSQL, one NATS (docs/scale-out.md).

Each test starts three ``ahp-server`` processes sharing a fresh PostgreSQL
schema and their own cluster name on the tests' NATS server (authenticated:
the nodes have its user and password, and the cluster secret; conftest.py),
and drives them with the project's client over real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from msgspec import UnsetType
from websockets.exceptions import InvalidStatus

from ahp_server.client import AhpClient, RemoteError
from ahp_server.protocol.types import (
    ActionEnvelope,
    ChatDraftChangedAction,
    ChatState,
    CreateTerminalParams,
    Message,
    MessageOrigin,
    SessionState,
    TerminalClientClaim,
    TerminalInputAction,
)
from tests.cluster.helpers import (
    LEASE_TTL,
    Node,
    PrivateNats,
    cluster_config,
    multi_user,
    new_cluster_name,
    wait_for_primary,
    workspace_root,
)
from tests.e2e.helpers import comparable
from tests.postgres import postgres_schema, query
from tests.processes import alive

ROOT = "ahp-root://"
TIMEOUT = 30.0


@pytest.fixture
async def nodes(tmp_path: Path, nats_bus: PrivateNats) -> AsyncIterator[list[Node]]:
    async with three_nodes(nats_bus, tmp_path) as started:
        yield started


@contextlib.asynccontextmanager
async def three_nodes(
    bus: PrivateNats, tmp_path: Path, extra: str = "", grace: float = 30.0
) -> AsyncIterator[list[Node]]:
    """Three node processes on a fresh schema; ``extra``: more TOML for their config;
    ``grace``: ``server.active_client_grace``."""
    config = cluster_config(tmp_path, grace=grace, extra=extra)
    cluster = new_cluster_name()
    async with postgres_schema() as store:
        started = [
            Node(f"n{i}", store=store, bus=bus.url, cluster=cluster, config=config)
            for i in range(3)
        ]
        try:
            for node in started:
                await node.start()
            yield started
        finally:
            for node in started:
                await node.close()


def seqs(client: AhpClient) -> list[int]:
    return [e.server_seq for e in client.envelopes]


async def test_any_node_serves_and_every_client_sees_one_order(nodes: list[Node]) -> None:
    """One primary; a session made through an edge; all three nodes' clients agree."""
    primary = await wait_for_primary(nodes)
    edges = [n for n in nodes if n is not primary]
    assert all(not n.is_primary for n in edges)
    clients = [await AhpClient.connect(n.url, subscriptions=[ROOT]) for n in nodes]
    try:
        writer = clients[nodes.index(edges[0])]
        chat = await writer.open_chat("echo", timeout=TIMEOUT)
        for client in clients:
            if client is not writer:
                await client.subscribe(chat, timeout=TIMEOUT)
        answer = await writer.ask(chat, "/slow 5 one two three four five", timeout=TIMEOUT)
        assert "five" in answer
        await asyncio.gather(
            *(
                c.wait_for(lambda c: len(c.confirmed(chat, ChatState).turns) == 1, timeout=TIMEOUT)
                for c in clients
            )
        )
        states = [comparable(c.confirmed(chat, ChatState)) for c in clients]
        assert states[0] == states[1] == states[2]
        # Every client's envelopes of that chat come in one strictly increasing order,
        # and the three saw the same numbers for it.
        of_chat = [[e.server_seq for e in c.envelopes if e.channel == chat] for c in clients]
        for numbers in of_chat:
            assert numbers == sorted(set(numbers))
        assert of_chat[1][-1] == of_chat[0][-1] == of_chat[2][-1]
        # The sessions list is the same whichever node answers.
        listed = [await c.list_sessions(timeout=TIMEOUT) for c in clients]
        assert len({tuple(s.resource for s in r.items) for r in listed}) == 1
    finally:
        for client in clients:
            await client.close()


async def test_kill_primary_mid_stream_fails_over_with_nothing_lost(nodes: list[Node]) -> None:
    """kill -9 the primary while a turn streams: another node takes over in bounded time,
    the turn ends as an error, clients reconnect elsewhere and replay, no gap, no double."""
    primary = await wait_for_primary(nodes)
    edges = [n for n in nodes if n is not primary]
    watcher = await AhpClient.connect(edges[0].url, subscriptions=[ROOT])
    seen: list[ActionEnvelope] = []
    watcher.on_envelope(seen.append)
    try:
        chat = await watcher.open_chat("echo", timeout=TIMEOUT)
        words = " ".join(f"w{i}" for i in range(400))
        await watcher.send_message(chat, f"/slow 20 {words}", timeout=TIMEOUT)
        await watcher.wait_for(lambda c: "w20" in _streamed(c, chat), timeout=TIMEOUT)
        before = _streamed(watcher, chat)
        killed_at = time.monotonic()
        await primary.kill()
        survivors = edges
        new_primary = await wait_for_primary(survivors, within=TIMEOUT)
        took = time.monotonic() - killed_at
        # Bounded: the lease TTL plus a campaign interval, and recovery.
        assert took < LEASE_TTL + LEASE_TTL / 3 + 5.0, took
        await watcher.wait_closed(timeout=TIMEOUT)  # the edge closed it: 1012
        assert watcher.close_code == 1012
        other = next(n for n in survivors if n is not edges[0])
        path = await _reconnect(watcher, other.url)
        assert path in ("replay", "snapshot")
        await watcher.wait_for(
            lambda c: len(c.confirmed(chat, ChatState).turns) == 1, timeout=TIMEOUT
        )
        state = watcher.confirmed(chat, ChatState)
        assert len(state.turns) == 1
        turn = state.turns[0]
        assert turn.state == "error"
        kept = "".join(
            p.content for p in turn.response_parts if getattr(p, "kind", "") == "markdown"
        )
        assert kept.startswith(before)  # nothing the client saw was lost
        numbers = [e.server_seq for e in seen]
        assert numbers == sorted(set(numbers)), "an envelope twice, or out of order"
        # A fresh client on the third node sees the same state.
        fresh = await AhpClient.connect(new_primary.url, subscriptions=[chat])
        try:
            assert comparable(fresh.confirmed(chat, ChatState)) == comparable(state)
        finally:
            await fresh.close()
    finally:
        await watcher.close()


async def test_paused_primary_is_fenced_and_stops(nodes: list[Node]) -> None:
    """SIGSTOP the primary past its lease: another node takes over; resumed, the old one
    can commit nothing (fenced by the lease epoch) and exits non-zero."""
    primary = await wait_for_primary(nodes)
    edges = [n for n in nodes if n is not primary]
    client = await AhpClient.connect(primary.url, subscriptions=[ROOT])
    try:
        chat = await client.open_chat("echo", timeout=TIMEOUT)
        words = " ".join(f"w{i}" for i in range(400))
        await client.send_message(chat, f"/slow 20 {words}", timeout=TIMEOUT)
        await client.wait_for(lambda c: "w5" in _streamed(c, chat), timeout=TIMEOUT)
        primary.pause()
        try:
            new_primary = await wait_for_primary(edges, within=TIMEOUT)
        finally:
            primary.resume()
        code = await primary.exit_code(within=TIMEOUT)
        assert code != 0
        assert primary.has("cluster node failing")
        # Whatever the old primary streamed after the takeover never reached the
        # database: the new primary's state of the chat is the one every client gets.
        fresh = await AhpClient.connect(new_primary.url, subscriptions=[chat])
        try:
            await fresh.wait_for(
                lambda c: len(c.confirmed(chat, ChatState).turns) == 1, timeout=TIMEOUT
            )
            assert fresh.confirmed(chat, ChatState).turns[0].state == "error"
        finally:
            await fresh.close()
        # Nothing the old primary did after the takeover reached the database: had
        # it committed, its numbers would collide with the new primary's (both
        # count on from the same mark). Every serverSeq in the log is there once.
        rows = await query(nodes[0].store, "SELECT entries FROM log")
        numbers = [entry[0] for (entries,) in rows for entry in json.loads(bytes(entries))]
        assert numbers
        assert len(numbers) == len(set(numbers))
        mark = await query(nodes[0].store, "SELECT value FROM meta WHERE key = 'server_seq'")
        assert max(numbers) <= mark[0]["value"]
        epochs = await query(nodes[0].store, "SELECT node, epoch FROM cluster_lease")
        assert epochs[0]["node"] == new_primary.name
        assert epochs[0]["epoch"] == 2
    finally:
        await client.close()


async def test_server_seq_is_one_sequence_across_failovers(nodes: list[Node]) -> None:
    """Numbers never go back: after two failovers the sequence a client sees only grows,
    and a replay from any node starts right after the last number it saw."""
    first = await wait_for_primary(nodes)
    client = await AhpClient.connect(first.url, subscriptions=[ROOT])
    seen: list[int] = []
    client.on_envelope(lambda e: seen.append(e.server_seq))
    try:
        chat = await client.open_chat("echo", timeout=TIMEOUT)
        await client.ask(chat, "one", timeout=TIMEOUT)
        alive = list(nodes)
        for _ in range(2):
            primary = await wait_for_primary(alive)
            alive.remove(primary)
            await primary.terminate()  # graceful: the lease is released at once
            successor = await wait_for_primary(alive, within=TIMEOUT)
            if client.closed is False:
                await client.wait_closed(timeout=TIMEOUT)
            await _reconnect(client, successor.url)
            await client.ask(chat, "again", timeout=TIMEOUT)
        assert seen == sorted(set(seen))
        state = client.confirmed(chat, ChatState)
        assert [t.state for t in state.turns] == ["complete"] * 3
        sessions = [s for s in client.subscriptions if s.startswith("ahp-session")]
        assert client.view(sessions[0], SessionState).lifecycle == "ready"
    finally:
        await client.close()


def _streamed(client: AhpClient, chat: str) -> str:
    state = client.view(chat, ChatState)
    active = state.active_turn
    parts = () if isinstance(active, UnsetType) else active.response_parts
    return "".join(p.content for p in parts if getattr(p, "kind", "") == "markdown")


async def _reconnect(client: AhpClient, url: str) -> str:
    """Reconnect (the node may still be recovering: 503 until it is ready)."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            try:
                return await client.reconnect(url, timeout=TIMEOUT)
            except InvalidStatus as error:  # 503 while no node is the primary yet
                if error.response.status_code != 503:
                    raise
                await asyncio.sleep(0.2)
            except OSError:
                await asyncio.sleep(0.2)


async def test_frames_over_the_bus_payload_limit_are_relayed_whole(nodes: list[Node]) -> None:
    """A 2.5 MB draft from a client on an edge (NATS takes 1 MiB a message): the frame goes
    to the primary in pieces, its echo comes back in pieces, intact, and a client on the
    other edge gets the same envelope."""
    primary = await wait_for_primary(nodes)
    edges = [n for n in nodes if n is not primary]
    writer = await AhpClient.connect(edges[0].url, subscriptions=[ROOT])
    reader = await AhpClient.connect(edges[1].url, subscriptions=[ROOT])
    try:
        chat = await writer.open_chat("echo", timeout=TIMEOUT)
        await reader.subscribe(chat, timeout=TIMEOUT)
        line = 'draft ✓ ünïcode "quoted" \\ line\n'
        text = line * (2_500_000 // len(line.encode()))
        assert 2_400_000 < len(text.encode()) < 3 * 1024 * 1024
        draft = ChatDraftChangedAction(draft=Message(text=text, origin=MessageOrigin(kind="user")))
        seq = await writer.dispatch(chat, draft, timeout=TIMEOUT)

        def has_draft(client: AhpClient) -> bool:
            state = client.confirmed(chat, ChatState)
            return isinstance(state.draft, Message) and state.draft.text == text

        await asyncio.gather(
            writer.wait_for(has_draft, timeout=TIMEOUT), reader.wait_for(has_draft, timeout=TIMEOUT)
        )
        echo = next(e for e in writer.envelopes if getattr(e.origin, "client_seq", None) == seq)
        assert echo.rejection_reason is None or isinstance(echo.rejection_reason, UnsetType)
        seen = [e for e in reader.envelopes if isinstance(e.action, ChatDraftChangedAction)]
        assert [e.server_seq for e in seen] == [echo.server_seq]
        # The connections survived it: both still answer.
        await writer.ping(timeout=TIMEOUT)
        await reader.ping(timeout=TIMEOUT)
    finally:
        await writer.close()
        await reader.close()


PERMISSION_DENIED = -32009


async def test_multi_user_identity_holds_through_the_edges(
    tmp_path: Path, nats_bus: PrivateNats
) -> None:
    """The user the edge's door admitted is the user on the primary: a session made by
    alice through one edge is invisible and refused to bob on another, and alice's on
    every node."""
    users, tokens = multi_user(tmp_path, "alice", "bob")
    alice_token, bob_token = tokens["alice"], tokens["bob"]
    async with three_nodes(nats_bus, tmp_path, users) as nodes:
        primary = await wait_for_primary(nodes)
        edges = [n for n in nodes if n is not primary]
        alice = await AhpClient.connect(edges[0].url, token=alice_token)
        bob = await AhpClient.connect(edges[1].url, token=bob_token)
        try:
            session = await alice.create_session("echo", subscribe=True, timeout=TIMEOUT)
            listed = await bob.list_sessions(timeout=TIMEOUT)
            assert session not in {s.resource for s in listed.items}
            with pytest.raises(RemoteError) as refused:
                await bob.subscribe(session, timeout=TIMEOUT)
            assert refused.value.code == PERMISSION_DENIED
            await bob.ping(timeout=TIMEOUT)  # bob's connection survives
            for node in nodes:
                async with AhpClient.connect(node.url, token=alice_token) as again:
                    mine = await again.list_sessions(timeout=TIMEOUT)
                    assert session in {s.resource for s in mine.items}
                    state = await again.subscribe(session, timeout=TIMEOUT)
                    assert isinstance(state, SessionState)
        finally:
            await alice.close()
            await bob.close()


async def test_clients_dropped_at_an_edge_leave_nothing_behind(
    tmp_path: Path, nats_bus: PrivateNats
) -> None:
    """Clients that vanish from an edge (TCP abort, no close frame) or close cleanly are
    let go on the primary too: its connection and task counts come back to where they
    were (no active-client grace here, so no release is left pending)."""
    async with three_nodes(nats_bus, tmp_path, grace=0.0) as nodes:
        await _drop_clients_at_an_edge(nodes)


async def _drop_clients_at_an_edge(nodes: list[Node]) -> None:
    primary = await wait_for_primary(nodes)
    edge = next(n for n in nodes if n is not primary)
    owner = await AhpClient.connect(primary.url, subscriptions=[ROOT])
    try:
        chat = await owner.open_chat("echo", timeout=TIMEOUT)
        before = await _metrics(primary)
        clients = [await AhpClient.connect(edge.url, subscriptions=[ROOT, chat]) for _ in range(30)]
        during = await _metrics(primary)
        assert during["ahp_connections"] == before["ahp_connections"] + 30
        await owner.ask(chat, "/slow 1 everyone sees this", timeout=TIMEOUT)
        for i, client in enumerate(clients):
            if i % 2:
                await client.close()
            else:
                link = client._link  # the raw socket: end it without a close frame
                assert link is not None
                link.ws.transport.abort()

        async def settled() -> bool:
            now = await _metrics(primary)
            return (
                now["ahp_connections"] == before["ahp_connections"]
                and now["ahp_tasks"] <= before["ahp_tasks"] + 2
            )

        async with asyncio.timeout(TIMEOUT):
            while not await settled():  # noqa: ASYNC110 - polling another process
                await asyncio.sleep(0.2)
        # The edge answers, and relays a new client as before.
        again = await AhpClient.connect(edge.url, subscriptions=[chat])
        await again.close()
    finally:
        await owner.close()


async def _metrics(node: Node) -> dict[str, float]:
    """The node's /metrics gauges without labels, by name."""
    url = node.url.replace("ws://", "http://") + "/metrics"

    def fetch() -> str:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())

    found: dict[str, float] = {}
    for line in (await asyncio.to_thread(fetch)).splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            found[name] = float(value)
    return found


async def test_a_fenced_primary_leaves_no_child_process_behind(
    tmp_path: Path, nats_bus: PrivateNats
) -> None:
    """A primary that stops because it lost its lease still ends and reaps what it
    started: a terminal's shell (opened by a client through an edge) is gone with it."""
    shell = '[workspace]\nterminal_shell = ["/bin/sh"]\n'  # no rc files to wait for
    shell += workspace_root(tmp_path)  # tmp_path/work, where its session works
    async with three_nodes(nats_bus, tmp_path, extra=shell) as nodes:
        await _fence_a_primary_with_a_terminal(nodes, tmp_path)


async def _fence_a_primary_with_a_terminal(nodes: list[Node], tmp_path: Path) -> None:
    primary = await wait_for_primary(nodes)
    edge = next(n for n in nodes if n is not primary)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    client = await AhpClient.connect(edge.url, subscriptions=[ROOT])
    try:
        session = await client.create_session(
            "echo", working_directories=[work.as_uri()], timeout=TIMEOUT
        )
        assert session
        terminal = f"ahp-terminal:/{uuid.uuid4()}"
        await client.request(
            "createTerminal",
            CreateTerminalParams(
                channel=terminal,
                claim=TerminalClientClaim(client_id=client.client_id),
                cwd=work.as_uri(),
            ),
        )
        assert primary.process is not None
        shells = _children_of(primary.process.pid)
        assert shells, "the terminal's shell runs under the primary"
        # A process that would outlive a mere hang-up: SIGHUP ignored (and kept
        # across exec), so only the primary ending it on its way out removes it.
        await client.subscribe(terminal, timeout=TIMEOUT)
        await client.dispatch(terminal, TerminalInputAction(data="trap '' HUP; exec sleep 600\n"))
        async with asyncio.timeout(TIMEOUT):
            while not all(_command(pid) == "sleep" for pid in shells):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        others = [n for n in nodes if n is not primary]
        primary.pause()
        try:
            await wait_for_primary(others, within=TIMEOUT)
        finally:
            primary.resume()
        assert await primary.exit_code(within=TIMEOUT) != 0
        async with asyncio.timeout(TIMEOUT):
            while any(alive(pid) for pid in shells):  # noqa: ASYNC110 - other processes
                await asyncio.sleep(0.1)
    finally:
        await client.close()


def _children_of(pid: int) -> list[int]:
    """The process ids whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""

"""Routing in sharded mode: ``moveChat`` and ``invokeChangesetOperation`` decided by the owner.

Layer: tests (cluster, end to end). Sharded nodes in this process
(``ShardedNode``) on the real PostgreSQL and the cluster tests' authenticated
``nats-server``, each on a port of its own with the echo agent; clients are
:class:`AhpClient` over real WebSockets. A client of one node moves a chat
of a session another node owns (within that node, to a new session, refused
towards a session of another node), bad input through another node gets a
clear error and the connection stays, and the owner answers a changeset
operation that the client's node alone would answer otherwise. Assertions are
on owner and catalogue rows, actors loaded per node, session catalogues and
error codes; every wait is bounded by ``TIMEOUT``. docs/scale-out.md
"Routing".
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ahp_server.agents.base import FileChange, TurnRequest
from ahp_server.client import AhpClient, ConnectionClosedError, RemoteError
from ahp_server.cluster.sharded import ShardedNode
from ahp_server.protocol.types import ChangesetState, ChatState, SessionState
from ahp_server.protocol.uris import turn_changeset
from tests.cluster.helpers import PrivateNats, new_cluster_name
from tests.cluster.test_routing import _alice_and_bob
from tests.cluster.test_sharded import owners, running, session_of

TIMEOUT = 30.0
INVALID_PARAMS = -32602
SESSION_NOT_FOUND = -32001
NOT_FOUND = -32008
PERMISSION_DENIED = -32009


@pytest.fixture
def name() -> str:
    return new_cluster_name()


@contextlib.asynccontextmanager
async def two_nodes(
    url: str, nats_bus: PrivateNats, name: str
) -> AsyncIterator[tuple[ShardedNode, ShardedNode, AhpClient, AhpClient]]:
    """node-a and node-b (each owns the sessions its clients make), a client of each."""
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
        AhpClient.connect(a.urls[0]) as on_a,
        AhpClient.connect(b.urls[0]) as on_b,
    ):
        yield a, b, on_a, on_b


def chats(client: AhpClient, session: str) -> list[str]:
    """``session``'s chat catalogue, in order, as ``client`` mirrors it."""
    return [c.resource for c in client.view(session, SessionState).chats]


def default_chat(client: AhpClient, session: str) -> str:
    chat = client.view(session, SessionState).default_chat
    assert isinstance(chat, str), chat
    return chat


async def test_a_client_of_one_node_moves_a_chat_of_a_session_another_node_owns(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """moveChat goes to the owner of the chat's session (node-a), which moves it as on one
    host: into another of its sessions, within it, and to a new session it owns. node-b
    loads none of it, and its client sees every step on node-b's feed."""
    async with two_nodes(url, nats_bus, name) as (a, b, on_a, on_b):
        first = await session_of(url, await on_a.open_chat("echo", timeout=TIMEOUT))
        second = await session_of(url, await on_a.open_chat("echo", timeout=TIMEOUT))
        chat = await on_a.create_chat(first, timeout=TIMEOUT)
        rows = await owners(url)
        assert rows[first] == rows[second] == ("node-a", 1)
        for channel in (first, second, chat):
            await on_b.subscribe(channel, timeout=TIMEOUT)
        # Into another session of node-a, through node-b.
        assert await on_b.move_chat(chat, second, timeout=TIMEOUT) == second
        assert await session_of(url, chat) == second
        assert a.host.chat_index[chat] == second
        assert b.host.chat_index[chat] == second  # node-b routes the chat by its session
        anchor = default_chat(on_b, second)
        await on_b.wait_for(lambda c: chats(c, second) == [chat, anchor], timeout=TIMEOUT)
        assert chat not in chats(on_b, first)
        # Within it: after its default chat.
        assert await on_b.move_chat(chat, second, after=anchor, timeout=TIMEOUT) == second
        await on_b.wait_for(lambda c: chats(c, second) == [anchor, chat], timeout=TIMEOUT)
        # To a new session: node-a makes it, owns it, and the chat is its default chat.
        made = await on_b.move_chat(chat, timeout=TIMEOUT)
        assert made not in (first, second)
        assert (await owners(url))[made] == ("node-a", 1)
        assert await session_of(url, chat) == made
        await on_b.subscribe(made, timeout=TIMEOUT)
        await on_b.wait_for(
            lambda c: c.view(made, SessionState).lifecycle == "ready", timeout=TIMEOUT
        )
        assert on_b.view(made, SessionState).default_chat == chat
        assert on_b.view(chat, ChatState).movable is False
        assert "still here" in await on_b.ask(chat, "/slow 1 still here", timeout=TIMEOUT)
        # Everything ran on node-a; node-b loaded nothing of it.
        assert made in a.host.sessions
        assert chat in a.host.chats
        assert not {first, second, made} & set(b.host.sessions)
        assert chat not in b.host.chats
        assert not on_b.closed


async def test_a_chat_does_not_move_to_a_session_of_another_node(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """The owner of the chat's session refuses a destination another node owns (-32602,
    naming that node), in either direction, and nothing changes: no catalogue, no
    ownership row, no actor loaded on the wrong node. An unknown chat (-32008) or
    destination (-32001) is refused too, and the client stays."""
    async with two_nodes(url, nats_bus, name) as (a, b, on_a, on_b):
        session_a = await session_of(url, await on_a.open_chat("echo", timeout=TIMEOUT))
        session_b = await session_of(url, await on_b.open_chat("echo", timeout=TIMEOUT))
        chat_a = await on_a.create_chat(session_a, timeout=TIMEOUT)
        chat_b = await on_b.create_chat(session_b, timeout=TIMEOUT)
        rows = await owners(url)
        assert (rows[session_a], rows[session_b]) == (("node-a", 1), ("node-b", 1))
        before = {c: chats(on, s) for c, on, s in ((a, on_a, session_a), (b, on_b, session_b))}
        # node-a's chat to node-b's session: asked on either node, node-a refuses.
        for client in (on_b, on_a):
            with pytest.raises(RemoteError) as refused:
                await client.move_chat(chat_a, session_b, timeout=TIMEOUT)
            assert refused.value.code == INVALID_PARAMS
            assert f"session {session_b} lives on node node-b" in refused.value.message
        # node-b's chat to node-a's session, asked through node-a: node-b refuses.
        with pytest.raises(RemoteError) as refused:
            await on_a.move_chat(chat_b, session_a, timeout=TIMEOUT)
        assert refused.value.code == INVALID_PARAMS
        assert f"session {session_a} lives on node node-a" in refused.value.message
        # Nothing changed, and neither node loaded the other's session.
        assert await session_of(url, chat_a) == session_a
        assert await session_of(url, chat_b) == session_b
        assert a.host.chat_index[chat_a] == session_a
        assert b.host.chat_index[chat_b] == session_b
        assert session_b not in a.host.sessions
        assert chat_b not in a.host.chats
        assert session_a not in b.host.sessions
        assert chat_a not in b.host.chats
        for node, client, session in ((a, on_a, session_a), (b, on_b, session_b)):
            assert chats(client, session) == before[node]
        # Bad input through the other node: answered, and the client stays.
        with pytest.raises(RemoteError) as unknown:
            await on_b.move_chat("ahp-chat:/nobody-has-this", session_a, timeout=TIMEOUT)
        assert unknown.value.code == NOT_FOUND
        with pytest.raises(RemoteError) as nowhere:
            await on_b.move_chat(chat_a, "ahp-session:/nobody-has-this", timeout=TIMEOUT)
        assert nowhere.value.code == SESSION_NOT_FOUND
        assert await on_b.move_chat(chat_a, session_a, timeout=TIMEOUT) == session_a
        assert not on_a.closed
        assert not on_b.closed


async def test_another_users_chat_does_not_move_through_another_node(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """Multi-user mode: alice's chat is on node-b. Through node-a, bob cannot move it
    (-32009, node-b's answer), nor move his own chat of node-a into alice's session
    (-32009 before any word of its node), and stays connected; alice moves it to a new
    session, which node-b makes and owns."""
    async with _alice_and_bob(url, nats_bus, name, tmp_path) as (_, b, alice_b, alice_a, bob_a):
        session = await session_of(url, await alice_b.open_chat("echo", timeout=TIMEOUT))
        chat = await alice_b.create_chat(session, timeout=TIMEOUT)
        with pytest.raises(RemoteError) as refused:
            await bob_a.move_chat(chat, timeout=TIMEOUT)
        assert refused.value.code == PERMISSION_DENIED
        assert await session_of(url, chat) == session
        bobs = await bob_a.create_chat(
            await session_of(url, await bob_a.open_chat("echo", timeout=TIMEOUT)),
            timeout=TIMEOUT,
        )
        with pytest.raises(RemoteError) as not_his:
            await bob_a.move_chat(bobs, session, timeout=TIMEOUT)
        assert not_his.value.code == PERMISSION_DENIED, not_his.value.message
        assert "node-b" not in not_his.value.message
        assert not bob_a.closed
        made = await alice_a.move_chat(chat, timeout=TIMEOUT)
        assert (await owners(url))[made] == ("node-b", 1)
        assert made in b.host.sessions
        assert await session_of(url, chat) == made
        with pytest.raises(RemoteError) as still:
            await bob_a.subscribe(made, timeout=TIMEOUT)
        assert still.value.code == PERMISSION_DENIED  # alice's, as the chat was


async def test_a_move_forwarded_to_a_node_that_lost_the_session_changes_nothing(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """node-b forwards the move to node-a, which no longer holds the session (here: its
    store released it, as when it is taken over): node-a refuses it (``_still_mine``),
    node-b's client is closed with 1012 to find the owner again on reconnect, and the
    chat stays where it was."""
    async with two_nodes(url, nats_bus, name) as (a, b, on_a, on_b):
        first = await session_of(url, await on_a.open_chat("echo", timeout=TIMEOUT))
        second = await session_of(url, await on_a.open_chat("echo", timeout=TIMEOUT))
        chat = await on_a.create_chat(first, timeout=TIMEOUT)
        await on_b.subscribe(first, timeout=TIMEOUT)  # node-b knows node-a owns it
        assert a.routes is not None
        assert b.routes is not None
        assert a.routes.mine(chat)
        a.store.release(first)
        assert not a.routes.mine(chat)
        with pytest.raises((RemoteError, ConnectionClosedError)):
            await on_b.move_chat(chat, second, timeout=TIMEOUT)
        await on_b.wait_closed(timeout=TIMEOUT)
        assert on_b.close_code == 1012
        assert await session_of(url, chat) == first
        assert a.host.chat_index[chat] == first
        assert chat not in b.host.chats
        assert not on_a.closed


async def test_the_owner_answers_a_changeset_operation_asked_through_another_node(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """invokeChangesetOperation on the changeset of a turn of node-a's session, asked
    through node-b: node-a answers — it holds the turn and the file it changed, and
    offers no operation (-32602 naming it). node-b alone knows neither the turn nor
    its changeset: answering itself, it would say -32008 (no changeset)."""
    async with two_nodes(url, nats_bus, name) as (a, b, on_a, on_b):
        chat = await on_a.open_chat("echo", timeout=TIMEOUT)
        session = await session_of(url, chat)
        await on_a.ask(chat, "hello", timeout=TIMEOUT)
        turn = on_a.view(chat, ChatState).turns[0]
        request = TurnRequest(session=session, chat=chat, turn_id=turn.id, message=turn.message)
        changed = tmp_path / "one.txt"
        await a.host.file_changed(request, FileChange(str(changed), after="one\n", created=True))
        uri = turn_changeset(session, turn.id)
        with pytest.raises(RemoteError) as refused:
            await on_b.request(
                "invokeChangesetOperation",
                {"channel": uri, "operationId": "revert"},
                timeout=TIMEOUT,
            )
        assert refused.value.code == INVALID_PARAMS, refused.value.message
        assert f"changeset {uri} has no operation 'revert'" in refused.value.message
        assert uri in a.host.workspace_channels  # node-a's, with the file
        state = a.host.workspace_channels[uri].state
        assert isinstance(state, ChangesetState)
        assert len(state.files) == 1
        assert uri not in b.host.workspace_channels
        # The same request with a turn nobody has: node-a's not found, the client stays.
        unknown = turn_changeset(session, "no-such-turn")
        with pytest.raises(RemoteError) as missing:
            await on_b.request(
                "invokeChangesetOperation",
                {"channel": unknown, "operationId": "revert"},
                timeout=TIMEOUT,
            )
        assert missing.value.code == NOT_FOUND
        assert not on_b.closed
        assert b.routes is not None
        assert b.routes.forwarded >= 2

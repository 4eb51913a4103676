"""Routing in sharded mode (transport/routing.py): a client on one node drives another's session.

Sharded nodes in this process (``ShardedNode``) on the real PostgreSQL and the
cluster tests' authenticated ``nats-server``, each listening on a port of its
own with the echo agent; clients are :class:`AhpClient` over real WebSockets.
Assertions are on owner rows, turn states, words and ``serverSeq`` numbers;
every wait is bounded by ``TIMEOUT``. docs/scale-out.md "Routing".
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import structlog
from msgspec import UnsetType

from ahp_server.agents.base import FileChange, TurnRequest
from ahp_server.client import AhpClient, RemoteError
from ahp_server.cluster.sharded import ShardedNode
from ahp_server.config import UserConfig
from ahp_server.protocol.types import (
    ChangesetFileSetAction,
    ChangesetFilesReviewChangedAction,
    ChangesetState,
    ChatState,
    ChatTurnCancelledAction,
    CreateTerminalParams,
    RootActiveSessionsChangedAction,
    RootConfigChangedAction,
    RootState,
    SessionActiveClient,
    SessionActiveClientSetAction,
    SessionState,
    TerminalClientClaim,
    TerminalDataAction,
    TerminalInputAction,
    TerminalResizedAction,
    TerminalSessionClaim,
    TerminalState,
)
from ahp_server.protocol.uris import chat_changeset, session_changeset, turn_changeset
from ahp_server.store.sharded import ROOT
from ahp_server.workspace.paths import file_uri
from tests.cluster.helpers import PrivateNats, new_cluster_name
from tests.cluster.test_sharded import answer, owners, running, session_of, settings
from tests.e2e.test_ordering import own_answers, started
from tests.postgres import query, until

TIMEOUT = 30.0
ALICE = "alice-token-routing-0123456789"
BOB = "bob-token-routing-0123456789ab"


@pytest.fixture
def name() -> str:
    return new_cluster_name()


def increasing(client: AhpClient) -> bool:
    numbers = [e.server_seq for e in client.envelopes]
    return numbers == sorted(set(numbers))


async def test_a_client_of_one_node_drives_a_session_another_node_owns(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
        AhpClient.connect(b.urls[0], subscriptions=[ROOT]) as on_b,
        AhpClient.connect(a.urls[0], subscriptions=[ROOT]) as on_a,
    ):
        chat = await on_b.open_chat("echo", timeout=TIMEOUT)
        session = await session_of(url, chat)
        assert (await owners(url))[session] == ("node-b", 1)
        # node-a's client subscribes to node-b's session and chat, and runs a turn.
        await on_a.subscribe(session, timeout=TIMEOUT)
        await on_a.subscribe(chat, timeout=TIMEOUT)
        assert on_a.view(session, SessionState).lifecycle == "ready"
        words = " ".join(f"w{i}" for i in range(120))
        said = await on_a.ask(chat, f"/slow 2 {words}", timeout=TIMEOUT)
        assert said.split() == [f"w{i}" for i in range(120)]
        # The agent ran on node-b (its owner); node-a loaded no actor for it.
        assert chat in b.host.chats
        assert chat not in a.host.chats
        assert session not in a.host.sessions
        # Both clients saw the turn, in one increasing order each, and agree.
        await on_b.wait_for(lambda c: len(c.view(chat, ChatState).turns) == 1, timeout=TIMEOUT)
        assert answer(on_b, chat) == answer(on_a, chat)
        assert increasing(on_a)
        assert increasing(on_b)
        # Requests node-b decides, answered through node-a: createChat (its turn
        # runs on node-b), its refusal, fetchTurns, listSessions, disposeChat.
        second = await on_a.create_chat(
            session, initial_message="/slow 2 x y z", subscribe=True, timeout=TIMEOUT
        )
        assert second in b.host.chats
        assert second not in a.host.chats
        await on_a.wait_for(
            lambda c: [t.state for t in c.view(second, ChatState).turns] == ["complete"],
            timeout=TIMEOUT,
        )
        with pytest.raises(RemoteError) as refused:
            await on_a.create_chat(session, chat=second, timeout=TIMEOUT)
        assert refused.value.code == -32010  # AlreadyExists, node-b's answer
        page = await on_a.request("fetchTurns", {"channel": chat}, timeout=TIMEOUT)
        assert page == {}
        listed = await on_a.list_sessions(timeout=TIMEOUT)
        assert session in [s.resource for s in listed.items]
        await on_a.dispose_chat(second, timeout=TIMEOUT)
        assert second not in b.host.chats
        with pytest.raises(RemoteError) as unknown:
            await on_a.subscribe("ahp-chat:/nobody-has-this", timeout=TIMEOUT)
        assert unknown.value.code == -32008  # NotFound, answered by node-a
        assert increasing(on_a)
        assert a.routes is not None
        assert a.routes.forwarded > 0


async def test_a_refusal_from_the_owner_never_overtakes_the_echo_of_an_earlier_action(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """The echo comes on node-a's feed, the refusal on the route: the refusal waits until
    node-a has delivered what node-b had delivered when it refused — even when node-a's
    feed is late (here: every record lost, each number read from the log)."""
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
        AhpClient.connect(b.urls[0]) as on_b,
        AhpClient.connect(a.urls[0]) as on_a,
    ):
        chat = await on_b.open_chat("echo", timeout=TIMEOUT)
        await on_a.subscribe(chat, timeout=TIMEOUT)
        # node-a goes deaf to the feed (its subscription ends on the real NATS): it
        # reads every number from the log instead, by its counter poll, a second
        # late, while node-b's refusals reach it on the route at once.
        assert a.feed is not None
        await a.feed.reader._sub.unsubscribe()
        since = len(on_a.envelopes)
        seqs = []
        for i in range(3):
            seqs.append(await on_a.dispatch(chat, started(f"t{i}")))
            seqs.append(
                await on_a.dispatch(chat, ChatTurnCancelledAction(turn_id="no", duration=0))
            )
        await on_a.wait_for(lambda c: len(own_answers(c, since)) == len(seqs), timeout=TIMEOUT)
        answers = own_answers(on_a, since)
        assert [seq for seq, _ in answers] == seqs
        assert [refused for _, refused in answers] == [False] + [True] * 5
        assert chat in b.host.chats
        assert chat not in a.host.chats


async def test_one_order_across_owners_and_a_replay_on_another_node(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """A client of node-a follows two chats streaming at once, one owned by each node: one
    increasing ``serverSeq`` order; it loses its socket mid-stream and resumes on node-b
    with ``reconnect``: a replay, every word once, nothing twice."""
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
        AhpClient.connect(a.urls[0]) as on_a,
        AhpClient.connect(b.urls[0]) as on_b,
        AhpClient.connect(a.urls[0]) as follower,
    ):
        chat_a = await on_a.open_chat("echo", timeout=TIMEOUT)
        chat_b = await on_b.open_chat("echo", timeout=TIMEOUT)
        assert chat_a in a.host.chats
        assert chat_b in b.host.chats
        for chat in (chat_a, chat_b):
            await follower.subscribe(chat, timeout=TIMEOUT)
        words = {chat_a: [f"a{i}" for i in range(200)], chat_b: [f"b{i}" for i in range(200)]}
        await on_a.send_message(chat_a, "/slow 10 " + " ".join(words[chat_a]), timeout=TIMEOUT)
        # The follower drives node-b's chat itself, through node-a.
        await follower.send_message(chat_b, "/slow 10 " + " ".join(words[chat_b]), timeout=TIMEOUT)
        await follower.wait_for(
            lambda c: "a20" in answer(c, chat_a) and "b20" in answer(c, chat_b),
            timeout=TIMEOUT,
        )
        assert increasing(follower)
        # Its socket drops (node-a is fine); it resumes on node-b.
        await follower.close()
        path = await follower.reconnect(b.urls[0], timeout=TIMEOUT)
        assert path == "replay"
        await follower.wait_for(
            lambda c: all(len(c.view(chat, ChatState).turns) == 1 for chat in words),
            timeout=TIMEOUT,
        )
        for chat, said in words.items():
            assert answer(follower, chat).split() == said
        # Every number once, increasing, across the two owners and the two nodes.
        assert increasing(follower)


async def test_new_sessions_go_to_the_least_loaded_node_and_run_there(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """``cluster.placement = "least-loaded"``: three sessions made through node-a land on
    node-b, node-c, then node-a (node-a holds the root; ties stay where the client is),
    each placed by the load heard in heartbeats, and each agent runs on its owner."""
    async with (
        running(url, nats_bus, name, "node-a", placement="least-loaded") as a,
        running(url, nats_bus, name, "node-b", placement="least-loaded") as b,
        running(url, nats_bus, name, "node-c", placement="least-loaded") as c,
    ):
        nodes = {"node-a": a, "node-b": b, "node-c": c}

        async def heard(counts: dict[str, int]) -> bool:
            peers = a._peers()
            return all(
                name in peers and peers[name].sessions == count for name, count in counts.items()
            )

        async with AhpClient.connect(a.urls[0]) as client:
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: heard({"node-b": 0, "node-c": 0}))
            placed = []
            expected = {"node-b": 0, "node-c": 0}
            for _ in range(3):
                chat = await client.open_chat("echo", timeout=TIMEOUT)
                session = await session_of(url, chat)
                owner = (await owners(url))[session][0]
                placed.append(owner)
                # The agent runs on the owner: a turn there, driven through node-a.
                assert "placed" in await client.ask(chat, "/slow 1 placed", timeout=TIMEOUT)
                assert chat in nodes[owner].host.chats
                assert (owner == "node-a") == (chat in a.host.chats)
                if owner in expected:
                    expected[owner] += 1
                async with asyncio.timeout(TIMEOUT):
                    await until(lambda: heard(expected))
            assert placed == ["node-b", "node-c", "node-a"]


async def test_placement_tries_the_next_node_when_the_chosen_one_does_not_answer(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """docs/scale-out.md "Placement": node-b, the least loaded (node-a holds the root), is
    stopped with its lease still live (30 s). A session in shared/ (both nodes serve it)
    is placed on node-b, whose route is not opened within three heartbeats, then on
    node-a, the next candidate, and runs there; one in b/ (only node-b serves it) has no
    next candidate: the client gets an error naming the directory and node-b. The client
    is never closed."""
    roots = {name_: tmp_path / name_ for name_ in ("a", "b", "shared")}
    for root in roots.values():
        (root / "project").mkdir(parents=True)

    def serving(*served: str) -> dict[str, object]:
        return {
            "placement": "least-loaded",
            "lease_ttl": 30.0,
            "workspace_roots": tuple(str(roots[r]) for r in served),
        }

    async with (
        running(url, nats_bus, name, "node-a", **serving("a", "shared")) as a,
        running(url, nats_bus, name, "node-b", **serving("b", "shared")) as b,
        AhpClient.connect(a.urls[0]) as client,
    ):
        assert (await owners(url))[ROOT] == ("node-a", 1)

        async def heard_b() -> bool:
            peers = a._peers()
            return "node-b" in peers and peers["node-b"].sessions == 0

        async with asyncio.timeout(TIMEOUT):
            await until(heard_b)
        await b.abort()  # no drain: its lease stays live, nothing answers for it
        chat = await client.open_chat("echo", cwd=roots["shared"] / "project", timeout=TIMEOUT)
        assert (await owners(url))[await session_of(url, chat)] == ("node-a", 1)
        assert a.routes is not None
        assert (a.routes.unreachable, a.routes.failed) == (1, 0)
        assert "here" in await client.ask(chat, "/slow 1 here", timeout=TIMEOUT)
        assert chat in a.host.chats
        with pytest.raises(RemoteError) as nowhere:
            await client.create_session("echo", [file_uri(roots["b"] / "project")], timeout=TIMEOUT)
        assert nowhere.value.code == -32603
        assert str(roots["b"] / "project") in str(nowhere.value)
        assert "node-b" in str(nowhere.value)
        assert (a.routes.unreachable, a.routes.failed) == (2, 0)
        assert not client.closed
        live = await query(
            url, "SELECT expires_at > now() FROM cluster_nodes WHERE node = 'node-b'"
        )
        assert live[0][0] is True  # node-b was a candidate all along: its lease is live


async def test_when_the_owner_dies_its_routed_clients_reconnect_and_find_the_new_owner(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """node-b owns the chat a client of node-a drives; node-b dies mid-turn (its writes
    refused from then on, no drain). The route fails: the client is closed with 1012,
    reconnects, and replays; node-a took the session over, so it answers there."""
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
    ):
        async with AhpClient.connect(b.urls[0]) as on_b:
            chat = await on_b.open_chat("echo", timeout=TIMEOUT)
        session = await session_of(url, chat)
        client = await AhpClient.connect(a.urls[0])
        try:
            await client.subscribe(chat, timeout=TIMEOUT)
            words = " ".join(f"w{i}" for i in range(400))
            await client.send_message(chat, f"/slow 20 {words}", timeout=TIMEOUT)
            await client.wait_for(lambda c: "w10" in answer(c, chat), timeout=TIMEOUT)
            b.store.held.clear()  # as after kill -9: nothing it does reaches the database
            await b.abort()
            await client.wait_closed(timeout=TIMEOUT)
            assert client.close_code == 1012
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _owned_by(url, session, ("node-a", 2)))
                await until(lambda: _true(a.adopted >= 1))
            path = await client.reconnect(a.urls[0], timeout=TIMEOUT)
            assert path in ("replay", "snapshot")
            await client.wait_for(
                lambda c: [t.state for t in c.view(chat, ChatState).turns] == ["error"],
                timeout=TIMEOUT,
            )
            assert answer(client, chat).startswith("w0 w1 w2")
            assert increasing(client)
            assert "again" in await client.ask(chat, "/slow 1 once again", timeout=TIMEOUT)
            assert chat in a.host.chats
        finally:
            await client.close()


async def _owned_by(url: str, session: str, owner: tuple[str, int]) -> bool:
    return (await owners(url)).get(session) == owner


async def _true(value: bool) -> bool:
    return value


async def _catalogued(url: str, *uris: str) -> bool:
    rows = await query(url, "SELECT uri FROM channels WHERE uri = ANY($1::text[])", list(uris))
    return len(rows) == len(uris)


@contextlib.asynccontextmanager
async def _alice_and_bob(
    url: str, nats_bus: PrivateNats, name: str, tmp_path: Path, **changes: Any
) -> AsyncIterator[tuple[ShardedNode, ShardedNode, AhpClient, AhpClient, AhpClient]]:
    """Multi-user mode, two nodes serving ``tmp_path``: node-a, node-b, and alice's client of
    node-b, alice's and bob's of node-a. The nodes are aborted at the end."""
    users = (UserConfig("alice", ALICE), UserConfig("bob", BOB))
    nodes: list[ShardedNode] = []
    try:
        for name_ in ("node-a", "node-b"):
            configured = replace(
                settings(url, nats_bus, name, name_),
                users=users,
                workspace_roots=(str(tmp_path),),
                **changes,
            )
            nodes.append(ShardedNode(configured))
            await nodes[-1].start()
        a, b = nodes
        async with (
            AhpClient.connect(b.urls[0], token=ALICE) as alice_b,
            AhpClient.connect(a.urls[0], token=ALICE) as alice_a,
            AhpClient.connect(a.urls[0], token=BOB) as bob_a,
        ):
            yield a, b, alice_b, alice_a, bob_a
    finally:
        for node in nodes:
            await node.abort()


async def test_the_owner_decides_who_may_see_a_session_a_client_reaches_through_another_node(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """Multi-user mode: alice's session is on node-b. Through node-a, bob can neither
    subscribe to it (-32009, node-b's answer) nor act on it (his dispatch comes back
    refused); alice can."""
    async with _alice_and_bob(url, nats_bus, name, tmp_path) as (_, _b, alice_b, alice_a, bob_a):
        chat = await alice_b.open_chat("echo", timeout=TIMEOUT)
        with pytest.raises(RemoteError) as refused:
            await bob_a.subscribe(chat, timeout=TIMEOUT)
        assert refused.value.code == -32009
        since = len(bob_a.envelopes)
        seq = await bob_a.dispatch(chat, started("bob-turn"))
        await bob_a.wait_for(lambda c: len(own_answers(c, since)) == 1, timeout=TIMEOUT)
        assert own_answers(bob_a, since) == [(seq, True)]
        await alice_a.subscribe(chat, timeout=TIMEOUT)
        assert "mine" in await alice_a.ask(chat, "/slow 1 mine", timeout=TIMEOUT)
        assert [t.id for t in alice_b.view(chat, ChatState).turns] != ["bob-turn"]


def active_ids(client: AhpClient, session: str) -> set[str]:
    return {c.client_id for c in client.view(session, SessionState).active_clients}


def told(client: AhpClient, method: str, session: str) -> bool:
    """Whether ``client`` got ``method`` (a ``root/session*`` notification) about ``session``."""
    for notification in list(client.notifications):
        if notification.method != method:
            continue
        params = notification.params
        named = params.get("session") or params.get("summary", {}).get("resource")
        if named == session:
            return True
    return False


def active_sessions(client: AhpClient) -> object:
    return client.view(ROOT, RootState).active_sessions


async def test_the_root_channel_tells_every_nodes_clients_of_every_session(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """A session made on node-b is announced to node-a's root subscribers too, and the root
    owner (node-a, the first up) counts it; node-b's root state follows the owner's
    envelopes, so a snapshot there says the same. Disposed through node-a: the same."""
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
        AhpClient.connect(a.urls[0], subscriptions=[ROOT]) as on_a,
        AhpClient.connect(b.urls[0], subscriptions=[ROOT]) as on_b,
    ):
        assert active_sessions(on_a) == 0
        session = await on_b.create_session("echo", timeout=TIMEOUT)
        assert session in b.host.sessions
        await on_a.wait_for(lambda c: told(c, "root/sessionAdded", session), timeout=TIMEOUT)
        await on_a.wait_for(lambda c: active_sessions(c) == 1, timeout=TIMEOUT)
        await on_b.wait_for(lambda c: active_sessions(c) == 1, timeout=TIMEOUT)
        async with AhpClient.connect(b.urls[0], subscriptions=[ROOT]) as later:
            assert active_sessions(later) == 1  # node-b's snapshot: the owner's count
        await on_a.dispose_session(session, timeout=TIMEOUT)
        assert session not in b.host.sessions
        await on_a.wait_for(lambda c: told(c, "root/sessionRemoved", session), timeout=TIMEOUT)
        await on_a.wait_for(lambda c: active_sessions(c) == 0, timeout=TIMEOUT)
        await on_b.wait_for(lambda c: active_sessions(c) == 0, timeout=TIMEOUT)
        assert a.notices is not None
        assert a.notices.heard >= 2


async def test_only_the_root_owner_writes_the_root_channel(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """docs/scale-out.md "Root state: one view": node-b does not own the root. Its client's
    root/configChanged goes to node-a, which commits it, and the echo comes back on
    node-b's feed; a server action node-b's root actor is asked to apply is not applied.
    node-b commits nothing for the root — no commit refused, no such log line (before,
    its root actor wrote, the commit was refused and the echo never came) — and its root
    view still follows the owner's."""
    with structlog.testing.capture_logs() as logged:
        async with (
            running(url, nats_bus, name, "node-a") as a,
            running(url, nats_bus, name, "node-b") as b,
            AhpClient.connect(a.urls[0], subscriptions=[ROOT]) as on_a,
            AhpClient.connect(b.urls[0], subscriptions=[ROOT]) as on_b,
        ):
            assert (await owners(url))[ROOT] == ("node-a", 1)
            unchanged = RootConfigChangedAction(config={"defaultProvider": "echo"})
            echo = await on_b.dispatch_and_wait(ROOT, unchanged, timeout=TIMEOUT)
            await on_a.wait_for(
                lambda c: echo.server_seq in [e.server_seq for e in c.envelopes], timeout=TIMEOUT
            )
            # A server action asked of node-b's root actor: not applied, so 0 at once.
            asked = b.host.root.apply_server(RootActiveSessionsChangedAction(active_sessions=7))
            assert await asyncio.wait_for(asked, TIMEOUT) == 0
            session = await on_b.create_session("echo", timeout=TIMEOUT)
            assert session in b.host.sessions
            for client in (on_a, on_b):  # the owner's count, on both nodes
                await client.wait_for(lambda c: active_sessions(c) == 1, timeout=TIMEOUT)
            async with AhpClient.connect(b.urls[0], subscriptions=[ROOT]) as later:
                assert active_sessions(later) == 1  # node-b's root snapshot
            await b.host.commit_now()
            assert ROOT not in b.store.held
            assert (b.store.refused, a.store.refused) == (0, 0)
    assert [e for e in logged if str(e["event"]).startswith("commit refused")] == []


async def test_a_0_7_client_drives_another_nodes_session_in_its_own_terms(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """A client that negotiates 0.7 on node-a: its requests are translated at node-a's edge
    and forwarded in 1.0 terms, what comes back is projected to 0.7 there — a turn on
    node-b's session streams to it whole."""
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
        AhpClient.connect(b.urls[0]) as on_b,
        AhpClient.connect(a.urls[0], protocol_versions=["0.7.0"]) as legacy,
    ):
        assert legacy.protocol_version == "0.7.0"
        chat = await on_b.open_chat("echo", timeout=TIMEOUT)
        session = await session_of(url, chat)
        await legacy.subscribe(session, timeout=TIMEOUT)
        await legacy.subscribe(chat, timeout=TIMEOUT)
        said = await legacy.ask(chat, "/slow 1 old client words", timeout=TIMEOUT)
        assert said.split() == ["old", "client", "words"]
        assert chat in b.host.chats
        assert chat not in a.host.chats
        assert increasing(legacy)


async def test_a_node_that_lost_a_session_lets_it_go_and_its_clients_follow_the_new_owner(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """node-a is cut off long enough for its lease to lapse (here: made to lapse in the
    database) and node-b takes its session over while node-a still streams a turn there.
    node-a's next commit for it is refused: it stops the turn and drops the session's
    actors, and closes its client (1012), which reconnects and finds the session on
    node-b — what node-a could not commit was never seen."""
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
    ):
        client = await AhpClient.connect(a.urls[0])
        try:
            chat = await client.open_chat("echo", timeout=TIMEOUT)
            session = await session_of(url, chat)
            words = " ".join(f"w{i}" for i in range(400))
            await client.send_message(chat, f"/slow 20 {words}", timeout=TIMEOUT)
            await client.wait_for(lambda c: "w10" in answer(c, chat), timeout=TIMEOUT)
            # Cut off: node-a renews no more (a renewal between the lapse below and
            # node-b's round would make node-a live again, and node-b's fair share half).
            await a.membership.stop(drain=False)
            await query(
                url,
                "UPDATE cluster_nodes SET expires_at = now() - interval '1 s' WHERE node = $1",
                "node-a",
            )
            # A round skips a session whose commit is in flight (node-a streams on): rounds
            # go on, node-b's own loop's too, until node-b has it.
            async with asyncio.timeout(TIMEOUT):
                while (await owners(url)).get(session) != ("node-b", 2):
                    await b.membership.take_over_round()
            await client.wait_closed(timeout=TIMEOUT)
            assert client.close_code == 1012
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _true(chat not in a.host.chats))
                await until(lambda: _true(b.adopted >= 1))
            assert session not in a.host.sessions
            seen = answer(client, chat)
            path = await client.reconnect(a.urls[0], timeout=TIMEOUT)
            assert path in ("replay", "snapshot")
            await client.wait_for(
                lambda c: [t.state for t in c.view(chat, ChatState).turns] == ["error"],
                timeout=TIMEOUT,
            )
            # Everything it saw was committed: the new owner's record starts with it.
            assert answer(client, chat).startswith(seen)
            assert increasing(client)
            assert "again" in await client.ask(chat, "/slow 1 once again", timeout=TIMEOUT)
            assert chat in b.host.chats
            assert chat not in a.host.chats
        finally:
            await client.close()


async def test_a_session_lives_where_its_directory_is_and_moves_only_to_a_node_that_has_it(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """docs/scale-out.md "Working directories": node-a serves a/ and shared/, node-b b/
    and shared/. A session in b/ asked of node-a is made on node-b; when node-b dies, its
    session in shared/ moves to node-a, the one in b/ stays node-b's, and a request for
    it says why, naming the directory and the node."""
    roots = {name_: tmp_path / name_ for name_ in ("a", "b", "shared")}
    for root in roots.values():
        (root / "project").mkdir(parents=True)

    async def node(name_: str, served: tuple[str, ...]) -> ShardedNode:
        configured = replace(
            settings(url, nats_bus, name, name_),
            workspace_roots=tuple(str(roots[r]) for r in served),
        )
        started = ShardedNode(configured)
        await started.start()
        return started

    a = await node("node-a", ("a", "shared"))
    b = await node("node-b", ("b", "shared"))
    try:
        async with (
            AhpClient.connect(a.urls[0]) as on_a,
            AhpClient.connect(b.urls[0]) as on_b,
        ):
            in_b = await on_a.create_session(
                "echo", [file_uri(roots["b"] / "project")], timeout=TIMEOUT
            )
            in_shared = await on_b.create_session(
                "echo", [file_uri(roots["shared"] / "project")], timeout=TIMEOUT
            )
            rows = await owners(url)
            assert rows[in_b] == ("node-b", 1)  # placed where its directory is
            assert rows[in_shared] == ("node-b", 1)
            async with asyncio.timeout(TIMEOUT):  # both committed before node-b "dies"
                await until(lambda: _catalogued(url, in_b, in_shared))
            b.store.held.clear()  # as after kill -9
            await b.abort()
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _owned_by(url, in_shared, ("node-a", 2)))
            await a.membership.take_over_round()  # one more round: still not taken
            assert (await owners(url))[in_b] == ("node-b", 1)
        # (node-a's client had a route to node-b: it was closed with 1012.)
        async with AhpClient.connect(a.urls[0]) as again:
            with pytest.raises(RemoteError) as stuck:
                await again.subscribe(in_b, timeout=TIMEOUT)
            assert str(roots["b"] / "project") in str(stuck.value)
            assert "node-b" in str(stuck.value)
            await again.subscribe(in_shared, timeout=TIMEOUT)  # served by node-a now
    finally:
        await a.abort()
        await b.abort()


async def test_a_client_back_within_the_grace_stays_active_in_another_nodes_session(
    url: str, name: str, nats_bus: PrivateNats
) -> None:
    """An active client of node-b's session, connected to node-a, loses its socket and
    resumes on node-a by replay within the grace (1 s here): node-b hears it is back and
    keeps it among the session's active clients, as one host would (§3.4)."""
    grace = 1.0
    async with (
        running(url, nats_bus, name, "node-a", active_client_grace=grace) as a,
        running(url, nats_bus, name, "node-b", active_client_grace=grace) as b,
        AhpClient.connect(b.urls[0]) as on_b,
        AhpClient.connect(a.urls[0]) as client,
    ):
        chat = await on_b.open_chat("echo", timeout=TIMEOUT)
        session = await session_of(url, chat)
        await on_b.subscribe(session, timeout=TIMEOUT)
        await client.subscribe(session, timeout=TIMEOUT)
        await client.dispatch(
            session,
            SessionActiveClientSetAction(
                active_client=SessionActiveClient(client_id=client.client_id, tools=())
            ),
        )
        await on_b.wait_for(lambda c: client.client_id in active_ids(c, session), timeout=TIMEOUT)
        await client.close()
        assert await client.reconnect(a.urls[0], timeout=TIMEOUT) == "replay"
        await asyncio.sleep(3 * grace)  # past the grace: a release would have come by now
        assert client.client_id in active_ids(on_b, session)
        assert client.client_id in active_ids(client, session)
        live = b.host.live_clients.get(client.client_id)
        assert live is not None
        assert live.forwarded


def terminal_output(client: AhpClient, terminal: str) -> str:
    """What ``terminal`` wrote, as ``client`` received it (its ``terminal/data`` envelopes)."""
    return "".join(
        e.action.data
        for e in list(client.envelopes)
        if e.channel == terminal and isinstance(e.action, TerminalDataAction)
    )


def terminals(client: AhpClient) -> list[str]:
    listed = client.view(ROOT, RootState).terminals
    return [] if isinstance(listed, UnsetType) else [t.resource for t in listed]


async def test_the_root_lists_every_live_nodes_terminals(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """A terminal made on node-b (not the root's owner) is answered at once and listed in
    the root state on both nodes (node-a, the root owner, merges what node-b reports);
    when node-b dies its terminals leave the list."""

    shell = {"terminal_shell": ("/bin/sh",), "workspace_roots": (str(tmp_path),)}
    async with (
        running(url, nats_bus, name, "node-a", **shell) as a,
        running(url, nats_bus, name, "node-b", **shell) as b,
        AhpClient.connect(a.urls[0], subscriptions=[ROOT]) as on_a,
        AhpClient.connect(b.urls[0], subscriptions=[ROOT]) as on_b,
    ):
        assert (await owners(url))[ROOT] == ("node-a", 1)
        made = []
        for client in (on_a, on_b):
            chat = await client.open_chat("echo", timeout=TIMEOUT)  # on the client's node
            terminal = f"ahp-terminal:/{uuid.uuid4()}"
            claim = TerminalSessionClaim(session=await session_of(url, chat), chat=chat)
            await client.request(
                "createTerminal",
                CreateTerminalParams(channel=terminal, claim=claim),
                timeout=TIMEOUT,
            )
            made.append(terminal)
        for client in (on_a, on_b):
            await client.wait_for(lambda c: sorted(terminals(c)) == sorted(made), timeout=TIMEOUT)
        assert terminals(on_a)[0] == made[0]  # the root owner's own first
        # A terminal is a channel of no session: its node commits what it says unfenced.
        await on_b.subscribe(made[1], timeout=TIMEOUT)
        await on_b.dispatch(made[1], TerminalInputAction(data="echo sharded-$((6*7))\n"))
        await on_b.wait_for(lambda c: "sharded-42" in terminal_output(c, made[1]), timeout=TIMEOUT)
        await b.abort()
        await on_a.wait_for(lambda c: terminals(c) == [made[0]], timeout=TIMEOUT)


async def _terminal_on(url: str, client: AhpClient, *, in_directory: Path | None = None) -> str:
    """A terminal made through ``client`` (on its node), claimed by a new chat of its — or,
    ``in_directory`` (that chat's), by ``client`` itself: a terminal of no session."""
    terminal = f"ahp-terminal:/{uuid.uuid4()}"
    chat = await client.open_chat("echo", cwd=in_directory, timeout=TIMEOUT)
    if in_directory is not None:
        params = CreateTerminalParams(
            channel=terminal,
            claim=TerminalClientClaim(client_id=client.client_id),
            cwd=file_uri(in_directory),
        )
    else:
        claim = TerminalSessionClaim(session=await session_of(url, chat), chat=chat)
        params = CreateTerminalParams(channel=terminal, claim=claim)
    await client.request("createTerminal", params, timeout=TIMEOUT)
    return terminal


async def _told(node: ShardedNode, terminal: str, owner: str) -> None:
    """Wait (bounded) until ``node`` heard ``owner`` report ``terminal``."""
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _true(node.host.terminal_node(terminal) == owner))


async def test_a_client_of_one_node_drives_a_terminal_another_node_made(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """docs/scale-out.md "Routing": a terminal made on node-a (claimed by a client:
    of no session at all) is subscribed to, written to, resized, left and disposed of by
    a client of node-b — each request forwarded to node-a, which runs the terminal; its
    output reaches node-b's client on node-b's feed."""
    shell = {"terminal_shell": ("/bin/sh",), "workspace_roots": (str(tmp_path),)}
    async with (
        running(url, nats_bus, name, "node-a", **shell) as a,
        running(url, nats_bus, name, "node-b", **shell) as b,
        AhpClient.connect(a.urls[0]) as on_a,
        AhpClient.connect(b.urls[0]) as on_b,
    ):
        terminal = await _terminal_on(url, on_a, in_directory=tmp_path)
        await _told(b, terminal, "node-a")
        snapshot = await on_b.subscribe(terminal, timeout=TIMEOUT)  # node-a's snapshot
        assert isinstance(snapshot, TerminalState)
        assert snapshot.lifecycle.status == "running"
        since = len(on_b.envelopes)
        seq = await on_b.dispatch(terminal, TerminalInputAction(data="echo routed-$((6*7))\n"))
        # The shell echoes the input, then runs it: the sum is the command's output.
        await on_b.wait_for(lambda c: "routed-42" in terminal_output(c, terminal), timeout=TIMEOUT)
        assert "echo routed-$((6*7))" in terminal_output(on_b, terminal)
        assert own_answers(on_b, since) == [(seq, False)]  # applied on node-a, echoed here
        since = len(on_b.envelopes)
        seq = await on_b.dispatch(terminal, TerminalResizedAction(cols=91, rows=17))
        await on_b.wait_for(lambda c: len(own_answers(c, since)) == 1, timeout=TIMEOUT)
        assert own_answers(on_b, since) == [(seq, False)]
        actor = a.host.workspace_channels[terminal]
        assert (actor.state.cols, actor.state.rows) == (91, 17)  # applied by node-a
        assert terminal in a.host.workspace_channels
        assert terminal not in b.host.workspace_channels
        forwarded = [c for c in a.host.hub.subscribers(terminal) if c.forwarded]
        assert len(forwarded) == 1  # node-b's route is subscribed on node-a
        await on_b.unsubscribe(terminal, timeout=TIMEOUT)
        async with asyncio.timeout(TIMEOUT):
            await until(lambda: _true(not a.host.hub.subscribers(terminal)))
        await on_b.request("disposeTerminal", {"channel": terminal}, timeout=TIMEOUT)
        assert terminal not in a.host.workspace_channels
        assert not on_b.closed
        assert increasing(on_b)


async def test_a_terminal_of_a_node_that_stopped_answers_that_it_ended_with_it(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """A terminal lives and ends with its node: once node-b is silent (a lease without a
    heartbeat), node-a's client asking for node-b's terminal gets -32603 naming node-b,
    and stays connected."""
    shell = {"terminal_shell": ("/bin/sh",), "workspace_roots": (str(tmp_path),)}
    async with (
        running(url, nats_bus, name, "node-a", **shell) as a,
        running(url, nats_bus, name, "node-b", **shell) as b,
        AhpClient.connect(a.urls[0]) as on_a,
        AhpClient.connect(b.urls[0]) as on_b,
    ):
        terminal = await _terminal_on(url, on_b)
        await _told(a, terminal, "node-b")
        await b.abort()
        assert a.routes is not None
        routes = a.routes
        async with asyncio.timeout(TIMEOUT):
            await until(lambda: _true(not routes.alive("node-b")))
        for ask in (
            on_a.subscribe(terminal, timeout=TIMEOUT),
            on_a.request("disposeTerminal", {"channel": terminal}, timeout=TIMEOUT),
        ):
            with pytest.raises(RemoteError) as ended:
                await ask
            assert ended.value.code == -32603
            assert "node-b" in str(ended.value)
            assert "not answering" in str(ended.value)
        assert not on_a.closed
        assert routes.failed == 0


async def test_the_owner_decides_who_may_use_a_terminal_a_client_reaches_through_another_node(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """Multi-user mode: alice's terminal is on node-b. Through node-a, bob can neither
    subscribe to it (-32009, node-b's answer), write to it (his dispatch comes back
    refused), nor dispose of it; alice can use it."""
    shell = ("/bin/sh",)
    async with _alice_and_bob(url, nats_bus, name, tmp_path, terminal_shell=shell) as (
        a,
        b,
        alice_b,
        alice_a,
        bob_a,
    ):
        terminal = await _terminal_on(url, alice_b)
        await _told(a, terminal, "node-b")
        with pytest.raises(RemoteError) as refused:
            await bob_a.subscribe(terminal, timeout=TIMEOUT)
        assert refused.value.code == -32009
        since = len(bob_a.envelopes)
        seq = await bob_a.dispatch(terminal, TerminalInputAction(data="echo bob\n"))
        await bob_a.wait_for(lambda c: len(own_answers(c, since)) == 1, timeout=TIMEOUT)
        assert own_answers(bob_a, since) == [(seq, True)]
        with pytest.raises(RemoteError) as not_his:
            await bob_a.request("disposeTerminal", {"channel": terminal}, timeout=TIMEOUT)
        assert not_his.value.code == -32009
        assert terminal in b.host.workspace_channels
        await alice_a.subscribe(terminal, timeout=TIMEOUT)
        await alice_a.dispatch(terminal, TerminalInputAction(data="echo alice-$((6*7))\n"))
        await alice_a.wait_for(
            lambda c: "alice-42" in terminal_output(c, terminal), timeout=TIMEOUT
        )
        assert "bob" not in terminal_output(alice_a, terminal)


async def test_a_node_that_restarts_is_told_the_other_nodes_terminals(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """node-b, restarted (same name, so node-c knew it) after node-c — not the root owner,
    which tells its terminals on every notice — made a terminal, is told it when its first
    ``node/terminals`` says it started: it knows where the terminal's requests go (and,
    were it to own the root, would list it)."""
    shell = {"terminal_shell": ("/bin/sh",), "workspace_roots": (str(tmp_path),)}
    async with (
        running(url, nats_bus, name, "node-a", **shell) as a,
        running(url, nats_bus, name, "node-c", **shell) as c,
        AhpClient.connect(c.urls[0]) as on_c,
    ):
        assert (await owners(url))[ROOT] == ("node-a", 1)
        first = ShardedNode(replace(settings(url, nats_bus, name, "node-b"), **shell))
        await first.start()
        try:
            async with asyncio.timeout(TIMEOUT):
                await until(lambda: _true("node-b" in c.host.node_terminals))
        finally:
            await first.stop()  # drained: the same name may start again at once
        terminal = await _terminal_on(url, on_c)
        await _told(a, terminal, "node-c")
        async with running(url, nats_bus, name, "node-b", **shell) as b:
            await _told(b, terminal, "node-c")
            assert [t.resource for t in b.host.node_terminals["node-c"]] == [terminal]
            # And its start left node-c's running terminal alone: loaded as node-b's own,
            # exited, it would have committed terminal/exited into node-c's terminal.
            assert terminal not in b.host.workspace_channels
            logged = await query(url, "SELECT entries FROM log WHERE channel = $1", terminal)
            assert not any(b"terminal/exited" in bytes(row[0]) for row in logged)


async def test_a_client_of_one_node_reads_the_changesets_of_a_session_another_node_owns(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """docs/scale-out.md "Routing": a changeset is its session's channel, so a
    client of node-b subscribing to the changesets of node-a's session (the chat's, the
    turn's, the session's) is answered by node-a — the files its agent changed — and
    node-b loads no changeset of its own; a file changed later reaches node-b's client
    on node-b's feed, and node-a decides the refusal of an action on it."""
    async with (
        running(url, nats_bus, name, "node-a") as a,
        running(url, nats_bus, name, "node-b") as b,
        AhpClient.connect(a.urls[0]) as on_a,
        AhpClient.connect(b.urls[0]) as on_b,
    ):
        chat = await on_a.open_chat("echo", timeout=TIMEOUT)
        session = await session_of(url, chat)
        assert (await owners(url))[session] == ("node-a", 1)
        await on_a.ask(chat, "hello", timeout=TIMEOUT)
        turn = on_a.view(chat, ChatState).turns[0]
        # The turn's agent changed a file (node-a's, as an agent's file change reaches it).
        request = TurnRequest(session=session, chat=chat, turn_id=turn.id, message=turn.message)
        first, second = tmp_path / "one.txt", tmp_path / "two.txt"
        await a.host.file_changed(request, FileChange(str(first), after="one\n", created=True))
        uris = (chat_changeset(chat), turn_changeset(session, turn.id), session_changeset(session))
        for uri in uris:
            state = await on_b.subscribe(uri, timeout=TIMEOUT)  # node-a's snapshot
            assert isinstance(state, ChangesetState), state
            assert [f.id for f in state.files] == [file_uri(first)], uri
            assert uri in a.host.workspace_channels
            assert uri not in b.host.workspace_channels
            assert [c for c in a.host.hub.subscribers(uri) if c.forwarded]
        # A later change reaches node-b's client on node-b's feed.
        await a.host.file_changed(request, FileChange(str(second), after="two\n", created=True))

        def set_files(c: AhpClient, uri: str) -> set[str]:
            return {
                e.action.file.id
                for e in c.envelopes
                if e.channel == uri and isinstance(e.action, ChangesetFileSetAction)
            }

        for uri in uris:
            await on_b.wait_for(
                lambda c, uri=uri: file_uri(second) in set_files(c, uri), timeout=TIMEOUT
            )
        assert increasing(on_b)
        # node-a decides node-b's client's actions on it: one applied, one refused.
        since = len(on_b.envelopes)
        review = ChangesetFilesReviewChangedAction(files=(file_uri(first),), reviewed=True)
        applied = await on_b.dispatch(uris[0], review)
        unknown = ChangesetFilesReviewChangedAction(files=("file:///nowhere",), reviewed=True)
        refused_seq = await on_b.dispatch(uris[0], unknown)
        await on_b.wait_for(lambda c: len(own_answers(c, since)) == 2, timeout=TIMEOUT)
        assert own_answers(on_b, since) == [(applied, False), (refused_seq, True)]
        files = a.host.workspace_channels[uris[0]].state.files
        assert [f.reviewed for f in files if f.id == file_uri(first)] == [True]
        # No operation is offered: node-a's answer, through node-b.
        with pytest.raises(RemoteError) as refused:
            await on_b.request(
                "invokeChangesetOperation",
                {"channel": uris[0], "operationId": "nope"},
                timeout=TIMEOUT,
            )
        assert refused.value.code == -32602
        for uri in uris:
            await on_b.unsubscribe(uri, timeout=TIMEOUT)
        async with asyncio.timeout(TIMEOUT):
            await until(lambda: _true(not any(a.host.hub.subscribers(uri) for uri in uris)))
        assert not any(uri in b.host.workspace_channels for uri in uris)
        assert not on_b.closed
        # A refusal carries the number reached, not one of its own: numbers never go back.
        numbers = [e.server_seq for e in on_b.envelopes]
        assert numbers == sorted(numbers)


async def test_a_terminal_a_client_claimed_on_another_node_is_listed_for_its_user_only(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """Multi-user mode: alice's client of node-b (not the root's owner) makes a terminal
    it claims itself (of no session). node-a, which writes the root channel, never met
    that client, yet alice sees the terminal in the root state through both nodes — the
    owner of the terminal tells its claimant's user with it — and bob does not."""
    shell = ("/bin/sh",)
    async with _alice_and_bob(url, nats_bus, name, tmp_path, terminal_shell=shell) as (
        a,
        _b,
        alice_b,
        alice_a,
        bob_a,
    ):
        terminal = await _terminal_on(url, alice_b, in_directory=tmp_path)
        await _told(a, terminal, "node-b")
        for client in (alice_a, alice_b):
            await client.subscribe(ROOT, timeout=TIMEOUT)  # a snapshot made by node-a
            await client.wait_for(lambda c: terminal in terminals(c), timeout=TIMEOUT)
        await bob_a.subscribe(ROOT, timeout=TIMEOUT)
        # bob's root view follows the same envelopes: alice's client's next terminal too.
        later = await _terminal_on(url, alice_b, in_directory=tmp_path)
        await alice_a.wait_for(lambda c: later in terminals(c), timeout=TIMEOUT)
        assert terminal not in terminals(bob_a)
        assert later not in terminals(bob_a)


def _content(state: TerminalState) -> str:
    return "".join(getattr(p, "value", "") or getattr(p, "output", "") for p in state.content)


async def test_a_node_that_restarts_shows_its_own_earlier_terminals_and_no_other_nodes(
    url: str, name: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """node-b makes a terminal that prints, and stops; node-c's terminal runs on. node-b
    started again under its name loads its own terminal — exited, with its output, listed
    in the root state again — and not node-c's, which goes on running on node-c."""
    shell = {"terminal_shell": ("/bin/sh",), "workspace_roots": (str(tmp_path),)}
    async with (
        running(url, nats_bus, name, "node-a", **shell) as a,
        running(url, nats_bus, name, "node-c", **shell) as c,
        AhpClient.connect(a.urls[0], subscriptions=[ROOT]) as on_a,
        AhpClient.connect(c.urls[0]) as on_c,
    ):
        first = ShardedNode(replace(settings(url, nats_bus, name, "node-b"), **shell))
        await first.start()
        try:
            async with AhpClient.connect(first.urls[0]) as on_b:
                mine = await _terminal_on(url, on_b)
                await on_b.subscribe(mine, timeout=TIMEOUT)
                await on_b.dispatch(mine, TerminalInputAction(data="echo before-$((6*7))\n"))
                await on_b.wait_for(
                    lambda cl: "before-42" in terminal_output(cl, mine), timeout=TIMEOUT
                )
        finally:
            await first.stop()  # its terminal ends (exited), everything commits
        theirs = await _terminal_on(url, on_c)
        async with (
            running(url, nats_bus, name, "node-b", **shell) as b,
            AhpClient.connect(b.urls[0]) as on_b,
        ):
            assert mine in b.host.workspace_channels
            assert theirs not in b.host.workspace_channels
            state = await on_b.subscribe(mine, timeout=TIMEOUT)
            assert isinstance(state, TerminalState)
            assert state.lifecycle.status == "exited"
            assert "before-42" in _content(state)
            # The root's owner lists it again, beside node-c's running one.
            await on_a.wait_for(lambda cl: mine in terminals(cl), timeout=TIMEOUT)
            assert theirs in terminals(on_a)
            assert c.host.workspace_channels[theirs].state.lifecycle.status == "running"

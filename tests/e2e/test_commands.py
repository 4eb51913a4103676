"""Commands over real sockets: sessions, chats (fork, side chat), paging, catalogue."""

from __future__ import annotations

import uuid

import pytest

from ahp_server.client import AhpClient, RemoteError
from ahp_server.protocol.types import (
    ChatOriginFork,
    ChatOriginSideChat,
    ChatState,
    ChatWorkingDirectorySetAction,
    ForkChatSource,
    ListSessionsResult,
    SessionState,
    SideChatSelection,
    SideChatSource,
)
from tests.conftest import RunningHost
from tests.e2e.helpers import TIMEOUT, assert_mirrors_host, session_of, turn_done

ROOT = "ahp-root://"


async def test_session_lifecycle_and_catalogue(running_host: RunningHost) -> None:
    host = running_host.host
    async with AhpClient.connect(running_host.url, subscriptions=[ROOT]) as client:
        chat = await client.open_chat()
        session = session_of(host, chat)
        state = client.confirmed(session, SessionState)
        assert state.lifecycle == "ready"
        assert state.default_chat == chat
        assert [c.resource for c in state.chats] == [chat]
        await client.ask(chat, "name me", timeout=TIMEOUT)
        await client.wait_for(
            lambda c: c.confirmed(session, SessionState).title == "name me", timeout=TIMEOUT
        )
        listed = await client.list_sessions()
        assert isinstance(listed, ListSessionsResult)
        assert [s.resource for s in listed.items] == [session]
        assert listed.items[0].title == "name me"
        kinds = [n.method for n in client.notifications]
        assert "root/sessionAdded" in kinds
        assert "root/sessionSummaryChanged" in kinds
        await client.dispose_session(session)
        assert (await client.list_sessions()).items == ()
        assert "root/sessionRemoved" in [n.method for n in client.notifications]
        assert session not in host.sessions
        assert chat not in host.chats


async def test_create_session_errors(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        uri = await client.create_session()
        with pytest.raises(RemoteError) as exists:
            await client.create_session(session=uri)
        assert exists.value.code == -32003
        with pytest.raises(RemoteError) as provider:
            await client.create_session("no-such-agent")
        assert provider.value.code == -32002
    # A primary outside the working directories can only be said at 0.7 (1.0's
    # primary is index 0 of workingDirectories): a 0.7 client's request.
    async with AhpClient.connect(running_host.url, protocol_versions=["0.7.0"]) as older:
        with pytest.raises(RemoteError) as primary:
            await older.request(
                "createSession",
                {
                    "channel": f"ahp-session:/{uuid.uuid4()}",
                    "workingDirectories": ["file:///tmp/a"],
                    "primaryWorkingDirectory": "file:///tmp/b",
                },
            )
        assert primary.value.code == -32602


async def test_list_sessions_pages_with_a_cursor(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        made = {await client.create_session() for _ in range(5)}
        first = await client.list_sessions(limit=2)
        assert len(first.items) == 2
        assert isinstance(first.next_cursor, str)
        seen = [s.resource for s in first.items]
        cursor = first.next_cursor
        while isinstance(cursor, str):
            page = await client.list_sessions(limit=2, cursor=cursor)
            seen += [s.resource for s in page.items]
            cursor = page.next_cursor
        assert sorted(seen) == sorted(made)
        # Malformed cursors are -32602, never an internal error: garbage, a
        # number past int()'s 4,300-digit limit, a non-ASCII digit, a negative.
        for cursor in ("garbage", "offset:" + "9" * 5000, "offset:²", "offset:-1", "offset:"):
            with pytest.raises(RemoteError) as bad:
                await client.list_sessions(cursor=cursor)
            assert bad.value.code == -32602, cursor
            assert len(bad.value.message) < 200  # the cursor is not echoed whole
        assert await client.request("ping", {}) is None  # the connection is fine


async def test_fork_and_side_chats(running_host: RunningHost) -> None:
    host = running_host.host
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        session = session_of(host, chat)
        await client.ask(chat, "one", timeout=TIMEOUT)
        await client.ask(chat, "two", timeout=TIMEOUT)
        first_turn = client.confirmed(chat, ChatState).turns[0].id

        fork = await client.create_chat(
            session, source=ForkChatSource(chat=chat, turn_id=first_turn), subscribe=True
        )
        forked = client.confirmed(fork, ChatState)
        assert [t.message.text for t in forked.turns] == ["one"]
        assert forked.origin == ChatOriginFork(chat=chat, turn_id=first_turn)

        selection = SideChatSelection(text="one")
        side = await client.create_chat(
            session,
            source=SideChatSource(chat=chat, turn_id=first_turn, selection=selection),
            subscribe=True,
        )
        side_state = client.confirmed(side, ChatState)
        assert side_state.turns == ()  # visible history starts empty
        assert side_state.origin == ChatOriginSideChat(
            chat=chat, turn_id=first_turn, selection=selection
        )
        assert host.chats[side].source.turns[-1].id == first_turn  # context for the agent only
        assert await client.ask(side, "side question", timeout=TIMEOUT) == "side question"
        await client.wait_for(
            lambda c: len(c.confirmed(session, SessionState).chats) == 3, timeout=TIMEOUT
        )
        await assert_mirrors_host(client, host, session, chat, fork, side)


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ({"kind": "fork", "chat": "SELF", "turnId": "x"}, "own source"),
        ({"kind": "fork", "chat": "ahp-chat:/elsewhere", "turnId": "x"}, "unknown chat"),
        ({"kind": "fork", "chat": "CHAT", "turnId": "missing"}, "unknown turn"),
        ({"kind": "sideChat", "chat": "CHAT", "turnId": "missing"}, "unknown turn"),
    ],
)
async def test_bad_chat_sources_are_rejected(
    running_host: RunningHost, source: dict[str, str], why: str
) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        session = session_of(running_host.host, chat)
        new = f"ahp-chat:/{uuid.uuid4()}"
        resolved = {k: v.replace("SELF", new).replace("CHAT", chat) for k, v in source.items()}
        with pytest.raises(RemoteError) as caught:
            await client.request(
                "createChat", {"channel": session, "chat": new, "source": resolved}
            )
        assert caught.value.code == -32602, why
        assert new not in running_host.host.chats


async def test_a_fork_of_an_active_turn_is_rejected(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        session = session_of(running_host.host, chat)
        turn = await client.send_message(chat, "/slow 50 a b c d e f g")
        with pytest.raises(RemoteError):
            await client.create_chat(session, source=ForkChatSource(chat=chat, turn_id=turn))


async def test_chat_working_directories_must_belong_to_the_session(
    running_host: RunningHost,
) -> None:
    host = running_host.host
    async with AhpClient.connect(running_host.url) as client:
        session = await client.create_session(
            working_directories=["file:///tmp/a", "file:///tmp/b"], subscribe=True
        )
        with pytest.raises(RemoteError) as caught:
            await client.create_chat(session, working_directories=["file:///tmp/elsewhere"])
        assert caught.value.code == -32602
        chat = await client.create_chat(
            session, working_directories=["file:///tmp/a"], subscribe=True
        )
        state = client.confirmed(chat, ChatState)
        assert state.working_directories == ("file:///tmp/a",)
        assert state.working_directories[0] == "file:///tmp/a"  # 1.0: the primary is index 0
        await client.dispatch(chat, ChatWorkingDirectorySetAction(directory="file:///tmp/b"))
        await client.dispatch(chat, ChatWorkingDirectorySetAction(directory="file:///tmp/nope"))
        await client.wait_for(
            lambda c: (
                c.confirmed(chat, ChatState).working_directories
                == ("file:///tmp/a", "file:///tmp/b")
            ),
            timeout=TIMEOUT,
        )
        await client.wait_for(lambda c: c.view(chat) == c.confirmed(chat), timeout=TIMEOUT)
        await assert_mirrors_host(client, host, chat)


async def test_dispose_chat_updates_the_catalogue(running_host: RunningHost) -> None:
    host = running_host.host
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        session = session_of(host, chat)
        extra = await client.create_chat(session, subscribe=True)
        await client.dispose_chat(extra)
        await client.wait_for(
            lambda c: [x.resource for x in c.confirmed(session, SessionState).chats] == [chat],
            timeout=TIMEOUT,
        )
        with pytest.raises(RemoteError) as caught:
            await client.dispose_chat(extra)
        assert caught.value.code == -32008
        await client.dispose_chat(chat)
        await client.wait_for(
            lambda c: (
                c.confirmed(session, SessionState).default_chat is None
                or not isinstance(c.confirmed(session, SessionState).default_chat, str)
            ),
            timeout=TIMEOUT,
        )


async def test_initial_message_starts_the_first_turn(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        session = session_of(running_host.host, chat)
        new = await client.create_chat(session, initial_message="kick off", subscribe=True)
        await client.wait_for(lambda c: turn_done(c, new), timeout=TIMEOUT)
        assert client.confirmed(new, ChatState).turns[0].message.text == "kick off"


async def test_bounded_snapshot_and_fetch_turns(running_host: RunningHost) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        for i in range(6):
            await alice.ask(chat, f"turn {i}", timeout=TIMEOUT)
        await bob.subscribe(chat, turns=2)
        limited = bob.confirmed(chat, ChatState)
        assert [t.message.text for t in limited.turns] == ["turn 4", "turn 5"]
        assert isinstance(limited.turns_next_cursor, str)
        while isinstance(bob.confirmed(chat, ChatState).turns_next_cursor, str):
            before = len(bob.confirmed(chat, ChatState).turns)
            await bob.request(
                "fetchTurns",
                {"channel": chat, "cursor": bob.confirmed(chat, ChatState).turns_next_cursor},
            )
            # fetchTurns dispatched chat/turnsLoaded before replying.
            assert len(bob.confirmed(chat, ChatState).turns) > before
        assert [t.message.text for t in bob.confirmed(chat, ChatState).turns] == [
            f"turn {i}" for i in range(6)
        ]
        with pytest.raises(RemoteError) as bad:
            await bob.request("fetchTurns", {"channel": chat, "cursor": "nonsense"})
        assert bad.value.code == -32602
        await assert_mirrors_host(alice, host, chat)


async def test_older_clients_never_receive_newer_action_types(running_host: RunningHost) -> None:
    async with (
        AhpClient.connect(running_host.url) as current,
        AhpClient.connect(running_host.url, protocol_versions=["0.6.0"]) as older,
    ):
        assert older.protocol_version == "0.6.0"
        session = await current.create_session(
            working_directories=["file:///tmp/a"], subscribe=True
        )
        chat = await current.create_chat(session, subscribe=True)
        await older.subscribe(chat)
        await current.dispatch(chat, ChatWorkingDirectorySetAction(directory="file:///tmp/a"))
        marker = await current.send_message(chat, "after")
        await older.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        older_types = {getattr(e.action, "type", "") for e in older.envelopes}
        current_types = {getattr(e.action, "type", "") for e in current.envelopes}
        assert "chat/workingDirectorySet" in current_types  # introduced in 0.7.0
        assert "chat/workingDirectorySet" not in older_types
        assert older.confirmed(chat, ChatState).turns[0].id == marker

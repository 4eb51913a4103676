"""``moveChat`` over real sockets (issue 28, item 2).

Layer: tests (end to end). Raw 1.0 peers (``tests/e2e/test_versions.py``
``Peer``: every frame validated against the 1.0 schema) reorder chats within a
session and move them between sessions; a 0.7 peer on the same sessions sees
a moved chat leave one session and join the other; the move survives a
restart, and a catalogue a crash left out of step is mended when its session
loads. docs/protocol.md "Moving and reordering chats".
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from ahp_server.config import Settings
from ahp_server.host.host import DB_FILE
from tests.conftest import RunningHost, start_host
from tests.e2e.test_versions import (
    ROOT,
    Peer,
    RemoteFailure,
    new_chat,
    start_turn,
    tool_turn,
)
from tests.postgres import postgres_schema

INVALID_PARAMS = -32602
NOT_FOUND = -32008
METHOD_NOT_FOUND = -32601


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[RunningHost]:
    running = await start_host(Settings(data_dir=str(tmp_path / "data")))
    try:
        yield running
    finally:
        await running.stop()


async def open_peer(running: RunningHost, offered: list[str] | None = None) -> Peer:
    peer = Peer(await connect(running.url), offered or ["1.0.0", "0.9.0"], validate=offered is None)
    await peer.initialize()
    return peer


async def order(peer: Peer, session: str) -> list[str]:
    state = (await peer.call("subscribe", {"channel": session}))["snapshot"]["state"]
    return [c["resource"] for c in state["chats"]]


async def mended(peer: Peer, session: str, expected: list[str], kind: str) -> None:
    """``session``'s catalogue becomes ``expected``: already in the snapshot, or by the
    ``kind`` action that mends it after (the peer is subscribed by then)."""
    if await order(peer, session) != expected:
        await peer.until(lambda: peer.actions(session, kind))
        assert await order(peer, session) == expected


async def subscribed(peer: Peer, channel: str) -> dict[str, Any]:
    state: dict[str, Any] = (await peer.call("subscribe", {"channel": channel}))["snapshot"][
        "state"
    ]
    return state


async def add_chat(peer: Peer, session: str) -> str:
    chat = f"ahp-chat:/{uuid.uuid4()}"
    await peer.call("createChat", {"channel": session, "chat": chat})
    await peer.call("subscribe", {"channel": chat})
    return chat


async def move(peer: Peer, chat: str, destination: dict[str, Any]) -> str:
    result = await peer.call("moveChat", {"channel": chat, "destination": destination})
    session: str = result["session"]
    return session


async def refused(peer: Peer, chat: str, destination: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(RemoteFailure) as caught:
        await move(peer, chat, destination)
    return caught.value.error


async def test_chats_are_reordered_within_their_session(durable: RunningHost) -> None:
    peer = await open_peer(durable)
    try:
        session, default = await new_chat(peer)
        first, second = await add_chat(peer, session), await add_chat(peer, session)
        assert await order(peer, session) == [default, first, second]
        state = (await peer.call("subscribe", {"channel": first}))["snapshot"]["state"]
        assert state["movable"] is True
        dstate = (await peer.call("subscribe", {"channel": default}))["snapshot"]["state"]
        assert dstate["movable"] is False
        assert await move(peer, second, {"kind": "session", "session": session, "after": default})
        assert await order(peer, session) == [default, second, first]
        await move(peer, first, {"kind": "session", "session": session})  # no anchor: first
        assert await order(peer, session) == [first, default, second]
        reorders = peer.actions(session, "session/chatsReordered")
        assert [a["chats"] for a in reorders][-1] == [first, default, second]
        listed = await peer.call("listSessions", {"channel": ROOT})
        (summary,) = [s for s in listed["items"] if s["resource"] == session]
        assert [c["resource"] for c in summary["chats"]] == [first, default, second]
        assert not peer.invalid, peer.invalid[:5]
    finally:
        await peer.close()


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_a_chat_moves_to_another_session_and_stays_there(tmp_path: Path, store: str) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if store == "sqlite":
            settings = Settings(data_dir=str(tmp_path / "data"))
        else:
            settings = Settings(store=await stack.enter_async_context(postgres_schema()))
        await moved_and_restarted(settings)


async def moved_and_restarted(settings: Settings) -> None:
    durable = await start_host(settings)
    try:
        source, target, chat, turns, defaults = await move_and_use(durable)
    finally:
        await durable.stop()
    again = await start_host(settings)
    try:
        late = await open_peer(again)
        try:
            assert await order(late, source) == [defaults[0]]
            assert await order(late, target) == [chat, defaults[1]]
            state = (await late.call("subscribe", {"channel": chat}))["snapshot"]["state"]
            assert [t["id"] for t in state["turns"]] == turns
            assert again.host.chat_index[chat] == target
        finally:
            await late.close()
    finally:
        await again.stop()


async def move_and_use(durable: RunningHost) -> tuple[str, str, str, list[str], list[str]]:
    """A chat with a turn moved to another session, then used there:
    (source, target, chat, its turns, the two default chats)."""
    peer = await open_peer(durable)
    legacy = await open_peer(durable, ["0.7.0"])
    try:
        source, source_default = await new_chat(peer)
        target, target_default = await new_chat(peer)
        chat = await add_chat(peer, source)
        turn = await tool_turn(peer, chat)
        for session in (source, target):
            await legacy.call("subscribe", {"channel": session})
        assert await move(peer, chat, {"kind": "session", "session": target}) == target
        assert await order(peer, source) == [source_default]
        assert await order(peer, target) == [chat, target_default]
        # The chat keeps its URI, turns and origin, and answers in its new session.
        state = (await peer.call("subscribe", {"channel": chat}))["snapshot"]["state"]
        assert [t["id"] for t in state["turns"]] == [turn]
        # It works in its new session's folder: none of its own was the target's.
        assert state["workingDirectories"] == (await subscribed(peer, target))["workingDirectories"]
        second = await tool_turn(peer, chat)
        entry = {
            c["resource"]: c
            for c in (await peer.call("subscribe", {"channel": target}))["snapshot"]["state"][
                "chats"
            ]
        }[chat]
        assert entry["status"] & 0b11111 == 1  # idle again: the mirror reaches the new session
        # A 0.7 client sees it leave one session and join the other, never a reorder.
        removed = await legacy.until(lambda: legacy.actions(source, "session/chatRemoved"))
        assert removed[-1]["chat"] == chat
        added = await legacy.until(lambda: legacy.actions(target, "session/chatAdded"))
        assert added[-1]["summary"]["resource"] == chat
        assert not [e for e in legacy.envelopes if e["action"]["type"] == "session/chatsReordered"]
        assert not peer.invalid, peer.invalid[:5]
    finally:
        await peer.close()
        await legacy.close()
    return source, target, chat, [turn, second], [source_default, target_default]


async def test_what_cannot_move_is_refused_and_nothing_changes(
    durable: RunningHost, tmp_path: Path
) -> None:
    peer = await open_peer(durable)
    legacy = await open_peer(durable, ["0.7.0"])
    try:
        source, default = await new_chat(peer)
        target, _ = await new_chat(peer)
        chat = await add_chat(peer, source)
        before = {s: await order(peer, s) for s in (source, target)}
        here = {"kind": "session", "session": source}
        cases: list[tuple[str, dict[str, Any], int, str]] = [
            (default, {"kind": "session", "session": target}, INVALID_PARAMS, "not movable"),
            (chat, {**here, "after": chat}, INVALID_PARAMS, "after itself"),
            (chat, {**here, "after": "ahp-chat:/nowhere"}, INVALID_PARAMS, "is not a chat"),
            (chat, {"kind": "elsewhere"}, INVALID_PARAMS, "not supported"),
            (chat, {"kind": "session", "session": "ahp-session:/none"}, -32001, "no session"),
            ("ahp-chat:/none", here, NOT_FOUND, "no chat"),
        ]
        for uri, destination, code, text in cases:
            error = await refused(peer, uri, destination)
            assert error["code"] == code, (destination, error)
            assert text in error["message"], (destination, error)
        # A running turn: refused, and the chat stays where it is.
        turn = await start_turn(peer, chat, "/tool")
        await peer.until(
            lambda: [a for a in peer.actions(chat, "chat/toolCallReady") if a["turnId"] == turn]
        )
        error = await refused(peer, chat, {"kind": "session", "session": target})
        assert error["code"] == INVALID_PARAMS
        assert "turn running" in error["message"]
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        other = f"ahp-session:/{uuid.uuid4()}"
        await peer.call(
            "createSession",
            {"channel": other, "provider": "echo", "workingDirectories": [elsewhere.as_uri()]},
        )
        await peer.call("subscribe", {"channel": other})
        await peer.until(lambda: peer.actions(other, "session/ready"))
        await peer.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn, "duration": 1})
        await peer.until(lambda: peer.actions(chat, "chat/turnCancelled"))
        (cancelled,) = [
            e
            for e in peer.envelopes
            if e["channel"] == chat and e["action"]["type"] == "chat/turnCancelled"
        ]
        assert "rejectionReason" not in cancelled, cancelled
        assert {s: await order(peer, s) for s in (source, target)} == before
        assert durable.host.chat_index[chat] == source
        # A session without the chat's working directory takes it, and the chat
        # works in the session's folder from then on.
        assert await move(peer, chat, {"kind": "session", "session": other}) == other
        state = (await peer.call("subscribe", {"channel": chat}))["snapshot"]["state"]
        assert state["workingDirectories"] == [elsewhere.as_uri()]
        entry = {c["resource"]: c for c in (await subscribed(peer, other))["chats"]}[chat]
        assert entry["workingDirectories"] == [elsewhere.as_uri()]
        # A 0.7 client has no such command.
        with pytest.raises(RemoteFailure) as caught:
            await legacy.call("moveChat", {"channel": chat, "destination": here})
        assert caught.value.error["code"] == METHOD_NOT_FOUND
        assert not peer.invalid, peer.invalid[:5]
    finally:
        await peer.close()
        await legacy.close()


async def test_a_catalogue_a_crash_left_out_of_step_is_mended(tmp_path: Path) -> None:
    """The ownership row written, the catalogues not yet (a crash inside ``moveChat``):
    each session mends its catalogue when it loads."""
    running = await start_host(Settings(data_dir=str(tmp_path / "data")))
    peer = await open_peer(running)
    try:
        source, source_default = await new_chat(peer)
        target, target_default = await new_chat(peer)
        chat = await add_chat(peer, source)
    finally:
        await peer.close()
        await running.stop()
    with sqlite3.connect(tmp_path / "data" / DB_FILE) as conn:
        conn.execute("UPDATE channels SET session = ? WHERE uri = ?", (target, chat))
    conn.close()
    again = await start_host(Settings(data_dir=str(tmp_path / "data")))
    late = await open_peer(again)
    try:
        # Mended in the background once each session loads (the first subscribe).
        await mended(late, source, [source_default], "session/chatRemoved")
        await mended(late, target, [target_default, chat], "session/chatAdded")
        assert not late.invalid, late.invalid[:5]
    finally:
        await late.close()
        await again.stop()


async def test_a_chat_moves_into_a_session_made_for_it(durable: RunningHost) -> None:
    """``newSession``: a session of the same agent, the chat its non-movable default."""
    peer = await open_peer(durable)
    try:
        source, source_default = await new_chat(peer)
        chat = await add_chat(peer, source)
        turn = await tool_turn(peer, chat)
        made = await move(peer, chat, {"kind": "newSession"})
        assert made != source
        assert made in durable.host.session_index
        assert await order(peer, source) == [source_default]
        state = await subscribed(peer, made)
        if state["lifecycle"] != "ready":
            await peer.until(lambda: peer.actions(made, "session/ready"))
            state = await subscribed(peer, made)
        assert state["defaultChat"] == chat
        assert [c["resource"] for c in state["chats"]] == [chat]
        assert state["chats"][0]["movable"] is False
        assert state["provider"] == (await subscribed(peer, source))["provider"]
        moved = await subscribed(peer, chat)
        assert moved["movable"] is False
        assert [t["id"] for t in moved["turns"]] == [turn]
        # It answers in its new session, and as a default chat it moves no more.
        await tool_turn(peer, chat)
        error = await refused(peer, chat, {"kind": "session", "session": source})
        assert error["code"] == INVALID_PARAMS
        assert "not movable" in error["message"]
        listed = await peer.call("listSessions", {"channel": ROOT})
        assert made in [s["resource"] for s in listed["items"]]
        assert not peer.invalid, peer.invalid[:5]
    finally:
        await peer.close()

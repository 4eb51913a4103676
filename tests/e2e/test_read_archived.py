"""A chat's read and archived flags, over real sockets (issue 28, item 3).

Layer: tests (end to end). Raw 1.0 peers (``tests/e2e/test_versions.py``
``Peer``: every frame validated against the 1.0 schema) dispatch
``chat/isReadChanged`` / ``chat/isArchivedChanged``; the host keeps the
session's chat catalogue (``SessionChatSummary.status``) in step, archives the
session with its default chat, and leaves a chat unread when a turn ends with
nobody subscribed. A 0.7 peer on the same session sees the catalogue move and
never the 1.0 actions. docs/protocol.md "Read and archived chats".
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.test_versions import ROOT, Peer, new_chat, peers, start_turn, tool_turn

#: What a 1.0 client offers.
NEW = ["1.0.0", "0.9.0"]
__all__ = ["peers"]  # the raw peers fixture, from test_versions

IS_READ = 32
IS_ARCHIVED = 64


def catalogue_status(peer: Peer, session: str, chat: str) -> int | None:
    """The chat's catalogue status as the peer last heard it (``session/chatUpdated``)."""
    statuses = [
        a["changes"]["status"]
        for a in peer.actions(session, "session/chatUpdated")
        if a["chat"] == chat and "status" in a["changes"]
    ]
    return statuses[-1] if statuses else None


async def catalogue(peer: Peer, session: str) -> dict[str, int]:
    state = (await peer.call("subscribe", {"channel": session}))["snapshot"]["state"]
    return {c["resource"]: c["status"] for c in state["chats"]}


async def mark(peer: Peer, chat: str, flag: str, value: bool) -> None:
    """Dispatch ``chat/<flag>Changed`` and wait for its accepted echo."""
    kind = f"chat/{flag}Changed"
    before = len(peer.actions(chat, kind))
    await peer.dispatch(chat, {"type": kind, flag: value})
    await peer.until(lambda: len(peer.actions(chat, kind)) > before)
    echoed = [e for e in peer.envelopes if e["channel"] == chat and e["action"]["type"] == kind]
    assert "rejectionReason" not in echoed[-1], echoed[-1]


async def test_read_and_archived_flags_reach_the_catalogue_and_listings(
    peers: Callable[..., Any],
) -> None:
    peer = await peers(NEW)
    legacy = await peers(["0.7.0"], validate=False)
    session, chat = await new_chat(peer)
    await legacy.call("subscribe", {"channel": session})
    await tool_turn(peer, chat)
    await mark(peer, chat, "isRead", True)
    await peer.until(lambda: (catalogue_status(peer, session, chat) or 0) & IS_READ)
    assert (await catalogue(peer, session))[chat] & IS_READ
    # The 0.7 peer sees the catalogue follow, never the 1.0 action.
    await legacy.until(lambda: (catalogue_status(legacy, session, chat) or 0) & IS_READ)
    assert not [e for e in legacy.envelopes if e["action"]["type"].startswith("chat/is")]

    # A second chat archived: its entry says so, the session does not.
    side = f"ahp-chat:/{uuid.uuid4()}"
    await peer.call("createChat", {"channel": session, "chat": side})
    await peer.call("subscribe", {"channel": side})
    await mark(peer, side, "isArchived", True)
    await peer.until(lambda: (catalogue_status(peer, session, side) or 0) & IS_ARCHIVED)
    listed = await peer.call("listSessions", {"channel": ROOT})
    (summary,) = [s for s in listed["items"] if s["resource"] == session]
    statuses = {c["resource"]: c["status"] for c in summary["chats"]}
    assert statuses[side] & IS_ARCHIVED
    assert not statuses[chat] & IS_ARCHIVED
    assert not summary["status"] & IS_ARCHIVED
    assert not peer.invalid, peer.invalid[:5]


async def test_archiving_the_default_chat_archives_the_session(
    peers: Callable[..., Any],
) -> None:
    peer = await peers(NEW)
    session, chat = await new_chat(peer)
    await mark(peer, chat, "isArchived", True)
    (archived,) = await peer.until(lambda: peer.actions(session, "session/isArchivedChanged"))
    assert archived["isArchived"] is True
    state = (await peer.call("subscribe", {"channel": session}))["snapshot"]["state"]
    assert state["status"] & IS_ARCHIVED
    # Restoring the session itself leaves the chat as it is, and a later turn of
    # that chat does not archive the session again: only a change of the chat's flag does.
    await peer.dispatch(session, {"type": "session/isArchivedChanged", "isArchived": False})
    await peer.until(lambda: len(peer.actions(session, "session/isArchivedChanged")) == 2)
    await tool_turn(peer, chat)
    state = (await peer.call("subscribe", {"channel": session}))["snapshot"]["state"]
    assert not state["status"] & IS_ARCHIVED
    assert {c["resource"]: c["status"] for c in state["chats"]}[chat] & IS_ARCHIVED
    await mark(peer, chat, "isArchived", False)
    await peer.until(lambda: not (catalogue_status(peer, session, chat) or 0) & IS_ARCHIVED)
    assert len(peer.actions(session, "session/isArchivedChanged")) == 2  # already restored
    assert not peer.invalid, peer.invalid[:5]


@pytest.mark.parametrize("watched", [False, True])
async def test_a_turn_that_ends_unseen_leaves_its_chat_unread(
    peers: Callable[..., Any], watched: bool
) -> None:
    """Marked read during the turn, then nobody subscribed at its end: unread again.
    With a subscriber at the end, the read mark stands (the client decides)."""
    peer = await peers(NEW)
    helper = await peers(NEW)
    session, chat = await new_chat(peer)
    turn = await start_turn(peer, chat, "/tool")
    ready = await peer.until(
        lambda: [a for a in peer.actions(chat, "chat/toolCallReady") if a["turnId"] == turn]
    )
    await mark(peer, chat, "isRead", True)
    await peer.until(lambda: (catalogue_status(peer, session, chat) or 0) & IS_READ)
    if not watched:
        # A notification in 1.0 (commands.schema.json: no result), so sent without an id.
        frame = {"jsonrpc": "2.0", "method": "unsubscribe", "params": {"channel": chat}}
        await peer.ws.send(json.dumps(frame))
        assert await peer.call("ping", {}) is None  # one connection's messages run in order
    # Someone else approves the tool without subscribing to the chat.
    await helper.dispatch(
        chat,
        {
            "type": "chat/toolCallConfirmed",
            "turnId": turn,
            "toolCallId": ready[0]["toolCallId"],
            "approved": True,
            "confirmed": "user-action",
        },
    )
    # The turn's end reaches the session's catalogue (idle again).
    await peer.until(lambda: (catalogue_status(peer, session, chat) or 8) & 0b11111 == 1)
    status = (await catalogue(peer, session))[chat]
    assert bool(status & IS_READ) is watched
    assert not peer.invalid, peer.invalid[:5]

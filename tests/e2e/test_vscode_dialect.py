"""A scripted client in VS Code's dialect of 1.0, over real sockets (issue 27, item 6).

Layer: tests (end to end). What third-party hosts have recorded of VS Code's
agent-host client, played by a raw WebSocket peer (``tests/e2e/test_versions.py``
``Peer``, which validates every frame against ``../shared/spec-1.0/schema``):

* it offers ``["1.0.0", "0.10.0", "0.9.0"]`` and sends the token as ``?tkn=``;
* it names a session ``<provider>:/<uuid>`` and does not read ``defaultChat``:
  it subscribes to ``ahp-chat://default/<base64url(session URI)>``, which it
  computes, right after ``createSession``;
* it probes commands a host may lack and expects ``-32601``;
* after a dropped socket it opens a new one with ``reconnect``.

The kind of a channel is what created it, never its scheme: the session under
``copilot:`` is a session everywhere — its catalogue entry, its changesets, its
owner's access check, a restart.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from websockets.asyncio.client import connect

from ahp_server.config import Settings, UserConfig
from tests.conftest import RunningHost, start_host
from tests.e2e.test_versions import ROOT, TIMEOUT, Peer, RemoteFailure, start_turn, tool_turn

TOKEN = "vs-code-token-0123456789abcdef"
VS_CODE = ["1.0.0", "0.10.0", "0.9.0"]
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
PERMISSION_DENIED = -32009


def default_chat_of(session: str) -> str:
    """What VS Code computes: the session URI's UTF-8 in unpadded base64url."""
    encoded = base64.urlsafe_b64encode(session.encode()).decode().rstrip("=")
    return f"ahp-chat://default/{encoded}"


def changeset_of(session: str) -> str:
    """The session-wide changeset of a session not named ``ahp-session:/``."""
    return f"ahp-changeset:/{quote(session, safe='')}/changeset/session"


async def open_peer(url: str, token: str, client_id: str | None = None) -> Peer:
    peer = Peer(await connect(f"{url}/?tkn={token}"), VS_CODE, validate=True)
    if client_id is not None:
        peer.client_id = client_id
    return peer


async def failure(peer: Peer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC error ``method`` gets (the call must fail)."""
    with pytest.raises(RemoteFailure) as caught:
        await peer.call(method, params)
    return caught.value.error


@pytest.fixture
async def vs_code_host(tmp_path: Path) -> AsyncIterator[RunningHost]:
    running = await start_host(Settings(token=TOKEN, data_dir=str(tmp_path / "data")))
    try:
        yield running
    finally:
        await running.stop()


async def test_a_vs_code_session_under_its_providers_scheme_runs_and_survives(
    tmp_path: Path,
) -> None:
    vs_code_host = await start_host(Settings(token=TOKEN, data_dir=str(tmp_path / "data")))
    try:
        session, chat, turns = await first_life(vs_code_host)
    finally:
        await vs_code_host.stop()

    # A restart: the copilot: session is still a session, with its chat and turns.
    restarted = await start_host(Settings(token=TOKEN, data_dir=str(tmp_path / "data")))
    try:
        late = await open_peer(restarted.url, TOKEN)
        try:
            await late.initialize()
            state = (await late.call("subscribe", {"channel": session}))["snapshot"]["state"]
            assert state["defaultChat"] == chat
            assert state["lifecycle"] == "ready"
            kept = (await late.call("subscribe", {"channel": chat}))["snapshot"]["state"]["turns"]
            assert [t["id"] for t in kept] == turns
            listed = await late.call("listSessions", {"channel": ROOT})
            assert session in [s["resource"] for s in listed["items"]]
            assert not late.invalid, late.invalid[:5]
        finally:
            await late.close()
    finally:
        await restarted.stop()


async def first_life(vs_code_host: RunningHost) -> tuple[str, str, list[str]]:
    """A session made, used, dropped and reconnected to: (session, chat, turn ids)."""
    peer = await open_peer(vs_code_host.url, TOKEN)
    try:
        await peer.initialize()
        assert peer.version == "1.0.0"
        session = f"copilot:/{uuid.uuid4()}"
        chat = default_chat_of(session)
        assert await peer.call("createSession", {"channel": session, "provider": "echo"}) is None
        # Subscribed straight away, from the computed name, before the session is ready.
        await peer.call("subscribe", {"channel": session})
        await peer.call("subscribe", {"channel": chat})
        # Probes for what this host lacks: -32601, and the socket lives on.
        for method in ("listAutomationTriggerDefinitions", "resumeSession"):
            error = await failure(peer, method, {"channel": ROOT})
            assert error["code"] == METHOD_NOT_FOUND
        turn = await tool_turn(peer, chat)
        state = (await peer.call("subscribe", {"channel": session}))["snapshot"]["state"]
        assert state["defaultChat"] == chat
        assert [c["resource"] for c in state["chats"]] == [chat]
        listed = await peer.call("listSessions", {"channel": ROOT})
        (summary,) = [s for s in listed["items"] if s["resource"] == session]
        assert summary["defaultChat"] == chat
        # Its changeset is its own too, keyed by the whole URI (docs/workspace.md).
        snapshot = await peer.call("subscribe", {"channel": changeset_of(session)})
        assert snapshot["snapshot"]["resource"] == changeset_of(session)
        assert not peer.invalid, peer.invalid[:5]
        last_seen = max(e["serverSeq"] for e in peer.envelopes)
    finally:
        await peer.close()

    # A dropped socket: the new one opens with reconnect, and is served in 1.0.
    again = await open_peer(vs_code_host.url, TOKEN, peer.client_id)
    try:
        result = await again.call(
            "reconnect",
            {
                "channel": ROOT,
                "clientId": peer.client_id,
                "lastSeenServerSeq": last_seen,
                "subscriptions": [session, chat],
            },
        )
        assert result["type"] in ("replay", "snapshot")
        second = await tool_turn(again, chat)
        errored = await start_turn(again, chat, "/error")
        (error,) = await again.until(lambda: again.actions(chat, "chat/error"))
        assert error["part"]["kind"] == "error"  # a 1.0 socket
        assert not again.invalid, again.invalid[:5]
    finally:
        await again.close()
    return session, chat, [turn, second, errored]


@pytest.mark.parametrize(
    "uri",
    [
        "ahp-chat:/not-a-session",
        "ahp-root://",
        "ahp-terminal:/x",
        "file:///tmp/x",
        "copilot:/",
        "copilot:/x/annotations",
        "no-scheme",
        "copilot:/a/../b",  # not in normal form
    ],
)
async def test_what_cannot_name_a_session_gets_32602(vs_code_host: RunningHost, uri: str) -> None:
    peer = await open_peer(vs_code_host.url, TOKEN)
    try:
        await peer.initialize()
        error = await failure(peer, "createSession", {"channel": uri, "provider": "echo"})
        assert error["code"] == INVALID_PARAMS, error
        assert uri not in vs_code_host.host.session_index
        assert await peer.call("ping", {}) is None  # the connection survives
    finally:
        await peer.close()


ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
USERS = (UserConfig(name="alice", token=ALICE), UserConfig(name="bob", token=BOB))


async def test_another_user_neither_reaches_nor_preempts_a_vs_code_session(
    tmp_path: Path,
) -> None:
    """Multi-user mode: the session and its default chat are their creator's, and the
    name of a default chat is the host's — nobody can take it before the session exists."""
    running = await start_host(Settings(users=USERS, data_dir=str(tmp_path / "data")))
    alice = await open_peer(running.url, ALICE)
    bob = await open_peer(running.url, BOB)
    try:
        await alice.initialize()
        await bob.initialize()
        # Bob's own session, from which he tries to take the name of Alice's next chat.
        mine = f"ahp-session:/{uuid.uuid4()}"
        await bob.call("createSession", {"channel": mine, "provider": "echo"})
        theirs = f"copilot:/{uuid.uuid4()}"
        state = (await bob.call("subscribe", {"channel": mine}))["snapshot"]["state"]
        if state["lifecycle"] != "ready":
            await bob.until(lambda: bob.actions(mine, "session/ready"))
        error = await failure(bob, "createChat", {"channel": mine, "chat": default_chat_of(theirs)})
        assert error["code"] == INVALID_PARAMS, error
        # Alice's session is made with its default chat, which only she reaches.
        await alice.call("createSession", {"channel": theirs, "provider": "echo"})
        await alice.call("subscribe", {"channel": default_chat_of(theirs)})
        for channel in (theirs, default_chat_of(theirs), changeset_of(theirs)):
            error = await failure(bob, "subscribe", {"channel": channel})
            assert error["code"] == PERMISSION_DENIED, (channel, error)
        chat = default_chat_of(theirs)
        error = await failure(bob, "createChat", {"channel": theirs, "chat": "ahp-chat:/b"})
        assert error["code"] == PERMISSION_DENIED, error
        assert not [e for e in bob.envelopes if e["channel"] in (theirs, chat)]
        async with asyncio.timeout(TIMEOUT):
            assert await bob.call("ping", {}) is None
        assert not alice.invalid
        assert not bob.invalid
    finally:
        await alice.close()
        await bob.close()
        await running.stop()

"""Clients of 1.0, 0.9 and 0.7 against one host, over real sockets (issue 27).

Layer: tests (end to end). Raw WebSocket peers, written from the spec rather
than with our own client, each negotiate one version and run a full turn with a
tool confirmation (the echo agent's ``/tool``). Every frame a 1.0 or 0.9 peer
receives is validated against ``../shared/spec-1.0/schema`` with a real
validator: responses by their method's result type, ``action`` notifications
as ``ActionEnvelope``, the others by their params type. A 0.7 peer and a 1.0
peer on the same chat see their own shapes and converge on the same turns.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from ahp_server.protocol.views import v0_7
from tests.conftest import RunningHost
from tests.wire_schema import SPEC_1_0, errors

TIMEOUT = 10.0
ROOT = "ahp-root://"

#: The result type of each command (spec-1.0/ACTIONS.md "Commands"); None: no result.
RESULTS: dict[str, str | None] = {
    "initialize": "InitializeResult",
    "reconnect": "ReconnectResult",
    "subscribe": "SubscribeResult",
    "listSessions": "ListSessionsResult",
    "fetchTurns": "FetchTurnsResult",
    "createSession": None,
    "createChat": None,
    "moveChat": "MoveChatResult",
    "disposeSession": None,
    "ping": None,
}
#: The params type of each server notification (spec-1.0/ACTIONS.md).
NOTIFICATIONS = {
    "action": "ActionEnvelope",
    "root/sessionAdded": "SessionAddedParams",
    "root/sessionRemoved": "SessionRemovedParams",
    "root/sessionSummaryChanged": "SessionSummaryChangedParams",
    "root/progress": "ProgressParams",
    "auth/required": "AuthRequiredParams",
}


class RemoteFailure(AssertionError):
    """A JSON-RPC error answering a :meth:`Peer.call`."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        super().__init__(f"{method}: {error}")
        self.error = error


class Peer:
    """One raw client: its socket, what it received, and (at 1.0 and 0.9) a check of each frame."""

    def __init__(self, ws: ClientConnection, offered: list[str], *, validate: bool) -> None:
        self.ws = ws
        self.offered = offered
        self.validate = validate
        self.client_id = f"raw-{uuid.uuid4()}"
        self.version: str | None = None
        self.envelopes: list[dict[str, Any]] = []
        self.invalid: list[str] = []
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._methods: dict[int, str] = {}
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for text in self.ws:
            frame = json.loads(text)
            if "id" in frame and ("result" in frame or "error" in frame):
                method = self._methods.pop(frame["id"])
                if "result" in frame:
                    self._check(RESULTS.get(method, "?"), frame["result"], f"{method} result")
                future = self._pending.pop(frame["id"])
                future.set_result(frame)
            else:
                method = frame.get("method", "?")
                self._check(NOTIFICATIONS.get(method, "?"), frame.get("params"), method)
                if method == "action":
                    self.envelopes.append(frame["params"])
            self._changed.set()

    def _check(self, type_name: str | None, value: Any, where: str) -> None:
        if not self.validate:
            return
        if type_name == "?":
            self.invalid.append(f"{where}: a frame the test does not know how to check")
        elif type_name is None:
            if value is not None:
                self.invalid.append(f"{where}: {value!r} where the spec has no result")
        else:
            self.invalid.extend(f"{where}: {e}" for e in errors(SPEC_1_0, type_name, value))

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._methods[request_id] = method
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.ws.send(json.dumps(frame))
        async with asyncio.timeout(TIMEOUT):
            reply = await future
        if "error" in reply:
            raise RemoteFailure(method, reply["error"])
        return reply["result"]

    async def dispatch(self, channel: str, action: dict[str, Any]) -> None:
        params = {"channel": channel, "clientSeq": next(self._seq), "action": action}
        await self.ws.send(
            json.dumps({"jsonrpc": "2.0", "method": "dispatchAction", "params": params})
        )

    async def initialize(self) -> None:
        result = await self.call(
            "initialize",
            {
                "channel": ROOT,
                "protocolVersions": self.offered,
                "clientId": self.client_id,
                "initialSubscriptions": [ROOT],
            },
        )
        self.version = result["protocolVersion"]

    async def until(self, found: Callable[[], Any]) -> Any:
        async with asyncio.timeout(TIMEOUT):
            while not (value := found()):
                self._changed.clear()
                await self._changed.wait()
        return value

    def actions(self, channel: str, kind: str) -> list[dict[str, Any]]:
        return [
            e["action"]
            for e in self.envelopes
            if e["channel"] == channel and e["action"]["type"] == kind
        ]

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()


@pytest.fixture
async def peers(running_host: RunningHost) -> AsyncIterator[Callable[..., Any]]:
    opened: list[Peer] = []

    async def open_peer(offered: list[str], *, validate: bool = True) -> Peer:
        peer = Peer(await connect(running_host.url), offered, validate=validate)
        opened.append(peer)
        await peer.initialize()
        return peer

    yield open_peer
    for peer in opened:
        await peer.close()


async def new_chat(peer: Peer) -> tuple[str, str]:
    """A session of the echo agent and its default chat, subscribed."""
    session = f"ahp-session:/{uuid.uuid4()}"
    await peer.call("createSession", {"channel": session, "provider": "echo"})
    snapshot = await peer.call("subscribe", {"channel": session})
    chat = snapshot["snapshot"]["state"].get("defaultChat")
    if chat is None:
        changed = await peer.until(lambda: peer.actions(session, "session/defaultChatChanged"))
        chat = changed[-1]["defaultChat"]
    await peer.call("subscribe", {"channel": chat})
    return session, chat


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def start_turn(peer: Peer, chat: str, text: str) -> str:
    """Dispatch ``chat/turnStarted`` with a user message; the turn's id."""
    turn = str(uuid.uuid4())
    message = {"text": text, "origin": {"kind": "user"}}
    await peer.dispatch(
        chat, {"type": "chat/turnStarted", "turnId": turn, "startedAt": now(), "message": message}
    )
    return turn


async def tool_turn(peer: Peer, chat: str) -> str:
    """``/tool``: the pending confirmation approved, then the turn completes."""
    turn = await start_turn(peer, chat, "/tool")

    def pending() -> list[dict[str, Any]]:
        return [
            a
            for a in peer.actions(chat, "chat/toolCallReady")
            if a["turnId"] == turn and not a.get("confirmed")
        ]

    ready = (await peer.until(pending))[0]
    await peer.dispatch(
        chat,
        {
            "type": "chat/toolCallConfirmed",
            "turnId": turn,
            "toolCallId": ready["toolCallId"],
            "approved": True,
            "confirmed": "user-action",
        },
    )
    await peer.until(
        lambda: [a for a in peer.actions(chat, "chat/turnComplete") if a["turnId"] == turn]
    )
    return turn


@pytest.mark.parametrize(
    ("offered", "negotiated"),
    [
        (["1.0.0", "0.10.0", "0.9.0"], "1.0.0"),  # VS Code
        (["1.0.0", "0.9.0"], "1.0.0"),  # the 1.x SDKs
        (["0.9.0"], "0.9.0"),
        (["0.10.0"], "0.10.0"),
    ],
)
async def test_a_1_0_or_0_9_client_runs_a_tool_turn_and_every_frame_is_valid(
    peers: Callable[..., Any], offered: list[str], negotiated: str
) -> None:
    peer = await peers(offered)
    assert peer.version == negotiated
    session, chat = await new_chat(peer)
    turn = await tool_turn(peer, chat)
    state = (await peer.call("subscribe", {"channel": chat}))["snapshot"]["state"]
    assert [t["id"] for t in state["turns"]] == [turn]
    assert state["turns"][0]["state"] == "complete"
    assert "primaryWorkingDirectory" not in state  # a 1.0 shape, not a 0.7 one
    listed = await peer.call("listSessions", {"channel": ROOT})
    (summary,) = [item for item in listed["items"] if item["resource"] == session]
    # The session's chat catalogue, in step with the session channel (1.0.0 Added).
    assert summary["defaultChat"] == chat
    assert [c["resource"] for c in summary["chats"]] == [chat]
    assert summary["chats"][0]["status"] == state["status"]
    assert peer.envelopes, "no envelope arrived"
    assert not peer.invalid, peer.invalid[:5]


async def test_a_0_7_client_runs_a_tool_turn_in_its_own_shapes(
    peers: Callable[..., Any],
) -> None:
    peer = await peers(["0.7.0"], validate=False)
    assert peer.version == "0.7.0"
    session, chat = await new_chat(peer)
    await tool_turn(peer, chat)
    state = (await peer.call("subscribe", {"channel": chat}))["snapshot"]["state"]
    assert state["turns"][0]["state"] == "complete"
    assert state["primaryWorkingDirectory"] == state["workingDirectories"][0]
    listed = await peer.call("listSessions", {"channel": ROOT})
    (summary,) = [item for item in listed["items"] if item["resource"] == session]
    assert "chats" not in summary  # 1.0-only: not in the 0.7 view
    assert "defaultChat" not in summary


async def test_a_0_7_and_a_1_0_client_on_one_chat_each_see_their_own_shapes(
    peers: Callable[..., Any],
) -> None:
    new = await peers(["1.0.0", "0.9.0"])
    old = await peers(["0.7.0"], validate=False)
    _, chat = await new_chat(new)
    await old.call("subscribe", {"channel": chat})
    await tool_turn(new, chat)
    await start_turn(old, chat, "/error")
    for peer in (new, old):
        await peer.until(lambda p=peer: p.actions(chat, "chat/error"))
    # Each sees chat/error in its own version's shape.
    assert "part" in new.actions(chat, "chat/error")[0]
    assert "error" in old.actions(chat, "chat/error")[0]
    assert "part" not in old.actions(chat, "chat/error")[0]
    states = {
        peer.version: (await peer.call("subscribe", {"channel": chat}))["snapshot"]["state"]
        for peer in (new, old)
    }
    canonical, legacy = states["1.0.0"], states["0.7.0"]
    # The same turns, in order, each in its own shape: the error turn keeps its
    # error as a part at 1.0 and as turn.error at 0.7.
    assert [t["id"] for t in canonical["turns"]] == [t["id"] for t in legacy["turns"]]
    assert canonical["turns"][-1]["responseParts"][-1]["kind"] == "error"
    assert "error" not in canonical["turns"][-1]
    assert legacy["turns"][-1]["error"]["errorType"] == "echoError"
    # And the 0.7 one is exactly the 0.7 view of the 1.0 one.
    assert v0_7.state("chat", canonical) == legacy
    assert not new.invalid, new.invalid[:5]


async def test_nothing_acceptable_gets_32005_with_every_served_version(
    running_host: RunningHost,
) -> None:
    async with connect(running_host.url) as ws:
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"channel": ROOT, "protocolVersions": ["2.0.0"], "clientId": "c"},
        }
        await ws.send(json.dumps(request))
        async with asyncio.timeout(TIMEOUT):
            reply = json.loads(await ws.recv())
        assert reply["error"]["code"] == -32005
        supported = reply["error"]["data"]["supportedVersions"]
        assert supported[:3] == ["1.0.0", "0.10.0", "0.9.0"]
        assert "0.7.0" in supported
        assert not errors(SPEC_1_0, "UnsupportedProtocolVersionErrorData", reply["error"]["data"])


async def test_a_1_0_client_reopening_with_reconnect_is_served_in_1_0(
    running_host: RunningHost, peers: Callable[..., Any]
) -> None:
    """1.x clients open a new socket with ``reconnect`` as its first message: the host
    remembers the version per clientId and serves that socket in it."""
    first = await peers(["1.0.0", "0.9.0"])
    _, chat = await new_chat(first)
    await tool_turn(first, chat)
    last_seen = max(e["serverSeq"] for e in first.envelopes)
    await first.close()
    again = Peer(await connect(running_host.url), ["1.0.0"], validate=True)
    again.client_id = first.client_id
    try:
        result = await again.call(
            "reconnect",
            {
                "channel": ROOT,
                "clientId": first.client_id,
                "lastSeenServerSeq": last_seen,
                "subscriptions": [chat],
            },
        )
        assert result["type"] in ("replay", "snapshot")
        await tool_turn(again, chat)
        await start_turn(again, chat, "/error")
        (error,) = await again.until(lambda: again.actions(chat, "chat/error"))
        assert error["part"]["kind"] == "error"  # the 1.0 shape: it is a 1.0 socket
        assert not again.invalid, again.invalid[:5]
    finally:
        await again.close()


async def test_commands_the_host_does_not_implement_get_32601_and_the_socket_lives(
    peers: Callable[..., Any],
) -> None:
    """VS Code probes commands a host may lack and expects -32601, not a closed socket."""
    peer = await peers(["1.0.0", "0.10.0", "0.9.0"])
    for method in ("fetchAutomationRuns", "listAutomationTriggerDefinitions", "runAutomation"):
        with pytest.raises(AssertionError, match="-32601"):
            await peer.call(method, {"channel": ROOT})
    assert await peer.call("ping", {}) is None


async def test_a_0_7_client_sending_a_1_0_only_action_gets_it_back_refused(
    peers: Callable[..., Any],
) -> None:
    """An action type 0.7 does not have is not a 0.7 message: echoed as rejected,
    nothing applied, and the socket goes on."""
    old = await peers(["0.7.0"], validate=False)
    _, chat = await new_chat(old)
    await old.dispatch(chat, {"type": "chat/isReadChanged", "isRead": True})
    refused = await old.until(
        lambda: [e for e in old.envelopes if e.get("rejectionReason") and e["channel"] == chat]
    )
    assert refused[0]["action"]["type"] == "chat/isReadChanged"
    assert "0.7" in refused[0]["rejectionReason"]
    await tool_turn(old, chat)  # the connection and the chat go on


async def test_a_request_to_background_an_mcp_start_is_accepted_and_changes_nothing(
    peers: Callable[..., Any],
) -> None:
    """``session/mcpServerBackgroundRequested`` (1.0): client-dispatchable, applied by the
    reducer — a no-op here, where no MCP server start ever blocks messages."""
    peer = await peers(["1.0.0", "0.9.0"])
    session, _ = await new_chat(peer)
    before = (await peer.call("subscribe", {"channel": session}))["snapshot"]["state"]
    await peer.dispatch(session, {"type": "session/mcpServerBackgroundRequested", "id": "mcp-1"})
    (echo,) = await peer.until(
        lambda: [
            e
            for e in peer.envelopes
            if e["action"]["type"] == "session/mcpServerBackgroundRequested"
        ]
    )
    assert "rejectionReason" not in echo, echo
    after = (await peer.call("subscribe", {"channel": session}))["snapshot"]["state"]
    assert after == before
    assert not peer.invalid, peer.invalid[:5]


async def test_authenticate_with_an_expiry_gets_32602_and_the_socket_lives(
    peers: Callable[..., Any],
) -> None:
    """This host advertises no protected resource, so no ``authenticate`` names one:
    ``-32602`` whatever it carries (1.0 adds ``expiresIn``)."""
    peer = await peers(["1.0.0", "0.9.0"])
    params = {"channel": ROOT, "resource": "https://api.example", "token": "t", "expiresIn": 60}
    with pytest.raises(RemoteFailure) as caught:
        await peer.call("authenticate", params)
    assert caught.value.error["code"] == -32602
    assert "protected resource" in caught.value.error["message"]
    assert await peer.call("ping", {}) is None

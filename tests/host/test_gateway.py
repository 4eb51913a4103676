"""The gateway over a real socket: framing errors, lifecycle rules, and survival.

Raw ``websockets`` clients on purpose: these are the frames a broken or hostile
client sends, which the project's own client never would.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from ahp_server.config import Settings
from tests.conftest import RunningHost, captured_logs

TIMEOUT = 5.0
INIT = {
    "channel": "ahp-root://",
    "protocolVersions": ["0.7.0"],
    "clientId": "raw-client",
}


async def recv_json(ws: ClientConnection) -> Any:
    async with asyncio.timeout(TIMEOUT):
        return json.loads(await ws.recv())


async def call(ws: ClientConnection, id_: int, method: str, params: dict[str, Any]) -> Any:
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}))
    while True:
        message = await recv_json(ws)
        if message.get("id") == id_:
            return message


async def test_ping_is_answered_before_initialize(running_host: RunningHost) -> None:
    async with connect(running_host.url) as ws:
        reply = await call(ws, 1, "ping", {"channel": "ahp-root://"})
        assert reply == {"jsonrpc": "2.0", "id": 1, "result": None}


async def test_requests_before_initialize_are_refused(running_host: RunningHost) -> None:
    async with connect(running_host.url) as ws:
        reply = await call(ws, 1, "listSessions", {"channel": "ahp-root://"})
        assert reply["error"]["code"] == -32600
        assert "initialize" in reply["error"]["message"]
        assert (await call(ws, 2, "initialize", INIT))["result"]["protocolVersion"] == "0.7.0"


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{not json", -32700),
        ("[1, 2]", -32600),
        ('{"jsonrpc": "2.0", "id": 5}', -32600),
        ('{"jsonrpc": "1.0", "id": 5, "method": "ping"}', -32600),
    ],
)
async def test_malformed_frames_get_errors_and_the_connection_lives(
    running_host: RunningHost, frame: str, code: int
) -> None:
    async with connect(running_host.url) as ws:
        await ws.send(frame)
        reply = await recv_json(ws)
        assert reply["error"]["code"] == code
        assert reply["error"]["message"]
        assert (await call(ws, 9, "ping", {"channel": "ahp-root://"}))["result"] is None


DEEP = "[" * 10_000 + "]" * 10_000


@pytest.mark.parametrize(
    "frame",
    [
        '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"a":DEEP}}'.replace("DEEP", DEEP),
        '{"jsonrpc":"2.0","id":DEEP,"method":"ping"}'.replace("DEEP", DEEP),
        '{"jsonrpc":"2.0","id":3,"method":"ping","unknown":DEEP}'.replace("DEEP", DEEP),
        (
            '{"jsonrpc":"2.0","method":"dispatchAction","params":{"channel":"ahp-root://",'
            '"clientSeq":1,"action":{"type":"x","deep":DEEP}}}'
        ).replace("DEEP", DEEP),
        # Brackets inside strings do not count: this one is fine.
        '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"a":"DEEP"}}'.replace("DEEP", DEEP),
    ],
    ids=["params", "id", "unknown-key", "dispatched-action", "in-a-string"],
)
async def test_deeply_nested_frames_get_an_error_and_the_connection_lives(
    running_host: RunningHost, frame: str
) -> None:
    async with connect(running_host.url, max_size=None) as ws:
        await call(ws, 1, "initialize", INIT)
        with captured_logs() as logs:
            await ws.send(frame)
            if '"a":"' in frame:
                assert (await recv_json(ws)) == {"jsonrpc": "2.0", "id": 3, "result": None}
            else:
                reply = await recv_json(ws)
                assert reply["error"]["code"] == -32600
                assert reply["id"] is None
                assert "128 deep" in reply["error"]["message"]
            assert (await call(ws, 9, "ping", {"channel": "ahp-root://"}))["result"] is None
        assert not [e for e in logs if e.get("log_level") in ("error", "critical")]


async def test_error_keeps_the_request_id_when_readable(running_host: RunningHost) -> None:
    async with connect(running_host.url) as ws:
        await ws.send('{"jsonrpc": "1.0", "id": 77, "method": "ping"}')
        assert (await recv_json(ws))["id"] == 77


async def test_unknown_method_and_bad_params(running_host: RunningHost) -> None:
    async with connect(running_host.url) as ws:
        await call(ws, 1, "initialize", INIT)
        unknown = await call(ws, 2, "frobnicate", {"channel": "ahp-root://"})
        assert unknown["error"]["code"] == -32601
        bad = await call(ws, 3, "createSession", {"channel": 42})
        assert bad["error"]["code"] == -32602
        again = await call(ws, 4, "initialize", INIT)
        assert again["error"]["code"] == -32600
        assert (await call(ws, 5, "ping", {"channel": "ahp-root://"}))["result"] is None


async def test_binary_frames_are_refused_and_the_connection_lives(
    running_host: RunningHost,
) -> None:
    async with connect(running_host.url) as ws:
        await ws.send(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}')
        reply = await recv_json(ws)
        assert reply["error"]["code"] == -32600
        assert "text" in reply["error"]["message"]
        assert (await call(ws, 2, "ping", {"channel": "ahp-root://"}))["result"] is None


@pytest.mark.parametrize("running_host", [Settings(max_message_bytes=4096)], indirect=True)
async def test_oversize_frames_close_1009_and_the_server_keeps_serving(
    running_host: RunningHost,
) -> None:
    async with connect(running_host.url, max_size=None) as ws:
        await ws.send(
            json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"pad": "y" * 10_000}})
        )
        with pytest.raises(ConnectionClosed):
            await recv_json(ws)
        assert ws.close_code == 1009
    async with connect(running_host.url) as other:
        assert (await call(other, 1, "ping", {"channel": "ahp-root://"}))["result"] is None


async def test_unsupported_version_gets_32005_and_close(running_host: RunningHost) -> None:
    async with connect(running_host.url) as ws:
        reply = await call(ws, 1, "initialize", {**INIT, "protocolVersions": ["0.1.0"]})
        assert reply["error"]["code"] == -32005
        assert "0.7.0" in reply["error"]["data"]["supportedVersions"]
        with pytest.raises(ConnectionClosed):
            await recv_json(ws)


async def test_malformed_version_gets_32602_and_the_connection_stays(
    running_host: RunningHost,
) -> None:
    # versioning.md "Negotiation": malformed versions are an explicit error,
    # not "unsupported" (-32005), even next to a valid entry.
    async with connect(running_host.url) as ws:
        reply = await call(ws, 1, "initialize", {**INIT, "protocolVersions": ["0.7.0", "1.0"]})
        assert reply["error"]["code"] == -32602
        assert "'1.0'" in reply["error"]["message"]
        assert (await call(ws, 2, "initialize", INIT))["result"]["protocolVersion"] == "0.7.0"


async def test_reconnect_from_an_unknown_client_gets_32008(running_host: RunningHost) -> None:
    async with connect(running_host.url) as ws:
        reply = await call(
            ws,
            1,
            "reconnect",
            {
                "channel": "ahp-root://",
                "clientId": "never-seen",
                "lastSeenServerSeq": 0,
                "subscriptions": [],
            },
        )
        assert reply["error"]["code"] == -32008
        # The client falls back to initialize on the same connection.
        assert (await call(ws, 2, "initialize", INIT))["result"]["serverSeq"] >= 0


async def test_subscribe_to_unknown_channels(running_host: RunningHost) -> None:
    async with connect(running_host.url) as ws:
        await call(ws, 1, "initialize", INIT)
        session = await call(ws, 2, "subscribe", {"channel": "ahp-session:/nope"})
        assert session["error"]["code"] == -32001
        chat = await call(ws, 3, "subscribe", {"channel": "ahp-chat:/nope"})
        assert chat["error"]["code"] == -32008


async def test_dispatch_to_unknown_channel_is_silently_ignored(running_host: RunningHost) -> None:
    async with connect(running_host.url) as ws:
        await call(ws, 1, "initialize", INIT)
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "dispatchAction",
                    "params": {
                        "channel": "ahp-chat:/nope",
                        "clientSeq": 1,
                        "action": {"type": "chat/draftChanged"},
                    },
                }
            )
        )
        # The next frame we get is the answer to the ping: nothing was echoed.
        reply = await call(ws, 2, "ping", {"channel": "ahp-root://"})
        assert reply["result"] is None


async def test_invalid_action_payload_is_echoed_to_its_sender_as_rejected(
    running_host: RunningHost,
) -> None:
    async with connect(running_host.url) as ws:
        await call(ws, 1, "initialize", INIT)
        await call(ws, 2, "createSession", {"channel": "ahp-session:/bad-action"})
        bad = {"type": "session/titleChanged", "title": 5}
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "dispatchAction",
                    "params": {"channel": "ahp-session:/bad-action", "clientSeq": 7, "action": bad},
                }
            )
        )
        while True:
            message = await recv_json(ws)
            if message.get("method") == "action":
                break
        envelope = message["params"]
        assert envelope["action"] == bad  # echoed verbatim
        assert envelope["origin"] == {"clientId": "raw-client", "clientSeq": 7}
        assert "invalid action" in envelope["rejectionReason"]
        assert envelope["serverSeq"] <= running_host.host.hub.server_seq  # the current number


async def test_a_client_claiming_to_be_ahead_of_the_host_gets_snapshots(
    running_host: RunningHost,
) -> None:
    async with connect(running_host.url) as ws:
        await call(ws, 1, "initialize", {**INIT, "clientId": "ahead"})
    async with connect(running_host.url) as ws:
        reply = await call(
            ws,
            1,
            "reconnect",
            {
                "channel": "ahp-root://",
                "clientId": "ahead",
                "lastSeenServerSeq": running_host.host.hub.server_seq + 1000,
                "subscriptions": ["ahp-root://"],
            },
        )
        assert reply["result"]["type"] == "snapshot"
        assert [s["resource"] for s in reply["result"]["snapshots"]] == ["ahp-root://"]


async def test_server_envelopes_carry_no_origin_and_unsubscribe_stops_delivery(
    running_host: RunningHost,
) -> None:
    async with connect(running_host.url) as ws:
        await call(ws, 1, "initialize", {**INIT, "initialSubscriptions": ["ahp-root://"]})
        await call(ws, 2, "createSession", {"channel": "ahp-session:/watch"})
        # root/activeSessionsChanged is server-originated: no "origin" key at all.
        while True:
            message = await recv_json(ws)
            if message.get("method") == "action":
                break
        assert message["params"]["action"]["type"] == "root/activeSessionsChanged"
        assert "origin" not in message["params"]
        await ws.send(
            json.dumps(
                {"jsonrpc": "2.0", "method": "unsubscribe", "params": {"channel": "ahp-root://"}}
            )
        )
        # A barrier: whatever was queued before the unsubscribe arrives before this answer.
        await call(ws, 10, "ping", {"channel": "ahp-root://"})
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "createSession",
                    "params": {"channel": "ahp-session:/watch-2"},
                }
            )
        )
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {}}))
        seen = []
        while True:
            message = await recv_json(ws)
            seen.append(message)
            if message.get("id") == 4:
                break
        # Only the two answers arrive: nothing for the root channel after unsubscribing.
        assert [m.get("id") for m in seen] == [3, 4]
        connection = next(iter(running_host.host.connections))
        assert "ahp-root://" not in connection.subscriptions

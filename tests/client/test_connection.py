"""``AhpClient`` against a scripted server: framing, correlation, errors, state, reconnect, close.

Synchronisation is by messages only (the fake server's inbox, ``wait_for``),
never by sleeping; every test body runs under ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from msgspec import UNSET

from ahp_server.client import (
    CLIENT_NAME,
    AhpClient,
    ClientError,
    ClientTimeoutError,
    ConnectionClosedError,
    ProtocolViolationError,
    RemoteError,
    ServerNotification,
    UnknownChannelError,
    directory_uri,
    turn_error,
)
from ahp_server.protocol import codec
from ahp_server.protocol.errors import InvalidParams
from ahp_server.protocol.reducers import iso_timestamp
from ahp_server.protocol.types import (
    ActionEnvelope,
    ChatState,
    ListSessionsResult,
    RootState,
    SessionState,
)
from tests.client.fake_server import FakeServer, Received
from tests.client.wire import (
    CHAT,
    ROOT,
    SESSION,
    chat_json,
    envelope_json,
    root_json,
    session_json,
    snapshot_json,
    title_json,
    turn_started_json,
)

LIMIT = 5.0
CLOCK_MS = 1_700_000_000_000.0


@asynccontextmanager
async def connected(server: FakeServer, **options: Any) -> AsyncIterator[AhpClient]:
    options.setdefault("timeout", LIMIT)
    options.setdefault("request_timeout", LIMIT)
    options.setdefault("clock", lambda: CLOCK_MS)
    async with AhpClient.connect(server.url, **options) as client:
        yield client


async def client_ws(server: FakeServer) -> Any:
    """The server side of the most recent connection."""
    return server.log[-1].ws


# -- handshake -----------------------------------------------------------------------------


async def test_connect_sends_initialize_and_loads_snapshots(server: FakeServer) -> None:
    server.server_seq = 7
    server.states[SESSION] = session_json()
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[ROOT, SESSION]) as client:
        first = server.log[0]
        assert first.text_frame
        assert first.method == "initialize"
        assert isinstance(first.message["id"], int)
        assert first.params == {
            "channel": ROOT,
            "protocolVersions": ["1.0.0", "0.9.0", "0.7.0"],
            "clientId": client.client_id,
            "clientInfo": {"name": CLIENT_NAME, "version": first.params["clientInfo"]["version"]},
            "initialSubscriptions": [ROOT, SESSION],
        }
        assert client.protocol_version == "1.0.0"
        assert not client.lifts_0_7
        assert client.server_seq == 7
        assert client.subscriptions == (ROOT, SESSION)
        assert isinstance(client.confirmed(ROOT), RootState)
        assert client.view(SESSION, SessionState).title == "Session"
        assert client.initialize_result.server_info is not UNSET
        assert len(client.client_id) == 36  # a uuid4 by default
    assert client.closed


async def test_connect_uses_given_client_id_versions_and_token(server: FakeServer) -> None:
    server.protocol_version = "0.7.0"
    async with (
        asyncio.timeout(LIMIT),
        connected(
            server,
            client_id="me",
            protocol_versions=["0.7.0"],
            token="s3cret",
            headers={"X-A": "1"},
        ) as client,
    ):
        first = server.log[0]
        assert first.params["clientId"] == "me" == client.client_id
        assert first.params["protocolVersions"] == ["0.7.0"]
        assert client.protocol_version == "0.7.0"
        assert client.lifts_0_7
        assert first.ws.request is not None
        assert first.ws.request.headers["Authorization"] == "Bearer s3cret"
        assert first.ws.request.headers["X-A"] == "1"


async def test_unsupported_version_is_a_remote_error(server: FakeServer) -> None:
    async def refuse(received: Received) -> None:
        await server.reply_error(received, -32005, "unsupported", {"supportedVersions": ["9.0.0"]})
        await received.ws.close()

    server.handlers["initialize"] = refuse
    async with asyncio.timeout(LIMIT):
        with pytest.raises(RemoteError) as info:
            await AhpClient.connect(server.url, timeout=LIMIT)
    assert info.value.code == -32005
    assert info.value.data == {"supportedVersions": ["9.0.0"]}
    assert info.value.method == "initialize"


async def test_a_version_that_was_not_offered_is_a_protocol_violation(server: FakeServer) -> None:
    server.protocol_version = "0.1.0"
    async with asyncio.timeout(LIMIT):
        with pytest.raises(ProtocolViolationError, match=r"0\.1\.0"):
            await AhpClient.connect(server.url, timeout=LIMIT)


async def test_handshake_timeout(server: FakeServer) -> None:
    del server.handlers["initialize"]  # never answered
    async with asyncio.timeout(LIMIT):
        with pytest.raises(ClientTimeoutError):
            await AhpClient.connect(server.url, timeout=0.2)


async def test_a_timeout_says_how_long_it_waited(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        started = time.monotonic()
        with pytest.raises(ClientTimeoutError) as info:
            await client.wait_for(lambda _: False, timeout=0.3)
        elapsed = time.monotonic() - started
        match = re.fullmatch(
            r"gave up waiting for the predicate after (\d+\.\d) s", str(info.value)
        )
        assert match is not None, str(info.value)
        # The time measured, rounded to a tenth: never less than the limit, never more
        # than what passed around the call.
        assert 0.3 <= float(match.group(1)) <= round(elapsed, 1) + 0.05


# -- requests ------------------------------------------------------------------------------


async def test_responses_are_matched_by_id_even_out_of_order(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        first = asyncio.create_task(client.request("test/first", {"channel": ROOT}))
        second = asyncio.create_task(client.request("test/second", {"channel": ROOT, "n": 2}))
        got_first = await server.next("test/first")
        got_second = await server.next("test/second")
        assert got_second.message["id"] > got_first.message["id"]
        assert got_second.params == {"channel": ROOT, "n": 2}
        await server.reply(got_second, {"answer": 2})
        assert await second == {"answer": 2}
        assert not first.done()
        await server.reply(got_first, [1])
        assert await first == [1]


async def test_typed_results_and_struct_params(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        listing = asyncio.create_task(client.list_sessions(limit=5))
        received = await server.next("listSessions")
        assert received.params == {"channel": ROOT, "limit": 5}
        await server.reply(received, {"items": []})
        assert await listing == ListSessionsResult(items=())

        bad = asyncio.create_task(client.list_sessions())
        await server.reply(await server.next("listSessions"), {"items": "nope"})
        with pytest.raises(ProtocolViolationError):
            await bad


async def test_cwd_is_sent_first_as_a_file_uri_resolved_here(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert directory_uri("a dir") == (tmp_path / "a dir").as_uri()  # percent-encoded
    assert directory_uri("~/x") == (tmp_path / "home" / "x").as_uri()
    assert directory_uri(tmp_path) == tmp_path.as_uri()
    assert directory_uri("file:///kept%20as/is") == "file:///kept%20as/is"
    async with asyncio.timeout(LIMIT), connected(server) as client:
        task = asyncio.create_task(client.create_session("echo", ["file:///b"], cwd="a"))
        received = await server.next("createSession")
        assert received.params["workingDirectories"] == [(tmp_path / "a").as_uri(), "file:///b"]
        await server.reply(received, {})
        await task


async def test_json_rpc_errors_become_remote_errors(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        task = asyncio.create_task(client.create_session("echo", ["file:///w"]))
        received = await server.next("createSession")
        assert received.params["channel"].startswith("ahp-session:/")
        assert received.params["provider"] == "echo"
        assert received.params["workingDirectories"] == ["file:///w"]
        await server.reply_error(received, -32003, "session exists", {"uri": "x"})
        with pytest.raises(RemoteError) as info:
            await task
        assert (info.value.code, info.value.message, info.value.data) == (
            -32003,
            "session exists",
            {"uri": "x"},
        )
        assert "-32003" in str(info.value)
        await client.ping()  # the connection is still fine


async def test_request_timeout_and_late_response(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        with pytest.raises(ClientTimeoutError) as info:
            await client.request("test/slow", {"channel": ROOT}, timeout=0.1)
        assert isinstance(info.value, TimeoutError)
        assert "test/slow" in str(info.value)
        late = await server.next("test/slow")
        await server.reply(late, "too late")  # ignored by the client
        await client.ping()  # answered after the late reply: it was processed first
        assert not client.closed


async def test_ping_and_notify(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        await client.ping()
        assert server.log[-1].params == {"channel": ROOT}
        await client.notify("test/note", {"channel": ROOT, "x": 1})
        note = await server.next("test/note")
        assert "id" not in note.message
        assert note.params == {"channel": ROOT, "x": 1}


# -- notifications and envelopes -------------------------------------------------------------


async def test_protocol_notifications_reach_listeners(server: FakeServer) -> None:
    seen: list[ServerNotification] = []

    def broken(notification: ServerNotification) -> None:
        raise RuntimeError("listener bug")

    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[ROOT]) as client:
        remove = client.on_notification(seen.append)
        client.on_notification(broken)  # must not break the reader
        ws = await client_ws(server)
        summary = {"resource": SESSION, "provider": "echo", "title": "S", "status": 1}
        await server.notify(ws, "root/sessionAdded", {"channel": ROOT, "summary": summary})
        await server.notify(
            ws,
            "root/progress",
            {"channel": ROOT, "progressToken": "p", "progress": 1, "total": 1},
        )
        await client.wait_for(lambda c: len(c.notifications) == 2)
        assert [n.method for n in seen] == ["root/sessionAdded", "root/progress"]
        assert seen[0].channel == ROOT
        assert seen[0].params["summary"] == summary
        remove()
        await server.notify(ws, "root/sessionRemoved", {"channel": ROOT, "session": SESSION})
        await client.wait_for(lambda c: len(c.notifications) == 3)
        assert len(seen) == 2
        await client.ping()


async def test_action_envelopes_update_state_and_reach_listeners(server: FakeServer) -> None:
    server.server_seq = 3
    server.states[SESSION] = session_json()
    got: list[ActionEnvelope] = []
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[SESSION]) as client:
        client.on_envelope(got.append)
        ws = await client_ws(server)
        await server.action(ws, envelope_json(SESSION, title_json("Renamed"), 4))
        await client.wait_for(lambda c: c.view(SESSION, SessionState).title == "Renamed")
        assert client.server_seq == 4
        assert [e.server_seq for e in got] == [4]
        assert list(client.envelopes) == got
        # Envelopes for channels we do not mirror are recorded, not applied.
        await server.action(ws, envelope_json(CHAT, turn_started_json(), 5))
        await client.wait_for(lambda c: c.server_seq == 5)
        with pytest.raises(UnknownChannelError):
            client.view(CHAT)


async def test_envelope_record_is_bounded(server: FakeServer) -> None:
    server.states[SESSION] = session_json()
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[SESSION], history=2) as c:
        ws = await client_ws(server)
        for seq in (1, 2, 3):
            await server.action(ws, envelope_json(SESSION, title_json(str(seq)), seq))
        await c.wait_for(lambda c: c.server_seq == 3)
        assert [e.server_seq for e in c.envelopes] == [2, 3]


# -- subscriptions -------------------------------------------------------------------------


async def test_subscribe_returns_the_snapshot_and_mirrors_it(server: FakeServer) -> None:
    server.server_seq = 9
    server.states[CHAT] = chat_json(title="Hello")
    async with asyncio.timeout(LIMIT), connected(server) as client:
        state = await client.subscribe(CHAT, turns=5)
        assert isinstance(state, ChatState)
        assert state.title == "Hello"
        assert server.log[-1].params == {"channel": CHAT, "view": {"turns": 5}}
        assert client.view(CHAT) == state
        assert client.server_seq == 9
        assert await client.subscribe("ahp-otlp:logs") is None  # stateless
        assert client.subscriptions == (CHAT, "ahp-otlp:logs")

        await client.unsubscribe(CHAT)
        note = await server.next("unsubscribe")
        assert note.params == {"channel": CHAT}
        assert client.subscriptions == ("ahp-otlp:logs",)


async def test_envelopes_racing_a_subscribe_answer_are_applied_after_it(
    server: FakeServer,
) -> None:
    del server.handlers["subscribe"]
    async with asyncio.timeout(LIMIT), connected(server) as client:
        task = asyncio.create_task(client.subscribe(SESSION))
        received = await server.next("subscribe")
        # Published before the answer: one already in the snapshot, one after it.
        await server.action(received.ws, envelope_json(SESSION, title_json("old"), 10))
        await server.action(received.ws, envelope_json(SESSION, title_json("new"), 11))
        await server.reply(received, {"snapshot": snapshot_json(SESSION, session_json(), 10)})
        await task
        assert client.confirmed(SESSION, SessionState).title == "new"
        assert [e.server_seq for e in client.envelopes] == [10, 11]


async def test_too_many_envelopes_before_a_snapshot_close_the_connection(
    server: FakeServer,
) -> None:
    del server.handlers["subscribe"]
    async with asyncio.timeout(LIMIT), connected(server, max_held_envelopes=1) as client:
        task = asyncio.create_task(client.subscribe(SESSION))
        received = await server.next("subscribe")
        await server.action(received.ws, envelope_json(SESSION, title_json("a"), 10))
        await server.action(received.ws, envelope_json(SESSION, title_json("b"), 11))
        with pytest.raises(ConnectionClosedError) as info:
            await task
        assert info.value.code == 1008
        assert client.closed


async def test_garbage_frames_are_ignored(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        ws = await client_ws(server)
        await ws.send(b"\x00binary")
        await ws.send("{not json")
        await ws.send("[1, 2]")
        await server.send(ws, {"jsonrpc": "2.0", "id": 999, "result": "nobody asked"})
        await server.send(ws, {"jsonrpc": "2.0", "method": "action", "params": {"bad": 1}})
        await client.ping()
        assert not client.closed
        assert list(client.envelopes) == []


async def test_a_failed_subscribe_leaves_no_subscription(server: FakeServer) -> None:
    async def refuse(received: Received) -> None:
        await server.reply_error(received, -32001, "no such session")

    server.handlers["subscribe"] = refuse
    async with asyncio.timeout(LIMIT), connected(server) as client:
        with pytest.raises(RemoteError):
            await client.subscribe(SESSION)
        assert client.subscriptions == ()


# -- dispatch and reconciliation -----------------------------------------------------------


async def test_dispatch_is_optimistic_and_reconciled_by_the_echo(server: FakeServer) -> None:
    server.states[SESSION] = session_json()
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[SESSION]) as client:
        seq = await client.dispatch(SESSION, title_json("Mine"))
        sent = await server.next("dispatchAction")
        assert sent.params == {"channel": SESSION, "clientSeq": seq, "action": title_json("Mine")}
        assert "id" not in sent.message
        assert client.view(SESSION, SessionState).title == "Mine"
        assert client.confirmed(SESSION, SessionState).title == "Session"

        echo = envelope_json(SESSION, title_json("Mine"), 1, origin=(client.client_id, seq))
        await server.action(sent.ws, echo)
        await client.wait_for(lambda c: not c.state.pending())
        assert client.confirmed(SESSION, SessionState).title == "Mine"

        seq2 = await client.dispatch(SESSION, title_json("Denied"))
        assert seq2 == seq + 1
        assert client.view(SESSION, SessionState).title == "Denied"
        rejection = envelope_json(
            SESSION, title_json("Denied"), 1, origin=(client.client_id, seq2), rejection="no"
        )
        await server.action(sent.ws, rejection)
        await client.wait_for(lambda c: not c.state.pending())
        assert client.view(SESSION, SessionState).title == "Mine"


async def test_dispatch_rejects_a_malformed_action(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        with pytest.raises(ValueError, match="StateAction"):
            await client.dispatch(SESSION, {"type": "session/titleChanged"})  # no title


async def test_send_message_dispatches_turn_started(server: FakeServer) -> None:
    server.states[CHAT] = chat_json()
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[CHAT]) as client:
        turn_id = await client.send_message(CHAT, "hi there")
        sent = await server.next("dispatchAction")
        assert sent.params["channel"] == CHAT
        assert sent.params["action"] == {
            "type": "chat/turnStarted",
            "turnId": turn_id,
            "startedAt": iso_timestamp(CLOCK_MS),
            "message": {"text": "hi there", "origin": {"kind": "user"}},
        }
        active = client.view(CHAT, ChatState).active_turn
        assert not isinstance(active, type(UNSET))
        assert active.id == turn_id


async def test_create_chat_and_dispose(server: FakeServer) -> None:
    server.states[CHAT] = chat_json()
    async with asyncio.timeout(LIMIT), connected(server) as client:
        task = asyncio.create_task(
            client.create_chat(SESSION, chat=CHAT, initial_message="go", subscribe=True)
        )
        received = await server.next("createChat")
        assert received.params == {
            "channel": SESSION,
            "chat": CHAT,
            "initialMessage": {"text": "go", "origin": {"kind": "user"}},
        }
        await server.reply(received, None)
        assert await task == CHAT
        assert client.subscriptions == (CHAT,)

        disposing = asyncio.create_task(client.dispose_chat(CHAT))
        await server.reply(await server.next("disposeChat"), None)
        await disposing

        auto = asyncio.create_task(client.create_chat(SESSION))
        received = await server.next("createChat")
        assert received.params["chat"].startswith("ahp-chat:/")
        await server.reply(received, None)
        assert await auto == received.params["chat"]


# -- server-initiated requests ---------------------------------------------------------------


async def test_server_requests_are_answered(server: FakeServer) -> None:
    async def read(params: Any) -> Any:
        if params["uri"] == "file:///missing":
            raise InvalidParams("no such file")
        return {"data": "x", "encoding": "utf-8"}

    async with asyncio.timeout(LIMIT), connected(server) as client:
        client.on_request("resourceRead", read)
        ws = await client_ws(server)
        await server.send(
            ws, {"jsonrpc": "2.0", "id": "s1", "method": "resourceList", "params": {}}
        )
        assert (await server.next()).message["error"]["code"] == -32601
        params = {"channel": ROOT, "uri": "file:///a"}
        await server.send(
            ws, {"jsonrpc": "2.0", "id": 2, "method": "resourceRead", "params": params}
        )
        answer = await server.next()
        assert answer.message == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"data": "x", "encoding": "utf-8"},
        }
        params = {"channel": ROOT, "uri": "file:///missing"}
        await server.send(
            ws, {"jsonrpc": "2.0", "id": 3, "method": "resourceRead", "params": params}
        )
        assert (await server.next()).message["error"] == {"code": -32602, "message": "no such file"}


# -- waiting -------------------------------------------------------------------------------


async def test_wait_for_times_out(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        with pytest.raises(ClientTimeoutError):
            await client.wait_for(lambda c: False, timeout=0.1)
        await client.wait_for(lambda c: True, timeout=0)  # already true: no wait


async def test_wait_for_reraises_the_predicates_error(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        calls = 0

        def predicate(c: AhpClient) -> bool:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise LookupError("boom")
            return False

        # The task registers its waiter as soon as ping() first suspends; the
        # ping answer then makes the reader re-evaluate the predicate.
        waiting = asyncio.create_task(client.wait_for(predicate))
        await client.ping()
        with pytest.raises(LookupError, match="boom"):
            await waiting


# -- server-initiated close ----------------------------------------------------------------


@pytest.mark.parametrize(("code", "reason"), [(1013, "slow consumer"), (1001, "shutting down")])
async def test_server_close_fails_pending_requests_promptly(
    server: FakeServer, code: int, reason: str
) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        pending = asyncio.create_task(client.request("test/never", {"channel": ROOT}))
        waiting = asyncio.create_task(client.wait_for(lambda c: False))
        received = await server.next("test/never")
        await received.ws.close(code, reason)
        with pytest.raises(ConnectionClosedError) as info:
            await pending
        assert (info.value.code, info.value.reason) == (code, reason)
        with pytest.raises(ConnectionClosedError):
            await waiting
        await client.wait_closed()
        assert client.closed
        assert (client.close_code, client.close_reason) == (code, reason)
        with pytest.raises(ConnectionClosedError) as again:
            await client.ping()
        assert again.value.code == code
        with pytest.raises(ConnectionClosedError):
            await client.dispatch(SESSION, title_json("x"))


async def test_a_dropped_connection_reports_1006(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT), connected(server) as client:
        pending = asyncio.create_task(client.request("test/never", {"channel": ROOT}))
        received = await server.next("test/never")
        received.ws.transport.abort()  # no close frame
        with pytest.raises(ConnectionClosedError) as info:
            await pending
        assert info.value.code == 1006
        assert client.closed


async def test_close_is_idempotent_and_fails_outstanding_requests(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT):
        client = await AhpClient.connect(server.url, timeout=LIMIT)
        pending = asyncio.create_task(client.request("test/never", {"channel": ROOT}))
        await server.next("test/never")
        await client.close()
        await client.close()
        with pytest.raises(ConnectionClosedError):
            await pending
        assert client.closed
        assert client.close_code == 1000


# -- reconnect -----------------------------------------------------------------------------


async def _connected_with_history(server: FakeServer, client: AhpClient) -> None:
    """Subscribe to a session, see envelope 5, leave a pending action, lose the connection."""
    ws = await client_ws(server)
    await server.action(ws, envelope_json(SESSION, title_json("Five"), 5))
    await client.wait_for(lambda c: c.server_seq == 5)
    await client.dispatch(SESSION, title_json("Pending"))
    await server.next("dispatchAction")
    await ws.close(1001, "restart")
    await client.wait_closed()


async def test_reconnect_replay(server: FakeServer) -> None:
    server.states[SESSION] = session_json()
    server.states[CHAT] = chat_json()
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[SESSION, CHAT]) as client:
        await _connected_with_history(server, client)
        before = len(server.log)

        task = asyncio.create_task(client.reconnect())
        received = await server.next("reconnect")
        assert server.methods()[before:] == ["reconnect"]  # first message, no initialize
        assert received.params == {
            "channel": ROOT,
            "clientId": client.client_id,
            "lastSeenServerSeq": 5,
            "subscriptions": [SESSION, CHAT],
        }
        # A live envelope racing the answer is held and applied after the replay.
        await server.action(received.ws, envelope_json(SESSION, title_json("Eight"), 8))
        await server.reply(
            received,
            {
                "type": "replay",
                "actions": [
                    envelope_json(SESSION, title_json("Six"), 6),
                    envelope_json(SESSION, title_json("Seven"), 7),
                ],
                "missing": [CHAT],
            },
        )
        assert await task == "replay"
        await client.wait_for(lambda c: c.server_seq == 8)
        assert client.confirmed(SESSION, SessionState).title == "Eight"
        assert client.view(SESSION, SessionState).title == "Eight"  # pending cleared
        assert client.state.pending() == ()
        assert client.subscriptions == (SESSION,)
        assert [e.server_seq for e in client.envelopes][-3:] == [6, 7, 8]
        assert not client.closed
        await client.ping()


async def test_reconnect_snapshot(server: FakeServer) -> None:
    server.states[SESSION] = session_json()
    server.states[CHAT] = chat_json()
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[SESSION, CHAT]) as client:
        await _connected_with_history(server, client)
        task = asyncio.create_task(client.reconnect())
        received = await server.next("reconnect")
        await server.reply(
            received,
            {
                "type": "snapshot",
                "snapshots": [snapshot_json(SESSION, session_json(title="Fresh"), 40)],
            },
        )
        assert await task == "snapshot"
        assert client.confirmed(SESSION, SessionState).title == "Fresh"
        assert client.view(SESSION, SessionState).title == "Fresh"
        assert client.subscriptions == (SESSION,)  # the chat had no snapshot: gone
        assert client.server_seq == 40


@pytest.mark.parametrize("answer", ["error", "unknown-type"])
async def test_reconnect_falls_back_to_initialize(server: FakeServer, answer: str) -> None:
    server.states[SESSION] = session_json(title="Initial")
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[ROOT, SESSION]) as client:
        await _connected_with_history(server, client)
        server.states[SESSION] = session_json(title="Reinitialized")
        server.server_seq = 2  # e.g. a restarted server
        task = asyncio.create_task(client.reconnect())
        received = await server.next("reconnect")
        if answer == "error":
            await server.reply_error(received, -32602, "unknown client")
        else:
            await server.reply(received, {"type": "teleport"})
        assert await task == "initialize"
        init = server.log[-1]
        assert init.method == "initialize"
        assert init.params["initialSubscriptions"] == [ROOT, SESSION]
        assert init.params["clientId"] == client.client_id
        assert client.confirmed(SESSION, SessionState).title == "Reinitialized"
        assert client.state.pending() == ()
        assert client.server_seq == 2


async def test_reconnect_requires_a_previous_initialize(server: FakeServer) -> None:
    client = AhpClient(server.url)
    async with asyncio.timeout(LIMIT):
        with pytest.raises(ClientError, match="initialize"):
            await client.reconnect()
        with pytest.raises(ConnectionClosedError):
            await client.ping()
        assert client.closed
        assert client.close_code is None


async def test_reconnect_to_another_url_while_connected(server: FakeServer) -> None:
    other = FakeServer()
    async with asyncio.timeout(LIMIT), other.running(), connected(server) as client:

        async def refuse(received: Received) -> None:
            await other.reply_error(received, -32600, "who are you")

        other.handlers["reconnect"] = refuse
        assert await client.reconnect(other.url) == "initialize"
        assert client.url == other.url
        assert other.methods() == ["reconnect", "initialize"]
        assert client.close_code == 1000  # the first connection was closed normally
        await client.ping()
        assert other.methods()[-1] == "ping"


async def test_context_manager_on_an_instance(server: FakeServer) -> None:
    async with asyncio.timeout(LIMIT):
        client = AhpClient(server.url, timeout=LIMIT)
        await client.open([ROOT])
        async with client:
            await client.ping()
        assert client.closed
        with pytest.raises(ClientError, match="not initialized"):
            _ = AhpClient(server.url).protocol_version


# -- a 0.7 server: lifted in, projected out ----------------------------------------------------


async def test_an_answer_with_a_version_the_client_did_not_offer_is_refused(
    server: FakeServer,
) -> None:
    server.protocol_version = "0.7.0"  # a version it knows, but was not offered
    async with asyncio.timeout(LIMIT):
        with pytest.raises(ProtocolViolationError, match=r"'0\.7\.0'.*not offered \(1\.0\.0\)"):
            await AhpClient.connect(server.url, protocol_versions=["1.0.0"], timeout=LIMIT)


async def test_a_0_7_server_is_lifted_to_1_0_and_spoken_to_in_0_7(server: FakeServer) -> None:
    server.protocol_version = "0.7.0"
    failed = {
        "id": "t0",
        "message": {"text": "hi", "origin": {"kind": "user"}},
        "responseParts": [],
        "state": "error",
        "error": {"errorType": "old", "message": "it broke before"},
    }
    server.states[CHAT] = chat_json(
        turns=[failed],
        workingDirectories=["file:///b", "file:///a"],
        primaryWorkingDirectory="file:///a",
    )
    server.states[SESSION] = session_json(lifecycle="creationFailed")
    notes: list[ServerNotification] = []
    async with (
        asyncio.timeout(LIMIT),
        connected(server, subscriptions=[SESSION, CHAT]) as client,
    ):
        client.on_notification(notes.append)
        assert client.lifts_0_7
        # Snapshots: 0.7 shapes in, 1.0 states out.
        chat = client.confirmed(CHAT, ChatState)
        assert chat.working_directories == ("file:///a", "file:///b")  # the primary first
        (turn,) = chat.turns
        error = turn_error(turn)
        assert error is not None
        assert error.message == "it broke before"
        assert client.confirmed(SESSION, SessionState).lifecycle == "failed"

        # What the client sends is 0.7: a toggle's enablement becomes `enabled` ...
        await client.dispatch(
            SESSION,
            {
                "type": "session/customizationToggled",
                "id": "plug",
                "enablement": [{"kind": "global", "enabled": False}],
            },
        )
        sent = await server.next("dispatchAction")
        assert sent.params["action"] == {
            "type": "session/customizationToggled",
            "id": "plug",
            "enabled": False,
        }
        # ... and an action 0.7 does not have is never sent.
        with pytest.raises(ClientError, match="chat/isReadChanged"):
            await client.dispatch(CHAT, {"type": "chat/isReadChanged", "isRead": True})
        assert client.state.pending(CHAT) == ()

        # Envelopes: a 0.7 chat/error becomes the 1.0 trailing error part.
        ws = await client_ws(server)
        await server.action(ws, envelope_json(CHAT, turn_started_json("t1"), 1))
        await server.action(
            ws,
            envelope_json(
                CHAT,
                {
                    "type": "chat/error",
                    "turnId": "t1",
                    "duration": 5,
                    "error": {"errorType": "boom", "message": "it broke"},
                },
                2,
            ),
        )
        await client.wait_for(lambda c: len(c.confirmed(CHAT, ChatState).turns) == 2)
        last = client.confirmed(CHAT, ChatState).turns[-1]
        assert last.state == "error"
        assert codec.to_builtins(last.response_parts[-1]) == {
            "kind": "error",
            "error": {"errorType": "boom", "message": "it broke"},
        }
        assert codec.to_builtins(client.envelopes[-1].action)["part"]["kind"] == "error"

        # Notifications: auth/required carries 1.0 ProtectedResourceMetadata.
        await server.notify(
            ws, "auth/required", {"channel": ROOT, "resource": "https://api.example.com"}
        )
        await client.wait_for(lambda c: bool(notes))
        assert notes[-1].params == {
            "channel": ROOT,
            "resource": {"resource": "https://api.example.com"},
        }


async def test_a_0_7_terminal_session_claim_gets_the_chat_the_client_knows(
    server: FakeServer,
) -> None:
    server.protocol_version = "0.7.0"
    claim = {"kind": "session", "session": SESSION}
    info = {"resource": "ahp-terminal:/t1", "title": "sh", "claim": claim}
    server.states[ROOT] = root_json(terminals=[info])
    server.states[SESSION] = session_json(defaultChat=CHAT)
    async with asyncio.timeout(LIMIT), connected(server, subscriptions=[ROOT]) as client:
        # The session is not mirrored: 0.7 does not say which chat, and 1.0
        # requires one, so the claim names "" (the connection still opens).
        (terminal,) = client.confirmed(ROOT, RootState).terminals or ()
        assert codec.to_builtins(terminal.claim) == {**claim, "chat": ""}
        assert codec.to_builtins(terminal.lifecycle) == {"status": "running"}
        await client.subscribe(SESSION)
        ws = await client_ws(server)
        changed = {"type": "root/terminalsChanged", "terminals": [{**info, "exitCode": 0}]}
        await server.action(ws, envelope_json(ROOT, changed, 1))
        await client.wait_for(lambda c: c.server_seq == 1)
        (terminal,) = client.confirmed(ROOT, RootState).terminals or ()
        assert codec.to_builtins(terminal.claim) == {**claim, "chat": CHAT}
        assert codec.to_builtins(terminal.lifecycle) == {"status": "exited", "exitCode": 0}

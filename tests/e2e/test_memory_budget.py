"""A host-wide memory budget (issue 29; docs/reliability.md "Memory").

Answers are bounded before they are built (duplicate subscriptions count
once; snapshots, replays and session pages are bounded in bytes), every URI
parameter is bounded, made-up changesets make no actor, and the outboxes of
every connection together stay within ``limits.outbox_total_bytes``: the
slowest connections go first. The last test holds a real ``ahp-server``
process on its default limits under the worst case docs/reliability.md states
while 50 readers that never read and an amplification attempt run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from ahp_server.agents.base import StatelessProvider, TurnIO, TurnRequest
from ahp_server.agents.echo import EchoAgent
from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.host.commands.dispatcher import LIST_PAGE_BYTES
from ahp_server.host.core.fanout import CLOSE_SLOW_CONSUMER, Connection, ConnState
from ahp_server.protocol.types import AgentInfo, UsageInfo
from ahp_server.protocol.uris import MAX_URI_LENGTH, turn_changeset
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, Daemon, assert_mirrors_host, session_of, turn_done

INVALID_PARAMS = -32602
NOT_FOUND = -32008
PAD = "x" * 16_384
CLAIM = {"kind": "client", "clientId": "long"}


class FloodAgent(StatelessProvider):
    """Streams usage reports of 16 KiB each for as long as it is told to."""

    def __init__(self, reports: int) -> None:
        self.reports = reports

    @property
    def info(self) -> AgentInfo:
        return AgentInfo(provider="flood", display_name="Flood", description="test", models=())

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        for i in range(self.reports):
            await io.usage(UsageInfo(output_tokens=i, meta={"pad": PAD}))
            await asyncio.sleep(0.001)
        await io.text("done")


@asynccontextmanager
async def host_with(**limits: Any) -> AsyncIterator[RunningHost]:
    running = await start_host(
        dataclasses.replace(Settings(), **limits), providers=[FloodAgent(600), EchoAgent()]
    )
    try:
        yield running
    finally:
        await running.stop()


@asynccontextmanager
async def raw_peer(url: str, *, read: bool = True) -> AsyncIterator[ClientConnection]:
    """A WebSocket peer speaking JSON-RPC by hand. ``read=False``: it stops reading
    after its first message (a tiny receive buffer, one queued message)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if not read:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    host, port = url.removeprefix("ws://").rstrip("/").split(":")
    sock.connect((host, int(port)))
    sock.setblocking(False)
    async with connect(url, sock=sock, max_size=None, max_queue=None if read else 1) as ws:
        yield ws


async def call(ws: ClientConnection, method: str, params: dict[str, Any], id_: int = 1) -> Any:
    await ws.send(json.dumps(request(method, params, id_)))
    async with asyncio.timeout(TIMEOUT):
        while True:
            message = json.loads(await ws.recv())
            if message.get("id") == id_:
                return message


def initialize(client_id: str, subscriptions: list[str]) -> dict[str, Any]:
    return {
        "channel": "ahp-root://",
        "protocolVersions": ["1.0.0"],
        "clientId": client_id,
        "initialSubscriptions": subscriptions,
    }


async def test_duplicate_subscriptions_build_one_snapshot() -> None:
    """An initialize or reconnect naming one chat 5,000 times gets one snapshot and
    one subscription (issue 29: the same request built a 328 MB answer)."""
    async with host_with() as running, AhpClient.connect(running.url) as client:
        chat = await client.open_chat()
        await client.ask(chat, "hello")
        async with raw_peer(running.url) as ws:
            answer = await call(ws, "initialize", initialize("dup", [chat] * 5000))
            assert [s["resource"] for s in answer["result"]["snapshots"]] == [chat]
        answers = []
        for subscriptions in ([chat], [chat] * 5000):
            async with raw_peer(running.url) as ws:
                params = {
                    "channel": "ahp-root://",
                    "clientId": "dup",
                    "lastSeenServerSeq": 0,
                    "subscriptions": subscriptions,
                }
                answers.append((await call(ws, "reconnect", params))["result"])
        assert answers[0]["type"] == "replay"
        assert answers[1] == answers[0]  # each envelope once, not 5,000 times
        assert len(json.dumps(params)) > 200_000  # the request was the amplifying one


async def test_snapshots_past_one_outbox_are_refused_before_they_are_built() -> None:
    """Snapshots that together pass ``limits.outbox_max_bytes`` are refused with
    -32602 naming it, and the connection is left as it was: not initialized, its
    client id unclaimed, no subscription made."""
    async with (
        host_with(outbox_max_bytes=256 * 1024, snapshot_turn_bytes=64 * 1024) as running,
        AhpClient.connect(running.url) as client,
    ):
        chats = []
        for _ in range(8):
            chat = await client.open_chat()
            await client.ask(chat, "y" * 40_000)  # ~80 KB a chat: echoed back
            chats.append(chat)
        async with raw_peer(running.url) as ws:
            answer = await call(ws, "initialize", initialize("big", chats))
            assert answer["error"]["code"] == INVALID_PARAMS
            assert "limits.outbox_max_bytes" in answer["error"]["message"]
            assert "big" not in running.host.live_clients
            refused = next(c for c in running.host.connections if c.client_id is None)
            assert not refused.subscriptions
            # The same connection may still initialize, with fewer channels.
            answer = await call(ws, "initialize", initialize("big", chats[:1]), id_=2)
            assert [s["resource"] for s in answer["result"]["snapshots"]] == chats[:1]


async def test_a_replay_past_one_outbox_falls_back_to_snapshots() -> None:
    """A reconnect whose replay would pass ``limits.outbox_max_bytes`` gets
    snapshots instead (bounded in their turn), never a larger answer."""
    async with (
        host_with(
            outbox_max_bytes=256 * 1024,
            snapshot_turn_bytes=64 * 1024,
            replay_max_bytes=4 * 1024 * 1024,
        ) as running,
        AhpClient.connect(running.url) as client,
    ):
        chat = await client.open_chat()
        async with raw_peer(running.url) as ws:
            answer = await call(ws, "initialize", initialize("replayer", [chat]))
            seq = answer["result"]["serverSeq"]
        for _ in range(8):  # ~320 KB of envelopes since ``seq``: more than one outbox
            await client.ask(chat, "z" * 20_000)
        async with raw_peer(running.url) as ws:
            params = {
                "channel": "ahp-root://",
                "clientId": "replayer",
                "lastSeenServerSeq": seq,
                "subscriptions": [chat],
            }
            answer = await call(ws, "reconnect", params)
            assert answer["result"]["type"] == "snapshot"
            assert len(json.dumps(answer)) < 256 * 1024
        async with raw_peer(running.url) as ws:  # a short gap still replays
            params["lastSeenServerSeq"] = running.host.hub.delivered_seq
            answer = await call(ws, "reconnect", params)
            assert answer["result"]["type"] == "replay"


async def test_every_uri_parameter_is_bounded(tmp_path: Path) -> None:
    """A URI over ``MAX_URI_LENGTH`` in any URI parameter, nested ones included, is
    refused with -32602 naming the field; nothing is stored (issue 29: 40 sessions
    with 1 MB URIs made every later ``listSessions`` too large to send)."""
    long = "ahp-session:/" + "s" * MAX_URI_LENGTH
    long_file = (tmp_path / ("f" * 200)).as_uri() + "/" + "d" * MAX_URI_LENGTH
    async with host_with() as running, AhpClient.connect(running.url) as client:
        chat = await client.open_chat()
        session = session_of(running.host, chat)
        requests: list[tuple[str, dict[str, Any], str]] = [
            ("createSession", {"channel": long}, "channel"),
            (
                "createSession",
                {"channel": "ahp-session:/ok", "workingDirectories": [long_file]},
                "workingDirectories",
            ),
            ("subscribe", {"channel": long}, "channel"),
            (
                "createChat",
                {"channel": session, "chat": "ahp-chat:/" + "c" * MAX_URI_LENGTH},
                "chat",
            ),
            (
                "moveChat",
                {"channel": chat, "destination": {"kind": "session", "session": long}},
                "destination.session",
            ),
            ("resourceRead", {"channel": "ahp-root://", "uri": long_file}, "uri"),
            (
                "resourceCopy",
                {"channel": "ahp-root://", "source": long_file, "destination": long_file},
                "source",
            ),
            (
                "createTerminal",
                {"channel": "ahp-terminal:/t", "claim": CLAIM, "cwd": long_file},
                "cwd",
            ),
            ("createResourceWatch", {"channel": "ahp-resource-watch:/w", "uri": long_file}, "uri"),
            ("listSessions", {"channel": long}, "channel"),
        ]
        async with raw_peer(running.url) as ws:
            await call(ws, "initialize", initialize("long", []))
            for i, (method, params, field) in enumerate(requests, start=2):
                answer = await call(ws, method, params, id_=i)
                assert answer["error"]["code"] == INVALID_PARAMS, (method, answer)
                assert field in answer["error"]["message"], (method, answer)
            sessions = await call(ws, "listSessions", {"channel": "ahp-root://"}, id_=99)
        assert [s["resource"] for s in sessions["result"]["items"]] == [session]
        # A URI of exactly the limit is a URI like any other.
        edge = "ahp-session:/" + "e" * (MAX_URI_LENGTH - len("ahp-session:/"))
        await client.create_session(session=edge, timeout=TIMEOUT)


async def test_session_pages_are_bounded_in_bytes() -> None:
    """``listSessions`` pages carry at most ``LIST_PAGE_BYTES`` of summaries (the
    first always), and following ``nextCursor`` lists every session once."""
    async with host_with() as running, AhpClient.connect(running.url) as client:
        made = set()
        for i in range(200):  # ~8 KB a summary: ~1.6 MB in all
            uri = f"ahp-session:/{i:03d}-" + "p" * (MAX_URI_LENGTH - 20)
            await client.create_session(session=uri, timeout=TIMEOUT)
            made.add(uri)
        async with raw_peer(running.url) as ws:
            await call(ws, "initialize", initialize("pager", []))
            listed: list[str] = []
            cursor: str | None = None
            pages = 0
            while True:
                params: dict[str, Any] = {"channel": "ahp-root://"}
                if cursor is not None:
                    params["cursor"] = cursor
                pages += 1
                answer = await call(ws, "listSessions", params, id_=pages + 1)
                items = answer["result"]["items"]
                assert items
                assert len(json.dumps(items).encode()) <= LIST_PAGE_BYTES
                listed += [s["resource"] for s in items]
                cursor = answer["result"].get("nextCursor")
                if cursor is None:
                    break
        assert pages >= 2
        assert len(listed) == len(set(listed))
        assert set(listed) == made


async def test_made_up_changesets_make_no_actor() -> None:
    """Subscribing to the changeset of a turn nobody made answers -32008 and makes
    no actor (issue 29: 10,000 made-up URIs made 10,000 actors); a real turn's
    changeset is still there."""
    async with host_with() as running, AhpClient.connect(running.url) as client:
        chat = await client.open_chat()
        await client.ask(chat, "hello")
        session = session_of(running.host, chat)
        service = next(s for s in running.host.services if type(s).__name__ == "Changesets")
        before = len(service.actors)  # type: ignore[attr-defined]
        async with raw_peer(running.url) as ws:
            await call(ws, "initialize", initialize("maker", []))
            for i in range(300):
                answer = await call(
                    ws, "subscribe", {"channel": turn_changeset(session, f"made-up-{i}")}, id_=i + 2
                )
                assert answer["error"]["code"] == NOT_FOUND
            answer = await call(
                ws,
                "initialize",
                initialize("maker2", [turn_changeset(session, f"x{i}") for i in range(300)]),
                id_=999,
            )
        assert len(service.actors) == before  # type: ignore[attr-defined]
        turn = client.confirmed(chat).turns[0].id
        await client.subscribe(turn_changeset(session, turn), timeout=TIMEOUT)


async def test_the_outboxes_together_stay_within_the_budget_the_slowest_going_first() -> None:
    """Readers that stop reading fill their outboxes; once they together pass
    ``limits.outbox_total_bytes`` the one furthest behind is closed (1013, or its
    socket dropped when its writer is stuck on it), then the next: the total never
    passes the budget by more than a frame. A reader that keeps up streams the
    whole turn and ends equal to the host."""
    budget = 3 * 1024 * 1024
    async with (
        host_with(outbox_total_bytes=budget, outbox_max_bytes=2 * 1024 * 1024) as running,
        AhpClient.connect(running.url, max_frame_size=None) as fast,
        contextlib.AsyncExitStack() as stack,
    ):
        host = running.host
        chat = await fast.open_chat("flood")
        for i in range(4):
            ws = await stack.enter_async_context(raw_peer(running.url, read=False))
            await ws.send(json.dumps(request("initialize", initialize(f"slow{i}", [chat]))))
        async with asyncio.timeout(TIMEOUT):
            while len(slow_connections(running)) < 4:  # noqa: ASYNC110 - the host's state
                await asyncio.sleep(0.01)
        slow = slow_connections(running)
        await fast.send_message(chat, "go")
        await fast.wait_for(lambda c: turn_done(c, chat), timeout=120)
        assert host.outbox_budget.evictions >= 1
        assert host.outbox_budget.peak <= budget + 2 * len(PAD)
        assert [c.close_code for c in slow if c.state is ConnState.CLOSING] != []
        assert all(c.close_code in (None, CLOSE_SLOW_CONSUMER) for c in slow)
        await assert_mirrors_host(fast, host, chat)


def request(method: str, params: dict[str, Any], id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def slow_connections(running: RunningHost) -> list[Connection]:
    return [c for c in running.host.connections if c.client_id and c.client_id.startswith("slow")]


#: Readers that never read, and the reads each pipelines (issue 29: 30 such readers
#: asking for 4 x 8 MiB took a host from 62 MB to 1.18 GB).
READERS = 50
READS = 4
MIB = 1024 * 1024


def stated_worst_case(settings: Settings, connections: int) -> int:
    """docs/reliability.md "Memory": what a host holds past its resting size, at
    most, for connections that send only small messages."""
    return (
        settings.outbox_total_bytes
        + 2 * settings.outbox_max_bytes  # the one answer being built, and its frame
        + connections * PER_CONNECTION
    )


#: docs/reliability.md "Memory": a connection's own buffers (the socket's, the
#: WebSocket library's, its task), beside what it queues and sends.
PER_CONNECTION = 1 * MIB


def rss(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


async def open_connections(url: str) -> int:
    host, port = url.removeprefix("ws://").rstrip("/").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
    )
    body = (await reader.read()).decode()
    writer.close()
    for line in body.splitlines():
        if line.startswith("ahp_connections "):
            return int(float(line.split()[1]))
    raise AssertionError("no ahp_connections in /metrics: " + body[:200])


async def test_a_host_on_its_default_limits_stays_within_the_stated_memory(tmp_path: Path) -> None:
    """A real ``ahp-server serve`` on its default limits: 50 readers that never read
    each pipeline 4 reads of an 8 MiB file, and a client names one chat 5,000
    times in initialize. The host's peak resident memory stays
    within what docs/reliability.md states for 50 connections (without the
    budget it passes 1 GB)."""
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(8 * MIB))
    daemon = Daemon(tmp_path / "data")
    url = await daemon.start()
    try:
        assert daemon.process is not None
        pid = daemon.process.pid
        async with AhpClient.connect(url, max_frame_size=None) as client:
            chat = await client.open_chat()
            await client.ask(chat, "hello")
            # The file lies in a session's working directory: it may be read.
            await client.create_session(working_directories=[tmp_path.as_uri()])
            await client.request("resourceRead", {"channel": "ahp-root://", "uri": big.as_uri()})
            rest = rss(pid, "VmRSS")
            async with contextlib.AsyncExitStack() as stack:
                for i in range(READERS):
                    ws = await stack.enter_async_context(raw_peer(url, read=False))
                    await ws.send(json.dumps(request("initialize", initialize(f"r{i}", []))))
                    for n in range(READS):
                        read = {"channel": "ahp-root://", "uri": big.as_uri()}
                        await ws.send(json.dumps(request("resourceRead", read, n + 2)))
                async with raw_peer(url) as ws:  # the amplification attempt, beside them
                    answer = await call(ws, "initialize", initialize("amp", [chat] * 5000))
                    assert len(answer["result"]["snapshots"]) == 1
                # Every reader is closed in the end: by the budget, or by its own
                # outbox limit (three answers pass 32 MiB).
                async with asyncio.timeout(240):
                    while await open_connections(url) > 1:  # noqa: ASYNC110 - another process
                        await asyncio.sleep(0.2)
            grown = rss(pid, "VmHWM") - rest
        stated = stated_worst_case(Settings(), READERS + 2)
        assert grown <= stated, f"grew {grown / MIB:.0f} MiB; stated {stated / MIB:.0f} MiB"
    finally:
        await daemon.close()

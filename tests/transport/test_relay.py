"""The cluster relay's bad inputs and faults (``transport/relay.py``, docs/scale-out.md).

Real NATS (the machine's, see ``tests/cluster/helpers.py``), a real host and
gateway in process, real WebSockets at the door. The other end of the relay
is a raw nats-py client that publishes hand-made messages: the frames a
broken, slow or deposed peer sends, which the project's own relay never
would. Each test has its own cluster name, so tests never hear each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server
from websockets.exceptions import ConnectionClosed, InvalidStatus

from ahp_server.agents.echo import EchoAgent
from ahp_server.config import Settings
from ahp_server.host.gateway import Gateway
from ahp_server.host.host import Host
from ahp_server.transport.relay import (
    BusTransport,
    EdgeLink,
    EdgeRelay,
    PrimaryRelay,
    Subjects,
    decode,
    encode,
    pack_frames,
    publish,
    unpack_frames,
)
from ahp_server.transport.websocket import start_server
from tests.cluster.helpers import drop_cluster_record, nats_or_skip, new_cluster_name

TIMEOUT = 5.0
ROOT = "ahp-root://"
INIT = {"channel": ROOT, "protocolVersions": ["0.7.0"], "clientId": "relayed"}

Decoded = tuple[str, int, int, int | None, bytes]


def rpc(id_: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


def init(id_: int = 1, client: str = "relayed") -> bytes:
    return rpc(id_, "initialize", {**INIT, "clientId": client})


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
async def bus() -> AsyncIterator[Callable[[], Any]]:
    """Opens NATS connections (one per role), all closed after the test."""
    url = nats_or_skip()
    opened: list[Any] = []

    async def open_one() -> Any:
        nc = await nats.connect(url, connect_timeout=TIMEOUT, allow_reconnect=False)
        opened.append(nc)
        return nc

    try:
        yield open_one
    finally:
        for nc in opened:
            with contextlib.suppress(Exception):
                await nc.close()


class FakeEdge:
    """A raw bus client playing an edge: hand-made messages to the primary, its answers kept."""

    def __init__(self, nc: Any, subjects: Subjects, name: str, epoch: int) -> None:
        self.nc = nc
        self.subjects = subjects
        self.name = name
        self.epoch = epoch
        self.messages: asyncio.Queue[Decoded] = asyncio.Queue()
        self.frames: dict[int, list[Any]] = {}
        #: The ``g`` messages seen (one message for several connections).
        self.groups: list[Decoded] = []

    async def start(self) -> None:
        async def on_message(msg: Any) -> None:
            await self.messages.put(decode(msg.data))

        await self.nc.subscribe(self.subjects.edge(self.name), cb=on_message)
        await self.nc.flush()

    async def send(
        self, kind: str, conn: int, n: int, payload: bytes = b"", epoch: int | None = None
    ) -> None:
        subject = self.subjects.primary(self.epoch if epoch is None else epoch, self.name)
        await self.nc.publish(subject, encode(kind, conn, n, payload))
        await self.nc.flush()

    async def raw(self, data: bytes) -> None:
        await self.nc.publish(self.subjects.primary(self.epoch, self.name), data)
        await self.nc.flush()

    async def beat(self) -> None:
        await self.nc.publish(self.subjects.hb_edge, self.name.encode())

    async def next(self, conn: int) -> Decoded:
        """The next message for ``conn`` (frames of ``f`` messages are kept; a ``g``
        group counts as an ``f`` for each connection it names)."""
        async with asyncio.timeout(TIMEOUT):
            while True:
                message = await self.messages.get()
                if message[0] == "g":
                    self.groups.append(message)
                    names, _, data = message[4].partition(b"\n")
                    for name in names.split(b","):
                        target, n = map(int, name.split(b":"))
                        self.messages.put_nowait(("f", target, n, message[3], data))
                    continue
                if message[0] == "f":
                    self.frames.setdefault(message[1], []).extend(
                        json.loads(f) for f in unpack_frames(message[4])
                    )
                if message[1] == conn:
                    return message

    async def answer(self, conn: int, id_: int) -> Any:
        """The JSON-RPC answer to request ``id_`` of ``conn``."""
        while True:
            for frame in self.frames.get(conn, []):
                if frame.get("id") == id_:
                    return frame
            await self.next(conn)

    async def closed(self, conn: int) -> tuple[int, int, str]:
        """``(n, code, reason)`` of the ``x`` the primary sends ``conn``."""
        while True:
            kind, _, n, _, payload = await self.next(conn)
            if kind == "x":
                code, _, reason = payload.partition(b" ")
                return n, int(code), reason.decode()

    async def nothing_for(self, conn: int, seconds: float = 0.3) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while True:
                    message = await self.messages.get()
                    assert message[1] != conn, message


@dataclasses.dataclass
class Primary:
    host: Host
    gateway: Gateway
    relay: PrimaryRelay
    subjects: Subjects


async def wait_until(predicate: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not predicate():  # noqa: ASYNC110 - the relay's state: nothing to await
            await asyncio.sleep(0.02)
    assert predicate(), what


@contextlib.asynccontextmanager
async def primary_relay(
    bus: Callable[[], Any],
    *,
    epoch: int = 1,
    inbox: int = 64,
    max_message_bytes: int = 4 * 1024 * 1024,
    edge_timeout: float = 30.0,
    sink: Any = None,
) -> AsyncIterator[Primary]:
    host = Host(Settings(), providers=[EchoAgent()])
    await host.start()
    gateway = Gateway(host)
    subjects = Subjects(new_cluster_name())
    relay = PrimaryRelay(
        await bus(),
        subjects,
        "primary",
        epoch,
        sink if sink is not None else gateway,
        heartbeat=0.05,
        edge_timeout=edge_timeout,
        inbox=inbox,
        max_message_bytes=max_message_bytes,
    )
    await relay.start()
    try:
        yield Primary(host, gateway, relay, subjects)
    finally:
        await relay.stop()
        await host.stop(close_timeout=1.0)
        await drop_cluster_record(subjects.cluster)  # the record relay.start() wrote


async def edge_of(bus: Callable[[], Any], primary: Primary, name: str = "edge1") -> FakeEdge:
    edge = FakeEdge(await bus(), primary.subjects, name, primary.relay.epoch)
    await edge.start()
    return edge


async def opened(edge: FakeEdge, conn: int, client: str = "relayed") -> None:
    """Open ``conn`` and initialize it (messages 1 and 2)."""
    await edge.send("o", conn, 1)
    await edge.send("t", conn, 2, init(1, client))
    answer = await edge.answer(conn, 1)
    assert answer["result"]["protocolVersion"] == "0.7.0", answer


# -- 2. the primary's side ----------------------------------------------------------------------


async def test_open_and_initialize_round_trip(bus: Callable[[], Any]) -> None:
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await edge.send("o", 1, 1)
        await edge.send("t", 1, 2, init())
        kind, conn, n, epoch, payload = await edge.next(1)
        assert (kind, conn, n, epoch) == ("f", 1, 1, primary.relay.epoch)
        (answer,) = [json.loads(f) for f in unpack_frames(payload)]
        assert answer["id"] == 1
        assert answer["result"]["protocolVersion"] == "0.7.0"
        assert primary.relay.connections == 1
        assert len(primary.host.connections) == 1
        await edge.send("t", 1, 3, rpc(2, "ping", {"channel": ROOT}))
        assert (await edge.answer(1, 2))["result"] is None
        # The edge's close ends the connection on the primary.
        await edge.send("x", 1, 4)
        await wait_until(lambda: not primary.host.connections, "the connection closed")
        assert primary.relay.connections == 0


@pytest.mark.parametrize(
    "garbage",
    [b"no header at all", b"t1\n{}", b"tx 3\n{}", b"t1 1 1 1 1\n{}", b"", b"\n\n\n"],
)
async def test_a_malformed_message_is_dropped_and_the_connection_lives(
    bus: Callable[[], Any], garbage: bytes
) -> None:
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await opened(edge, 1)
        await edge.raw(garbage)
        await edge.send("t", 1, 3, rpc(2, "ping", {"channel": ROOT}))
        assert (await edge.answer(1, 2))["result"] is None
        assert primary.relay.connections == 1


async def test_an_unknown_kind_is_dropped_and_the_connection_lives(
    bus: Callable[[], Any],
) -> None:
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await opened(edge, 1)
        await edge.send("z", 1, 3, b"what is this")
        await edge.send("t", 1, 3, rpc(2, "ping", {"channel": ROOT}))
        assert (await edge.answer(1, 2))["result"] is None
        assert [f for f in edge.frames[1] if "error" in f] == []


async def test_a_gap_closes_that_connection_with_1011_and_only_it(
    bus: Callable[[], Any],
) -> None:
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await opened(edge, 1, "one")
        await opened(edge, 2, "two")
        await edge.send("t", 1, 4, rpc(2, "ping", {"channel": ROOT}))  # 3 went missing
        n, code, reason = await edge.closed(1)
        assert code == 1011
        assert "reconnect" in reason
        assert n == 2  # after the initialize answer
        await wait_until(lambda: primary.relay.connections == 1, "the gapped connection dropped")
        assert len(primary.host.connections) == 1
        await edge.send("t", 2, 3, rpc(2, "ping", {"channel": ROOT}))
        assert (await edge.answer(2, 2))["result"] is None


async def test_a_frame_for_an_unknown_connection_gets_x_1012(bus: Callable[[], Any]) -> None:
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await edge.send("t", 9, 2, rpc(1, "ping", {"channel": ROOT}))
        assert await edge.closed(9) == (0, 1012, "unknown connection")
        # An edge's close of a connection the primary does not know gets nothing back.
        await edge.send("x", 8, 2)
        await edge.nothing_for(8)
        assert not primary.host.connections


async def test_pieces_over_the_limit_close_with_1009(bus: Callable[[], Any]) -> None:
    async with primary_relay(bus, max_message_bytes=2000) as primary:
        edge = await edge_of(bus, primary)
        await opened(edge, 1, "big")
        await opened(edge, 2, "small")
        await edge.send("k", 1, 3, b"x" * 1500)
        await edge.send("k", 1, 4, b"x" * 1500)
        _, code, _ = await edge.closed(1)
        assert code == 1009
        await wait_until(lambda: primary.relay.connections == 1, "the big one dropped")
        # Pieces within the limit are joined into one frame.
        frame = rpc(2, "ping", {"channel": ROOT, "pad": "p" * 1000})
        await edge.send("k", 2, 3, frame[:600])
        await edge.send("t", 2, 4, frame[600:])
        assert (await edge.answer(2, 2))["result"] is None


async def test_a_joined_message_over_the_limit_closes_with_1009(bus: Callable[[], Any]) -> None:
    """The last piece counts too: k within the limit plus a t beyond it is too big."""
    async with primary_relay(bus, max_message_bytes=2000) as primary:
        edge = await edge_of(bus, primary)
        await opened(edge, 1)
        await edge.send("k", 1, 3, b"x" * 1500)
        await edge.send("t", 1, 4, b"x" * 1500)
        _, code, _ = await edge.closed(1)
        assert code == 1009
        await wait_until(lambda: primary.relay.connections == 0, "dropped")


class SlowSink:
    """The real gateway, made slow: each frame waits for ``release`` (no protocol mocked)."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.release = asyncio.Event()

    def open(self, transport: Any) -> Any:
        return self.gateway.open(transport)

    async def handle_frame(self, connection: Any, frame: str | bytes) -> None:
        await self.release.wait()
        await self.gateway.handle_frame(connection, frame)

    async def close(self, connection: Any) -> None:
        await self.gateway.close(connection)


async def test_an_inbox_overflow_closes_with_1013(bus: Callable[[], Any]) -> None:
    host = Host(Settings(), providers=[EchoAgent()])
    await host.start()
    sink = SlowSink(Gateway(host))
    subjects = Subjects(new_cluster_name())
    relay = PrimaryRelay(
        await bus(),
        subjects,
        "primary",
        1,
        sink,
        heartbeat=0.05,
        edge_timeout=30.0,
        inbox=1,
        max_message_bytes=1 << 20,
    )
    await relay.start()
    try:
        edge = FakeEdge(await bus(), subjects, "edge1", 1)
        await edge.start()
        await edge.send("o", 1, 1)
        await edge.send("o", 2, 1)
        for n in range(2, 6):
            await edge.send("t", 1, n, rpc(n, "ping", {"channel": ROOT}))
        _, code, reason = await edge.closed(1)
        assert code == 1013
        assert reason
        await wait_until(lambda: relay.connections == 1, "the flooding connection dropped")
        sink.release.set()
        await edge.send("t", 2, 2, init(1, "calm"))
        assert (await edge.answer(2, 1))["result"]["protocolVersion"] == "0.7.0"
    finally:
        sink.release.set()
        await relay.stop()
        await host.stop(close_timeout=1.0)


async def test_a_silent_edge_has_its_connections_dropped(bus: Callable[[], Any]) -> None:
    async with primary_relay(bus, edge_timeout=1.0) as primary:
        silent = await edge_of(bus, primary, "silent")
        alive = await edge_of(bus, primary, "alive")
        await opened(silent, 1, "a")
        await opened(alive, 1, "b")
        assert len(primary.host.connections) == 2

        async def beating() -> None:
            while True:
                await alive.beat()
                await asyncio.sleep(0.1)

        beater = asyncio.ensure_future(beating())
        try:
            await wait_until(lambda: len(primary.host.connections) == 1, "silent edge dropped")
            assert primary.relay.connections == 1
            await asyncio.sleep(1.2)  # the beating one stays
            await alive.send("t", 1, 3, rpc(2, "ping", {"channel": ROOT}))
            assert (await alive.answer(1, 2))["result"] is None
        finally:
            beater.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beater


async def test_an_old_epoch_is_not_heard(bus: Callable[[], Any]) -> None:
    async with primary_relay(bus, epoch=2) as primary:
        edge = await edge_of(bus, primary)
        await edge.send("o", 1, 1, epoch=1)
        await edge.send("t", 1, 2, init(), epoch=1)
        await opened(edge, 2)  # on epoch 2, after the others
        assert primary.relay.connections == 1
        assert 1 not in edge.frames
        await edge.nothing_for(1)


async def test_a_binary_frame_gets_the_gateway_error(bus: Callable[[], Any]) -> None:
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await opened(edge, 1)
        await edge.send("b", 1, 3, b"\x00\x01binary")
        _, _, _, _, payload = await edge.next(1)
        (error,) = [json.loads(f) for f in unpack_frames(payload)]
        assert error["error"]["code"] == -32600
        assert "binary" in error["error"]["message"]
        await edge.send("t", 1, 4, rpc(2, "ping", {"channel": ROOT}))
        assert (await edge.answer(1, 2))["result"] is None


async def test_invalid_utf8_text_closes_with_1007_and_others_live(
    bus: Callable[[], Any],
) -> None:
    """What the door answers invalid UTF-8 with (RFC 6455 1007), not an internal error."""
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await opened(edge, 1, "bad")
        await opened(edge, 2, "good")
        await edge.send("t", 1, 3, b'{"jsonrpc": "2.0", "\xff\xfe": 1}')
        _, code, _ = await edge.closed(1)
        assert code == 1007
        await edge.send("t", 2, 3, rpc(2, "ping", {"channel": ROOT}))
        assert (await edge.answer(2, 2))["result"] is None


async def test_an_open_with_a_bad_identity_opens_nothing(bus: Callable[[], Any]) -> None:
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await edge.send("o", 1, 1, b"\xff\xfe\n1")
        _, code, _ = await edge.closed(1)
        assert code == 1012
        assert primary.relay.connections == 0
        assert not primary.host.connections
        await opened(edge, 2)


# -- 3. the edge's side ---------------------------------------------------------------------------


class FakePrimary:
    """A raw bus client playing the primary of ``epoch``: heartbeats, and frames to the edge."""

    def __init__(self, nc: Any, subjects: Subjects, epoch: int, edge: str) -> None:
        self.nc = nc
        self.subjects = subjects
        self.epoch = epoch
        self.edge = edge
        self.messages: asyncio.Queue[Decoded] = asyncio.Queue()
        self.n: dict[int, int] = {}

    async def start(self) -> None:
        async def on_message(msg: Any) -> None:
            await self.messages.put(decode(msg.data))

        await self.nc.subscribe(self.subjects.primary_all(self.epoch), cb=on_message)
        await self.nc.flush()

    async def beat(self, epoch: int | None = None, node: str = "fake") -> None:
        epoch = self.epoch if epoch is None else epoch
        await self.nc.publish(self.subjects.hb_primary, f"{node} {epoch}".encode())
        await self.nc.flush()

    async def next(self) -> Decoded:
        async with asyncio.timeout(TIMEOUT):
            return await self.messages.get()

    async def send(
        self,
        kind: str,
        conn: int,
        payload: bytes,
        *,
        n: int | None = None,
        epoch: int | None = None,
    ) -> None:
        if n is None:
            n = self.n.get(conn, 0) + 1
        self.n[conn] = n
        data = encode(kind, conn, n, payload, self.epoch if epoch is None else epoch)
        await self.nc.publish(self.subjects.edge(self.edge), data)
        await self.nc.flush()

    async def frames(self, conn: int, frames: list[bytes], **kwargs: Any) -> None:
        await self.send("f", conn, pack_frames(frames), **kwargs)


@dataclasses.dataclass
class Door:
    edge: EdgeRelay
    server: Server
    url: str
    primary: FakePrimary

    @property
    def http(self) -> str:
        return self.url.replace("ws://", "http://")


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT):
            return 200
    except urllib.error.HTTPError as error:
        return error.code


async def readyz(door: Door) -> int:
    return await asyncio.to_thread(http_status, door.http + "/readyz")


@contextlib.asynccontextmanager
async def edge_door(
    bus: Callable[[], Any], *, primary_timeout: float = 30.0, epoch: int = 1
) -> AsyncIterator[Door]:
    settings = Settings(host="127.0.0.1", port=0)
    host = Host(settings, providers=[EchoAgent()])  # never started: it relays
    gateway = Gateway(host)
    subjects = Subjects(new_cluster_name())
    edge = EdgeRelay(
        await bus(),
        subjects,
        "edge1",
        heartbeat=0.05,
        primary_timeout=primary_timeout,
        max_frames=1000,
        max_bytes=1 << 22,
    )
    await edge.start()
    server = await start_server(gateway, edge=edge)
    host_, port = server.sockets[0].getsockname()[:2]
    fake = FakePrimary(await bus(), subjects, epoch, "edge1")
    await fake.start()
    try:
        yield Door(edge, server, f"ws://{host_}:{port}", fake)
    finally:
        server.close()
        await server.wait_closed()
        await edge.stop()


async def ready_door(door: Door) -> None:
    await door.primary.beat()
    await wait_until(lambda: door.edge.ready, "the edge heard the primary")


@contextlib.asynccontextmanager
async def relayed_client(door: Door) -> AsyncIterator[tuple[ClientConnection, int]]:
    """A client through the door; its relay connection number (from the ``o``)."""
    async with connect(door.url, open_timeout=TIMEOUT, max_size=None) as ws:
        kind, conn, n, epoch, _ = await door.primary.next()
        assert (kind, n, epoch) == ("o", 1, None)
        yield ws, conn


async def close_code(ws: ClientConnection) -> tuple[int | None, str]:
    async with asyncio.timeout(TIMEOUT):
        with contextlib.suppress(ConnectionClosed):
            while True:
                await ws.recv()
    await ws.wait_closed()
    assert ws.close_code is not None
    return ws.close_code, ws.close_reason or ""


async def test_the_door_is_503_until_a_primary_beats(bus: Callable[[], Any]) -> None:
    async with edge_door(bus) as door:
        assert await readyz(door) == 503
        with pytest.raises(InvalidStatus) as refused:
            async with connect(door.url, open_timeout=TIMEOUT):
                pass
        assert refused.value.response.status_code == 503
        await ready_door(door)
        assert await readyz(door) == 200
        async with relayed_client(door):
            assert door.edge.connections == 1


async def test_the_door_is_503_while_the_bus_reconnects_though_the_primary_beats(
    bus: Callable[[], Any],
) -> None:
    """Between nats-py's disconnect and its reconnected callback — which closes every
    relayed client — the door refuses new clients, heartbeats or not: nats-py delivers
    the primary's beats before that callback, and a client let in then would be
    closed at once (tests/cluster/test_bus_outage.py)."""
    async with edge_door(bus) as door:
        await ready_door(door)
        door.edge.bus_lost()  # what the node does when nats-py reports the disconnect
        seen = door.edge._primary_seen
        await door.primary.beat()
        await wait_until(lambda: door.edge._primary_seen > seen, "the edge heard the beat")
        assert not door.edge.ready
        assert await readyz(door) == 503
        with pytest.raises(InvalidStatus) as refused:
            async with connect(door.url, open_timeout=TIMEOUT):
                pass
        assert refused.value.response.status_code == 503
        door.edge.bus_reconnected()  # what the node does once nats-py has reconnected
        assert await readyz(door) == 200
        async with relayed_client(door):
            assert door.edge.connections == 1


async def test_frames_reach_the_primary_in_order_and_back(bus: Callable[[], Any]) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, conn):
            sent = [f'{{"i": {i}, "text": "line\\nbreak"}}' for i in range(20)]
            for frame in sent:
                await ws.send(frame)
            got = [await door.primary.next() for _ in sent]
            assert [(k, c, n) for k, c, n, _, _ in got] == [("t", conn, n) for n in range(2, 22)]
            assert [p.decode() for *_, p in got] == sent
            await door.primary.frames(conn, [b'{"a": 1}', b'{"b": "x\\ny"}'])
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws.recv()) == {"a": 1}
                assert json.loads(await ws.recv()) == {"b": "x\ny"}
        # The client's close reaches the primary as an x.
        kind, c, n, _, _ = await door.primary.next()
        assert (kind, c, n) == ("x", conn, 22)


async def test_a_newer_primary_closes_relayed_clients_with_1012(bus: Callable[[], Any]) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, _):
            await door.primary.beat(epoch=0)  # a deposed primary still beating: ignored
            await door.primary.frames(1, [b'{"still": "here"}'])
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws.recv()) == {"still": "here"}
            assert door.edge.primary == ("fake", 1)
            await door.primary.beat(epoch=2, node="newer")
            assert (await close_code(ws))[0] == 1012
        assert door.edge.primary == ("newer", 2)
        await wait_until(lambda: door.edge.connections == 0, "the client is gone")


async def test_a_message_of_another_epoch_is_ignored(bus: Callable[[], Any]) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, conn):
            await door.primary.frames(conn, [b'{"from": "the past"}'], n=1, epoch=0)
            await door.primary.send("x", conn, b"1008 deposed", n=1, epoch=0)
            await door.primary.frames(conn, [b'{"from": "now"}'], n=1)
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws.recv()) == {"from": "now"}


async def test_a_gap_from_the_primary_closes_the_client_with_1012(
    bus: Callable[[], Any],
) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, conn):
            await door.primary.frames(conn, [b'{"one": 1}'])
            await door.primary.frames(conn, [b'{"three": 3}'], n=3)
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws.recv()) == {"one": 1}
            assert (await close_code(ws))[0] == 1012
        kind, c, _, _, _ = await door.primary.next()
        assert (kind, c) == ("x", conn)  # the primary is told to drop it


async def test_malformed_or_unpackable_messages_from_the_primary(
    bus: Callable[[], Any],
) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, conn):
            edge_subject = door.primary.subjects.edge("edge1")
            await door.primary.nc.publish(edge_subject, b"garbage without a header")
            await door.primary.frames(conn, [b'{"ok": 1}'])
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws.recv()) == {"ok": 1}
            await door.primary.send("f", conn, b"99\ntruncated")
            assert (await close_code(ws))[0] == 1012


async def test_primary_silence_closes_clients_and_the_door(bus: Callable[[], Any]) -> None:
    async with edge_door(bus, primary_timeout=0.4) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, _):
            assert (await close_code(ws))[0] == 1012
        assert door.edge.primary is None
        assert await readyz(door) == 503
        with pytest.raises(InvalidStatus) as refused:
            async with connect(door.url, open_timeout=TIMEOUT):
                pass
        assert refused.value.response.status_code == 503


async def test_x_1008_closes_after_the_frames_before_it(bus: Callable[[], Any]) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, conn):
            error = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"no"}}'
            await door.primary.frames(conn, [b'{"first": 1}', error])
            await door.primary.send("x", conn, b"1008 unsupported protocol version")
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws.recv()) == {"first": 1}
                assert json.loads(await ws.recv())["error"]["code"] == -32005
            assert await close_code(ws) == (1008, "unsupported protocol version")


@pytest.mark.parametrize("payload", [b"1005 reserved", b"99999 huge", b"abc no code", b""])
async def test_an_x_with_a_bad_code_closes_with_1012(
    bus: Callable[[], Any], payload: bytes
) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, conn):
            await door.primary.send("x", conn, payload)
            assert (await close_code(ws))[0] == 1012


async def test_an_x_with_n_0_closes_with_1012(bus: Callable[[], Any]) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, conn):
            await door.primary.send("x", conn, b"1012 unknown connection", n=0)
            assert (await close_code(ws))[0] == 1012


async def test_large_frames_are_chunked_both_ways(bus: Callable[[], Any]) -> None:
    """Over NATS max_payload: the edge sends k pieces; the primary's k pieces are joined."""
    async with edge_door(bus) as door:
        await ready_door(door)
        limit = int(door.primary.nc.max_payload)
        async with relayed_client(door) as (ws, conn):
            big = json.dumps({"text": "x" * (limit * 2 + 17)})
            await ws.send(big)
            parts: list[bytes] = []
            while True:
                kind, c, n, _, payload = await door.primary.next()
                assert c == conn
                assert n == 2 + len(parts)
                parts.append(payload)
                if kind != "k":
                    assert kind == "t"
                    break
            assert len(parts) == 3
            assert b"".join(parts).decode() == big
            fake = door.primary
            last = await publish(
                fake.nc, fake.subjects.edge("edge1"), "f", conn, 1, pack_frames([big.encode()]), 1
            )
            assert last == 3  # two k pieces, then the f
            async with asyncio.timeout(TIMEOUT):
                assert await ws.recv() == big


async def test_a_close_during_a_chunked_send_keeps_the_numbering(bus: Callable[[], Any]) -> None:
    """The writer's pieces and the closer's ``x`` never share a number (one sequence)."""
    subjects = Subjects(new_cluster_name())
    primary_nc = await bus()
    edge = FakeEdge(await bus(), subjects, "edge1", 1)
    await edge.start()
    link = EdgeLink(primary_nc, subjects.edge("edge1"), 1, max_bytes=1 << 30)
    transport = BusTransport(link, 5)
    big = b"y" * (int(primary_nc.max_payload) * 2)
    sending = asyncio.ensure_future(transport.send_texts([big]))
    await asyncio.sleep(0)  # the writer is between pieces
    await transport.close(1008, "bye")
    await sending
    try:
        async with asyncio.timeout(TIMEOUT):
            got = [await edge.messages.get() for _ in range(4)]  # f: one piece, not frames
        assert [(kind, n) for kind, _, n, _, _ in got] == [
            ("k", 1),
            ("k", 2),
            ("f", 3),
            ("x", 4),
        ]
        assert unpack_frames(b"".join(p for *_, p in got[:3])) == [big]
    finally:
        await link.stop()


async def test_a_lost_bus_closes_relayed_clients_with_1012(bus: Callable[[], Any]) -> None:
    """The edge's NATS connection is gone: a client's next frame cannot reach the
    primary, so the client is closed with 1012 (it reconnects) instead of hanging,
    and a new client is refused the same way."""
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws, _):
            nc = door.edge._nc  # the edge's own connection: the one that fails here
            await nc.close()
            await ws.send('{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}')
            code, reason = await close_code(ws)
            assert code == 1012
            assert "bus" in reason
        await wait_until(lambda: door.edge.connections == 0, "the client is gone")
        async with connect(door.url, open_timeout=TIMEOUT) as ws:
            assert (await close_code(ws))[0] == 1012


async def test_one_envelope_for_several_clients_of_an_edge_crosses_once(
    bus: Callable[[], Any],
) -> None:
    """Two relayed clients of one edge subscribed to one chat: each envelope of it goes
    to that edge as one ``g`` message naming both, each with its own next number."""
    async with primary_relay(bus) as primary:
        edge = await edge_of(bus, primary)
        await opened(edge, 1, "a")
        await opened(edge, 2, "b")
        session = f"ahp-session:/{uuid.uuid4()}"
        await edge.send(
            "t", 1, 3, rpc(2, "createSession", {"channel": session, "provider": "echo"})
        )
        assert "result" in await edge.answer(1, 2)
        await edge.send("t", 2, 3, rpc(2, "subscribe", {"channel": session}))
        await edge.answer(2, 2)
        await edge.send("t", 1, 4, rpc(3, "subscribe", {"channel": session}))
        await edge.answer(1, 3)
        edge.groups.clear()
        # A client action on the session: its envelope reaches both subscribers.
        action = {"type": "session/titleChanged", "title": "grouped"}
        dispatch = {"channel": session, "clientSeq": 1, "action": action}
        notification = {"jsonrpc": "2.0", "method": "dispatchAction", "params": dispatch}
        await edge.send("t", 1, 5, json.dumps(notification).encode())

        def titled(conn: int) -> bool:
            return any(
                f.get("method") == "action" and f["params"]["action"].get("title") == "grouped"
                for f in edge.frames.get(conn, [])
            )

        async with asyncio.timeout(TIMEOUT):
            while not (titled(1) and titled(2)):
                await edge.next(1 if not titled(1) else 2)
        grouped = [g for g in edge.groups if b"grouped" in g[4]]
        assert len(grouped) == 1
        names = grouped[0][4].partition(b"\n")[0]
        assert sorted(int(name.split(b":")[0]) for name in names.split(b",")) == [1, 2]
        # Numbering goes on per connection after a group: the next answer is whole.
        await edge.send("t", 2, 4, rpc(3, "ping", {"channel": ROOT}))
        assert (await edge.answer(2, 3))["result"] is None


async def test_a_group_reaches_each_client_and_a_gap_closes_only_its_own(
    bus: Callable[[], Any],
) -> None:
    async with edge_door(bus) as door:
        await ready_door(door)
        async with relayed_client(door) as (ws1, c1), relayed_client(door) as (ws2, c2):
            frames = pack_frames([b'{"to": "both"}'])
            group = b"%d:1,%d:1\n%s" % (c1, c2, frames)
            await door.primary.send("g", 0, group, n=0)
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws1.recv()) == {"to": "both"}
                assert json.loads(await ws2.recv()) == {"to": "both"}
            await door.primary.send("g", 0, b"garbage without frames", n=0)  # dropped
            # c1 is next at 2; a group numbering it 5 is a gap for c1 alone.
            group = b"%d:5,%d:2\n%s" % (c1, c2, pack_frames([b'{"n": 2}']))
            await door.primary.send("g", 0, group, n=0)
            assert (await close_code(ws1))[0] == 1012
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws2.recv()) == {"n": 2}
            await door.primary.frames(c2, [b'{"still": "here"}'], n=3)
            async with asyncio.timeout(TIMEOUT):
                assert json.loads(await ws2.recv()) == {"still": "here"}

"""The WebSocket transport: a writer batch leaves as one socket write, framed per RFC 6455."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import websockets
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from ahp_server.client import AhpClient
from ahp_server.host.core.fanout import WRITE_NOW_MAX_BYTES, Connection
from ahp_server.protocol.types import ChatDeltaAction
from ahp_server.transport.websocket import WebSocketTransport, forwarded_client
from tests.conftest import RunningHost

TIMEOUT = 30.0


def count_writes(connection: Connection) -> list[int]:
    """The size of every ``write()`` the connection's socket transport gets from now on."""
    socket_transport: Any = connection.transport._ws.transport  # type: ignore[attr-defined]
    writes: list[int] = []
    write = socket_transport.write

    def counting(data: bytes) -> None:
        writes.append(len(data))
        write(data)

    socket_transport.write = counting
    return writes


async def test_a_batch_of_frames_is_one_write(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        (connection,) = running_host.host.connections
        writes = count_writes(connection)
        deltas: list[object] = []
        client.on_envelope(
            lambda e: deltas.append(e) if isinstance(e.action, ChatDeltaAction) else None
        )
        text = " ".join(f"word{i}" for i in range(3000))  # the echo sends ~1,000 deltas
        await client.ask(chat, text, timeout=TIMEOUT)
        assert len(deltas) > 900
        # The writer takes what queued up while it was writing: many frames a
        # batch, each batch one write (websockets alone would write every frame).
        assert len(writes) < len(deltas) / 2


# -- the frames send_texts writes itself ---------------------------------------------------------

#: Payload sizes around every header form of RFC 6455 §5.2 (7-bit, 16-bit, 64-bit lengths).
SIZES = (0, 1, 125, 126, 127, 65_535, 65_536, 70_000)


async def _received(
    handler: Callable[[ServerConnection], Awaitable[None]], compression: str | None
) -> list[str | bytes]:
    """Serve one connection with ``handler``; every message a client got until it closed."""
    async with serve(handler, "127.0.0.1", 0, compression=compression, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        received: list[str | bytes] = []
        async with websockets.connect(
            f"ws://127.0.0.1:{port}", compression=compression, max_size=None
        ) as client:
            with contextlib.suppress(ConnectionClosed):
                async with asyncio.timeout(TIMEOUT):
                    async for message in client:
                        received.append(message)
    return received


async def _served(
    frames: list[bytes], *, compression: str | None, close_first: bool = False
) -> tuple[list[str | bytes], list[BaseException]]:
    """Serve one connection that sends ``frames`` with one ``send_texts``; what a client got."""
    errors: list[BaseException] = []

    async def handler(ws: ServerConnection) -> None:
        transport = WebSocketTransport(ws)
        if close_first:
            closing = asyncio.create_task(ws.close(1000, "bye"))
            await asyncio.sleep(0)
            try:
                await transport.send_texts(frames)
            except ConnectionClosed as error:
                errors.append(error)
            await closing
            return
        await transport.send_texts(frames)
        await ws.close()

    return await _received(handler, compression), errors


async def test_frames_of_every_length_form_arrive_intact() -> None:
    frames = [("é" * (size // 2) + "x" * (size % 2)).encode() for size in SIZES]
    received, _ = await _served(frames, compression=None)
    assert received == [frame.decode() for frame in frames]  # text frames, in order


async def test_with_compression_the_library_frames_them() -> None:
    frames = [b'{"n":%d}' % i * (i + 1) for i in range(50)]
    received, _ = await _served(frames, compression="deflate")
    assert received == [frame.decode() for frame in frames]


async def test_a_closing_connection_refuses_the_batch() -> None:
    received, errors = await _served([b'{"late":true}'], compression=None, close_first=True)
    assert received == []
    assert len(errors) == 1  # ConnectionClosed, as the library raises it


async def _write_now(compression: str | None) -> tuple[list[bool], list[str | bytes]]:
    """Serve one connection that hands frames to ``write_now``: what it answered, what came."""
    answers: list[bool] = []
    big = b'{"big":"' + b"y" * 70_000 + b'"}'  # a 64-bit length header (RFC 6455 §5.2)

    async def handler(ws: ServerConnection) -> None:
        transport = WebSocketTransport(ws)
        answers.append(transport.write_now([b'{"n":1}']))
        ws.pause_writing()  # what the event loop calls when the socket's buffer is full
        answers.append(transport.write_now([b'{"n":2}']))  # it would have to wait: declined
        ws.resume_writing()
        answers.append(transport.write_now([big, b'{"n":3}']))  # several: each its own frame
        await ws.close()

    return answers, await _received(handler, compression)


async def test_write_now_frames_what_the_socket_takes_at_once_and_declines_the_rest() -> None:
    answers, received = await _write_now(compression=None)
    assert answers == [True, False, True]
    # text frames, intact
    assert received == ['{"n":1}', '{"big":"' + "y" * 70_000 + '"}', '{"n":3}']


async def test_write_now_leaves_compressed_connections_to_the_library() -> None:
    answers, received = await _write_now(compression="deflate")
    assert answers == [False, False, False]
    assert received == []


async def test_what_an_idle_connection_is_sent_in_a_turn_leaves_when_the_turn_ends(
    running_host: RunningHost,
) -> None:
    """Connection.send with the writer parked: held, and written in one write when
    the turn of the loop ends, in order; past the turn's allowance, queued for the
    writer's batch behind what was held."""
    async with websockets.connect(running_host.url) as client:
        async with asyncio.timeout(TIMEOUT):
            while not running_host.host.connections:  # noqa: ASYNC110 - nothing to await
                await asyncio.sleep(0.01)
        (connection,) = running_host.host.connections
        writes = count_writes(connection)
        for _ in range(5):
            await asyncio.sleep(0)  # the writer parks
        frames = [b'{"jsonrpc":"2.0","method":"x","params":{"n":%d}}' % i for i in range(4)]
        for frame in frames:
            assert connection.send(frame)
        assert writes == []  # held until this turn of the loop ends
        assert connection.queued_frames == 0  # not queued: the writer stays parked
        received = [await asyncio.wait_for(client.recv(), TIMEOUT) for _ in frames]
        assert received == [frame.decode() for frame in frames]
        assert writes == [sum(len(f) + 2 for f in frames)]  # headers and frames, one write
        # More than a turn may hold: what was held, then the rest, in the writer's batch.
        writes.clear()
        for _ in range(5):
            await asyncio.sleep(0)
        big = b'{"jsonrpc":"2.0","method":"x","params":{"s":"%s"}}' % (b"z" * WRITE_NOW_MAX_BYTES)
        assert connection.send(frames[0])
        assert connection.send(big)
        assert connection.queued_frames == 2
        assert await asyncio.wait_for(client.recv(), TIMEOUT) == frames[0].decode()
        assert await asyncio.wait_for(client.recv(), TIMEOUT) == big.decode()
        assert writes == [len(frames[0]) + 2 + len(big) + 4]  # one batch: held first


PROXIES = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8")]


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        # No proxy trusted, or the peer is not one: the header is the client's claim.
        ("192.0.2.7", ["203.0.113.5"], "192.0.2.7"),
        # A trusted proxy: the rightmost address that is not a trusted proxy.
        ("10.0.0.2", ["203.0.113.5"], "203.0.113.5"),
        ("10.0.0.2", ["198.51.100.1, 203.0.113.5, 10.9.9.9"], "203.0.113.5"),
        ("10.0.0.2", ["198.51.100.1", "203.0.113.5"], "203.0.113.5"),  # two header lines
        # Ports and brackets as some proxies write them; IPv6 and IPv4-mapped peers.
        ("10.0.0.2", ["203.0.113.5:4711"], "203.0.113.5"),
        ("10.0.0.2", ["[2001:db8::1]:4711"], "2001:db8::1"),
        ("fd00::3", ["2001:db8::1"], "2001:db8::1"),
        ("::ffff:10.0.0.2", ["203.0.113.5"], "203.0.113.5"),
        # No header, or proxies all the way: the last address known.
        ("10.0.0.2", [], "10.0.0.2"),
        ("10.0.0.2", ["10.1.1.1, 10.2.2.2"], "10.1.1.1"),
        # Something that is no address ends the walk at the hop that passed it.
        ("10.0.0.2", ["203.0.113.5, unknown"], "10.0.0.2"),
        ("10.0.0.2", ["unknown, 10.3.3.3"], "10.3.3.3"),
        ("10.0.0.2", ["[2001:db8::1"], "10.0.0.2"),
    ],
)
def test_the_client_behind_trusted_proxies(peer: str, forwarded: list[str], client: str) -> None:
    assert forwarded_client(peer, forwarded, PROXIES) == client


def test_with_no_proxy_trusted_the_peer_is_the_client() -> None:
    assert forwarded_client("10.0.0.2", ["203.0.113.5"], []) == "10.0.0.2"

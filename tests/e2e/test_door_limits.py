"""The door under abuse, over real sockets: slow-loris upgrades and the per-address limit.

Issue 16 item 4. ``server.handshake_timeout`` cuts a client that never finishes
its HTTP upgrade; ``limits.max_connections_per_ip`` answers 429 at the door and
frees a slot when a connection closes, however it closes. docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import urlsplit

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from ahp_server.client import AhpClient
from ahp_server.config import Settings
from tests.conftest import captured_logs, start_host
from tests.e2e.helpers import TIMEOUT


async def ping(ws: ClientConnection) -> None:
    """One JSON-RPC ping answered on this connection (bounded)."""
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    answer = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    assert answer["id"] == 1
    assert "result" in answer


async def test_a_stalled_upgrade_is_cut_at_the_handshake_timeout_and_others_are_served() -> None:
    running = await start_host(Settings(handshake_timeout=0.5))
    try:
        address = urlsplit(running.url)
        assert address.hostname is not None
        assert address.port is not None
        loris = []
        for _ in range(20):
            reader, writer = await asyncio.open_connection(address.hostname, address.port)
            # Half an upgrade request: no blank line, ever.
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")
            await writer.drain()
            loris.append((reader, writer))
        started = time.monotonic()
        # Meanwhile a real client is served, several times over.
        for _ in range(3):
            async with AhpClient.connect(running.url) as client:
                await client.request("ping", {}, timeout=TIMEOUT)
        for reader, writer in loris:
            # The host drops the stalled socket: EOF (or a reset) well before the default 10 s.
            try:
                data = await asyncio.wait_for(reader.read(), 3.0)
            except ConnectionResetError:
                data = b""
            assert data == b""
            writer.close()
        elapsed = time.monotonic() - started
        assert elapsed < 3.0, f"stalled upgrades held for {elapsed:.1f}s"
    finally:
        await running.stop()


async def refused_status(url: str, forwarded_for: str | None = None) -> tuple[int, str | None]:
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
    with pytest.raises(InvalidStatus) as caught:
        async with connect(url, open_timeout=TIMEOUT, additional_headers=headers):
            pass
    response = caught.value.response
    return response.status_code, response.headers.get("Retry-After")


async def test_the_per_address_limit_answers_429_and_frees_slots_when_connections_close() -> None:
    running = await start_host(Settings(max_connections_per_ip=3))
    try:
        held = [await connect(running.url, open_timeout=TIMEOUT) for _ in range(3)]
        for ws in held:
            await ping(ws)
        assert await refused_status(running.url) == (429, "1")
        # Health and metrics are not connections: still answered at the limit.
        reader, writer = await asyncio.open_connection(
            urlsplit(running.url).hostname, urlsplit(running.url).port
        )
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), TIMEOUT)
        assert status_line.startswith(b"HTTP/1.1 200")
        writer.close()

        # A clean close frees its slot...
        await held.pop().close()
        fresh = await admitted(running.url)
        await ping(fresh)
        held.append(fresh)
        assert await refused_status(running.url) == (429, "1")

        # ...and so does an abrupt drop (no close frame: the TCP connection just ends).
        dropped = held.pop(0)
        dropped.transport.abort()
        fresh = await admitted(running.url)
        await ping(fresh)
        held.append(fresh)
        # The survivors were never disturbed.
        for ws in held:
            await ping(ws)
        for ws in held:
            await ws.close()
    finally:
        await running.stop()


async def test_a_slot_is_freed_when_the_client_leaves_before_its_upgrade_completes() -> None:
    """Admitted at the door (counted), gone before reading the 101: the slot comes back."""
    running = await start_host(Settings(max_connections_per_ip=1))
    try:
        address = urlsplit(running.url)
        assert address.hostname is not None
        assert address.port is not None
        for _ in range(5):
            _reader, writer = await asyncio.open_connection(address.hostname, address.port)
            writer.write(
                b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                b"Sec-WebSocket-Version: 13\r\n\r\n"
            )
            await writer.drain()
            writer.transport.abort()  # gone without reading the answer
        ws = await admitted(running.url)
        await ping(ws)
        await ws.close()
    finally:
        await running.stop()


async def admitted(url: str) -> ClientConnection:
    """Connect, retrying 429 while the host notices a closed connection (bounded)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            return await connect(url, open_timeout=TIMEOUT)
        except InvalidStatus as error:
            if error.response.status_code != 429 or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


async def test_behind_a_trusted_proxy_the_limit_counts_each_forwarded_client() -> None:
    # The test is the proxy (127.0.0.1, trusted): X-Forwarded-For names the client.
    settings = Settings(max_connections_per_ip=2, trusted_proxies=("127.0.0.0/8",))
    running = await start_host(settings)
    with captured_logs() as entries:
        try:

            async def as_client(chain: str) -> ClientConnection:
                ws = await connect(
                    running.url, open_timeout=TIMEOUT, additional_headers={"X-Forwarded-For": chain}
                )
                await ping(ws)
                return ws

            held = [await as_client("203.0.113.5"), await as_client("198.51.100.1, 203.0.113.5")]
            # The rightmost address not a trusted proxy is the client: both were 203.0.113.5.
            assert await refused_status(running.url, "203.0.113.5") == (429, "1")
            assert await refused_status(running.url, "203.0.113.5, 127.0.0.9") == (429, "1")
            # Other clients behind the same proxy are not held back by that one.
            held += [await as_client("203.0.113.6"), await as_client("2001:db8::1")]
            # Without the header the proxy itself is the client (it has its own two slots).
            held += [await connect(running.url, open_timeout=TIMEOUT) for _ in range(2)]
            assert await refused_status(running.url) == (429, "1")
            # An entry that is no address: counted as the proxy that passed it (now full).
            assert await refused_status(running.url, "not-an-address") == (429, "1")
            for ws in held:
                await ping(ws)
                await ws.close()
        finally:
            await running.stop()
    # The logs name each client by the address it was counted under.
    opened = [e.get("client") for e in entries if e["event"] == "connection opened"]
    assert sorted(opened) == sorted(
        ["203.0.113.5"] * 2 + ["203.0.113.6", "2001:db8::1"] + ["127.0.0.1"] * 2
    )


async def test_an_untrusted_peers_forwarded_for_is_ignored() -> None:
    # Trusting some other network: the test's 127.0.0.1 may not pick its address.
    settings = Settings(max_connections_per_ip=1, trusted_proxies=("10.0.0.0/8",))
    running = await start_host(settings)
    try:
        ws = await connect(
            running.url, open_timeout=TIMEOUT, additional_headers={"X-Forwarded-For": "192.0.2.1"}
        )
        await ping(ws)
        assert await refused_status(running.url, "192.0.2.2") == (429, "1")
        await ws.close()
    finally:
        await running.stop()

"""The frame fuzzer, short: in process through the gateway, and over a real socket.

Issue 16 item 3. The million-frame run is ``python -m tests.fuzz.gateway_fuzz``
(docs/reliability.md has its figures); these are the CI versions (< 30 s).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections import Counter

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from ahp_server.config import Settings
from ahp_server.logging import configure_logging
from ahp_server.protocol.versions import PROTOCOL_VERSION
from tests.conftest import start_host
from tests.e2e.helpers import TIMEOUT
from tests.fuzz.gateway_fuzz import Generator, expected_reply, report, run


async def test_ten_thousand_fuzzed_frames_through_the_gateway_break_no_invariant() -> None:
    try:
        figures = await run(10_000, seed=3, corpus=8, replay_every=2_500)
    finally:
        configure_logging("warning", "console")
    print(report(figures))
    assert figures.frames == 10_000
    assert not figures.escaped, figures.escaped[:5]
    assert not figures.violations, figures.violations[:5]
    assert not figures.log_errors
    # The mix reached every layer: answers of each class, and states to check.
    assert figures.requests > 2_000
    assert figures.invalid > 2_000
    assert figures.notifications > 500
    for code in (-32700, -32600, -32601, -32602):
        assert figures.errors_by_code[code] > 0, code
    assert figures.channels_checked > 10
    # Every loaded channel's live state equals its stored log replayed from
    # scratch by the host's own recovery code (four times during the run).
    assert figures.replays_checked > 40
    assert figures.replayed_envelopes > 100


async def _hello(url: str, number: int) -> ClientConnection:
    ws = await connect(url, open_timeout=TIMEOUT, max_size=None)
    await ws.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "hello",
                "method": "initialize",
                "params": {
                    "channel": "ahp-root://",
                    "protocolVersions": [PROTOCOL_VERSION],
                    "clientId": f"socket-fuzz-{number}",
                },
            }
        )
    )
    while json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)).get("id") != "hello":
        pass
    return ws


async def test_three_thousand_fuzzed_frames_over_a_real_socket_each_answered_as_due() -> None:
    """Each frame is followed by a sentinel ping: what arrives before the sentinel's answer
    is exactly what the frame earned (one response by id, one error, or nothing)."""
    running = await start_host(Settings(dispatch_rate=1e6, dispatch_burst=1_000_000))
    outcomes: Counter[str] = Counter()
    closes: Counter[int | None] = Counter()
    try:
        with tempfile.TemporaryDirectory(prefix="ahp-fuzz-") as workdir:
            generator = Generator(seed=11, corpus_size=6, workdir=workdir)
            connections = 0
            ws = await _hello(running.url, connections)
            for number in range(3_000):
                if number % 200 == 0:
                    generator.channels = [
                        "ahp-root://",
                        *list(running.host.sessions)[-6:],
                        *list(running.host.chats)[-6:],
                    ]
                _, frame = generator.frame()
                sentinel = f"sentinel-{number}"
                try:
                    await ws.send(frame)
                    await ws.send(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}))
                    answers = []
                    while True:
                        message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                        if "method" in message:
                            continue  # an envelope or notification for a subscription
                        if message.get("id") == sentinel:
                            break
                        answers.append(message)
                except ConnectionClosed:
                    # Closed by policy (e.g. -32005 after a bad initialize): a new connection.
                    closes[ws.close_code] += 1
                    connections += 1
                    ws = await _hello(running.url, connections)
                    continue
                expect, request_id = expected_reply(frame)
                outcomes[expect] += 1
                if expect == "none":
                    assert answers == [], (frame, answers)
                else:
                    assert [a.get("id") for a in answers] == [request_id], (frame, answers)
                    if expect == "error":
                        assert "error" in answers[0], (frame, answers)
            await ws.close()
        assert outcomes["request"] > 500
        assert outcomes["error"] > 500
        assert outcomes["none"] > 100
        assert set(closes) <= {1008}, closes  # only the documented policy closes
        # The host is still whole: a new client is served.
        ws = await _hello(running.url, connections + 1)
        await ws.close()
    finally:
        await running.stop()

"""Security and operations at the door, over real sockets: token, Origin, limits, health."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from websockets.asyncio.client import connect

from ahp_server.client import AhpClient, RemoteError
from ahp_server.config import Settings
from ahp_server.protocol.types import ChatDraftChangedAction, Message, MessageOrigin
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, http_get, refused

TOKEN = "correct horse battery staple"
ORIGIN = "https://ide.example.com"


@pytest.fixture
async def guarded() -> AsyncIterator[RunningHost]:
    running = await start_host(
        Settings(token=TOKEN, allowed_origins=(ORIGIN,), dispatch_rate=5.0, dispatch_burst=10)
    )
    try:
        yield running
    finally:
        await running.stop()


def http_url(running: RunningHost, path: str) -> str:
    return running.url.replace("ws://", "http://") + path


async def test_no_token_and_wrong_token_get_401(guarded: RunningHost) -> None:
    assert await refused(guarded.url) == 401
    assert await refused(guarded.url, additional_headers={"Authorization": "Bearer nope"}) == 401
    assert await refused(guarded.url + "/?tkn=nope") == 401


async def test_the_token_works_in_the_header_and_in_the_query(guarded: RunningHost) -> None:
    async with AhpClient.connect(guarded.url, token=TOKEN) as client:
        await client.ping()
    async with AhpClient.connect(guarded.url + "/?tkn=" + TOKEN.replace(" ", "%20")) as client:
        await client.ping()


async def test_a_foreign_origin_gets_403_and_an_allowed_one_connects(guarded: RunningHost) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert await refused(guarded.url, origin="https://evil.example", additional_headers=auth) == 403
    async with connect(guarded.url, origin=ORIGIN, additional_headers=auth) as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}))
        async with asyncio.timeout(TIMEOUT):
            assert json.loads(await ws.recv())["result"] is None


async def test_health_endpoints_and_metrics_move_with_traffic(guarded: RunningHost) -> None:
    status, content_type, body = await http_get(http_url(guarded, "/healthz"))
    assert (status, body) == (200, "ok\n")
    assert content_type.startswith("text/plain")
    status, content_type, _ = await http_get(http_url(guarded, "/readyz"))
    assert status == 200
    status, _, _ = await http_get(http_url(guarded, "/metrics"))
    assert status == 401  # behind the token (issue 16)
    status, _, _ = await http_get(http_url(guarded, "/metrics"), token="wrong")
    assert status == 401
    status, _, _ = await http_get(http_url(guarded, "/metrics?tkn=wrong"))
    assert status == 401
    status, content_type, before = await http_get(http_url(guarded, "/metrics"), token=TOKEN)
    assert status == 200
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"

    def value(text: str, sample: str) -> float:
        match = re.search(rf"^{re.escape(sample)} (\S+)$", text, flags=re.M)
        return float(match.group(1)) if match else 0.0

    async with AhpClient.connect(guarded.url, token=TOKEN) as client:
        chat = await client.open_chat()
        await client.ask(chat, "count me", timeout=TIMEOUT)
        _, _, during = await http_get(http_url(guarded, "/metrics"), token=TOKEN)
    assert value(during, "ahp_connections") == 1
    assert value(during, 'ahp_actions_total{channel_type="chat"}') > value(
        before, 'ahp_actions_total{channel_type="chat"}'
    )
    assert value(during, "ahp_subscriptions") >= 2
    assert "# TYPE ahp_rejections_total counter" in during


async def test_a_dispatch_flood_is_rejected_and_others_are_unaffected(
    guarded: RunningHost,
) -> None:
    async with (
        AhpClient.connect(guarded.url, token=TOKEN) as flooder,
        AhpClient.connect(guarded.url, token=TOKEN) as bystander,
    ):
        chat = await flooder.open_chat()
        calm = await bystander.open_chat()
        draft = ChatDraftChangedAction(draft=Message(text="x", origin=MessageOrigin(kind="user")))
        seqs = [await flooder.dispatch(chat, draft) for _ in range(60)]

        def answered(c: AhpClient) -> bool:
            echoed = {getattr(e.origin, "client_seq", None) for e in c.envelopes}
            return all(seq in echoed for seq in seqs)

        await flooder.wait_for(answered, timeout=TIMEOUT)
        rejected = [
            e
            for e in flooder.envelopes
            if "rate limit" in str(e.rejection_reason)
            and getattr(e.origin, "client_id", None) == flooder.client_id
        ]
        assert len(rejected) >= 60 - 10 - 5  # the burst (and what refilled) got through
        assert flooder.view(chat) == flooder.confirmed(chat)  # nothing left pending
        # The other client is not slowed or refused.
        assert await bystander.ask(calm, "still here", timeout=TIMEOUT) == "still here"


def test_chat_command_prints_the_streamed_echo_reply() -> None:
    async def scenario() -> subprocess.CompletedProcess[str]:
        running = await start_host()
        try:
            return await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "ahp_server", "chat", "hello there", "--url", running.url],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            await running.stop()

    result = asyncio.run(scenario())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello there"


async def test_limits_give_errors_not_crashes() -> None:
    running = await start_host(
        Settings(max_connections=2, max_subscriptions=3, max_chats_per_session=2)
    )
    try:
        async with (
            AhpClient.connect(running.url) as first,
            AhpClient.connect(running.url) as second,
        ):
            # A third connection is refused at the door (503) while two are open.
            assert await refused(running.url) == 503
            chat = await first.open_chat()  # subscribes the session and its default chat
            session = running.host.chat_index[chat]
            await first.create_chat(session)  # the second chat: at the limit now
            with pytest.raises(RemoteError) as too_many_chats:
                await first.create_chat(session)
            assert too_many_chats.value.code == -32602
            await first.subscribe("ahp-root://")  # the third subscription
            other = await second.open_chat()
            with pytest.raises(RemoteError) as too_many_subscriptions:
                await first.subscribe(other)
            assert too_many_subscriptions.value.code == -32602
            assert await second.ask(other, "fine", timeout=TIMEOUT) == "fine"
    finally:
        await running.stop()

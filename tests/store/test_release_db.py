"""A database written by the previous release opens with today's code and serves the same.

Layer: tests (store, across a real process). ``tests/data/db-0.1.0/`` holds a
data directory that ahp-server 0.1.0 (protocol 0.7.0) wrote while a client used
it (``make.py`` there says how), and what that release served from it
(``expected.json``). Here today's daemon opens a copy and a real client reads
every recorded channel, ``listSessions`` and ``fetchTurns`` back: nothing that
release acknowledged may be lost or change shape (issue 27, item 4).

The root channel's agents are the host's configuration, not stored data, so of
the root state only what the database decides (``activeSessions``) is compared.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ahp_server.client import AhpClient
from ahp_server.protocol import codec
from ahp_server.protocol.uris import parse_channel
from ahp_server.protocol.views import v0_7
from tests.e2e.helpers import Daemon

RELEASE = Path(__file__).resolve().parent.parent / "data" / "db-0.1.0"
ROOT = "ahp-root://"


def expected() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RELEASE / "expected.json").read_text(encoding="utf-8"))
    return data


def as_json(value: Any) -> Any:
    return json.loads(codec.encode(value))


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    """Today's daemon on a copy of the release's data directory (the copy may change)."""
    data = tmp_path / "data"
    shutil.copytree(RELEASE / "data", data)
    daemon = Daemon(data, roots=["/tmp"])
    try:
        yield await daemon.start()
        assert await daemon.terminate() == 0
    finally:
        await daemon.close()


def test_the_fixture_is_what_the_release_wrote() -> None:
    """The recording names its release, and it covers every kind of stored thing."""
    recorded = expected()
    assert recorded["made_by"] == {"ahp_server": "0.1.0", "protocol": "0.7.0"}
    chats = [c for c in recorded["snapshots"] if c.startswith("ahp-chat:")]
    sessions = [c for c in recorded["snapshots"] if c.startswith("ahp-session:")]
    assert len(chats) == 3
    assert len(sessions) == 2
    parts = {
        part["kind"]
        for chat in chats
        for turn in recorded["snapshots"][chat]["turns"]
        for part in turn["responseParts"]
    }
    assert {"markdown", "toolCall"} <= parts
    states = {turn["state"] for chat in chats for turn in recorded["snapshots"][chat]["turns"]}
    assert {"complete", "error"} <= states
    # A history longer than the one page fetchTurns was asked for.
    assert max(len(recorded["snapshots"][c]["turns"]) for c in chats) > 5


async def test_every_channel_is_served_as_the_release_served_it(served: str) -> None:
    recorded = expected()
    # A 0.7 client, as the release served: the client holds the state lifted to
    # 1.0, and the 0.7 view of that is what came over the wire.
    async with AhpClient.connect(served, protocol_versions=["0.7.0"]) as client:
        assert client.lifts_0_7
        for channel, snapshot in recorded["snapshots"].items():
            lifted = as_json(await client.subscribe(channel))
            state = v0_7.state(parse_channel(channel).kind, lifted)
            if channel == ROOT:
                assert state["activeSessions"] == snapshot["activeSessions"]
            else:
                assert state == snapshot, channel


async def test_the_catalogue_and_history_pages_are_the_release_s(served: str) -> None:
    recorded = expected()
    async with AhpClient.connect(served) as client:
        assert as_json(await client.list_sessions()) == recorded["listSessions"]
        for chat, page in recorded["fetchTurns"].items():
            got = as_json(await client.request("fetchTurns", {"channel": chat, "limit": 5}))
            assert got == page, chat


async def test_the_old_database_takes_new_work(served: str) -> None:
    """Opened by today's code, the release's chat goes on: a new turn lands after the old ones."""
    recorded = expected()
    chat = next(
        c
        for c, s in recorded["snapshots"].items()
        if c.startswith("ahp-chat:") and len(s["turns"]) > 5
    )
    async with AhpClient.connect(served) as client:
        await client.subscribe(chat)
        await client.ask(chat, "after the upgrade")
        state = as_json(client.confirmed(chat))
    old = [turn["id"] for turn in recorded["snapshots"][chat]["turns"]]
    assert [turn["id"] for turn in state["turns"]][: len(old)] == old
    assert len(state["turns"]) == len(old) + 1

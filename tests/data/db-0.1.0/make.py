"""Make ``data/`` and ``expected.json``: a database written by ahp-server 0.1.0.

Layer: test data. Run once, from the project root, with the release whose
database it records checked out (it was run at 0.1.0, protocol 0.7.0)::

    .venv/bin/python tests/data/db-0.1.0/make.py

It starts the real daemon on a fresh SQLite data directory, drives it over a
real socket as a user would (sessions with working directories, chats, turns
with a confirmed and a denied tool call, an error, a title, a second chat, a
session's worth of history), stops it with SIGTERM, keeps its data directory (``data/``) and
writes beside it what that release served: every channel's snapshot, ``listSessions``
and ``fetchTurns`` (``expected.json``). ``tests/store/test_release_db.py`` loads
the database with today's code and checks it serves the same.

Never regenerate it with a newer release: its point is that it was written by
an older one.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from ahp_server import __version__  # noqa: E402
from ahp_server.client import AhpClient  # noqa: E402
from ahp_server.protocol import codec  # noqa: E402
from ahp_server.protocol.v0_7.types import (  # noqa: E402
    ChatState,
    ChatToolCallApprovedAction,
    ChatToolCallDeniedAction,
    SessionState,
    SessionTitleChangedAction,
    ToolCallPendingConfirmationState,
    ToolCallResponsePart,
)
from tests.e2e.helpers import TIMEOUT, Daemon  # noqa: E402

#: Working directories the sessions record (under /tmp: inside the tests' roots).
WORK = "file:///tmp/ahp-release-db/project"
OTHER = "file:///tmp/ahp-release-db/other"
ROOT = "ahp-root://"


def pending_call(client: AhpClient, chat: str) -> ToolCallPendingConfirmationState | None:
    turn = client.confirmed(chat, ChatState).active_turn
    for part in getattr(turn, "response_parts", ()):
        if isinstance(part, ToolCallResponsePart) and isinstance(
            part.tool_call, ToolCallPendingConfirmationState
        ):
            return part.tool_call
    return None


async def tool_turn(client: AhpClient, chat: str, approve: bool) -> None:
    turns = len(client.confirmed(chat, ChatState).turns)
    turn_id = await client.send_message(chat, "/tool")
    await client.wait_for(lambda c: pending_call(c, chat) is not None, timeout=TIMEOUT)
    call = pending_call(client, chat)
    assert call is not None
    if approve:
        action: Any = ChatToolCallApprovedAction(
            turn_id=turn_id, tool_call_id=call.tool_call_id, confirmed="user-action"
        )
    else:
        action = ChatToolCallDeniedAction(
            turn_id=turn_id, tool_call_id=call.tool_call_id, reason="denied"
        )
    await client.dispatch(chat, action)
    await client.wait_for(
        lambda c: len(c.confirmed(chat, ChatState).turns) > turns, timeout=TIMEOUT
    )


async def settled_session(client: AhpClient, directories: list[str]) -> tuple[str, str]:
    session = await client.create_session(working_directories=directories, subscribe=True)
    await client.wait_for(
        lambda c: isinstance(c.confirmed(session, SessionState).default_chat, str),
        timeout=TIMEOUT,
    )
    default = client.confirmed(session, SessionState).default_chat
    assert isinstance(default, str)
    await client.subscribe(default)
    return session, default


async def record(url: str, channels: list[str]) -> dict[str, Any]:
    async with AhpClient.connect(url) as observer:
        snapshots = {
            channel: json.loads(codec.encode(await observer.subscribe(channel)))
            for channel in channels
        }
        listed = json.loads(codec.encode(await observer.list_sessions()))
        chats = [c for c in channels if c.startswith("ahp-chat:")]
        turns = {
            chat: json.loads(
                codec.encode(await observer.request("fetchTurns", {"channel": chat, "limit": 5}))
            )
            for chat in chats
        }
    return {"snapshots": snapshots, "listSessions": listed, "fetchTurns": turns}


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "data"
        daemon = Daemon(data, roots=["/tmp"])
        try:
            url = await daemon.start()
            async with AhpClient.connect(url) as client:
                session, chat = await settled_session(client, [WORK])
                await client.ask(chat, "hello from the release before 1.0")
                await tool_turn(client, chat, approve=True)
                await tool_turn(client, chat, approve=False)
                turns = len(client.confirmed(chat, ChatState).turns)
                await client.send_message(chat, "/error")
                await client.wait_for(
                    lambda c: len(c.confirmed(chat, ChatState).turns) > turns, timeout=TIMEOUT
                )
                await client.dispatch(session, SessionTitleChangedAction(title="Release notes"))
                second = await client.create_chat(session, subscribe=True)
                await client.ask(second, "a second chat in the same session")
                other, other_chat = await settled_session(client, [OTHER, WORK])
                for number in range(12):
                    await client.ask(other_chat, f"turn {number}: " + "words " * number)
            channels = [ROOT, session, chat, second, other, other_chat]
            expected = await record(url, channels)
            assert await daemon.terminate() == 0
        finally:
            await daemon.close()
        # The whole data directory: the database and the tail log beside it
        # (store/tail.py) are one store.
        target = HERE / "data"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(data, target)
    expected["made_by"] = {"ahp_server": __version__, "protocol": "0.7.0"}
    (HERE / "expected.json").write_text(
        json.dumps(expected, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    asyncio.run(main())

"""The provider session seam (host/sessions.py) over real sockets and a real database.

A recording provider says which hook the host called, when, and with what; its
hooks can succeed, raise, or hang. Each moment is checked: ``open`` before
``session/ready``, ``restore`` before the first turn after a restart (once,
even for turns in several chats), ``close`` on dispose and on host stop — and
every failure ends in ``session/creationFailed`` or ``chat/error``, never a
stuck session or turn.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import sys
from pathlib import Path

import pytest
from msgspec import UnsetType

from ahp_server.agents.base import AgentError, SessionContext, TurnIO, TurnRequest
from ahp_server.agents.echo import EchoAgent
from ahp_server.client import AhpClient, TurnFailedError, turn_error
from ahp_server.config import Settings
from ahp_server.host.host import DB_FILE
from ahp_server.protocol.types import (
    AgentCapabilities,
    AgentInfo,
    ChatState,
    ChatTurnCancelledAction,
    MultipleChatsCapability,
    RootState,
    SessionState,
    SessionStatus,
    Turn,
)
from ahp_server.protocol.uris import default_chat
from tests.conftest import RunningHost, start_host

TIMEOUT = 10.0
PROVIDER = "recorder"
ROOT = Path(__file__).resolve().parents[2]


class RecordingAgent:
    """Records every hook call; ``behaviour[hook]`` is "ok", "raise", "crash" or "hang"."""

    def __init__(self, **behaviour: str) -> None:
        self.behaviour = {"open": "ok", "restore": "ok", "close": "ok", **behaviour}
        self.calls: list[tuple[str, str]] = []
        self.contexts: list[SessionContext] = []
        self.cancelled: list[str] = []

    @property
    def info(self) -> AgentInfo:
        return AgentInfo(
            provider=PROVIDER,
            display_name="Recorder",
            description="test",
            models=(),
            capabilities=AgentCapabilities(multiple_chats=MultipleChatsCapability()),
        )

    async def _hook(self, hook: str, session: SessionContext) -> None:
        self.calls.append((hook, session.session))
        self.contexts.append(session)
        match self.behaviour[hook]:
            case "raise":
                raise AgentError(f"{hook} refused by the test", error_type="testRefusal")
            case "crash":
                raise RuntimeError(f"{hook} has a bug")
            case "hang":
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancelled.append(hook)
                    raise

    async def open_session(self, session: SessionContext) -> None:
        await self._hook("open", session)

    async def restore_session(self, session: SessionContext) -> None:
        await self._hook("restore", session)

    async def close_session(self, session: SessionContext, *, disposed: bool) -> None:
        await self._hook("close-disposed" if disposed else "close-stop", session)

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        self.calls.append(("turn", request.session))
        await io.text(f"ok: {request.message.text}")

    def hooks(self, session: str) -> list[str]:
        return [hook for hook, uri in self.calls if uri == session]


def settings(**changes: object) -> Settings:
    values: dict[str, object] = {
        "session_open_timeout": TIMEOUT,
        "session_close_timeout": TIMEOUT,
        **changes,
    }
    return dataclasses.replace(Settings(), **values)  # type: ignore[arg-type]


async def host_with(agent: RecordingAgent, **changes: object) -> RunningHost:
    return await start_host(settings(**changes), providers=[agent, EchoAgent()])


async def settled(client: AhpClient, session: str) -> SessionState:
    """Wait until the session has left ``creating``; its state."""
    await client.wait_for(
        lambda c: c.confirmed(session, SessionState).lifecycle != "creating", timeout=TIMEOUT
    )
    return client.confirmed(session, SessionState)


# -- open --------------------------------------------------------------------------------------


async def test_open_is_called_once_with_the_directories_before_the_session_is_ready(
    tmp_path: Path,
) -> None:
    agent = RecordingAgent()
    running = await host_with(agent)
    try:
        async with AhpClient.connect(running.url) as client:
            folders = [str(tmp_path)]
            session = await client.create_session(PROVIDER, folders, subscribe=True)
            state = await settled(client, session)
            assert state.lifecycle == "ready"
            assert isinstance(state.default_chat, str)
            assert [c.resource for c in state.chats] == [state.default_chat]
            assert agent.hooks(session) == ["open"]
            assert agent.contexts[0] == SessionContext(
                session=session, working_directories=tuple(folders)
            )
            await client.subscribe(state.default_chat)
            assert await client.ask(state.default_chat, "hi", timeout=TIMEOUT) == "ok: hi"
            # A session opened in this process is not restored before its turns.
            assert agent.hooks(session) == ["open", "turn"]
    finally:
        await running.stop()


@pytest.mark.parametrize(
    ("behaviour", "error_type", "words"),
    [
        ("raise", "testRefusal", "open refused by the test"),
        ("crash", "internal", "failed to open the session"),
        ("hang", "timeout", "did not open the session within 0.3 s"),
    ],
)
async def test_a_failing_open_fails_the_creation_and_nothing_else(
    behaviour: str, error_type: str, words: str
) -> None:
    agent = RecordingAgent(open=behaviour)
    running = await host_with(agent, session_open_timeout=0.3)
    try:
        async with AhpClient.connect(running.url) as client:
            session = await client.create_session(PROVIDER, subscribe=True)
            state = await settled(client, session)
            assert state.lifecycle == "failed"
            assert state.creation_error is not None
            assert state.creation_error.error_type == error_type
            assert words in state.creation_error.message
            assert state.chats == ()
            # Its summary says it failed, and why (a list shows only summaries).
            (summary,) = [s for s in (await client.list_sessions()).items if s.resource == session]
            assert summary.status & 0b11111 == SessionStatus.Error
            assert summary.activity == f"Failed to start: {state.creation_error.message}"
            # The default chat it was given never joined the catalogue, and is gone.
            assert running.host.chats_of(session) == []
            if behaviour == "hang":
                assert agent.cancelled == ["open"]  # the timed-out hook was cancelled
            # The host and other sessions are unaffected.
            chat = await client.open_chat("echo")
            assert "still here" in await client.ask(chat, "still here", timeout=TIMEOUT)
            # Disposing the failed session still tells the provider.
            await client.dispose_session(session)
            assert agent.hooks(session) == ["open", "close-disposed"]
    finally:
        await running.stop()


def resolved_uris(paths: tuple[str, ...]) -> list[str]:
    return [Path(path).resolve().as_uri() for path in paths]


async def test_the_root_state_names_the_default_agent() -> None:
    running = await host_with(RecordingAgent(), default_provider=PROVIDER)
    try:
        async with AhpClient.connect(running.url, subscriptions=["ahp-root://"]) as client:
            root = client.confirmed("ahp-root://", RootState)
            config = root.config
            assert not isinstance(config, UnsetType)
            assert config.values["defaultProvider"] == PROVIDER
            # Single-user mode: the roots a working directory must lie inside, as file: URIs.
            roots = running.host.settings.workspace_roots or ()
            assert config.values["workspaceRoots"] == resolved_uris(roots)
            assert roots
            schema = config.schema.properties["defaultProvider"]
            assert (schema.type, schema.read_only, schema.enum) == (
                "string",
                True,
                (PROVIDER, "echo"),
            )
            # A session that names no agent gets that one.
            session = await client.create_session(subscribe=True)
            assert (await settled(client, session)).provider == PROVIDER
    finally:
        await running.stop()


async def test_a_session_disposed_while_its_agent_opens_is_gone_cleanly() -> None:
    agent = RecordingAgent(open="hang")
    running = await host_with(agent)
    try:
        async with AhpClient.connect(running.url) as client:
            session = await client.create_session(PROVIDER, subscribe=True)
            await client.wait_for(lambda _: agent.hooks(session) == ["open"], timeout=TIMEOUT)
            await client.dispose_session(session)
            assert agent.cancelled == ["open"]
            assert agent.hooks(session) == ["open", "close-disposed"]
            assert running.host.chats_of(session) == []
            assert not running.host.knows(session)
            await asyncio.sleep(0.05)  # nothing of the cancelled open comes back to life
            assert not running.host.knows(session)
            assert running.host.chats == {}
    finally:
        await running.stop()


# -- close -------------------------------------------------------------------------------------


async def test_close_is_called_once_on_dispose_and_once_on_stop() -> None:
    agent = RecordingAgent()
    running = await host_with(agent)
    try:
        async with AhpClient.connect(running.url) as client:
            disposed = await client.create_session(PROVIDER, subscribe=True)
            kept = await client.create_session(PROVIDER, subscribe=True)
            await settled(client, disposed)
            await settled(client, kept)
            await client.dispose_session(disposed)
            assert agent.hooks(disposed) == ["open", "close-disposed"]
            assert agent.hooks(kept) == ["open"]
    finally:
        await running.stop()
    assert agent.hooks(disposed) == ["open", "close-disposed"]
    assert agent.hooks(kept) == ["open", "close-stop"]


@pytest.mark.parametrize("behaviour", ["raise", "crash", "hang"])
async def test_a_failing_close_does_not_keep_the_session_or_the_host(behaviour: str) -> None:
    agent = RecordingAgent(close=behaviour)
    running = await host_with(agent, session_close_timeout=0.3)
    stopped = False
    try:
        async with AhpClient.connect(running.url) as client:
            session = await client.create_session(PROVIDER, subscribe=True)
            other = await client.create_session(PROVIDER, subscribe=True)
            await settled(client, session)
            await settled(client, other)
            await client.dispose_session(session, timeout=TIMEOUT)
            assert not running.host.knows(session)
            listed = await client.list_sessions()
            assert [s.resource for s in listed.items] == [other]
        async with asyncio.timeout(TIMEOUT):
            await running.stop()  # the hanging close of `other` is bounded too
        stopped = True
        assert agent.hooks(other) == ["open", "close-stop"]
    finally:
        if not stopped:
            await running.stop()


# -- restore after a restart -----------------------------------------------------------------


async def a_stored_session(tmp_path: Path) -> tuple[str, str, str]:
    """A session with a finished turn and two chats, in a database; the host stopped."""
    first = RecordingAgent()
    running = await host_with(first, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(running.url) as client:
            session = await client.create_session(PROVIDER, [str(tmp_path)], subscribe=True)
            state = await settled(client, session)
            assert isinstance(state.default_chat, str)
            await client.subscribe(state.default_chat)
            await client.ask(state.default_chat, "before", timeout=TIMEOUT)
            second = await client.create_chat(session)
    finally:
        await running.stop()
    assert first.hooks(session) == ["open", "turn", "close-stop"]
    return session, state.default_chat, second


async def test_restore_is_called_once_before_the_first_turn_after_a_restart(
    tmp_path: Path,
) -> None:
    session, chat, second = await a_stored_session(tmp_path)
    agent = RecordingAgent()
    running = await host_with(agent, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(running.url) as client:
            await client.subscribe(session)
            await client.subscribe(chat)
            await client.subscribe(second)
            assert agent.calls == []  # loading a session does not restore it
            # Two chats start turns at once: one restore serves both.
            answers = await asyncio.gather(
                client.ask(chat, "one", timeout=TIMEOUT),
                client.ask(second, "two", timeout=TIMEOUT),
            )
            assert answers == ["ok: one", "ok: two"]
            assert agent.hooks(session) == ["restore", "turn", "turn"]
            assert agent.contexts[0] == SessionContext(
                session=session, working_directories=(str(tmp_path),)
            )
            await client.ask(chat, "three", timeout=TIMEOUT)
            assert agent.hooks(session) == ["restore", "turn", "turn", "turn"]
    finally:
        await running.stop()
    assert agent.hooks(session)[-1] == "close-stop"  # restored here: closed at stop


async def test_a_session_never_restored_is_not_closed_at_stop(tmp_path: Path) -> None:
    session, _, _ = await a_stored_session(tmp_path)
    agent = RecordingAgent()
    running = await host_with(agent, data_dir=str(tmp_path / "data"))
    async with AhpClient.connect(running.url) as client:
        await client.subscribe(session)
    await running.stop()
    assert agent.calls == []


@pytest.mark.parametrize(
    ("behaviour", "error_type"),
    [("raise", "testRefusal"), ("crash", "internal"), ("hang", "timeout")],
)
async def test_a_failing_restore_fails_the_turn_and_the_next_turn_tries_again(
    tmp_path: Path, behaviour: str, error_type: str
) -> None:
    session, chat, _ = await a_stored_session(tmp_path)
    agent = RecordingAgent(restore=behaviour)
    running = await host_with(agent, data_dir=str(tmp_path / "data"), session_open_timeout=0.3)
    try:
        async with AhpClient.connect(running.url) as client:
            await client.subscribe(chat)
            with pytest.raises(TurnFailedError, match="could not take this session back"):
                await client.ask(chat, "first", timeout=TIMEOUT)
            failed = client.confirmed(chat, ChatState).turns[-1]
            assert failed.state == "error"
            error = turn_error(failed)  # 1.0: the error is the turn's last response part
            assert error is not None
            assert error.error_type == error_type
            assert agent.hooks(session) == ["restore"]  # the provider never ran the turn
            agent.behaviour["restore"] = "ok"
            assert await client.ask(chat, "second", timeout=TIMEOUT) == "ok: second"
            assert agent.hooks(session) == ["restore", "restore", "turn"]
    finally:
        await running.stop()


async def test_cancelling_a_turn_that_waits_for_a_restore_ends_it_at_once(
    tmp_path: Path,
) -> None:
    session, chat, _ = await a_stored_session(tmp_path)
    agent = RecordingAgent(restore="hang")
    running = await host_with(agent, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(running.url) as client:
            await client.subscribe(chat)
            turn_id = await client.send_message(chat, "waits")
            await client.wait_for(lambda _: agent.hooks(session) == ["restore"], timeout=TIMEOUT)
            await client.dispatch(chat, ChatTurnCancelledAction(turn_id=turn_id, duration=1))

            def ended(c: AhpClient) -> list[Turn]:
                return [t for t in c.confirmed(chat, ChatState).turns if t.id == turn_id]

            await client.wait_for(ended, timeout=2.0)
            assert ended(client)[0].state == "cancelled"
    finally:
        await running.stop()


# -- a crash while the agent opens the session -----------------------------------------------

CRASHING_HOST = """
import asyncio, sys
from ahp_server.app import App
from ahp_server.config import Settings
from ahp_server.host.host import DB_FILE
from ahp_server.logging import configure_logging
from tests.host.test_sessions import PROVIDER, RecordingAgent

class Opening(RecordingAgent):
    async def open_session(self, session):
        await app.host.store.flush()  # the session and its default chat are on disk
        print("OPENING", session.session, flush=True)
        await asyncio.Event().wait()

async def main():
    global app
    configure_logging("warning", "console")
    app = App(Settings(host="127.0.0.1", port=0, data_dir=sys.argv[1]), providers=[Opening()])
    await app.start()
    print("URL", app.urls[0], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def crash_while_opening(tmp_path: Path) -> str:
    """A host process killed (-9) while its agent opens a new session; that session."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_HOST,
        str(tmp_path / "data"),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode().split()
            assert line[0] == "URL", line
            async with AhpClient.connect(line[1]) as client:
                session = await client.create_session(PROVIDER)
                opening = (await process.stdout.readline()).decode().split()
                assert opening == ["OPENING", session]
    finally:
        process.kill()
        await process.wait()
    return session


@pytest.mark.parametrize(("behaviour", "outcome"), [("ok", "ready"), ("raise", "failed")])
async def test_a_session_a_crash_left_in_creating_is_opened_again_at_start(
    tmp_path: Path, behaviour: str, outcome: str
) -> None:
    session = await crash_while_opening(tmp_path)
    agent = RecordingAgent(open=behaviour)
    running = await host_with(agent, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(running.url) as client:
            await client.subscribe(session)
            state = await settled(client, session)
            assert state.lifecycle == outcome
            assert agent.hooks(session) == ["open"]
            if outcome == "ready":
                assert isinstance(state.default_chat, str)
                assert [c.resource for c in state.chats] == [state.default_chat]
                await client.subscribe(state.default_chat)
                assert await client.ask(state.default_chat, "hi", timeout=TIMEOUT) == "ok: hi"
            else:
                assert state.chats == ()
                assert running.host.chats_of(session) == []
    finally:
        await running.stop()
    # Repaired once: a second start finds nothing to repair.
    again = RecordingAgent()
    running = await host_with(again, data_dir=str(tmp_path / "data"))
    await running.stop()
    assert "open" not in again.hooks(session)


async def test_a_session_stuck_in_creating_before_schema_3_is_repaired_too(
    tmp_path: Path,
) -> None:
    """Before schema 3 a session had no marker, and no default chat until it was ready."""
    session = await crash_while_opening(tmp_path)
    conn = sqlite3.connect(tmp_path / "data" / DB_FILE, isolation_level=None)
    chats = [uri for (uri,) in conn.execute("SELECT uri FROM channels WHERE kind = 'chat'")]
    assert len(chats) == 1
    for table, column in (("channels", "uri"), ("snapshots", "channel"), ("log", "channel")):
        conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (chats[0],))
    conn.execute("UPDATE channels SET active_turn = NULL")
    conn.execute("ALTER TABLE channels DROP COLUMN agent_state")  # schema 4's
    conn.execute("ALTER TABLE clients DROP COLUMN user_name")  # schema 6's
    conn.execute("UPDATE meta SET value = 2 WHERE key = 'schema_version'")
    conn.close()
    agent = RecordingAgent()
    running = await host_with(agent, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(running.url) as client:
            await client.subscribe(session)
            state = await settled(client, session)
            assert state.lifecycle == "ready"
            assert isinstance(state.default_chat, str)
            # Made anew (the stored one was deleted above), under the host's name for it.
            assert state.default_chat == chats[0] == default_chat(session)
            await client.subscribe(state.default_chat)
            assert await client.ask(state.default_chat, "hi", timeout=TIMEOUT) == "ok: hi"
    finally:
        await running.stop()

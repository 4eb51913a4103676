"""Terminal channels over real sockets: a real shell on a real pty, real processes counted.

Each test drives a host through ``AhpClient`` over a WebSocket; the terminal's
state is followed the way any client would (its snapshot, then every envelope
reduced with the protocol's reducer). The shell is ``/bin/sh`` so the output is
the same everywhere. Nothing of ours is mocked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ahp_server.client import AhpClient, RemoteError
from ahp_server.config import AgentConfig, Settings
from ahp_server.host.channels.terminals import TerminalActor, trim_content
from ahp_server.protocol import reducers as reducers_1_0
from ahp_server.protocol import types as types_1_0
from ahp_server.protocol.reducers import reduce_terminal
from ahp_server.protocol.types import (
    ActionEnvelope,
    CreateTerminalParams,
    DisposeTerminalParams,
    RootState,
    SessionState,
    Snapshot,
    SubscribeParams,
    SubscribeResult,
    TerminalClaimedAction,
    TerminalClientClaim,
    TerminalCommandPart,
    TerminalDataAction,
    TerminalExitedAction,
    TerminalInputAction,
    TerminalResizedAction,
    TerminalSessionClaim,
    TerminalState,
    TerminalUnclassifiedPart,
)
from tests.agents.test_acp import children, poll, until_no_children
from tests.conftest import RunningHost, captured_logs, start_host
from tests.e2e.helpers import TIMEOUT, Daemon
from tests.e2e.test_identity import echoed
from tests.processes import DAEMONIZE, alive, daemon_pids, parent_of, session_of, until_gone

ROOT = "ahp-root://"
SH = Settings(terminal_shell=("/bin/sh",))
SCRIPT = str(Path(__file__).parent.parent / "agents" / "scripted_agent.py")


# -- a client's view of one terminal -------------------------------------------------------


def text_of(state: TerminalState | types_1_0.TerminalState) -> str:
    """The raw VT stream (terminal.md: ``content.map(p => p.output ?? p.value).join('')``),
    of a client's (0.7) or the host's (1.0) terminal state."""
    return "".join(
        p.output if isinstance(p, (TerminalCommandPart, types_1_0.TerminalCommandPart)) else p.value
        for p in state.content
        if isinstance(
            p,
            (
                TerminalCommandPart,
                TerminalUnclassifiedPart,
                types_1_0.TerminalCommandPart,
                types_1_0.TerminalUnclassifiedPart,
            ),
        )
    )


def exit_code(terminal: Any) -> int | float | None:
    """A terminal's exit code (1.0: ``lifecycle.exitCode`` once exited), else ``None``."""
    lifecycle = terminal.lifecycle
    if isinstance(lifecycle, types_1_0.TerminalExitedLifecycleState) and not isinstance(
        lifecycle.exit_code, msgspec.UnsetType
    ):
        return lifecycle.exit_code
    return None


def content_bytes(state: TerminalState | types_1_0.TerminalState) -> int:
    return len(text_of(state).encode())


class Watched:
    """One terminal as a subscriber sees it: the snapshot, then each envelope reduced in."""

    def __init__(self, client: AhpClient, uri: str) -> None:
        self.client = client
        self.uri = uri
        self.state: TerminalState | None = None
        self.from_seq = 0
        self.early: list[ActionEnvelope] = []
        self.applied: list[ActionEnvelope] = []
        self.rejected: list[tuple[str, str]] = []  # (action type, reason)
        client.on_envelope(self._on_envelope)

    def _on_envelope(self, envelope: ActionEnvelope) -> None:
        if envelope.channel != self.uri:
            return
        if isinstance(envelope.rejection_reason, str):
            self.rejected.append((envelope.action.type, envelope.rejection_reason))
        elif self.state is None:
            self.early.append(envelope)
        else:
            self._apply(envelope)

    def _apply(self, envelope: ActionEnvelope) -> None:
        assert self.state is not None
        if envelope.server_seq > self.from_seq:
            self.state = reduce_terminal(self.state, envelope.action, lambda: 0.0)
            self.applied.append(envelope)

    async def subscribe(self) -> TerminalState:
        result = await self.client.request(
            "subscribe", SubscribeParams(channel=self.uri), result_type=SubscribeResult
        )
        snapshot = result.snapshot
        assert isinstance(snapshot, Snapshot)
        assert isinstance(snapshot.state, TerminalState), snapshot
        self.state, self.from_seq = snapshot.state, snapshot.from_seq
        for envelope in self.early:
            self._apply(envelope)
        self.early.clear()
        return self.state

    @property
    def text(self) -> str:
        assert self.state is not None
        return text_of(self.state)

    async def until(self, predicate: Callable[[Watched], bool], what: str) -> None:
        try:
            await self.client.wait_for(lambda _: predicate(self), timeout=TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"{what}: not seen; output so far {self.text[-500:]!r}") from None

    async def output(self, pattern: str) -> re.Match[str]:
        await self.until(lambda w: re.search(pattern, w.text) is not None, pattern)
        match = re.search(pattern, self.text)
        assert match is not None
        return match

    async def type(self, text: str) -> None:
        await self.client.dispatch(self.uri, TerminalInputAction(data=text))


async def create_terminal(
    client: AhpClient,
    *,
    claim: Any = None,
    cwd: str | None = None,
    name: str | None = None,
    cols: int | None = None,
    rows: int | None = None,
    uri: str | None = None,
) -> str:
    uri = uri or f"ahp-terminal:/{uuid.uuid4()}"
    params: dict[str, Any] = {
        "channel": uri,
        "claim": claim or TerminalClientClaim(client_id=client.client_id),
    }
    for key, value in (("cwd", cwd), ("name", name), ("cols", cols), ("rows", rows)):
        if value is not None:
            params[key] = value
    await client.request("createTerminal", CreateTerminalParams(**params))
    return uri


async def dispose_terminal(client: AhpClient, uri: str) -> None:
    await client.request("disposeTerminal", DisposeTerminalParams(channel=uri))


def root_terminals(client: AhpClient) -> dict[str, Any]:
    terminals = client.confirmed(ROOT, RootState).terminals
    return {t.resource: t for t in terminals} if isinstance(terminals, tuple) else {}


@dataclasses.dataclass
class Bench:
    running: RunningHost
    work: Path
    session: str
    #: The session's default chat (1.0 session claims name a chat).
    chat: str

    @property
    def uri(self) -> str:
        return self.work.as_uri()


async def open_bench(tmp_path: Path, settings: Settings = SH) -> tuple[RunningHost, Path]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return await start_host(settings), work


@pytest.fixture
async def bench(tmp_path: Path) -> AsyncIterator[Bench]:
    running, work = await open_bench(tmp_path)
    try:
        async with AhpClient.connect(running.url) as client:
            session = await client.create_session(
                working_directories=[work.as_uri()], subscribe=True
            )
            await client.wait_for(
                lambda c: isinstance(c.confirmed(session, SessionState).default_chat, str),
                timeout=TIMEOUT,
            )
            chat = client.confirmed(session, SessionState).default_chat
            assert isinstance(chat, str)
        yield Bench(running, work, session, chat)
    finally:
        await running.stop()


# -- a shell, its input and output -----------------------------------------------------------


async def test_a_shell_runs_in_the_working_directory_and_echoes_input(bench: Bench) -> None:
    async with AhpClient.connect(bench.running.url, subscriptions=[ROOT]) as client:
        uri = await create_terminal(client, cwd=bench.uri, name="build", cols=90, rows=30)
        # createTerminal answers after root/terminalsChanged was delivered.
        listed = root_terminals(client)
        assert list(listed) == [uri]
        assert listed[uri].title == "build"
        assert listed[uri].claim == TerminalClientClaim(client_id=client.client_id)
        watched = Watched(client, uri)
        state = await watched.subscribe()
        assert (state.cwd, state.cols, state.rows, state.is_pty) == (bench.uri, 90, 30, True)
        await watched.type("echo hello-$((1+1)); pwd\n")
        await watched.output(r"hello-2\r\n")  # the echoed input holds "$((1+1))", not "2"
        await watched.output(re.escape(str(bench.work.resolve())))
        # The accepted input is broadcast too (with its origin); the rest is output.
        kinds = {e.action.type for e in watched.applied}
        assert kinds == {"terminal/input", "terminal/data"}
        assert watched.rejected == []


async def test_output_is_coalesced_and_multibyte_characters_stay_whole(bench: Bench) -> None:
    async with AhpClient.connect(bench.running.url) as client:
        watched = Watched(client, await create_terminal(client, cwd=bench.uri))
        await watched.subscribe()
        # 200 lines written one by one, and a euro sign split across two writes.
        await watched.type(
            "i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done; "
            "printf '\\342\\202'; sleep 0.2; printf '\\254 done-%s\\n' $((1+1))\n"
        )
        await watched.output(r"€ done-2")
        assert "line199" in watched.text
        assert "\ufffd" not in watched.text
        # Far fewer actions than lines: output is merged for a few milliseconds.
        assert len(watched.applied) < 100


async def test_resize_changes_the_pty_size(bench: Bench) -> None:
    async with AhpClient.connect(bench.running.url) as client:
        watched = Watched(client, await create_terminal(client, cwd=bench.uri))
        await watched.subscribe()
        await watched.type("stty size\n")
        await watched.output(r"24 80")  # the default size
        await client.dispatch(watched.uri, TerminalResizedAction(cols=132, rows=43))
        await watched.until(lambda w: w.state is not None and w.state.cols == 132, "resized")
        await watched.type("stty size\n")
        await watched.output(r"43 132")
        await client.dispatch(watched.uri, TerminalResizedAction(cols=0, rows=43))
        await watched.until(lambda w: bool(w.rejected), "a rejected size")
        assert watched.rejected[0][0] == "terminal/resized"
        assert watched.state is not None
        assert watched.state.cols == 132


async def test_exit_code_reaches_the_terminal_and_the_catalogue(bench: Bench) -> None:
    async with AhpClient.connect(bench.running.url, subscriptions=[ROOT]) as client:
        watched = Watched(client, await create_terminal(client, cwd=bench.uri))
        await watched.subscribe()
        await watched.type("exit 3\n")
        await watched.until(lambda w: w.state is not None and exit_code(w.state) == 3, "exit 3")
        assert watched.applied[-1].action == TerminalExitedAction(exit_code=3)
        await client.wait_for(
            lambda c: exit_code(root_terminals(c)[watched.uri]) == 3, timeout=TIMEOUT
        )
        await watched.type("echo too late\n")  # no process to take it
        await watched.until(lambda w: bool(w.rejected), "a rejected input")
        assert watched.rejected == [("terminal/input", "the terminal's process has ended")]


async def test_start_and_end_are_audited_without_any_content(bench: Bench) -> None:
    with captured_logs() as logs:
        async with AhpClient.connect(bench.running.url) as client:
            watched = Watched(client, await create_terminal(client, cwd=bench.uri))
            await watched.subscribe()
            await watched.type("echo secret-$((5*5)); exit 4\n")
            await watched.until(lambda w: w.state is not None and exit_code(w.state) == 4, "exit")
            assert "secret-25" in watched.text
    (started,) = [e for e in logs if e["event"] == "terminal started"]
    assert started["terminal"] == watched.uri
    assert started["client_id"] == client.client_id
    assert isinstance(started["conn"], int)
    assert started["cwd"] == str(bench.work.resolve())
    assert started["command"] == "sh"
    (ended,) = [e for e in logs if e["event"] == "terminal ended"]
    assert (ended["terminal"], ended["exit_code"]) == (watched.uri, 4)
    assert not [e for e in logs if "secret" in repr(e)]  # neither input nor output


# -- the catalogue, commands and their errors ----------------------------------------------------


async def test_the_root_catalogue_follows_create_and_dispose(bench: Bench) -> None:
    async with AhpClient.connect(bench.running.url, subscriptions=[ROOT]) as client:
        first = await create_terminal(client, cwd=bench.uri, name="one")
        second = await create_terminal(
            client, claim=TerminalSessionClaim(session=bench.session, chat=bench.chat), name="two"
        )
        assert [(t.resource, t.title) for t in root_terminals(client).values()] == [
            (first, "one"),
            (second, "two"),
        ]
        await dispose_terminal(client, first)
        assert list(root_terminals(client)) == [second]
        assert first not in bench.running.host.workspace_channels
        with pytest.raises(RemoteError) as gone:
            await dispose_terminal(client, first)
        assert gone.value.code == -32008
        with pytest.raises(RemoteError) as unknown:
            await client.request("subscribe", SubscribeParams(channel=first))
        assert unknown.value.code == -32008
        await dispose_terminal(client, second)
        assert root_terminals(client) == {}


async def test_a_session_claim_starts_in_the_sessions_primary_directory(bench: Bench) -> None:
    async with AhpClient.connect(bench.running.url) as client:
        uri = await create_terminal(
            client, claim=TerminalSessionClaim(session=bench.session, chat=bench.chat)
        )
        watched = Watched(client, uri)
        state = await watched.subscribe()
        assert state.cwd == bench.uri
        await watched.type("pwd\n")
        await watched.output(re.escape(str(bench.work.resolve())) + r"\r\n")


async def test_create_terminal_refuses_what_it_must(bench: Bench, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    async with AhpClient.connect(bench.running.url) as client:

        async def refused(**kwargs: Any) -> int:
            with pytest.raises(RemoteError) as error:
                await create_terminal(client, **kwargs)
            return error.value.code

        assert await refused(uri="ahp-chat:/x", cwd=bench.uri) == -32602  # not a terminal URI
        assert await refused(uri="ahp-terminal:/", cwd=bench.uri) == -32602
        assert await refused(cwd=outside.as_uri()) == -32009  # outside every working directory
        link = bench.work / "escape"
        link.symlink_to(outside)
        assert await refused(cwd=link.as_uri()) == -32009  # a link leading outside
        assert await refused(cwd=(bench.work / "missing").as_uri()) == -32602
        assert await refused() == -32602  # a client claim has no default directory
        other = TerminalClientClaim(client_id="someone-else")
        assert await refused(claim=other, cwd=bench.uri) == -32602
        nobody = TerminalSessionClaim(session="ahp-session:/nobody", chat="ahp-chat:/nobody")
        assert await refused(claim=nobody) == -32001
        assert await refused(cwd=bench.uri, cols=0) == -32602
        uri = await create_terminal(client, cwd=bench.uri)
        assert await refused(uri=uri, cwd=bench.uri) == -32010  # already exists
        assert await refused(uri=bench.session, cwd=bench.uri) == -32602
        # Nothing was started for the refusals: one shell runs.
        assert len(bench.running.host.workspace_channels) == 1


async def test_the_number_of_terminals_is_bounded(tmp_path: Path) -> None:
    running, work = await open_bench(tmp_path, dataclasses.replace(SH, max_terminals=2))
    try:
        async with AhpClient.connect(running.url) as client:
            await client.create_session(working_directories=[work.as_uri()])
            first = await create_terminal(client, cwd=work.as_uri())
            await create_terminal(client, cwd=work.as_uri())
            with pytest.raises(RemoteError) as full:
                await create_terminal(client, cwd=work.as_uri())
            assert full.value.code == -32602
            assert "limit" in full.value.message
            await dispose_terminal(client, first)
            await create_terminal(client, cwd=work.as_uri())
    finally:
        await running.stop()


# -- what clients may dispatch ---------------------------------------------------------------


async def test_server_only_actions_and_foreign_claims_are_rejected(bench: Bench) -> None:
    async with (
        AhpClient.connect(bench.running.url) as alice,
        AhpClient.connect(bench.running.url) as bob,
    ):
        uri = await create_terminal(alice, cwd=bench.uri)
        mine, theirs = Watched(alice, uri), Watched(bob, uri)
        await mine.subscribe()
        await theirs.subscribe()
        await bob.dispatch(uri, TerminalDataAction(data="forged output"))
        await bob.dispatch(uri, TerminalExitedAction(exit_code=0))
        await bob.dispatch(uri, TerminalClaimedAction(claim=TerminalClientClaim(client_id="bob")))
        await theirs.until(lambda w: len(w.rejected) == 3, "three rejections")
        reasons = dict(theirs.rejected)
        assert reasons["terminal/data"] == "terminal/data is server-only"
        assert reasons["terminal/exited"] == "terminal/exited is server-only"
        assert "claimed by client" in reasons["terminal/claimed"]
        # The holder may hand it to a session; then the other client may take it.
        to_session = TerminalSessionClaim(session=bench.session, chat=bench.chat)
        await alice.dispatch(uri, TerminalClaimedAction(claim=to_session))
        bobs = TerminalClientClaim(client_id=bob.client_id)
        await theirs.until(lambda w: w.state is not None and w.state.claim == to_session, "to it")
        await bob.dispatch(uri, TerminalClaimedAction(claim=bobs))
        await theirs.until(
            lambda w: w.state is not None and w.state.claim == bobs,
            "the new claim",
        )
        await mine.type("echo typed-$((3*3))\n")
        await theirs.output(r"typed-9")
        assert "forged output" not in theirs.text
        assert mine.rejected == []
        actor = bench.running.host.workspace_channels[uri]
        assert isinstance(actor, TerminalActor)
        assert "forged" not in text_of(actor.state)
        assert actor.running


async def test_a_client_claim_names_only_the_dispatching_clients_own_id(bench: Bench) -> None:
    """Issue 26, in every mode (here single-token, where every user is the one): a
    ``terminal/claimed`` with a client claim must name the dispatching connection's
    own clientId — as ``createTerminal``'s must. Naming another client, or an id
    nobody holds, is echoed back rejected and the claim stays; one's own is taken."""
    async with (
        AhpClient.connect(bench.running.url) as alice,
        AhpClient.connect(bench.running.url) as bob,
    ):
        held = TerminalSessionClaim(session=bench.session, chat=bench.chat)
        uri = await create_terminal(alice, claim=held)
        watched = Watched(alice, uri)
        await watched.subscribe()
        for client, named in (
            (bob, alice.client_id),  # a session holds it: anyone may take it, for themselves
            (alice, bob.client_id),
            (alice, "nobody-holds-this-id"),
        ):
            claim = TerminalClaimedAction(claim=TerminalClientClaim(client_id=named))
            answer = await echoed(client, await client.dispatch(uri, claim))
            assert "own clientId" in str(answer.rejection_reason), (named, answer)
        assert watched.state is not None
        assert watched.state.claim == held
        bobs = TerminalClientClaim(client_id=bob.client_id)
        answer = await echoed(bob, await bob.dispatch(uri, TerminalClaimedAction(claim=bobs)))
        assert not answer.rejection_reason
        await watched.until(lambda w: w.state is not None and w.state.claim == bobs, "bob's claim")
        await dispose_terminal(bob, uri)


# -- bounded -------------------------------------------------------------------------------------


async def test_scrollback_stays_under_its_cap_through_a_flood(tmp_path: Path) -> None:
    cap = 64 * 1024
    settings = dataclasses.replace(SH, terminal_scrollback_bytes=cap, actor_inbox=4)
    running, work = await open_bench(tmp_path, settings)
    try:
        async with AhpClient.connect(running.url) as client:
            await client.create_session(working_directories=[work.as_uri()])
            uri = await create_terminal(client, cwd=work.as_uri())
            watched = Watched(client, uri)
            await watched.subscribe()
            actor = running.host.workspace_channels[uri]
            assert isinstance(actor, TerminalActor)
            peak = 0

            def sample() -> None:
                nonlocal peak
                peak = max(peak, content_bytes(actor.state))

            sampler = asyncio.get_running_loop().create_task(_every(0.005, sample))
            try:
                await watched.type("yes 0123456789 | head -c 2000000; echo; echo flood-$((4*4))\n")
                await watched.output(r"flood-16")
            finally:
                sampler.cancel()
            assert peak <= cap
            assert content_bytes(actor.state) <= cap
            # The whole flood went by (the client's own copy is not trimmed)…
            assert watched.text.count("0123456789") >= 2_000_000 // 11 - 1
            # …in far fewer actions than reads of a pipe would give one by one.
            assert len(watched.applied) < 2_000_000 // 4096
            # A new subscriber gets the bounded state, ending with the flood's end.
            late = Watched(client, uri)
            state = await late.subscribe()
            assert content_bytes(state) <= cap
            assert "flood-16" in text_of(state)
            await client.ping()
    finally:
        await running.stop()


async def _every(interval: float, fn: Callable[[], None]) -> None:
    while True:
        fn()
        await asyncio.sleep(interval)


def test_trim_content_keeps_the_newest_output_within_the_cap() -> None:
    # The host's own (canonical, 1.0) terminal state, as its actor holds it.
    claim = types_1_0.TerminalClientClaim(client_id="c")
    state = types_1_0.TerminalState(
        title="t", content=(), claim=claim, lifecycle=types_1_0.TerminalRunningLifecycleState()
    )
    for i in range(1000):
        data = types_1_0.TerminalDataAction(data=f"€{i:04d}|")
        state = trim_content(reducers_1_0.reduce_terminal(state, data, _0), 300)
        assert content_bytes(state) <= 300
    assert text_of(state).endswith("€0999|")
    assert not text_of(state).startswith("\ufffd")


def _0() -> float:
    return 0.0


# -- no orphans ------------------------------------------------------------------------------


async def test_dispose_kills_the_shell_and_its_jobs(bench: Bench) -> None:
    before = children()
    async with AhpClient.connect(bench.running.url) as client:
        uri = await create_terminal(client, cwd=bench.uri)
        watched = Watched(client, uri)
        await watched.subscribe()
        await watched.type("sleep 300 & echo job-$!\n")
        job = int((await watched.output(r"job-(\d+)")).group(1))
        (shell,) = children() - before
        assert alive(job)
        await dispose_terminal(client, uri)
        assert await until_no_children(before) == set()
        await poll(lambda: not alive(job) and not alive(shell))


async def test_disposing_a_session_disposes_its_terminals(bench: Bench) -> None:
    before = children()
    async with AhpClient.connect(bench.running.url, subscriptions=[ROOT]) as client:
        await create_terminal(
            client, claim=TerminalSessionClaim(session=bench.session, chat=bench.chat)
        )
        kept = await create_terminal(client, cwd=bench.uri)
        assert len(children() - before) == 2
        await client.dispose_session(bench.session)
        await client.wait_for(lambda c: list(root_terminals(c)) == [kept], timeout=TIMEOUT)
        await poll(lambda: len(children() - before) == 1)
        await dispose_terminal(client, kept)
    assert await until_no_children(before) == set()


async def test_host_stop_leaves_no_process_behind(tmp_path: Path) -> None:
    before = children()
    running, work = await open_bench(tmp_path, dataclasses.replace(SH, terminal_kill_grace=0.5))
    try:
        async with AhpClient.connect(running.url) as client:
            await client.create_session(working_directories=[work.as_uri()])
            busy = Watched(client, await create_terminal(client, cwd=work.as_uri()))
            await busy.subscribe()
            await busy.type("trap '' HUP TERM; sleep 300 & echo job-$!; sleep 400\n")
            job = int((await busy.output(r"job-(\d+)")).group(1))
            await create_terminal(client, cwd=work.as_uri())
            assert len(children() - before) == 2
    finally:
        await running.stop()  # SIGKILL after the grace for the shell that ignores SIGHUP
    assert await until_no_children(before) == set()
    await poll(lambda: not alive(job))


async def escaped_daemon(work: Path, client: AhpClient) -> tuple[str, int, int]:
    """A terminal whose shell started :data:`DAEMONIZE`: the terminal, and the daemon's
    two pids, checked to have really left the shell's session and lost their parent."""
    uri = await create_terminal(client, cwd=work.as_uri())
    watched = Watched(client, uri)
    await watched.subscribe()
    pids = work / "pids"
    pids.mkdir()
    await watched.type(f"echo shell-$$; sh {DAEMONIZE} {pids}\n")
    shell = int((await watched.output(r"shell-(\d+)")).group(1))
    leader, grandchild = await daemon_pids(pids)
    assert alive(leader)
    assert alive(grandchild)
    # What a kill of the terminal's group or session misses: another session, and a
    # grandchild whose parent is gone.
    assert session_of(leader) == leader != session_of(shell) == shell
    assert session_of(grandchild) == leader
    assert parent_of(grandchild) != leader
    return uri, leader, grandchild


@pytest.mark.parametrize("end", ["disposeTerminal", "host stop"])
async def test_dispose_and_host_stop_end_what_left_the_session_and_double_forked(
    tmp_path: Path, end: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "ahp.toml"
    config.write_text(
        '[workspace]\nterminal_shell = ["/bin/sh"]\nterminal_kill_grace = 0.5\n',
        encoding="utf-8",
    )
    daemon = Daemon(tmp_path / "data", "--config", str(config))
    try:
        async with AhpClient.connect(await daemon.start()) as client:
            await client.create_session(working_directories=[work.as_uri()])
            uri, leader, grandchild = await escaped_daemon(work, client)
            if end == "disposeTerminal":
                await dispose_terminal(client, uri)
        if end == "host stop":
            assert await daemon.terminate() == 0
        await until_gone(leader, grandchild)
    finally:
        await daemon.close()


# -- input typed with echo off -----------------------------------------------------------------


async def test_input_typed_with_echo_off_reaches_the_process_but_is_never_stored(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "ahp.toml"
    config.write_text('[workspace]\nterminal_shell = ["/bin/sh"]\n', encoding="utf-8")
    data = tmp_path / "data"
    daemon = Daemon(data, "--config", str(config))
    secret = f"hunter2-{uuid.uuid4().hex}"
    digest = hashlib.sha256(secret.encode()).hexdigest()[:16]
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as typist, AhpClient.connect(url) as other:
            await typist.create_session(working_directories=[work.as_uri()])
            uri = await create_terminal(typist, cwd=work.as_uri())
            mine, theirs = Watched(typist, uri), Watched(other, uri)
            await mine.subscribe()
            await theirs.subscribe()
            # What `read -s` does (dash has no -s): echo off, read a line, echo on.
            await mine.type(
                "stty -echo; echo off-$((6*7)); read pw; stty echo; "
                'echo "got-$(printf %s "$pw" | sha256sum | cut -c1-16)"\n'
            )
            await mine.output(r"off-42")  # echo is off from here on
            await mine.type(secret + "\n")
            await mine.output(f"got-{digest}")  # the process read it
            await mine.type("echo on-$((2*3))\n")
            await theirs.output(r"on-6")
            for watched in (mine, theirs):
                inputs = [
                    e.action.data for e in watched.applied if e.action.type == "terminal/input"
                ]
                # Recorded as an input with no data, in its place; echoed input is kept.
                assert inputs[1] == ""
                assert inputs[2] == "echo on-$((2*3))\n"
                assert secret not in repr(watched.applied)
                assert secret not in watched.text
            late = Watched(other, uri)  # a later subscriber's snapshot
            assert secret not in text_of(await late.subscribe())
        assert await daemon.terminate() == 0
        stored = b"".join(f.read_bytes() for f in data.rglob("*") if f.is_file())
        assert b"off-42" in stored  # the terminal is stored…
        assert secret.encode() not in stored  # …but not what was typed with echo off
    finally:
        await daemon.close()


# -- persistence -----------------------------------------------------------------------------


async def test_terminals_survive_restarts_as_readable_exited_channels(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "ahp.toml"
    config.write_text('[workspace]\nterminal_shell = ["/bin/sh"]\n', encoding="utf-8")
    daemon = Daemon(tmp_path / "data", "--config", str(config))
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            await client.create_session(working_directories=[work.as_uri()])
            done = Watched(client, await create_terminal(client, cwd=work.as_uri(), name="done"))
            await done.subscribe()
            await done.type("echo stored-$((2+3)); exit 3\n")
            await done.until(lambda w: w.state is not None and exit_code(w.state) == 3, "exit")
            running = Watched(client, await create_terminal(client, cwd=work.as_uri()))
            await running.subscribe()
            await running.type("echo alive-$((1+1))\n")
            await running.output(r"alive-2")
        await daemon.kill()  # kill -9: the host never sees the shell end

        url = await daemon.start()
        async with AhpClient.connect(url, subscriptions=[ROOT]) as client:
            listed = root_terminals(client)
            assert set(listed) == {done.uri, running.uri}
            assert exit_code(listed[done.uri]) == 3
            state = await Watched(client, done.uri).subscribe()
            assert "stored-5" in text_of(state)
            assert exit_code(state) == 3
            lost = Watched(client, running.uri)
            state = await lost.subscribe()
            assert "alive-2" in text_of(state)
            assert "its process is gone" in text_of(state)
            await lost.type("echo anyone?\n")
            await lost.until(lambda w: bool(w.rejected), "a rejected input")
            await dispose_terminal(client, done.uri)
            clean = Watched(client, await create_terminal(client, cwd=work.as_uri()))
            await clean.subscribe()
            await clean.type("echo clean-$((3+4))\n")
            await clean.output(r"clean-7")
        assert await daemon.terminate() == 0  # a graceful stop records the shell's end

        url = await daemon.start()
        async with AhpClient.connect(url, subscriptions=[ROOT]) as client:
            assert set(root_terminals(client)) == {running.uri, clean.uri}
            state = await Watched(client, clean.uri).subscribe()
            assert "clean-7" in text_of(state)
            assert "its process is gone" not in text_of(state)
    finally:
        await daemon.close()


# -- agents' commands ------------------------------------------------------------------------


async def test_an_agents_command_is_shown_as_a_terminal_channel(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    agent = AgentConfig(name="scripted", command=sys.executable, args=(SCRIPT,))
    running = await start_host(dataclasses.replace(SH, agents=(agent,)))
    before = children()
    try:
        async with AhpClient.connect(running.url, subscriptions=[ROOT]) as client:
            session = await client.create_session("scripted", [str(work)], subscribe=True)
            await client.wait_for(
                lambda c: c.confirmed(session, SessionState).lifecycle == "ready", timeout=TIMEOUT
            )
            chat = client.confirmed(session, SessionState).default_chat
            assert isinstance(chat, str)
            await client.subscribe(chat)
            answer = await client.ask(chat, "/terminal echo shown-to-users", timeout=TIMEOUT)
            assert answer == "exit 0: shown-to-users"
            await client.wait_for(lambda c: len(root_terminals(c)) == 1, timeout=TIMEOUT)
            (uri,) = root_terminals(client)
            watched = Watched(client, uri)
            await watched.subscribe()
            await watched.until(
                lambda w: w.state is not None and exit_code(w.state) == 0, "the command's exit"
            )
            state = watched.state
            assert state is not None
            assert state.is_pty is False
            assert state.title == "echo"
            assert state.claim == TerminalSessionClaim(
                session=session, chat=chat
            )  # narrowed at exit
            assert "shown-to-users" in watched.text
            await watched.type("more\n")
            await watched.until(lambda w: bool(w.rejected), "a rejected input")
            await client.dispose_session(session)
            await client.wait_for(lambda c: root_terminals(c) == {}, timeout=TIMEOUT)
    finally:
        await running.stop()
    assert await until_no_children(before) == set()

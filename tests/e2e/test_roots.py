"""Configured roots over real sockets (docs/workspace.md "Roots"; issue 26, item 1).

A hostile client used to create a session on ``file:///`` (or add ``/`` to its
own), then read other users' files, the token files, the host's database and
``/proc/<pid>/environ`` with ``resourceRead``. Roots are now the operator's: a
working directory lies inside them or is refused, and the host's own files are
refused inside any root.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ahp_server.app import App
from ahp_server.client import AhpClient, RemoteError
from ahp_server.config import Settings, load_settings
from ahp_server.protocol.types import (
    ActionEnvelope,
    SessionState,
    SessionWorkingDirectorySetAction,
    TerminalSessionClaim,
)
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, Daemon, default_chat_of
from tests.e2e.test_terminals import create_terminal

PERMISSION_DENIED = -32009
ROOT = "ahp-root://"
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
CAROL = "carol-token-0123456789abcdef"


async def call(client: AhpClient, method: str, **params: Any) -> Any:
    return await client.request(method, {"channel": ROOT, **params}, timeout=TIMEOUT)


async def refused(client: AhpClient, method: str, **params: Any) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        await call(client, method, **params)
    return caught.value


async def refused_session(client: AhpClient, *directories: str) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        await client.create_session(working_directories=list(directories), timeout=TIMEOUT)
    return caught.value


async def dispatch_refused(client: AhpClient, session: str, directory: str) -> str:
    """Dispatch ``session/workingDirectorySet``; the rejection reason of its echo."""
    echoes: list[ActionEnvelope] = []
    client.on_envelope(lambda e: echoes.append(e) if e.channel == session else None)
    seq = await client.dispatch(session, SessionWorkingDirectorySetAction(directory=directory))

    def echoed(_: AhpClient) -> bool:
        return any(getattr(e.origin, "client_seq", None) == seq for e in echoes)

    await client.wait_for(echoed, timeout=TIMEOUT)
    echo = next(e for e in echoes if getattr(e.origin, "client_seq", None) == seq)
    assert isinstance(echo.rejection_reason, str), "the directory was accepted"
    return echo.rejection_reason


# -- single-user: the home directory by default, the host's own files never --------------------


@dataclasses.dataclass
class Single:
    running: RunningHost
    home: Path
    data: Path
    config: Path


@pytest.fixture
async def single(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Single]:
    """A single-token host on loopback with no workspace.roots: its root is the home
    directory, which holds its data directory and its configuration file."""
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    (home / "project" / "readme.txt").write_text("hello")
    monkeypatch.setenv("HOME", str(home))
    data = home / ".local" / "share" / "ahp-server"
    config = home / ".config" / "ahp-server.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[server]\ntoken = "{ALICE}"\n[storage]\ndata_dir = "{data}"\n')
    settings = load_settings(config, environ={})
    assert settings.workspace_roots is None
    # Not start_host: it would give the tests' roots. This host keeps the default.
    app = App(dataclasses.replace(settings, port=0))
    await app.start()
    running = RunningHost(app, app.urls[0])
    assert running.host.roots.default == (str(home.resolve()),)
    try:
        yield Single(running, home, data, config)
    finally:
        await running.stop()


async def test_a_session_outside_the_roots_is_refused_and_names_the_setting(
    single: Single, tmp_path: Path
) -> None:
    async with AhpClient.connect(single.running.url, token=ALICE) as client:
        for directory in ("file:///", "/", "file:///etc", (tmp_path / "elsewhere").as_uri()):
            error = await refused_session(client, directory)
            assert error.code == PERMISSION_DENIED, directory
            assert "workspace.roots" in error.message
        for system in ("file:///proc", "file:///proc/1", "file:///dev", "file:///sys"):
            error = await refused_session(client, system)
            assert error.code == PERMISSION_DENIED, system
            assert "never serves" in error.message
        # Inside the data directory: refused though it lies in the home root.
        error = await refused_session(client, single.data.as_uri())
        assert error.code == PERMISSION_DENIED
        assert "never serves" in error.message
        assert (await client.list_sessions(timeout=TIMEOUT)).items == ()


async def test_a_working_directory_set_outside_the_roots_is_rejected(single: Single) -> None:
    async with AhpClient.connect(single.running.url, token=ALICE) as client:
        project = (single.home / "project").as_uri()
        session = await client.create_session(
            working_directories=[project], subscribe=True, timeout=TIMEOUT
        )
        for directory in ("file:///", "/", single.data.as_uri(), "file:///proc/self"):
            reason = await dispatch_refused(client, session, directory)
            assert "workspace.roots" in reason or "never serves" in reason, reason
        inside = (single.home / "other").as_uri()
        await client.dispatch(session, SessionWorkingDirectorySetAction(directory=inside))
        await client.wait_for(
            lambda c: c.confirmed(session, SessionState).working_directories == (project, inside),
            timeout=TIMEOUT,
        )
        # Nothing outside reached the host's state, and file access stays inside.
        state = single.running.host.sessions[session].state
        assert state.working_directories == (project, inside)
        assert (await refused(client, "resourceRead", uri="file:///etc/hostname")).code == (
            PERMISSION_DENIED
        )


async def test_the_hosts_own_files_are_refused_inside_a_root(single: Single) -> None:
    async with AhpClient.connect(single.running.url, token=ALICE) as client:
        await client.create_session(working_directories=[single.home.as_uri()], timeout=TIMEOUT)
        readme = await call(
            client, "resourceRead", uri=(single.home / "project" / "readme.txt").as_uri()
        )
        assert readme["data"] == "hello"  # the root works
        (single.home / "environ").symlink_to(f"/proc/{os.getpid()}/environ")
        for target in (
            single.data / "ahp-server.db",
            single.data,
            single.config,
            single.home / "environ",  # a link inside the root to the host's secrets
        ):
            for method in ("resourceRead", "resourceList", "resourceResolve"):
                error = await refused(client, method, uri=target.as_uri())
                assert error.code == PERMISSION_DENIED, (method, target)
        copy = (single.home / "copy").as_uri()
        for method, params in (
            ("resourceCopy", {"source": (single.home / ".local").as_uri(), "destination": copy}),
            ("resourceMove", {"source": (single.home / ".local").as_uri(), "destination": copy}),
            ("resourceDelete", {"uri": (single.home / ".local").as_uri(), "recursive": True}),
            ("resourceDelete", {"uri": (single.data / "ahp-server.db").as_uri()}),
            ("resourceWrite", {"uri": single.config.as_uri(), "data": "x", "encoding": "utf-8"}),
            ("createResourceWatch", {"uri": single.data.as_uri(), "recursive": True}),
        ):
            error = await refused(client, method, **params)
            assert error.code == PERMISSION_DENIED, method
        assert not (single.home / "copy").exists()
        assert (single.data / "ahp-server.db").is_file()
        assert single.config.read_text().startswith("[server]")
        await client.ping()


async def test_a_root_is_listed_before_any_session_works_there(single: Single) -> None:
    """resourceList reaches the configured roots (a folder picker's), nothing else does."""
    async with AhpClient.connect(single.running.url, token=ALICE) as client:
        listed = await call(client, "resourceList", uri=single.home.as_uri())
        assert {"name": "project", "type": "directory"} in listed["entries"]
        inner = await call(client, "resourceList", uri=(single.home / "project").as_uri())
        assert inner["entries"] == [{"name": "readme.txt", "type": "file"}]
        # Only a listing: reading the same files still needs a session there.
        readme = (single.home / "project" / "readme.txt").as_uri()
        assert (await refused(client, "resourceRead", uri=readme)).code == PERMISSION_DENIED
        for target in (single.data, Path("/etc"), single.home.parent):
            error = await refused(client, "resourceList", uri=target.as_uri())
            assert error.code == PERMISSION_DENIED, target


async def test_a_session_without_a_working_directory_gets_its_own_folder_kept_across_restarts(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    daemon = Daemon(tmp_path / "data", roots=[str(root)])
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            session = await client.create_session(subscribe=True, timeout=TIMEOUT)
            (folder,) = client.confirmed(session, SessionState).working_directories or ()
            await call(
                client, "resourceWrite", uri=folder + "/notes.txt", data="kept", encoding="utf-8"
            )
        path = Path(folder.removeprefix("file://"))
        assert path.parent == root / "ahp-sessions"
        assert (path / "notes.txt").read_text() == "kept"
        assert not path.is_relative_to(tmp_path / "data")
        assert await daemon.terminate() == 0
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            await client.subscribe(session, timeout=TIMEOUT)
            assert client.confirmed(session, SessionState).working_directories == (folder,)
            read = await call(client, "resourceRead", uri=folder + "/notes.txt")
            assert read["data"] == "kept"
    finally:
        await daemon.close()


async def test_a_directory_stored_before_the_roots_were_narrowed_no_longer_counts(
    tmp_path: Path,
) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    data = str(tmp_path / "data")
    wide = await start_host(Settings(data_dir=data, workspace_roots=(str(tmp_path),)))
    try:
        async with AhpClient.connect(wide.url) as client:
            session = await client.create_session(
                working_directories=[outside.as_uri()], timeout=TIMEOUT
            )
            assert (await call(client, "resourceRead", uri=(outside / "secret.txt").as_uri()))[
                "data"
            ] == "secret"
    finally:
        await wide.stop()
    narrow = await start_host(Settings(data_dir=data, workspace_roots=(str(inside),)))
    try:
        async with AhpClient.connect(narrow.url) as client:
            assert session in {s.resource for s in (await client.list_sessions()).items}
            error = await refused(client, "resourceRead", uri=(outside / "secret.txt").as_uri())
            assert error.code == PERMISSION_DENIED
            claim = TerminalSessionClaim(
                session=session, chat=await default_chat_of(client, session)
            )
            with pytest.raises(RemoteError) as caught:
                await create_terminal(client, claim=claim, cwd=outside.as_uri())
            assert caught.value.code == PERMISSION_DENIED
    finally:
        await narrow.stop()


# -- multi-user: each user's roots -------------------------------------------------------------


@pytest.fixture
async def users(tmp_path: Path) -> AsyncIterator[tuple[RunningHost, Path]]:
    """alice and bob with roots of their own, carol with none; the tokens in files."""
    for name, token in (("alice", ALICE), ("bob", BOB), ("carol", CAROL)):
        (tmp_path / name).mkdir()
        _write(tmp_path / f"{name}.token", token)
    (tmp_path / "alice" / "plan.txt").write_text("alice's plan")
    config = _write(
        tmp_path / "ahp.toml",
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n'
        + "".join(
            f'[[users]]\nname = "{name}"\ntoken_file = "{tmp_path / name}.token"\n{extra}\n'
            for name, extra in (
                ("alice", f'roots = ["{tmp_path / "alice"}"]'),
                ("bob", f'roots = ["{tmp_path / "bob"}"]'),
                ("carol", ""),
            )
        ),
    )
    settings = load_settings(config, environ={})
    running = await start_host(dataclasses.replace(settings, workspace_roots=()))
    try:
        yield running, tmp_path
    finally:
        await running.stop()


async def test_a_user_cannot_root_a_session_in_anothers_files_or_the_system(
    users: tuple[RunningHost, Path],
) -> None:
    running, base = users
    async with AhpClient.connect(running.url, token=BOB) as bob:
        for directory in ("file:///", (base / "alice").as_uri(), base.as_uri(), "file:///proc"):
            error = await refused_session(bob, directory)
            assert error.code == PERMISSION_DENIED, directory
            assert "users[1].roots" in error.message or "never serves" in error.message
        own = await bob.create_session(subscribe=True, timeout=TIMEOUT)
        (folder,) = bob.confirmed(own, SessionState).working_directories or ()
        assert folder.startswith((base / "bob" / "ahp-sessions").as_uri())
        reason = await dispatch_refused(bob, own, (base / "alice").as_uri())
        assert "users[1].roots" in reason
        for target in (
            base / "alice" / "plan.txt",
            base / "alice.token",
            base / "data" / "ahp-server.db",
            Path(f"/proc/{os.getpid()}/environ"),
        ):
            error = await refused(bob, "resourceRead", uri=target.as_uri())
            assert error.code == PERMISSION_DENIED, target
    async with AhpClient.connect(running.url, token=CAROL) as carol:
        # No roots for carol: nothing to root a session in, and the error says what to set.
        error = await refused_session(carol)
        assert error.code == PERMISSION_DENIED
        assert "workspace.roots, or users[2].roots" in error.message


async def test_a_user_lists_only_their_own_roots(users: tuple[RunningHost, Path]) -> None:
    running, base = users
    async with AhpClient.connect(running.url, token=ALICE) as alice:
        listed = await call(alice, "resourceList", uri=(base / "alice").as_uri())
        assert listed["entries"] == [{"name": "plan.txt", "type": "file"}]
    async with AhpClient.connect(running.url, token=BOB) as bob:
        assert (await call(bob, "resourceList", uri=(base / "bob").as_uri()))["entries"] == []
        for target in (base / "alice", base, Path("/")):
            error = await refused(bob, "resourceList", uri=target.as_uri())
            assert error.code == PERMISSION_DENIED, target
    async with AhpClient.connect(running.url, token=CAROL) as carol:
        error = await refused(carol, "resourceList", uri=(base / "carol").as_uri())
        assert error.code == PERMISSION_DENIED


async def test_check_config_shows_the_roots_in_effect(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    root.mkdir()
    config = _write(
        tmp_path / "ahp.toml",
        f'[workspace]\nroots = ["{root}", "{tmp_path / "missing"}"]\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n',
    )
    process = await asyncio.create_subprocess_exec(
        *_python(),
        "check-config",
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 1  # a missing root is a problem: named by its key
    assert err.decode().splitlines() == [
        f"ahp-server: workspace.roots: '{tmp_path / 'missing'}' does not exist"
    ]
    text = out.decode()
    assert f"workspace roots: {root}, {tmp_path / 'missing'} (does not exist)" in text
    assert f"never served: /proc, /sys, /dev, {tmp_path / 'data'}, {config}" in text


def _python() -> list[str]:
    import sys

    return [sys.executable, "-m", "ahp_server"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path

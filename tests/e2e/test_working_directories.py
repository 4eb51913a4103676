"""Working directories chosen and kept, over a real daemon and a real ACP agent (issue 30).

The daemon is ``python -m ahp_server serve`` with the scripted ACP agent
(``tests/agents/scripted_agent.py``), whose ``/cwd`` answers the directory
``session/new`` gave it and its process's own. The CLI runs as a user runs it.
docs/workspace.md "Roots", docs/agents.md "Working directories".
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ahp_server.client import AhpClient, RemoteError
from ahp_server.protocol.types import SessionState
from tests.e2e.helpers import TIMEOUT, Daemon
from tests.e2e.test_cli import SCRIPTED, run_chat

PERMISSION_DENIED = -32009


def scripted_daemon(tmp_path: Path, root: Path) -> Daemon:
    """A daemon whose only workspace root is ``root``, with the scripted agent as default."""
    config = tmp_path / "ahp-server.toml"
    config.write_text(
        '[providers]\ndefault = "scripted"\n'
        "[[agents]]\n"
        'name = "scripted"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SCRIPTED))}]\n",
        encoding="utf-8",
    )
    return Daemon(tmp_path / "data", "--config", str(config), roots=[str(root)])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path.resolve() / "root"
    (made / "project").mkdir(parents=True)
    return made


@pytest.fixture
async def url(tmp_path: Path, root: Path) -> AsyncIterator[str]:
    daemon = scripted_daemon(tmp_path, root)
    try:
        yield await daemon.start()
    finally:
        await daemon.close()


async def test_chat_cwd_runs_the_agent_in_the_directory_given_relative_to_the_cli(
    url: str, root: Path
) -> None:
    # A relative --cwd is taken from the CLI's own directory.
    code, out, err = await run_chat(
        url, "--agent", "scripted", "--cwd", "project", "/cwd", cwd=root
    )
    assert code == 0, err
    project = root / "project"
    assert out.strip() == f"cwd={project} process={project}"


async def test_chat_cwd_outside_the_roots_is_refused_in_one_line_naming_the_setting(
    url: str, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, out, err = await run_chat(url, "--cwd", str(elsewhere), "hello")
    assert code == 2
    assert out == ""
    lines = [line for line in err.splitlines() if not line.startswith("ahp-server chat: connected")]
    assert len(lines) == 1, err
    assert lines[0].startswith("ahp-server chat: ")
    assert "is outside the workspace roots" in lines[0]
    assert "workspace.roots" in lines[0]
    assert "Traceback" not in err


async def test_chat_cwd_cannot_be_given_with_an_existing_chat(url: str) -> None:
    code, _, err = await run_chat(url, "--chat", "abc", "--cwd", ".", "hello")
    assert code == 2
    assert "--cwd sets a new session's working directory" in err


async def test_the_client_refuses_a_directory_outside_the_roots_with_the_hosts_error(
    url: str, tmp_path: Path
) -> None:
    async with AhpClient.connect(url) as client:
        with pytest.raises(RemoteError) as refused:
            await client.open_chat("scripted", cwd=tmp_path, timeout=TIMEOUT)
        assert refused.value.code == PERMISSION_DENIED
        assert "workspace.roots" in refused.value.message


@pytest.mark.parametrize("stop", ["kill-9", "sigterm"])
@pytest.mark.parametrize("chosen", [False, True], ids=["own-folder", "cwd"])
async def test_a_session_and_its_agent_keep_their_folder_across_a_restart(
    tmp_path: Path, root: Path, stop: str, chosen: bool
) -> None:
    daemon = scripted_daemon(tmp_path, root)
    project = root / "project"
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat(
                "scripted", cwd=project if chosen else None, timeout=TIMEOUT
            )
            before = await client.ask(chat, "/cwd", timeout=TIMEOUT)
            sessions = (await client.list_sessions(timeout=TIMEOUT)).items
            assert len(sessions) == 1
            session = sessions[0].resource
            await client.subscribe(session, timeout=TIMEOUT)
            (folder,) = client.confirmed(session, SessionState).working_directories or ()
        expected = project if chosen else root / "ahp-sessions" / session.rsplit("/", 1)[-1]
        assert folder == expected.as_uri()
        assert before == f"cwd={expected} process={expected}"
        if stop == "kill-9":
            await daemon.kill()
        else:
            assert await daemon.terminate() == 0
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            await client.subscribe(session, timeout=TIMEOUT)
            assert client.confirmed(session, SessionState).working_directories == (folder,)
            await client.subscribe(chat, timeout=TIMEOUT)
            after = await client.ask(chat, "/cwd", timeout=TIMEOUT)
        assert after == before
        folders = root / "ahp-sessions"  # no second folder was made
        made = sorted(p.name for p in folders.iterdir()) if folders.exists() else []
        assert made == ([] if chosen else [expected.name])
    finally:
        await daemon.close()

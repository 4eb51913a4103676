"""Helpers for end-to-end tests: a real host on a free port, real clients, real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from ahp_server.client import AhpClient
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol.types import ActiveTurn, ChatState, SessionState, Turn
from tests.conftest import TEST_ROOTS

TIMEOUT = 10.0


async def http_get(url: str, token: str | None = None) -> tuple[int, str, str]:
    """GET ``url`` (with ``token`` as a bearer token): status, Content-Type, body."""

    def fetch() -> tuple[int, str, str]:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, headers=headers), timeout=TIMEOUT
            ) as response:
                return response.status, response.headers["Content-Type"], response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers["Content-Type"], error.read().decode()

    return await asyncio.to_thread(fetch)


async def refused(url: str, **kwargs: object) -> int:
    """The HTTP status a WebSocket upgrade to ``url`` is refused with (it must be)."""
    with pytest.raises(InvalidStatus) as caught:
        async with connect(url, **kwargs):  # type: ignore[arg-type]
            pass
    return caught.value.response.status_code


def host_state(host: Host, channel: str) -> Any:
    """What the host has delivered for a loaded channel."""
    actor: Any = (
        host.root
        if channel == "ahp-root://"
        else host.sessions.get(channel) or host.chats.get(channel)
    )
    assert actor is not None, f"the host has no loaded channel {channel}"
    return actor.visible


def comparable(state: Any) -> Any:
    """A state as 1.0 JSON: the shape the host keeps and every ``AhpClient`` holds.

    Both peers reduce with the 1.0 reducers, which read no clock (a chat's
    ``modifiedAt`` comes from the actions themselves), so states compare whole.
    docs/protocol.md.
    """
    return json.loads(codec.encode(state))


async def assert_mirrors_host(client: AhpClient, host: Host, *channels: str) -> None:
    """The state the client computed from envelopes equals the host's, field by field.

    Every change of a host state is published to its subscribers, so once the
    last envelope has arrived the two are equal; we wait (bounded) for that.
    """
    wanted = channels or client.subscriptions

    def same(c: AhpClient) -> bool:
        return all(comparable(c.confirmed(ch)) == comparable(host_state(host, ch)) for ch in wanted)

    try:
        await client.wait_for(same, timeout=TIMEOUT)
    except TimeoutError:
        for channel in wanted:
            mine = comparable(client.confirmed(channel))
            theirs = comparable(host_state(host, channel))
            assert mine == theirs, f"{client.client_id} diverged from the host on {channel}"


def chat_state(client: AhpClient, chat: str) -> ChatState:
    return client.confirmed(chat, ChatState)


def session_state(client: AhpClient, session: str) -> SessionState:
    return client.confirmed(session, SessionState)


def turn_done(client: AhpClient, chat: str, count: int = 1) -> bool:
    state = chat_state(client, chat)
    return len(state.turns) >= count and not isinstance(state.active_turn, ActiveTurn)


async def default_chat_of(client: AhpClient, session: str) -> str:
    """A session's default chat, read from its state (subscribing when needed):
    never assume how the host spells it."""
    if not client.state.has_state(session):
        await client.subscribe(session, timeout=TIMEOUT)
    await client.wait_for(
        lambda c: isinstance(c.confirmed(session, SessionState).default_chat, str),
        timeout=TIMEOUT,
    )
    chat = client.confirmed(session, SessionState).default_chat
    assert isinstance(chat, str)
    return chat


async def every_turn(client: AhpClient, chat: str) -> tuple[Turn, ...]:
    """Page every older turn of a subscribed chat in (``fetchTurns``); all, oldest first."""
    while isinstance(client.confirmed(chat, ChatState).turns_next_cursor, str):
        cursor = client.confirmed(chat, ChatState).turns_next_cursor
        await client.request("fetchTurns", {"channel": chat, "cursor": cursor}, timeout=TIMEOUT)
    return client.confirmed(chat, ChatState).turns


def session_of(host: Host, chat: str) -> str:
    return host.chats[chat].session.uri


class Daemon:
    """``python -m ahp_server serve`` on a data directory, restartable.

    ``user``: run it as this uid (and gid), not as the tests' user.
    """

    def __init__(
        self,
        data_dir: Path,
        *extra: str,
        roots: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        user: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.extra = extra
        #: Its workspace roots (AHP_SERVER_WORKSPACE_ROOTS): the tests' unless given.
        self.roots = TEST_ROOTS if roots is None else roots
        #: Variables added to its environment (``AHP_SERVER_*`` settings, say).
        self.env = dict(env or {})
        self.user = user
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""
        self.stderr: list[str] = []
        self._drain: asyncio.Task[None] | None = None

    async def _spawn(self) -> asyncio.subprocess.Process:
        as_user: list[str] = []
        if self.user is not None:
            # setpriv (util-linux) drops to the uid, keeping only the right to read
            # and search (CAP_DAC_READ_SEARCH): the interpreter may live where only
            # root may look (a home of mode 0700); writing obeys the uid's rights.
            setpriv = shutil.which("setpriv")
            assert setpriv is not None, "running a host as another user needs setpriv"
            as_user = [setpriv, f"--reuid={self.user}", f"--regid={self.user}", "--clear-groups"]
            as_user += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
        self.process = await asyncio.create_subprocess_exec(
            *as_user,
            sys.executable,
            "-m",
            "ahp_server",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--log-format",
            "json",
            "--data-dir",
            str(self.data_dir),
            *self.extra,
            stderr=asyncio.subprocess.PIPE,
            env={
                **os.environ,
                "AHP_SERVER_WORKSPACE_ROOTS": os.pathsep.join(self.roots),
                **self.env,
            },
        )
        return self.process

    async def start(self) -> str:
        process = await self._spawn()
        assert process.stderr is not None
        async with asyncio.timeout(30):
            while True:
                line = (await process.stderr.readline()).decode()
                if not line:
                    raise AssertionError("the server exited: " + "".join(self.stderr))
                self.stderr.append(line)
                if line.startswith("{") and json.loads(line).get("event") == "listening":
                    self.url = str(json.loads(line)["url"])
                    self._drain = asyncio.create_task(self._read_log(self.process.stderr))
                    return self.url

    async def _read_log(self, stream: asyncio.StreamReader) -> None:
        """Keep reading its log (the last lines kept): a full pipe would stop the server."""
        while line := await stream.readline():
            self.stderr.append(line.decode())
            del self.stderr[:-1000]

    async def refused(self) -> tuple[int, list[str]]:
        """Start one that is expected to refuse to start: its exit status and stderr lines."""
        process = await self._spawn()
        async with asyncio.timeout(30):
            _, stderr = await process.communicate()
        assert process.returncode is not None
        return process.returncode, stderr.decode().splitlines()

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()  # SIGKILL: no cleanup at all
        await self.process.wait()
        await self._drained()

    async def terminate(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(TIMEOUT):
            return await self.process.wait()

    async def exited(self) -> int:
        """Wait (bounded) for the process to exit by itself; its exit status. The
        rest of its stderr is in :attr:`stderr`."""
        assert self.process is not None
        async with asyncio.timeout(TIMEOUT):
            status = await self.process.wait()
            if self._drain is not None:
                await self._drain  # the log's last lines, up to the end of the pipe
                self._drain = None
            return status

    async def close(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        await self._drained()

    async def _drained(self) -> None:
        """Stop reading its log (a child it left may still hold the pipe open)."""
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain
            self._drain = None

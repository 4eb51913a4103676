"""Swapping a directory for a link mid-request never lets a file command out of the root.

The same holds for what an ACP agent (tests/agents/scripted_agent.py, run by
the daemon) reads and writes through ``fs/*``, and for the folder the host
makes for a session created without a working directory (``ahp-sessions``
swapped instead).

A real daemon (``python -m ahp_server serve``, tests/e2e/helpers.py) and a real
WebSocket client. A thread swaps ``work/a`` — a directory inside the session's
working directory — for a symbolic link to ``outside`` and back
(``renameat2(RENAME_EXCHANGE)``: ``work/a`` is never missing) as fast as it
can, while the client repeats one command on a path beneath ``work/a``. After
every try nothing outside the root was created, changed, deleted, or read (a
read's answer, a listing, a resolve never shows what only ``outside`` holds).

Every test runs against both walkers of ``workspace/walk.py``: ``openat2(2)``
(skipped where the kernel lacks it) and the ``O_NOFOLLOW`` walk, forced with
``AHP_SERVER_PATH_WALKER=walk``. The race must really be run: the client goes
on until at least :data:`MIN_TRIES` tries were made *and* :data:`MIN_RACED`
of them had a swap happen while the request was in flight (counted, asserted),
bounded by :data:`MAX_TRIES` and :data:`RACE_TIMEOUT` — on a loaded machine
requests are slower, so more of them overlap a swap, never fewer.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ahp_server.client import AhpClient, RemoteError
from ahp_server.protocol.types import ChatState, FileEditSide
from ahp_server.workspace import walk
from ahp_server.workspace.roots import SESSION_FOLDERS
from tests.agents.test_acp import SCRIPT, open_chat
from tests.e2e.helpers import TIMEOUT, Daemon
from tests.e2e.test_changesets import Catalogue, text

ROOT = "ahp-root://"
SECRET = "outside: never served"
INSIDE = "inside"
PERMISSION_DENIED = -32009  # error-codes.md
#: Tries made at least, tries that overlapped a swap at least, tries at most.
MIN_TRIES = 200
MIN_RACED = 30
MAX_TRIES = 5000
#: The whole race, however slow the machine (the tries are what bound it).
RACE_TIMEOUT = 240.0


_libc = ctypes.CDLL(None, use_errno=True)
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> None:
    """``renameat2(RENAME_EXCHANGE)``: ``a`` and ``b`` trade places at once (neither is ever
    missing)."""
    if _libc.renameat2(_AT_FDCWD, bytes(a), _AT_FDCWD, bytes(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a))


class Swapper:
    """Swaps ``directory`` for a symbolic link to ``outside`` and back, in a thread."""

    def __init__(self, directory: Path, outside: Path) -> None:
        self.directory = directory
        self.link = directory.with_name(directory.name + ".link")
        self.link.symlink_to(outside)
        #: Swaps done (each direction counts one).
        self.swaps = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="swapper", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                exchange(self.directory, self.link)  # work/a leads outside, or is itself again
                self.swaps += 1
            if self.swaps % 2:
                exchange(self.directory, self.link)
        except BaseException as error:  # noqa: BLE001 - reported by stop()
            self.error = error

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive(), "the swapper did not stop"
        assert self.error is None, f"the swapper failed: {self.error!r}"
        assert self.directory.is_dir()
        assert not self.directory.is_symlink()


def tree(directory: Path) -> dict[str, bytes | None]:
    """Every entry beneath ``directory``: a file's bytes, ``None`` for a directory."""
    found: dict[str, bytes | None] = {}
    for parent, directories, files in os.walk(directory):
        for name in directories:
            found[os.path.relpath(os.path.join(parent, name), directory)] = None
        for name in files:
            path = Path(parent, name)
            found[os.path.relpath(path, directory)] = path.read_bytes()
    return found


@dataclass
class Bench:
    client: AhpClient
    work: Path
    outside: Path
    #: A directory inside the root that is never swapped.
    stable: Path
    #: The root (the host's only one: sessions without a directory get theirs in it).
    root: Path
    #: A chat with the scripted ACP agent (tests/agents/scripted_agent.py), once opened.
    chat: str = ""
    #: The changesets of that chat's session.
    changesets: Catalogue | None = None
    #: The agent's fs/* calls the host served (not refused) during a race.
    served: int = 0

    def uri(self, relative: str) -> str:
        return (self.work / relative).as_uri()

    async def refused(self, method: str, **params: Any) -> RemoteError:
        with pytest.raises(RemoteError) as caught:
            await self.client.request(method, {"channel": ROOT, **params}, timeout=TIMEOUT)
        return caught.value

    async def call(self, method: str, **params: Any) -> Any:
        """The answer, or None when the host refused (any refusal is fine in a race)."""
        try:
            return await self.client.request(method, {"channel": ROOT, **params}, timeout=TIMEOUT)
        except RemoteError:
            return None


@pytest.fixture(params=["openat2", "walk"])
async def bench(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Bench]:
    if request.param == "openat2" and walk.WALKER != "openat2":
        pytest.skip("this kernel has no openat2(2)")
    monkeypatch.setenv(walk.FORCE_ENV, request.param)
    root = tmp_path / "root"
    work = root / "work"
    (work / "a" / "victimdir").mkdir(parents=True)
    (work / "a" / "target.txt").write_text(INSIDE)
    (work / "a" / "victim.txt").write_text(INSIDE)
    (work / "a" / "victimdir" / "x.txt").write_text(INSIDE)
    stable = work / "stable"
    stable.mkdir()
    (stable / "source.txt").write_text(INSIDE)
    outside = tmp_path / "outside"
    (outside / "victimdir").mkdir(parents=True)
    for name in ("target.txt", "secret.txt", "victim.txt", "victimdir/x.txt"):
        (outside / name).write_text(SECRET)
    config = tmp_path / "host.toml"
    config.write_text(
        f'[[agents]]\nname = "scripted"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(SCRIPT)}]\n",
        encoding="utf-8",
    )
    daemon = Daemon(tmp_path / "data", "--config", str(config), roots=[str(root)])
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            await client.create_session("echo", working_directories=[work.as_uri()])
            yield Bench(client, work, outside, stable, root)
    finally:
        await daemon.close()


def no_secret_inside(bench: Bench) -> None:
    """Nothing of ``outside`` was brought into the root (``stable``, where copies and moves
    out of ``work/a`` land; ``work/a`` itself cannot be walked while it is being swapped)."""
    for name, content in tree(bench.stable).items():
        assert content is None or SECRET.encode() not in content, f"{name} holds outside data"


async def write(bench: Bench, i: int) -> None:
    await bench.call("resourceWrite", uri=bench.uri("a/target.txt"), data="w", encoding="utf-8")
    await bench.call(
        "resourceWrite",
        uri=bench.uri(f"a/new-{i}.txt"),
        data="n",
        encoding="utf-8",
        createOnly=True,
    )


async def read(bench: Bench, i: int) -> None:
    for name in ("a/secret.txt", "a/target.txt"):
        answer = await bench.call("resourceRead", uri=bench.uri(name), encoding="utf-8")
        assert answer is None or SECRET not in answer["data"], f"{name} was read from outside"


async def list_and_resolve(bench: Bench, i: int) -> None:
    listed = await bench.call("resourceList", uri=bench.uri("a"))
    names = {entry["name"] for entry in listed["entries"]} if listed else set()
    assert "secret.txt" not in names, "the outside directory was listed"
    for follow in (True, False):
        resolved = await bench.call(
            "resourceResolve", uri=bench.uri("a/secret.txt"), followSymlinks=follow
        )
        assert resolved is None, f"an outside file was resolved: {resolved}"


async def mkdir(bench: Bench, i: int) -> None:
    await bench.call("resourceMkdir", uri=bench.uri(f"a/made-{i}/deeper"))


async def copy(bench: Bench, i: int) -> None:
    await bench.call(
        "resourceCopy", source=bench.uri("a/secret.txt"), destination=bench.uri(f"stable/c-{i}")
    )
    await bench.call(
        "resourceCopy", source=bench.uri("a/victimdir"), destination=bench.uri(f"stable/t-{i}")
    )
    await bench.call(
        "resourceCopy", source=bench.uri("stable/source.txt"), destination=bench.uri(f"a/c-{i}")
    )
    no_secret_inside(bench)


async def move(bench: Bench, i: int) -> None:
    await bench.call(
        "resourceMove", source=bench.uri("a/victim.txt"), destination=bench.uri(f"stable/m-{i}")
    )
    (bench.stable / f"in-{i}.txt").write_text(INSIDE)
    await bench.call(
        "resourceMove", source=bench.uri(f"stable/in-{i}.txt"), destination=bench.uri(f"a/in-{i}")
    )
    no_secret_inside(bench)


async def delete(bench: Bench, i: int) -> None:
    await bench.call("resourceDelete", uri=bench.uri("a/victim.txt"))
    await bench.call("resourceDelete", uri=bench.uri("a/victimdir"), recursive=True)


Operation = Callable[[Bench, int], Awaitable[None]]


async def race(bench: Bench, swapped: Path, operation: Operation) -> None:
    """Repeat ``operation`` while ``swapped`` is swapped for a link to ``outside`` and back,
    until enough tries overlapped a swap (module docstring); outside is checked after each."""
    untouched = tree(bench.outside)
    swapper = Swapper(swapped, bench.outside)
    swapper.start()
    tries = raced = 0
    try:
        async with asyncio.timeout(RACE_TIMEOUT):
            while (tries < MIN_TRIES or raced < MIN_RACED) and tries < MAX_TRIES:
                swaps = swapper.swaps
                await operation(bench, tries)
                raced += swapper.swaps > swaps
                tries += 1
                assert tree(bench.outside) == untouched, f"try {tries} changed outside"
    finally:
        swapper.stop()
    assert raced >= MIN_RACED, f"only {raced} of {tries} tries overlapped a swap"
    assert tree(bench.outside) == untouched
    assert await bench.client.request("ping", {"channel": ROOT}, timeout=TIMEOUT) is None


@pytest.mark.parametrize(
    "operation",
    [write, read, list_and_resolve, mkdir, copy, move, delete],
    ids=["write", "read", "list-stat", "mkdir", "copy", "move", "delete"],
)
async def test_a_directory_swapped_for_a_link_never_leads_a_command_outside(
    bench: Bench, operation: Operation
) -> None:
    await race(bench, bench.work / "a", operation)


# -- the agents' fs/* (the ACP bridge) -------------------------------------------------------


async def agent_says(bench: Bench, prompt: str) -> str:
    """What the scripted agent answers ``prompt`` with (its fs/* answers or errors, as text)."""
    return await bench.client.ask(bench.chat, prompt, timeout=TIMEOUT)


async def agent_write(bench: Bench, i: int) -> None:
    """``fs/write_text_file`` over a file both sides hold, and a new one; the changeset's
    "before" of the file replaced is never what lies outside."""
    for name in ("a/target.txt", f"a/new-{i}.txt"):
        answer = await agent_says(bench, f"/write {bench.work / name} w")
        assert answer == "written" or answer.startswith("write error:"), answer
        bench.served += answer == "written"
        assert bench.changesets is not None
        turn = bench.client.confirmed(bench.chat, ChatState).turns[-1].id
        for file in (await bench.changesets.state(bench.changesets.turn(turn))).files:
            before = file.edit.before
            if isinstance(before, FileEditSide):
                assert SECRET not in text(before), "a before was read outside"


async def agent_read(bench: Bench, i: int) -> None:
    for name in ("a/secret.txt", "a/target.txt"):
        answer = await agent_says(bench, f"/read {bench.work / name}")
        assert SECRET not in answer, f"{name} was read from outside"
        bench.served += answer.startswith("content:")


async def open_agent_chat(bench: Bench) -> None:
    bench.chat = await open_chat(bench.client, bench.work)
    # A first change makes the session list its changesets (docs/workspace.md).
    assert await agent_says(bench, f"/write {bench.stable / 'source.txt'} {INSIDE}") == "written"
    subscribed = bench.client.subscriptions
    session = next(s for s in subscribed if s.startswith("ahp-session:/") and s != bench.chat)
    bench.changesets = Catalogue(bench.client, session)


@pytest.mark.parametrize("operation", [agent_write, agent_read], ids=["write", "read"])
async def test_a_directory_swapped_for_a_link_never_leads_an_agents_fs_call_outside(
    bench: Bench, operation: Operation
) -> None:
    await open_agent_chat(bench)
    await race(bench, bench.work / "a", operation)
    assert bench.served > 0  # the host did not refuse them all: the calls really ran


async def test_an_agent_neither_reads_nor_writes_through_a_hard_link(bench: Bench) -> None:
    linked = bench.stable / "linked.txt"
    os.link(bench.outside / "secret.txt", linked)
    await open_agent_chat(bench)
    answer = await agent_says(bench, f"/read {linked}")
    assert answer.startswith("read error:")
    assert "hard links" in answer
    assert SECRET not in answer
    answer = await agent_says(bench, f"/write {linked} overwritten")
    assert answer.startswith("write error:")
    assert "hard links" in answer
    assert (bench.outside / "secret.txt").read_text() == SECRET
    assert linked.stat().st_nlink == 2  # the link was not replaced either
    assert sorted(p.name for p in bench.stable.iterdir()) == ["linked.txt", "source.txt"]


# -- the folders of sessions created without a working directory ------------------------------


async def test_a_session_folder_is_never_made_through_a_swapped_ahp_sessions(
    bench: Bench,
) -> None:
    folders = bench.root / SESSION_FOLDERS
    folders.mkdir()
    made = 0

    async def new_session(bench: Bench, i: int) -> None:
        nonlocal made
        code = None
        try:
            await bench.client.create_session("echo", timeout=TIMEOUT)
        except RemoteError as error:
            code = error.code
        made += code is None
        assert code in (None, PERMISSION_DENIED), code

    await race(bench, folders, new_session)
    assert not folders.is_symlink()
    assert len(list(folders.iterdir())) == made  # every folder made is inside the root
    assert made > 0  # and the host did not refuse them all


async def test_a_session_folder_is_refused_when_ahp_sessions_is_a_link(bench: Bench) -> None:
    (bench.root / SESSION_FOLDERS).symlink_to(bench.outside)
    untouched = tree(bench.outside)
    with pytest.raises(RemoteError) as caught:
        await bench.client.create_session("echo", timeout=TIMEOUT)
    assert caught.value.code == PERMISSION_DENIED
    assert "symbolic link" in caught.value.message
    assert tree(bench.outside) == untouched


async def test_a_hard_link_to_a_file_outside_is_neither_read_nor_written(bench: Bench) -> None:
    linked = bench.stable / "linked.txt"
    os.link(bench.outside / "secret.txt", linked)
    uri = linked.as_uri()
    error = await bench.refused("resourceRead", uri=uri)
    assert error.code == PERMISSION_DENIED
    assert "hard links" in error.message
    for mode in ("truncate", "append", "insert"):
        error = await bench.refused(
            "resourceWrite", uri=uri, data="overwritten", encoding="utf-8", mode=mode
        )
        assert error.code == PERMISSION_DENIED, mode
    error = await bench.refused("resourceCopy", source=uri, destination=bench.uri("stable/c"))
    assert error.code == PERMISSION_DENIED
    error = await bench.refused(
        "resourceCopy", source=bench.uri("stable"), destination=bench.uri("t")
    )
    assert error.code == PERMISSION_DENIED  # a tree holding one is not copied either
    assert (bench.outside / "secret.txt").read_text() == SECRET
    assert linked.stat().st_nlink == 2  # nothing replaced the link either
    assert not (bench.stable / "c").exists()
    assert not (bench.work / "t").exists()
    # The entry itself may go: deleting it removes this name only.
    assert await bench.call("resourceDelete", uri=uri) == {}
    assert (bench.outside / "secret.txt").read_text() == SECRET

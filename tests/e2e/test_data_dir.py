"""The data directory over real processes: one host at a time, and refusals that say what is wrong.

A refused start prints one line and exits non-zero, having changed nothing
in the directory (every file is hashed before and after). docs/deploy.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ahp_server.client import AhpClient
from ahp_server.protocol.types import ChatState
from ahp_server.store.lock import LOCK_FILE
from tests.e2e.helpers import TIMEOUT, Daemon

DB = "ahp-server.db"


def hashes(directory: Path, *, but: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file of ``directory`` (but those named) and the SHA-256 of its bytes."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
        if path.is_file() and path.name not in but
    }


def the_refusal(lines: list[str]) -> str:
    """A refused start's stderr: one line, no traceback; that line."""
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    return lines[0]


async def a_database_with_chats(data: Path) -> None:
    """Run a host on ``data`` long enough to keep two chats with a turn each, stop it."""
    daemon = Daemon(data)
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            for text in ("first", "second"):
                chat = await client.open_chat()
                await client.ask(chat, text, timeout=TIMEOUT)
        assert await daemon.terminate() == 0
    finally:
        await daemon.close()


async def test_a_second_host_on_the_directory_is_refused_and_the_first_serves_on(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = Daemon(data)
    try:
        url = await first.start()
        assert first.process is not None
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat()
            await client.ask(chat, "before", timeout=TIMEOUT)
            # Hold the first still (SIGSTOP): its own tail folds and checkpoints
            # cannot change a file meanwhile, so any change is the second's.
            first.process.send_signal(signal.SIGSTOP)
            try:
                before = hashes(data)
                # On the first's port too: before the lock, a second host rotated
                # the first's tail files, then failed to bind.
                port = url.rsplit(":", 1)[1]
                status, lines = await Daemon(data, "--port", port).refused()
                assert hashes(data) == before  # not even the lock file was written
            finally:
                first.process.send_signal(signal.SIGCONT)
            assert status != 0
            assert f"in use by another ahp-server (pid {first.process.pid})" in the_refusal(lines)
            assert str(data) in lines[0]
            # The first goes on unharmed: it answers, and keeps what it answered.
            assert "after" in await client.ask(chat, "after", timeout=TIMEOUT)
        assert await first.terminate() == 0
        assert not any("Traceback" in line or "UNIQUE" in line for line in first.stderr)
        url = await first.start()
        async with AhpClient.connect(url) as client:
            state = await client.subscribe(chat)
            assert isinstance(state, ChatState)
            assert [t.message.text for t in state.turns] == ["before", "after"]
    finally:
        await first.close()


async def test_the_lock_is_released_when_the_host_stops_or_dies(tmp_path: Path) -> None:
    data = tmp_path / "data"
    daemon = Daemon(data)
    try:
        await daemon.start()
        assert daemon.process is not None
        assert (data / LOCK_FILE).read_text().strip() == str(daemon.process.pid)
        assert await daemon.terminate() == 0
        await daemon.start()  # a stopped host left it free
        await daemon.kill()
        await daemon.start()  # and a killed one: the kernel released it
    finally:
        await daemon.close()


async def test_a_corrupt_database_is_refused_untouched_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await a_database_with_chats(data)
    db = data / DB
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'channels'").fetchone()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with db.open("r+b") as file:  # garbage over a page in use: the channels table's root
        file.seek((root - 1) * page_size)
        file.write(b"\xa5 corrupt \x5a" * (page_size // 11))
    before = hashes(data, but=(LOCK_FILE,))
    status, lines = await Daemon(data).refused()
    assert status != 0
    line = the_refusal(lines)
    assert f"{db}: the database is corrupt" in line
    assert hashes(data, but=(LOCK_FILE,)) == before  # nor the tail, nor the WAL


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A folder outside the tests' private temporary folder, which any uid can reach."""
    base = Path(tempfile.mkdtemp(prefix="ahp-data-dir-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


#: The host runs as this uid: as root (the tests' user here) nothing is unwritable.
AS = 65534 if os.geteuid() == 0 else None


async def test_an_unwritable_data_directory_says_so(reachable: Path) -> None:
    # As a root-owned /data volume is to the container's user.
    data = reachable / "data"
    data.mkdir()
    data.chmod(0o555)
    status, lines = await Daemon(data, user=AS).refused()
    assert status != 0
    uid = os.geteuid() if AS is None else AS
    assert f"{data} is not writable by uid {uid}" in the_refusal(lines)
    assert "not a readable" not in lines[0]
    assert list(data.iterdir()) == []


async def test_an_unwritable_database_file_says_so(reachable: Path) -> None:
    if AS is None:
        pytest.skip("needs root, to hand the folder to another uid")
    data = reachable / "data"
    await a_database_with_chats(data)
    for path in (data, *data.iterdir()):
        os.chown(path, AS, AS)
    db = data / DB
    os.chown(db, 0, 0)  # the file stays root's (0644): restored as root, say
    db.chmod(0o644)
    before = hashes(data, but=(LOCK_FILE,))
    status, lines = await Daemon(data, user=AS).refused()
    assert status != 0
    assert f"{db} is not writable by uid {AS} (owned by uid 0" in the_refusal(lines)
    assert hashes(data, but=(LOCK_FILE,)) == before

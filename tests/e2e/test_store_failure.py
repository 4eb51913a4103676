"""A failed store, over real processes and a really full disk or a really lost database.

When a commit cannot be written the host says so everywhere a client or a
supervisor looks: its clients are closed with 1012 and a reason naming the
store, new ones are refused, ``/healthz`` and ``/readyz`` answer 503 naming
the failure, and ``ahp-server serve`` exits with status 1 and one line on
stderr. What any client was answered before is there after a restart with
room (docs/deploy.md "When the store fails", docs/reliability.md).

The full disk is a small tmpfs mounted for the test (the tests run as root;
without the right to mount, they skip saying so); PostgreSQL is reached
through a relay the test cuts (``tests/proxy.py``).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from ahp_server.client import AhpClient, ConnectionClosedError
from ahp_server.config import Settings
from ahp_server.host.host import DB_FILE
from ahp_server.protocol.types import ActiveTurn, ChatState, MarkdownResponsePart
from tests.conftest import start_host
from tests.e2e.helpers import TIMEOUT, Daemon, every_turn, http_get, refused
from tests.postgres import ADMIN_URL, postgres_schema
from tests.proxy import Proxy

#: What fills the small disk: each turn stores its message about four times
#: (the envelope in the log's tail and in SQLite, the answer streamed back, the turn).
FILLER = "x" * 20_000
#: Bounded: 6 MiB is full after a few dozen such turns.
MOST_TURNS = 1_000
#: The size of the small disk.
DISK = "6m"
#: A password in the store's URL (PostgreSQL's trust authentication ignores it): it
#: must never be shown.
PASSWORD = "pw-never-shown-7c1e"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs mounted on a fresh directory, unmounted after the test."""
    where = tmp_path / "small-disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for a full disk: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def http(url: str, path: str) -> str:
    return url.replace("ws://", "http://") + path


def echoed(client: AhpClient, chat: str, turn: str) -> bool:
    """The echo of the turn's ``chat/turnStarted`` arrived (it is running or has ended)."""
    state = client.confirmed(chat, ChatState)
    active = state.active_turn
    return (isinstance(active, ActiveTurn) and active.id == turn) or any(
        t.id == turn for t in state.turns
    )


async def talk_until_closed(
    client: AhpClient, chat: str
) -> tuple[list[str], dict[str, str], ConnectionClosedError]:
    """Start turns of ``FILLER`` until the host closes the connection.

    Returns the turns whose ``chat/turnStarted`` echo arrived, the answers
    that arrived (by turn), and how the connection ended.
    """
    acknowledged: list[str] = []
    answered: dict[str, str] = {}
    for n in range(MOST_TURNS):
        turn = str(uuid.uuid4())
        try:
            await client.send_message(chat, f"turn {n} {FILLER}", turn_id=turn, timeout=TIMEOUT)
            await client.wait_for(lambda c, t=turn: echoed(c, chat, t), timeout=TIMEOUT)
            acknowledged.append(turn)
            answered[turn] = await client.wait_turn(chat, turn, timeout=TIMEOUT)
        except ConnectionClosedError as closed:
            return acknowledged, answered, closed
    raise AssertionError(f"{MOST_TURNS} turns of {len(FILLER)} bytes fit on a {DISK} disk")


def assert_full_disk_close(client: AhpClient) -> None:
    assert client.close_code == 1012  # service restart: come back to the restarted host
    reason = client.close_reason
    assert reason.startswith("the store failed: "), reason
    assert "full" in reason or "No space" in reason, reason


async def test_a_full_disk_stops_the_host_and_loses_nothing_it_acknowledged(
    small_disk: Path, tmp_path: Path
) -> None:
    daemon = Daemon(small_disk / "data")
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat(timeout=TIMEOUT)
            acknowledged, answered, _ = await talk_until_closed(client, chat)
            assert_full_disk_close(client)
        assert len(answered) >= 2  # the disk filled while the host worked
        assert await daemon.exited() == 1
        database = small_disk / "data" / DB_FILE
        lines = [line for line in daemon.stderr if line.startswith("ahp-server: stopped:")]
        assert len(lines) == 1, daemon.stderr[-5:]
        assert lines[0].startswith(f"ahp-server: stopped: the store failed: {database}: ")
    finally:
        await daemon.close()
    # Room: the same files on a disk with space (as a supervisor would restart it).
    roomy = tmp_path / "roomy"
    shutil.copytree(small_disk / "data", roomy)
    restarted = Daemon(roomy)
    try:
        url = await restarted.start()
        async with AhpClient.connect(url) as client:
            await client.subscribe(chat, timeout=TIMEOUT)
            turns = {t.id: t for t in await every_turn(client, chat)}
            assert not isinstance(client.confirmed(chat, ChatState).active_turn, ActiveTurn)
        for turn in acknowledged:
            assert turn in turns, f"turn {acknowledged.index(turn)} was acknowledged, then lost"
        for turn, answer in answered.items():
            stored = turns[turn]
            assert stored.state == "complete"
            parts = stored.response_parts
            assert "".join(p.content for p in parts if isinstance(p, MarkdownResponsePart)) == (
                answer
            )
        # A turn acknowledged but never answered ended as interrupted, not left running.
        for turn in set(acknowledged) - set(answered):
            assert turns[turn].state == "error"
    finally:
        await restarted.close()


async def test_the_health_endpoints_and_the_door_name_a_failed_store(small_disk: Path) -> None:
    """In process, where nothing stops the host after the failure: what a probe sees
    between the failure and the exit, for as long as it lasts."""
    settings = dataclasses.replace(Settings(), data_dir=str(small_disk / "data"))
    running = await start_host(settings)
    try:
        url = running.url
        for path in ("/healthz", "/readyz"):
            assert (await http_get(http(url, path)))[0] == 200
        async with AhpClient.connect(url) as client, AhpClient.connect(url) as other:
            chat = await client.open_chat(timeout=TIMEOUT)
            await talk_until_closed(client, chat)
            assert_full_disk_close(client)
            # Every client is closed, not only the one whose turn hit the full disk.
            await other.wait_closed(timeout=TIMEOUT)
            assert_full_disk_close(other)
        database = small_disk / "data" / DB_FILE
        for path in ("/healthz", "/readyz"):
            status, _, body = await http_get(http(url, path))
            assert status == 503
            assert body.startswith(f"failed: the store failed: {database}: ")
        assert await refused(url) == 503
        assert running.host.failure is not None
        assert not running.host.accepting
    finally:
        await running.app.abort()


def through(proxy_port: int, url: str) -> str:
    """``url`` (PostgreSQL on loopback) by way of the relay, with a password in it."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{PASSWORD}@127.0.0.1:{proxy_port}"))


async def closed_by_the_store(client: AhpClient) -> None:
    """The host closed ``client`` because its store failed (1012, the reason said)."""
    await client.wait_closed(timeout=TIMEOUT)
    assert client.close_code == 1012
    assert client.close_reason.startswith("the store failed: ")


async def stopped_line(daemon: Daemon) -> str:
    """The host exited 1 with one ``stopped:`` line on stderr, no password anywhere: that line."""
    assert await daemon.exited() == 1
    lines = [line for line in daemon.stderr if line.startswith("ahp-server: stopped:")]
    assert len(lines) == 1, daemon.stderr[-5:]
    assert not any(PASSWORD in line for line in daemon.stderr)
    return lines[0]


async def test_a_lost_postgresql_stops_the_host_and_loses_nothing_it_answered(
    tmp_path: Path,
) -> None:
    async with postgres_schema() as store_url:
        proxy = Proxy(urlsplit(ADMIN_URL).port or 5432)
        port = await proxy.start()
        daemon = Daemon(tmp_path / "data", env={"AHP_SERVER_STORE": through(port, store_url)})
        try:
            url = await daemon.start()
            async with AhpClient.connect(url) as client:
                chat = await client.open_chat(timeout=TIMEOUT)
                answer = await client.ask(chat, "before the cut", timeout=TIMEOUT)
                assert proxy.drop() >= 1  # the store's connections really were cut
                # The next commit finds its connection gone.
                await client.send_message(chat, "after the cut", timeout=TIMEOUT)
                await closed_by_the_store(client)
            stopped = await stopped_line(daemon)
            assert stopped.startswith("ahp-server: stopped: the store failed: postgres")
        finally:
            await daemon.close()
            await proxy.close()
        # PostgreSQL back: what was answered before the cut is there.
        restarted = Daemon(tmp_path / "data", env={"AHP_SERVER_STORE": store_url})
        try:
            url = await restarted.start()
            async with AhpClient.connect(url) as client:
                await client.subscribe(chat, timeout=TIMEOUT)
                turns = await every_turn(client, chat)
                assert turns[0].message.text == "before the cut"
                assert turns[0].state == "complete"
                parts = turns[0].response_parts
                assert "".join(p.content for p in parts if isinstance(p, MarkdownResponsePart)) == (
                    answer
                )
        finally:
            await restarted.close()


async def test_a_postgresql_that_stops_answering_stops_the_host_after_the_commit_timeout(
    tmp_path: Path,
) -> None:
    """The connection stays open but nothing comes back (a partition, a hung server):
    after ``storage.commit_timeout`` the store fails, clients are told why (1012), and
    the host exits 1 naming the timeout, instead of holding every turn silently."""
    config = tmp_path / "ahp-server.toml"
    config.write_text("[storage]\ncommit_timeout = 2\n", encoding="utf-8")
    async with postgres_schema() as store_url:
        proxy = Proxy(urlsplit(ADMIN_URL).port or 5432)
        port = await proxy.start()
        daemon = Daemon(
            tmp_path / "data",
            "--config",
            str(config),
            env={"AHP_SERVER_STORE": through(port, store_url)},
        )
        try:
            url = await daemon.start()
            async with AhpClient.connect(url) as client:
                chat = await client.open_chat(timeout=TIMEOUT)
                await client.ask(chat, "before the stall", timeout=TIMEOUT)
                proxy.stall()
                await client.send_message(chat, "during the stall", timeout=TIMEOUT)
                await closed_by_the_store(client)
            stopped = await stopped_line(daemon)
            assert "no answer to a commit in 2 s (storage.commit_timeout)" in stopped
        finally:
            await daemon.close()
            await proxy.close()

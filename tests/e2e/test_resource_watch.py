"""Resource watches over real sockets: createResourceWatch, changes as actions, release.

A real host (``tests/conftest.py``), the bundled client, real files in a
temporary directory and the real watcher (watchfiles). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from ahp_server.client import AhpClient, RemoteError
from ahp_server.config import Settings
from ahp_server.host.channels.watches import ResourceWatches
from ahp_server.host.host import DB_FILE
from ahp_server.protocol.types import (
    ActionEnvelope,
    ResourceWatchChangedAction,
    ResourceWatchState,
)
from ahp_server.store.sqlite import SqliteStore
from tests.conftest import RunningHost, start_host

ROOT = "ahp-root://"
TIMEOUT = 10.0


@dataclasses.dataclass
class Bench:
    running: RunningHost
    work: Path
    outside: Path

    @property
    def watches(self) -> ResourceWatches:
        return self.running.app.gateway.watches


async def open_bench(tmp_path: Path, **settings: Any) -> Bench:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    base = dataclasses.replace(Settings(), **{"watch_debounce_ms": 100, **settings})
    return Bench(await start_host(base), work, outside)


@pytest.fixture
async def bench(tmp_path: Path) -> AsyncIterator[Bench]:
    opened = await open_bench(tmp_path)
    try:
        yield opened
    finally:
        await opened.running.stop()


class Changes:
    """Every ``resourceWatch/changed`` batch a client receives on one channel."""

    def __init__(self, client: AhpClient, channel: str) -> None:
        self.client = client
        self.channel = channel
        self.batches: list[list[tuple[str, str]]] = []
        client.on_envelope(self._on_envelope)

    def _on_envelope(self, envelope: ActionEnvelope) -> None:
        if envelope.channel == self.channel and isinstance(
            envelope.action, ResourceWatchChangedAction
        ):
            self.batches.append([(c.uri, c.type) for c in envelope.action.changes.items])

    @property
    def items(self) -> list[tuple[str, str]]:
        return [item for batch in self.batches for item in batch]

    async def wait(self, predicate: Callable[[list[tuple[str, str]]], bool]) -> None:
        await self.client.wait_for(lambda _: predicate(self.items), timeout=TIMEOUT)

    async def seen(self, path: Path, kind: str) -> None:
        await self.wait(lambda items: (path.as_uri(), kind) in items)


async def session_in(client: AhpClient, *directories: Path) -> str:
    """A session whose working directories are ``directories`` (as file: URIs)."""
    return await client.create_session("echo", [d.as_uri() for d in directories])


async def watch(client: AhpClient, target: Path | str, **params: Any) -> str:
    uri = target.as_uri() if isinstance(target, Path) else target
    result = await client.request(
        "createResourceWatch", {"channel": ROOT, "uri": uri, **params}, timeout=TIMEOUT
    )
    channel = result["channel"]
    assert isinstance(channel, str)
    return channel


async def refused(client: AhpClient, **params: Any) -> int:
    with pytest.raises(RemoteError) as error:
        await client.request("createResourceWatch", {"channel": ROOT, **params}, timeout=TIMEOUT)
    return error.value.code


async def until(predicate: Callable[[], bool]) -> None:
    """Wait (bounded) for what no envelope announces: a task ending, a channel gone."""
    async with asyncio.timeout(TIMEOUT):
        while not predicate():  # noqa: ASYNC110 - host internals: nothing to await
            await asyncio.sleep(0.02)


# -- events ----------------------------------------------------------------------------------


async def test_added_updated_and_deleted_files_reach_the_subscriber(bench: Bench) -> None:
    # Directories exist before the watch: files created in the very instant a
    # directory appears can be missed (docs/workspace.md), not what this tests.
    nested = bench.work / "deep" / "er"
    nested.mkdir(parents=True)
    async with AhpClient.connect(bench.running.url) as client:
        await session_in(client, bench.work)
        channel = await watch(client, bench.work, recursive=True)
        assert channel.startswith("ahp-resource-watch:/")
        state = await client.subscribe(channel)
        assert state == ResourceWatchState(root=bench.work.as_uri(), recursive=True)
        changes = Changes(client, channel)

        note = bench.work / "note.txt"
        note.write_text("one")
        await changes.seen(note, "added")
        note.write_text("two")
        await changes.seen(note, "updated")
        (nested / "x.md").write_text("x")
        await changes.seen(nested / "x.md", "added")
        note.unlink()
        await changes.seen(note, "deleted")
        assert all(uri.startswith(bench.work.as_uri() + "/") for uri, _ in changes.items)


async def test_a_plain_watch_reports_direct_children_only(bench: Bench) -> None:
    sub = bench.work / "sub"
    sub.mkdir()
    async with AhpClient.connect(bench.running.url) as client:
        await session_in(client, bench.work)
        channel = await watch(client, bench.work)  # recursive defaults to false
        state = await client.subscribe(channel)
        assert isinstance(state, ResourceWatchState)
        assert state.recursive is False
        changes = Changes(client, channel)
        (sub / "inner.txt").write_text("not reported")
        await asyncio.sleep(0.3)  # a batch of its own, if it were reported
        top = bench.work / "top.txt"
        top.write_text("reported")
        await changes.seen(top, "added")
        assert not [uri for uri, _ in changes.items if "inner.txt" in uri]


async def test_excludes_and_includes_filter_the_changes(bench: Bench) -> None:
    (bench.work / "build").mkdir()
    (bench.work / "sub").mkdir()
    async with AhpClient.connect(bench.running.url) as client:
        await session_in(client, bench.work)
        excluding = await watch(
            client, bench.work, recursive=True, excludes={"items": ["*.log", "build"]}
        )
        including = await watch(client, bench.work, recursive=True, includes={"items": ["*.py"]})
        await client.subscribe(excluding)
        await client.subscribe(including)
        without, only = Changes(client, excluding), Changes(client, including)
        (bench.work / "build" / "out.o").write_text("o")
        (bench.work / "run.log").write_text("log")
        (bench.work / "sub" / "deep.log").write_text("log")
        code = bench.work / "sub" / "code.py"
        code.write_text("print()")
        readme = bench.work / "README"
        readme.write_text("r")
        await without.seen(readme, "added")
        await without.seen(code, "added")
        await only.seen(code, "added")
        reported = {uri for uri, _ in without.items}
        assert reported  # README, code.py and sub (a changed directory) at least
        assert not [u for u in reported if u.endswith(".log") or "/build" in u]
        assert {uri for uri, _ in only.items} == {code.as_uri()}


async def test_a_watched_file_reports_itself_only(bench: Bench) -> None:
    target = bench.work / "config.toml"
    target.write_text("a = 1")
    async with AhpClient.connect(bench.running.url) as client:
        await session_in(client, bench.work)
        channel = await watch(client, target)
        await client.subscribe(channel)
        changes = Changes(client, channel)
        (bench.work / "neighbour.txt").write_text("n")
        target.write_text("a = 2")
        await changes.seen(target, "updated")
        assert {uri for uri, _ in changes.items} == {target.as_uri()}


# -- refusals --------------------------------------------------------------------------------


async def test_paths_outside_the_working_directories_are_refused(bench: Bench) -> None:
    (bench.work / "escape").symlink_to(bench.outside)
    async with AhpClient.connect(bench.running.url) as client:
        # No session yet: no working directory, nothing may be watched.
        assert await refused(client, uri=bench.work.as_uri()) == -32009
        await session_in(client, bench.work)
        assert await refused(client, uri=bench.outside.as_uri()) == -32009
        assert await refused(client, uri=(bench.work / "escape").as_uri()) == -32009
        assert await refused(client, uri=bench.work.as_uri() + "/../outside") == -32009
        assert await refused(client, uri=(bench.work / "missing").as_uri()) == -32008
        assert await refused(client, uri="https://example.com/x") == -32602
        assert await refused(client, uri="relative/path") == -32602
        with pytest.raises(RemoteError) as wrong_channel:
            await client.request(
                "createResourceWatch",
                {"channel": "ahp-session:/x", "uri": bench.work.as_uri()},
                timeout=TIMEOUT,
            )
        assert wrong_channel.value.code == -32602
        assert bench.watches.watches == {}


async def test_a_client_cannot_dispatch_on_a_watch(bench: Bench) -> None:
    async with AhpClient.connect(bench.running.url) as client:
        await session_in(client, bench.work)
        channel = await watch(client, bench.work)
        await client.subscribe(channel)
        rejected: list[ActionEnvelope] = []
        client.on_envelope(rejected.append)
        fake = {"type": "resourceWatch/changed", "changes": {"items": []}}
        await client.notify("dispatchAction", {"channel": channel, "clientSeq": 1, "action": fake})
        await client.wait_for(
            lambda _: any(isinstance(e.rejection_reason, str) for e in rejected), timeout=TIMEOUT
        )
        reason = next(e.rejection_reason for e in rejected if isinstance(e.rejection_reason, str))
        assert "server-only" in reason


# -- release ---------------------------------------------------------------------------------


async def test_the_last_unsubscribe_releases_the_watch(bench: Bench) -> None:
    url = bench.running.url
    async with AhpClient.connect(url) as first, AhpClient.connect(url) as second:
        await session_in(first, bench.work)
        channel = await watch(first, bench.work, recursive=True)
        await first.subscribe(channel)
        await second.subscribe(channel)
        task = bench.watches.watches[channel].task
        assert task is not None
        await first.unsubscribe(channel)
        changes = Changes(second, channel)
        alive = bench.work / "still-watched.txt"
        alive.write_text("x")
        await changes.seen(alive, "added")  # one subscriber left: still watching
        assert not task.done()

        await second.unsubscribe(channel)
        await until(lambda: channel not in bench.watches.watches)
        await until(task.done)
        assert channel not in bench.running.host.workspace_channels
        assert not bench.running.host.hub.subscribers(channel)
        with pytest.raises(RemoteError) as gone:
            await second.subscribe(channel)
        assert gone.value.code == -32008
        seen_before = len(changes.items)
        (bench.work / "after.txt").write_text("y")
        await asyncio.sleep(0.4)
        assert len(changes.items) == seen_before


async def test_closing_the_connection_releases_its_watches(bench: Bench) -> None:
    url = bench.running.url
    async with AhpClient.connect(url) as client:
        await session_in(client, bench.work)
        never_subscribed = await watch(client, bench.work)
        subscribed = await watch(client, bench.work, recursive=True)
        await client.subscribe(subscribed)
        tasks = [bench.watches.watches[c].task for c in (never_subscribed, subscribed)]
        assert len(bench.watches.watches) == 2
    await until(lambda: not bench.watches.watches)
    await until(lambda: all(t is not None and t.done() for t in tasks))
    assert never_subscribed not in bench.running.host.workspace_channels


async def test_disposing_the_session_ends_watches_inside_its_directory(bench: Bench) -> None:
    other = bench.outside
    async with AhpClient.connect(bench.running.url) as client:
        session = await session_in(client, bench.work)
        await session_in(client, other)
        inside = await watch(client, bench.work)
        elsewhere = await watch(client, other)
        await client.subscribe(inside)
        await client.subscribe(elsewhere)
        await client.dispose_session(session)
        await until(lambda: inside not in bench.watches.watches)
        assert elsewhere in bench.watches.watches


async def test_watches_per_connection_and_per_host_are_bounded(tmp_path: Path) -> None:
    bench = await open_bench(tmp_path, max_watches_per_connection=2, max_watches=3)
    try:
        url = bench.running.url
        async with AhpClient.connect(url) as one, AhpClient.connect(url) as two:
            await session_in(one, bench.work)
            first = await watch(one, bench.work)
            await watch(one, bench.work)
            assert await refused(one, uri=bench.work.as_uri()) == -32602
            await watch(two, bench.work)
            assert await refused(two, uri=bench.work.as_uri()) == -32602  # the host's limit
            await one.subscribe(first)
            await one.unsubscribe(first)  # released: room again
            await until(lambda: first not in bench.watches.watches)
            await watch(one, bench.work)
    finally:
        await bench.running.stop()


async def test_a_watched_directory_swapped_for_a_link_never_reports_what_is_outside(
    bench: Bench,
) -> None:
    """The watch holds the directory (a descriptor, watched through /proc/self/fd): after it is
    swapped for a link to ``outside``, a directory made in it is watched where it really is,
    never through the link — nothing that happens outside is ever reported."""
    watched = bench.work / "watched"
    watched.mkdir()
    (bench.outside / "shared").mkdir()
    async with AhpClient.connect(bench.running.url) as client:
        await session_in(client, bench.work)
        channel = await watch(client, watched, recursive=True)
        changes = Changes(client, channel)
        await client.subscribe(channel)
        moved = bench.work / "moved"
        watched.rename(moved)
        watched.symlink_to(bench.outside, target_is_directory=True)  # the swap
        # A directory named like one outside: watching it by path would lead out.
        (moved / "shared").mkdir()
        await changes.seen(watched / "shared", "added")
        (bench.outside / "shared" / "secret.txt").write_text("outside")
        (bench.outside / "secret.txt").write_text("outside")
        (moved / "shared" / "marker.txt").write_text("inside")
        await changes.seen(watched / "shared" / "marker.txt", "added")  # all before it came too
        reported = {uri for uri, _ in changes.items}
        assert (watched / "shared" / "secret.txt").as_uri() not in reported
        assert (watched / "secret.txt").as_uri() not in reported


# -- floods ----------------------------------------------------------------------------------


def create_files(directory: Path, count: int) -> None:
    for i in range(count):
        (directory / f"f{i:05}.txt").touch()


async def test_a_flood_of_5000_files_comes_in_bounded_batches(bench: Bench) -> None:
    limit = bench.running.host.settings.watch_batch_items
    flood = bench.work / "flood"
    flood.mkdir()
    async with AhpClient.connect(bench.running.url) as client:
        await session_in(client, bench.work)
        channel = await watch(client, bench.work, recursive=True)
        await client.subscribe(channel)
        changes = Changes(client, channel)
        await asyncio.to_thread(create_files, flood, 5000)
        wanted = {(flood / f"f{i:05}.txt").as_uri() for i in range(5000)}

        def complete(items: list[tuple[str, str]]) -> bool:
            return wanted <= {uri for uri, kind in items if kind == "added"}

        await changes.wait(complete)
        assert all(len(batch) <= limit for batch in changes.batches)
        assert len(changes.batches) >= 5000 // limit
        await client.ping(timeout=TIMEOUT)  # the host is fine
        again = bench.work / "after-the-flood.txt"
        again.write_text("x")
        await changes.seen(again, "added")


async def test_a_flood_beyond_the_window_becomes_one_rescan(tmp_path: Path) -> None:
    bench = await open_bench(tmp_path, watch_window_items=100, watch_debounce_ms=2000)
    try:
        async with AhpClient.connect(bench.running.url) as client:
            await session_in(client, bench.work)
            channel = await watch(client, bench.work, recursive=True)
            await client.subscribe(channel)
            changes = Changes(client, channel)
            await asyncio.to_thread(create_files, bench.work, 1000)
            await changes.wait(lambda items: (bench.work.as_uri(), "updated") in items)
            rescans = [b for b in changes.batches if b == [(bench.work.as_uri(), "updated")]]
            assert rescans
            assert all(len(batch) <= 100 for batch in changes.batches)
    finally:
        await bench.running.stop()


async def test_the_host_stops_with_watches_running(tmp_path: Path) -> None:
    bench = await open_bench(tmp_path)
    client = await AhpClient.connect(bench.running.url)
    try:
        await session_in(client, bench.work)
        channel = await watch(client, bench.work, recursive=True)
        await client.subscribe(channel)
        task = bench.watches.watches[channel].task
    finally:
        await bench.running.stop()
        await client.close()
    assert task is not None
    assert task.done()
    assert bench.watches.watches == {}


# -- the store -------------------------------------------------------------------------------


def stored(database: Path, channel: str) -> tuple[int, int]:
    """(channel rows, log segments) the database holds for ``channel``."""
    with contextlib.closing(sqlite3.connect(database)) as conn:
        rows = conn.execute("SELECT count(*) FROM channels WHERE uri = ?", (channel,)).fetchone()
        log = conn.execute("SELECT count(*) FROM log WHERE channel = ?", (channel,)).fetchone()
    return int(rows[0]), int(log[0])


async def test_nothing_of_a_watch_stays_in_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    database = data / DB_FILE
    # What a crash leaves: the row of a watch that was running.
    crashed = "ahp-resource-watch:/left-by-a-crash"
    store = SqliteStore(database)
    store.open()
    store.put_channel(crashed, "watch", None, "2026-01-01T00:00:00.000Z", None)
    await store.close()
    assert stored(database, crashed) == (1, 0)

    bench = await open_bench(tmp_path, data_dir=str(data))
    try:
        assert stored(database, crashed) == (0, 0)  # cleaned at start
        async with AhpClient.connect(bench.running.url) as client:
            await session_in(client, bench.work)
            channel = await watch(client, bench.work)
            await client.subscribe(channel)
            changes = Changes(client, channel)
            logged = bench.work / "logged.txt"
            logged.write_text("x")
            await changes.seen(logged, "added")
            await bench.running.host.store.flush()
            # (A read folds the log's tail into the log table this counts.)
            assert await bench.running.host.store.load(channel, retained_turns=0) is not None
            rows, segments = stored(database, channel)
            assert rows == 1
            assert segments >= 1
            await client.unsubscribe(channel)
            async with asyncio.timeout(TIMEOUT):
                while stored(database, channel) != (0, 0):
                    await bench.running.host.store.flush()
                    await asyncio.sleep(0.02)
    finally:
        await bench.running.stop()

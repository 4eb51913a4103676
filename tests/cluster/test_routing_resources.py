"""File requests in sharded mode go to a node that serves their paths (transport/routing.py).

Sharded nodes in this process (``ShardedNode``) on the real PostgreSQL and the
cluster tests' authenticated ``nats-server``, each serving a root of its own (a
directory under the test's ``tmp_path``: one machine, so "node-a's disk" is the
directory only node-a declares); clients are :class:`AhpClient` over real
WebSockets. Every wait is bounded by ``TIMEOUT``. docs/scale-out.md
"Resources".
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from msgspec import UnsetType

from ahp_server.client import AhpClient
from ahp_server.cluster.sharded import ShardedNode
from ahp_server.config import UserConfig
from ahp_server.protocol.errors import ProtocolError
from ahp_server.protocol.types import ActionEnvelope, ResourceWatchChangedAction, RootState
from ahp_server.store.ownership import Node
from ahp_server.transport.node_heartbeat import Beat
from ahp_server.transport.resource_routes import request_paths, serving_node
from ahp_server.workspace.paths import file_uri
from tests.cluster.helpers import PrivateNats, new_cluster_name
from tests.cluster.test_routing import ALICE, BOB
from tests.cluster.test_sharded import owners, settings
from tests.e2e.test_roots import call, refused
from tests.postgres import query, until

TIMEOUT = 30.0


@contextlib.asynccontextmanager
async def _nodes(
    url: str, nats_bus: PrivateNats, tmp_path: Path, **changes: Any
) -> AsyncIterator[tuple[ShardedNode, ShardedNode, dict[str, Path]]]:
    """A cluster of its own: node-a serving ``tmp_path/a`` only, node-b ``tmp_path/b`` only
    (each with a ``project`` directory), and the roots by name; both aborted at the end."""
    name = new_cluster_name()
    roots = {n: tmp_path / n for n in ("a", "b")}
    for root in roots.values():
        (root / "project").mkdir(parents=True)
    nodes: list[ShardedNode] = []
    try:
        for node_name, root in (("node-a", roots["a"]), ("node-b", roots["b"])):
            configured = replace(
                settings(url, nats_bus, name, node_name),
                workspace_roots=(str(root),),
                **changes,
            )
            nodes.append(ShardedNode(configured))
            await nodes[-1].start()
        yield nodes[0], nodes[1], roots
    finally:
        for node in nodes:
            await node.abort()


@dataclass
class _Project:
    """Two nodes (:func:`_nodes`), a client of node-b, and a session in ``a/project`` made
    through a client of node-a (so owned by node-a, which alone serves ``a/``)."""

    a: ShardedNode
    b: ShardedNode
    roots: dict[str, Path]
    on_b: AhpClient
    session: str

    @property
    def project(self) -> Path:
        return self.roots["a"] / "project"


@contextlib.asynccontextmanager
async def _project_on_a(
    url: str, nats_bus: PrivateNats, tmp_path: Path, **changes: Any
) -> AsyncIterator[_Project]:
    async with (
        _nodes(url, nats_bus, tmp_path, **changes) as (a, b, roots),
        AhpClient.connect(a.urls[0]) as on_a,
        AhpClient.connect(b.urls[0]) as on_b,
    ):
        directory = file_uri(roots["a"] / "project")
        session = await on_a.create_session("echo", [directory], timeout=TIMEOUT)
        yield _Project(a, b, roots, on_b, session)


def _names(listed: Any) -> list[str]:
    return [entry["name"] for entry in listed["entries"]]


async def test_a_client_of_one_node_uses_the_files_only_another_node_serves(
    url: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """A client of node-b reads, lists, writes, copies, moves, resolves and deletes files
    in a session's directory that only node-a serves: each request is answered by
    node-a (forwarded), what it writes is in node-a's root; node-a's configured root is
    listed too (a folder picker), and a path in node-b's own root is answered by node-b
    with no hop. A copy from node-b's root into node-a's is refused, naming both."""
    async with _project_on_a(url, nats_bus, tmp_path) as made:
        b, roots, on_b, project, session = made.b, made.roots, made.on_b, made.project, made.session
        assert (await owners(url))[session] == ("node-a", 1)
        (project / "notes.txt").write_text("on node-a's disk\n")
        assert b.routes is not None
        before = b.routes.forwarded

        read = await call(on_b, "resourceRead", uri=file_uri(project / "notes.txt"))
        assert read["data"] == "on node-a's disk\n"
        assert _names(await call(on_b, "resourceList", uri=file_uri(project))) == ["notes.txt"]
        await call(
            on_b,
            "resourceWrite",
            uri=file_uri(project / "new.txt"),
            data="written through node-b",
            encoding="utf-8",
        )
        assert (project / "new.txt").read_text() == "written through node-b"
        await call(on_b, "resourceMkdir", uri=file_uri(project / "sub"))
        await call(
            on_b,
            "resourceCopy",
            source=file_uri(project / "new.txt"),
            destination=file_uri(project / "sub" / "copy.txt"),
        )
        await call(
            on_b,
            "resourceMove",
            source=file_uri(project / "notes.txt"),
            destination=file_uri(project / "sub" / "moved.txt"),
        )
        assert (project / "sub" / "copy.txt").read_text() == "written through node-b"
        assert (project / "sub" / "moved.txt").read_text() == "on node-a's disk\n"
        resolved = await call(on_b, "resourceResolve", uri=file_uri(project / "sub"))
        assert resolved["type"] == "directory"
        await call(on_b, "resourceDelete", uri=file_uri(project / "new.txt"))
        assert not (project / "new.txt").exists()
        await call(on_b, "resourceRequest", uri=file_uri(project / "sub"), read=True)
        # node-a's configured root (no session there): what a folder picker lists.
        assert _names(await call(on_b, "resourceList", uri=file_uri(roots["a"]))) == ["project"]
        assert b.routes.forwarded - before == 10  # every one answered by node-a

        # A path in node-b's own root: node-b answers it, no hop.
        mine = roots["b"] / "project"
        await on_b.create_session("echo", [file_uri(mine)], timeout=TIMEOUT)
        (mine / "here.txt").write_text("on node-b's disk")
        forwarded = b.routes.forwarded
        read = await call(on_b, "resourceRead", uri=file_uri(mine / "here.txt"))
        assert read["data"] == "on node-b's disk"
        assert b.routes.forwarded == forwarded
        # A copy between the two nodes' roots: refused, naming both nodes.
        across = await refused(
            on_b,
            "resourceCopy",
            source=file_uri(mine / "here.txt"),
            destination=file_uri(project / "here.txt"),
        )
        assert across.code == -32603
        assert "node-a" in across.message
        assert "node-b" in across.message
        assert not (project / "here.txt").exists()
        assert not on_b.closed


async def _lapsed(url: str, node: str) -> bool:
    rows = await query(url, "SELECT expires_at <= now() FROM cluster_nodes WHERE node = $1", node)
    return bool(rows[0][0])


async def test_a_path_no_live_node_serves_is_refused_naming_it_and_the_client_stays(
    url: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """node-a, the only node serving a/, stops: node-b's client asking for a file there is
    refused with -32603 naming the directory and node-a, not closed, and its next
    request is answered; a path in no node's root is refused as on one host (-32009)."""
    async with _project_on_a(url, nats_bus, tmp_path) as made:
        a, b, roots, on_b, project = made.a, made.b, made.roots, made.on_b, made.project
        (project / "notes.txt").write_text("on node-a's disk")
        await a.abort()  # no drain: its lease runs out
        async with asyncio.timeout(TIMEOUT):
            await until(lambda: _lapsed(url, "node-a"))
        for method in ("resourceRead", "resourceList"):
            gone = await refused(on_b, method, uri=file_uri(project / "notes.txt"))
            assert gone.code == -32603
            assert str(roots["a"]) in gone.message
            assert "node-a" in gone.message
        assert not on_b.closed
        nowhere = await refused(on_b, "resourceRead", uri=file_uri(tmp_path / "elsewhere"))
        assert nowhere.code == -32009
        mine = roots["b"] / "project"
        await on_b.create_session("echo", [file_uri(mine)], timeout=TIMEOUT)
        assert _names(await call(on_b, "resourceList", uri=file_uri(mine))) == []
        assert b.routes is not None
        assert b.routes.failed == 0


async def test_the_serving_node_decides_who_may_touch_a_file_reached_through_another_node(
    url: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """Multi-user mode: alice's session is in b/, which only node-b serves. Through
    node-a, alice reads and writes its files (node-b answers for her); bob is refused
    both (-32009, node-b's decision with his identity), and nothing of his is written."""
    users = (UserConfig("alice", ALICE), UserConfig("bob", BOB))
    async with (
        _nodes(url, nats_bus, tmp_path, users=users) as (a, b, roots),
        AhpClient.connect(b.urls[0], token=ALICE) as alice_b,
        AhpClient.connect(a.urls[0], token=ALICE) as alice_a,
        AhpClient.connect(a.urls[0], token=BOB) as bob_a,
    ):
        project = roots["b"] / "project"
        await alice_b.create_session("echo", [file_uri(project)], timeout=TIMEOUT)
        (project / "secret.txt").write_text("alice's")
        uri = file_uri(project / "secret.txt")
        assert (await call(alice_a, "resourceRead", uri=uri))["data"] == "alice's"
        await call(alice_a, "resourceWrite", uri=uri, data="alice's, edited", encoding="utf-8")
        assert (project / "secret.txt").read_text() == "alice's, edited"
        assert (await refused(bob_a, "resourceRead", uri=uri)).code == -32009
        written = await refused(
            bob_a, "resourceWrite", uri=file_uri(project / "bob.txt"), data="x", encoding="utf-8"
        )
        assert written.code == -32009
        assert not (project / "bob.txt").exists()
        assert not bob_a.closed
        assert a.routes is not None
        assert a.routes.forwarded >= 4  # alice's two and bob's two, all node-b's answers


class _Changes:
    """The ``resourceWatch/changed`` items a client receives on one channel."""

    def __init__(self, client: AhpClient, channel: str) -> None:
        self.items: list[tuple[str, str]] = []
        self._channel = channel
        client.on_envelope(self._on_envelope)

    def _on_envelope(self, envelope: ActionEnvelope) -> None:
        action = envelope.action
        if envelope.channel == self._channel and isinstance(action, ResourceWatchChangedAction):
            self.items.extend((c.uri, c.type) for c in action.changes.items)


async def _until(predicate: Callable[[], bool]) -> None:
    """Wait (bounded) for what no envelope announces (a node's internals)."""
    async with asyncio.timeout(TIMEOUT):
        while not predicate():  # noqa: ASYNC110 - host internals: nothing to await
            await asyncio.sleep(0.02)


async def test_a_client_of_one_node_watches_a_directory_another_node_serves(
    url: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """A client of node-b watches a directory only node-a serves: the watch is made and
    runs on node-a, node-b's client subscribes to it through node-b, a file made on
    node-a's disk reaches it as ``resourceWatch/changed`` on node-b's feed, and its
    unsubscribe (forwarded) ends the watch on node-a."""
    async with _project_on_a(url, nats_bus, tmp_path, watch_debounce_ms=100) as made:
        a, b, on_b, project = made.a, made.b, made.on_b, made.project
        created = await call(on_b, "createResourceWatch", uri=file_uri(project))
        watch = created["channel"]
        assert watch in a.host.workspace_channels
        assert watch not in b.host.workspace_channels
        await on_b.subscribe(watch, timeout=TIMEOUT)
        changes = _Changes(on_b, watch)
        (project / "seen.txt").write_text("x")
        expected = (file_uri(project / "seen.txt"), "added")
        await on_b.wait_for(lambda _: expected in changes.items, timeout=TIMEOUT)
        await on_b.unsubscribe(watch, timeout=TIMEOUT)
        await _until(lambda: watch not in a.host.workspace_channels)
        assert not on_b.closed


async def test_a_large_file_read_through_another_node_arrives_whole(
    url: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """A read whose answer is larger than one client message (``max_message_bytes``) but
    within the read cap comes back over the route whole; the client is not closed."""
    async with _project_on_a(url, nats_bus, tmp_path) as made:
        on_b, project = made.on_b, made.project
        content = bytes(range(256)) * (5 * 1024 * 1024 // 256)  # 5 MiB: ~6.7 MiB of base64
        (project / "large.bin").write_bytes(content)
        read = await call(on_b, "resourceRead", uri=file_uri(project / "large.bin"))
        assert base64.b64decode(read["data"]) == content
        assert not on_b.closed


# -- which node (transport/resource_routes.py, pure) --------------------------------------


def test_the_node_serving_a_path_is_chosen_by_the_roots_it_declared() -> None:
    """Here when this node serves every path; else the first live node by name serving them
    all; a path in no root: here (refused as on one host); only silent nodes serving it, or
    two paths no node serves both: -32603 naming them."""
    nodes = [
        (Node("node-c", roots=("/srv/a", "/srv/shared")), True),
        (Node("node-b", roots=("/srv/a", "/srv/shared")), True),
        (Node("node-d", roots=("/srv/d",)), False),
        (Node("node-me", roots=("/srv/me", "/srv/shared")), True),
    ]
    mine = ("/srv/me", "/srv/shared")

    def pick(*paths: str, alive: Callable[[str], bool] = lambda _: True) -> str | None:
        return serving_node("resourceCopy", paths, "node-me", mine, nodes, alive)

    assert pick("/srv/me/x") is None
    assert pick("/srv/shared/x", "/srv/me/y") is None
    assert pick("/srv/a/x") == "node-b"
    assert pick("/srv/a/x", alive=lambda node: node != "node-b") == "node-c"
    assert pick("/srv/shared/x", "/srv/a/y") == "node-b"  # serves both
    assert pick("/srv/ab/x") is None  # a name that merely starts like a root
    assert pick("/etc/passwd", "/srv/a/y") is None
    with pytest.raises(ProtocolError) as silent:
        pick("/srv/d/x")
    assert silent.value.code == -32603
    assert "/srv/d" in silent.value.message
    assert "node-d" in silent.value.message
    with pytest.raises(ProtocolError) as across:
        pick("/srv/me/x", "/srv/a/y")
    assert "node-me" in across.value.message
    assert "node-b" in across.value.message


def test_a_requests_paths_are_read_as_named_with_dots_folded() -> None:
    assert request_paths(b'{"channel":"ahp-root://","uri":"file:///srv/a/../b/x%20y"}') == [
        "/srv/b/x y"
    ]
    assert request_paths(b'{"source":"file:///srv/a/x","destination":"/srv/b/./y"}') == [
        "/srv/a/x",
        "/srv/b/y",
    ]
    assert request_paths(b'{"uri":"https://example.com/x"}') == []
    assert request_paths(b'{"uri":"relative/x"}') == []
    assert request_paths(b"not json") == []


async def test_a_client_of_any_node_is_offered_every_live_nodes_roots(
    url: str, nats_bus: PrivateNats, tmp_path: Path
) -> None:
    """The root state's ``workspaceRoots`` (the page's folder suggestions and Browse…) as a
    client of node-b sees it: node-b's root, then node-a's, which node-b heard in node-a's
    heartbeat; a folder of node-a's root, chosen there, makes a session node-a owns. Once
    node-a's beat says it leaves, a new subscriber is offered node-b's root only."""
    async with _nodes(url, nats_bus, tmp_path) as (a, b, roots):
        beat = b.heartbeat
        assert beat is not None

        async def hears_a() -> bool:
            return "node-a" in beat.live_peers(60.0)

        async with asyncio.timeout(TIMEOUT):
            await until(hears_a)
        async with AhpClient.connect(b.urls[0], subscriptions=["ahp-root://"]) as on_b:
            offered = _offered(on_b)
            assert offered == [file_uri(roots["b"]), file_uri(roots["a"])]
            directory = file_uri(roots["a"] / "project")
            assert directory.startswith(offered[1])
            session = await on_b.create_session("echo", [directory], timeout=TIMEOUT)
            assert (await owners(url))[session] == ("node-a", 1)
        # A peer's roots are its word: a relative one (no file: URI) is left out, not fatal.
        beat.peers["node-x"] = (Beat(node="node-x", roots=("relative", "/srv/x")), time.monotonic())
        async with AhpClient.connect(b.urls[0], subscriptions=["ahp-root://"]) as on_x:
            assert _offered(on_x)[-1] == "file:///srv/x"
            assert len(_offered(on_x)) == 3
        del beat.peers["node-x"]
        await a.stop()

        async def a_left() -> bool:
            return not await hears_a()

        async with asyncio.timeout(TIMEOUT):
            await until(a_left)
        async with AhpClient.connect(b.urls[0], subscriptions=["ahp-root://"]) as again:
            assert _offered(again) == [file_uri(roots["b"])]


def _offered(client: AhpClient) -> list[str]:
    """The root state's ``workspaceRoots``, as ``client`` sees it."""
    config = client.view("ahp-root://", RootState).config
    assert not isinstance(config, UnsetType)
    return list(config.values["workspaceRoots"])

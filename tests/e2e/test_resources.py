"""The ``resource*`` commands over real sockets: round trips, every refusal, caps and the audit.

Each test runs a real host and a real client; the files are real files in
``tmp_path``. A session's working directory (``work``) is the only root;
``outside`` holds a secret no command may reach or change.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from ahp_server.client import AhpClient, RemoteError
from ahp_server.config import ConfigError, Settings, load_settings
from ahp_server.protocol.types import SessionState
from tests.conftest import RunningHost, captured_logs, start_host
from tests.e2e.helpers import TIMEOUT, Daemon

ROOT = "ahp-root://"
SECRET = "do not read me"

# WIRE-SUMMARY §8 / error-codes.md
INVALID_PARAMS = -32602
NOT_FOUND = -32008
PERMISSION_DENIED = -32009
ALREADY_EXISTS = -32010
CONFLICT = -32011


@dataclass
class Bench:
    running: RunningHost
    client: AhpClient
    work: Path
    outside: Path

    def uri(self, name: str = "") -> str:
        return (self.work / name).as_uri() if name else self.work.as_uri()

    async def call(self, method: str, **params: Any) -> Any:
        return await self.client.request(method, {"channel": ROOT, **params}, timeout=TIMEOUT)

    async def refused(self, method: str, **params: Any) -> RemoteError:
        with pytest.raises(RemoteError) as caught:
            await self.call(method, **params)
        return caught.value

    async def read_text(self, name: str) -> str:
        result = await self.call("resourceRead", uri=self.uri(name), encoding="utf-8")
        assert result["encoding"] == "utf-8"
        return str(result["data"])

    async def write(self, name: str, data: str, **params: Any) -> Any:
        return await self.call(
            "resourceWrite", uri=self.uri(name), data=data, encoding="utf-8", **params
        )

    async def alive(self) -> None:
        """The connection survived: a ping is answered, the roots still work."""
        assert await self.call("ping") is None
        assert (await self.call("resourceList", uri=self.uri()))["entries"] is not None

    def outside_untouched(self) -> None:
        assert (self.outside / "secret.txt").read_text() == SECRET


@contextlib.asynccontextmanager
async def open_bench(tmp_path: Path, settings: Settings | None = None) -> AsyncIterator[Bench]:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    # The configured root is the work folder itself: "outside" is outside it for every
    # command, resourceList included (which also reaches the configured roots).
    settings = settings or Settings()
    if settings.workspace_roots is None:
        settings = dataclasses.replace(settings, workspace_roots=(str(work),))
    running = await start_host(settings)
    try:
        async with AhpClient.connect(running.url) as client:
            await client.create_session(working_directories=[work.as_uri()])
            yield Bench(running, client, work, outside)
    finally:
        await running.stop()


@pytest.fixture
async def bench(tmp_path: Path) -> AsyncIterator[Bench]:
    async with open_bench(tmp_path) as opened:
        yield opened


# -- round trips -------------------------------------------------------------------------------


async def test_write_read_resolve_list_round_trip(bench: Bench) -> None:
    assert await bench.write("notes.md", "# héllo\n") == {}
    assert (bench.work / "notes.md").read_text() == "# héllo\n"
    read = await bench.call("resourceRead", uri=bench.uri("notes.md"))
    assert read == {"data": "# héllo\n", "encoding": "utf-8", "contentType": "text/markdown"}
    resolved = await bench.call("resourceResolve", uri=bench.uri("notes.md"))
    assert resolved["uri"] == bench.uri("notes.md")
    assert resolved["type"] == "file"
    assert resolved["size"] == len("# héllo\n".encode())
    assert resolved["mtime"].endswith("Z")
    assert resolved["etag"]
    assert "ctime" not in resolved  # Linux keeps no creation time
    directory = await bench.call("resourceResolve", uri=bench.uri())
    assert directory["type"] == "directory"
    (bench.work / "sub").mkdir()
    listed = await bench.call("resourceList", uri=bench.uri())
    assert listed == {
        "entries": [{"name": "notes.md", "type": "file"}, {"name": "sub", "type": "directory"}]
    }


async def test_mkdir_copy_move_delete_round_trip(bench: Bench) -> None:
    assert await bench.call("resourceMkdir", uri=bench.uri("a/b/c")) == {}  # mkdir -p
    assert (bench.work / "a" / "b" / "c").is_dir()
    assert await bench.call("resourceMkdir", uri=bench.uri("a/b")) == {}  # exists: success
    await bench.write("a/b/c/file.txt", "content")
    await bench.call(
        "resourceCopy", source=bench.uri("a/b/c/file.txt"), destination=bench.uri("copy.txt")
    )
    assert (bench.work / "copy.txt").read_text() == "content"
    await bench.call("resourceCopy", source=bench.uri("a"), destination=bench.uri("tree"))
    assert (bench.work / "tree" / "b" / "c" / "file.txt").read_text() == "content"
    await bench.call(
        "resourceMove", source=bench.uri("copy.txt"), destination=bench.uri("moved.txt")
    )
    assert not (bench.work / "copy.txt").exists()
    assert (bench.work / "moved.txt").read_text() == "content"
    await bench.call("resourceMove", source=bench.uri("tree"), destination=bench.uri("a/tree"))
    assert (bench.work / "a" / "tree" / "b" / "c" / "file.txt").exists()
    await bench.call("resourceDelete", uri=bench.uri("moved.txt"))
    assert not (bench.work / "moved.txt").exists()
    gone = await bench.refused("resourceResolve", uri=bench.uri("moved.txt"))
    assert gone.code == NOT_FOUND  # common.md: resolve of a missing resource is NotFound
    missing = await bench.refused("resourceDelete", uri=bench.uri("moved.txt"))
    assert missing.code == NOT_FOUND
    full = await bench.refused("resourceDelete", uri=bench.uri("a"))
    assert full.code == INVALID_PARAMS  # non-empty directory without recursive
    assert "recursive" in full.message
    assert (bench.work / "a").is_dir()
    await bench.call("resourceDelete", uri=bench.uri("a"), recursive=True)
    assert not (bench.work / "a").exists()
    (bench.work / "empty").mkdir()
    await bench.call("resourceDelete", uri=bench.uri("empty"))
    assert not (bench.work / "empty").exists()
    assert [e["name"] for e in (await bench.call("resourceList", uri=bench.uri()))["entries"]] == []


async def test_copy_and_move_overwrite_unless_fail_if_exists(bench: Bench) -> None:
    await bench.write("one.txt", "one")
    await bench.write("two.txt", "two")
    exists = await bench.refused(
        "resourceCopy",
        source=bench.uri("one.txt"),
        destination=bench.uri("two.txt"),
        failIfExists=True,
    )
    assert exists.code == ALREADY_EXISTS
    exists = await bench.refused(
        "resourceMove",
        source=bench.uri("one.txt"),
        destination=bench.uri("two.txt"),
        failIfExists=True,
    )
    assert exists.code == ALREADY_EXISTS
    assert (bench.work / "two.txt").read_text() == "two"
    await bench.call("resourceCopy", source=bench.uri("one.txt"), destination=bench.uri("two.txt"))
    assert (bench.work / "two.txt").read_text() == "one"
    await bench.write("two.txt", "two")
    await bench.call("resourceMove", source=bench.uri("two.txt"), destination=bench.uri("one.txt"))
    assert (bench.work / "one.txt").read_text() == "two"
    assert not (bench.work / "two.txt").exists()
    (bench.work / "dir").mkdir()
    into_itself = await bench.refused(
        "resourceCopy", source=bench.uri("dir"), destination=bench.uri("dir/inner")
    )
    assert into_itself.code == INVALID_PARAMS
    await bench.alive()


async def test_mkdir_over_a_file_is_already_exists(bench: Bench) -> None:
    await bench.write("file", "x")
    refused = await bench.refused("resourceMkdir", uri=bench.uri("file"))
    assert refused.code == ALREADY_EXISTS  # common.md resourceMkdir: MUST
    assert (bench.work / "file").read_text() == "x"


async def test_write_modes_truncate_append_insert(bench: Bench) -> None:
    await bench.write("f.txt", "0123456789")
    await bench.write("f.txt", "AB", mode="truncate", position=4)
    assert await bench.read_text("f.txt") == "0123AB"
    await bench.write("f.txt", "xy", mode="append")
    assert await bench.read_text("f.txt") == "0123ABxy"
    await bench.write("f.txt", "--", mode="append", position=2)  # 2 bytes back from EOF
    assert await bench.read_text("f.txt") == "0123AB--xy"
    await bench.write("f.txt", "<>", mode="insert", position=1)
    assert await bench.read_text("f.txt") == "0<>123AB--xy"
    await bench.write("f.txt", "!", mode="insert")  # position defaults to 0
    assert await bench.read_text("f.txt") == "!0<>123AB--xy"
    await bench.write("f.txt", "new")  # truncate at 0: a full overwrite
    assert await bench.read_text("f.txt") == "new"
    await bench.write("fresh.txt", "made", mode="append")  # any mode creates a missing file
    assert await bench.read_text("fresh.txt") == "made"
    for mode in ("truncate", "append", "insert"):
        past = await bench.refused(
            "resourceWrite",
            uri=bench.uri("f.txt"),
            data="z",
            encoding="utf-8",
            mode=mode,
            position=4,
        )
        assert past.code == INVALID_PARAMS, mode
        assert "past the end" in past.message
    assert await bench.read_text("f.txt") == "new"
    await bench.alive()


async def test_insert_moves_a_tail_larger_than_one_chunk(bench: Bench) -> None:
    tail = bytes(range(256)) * (5 * 1024)  # 1.25 MiB: the splice moves it in chunks
    (bench.work / "big.bin").write_bytes(b"head" + tail)
    await bench.write("big.bin", "MIDDLE", mode="insert", position=4)
    assert (bench.work / "big.bin").read_bytes() == b"headMIDDLE" + tail


async def test_write_into_a_missing_directory_is_not_found(bench: Bench) -> None:
    refused = await bench.refused(
        "resourceWrite", uri=bench.uri("no/such/dir/f.txt"), data="x", encoding="utf-8"
    )
    assert refused.code == NOT_FOUND
    assert "resourceMkdir" in refused.message
    assert not (bench.work / "no").exists()


async def test_create_only_refuses_an_existing_file(bench: Bench) -> None:
    assert await bench.write("new.txt", "first", createOnly=True) == {}
    refused = await bench.refused(
        "resourceWrite", uri=bench.uri("new.txt"), data="second", encoding="utf-8", createOnly=True
    )
    assert refused.code == ALREADY_EXISTS
    assert (bench.work / "new.txt").read_text() == "first"
    await bench.alive()


async def test_if_match_writes_only_over_the_version_resolved(bench: Bench) -> None:
    await bench.write("doc.txt", "v1")
    etag = (await bench.call("resourceResolve", uri=bench.uri("doc.txt")))["etag"]
    assert await bench.write("doc.txt", "v2", ifMatch=etag) == {}
    assert (bench.work / "doc.txt").read_text() == "v2"
    stale = await bench.refused(
        "resourceWrite", uri=bench.uri("doc.txt"), data="v3", encoding="utf-8", ifMatch=etag
    )
    assert stale.code == CONFLICT  # common.md ifMatch: MUST fail with Conflict
    assert (bench.work / "doc.txt").read_text() == "v2"
    fresh = (await bench.call("resourceResolve", uri=bench.uri("doc.txt")))["etag"]
    assert fresh != etag
    await bench.write("doc.txt", "v3", ifMatch=fresh)
    assert (bench.work / "doc.txt").read_text() == "v3"
    missing = await bench.refused(
        "resourceWrite", uri=bench.uri("nope.txt"), data="x", encoding="utf-8", ifMatch=fresh
    )
    assert missing.code == CONFLICT
    assert not (bench.work / "nope.txt").exists()
    await bench.alive()


async def test_binary_bytes_round_trip_as_base64(bench: Bench) -> None:
    payload = bytes(range(256)) * 4
    encoded = base64.b64encode(payload).decode()
    await bench.call(
        "resourceWrite",
        uri=bench.uri("blob.png"),
        data=encoded,
        encoding="base64",
        contentType="image/png",
    )
    assert (bench.work / "blob.png").read_bytes() == payload
    read = await bench.call("resourceRead", uri=bench.uri("blob.png"), encoding="base64")
    assert read == {"data": encoded, "encoding": "base64", "contentType": "image/png"}
    # Asked for utf-8, the bytes are not UTF-8: the spec's fallback is base64.
    fallback = await bench.call("resourceRead", uri=bench.uri("blob.png"), encoding="utf-8")
    assert fallback["encoding"] == "base64"
    assert base64.b64decode(fallback["data"]) == payload
    # Server's choice: utf-8 for text, base64 for the rest.
    assert (await bench.call("resourceRead", uri=bench.uri("blob.png")))["encoding"] == "base64"
    await bench.write("text.txt", "plain")
    as_base64 = await bench.call("resourceRead", uri=bench.uri("text.txt"), encoding="base64")
    assert base64.b64decode(as_base64["data"]) == b"plain"


async def test_invalid_base64_is_invalid_params(bench: Bench) -> None:
    for data in ("not base64!", "QUJD=", "QU JD"):
        refused = await bench.refused(
            "resourceWrite", uri=bench.uri("x.bin"), data=data, encoding="base64"
        )
        assert refused.code == INVALID_PARAMS, data
        assert "base64" in refused.message
    assert not (bench.work / "x.bin").exists()
    await bench.alive()


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("resourceRead", {"uri": 5}),
        ("resourceRead", {}),
        ("resourceRead", {"uri": "file:///x", "encoding": "latin-1"}),
        ("resourceWrite", {"uri": "file:///x", "data": "x"}),
        ("resourceWrite", {"uri": "file:///x", "data": "x", "encoding": "utf-16"}),
        ("resourceWrite", {"uri": "file:///x", "data": 1, "encoding": "utf-8"}),
        ("resourceWrite", {"uri": "file:///x", "data": "x", "encoding": "utf-8", "mode": "over"}),
        ("resourceWrite", {"uri": "file:///x", "data": "x", "encoding": "utf-8", "position": "1"}),
        ("resourceWrite", {"uri": "file:///x", "data": "x", "encoding": "utf-8", "position": -1}),
        ("resourceWrite", {"uri": "file:///x", "data": "x", "encoding": "utf-8", "position": 1.5}),
        ("resourceWrite", {"uri": "file:///x", "data": "x", "encoding": "utf-8", "createOnly": 1}),
        ("resourceDelete", {"uri": "file:///x", "recursive": "yes"}),
        ("resourceCopy", {"source": "file:///x"}),
        ("resourceMove", {"source": "file:///x", "destination": None}),
        ("resourceResolve", {"uri": "file:///x", "followSymlinks": "no"}),
        ("resourceList", {"uri": ["file:///x"]}),
        ("resourceMkdir", {"uri": {}}),
        ("resourceRequest", {"uri": "file:///x", "read": "yes"}),
    ],
    ids=lambda value: value if isinstance(value, str) else json.dumps(value)[:40],
)
async def test_wrong_params_are_invalid_params(
    bench: Bench, method: str, params: dict[str, Any]
) -> None:
    # Relative to the root, so a type error is the only thing wrong.
    fixed = {
        k: v.replace("file:///x", bench.uri("x")) if isinstance(v, str) else v
        for k, v in params.items()
    }
    refused = await bench.refused(method, **fixed)
    assert refused.code == INVALID_PARAMS
    await bench.alive()


async def test_a_channel_other_than_root_is_invalid_params(bench: Bench) -> None:
    with pytest.raises(RemoteError) as caught:
        await bench.client.request(
            "resourceRead", {"channel": "ahp-session:/x", "uri": bench.uri("a")}
        )
    assert caught.value.code == INVALID_PARAMS
    await bench.alive()


# -- confinement -------------------------------------------------------------------------------


def _escape_uri(bench: Bench, kind: str) -> str:
    work, outside = bench.work, bench.outside
    match kind:
        case "dot-dot":
            return work.as_uri() + "/../outside/secret.txt"
        case "absolute-outside":
            return (outside / "secret.txt").as_uri()
        case "symlink-outside":
            (work / "link.txt").symlink_to(outside / "secret.txt")
            return bench.uri("link.txt")
        case "symlinked-directory":
            (work / "out").symlink_to(outside, target_is_directory=True)
            return bench.uri("out/secret.txt")
        case "percent-encoded-dot-dot":
            return work.as_uri() + "/%2e%2E/outside/secret.txt"
        case "percent-encoded-slashes":
            return work.as_uri() + "%2F..%2Foutside%2Fsecret.txt"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "dot-dot",
        "absolute-outside",
        "symlink-outside",
        "symlinked-directory",
        "percent-encoded-dot-dot",
        "percent-encoded-slashes",
    ],
)
async def test_every_way_out_is_permission_denied(bench: Bench, kind: str) -> None:
    uri = _escape_uri(bench, kind)
    (bench.work / "inside.txt").write_text("inside")
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("resourceRead", {"uri": uri}),
        ("resourceResolve", {"uri": uri}),
        ("resourceWrite", {"uri": uri, "data": "overwritten", "encoding": "utf-8"}),
        ("resourceWrite", {"uri": uri, "data": "more", "encoding": "utf-8", "mode": "append"}),
        ("resourceCopy", {"source": uri, "destination": bench.uri("stolen.txt")}),
        ("resourceRequest", {"uri": uri, "read": True}),
    ]
    if kind != "symlink-outside":  # there the entry named is the link, inside the root
        attempts += [
            ("resourceCopy", {"source": bench.uri("inside.txt"), "destination": uri}),
            ("resourceMove", {"source": bench.uri("inside.txt"), "destination": uri}),
            ("resourceMove", {"source": uri, "destination": bench.uri("stolen.txt")}),
            ("resourceDelete", {"uri": uri}),
            ("resourceMkdir", {"uri": uri + "-dir"}),
        ]
    for method, params in attempts:
        refused = await bench.refused(method, **params)
        assert refused.code == PERMISSION_DENIED, (method, refused.message)
        assert SECRET not in refused.message
    bench.outside_untouched()
    assert not (bench.work / "stolen.txt").exists()
    assert sorted(p.name for p in bench.outside.iterdir()) == ["secret.txt"]
    await bench.alive()


async def test_a_link_leading_out_can_be_deleted_but_not_followed(bench: Bench) -> None:
    (bench.work / "link.txt").symlink_to(bench.outside / "secret.txt")
    (bench.work / "out").symlink_to(bench.outside, target_is_directory=True)
    listed = (await bench.call("resourceList", uri=bench.uri()))["entries"]
    # A link out is listed, but not as a directory one could browse.
    assert {"name": "out", "type": "file"} in listed
    denied = await bench.refused("resourceList", uri=bench.uri("out"))
    assert denied.code == PERMISSION_DENIED
    lstat = await bench.call("resourceResolve", uri=bench.uri("link.txt"), followSymlinks=False)
    assert lstat["type"] == "symlink"
    assert lstat["uri"] == bench.uri("link.txt")
    # Deleting the link removes the link, never its target.
    await bench.call("resourceDelete", uri=bench.uri("link.txt"))
    await bench.call("resourceDelete", uri=bench.uri("out"), recursive=True)
    assert not (bench.work / "link.txt").is_symlink()
    assert not (bench.work / "out").is_symlink()
    bench.outside_untouched()


async def test_copy_over_a_link_leading_out_replaces_the_link(bench: Bench) -> None:
    (bench.work / "src.txt").write_text("mine")
    (bench.work / "dest.txt").symlink_to(bench.outside / "secret.txt")
    await bench.call("resourceCopy", source=bench.uri("src.txt"), destination=bench.uri("dest.txt"))
    assert not (bench.work / "dest.txt").is_symlink()
    assert (bench.work / "dest.txt").read_text() == "mine"
    (bench.work / "dest2.txt").symlink_to(bench.outside / "secret.txt")
    await bench.call(
        "resourceMove", source=bench.uri("src.txt"), destination=bench.uri("dest2.txt")
    )
    assert (bench.work / "dest2.txt").read_text() == "mine"
    bench.outside_untouched()


async def test_a_copied_tree_keeps_links_as_links(bench: Bench) -> None:
    (bench.work / "tree").mkdir()
    (bench.work / "tree" / "leak").symlink_to(bench.outside / "secret.txt")
    await bench.call("resourceCopy", source=bench.uri("tree"), destination=bench.uri("copy"))
    copied = bench.work / "copy" / "leak"
    assert copied.is_symlink()  # the secret's bytes were not copied in
    refused = await bench.refused("resourceRead", uri=bench.uri("copy/leak"))
    assert refused.code == PERMISSION_DENIED


async def test_a_link_inside_that_stays_inside_is_followed(bench: Bench) -> None:
    (bench.work / "real.txt").write_text("real")
    (bench.work / "alias.txt").symlink_to(bench.work / "real.txt")
    assert await bench.read_text("alias.txt") == "real"
    resolved = await bench.call("resourceResolve", uri=bench.uri("alias.txt"))
    assert resolved["uri"] == (bench.work / "real.txt").resolve().as_uri()  # canonical
    assert resolved["type"] == "file"


async def test_a_working_directory_itself_cannot_be_deleted_or_moved(bench: Bench) -> None:
    (bench.work / "keep.txt").write_text("keep")
    deleted = await bench.refused("resourceDelete", uri=bench.uri(), recursive=True)
    assert deleted.code == PERMISSION_DENIED
    moved = await bench.refused("resourceMove", source=bench.uri(), destination=bench.uri("inside"))
    assert moved.code == PERMISSION_DENIED
    assert (bench.work / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("notes.txt", "not a file: URI"),
        ("file:notes.txt", "not an absolute file: URI"),
        ("https://example.com/notes.txt", "scheme 'https'"),
        ("ahp-session:/abc/content/1", "scheme 'ahp-session'"),
        ("file://evil.example/etc/passwd", "another host"),
        ("file:///tmp/a%00b", "NUL"),
        ("file:///tmp/a?x=1", "query or a fragment"),
    ],
    ids=["relative", "relative-file-uri", "https", "other-scheme", "remote-host", "nul", "query"],
)
async def test_a_uri_that_is_not_a_local_file_is_invalid_params(
    bench: Bench, uri: str, words: str
) -> None:
    for method, params in [
        ("resourceRead", {"uri": uri}),
        ("resourceWrite", {"uri": uri, "data": "x", "encoding": "utf-8"}),
        ("resourceDelete", {"uri": uri}),
        ("resourceRequest", {"uri": uri}),
    ]:
        refused = await bench.refused(method, **params)
        assert refused.code == INVALID_PARAMS, method
        assert words in refused.message
    await bench.alive()


async def test_localhost_and_short_file_uris_are_local_files(bench: Bench) -> None:
    (bench.work / "a b#c.txt").write_text("spaced")
    path = str(bench.work / "a b#c.txt")
    encoded = path.replace(" ", "%20").replace("#", "%23")
    for uri in (f"file://localhost{encoded}", f"file:{encoded}", f"file://LOCALHOST{encoded}"):
        result = await bench.call("resourceRead", uri=uri)
        assert result["data"] == "spaced", uri


async def test_a_device_is_never_opened(tmp_path: Path) -> None:
    async with open_bench(tmp_path) as bench:
        (bench.work / "zero").symlink_to("/dev/zero")
        via_link = await bench.refused("resourceRead", uri=bench.uri("zero"))
        assert via_link.code == PERMISSION_DENIED  # /dev is outside the root
        # /dev itself is never a working directory (docs/workspace.md "Roots").
        with pytest.raises(RemoteError) as caught:
            await bench.client.create_session(working_directories=["file:///dev"])
        assert caught.value.code == PERMISSION_DENIED
        assert "/dev" in caught.value.message
        # A device inside a root: refused on stat, before any open.
        (bench.work / "zero").unlink()
        os.mknod(bench.work / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # as /dev/zero
        os.mknod(bench.work / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # as /dev/null
        for method, params in [
            ("resourceRead", {"uri": bench.uri("zero")}),
            ("resourceWrite", {"uri": bench.uri("null"), "data": "x", "encoding": "utf-8"}),
            ("resourceResolve", {"uri": bench.uri("zero")}),
            ("resourceCopy", {"source": bench.uri("zero"), "destination": bench.uri("z")}),
        ]:
            refused = await bench.refused(method, **params)
            assert refused.code == PERMISSION_DENIED, method
            assert "not a regular file" in refused.message
        assert not (bench.work / "z").exists()
        await bench.alive()


async def test_a_fifo_is_never_opened(bench: Bench) -> None:
    os.mkfifo(bench.work / "pipe")
    (bench.work / "tree").mkdir()
    os.mkfifo(bench.work / "tree" / "pipe")
    # With nobody at the other end, opening the FIFO would block forever.
    async with asyncio.timeout(TIMEOUT):
        for method, params in [
            ("resourceRead", {"uri": bench.uri("pipe")}),
            ("resourceWrite", {"uri": bench.uri("pipe"), "data": "x", "encoding": "utf-8"}),
            (
                "resourceWrite",
                {"uri": bench.uri("pipe"), "data": "x", "encoding": "utf-8", "mode": "append"},
            ),
            ("resourceResolve", {"uri": bench.uri("pipe")}),
            ("resourceCopy", {"source": bench.uri("pipe"), "destination": bench.uri("p2")}),
            ("resourceCopy", {"source": bench.uri("tree"), "destination": bench.uri("t2")}),
        ]:
            refused = await bench.refused(method, **params)
            assert refused.code == PERMISSION_DENIED, method
        assert not (bench.work / "p2").exists()
        assert not (bench.work / "t2").exists()
        await bench.alive()


async def test_a_socket_is_never_opened(bench: Bench) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(bench.work / "sock"))
        refused = await bench.refused("resourceRead", uri=bench.uri("sock"))
        assert refused.code == PERMISSION_DENIED
        await bench.alive()


async def test_reading_a_directory_or_listing_a_file_is_invalid_params(bench: Bench) -> None:
    (bench.work / "f.txt").write_text("x")
    assert (await bench.refused("resourceRead", uri=bench.uri())).code == INVALID_PARAMS
    assert (await bench.refused("resourceList", uri=bench.uri("f.txt"))).code == INVALID_PARAMS
    assert (await bench.refused("resourceList", uri=bench.uri("none"))).code == NOT_FOUND
    assert (await bench.refused("resourceRead", uri=bench.uri("none"))).code == NOT_FOUND
    await bench.alive()


async def test_resource_request_grants_inside_and_denies_outside(bench: Bench) -> None:
    assert await bench.call("resourceRequest", uri=bench.uri("not/yet/there"), write=True) == {}
    assert await bench.call("resourceRequest", uri=bench.uri()) == {}
    denied = await bench.refused("resourceRequest", uri=bench.outside.as_uri(), read=True)
    assert denied.code == PERMISSION_DENIED
    await bench.alive()


async def test_without_a_working_directory_only_listing_a_root_is_served(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x")
    running = await start_host()
    try:
        async with AhpClient.connect(running.url) as client:
            uri = (tmp_path / "f.txt").as_uri()

            async def code(method: str, **params: Any) -> int:
                with pytest.raises(RemoteError) as caught:
                    await client.request(method, {"channel": ROOT, **params})
                return caught.value.code

            assert await code("resourceRead", uri=uri) == PERMISSION_DENIED  # no session
            await client.create_session()  # a session without working directories
            assert await code("resourceRead", uri=uri) == PERMISSION_DENIED
            assert await code("resourceRequest", uri=uri) == PERMISSION_DENIED
            # Listing alone reaches the configured roots (a folder picker's); not beyond them.
            assert (
                await client.request("resourceList", {"channel": ROOT, "uri": tmp_path.as_uri()})
            )["entries"] == [{"name": "f.txt", "type": "file"}]
            assert await code("resourceList", uri="file:///etc") == PERMISSION_DENIED
            assert (
                await code("resourceWrite", uri=uri, data="y", encoding="utf-8")
                == PERMISSION_DENIED
            )
            assert (tmp_path / "f.txt").read_text() == "x"
            # Then a session names the directory: it becomes reachable.
            await client.create_session(working_directories=[tmp_path.as_uri()])
            result = await client.request("resourceRead", {"channel": ROOT, "uri": uri})
            assert result["data"] == "x"
    finally:
        await running.stop()


async def test_roots_include_sessions_that_are_not_loaded(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "kept.txt").write_text("kept")
    settings = Settings(data_dir=str(tmp_path / "data"))
    running = await start_host(settings)
    try:
        async with AhpClient.connect(running.url) as client:
            session = await client.create_session(working_directories=[work.as_uri()])
            await client.subscribe(session)
            await client.wait_for(
                lambda c: c.confirmed(session, SessionState).lifecycle == "ready", timeout=TIMEOUT
            )
    finally:
        await running.stop()
    running = await start_host(settings)
    try:
        assert session not in running.host.sessions  # known from the catalogue only
        async with AhpClient.connect(running.url) as client:
            result = await client.request(
                "resourceRead", {"channel": ROOT, "uri": (work / "kept.txt").as_uri()}
            )
            assert result["data"] == "kept"
    finally:
        await running.stop()


async def test_requests_before_initialize_are_refused(bench: Bench) -> None:
    (bench.work / "f.txt").write_text("x")
    async with connect(bench.running.url) as ws:
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "resourceRead",
                    "params": {"channel": ROOT, "uri": bench.uri("f.txt")},
                }
            )
        )
        async with asyncio.timeout(TIMEOUT):
            reply = json.loads(await ws.recv())
        assert reply["error"]["code"] == -32600
        assert "result" not in reply


# -- caps ----------------------------------------------------------------------------------------


async def test_reads_over_the_cap_are_refused_and_at_the_cap_served(tmp_path: Path) -> None:
    async with open_bench(tmp_path, Settings(max_read_bytes=1000)) as bench:
        (bench.work / "at.txt").write_bytes(b"a" * 1000)
        (bench.work / "over.txt").write_bytes(b"a" * 1001)
        assert len(await bench.read_text("at.txt")) == 1000
        refused = await bench.refused("resourceRead", uri=bench.uri("over.txt"))
        assert refused.code == INVALID_PARAMS
        assert refused.data == {"size": 1001, "limit": 1000}
        assert "workspace.max_read_bytes" in refused.message
        await bench.alive()


async def test_text_that_json_would_blow_up_is_sent_as_base64(tmp_path: Path) -> None:
    # 1000 NULs are valid UTF-8, but JSON writes each as six characters.
    async with open_bench(tmp_path, Settings(max_read_bytes=1000)) as bench:
        (bench.work / "nul.txt").write_bytes(b"\x00" * 1000)
        result = await bench.call("resourceRead", uri=bench.uri("nul.txt"), encoding="utf-8")
        assert result["encoding"] == "base64"
        assert base64.b64decode(result["data"]) == b"\x00" * 1000


async def test_writes_over_the_cap_are_refused(tmp_path: Path) -> None:
    async with open_bench(tmp_path, Settings(max_write_bytes=1024)) as bench:
        assert await bench.write("at.txt", "a" * 1024) == {}
        over = await bench.refused(
            "resourceWrite", uri=bench.uri("over.txt"), data="a" * 1025, encoding="utf-8"
        )
        assert over.code == INVALID_PARAMS
        assert over.data == {"size": 1025, "limit": 1024}
        # Multi-byte characters count as bytes: 513 of them are 1026 bytes.
        wide = await bench.refused(
            "resourceWrite", uri=bench.uri("over.txt"), data="é" * 513, encoding="utf-8"
        )
        assert wide.code == INVALID_PARAMS
        over64 = await bench.refused(
            "resourceWrite",
            uri=bench.uri("over.txt"),
            data=base64.b64encode(b"b" * 1025).decode(),
            encoding="base64",
        )
        assert over64.code == INVALID_PARAMS
        assert "workspace.max_write_bytes" in over64.message
        assert not (bench.work / "over.txt").exists()
        await bench.alive()


def _peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _reset_peak_rss(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux ≥ 4.0)


MiB = 1024 * 1024


async def test_an_over_cap_read_never_loads_the_file(tmp_path: Path) -> None:
    """A sparse 64 MiB file is refused after a stat: the host's peak memory does not move.

    The control read of a 16 MiB file (under the cap) shows the measure sees a read.
    """
    work = tmp_path / "work"
    work.mkdir()
    for name, size in (("huge.bin", 64 * MiB), ("control.bin", 16 * MiB)):
        (work / name).touch()
        os.truncate(work / name, size)  # sparse: no disk used
    config = tmp_path / "ahp.toml"
    config.write_text(
        f"[workspace]\nmax_read_bytes = {24 * MiB}\n[limits]\noutbox_max_bytes = {128 * MiB}\n"
    )
    daemon = Daemon(tmp_path / "data", "--config", str(config))
    try:
        url = await daemon.start()
        assert daemon.process is not None
        pid = daemon.process.pid
        async with AhpClient.connect(url, max_frame_size=None) as client:
            await client.create_session(working_directories=[work.as_uri()])
            params = {"channel": ROOT, "uri": (work / "huge.bin").as_uri(), "encoding": "base64"}
            _reset_peak_rss(pid)
            before = _peak_rss(pid)
            with pytest.raises(RemoteError) as caught:
                await client.request("resourceRead", params, timeout=TIMEOUT)
            refused_growth = _peak_rss(pid) - before
            assert caught.value.code == INVALID_PARAMS
            assert caught.value.data == {"size": 64 * MiB, "limit": 24 * MiB}
            assert refused_growth < 8 * MiB, refused_growth

            _reset_peak_rss(pid)
            before = _peak_rss(pid)
            params["uri"] = (work / "control.bin").as_uri()
            result = await client.request("resourceRead", params, timeout=30)
            control_growth = _peak_rss(pid) - before
            assert len(result["data"]) == 4 * ((16 * MiB + 2) // 3)
            assert control_growth > 16 * MiB, control_growth
    finally:
        await daemon.close()


# -- survival and audit --------------------------------------------------------------------------


async def test_errors_leave_the_connection_and_other_chats_working(bench: Bench) -> None:
    async with AhpClient.connect(bench.running.url) as other:
        chat = await other.open_chat()
        for method, params in [
            ("resourceRead", {"uri": "file:///etc/shadow"}),
            ("resourceRead", {"uri": 17}),
            ("resourceWrite", {"uri": bench.uri("x"), "data": "@@", "encoding": "base64"}),
            ("resourceDelete", {"uri": bench.uri("missing")}),
            ("resourceMkdir", {"uri": "ftp://x/y"}),
        ]:
            await bench.refused(method, **params)
        await bench.alive()
        assert await other.ask(chat, "still here", timeout=TIMEOUT) == "still here"
        assert await bench.client.request("ping", {"channel": ROOT}) is None


async def test_every_change_is_audited_without_its_content(bench: Bench) -> None:
    content = "TOP-SECRET-CONTENT-" + "x" * 50
    with captured_logs() as logs:
        await bench.write("audit.txt", content)
        await bench.call(
            "resourceWrite",
            uri=bench.uri("audit.bin"),
            data=base64.b64encode(content.encode()).decode(),
            encoding="base64",
        )
        await bench.call("resourceMkdir", uri=bench.uri("d"))
        await bench.call(
            "resourceCopy", source=bench.uri("audit.txt"), destination=bench.uri("d/c")
        )
        await bench.call("resourceMove", source=bench.uri("d/c"), destination=bench.uri("d/m"))
        await bench.call("resourceDelete", uri=bench.uri("d"), recursive=True)
        await bench.refused("resourceRead", uri=(bench.outside / "secret.txt").as_uri())
    events = {entry["event"]: entry for entry in logs}
    written = [e for e in logs if e["event"] == "resource written"]
    assert len(written) == 2
    first = written[0]
    assert first["path"] == str((bench.work / "audit.txt").resolve())
    assert first["bytes"] == len(content)
    assert first["client_id"] == bench.client.client_id
    assert isinstance(first["conn"], int)
    for event in ("directory created", "resource copied", "resource moved", "resource deleted"):
        assert events[event]["client_id"] == bench.client.client_id, event
        assert events[event]["path"].startswith(str(bench.work.resolve())), event
    denied = events["resource access denied"]
    assert denied["method"] == "resourceRead"
    encoded = base64.b64encode(content.encode()).decode()
    for entry in logs:
        text = repr(entry)
        assert "TOP-SECRET" not in text, entry
        assert encoded[:20] not in text, entry
        assert SECRET not in text


def test_settings_reject_a_read_cap_whose_answer_cannot_be_sent() -> None:
    # base64 of 30 MiB is 40 MiB: more than the default 32 MiB outbox.
    with pytest.raises(ConfigError) as caught:
        load_settings(None, environ={}, overrides={"workspace.max_read_bytes": 30 * MiB})
    assert caught.value.key == "workspace.max_read_bytes"
    raised = {"workspace.max_read_bytes": 30 * MiB, "limits.outbox_max_bytes": 64 * MiB}
    assert load_settings(None, environ={}, overrides=raised).max_read_bytes == 30 * MiB

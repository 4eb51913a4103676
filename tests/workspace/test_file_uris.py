"""``file:`` URIs to paths, working directories as roots, and entries whose last link is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from ahp_server.workspace.paths import (
    PathInvalid,
    PathOutside,
    confine,
    confine_entry,
    file_uri,
    file_uri_to_path,
    root_paths,
)


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("file:///tmp/a.txt", "/tmp/a.txt"),
        ("file://localhost/tmp/a.txt", "/tmp/a.txt"),
        ("file://LocalHost/tmp/a.txt", "/tmp/a.txt"),
        ("file:/tmp/a.txt", "/tmp/a.txt"),
        ("FILE:///tmp/a.txt", "/tmp/a.txt"),
        ("file:///tmp/a%20b%23c%3F.txt", "/tmp/a b#c?.txt"),
        ("file:///tmp/%C3%A9t%C3%A9", "/tmp/été"),
        ("file:///tmp/%2e%2e/etc", "/tmp/../etc"),  # decoded, judged later
        ("file:///tmp/a%2Fb", "/tmp/a/b"),
        ("file:///tmp/%FF", "/tmp/\udcff"),  # not UTF-8: the bytes the OS would see
    ],
)
def test_local_file_uris_become_paths(uri: str, path: str) -> None:
    assert file_uri_to_path(uri) == path


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("/tmp/a.txt", "no scheme"),
        ("a.txt", "no scheme"),
        ("http://x/tmp/a.txt", "scheme 'http'"),
        ("ahp-session:/x", "scheme 'ahp-session'"),
        (":/tmp", "no scheme"),
        ("file://server/share/a.txt", "another host"),
        ("file:a.txt", "not an absolute"),
        ("file://", "not an absolute"),
        ("file:///tmp/a%00b", "encoded NUL"),
        ("file:///tmp/a\x00b", "NUL"),
        ("file:///tmp/a?b", "query or a fragment"),
        ("file:///tmp/a#b", "query or a fragment"),
    ],
)
def test_anything_else_is_invalid(uri: str, words: str) -> None:
    with pytest.raises(PathInvalid, match=words):
        file_uri_to_path(uri)


def test_paths_round_trip_through_uris(tmp_path: Path) -> None:
    odd = tmp_path / "a b#c?%.txt"
    assert file_uri_to_path(file_uri(odd)) == str(odd)


def test_roots_are_uris_or_absolute_paths(tmp_path: Path) -> None:
    assert root_paths([tmp_path.as_uri(), "/srv", "relative", "https://x/y", ""]) == [
        str(tmp_path),
        "/srv",
    ]
    # The ACP bridge's confinement takes URIs as roots too.
    (tmp_path / "f.txt").write_text("x")
    assert confine(str(tmp_path / "f.txt"), [tmp_path.as_uri()]) == (tmp_path / "f.txt").resolve()


def test_an_entry_keeps_its_last_link(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "out").symlink_to(tmp_path, target_is_directory=True)
    assert confine_entry(f"{work}/out", [str(work)]) == work.resolve() / "out"
    assert confine_entry(f"{work}/out/", [str(work)]) == work.resolve() / "out"
    with pytest.raises(PathOutside, match="outside"):
        confine_entry(f"{work}/out/secret", [str(work)])  # a parent leads out
    with pytest.raises(PathOutside, match="working directory itself"):
        confine_entry(str(work), [str(work)])
    (work / "sub").mkdir()
    with pytest.raises(PathOutside, match="working directory itself"):
        confine_entry(f"{work}/sub/..", [str(work)])  # `..` names a directory: resolved
    with pytest.raises(PathOutside, match="outside"):
        confine_entry(f"{work}/out/..", [str(work)])  # the parent of where the link leads
    assert confine_entry(str(work), [str(work)], allow_root=True) == work.resolve()
    with pytest.raises(PathInvalid, match="not an absolute path"):
        confine_entry("out", [str(work)])

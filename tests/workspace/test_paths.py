"""Path confinement: every way out of the working directories is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ahp_server.workspace.paths import PathRefused, confine, confine_directory


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "file.txt").write_text("x")
    (tmp_path / "outside.txt").write_text("secret")
    return work, tmp_path


def test_a_file_inside_resolves(roots: tuple[Path, Path]) -> None:
    work, _ = roots
    assert (
        confine(f"{work}/sub/file.txt", [str(work)], must_exist=True)
        == (work / "sub" / "file.txt").resolve()
    )
    assert (
        confine(f"{work}/sub/../sub/new.txt", [str(work)]) == (work / "sub" / "new.txt").resolve()
    )


def test_a_link_inside_that_stays_inside_is_fine(roots: tuple[Path, Path]) -> None:
    work, _ = roots
    (work / "alias.txt").symlink_to(work / "sub" / "file.txt")
    assert confine(f"{work}/alias.txt", [str(work)]).name == "file.txt"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("{work}/../outside.txt", "outside the working directories"),
        ("{tmp}/outside.txt", "outside the working directories"),
        ("{work}/out/outside.txt", "outside the working directories"),
        ("{work}/leak.txt", "outside the working directories"),
        ("sub/file.txt", "not an absolute path"),
        ("", "empty"),
        ("{work}/sub\x00/file.txt", "NUL"),
        ("{work}/sub", "is a directory"),
        ("{work}/fifo", "not a regular file"),
        ("{work}/missing.txt", "does not exist"),
    ],
    ids=[
        "dot-dot",
        "absolute",
        "directory-link",
        "file-link",
        "relative",
        "empty",
        "nul",
        "directory",
        "fifo",
        "missing",
    ],
)
def test_every_way_out_is_refused(roots: tuple[Path, Path], path: str, words: str) -> None:
    work, tmp = roots
    (work / "out").symlink_to(tmp, target_is_directory=True)
    (work / "leak.txt").symlink_to(tmp / "outside.txt")
    os.mkfifo(work / "fifo")
    with pytest.raises(PathRefused, match=words):
        confine(path.format(work=work, tmp=tmp), [str(work)], must_exist=True)


def test_no_working_directory_means_no_file(roots: tuple[Path, Path]) -> None:
    work, _ = roots
    with pytest.raises(PathRefused, match="no working directory"):
        confine(f"{work}/sub/file.txt", [])


def test_several_roots_and_directories(roots: tuple[Path, Path]) -> None:
    work, tmp = roots
    other = tmp / "other"
    other.mkdir()
    assert confine_directory(str(other), [str(work), str(other)]) == other.resolve()
    with pytest.raises(PathRefused, match="outside"):
        confine_directory(str(tmp), [str(work), str(other)])
    with pytest.raises(PathRefused, match="not a directory"):
        confine_directory(f"{work}/sub/file.txt", [str(work)])

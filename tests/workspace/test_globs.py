"""The glob dialect of resource-watch filters (workspace/globs.py)."""

from __future__ import annotations

import pytest

from ahp_server.workspace.globs import PathFilter, compile_glob


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        # No "/": a segment at any depth, and everything beneath it.
        ("node_modules", "node_modules", True),
        ("node_modules", "a/node_modules/b/c.js", True),
        ("node_modules", "node_modules_old/x", False),
        ("*.log", "a.log", True),
        ("*.log", "deep/er/b.log", True),
        ("*.log", "a.log.txt", False),
        # A "/": anchored at the watched directory.
        ("src/gen", "src/gen/a.py", True),
        ("src/gen", "x/src/gen/a.py", False),
        ("/build", "build/out.o", True),
        ("/build", "x/build", False),
        ("./build", "build", True),
        ("build/", "x/build/y", True),
        # ** spans segments, none included; * and ? stay within one.
        ("docs/**/*.md", "docs/a.md", True),
        ("docs/**/*.md", "docs/x/y/a.md", True),
        ("docs/*.md", "docs/x/a.md", False),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        # Sets and alternatives.
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "c.txt", True),
        ("[!ab].txt", "a.txt", False),
        ("*.{ts,js}", "x/y.js", True),
        ("*.{ts,js}", "y.py", False),
        # Literal characters are literal.
        ("a+b(c)", "a+b(c)", True),
        ("a.b", "axb", False),
    ],
)
def test_patterns(pattern: str, path: str, matches: bool) -> None:
    compiled = compile_glob(pattern)
    assert compiled is not None
    assert bool(compiled.fullmatch(path)) is matches


def test_empty_patterns_are_ignored() -> None:
    assert compile_glob("") is None
    assert compile_glob("/") is None
    assert PathFilter(includes=[""], excludes=["./"]).everything


def test_excludes_win_over_includes() -> None:
    only_python = PathFilter(includes=["*.py"], excludes=["tests"])
    assert only_python.accepts("src/a.py")
    assert not only_python.accepts("src/a.txt")
    assert not only_python.accepts("tests/test_a.py")
    assert PathFilter().accepts("anything/at/all")

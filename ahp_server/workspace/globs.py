"""Glob patterns of resource watches (``createResourceWatch`` ``includes`` / ``excludes``).

Layer: workspace (pure: no I/O, no asyncio).

The spec says only "glob patterns or paths relative to ``uri``"
(``CreateResourceWatchParams``). What this host does — the glob dialect of
VS Code's file watcher, which is what clients send (docs/workspace.md,
"Resource watches"):

* a pattern is matched against the changed path *relative to the watched
  directory*, with ``/`` between segments; case matters;
* ``*`` matches any run of characters within one segment, ``?`` one character
  of a segment, ``**`` any number of whole segments (none included),
  ``[abc]`` / ``[a-z]`` / ``[!abc]`` one character of (or not of) a set, and
  ``{a,b}`` either alternative;
* a pattern without a ``/`` matches a segment at any depth: ``node_modules``
  is ``**/node_modules``, ``*.log`` is ``**/*.log``;
* a pattern with a ``/`` is anchored at the watched directory (a leading
  ``/`` or ``./`` is dropped, as is a trailing ``/``);
* a pattern that matches a directory matches everything beneath it:
  ``build`` excludes ``build/out/a.o``, and including ``src`` includes
  ``src/a/b.py``.

A change is reported when no exclude matches it and, if there are includes,
at least one include does: excludes win.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["PathFilter", "compile_glob"]


def _class(body: str) -> str:
    """A ``[…]`` body as a regular-expression class that never matches ``/``."""
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    escaped = "".join("\\" + c if c in "\\[]^" else c for c in body)
    return f"[^/{escaped}]" if negated else f"(?!/)[{escaped}]"


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):
            end = i + 2
            if end < n and pattern[end] == "/":
                out.append("(?:[^/]*/)*")  # any number of whole segments, none included
                i = end + 1
            else:
                out.append(".*")
                i = end
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (close := pattern.find("]", i + 2)) != -1:
            out.append(_class(pattern[i + 1 : close]))
            i = close
        elif c == "{" and (close := pattern.find("}", i + 1)) != -1:
            alternatives = pattern[i + 1 : close].split(",")
            out.append("(?:" + "|".join(_translate(a) for a in alternatives) + ")")
            i = close
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_glob(pattern: str) -> re.Pattern[str] | None:
    """The regular expression of one pattern (rules above), or ``None`` for an empty one."""
    anchored = pattern.startswith(("/", "./")) or "/" in pattern.strip("/")
    body = pattern.removeprefix("./").strip("/")
    if not body:
        return None
    prefix = "" if anchored else "(?:[^/]*/)*"
    # The path itself, or anything beneath what it names.
    return re.compile(f"{prefix}(?:{_translate(body)})(?:/.*)?", re.DOTALL)


class PathFilter:
    """Which relative paths a watch reports: ``includes`` (if any) minus ``excludes``."""

    def __init__(self, includes: Iterable[str] = (), excludes: Iterable[str] = ()) -> None:
        self._includes = [p for p in map(compile_glob, includes) if p is not None]
        self._excludes = [p for p in map(compile_glob, excludes) if p is not None]

    @property
    def everything(self) -> bool:
        """True when every path is reported (no pattern at all)."""
        return not self._includes and not self._excludes

    def accepts(self, relative: str) -> bool:
        """Whether a change of ``relative`` (``a/b.txt``, ``/``-separated) is reported."""
        if any(p.fullmatch(relative) for p in self._excludes):
            return False
        return not self._includes or any(p.fullmatch(relative) for p in self._includes)

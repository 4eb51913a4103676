"""Configured roots: the only places a session's working directories may be.

Layer: workspace (below agents and host; no asyncio). The host builds one
:class:`Roots` from the settings at start and asks it two questions: may this
user give a session this working directory (:meth:`Roots.check_directory`),
and which of the directories the sessions name still count as roots for file
access (:meth:`Roots.usable`). ``workspace/paths.py`` then confines every path
to those directories and refuses the :attr:`Roots.forbidden` places inside them.

The rule (docs/workspace.md, "Roots"):

* **Configured, never chosen by a client.** ``workspace.roots`` lists the
  allowed roots; in multi-user mode a user's ``roots`` (``[[users]]``) replace
  them for that user. A working directory must resolve (links followed) inside
  one of the roots of the session's user — ``createSession``,
  ``session/workingDirectorySet`` and ``createTerminal``'s ``cwd`` are checked
  against them, and a directory a session stored before (or that a smaller
  configuration no longer allows) stops counting as a root for file access.
* **The default** (no ``workspace.roots``): the home directory of the user the
  host runs as, when the host is single-user (no ``[[users]]``) and listens on
  loopback only; nothing otherwise — a host reachable from elsewhere, or
  shared by users, serves files only where its operator said.
* **Refused always**, inside any root: the host's data directory, its
  configuration file, the users' token files, ``/proc``, ``/sys`` and
  ``/dev`` (:data:`SYSTEM_FORBIDDEN`). A working directory may *contain* one of
  them (the home directory holds ``~/.local/share/ahp-server``); what lies in
  them is refused all the same.
* **A session without a working directory** gets a folder of its own:
  ``<first root>/ahp-sessions/<session id>`` (:meth:`Roots.session_folder`),
  which becomes its working directory (so it survives restarts). It is made
  by descriptor from the root (``mkdir`` with ``dir_fd=``, no link followed):
  an ``ahp-sessions`` that is a symbolic link is refused, so no folder is
  ever made outside the root. With no root, such a session cannot be created.

Refusals are :class:`~ahp_server.workspace.paths.PathOutside` with a message
that names the setting to change.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ahp_server.config import Settings, is_loopback
from ahp_server.workspace.paths import (
    DIRECTORY,
    SYSTEM_FORBIDDEN,
    PathInvalid,
    PathOutside,
    inside,
    open_confined,
    root_paths,
)

__all__ = ["SESSION_FOLDERS", "Roots"]

#: The folder (in a user's first root) that holds the folders of sessions
#: created without a working directory.
SESSION_FOLDERS = "ahp-sessions"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


@dataclass(frozen=True, slots=True)
class Roots:
    """The allowed roots (resolved) of each user, and the places refused inside them."""

    #: The roots of single-user mode, and of users with no ``roots`` of their own.
    default: tuple[str, ...]
    #: Multi-user mode: a user's own ``roots`` (``[[users]]``), replacing the default.
    per_user: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Resolved places refused inside every root (:data:`SYSTEM_FORBIDDEN` included).
    forbidden: tuple[str, ...] = SYSTEM_FORBIDDEN
    #: Multi-user mode: the setting of each user's own roots (``users[N].roots``), for messages.
    settings_keys: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> Roots:
        """The roots in effect for ``settings`` (see the module docstring)."""
        forbidden = [*SYSTEM_FORBIDDEN]
        if settings.data_dir is not None and settings.data_dir != ":memory:":
            forbidden.append(settings.data_dir)
        if settings.config_file is not None:
            forbidden.append(settings.config_file)
        forbidden.extend(user.token_file for user in settings.users if user.token_file)
        resolved_forbidden = tuple(dict.fromkeys(_real(path) for path in forbidden))
        if settings.workspace_roots is not None:
            default = settings.workspace_roots
        elif not settings.users and is_loopback(settings.host):
            default = (str(Path.home()),)
        else:
            default = ()
        per_user: dict[str, tuple[str, ...]] = {}
        keys: dict[str, str] = {}
        for index, user in enumerate(settings.users):
            keys[user.name] = f"users[{index}].roots"
            if user.roots is not None:
                per_user[user.name] = tuple(dict.fromkeys(_real(r) for r in user.roots))
        return cls(
            default=tuple(dict.fromkeys(_real(root) for root in default)),
            per_user=per_user,
            forbidden=resolved_forbidden,
            settings_keys=keys,
        )

    # -- which roots ----------------------------------------------------------------------------

    def allowed(self, user: str | None) -> tuple[str, ...]:
        """The roots ``user`` may use (``None``: single-user mode, or every user's for an admin
        or the host itself)."""
        if user is None:
            every = [*self.default, *(root for roots in self.per_user.values() for root in roots)]
            return tuple(dict.fromkeys(every))
        return self.per_user.get(user, self.default)

    def setting(self, user: str | None) -> str:
        """The setting that gives ``user`` their roots (for messages)."""
        key = self.settings_keys.get(user) if user is not None else None
        if key is None:
            return "workspace.roots"
        return key if user in self.per_user else f"workspace.roots, or {key} for this user"

    def forbidden_at(self, resolved: str) -> str | None:
        """The refused place ``resolved`` lies in, if any."""
        return next((place for place in self.forbidden if inside(resolved, place)), None)

    # -- the questions --------------------------------------------------------------------------

    def check_directory(self, directory: str, user: str | None) -> str:
        """``directory`` (a ``file:`` URI or an absolute path) resolved, if ``user`` may make it
        a working directory; else :class:`PathOutside` (or :class:`PathInvalid`) naming the
        setting."""
        paths = root_paths([directory])
        if not paths or not os.path.isabs(paths[0]):
            raise PathInvalid(f"{directory!r} is not an absolute path or a local file: URI")
        resolved = _real(paths[0])
        refused = self.forbidden_at(resolved)
        if refused is not None:
            raise PathOutside(
                f"{directory!r} is inside {refused}, which the host never serves "
                "(its data, configuration and token files, /proc, /sys, /dev)"
            )
        allowed = self.allowed(user)
        if not allowed:
            raise PathOutside(
                f"{directory!r} is refused: no workspace root is configured "
                f"(set {self.setting(user)})"
            )
        if not any(inside(resolved, root) for root in allowed):
            raise PathOutside(
                f"{directory!r} is outside the workspace roots ({', '.join(allowed)}); "
                f"the host's operator sets them in {self.setting(user)}"
            )
        return resolved

    def usable(self, directories: Iterable[str], user: str | None) -> list[str]:
        """Those of ``directories`` that still lie inside ``user``'s roots (and not in a
        refused place): the roots file access is confined to."""
        kept: list[str] = []
        for directory in directories:
            try:
                self.check_directory(directory, user)
            except (PathOutside, PathInvalid):
                continue
            kept.append(directory)
        return kept

    def session_folder(self, session_id: str, user: str | None) -> Path:
        """A new folder for a session created without a working directory:
        ``<first root>/ahp-sessions/<id>``, made now by descriptor from the root;
        :class:`PathOutside` with no root, or when ``ahp-sessions`` is a symbolic link."""
        allowed = self.allowed(user)
        if not allowed:
            raise PathOutside(
                "this session needs a working directory and none can be made: no workspace "
                f"root is configured (set {self.setting(user)})"
            )
        root = Path(allowed[0])
        root.mkdir(parents=True, exist_ok=True)  # the operator's, as configured
        parent = root / SESSION_FOLDERS
        name = _UNSAFE.sub("_", session_id).strip("._")[:64] or "session"
        digest = hashlib.sha256(session_id.encode()).hexdigest()
        # By descriptor from the root (docs/workspace.md "How paths are opened"): an
        # ahp-sessions swapped for a link is refused, never followed out of the root.
        root_fd = open_confined(root, [str(root)], DIRECTORY, shown=str(root))
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(SESSION_FOLDERS, 0o700, dir_fd=root_fd)
        finally:
            os.close(root_fd)
        parent_fd = open_confined(parent, [str(root)], DIRECTORY, shown=str(parent))
        try:
            for candidate in (name, f"{name}-{digest[:12]}", f"{name}-{digest}"):
                try:
                    os.mkdir(candidate, 0o700, dir_fd=parent_fd)
                except FileExistsError:
                    continue
                return parent / candidate
        finally:
            os.close(parent_fd)
        raise PathOutside(f"cannot make a folder for the session in {parent}: names taken")

"""The ``ahp-server`` command line (also ``python -m ahp_server``).

Layer: cli (the outermost layer: it uses ``app`` to run a server and ``client``
for ``chat`` and ``sessions``; nothing imports it).

Commands: ``serve`` (the default), ``check-config``, ``backup``, ``chat``,
``sessions``. ``chat`` and ``sessions`` are clients on
:class:`~ahp_server.client.AhpClient`: they speak AHP 1.0 (offering 1.0.0,
0.9.0, 0.7.0) and read 1.0 actions and states whatever was negotiated.

``chat`` (:mod:`ahp_server.cli.chat`) sends one message, or, on a terminal
with none, holds a conversation at a prompt; in a new session, an existing
one (``--session``) or chat (``--chat``), or resumes a chat's failed answer
(``--continue``, ``chat/turnResume``). What the client commands share (naming
a session or chat, timeouts, :class:`Refused`) is in :mod:`ahp_server.cli.common`.

``sessions`` lists sessions (activity, last activity) and their chats (read
and archived flags, each chat's change counts and background work); renames
(``session/titleChanged``) and deletes (``disposeSession``, asked first on a
terminal) a session; archives, restores, marks read or unread, moves a chat
(``moveChat``) and lists a chat's own changes. A session or chat is named by
its URI or by an unambiguous start of its id (what follows the URI's scheme
and slashes).

``check-config`` loads the settings, then checks that what they name exists
on this machine (agents' programs, workspace roots: ``config.machine_problems``);
``serve`` refuses a missing root and warns of a missing program. Its exit
status: 0 whole, 1 something named is missing here, 2 invalid.

Exit status of the client commands: 0 done; 1 a failed turn (or one that
asked what could not be answered here), or the host could not be reached;
2 a usage error or a refusal (the host's, printed as it said it, or the
command's own, e.g. nothing to resume); 130 interrupted (Ctrl-C). The
reference for users is docs/cli.md, generated from :func:`build_parser`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import gc
import json
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog
from msgspec import UnsetType

from ahp_server import __version__
from ahp_server.app import App
from ahp_server.cli.chat import chat_command
from ahp_server.cli.common import (
    DEFAULT_URL,
    REQUEST_TIMEOUT,
    Refused,
    all_sessions,
    path_of,
    resolve,
)
from ahp_server.client import (
    ActionRejectedError,
    AhpClient,
    ClientError,
    RemoteError,
    TurnFailedError,
)
from ahp_server.config import ConfigError, Settings, load_settings, machine_problems
from ahp_server.eventloop import loop_name
from ahp_server.eventloop import run as run_loop
from ahp_server.host.host import DB_FILE, HostFailed
from ahp_server.logging import configure_logging
from ahp_server.protocol import PROTOCOL_VERSION
from ahp_server.protocol.types import (
    ActiveTurn,
    BackgroundShellWork,
    ChangesetState,
    ChangesSummary,
    ChatState,
    SessionStatus,
    SessionSummary,
    SessionTitleChangedAction,
)
from ahp_server.store.base import StoreError
from ahp_server.store.sqlite import complete_copy
from ahp_server.workspace.roots import Roots

log = structlog.get_logger(__name__)

_ACTIVITY_MASK = 0b11111
_ACTIVITY_WORDS = {
    int(SessionStatus.InProgress): "running",
    int(SessionStatus.InputNeeded): "waiting for input",
    int(SessionStatus.Error): "failed",
}
#: How many chats ``sessions`` reads at once (each is a subscribe).
_READ_AT_ONCE = 16


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/ahp-server``, else ``~/.local/share/ahp-server``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ahp-server"


def _server_options(target: argparse.ArgumentParser, *, command: bool = False) -> None:
    """The host's options, on the top level and again on ``serve`` and ``check-config``.

    A command's copies default to nothing (``SUPPRESS``), so an option given
    before the command (``ahp-server --data-dir X serve``) is kept, not reset.
    """
    default: Any = argparse.SUPPRESS if command else None
    target.add_argument("--config", default=default, help="TOML configuration file")
    target.add_argument("--host", default=default, help="bind address (server.host)")
    target.add_argument("--port", type=int, default=default, help="TCP port, 0 for any")
    target.add_argument(
        "--data-dir",
        default=default,
        help=f"database folder (default {default_data_dir()}; ':memory:' keeps nothing)",
    )
    target.add_argument(
        "--durability",
        choices=["normal", "full"],
        default=default,
        help="normal survives a crash of the process, full a power loss too (storage.durability)",
    )
    target.add_argument(
        "--log-format",
        choices=["console", "json", "auto"],
        default=default,
        help="log lines for people or for machines; auto: console on a terminal, else json "
        "(logging.format)",
    )
    target.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default=default,
        help="the least severe level logged (logging.level)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ahp-server", description="Agent Host Protocol host")
    parser.add_argument(
        "--version",
        action="version",
        version=f"ahp-server {__version__} (AHP {PROTOCOL_VERSION})",
    )
    _server_options(parser)
    commands = parser.add_subparsers(dest="command")
    _server_options(commands.add_parser("serve", help="run the host (the default)"), command=True)
    _server_options(
        commands.add_parser(
            "check-config",
            help="validate the configuration, check that its agents' programs and workspace "
            "roots exist here, and exit (0 ok, 1 something missing, 2 invalid)",
        ),
        command=True,
    )
    backup = commands.add_parser(
        "backup", help="copy the database to a file, safely, even while the host runs"
    )
    backup.add_argument("destination", help="the backup file to write")
    _server_options(backup)
    chat = commands.add_parser(
        "chat",
        help="talk to an agent of a running host: one message, or a conversation at the prompt",
        description="With a message (as an argument, or on stdin when stdin is not a terminal): "
        "send it, stream the reply, exit. Without one, on a terminal: a conversation at a "
        "prompt, in one session, with line editing and a history (/help lists its commands). "
        "In a new session, or an existing one (--session) or chat (--chat). --continue resumes "
        "a chat's answer that failed for a passing reason. Tool confirmations and the agent's "
        "questions are asked at the terminal; Ctrl-C cancels a running turn. Exit status: "
        "0 answered, 1 the turn failed or asked what could not be answered here, 2 refused, "
        "130 interrupted.",
    )
    chat.add_argument(
        "message", nargs="?", help="what to say (none, on a terminal: a conversation)"
    )
    _client_options(chat)
    chat.add_argument(
        "--agent",
        "--provider",
        dest="agent",
        default=None,
        help="agent of the new session, by name (default: the host's default)",
    )
    chat.add_argument(
        "--cwd",
        dest="cwd",
        metavar="DIR",
        default=None,
        help="the new session's working directory, where its agent works (a relative path is "
        "taken from here; it must lie inside the host's workspace roots). Default: a folder of "
        "the session's own, <first root>/ahp-sessions/<id>",
    )
    chat.add_argument(
        "--session",
        dest="session",
        metavar="SESSION",
        default=None,
        help="continue this existing session (its URI or the start of its id) in its default "
        "chat: its last turns are shown, then the prompt",
    )
    chat.add_argument(
        "--chat",
        dest="chat",
        metavar="CHAT",
        default=None,
        help="talk in this existing chat (its URI or the start of its id) instead of a new session",
    )
    chat.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="resume the latest answer of --chat CHAT, which failed resumably (no message)",
    )
    _sessions_parser(commands)
    return parser


def _client_options(target: argparse.ArgumentParser) -> None:
    """``--url`` and ``--token``, accepted before or after a ``sessions`` action."""
    target.add_argument(
        "--url", default=argparse.SUPPRESS, help=f"host URL (default {DEFAULT_URL})"
    )
    target.add_argument(
        "--token", default=argparse.SUPPRESS, help="connection token (or AHP_SERVER_TOKEN)"
    )


def _list_options(target: argparse.ArgumentParser) -> None:
    target.add_argument(
        "--archived",
        action="store_true",
        default=argparse.SUPPRESS,
        help="also list archived sessions and chats (marked archived)",
    )
    target.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print JSON for scripts instead of text",
    )


def _sessions_parser(commands: Any) -> None:
    sessions = commands.add_parser(
        "sessions",
        help="list, rename and delete sessions of a running host; archive, mark read, move chats",
        description="Without an action: list the sessions and their chats (as 'list'). "
        "SESSION and CHAT are URIs as listed, or an unambiguous start of the id after the "
        "scheme (e.g. the first characters of a uuid). Exit status: 0 done, 1 the host "
        "could not be reached, 2 refused (the host's reason is printed).",
    )
    _client_options(sessions)
    _list_options(sessions)
    actions = sessions.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="list sessions and chats (the default)",
        description="One line per session (title, URI, agent, running / failed / waiting for "
        "input, archived, last activity), one per chat below it (title, "
        "URI, then markers: default, unread, archived, running / failed / waiting for input, "
        "and its changes as files +added -deleted), and each command it runs in the background.",
    )
    _client_options(listing)
    _list_options(listing)
    for name, verb in (("archive", "archive"), ("unarchive", "restore (unarchive)")):
        action = actions.add_parser(
            name,
            help=f"{verb} a chat or a whole session",
            description=f"{verb.capitalize()} a chat (chat/isArchivedChanged) or a session "
            "(session/isArchivedChanged). Archiving a session's default chat archives the "
            "session.",
        )
        action.add_argument("target", metavar="CHAT_OR_SESSION", help="what to " + name)
        _client_options(action)
    for name, flag in (("read", "read"), ("unread", "unread")):
        action = actions.add_parser(
            name,
            help=f"mark a chat or a session {flag}",
            description=f"Mark a chat (chat/isReadChanged) or a session "
            f"(session/isReadChanged) {flag}.",
        )
        action.add_argument("target", metavar="CHAT_OR_SESSION", help=f"what to mark {flag}")
        _client_options(action)
    move = actions.add_parser(
        "move",
        help="move a chat to another session, a new one, or elsewhere in its own",
        description="Move a chat (moveChat): into SESSION (its own session: a reorder) or, "
        "with --to new, into a new session of the same agent. It goes right after --after "
        "CHAT, or first. A session's default chat never moves; the host says why it refuses.",
    )
    move.add_argument("chat", metavar="CHAT", help="the chat to move")
    move.add_argument(
        "--to", required=True, metavar="SESSION|new", help="the destination session, or 'new'"
    )
    move.add_argument(
        "--after", default=None, metavar="CHAT", help="place it after this chat of SESSION"
    )
    _client_options(move)
    rename = actions.add_parser(
        "rename",
        help="give a session a new title",
        description="Rename a session (session/titleChanged).",
    )
    rename.add_argument("session", metavar="SESSION", help="the session to rename")
    rename.add_argument("title", metavar="TITLE", help="its new title")
    _client_options(rename)
    delete = actions.add_parser(
        "delete",
        help="delete a session and its chats",
        description="Delete a session with all its chats (disposeSession): its agent is "
        "stopped and its history is gone. Asks first on a terminal; --yes does not ask "
        "(and is needed when stdin is not a terminal).",
    )
    delete.add_argument("session", metavar="SESSION", help="the session to delete")
    delete.add_argument("--yes", "-y", action="store_true", help="do not ask to confirm")
    _client_options(delete)
    changes = actions.add_parser(
        "changes",
        help="list the files a chat changed",
        description="The chat's own changeset: each file its turns changed, with the lines "
        "added and removed and whether it was added, modified or deleted.",
    )
    changes.add_argument("chat", metavar="CHAT", help="the chat whose changes to list")
    changes.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print JSON for scripts instead of text",
    )
    _client_options(changes)


def settings_from(args: argparse.Namespace) -> Settings:
    """Defaults < --config file < AHP_SERVER_* < flags; the data dir defaults per user."""
    settings = load_settings(
        args.config,
        environ=os.environ,
        overrides={
            "server.host": args.host,
            "server.port": args.port,
            "storage.data_dir": args.data_dir,
            "storage.durability": args.durability,
            "logging.format": args.log_format,
            "logging.level": args.log_level,
        },
    )
    if settings.data_dir is None:
        settings = dataclasses.replace(settings, data_dir=str(default_data_dir()))
    return settings


def describe_roots(settings: Settings) -> str:
    """The workspace roots in effect, each user's in multi-user mode, and what is never
    served (``check-config``; docs/workspace.md "Roots")."""
    roots = Roots.from_settings(settings)

    def shown(paths: Sequence[str], key: str) -> str:
        if not paths:
            return f"none: sessions cannot have working directories (set {key})"
        return ", ".join(p if os.path.isdir(p) else f"{p} (does not exist)" for p in paths)

    lines = [f"workspace roots: {shown(roots.default, 'workspace.roots')}"]
    for user in settings.users:
        key = roots.setting(user.name)
        lines.append(f"  user {user.name} ({key}): {shown(roots.allowed(user.name), key)}")
    lines.append(f"never served: {', '.join(roots.forbidden)}")
    return "\n".join(lines)


def tune_gc() -> None:
    """Collector settings for a long-running host (docs/performance.md).

    What is alive once the host has started (modules, classes, settings, the
    catalogue) is moved out of the collector's reach, and the youngest
    generation is collected every 10,000 net allocations instead of 700. A
    streaming chat keeps hundreds of uncommitted actions alive at once, which
    the default thresholds re-scan many times per second for nothing (they
    hold no cycles); reference counting still frees them as they commit.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


#: A wildcard listening address, and the loopback address a browser on the same
#: machine opens instead (browsers refuse to load pages from ``0.0.0.0``).
_WILDCARDS = {"ws://0.0.0.0:": "http://127.0.0.1:", "ws://[::]:": "http://[::1]:"}


def page_of(settings: Settings, url: str) -> dict[str, str]:
    """The ``listening`` event's ``page`` field: the web UI's address beside the ``ws://``
    one (``http://host:port/``, docs/web.md), when ``server.web_ui`` serves it. A host
    listening on every interface names its loopback address, which a browser can open."""
    if not settings.web_ui:
        return {}
    for wildcard, loopback in _WILDCARDS.items():
        if url.startswith(wildcard):
            return {"page": loopback + url.removeprefix(wildcard) + "/"}
    return {"page": "http" + url.removeprefix("ws") + "/"}


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    return stop


async def serve(settings: Settings) -> None:
    """Run the host until SIGTERM/SIGINT, then shut down gracefully (1001 to clients).

    If its store fails first (a commit that cannot be written), the host has
    closed its clients with 1012; it stops at once, committing nothing more
    but ending every child process, and raises :class:`HostFailed`: the
    process exits with status 1 for its supervisor to start it again
    (docs/deploy.md "When the store fails").
    """
    if settings.bus is not None:
        await serve_cluster(settings)
        return
    app = App(settings)
    await app.start()
    tune_gc()
    stop = _stop_on_signals()  # before "listening": a SIGTERM from then on stops it gracefully
    for url in app.urls:
        log.info(
            "listening",
            url=url,
            version=PROTOCOL_VERSION,
            loop=loop_name(),
            **page_of(settings, url),
        )
    log.info("workspace roots", roots=list(app.host.roots.default))
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(app.host.failed.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    failure = app.host.failure
    if failure is not None:
        await app.abort()
        raise HostFailed(failure)
    log.info("shutting down")
    await app.stop()
    log.info("stopped")


async def serve_cluster(settings: Settings) -> None:
    """Run one cluster node (docs/scale-out.md) until a signal, or until it must stop.

    A node that lost its lease or whose store failed stops at once and raises
    :class:`NodeFailed`: the process exits non-zero for its supervisor to
    start it again (as an edge).
    """
    # Imported here, not at the top: cluster mode's drivers (nats-py, asyncpg) are the
    # optional extra ``ahp-server[cluster]``, and a plain install must start without them
    # (``machine_problems`` has refused a bus without them before this runs).
    from ahp_server.cluster import ClusterNode, NodeFailed, ShardedNode

    node: ClusterNode | ShardedNode = (
        ShardedNode(settings) if settings.cluster_mode == "sharded" else ClusterNode(settings)
    )
    await node.start()
    tune_gc()
    for url in node.urls:
        log.info(
            "listening",
            url=url,
            version=PROTOCOL_VERSION,
            loop=loop_name(),
            node=node.node_id,
            **page_of(settings, url),
        )
    failure = await node.wait(_stop_on_signals())
    if failure is not None:
        await node.abort()
        raise NodeFailed(failure)
    log.info("shutting down")
    await node.stop()
    log.info("stopped")


def backup_database(data_dir: Path, destination: Path) -> None:
    """SQLite's online backup and the log's tail: a consistent copy, safe while the host writes."""
    source_path = data_dir / DB_FILE
    if not source_path.is_file():
        raise StoreError(f"{source_path}: no database to back up")
    # By URI, read-only; the path percent-encoded (a folder named "a?b#c" is that folder).
    source = sqlite3.connect(source_path.resolve().as_uri() + "?mode=ro", uri=True)
    target = sqlite3.connect(destination, isolation_level=None)
    try:
        source.backup(target)
        # The newest envelopes may still be in the log's tail, beside the file.
        complete_copy(target, source_path)
    finally:
        target.close()
        source.close()


# -- sessions ------------------------------------------------------------------------------


def _flag(status: int | None, bit: SessionStatus) -> bool:
    return status is not None and bool(int(status) & int(bit))


def _changes_json(changes: ChangesSummary | UnsetType) -> dict[str, int] | None:
    if isinstance(changes, UnsetType):
        return None

    def count(value: float | UnsetType) -> int:
        return 0 if isinstance(value, UnsetType) else int(value)

    return {
        "files": count(changes.files),
        "additions": count(changes.additions),
        "deletions": count(changes.deletions),
    }


async def _chat_details(client: AhpClient, uri: str) -> ChatState | None:
    """The chat's state with its latest turn (``None`` when it went meanwhile)."""
    try:
        state = await client.subscribe(uri, turns=1, timeout=REQUEST_TIMEOUT)
    except RemoteError:
        return None
    await client.unsubscribe(uri)
    return state if isinstance(state, ChatState) else None


async def sessions_listing(client: AhpClient, archived: bool) -> dict[str, Any]:
    """What ``ahp-server sessions`` shows, as JSON-able data.

    From ``listSessions`` (each session's chat catalogue: status and change
    counts) and each listed chat's own state, subscribed for a moment (its
    background work, and whether it has had a turn: a chat is unread when a
    turn ended that nobody has marked read since, and nothing runs in it).
    """
    summaries = await all_sessions(client)
    hidden = {"sessions": 0, "chats": 0}
    shown: list[tuple[SessionSummary, list[Any]]] = []
    for summary in summaries:
        chats = [] if isinstance(summary.chats, UnsetType) else list(summary.chats)
        if _flag(summary.status, SessionStatus.IsArchived) and not archived:
            hidden["sessions"] += 1
            continue
        listed = [
            c
            for c in chats
            if archived or not _flag(_int_or_none(c.status), SessionStatus.IsArchived)
        ]
        hidden["chats"] += len(chats) - len(listed)
        shown.append((summary, listed))
    gate = asyncio.Semaphore(_READ_AT_ONCE)

    async def details(uri: str) -> ChatState | None:
        async with gate:
            return await _chat_details(client, uri)

    uris = [c.resource for _, listed in shown for c in listed]
    states = dict(zip(uris, await asyncio.gather(*(details(u) for u in uris)), strict=True))
    result: list[dict[str, Any]] = []
    for summary, listed in shown:
        default = summary.default_chat if isinstance(summary.default_chat, str) else None
        entries = []
        for entry in listed:
            state = states.get(entry.resource)
            status = state.status if state is not None else _int_or_none(entry.status)
            activity = (status or 0) & _ACTIVITY_MASK
            had_turn = state is not None and (
                bool(state.turns) or isinstance(state.active_turn, ActiveTurn)
            )
            work = (
                ()
                if state is None or isinstance(state.background_work, UnsetType)
                else state.background_work
            )
            entries.append(
                {
                    "resource": entry.resource,
                    "title": entry.title,
                    "status": status,
                    "default": entry.resource == default,
                    "unread": had_turn
                    and not _flag(status, SessionStatus.IsRead)
                    and activity in (int(SessionStatus.Idle), int(SessionStatus.Error)),
                    "archived": _flag(status, SessionStatus.IsArchived),
                    "activity": _ACTIVITY_WORDS.get(activity, "idle"),
                    "changes": _changes_json(entry.changes),
                    "background": [_work_json(w) for w in work],
                }
            )
        result.append(
            {
                "resource": summary.resource,
                "title": summary.title,
                "provider": summary.provider,
                "status": summary.status,
                "archived": _flag(summary.status, SessionStatus.IsArchived),
                "activity": _ACTIVITY_WORDS.get(summary.status & _ACTIVITY_MASK, "idle"),
                "modifiedAt": summary.modified_at,
                "defaultChat": default,
                "chats": entries,
            }
        )
    return {"sessions": result, "hidden": hidden}


def _int_or_none(value: float | UnsetType) -> int | None:
    return None if isinstance(value, UnsetType) else int(value)


def _work_json(work: object) -> dict[str, Any]:
    if isinstance(work, BackgroundShellWork):
        terminal = None if isinstance(work.terminal, UnsetType) else work.terminal
        return {
            "kind": "shell",
            "id": work.id,
            "label": work.label,
            "command": work.command,
            "terminal": terminal,
        }
    label = getattr(work, "label", None)
    return {"kind": getattr(work, "kind", "unknown"), "label": label, "command": None}


def _when(stamp: str) -> str:
    """An ISO 8601 timestamp as local time to the minute (as given when it is not one)."""
    try:
        moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def print_listing(listing: dict[str, Any]) -> None:
    """The listing as text: a line per session, a line per chat, a line per background job."""
    for session in listing["sessions"]:
        marks = [session["activity"]] if session["activity"] != "idle" else []
        marks += ["archived"] if session["archived"] else []
        tags = "".join(f"  [{mark}]" for mark in marks)
        print(
            f"{session['title']}  {session['resource']}  ({session['provider']}){tags}"
            f"  last active {_when(session['modifiedAt'])}"
        )
        for entry in session["chats"]:
            marks = [
                word
                for word, on in (
                    ("default", entry["default"]),
                    ("unread", entry["unread"]),
                    ("archived", entry["archived"]),
                )
                if on
            ]
            if entry["activity"] != "idle":
                marks.append(entry["activity"])
            changes = entry["changes"]
            if changes is not None:
                files = changes["files"]
                plural = "" if files == 1 else "s"
                marks.append(
                    f"{files} file{plural} +{changes['additions']} -{changes['deletions']}"
                )
            tags = "".join(f"  [{mark}]" for mark in marks)
            print(f"  {entry['title']}  {entry['resource']}{tags}")
            for work in entry["background"]:
                print(f"    background: {work['command'] or work['label']}")
    hidden = listing["hidden"]
    if not listing["sessions"]:
        print("no sessions", file=sys.stderr)
    counts = [
        f"{count} archived {kind}{'' if count == 1 else 's'}"
        for kind, count in (("session", hidden["sessions"]), ("chat", hidden["chats"]))
        if count
    ]
    if counts:
        print(f"not shown: {' and '.join(counts)} (--archived lists them)", file=sys.stderr)


async def chat_changes(client: AhpClient, chat_uri: str) -> dict[str, Any]:
    """The files of the chat's own changeset (its catalogue entry of ``changeKind``
    ``chat``; docs/workspace.md "A chat's own changeset"), as JSON-able data."""
    state = await client.subscribe(chat_uri, turns=1, timeout=REQUEST_TIMEOUT)
    if not isinstance(state, ChatState):
        raise Refused(f"{chat_uri} is not a chat")
    entries = () if isinstance(state.changesets, UnsetType) else state.changesets
    uri = next((e.uri_template for e in entries if e.change_kind == "chat"), None)
    files: list[dict[str, Any]] = []
    result: dict[str, Any] = {"chat": chat_uri, "changeset": uri, "files": files}
    if uri is None:
        return result
    changeset = await client.subscribe(uri, timeout=REQUEST_TIMEOUT)
    if not isinstance(changeset, ChangesetState):
        raise Refused(f"{uri} is not a changeset")
    for file in changeset.files:
        diff = file.edit.diff
        meta = {} if isinstance(file.meta, UnsetType) else file.meta
        files.append(
            {
                "id": file.id,
                "path": path_of(file.id),
                "status": meta.get("status"),
                "added": None if isinstance(diff, UnsetType) else _int_or_none(diff.added),
                "removed": None if isinstance(diff, UnsetType) else _int_or_none(diff.removed),
            }
        )
    if changeset.status == "error" and not isinstance(changeset.error, UnsetType):
        result["error"] = changeset.error.message
    return result


def print_changes(changes: dict[str, Any]) -> None:
    files = changes["files"]
    if not files:
        print(f"no changes in {changes['chat']}", file=sys.stderr)
        return
    added = removed = 0
    for file in files:
        counts = "(no diff)"
        if file["added"] is not None or file["removed"] is not None:
            counts = f"+{file['added'] or 0} -{file['removed'] or 0}"
            added += file["added"] or 0
            removed += file["removed"] or 0
        print(f"{file['status'] or 'changed':<9}{counts:<14}{file['path']}")
    plural = "" if len(files) == 1 else "s"
    print(f"{len(files)} file{plural}, +{added} -{removed}")
    if "error" in changes:
        print(f"the changeset is incomplete: {changes['error']}", file=sys.stderr)


async def _confirm_delete(client: AhpClient, session: str) -> None:
    """Ask before deleting, on a terminal; elsewhere ``--yes`` must say so."""
    if not sys.stdin.isatty():
        raise Refused(f"deleting {session} needs --yes when not asked at a terminal")
    summary = next((s for s in await all_sessions(client) if s.resource == session), None)
    chats = 0 if summary is None or isinstance(summary.chats, UnsetType) else len(summary.chats)
    title = "" if summary is None else f" {summary.title!r}"
    plural = "" if chats == 1 else "s"
    question = f"delete session{title} ({session}) and its {chats} chat{plural}? [y/N] "
    answer = await asyncio.to_thread(input, question)
    if answer.strip().lower() not in ("y", "yes"):
        raise Refused("not deleted")


async def sessions_command(client: AhpClient, args: argparse.Namespace) -> None:
    """Run one ``ahp-server sessions`` action on a connected client."""
    action = args.action or "list"
    as_json = getattr(args, "json", False)
    if action == "list":
        listing = await sessions_listing(client, getattr(args, "archived", False))
        if as_json:
            print(json.dumps(listing, indent=2))
        else:
            print_listing(listing)
    elif action in ("archive", "unarchive"):
        target = await resolve(client, args.target)
        await client.set_archived(target, action == "archive", timeout=REQUEST_TIMEOUT)
        print(f"{action}d {target}")
    elif action in ("read", "unread"):
        target = await resolve(client, args.target)
        await client.set_read(target, action == "read", timeout=REQUEST_TIMEOUT)
        print(f"marked {target} {action}")
    elif action == "move":
        chat_uri = await resolve(client, args.chat, sessions=False)
        to_new = args.to == "new"
        if to_new and args.after is not None:
            raise Refused("--after places the chat in an existing session; --to new makes one")
        destination = None if to_new else await resolve(client, args.to, chats=False)
        after = None if args.after is None else await resolve(client, args.after, sessions=False)
        session = await client.move_chat(
            chat_uri, destination, after=after, timeout=REQUEST_TIMEOUT
        )
        print(f"moved {chat_uri} to {session}")
    elif action == "rename":
        session = await resolve(client, args.session, chats=False)
        await client.subscribe(session, timeout=REQUEST_TIMEOUT)
        title = args.title.strip()
        if not title:
            raise Refused("the new title is empty")
        await client.dispatch_and_wait(
            session, SessionTitleChangedAction(title=title), timeout=REQUEST_TIMEOUT
        )
        print(f"renamed {session} to {title!r}")
    elif action == "delete":
        session = await resolve(client, args.session, chats=False)
        if not args.yes:
            await _confirm_delete(client, session)
        await client.dispose_session(session, timeout=REQUEST_TIMEOUT)
        print(f"deleted {session}")
    elif action == "changes":
        chat_uri = await resolve(client, args.chat, sessions=False)
        changes = await chat_changes(client, chat_uri)
        if as_json:
            print(json.dumps(changes, indent=2))
        else:
            print_changes(changes)


async def run_sessions(args: argparse.Namespace, url: str, token: str | None) -> None:
    """``sessions``, connected to ``url``."""
    async with AhpClient.connect(url, token=token) as client:
        await sessions_command(client, args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "serve"
    if command in ("chat", "sessions"):
        problem = _chat_arguments_problem(args) if command == "chat" else None
        if problem is not None:
            print(f"ahp-server chat: {problem} (see ahp-server chat --help)", file=sys.stderr)
            return 2
        return run_client_command(args)
    try:
        settings = settings_from(args)
    except ConfigError as error:
        print(f"ahp-server: invalid configuration: {error}", file=sys.stderr)
        return 2
    if command == "check-config":
        problems = machine_problems(settings)
        # docs/deploy.md "Checking a configuration": one line per problem, naming its key.
        for found in problems:
            print(f"ahp-server: {found}", file=sys.stderr)
        if not problems:
            print(f"configuration ok ({args.config or 'built-in defaults'})")
        print(describe_roots(settings))
        return 1 if problems else 0
    if command == "backup":
        if settings.store is not None:  # not the SQLite file in data_dir (docs/durability.md)
            print(
                "ahp-server: backup copies the SQLite database; the store is PostgreSQL "
                "(storage.store): use pg_dump",
                file=sys.stderr,
            )
            return 1
        try:
            backup_database(Path(str(settings.data_dir)), Path(args.destination))
        except (OSError, sqlite3.Error, StoreError) as error:
            print(f"ahp-server: backup failed: {error}", file=sys.stderr)
            return 1
        print(f"backed up to {args.destination}")
        return 0
    problems = machine_problems(settings)
    if any(found.fatal for found in problems):  # a missing root: refuse to start
        for found in problems:
            if found.fatal:
                print(f"ahp-server: invalid configuration: {found}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format, cache=True)
    for found in problems:
        # An agent's program may be installed later: its sessions fail until then.
        log.warning("agent program not found", key=found.key, problem=found.message)
    try:
        run_loop(serve(settings), settings.event_loop)
    except ConfigError as error:
        print(f"ahp-server: invalid configuration: {error}", file=sys.stderr)
        return 2
    except HostFailed as error:  # a cluster node's NodeFailed too
        print(f"ahp-server: stopped: {error}", file=sys.stderr)
        return 1
    except (OSError, StoreError) as error:
        print(f"ahp-server: cannot start: {error}", file=sys.stderr)
        return 1
    return 0


def _chat_arguments_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``chat``'s arguments taken together (a usage error), if anything."""
    existing = [f"--{name}" for name in ("session", "chat") if getattr(args, name) is not None]
    if len(existing) > 1:
        return "--session and --chat both name where to talk: give one"
    if args.resume:
        if not existing:
            return "--continue needs --chat CHAT, the chat whose answer to resume"
        if args.message is not None:
            return "--continue takes no message: it resumes the failed answer"
    if existing and args.agent is not None:
        return f"--agent picks a new session's agent; {existing[0]} talks in an existing one"
    if existing and args.cwd is not None:
        return (
            f"--cwd sets a new session's working directory; {existing[0]} talks in an existing one"
        )
    return None


def run_client_command(args: argparse.Namespace) -> int:
    """Run ``chat`` or ``sessions``; each failure is one line on stderr and an exit status."""
    configure_logging("warning", "console")
    url = getattr(args, "url", None) or DEFAULT_URL
    token = getattr(args, "token", None) or os.environ.get("AHP_SERVER_TOKEN") or None
    name = f"ahp-server {args.command}"
    try:
        if args.command == "chat":
            return chat_command(
                url,
                token,
                args.message,
                agent=args.agent,
                cwd=args.cwd,
                existing=args.session or args.chat,
                resume=args.resume,
            )
        asyncio.run(run_sessions(args, url, token))
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted", file=sys.stderr)
        return 130
    except Refused as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 2
    except RemoteError as error:  # the host refused a command: its own words
        print(f"{name}: {error.message}", file=sys.stderr)
        return 2
    except ActionRejectedError as error:
        print(f"{name}: the host refused {error.action_type}: {error.reason}", file=sys.stderr)
        return 2
    except TurnFailedError as error:
        print(f"{name}: {error}", file=sys.stderr)
        for note in getattr(error, "__notes__", ()):
            print(f"{name}: {note}", file=sys.stderr)
        return 1
    except ClientError as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        print(f"{name}: cannot reach {url}: {reason}", file=sys.stderr)
        return 1
    except TimeoutError as error:
        print(f"{name}: {url}: {error or 'timed out'}", file=sys.stderr)
        return 1
    except Exception as error:  # noqa: BLE001 - the command's boundary: one clear line
        print(f"{name}: {error}", file=sys.stderr)
        return 1
    return 0

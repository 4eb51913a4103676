"""The ``ahp-server`` command line (also ``python -m ahp_server``).

Layer: cli (the outermost layer: it uses ``app`` to run a server and ``client``
for ``chat``; nothing imports it).

Commands: ``serve`` (the default), ``check-config``, ``backup``, ``chat``.
``chat`` is a conversational client on :class:`~ahp_server.client.AhpClient`:
it speaks AHP 1.0 (offering 1.0.0, 0.9.0, 0.7.0; the negotiated version is
reported on stderr) and reads 1.0 actions and states whatever was negotiated.
It streams the turn's text, asks tool confirmations at the terminal, and
reports a failed turn's error (1.0: the turn's last response part, of kind
``error``) on stderr with exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog
from msgspec import UNSET, UnsetType

from ahp_server import __version__
from ahp_server.app import App
from ahp_server.client import AhpClient
from ahp_server.cluster import ClusterNode, NodeFailed
from ahp_server.config import ConfigError, Settings, load_settings
from ahp_server.host.host import DB_FILE
from ahp_server.logging import configure_logging
from ahp_server.protocol import PROTOCOL_VERSION
from ahp_server.protocol.types import (
    ChatDeltaAction,
    ChatResponsePartAction,
    ChatToolCallApprovedAction,
    ChatToolCallDeniedAction,
    ChatToolCallReadyAction,
    MarkdownResponsePart,
)
from ahp_server.store.base import StoreError
from ahp_server.store.sqlite import complete_copy
from ahp_server.workspace.roots import Roots

log = structlog.get_logger(__name__)

DEFAULT_URL = "ws://127.0.0.1:8765"


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/ahp-server``, else ``~/.local/share/ahp-server``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ahp-server"


def _server_options(target: argparse.ArgumentParser) -> None:
    target.add_argument("--config", default=None, help="TOML configuration file")
    target.add_argument("--host", default=None, help="bind address (server.host)")
    target.add_argument("--port", type=int, default=None, help="TCP port, 0 for any")
    target.add_argument(
        "--data-dir",
        default=None,
        help=f"database folder (default {default_data_dir()}; ':memory:' keeps nothing)",
    )
    target.add_argument("--durability", choices=["normal", "full"], default=None)
    target.add_argument("--log-format", choices=["console", "json", "auto"], default=None)
    target.add_argument("--log-level", choices=["debug", "info", "warning", "error"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ahp-server", description="Agent Host Protocol host")
    parser.add_argument(
        "--version",
        action="version",
        version=f"ahp-server {__version__} (AHP {PROTOCOL_VERSION})",
    )
    _server_options(parser)
    commands = parser.add_subparsers(dest="command")
    _server_options(commands.add_parser("serve", help="run the host (the default)"))
    _server_options(commands.add_parser("check-config", help="validate the configuration and exit"))
    backup = commands.add_parser(
        "backup", help="copy the database to a file, safely, even while the host runs"
    )
    backup.add_argument("destination", help="the backup file to write")
    _server_options(backup)
    chat = commands.add_parser("chat", help="send a message to a running host, print the reply")
    chat.add_argument("message", help="what to say")
    chat.add_argument("--url", default=None, help=f"host URL (default {DEFAULT_URL})")
    chat.add_argument("--token", default=None, help="connection token (or AHP_SERVER_TOKEN)")
    chat.add_argument(
        "--agent",
        "--provider",
        dest="agent",
        default=None,
        help="agent to talk to, by name (default: the host's default)",
    )
    return parser


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


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    return stop


async def serve(settings: Settings) -> None:
    """Run the host until SIGTERM/SIGINT, then shut down gracefully (1001 to clients)."""
    if settings.bus is not None:
        await serve_cluster(settings)
        return
    app = App(settings)
    await app.start()
    tune_gc()
    for url in app.urls:
        log.info("listening", url=url, version=PROTOCOL_VERSION)
    log.info("workspace roots", roots=list(app.host.roots.default))
    stop = _stop_on_signals()
    await stop.wait()
    log.info("shutting down")
    await app.stop()
    log.info("stopped")


async def serve_cluster(settings: Settings) -> None:
    """Run one cluster node (docs/scale-out.md) until a signal, or until it must stop.

    A node that lost its lease or whose store failed stops at once and raises
    :class:`NodeFailed`: the process exits non-zero for its supervisor to
    start it again (as an edge).
    """
    node = ClusterNode(settings)
    await node.start()
    tune_gc()
    for url in node.urls:
        log.info("listening", url=url, version=PROTOCOL_VERSION, node=node.node_id)
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
    source = sqlite3.connect(f"file:{source_path}?mode=ro", uri=True)
    target = sqlite3.connect(destination, isolation_level=None)
    try:
        source.backup(target)
        # The newest envelopes may still be in the log's tail, beside the file.
        complete_copy(target, source_path)
    finally:
        target.close()
        source.close()


async def chat(url: str, message: str, token: str | None, agent: str | None) -> None:
    """Open a chat on a running host, send ``message`` and stream the reply to stdout.

    A tool call that waits for confirmation is asked at the terminal: the
    agent's options by number (or y/n); no answer (end of input) denies it.
    """
    async with AhpClient.connect(url, token=token) as client:
        version = client.protocol_version
        print(f"ahp-server chat: connected to {url} (AHP {version})", file=sys.stderr)
        chat_uri = await client.open_chat(agent)
        asked: set[str] = set()
        questions: set[asyncio.Task[None]] = set()

        def show(envelope: object) -> None:
            action = getattr(envelope, "action", None)
            if getattr(envelope, "channel", None) != chat_uri:
                return
            if isinstance(action, ChatDeltaAction):
                sys.stdout.write(action.content)
            elif isinstance(action, ChatResponsePartAction) and isinstance(
                action.part, MarkdownResponsePart
            ):
                sys.stdout.write(action.part.content)
            elif isinstance(action, ChatToolCallReadyAction) and isinstance(
                action.confirmed, UnsetType
            ):
                if action.tool_call_id not in asked:
                    asked.add(action.tool_call_id)
                    task = asyncio.get_running_loop().create_task(
                        _confirm_at_terminal(client, chat_uri, action)
                    )
                    questions.add(task)
                    task.add_done_callback(questions.discard)
                return
            else:
                return
            sys.stdout.flush()

        client.on_envelope(show)
        try:
            await client.ask(chat_uri, message, timeout=600)
        finally:
            for task in questions:
                task.cancel()
        sys.stdout.write("\n")


async def _confirm_at_terminal(
    client: AhpClient, chat_uri: str, ready: ChatToolCallReadyAction
) -> None:
    """Ask the user at the terminal whether a tool call may run; dispatch the answer."""
    options = () if isinstance(ready.options, UnsetType) else ready.options
    title = ready.confirmation_title
    what = ready.invocation_message if isinstance(title, UnsetType) else title
    text = what if isinstance(what, str) else what.markdown
    lines = [f"\n[confirm] {text}"]
    if options:
        lines += [f"  {i}. {option.label}" for i, option in enumerate(options, 1)]
        prompt = f"choose 1-{len(options)}: "
    else:
        prompt = "allow? [y/N] "
    sys.stdout.write("\n".join(lines) + "\n" + prompt)
    sys.stdout.flush()
    answer = (await asyncio.to_thread(sys.stdin.readline)).strip().lower()
    chosen = None
    if options and answer.isdigit() and 1 <= int(answer) <= len(options):
        chosen = options[int(answer) - 1]
    approved = chosen.kind == "approve" if chosen is not None else answer in ("y", "yes")
    selected = UNSET if chosen is None else chosen.id
    action: ChatToolCallApprovedAction | ChatToolCallDeniedAction
    if approved:
        action = ChatToolCallApprovedAction(
            turn_id=ready.turn_id,
            tool_call_id=ready.tool_call_id,
            confirmed="user-action",
            selected_option_id=selected,
        )
    else:
        action = ChatToolCallDeniedAction(
            turn_id=ready.turn_id,
            tool_call_id=ready.tool_call_id,
            reason="denied",
            selected_option_id=selected,
        )
    sys.stdout.write("allowed\n" if approved else "denied\n")
    await client.dispatch(chat_uri, action)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = args.command or "serve"
    if command == "chat":
        configure_logging("warning", "console")
        url = args.url or DEFAULT_URL
        token = args.token or os.environ.get("AHP_SERVER_TOKEN") or None
        try:
            asyncio.run(chat(url, args.message, token, args.agent))
        except (OSError, TimeoutError) as error:
            print(f"ahp-server chat: cannot reach {url}: {error}", file=sys.stderr)
            return 1
        except Exception as error:  # noqa: BLE001 - the command's boundary: one clear line
            print(f"ahp-server chat: {error}", file=sys.stderr)
            return 1
        return 0
    try:
        settings = settings_from(args)
    except ConfigError as error:
        print(f"ahp-server: invalid configuration: {error}", file=sys.stderr)
        return 2
    if command == "check-config":
        print(f"configuration ok ({args.config or 'built-in defaults'})")
        print(describe_roots(settings))
        return 0
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
    configure_logging(settings.log_level, settings.log_format, cache=True)
    try:
        asyncio.run(serve(settings))
    except ConfigError as error:
        print(f"ahp-server: invalid configuration: {error}", file=sys.stderr)
        return 2
    except NodeFailed as error:
        print(f"ahp-server: stopped: {error}", file=sys.stderr)
        return 1
    except (OSError, StoreError) as error:
        print(f"ahp-server: cannot start: {error}", file=sys.stderr)
        return 1
    return 0

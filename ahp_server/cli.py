"""The ``ahp-server`` command line (also ``python -m ahp_server``).

Layer: app (the outermost layer; may import everything, imported by nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog

from ahp_server import __version__
from ahp_server.config import Settings
from ahp_server.host.host import DB_FILE, Host
from ahp_server.logging import configure_logging
from ahp_server.protocol import PROTOCOL_VERSION
from ahp_server.store.base import StoreError
from ahp_server.transport.websocket import start_server

log = structlog.get_logger(__name__)


def build_parser() -> argparse.ArgumentParser:
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="ahp-server", description="Agent Host Protocol host")
    parser.add_argument(
        "--version",
        action="version",
        version=f"ahp-server {__version__} (AHP {PROTOCOL_VERSION})",
    )
    commands = parser.add_subparsers(dest="command")
    backup = commands.add_parser(
        "backup", help="copy the database to a file, safely, even while the host runs"
    )
    backup.add_argument("destination", help="the backup file to write")
    backup.add_argument("--data-dir", default=None, help="database folder (default as serve)")
    serve = commands.add_parser("serve", help="run the host (the default)")
    for target in (parser, serve):
        target.add_argument("--host", default=defaults.host, help="bind address")
        target.add_argument("--port", type=int, default=defaults.port, help="TCP port (0: any)")
        target.add_argument(
            "--log-format", choices=["console", "json"], default=None, help="log output format"
        )
        target.add_argument("--log-level", default="info", help="debug, info, warning, error")
        target.add_argument(
            "--data-dir",
            default=None,
            help=f"database folder (default {default_data_dir()}; ':memory:' keeps nothing)",
        )
        target.add_argument(
            "--durability",
            choices=["normal", "full"],
            default=defaults.synchronous,
            help="SQLite synchronous: normal survives crashes, full also power loss",
        )
    return parser


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/ahp-server``, else ``~/.local/share/ahp-server``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ahp-server"


async def serve(settings: Settings) -> None:
    """Run the host until SIGTERM/SIGINT, then shut down gracefully (1001 to clients)."""
    host = Host(settings)
    await host.start()
    try:
        server = await start_server(host)
    except OSError:
        await host.stop()
        raise
    for sock in server.sockets:
        address = sock.getsockname()
        log.info("listening", url=f"ws://{address[0]}:{address[1]}", version=PROTOCOL_VERSION)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("shutting down")
    server.close(close_connections=False)  # stop accepting; the host closes with 1001
    await host.stop()
    await server.wait_closed()
    log.info("stopped")


def backup_database(data_dir: Path, destination: Path) -> None:
    """SQLite's online backup: a consistent copy, safe while the host writes."""
    source_path = data_dir / DB_FILE
    if not source_path.is_file():
        raise StoreError(f"{source_path}: no database to back up")
    source = sqlite3.connect(f"file:{source_path}?mode=ro", uri=True)
    target = sqlite3.connect(destination)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "backup":
        try:
            backup_database(Path(args.data_dir or default_data_dir()), Path(args.destination))
        except (OSError, sqlite3.Error, StoreError) as error:
            print(f"ahp-server: backup failed: {error}", file=sys.stderr)
            return 1
        print(f"backed up to {args.destination}")
        return 0
    configure_logging(args.log_level, args.log_format)
    settings = Settings(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir or str(default_data_dir()),
        synchronous=args.durability,
    )
    try:
        asyncio.run(serve(settings))
    except (OSError, StoreError) as error:
        print(f"ahp-server: cannot start: {error}", file=sys.stderr)
        return 1
    return 0

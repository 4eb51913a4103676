"""The ``ahp-server`` command line.

Layer: app (the outermost layer; may import everything, imported by nothing).

Until the WebSocket host lands (issue: "The host"), ``serve`` reports what it
would start and exits successfully, so scripts and the README can rely on the
command existing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ahp_server import __version__
from ahp_server.protocol import PROTOCOL_VERSION
from ahp_server.protocol.versions import SUPPORTED_VERSIONS

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ahp-server", description="Agent Host Protocol host")
    parser.add_argument(
        "--version",
        action="version",
        version=f"ahp-server {__version__} (AHP {PROTOCOL_VERSION})",
    )
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run the host (the default)")
    serve.add_argument("--host", default=DEFAULT_HOST, help="bind address")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    host = getattr(args, "host", DEFAULT_HOST)
    port = getattr(args, "port", DEFAULT_PORT)
    print(
        f"ahp-server {__version__}: protocol {PROTOCOL_VERSION} "
        f"(also negotiates {', '.join(v for v in SUPPORTED_VERSIONS if v != PROTOCOL_VERSION)}).\n"
        f"The WebSocket host (ws://{host}:{port}) is not implemented yet; "
        "this build ships the protocol core only.",
        file=sys.stdout,
    )
    return 0

"""The protocol version table and version negotiation.

Layer: protocol (pure). WIRE-SUMMARY §3.1; ``types/version/registry.ts`` upstream.

Negotiation is table-driven so that newer versions (0.9, 1.0) can be added as
rows without touching callers: each row says which version it is and whether
this host implements it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "ACTION_INTRODUCED_IN",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "ProtocolVersion",
    "blocked_action_types",
    "negotiate",
    "parse_version",
]

PROTOCOL_VERSION = "0.7.0"


@dataclass(frozen=True, slots=True)
class ProtocolVersion:
    """One row of the version table."""

    version: str
    note: str


#: Versions this host speaks, newest first (upstream's SUPPORTED_PROTOCOL_VERSIONS
#: at c72272f8). A connection keeps the version chosen at ``initialize``.
VERSION_TABLE: tuple[ProtocolVersion, ...] = (
    ProtocolVersion("0.7.0", "current: chats, side chats, working-directory subsets"),
    ProtocolVersion("0.6.0", "older clients; same wire shapes for what we send"),
    ProtocolVersion("0.5.2", "older clients"),
    ProtocolVersion("0.5.1", "older clients"),
)

SUPPORTED_VERSIONS: tuple[str, ...] = tuple(row.version for row in VERSION_TABLE)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``"MAJOR.MINOR.PATCH"`` as a tuple, or ``None`` when it is not plain SemVer."""
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    major, minor, patch = (int(p) for p in parts)
    return major, minor, patch


def negotiate(offered: Sequence[str], supported: Iterable[str] = SUPPORTED_VERSIONS) -> str | None:
    """Pick the version for a connection, or ``None`` when none is acceptable.

    The host SHOULD pick the highest version it implements among those the
    client offers (WIRE-SUMMARY §3.1); the client's order breaks no ties because
    versions are distinct.
    """
    ours = set(supported)
    candidates = [v for v in offered if v in ours and parse_version(v) is not None]
    if not candidates:
        return None
    return max(candidates, key=lambda v: parse_version(v) or (0, 0, 0))


#: The protocol version that introduced each action type newer than our oldest
#: supported version (upstream ``ACTION_INTRODUCED_IN``); older types are 0.5.1 or before.
ACTION_INTRODUCED_IN: dict[str, str] = {
    "session/mcpServerStartRequested": "0.5.2",
    "session/mcpServerStopRequested": "0.5.2",
    "chat/toolCallAuthRequired": "0.6.0",
    "chat/toolCallAuthResolved": "0.6.0",
    "changeset/filesReviewChanged": "0.6.0",
    "session/workingDirectorySet": "0.7.0",
    "session/workingDirectoryRemoved": "0.7.0",
    "chat/workingDirectorySet": "0.7.0",
    "chat/workingDirectoryRemoved": "0.7.0",
}


def blocked_action_types(version: str) -> frozenset[str]:
    """Action types a client that negotiated ``version`` must never receive (§3.1)."""
    negotiated = parse_version(version) or (0, 0, 0)
    return frozenset(
        action
        for action, introduced in ACTION_INTRODUCED_IN.items()
        if (parse_version(introduced) or (0, 0, 0)) > negotiated
    )

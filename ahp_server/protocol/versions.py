"""The protocol version table, version negotiation, and per-version filtering.

Layer: protocol (pure: no I/O, no asyncio). Normative text: the 1.0 release's
``docs/versioning.md`` ("Version Format", "Negotiation", "Backward
Compatibility") and ``docs/lifecycle.md`` ("Initialize"); for the 0.x rows
WIRE-SUMMARY §3.1. The upstream counterpart is ``types/version/registry.ts``.

What it answers:

* which offered version a connection speaks (:func:`negotiate`), or that the
  offer is malformed (:class:`MalformedVersionError`, -32602) or matches
  nothing (``None``: the caller answers -32005 with
  ``data.supportedVersions`` = :func:`supported_versions` and closes);
* which wire shape ("view") a connection at that version gets
  (:func:`row_for`, :attr:`VersionRow.view`);
* which action types and notifications it must never receive
  (:func:`blocked_action_types`, :func:`blocked_notification_methods`).

Negotiation is table-driven: each :class:`VersionRow` is a caret range or one
exact version, with the view it gets and whether this host serves it today.
The default table is :data:`SERVED_TABLE`; :data:`FULL_TABLE` also holds the
1.0-era rows that are not served yet (``negotiate(offered, table=FULL_TABLE)``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from ahp_server.protocol.errors import InvalidParams

__all__ = [
    "ACTION_INTRODUCED_IN",
    "FULL_TABLE",
    "NOTIFICATION_INTRODUCED_IN",
    "PROTOCOL_VERSION",
    "SERVED_TABLE",
    "SUPPORTED_VERSIONS",
    "VERSIONS_0_7",
    "MalformedVersionError",
    "Version",
    "VersionRow",
    "View",
    "blocked_action_types",
    "blocked_notification_methods",
    "negotiate",
    "parse_version",
    "row_for",
    "supported_versions",
]

#: ``(MAJOR, MINOR, PATCH)``; tuples compare in SemVer precedence order.
Version = tuple[int, int, int]

#: The newest version this host serves, the shape of its canonical state and log
#: (``--version``, the ``listening`` log line).
PROTOCOL_VERSION = "1.0.0"

# versioning.md "Version Format": three non-negative integer components, no
# leading zeros, no prerelease or build metadata. ``[0-9]`` (not ``\d``) keeps
# non-ASCII digits out; ``fullmatch`` refuses a trailing newline.
_SEMVER = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")

#: How much of a malformed entry an error message quotes.
_QUOTE_LIMIT = 64


def parse_version(text: object) -> Version | None:
    """``"MAJOR.MINOR.PATCH"`` as a tuple, or ``None`` when ``text`` is not one.

    Strict (versioning.md "Version Format"): a string of three non-negative
    integers without leading zeros ("0" itself is fine) and without prerelease
    or build metadata. Anything else — ``"1.0"``, ``"01.0.0"``,
    ``"1.0.0-rc1"``, ``"1.0.0+x"``, ``""``, a non-string — is ``None``.
    """
    if not isinstance(text, str):
        return None
    match = _SEMVER.fullmatch(text)
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _version(text: str) -> Version:
    """A version literal of this module's own tables (a typo is a bug, found at import)."""
    parsed = parse_version(text)
    if parsed is None:  # pragma: no cover - the tables below are well formed
        raise ValueError(f"not a MAJOR.MINOR.PATCH version: {text!r}")
    return parsed


class MalformedVersionError(InvalidParams):
    """An offered protocol version is not ``MAJOR.MINOR.PATCH`` (JSON-RPC -32602).

    versioning.md "Negotiation": "Malformed versions produce an explicit
    error". It is an :class:`~ahp_server.protocol.errors.InvalidParams`, so the
    one place exceptions become JSON-RPC errors
    (:func:`ahp_server.protocol.jsonrpc.error_response`) answers it with
    -32602 — not -32005, which means "well-formed, but none is spoken here".
    The connection stays open: the client may retry ``initialize``.
    """

    def __init__(self, entry: object) -> None:
        quoted = repr(entry)
        if len(quoted) > _QUOTE_LIMIT:
            quoted = quoted[: _QUOTE_LIMIT - 3] + "..."
        super().__init__(
            f"invalid params: protocolVersions entry {quoted} is not a "
            "MAJOR.MINOR.PATCH version (no leading zeros, prerelease or build metadata)"
        )
        #: The offending entry, as offered.
        self.entry = entry


class View(Enum):
    """The wire shape a connection gets: which schema its state and actions follow."""

    #: The AHP 1.0 schema (``shared/spec-1.0``).
    V1_0 = "1.0"
    #: The 0.9 schema: the 1.0 shape minus what is newer than 0.9 (ACTIONS.md).
    V0_9 = "0.9"
    #: The 0.7.0 schema (``shared/spec``), with per-version action blocking
    #: for older 0.5.x/0.6.0 clients (:func:`blocked_action_types`).
    V0_7 = "0.7"


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One row of the version table: a range of versions and how they are served.

    ``low <= version < high``. ``spec`` is how the row is written (``"^1.0.0"``
    or ``"0.7.0"``) and how ``data.supportedVersions`` advertises it: the
    1.0 ``UnsupportedProtocolVersionErrorData`` allows versions and SemVer
    ranges alike.
    """

    spec: str
    low: Version
    high: Version
    view: View
    #: Whether the running host negotiates this row today.
    served: bool
    note: str

    def accepts(self, version: Version) -> bool:
        """Whether ``version`` falls in this row."""
        return self.low <= version < self.high


def _caret(base: str, view: View, *, served: bool, note: str) -> VersionRow:
    """``^base``: same MAJOR when MAJOR >= 1, else same MINOR (versioning.md
    "Compatibility Guarantee"). ``^1.0.0`` is ``>=1.0.0 <2.0.0``; ``^0.9.0`` is
    ``>=0.9.0 <0.10.0``."""
    low = _version(base)
    major, minor, _ = low
    if major == 0 and minor == 0:  # pragma: no cover - no 0.0.x baselines exist
        raise ValueError("a ^0.0.x range is a single version: use an exact row")
    high = (major + 1, 0, 0) if major > 0 else (0, minor + 1, 0)
    return VersionRow(f"^{base}", low, high, view, served, note)


def _exact(version: str, view: View, *, served: bool, note: str) -> VersionRow:
    """Exactly ``version``."""
    low = _version(version)
    return VersionRow(version, low, (low[0], low[1], low[2] + 1), view, served, note)


_OLDER = "older clients: the 0.7 shapes, newer action types blocked"

#: Every version this host knows how to speak, newest first; the rows do not
#: overlap. versioning.md "Negotiation": the released compatibility baselines
#: are ``1.0.0`` and ``0.9.0`` (caret ranges, whatever the offer order).
FULL_TABLE: Final[tuple[VersionRow, ...]] = (
    _caret("1.0.0", View.V1_0, served=True, note="AHP 1.0 baseline"),
    _exact(
        "0.10.0",
        View.V1_0,
        served=True,
        note="pre-release 1.0 (VS Code's host treats it as an alias of 1.0)",
    ),
    _caret("0.9.0", View.V0_9, served=True, note="AHP 0.9 baseline"),
    _exact("0.7.0", View.V0_7, served=True, note="current: chats, side chats, working directories"),
    _exact("0.6.0", View.V0_7, served=True, note=_OLDER),
    _exact("0.5.2", View.V0_7, served=True, note=_OLDER),
    _exact("0.5.1", View.V0_7, served=True, note=_OLDER),
)

#: The rows the running host negotiates (all of them: 1.0 and 0.9 get the
#: canonical state, 0.7-era versions its 0.7 view, host/core/edge.py).
SERVED_TABLE: Final[tuple[VersionRow, ...]] = tuple(row for row in FULL_TABLE if row.served)


def supported_versions(table: Iterable[VersionRow] = SERVED_TABLE) -> tuple[str, ...]:
    """``data.supportedVersions`` of a -32005 error: each row's base version, newest first.

    versioning.md "Negotiation" 3. and "Backward Compatibility" 2.: the error
    carries the versions the host can speak; a caret row is advertised by its
    baseline (``"1.0.0"`` for ``^1.0.0``), as upstream's hosts send "their
    supported baselines": a plain version any client can offer back.
    """
    rows = sorted(table, key=lambda row: row.low, reverse=True)
    return tuple(".".join(map(str, row.low)) for row in rows)


#: What -32005 advertises: every version the host serves, newest first.
SUPPORTED_VERSIONS: Final[tuple[str, ...]] = supported_versions()

#: The versions whose view is 0.7, newest first: what a peer that computes
#: 0.7 states (the 0.7 reducers) offers.
VERSIONS_0_7: Final[tuple[str, ...]] = supported_versions(
    row for row in FULL_TABLE if row.view is View.V0_7
)


def row_for(version: str, table: Iterable[VersionRow] = FULL_TABLE) -> VersionRow | None:
    """The row a negotiated ``version`` falls in (hence its view), or ``None``."""
    parsed = parse_version(version)
    if parsed is None:
        return None
    return next((row for row in table if row.accepts(parsed)), None)


def negotiate(offered: Sequence[str], table: Iterable[VersionRow] = SERVED_TABLE) -> str | None:
    """The version a connection speaks: an exact entry of ``offered``, or ``None``.

    versioning.md "Negotiation" 2.: the host selects the *highest SemVer*
    entry that falls in a row of ``table`` and returns that exact offered
    string, whatever the offer order ("regardless of offer order"). ``None``
    when no entry falls in a row: the caller MUST answer -32005 with
    ``data.supportedVersions`` and close ("Negotiation" 3.).

    Malformed entries: versioning.md "Negotiation" says "Malformed versions
    produce an explicit error", so *any* malformed entry — even next to valid
    ones — raises :class:`MalformedVersionError` (-32602) before anything is
    matched, as upstream's ``negotiateProtocolVersion`` throws on the first
    entry ``parseSemver`` refuses. A bare string instead of a list is malformed
    too. An empty list is well formed and matches nothing (``None``).
    """
    if isinstance(offered, str):
        raise MalformedVersionError(offered)
    rows = tuple(table)
    parsed: list[tuple[Version, str]] = []
    for entry in offered:
        version = parse_version(entry)
        if version is None:
            raise MalformedVersionError(entry)
        parsed.append((version, entry))
    accepted = [(v, entry) for v, entry in parsed if any(row.accepts(v) for row in rows)]
    if not accepted:
        return None
    return max(accepted)[1]


# ACTIONS.md ("registry tag" column, = the 1.0 registry's ACTION_INTRODUCED_IN):
# a host MUST NOT send an action whose tag is newer than the negotiated version
# (versioning.md "Forward Compatibility" 5., "Backward Compatibility" 3.). The
# tag, not the "released in" column, is what upstream's isActionKnownToVersion
# compares: with the 1.0 baselines only the two 0.10.0 actions are withheld
# from a 0.9.x client.
#: The protocol version that introduced each of the 106 AHP 1.0 action types.
ACTION_INTRODUCED_IN: Final[Mapping[str, str]] = {
    "root/agentsChanged": "0.1.0",
    "root/activeSessionsChanged": "0.1.0",
    "session/ready": "0.1.0",
    "session/creationFailed": "0.1.0",
    "session/chatAdded": "0.4.0",
    "session/chatRemoved": "0.4.0",
    "session/chatUpdated": "0.4.0",
    "session/chatsReordered": "0.9.0",
    "session/defaultChatChanged": "0.4.0",
    "chat/turnStarted": "0.4.0",
    "chat/delta": "0.4.0",
    "chat/responsePart": "0.4.0",
    "chat/toolCallStart": "0.4.0",
    "chat/toolCallDelta": "0.4.0",
    "chat/toolCallReady": "0.4.0",
    "chat/toolCallConfirmed": "0.4.0",
    "chat/toolCallComplete": "0.4.0",
    "chat/toolCallResultConfirmed": "0.4.0",
    "chat/toolCallContentChanged": "0.4.0",
    "chat/toolCallAuthRequired": "0.6.0",
    "chat/toolCallAuthResolved": "0.6.0",
    "chat/turnComplete": "0.4.0",
    "chat/turnCancelled": "0.4.0",
    "chat/error": "0.4.0",
    "chat/turnResume": "0.9.0",
    "chat/activityChanged": "0.5.0",
    "chat/backgroundWorkSet": "0.9.0",
    "chat/backgroundWorkRemoved": "0.9.0",
    "chat/movableChanged": "0.9.0",
    "chat/changesetsChanged": "0.9.0",
    "chat/canvasesChanged": "0.10.0",
    "canvas/stateChanged": "0.10.0",
    "chat/workingDirectorySet": "0.7.0",
    "chat/workingDirectoryRemoved": "0.7.0",
    "session/titleChanged": "0.1.0",
    "chat/usage": "0.4.0",
    "chat/reasoning": "0.4.0",
    "session/serverToolsChanged": "0.1.0",
    "session/activeClientSet": "0.5.0",
    "session/activeClientRemoved": "0.5.0",
    "session/workingDirectorySet": "0.7.0",
    "session/workingDirectoryRemoved": "0.7.0",
    "session/workingDirectoryReplaced": "0.8.0",
    "session/inputNeededSet": "0.5.1",
    "session/inputNeededRemoved": "0.5.1",
    "chat/pendingMessageSet": "0.4.0",
    "chat/pendingMessageRemoved": "0.4.0",
    "chat/queuedMessagesReordered": "0.4.0",
    "chat/draftChanged": "0.5.0",
    "chat/isReadChanged": "0.9.0",
    "chat/isArchivedChanged": "0.9.0",
    "chat/inputRequested": "0.4.0",
    "chat/inputAnswerChanged": "0.4.0",
    "chat/inputCompleted": "0.4.0",
    "session/customizationsChanged": "0.1.0",
    "session/customizationToggled": "0.1.0",
    "session/customizationUpdated": "0.1.0",
    "session/customizationRemoved": "0.2.0",
    "session/mcpServerStateChanged": "0.3.0",
    "session/mcpServerStartRequested": "0.5.2",
    "session/mcpServerStopRequested": "0.5.2",
    "session/mcpServerBackgroundRequested": "0.9.0",
    "chat/truncated": "0.4.0",
    "chat/turnsLoaded": "0.5.1",
    "session/isReadChanged": "0.1.0",
    "session/isArchivedChanged": "0.1.0",
    "session/activityChanged": "0.1.0",
    "session/changesetsChanged": "0.2.0",
    "session/configChanged": "0.1.0",
    "session/metaChanged": "0.1.0",
    "changeset/statusChanged": "0.2.0",
    "changeset/fileSet": "0.2.0",
    "changeset/fileRemoved": "0.2.0",
    "changeset/filesReviewChanged": "0.6.0",
    "changeset/contentChanged": "0.4.0",
    "changeset/operationsChanged": "0.2.0",
    "changeset/operationStatusChanged": "0.3.0",
    "changeset/cleared": "0.2.0",
    "annotations/set": "0.4.0",
    "annotations/updated": "0.4.0",
    "annotations/removed": "0.4.0",
    "annotations/entrySet": "0.4.0",
    "annotations/entryRemoved": "0.4.0",
    "root/terminalsChanged": "0.1.0",
    "root/configChanged": "0.1.0",
    "terminal/data": "0.1.0",
    "terminal/input": "0.1.0",
    "terminal/resized": "0.1.0",
    "terminal/claimed": "0.1.0",
    "terminal/titleChanged": "0.1.0",
    "terminal/cwdChanged": "0.1.0",
    "terminal/exited": "0.1.0",
    "terminal/cleared": "0.1.0",
    "terminal/commandDetectionAvailable": "0.1.0",
    "terminal/commandExecuted": "0.1.0",
    "terminal/commandFinished": "0.1.0",
    "resourceWatch/changed": "0.2.0",
    "automation/createRequested": "0.8.0",
    "automation/updateRequested": "0.8.0",
    "automation/set": "0.8.0",
    "automation/removed": "0.8.0",
    "automationRun/lifecycleChanged": "0.8.0",
    "automationRun/sessionSet": "0.8.0",
    "automationRun/sessionRemoved": "0.8.0",
    "automationRun/primarySessionChanged": "0.8.0",
    "automationRun/cancelRequested": "0.8.0",
}

#: The protocol version that introduced each server notification method of AHP
#: 1.0 (ACTIONS.md "Server notifications"; the ``action`` notification is
#: versioned per action type above).
NOTIFICATION_INTRODUCED_IN: Final[Mapping[str, str]] = {
    "root/sessionAdded": "0.1.0",
    "root/sessionRemoved": "0.1.0",
    "root/sessionSummaryChanged": "0.1.0",
    "root/progress": "0.5.0",
    "auth/required": "0.1.0",
    "otlp/exportLogs": "0.2.0",
    "otlp/exportTraces": "0.2.0",
    "otlp/exportMetrics": "0.2.0",
}

_ACTION_TAGS: Final = {name: _version(tag) for name, tag in ACTION_INTRODUCED_IN.items()}
_NOTIFICATION_TAGS: Final = {
    name: _version(tag) for name, tag in NOTIFICATION_INTRODUCED_IN.items()
}


def _newer_than(tags: Mapping[str, Version], version: str) -> frozenset[str]:
    negotiated = parse_version(version)
    if negotiated is None:
        raise MalformedVersionError(version)
    return frozenset(name for name, tag in tags.items() if tag > negotiated)


def blocked_action_types(version: str) -> frozenset[str]:
    """Action types a connection that negotiated ``version`` must never receive.

    Those whose tag in :data:`ACTION_INTRODUCED_IN` is newer than ``version``
    (versioning.md "Backward Compatibility" 3.; ACTIONS.md). ``version`` is a
    negotiated version, so a malformed one raises :class:`MalformedVersionError`.
    """
    return _newer_than(_ACTION_TAGS, version)


def blocked_notification_methods(version: str) -> frozenset[str]:
    """Notification methods a connection at ``version`` must never receive.

    As :func:`blocked_action_types`, from :data:`NOTIFICATION_INTRODUCED_IN`.
    """
    return _newer_than(_NOTIFICATION_TAGS, version)

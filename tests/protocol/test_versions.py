"""The version table, negotiation and per-version filtering.

Normative text: ``shared/spec-1.0/docs/versioning.md`` ("Version Format",
"Negotiation", "Backward Compatibility"), WIRE-SUMMARY §3.1 for the 0.x rows.
The action and notification tables are checked against
``shared/spec-1.0/ACTIONS.md``, parsed here rather than copied.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ahp_server.protocol.errors import InvalidParams, JsonRpcErrorCode
from ahp_server.protocol.jsonrpc import error_response
from ahp_server.protocol.versions import (
    ACTION_INTRODUCED_IN,
    FULL_TABLE,
    NOTIFICATION_INTRODUCED_IN,
    SERVED_TABLE,
    SUPPORTED_VERSIONS,
    MalformedVersionError,
    View,
    blocked_action_types,
    blocked_notification_methods,
    negotiate,
    parse_version,
    row_for,
    supported_versions,
)

ACTIONS_MD = Path(__file__).resolve().parents[3] / "shared" / "spec-1.0" / "ACTIONS.md"


def _section(title: str) -> list[list[str]]:
    """The rows (cells, backticks stripped) of the table under ``## {title}``."""
    text = ACTIONS_MD.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    rows = []
    for line in text[start : end if end != -1 else None].splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and not set(line) <= set("|- ") and cells[0] not in ("#", "method"):
            rows.append(cells)
    return rows


def spec_actions() -> dict[str, tuple[str, bool]]:
    """ACTIONS.md actions: wire string -> (registry tag, already in 0.7)."""
    return {row[1]: (row[3], row[5] == "yes") for row in _section("Actions")}


def spec_notifications() -> dict[str, str]:
    """ACTIONS.md server notifications: method -> registry tag."""
    return {row[0]: row[1] for row in _section("Server notifications")}


def key(version: str) -> tuple[int, int, int]:
    parsed = parse_version(version)
    assert parsed is not None, version
    return parsed


# -- the spec text itself -------------------------------------------------------------------


def test_actions_md_parses_as_106_actions_and_8_notifications() -> None:
    actions = spec_actions()
    assert len(actions) == 106
    assert "Actions (106)" in ACTIONS_MD.read_text(encoding="utf-8")
    assert sum(1 for _, in_07 in actions.values() if in_07) == 85  # "85 actions existed in 0.7.0"
    assert len(spec_notifications()) == 8


# -- the table ------------------------------------------------------------------------------


def test_every_row_is_served() -> None:
    assert SERVED_TABLE == FULL_TABLE
    assert SUPPORTED_VERSIONS == ("1.0.0", "0.10.0", "0.9.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1")
    assert supported_versions() == SUPPORTED_VERSIONS


def test_full_table_rows() -> None:
    rows = {row.spec: (row.low, row.high, row.view, row.served) for row in FULL_TABLE}
    assert rows == {
        "^1.0.0": ((1, 0, 0), (2, 0, 0), View.V1_0, True),
        "0.10.0": ((0, 10, 0), (0, 10, 1), View.V1_0, True),
        "^0.9.0": ((0, 9, 0), (0, 10, 0), View.V0_9, True),
        "0.7.0": ((0, 7, 0), (0, 7, 1), View.V0_7, True),
        "0.6.0": ((0, 6, 0), (0, 6, 1), View.V0_7, True),
        "0.5.2": ((0, 5, 2), (0, 5, 3), View.V0_7, True),
        "0.5.1": ((0, 5, 1), (0, 5, 2), View.V0_7, True),
    }
    # A caret row is advertised by its baseline.
    assert supported_versions(FULL_TABLE[3:]) == ("0.7.0", "0.6.0", "0.5.2", "0.5.1")


def test_rows_are_newest_first_and_disjoint() -> None:
    for newer, older in itertools.pairwise(FULL_TABLE):
        assert older.high <= newer.low, (newer.spec, older.spec)


@pytest.mark.parametrize(
    ("version", "spec", "view"),
    [
        ("1.0.0", "^1.0.0", View.V1_0),
        ("1.99.7", "^1.0.0", View.V1_0),
        ("0.10.0", "0.10.0", View.V1_0),
        ("0.9.0", "^0.9.0", View.V0_9),
        ("0.9.3", "^0.9.0", View.V0_9),
        ("0.7.0", "0.7.0", View.V0_7),
        ("0.6.0", "0.6.0", View.V0_7),
        ("0.5.2", "0.5.2", View.V0_7),
        ("0.5.1", "0.5.1", View.V0_7),
    ],
)
def test_row_for_gives_the_view(version: str, spec: str, view: View) -> None:
    row = row_for(version)
    assert row is not None
    assert (row.spec, row.view) == (spec, view)


@pytest.mark.parametrize("version", ["2.0.0", "0.10.1", "0.8.0", "0.7.1", "0.5.0", "1.0"])
def test_row_for_outside_the_table(version: str) -> None:
    assert row_for(version) is None


def test_row_for_a_table_without_a_row() -> None:
    older = tuple(row for row in FULL_TABLE if row.view is View.V0_7)
    assert row_for("1.0.0", older) is None
    assert row_for("0.7.0", older) is not None


# -- negotiation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (["1.0.0", "0.10.0", "0.9.0"], "1.0.0"),  # VS Code's offer
        (["1.0.0", "0.9.0"], "1.0.0"),  # the 1.x SDKs' offer
        (["0.9.0", "0.10.0", "1.0.0"], "1.0.0"),  # regardless of offer order
        (["0.9.3"], "0.9.3"),  # the exact offered string, inside ^0.9.0
        (["1.4.2", "1.0.0"], "1.4.2"),
        (["1.0.0", "1.4.2"], "1.4.2"),
        (["0.10.0"], "0.10.0"),
        (["0.10.1"], None),  # 0.10.0 is an exact row, not a range
        (["2.0.0"], None),
        (["0.8.0"], None),
        (["0.9.0", "0.7.0"], "0.9.0"),
        (["0.7.0"], "0.7.0"),
        (["0.5.1", "0.7.0"], "0.7.0"),
        (["1.0.0", "0.9.0", "0.6.0"], "1.0.0"),
        (["0.5.2"], "0.5.2"),
        (["0.7.1"], None),  # 0.7.0 is exact too
        (["0.3.0"], None),
        ([], None),
    ],
)
def test_negotiate(offered: list[str], chosen: str | None) -> None:
    assert negotiate(offered) == chosen
    assert negotiate(offered, table=FULL_TABLE) == chosen
    older = tuple(row for row in FULL_TABLE if row.view is View.V0_7)
    # Against the 0.7-era rows alone, only those are picked.
    picked = negotiate(offered, older)
    assert picked is None or picked.startswith(("0.7.", "0.6.", "0.5."))


MALFORMED = [
    "1.0",
    "01.0.0",
    "1.00.0",
    "1.0.00",
    "1.0.0-rc1",
    "1.0.0+x",
    "",
    " 1.0.0",
    "1.0.0\n",
    "v1.0.0",
    "1.0.0.0",
    "-1.0.0",
    "1..0",
    "latest",
    "\uff11.0.0",  # a fullwidth digit: not ASCII
    "1.\u00b2.0",  # a superscript two: str.isdigit() says yes
]


@pytest.mark.parametrize("entry", [*MALFORMED, 1, None, 1.0, ["1.0.0"]])
def test_malformed_entries_are_an_error(entry: object) -> None:
    for offered in ([entry], ["0.7.0", entry], [entry, "1.0.0"]):
        for table in (SERVED_TABLE, FULL_TABLE):
            with pytest.raises(MalformedVersionError) as info:
                negotiate(offered, table)  # type: ignore[arg-type]
            assert info.value.entry == entry


@pytest.mark.parametrize("offered", ["1.0.0", ""])
def test_a_bare_string_is_not_a_list_of_versions(offered: str) -> None:
    with pytest.raises(MalformedVersionError):
        negotiate(offered)


@pytest.mark.parametrize("entry", MALFORMED)
def test_parse_version_refuses_malformed(entry: str) -> None:
    assert parse_version(entry) is None


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("0.0.0", (0, 0, 0)), ("0.7.0", (0, 7, 0)), ("10.20.30", (10, 20, 30))],
)
def test_parse_version(text: str, parsed: tuple[int, int, int]) -> None:
    assert parse_version(text) == parsed


def test_malformed_becomes_32602_not_32005() -> None:
    with pytest.raises(MalformedVersionError) as info:
        negotiate(["1.0"])
    assert isinstance(info.value, InvalidParams)
    assert not info.value.close
    response = error_response(7, info.value)
    assert response.error.code == JsonRpcErrorCode.InvalidParams
    assert int(JsonRpcErrorCode.InvalidParams) == -32602
    assert "'1.0'" in response.error.message


def test_malformed_message_quotes_a_bounded_entry() -> None:
    with pytest.raises(MalformedVersionError) as info:
        negotiate(["x" * 10_000])
    assert len(info.value.message) < 200


_semver = st.builds(
    lambda a, b, c: f"{a}.{b}.{c}",
    st.integers(0, 3),
    st.integers(0, 12),
    st.integers(0, 4),
)


@given(
    st.lists(_semver, max_size=8).flatmap(lambda xs: st.tuples(st.just(xs), st.permutations(xs)))
)
def test_negotiation_ignores_offer_order(offers: tuple[list[str], list[str]]) -> None:
    offered, shuffled = offers
    for table in (SERVED_TABLE, FULL_TABLE):
        assert negotiate(shuffled, table) == negotiate(offered, table)


@given(st.lists(_semver, max_size=8))
def test_negotiation_picks_the_highest_acceptable_offer(offered: list[str]) -> None:
    for table in (SERVED_TABLE, FULL_TABLE):
        acceptable = [v for v in offered if any(row.accepts(key(v)) for row in table)]
        chosen = negotiate(offered, table)
        if not acceptable:
            assert chosen is None
        else:
            assert chosen in offered
            assert key(chosen) == max(key(v) for v in acceptable)


# -- per-version filtering ------------------------------------------------------------------


def test_action_table_covers_exactly_the_actions_of_actions_md() -> None:
    spec = spec_actions()
    assert set(ACTION_INTRODUCED_IN) == set(spec)
    assert len(ACTION_INTRODUCED_IN) == 106
    assert {a: t for a, (t, _) in spec.items()} == dict(ACTION_INTRODUCED_IN)


def test_notification_table_matches_actions_md() -> None:
    assert dict(NOTIFICATION_INTRODUCED_IN) == spec_notifications()


def newer_than(tags: dict[str, str], version: str) -> frozenset[str]:
    return frozenset(name for name, tag in tags.items() if key(tag) > key(version))


def test_a_09_connection_never_gets_what_is_newer_than_09() -> None:
    tags = {a: t for a, (t, _) in spec_actions().items()}
    blocked = blocked_action_types("0.9.0")
    # ACTIONS.md: "only the two actions tagged 0.10.0 ... must be withheld from
    # a client that negotiated 0.9.0".
    assert blocked == newer_than(tags, "0.9.0") == {"chat/canvasesChanged", "canvas/stateChanged"}
    assert not any(key(tags[a]) <= (0, 9, 0) for a in blocked)
    assert blocked_action_types("0.9.3") == blocked


@pytest.mark.parametrize("version", ["1.0.0", "1.4.2", "0.10.0"])
def test_a_10_connection_gets_every_action(version: str) -> None:
    assert blocked_action_types(version) == frozenset()
    assert blocked_notification_methods(version) == frozenset()


def test_a_07_connection_never_gets_the_actions_new_since_07() -> None:
    new = {a for a, (_, in_07) in spec_actions().items() if not in_07}
    assert len(new) == 21
    assert blocked_action_types("0.7.0") == new


@pytest.mark.parametrize(
    ("version", "also_blocked"),
    [
        ("0.6.0", {"session/workingDirectorySet", "chat/workingDirectoryRemoved"}),
        ("0.5.2", {"chat/toolCallAuthRequired", "changeset/filesReviewChanged"}),
        ("0.5.1", {"session/mcpServerStartRequested", "session/mcpServerStopRequested"}),
    ],
)
def test_older_connections_keep_their_blocking(version: str, also_blocked: set[str]) -> None:
    tags = {a: t for a, (t, _) in spec_actions().items()}
    blocked = blocked_action_types(version)
    assert blocked == newer_than(tags, version)
    assert also_blocked <= blocked
    assert "chat/turnsLoaded" not in blocked  # tagged 0.5.1
    assert blocked > blocked_action_types("0.7.0")


def test_notifications_newer_than_the_version_are_blocked() -> None:
    assert blocked_notification_methods("0.7.0") == frozenset()
    assert blocked_notification_methods("0.4.0") == {"root/progress"}
    assert blocked_notification_methods("0.1.0") == {
        "root/progress",
        "otlp/exportLogs",
        "otlp/exportTraces",
        "otlp/exportMetrics",
    }


def test_blocking_refuses_a_malformed_version() -> None:
    with pytest.raises(MalformedVersionError):
        blocked_action_types("0.7")
    with pytest.raises(MalformedVersionError):
        blocked_notification_methods("")

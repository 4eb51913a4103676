"""Version negotiation from the table (WIRE-SUMMARY §3.1)."""

from __future__ import annotations

import pytest

from ahp_server.protocol.versions import (
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    negotiate,
    parse_version,
)


def test_table_matches_upstream_at_c72272f8() -> None:
    assert PROTOCOL_VERSION == "0.7.0"
    assert SUPPORTED_VERSIONS == ("0.7.0", "0.6.0", "0.5.2", "0.5.1")


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (["0.7.0"], "0.7.0"),
        (["0.5.1", "0.7.0"], "0.7.0"),  # the highest we implement wins
        (["1.0.0", "0.9.0", "0.6.0"], "0.6.0"),  # newer versions we do not speak are skipped
        (["0.5.2"], "0.5.2"),
        (["0.3.0"], None),
        ([], None),
        (["latest", "0.7"], None),
    ],
)
def test_negotiate(offered: list[str], chosen: str | None) -> None:
    assert negotiate(offered) == chosen


def test_parse_version() -> None:
    assert parse_version("0.7.0") == (0, 7, 0)
    assert parse_version("1.2") is None
    assert parse_version("1.2.x") is None

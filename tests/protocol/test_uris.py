"""Channel URIs (``protocol/uris.py``): one reading of every URI, and the normal form."""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ahp_server.protocol.uris import (
    ChannelRef,
    normal_form,
    parse_changeset,
    parse_channel,
    quote_segment,
    session_changeset,
    session_of,
    turn_changeset,
)
from ahp_server.protocol.uris import unquote as uri_unquote

TEXT = st.text(st.characters(codec="utf-8"), max_size=20)  # no lone surrogates


@given(TEXT)
def test_percent_encoding_is_urllibs(text: str) -> None:
    """Changeset URIs stored before this module keep their spelling."""
    assert quote_segment(text) == quote(text, safe="")
    assert uri_unquote(quote_segment(text)) == text


@pytest.mark.parametrize("text", ["%", "%z", "a%2", "%E9%ff", "%C3%A9", "%%41"])
def test_unquote_is_urllibs_on_odd_input(text: str) -> None:
    assert uri_unquote(text) == unquote(text)


@given(TEXT, TEXT)
def test_changeset_uris_name_their_session_once(session_id: str, turn_id: str) -> None:
    session = "ahp-session:/" + (session_id or "s")  # createSession refuses an empty id
    whole, turn = session_changeset(session), turn_changeset(session, turn_id)
    assert parse_changeset(whole) == (session, None)
    assert session_of(whole) == session
    if turn_id:
        assert parse_changeset(turn) == (session, turn_id)
        assert session_of(turn) == session


def test_a_percent_encoded_key_names_the_decoded_session() -> None:
    """The access check and the changeset service read it the same way (issue 26)."""
    uri = "ahp-changeset:/alice%2Fsecret/changeset/session"
    assert parse_channel(uri) == ChannelRef("changeset", "ahp-session:/alice/secret")
    # Not the canonical spelling: no changeset, no session.
    assert parse_channel("ahp-changeset:/alice%2fsecret/changeset/session") == ChannelRef(
        "changeset", None
    )


@pytest.mark.parametrize(
    ("uri", "ref"),
    [
        ("ahp-root://", ChannelRef("root")),
        ("ahp-session:/s1", ChannelRef("session", "ahp-session:/s1")),
        ("ahp-session:/s1/annotations", ChannelRef("annotations", "ahp-session:/s1")),
        ("ahp-session:/annotations", ChannelRef("session", "ahp-session:/annotations")),
        ("ahp-chat:/c1", ChannelRef("chat")),
        ("ahp-terminal:/t1", ChannelRef("terminal")),
        ("ahp-resource-watch:/w1", ChannelRef("watch")),
        ("file:///tmp", ChannelRef("other")),
    ],
)
def test_every_kind_of_channel(uri: str, ref: ChannelRef) -> None:
    assert parse_channel(uri) == ref


@pytest.mark.parametrize(
    ("uri", "normal"),
    [
        ("ahp-session:/alice%2Fsecret", "ahp-session:/alice%2Fsecret"),
        ("ahp-session:/alice%2fsecret", "ahp-session:/alice%2Fsecret"),
        ("ahp-session:/%61lice%7E", "ahp-session:/alice~"),
        ("ahp-session:/a/./b/../c", "ahp-session:/a/c"),
        ("ahp-session:/a/..", "ahp-session:/"),
        ("ahp-chat:/x?%7e#%2f", "ahp-chat:/x?~#%2F"),
        ("ahp-root://", "ahp-root://"),
        ("ahp-root://host/./a", "ahp-root://host/a"),
    ],
)
def test_normal_form(uri: str, normal: str) -> None:
    """RFC 3986 §6.2.2: escapes of unreserved characters decoded, hex in uppercase,
    dot-segments removed."""
    assert normal_form(uri) == normal
    assert normal_form(normal) == normal


@pytest.mark.parametrize("uri", ["ahp-session:/a%zz", "ahp-session:/a%", "ahp-session:/%4"])
def test_a_stray_percent_is_not_a_uri(uri: str) -> None:
    with pytest.raises(ValueError, match="percent-encoded"):
        normal_form(uri)

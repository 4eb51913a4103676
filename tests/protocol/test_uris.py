"""Channel URIs (``protocol/uris.py``): one reading of every URI, and the normal form."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any
from urllib.parse import quote, unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ahp_server.protocol.uris import (
    URI_PARAMS,
    ChannelRef,
    default_chat,
    default_chat_session,
    normal_form,
    parse_changeset,
    parse_channel,
    quote_segment,
    session_changeset,
    session_of,
    session_uri_problem,
    turn_changeset,
)
from ahp_server.protocol.uris import unquote as uri_unquote
from tests.wire_schema import SPEC_1_0

TEXT = st.text(st.characters(codec="utf-8"), max_size=20)  # no lone surrogates


@given(TEXT)
def test_percent_encoding_is_urllibs(text: str) -> None:
    """Changeset URIs stored before this module keep their spelling."""
    assert quote_segment(text) == quote(text, safe="")
    assert uri_unquote(quote_segment(text)) == text


SCHEMES = st.sampled_from(["ahp-session", "copilot", "claude", "x+y.z-1"])


@given(SCHEMES, TEXT, TEXT)
def test_changeset_uris_of_any_session_name_it_once(scheme: str, name: str, turn_id: str) -> None:
    """A session under a client's own scheme (VS Code: ``<provider>:/<uuid>``) and an
    ``ahp-session:/`` id that itself looks like a URI each get a key of their own."""
    for session in (f"{scheme}:/{name or 's'}", f"ahp-session:/{scheme}:/{name or 's'}"):
        whole, turn = session_changeset(session), turn_changeset(session, turn_id or "t")
        assert parse_changeset(whole) == (session, None)
        assert parse_changeset(turn) == (session, turn_id or "t")
        assert session_of(whole) == session


def test_changeset_keys_of_ahp_sessions_keep_their_spelling() -> None:
    """Stored changeset URIs of ``ahp-session:/`` sessions stay what they were."""
    assert session_changeset("ahp-session:/abc") == "ahp-changeset:/abc/changeset/session"
    assert session_changeset("copilot:/abc") == (
        "ahp-changeset:/copilot%3A%2Fabc/changeset/session"
    )


@pytest.mark.parametrize(
    "uri",
    [
        "ahp-session:/0b6c",
        "copilot:/3f1d3c4e-8a8b-4a63-9d55-0d2f0b1e6a10",
        "claude:/x",
        "copilotcli:/a/b",
        "ahp-session:/x/annotationsX",
    ],
)
def test_a_session_may_be_named_under_any_scheme(uri: str) -> None:
    assert session_uri_problem(uri) is None


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("no-scheme", "starts with a scheme"),
        ("/abs/path", "starts with a scheme"),
        ("1x:/a", "starts with a scheme"),
        ("copilot:", "names an id"),
        ("copilot:/", "names an id"),
        ("ahp-session:/", "names an id"),
        ("ahp-chat:/x", "the host's own"),
        ("ahp-root://", "the host's own"),
        ("AHP-Terminal:/x", "the host's own"),
        ("ahp-automations://", "the host's own"),
        ("file:///home/u", "the host's own"),
        ("ahp-session:/x/annotations", "/annotations"),
        ("copilot:/x/annotations", "/annotations"),
    ],
)
def test_what_cannot_name_a_session(uri: str, why: str) -> None:
    problem = session_uri_problem(uri)
    assert problem is not None
    assert why in problem


DEFAULT_CHAT_SESSIONS = [
    "ahp-session:/0b6c",
    "copilot:/3f1d3c4e-8a8b-4a63-9d55-0d2f0b1e6a10",
    "copilotcli:/é/ü?q=1",
    "a:/" + "x" * 61,  # every padding length
    "a:/" + "x" * 62,
    "a:/" + "x" * 63,
]


def test_a_default_chat_names_its_session_back() -> None:
    """:func:`default_chat_session` inverts :func:`default_chat` (every padding length,
    non-ASCII), and answers ``None`` for any other URI rather than guessing."""
    for session in DEFAULT_CHAT_SESSIONS:
        assert default_chat_session(default_chat(session)) == session
    for other in (
        "ahp-chat:/x",
        "ahp-chat://default/",
        "ahp-chat://default/!!!",
        "ahp-chat://default/YWhw=",  # padded: not the form default_chat makes
        "ahp-session:/x",
    ):
        assert default_chat_session(other) is None


def test_default_chat_is_what_vs_code_derives() -> None:
    """``ahp-chat://default/`` + ``Buffer.from(session).toString('base64url')``,
    computed by Node itself."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: CI installs it for the page (.ci/run)")
    program = (
        "const s = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(s.map((u) =>"
        " 'ahp-chat://default/' + Buffer.from(u, 'utf8').toString('base64url'))));"
    )
    done = subprocess.run(
        [node, "-e", program],
        input=json.dumps(DEFAULT_CHAT_SESSIONS),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    expected = json.loads(done.stdout)
    assert [default_chat(s) for s in DEFAULT_CHAT_SESSIONS] == expected
    assert len(set(expected)) == len(expected)
    assert all(parse_channel(uri).kind == "chat" for uri in expected)


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


def _uri_fields(defs: dict[str, Any]) -> set[str]:
    """Every property, at any depth below a command's params, that the 1.0 schema
    types as ``URI`` or a list of them (content — actions, messages — aside)."""
    found: set[str] = set()
    seen: set[str] = set()

    def is_uri(schema: dict[str, Any]) -> bool:
        if schema.get("$ref", "").endswith("/URI"):
            return True
        if schema.get("type") == "array" and is_uri(schema.get("items", {})):
            return True
        return any(is_uri(s) for k in ("anyOf", "oneOf", "allOf") for s in schema.get(k, []))

    def refs(schema: dict[str, Any]) -> list[str]:
        out = [schema["$ref"].rsplit("/", 1)[-1]] if "$ref" in schema else []
        for key in ("anyOf", "oneOf", "allOf"):
            for inner in schema.get(key, []):
                out += refs(inner)
        return out + (refs(schema["items"]) if "items" in schema else [])

    def visit(name: str) -> None:
        if name in seen or name in ("StateAction", "Message", "URI"):
            return
        seen.add(name)
        schema = defs.get(name, {})
        for ref in refs(schema):
            visit(ref)
        for prop, inner in (schema.get("properties") or {}).items():
            if prop != "_meta" and is_uri(inner):
                found.add(prop)
            for ref in refs(inner):
                visit(ref)

    for name in defs:
        if name.endswith("Params"):
            visit(name)
    return found


def test_every_uri_the_schema_names_is_bounded() -> None:
    """Issue 29: ``URI_PARAMS`` names every URI field of every request the 1.0
    commands schema has, nested ones included, so ``decode_params`` bounds them all."""
    schema = json.loads((SPEC_1_0 / "schema" / "commands.schema.json").read_text())
    fields = _uri_fields(schema["$defs"])
    assert {"channel", "uri", "workingDirectories", "session", "chat"} <= fields
    assert fields <= URI_PARAMS, sorted(fields - URI_PARAMS)

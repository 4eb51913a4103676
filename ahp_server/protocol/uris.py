"""Channel URIs: what each kind of channel is called, built and read in one place.

Layer: protocol (pure: no I/O, no asyncio, nothing of the rest of the package).

Every decision about *which session a channel URI belongs to* is made here,
once, so that the access check (``Host.may_access``) and the service that
serves the channel (``host/channels/changesets.py``) can never read one URI two ways
(issue 26: an access check that took the raw key while the changeset service
percent-decoded it let one user read another's changeset). docs/protocol.md,
"Identity and ownership".

* ``ahp-root://`` — the root channel.
* ``ahp-session:/<id>`` — a session; ``<session>/annotations`` its annotations
  channel (the spec's ``ahp-session:/<uuid>/annotations``). A client may name
  a session under a scheme of its own too (VS Code: ``<provider>:/<uuid>``,
  :func:`session_uri_problem` says which): a channel's kind is what created
  it (the host's catalogue), never its scheme, so :func:`parse_channel` can
  only read the ``ahp-`` spellings.
* ``ahp-chat:/<id>`` — a chat; which session holds it is the host's
  catalogue, not its URI. A session's default chat, which the host makes,
  is ``ahp-chat://default/<base64url(session URI)>`` (:func:`default_chat`):
  the name VS Code computes from the session instead of reading
  ``defaultChat``.
* ``ahp-changeset:/<key>/turns/<turn id>`` and ``ahp-changeset:/<key>/changeset/session``
  — a turn's and a session's changeset (docs/workspace.md "Changesets"):
  ``<key>`` is the session's id as one percent-encoded path segment (RFC 6570
  simple expansion) — the whole session URI when it is not an
  ``ahp-session:/`` one (:func:`session_key`). ``ahp-changeset://chat/<chat>``
  — a chat's changeset (the files its turns changed), ``<chat>`` the chat's
  URI percent-encoded as one segment: it names the chat, not a session, so it
  stays the chat's when the chat moves (``moveChat``). Only the canonical
  spelling names a changeset.
* ``ahp-terminal:/…``, ``ahp-resource-watch:/…`` — workspace channels, owned by
  their claim or their creator, never by their URI.

Client-chosen session and chat URIs must be in RFC 3986 normal form
(:func:`normal_form`, checked by ``createSession``/``createChat``), so two
spellings can never name one session.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ANNOTATIONS_SUFFIX",
    "CHANGESET_SCHEME",
    "CHAT_SCHEME",
    "DEFAULT_CHAT_PREFIX",
    "MAX_URI_LENGTH",
    "ROOT",
    "SESSION_SCHEME",
    "TERMINAL_SCHEME",
    "URI_PARAMS",
    "WATCH_SCHEME",
    "ChannelRef",
    "chat_changeset",
    "default_chat",
    "long_uri",
    "normal_form",
    "parse_changeset",
    "parse_channel",
    "parse_chat_changeset",
    "quote_segment",
    "session_changeset",
    "session_key",
    "session_of",
    "session_uri_problem",
    "turn_changeset",
    "turn_changeset_template",
    "unquote",
]

ROOT = "ahp-root://"
#: The longest URI a request may carry in any parameter (docs/protocol.md
#: "Bounded answers"): a URI is stored, listed and sent to every client that
#: sees it, so its length is what one request may make every answer carry.
MAX_URI_LENGTH = 8192
#: The request fields (at any depth, by their wire names) the 1.0 commands
#: schema types as ``URI`` or a list of them (tests/protocol/test_uris.py
#: reads the schema to keep this complete).
URI_PARAMS = frozenset(
    {
        "after",
        "automation",
        "channel",
        "chat",
        "cwd",
        "destination",
        "initialSubscriptions",
        "session",
        "source",
        "src",
        "subscriptions",
        "uri",
        "workingDirectories",
        "workingDirectory",
    }
)
#: Fields that carry content, not request parameters: never walked.
_CONTENT = frozenset({"_meta", "action", "initialMessage"})
SESSION_SCHEME = "ahp-session:/"
CHAT_SCHEME = "ahp-chat:/"
CHANGESET_SCHEME = "ahp-changeset:/"
TERMINAL_SCHEME = "ahp-terminal:/"
WATCH_SCHEME = "ahp-resource-watch:/"
#: A session's default chat: this and the session URI in unpadded base64url.
DEFAULT_CHAT_PREFIX = "ahp-chat://default/"
#: ``<session URI>/annotations``: the session's annotations channel.
ANNOTATIONS_SUFFIX = "/annotations"

_TURN_SEGMENT = "/turns/"
#: A chat's changeset: an empty session key and ``chat`` (no session key is empty).
_CHAT_CHANGESET = CHANGESET_SCHEME + "/chat/"
_SESSION_SUFFIX = "/changeset/session"

#: RFC 3986 §2.3: the characters a URI never needs to percent-encode.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
#: A run of percent-encoded octets (RFC 3986 §2.1).
_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_BROKEN_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: RFC 3986 §3.1: ``scheme ":"`` at the start of a URI.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")

Kind = Literal["root", "session", "annotations", "chat", "changeset", "terminal", "watch", "other"]


# -- percent-encoding (RFC 3986 §2.1) ------------------------------------------------------------


def quote_segment(text: str) -> str:
    """``text`` as one URI path segment: every octet of its UTF-8 outside the
    unreserved set percent-encoded with uppercase hex digits (what
    ``urllib.parse.quote(text, safe="")`` gives)."""
    data = text.encode("utf-8", "surrogatepass")
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in data)


def unquote(text: str) -> str:
    """Decode every run of percent-encoded octets as UTF-8 (invalid bytes replaced);
    a ``%`` not followed by two hex digits stays (as ``urllib.parse.unquote``)."""
    return _ESCAPES.sub(
        lambda m: bytes.fromhex(m.group().replace("%", "")).decode("utf-8", "replace"), text
    )


# -- normal form (RFC 3986 §6.2.2) ---------------------------------------------------------------


def _normal_escape(match: re.Match[str]) -> str:
    octet = int(match.group()[1:], 16)
    # §6.2.2.2: an encoded unreserved character is the character; §6.2.2.1: hex in uppercase.
    return chr(octet) if octet in _UNRESERVED else match.group().upper()


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4."""
    out: list[str] = []
    while path:
        if path.startswith("../"):
            path = path[3:]
        elif path.startswith(("./", "/./")):
            path = path[2:]
        elif path == "/.":
            path = "/"
        elif path.startswith("/../"):
            path = path[3:]
            if out:
                out.pop()
        elif path == "/..":
            path = "/"
            if out:
                out.pop()
        elif path in (".", ".."):
            path = ""
        else:
            start = 1 if path.startswith("/") else 0
            end = path.find("/", start)
            end = len(path) if end < 0 else end
            out.append(path[:end])
            path = path[end:]
    return "".join(out)


def normal_form(uri: str) -> str:
    """``uri`` in RFC 3986 syntax-based normal form (§6.2.2): percent-encoded
    unreserved characters decoded, the other escapes' hex digits in uppercase,
    dot-segments removed from the path.

    Raises :class:`ValueError` for a ``%`` that does not start an escape (not a
    URI at all, §2.1). A URI is in normal form when ``normal_form(uri) == uri``.
    """
    if _BROKEN_ESCAPE.search(uri):
        raise ValueError("a '%' must start a percent-encoded octet (%XX)")
    text = _ESCAPE.sub(_normal_escape, uri)
    scheme, colon, rest = text.partition(":")
    if not colon:
        return text
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    path, tail = rest[:cut], rest[cut:]
    if path.startswith("//"):  # an authority: the path starts at its next "/"
        slash = path.find("/", 2)
        authority, path = (path, "") if slash < 0 else (path[:slash], path[slash:])
    else:
        authority = ""
    return f"{scheme}:{authority}{_remove_dot_segments(path)}{tail}"


# -- changesets (docs/workspace.md "Changesets") ------------------------------------------------


def session_key(session: str) -> str:
    """A session's id as one URI path segment (RFC 6570 simple expansion encoding).

    The id is what follows ``ahp-session:/``. A session named under another
    scheme (``copilot:/<uuid>``), or one whose id itself starts like a URI
    (``ahp-session:/x:y``), is keyed by its whole URI, so that
    :func:`parse_changeset` reads every key back to the one session it was
    made from.
    """
    rest = session.removeprefix(SESSION_SCHEME)
    if rest == session or _SCHEME.match(rest):
        return quote_segment(session)
    return quote_segment(rest)


def turn_changeset(session: str, turn_id: str) -> str:
    """The changeset of one turn of ``session`` (the ``{turnId}`` template, expanded)."""
    return f"{CHANGESET_SCHEME}{session_key(session)}{_TURN_SEGMENT}{quote_segment(turn_id)}"


def session_changeset(session: str) -> str:
    """The session-wide changeset of ``session``."""
    return f"{CHANGESET_SCHEME}{session_key(session)}{_SESSION_SUFFIX}"


def turn_changeset_template(session: str) -> str:
    """The per-turn changeset URI template of ``session`` (``{turnId}`` left to expand)."""
    return f"{CHANGESET_SCHEME}{session_key(session)}{_TURN_SEGMENT}{{turnId}}"


def chat_changeset(chat: str) -> str:
    """The changeset of everything ``chat``'s turns changed."""
    return f"{_CHAT_CHANGESET}{quote_segment(chat)}"


def parse_chat_changeset(uri: str) -> str | None:
    """The chat a chat changeset URI names (canonical spelling only), else ``None``."""
    if not uri.startswith(_CHAT_CHANGESET):
        return None
    chat = unquote(uri.removeprefix(_CHAT_CHANGESET))
    return chat if chat and chat_changeset(chat) == uri else None


def parse_changeset(uri: str) -> tuple[str, str | None] | None:
    """``(session, turn id)`` of a changeset URI (``None`` turn: session-wide), else ``None``.

    The key is percent-decoded: ``ahp-changeset:/a%2Fb/…`` is a changeset of
    ``ahp-session:/a/b``. Only the canonical spelling counts: the URI the host
    publishes on must be the one its subscribers used.
    """
    if not uri.startswith(CHANGESET_SCHEME):
        return None
    key, slash, rest = uri.removeprefix(CHANGESET_SCHEME).partition("/")
    if not key or not slash:
        return None
    name = unquote(key)
    session = name if _SCHEME.match(name) else SESSION_SCHEME + name
    if "/" + rest == _SESSION_SUFFIX:
        parsed: tuple[str, str | None] = (session, None)
        canonical = session_changeset(session)
    elif ("/" + rest).startswith(_TURN_SEGMENT):
        turn = unquote(("/" + rest).removeprefix(_TURN_SEGMENT))
        if not turn:
            return None
        parsed = (session, turn)
        canonical = turn_changeset(session, turn)
    else:
        return None
    return parsed if canonical == uri else None


# -- sessions and their default chats ------------------------------------------------------------

#: Schemes that name the host's own things (files, and every ``ahp-`` channel
#: but a session): a client's session may not be called by one of them.
_OWN_SCHEMES = ("file",)


def session_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot name a new session (``None``: it can).

    Any ``<scheme>:<id>`` with a non-empty id is a session name: the
    protocol's ``ahp-session:/<uuid>`` and a client's own scheme alike (VS
    Code calls a session ``<provider>:/<uuid>``). Refused: no scheme, an
    empty id, ``file:`` and the other ``ahp-`` schemes (the host's own
    channels), and a name ending in ``/annotations`` (it would read as
    another session's annotations channel). Normal form is the caller's
    check (:func:`normal_form`).
    """
    match = _SCHEME.match(uri)
    if match is None:
        return "a session URI starts with a scheme (such as 'ahp-session:/')"
    scheme = match.group()[:-1].lower()
    if scheme in _OWN_SCHEMES or (scheme.startswith("ahp-") and scheme != "ahp-session"):
        return f"{scheme}: URIs name the host's own channels, not sessions"
    if not uri[match.end() :].strip("/"):
        return "a session URI names an id after its scheme"
    if uri.endswith(ANNOTATIONS_SUFFIX):
        return f"a session URI does not end with {ANNOTATIONS_SUFFIX!r}"
    return None


def default_chat(session: str) -> str:
    """The URI of ``session``'s default chat, which the host makes with it.

    ``ahp-chat://default/`` and the session URI's UTF-8 in unpadded base64url
    (RFC 4648 §5): the URI VS Code derives from a session and subscribes to
    without reading ``defaultChat``. Any client that reads ``defaultChat``
    (as the spec says) finds the same URI there.
    """
    encoded = base64.urlsafe_b64encode(session.encode("utf-8", "surrogatepass"))
    return DEFAULT_CHAT_PREFIX + encoded.rstrip(b"=").decode("ascii")


def default_chat_session(uri: str) -> str | None:
    """The session whose default chat ``uri`` is (:func:`default_chat`), else ``None``."""
    if not uri.startswith(DEFAULT_CHAT_PREFIX):
        return None
    encoded = uri[len(DEFAULT_CHAT_PREFIX) :]
    try:
        session = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode(
            "utf-8", "surrogatepass"
        )
    except (ValueError, UnicodeDecodeError):
        return None
    return session if session and default_chat(session) == uri else None


# -- every channel -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChannelRef:
    """What a channel URI is, read from the URI alone."""

    kind: Kind
    #: The session the URI itself names (session, annotations, changeset);
    #: ``None`` for the others — a chat's session is the host's catalogue's.
    session: str | None = None
    #: The chat a chat changeset names (its session is the catalogue's).
    chat: str | None = None


def parse_channel(uri: str) -> ChannelRef:
    """The kind of channel ``uri`` names and the session it names, if it names one.

    A session URI ending in ``/annotations`` is that session's annotations
    channel (``createSession`` refuses such session URIs, so the reading is
    never ambiguous for a session made here).
    """
    if uri == ROOT:
        return ChannelRef("root")
    if uri.startswith(SESSION_SCHEME):
        if uri.endswith(ANNOTATIONS_SUFFIX) and len(uri) > len(SESSION_SCHEME + ANNOTATIONS_SUFFIX):
            return ChannelRef("annotations", uri.removesuffix(ANNOTATIONS_SUFFIX))
        return ChannelRef("session", uri)
    if uri.startswith(CHAT_SCHEME):
        return ChannelRef("chat")
    if uri.startswith(_CHAT_CHANGESET):
        return ChannelRef("changeset", chat=parse_chat_changeset(uri))
    if uri.startswith(CHANGESET_SCHEME):
        parsed = parse_changeset(uri)
        return ChannelRef("changeset", None if parsed is None else parsed[0])
    if uri.startswith(TERMINAL_SCHEME):
        return ChannelRef("terminal")
    if uri.startswith(WATCH_SCHEME):
        return ChannelRef("watch")
    return ChannelRef("other")


def session_of(uri: str) -> str | None:
    """The session a session, annotations or changeset URI names (else ``None``)."""
    return parse_channel(uri).session


def long_uri(params: object) -> str | None:
    """The wire name of a field of ``params`` (a decoded request, nested structs
    included) that holds a URI longer than :data:`MAX_URI_LENGTH`; ``None``: none."""
    fields = getattr(type(params), "__struct_fields__", None)
    if fields is None:
        return None
    names: tuple[str, ...] = type(params).__struct_encode_fields__  # type: ignore[attr-defined]
    for field, name in zip(fields, names, strict=True):
        if name in _CONTENT:
            continue
        value = getattr(params, field)
        values = value if isinstance(value, (tuple, list)) else (value,)
        for item in values:
            if isinstance(item, str):
                if name in URI_PARAMS and len(item) > MAX_URI_LENGTH:
                    return name
            elif (inner := long_uri(item)) is not None:
                return f"{name}.{inner}"
    return None

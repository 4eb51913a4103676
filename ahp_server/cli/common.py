"""What the client commands (``chat``, ``sessions``) share: naming sessions and chats,
their timeouts, and the refusal they exit with.

Layer: cli (client side: uses :mod:`ahp_server.client` only).
"""

from __future__ import annotations

import urllib.parse
import urllib.request

from msgspec import UnsetType

from ahp_server.client import AhpClient
from ahp_server.protocol.types import SessionSummary

DEFAULT_URL = "ws://127.0.0.1:8765"

#: How long a turn the CLI waits for may run, in seconds.
TURN_TIMEOUT = 600.0
#: How long one request or echo may take, in seconds.
REQUEST_TIMEOUT = 30.0


class Refused(Exception):
    """The command cannot do what was asked (exit status 2); the text says why."""


async def mark_read(client: AhpClient, chat_uri: str) -> None:
    """The user saw the turn's end: mark the chat read (1.0; a 0.7 host has no read flag)."""
    if not client.lifts_0_7:
        await client.set_read(chat_uri, True, timeout=REQUEST_TIMEOUT)


async def all_sessions(client: AhpClient) -> list[SessionSummary]:
    """Every page of ``listSessions``."""
    items: list[SessionSummary] = []
    cursor: str | None = None
    while True:
        page = await client.list_sessions(cursor=cursor, timeout=REQUEST_TIMEOUT)
        items.extend(page.items)
        if isinstance(page.next_cursor, UnsetType) or not page.items:
            return items
        cursor = page.next_cursor


def id_of(uri: str) -> str:
    """What follows a URI's scheme and slashes: ``ahp-chat:/abc`` -> ``abc``."""
    return uri.partition(":")[2].lstrip("/")


async def resolve(
    client: AhpClient, given: str, *, sessions: bool = True, chats: bool = True
) -> str:
    """The session or chat URI ``given`` names: itself when it is a URI (it has a
    scheme), else the one session or chat whose id starts with it.

    Raises :class:`Refused` when none or several match.
    """
    if ":" in given:
        return given
    what = " or ".join(k for k, on in (("session", sessions), ("chat", chats)) if on)
    if not given:
        raise Refused(f"name a {what}")
    found: list[str] = []
    for summary in await all_sessions(client):
        uris = [summary.resource] if sessions else []
        if chats and not isinstance(summary.chats, UnsetType):
            uris += [c.resource for c in summary.chats]
        found += [uri for uri in uris if id_of(uri).startswith(given)]
    if not found:
        raise Refused(f"no {what} matches {given!r} (ahp-server sessions --archived lists them)")
    if len(found) > 1:
        raise Refused(f"{given!r} names several: {', '.join(found)}")
    return found[0]


def path_of(file_id: str) -> str:
    """A changeset file's id (its ``file:`` URI) as a local path, else as it is."""
    parsed = urllib.parse.urlsplit(file_id)
    if parsed.scheme != "file":
        return file_id
    return urllib.request.url2pathname(parsed.path)

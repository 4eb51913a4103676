"""The browser client's files, answered over plain HTTP on the host's own port.

Layer: transport (used by the ``process_request`` hook in ``websocket.py``).

The page is a static build (``web/`` in the repository, built by Vite into
``ahp_server/web/static/``; docs/web.md). It holds no secret and no per-host
data, so it is served without the token: the page itself asks for the token
and sends it on the WebSocket upgrade, where the door checks it.

What a request can reach is fixed when the host starts: every file under the
static folder is read into memory and served under its relative path. A
request path is only ever a key into that table, never joined to a file-system
path, so no ``..``, ``%2e%2e``, symlink or absolute path can reach anything
else (tests/transport/test_static.py tries them).

Every answer carries a strict Content-Security-Policy (scripts and styles from
this origin only, no inline script, no ``eval``; network access only to this
origin's HTTP and WebSocket URLs; no frames, forms, plugins or base URL) and
``X-Content-Type-Options: nosniff``. Agent output is rendered by the page
after sanitising; the policy is the second wall if that ever failed.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

__all__ = ["STATIC_DIR", "StaticFiles", "same_origin"]

#: Where the built page lives inside the installed package.
STATIC_DIR = Path(__file__).resolve().parent.parent / "web" / "static"

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".map": "application/json",
}

# A Host header we are willing to repeat inside the CSP: a DNS name or an IPv4
# address, or a bracketed IPv6 address, with an optional port. Anything else
# (it is the client's own header) leaves connect-src at 'self'.
_HOST_HEADER = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def content_security_policy(host_header: str | None) -> str:
    """The page's policy; ``connect-src`` names this host's ws:/wss: URLs explicitly."""
    connect = "'self'"
    if host_header and _HOST_HEADER.match(host_header):
        connect += f" ws://{host_header} wss://{host_header}"
    return (
        "default-src 'none'; "
        "script-src 'self'; "
        "style-src 'self'; "
        "img-src 'self' data:; "
        "font-src 'self'; "
        f"connect-src {connect}; "
        "base-uri 'none'; "
        "form-action 'none'; "
        "frame-ancestors 'none'; "
        "object-src 'none'"
    )


def same_origin(origin: str, host_header: str | None) -> bool:
    """Whether ``origin`` (an Origin header) names the host the request was sent to.

    A page this host served has the origin ``http(s)://<Host header>``; the
    scheme is not checked against the socket (a TLS proxy in front makes it
    https), the host name and the effective port are.
    """
    if not host_header:
        return False
    try:
        theirs = urlsplit(origin)
        ours = urlsplit("//" + host_header)
        if theirs.scheme not in ("http", "https") or not theirs.hostname or not ours.hostname:
            return False
        if theirs.path or theirs.query or theirs.fragment or theirs.username:
            return False
        default = _DEFAULT_PORTS[theirs.scheme]
        return theirs.hostname == ours.hostname and (theirs.port or default) == (
            ours.port or default
        )
    except ValueError:  # a malformed port or address
        return False


def host_name(host_header: str | None) -> str | None:
    """The host name of a Host header (brackets of an IPv6 literal removed), if it parses."""
    if not host_header:
        return None
    try:
        return urlsplit("//" + host_header).hostname
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class _File:
    body: bytes
    content_type: str
    etag: str


class StaticFiles:
    """The files of one build, read once; :meth:`respond` answers a GET for one of them."""

    def __init__(self, root: Path = STATIC_DIR) -> None:
        self._files: dict[str, _File] = {}
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if not path.is_file() or path.is_symlink() or path.name.startswith("."):
                    continue
                body = path.read_bytes()
                kind = _TYPES.get(path.suffix.lower(), "application/octet-stream")
                digest = hashlib.sha256(body).hexdigest()[:32]
                self._files["/" + path.relative_to(root).as_posix()] = _File(
                    body, kind, f'"{digest}"'
                )
        index = self._files.get("/index.html")
        if index is not None:
            self._files["/"] = index

    @property
    def available(self) -> bool:
        """Whether a build is installed (a source checkout may have none yet)."""
        return "/" in self._files

    def paths(self) -> list[str]:
        return sorted(self._files)

    def respond(self, request: Request) -> Response | None:
        """The answer to a plain GET of a page file, or ``None`` if the path is not one."""
        path = urlsplit(request.path).path
        found = self._files.get(path)
        if found is None:
            if path == "/" or path.startswith("/assets/"):
                return _answer(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
            return None
        if request.headers.get("If-None-Match") == found.etag:
            return _answer(HTTPStatus.NOT_MODIFIED, b"", found.content_type, found.etag, request)
        return _answer(HTTPStatus.OK, found.body, found.content_type, found.etag, request)


def _answer(
    status: HTTPStatus,
    body: bytes,
    content_type: str,
    etag: str | None = None,
    request: Request | None = None,
) -> Response:
    headers = Headers(
        [
            ("Content-Type", content_type),
            # Same names every build: revalidate (cheap, ETag) instead of caching blindly.
            ("Cache-Control", "no-cache"),
            ("X-Content-Type-Options", "nosniff"),
            ("Content-Security-Policy", content_security_policy(_host(request))),
            ("Referrer-Policy", "no-referrer"),
            ("X-Frame-Options", "DENY"),
            ("Cross-Origin-Opener-Policy", "same-origin"),
            ("Cross-Origin-Resource-Policy", "same-origin"),
        ]
    )
    if etag is not None:
        headers["ETag"] = etag
    if status is not HTTPStatus.NOT_MODIFIED:
        headers["Content-Length"] = str(len(body))
    # websockets closes the connection after any answer that is not an upgrade.
    headers["Connection"] = "close"
    return Response(status.value, status.phrase, headers, body)


def _host(request: Request | None) -> str | None:
    return None if request is None else request.headers.get("Host")

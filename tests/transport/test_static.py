"""The browser client's files on the host's port, and the Origin rules that come with them.

Raw HTTP over a socket, so the request line and the Host/Origin headers are
exactly what we write (no client normalises ``..`` or picks the Host for us).
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ahp_server.config import Settings
from ahp_server.transport.static import StaticFiles, same_origin
from tests.conftest import RunningHost, start_host

TOKEN = "page-token"
TIMEOUT = 10.0


async def raw(
    port: int, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Send one GET exactly as given; return status, headers (lower-case names), body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    for name, value in (headers or {}).items():
        if name.lower() == "host":
            lines[1] = f"Host: {value}"
        else:
            lines.append(f"{name}: {value}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    async with asyncio.timeout(TIMEOUT):
        head = (await reader.readuntil(b"\r\n\r\n"))[:-4]
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        # The host closes after a plain HTTP answer; an upgrade (101) stays open.
        body = b"" if " 101 " in status_line else await reader.read()
    writer.close()
    parsed = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        parsed[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), parsed, body


def upgrade(origin: str | None, host: str | None = None, path: str = "/") -> dict[str, str]:
    headers = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": "13",
    }
    if origin is not None:
        headers["Origin"] = origin
    if host is not None:
        headers["Host"] = host
    return headers


def port_of(running: RunningHost) -> int:
    return int(running.url.rsplit(":", 1)[1])


@pytest.fixture
async def plain() -> AsyncIterator[RunningHost]:
    running = await start_host(Settings())
    try:
        yield running
    finally:
        await running.stop()


# -- serving -----------------------------------------------------------------------------


async def test_the_page_is_served_with_a_strict_policy(plain: RunningHost) -> None:
    port = port_of(plain)
    status, headers, body = await raw(port, "/")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert b'<div id="app">' in body
    assert int(headers["content-length"]) == len(body)
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp
    assert "script-src 'self';" in csp  # no 'unsafe-inline', no 'unsafe-eval'
    assert "unsafe" not in csp
    assert f"connect-src 'self' ws://127.0.0.1:{port} wss://127.0.0.1:{port};" in csp
    assert "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    # The page's script is a file of this origin, not inline.
    assert b'<script type="module" crossorigin src="/assets/app.js">' in body
    assert b"<script>" not in body


async def test_assets_have_their_types_and_revalidate(plain: RunningHost) -> None:
    port = port_of(plain)
    status, headers, body = await raw(port, "/assets/app.js")
    assert (status, headers["content-type"]) == (200, "text/javascript; charset=utf-8")
    assert len(body) > 1000
    status, headers_css, _ = await raw(port, "/assets/index.css")
    assert (status, headers_css["content-type"]) == (200, "text/css; charset=utf-8")
    again, cached, empty = await raw(port, "/assets/app.js", {"If-None-Match": headers["etag"]})
    assert (again, empty) == (304, b"")
    assert cached["etag"] == headers["etag"]


@pytest.mark.parametrize(
    "path",
    [
        "/assets/../../pyproject.toml",
        "/assets/..%2f..%2fpyproject.toml",
        "/assets/%2e%2e/%2e%2e/pyproject.toml",
        "/%2e%2e/%2e%2e/pyproject.toml",
        "/../../../../etc/passwd",
        "/assets/../../../../../etc/passwd",
        "/assets//etc/passwd",
        "/assets/%2fetc%2fpasswd",
        "/assets/..\\..\\pyproject.toml",
        "/assets/app.js/../../../config.py",
        "/assets/",
        "/assets/nope.js",
        "/index.html/..",
    ],
)
async def test_no_path_reaches_outside_the_build(plain: RunningHost, path: str) -> None:
    status, _, body = await raw(port_of(plain), path)
    assert status != 200
    for secret in (b"[project]", b"root:x:", b"ConfigError", b"<div id="):
        assert secret not in body


def test_only_regular_files_inside_the_build_are_served(tmp_path: Path) -> None:
    root = tmp_path / "static"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<p>page</p>")
    (root / "assets" / "app.js").write_text("ok")
    (tmp_path / "secret.txt").write_text("secret")
    (root / "assets" / "link.txt").symlink_to(tmp_path / "secret.txt")
    (root / ".hidden").write_text("no")
    files = StaticFiles(root)
    assert files.paths() == ["/", "/assets/app.js", "/index.html"]


async def test_the_page_can_be_turned_off() -> None:
    running = await start_host(Settings(web_ui=False))
    try:
        port = port_of(running)
        status, _, body = await raw(port, "/")
        assert status != 200
        assert b"<div id=" not in body
        status, _, _ = await raw(port, "/", upgrade(f"http://127.0.0.1:{port}"))
        assert status == 403  # and its origin is no longer admitted
    finally:
        await running.stop()


# -- the page's own origin ----------------------------------------------------------------


async def test_the_pages_own_origin_connects_and_foreign_ones_do_not(plain: RunningHost) -> None:
    port = port_of(plain)
    status, _, _ = await raw(port, "/", upgrade(f"http://127.0.0.1:{port}"))
    assert status == 101
    host = f"localhost:{port}"
    status, _, _ = await raw(port, "/", upgrade(f"http://localhost:{port}", host=host))
    assert status == 101
    for foreign in (
        "https://evil.example",
        f"http://127.0.0.1:{port + 1}",  # another port is another origin
        f"http://localhost:{port}",  # does not name the Host the request was sent to
        "null",
        f"http://127.0.0.1:{port}/path",
    ):
        status, _, body = await raw(port, "/", upgrade(foreign))
        assert status == 403, foreign
        assert b"origin not allowed" in body


async def test_a_rebound_name_is_not_the_pages_origin_without_a_token(plain: RunningHost) -> None:
    # DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1.
    # Its Origin matches the Host it sends, but that Host is not a loopback name.
    port = port_of(plain)
    rebound = f"evil.example:{port}"
    status, _, _ = await raw(port, "/", upgrade(f"http://{rebound}", host=rebound))
    assert status == 403


async def test_with_a_token_the_pages_origin_still_needs_the_token() -> None:
    running = await start_host(Settings(token=TOKEN))
    try:
        port = port_of(running)
        # A reverse proxy's name (any Host) is the page's origin once a token guards the door.
        proxied = f"ahp.example.com:{port}"
        status, _, _ = await raw(port, "/", upgrade(f"http://{proxied}", host=proxied))
        assert status == 401
        status, _, _ = await raw(port, f"/?tkn={TOKEN}", upgrade(f"http://{proxied}", host=proxied))
        assert status == 101
        status, _, _ = await raw(port, f"/?tkn={TOKEN}", upgrade("https://evil.example"))
        assert status == 403
        # The page itself needs no token: it holds no secret, and asks for it.
        status, _, body = await raw(port, "/")
        assert status == 200
        assert b'<div id="app">' in body
    finally:
        await running.stop()


async def test_configured_origins_are_still_admitted() -> None:
    running = await start_host(Settings(allowed_origins=("https://ide.example.com",)))
    try:
        status, _, _ = await raw(port_of(running), "/", upgrade("https://ide.example.com"))
        assert status == 101
    finally:
        await running.stop()


# -- the Host of a plain HTTP request (DNS rebinding) ------------------------------------

#: Every route answered over plain HTTP, and one that is none of them.
PLAIN_ROUTES = ("/", "/assets/app.js", "/healthz", "/readyz", "/metrics", "/nothing-here")


async def test_a_rebound_name_reads_no_plain_route_without_a_token(plain: RunningHost) -> None:
    # A page at evil.example whose name now resolves to 127.0.0.1 fetches this
    # host's routes: same-origin to the browser, so it could read the answers.
    port = port_of(plain)
    refused = 0
    for path in PLAIN_ROUTES:
        for headers in ({"Host": f"evil.example:{port}"}, {"Host": "evil.example"}):
            status, _, body = await raw(port, path, headers)
            assert (status, body) == (403, b"host not allowed\n"), path
            refused += 1
    for path in ("/healthz", "/readyz", "/metrics"):  # answered over HTTP on an upgrade too
        rebound = f"evil.example:{port}"
        status, _, body = await raw(port, path, upgrade(f"http://{rebound}", host=rebound))
        assert (status, body) == (403, b"host not allowed\n"), path
        refused += 1
    assert refused == 2 * len(PLAIN_ROUTES) + 3
    # Loopback names are this host's own: each route answers as before.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        for path in ("/", "/assets/app.js", "/healthz", "/readyz", "/metrics"):
            status, _, body = await raw(port, path, {"Host": host})
            assert status == 200, (host, path)
            assert body != b"host not allowed\n"


async def test_with_a_token_any_host_reaches_the_plain_routes() -> None:
    running = await start_host(Settings(token=TOKEN))
    try:
        port = port_of(running)
        proxied = {"Host": "ahp.example.com"}  # a reverse proxy's name
        for path in ("/", "/healthz", "/readyz"):
            status, _, _ = await raw(port, path, proxied)
            assert status == 200, path
        status, _, _ = await raw(port, "/metrics", proxied)
        assert status == 401  # the token still guards the counters
        status, _, body = await raw(
            port, "/metrics", {**proxied, "Authorization": f"Bearer {TOKEN}"}
        )
        assert status == 200
        assert b"ahp_" in body
    finally:
        await running.stop()


@pytest.mark.parametrize(
    ("origin", "host", "same"),
    [
        ("http://127.0.0.1:8765", "127.0.0.1:8765", True),
        ("https://ahp.example.com", "ahp.example.com", True),
        ("https://ahp.example.com", "ahp.example.com:443", True),
        ("http://ahp.example.com", "ahp.example.com:80", True),
        ("http://[::1]:8765", "[::1]:8765", True),
        ("HTTP://LOCALHOST:8765", "localhost:8765", True),
        ("http://127.0.0.1:8765", "127.0.0.1:8766", False),
        ("https://ahp.example.com", "ahp.example.com:8443", False),
        ("ws://127.0.0.1:8765", "127.0.0.1:8765", False),
        ("http://user@127.0.0.1:8765", "127.0.0.1:8765", False),
        ("http://127.0.0.1:99999", "127.0.0.1:99999", False),
        ("null", "127.0.0.1:8765", False),
        ("http://127.0.0.1:8765", None, False),
    ],
)
def test_same_origin(origin: str, host: str | None, same: bool) -> None:
    assert same_origin(origin, host) is same

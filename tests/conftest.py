"""Shared fixtures: a real host on a free loopback port, quiet logging, a fresh PostgreSQL
schema, and an exit stack."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import structlog

from ahp_server.app import App
from ahp_server.config import Settings
from ahp_server.host.host import Host
from ahp_server.logging import configure_logging

configure_logging("warning", "console")


@contextlib.contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Every log event (debug included) while in the block, as dicts; quiet again after."""
    capture = structlog.testing.LogCapture()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        processors=[structlog.contextvars.merge_contextvars, capture],
    )
    try:
        yield capture.entries
    finally:
        configure_logging("warning", "console")


@dataclass
class RunningHost:
    app: App
    url: str

    @property
    def host(self) -> Host:
        return self.app.host

    async def stop(self) -> None:
        await self.app.stop(close_timeout=1.0)


#: The workspace roots of the hosts tests start (``start_host``) when their settings name
#: none: pytest's base temporary directory first (sessions created without a working
#: directory get their folders there, and pytest removes it in time), then the system's
#: temporary directory (``tmp_path``s and ``mkdtemp``s). Set by :func:`_test_roots`.
TEST_ROOTS: list[str] = []


@pytest.fixture(autouse=True, scope="session")
def _test_roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the tests out of the real home: ``HOME`` (the default workspace root,
    docs/workspace.md "Roots") is a fresh directory, and :data:`TEST_ROOTS` is set."""
    base = tmp_path_factory.getbasetemp()
    home = base / "home"
    home.mkdir(exist_ok=True)
    TEST_ROOTS[:] = [str(base), tempfile.gettempdir()]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        yield


async def start_host(settings: Settings | None = None, **kwargs: object) -> RunningHost:
    """Start a host on 127.0.0.1 and a free port (workspace roots: :data:`TEST_ROOTS`
    unless the settings name some)."""
    settings = settings or Settings()
    if settings.workspace_roots is None and TEST_ROOTS:
        settings = dataclasses.replace(settings, workspace_roots=tuple(TEST_ROOTS))
    loopback = dataclasses.replace(settings, host="127.0.0.1", port=0)
    app = App(loopback, **kwargs)  # type: ignore[arg-type]
    await app.start()
    return RunningHost(app, app.urls[0])


@pytest.fixture
async def running_host(request: pytest.FixtureRequest) -> AsyncIterator[RunningHost]:
    """A host with the echo agent; parametrize indirectly with :class:`Settings` for limits."""
    running = await start_host(getattr(request, "param", None))
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def url() -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL schema's URL (tests/postgres.py), dropped afterwards.
    Modules that need another kind of URL define their own ``url``."""
    from tests.postgres import postgres_schema  # skips (or fails under CI) without PostgreSQL

    async with postgres_schema() as schema_url:
        yield schema_url


@pytest.fixture
async def stack() -> AsyncIterator[contextlib.AsyncExitStack]:
    """What a test opens, closed in reverse order when it ends."""
    async with contextlib.AsyncExitStack() as opened:
        yield opened

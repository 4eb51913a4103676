"""PostgreSQL for the tests: a fresh schema per test, dropped afterwards.

The server is the machine's (``AHP_TEST_POSTGRES``, default
``postgres://postgres@127.0.0.1:5432/test``; ``.ci/run`` starts it). Each test
gets its own schema through ``search_path`` in the store URL, so tests never
see each other and run in any order. When PostgreSQL does not answer, the
tests that need it skip with the reason — except under ``CI``, where they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest

ADMIN_URL = os.environ.get("AHP_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")


async def _admin() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError) as error:
        reason = f"PostgreSQL does not answer at {ADMIN_URL} ({error})"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: .ci/run starts it", pytrace=False)
        pytest.skip(reason)


@contextlib.asynccontextmanager
async def postgres_schema() -> AsyncIterator[str]:
    """A store URL whose tables go into a new, empty schema; the schema is dropped after."""
    schema = f"ahp_test_{uuid.uuid4().hex[:16]}"
    admin = await _admin()
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        yield f"{ADMIN_URL}?search_path={schema}"
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()


@contextlib.asynccontextmanager
async def store_schema() -> AsyncIterator[str]:
    """:func:`postgres_schema` with the store's tables made by its own migrations."""
    from ahp_server.store.postgres import PostgresStore

    async with postgres_schema() as url:
        store = PostgresStore(url)
        await store.start()
        await store.close()
        yield url


async def query(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    """Run one statement on its own connection (to look behind the store's back)."""
    conn = await asyncpg.connect(url, timeout=5)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def until(condition: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``condition`` until it holds (the caller bounds the wait)."""
    while True:
        if await condition():
            return
        await asyncio.sleep(0.02)


async def waits_on_a_lock(url: str, pid: int) -> bool:
    """Whether the backend ``pid`` is waiting for a lock (a row lock, here) right now."""
    rows = await query(url, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid)
    return bool(rows) and rows[0][0] == "Lock"

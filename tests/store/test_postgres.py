"""The PostgreSQL store on its own: schema versions, refusals, a lost connection, secrets.

The store contract it shares with SQLite runs in test_stores.py. Each test
gets its own schema (tests/postgres.py); without a PostgreSQL server these
tests skip, except under ``CI``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from ahp_server.config import ConfigError, Settings, load_settings
from ahp_server.host.host import make_store
from ahp_server.store.base import StoreError
from ahp_server.store.postgres import MIGRATIONS, SCHEMA_VERSION, PostgresStore, masked
from tests.conftest import captured_logs
from tests.postgres import query

TIMEOUT = 10.0


def with_password(url: str, password: str) -> str:
    """The URL with a password (trust auth accepts and ignores it)."""
    parts = urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


async def test_a_new_database_is_migrated_into_its_own_schema(url: str) -> None:
    store = PostgresStore(url)
    assert await store.start() == 0
    await store.close()
    versions = await query(url, "SELECT version FROM schema_version ORDER BY version")
    assert [r[0] for r in versions] == list(range(1, SCHEMA_VERSION + 1))
    schema = url.rpartition("search_path=")[2]
    tables = await query(url, "SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
    assert {r[0] for r in tables} >= {"meta", "channels", "log", "snapshots", "turns", "clients"}
    # Opening again migrates nothing and keeps the mark.
    again = PostgresStore(url)
    assert await again.start() == 0
    await again.close()
    assert len(await query(url, "SELECT version FROM schema_version")) == SCHEMA_VERSION


async def test_schema_2_keeps_the_remembered_clients_and_adds_their_user(url: str) -> None:
    # A database of schema 1 (before the clients' users) with one remembered client.
    await query(
        url,
        "CREATE TABLE schema_version ("
        "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    conn = await asyncpg.connect(url, timeout=5)
    try:
        await conn.execute(MIGRATIONS[0])  # several statements: the simple protocol
    finally:
        await conn.close()
    await query(url, "INSERT INTO schema_version (version) VALUES (1)")
    await query(url, "INSERT INTO clients VALUES ('old-client', '0.6.0', 1)")
    store = PostgresStore(url)
    await store.start()
    assert await store.clients() == [("old-client", "0.6.0", None)]  # no user known
    store.put_client("new-client", "0.7.0", user="alice")
    await store.close()
    versions = await query(url, "SELECT version FROM schema_version ORDER BY version")
    assert [r[0] for r in versions][:2] == [1, 2]
    again = PostgresStore(url)
    await again.start()
    assert await again.clients() == [
        ("old-client", "0.6.0", None),
        ("new-client", "0.7.0", "alice"),
    ]
    await again.close()


async def test_a_newer_schema_is_refused(url: str) -> None:
    store = PostgresStore(url)
    await store.start()
    await store.close()
    await query(url, "INSERT INTO schema_version (version) VALUES ($1)", SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="newer"):
        await PostgresStore(url).start()


async def test_a_foreign_database_is_refused_and_left_untouched(url: str) -> None:
    await query(url, "CREATE TABLE log (id INTEGER)")
    with pytest.raises(StoreError, match="not an ahp-server database"):
        await PostgresStore(url).start()
    columns = await query(
        url,
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_name = 'log' AND table_schema = current_schema()",
    )
    assert [r[0] for r in columns] == ["id"]


async def test_two_nodes_opening_an_empty_database_at_once_migrate_it_once(url: str) -> None:
    a, b = PostgresStore(url), PostgresStore(url)
    async with asyncio.timeout(TIMEOUT):
        assert await asyncio.gather(a.start(), b.start()) == [0, 0]
    await a.close()
    await b.close()
    assert len(await query(url, "SELECT version FROM schema_version")) == SCHEMA_VERSION


async def test_a_lost_connection_stops_the_store_and_everything_delivered_is_stored(
    url: str,
) -> None:
    store = PostgresStore(url)
    await store.start()
    delivered: list[int] = []
    seq = 0
    async with asyncio.timeout(TIMEOUT):
        for _ in range(20):
            for _ in range(50):
                seq += 1
                store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", delivered.append, seq)
            await asyncio.sleep(0.001)
        await store.flush()
        assert delivered == list(range(1, 1001))
        for _ in range(50):
            seq += 1
            store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", delivered.append, seq)
        # The database drops the writer's connection while envelopes are queued.
        pid = store._writer_conn.get_server_pid()
        await query(url, "SELECT pg_terminate_backend($1)", pid)
        for _ in range(20):
            for _ in range(50):
                seq += 1
                try:
                    store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", delivered.append, seq)
                except StoreError:
                    break
            await asyncio.sleep(0.001)
        with pytest.raises(StoreError, match="failed"):
            await store.flush()
    await store.close()
    assert delivered == list(range(1, len(delivered) + 1))  # in order, no gaps
    assert len(delivered) < seq  # the commit that failed delivered nothing
    stored = await query(url, "SELECT first_seq, last_seq FROM log ORDER BY first_seq")
    stored_seqs = {n for first, last in stored for n in range(first, last + 1)}
    assert set(delivered) <= stored_seqs  # nothing a client could have seen is lost
    mark = await query(url, "SELECT value FROM meta WHERE key = 'server_seq'")
    assert mark[0][0] == max(stored_seqs)
    reopened = PostgresStore(url)
    assert await reopened.start() >= max(delivered)
    await reopened.close()


async def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    dead = "postgres://ahp:s3cret-pw@127.0.0.1:1/ahp"  # port 1: nothing listens
    with pytest.raises(StoreError) as caught:
        await PostgresStore(dead).start()
    assert "cannot connect to PostgreSQL" in str(caught.value)
    assert "s3cret-pw" not in str(caught.value)


async def test_the_password_is_never_logged(url: str) -> None:
    secret = with_password(url, "s3cret-pw")
    with captured_logs() as logs:
        store = PostgresStore(secret)
        await store.start()
        store.append_envelope(1, "ahp-chat:/c", 1.0, b"{}", lambda: None)
        await store.flush()
        await store.close()
    assert any(entry["event"] == "store opened" for entry in logs)
    assert "s3cret-pw" not in repr(logs)
    assert "***" in repr(logs)
    assert store.path == masked(secret)
    assert "s3cret-pw" not in store.path


def test_the_store_setting_picks_postgres_and_sqlite_stays_the_default(tmp_path: Path) -> None:
    settings = load_settings(environ={"AHP_SERVER_STORE": "postgres://ahp@db.example/ahp"})
    assert settings.store == "postgres://ahp@db.example/ahp"
    assert isinstance(make_store(settings), PostgresStore)
    assert load_settings(environ={}).store is None
    assert not isinstance(make_store(Settings(data_dir=str(tmp_path))), PostgresStore)
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"AHP_SERVER_STORE": "mysql://root:s3cret-pw@db/ahp"})
    assert "storage.store" in str(caught.value)
    assert "s3cret-pw" not in str(caught.value)


def test_masked_hides_only_the_password() -> None:
    assert masked("postgres://ahp:pw@db:5432/ahp?search_path=x") == (
        "postgres://ahp:***@db:5432/ahp?search_path=x"
    )
    assert masked("postgres://ahp@db/ahp") == "postgres://ahp@db/ahp"


def test_backup_refuses_a_postgres_store_instead_of_copying_a_stale_file(tmp_path: Path) -> None:
    env = {**os.environ, "AHP_SERVER_STORE": "postgres://ahp:s3cret-pw@db.example/ahp"}
    result = subprocess.run(
        [sys.executable, "-m", "ahp_server", "backup", str(tmp_path / "copy.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert "pg_dump" in result.stderr
    assert "s3cret-pw" not in result.stderr
    assert not (tmp_path / "copy.db").exists()

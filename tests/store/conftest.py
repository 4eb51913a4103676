"""The store backends the backend-neutral store tests run against: SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ahp_server.store.base import Store
from tests.postgres import postgres_schema


@dataclass
class Backend:
    """A fresh, empty database of one kind; ``make`` opens another store on it."""

    name: str
    #: The database: a file path (SQLite) or a URL with its own schema (PostgreSQL).
    where: str
    make: Callable[..., Store]


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        from ahp_server.store.sqlite import SqliteStore

        path = tmp_path / "ahp.db"

        def sqlite(**options: Any) -> Store:
            return SqliteStore(path, **options)

        yield Backend("sqlite", str(path), sqlite)
    else:
        from ahp_server.store.postgres import PostgresStore

        async with postgres_schema() as url:

            def postgres(**options: Any) -> Store:
                return PostgresStore(url, **options)

            yield Backend("postgres", url, postgres)

"""Every row the 0.1.0 release stored, lifted to 1.0: valid 1.0, and its 0.7 view is the row.

Layer: tests (protocol over stored data; no process). The host's canonical
state moves to 1.0 while databases written by 0.1.0 hold 0.7 JSON
(``tests/data/db-0.1.0``). ``views.v0_7.lift`` turns a stored value into 1.0;
here every stored snapshot, log entry, turn and catalogue entry of that
database is lifted, validated against ``../shared/spec-1.0/schema`` with a
real validator, and projected back with the 0.7 view, which must give the
stored value exactly: a 0.7 client served from the lifted database sees what
the release served it (issue 27, item 4).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ahp_server.protocol.views import v0_7
from ahp_server.store.lift import MARKER
from ahp_server.store.postgres import PostgresStore
from tests.postgres import postgres_schema, query
from tests.wire_schema import SPEC_1_0, errors

DATABASE = Path(__file__).resolve().parent.parent / "data" / "db-0.1.0" / "data" / "ahp-server.db"
STATE_TYPES = {"session": "SessionState", "chat": "ChatState"}
#: The tables a 0.7 host wrote protocol JSON into, and their columns.
TABLES = {
    "channels": "uri, kind, session, created_at, summary, active_turn, log_floor, agent_state",
    "snapshots": "channel, seq, turn_count, state",
    "turns": "chat, position, turn_id, turn",
    "log": "first_seq, channel, last_seq, entries",
}


def stored() -> Iterator[tuple[str, str, Any]]:
    """(where, 1.0 type name, stored 0.7 JSON) for every JSON value in the database."""
    # immutable: read in place without a -wal/-shm beside the checked-in file.
    connection = sqlite3.connect(f"file:{DATABASE}?mode=ro&immutable=1", uri=True)
    try:
        kinds = dict(connection.execute("select uri, kind from channels"))
        for channel, state in connection.execute("select channel, state from snapshots"):
            yield f"snapshot {channel}", STATE_TYPES[kinds[channel]], json.loads(state)
        for channel, summary in connection.execute(
            "select uri, summary from channels where summary is not null"
        ):
            yield f"summary {channel}", "SessionSummary", json.loads(summary)
        for chat, position, turn in connection.execute("select chat, position, turn from turns"):
            yield f"turn {chat}#{position}", "Turn", json.loads(turn)
        for first, entries in connection.execute("select first_seq, entries from log"):
            for seq, _at, envelope in json.loads(entries):
                yield f"log {first}:{seq}", "ActionEnvelope", envelope
    finally:
        connection.close()


ROWS = list(stored())


def test_the_database_holds_every_kind_of_row() -> None:
    kinds = {type_name for _, type_name, _ in ROWS}
    assert kinds == {"SessionState", "ChatState", "SessionSummary", "Turn", "ActionEnvelope"}
    actions = {value["action"]["type"] for _, t, value in ROWS if t == "ActionEnvelope"}
    # The shapes 1.0 changed are in there: error turns, tool calls, summaries.
    assert {"chat/error", "chat/toolCallReady", "session/chatAdded"} <= actions


@pytest.mark.parametrize(("where", "type_name", "value"), ROWS, ids=[w for w, _, _ in ROWS])
def test_lifted_row_is_1_0_and_projects_back(where: str, type_name: str, value: Any) -> None:
    before = json.dumps(value, sort_keys=True)
    lifted = v0_7.lift(type_name, value)
    assert json.dumps(value, sort_keys=True) == before, "lift mutated its input"
    assert not errors(SPEC_1_0, type_name, lifted), errors(SPEC_1_0, type_name, lifted)[:3]
    assert v0_7.project(type_name, lifted) == value


async def test_a_postgresql_database_with_the_release_s_rows_is_lifted_once_at_open() -> None:
    """The PostgreSQL store lifts the same rows the same way, once (a cluster's database)."""
    source = sqlite3.connect(f"file:{DATABASE}?mode=ro&immutable=1", uri=True)
    try:
        tables = {
            name: source.execute(f"SELECT {columns} FROM {name}").fetchall()
            for name, columns in TABLES.items()
        }
    finally:
        source.close()
    async with postgres_schema() as url:
        store = PostgresStore(url)
        await store.start()  # an empty database: created at today's schema, nothing to lift
        await store.close()
        # The release's rows, put behind the store's back as a 0.7 host wrote them.
        await query(url, "DELETE FROM meta WHERE key = $1", MARKER)
        for name, columns in TABLES.items():
            marks = ", ".join(f"${i + 1}" for i in range(columns.count(",") + 1))
            for row in tables[name]:
                await query(
                    url,
                    f"INSERT INTO {name} ({columns}) VALUES ({marks})",
                    *(bytes(v) if isinstance(v, bytes) else v for v in row),
                )
        for _ in range(2):  # the second open finds the marker and changes nothing
            store = PostgresStore(url)
            await store.start()
            await store.close()
            kinds = {
                r["uri"]: r["kind"] for r in await query(url, "SELECT uri, kind FROM channels")
            }
            for row in await query(url, "SELECT channel, state FROM snapshots"):
                state = json.loads(bytes(row["state"]))
                type_name = STATE_TYPES[kinds[row["channel"]]]
                assert not errors(SPEC_1_0, type_name, state), row["channel"]
                assert "primaryWorkingDirectory" not in state
            turns = [
                json.loads(bytes(r["turn"])) for r in await query(url, "SELECT turn FROM turns")
            ]
            assert turns
            assert not any("error" in turn for turn in turns)
            assert any(
                part.get("kind") == "error" for turn in turns for part in turn["responseParts"]
            )
            for row in await query(url, "SELECT entries FROM log"):
                for _seq, _at, envelope in json.loads(bytes(row["entries"])):
                    assert not errors(SPEC_1_0, "ActionEnvelope", envelope), envelope["action"]

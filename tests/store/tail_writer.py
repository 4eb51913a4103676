"""A process that writes to a SQLite store and then dies: for test_sqlite.py's crash tests.

Run as ``python tail_writer.py <database> '<steps JSON>'``. Each step is one
of ``["channel", uri]``, ``["envelopes", first, last]`` (each committed on
its own loop turn), ``["interleaved", first]`` (three envelopes in one
commit: the chat's, its session's, the chat's), ``["client", id]``, ``["copy", path]`` (a raw SQLite
copy of the database as it is: a state older than the tail, as a restored
backup or a lost WAL would leave), ``["file_limit", extra_bytes]`` (writes
past the tail file's size plus that fail, as on a full disk). It prints one
JSON line — the serverSeqs delivered, and the store's error if it failed —
then kills itself with SIGKILL: nothing is closed or folded.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sqlite3
import sys
from pathlib import Path

from ahp_server.store.base import StoreError
from ahp_server.store.sqlite import SqliteStore

CHAT = "ahp-chat:/c"
SESSION = "ahp-session:/s"


async def main(database: Path, steps: list[list[object]]) -> None:
    store = SqliteStore(database, tail_fold_seconds=3600.0)
    store.open()
    delivered: list[int] = []
    error = None
    try:
        for step in steps:
            match step:
                case ["channel", str(uri)]:
                    store.put_channel(uri, "chat", None, "2026-01-01T00:00:00Z", None)
                case ["envelopes", int(first), int(last)]:
                    for seq in range(first, last + 1):
                        store.append_envelope(
                            seq, CHAT, 1.0, b'{"n":%d}' % seq, delivered.append, seq
                        )
                        store.commit_soon()
                        await asyncio.sleep(0)
                case ["interleaved", int(first)]:
                    for seq, channel in ((first, CHAT), (first + 1, SESSION), (first + 2, CHAT)):
                        store.append_envelope(seq, channel, 1.0, b"{}", delivered.append, seq)
                case ["client", str(client_id)]:
                    store.put_client(client_id, "0.7.0")
                case ["copy", str(path)]:
                    source, target = sqlite3.connect(database), sqlite3.connect(path)
                    source.backup(target)
                    target.close()
                    source.close()
                case ["file_limit", int(extra)]:
                    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
                    size = max(p.stat().st_size for p in database.parent.glob("*-tail.*"))
                    resource.setrlimit(
                        resource.RLIMIT_FSIZE, (size + extra, resource.RLIM_INFINITY)
                    )
                case _:
                    raise ValueError(f"unknown step {step!r}")
            await store.flush()
    except StoreError as failure:
        error = str(failure)
    print(json.dumps({"delivered": delivered, "error": error}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), json.loads(sys.argv[2])))

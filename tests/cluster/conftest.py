"""The cluster tests' NATS: one authenticated ``nats-server`` of their own for the session.

The machine's NATS runs without authentication and other tests share it; a
cluster here runs as a deployment should, on a server that requires a user
and a password (``helpers.PrivateNats``). Started once, on a free port, and
stopped and reaped at the end; no ``nats-server`` binary: skipped, or failed
under CI.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.helpers import PrivateNats


@pytest.fixture(scope="session")
def nats_bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateNats]:
    server = PrivateNats(tmp_path_factory.mktemp("nats"))
    try:
        server.start()
        yield server
    finally:
        server.close()

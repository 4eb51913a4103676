"""The README's first command: ``pip install -e .`` with no extras, then ``ahp-server serve``.

The PostgreSQL and cluster drivers (asyncpg, nats-py) are optional extras
(pyproject.toml). Here they are made unimportable — a package of each name on
``PYTHONPATH`` that raises ``ImportError``, as a missing or broken install
would — and the real daemon must still serve the embedded default, and
refuse a setting that needs one of them with the extra that installs it
(``config.driver_problems``), never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

from ahp_server.client import AhpClient
from tests.e2e.helpers import TIMEOUT, Daemon

DRIVERS = ("asyncpg", "nats")


def without_drivers(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``import asyncpg`` and ``import nats`` fail."""
    blocked = tmp_path / "blocked"
    for name in DRIVERS:
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(
            f"raise ImportError('{name} is not installed (tests/e2e/test_plain_install.py)')\n",
            encoding="utf-8",
        )
    path = [str(blocked), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path)}


async def test_a_plain_install_serves_turns_without_the_optional_drivers(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "data", env=without_drivers(tmp_path))
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat()
            assert "hello" in await client.ask(chat, "hello", timeout=TIMEOUT)
        assert await daemon.terminate() == 0
    finally:
        await daemon.close()
    assert not any("Traceback" in line for line in daemon.stderr)


async def test_a_postgres_store_without_its_driver_is_refused_naming_the_extra(
    tmp_path: Path,
) -> None:
    env = without_drivers(tmp_path) | {"AHP_SERVER_STORE": "postgres://ahp@127.0.0.1:1/ahp"}
    status, lines = await Daemon(tmp_path / "data", env=env).refused()
    assert status == 2
    assert lines == [
        "ahp-server: invalid configuration: storage.store: needs the Python package "
        "'asyncpg', which is not installed: pip install 'ahp-server[postgres]'"
    ]


async def test_a_cluster_without_its_drivers_is_refused_naming_the_extra(tmp_path: Path) -> None:
    env = without_drivers(tmp_path) | {
        "AHP_SERVER_STORE": "postgres://ahp@127.0.0.1:1/ahp",
        "AHP_SERVER_BUS": "nats://127.0.0.1:1",
        "AHP_SERVER_CLUSTER_SECRET": "0123456789abcdef" * 4,
    }
    status, lines = await Daemon(tmp_path / "data", env=env).refused()
    assert status == 2
    prefix = "ahp-server: invalid configuration: "
    assert lines == [
        prefix + "storage.store: needs the Python package 'asyncpg', which is not installed: "
        "pip install 'ahp-server[postgres]'",
        prefix + "cluster.bus: needs the Python package 'nats', which is not installed: "
        "pip install 'ahp-server[cluster]'",
        prefix + "cluster.bus: needs the Python package 'asyncpg', which is not installed: "
        "pip install 'ahp-server[cluster]'",
    ]

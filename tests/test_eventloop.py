"""``server.event_loop`` (ahp_server/eventloop.py): which loop the daemon runs on.

In process: the factory each choice gives, a missing uvloop, and the loop a
coroutine then runs on. tests/e2e/test_cli.py starts the daemon on each.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from ahp_server.config import ConfigError
from ahp_server.eventloop import loop_name, run


async def name_and_sleep() -> str:
    await asyncio.sleep(0.001)  # a timer too, not only a ready callback
    return loop_name()


def test_auto_and_uvloop_run_on_uvloop_where_it_is_installed() -> None:
    pytest.importorskip("uvloop")  # a dependency everywhere but Windows
    assert run(name_and_sleep(), "auto") == "uvloop"
    assert run(name_and_sleep(), "uvloop") == "uvloop"


def test_asyncio_runs_on_asyncio_s_own_loop() -> None:
    assert run(name_and_sleep(), "asyncio") == "asyncio"


def test_without_uvloop_auto_falls_back_and_uvloop_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    assert run(name_and_sleep(), "auto") == "asyncio"
    coroutine = name_and_sleep()
    with pytest.raises(ConfigError, match=r"server\.event_loop.*not installed"):
        run(coroutine, "uvloop")
    assert coroutine.cr_frame is None  # closed, never started: no "never awaited" warning

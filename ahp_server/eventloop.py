"""Which event loop the daemon runs on: ``server.event_loop`` (docs/performance.md).

Layer: set-up, beside ``config`` and ``logging``: imports nothing of the layers
it runs (the daemon's entry point and the benchmarks' floor both use it).

uvloop (libuv under asyncio's API) runs the loop's own machinery — timers,
ready callbacks, socket writes — in C: a streamed word costs the host some
15 % less CPU on it (docs/performance.md "Capacity"). The host uses asyncio's
public API only, so either loop runs it; ``"auto"`` takes uvloop where it is
installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ahp_server.config import ConfigError

__all__ = ["loop_factory", "loop_name", "run"]

T = TypeVar("T")


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The factory of the loop ``choice`` names ("auto", "uvloop" or "asyncio").

    Raises :class:`ConfigError` for "uvloop" where it is not installed.
    """
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise ConfigError(
                    "server.event_loop", '"uvloop" is not installed: pip install uvloop'
                ) from None
        else:
            factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
            return factory
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], choice: str) -> T:
    """``asyncio.run(main)`` on the loop ``choice`` names."""
    try:
        factory = loop_factory(choice)
    except ConfigError:
        main.close()  # never started: no "never awaited" warning
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def loop_name() -> str:
    """The running loop's kind, as the ``listening`` log line names it."""
    return (
        "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
    )

"""The one place that configures structlog.

Layer: app support. Console output for terminals, JSON lines for daemons.
Nothing on the per-delta path logs at INFO, so log volume does not grow with
streaming.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

__all__ = ["configure_logging"]

LogFormat = Literal["console", "json"]


def configure_logging(level: str = "info", fmt: str | None = None, *, cache: bool = False) -> None:
    """Configure structlog (idempotent). ``fmt=None`` picks console on a TTY, else JSON.

    ``cache``: each module's logger is built on its first use and kept (the
    daemon, which configures once before it logs). Otherwise every call on a
    module-level logger rebuilds it — even a filtered-out ``debug`` line costs
    that (~10 µs) — which tests need, as they reconfigure logging to capture it.
    """
    if fmt is None:
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if fmt == "console" else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        # One write per line (message and newline together): a line logged from a
        # worker thread never splits around another line written to stderr.
        logger_factory=structlog.WriteLoggerFactory(sys.stderr),
        cache_logger_on_first_use=cache,
    )

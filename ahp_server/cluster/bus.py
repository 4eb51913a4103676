"""What every kind of cluster node shares: its name, its failure, its NATS connection.

Layer: cluster (above ``app``; ``primary.py`` and ``sharded.py`` build on it).
Neither the bus password nor a token in ``cluster.bus`` is ever logged
(:func:`masked_bus`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import structlog

from ahp_server.config import Settings
from ahp_server.host.host import HostFailed
from ahp_server.store.base import StoreError

__all__ = [
    "BUS_CONNECT_WITHIN",
    "CLOSE_SERVICE_RESTART",
    "NodeFailed",
    "cluster_identity",
    "connect_bus",
    "default_node_id",
    "masked_bus",
]

log = structlog.get_logger(__name__)

#: RFC 6455 "service restart": what relayed clients get when their node stops or changes role.
CLOSE_SERVICE_RESTART = 1012
#: Seconds a node keeps trying to reach NATS at start before it gives up (exits non-zero).
BUS_CONNECT_WITHIN = 30.0


class NodeFailed(HostFailed):
    """This node must stop: it lost the lease, or its store failed."""


def masked_bus(url: str) -> str:
    """The bus URL as it may be logged: no password, and no token (``nats://token@host``)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}:***" if parts.password is not None else "***"
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def _refused_credentials(error: BaseException) -> bool:
    """NATS refused this node's credentials (an authorization violation, or none given)."""
    import nats

    text = str(error).lower()
    return isinstance(error, nats.errors.AuthorizationError) or (
        "authorization" in text or "authentication" in text
    )


def cluster_identity(settings: Settings) -> tuple[str, str]:
    """What every cluster node needs of its settings: the store URL and its node id.
    ``StoreError`` naming the setting when the bus, the store or the secret is missing
    (``load_settings`` requires them; a ``Settings`` made by hand may not have them)."""
    if settings.bus is None or settings.store is None:
        raise StoreError("cluster mode needs cluster.bus and storage.store")
    if not settings.cluster_secret:
        raise StoreError("cluster mode needs cluster.secret")
    return settings.store, settings.node_id or default_node_id()


def default_node_id() -> str:
    """The host name and process id, in the characters a NATS subject token allows."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname())[:40] or "node"
    return f"{name}-{os.getpid()}"


async def connect_bus(
    settings: Settings,
    node_id: str,
    *,
    on_error: Callable[[Exception], Awaitable[None]],
    on_disconnected: Callable[[], Awaitable[None]],
    on_reconnected: Callable[[], Awaitable[None]],
) -> Any:
    """The node's NATS connection (``cluster.bus``), or :class:`StoreError` naming what to fix.

    nats-py retries a refused first connection for ever (we ask it to
    reconnect for ever later on): credentials NATS refuses stop the node at
    once, and a server that does not answer within ``BUS_CONNECT_WITHIN``.
    """
    import nats  # lazily: only cluster nodes need the NATS client
    from nats.aio.client import Client

    bus = str(settings.bus)
    nc = Client()
    refused: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    errors: list[str] = []

    async def error_cb(error: Exception) -> None:
        if connecting.done():  # connected once: nats-py reconnects by itself
            await on_error(error)
            return
        errors.append(str(error))
        if _refused_credentials(error):
            if not refused.done():
                refused.set_result(None)
        elif len(errors) == 1:
            log.warning("cannot reach NATS yet: retrying", bus=masked_bus(bus), error=str(error))

    options: dict[str, Any] = {
        "servers": [bus],
        "name": f"ahp-server {node_id}",
        "user": settings.bus_user,
        "password": settings.bus_password,
        "connect_timeout": 5,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.5,
        "error_cb": error_cb,
        "disconnected_cb": on_disconnected,
        "reconnected_cb": on_reconnected,
    }
    connecting = asyncio.ensure_future(nc.connect(**options))
    await asyncio.wait(
        {connecting, refused}, timeout=BUS_CONNECT_WITHIN, return_when="FIRST_COMPLETED"
    )
    if connecting.done() and not connecting.cancelled() and connecting.exception() is None:
        return nc
    connecting.cancel()
    with contextlib.suppress(asyncio.CancelledError, OSError, TimeoutError, nats.errors.Error):
        await connecting
    with contextlib.suppress(OSError, nats.errors.Error):
        await nc.close()
    where = masked_bus(bus)
    if refused.done() and not refused.cancelled():
        raise StoreError(
            f"NATS at {where} refused this node's credentials: check cluster.bus_user and "
            "cluster.bus_password (AHP_SERVER_BUS_USER, AHP_SERVER_BUS_PASSWORD) or the "
            "credentials in cluster.bus"
        )
    error = connecting.exception() if connecting.done() and not connecting.cancelled() else None
    last = str(error) if error is not None else (errors[-1] if errors else "no answer")
    raise StoreError(
        f"cannot connect to NATS at {where} (cluster.bus) within {BUS_CONNECT_WITHIN:g} s: {last}"
    )

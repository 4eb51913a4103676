"""The nine ``resource*`` commands a client sends on ``ahp-root://`` (WIRE-SUMMARY §4.1).

Layer: host (asyncio), a command family beside the dispatcher, above the registry:
the gateway builds :class:`ResourceCommands` next to the command dispatcher and
has it register its handlers there (``Commands.register``); it sees the
:class:`~ahp_server.host.host.Host` only to read the sessions' working
directories and the settings.

Who may touch which file (docs/workspace.md, "Resources"):

* only an initialized connection — the gateway refuses every other request
  before ``initialize`` (``-32600``) — and, when a token is configured, only
  one that presented it at the door;
* only inside the *roots*: the working directories of every session the host
  knows (loaded or not, with its chats'), as ``file:`` URIs or absolute paths.
  Outside them every command answers ``-32009`` PermissionDenied (error-codes.md:
  "outside the session's working directory or workspace roots"); with no root
  at all, everything is refused.
* ``resourceList`` alone also reaches the configured roots the connection's
  user may make working directories in (``Roots.allowed``; none for a
  connection without a user in multi-user mode): the spec's "remote folder
  pickers" list a folder before any session works there. It shows names and
  kinds only, where ``createSession`` would let the same client root a
  session — and then read every file — anyway.

The file operations themselves are :class:`~ahp_server.workspace.files.Files`,
run in a worker thread: the event loop never waits for a disk. At most
:data:`CONCURRENT_IO` run at once (bounding the memory reads hold), and
mutations run one at a time, so ``ifMatch``, ``createOnly`` and the splicing
write modes are not raced by another client of this host. Every mutation that
succeeds is logged (``resource written``, ``resource deleted``, …: connection,
client, path, size — never content); every ``-32009`` is logged as a warning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import structlog
from msgspec import UnsetType

from ahp_server.host.core.fanout import Connection
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol.errors import AhpErrorCode, InvalidParams, ProtocolError
from ahp_server.protocol.types import (
    ResourceCopyParams,
    ResourceDeleteParams,
    ResourceListParams,
    ResourceMkdirParams,
    ResourceMoveParams,
    ResourceReadParams,
    ResourceRequestParams,
    ResourceResolveParams,
    ResourceWriteParams,
)
from ahp_server.workspace.files import Files, Limits

__all__ = ["CONCURRENT_IO", "CommandRegistry", "ResourceCommands"]

log = structlog.get_logger(__name__)

T = TypeVar("T")
Handler = Callable[[Connection, Any], Awaitable[bytes]]

ROOT = "ahp-root://"
#: File operations running at once (each in a worker thread).
CONCURRENT_IO = 4
_EMPTY = b"{}"


class CommandRegistry(Protocol):
    """Where handlers are registered (``Commands.register``)."""

    def register(
        self, method: str, handler: Handler, params_type: type[Any] | None = None
    ) -> None: ...


def _value(value: T | UnsetType) -> T | None:
    return None if isinstance(value, UnsetType) else value


class ResourceCommands:
    """Handlers of ``resourceRead`` … ``resourceRequest``, confined to the sessions' roots."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._io = asyncio.Semaphore(CONCURRENT_IO)
        self._mutations = asyncio.Lock()

    def register(self, commands: CommandRegistry) -> None:
        """Answer the nine ``resource*`` methods through ``commands``."""
        handlers: list[tuple[str, Handler, type[Any]]] = [
            ("resourceRead", self.read, ResourceReadParams),
            ("resourceWrite", self.write, ResourceWriteParams),
            ("resourceList", self.list, ResourceListParams),
            ("resourceCopy", self.copy, ResourceCopyParams),
            ("resourceMove", self.move, ResourceMoveParams),
            ("resourceDelete", self.delete, ResourceDeleteParams),
            ("resourceResolve", self.resolve, ResourceResolveParams),
            ("resourceMkdir", self.mkdir, ResourceMkdirParams),
            ("resourceRequest", self.request, ResourceRequestParams),
        ]
        for method, handler, params_type in handlers:
            commands.register(method, handler, params_type)

    # -- roots and running ----------------------------------------------------------------------

    def working_directories(self, viewer: Connection | None = None) -> list[str]:
        """The roots: every working directory the host knows (``Host.working_directories``),
        of the sessions ``viewer``'s user may see (multi-user mode)."""
        return self.host.working_directories(viewer=viewer)

    def listing_roots(self, viewer: Connection) -> list[str]:
        """Where ``resourceList`` may look: the working directories, and the configured
        roots ``viewer``'s user may root a session in (module docstring)."""
        roots = self.working_directories(viewer)
        if not self.host.multi_user or viewer.user is not None:
            configured = self.host.roots.allowed(viewer.user)
            roots.extend(root for root in configured if root not in roots)
        return roots

    def _files(self, viewer: Connection | None = None, roots: list[str] | None = None) -> Files:
        settings = self.host.settings
        # A request is one WebSocket message: no write can be larger than one.
        write_cap = min(settings.max_write_bytes, settings.max_message_bytes)
        limits = Limits(max_read_bytes=settings.max_read_bytes, max_write_bytes=write_cap)
        if roots is None:
            roots = self.working_directories(viewer)
        return Files(roots, limits, self.host.roots.forbidden)

    async def _run(
        self,
        connection: Connection,
        method: str,
        channel: str,
        work: Callable[[], T],
        *,
        mutation: bool = False,
    ) -> T:
        """Run ``work`` in a worker thread (one mutation at a time); log a denial."""
        if channel != ROOT:
            raise InvalidParams(f"{method} is sent on {ROOT!r}, not {channel!r}")
        try:
            if not mutation:
                async with self._io:
                    return await _in_thread(work)
            # The lock first: mutations waiting for their turn hold no I/O slot.
            async with self._mutations, self._io:
                return await _in_thread(work)
        except ProtocolError as error:
            if error.code == AhpErrorCode.PermissionDenied:
                log.warning(
                    "resource access denied",
                    conn=connection.id,
                    client_id=connection.client_id,
                    method=method,
                    reason=error.message,
                )
            elif mutation:
                log.info(
                    "resource change refused",
                    conn=connection.id,
                    client_id=connection.client_id,
                    method=method,
                    code=error.code,
                    reason=error.message,
                )
            raise

    # -- handlers ---------------------------------------------------------------------------------

    async def read(self, connection: Connection, params: ResourceReadParams) -> bytes:
        files = self._files(connection)
        encoding = _value(params.encoding)
        # A read holds the file, its base64 text and the answer at once: counted
        # against the host's outbox budget while it runs (docs/reliability.md "Memory").
        held = 3 * self.host.settings.max_read_bytes
        async with self.host.outbox_budget.reserved(connection, held):
            result = await self._run(
                connection,
                "resourceRead",
                params.channel,
                lambda: files.read(params.uri, encoding),
            )
            log.debug("resource read", conn=connection.id, uri=params.uri, chars=len(result.data))
            return codec.encode(result)

    async def write(self, connection: Connection, params: ResourceWriteParams) -> bytes:
        files = self._files(connection)

        def work() -> Any:
            raw = files.decode(params.data, params.encoding)
            return files.write(
                params.uri,
                raw,
                mode=_value(params.mode),
                position=_value(params.position),
                create_only=_value(params.create_only) is True,
                if_match=_value(params.if_match),
            )

        change = await self._run(connection, "resourceWrite", params.channel, work, mutation=True)
        log.info(
            "resource written",
            conn=connection.id,
            client_id=connection.client_id,
            uri=params.uri,
            path=change.path,
            bytes=change.size,
            mode=_value(params.mode) or "truncate",
        )
        return _EMPTY

    async def list(self, connection: Connection, params: ResourceListParams) -> bytes:
        files = self._files(connection, self.listing_roots(connection))
        result = await self._run(
            connection, "resourceList", params.channel, lambda: files.list_directory(params.uri)
        )
        return codec.encode(result)

    async def copy(self, connection: Connection, params: ResourceCopyParams) -> bytes:
        files = self._files(connection)
        fail = _value(params.fail_if_exists) is True
        change = await self._run(
            connection,
            "resourceCopy",
            params.channel,
            lambda: files.copy(params.source, params.destination, fail),
            mutation=True,
        )
        log.info(
            "resource copied",
            conn=connection.id,
            client_id=connection.client_id,
            path=change.path,
            destination=change.destination,
            bytes=change.size,
        )
        return _EMPTY

    async def move(self, connection: Connection, params: ResourceMoveParams) -> bytes:
        files = self._files(connection)
        fail = _value(params.fail_if_exists) is True
        change = await self._run(
            connection,
            "resourceMove",
            params.channel,
            lambda: files.move(params.source, params.destination, fail),
            mutation=True,
        )
        log.info(
            "resource moved",
            conn=connection.id,
            client_id=connection.client_id,
            path=change.path,
            destination=change.destination,
        )
        return _EMPTY

    async def delete(self, connection: Connection, params: ResourceDeleteParams) -> bytes:
        files = self._files(connection)
        recursive = _value(params.recursive) is True
        change = await self._run(
            connection,
            "resourceDelete",
            params.channel,
            lambda: files.delete(params.uri, recursive),
            mutation=True,
        )
        log.info(
            "resource deleted",
            conn=connection.id,
            client_id=connection.client_id,
            path=change.path,
            bytes=change.size,
            recursive=recursive,
        )
        return _EMPTY

    async def resolve(self, connection: Connection, params: ResourceResolveParams) -> bytes:
        files = self._files(connection)
        follow = _value(params.follow_symlinks) is not False  # default true (common.md)
        result = await self._run(
            connection,
            "resourceResolve",
            params.channel,
            lambda: files.resolve(params.uri, follow),
        )
        return codec.encode(result)

    async def mkdir(self, connection: Connection, params: ResourceMkdirParams) -> bytes:
        files = self._files(connection)
        change = await self._run(
            connection,
            "resourceMkdir",
            params.channel,
            lambda: files.mkdir(params.uri),
            mutation=True,
        )
        if change.created:
            log.info(
                "directory created",
                conn=connection.id,
                client_id=connection.client_id,
                path=change.path,
            )
        return _EMPTY

    async def request(self, connection: Connection, params: ResourceRequestParams) -> bytes:
        files = self._files(connection)
        await self._run(
            connection, "resourceRequest", params.channel, lambda: files.request(params.uri)
        )
        return _EMPTY


async def _in_thread(work: Callable[[], T]) -> T:
    """``work()`` in the default executor; a cancelled caller still waits for it to end.

    A thread cannot be stopped: releasing the mutation lock while it runs would
    let the next mutation overlap it.
    """
    future = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        # Nobody reads the outcome now: retrieve it, so no "never retrieved" warning.
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        await asyncio.wait([future])
        raise

"""Resource watches: ``createResourceWatch`` and the ``ahp-resource-watch:/<id>`` channels.

Layer: host (asyncio), above the ``Host`` registry and below the gateway, which
builds one :class:`ResourceWatches` beside the command dispatcher and lets it
register ``createResourceWatch`` (``Commands.register``). The host knows the
service only as a :class:`~ahp_server.host.host.WorkspaceService` (start,
session disposal, stop); the hub tells it when a watch's last subscriber
leaves (:meth:`~ahp_server.host.core.sequencer.Hub.on_vacated`).

Specification: ``docs/specification/resource-watch-channel.md``,
``CreateResourceWatchParams`` in ``docs/reference/common.md``, WIRE-SUMMARY
§4.1 and §12. What this host decides where the spec is silent
(docs/workspace.md, "Resource watches"):

* **What may be watched**: an existing file or directory, named by a
  ``file:`` URI (an absolute path is accepted too), that resolves (every link
  followed) inside the working directories of the sessions the host knows —
  the confinement of ``workspace/paths.py``. Outside them: ``-32009``
  PermissionDenied (spec: "the same permission flow as the rest of the
  ``resource*`` family"); missing: ``-32008`` NotFound; not a ``file:`` URI or
  path: ``-32602``.
* **Events**: ``resourceWatch/changed`` with ``{uri, type}`` items, the URIs
  under the root *as the client named it* (``file:`` URIs). A directory root
  reports changes of the directory itself and, ``recursive`` or not, of its
  entries — with ``recursive`` of everything beneath; a file root reports
  changes of that file only (its directory is watched, so an atomic replace
  is still seen). Filters: ``workspace/globs.py``. Changes within one batch
  come sorted by URI; their order carries no meaning (the kernel coalesces),
  and a path may appear twice (``added`` and ``updated``): a client that
  needs the truth reads the file.
* **Batching**: watchfiles groups changes for up to ``watch_debounce_ms``
  (it yields earlier once 50 ms pass without a new one); each group goes out
  as actions of at most ``watch_batch_items`` items, one after the other. A
  group of more than ``watch_window_items`` changes is sent as a single
  ``updated`` change of the root: "rescan" (a client cannot tell a flood's
  partial list from a complete one; the root says it must look again).
* **Lifetime** (§12: "released when the last subscriber unsubscribes"): a
  watch ends when its last subscriber leaves (``unsubscribe`` or its
  connection dropping); when the connection that created it closes before
  anyone subscribed; when the session whose working directory held it is
  disposed (it is no longer confined); and when the host stops. Then the
  channel is gone: a later ``subscribe`` or ``reconnect`` finds it missing.
  Watches are **not persisted**: a restart ends them all. Their envelopes go
  through the store like every envelope (one global ``serverSeq``) and are
  deleted with the watch — or, after a crash, at the next start (a watch
  has a channel row, kind ``watch``, while it runs, for that).
* **Held by descriptor**: the watched directory (a file's directory, for a
  file) is opened when the watch is created, by the same walk as the
  ``resource*`` commands (``paths.open_confined``: no link followed), and the
  watcher watches ``/proc/self/fd/<n>`` — that directory itself, wherever it
  is renamed to. Swapping it (or a directory above it) for a symbolic link
  afterwards never makes the watcher follow out of the root: a directory made
  later beneath it is added through the descriptor too. The descriptor is
  closed when the watch ends.
* **Limits**: ``max_watches`` on the host, ``max_watches_per_user`` created
  by one user (multi-user mode: one user cannot take them all; a connection
  without a user is bounded by the host's limit) and
  ``max_watches_per_connection`` created by one connection, counting the
  watches still alive (``-32602`` beyond, naming the setting).
* **Ownership** (multi-user mode): a watch is its creator's user's; another
  user's ``subscribe`` (or ``reconnect``) to its channel is refused like
  another user's session (``-32009``; ``Host.may_access``, docs/protocol.md
  "Identity and ownership"), however the URI was learnt.
* **Not watched by the spec's reverse direction**: this host never sends
  ``createResourceWatch`` to a client.

Why watchfiles: a small, well-kept library over the Rust ``notify`` crate
(inotify, FSEvents, kqueue, ReadDirectoryChangesW, or polling) with the
debounce we need; the standard library has no file watching at all. Each
running watch holds one thread blocked in Rust (``awatch`` runs the watcher
through ``anyio.to_thread``), so the anyio thread limit is raised to cover
``max_watches`` beside anything else that uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
import structlog
import watchfiles
from msgspec import UnsetType

from ahp_server.host.actors import ROOT, ChannelActor
from ahp_server.host.core.fanout import Connection
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol.errors import AhpErrorCode, InternalError, InvalidParams, ProtocolError
from ahp_server.protocol.reducers import Clock, iso_timestamp
from ahp_server.protocol.reducers.resource_watch import reduce_resource_watch
from ahp_server.protocol.types import (
    CreateResourceWatchParams,
    CreateResourceWatchResult,
    PatternList,
    ResourceChange,
    ResourceWatchChangedAction,
    ResourceWatchChangedActionChanges,
    ResourceWatchState,
)
from ahp_server.protocol.uris import WATCH_SCHEME
from ahp_server.store.base import ChannelRow
from ahp_server.workspace.globs import PathFilter
from ahp_server.workspace.paths import (
    DIRECTORY,
    PathInvalid,
    PathRefused,
    confine_path,
    file_uri,
    file_uri_to_path,
    open_confined,
)

__all__ = ["WATCH_SCHEME", "ResourceWatches", "WatchActor"]

log = structlog.get_logger(__name__)

Handler = Callable[[Connection, Any], Awaitable[bytes]]

#: The kind of a watch's channel row (kept only while it runs).
KIND = "watch"
#: How long a stopping watcher may take to notice its stop event (it checks every step).
STOP_TIMEOUT = 5.0
#: watchfiles yields a group once this many ms pass without a new change.
_STEP_MS = 50
#: A descriptor only to stand for a directory (or to ``fstat`` a file): no I/O through it.
_HANDLE = getattr(os, "O_PATH", os.O_RDONLY) | os.O_NOFOLLOW
#: Threads anyio may run besides the watchers (its own default).
_OTHER_THREADS = 40

_TYPES = {
    watchfiles.Change.added: "added",
    watchfiles.Change.modified: "updated",
    watchfiles.Change.deleted: "deleted",
}


class WatchActor(ChannelActor[ResourceWatchState]):
    """``ahp-resource-watch:/<id>``: the watch descriptor, and its batches as actions.

    The state never changes (the reducer keeps no history); nothing on the
    channel is client-dispatchable (``dispatch_rules``); nothing is snapshotted.
    """

    #: The user whose connection created it (multi-user mode): only they and admins
    #: may subscribe (``Host.may_access``, an ``OwnedChannel``; docs/protocol.md).
    owner: str | None = None

    def reduce(self, state: ResourceWatchState, action: object, now: Clock) -> ResourceWatchState:
        return reduce_resource_watch(state, action, now)

    def snapshot(self) -> None:
        """Watches are not persisted: a restart ends them."""


@dataclass(eq=False)
class _Watch:
    uri: str
    actor: WatchActor
    #: The directory watched (resolved, as it was when the watch was made), and
    #: the root the client named (a path: reported URIs are built under it).
    directory: str
    shown: str
    #: A descriptor of ``directory`` (``O_PATH``), held while the watch lives:
    #: watchfiles watches it through ``/proc/self/fd`` (module docstring).
    fd: int
    #: A file root: only this name in ``directory`` is reported.
    file_name: str | None
    recursive: bool
    filter: PathFilter
    creator: Connection | None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    #: Why the watcher ended on its own, if it did.
    failure: str | None = None

    @property
    def watched(self) -> str:
        """What watchfiles watches, and the prefix of every path it reports."""
        return f"/proc/self/fd/{self.fd}"

    def accept(self, change: watchfiles.Change, path: str) -> bool:
        """watchfiles' filter (runs on the event loop, for every raw change)."""
        relative = _relative(path, self.watched)
        if relative is None:
            return False
        if self.file_name is not None:
            return relative == self.file_name
        if relative == "":
            return True  # the watched directory itself (deleted, say)
        if not self.recursive and "/" in relative:
            return False
        # A link inside the root that leads out is not followed into.
        if _relative(os.path.realpath(path), os.path.realpath(self.watched)) is None:
            return False
        return self.filter.accepts(relative)

    def change_uri(self, path: str) -> str:
        relative = _relative(path, self.watched) or ""
        if self.file_name is not None or not relative:
            return file_uri(self.shown)
        return file_uri(os.path.join(self.shown, relative))


def _relative(path: str, directory: str) -> str | None:
    """``path`` relative to ``directory`` (``""`` for itself), ``None`` when outside."""
    if path == directory:
        return ""
    prefix = directory if directory.endswith("/") else directory + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


class ResourceWatches:
    """Every resource watch of one host: the command, the watchers, their release."""

    def __init__(self, host: Host) -> None:
        self.host = host
        #: Live watches by channel URI.
        self.watches: dict[str, _Watch] = {}
        self._by_connection: dict[Connection, set[str]] = {}
        self._releasing: set[asyncio.Task[None]] = set()
        host.services.append(self)
        host.hub.on_vacated(self._vacated, self._dropped)

    def register(self, register: Callable[[str, Handler, type[Any]], None]) -> None:
        """Add the command to the dispatcher (``Commands.register``)."""
        register("createResourceWatch", self.create, CreateResourceWatchParams)

    # -- the command ------------------------------------------------------------------------

    async def create(self, connection: Connection, params: CreateResourceWatchParams) -> bytes:
        if params.channel != ROOT:
            raise InvalidParams(f"createResourceWatch is sent on {ROOT!r}, not {params.channel!r}")
        settings = self.host.settings
        mine = self._by_connection.get(connection, set())
        if len(mine) >= settings.max_watches_per_connection:
            raise InvalidParams(
                f"this connection already has {len(mine)} resource watches, the limit "
                "(workspace.max_watches_per_connection): unsubscribe from one first"
            )
        user = connection.user
        if user is not None:
            theirs = sum(1 for w in self.watches.values() if w.actor.owner == user)
            if theirs >= settings.max_watches_per_user:
                raise InvalidParams(
                    f"user {user!r} already has {theirs} resource watches, the limit "
                    "(workspace.max_watches_per_user): unsubscribe from one first"
                )
        if len(self.watches) >= settings.max_watches:
            raise InvalidParams(
                f"this host already has {len(self.watches)} resource watches, the limit "
                "(workspace.max_watches)"
            )
        watch = self._new_watch(connection, params)
        watch.actor.owner = connection.user  # before anyone can reach it
        self.watches[watch.uri] = watch
        self._by_connection.setdefault(connection, set()).add(watch.uri)
        self.host.workspace_channels[watch.uri] = watch.actor
        # A row only so that the actions logged for it are found and deleted at the
        # next start if the host dies first (the state itself is never stored).
        created_at = iso_timestamp(self.host.now())
        self.host.store.put_channel(watch.uri, KIND, None, created_at, None)
        watch.actor.start()
        _make_room_for_threads(settings.max_watches)
        watch.task = asyncio.get_running_loop().create_task(
            self._run(watch), name=f"watch {watch.uri}"
        )
        # The task's first step opens the watcher (synchronously, in awatch's
        # first iteration): once it has run, every later change is seen — or
        # the watcher failed to open, and the client hears why.
        await asyncio.sleep(0)
        if watch.task.done():
            await self._release(watch.uri, "failed to start")
            raise InternalError(f"the path cannot be watched: {watch.failure or 'unknown error'}")
        log.info(
            "resource watch created",
            watch=watch.uri,
            conn=connection.id,
            client_id=connection.client_id,
            path=watch.shown,
            recursive=watch.recursive,
        )
        return codec.encode(CreateResourceWatchResult(channel=watch.uri))

    def _new_watch(self, connection: Connection, params: CreateResourceWatchParams) -> _Watch:
        """Check the path (confined, existing) and build the watch (not started)."""
        uri = params.uri
        try:
            path = uri if uri.startswith("/") else file_uri_to_path(uri)
            roots = self.host.working_directories(viewer=connection)
            resolved = confine_path(path, roots, self.host.roots.forbidden)
            fd, mode = _open_watched(resolved, roots, uri)
        except PathInvalid as error:
            raise InvalidParams(str(error)) from None
        except PathRefused as error:
            log.warning(
                "resource watch denied",
                conn=connection.id,
                client_id=connection.client_id,
                reason=str(error),
            )
            raise ProtocolError(str(error), code=AhpErrorCode.PermissionDenied) from None
        except FileNotFoundError:
            raise ProtocolError(f"{uri!r} does not exist", code=AhpErrorCode.NotFound) from None
        except OSError as error:
            raise ProtocolError(
                f"{uri!r} cannot be watched: {error.strerror}", code=AhpErrorCode.PermissionDenied
            ) from None
        if stat.S_ISDIR(mode):
            directory, file_name = str(resolved), None
        else:
            directory, file_name = str(resolved.parent), resolved.name
        recursive = params.recursive is True
        state = ResourceWatchState(
            root=uri,  # verbatim: "captured at createResourceWatch time" (the spec)
            recursive=recursive,
            excludes=params.excludes,
            includes=params.includes,
        )
        channel = f"{WATCH_SCHEME}{uuid.uuid4()}"
        return _Watch(
            uri=channel,
            actor=WatchActor(self.host, channel, state),
            directory=directory,
            fd=fd,
            shown=os.path.normpath(path),
            file_name=file_name,
            recursive=recursive and file_name is None,
            filter=PathFilter(_patterns(params.includes), _patterns(params.excludes)),
            creator=connection,
        )

    def working_directories(self, *, excluding: str | None = None) -> list[str]:
        """The roots (``Host.working_directories``), perhaps without a session being disposed."""
        return self.host.working_directories(excluding=excluding)

    # -- the watcher ------------------------------------------------------------------------

    async def _run(self, watch: _Watch) -> None:
        structlog.contextvars.bind_contextvars(channel=watch.uri)
        settings = self.host.settings
        debounce = settings.watch_debounce_ms
        try:
            async for changes in watchfiles.awatch(
                watch.watched,
                watch_filter=watch.accept,
                debounce=debounce,
                step=min(_STEP_MS, debounce),
                stop_event=watch.stop,
                recursive=watch.recursive,
                ignore_permission_denied=True,
            ):
                if watch.stop.is_set():
                    break
                await self._publish(watch, changes)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # task boundary: a failed watcher ends its watch, not the host
            watch.failure = str(error) or type(error).__name__
            log.exception("resource watcher failed", watch=watch.uri)
            if watch.uri in self.watches:
                self._release_soon(watch.uri, "the watcher failed")
        log.debug("resource watcher ended", watch=watch.uri)

    async def _publish(self, watch: _Watch, changes: set[tuple[watchfiles.Change, str]]) -> None:
        settings = self.host.settings
        items = sorted((watch.change_uri(path), _TYPES[change]) for change, path in changes)
        if len(items) > settings.watch_window_items:
            log.info("resource watch flooded: rescan", watch=watch.uri, changes=len(items))
            items = [(file_uri(watch.shown), "updated")]
        size = settings.watch_batch_items
        for start in range(0, len(items), size):
            batch = tuple(ResourceChange(uri=u, type=t) for u, t in items[start : start + size])
            action = ResourceWatchChangedAction(
                changes=ResourceWatchChangedActionChanges(items=batch)
            )
            # Waits until delivered: a flood is paced by the store and the hub.
            await watch.actor.apply_server(action)

    # -- release ----------------------------------------------------------------------------

    def _vacated(self, channel: str) -> None:
        """``Hub``: the last subscriber left ``channel`` (WIRE-SUMMARY §12)."""
        if channel in self.watches:
            self._release_soon(channel, "no subscriber left")

    def _dropped(self, connection: Connection) -> None:
        """``Hub``: a connection closed; its watches nobody subscribed to end with it."""
        for uri in self._by_connection.pop(connection, set()):
            watch = self.watches.get(uri)
            if watch is not None:
                watch.creator = None
                if not self.host.hub.subscribers(uri):
                    self._release_soon(uri, "its connection closed")

    def _release_soon(self, uri: str, why: str) -> None:
        # Unreachable at once: nobody subscribes to a watch that is going away.
        self.host.workspace_channels.pop(uri, None)
        task = asyncio.get_running_loop().create_task(self._release(uri, why))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _release(self, uri: str, why: str) -> None:
        """End a watch: its watcher, its actor, its subscriptions and stored envelopes."""
        watch = self.watches.pop(uri, None)
        if watch is None:
            return
        watch.stop.set()  # the watcher thread sees it within a step
        self.host.workspace_channels.pop(uri, None)  # no new subscriber from now on
        if watch.creator is not None:
            mine = self._by_connection.get(watch.creator)
            if mine is not None:
                mine.discard(uri)
                if not mine:
                    del self._by_connection[watch.creator]
        task = watch.task
        if task is not None and task is not asyncio.current_task() and not task.done():
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            except Exception:  # noqa: BLE001, S110 - logged by the task itself
                pass
        os.close(watch.fd)  # the watcher has ended: nothing watches through it any more
        await watch.actor.stop()
        # Only now: a batch still being delivered would re-create its replay buffer.
        self.host.hub.drop_channel(uri)
        self.host.store.delete_channel(uri)  # its row and the actions logged for it
        log.info("resource watch released", watch=uri, why=why)

    # -- WorkspaceService ---------------------------------------------------------------------

    async def start(self, rows: Sequence[ChannelRow]) -> None:
        """Nothing to take back (watches are not persisted): delete what a crash left."""
        for row in rows:
            if row.kind == KIND:
                self.host.store.delete_channel(row.uri)

    async def chat_disposed(self, chat: str) -> None:
        """``WorkspaceService``: nothing here belongs to a chat alone."""

    async def session_disposed(self, session: str) -> None:
        """End the watches no longer inside the working directories of the other sessions."""
        roots = self.working_directories(excluding=session)
        for uri, watch in list(self.watches.items()):
            try:
                confine_path(os.path.join(watch.directory, watch.file_name or ""), roots)
            except PathRefused:
                await self._release(uri, "its working directory is gone")

    async def stop(self) -> None:
        """The host stops: every watcher ends (nothing is kept)."""
        for uri in list(self.watches):
            await self._release(uri, "the host is stopping")
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)


def _open_watched(resolved: Path, roots: list[str], uri: str) -> tuple[int, int]:
    """A descriptor of the directory to watch — ``resolved`` itself, or a file's directory —
    opened by the walk that follows no link, and ``resolved``'s mode; :class:`InvalidParams`
    for anything but a file or a directory."""
    fd = open_confined(resolved, roots, _HANDLE, shown=uri)
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if stat.S_ISDIR(mode):
        return fd, mode
    os.close(fd)
    if not stat.S_ISREG(mode):
        raise InvalidParams(f"{uri!r} is neither a file nor a directory")
    return open_confined(resolved.parent, roots, DIRECTORY, shown=uri), mode


def _patterns(patterns: PatternList | UnsetType) -> tuple[str, ...]:
    """The ``{items}`` of a ``PatternList`` (absent: none)."""
    return () if isinstance(patterns, UnsetType) else tuple(patterns.items)


def _make_room_for_threads(watches: int) -> None:
    """Each running watcher blocks one anyio worker thread: raise anyio's limit to fit them."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    wanted = _OTHER_THREADS + watches
    if limiter.total_tokens < wanted:
        limiter.total_tokens = wanted

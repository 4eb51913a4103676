"""A bounded FIFO mailbox for one consumer task: every actor's inbox.

Layer: host (asyncio).

``asyncio.Queue`` does more than an actor needs (``task_done``/``join``
bookkeeping on every put, several consumers) and it sits on the hottest path
of the host: every streamed ``chat/delta`` goes through one put and one get.
This mailbox keeps the same policy — producers **wait** while it is full
(backpressure, docs/architecture.md) and are let in first come, first served —
with a deque and at most one waiting consumer. :meth:`Mailbox.offer` lets a
producer skip the coroutine when there is room.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["Mailbox"]

T = TypeVar("T")


class Mailbox(Generic[T]):
    """Bounded FIFO; one consumer (:meth:`get`), any number of producers."""

    __slots__ = ("_getter", "_items", "_maxsize", "_putters")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("a mailbox holds at least one message")
        self._items: deque[T] = deque()
        self._maxsize = maxsize
        self._getter: asyncio.Future[None] | None = None
        self._putters: deque[asyncio.Future[None]] = deque()

    def qsize(self) -> int:
        return len(self._items)

    def full(self) -> bool:
        return len(self._items) >= self._maxsize

    def __bool__(self) -> bool:
        return bool(self._items)

    def room(self) -> int:
        """How many messages :meth:`offer` takes now (none while producers wait)."""
        return 0 if self._putters else self._maxsize - len(self._items)

    def offer(self, item: T) -> bool:
        """Queue ``item`` if there is room and nobody is already waiting; never blocks."""
        if len(self._items) >= self._maxsize or self._putters:
            return False
        self._append(item)
        return True

    async def put(self, item: T) -> None:
        """Queue ``item``, waiting (in arrival order) while the mailbox is full."""
        if self.offer(item):
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._putters.append(waiter)
        try:
            while True:
                await waiter
                if len(self._items) < self._maxsize:
                    break
                # Woken but the room went to someone else: wait again, first in line.
                waiter = asyncio.get_running_loop().create_future()
                self._putters.appendleft(waiter)
        except asyncio.CancelledError:
            if waiter in self._putters:
                self._putters.remove(waiter)
            elif waiter.done() and not waiter.cancelled():
                self._wake_putter()  # pass on the room we were given
            raise
        self._append(item)
        self._wake_putter()  # more room may be left for the next producer

    def get_nowait(self) -> T:
        """The oldest message (the mailbox must not be empty)."""
        item = self._items.popleft()
        if self._putters:
            self._wake_putter()
        return item

    async def get(self) -> T:
        """The oldest message, waiting for one (one consumer only)."""
        while not self._items:
            getter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getter = getter
            try:
                await getter
            finally:
                if self._getter is getter:
                    self._getter = None
        return self.get_nowait()

    def _append(self, item: T) -> None:
        self._items.append(item)
        getter = self._getter
        if getter is not None:
            self._getter = None
            if not getter.done():
                getter.set_result(None)

    def _wake_putter(self) -> None:
        if len(self._items) >= self._maxsize:
            return
        while self._putters:
            putter = self._putters.popleft()
            if not putter.done():
                putter.set_result(None)
                return

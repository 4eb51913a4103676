"""A TCP relay the tests can cut: a network drop between a client and a server.

Used in front of a host (``tests/browser/test_page.py``: the page's network
drops) and in front of PostgreSQL (``tests/e2e/test_store_failure.py``: the
store's connection is lost, or stops answering).
"""

from __future__ import annotations

import asyncio
import contextlib


class Proxy:
    """A TCP relay to ``127.0.0.1:target_port`` whose connections can be cut.

    A page loaded through it has the relay's origin; the host sees the same
    Host header and admits it as the page's own origin.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.refusing = False
        #: Cleared by :meth:`stall`: what arrives is held, not relayed.
        self.flowing = asyncio.Event()
        self.flowing.set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    await self.flowing.wait()
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers.difference_update((writer, up_writer))

    def drop(self) -> int:
        """Drop every connection (a reset, as a network or server gone) and refuse new
        ones until :meth:`restore`; how many relayed connections were dropped."""
        self.refusing = True
        dropped = len(self.writers) // 2
        for writer in list(self.writers):
            transport = writer.transport
            transport.abort()  # type: ignore[attr-defined]
        return dropped

    def stall(self) -> None:
        """Relay nothing more, closing nothing: a server that stopped answering
        (a network partition, a hung server), not one that went away."""
        self.flowing.clear()

    def restore(self) -> None:
        """Relay new connections again."""
        self.refusing = False

    async def cut(self, ms: int) -> None:
        """Drop every connection and refuse new ones for ``ms`` milliseconds."""
        self.drop()
        await asyncio.sleep(ms / 1000)
        self.restore()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in list(self.writers):
                writer.transport.abort()  # type: ignore[attr-defined]

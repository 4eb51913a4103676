"""The floor: a bare ``websockets`` asyncio server with no protocol logic.

``python -m bench.floor`` listens on 127.0.0.1 (``--port 0``: any free port)
and prints ``listening ws://127.0.0.1:<port>`` on stdout. What it does with a
text frame:

* a frame starting with ``!`` is a command (JSON after the ``!``):

  - ``{"op": "stream", "n": N, "frame": F, "end": E}``: send the
    pre-encoded ``F`` N times to *this* connection, then ``E``;
  - ``{"op": "tokens", "n": N, "frame": F, "end": E}``: like ``stream``, but
    one frame per loop iteration (a model's token stream: something else
    runs between two tokens);
  - ``{"op": "turns", "n": N, "frame": F, "end": E}``: from now on this
    connection is a turn server: every frame it receives is answered with
    ``F`` N times, then ``E`` (a short turn's frames, the host's turn floor);
  - ``{"op": "join", "group": G}``: add this connection to group ``G``
    (answered with ``{"joined": G}``);
  - ``{"op": "paced", "group": G, "n": N, "ms": M, "frame": F, "end": E}``:
    an open-loop model stream to every connection of group ``G``: frame k
    (``F`` with ``@K@`` replaced by k) is due at start + k × M ms and sent
    at once when behind, then ``E`` (the capacity benchmark's floor);
  - ``{"op": "fanout", "n": N, "expect": K, "frame": F, "end": E}``: wait until
    K other connections are open, then ``broadcast()`` ``F`` N times to all of
    them, then ``E``;

* any other frame is echoed back unchanged (the round-trip floor).

Frames are sent with ``broadcast()`` (no per-send await); every 64 frames the
sender yields to the loop and, if a receiver's socket buffer holds over 1 MiB,
waits for it to drain: a bare server with the same kind of back-pressure a
real host needs.

It runs on the event loop the host's default picks (``server.event_loop =
"auto"``: uvloop where installed; ``--loop`` chooses), so a ratio to it is the
protocol's work, not the loop's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import Sequence

from websockets.asyncio.server import ServerConnection, broadcast, serve

from ahp_server.eventloop import run

BATCH = 64
HIGH_WATER = 1 << 20


def _backlogged(connections: Sequence[ServerConnection]) -> bool:
    for connection in connections:
        transport = connection.transport
        if transport is not None and transport.get_write_buffer_size() > HIGH_WATER:
            return True
    return False


async def blast(connections: Sequence[ServerConnection], frame: str, n: int, end: str) -> None:
    """``broadcast`` ``frame`` ``n`` times then ``end``, yielding and draining every batch."""
    for i in range(n):
        broadcast(connections, frame)
        if i % BATCH == BATCH - 1:
            await asyncio.sleep(0)
            while _backlogged(connections):  # noqa: ASYNC110 - no drain event for broadcast
                await asyncio.sleep(0.001)
    broadcast(connections, end)


GROUPS: dict[str, list[ServerConnection]] = {}
PACERS: set[asyncio.Task[None]] = set()


async def paced(group: Sequence[ServerConnection], frame: str, n: int, ms: float, end: str) -> None:
    """Frame k at start + k × ``ms`` (open loop: late frames go at once), then ``end``."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for k in range(n):
        delay = start + k * ms / 1000 - loop.time()
        await asyncio.sleep(max(delay, 0.0))
        broadcast(group, frame.replace("@K@", str(k)))
    broadcast(group, end)


async def handler(connection: ServerConnection) -> None:
    server = connection.server
    turn: dict[str, object] | None = None
    async for message in connection:
        if turn is not None:
            for _ in range(int(str(turn["n"]))):
                broadcast([connection], str(turn["frame"]))
            await connection.send(str(turn["end"]))
            continue
        if isinstance(message, str) and message.startswith("!"):
            command = json.loads(message[1:])
            if command["op"] == "stream":
                await blast([connection], command["frame"], command["n"], command["end"])
            elif command["op"] == "join":
                GROUPS.setdefault(command["group"], []).append(connection)
                await connection.send(json.dumps({"joined": command["group"]}))
            elif command["op"] == "paced":
                group = GROUPS.pop(command["group"], [connection])
                task = asyncio.create_task(
                    paced(group, command["frame"], command["n"], command["ms"], command["end"])
                )
                PACERS.add(task)
                task.add_done_callback(PACERS.discard)
            elif command["op"] == "turns":
                turn = command
            elif command["op"] == "tokens":
                for _ in range(command["n"]):
                    await connection.send(command["frame"])
                    await asyncio.sleep(0)
                await connection.send(command["end"])
            elif command["op"] == "fanout":
                while len(server.connections) - 1 < command["expect"]:  # noqa: ASYNC110
                    await asyncio.sleep(0.001)
                others = [c for c in server.connections if c is not connection]
                await blast(others, command["frame"], command["n"], command["end"])
        else:
            await connection.send(message)


async def main_async(port: int) -> None:
    async with serve(
        handler, "127.0.0.1", port, max_size=None, compression=None, ping_interval=None
    ) as server:
        address = next(iter(server.sockets)).getsockname()
        print(f"listening ws://127.0.0.1:{address[1]}", flush=True)
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        run(main_async(args.port), args.loop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

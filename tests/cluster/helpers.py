"""Cluster nodes as real processes: ``python -m ahp_server serve`` with a bus and PostgreSQL.

Each :class:`Node` is its own process (kill -9, SIGSTOP and SIGTERM are
real); its JSON log lines are read all the time (a full stderr pipe would
block the node) and kept, so a test can wait for an event ("primary ready").

The nodes' NATS is a :class:`PrivateNats` of the tests' own — a
``nats-server`` child process on a free port that requires a user and a
password (``BUS_USER``/``BUS_PASSWORD``), as a deployment's should; the
machine's NATS (``AHP_TEST_NATS``, default ``nats://127.0.0.1:4222``, no
authentication; ``.ci/run`` starts it) serves the tests that drive the relay
in process (``tests/transport/test_relay.py``). Every node gets the cluster
secret ``CLUSTER_SECRET``; each test its own ``cluster.name``, so tests (and
other clusters) on one NATS server never hear each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

NATS_URL = os.environ.get("AHP_TEST_NATS", "nats://127.0.0.1:4222")
TIMEOUT = 30.0
NATS_SERVER = shutil.which("nats-server") or shutil.which("/usr/sbin/nats-server")
#: The credentials of the tests' own NATS server, and the cluster secret of their nodes.
BUS_USER = "ahp-test"
BUS_PASSWORD = "bus-password-1f4e9c2a7d"
CLUSTER_SECRET = "cluster-secret-5b8d0e3f9a6c4721"


def nats_or_skip() -> str:
    """The NATS URL, after checking that it answers (skip, or fail under CI)."""
    host_port = NATS_URL.split("://", 1)[1]
    host, _, port = host_port.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as error:
        reason = f"NATS does not answer at {NATS_URL} ({error})"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: .ci/run starts it", pytrace=False)
        pytest.skip(reason)
    return NATS_URL


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nats_server_or_skip() -> str:
    """The ``nats-server`` binary (skip without one, or fail under CI)."""
    if NATS_SERVER is None:
        reason = "no nats-server on PATH nor at /usr/sbin/nats-server"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI must have it", pytrace=False)
        pytest.skip(reason)
    return NATS_SERVER


class PrivateNats:
    """A ``nats-server`` of the tests' own: JetStream on, a user and a password required.

    On a free port of loopback with its store in ``directory``; it can be
    killed and started again on the same port and store (``test_bus_outage``).
    Its methods block for as long as the server takes to start or end
    (bounded); from a coroutine, call them in a thread.
    """

    def __init__(
        self, directory: Path, *, user: str = BUS_USER, password: str = BUS_PASSWORD
    ) -> None:
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.user = user
        self.password = password
        self.store = directory / "jetstream"
        self.log = directory / "nats-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.process is None or self.process.returncode is not None
        binary = nats_server_or_skip()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    "-a",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-js",
                    "-sd",
                    str(self.store),
                    "--user",
                    self.user,
                    "--pass",
                    self.password,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"nats-server exited ({self.process.returncode}):\n"
                    + self.log.read_text(errors="replace")[-2000:]
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: the bus is gone at once, nothing flushed, no goodbye to clients."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=TIMEOUT)

    def close(self) -> None:
        """Stop it (SIGTERM, then SIGKILL) and reap it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=TIMEOUT)

    async def client(self, **options: Any) -> Any:
        """A nats-py client of this server, with its credentials (the caller closes it)."""
        import nats

        return await nats.connect(
            self.url,
            user=self.user,
            password=self.password,
            connect_timeout=5,
            allow_reconnect=False,
            **options,
        )


#: Short enough for failover in seconds, long enough that a loaded CI machine
#: (browsers, builds, three nodes on two cores) does not miss heartbeats.
LEASE_TTL = 3.0
HEARTBEAT = 0.5


def cluster_config(
    directory: Path,
    *,
    lease_ttl: float = LEASE_TTL,
    heartbeat: float = HEARTBEAT,
    grace: float = 30.0,
    extra: str = "",
    mode: str = "primary",
    placement: str = "least-loaded",
) -> Path:
    """A TOML config with a short lease (failover in seconds, for tests).

    ``extra``: more TOML, appended as is (e.g. ``[[users]]`` tables); ``mode``:
    ``cluster.mode``; ``placement``: ``cluster.placement``.
    """
    path = directory / "cluster.toml"
    path.write_text(
        "[cluster]\n"
        f'mode = "{mode}"\n'
        f'placement = "{placement}"\n'
        f"lease_ttl = {lease_ttl}\n"
        f"heartbeat = {heartbeat}\n"
        "[server]\n"
        f"active_client_grace = {grace}\n" + extra
    )
    return path


class Node:
    """One cluster node process."""

    def __init__(
        self,
        name: str,
        *,
        store: str,
        bus: str,
        cluster: str,
        config: Path,
        port: int = 0,
        bus_user: str | None = BUS_USER,
        bus_password: str | None = BUS_PASSWORD,
        secret: str | None = CLUSTER_SECRET,
    ) -> None:
        """``bus_user``, ``bus_password``, ``secret``: its credentials (None: not set)."""
        self.name = name
        self.store = store
        self.bus = bus
        self.cluster = cluster
        self.config = config
        self.credentials = {
            "AHP_SERVER_BUS_USER": bus_user,
            "AHP_SERVER_BUS_PASSWORD": bus_password,
            "AHP_SERVER_CLUSTER_SECRET": secret,
        }
        self.port = port or free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.process: asyncio.subprocess.Process | None = None
        self.events: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self._changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "ahp_server",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-format",
            "json",
            "--config",
            str(self.config),
        ]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AHP_SERVER_")}
        env |= {
            "AHP_SERVER_STORE": self.store,
            "AHP_SERVER_BUS": self.bus,
            "AHP_SERVER_NODE_ID": self.name,
            "AHP_SERVER_CLUSTER_NAME": self.cluster,
        }
        env |= {k: v for k, v in self.credentials.items() if v is not None}
        return env

    async def start(self) -> None:
        self.events.clear()
        self.process = await asyncio.create_subprocess_exec(
            *self.command(), env=self.environment(), stderr=asyncio.subprocess.PIPE
        )
        self._reader = asyncio.get_running_loop().create_task(self._read())
        await self.wait_event("listening")

    async def _read(self) -> None:
        assert self.process is not None
        assert self.process.stderr is not None
        while True:
            line = (await self.process.stderr.readline()).decode(errors="replace")
            if not line:
                break
            self.lines.append(line)
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    self.events.append(json.loads(line))
            self._changed.set()
        self._changed.set()

    def has(self, event: str, **fields: object) -> bool:
        return any(
            e.get("event") == event and all(e.get(k) == v for k, v in fields.items())
            for e in self.events
        )

    async def wait_event(self, event: str, within: float = TIMEOUT, **fields: object) -> None:
        await self.wait(lambda: self.has(event, **fields), within, f"event {event!r}")

    async def wait(self, predicate: Callable[[], bool], within: float, what: str) -> None:
        async with asyncio.timeout(within):
            while not predicate():
                exited = self.process is not None and self.process.returncode is not None
                if exited and not predicate():
                    raise AssertionError(
                        f"node {self.name} exited ({self.process.returncode}) before {what}:\n"
                        + "".join(self.lines[-30:])
                    )
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await self._changed.wait()

    @property
    def is_primary(self) -> bool:
        return self.has("primary ready")

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()  # SIGKILL: no cleanup at all
        await self.process.wait()

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    async def terminate(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(TIMEOUT):
            return await self.process.wait()

    async def exit_code(self, within: float = TIMEOUT) -> int:
        assert self.process is not None
        async with asyncio.timeout(within):
            return await self.process.wait()

    async def close(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._reader


def new_cluster_name() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


def workspace_root(directory: Path) -> str:
    """A ``[workspace]`` line making ``directory/work`` (made here) the one root, when the
    settings know ``workspace.roots`` (working directories must lie in a root then);
    else nothing."""
    from ahp_server.config import _KEYS

    work = directory / "work"
    work.mkdir(exist_ok=True)
    return f'roots = ["{work}"]\n' if "workspace.roots" in _KEYS else ""


def multi_user(directory: Path, *names: str) -> tuple[str, dict[str, str]]:
    """``[[users]]`` tables for ``names`` (tokens in files under ``directory``), and the tokens;
    with :func:`workspace_root` (sessions are made inside a root)."""
    tokens: dict[str, str] = {}
    toml = ""
    for name in names:
        token = f"{name}-token-{uuid.uuid4().hex}"
        (directory / f"{name}.token").write_text(token)
        tokens[name] = token
        toml += f'[[users]]\nname = "{name}"\ntoken_file = "{directory / f"{name}.token"}"\n'
    root = workspace_root(directory)
    return toml + (f"[workspace]\n{root}" if root else ""), tokens


async def drop_cluster_record(cluster: str) -> None:
    """Delete the record a test cluster's primary wrote in JetStream (tests leave nothing)."""
    import nats

    from ahp_server.transport.relay import Subjects, forget_primary

    nc = await nats.connect(NATS_URL, connect_timeout=5)
    try:
        await forget_primary(nc, Subjects(cluster))
    finally:
        await nc.close()


def _alive(node: Node) -> bool:
    return node.process is not None and node.process.returncode is None


async def wait_for_primary(nodes: list[Node], within: float = TIMEOUT) -> Node:
    """The one node (of ``nodes``) that became the primary, once every other one relays to it."""
    async with asyncio.timeout(within):
        while True:
            primaries = [n for n in nodes if n.is_primary and _alive(n)]
            if primaries:
                assert len(primaries) == 1, [n.name for n in primaries]
                primary = primaries[0]
                if all(
                    n.has("relaying to the primary", primary=primary.name)
                    for n in nodes
                    if n is not primary and _alive(n)
                ):
                    return primary
            await asyncio.sleep(0.05)

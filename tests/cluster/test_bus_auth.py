"""The cluster bus, authenticated (docs/scale-out.md "Authentication"), over real processes.

Nodes run as processes on the tests' own NATS server, which requires a user
and a password (conftest.py). The attacker is a nats-py client with those
credentials — as if they leaked — but without the cluster secret: it reads
what crosses the bus, and publishes what it likes, forged or captured and
replayed. What it publishes must make no node act: no connection opened on
the primary, nothing sent back. Each test waits for what the nodes log or
send, every wait bounded, and asserts on what was received.

The pure parts (the MAC, the freshness of opens) are tested first, with a
clock of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from ahp_server.client import AhpClient
from ahp_server.protocol.types import ChatState
from ahp_server.transport.relay import BusWarnings
from ahp_server.transport.relay_format import (
    MAC_BYTES,
    OpenGuard,
    Signer,
    Subjects,
    decode,
    encode,
    fresh_open,
    parse_fresh_open,
    unpack_frames,
)
from tests.cluster.helpers import (
    BUS_PASSWORD,
    BUS_USER,
    CLUSTER_SECRET,
    Node,
    PrivateNats,
    cluster_config,
    multi_user,
    new_cluster_name,
    wait_for_primary,
)
from tests.postgres import postgres_schema

ROOT = "ahp-root://"
TIMEOUT = 30.0
SECRET = CLUSTER_SECRET.encode()

# -- the pure parts ----------------------------------------------------------------------------


def test_a_sealed_message_opens_only_with_its_key_and_subject() -> None:
    signer = Signer(SECRET, "main")
    sealed = signer.seal("ahp.main.p.1.a", b"o1 1\nalice\n1")
    assert len(sealed) == MAC_BYTES + len(b"o1 1\nalice\n1")
    assert signer.unseal("ahp.main.p.1.a", sealed) == b"o1 1\nalice\n1"
    # Another subject (another edge's, another epoch's), another key, another cluster.
    assert signer.unseal("ahp.main.p.1.b", sealed) is None
    assert signer.unseal("ahp.main.p.2.a", sealed) is None
    assert Signer(b"another secret of 16+ bytes", "main").unseal("ahp.main.p.1.a", sealed) is None
    assert Signer(SECRET, "other").unseal("ahp.main.p.1.a", sealed) is None
    # Any byte changed, cut short, or nothing but a message.
    for at in (0, MAC_BYTES - 1, MAC_BYTES, len(sealed) - 1):
        altered = bytearray(sealed)
        altered[at] ^= 1
        assert signer.unseal("ahp.main.p.1.a", bytes(altered)) is None
    assert signer.unseal("ahp.main.p.1.a", sealed[:-1]) is None
    assert signer.unseal("ahp.main.p.1.a", b"o1 1\nalice\n1") is None
    assert signer.unseal("ahp.main.p.1.a", b"") is None
    assert CLUSTER_SECRET not in repr(signer)
    # The MAC is HMAC-SHA256 (RFC 2104) under the key derived from the secret and the name.
    key = hmac.digest(SECRET, b"ahp-server cluster bus\nmain", "sha256")
    for message in (b"", b"o1 1\nalice\n1", bytes(range(256)) * 300):
        expected = hmac.digest(key, b"ahp.main.p.1.a\n" + message, "sha256")
        assert signer.seal("ahp.main.p.1.a", message) == expected + message


def test_a_signed_open_carries_its_stamp_and_nonce() -> None:
    nonce = secrets.token_hex(16).encode()
    assert parse_fresh_open(fresh_open(b"alice\n1", 1234, nonce)) == (1234, nonce, b"alice\n1")
    assert parse_fresh_open(fresh_open(b"", 1, nonce)) == (1, nonce, b"")
    bad = [b"", b"alice\n1", b"12 short\nalice", b"x " + nonce + b"\n", b"-1 " + nonce + b"\n"]
    for payload in bad:
        assert parse_fresh_open(payload) is None


def test_an_open_is_accepted_once_and_only_while_fresh() -> None:
    guard = OpenGuard(max_age_ms=30_000)
    now = 1_000_000_000
    first = secrets.token_hex(16).encode()
    assert guard.admit(now - 1_000, first, now) is None
    assert guard.admit(now - 1_000, first, now) == "replayed"
    assert guard.admit(now - 1_000, first, now + 29_000) == "replayed"  # still remembered
    assert guard.admit(now - 1_000, first, now + 29_001) == "stale"  # too old anyway, forgotten
    assert len(guard) == 0
    assert guard.admit(now, secrets.token_hex(16).encode(), now + 30_001) == "stale"
    assert guard.admit(now + 60_002, secrets.token_hex(16).encode(), now + 30_001) == (
        "from the future"
    )
    # A clock stepped back lets no old open in again.
    late = secrets.token_hex(16).encode()
    assert guard.admit(now + 40_000, late, now + 40_000) is None
    assert guard.admit(now + 5_000, secrets.token_hex(16).encode(), now) == "stale"


def test_the_guard_stays_bounded_and_narrows_its_window_instead() -> None:
    guard = OpenGuard(max_age_ms=30_000, capacity=3)
    now = 1_000_000
    nonces = [secrets.token_hex(16).encode() for _ in range(5)]
    for i, nonce in enumerate(nonces[:4]):
        assert guard.admit(now + i, nonce, now + 10) is None
    assert len(guard) == 3  # the oldest was let go ...
    assert guard.admit(now, nonces[0], now + 10) == "stale"  # ... and cannot come back
    assert guard.admit(now + 3, nonces[3], now + 10) == "replayed"
    assert guard.admit(now, nonces[4], now + 10) == "stale"  # stamped no later than it
    assert guard.admit(now + 4, nonces[4], now + 10) is None


def test_warnings_about_the_bus_come_once_per_interval_with_a_count() -> None:
    warnings = BusWarnings(interval=3600.0)
    with structlog.testing.capture_logs() as logged:
        for _ in range(5):
            warnings.warn("unauthenticated bus message dropped", subject="ahp.main.p.1.x")
        warnings.warn("relayed open refused", "replayed", why="replayed")
        warnings.warn("relayed open refused", "replayed", why="replayed")
        warnings.warn("relayed open refused", "stale", why="stale")  # a kind of its own
    assert [(e["event"], e.get("why"), e["count"]) for e in logged] == [
        ("unauthenticated bus message dropped", None, 1),
        ("relayed open refused", "replayed", 1),
        ("relayed open refused", "stale", 1),
    ]
    warnings = BusWarnings(interval=0.0)  # every one: each says how many it stands for
    with structlog.testing.capture_logs() as logged:
        for _ in range(3):
            warnings.warn("unauthenticated bus message dropped")
    assert [e["count"] for e in logged] == [1, 1, 1]


# -- over real processes ---------------------------------------------------------------------------


def rpc(id_: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


def initialize(client: str) -> bytes:
    params = {"channel": ROOT, "protocolVersions": ["0.7.0"], "clientId": client}
    return rpc(1, "initialize", params)


class Inbox:
    """What a nats-py client hears on ``subject``, kept in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self._changed = asyncio.Event()

    @classmethod
    async def on(cls, nc: Any, subject: str) -> Inbox:
        inbox = cls()

        async def keep(msg: Any) -> None:
            inbox.messages.append((msg.subject, bytes(msg.data)))
            inbox._changed.set()

        await nc.subscribe(subject, cb=keep)
        await nc.flush()
        return inbox

    async def wait(self, what: str, predicate: Any) -> None:
        async with asyncio.timeout(TIMEOUT):
            while not predicate(self.messages):
                self._changed.clear()
                await self._changed.wait()
        assert predicate(self.messages), what


async def connections(node: Node, token: str) -> int:
    """The node's ``ahp_connections`` gauge (/metrics, with a user's token)."""
    url = node.url.replace("ws://", "http://") + "/metrics"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})

    def fetch() -> str:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return str(answer.read().decode())

    for line in (await asyncio.to_thread(fetch)).splitlines():
        if line.startswith("ahp_connections "):
            return int(float(line.split()[1]))
    raise AssertionError("no ahp_connections in /metrics")


@contextlib.asynccontextmanager
async def primary_and_edge(
    bus: PrivateNats, tmp_path: Path, primary_toml: str = "", edge_toml: str | None = None
) -> AsyncIterator[tuple[Node, Node]]:
    """Two nodes: ``n0`` the primary (started first), ``n1`` an edge relaying to it.

    ``edge_toml``: the edge's own extra TOML (default: the primary's).
    """
    (tmp_path / "primary").mkdir()
    (tmp_path / "edge").mkdir()
    primary_config = cluster_config(tmp_path / "primary", extra=primary_toml)
    edge_config = cluster_config(
        tmp_path / "edge", extra=primary_toml if edge_toml is None else edge_toml
    )
    cluster = new_cluster_name()
    async with postgres_schema() as store:
        primary = Node("n0", store=store, bus=bus.url, cluster=cluster, config=primary_config)
        edge = Node("n1", store=store, bus=bus.url, cluster=cluster, config=edge_config)
        try:
            await primary.start()
            await primary.wait_event("primary ready")
            await edge.start()
            assert await wait_for_primary([primary, edge]) is primary
            yield primary, edge
        finally:
            await edge.close()
            await primary.close()
        for node in (primary, edge):  # no credential is ever logged
            text = "".join(node.lines)
            assert BUS_PASSWORD not in text
            assert CLUSTER_SECRET not in text


def epoch_of(beat: bytes) -> int:
    """The epoch a heartbeat names: signed, not secret (``<mac><node> <epoch>``)."""
    return int(beat.rsplit(b" ", 1)[1])


class SignedEdge:
    """The test playing an edge node — it has the cluster secret — beside the attacker:
    what the primary answers a node shows what the attacker would have read."""

    def __init__(self, nc: Any, cluster: str, epoch: int, name: str = "probe") -> None:
        self.nc = nc
        self.subjects = Subjects(cluster)
        self.signer = Signer(SECRET, cluster)
        self.subject = self.subjects.primary(epoch, name)
        self.name = name
        self.inbox = Inbox()

    async def start(self) -> None:
        self.inbox = await Inbox.on(self.nc, self.subjects.edge(self.name))

    async def beat(self) -> None:
        beat = self.signer.seal(self.subjects.hb_edge, self.name.encode())
        await self.nc.publish(self.subjects.hb_edge, beat)

    async def open(self, conn: int, identity: bytes, *frames: bytes) -> None:
        """A fresh signed open as ``identity`` (``user\\nadmin-flag``), then ``frames``."""
        nonce = secrets.token_hex(16).encode()
        opening = fresh_open(identity, time.time_ns() // 1_000_000, nonce)
        messages = [encode("o", conn, 1, opening)]
        messages += [encode("t", conn, n, frame) for n, frame in enumerate(frames, 2)]
        for message in messages:
            await self.nc.publish(self.subject, self.signer.seal(self.subject, message))
        await self.nc.flush()

    def frames(self, conn: int) -> list[dict[str, Any]]:
        """Every frame the primary sent ``conn`` so far (``f`` and ``g`` messages)."""
        found: list[dict[str, Any]] = []
        for subject, data in self.inbox.messages:
            message = self.signer.unseal(subject, data)
            assert message is not None, "the primary signs what it sends"
            kind, target, _, _, payload = decode(message)
            if kind == "g":
                names, _, payload = payload.partition(b"\n")
                if not any(int(name.split(b":")[0]) == conn for name in names.split(b",")):
                    continue
            elif kind != "f" or target != conn:
                continue
            found += [json.loads(frame) for frame in unpack_frames(payload)]
        return found

    async def answer(self, conn: int, id_: int) -> dict[str, Any]:
        """The JSON-RPC answer to request ``id_`` of ``conn``."""

        def of(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [frame for frame in frames if frame.get("id") == id_]

        await self.inbox.wait(f"the answer to {id_}", lambda _: of(self.frames(conn)))
        return of(self.frames(conn))[0]


@pytest.mark.parametrize("credentials", ["none", "a wrong password", "a wrong password in the URL"])
async def test_a_node_the_bus_refuses_stops_at_start_naming_the_settings(
    tmp_path: Path, nats_bus: PrivateNats, credentials: str
) -> None:
    wrong = f"not-the-password-{uuid.uuid4().hex}"
    bus, user, password = nats_bus.url, None, None
    if credentials == "a wrong password":
        user, password = BUS_USER, wrong
    elif credentials == "a wrong password in the URL":
        bus = f"nats://{BUS_USER}:{wrong}@127.0.0.1:{nats_bus.port}"
    node = Node(
        "n0",
        store="postgres://nobody@127.0.0.1:1/none",  # never reached: the bus comes first
        bus=bus,
        cluster=new_cluster_name(),
        config=cluster_config(tmp_path),
        bus_user=user,
        bus_password=password,
    )
    result = await asyncio.to_thread(
        subprocess.run,
        node.command(),
        env=node.environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "refused this node's credentials" in output, output
    assert "cluster.bus_user" in output
    assert "cluster.bus_password" in output
    assert wrong not in output
    assert CLUSTER_SECRET not in output


async def test_credentials_in_the_url_work_and_are_never_logged(
    tmp_path: Path, nats_bus: PrivateNats
) -> None:
    config = cluster_config(tmp_path)
    cluster = new_cluster_name()
    url = f"nats://{BUS_USER}:{BUS_PASSWORD}@127.0.0.1:{nats_bus.port}"
    async with postgres_schema() as store:
        nodes = [
            Node(
                "n0",
                store=store,
                bus=url,
                cluster=cluster,
                config=config,
                bus_user=None,
                bus_password=None,
            ),
            Node("n1", store=store, bus=nats_bus.url, cluster=cluster, config=config),
        ]
        try:
            for node in nodes:
                await node.start()
            await wait_for_primary(nodes)
            masked = f"nats://{BUS_USER}:***@127.0.0.1:{nats_bus.port}"
            assert nodes[0].has("cluster node started", bus=masked)
            for node in nodes:  # credentials either way: no warning that there are none
                assert not any("no credentials" in str(e.get("event")) for e in node.events)
        finally:
            for node in nodes:
                await node.close()
    for node in nodes:
        text = "".join(node.lines)
        assert BUS_PASSWORD not in text
        assert CLUSTER_SECRET not in text


async def test_a_forged_open_without_the_secret_opens_nothing_and_reads_nothing(
    tmp_path: Path, nats_bus: PrivateNats
) -> None:
    """A client of NATS (its credentials leaked, not the cluster secret) reads the primary's
    heartbeat, publishes an open claiming alice — an admin — then an initialize and a
    subscribe to her chat, as an edge would: unsigned, and signed with a wrong key. The
    primary drops all of it: no connection, nothing sent back. The same messages signed
    with the secret (a node) are answered with her chat: the silence is a refusal."""
    users, tokens = multi_user(tmp_path, "alice")
    async with primary_and_edge(nats_bus, tmp_path, users) as (primary, _edge):
        subjects = Subjects(primary.cluster)
        alice = await AhpClient.connect(primary.url, token=tokens["alice"])
        hostile = await nats_bus.client()
        beating: asyncio.Task[None] | None = None
        try:
            chat = await alice.open_chat("echo", timeout=TIMEOUT)
            assert "secret plans" in await alice.ask(chat, "alice's secret plans", timeout=TIMEOUT)
            before = await connections(primary, tokens["alice"])

            heard = await Inbox.on(hostile, subjects.hb_primary)
            await heard.wait("a heartbeat", lambda got: got)
            epoch = epoch_of(heard.messages[0][1])
            answers = await Inbox.on(hostile, subjects.edge("evil"))
            probe = SignedEdge(hostile, primary.cluster, epoch)
            await probe.start()
            wrong = Signer(b"a guess at the cluster secret", primary.cluster)

            async def beat() -> None:  # keep both "edges" alive on the primary
                while True:
                    await hostile.publish(subjects.hb_edge, b"evil")
                    await probe.beat()
                    await asyncio.sleep(0.1)

            beating = asyncio.get_running_loop().create_task(beat())

            frames = [initialize("mallory"), rpc(2, "subscribe", {"channel": chat})]

            def messages(conn: int, opening: bytes) -> list[bytes]:
                return [encode("o", conn, 1, opening)] + [
                    encode("t", conn, n, frame) for n, frame in enumerate(frames, 2)
                ]

            stamp = time.time_ns() // 1_000_000
            fresh = fresh_open(b"alice\n1", stamp, secrets.token_hex(16).encode())
            evil = subjects.primary(epoch, "evil")
            for message in messages(1, b"alice\n1"):  # the format before signing
                await hostile.publish(evil, message)
            for message in messages(2, fresh):
                await hostile.publish(evil, wrong.seal(evil, message))
            # The primary hears one subscription in order: the probe comes after them.
            await probe.open(3, b"alice\n1", *frames)
            snapshot = await probe.answer(3, 2)
            assert "secret plans" in json.dumps(snapshot)
            assert answers.messages == []
            # One more: the probe's, not mallory's.
            assert await connections(primary, tokens["alice"]) == before + 1
            await primary.wait_event("unauthenticated bus message dropped")
            assert not primary.has("relayed open refused")  # dropped before any open
            # alice's own connection is untouched.
            await alice.ping(timeout=TIMEOUT)
            assert len(alice.confirmed(chat, ChatState).turns) == 1
        finally:
            if beating is not None:
                beating.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beating
            await hostile.close()
            await alice.close()


async def test_a_replayed_open_is_refused(tmp_path: Path, nats_bus: PrivateNats) -> None:
    """A client of NATS captures alice's genuine open (signed) and her initialize through
    an edge, and publishes them again: the primary refuses the replayed open (its nonce
    was seen) and her connection lives on; moved to another edge's subject, the same
    bytes do not even verify."""
    users, tokens = multi_user(tmp_path, "alice")
    async with primary_and_edge(nats_bus, tmp_path, users) as (primary, edge):
        subjects = Subjects(primary.cluster)
        spy = await nats_bus.client()
        alice: AhpClient | None = None
        try:
            captured = await Inbox.on(spy, f"ahp.{primary.cluster}.p.*.*")
            alice = await AhpClient.connect(edge.url, token=tokens["alice"])
            await alice.ping(timeout=TIMEOUT)

            def kinds(got: list[tuple[str, bytes]]) -> list[str]:
                return [decode(data[MAC_BYTES:])[0] for _, data in got]

            await captured.wait("the open, the initialize, the ping", lambda got: len(got) >= 3)
            assert kinds(captured.messages)[:2] == ["o", "t"]
            # Numbered from a random start in 48 bits (below 2**16 once in 2**32 runs).
            assert decode(captured.messages[0][1][MAC_BYTES:])[1] >= 2**16
            replay = captured.messages[:2]
            before = await connections(primary, tokens["alice"])
            for subject, data in replay:
                await spy.publish(subject, data)
            await spy.flush()
            await alice.ping(timeout=TIMEOUT)  # her connection was not touched
            assert not alice.closed
            await primary.wait_event("relayed open refused", why="replayed")
            await alice.ping(timeout=TIMEOUT)
            assert await connections(primary, tokens["alice"]) == before
            # The same open on another edge's subject: the MAC covers the subject.
            subject, data = replay[0]
            await spy.publish(subject.rsplit(".", 1)[0] + ".other", data)
            await spy.flush()
            await primary.wait_event("unauthenticated bus message dropped")
            await alice.ping(timeout=TIMEOUT)
            assert await connections(primary, tokens["alice"]) == before
            assert subjects.primary(1, edge.name) == subject
        finally:
            if alice is not None:
                await alice.close()
            await spy.close()


@pytest.mark.parametrize("edge_users", ["none", "a user the primary does not know"])
async def test_an_open_without_a_known_identity_is_refused_by_a_multi_user_primary(
    tmp_path: Path, nats_bus: PrivateNats, edge_users: str
) -> None:
    """An edge configured apart from the primary (no [[users]]: its door admits anyone on
    loopback, as nobody; or a user the primary does not have) relays a client: the
    multi-user primary refuses it with 1008 — nobody is never "sees everything"."""
    users, tokens = multi_user(tmp_path, "alice")
    headers: dict[str, str] = {}
    edge_toml = ""
    if edge_users != "none":
        (tmp_path / "edge-users").mkdir()
        edge_toml, theirs = multi_user(tmp_path / "edge-users", "mallory")
        headers = {"Authorization": f"Bearer {theirs['mallory']}"}
    why = "no identity (multi-user mode)" if edge_users == "none" else "unknown user"
    async with primary_and_edge(nats_bus, tmp_path, users, edge_toml) as (primary, edge):
        before = await connections(primary, tokens["alice"])
        received: list[str | bytes] = []
        async with connect(edge.url, additional_headers=headers, open_timeout=TIMEOUT) as ws:
            await ws.send(initialize("nobody").decode())
            with contextlib.suppress(ConnectionClosed):
                async with asyncio.timeout(TIMEOUT):
                    received.append(await ws.recv())  # the close, or an answer: served
            assert received == []
            assert (ws.close_code, ws.close_reason) == (1008, why)
        await primary.wait_event("relayed open refused", why=why)
        assert await connections(primary, tokens["alice"]) == before


async def test_the_primary_not_the_edge_says_who_is_an_admin(
    tmp_path: Path, nats_bus: PrivateNats
) -> None:
    """An open signed by a node (an edge configured apart from the primary, say) claims
    that alice is an admin: the primary's own [[users]] say she is not, so she does not
    see bob's session; bob, through the same path, does."""
    users, tokens = multi_user(tmp_path, "alice", "bob")
    async with primary_and_edge(nats_bus, tmp_path, users) as (primary, _edge):
        bob = await AhpClient.connect(primary.url, token=tokens["bob"])
        nc = await nats_bus.client()
        try:
            session = await bob.create_session("echo", timeout=TIMEOUT)
            heard = await Inbox.on(nc, Subjects(primary.cluster).hb_primary)
            await heard.wait("a heartbeat", lambda got: got)
            edge = SignedEdge(nc, primary.cluster, epoch_of(heard.messages[0][1]))
            await edge.start()
            listing = rpc(2, "listSessions", {"channel": ROOT})
            await edge.open(1, b"alice\n1", initialize("alice-relayed"), listing)
            await edge.open(2, b"bob\n", initialize("bob-relayed"), listing)

            def listed(answer: dict[str, Any]) -> list[str]:
                return [item["resource"] for item in answer["result"]["items"]]

            assert session not in listed(await edge.answer(1, 2))
            assert session in listed(await edge.answer(2, 2))
        finally:
            await nc.close()
            await bob.close()

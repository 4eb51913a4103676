"""A sharded node's heartbeat (transport/node_heartbeat.py) on the real NATS server.

Nodes are :class:`NodeHeartbeat` objects on connections of their own, one of
them through a :class:`~tests.proxy.Proxy` the test cuts. Every wait is
bounded by ``TIMEOUT``; assertions are on what each node heard.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
import nats

from ahp_server.transport.node_heartbeat import (
    MAX_BEAT_BYTES,
    MAX_BEAT_ROOTS_BYTES,
    Beat,
    NodeHeartbeat,
    fitting_roots,
    heartbeat_subject,
)
from ahp_server.transport.relay_format import Signer
from tests.cluster.helpers import nats_or_skip, new_cluster_name
from tests.postgres import until
from tests.proxy import Proxy

TIMEOUT = 20.0
SECRET = b"node-heartbeat-test-secret-7c1e"


async def connect(stack: contextlib.AsyncExitStack, url: str) -> Any:
    nc = await nats.connect(
        url,
        connect_timeout=TIMEOUT,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.1,
    )
    stack.push_async_callback(nc.close)
    return nc


async def heartbeat(
    stack: contextlib.AsyncExitStack,
    nc: Any,
    cluster: str,
    node: str,
    *,
    period: float = 0.05,
    sessions: int = 0,
    clock: Any = None,
) -> NodeHeartbeat:
    options: dict[str, Any] = {} if clock is None else {"clock": clock}
    beat = NodeHeartbeat(
        nc,
        cluster,
        node,
        Signer(SECRET, cluster),
        period=period,
        beat=lambda: Beat(node=node, sessions=sessions, seq=7),
        **options,
    )
    await beat.start()
    stack.push_async_callback(beat.aclose)
    return beat


async def _ready(value: bool) -> bool:
    return value


async def test_nodes_hear_themselves_and_each_others_load(
    stack: contextlib.AsyncExitStack,
) -> None:
    url, cluster = nats_or_skip(), new_cluster_name()
    a = await heartbeat(stack, await connect(stack, url), cluster, "node-a", sessions=3)
    b = await heartbeat(stack, await connect(stack, url), cluster, "node-b", sessions=5)
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready("node-b" in a.peers and "node-a" in b.peers))
        await until(lambda: _ready(a.heard_within(60) and b.heard_within(60)))
    beat_b, _ = a.peers["node-b"]
    assert (beat_b.node, beat_b.sessions, beat_b.seq) == ("node-b", 5, 7)
    assert beat_b.n >= 1
    assert set(b.live_peers(60)) == {"node-a"}
    assert "node-a" not in a.peers  # a node's own beat is not a peer's


async def test_forged_misnamed_malformed_and_replayed_beats_count_for_nothing(
    stack: contextlib.AsyncExitStack,
) -> None:
    url, cluster = nats_or_skip(), new_cluster_name()
    now = [1000.0]
    raw = await connect(stack, url)
    captured: list[bytes] = []

    async def capture(msg: Any) -> None:
        captured.append(msg.data)

    await raw.subscribe(heartbeat_subject(cluster, "node-a"), cb=capture)
    await raw.flush()
    # One beat at start, then none for an hour: what reaches it afterwards is ours.
    a = await heartbeat(
        stack, await connect(stack, url), cluster, "node-a", period=3600, clock=lambda: now[0]
    )
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(a.heard_within(0) and len(captured) == 1))
    now[0] += 100.0
    assert not a.heard_within(10)
    signer = Signer(SECRET, cluster)
    subject_a = heartbeat_subject(cluster, "node-a")
    body_b = msgspec.json.encode(Beat(node="node-b", n=99))
    sends = [
        (subject_a, captured[0]),  # a's own last beat, replayed: not newer than heard
        (subject_a, Signer(b"another secret", cluster).seal(subject_a, body_b)),  # forged
        (subject_a, signer.seal(subject_a, body_b)),  # b's beat on a's subject
        (subject_a, signer.seal(subject_a, b"{not json")),  # malformed
        (subject_a, signer.seal(subject_a, b"[" * (MAX_BEAT_BYTES + 1))),  # oversize
    ]
    for subject, data in sends:
        await raw.publish(subject, data)
    await raw.flush()
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(a.dropped == 4))
    # Nothing above made node-a heard again, nor node-b a peer.
    assert not a.heard_within(10)
    assert a.peers == {}


async def test_a_node_cut_off_the_bus_stops_hearing_itself_until_it_is_back(
    stack: contextlib.AsyncExitStack,
) -> None:
    url, cluster = nats_or_skip(), new_cluster_name()
    proxy = Proxy(int(url.rsplit(":", 1)[1]))
    port = await proxy.start()
    stack.push_async_callback(proxy.close)
    a = await heartbeat(stack, await connect(stack, f"nats://127.0.0.1:{port}"), cluster, "node-a")
    b = await heartbeat(stack, await connect(stack, url), cluster, "node-b")
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(a.heard_within(0.5) and "node-a" in b.peers))
    proxy.drop()  # the partition: node-a's connection reset, reconnects refused
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(not a.heard_within(0.5)))
        await until(lambda: _ready("node-a" not in b.live_peers(0.5)))
    before = b.peers["node-a"][0].n
    proxy.restore()
    async with asyncio.timeout(TIMEOUT):
        await until(lambda: _ready(a.heard_within(0.5) and "node-a" in b.live_peers(0.5)))
    assert b.peers["node-a"][0].n > before  # a new beat, not one buffered from before


def test_a_beat_declares_the_roots_that_fit_in_order_and_stays_within_its_bound() -> None:
    """``fitting_roots``: every root while they fit, in order; past
    ``MAX_BEAT_ROOTS_BYTES`` the first that fit (a prefix), so a beat carrying them, a
    long node name and large numbers still fits ``MAX_BEAT_BYTES`` (a receiver's bound)."""
    few = ("/srv/a", "/srv/b", "/home/ü")
    assert fitting_roots(few) == few
    many = tuple(f"/srv/projects/{'x' * 200}/{k}" for k in range(200))
    kept = fitting_roots(many)
    assert 0 < len(kept) < len(many)
    assert kept == many[: len(kept)]
    assert len(msgspec.json.encode(kept)) <= MAX_BEAT_ROOTS_BYTES
    beat = Beat(
        node="n" * 128,
        n=2**62,
        sessions=2**62,
        turns=2**62,
        seq=2**62,
        incarnation="f" * 16,
        leaving=True,
        roots=kept,
    )
    encoded = msgspec.json.encode(beat)
    assert len(encoded) <= MAX_BEAT_BYTES
    assert msgspec.json.decode(encoded, type=Beat).roots == kept
    # An older node's beat (no roots) still decodes: it declares none.
    assert msgspec.json.decode(b'{"node":"old","n":1}', type=Beat).roots == ()

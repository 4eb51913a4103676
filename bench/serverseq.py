"""One ``serverSeq`` across session owners: the sequencing mechanisms measured (issue 32 item 3).

``python -m bench.serverseq [--quick] [--out PATH] [--only pg|js]``

docs/scale-out.md "Sharded mode (design)" numbers every committed envelope of
every owner with one host-wide ``serverSeq``. This measures the two ways to do
it on the services the cluster already has, against the machine's PostgreSQL
(``AHP_BENCH_POSTGRES``, default ``postgres://postgres@127.0.0.1:5432/test``,
in a fresh schema) and NATS (``AHP_BENCH_NATS``, default ``nats://127.0.0.1:4222``):

* **pg** — the design's choice, the *commit counter*: an owner's group commit
  is one statement that checks its sessions' ownership epochs (``FOR SHARE``),
  raises the counter row by the batch's size (``UPDATE … RETURNING``) and
  inserts the batch's log segments numbered from it. The counter's row lock
  serialises commits cluster-wide, so ``serverSeq`` order is commit order and
  the sequence has no gaps; the owner then publishes the committed batch as
  one record on core NATS, and a node delivers records in order by the next
  number it expects, fetching from PostgreSQL any range whose record is late
  (``GRACE``: lost, or its owner died between commit and publish);
* **js** — the alternative: each envelope published to a JetStream stream
  (file storage, one replica) whose stream sequence is the ``serverSeq``; a
  node reads it with an ordered push consumer.

Owners are separate processes (1 or 3, "publishers"); the node is this process
(the "consumer"), which splices each envelope's ``serverSeq`` in and checks
that every number arrives once, in order. Envelopes are about 300 bytes.
Phases:

* **ceiling** — publishers flat out: envelopes/s delivered in order at the
  consumer (and, for pg, with one envelope per commit: the serialised commits/s);
* **light** / **heavy** / **half ceiling** — 3 publishers paced (``LIGHT_RATE``,
  ``HEAVY_RATE`` each, the same for both mechanisms; and half the mechanism's
  own 3-publisher ceiling in all): p50/p99 from an envelope being
  queued at its owner to its in-order arrival at the consumer, and from queued
  to committed (pg) or acknowledged (js) at the owner;
* **repair** (pg) — the light load, with every ``DROP_EVERY``-th record not
  published: the consumer fills the gaps from PostgreSQL and still sees every
  number once, in order.

And checks of the engines' behaviour the design relies on (``checks`` in the
JSON): pg — a commit with a stale ownership epoch writes nothing and takes no
number; a rolled-back commit leaves no gap; js — ``Nats-Expected-Last-Subject-Sequence``
and ``Nats-Expected-Last-Sequence`` refuse a stale expectation, ``Nats-Msg-Id``
makes a repeated publish a duplicate with the first one's sequence.

Prints a table and writes JSON (``bench/results/serverseq.json``). Figures,
never assertions (the checks are facts about the engines, recorded); the exit
status is 0 unless a run fails. Everything shares the machine's cores with
PostgreSQL and NATS: compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import multiprocessing
import os
import platform
import struct
import sys
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import nats
from nats.aio.msg import Msg
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import APIError

from ahp_server.store.ownership import (
    COUNTER,
    LogReader,
    Segment,
    SessionsFenced,
    batch_segments,
    commit_batch,
)
from ahp_server.transport.feed import FeedPublisher, FeedReader, FeedStats
from ahp_server.transport.feed_format import spliced
from ahp_server.transport.relay_format import Signer
from bench.suite import percentile, progress

ROOT_DIR = Path(__file__).resolve().parent.parent
POSTGRES = os.environ.get("AHP_BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
NATS = os.environ.get("AHP_BENCH_NATS", "nats://127.0.0.1:4222")
RESULTS = ROOT_DIR / "bench" / "results" / "serverseq.json"

#: Envelopes per second per publisher under light load (a streaming turn or two each).
LIGHT_RATE = 200
#: The most envelopes one pg commit takes (the store takes everything queued; this
#: bounds a flat-out publisher's batches).
BATCH_MAX = 256
#: Seconds a record may be late before the consumer fetches its range from PostgreSQL.
GRACE = 0.05
#: Envelopes per second per publisher under heavy load, for both mechanisms (3 publishers:
#: 9,000/s, about ninety chats streaming 100 tokens a second).
HEAVY_RATE = 3_000
#: In the repair phase, every this-many-th record (the 5th first) is not published.
DROP_EVERY = 100
#: Sessions each publisher owns (its batches are one log segment per session).
SESSIONS = 4


@dataclass(frozen=True)
class Sizes:
    #: Seconds each phase runs.
    seconds: float


FULL = Sizes(seconds=6.0)
QUICK = Sizes(seconds=0.8)


@dataclass(frozen=True)
class Phase:
    """What every publisher does for one phase (sent to the publisher processes)."""

    name: str
    mechanism: str  # "pg" or "js"
    publishers: int
    #: Envelopes/s per publisher; 0: flat out.
    rate: float
    seconds: float
    batch_max: int = BATCH_MAX
    #: Skip publishing every n-th record (pg; 0: never).
    drop_every: int = 0
    #: ``time.monotonic_ns()`` at which to start.
    start_ns: int = 0


# -- the envelope and the feed record -------------------------------------------------------

_BODY = msgspec.json.encode(
    {
        "channel": "ahp-chat:/00000000-0000-4000-8000-000000000000",
        "action": {
            "type": "chat/delta",
            "turnId": "00000000-0000-4000-8000-000000000001",
            "partIndex": 0,
            "text": "x" * 60,
        },
        "origin": {"clientId": "bench-client-0000", "clientSeq": 1},
    }
)
#: The feed's cluster secret (the records are signed, as a node's are).
SECRET = b"bench serverseq feed"


def envelope(queued_ns: int) -> bytes:
    """An envelope as stored (without ``serverSeq``), its queued time first (for latency)."""
    return b'{"queued":%d,%s' % (queued_ns, _BODY[1:])


def queued_ns(envelope: bytes) -> int:
    return int(envelope[10 : envelope.index(b",")])


ENVELOPE_BYTES = len(spliced(10**6, envelope(time.monotonic_ns())))


# -- PostgreSQL: the commit counter ---------------------------------------------------------

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO meta VALUES ('server_seq', 0);
CREATE TABLE log (
    first_seq BIGINT PRIMARY KEY,
    channel TEXT NOT NULL,
    last_seq BIGINT NOT NULL,
    entries BYTEA NOT NULL
);
CREATE TABLE session_owner (
    session TEXT PRIMARY KEY,
    node TEXT NOT NULL,
    epoch BIGINT NOT NULL
);
"""

#: The commit is the store's (``COMMIT`` in ahp_server/store/ownership.py): fenced by
#: every session's (node, epoch), numbered by the counter, the segments inserted; the
#: number before the batch's first, or no row when fenced.

#: The log and the counter are read with the store's ``LogReader``, the segments
#: written with its ``batch_segments`` (entries ``[offset, clock ms, envelope]``).


def feed_cluster(run: str) -> str:
    """The cluster name of a run's feed (subject ``ahp.bench<run>.feed``)."""
    return f"bench{run}"


def segments_of(batch: list[tuple[str, int]]) -> tuple[list[bytes], list[Segment]]:
    """A batch of (session, queued ns): its envelopes, and one segment per session."""
    bodies = [envelope(queued) for _, queued in batch]
    rows = [
        (session, queued / 1e6, body) for (session, queued), body in zip(batch, bodies, strict=True)
    ]
    return bodies, batch_segments(rows)


async def create_schema(url: str) -> str:
    """A fresh schema with the tables; its URL."""
    name = f"ahp_bench_seq_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(url, timeout=5)
    try:
        await conn.execute(f"CREATE SCHEMA {name}")
        await conn.execute(f"SET search_path = {name}")
        await conn.execute(_SCHEMA)
    finally:
        await conn.close()
    return name


async def drop_schema(url: str, name: str) -> None:
    conn = await asyncpg.connect(url, timeout=5)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    finally:
        await conn.close()


def schema_url(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"


# -- a publisher: one session owner, in a process of its own --------------------------------


@dataclass
class _Owner:
    index: int
    run: str
    db: Any
    nc: Any
    js: Any
    feed: FeedPublisher
    sessions: list[str]
    epochs: list[int]
    queue: deque[tuple[str, int]] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: Envelopes queued flat out (they go round-robin over the sessions).
    queued: int = 0
    records: int = 0


async def _pace(owner: _Owner, phase: Phase, end_ns: int, body_wake: asyncio.Event) -> None:
    """Queue ``phase.rate`` envelopes a second, round-robin over the owner's sessions."""
    n = 0
    started = time.monotonic_ns()
    while (now := time.monotonic_ns()) < end_ns:
        due = int((now - started) / 1e9 * phase.rate)
        while n < due:
            owner.queue.append((owner.sessions[n % SESSIONS], now))
            n += 1
        body_wake.set()
        await asyncio.sleep(0.002)
    body_wake.set()


async def _work(
    owner: _Owner, pacer: asyncio.Task[None] | None, end_ns: int, flat_out: int
) -> bool:
    """Wait for envelopes to publish; False once the phase is over and they are all out.

    Paced (``pacer``): what the pacer queued. Flat out: ``flat_out`` more, queued now.
    """
    while True:
        now = time.monotonic_ns()
        if pacer is None:
            if now >= end_ns:
                return False
            for _ in range(flat_out):
                owner.queue.append((owner.sessions[owner.queued % SESSIONS], now))
                owner.queued += 1
            return True
        if owner.queue:
            return True
        if pacer.done():
            return False
        owner.wake.clear()
        await owner.wake.wait()


async def _pg_phase(owner: _Owner, phase: Phase, end_ns: int) -> dict[str, Any]:
    commit_ms: list[float] = []
    envelopes = commits = last_seq = 0
    pacer = None if not phase.rate else asyncio.create_task(_pace(owner, phase, end_ns, owner.wake))
    held = dict(zip(owner.sessions, owner.epochs, strict=True))
    while await _work(owner, pacer, end_ns, phase.batch_max):
        batch = [owner.queue.popleft() for _ in range(min(phase.batch_max, len(owner.queue)))]
        bodies, segments = segments_of(batch)
        try:
            base = await commit_batch(owner.db, owner.run, held, len(batch), segments)
        except SessionsFenced:
            raise RuntimeError("fenced: the bench's own epochs were refused") from None
        committed = time.monotonic_ns()
        if pacer is not None:
            commit_ms.extend((committed - queued) / 1e6 for _, queued in batch)
        commits += 1
        envelopes += len(batch)
        last_seq = base + len(batch)
        owner.records += 1
        if phase.drop_every and owner.records % phase.drop_every == 5:
            continue  # as if the owner died between its commit and its publish
        owner.feed.publish(base + 1, bodies)
    if pacer is not None:
        await pacer
    await owner.feed.flush()
    return {
        "envelopes": envelopes,
        "commits": commits,
        "last_seq": last_seq,
        "commit_ms": commit_ms,
    }


async def _js_phase(owner: _Owner, phase: Phase, end_ns: int) -> dict[str, Any]:
    acked_ms: list[float] = []
    acks: list[asyncio.Future[Any]] = []
    subjects = {s: f"bench.{owner.run}.js.{s}" for s in owner.sessions}
    pacer = None if not phase.rate else asyncio.create_task(_pace(owner, phase, end_ns, owner.wake))
    prefix = struct.Struct("<q")

    def timed(queued: int) -> Any:
        def done(future: asyncio.Future[Any]) -> None:
            if not future.cancelled() and future.exception() is None:
                acked_ms.append((time.monotonic_ns() - queued) / 1e6)

        return done

    while await _work(owner, pacer, end_ns, 1):
        while owner.queue:
            session, queued = owner.queue.popleft()
            future = await owner.js.publish_async(subjects[session], prefix.pack(queued) + _BODY)
            if pacer is not None:
                future.add_done_callback(timed(queued))
            acks.append(future)
    if pacer is not None:
        await pacer
    results = await asyncio.gather(*acks)
    return {
        "envelopes": len(results),
        "commits": len(results),
        "last_seq": max((ack.seq for ack in results), default=0),
        "commit_ms": acked_ms,
    }


async def _publisher(
    index: int, run: str, db_url: str, commands: Any, results: Any, ready: Any
) -> None:
    db = await asyncpg.connect(db_url, timeout=10)
    nc = await nats.connect(NATS, connect_timeout=5)
    sessions = [f"s{index}-{k}" for k in range(SESSIONS)]
    await db.executemany(
        "INSERT INTO session_owner VALUES ($1, $2, 1)", [(s, run) for s in sessions]
    )
    feed = FeedPublisher(nc, feed_cluster(run), Signer(SECRET, feed_cluster(run)))
    owner = _Owner(index, run, db, nc, nc.jetstream(), feed, sessions, [1] * SESSIONS)
    ready.put(index)
    loop = asyncio.get_running_loop()
    try:
        while True:
            phase = await loop.run_in_executor(None, commands.get)
            if phase is None:
                return
            await asyncio.sleep(max(0.0, (phase.start_ns - time.monotonic_ns()) / 1e9))
            cpu = time.process_time()
            end_ns = phase.start_ns + int(phase.seconds * 1e9)
            run_phase = _pg_phase if phase.mechanism == "pg" else _js_phase
            out = await run_phase(owner, phase, end_ns)
            out["cpu_s"] = time.process_time() - cpu
            results.put(out)
    finally:
        await feed.aclose()
        await db.close()
        await nc.close()


def publisher_main(
    index: int, run: str, db_url: str, commands: Any, results: Any, ready: Any
) -> None:
    """A publisher process's entry point (spawned)."""
    try:
        asyncio.run(_publisher(index, run, db_url, commands, results, ready))
    except BaseException as error:
        results.put({"error": f"publisher {index}: {type(error).__name__}: {error}"})
        raise


# -- the consumer: one node, delivering in serverSeq order ----------------------------------


@dataclass
class Delivered:
    """What the consumer delivered, in order, since :meth:`reset`."""

    #: The next ``serverSeq`` it expects.
    next_seq: int = 1
    count: int = 0
    #: Numbers that arrived out of order or twice (never delivered twice).
    out_of_order: int = 0
    duplicates: int = 0
    #: Envelopes fetched from PostgreSQL because their record was late or lost.
    repaired: int = 0
    repairs: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    #: ``time.monotonic_ns()`` of the last delivery.
    last_ns: int = 0
    checksum: int = 0
    #: The feed reader's counts (pg), and what they were at :meth:`reset`.
    feed: FeedStats | None = None
    _base: FeedStats = field(default_factory=FeedStats)

    def reset(self) -> None:
        self.count = self.out_of_order = self.duplicates = self.repaired = self.repairs = 0
        self.latencies_ms = []
        self.last_ns = 0
        if self.feed is not None:
            self._base = dataclasses.replace(self.feed)

    def settle(self) -> None:
        """Take the feed reader's repair counts since :meth:`reset`."""
        if self.feed is not None:
            self.repaired = self.feed.repaired - self._base.repaired
            self.repairs = self.feed.repairs - self._base.repairs

    def deliver(self, seq: int, queued_ns: int, body: bytes, now_ns: int) -> None:
        if seq != self.next_seq:
            self.out_of_order += 1
            return
        envelope = spliced(seq, body)  # what every subscriber's outbox would get
        self.checksum = (self.checksum + len(envelope)) & 0xFFFFFFFF
        self.next_seq = seq + 1
        self.count += 1
        self.last_ns = now_ns
        self.latencies_ms.append((now_ns - queued_ns) / 1e6)


def pg_consumer(nc: Any, db_url: str, run: str, seen: Delivered) -> FeedReader:
    """The node: the production feed reader (``transport/feed.py``) on the run's feed,
    repairing from the log after ``GRACE``; every delivery checked by ``seen``."""

    def deliver(seq: int, body: bytes) -> None:
        seen.deliver(seq, queued_ns(body), body, time.monotonic_ns())

    reader = FeedReader(
        nc,
        LogReader(db_url),
        feed_cluster(run),
        Signer(SECRET, feed_cluster(run)),
        1,
        deliver,
        grace=GRACE,
        retry=1.0,
        poll_interval=2 * GRACE,
        stall=30.0,
        pending_msgs=-1,
    )
    seen.feed = reader.stats
    return reader


class JsConsumer:
    """An ordered push consumer: the stream's sequence is the ``serverSeq``."""

    def __init__(self) -> None:
        self.seen = Delivered()
        self._prefix = struct.Struct("<q")

    async def on_message(self, msg: Msg) -> None:
        seq = msg.metadata.sequence.stream
        data = msg.data
        (queued,) = self._prefix.unpack_from(data)
        self.seen.deliver(seq, queued, data[8:], time.monotonic_ns())


# -- checks: the engines' behaviour the design relies on -------------------------------------


async def pg_checks(db: Any) -> dict[str, Any]:
    """A stale epoch writes nothing and takes no number; a rollback leaves no gap."""
    await db.execute("INSERT INTO session_owner VALUES ('chk', 'node-a', 2)")
    before = await db.fetchval(COUNTER)
    _, segments = segments_of([("chk", 0), ("chk", 0)])

    async def commit(node: str, epoch: int) -> int | None:
        try:
            return await commit_batch(db, node, {"chk": epoch}, 2, segments)
        except SessionsFenced:
            return None

    stale = await commit("node-a", 1)
    wrong_node = await commit("node-b", 2)
    after_fenced = await db.fetchval(COUNTER)
    rows_fenced = await db.fetchval("SELECT count(*) FROM log WHERE channel = 'chk'")
    tx = db.transaction()
    await tx.start()
    await commit("node-a", 2)
    await tx.rollback()
    base = await commit("node-a", 2)
    return {
        "stale_epoch_refused": stale is None and after_fenced == before and rows_fenced == 0,
        "wrong_node_refused": wrong_node is None,
        "rollback_leaves_no_gap": base == before,
        "current_epoch_commits": base is not None,
    }


async def js_checks(js: Any, run: str) -> dict[str, Any]:
    """Expected-last headers refuse stale expectations; a repeated Msg-Id is a duplicate."""
    stream = f"BSEQCHK_{run}"
    await js.add_stream(StreamConfig(name=stream, subjects=[f"bench.{run}.chk.>"]))
    subject = f"bench.{run}.chk.s1"
    out: dict[str, Any] = {}
    try:
        first = await js.publish(subject, b"1")
        await js.publish(f"bench.{run}.chk.s2", b"other subject")
        ok = await js.publish(
            subject, b"2", headers={"Nats-Expected-Last-Subject-Sequence": str(first.seq)}
        )
        try:
            await js.publish(
                subject, b"3", headers={"Nats-Expected-Last-Subject-Sequence": str(first.seq)}
            )
            out["expected_last_subject_seq_refused"] = False
        except APIError as error:
            out["expected_last_subject_seq_refused"] = True
            out["expected_last_subject_seq_error"] = f"{error.err_code} {error.description}"
        out["expected_last_subject_seq_accepted"] = ok.seq == first.seq + 2
        try:
            await js.publish(subject, b"4", headers={"Nats-Expected-Last-Sequence": "1"})
            out["expected_last_seq_refused"] = False
        except APIError as error:
            out["expected_last_seq_refused"] = True
            out["expected_last_seq_error"] = f"{error.err_code} {error.description}"
        one = await js.publish(subject, b"5", headers={"Nats-Msg-Id": f"{run}:e1:1"})
        two = await js.publish(subject, b"5", headers={"Nats-Msg-Id": f"{run}:e1:1"})
        info = await js.stream_info(stream)
        out["msg_id_duplicate"] = bool(two.duplicate) and two.seq == one.seq
        out["msg_id_stream_unchanged"] = info.state.last_seq == one.seq
    finally:
        await js.delete_stream(stream)
    return out


# -- the run ---------------------------------------------------------------------------------


def _server_cpu() -> float:
    """CPU seconds of every PostgreSQL and NATS server process (others' use included)."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        if name.startswith(("postgres", "nats-server")):
            fields = text.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


class Bench:
    def __init__(self, sizes: Sizes, db_url: str, run: str) -> None:
        self.sizes = sizes
        self.db_url = db_url
        self.run = run
        ctx = multiprocessing.get_context("spawn")
        self.commands = [ctx.Queue() for _ in range(3)]
        self.results: Any = ctx.Queue()
        ready: Any = ctx.Queue()
        self.processes = [
            ctx.Process(
                target=publisher_main,
                args=(i, run, db_url, self.commands[i], self.results, ready),
                daemon=True,
            )
            for i in range(3)
        ]
        for process in self.processes:
            process.start()
        self._ready = ready

    async def wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        for _ in self.processes:
            await loop.run_in_executor(None, self._ready.get, True, 60)

    def close(self) -> None:
        for queue in self.commands:
            queue.put(None)
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()

    async def phase(self, phase: Phase, seen: Delivered, drain: Any) -> dict[str, Any]:
        """Run ``phase`` on the first ``phase.publishers`` publishers; the consumer's figures."""
        loop = asyncio.get_running_loop()
        start_ns = time.monotonic_ns() + 200_000_000
        phase = Phase(**{**asdict(phase), "start_ns": start_ns})
        seen.reset()
        cpu, server = time.process_time(), _server_cpu()
        for i in range(phase.publishers):
            self.commands[i].put(phase)
        reports = []
        for _ in range(phase.publishers):
            report = await loop.run_in_executor(None, self.results.get, True, 120)
            if "error" in report:
                raise RuntimeError(report["error"])
            reports.append(report)
        last = max(r["last_seq"] for r in reports)
        await drain(last)
        seen.settle()
        wall = (time.monotonic_ns() - start_ns) / 1e9
        in_order_s = max(1e-9, (seen.last_ns - start_ns) / 1e9)
        consumer_cpu = time.process_time() - cpu
        server_cpu = _server_cpu() - server
        committed = sum(r["envelopes"] for r in reports)
        commit_ms = [x for r in reports for x in r["commit_ms"]]
        out: dict[str, Any] = {
            "mechanism": phase.mechanism,
            "publishers": phase.publishers,
            "rate_per_publisher": phase.rate,
            "seconds": phase.seconds,
            "committed": committed,
            "commits": sum(r["commits"] for r in reports),
            "envelopes_per_commit": committed / max(1, sum(r["commits"] for r in reports)),
            "committed_per_s": committed / phase.seconds,
            "delivered": seen.count,
            "delivered_in_order_per_s": seen.count / in_order_s,
            "out_of_order": seen.out_of_order,
            "duplicates_dropped": seen.duplicates,
            "repaired": seen.repaired,
            "repairs": seen.repairs,
            "busy_cores": {
                "consumer": consumer_cpu / wall,
                "publishers": sum(r["cpu_s"] for r in reports) / wall,
                "postgres+nats": server_cpu / wall,
            },
        }
        if phase.rate:
            out["latency_ms"] = {
                "to_consumer_p50": percentile(seen.latencies_ms, 50),
                "to_consumer_p99": percentile(seen.latencies_ms, 99),
                "to_commit_p50": percentile(commit_ms, 50),
                "to_commit_p99": percentile(commit_ms, 99),
            }
        return out


async def _pg_series(bench: Bench, sizes: Sizes) -> dict[str, Any]:
    db = await asyncpg.connect(bench.db_url, timeout=10)
    nc = await nats.connect(NATS, connect_timeout=5)
    seen = Delivered()
    consumer = pg_consumer(nc, bench.db_url, bench.run, seen)
    await consumer.start()
    await nc.flush()

    async def drain(last: int) -> None:
        # The tail's records may be late or lost: the reader's counter poll finds them.
        deadline = time.monotonic() + 30
        while seen.next_seq <= last:
            if time.monotonic() > deadline:
                raise RuntimeError(f"pg: {seen.next_seq - 1} of {last} in 30 s")
            await asyncio.sleep(0.005)

    out: dict[str, Any] = {}
    try:
        s = sizes.seconds
        for name, publishers, rate, batch in (
            ("commit1_ceiling_1", 1, 0.0, 1),
            ("commit1_ceiling_3", 3, 0.0, 1),
            ("ceiling_1", 1, 0.0, BATCH_MAX),
            ("ceiling_3", 3, 0.0, BATCH_MAX),
        ):
            progress(f"pg: {name}")
            phase = Phase(name, "pg", publishers, rate, s, batch_max=batch)
            out[name] = await bench.phase(phase, seen, drain)
        half = out["ceiling_3"]["delivered_in_order_per_s"] / 2 / 3
        for name, rate, drop in (
            ("light_3", LIGHT_RATE, 0),
            ("heavy_3", HEAVY_RATE, 0),
            ("half_ceiling_3", half, 0),
            ("repair_3", LIGHT_RATE, DROP_EVERY),
        ):
            progress(f"pg: {name}")
            out[name] = await bench.phase(
                Phase(name, "pg", 3, rate, s, drop_every=drop), seen, drain
            )
        out["total_delivered_in_order"] = seen.next_seq - 1
        out["counter"] = int(await db.fetchval(COUNTER))
        out["checks"] = await pg_checks(db)
    finally:
        await consumer.aclose()
        await nc.close()
        await db.close()
    return out


async def _js_series(bench: Bench, sizes: Sizes) -> dict[str, Any]:
    nc = await nats.connect(NATS, connect_timeout=5)
    js = nc.jetstream()
    stream = f"BSEQ_{bench.run}"
    await js.add_stream(
        StreamConfig(name=stream, subjects=[f"bench.{bench.run}.js.>"], storage=StorageType.FILE)
    )
    consumer = JsConsumer()
    sub = await js.subscribe(
        f"bench.{bench.run}.js.>",
        ordered_consumer=True,
        cb=consumer.on_message,
        pending_msgs_limit=-1,
        pending_bytes_limit=0,
    )

    async def drain(last: int) -> None:
        deadline = time.monotonic() + 30
        while consumer.seen.next_seq <= last:
            if time.monotonic() > deadline:
                raise RuntimeError(f"js: {consumer.seen.next_seq - 1} of {last} in 30 s")
            await asyncio.sleep(0.005)

    out: dict[str, Any] = {}
    try:
        s = sizes.seconds
        for name, publishers in (("ceiling_1", 1), ("ceiling_3", 3)):
            progress(f"js: {name}")
            out[name] = await bench.phase(
                Phase(name, "js", publishers, 0.0, s), consumer.seen, drain
            )
        half = out["ceiling_3"]["delivered_in_order_per_s"] / 2 / 3
        for name, rate in (
            ("light_3", LIGHT_RATE),
            ("heavy_3", HEAVY_RATE),
            ("half_ceiling_3", half),
        ):
            progress(f"js: {name}")
            out[name] = await bench.phase(Phase(name, "js", 3, rate, s), consumer.seen, drain)
        out["total_delivered_in_order"] = consumer.seen.next_seq - 1
        out["checks"] = await js_checks(js, bench.run)
    finally:
        await sub.unsubscribe()
        await js.delete_stream(stream)
        await nc.close()
    return out


async def run_async(sizes: Sizes, only: str | None = None) -> dict[str, Any]:
    run = uuid.uuid4().hex[:10]
    schema = await create_schema(POSTGRES)
    db_url = schema_url(POSTGRES, schema)
    nc = await nats.connect(NATS, connect_timeout=5)
    nats_version = nc._server_info.get("version", "?")
    await nc.close()
    probe = await asyncpg.connect(POSTGRES, timeout=5)
    pg_version = await probe.fetchval("SHOW server_version")
    sync = await probe.fetchval("SHOW synchronous_commit")
    await probe.close()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": (
            f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}, "
            f"PostgreSQL {pg_version} (synchronous_commit {sync}), nats-server {nats_version}"
        ),
        "sizes": asdict(sizes),
        "envelope_bytes": ENVELOPE_BYTES,
        "grace_s": GRACE,
    }
    bench = Bench(sizes, db_url, run)
    try:
        await bench.wait_ready()
        if only in (None, "pg"):
            results["pg"] = await _pg_series(bench, sizes)
        if only in (None, "js"):
            results["js"] = await _js_series(bench, sizes)
    finally:
        bench.close()
        await drop_schema(POSTGRES, schema)
    return results


def report(results: dict[str, Any]) -> str:
    rows = [
        f"serverSeq benchmark — {results['date']} — {results['machine']}",
        f"phases of {results['sizes']['seconds']} s, envelopes of {results['envelope_bytes']} "
        f"bytes, repair grace {results['grace_s'] * 1000:.0f} ms",
        "",
        f"{'':26}{'publ.':>6}{'env/commit':>11}{'in order/s':>12}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'commit p50':>11}{'p99':>8}"
        f"{'  busy: consumer/publishers/servers'}",
    ]
    for mechanism in ("pg", "js"):
        series = results.get(mechanism)
        if not series:
            continue
        for name, entry in series.items():
            if not isinstance(entry, dict) or "publishers" not in entry:
                continue
            lat = entry.get("latency_ms", {})

            def ms(key: str, lat: dict[str, float] = lat) -> str:
                return f"{lat[key]:.2f}" if key in lat else "-"

            busy = entry["busy_cores"]
            rows.append(
                f"{mechanism + ' ' + name:26}{entry['publishers']:>6}"
                f"{entry['envelopes_per_commit']:>11.1f}{entry['delivered_in_order_per_s']:>12,.0f}"
                f"{ms('to_consumer_p50'):>9}{ms('to_consumer_p99'):>9}"
                f"{ms('to_commit_p50'):>11}{ms('to_commit_p99'):>8}"
                f"  {busy['consumer']:.2f}/{busy['publishers']:.2f}/{busy['postgres+nats']:.2f}"
                + (f"  out-of-order {entry['out_of_order']}" if entry["out_of_order"] else "")
                + (f"  repaired {entry['repaired']}" if entry["repaired"] else "")
            )
        rows.append(f"{mechanism} checks: {series.get('checks')}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="short phases (seconds in all)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument("--only", choices=("pg", "js"), help="one mechanism only")
    args = parser.parse_args(argv)
    results = asyncio.run(run_async(QUICK if args.quick else FULL, args.only))
    print(report(results))
    write_json(args.out, results)
    return 0


def write_json(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())

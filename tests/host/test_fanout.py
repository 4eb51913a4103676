"""The outbox budget (host/core/fanout.py): one limit over every connection's queued
bytes, the slowest (furthest behind) going first; reservations for answers
being built. In memory, with transports that stop taking bytes when told to."""

from __future__ import annotations

import asyncio

from ahp_server.host.core.fanout import (
    CLOSE_OVER_BUDGET_REASON,
    CLOSE_SLOW_CONSUMER,
    WRITE_NOW_MAX_BYTES,
    Connection,
    ConnState,
    OutboxBudget,
)

TIMEOUT = 10.0


class StuckTransport:
    """Takes nothing until ``flowing`` is set: its writer waits inside ``send_texts``."""

    def __init__(self) -> None:
        self.flowing = asyncio.Event()
        self.sent: list[bytes] = []
        self.closed: tuple[int, str] | None = None
        self.aborted = False

    async def send_text(self, frame: bytes) -> None:
        await self.send_texts([frame])

    async def send_texts(self, frames: list[bytes]) -> None:
        await self.flowing.wait()
        self.sent.extend(frames)

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def abort(self) -> None:
        self.aborted = True


def connection(budget: OutboxBudget) -> tuple[Connection, StuckTransport]:
    transport = StuckTransport()
    conn = Connection(transport, max_frames=1000, max_bytes=10_000, budget=budget)
    conn.start()
    return conn, transport


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_connection_furthest_behind_goes_first_and_the_total_stays_within() -> None:
    budget = OutboxBudget(1000)
    (a, _), (b, tb), (c, _) = (connection(budget) for _ in range(3))
    for conn, frames in ((a, 1), (b, 3), (c, 2)):
        for _ in range(frames):
            assert conn.send(b"x" * 150)
        await settle()  # the first frame of each is now the writer's stuck batch
    assert budget.used == 900
    assert [a.held_bytes, b.held_bytes, c.held_bytes] == [150, 450, 300]
    # 200 more bytes on a: 1100 > 1000. b holds the most: it goes, alone.
    assert a.send(b"y" * 200)
    assert b.state is ConnState.CLOSING
    assert b.close_code == CLOSE_SLOW_CONSUMER
    assert a.state is ConnState.READY or a.state is ConnState.NEW
    assert c.state is not ConnState.CLOSING
    assert budget.evictions == 1
    # b's writer was stuck on its socket: aborted, not left to a close handshake.
    assert tb.aborted
    await settle()
    assert tb.closed == (CLOSE_SLOW_CONSUMER, CLOSE_OVER_BUDGET_REASON)
    assert budget.peak == 1100  # the frame that passed it, never more
    await b.stop()
    assert budget.used == 650  # b's stuck batch is freed with its writer
    for conn in (a, c):
        await conn.stop()
    assert budget.used == 0


async def test_a_sender_that_is_itself_the_slowest_is_the_one_closed() -> None:
    budget = OutboxBudget(500)
    (a, _), (b, _) = connection(budget), connection(budget)
    assert b.send(b"x" * 100)
    assert a.send(b"x" * 300)
    await settle()
    assert not a.send(b"x" * 200)  # 600 > 500: a holds the most
    assert a.state is ConnState.CLOSING
    assert b.state is not ConnState.CLOSING
    assert budget.used == 100 + 300  # a's queued frame is gone; its stuck batch is not yet
    for conn in (a, b):
        await conn.stop()
    assert budget.used == 0


class Reads:
    """Reads through one connection: each enters ``budget.reserved`` for its size,
    notes its name in ``entered`` and holds its reservation until ``release``."""

    def __init__(self, budget: OutboxBudget, reader: Connection) -> None:
        self.budget = budget
        self.reader = reader
        self.entered: list[object] = []
        self.release = asyncio.Event()

    def start(self, name: object, size: int) -> asyncio.Task[None]:
        return asyncio.create_task(self._build(name, size))

    async def _build(self, name: object, size: int) -> None:
        async with self.budget.reserved(self.reader, size):
            self.entered.append(name)
            await self.release.wait()


async def test_reservations_evict_the_slowest_when_that_makes_the_room() -> None:
    budget = OutboxBudget(1000)
    (slow, _), (reader, _) = connection(budget), connection(budget)
    assert slow.send(b"x" * 300)
    await settle()
    reads = Reads(budget, reader)
    entered, release = reads.entered, reads.release
    first = reads.start("first", 400)
    await settle()
    assert entered == ["first"]
    assert slow.state is not ConnState.CLOSING
    # 300 + 400 + 600 > 1000, and the 300 the slow connection holds would make the
    # room: it is evicted. Its stuck batch is freed only when its writer stops, so
    # the second still waits for the first to end.
    second = reads.start("second", 600)
    await settle()
    assert slow.state is ConnState.CLOSING
    assert entered == ["first"]
    release.set()
    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(first, second)
    assert entered == ["first", "second"]
    for conn in (slow, reader):
        await conn.stop()
    assert budget.used == 0
    # A reservation alone never waits, even one larger than the budget.
    async with asyncio.timeout(TIMEOUT), budget.reserved(reader, 5000):
        pass


async def test_a_reservation_waits_rather_than_evict_what_cannot_make_the_room() -> None:
    """Other reads hold the room and a client holds a small answer: closing it would
    not make the room, so it stays, and the read waits for one of the others (a real
    host closed such a client, 1013, while 50 readers' reads held the budget)."""
    budget = OutboxBudget(1000)
    (small, _), (reader, _) = connection(budget), connection(budget)
    assert small.send(b"x" * 100)
    await settle()
    reads = Reads(budget, reader)
    entered, release = reads.entered, reads.release
    first = reads.start("first", 600)
    await settle()
    second = reads.start("second", 600)
    await settle()
    assert entered == ["first"]  # 100 + 600 + 600 > 1000: it waits ...
    assert small.state is not ConnState.CLOSING  # ... and the small holder is not closed
    assert budget.evictions == 0
    release.set()
    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(first, second)
    assert entered == ["first", "second"]
    for conn in (small, reader):
        await conn.stop()
    assert budget.used == 0


async def test_reads_leave_headroom_so_a_small_answer_is_not_the_one_evicted() -> None:
    """Reads reserve at most the budget less its headroom: a small answer queued
    while reads hold all they may does not pass the limit, so the connection it
    is for, the only one with anything queued, is not closed for it (a real host
    closed such a client with 1013 while 50 readers' reads filled the budget)."""
    budget = OutboxBudget(1000, headroom=200)
    (small, _), (reader, _) = connection(budget), connection(budget)
    reads = Reads(budget, reader)
    entered, release = reads.entered, reads.release
    tasks = [reads.start(250, 250) for _ in range(4)]
    await settle()
    assert entered == [250, 250, 250]  # a fourth would pass 1000 - 200
    assert small.send(b"x" * 150)
    assert small.state is not ConnState.CLOSING
    assert budget.evictions == 0
    release.set()
    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*tasks)
    assert entered == [250] * 4
    for conn in (small, reader):
        await conn.stop()
    assert budget.used == 0


# -- an idle writer's frame skips the queue ------------------------------------------------------


class DirectTransport(StuckTransport):
    """A transport that can also take a frame without waiting (``write_now``), when ``open``."""

    def __init__(self) -> None:
        super().__init__()
        self.flowing.set()
        self.open = True
        #: What went which way, in order: ("now" | "batch", frames).
        self.writes: list[tuple[str, list[bytes]]] = []

    def write_now(self, frames: list[bytes]) -> bool:
        if not self.open:
            return False
        self.writes.append(("now", list(frames)))
        self.sent.extend(frames)
        return True

    async def send_texts(self, frames: list[bytes]) -> None:
        await self.flowing.wait()
        self.writes.append(("batch", list(frames)))
        self.sent.extend(frames)


def direct() -> tuple[Connection, DirectTransport]:
    transport = DirectTransport()
    conn = Connection(transport, max_frames=1000, max_bytes=10_000, budget=OutboxBudget(None))
    conn.start()
    return conn, transport


async def test_a_turns_frames_leave_together_when_it_ends_without_the_writer() -> None:
    conn, transport = direct()
    await settle()  # the writer is parked
    assert conn.send(b"1")
    assert conn.send(b"2")
    assert conn.send(b"3")
    assert transport.writes == []  # held for the end of this turn of the loop
    assert conn.queued_frames == 0  # not queued: the writer was not woken
    await asyncio.sleep(0)  # the turn ends
    assert transport.writes == [("now", [b"1", b"2", b"3"])]
    assert conn.send(b"4")  # a later turn
    await asyncio.sleep(0)
    assert transport.writes[-1] == ("now", [b"4"])
    assert transport.sent == [b"1", b"2", b"3", b"4"]
    assert conn.frames_sent == 4
    await conn.stop()


async def test_connections_held_in_a_turn_are_written_one_after_another_in_one_callback() -> None:
    """N streams' frames made in one turn of the loop reach their sockets together,
    in the order each connection was first sent one (docs/performance.md)."""
    budget = OutboxBudget(None)
    log: list[bytes] = []

    class Logged(DirectTransport):
        def write_now(self, frames: list[bytes]) -> bool:
            log.extend(frames)
            return super().write_now(frames)

    conns = [Connection(Logged(), max_frames=10, max_bytes=10_000, budget=budget) for _ in range(3)]
    for conn in conns:
        conn.start()
    await settle()
    for conn, frame in zip([*conns, conns[0]], [b"a0", b"b0", b"c0", b"a1"], strict=True):
        assert conn.send(frame)
    assert log == []
    assert budget.holding == conns  # one write callback for the turn, each connection once
    await asyncio.sleep(0)
    assert log == [b"a0", b"a1", b"b0", b"c0"]
    assert budget.holding == []
    for conn in conns:
        await conn.stop()


async def test_a_transport_failing_at_the_turns_end_fails_only_its_connection() -> None:
    budget = OutboxBudget(None)

    class Broken(DirectTransport):
        def write_now(self, frames: list[bytes]) -> bool:
            raise ValueError("a bug in a transport")

    broken, fine = Broken(), DirectTransport()
    conns = [Connection(t, max_frames=10, max_bytes=10_000, budget=budget) for t in (broken, fine)]
    for conn in conns:
        conn.start()
    await settle()
    assert conns[0].send(b"lost")
    assert conns[1].send(b"kept")
    await settle()
    assert fine.sent == [b"kept"]
    assert conns[0].state is ConnState.CLOSING
    assert conns[1].send(b"next")  # the callback went on, and later turns still write
    await settle()
    assert fine.sent == [b"kept", b"next"]
    for conn in conns:
        await conn.stop()


async def test_more_than_a_turn_may_hold_queues_behind_what_was_held() -> None:
    transport = DirectTransport()
    conn = Connection(transport, max_frames=1000, max_bytes=1 << 20, budget=OutboxBudget(None))
    conn.start()
    await settle()
    assert conn.send(b"1")
    big = b"x" * WRITE_NOW_MAX_BYTES
    assert conn.send(big)  # 1 + big is more than a turn holds: both go to the writer
    assert conn.queued_frames == 2
    assert conn.send(b"2")  # and the rest of the turn's frames behind them
    await settle()
    assert transport.writes == [("batch", [b"1", big, b"2"])]
    assert conn.frames_sent == 3
    await conn.stop()


async def test_frames_held_when_a_socket_stops_taking_them_go_to_the_writer() -> None:
    conn, transport = direct()
    await settle()
    assert conn.send(b"1")
    assert conn.send(b"2")
    transport.open = False  # the socket's buffer is full when the turn ends
    transport.flowing.clear()
    await asyncio.sleep(0)
    assert conn.queued_frames == 2  # the writer has them, in order
    transport.flowing.set()
    await settle()
    assert transport.writes == [("batch", [b"1", b"2"])]
    await conn.stop()


async def test_a_frame_sent_just_before_a_close_still_leaves_first() -> None:
    """An answer sent and the connection closed in the same turn (an error, then
    1008): the answer is written before the close, as it was sent."""
    conn, transport = direct()
    await settle()
    assert conn.send(b"error")
    conn.close(1008, "policy")
    assert transport.sent == [b"error"]
    await settle()
    assert transport.closed == (1008, "policy")
    await conn.stop()


async def test_flush_and_close_drains_what_is_held() -> None:
    conn, transport = direct()
    await settle()
    assert conn.send(b"bye")
    await conn.flush_and_close(1001, "going away", grace=TIMEOUT)
    assert transport.sent == [b"bye"]
    await conn.stop()


async def test_a_frame_never_overtakes_one_queued_or_leaving() -> None:
    conn, transport = direct()
    await settle()
    transport.flowing.clear()  # the socket stops taking batches
    transport.open = False  # and frames now
    assert conn.send(b"1")  # refused at once: queued for the writer
    await settle()  # the writer holds [1], stuck
    assert conn.held_bytes == 1
    transport.open = True
    for _ in range(3):
        await asyncio.sleep(0)  # new turns of the loop: the queue is not empty
        assert conn.send(b"x")
    await asyncio.sleep(0)
    assert [how for how, _ in transport.writes] == []
    transport.flowing.set()
    await settle()
    assert transport.sent == [b"1", b"x", b"x", b"x"]
    assert all(how == "batch" for how, _ in transport.writes)
    assert conn.held_bytes == 0
    await conn.stop()


async def test_a_closing_connection_writes_nothing_at_once() -> None:
    conn, transport = direct()
    await settle()
    conn.close(1000, "bye")
    assert not conn.send(b"late")
    await settle()
    assert transport.sent == []
    await conn.stop()


async def test_a_large_frame_waits_in_the_outbox_counted_against_the_budget() -> None:
    """Bytes handed over at once are not counted: only small frames may skip the queue."""
    budget = OutboxBudget(None)
    transport = DirectTransport()
    conn = Connection(transport, max_frames=1000, max_bytes=1 << 20, budget=budget)
    conn.start()
    await settle()
    big = b"x" * (WRITE_NOW_MAX_BYTES + 1)
    transport.flowing.clear()
    assert conn.send(big)
    assert budget.used == len(big)  # queued, counted
    await settle()
    assert conn.held_bytes == len(big)  # the writer's batch, still counted while it leaves
    transport.flowing.set()
    await settle()
    assert transport.writes == [("batch", [big])]
    assert budget.used == 0
    assert conn.send(b"x" * WRITE_NOW_MAX_BYTES)  # the largest that may skip it
    await asyncio.sleep(0)
    assert transport.writes[-1][0] == "now"
    await conn.stop()

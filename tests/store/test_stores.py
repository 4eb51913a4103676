"""The store contract, run against every durable backend (SQLite and PostgreSQL).

Each test gets a fresh database (``backend`` fixture, tests/store/conftest.py):
ordered group commit with delivery only after commit, the high-water mark,
snapshots and pruning, deletion, segments, a failed commit, the commit window.
SQLite-only behaviour (WAL checkpoints, file refusal, its migrations) is in
test_sqlite.py; PostgreSQL-only behaviour in test_postgres.py.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from ahp_server.store.base import BURST, StoreError
from tests.store.conftest import Backend

TIMEOUT = 10.0
CREATED = "2026-01-01T00:00:00.000Z"


async def test_envelopes_commit_in_order_and_the_high_water_mark_survives(
    backend: Backend,
) -> None:
    store = backend.make()
    assert await store.start() == 0
    committed: list[int] = []
    for seq in range(1, 501):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", committed.append, seq)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert committed == list(range(1, 501))
    assert store.backlog == 0
    assert store.commits < 500  # grouped: many envelopes per transaction
    await store.close()
    again = backend.make()
    assert await again.start() == 500  # numbering resumes above every number stored
    await again.close()


async def test_snapshots_prune_the_log_and_channels_are_deleted(backend: Backend) -> None:
    store = backend.make()
    await store.start()
    store.put_channel("ahp-chat:/c", "chat", "ahp-session:/s", CREATED, None)
    for seq in range(1, 11):
        store.append_envelope(seq, "ahp-chat:/c", float(seq), b'{"n":%d}' % seq, lambda: None)
        if seq in (4, 8):
            store.put_snapshot("ahp-chat:/c", seq, b"{}", 0)
    store.put_turn("ahp-chat:/c", 0, "t0", b'{"id":"t0"}')
    store.put_turn("ahp-chat:/c", 1, "t1", b'{"id":"t1"}')
    store.truncate_turns("ahp-chat:/c", 1)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    loaded = await store.load("ahp-chat:/c", retained_turns=10)
    assert loaded is not None
    assert loaded.snapshot_seq == 8
    assert loaded.log_floor == 4  # the log since the previous snapshot is kept
    assert [seq for seq, _, _ in loaded.envelopes] == [5, 6, 7, 8, 9, 10]
    assert await store.turns("ahp-chat:/c", 5, 10) == [b'{"id":"t0"}']
    assert await store.turn_position("ahp-chat:/c", "t0") == 0
    assert await store.turn_position("ahp-chat:/c", "t1") is None
    store.delete_channel("ahp-chat:/c")
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert await store.load("ahp-chat:/c", retained_turns=10) is None
    assert await store.turns("ahp-chat:/c", 5, 10) == []
    await store.close()


async def test_channel_rows_markers_agent_state_and_clients_round_trip(
    backend: Backend,
) -> None:
    store = backend.make()
    await store.start()
    store.put_channel("ahp-session:/s", "session", None, CREATED, b'{"v":1}')
    store.put_channel("ahp-session:/s", "session", None, CREATED, b'{"v":2}')  # summary updated
    store.put_channel("ahp-chat:/c", "chat", "ahp-session:/s", CREATED, None)
    store.set_unfinished("ahp-chat:/c", "turn-1")
    store.set_unfinished("ahp-session:/s", "creating")
    store.set_unfinished("ahp-session:/s", None)
    store.put_agent_state("ahp-chat:/c", "acp-session-9")
    for n in range(5):
        store.put_client(f"client-{n}", "0.7.0", user="alice" if n == 3 else None)
    # Seen again: newest. The host names what to forget (Host.remember_client decides,
    # per user); the store forgets exactly those, and nothing for an id it never had.
    store.put_client("client-2", "0.6.0", user="bob", forget=("client-0", "client-1", "never"))
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    rows = {row.uri: row for row in await store.channels()}
    assert set(rows) == {"ahp-session:/s", "ahp-chat:/c"}
    assert rows["ahp-session:/s"].summary == b'{"v":2}'
    assert rows["ahp-session:/s"].unfinished is None
    assert rows["ahp-chat:/c"].session == "ahp-session:/s"
    assert rows["ahp-chat:/c"].unfinished == "turn-1"
    loaded = await store.load("ahp-chat:/c", retained_turns=10)
    assert loaded is not None
    assert loaded.agent_state == "acp-session-9"
    assert await store.clients() == [
        ("client-3", "0.7.0", "alice"),
        ("client-4", "0.7.0", None),
        ("client-2", "0.6.0", "bob"),
    ]
    await store.close()
    again = backend.make()  # the users survive a restart (issue 16: client ids are per user)
    await again.start()
    assert [user for _, _, user in await again.clients()] == ["alice", None, "bob"]
    await again.close()


async def test_a_channel_deleted_in_the_batch_of_its_envelopes_leaves_no_log(
    backend: Backend,
) -> None:
    # A commit writes its envelopes before its other writes: a deletion queued
    # after a channel's envelopes still removes them (no orphaned log rows).
    store = backend.make()
    await store.start()
    for uri in ("ahp-chat:/c", "ahp-chat:/d"):
        store.put_channel(uri, "chat", "ahp-session:/s", CREATED, None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    for seq in range(1, 7):
        channel = "ahp-chat:/c" if seq % 2 else "ahp-chat:/d"
        store.append_envelope(seq, channel, float(seq), b"{}", lambda: None)
    store.delete_channel("ahp-chat:/c")
    commits = store.commits
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert store.commits == commits + 1  # one transaction
    store.put_channel("ahp-chat:/c", "chat", "ahp-session:/s", CREATED, None)  # the URI again
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    again = await store.load("ahp-chat:/c", retained_turns=10)
    assert again is not None
    assert again.envelopes == []  # nothing of the deleted channel's log is left
    loaded = await store.load("ahp-chat:/d", retained_turns=10)
    assert loaded is not None
    assert [seq for seq, _, _ in loaded.envelopes] == [2, 4, 6]
    await store.close()
    reopened = backend.make()
    assert await reopened.start() == 6
    await reopened.close()


@pytest.mark.parametrize("other_write", [True, False])  # a transaction of mixed writes, or not
async def test_a_segment_keeps_each_envelope_its_number_and_clock(
    backend: Backend, other_write: bool
) -> None:
    store = backend.make()
    await store.start()
    store.put_channel("ahp-chat:/a", "chat", "ahp-session:/s", CREATED, None)
    store.put_channel("ahp-chat:/b", "chat", "ahp-session:/s", CREATED, None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    # Two channels interleaved in one commit, maybe with another write in between.
    for seq in range(1, 301):
        channel = "ahp-chat:/a" if seq % 3 else "ahp-chat:/b"
        envelope = b'{"n":%d,"text":"caf\xc3\xa9 \\"q\\""}' % seq
        store.append_envelope(seq, channel, 1733150000000.25 + seq, envelope, lambda: None)
        if seq == 150 and other_write:
            store.put_turn("ahp-chat:/a", 0, "t0", b"{}")
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    a = await store.load("ahp-chat:/a", retained_turns=10)
    b = await store.load("ahp-chat:/b", retained_turns=10)
    assert a is not None
    assert b is not None
    for loaded, keep in ((a, lambda n: n % 3 != 0), (b, lambda n: n % 3 == 0)):
        expected = [n for n in range(1, 301) if keep(n)]
        assert [seq for seq, _, _ in loaded.envelopes] == expected
        assert [at for _, at, _ in loaded.envelopes] == [1733150000000.25 + n for n in expected]
        assert [env for _, _, env in loaded.envelopes] == [
            b'{"n":%d,"text":"caf\xc3\xa9 \\"q\\""}' % n for n in expected
        ]
    await store.close()


async def test_the_high_water_mark_survives_deleting_the_newest_envelopes(
    backend: Backend,
) -> None:
    store = backend.make()
    await store.start()
    store.put_channel("ahp-chat:/old", "chat", "ahp-session:/s", CREATED, None)
    store.put_channel("ahp-chat:/new", "chat", "ahp-session:/s", CREATED, None)
    for seq in range(1, 6):
        store.append_envelope(seq, "ahp-chat:/old", 1.0, b"{}", lambda: None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    for seq in range(6, 11):  # envelopes alone: the hot path
        store.append_envelope(seq, "ahp-chat:/new", 1.0, b"{}", lambda: None)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    await store.close()
    store = backend.make()
    assert await store.start() == 10
    store.delete_channel("ahp-chat:/new")  # the newest envelopes go away
    await store.close()
    store = backend.make()
    assert await store.start() == 10  # numbering still resumes above them
    await store.close()


async def test_a_failed_commit_stops_the_store_and_delivers_nothing_of_it(
    backend: Backend,
) -> None:
    store = backend.make()
    await store.start()
    delivered: list[int] = []
    store.append_envelope(1, "ahp-chat:/c", 1.0, b"{}", delivered.append, 1)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    # The same (channel, serverSeq) again: the log refuses it, the commit fails.
    # (With a deletion in the commit, which SQLite's store commits with the
    # tail folded in: the tail takes envelopes unchecked otherwise, and
    # test_sqlite.py fails a tail write and a transaction of writes by itself.)
    store.append_envelope(1, "ahp-chat:/c", 1.0, b"{}", delivered.append, 99)
    store.delete_channel("ahp-chat:/gone")
    with pytest.raises(StoreError, match="commit failed"):
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
    assert delivered == [1]  # what failed was never delivered
    with pytest.raises(StoreError, match="failed"):
        store.append_envelope(2, "ahp-chat:/c", 1.0, b"{}", delivered.append, 2)
    await store.close()


async def test_backpressure_holds_producers_until_the_backlog_drains(backend: Backend) -> None:
    store = backend.make()
    await store.start()
    async with asyncio.timeout(TIMEOUT):
        await store.wait_for_room()  # nothing queued: room
    delivered = 0

    def on_commit() -> None:
        nonlocal delivered
        delivered += 1

    for seq in range(1, 50_002):  # over the high-water mark (50,000), in one loop turn
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", on_commit)
    assert store.backlog == 50_001
    async with asyncio.timeout(60):
        await store.wait_for_room()
    # Released only once the backlog fell under the low-water mark (10,000).
    assert delivered > 50_001 - 10_000
    async with asyncio.timeout(60):
        await store.flush()
    assert store.backlog == 0
    assert delivered == 50_001
    await store.close()


async def test_a_commit_window_groups_concurrent_streams_across_loop_iterations(
    backend: Backend,
) -> None:
    """Streams of two chats that yield between envelopes (a model's tokens)
    commit once per window; a lone stream commits each envelope at once (the
    window would only delay it: issue 31)."""
    store = backend.make(commit_window=0.2)
    await store.start()
    committed: list[tuple[int, float]] = []
    loop = asyncio.get_running_loop()
    store.append_envelope(1, "ahp-chat:/c", 1.0, b"{}", lambda: committed.append((1, loop.time())))
    async with asyncio.timeout(TIMEOUT):
        await store.flush()  # an idle store commits at once
    assert [seq for seq, _ in committed] == [1]
    queued_at = loop.time()
    for seq in range(2, 22):  # one envelope per loop iteration, two chats in turn
        chat = "ahp-chat:/c" if seq % 2 else "ahp-chat:/d"
        store.append_envelope(
            seq, chat, 1.0, b"{}", lambda s=seq: committed.append((s, loop.time()))
        )
        await asyncio.sleep(0)
    # The first of them went at once (one chat had written so far); the rest
    # are held: the window since that commit is open.
    assert len(committed) <= 2
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert [seq for seq, _ in committed] == list(range(1, 22))
    assert store.commits <= 3  # twenty envelopes, at most two commits
    assert committed[-1][1] - queued_at <= 0.2 + 0.1  # never held much past the window

    # A client's own action is not held back: commit_soon commits now.
    started = loop.time()
    store.append_envelope(
        32, "ahp-chat:/d", 1.0, b"{}", lambda: committed.append((32, loop.time()))
    )
    store.commit_soon()
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert committed[-1][0] == 32
    assert committed[-1][1] - started < 0.1
    await store.close()


async def test_a_lone_stream_is_not_held_by_the_commit_window(backend: Backend) -> None:
    """One chat writing, each envelope waited for in turn (a lone turn's
    deltas): none waits for the window, which would hold each for 5 s. Once a
    second chat writes beside it, the window groups again."""
    window = 5.0
    store = backend.make(commit_window=window)
    await store.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    for seq in (1, 3, 5):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", lambda: None)
        store.append_envelope(seq + 1, "ahp-session:/s", 1.0, b"{}", lambda: None)  # no chat
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
    assert loop.time() - started < window  # held, the second alone would wait 5 s
    assert store.commits == 3
    store.append_envelope(7, "ahp-chat:/d", 1.0, b"{}", lambda: None)
    await asyncio.sleep(0)
    store.append_envelope(8, "ahp-chat:/c", 1.0, b"{}", lambda: None)
    for _ in range(5):
        await asyncio.sleep(0)
    assert store.backlog >= 1  # two chats within CONCURRENT_FOR: held for the window
    store.commit_soon()
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    await store.close()


async def test_a_lone_stream_as_fast_as_the_loop_turns_is_grouped_until_it_pauses(
    backend: Backend,
) -> None:
    """One chat writing an envelope every loop iteration (tokens as fast as the
    loop turns): after ``BURST`` commits within a window the window holds it,
    so 200 envelopes are not 200 commits. Once it pauses for a window, two
    writes each waited for commit at once again (a lone turn's latency)."""
    window = 1.0
    store = backend.make(commit_window=window)
    await store.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    for seq in range(1, 201):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", lambda: None)
        await asyncio.sleep(0)
    elapsed = loop.time() - started
    # BURST at once, then one per window at most (however slow the machine ran)
    assert store.commits <= BURST + 1 + int(elapsed / window)
    store.commit_soon()
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert store.backlog == 0
    await asyncio.sleep(window * 1.1)  # a pause of a window: no longer held
    before = store.commits
    started = loop.time()
    for seq in (201, 202):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", lambda: None)
        async with asyncio.timeout(TIMEOUT):
            await store.flush()
    assert loop.time() - started < window  # held, the second would wait a window
    assert store.commits == before + 2
    await store.close()


async def test_a_callback_after_the_queue_runs_in_its_place_and_writes_nothing(
    backend: Backend,
) -> None:
    """``after_queued`` (a refused dispatch's echo): after the envelopes queued
    before it, before those queued after it, not held for the commit window."""
    store = backend.make(commit_window=1.0)
    await store.start()
    loop = asyncio.get_running_loop()
    order: list[object] = []
    store.after_queued(order.append, "idle")
    assert order == ["idle"]  # nothing waits for a commit: at once
    store.put_channel("ahp-chat:/c", "chat", "ahp-session:/s", CREATED, None)
    started = loop.time()
    for seq in range(1, 31):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", order.append, seq)
        if seq % 3 == 0:  # a write that is not an envelope, too
            store.set_unfinished("ahp-chat:/c", f"turn-{seq}")
        await asyncio.sleep(0)  # (a commit may now be under way: the callback alone after it)
        store.after_queued(order.append, -seq)
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
    assert loop.time() - started < 0.5  # someone waits for it: the window does not hold it
    assert order == ["idle", *(x for seq in range(1, 31) for x in (seq, -seq))]
    loaded = await store.load("ahp-chat:/c", retained_turns=0)
    assert loaded is not None
    assert [seq for seq, _, _ in loaded.envelopes] == list(range(1, 31))  # nothing else
    await store.close()


async def test_a_big_committed_batch_is_delivered_over_several_loop_turns_in_order(
    backend: Backend,
) -> None:
    """Delivery runs in slices (``DELIVERY_SLICE``): a batch whose callbacks take
    1 ms each lets the loop's other work run between them; the order holds, a
    write made meanwhile is delivered after the rest, a flush waits for every
    callback, and a callback that raises stops none of the later ones."""
    store = backend.make()
    await store.start()
    delivered: list[int] = []

    def deliver(seq: int) -> None:
        time.sleep(0.001)  # at least: so a 4 ms slice holds at most a few
        if seq == 50:
            raise RuntimeError("a delivery's bug")
        delivered.append(seq)

    for seq in range(1, 201):
        store.append_envelope(seq, "ahp-chat:/c", 1.0, b"{}", deliver, seq)
    ticks_during = 0
    appended = False

    async def ticker() -> None:
        nonlocal ticks_during, appended
        while len(delivered) < 200:
            await asyncio.sleep(0)
            if 0 < len(delivered) < 199:
                ticks_during += 1
                if not appended:  # committed while the first batch is still being delivered
                    appended = True
                    store.append_envelope(201, "ahp-chat:/c", 1.0, b"{}", deliver, 201)

    ticking = asyncio.create_task(ticker())
    async with asyncio.timeout(TIMEOUT):
        await store.flush()
        assert delivered[:199] == [*range(1, 50), *range(51, 201)]  # each before the flush
        await store.flush()
        await ticking
    assert delivered == [*range(1, 50), *range(51, 202)]
    assert ticks_during >= 10  # the loop ran other work between the slices
    await store.close()

"""FeedOrder: every number once, in order, from a lossy, reordering feed and log repairs."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ahp_server.transport.feed_order import FeedOrder

GRACE, RETRY = 0.05, 0.5


def order(next_seq: int = 1, *, window: int = 1000, now: float = 0.0) -> FeedOrder[str]:
    return FeedOrder(next_seq, grace=GRACE, retry=RETRY, window=window, now=now)


def items(lo: int, hi: int) -> list[str]:
    return [f"e{n}" for n in range(lo, hi + 1)]


def numbers(delivered: list[tuple[int, str]]) -> list[int]:
    return [n for n, _ in delivered]


def test_records_in_order_are_delivered_at_once() -> None:
    feed = order()
    assert feed.receive(1, items(1, 3), 0.0) == [(1, "e1"), (2, "e2"), (3, "e3")]
    assert feed.receive(4, items(4, 4), 0.0) == [(4, "e4")]
    assert (feed.next, feed.held, feed.gaps) == (5, 0, [])
    assert feed.stalled(10.0) == 0.0
    assert feed.deadline() is None


def test_a_record_ahead_waits_for_the_numbers_below_it() -> None:
    feed = order()
    assert feed.receive(3, items(3, 4), 0.0) == []
    assert (feed.held, feed.gaps) == (2, [(1, 2)])
    assert numbers(feed.receive(1, items(1, 2), 0.01)) == [1, 2, 3, 4]
    assert (feed.next, feed.held, feed.gaps) == (5, 0, [])


def test_duplicates_and_overlaps_are_delivered_once() -> None:
    feed = order()
    assert numbers(feed.receive(1, items(1, 3), 0.0)) == [1, 2, 3]
    assert feed.receive(1, items(1, 3), 0.0) == []
    assert feed.receive(6, items(6, 7), 0.0) == []
    assert feed.receive(6, items(6, 7), 0.0) == []
    assert feed.held == 2
    # A repair's answer overlapping what was delivered and what is held.
    assert feed.receive(2, items(2, 8), 0.0) == [(n, f"e{n}") for n in range(4, 9)]
    assert (feed.next, feed.held, feed.gaps) == (9, 0, [])


def test_a_gap_is_handed_out_for_repair_after_the_grace_then_again_after_retry() -> None:
    feed = order()
    feed.receive(5, items(5, 5), 1.0)
    assert feed.gaps == [(1, 4)]
    assert feed.deadline() == pytest.approx(1.0 + GRACE)
    assert feed.repairs(1.0 + GRACE / 2) == []
    assert feed.repairs(1.0 + GRACE) == [(1, 4)]
    assert feed.repairs(1.0 + GRACE + 0.01) == []  # asked already
    assert feed.deadline() == pytest.approx(1.0 + GRACE + RETRY)
    assert feed.repairs(1.0 + GRACE + RETRY) == [(1, 4)]  # no answer: asked again


def test_a_late_record_within_the_grace_needs_no_repair() -> None:
    feed = order()
    feed.receive(2, items(2, 2), 0.0)
    assert numbers(feed.receive(1, items(1, 1), GRACE / 2)) == [1, 2]
    assert feed.repairs(10.0) == []


def test_a_partly_answered_repair_keeps_its_request_time() -> None:
    feed = order()
    feed.receive(6, items(6, 6), 0.0)
    assert feed.repairs(GRACE) == [(1, 5)]
    assert numbers(feed.receive(1, items(1, 2), GRACE + 0.01)) == [1, 2]
    assert feed.gaps == [(3, 5)]
    assert feed.repairs(GRACE + 0.02) == []  # still asked for
    assert feed.repairs(GRACE + RETRY) == [(3, 5)]


def test_the_counter_finds_a_lost_last_record() -> None:
    """A lost record with nothing after it shows only in the counter (the one-second poll)."""
    feed = order()
    feed.receive(1, items(1, 3), 0.0)
    feed.counter(3, 1.0)
    assert feed.gaps == []
    feed.counter(5, 2.0)
    assert feed.gaps == [(4, 5)]
    assert feed.repairs(2.0 + GRACE) == [(4, 5)]
    assert numbers(feed.receive(4, items(4, 5), 2.1)) == [4, 5]


def test_memory_stays_within_the_window_and_the_rest_is_read_again() -> None:
    feed = order(window=4)
    # Numbers 10-20 arrive while 1-9 are lost: none is held (all beyond the window).
    assert feed.receive(10, items(10, 20), 0.0) == []
    assert (feed.held, feed.gaps) == (0, [(1, 20)])
    # Only the window is asked for; the rest is not requested yet.
    assert feed.repairs(GRACE) == [(1, 4)]
    assert feed.gaps == [(1, 4), (5, 20)]
    assert numbers(feed.receive(1, items(1, 4), 0.1)) == [1, 2, 3, 4]
    # The next window is due at once (missing since 0, never asked for).
    assert feed.repairs(0.1) == [(5, 8)]
    assert feed.receive(5, items(5, 20), 0.2) == [(n, f"e{n}") for n in range(5, 9)]
    assert feed.held == 0
    assert feed.gaps == [(9, 20)]


def test_stalled_counts_from_the_block_or_the_last_progress() -> None:
    feed = order()
    feed.receive(1, items(1, 1), 0.0)
    assert feed.stalled(5.0) == 0.0
    feed.receive(3, items(3, 3), 10.0)  # blocked on 2 from now
    assert feed.stalled(12.0) == pytest.approx(2.0)
    feed.receive(5, items(5, 5), 13.0)  # more arrives, nothing moves
    assert feed.stalled(14.0) == pytest.approx(4.0)
    feed.receive(2, items(2, 2), 15.0)  # 2, 3 delivered; blocked on 4
    assert feed.next == 4
    assert feed.stalled(16.0) == pytest.approx(1.0)
    feed.receive(4, items(4, 4), 17.0)
    assert feed.stalled(30.0) == 0.0


def test_a_node_starting_mid_feed_delivers_from_its_next_number() -> None:
    feed = order(101)
    assert feed.receive(99, items(99, 102), 0.0) == [(101, "e101"), (102, "e102")]


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        FeedOrder(1, grace=0.0, retry=1.0, window=0, now=0.0)
    with pytest.raises(ValueError, match="next_seq"):
        FeedOrder(0, grace=0.0, retry=1.0, window=1, now=0.0)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    total=st.integers(1, 300),
    window=st.integers(1, 64),
    loss=st.floats(0.0, 0.5),
)
def test_every_number_once_in_order_whatever_the_feed_loses_or_reorders(
    seed: int, total: int, window: int, loss: float
) -> None:
    """Owners commit batches under one counter; the bus drops, duplicates and reorders
    them; the node answers repairs from the committed log, itself late at times."""
    rng = random.Random(seed)
    batches: list[tuple[int, int]] = []
    n = 1
    while n <= total:
        size = rng.randint(1, 8)
        batches.append((n, min(total, n + size - 1)))
        n += size
    log = {k: f"e{k}" for k in range(1, total + 1)}
    # The bus: each batch arrives at a random time, may be lost or come twice.
    events: list[tuple[float, str, int, int]] = []
    for index, (lo, hi) in enumerate(batches):
        at = index * 0.001 + rng.uniform(0.0, 0.2)
        if rng.random() >= loss:
            events.append((at, "record", lo, hi))
        if rng.random() < 0.1:
            events.append((at + rng.uniform(0.0, 0.3), "record", lo, hi))
    end = len(batches) * 0.001 + 0.5
    # The one-second poll of the counter (here every 0.25 s), after everything committed.
    events += [(end + k * 0.25, "poll", total, total) for k in range(4)]
    feed: FeedOrder[str] = FeedOrder(1, grace=GRACE, retry=RETRY, window=window, now=0.0)
    delivered: list[tuple[int, str]] = []
    now = 0.0
    for _ in range(100_000):
        due = feed.deadline()
        events.sort()
        upcoming = events[0][0] if events else None
        if due is not None and (upcoming is None or due <= upcoming):
            now = max(now, due)
            for lo, hi in feed.repairs(now):
                # The log answers later, and at times not at all (a failed read).
                if rng.random() < 0.9:
                    events.append((now + rng.uniform(0.0, 0.1), "repair", lo, hi))
            continue
        if not events:
            break
        at, kind, lo, hi = events.pop(0)
        now = max(now, at)
        if kind == "poll":
            feed.counter(lo, now)
        else:
            delivered += feed.receive(lo, [log[k] for k in range(lo, hi + 1)], now)
        assert feed.held <= window
    assert delivered == sorted(log.items())
    assert (feed.next, feed.held, feed.gaps) == (total + 1, 0, [])

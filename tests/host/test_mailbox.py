"""The actor mailbox: FIFO, bounded with waiting producers, one waiting consumer."""

from __future__ import annotations

import asyncio

import pytest

from ahp_server.host.core.mailbox import Mailbox

TIMEOUT = 5.0


async def test_messages_come_out_in_order() -> None:
    box: Mailbox[int] = Mailbox(10)
    for i in range(5):
        assert box.offer(i)
    assert box.qsize() == 5
    assert [await box.get() for _ in range(5)] == [0, 1, 2, 3, 4]
    assert not box


async def test_a_full_mailbox_refuses_offers_and_makes_producers_wait() -> None:
    box: Mailbox[int] = Mailbox(2)
    assert box.offer(1)
    assert box.offer(2)
    assert box.full()
    assert not box.offer(3)
    waiting = asyncio.create_task(box.put(3))
    await asyncio.sleep(0)
    assert not waiting.done()  # still full
    assert box.get_nowait() == 1
    async with asyncio.timeout(TIMEOUT):
        await waiting
    assert [box.get_nowait(), box.get_nowait()] == [2, 3]


async def test_waiting_producers_get_in_first_come_first_served() -> None:
    box: Mailbox[str] = Mailbox(1)
    assert box.offer("first")
    late = [asyncio.create_task(box.put(name)) for name in ("a", "b", "c")]
    await asyncio.sleep(0)
    assert not box.offer("queue-jumper")  # producers are waiting: no overtaking
    got = []
    async with asyncio.timeout(TIMEOUT):
        for _ in range(4):
            got.append(await box.get())
        await asyncio.gather(*late)
    assert got == ["first", "a", "b", "c"]


async def test_a_cancelled_producer_passes_its_turn_on() -> None:
    box: Mailbox[str] = Mailbox(1)
    assert box.offer("x")
    cancelled = asyncio.create_task(box.put("never"))
    patient = asyncio.create_task(box.put("y"))
    await asyncio.sleep(0)
    assert box.get_nowait() == "x"  # wakes `cancelled`, which is cancelled before it runs
    cancelled.cancel()
    async with asyncio.timeout(TIMEOUT):
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        await patient
    assert box.get_nowait() == "y"
    assert not box


async def test_the_consumer_waits_for_a_message() -> None:
    box: Mailbox[int] = Mailbox(4)
    consumer = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    assert not consumer.done()
    assert box.offer(7)
    async with asyncio.timeout(TIMEOUT):
        assert await consumer == 7


async def test_a_cancelled_consumer_leaves_the_mailbox_usable() -> None:
    box: Mailbox[int] = Mailbox(4)
    consumer = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert box.offer(1)
    async with asyncio.timeout(TIMEOUT):
        assert await box.get() == 1


def test_a_mailbox_holds_at_least_one_message() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Mailbox(0)

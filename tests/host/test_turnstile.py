"""The turnstile (host/core/turnstile.py): a burst of ready work runs in slices of the loop.

Unit tests drive it with an injected clock and count turns of the loop with a
callback that queues itself once per turn; the host tests check that a turn's
actions and a client's frames pass it (``ahp_turnstile_held_total``), and that
what they carry is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ahp_server.agents.echo import markdown_answer
from ahp_server.client import AhpClient
from ahp_server.host.core.turnstile import Turnstile
from ahp_server.host.metrics import render
from tests.conftest import RunningHost
from tests.e2e.helpers import TIMEOUT


class _Turns:
    """Counts turns of the running loop (a callback that queues itself for the next)."""

    def __init__(self) -> None:
        self.count = 0
        self._stopped = False
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        if not self._stopped:
            self.count += 1
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._stopped = True


def _stepping(step: float) -> tuple[Callable[[], float], Callable[[float], None]]:
    """A clock that reads ``now``, and a function advancing it (work being done)."""
    now = [0.0]

    def advance(seconds: float) -> None:
        now[0] += seconds

    return (lambda: now[0]), advance


async def _burst(
    turnstile: Turnstile, tasks: int, work: Callable[[], None]
) -> list[tuple[int, int]]:
    """``tasks`` tasks ready at once, each passing the turnstile once, then working:
    (task, turn of the loop it worked in), in the order they worked."""
    turns = _Turns()
    done: list[tuple[int, int]] = []

    async def one(index: int) -> None:
        if turnstile.closed():
            await turnstile.wait()
        work()
        done.append((index, turns.count))

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(one(i) for i in range(tasks)))
    turns.stop()
    return done


async def test_work_that_fits_in_the_slice_runs_at_once() -> None:
    clock, _ = _stepping(0.0)
    turnstile = Turnstile(0.004, clock)
    done = await _burst(turnstile, 50, lambda: None)  # no time passes: all fit
    assert [i for i, _ in done] == list(range(50))
    assert len({turn for _, turn in done}) == 1
    assert turnstile.held == 0


async def test_a_burst_runs_in_slices_one_per_turn_in_the_order_it_came() -> None:
    """Each task's work takes 1 ms of the clock; the slice is 4 ms: each turn of the loop
    runs at most five (the fifth starts at 4 ms), and every task runs once, in order."""
    clock, advance = _stepping(0.0)
    turnstile = Turnstile(0.004, clock)
    done = await _burst(turnstile, 40, lambda: advance(0.001))
    assert [i for i, _ in done] == list(range(40))  # held tasks resume in the order they came
    per_turn: dict[int, int] = {}
    for _, turn in done:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    assert max(per_turn.values()) <= 5
    assert len(per_turn) >= 8  # 40 ms of work in slices of at most 5
    assert turnstile.held >= 35


async def test_a_new_turn_of_the_loop_opens_a_new_slice() -> None:
    clock, advance = _stepping(0.0)
    turnstile = Turnstile(0.004, clock)
    assert not turnstile.closed()  # opens the slice
    advance(0.005)
    assert turnstile.closed()  # spent
    await asyncio.sleep(0)  # the next turn of the loop
    assert not turnstile.closed()
    advance(0.003)
    assert not turnstile.closed()


def _held(running: RunningHost) -> float:
    for line in render(running.host).splitlines():
        if line.startswith("ahp_turnstile_held_total "):
            return float(line.split()[1])
    raise AssertionError("ahp_turnstile_held_total is not in /metrics")


async def test_a_turns_actions_pass_the_turnstile_and_arrive_whole(
    running_host: RunningHost,
) -> None:
    """An agent emitting 64 deltas back to back, with a clock that says each took 10 ms:
    the runner is held between them (so other work gets the loop), and the answer is
    whole and in order."""
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        clock, advance = _stepping(0.0)

        def ticking() -> float:
            advance(0.01)
            return clock()

        running_host.host.turnstile = Turnstile(0.004, ticking)
        answer = await client.ask(chat, "/markdown 64", timeout=TIMEOUT)
    assert answer == markdown_answer(64)[0]
    assert _held(running_host) >= 32


async def test_a_clients_frames_read_together_pass_the_turnstile(
    running_host: RunningHost,
) -> None:
    """Ten requests sent in one go (the gateway takes a connection's frames one after
    the other): with each frame's work taking 10 ms of the clock, the transport holds
    later frames for later turns, and every request is answered."""
    clock, advance = _stepping(0.0)

    def ticking() -> float:
        advance(0.01)
        return clock()

    running_host.host.turnstile = Turnstile(0.004, ticking)
    async with AhpClient.connect(running_host.url) as client:
        answers = await asyncio.gather(
            *(
                client.request("listSessions", {"channel": "ahp-root://"}, timeout=TIMEOUT)
                for _ in range(10)
            )
        )
    assert len(answers) == 10
    assert _held(running_host) >= 1

"""The echo agent's text chunking, against its plain definition, and its pacing."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from ahp_server.agents.base import TurnIO
from ahp_server.agents.echo import EchoAgent, _chunks, _paced, markdown_answer, markdown_section

#: Texts made of short and very long words, single and repeated whitespace.
TEXT = st.lists(st.sampled_from(["a", "bb", "é", " ", "  ", "\n", "\t", "x" * 70])).map("".join)


def chunks_by_definition(text: str, words: int) -> list[str]:
    """A piece is a word and the whitespace after it (or leading whitespace);
    a chunk is ``words`` consecutive pieces."""
    pieces = re.findall(r"\S+\s*|\s+", text)
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)] or [""]


@given(TEXT, st.integers(min_value=1, max_value=4))
def test_chunks_follow_the_definition_and_keep_every_character(text: str, words: int) -> None:
    chunks = _chunks(text, words)
    assert chunks == chunks_by_definition(text, words)
    assert "".join(chunks) == text


class FakeClock:
    """A clock that moves only when slept on or told to (a late wake-up, say)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def emitted_at(clock: FakeClock, late: Callable[[int], float]) -> list[float]:
    """When each of 8 words goes out at 25 ms, ``late(k)`` seconds lost after word k."""
    times = []
    async for k in _paced(range(8), 0.025, clock=clock, sleep=clock.sleep):
        times.append(round(clock.now - 100.0, 6))
        clock.now += late(k)
    return times


async def test_words_are_paced_on_an_absolute_clock() -> None:
    """Word k is due at start + k x 25 ms: a wake-up 60 ms late delays the words
    due meanwhile (sent at once), and every later word is on time again. Paced
    by sleeping 25 ms after each word, every later word would be 60 ms late."""
    on_time = [round(k * 0.025, 6) for k in range(8)]
    assert await emitted_at(FakeClock(), lambda k: 0.0) == on_time
    times = await emitted_at(FakeClock(), lambda k: 0.06 if k == 2 else 0.0)
    assert times[:3] == on_time[:3]
    assert times[3:5] == [0.11, 0.11]  # due at 75 and 100 ms: behind, sent at once
    assert times[5:] == on_time[5:]


async def test_on_the_loop_no_word_comes_before_it_is_due() -> None:
    """The loop's own timers (no injected clock): word k never before start + k x 10 ms."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    times = [loop.time() - start async for _ in _paced(range(6), 0.01)]
    assert len(times) == 6
    for k, at in enumerate(times):
        assert at >= k * 0.01 - 0.001, (k, at)  # (the loop's timers may run up to 1 ms early)


async def test_a_stream_stopped_while_it_waits_leaves_no_timer_behind() -> None:
    """Cancelled in its wait for the next word (the turn was cancelled), the
    stream ends at once and the word's timer never fires into a done future."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    got: list[int] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for k in _paced(range(3), 0.05):
            got.append(k)
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 10)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    await asyncio.sleep(0.1)  # past the word's due time: its timer was cancelled
    assert errors == []
    assert got == [0]


def test_markdown_answer_has_the_size_and_the_sections_it_says() -> None:
    text, sections = markdown_answer(200)
    assert 200_000 <= len(text) < 200_000 + len(markdown_section(sections))
    assert text.endswith(f"END OF MARKDOWN {sections}\n")
    assert text.count("\n## Section ") + text.startswith("## Section ") == sections
    assert text.count("```python\n") + text.count("```typescript\n") == sections
    assert text.count("| key | value | note |\n") == sections


class TextOnly:
    """The part of a TurnIO ``/markdown`` uses: it records each delta."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def text(self, delta: str) -> None:
        self.texts.append(delta)


async def test_markdown_streams_the_answer_in_many_deltas() -> None:
    io = TextOnly()
    await EchoAgent()._markdown(cast(TurnIO, io), 50)
    text, _ = markdown_answer(50)
    assert "".join(io.texts) == text
    assert len(io.texts) >= 50

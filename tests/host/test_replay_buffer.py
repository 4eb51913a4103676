"""A channel's replay buffer (host/core/sequencer.py ``ReplayBuffer``): packing a finished
stretch changes what it holds in memory, never what a replay returns."""

from __future__ import annotations

import asyncio
import gc
import sys

from hypothesis import given
from hypothesis import strategies as st

from ahp_server.client import AhpClient
from ahp_server.host.core.sequencer import PACK_AT_LEAST, Hub, ReplayBuffer
from tests.conftest import RunningHost

#: Each step: append an envelope of that many bytes, or (None) pack what is loose.
STEPS = st.lists(st.one_of(st.integers(min_value=1, max_value=300), st.none()), max_size=300)


def envelope(seq: int, size: int) -> bytes:
    return (b'{"serverSeq":%d,"pad":"' % seq + b"x" * size + b'"}')[: max(size, 20)]


class Plain:
    """The buffer's rules, unpacked: the newest envelopes within both limits."""

    def __init__(self, max_envelopes: int, max_bytes: int) -> None:
        self.max_envelopes, self.max_bytes = max_envelopes, max_bytes
        self.entries: list[tuple[int, bytes]] = []

    def append(self, seq: int, data: bytes) -> None:
        self.entries.append((seq, data))
        while len(self.entries) > self.max_envelopes or sum(len(e) for _, e in self.entries) > (
            self.max_bytes
        ):
            self.entries.pop(0)


@given(STEPS, st.integers(min_value=1, max_value=120), st.integers(min_value=50, max_value=20_000))
def test_a_replay_returns_what_was_appended_since_whatever_was_packed(
    steps: list[int | None], max_envelopes: int, max_bytes: int
) -> None:
    buffer = ReplayBuffer(max_envelopes, max_bytes)
    plain = Plain(max_envelopes, max_bytes)
    seq = 0
    for step in steps:
        if step is None:
            buffer.pack()
            continue
        seq += 1
        data = envelope(seq, step)
        buffer.append(seq, data)
        plain.append(seq, data)
        # Within both limits, always; a packed stretch goes as a whole, so it may
        # hold fewer than the plain rules would, never more, and only the newest.
        assert buffer.count <= max_envelopes
        assert buffer.size <= max_bytes
        held = buffer.since(buffer.floor)
        assert len(held) == buffer.count
        assert held == plain.entries[len(plain.entries) - len(held) :]
        for last_seen in {0, buffer.floor, seq - 1, seq, seq // 2}:
            if buffer.covers(last_seen):
                assert buffer.since(last_seen) == [e for e in plain.entries if e[0] > last_seen]


def test_a_packed_turn_holds_a_fraction_of_its_envelopes() -> None:
    """400 deltas of one turn, as the host encodes them: packed, under a tenth of the
    memory they held loose (each a bytes object and its seq)."""
    buffer = ReplayBuffer(4096, 4 * 1024 * 1024)
    for seq in range(1, 401):
        buffer.append(
            seq,
            b'{"channel":"ahp-chat:/0b5f3c1e-6a43-4c1e-9a55-2f6f1d9c8e11","serverSeq":%d,'
            b'"action":{"type":"chat/delta","turnId":"5d0c9a8e-7b1f-4d3e-8f2a-1c6e9b0d4a7f",'
            b'"partId":"md-1","content":"word%d "},"timestamp":1764979200%03d}' % (seq, seq, seq),
        )
    loose = sum(sys.getsizeof(s) + sys.getsizeof(e) for s, e in buffer.since(0))
    before = buffer.since(0)
    buffer.pack()
    assert buffer.since(0) == before
    block = buffer.packed[0]
    held = sys.getsizeof(block.data) + sys.getsizeof(block.index)
    assert held * 10 < loose, (held, loose)
    # The numbers and sizes too: as two arrays of 64-bit integers they would
    # take 6,400 bytes, more than the compressed envelopes themselves.
    assert len(block.index) * 4 < 400 * 16, len(block.index)
    buffer.pack()  # nothing loose: nothing more packed
    assert len(buffer.packed) == 1
    for seq in range(401, 401 + PACK_AT_LEAST - 1):
        buffer.append(seq, b"{}")
    buffer.pack()  # too few to be worth it: they stay loose
    assert len(buffer.envelopes) == len(buffer.seqs) == PACK_AT_LEAST - 1


def test_appending_leaves_nothing_for_the_garbage_collector() -> None:
    """An appended envelope adds no object the collector tracks: a streaming chat
    records one per delta, and each would be scanned by every collection while
    the turn lasts (docs/performance.md "Capacity": collections of 20–100 ms at
    N = 300–450 when the buffer held a tuple per delta)."""
    buffer = ReplayBuffer(10_000, 64 * 1024 * 1024)
    envelopes = [envelope(seq, 120) for seq in range(1, 5_001)]
    enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        before = gc.get_count()[0]
        for seq, data in enumerate(envelopes, start=1):
            buffer.append(seq, data)
        added = gc.get_count()[0] - before
    finally:
        if enabled:
            gc.enable()
    assert added < 50, f"{added} tracked objects for {len(envelopes)} envelopes"
    assert buffer.since(4_998) == [(4_999, envelopes[-2]), (5_000, envelopes[-1])]


async def test_the_host_packs_a_turns_envelopes_once_it_has_ended(
    running_host: RunningHost,
) -> None:
    """After a streamed turn the chat's replay holds it packed, and a client that
    reconnects from before the turn gets every envelope of it replayed."""
    words = " ".join(f"w{i}" for i in range(200))
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        await client.ask(chat, "hello")
        buffer = running_host.host.hub._replay[chat]
        before = buffer.count
        assert await client.ask(chat, f"/slow 0 {words}") == words
        assert buffer.packed, "the ended turn is packed"
        assert buffer.count > before + 200
        assert len(buffer.seqs) < PACK_AT_LEAST
        assert [seq for seq, _ in buffer.since(0)] == sorted(seq for seq, _ in buffer.since(0))


async def test_turns_that_end_together_are_packed_one_per_turn_of_the_loop() -> None:
    """``Hub.pack_replay`` packs soon, one channel per turn of the event loop: N
    chats whose turns end in one commit do not pack in one callback (N ms of
    zlib holding the loop). Asked twice, a channel is packed once."""
    hub = Hub(replay_max_envelopes=10_000, replay_max_bytes=10_000_000)
    channels = [f"ahp-chat:/c{k}" for k in range(5)]
    for k, channel in enumerate(channels):
        buffer = hub._replay[channel] = ReplayBuffer(10_000, 10_000_000)
        for seq in range(20):
            buffer.append(k * 100 + seq, b'{"n":%d}' % seq)
    for channel in [*channels, channels[0]]:
        hub.pack_replay(channel)
    assert [bool(hub._replay[c].packed) for c in channels] == [False] * 5  # not now
    for turn in range(1, 6):
        await asyncio.sleep(0)
        assert [bool(hub._replay[c].packed) for c in channels] == [k < turn for k in range(5)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert [len(hub._replay[c].packed) for c in channels] == [1] * 5  # each once
    assert [seq for seq, _ in hub._replay[channels[2]].since(0)] == list(range(200, 220))


def test_with_no_event_loop_a_turns_end_is_packed_at_once() -> None:
    """An actor driven by plain calls (the reducer property tests) ends a turn with no
    loop running: ``Hub.pack_replay`` packs at once rather than fail (it raised
    ``RuntimeError: no running event loop``), and the buffer replays the same."""
    hub = Hub(replay_max_envelopes=10_000, replay_max_bytes=10_000_000)
    channel = "ahp-chat:/c0"
    buffer = hub._replay[channel] = ReplayBuffer(10_000, 10_000_000)
    for seq in range(1, 21):
        buffer.append(seq, b'{"n":%d}' % seq)
    hub.pack_replay(channel)
    assert len(hub._replay[channel].packed) == 1
    assert [seq for seq, _ in hub._replay[channel].since(0)] == list(range(1, 21))

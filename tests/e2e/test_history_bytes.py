"""Chat history bounded in bytes, not only in count (issue 16 item 5).

A chat of 200 long turns over a real socket: a subscriber's snapshot carries
at most ``snapshot_turn_bytes`` of the newest turns plus ``turnsNextCursor``;
``fetchTurns`` pages stay within the same budget and bring every turn back in
order; the host keeps at most ``memory_turn_bytes`` of completed turns in
memory — live, after paging, and after a restart (in process, to measure the
actor, and a real ``serve`` process killed with SIGKILL).
docs/durability.md "History"; docs/protocol.md "Chat history is bounded in bytes".
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.host.actors import ChatActor
from ahp_server.protocol import codec
from ahp_server.protocol.types import ChatState, ChatTurnsLoadedAction, Turn
from tests.conftest import start_host
from tests.e2e.helpers import TIMEOUT, Daemon

TURNS = 200
#: Each turn stores its message and the echoed answer: about 2 × 20 KB.
TEXT_BYTES = 20_000
SNAPSHOT_BUDGET = 256 * 1024  # about 6 of these turns
MEMORY_BUDGET = 1024 * 1024  # about 25 of them


def _text(i: int) -> str:
    # One long "word" after the number: the echo agent answers it in two chunks.
    return f"{i:03d} " + "x" * TEXT_BYTES


def _settings(data_dir: Path) -> Settings:
    return dataclasses.replace(
        Settings(),
        data_dir=str(data_dir),
        snapshot_turn_bytes=SNAPSHOT_BUDGET,
        memory_turn_bytes=MEMORY_BUDGET,
        replay_max_envelopes=4,  # a client away for a turn resumes by snapshot
    )


def _bytes(turns: tuple[Turn, ...]) -> int:
    """Measured independently of the host's bookkeeping: the stored encoding."""
    return sum(len(codec.encode(turn)) for turn in turns)


def _numbers(turns: tuple[Turn, ...]) -> list[int]:
    return [int(turn.message.text[:3]) for turn in turns]


def _assert_memory_bounded(actor: ChatActor) -> None:
    for state in (actor.state, actor.visible):
        assert state.turns, "the newest turn always stays in memory"
        assert _bytes(state.turns) <= MEMORY_BUDGET
        # Only *old* turns leave memory: what stays is the newest, contiguous.
        assert _numbers(state.turns) == list(range(TURNS - len(state.turns), TURNS))
    assert actor.turn_bytes == _bytes(actor.state.turns)  # the running size is exact
    assert actor.turn_offset == TURNS - len(actor.state.turns)  # stored position of turns[0]


def _assert_bounded_snapshot(state: ChatState) -> None:
    assert 0 < _bytes(state.turns) <= SNAPSHOT_BUDGET
    assert len(state.turns) < TURNS
    assert isinstance(state.turns_next_cursor, str)  # the rest pages in
    assert _numbers(state.turns) == list(range(TURNS - len(state.turns), TURNS))


async def _page_everything(client: AhpClient, chat: str) -> list[int]:
    """``fetchTurns`` until no cursor is left; each page checked within budget."""
    pages = 0
    while isinstance(cursor := client.confirmed(chat, ChatState).turns_next_cursor, str):
        await client.request("fetchTurns", {"channel": chat, "cursor": cursor})
        loaded = client.envelopes[-1].action  # §11.2: dispatched before the reply
        assert isinstance(loaded, ChatTurnsLoadedAction)
        assert loaded.turns, "a page is never empty (it could not be paged past)"
        assert _bytes(loaded.turns) <= SNAPSHOT_BUDGET
        pages += 1
        assert pages <= TURNS, "paging does not end"
    assert pages > TURNS // 10  # many small pages, not one 8 MB one
    return _numbers(client.confirmed(chat, ChatState).turns)


async def _fill(client: AhpClient, chat: str) -> None:
    for i in range(TURNS):
        assert await client.ask(chat, _text(i), timeout=TIMEOUT) == _text(i)


async def test_snapshots_pages_and_memory_are_bounded_in_bytes(tmp_path: Path) -> None:
    running = await start_host(_settings(tmp_path))
    try:
        async with (
            AhpClient.connect(running.url) as writer,
            AhpClient.connect(running.url) as away,
        ):
            chat = await writer.open_chat()
            await away.subscribe(chat)
            await away.close()
            await _fill(writer, chat)
            # reconnect beyond the replay buffer: a snapshot, bounded the same way.
            assert await away.reconnect() == "snapshot"
            _assert_bounded_snapshot(away.confirmed(chat, ChatState))
            # The writer's own copy has everything: trimming is the host's alone.
            assert _numbers(writer.confirmed(chat, ChatState).turns) == list(range(TURNS))
            actor = running.host.chats[chat]
            _assert_memory_bounded(actor)

            async with AhpClient.connect(running.url) as reader:
                snapshot = await reader.subscribe(chat)
                assert isinstance(snapshot, ChatState)
                _assert_bounded_snapshot(snapshot)
                # initialize's initialSubscriptions: the same bound.
                async with AhpClient.connect(running.url, subscriptions=[chat]) as initial:
                    _assert_bounded_snapshot(initial.confirmed(chat, ChatState))
                # A view asking for every turn still gets no more bytes.
                async with AhpClient.connect(running.url) as viewer:
                    viewed = await viewer.subscribe(chat, turns=TURNS)
                    assert isinstance(viewed, ChatState)
                    _assert_bounded_snapshot(viewed)
                assert await _page_everything(reader, chat) == list(range(TURNS))
            # Paging loaded old turns through the chat: they left memory again.
            _assert_memory_bounded(actor)
            # The chat still works, and its new turn is stored after the others.
            assert await writer.ask(chat, "after", timeout=TIMEOUT) == "after"
            assert actor.turn_offset + len(actor.state.turns) == TURNS + 1
    finally:
        await running.stop()

    # A restart loads only the newest turns that fit in memory (store.load_chat).
    running = await start_host(_settings(tmp_path))
    try:
        async with AhpClient.connect(running.url) as reader:
            snapshot = await reader.subscribe(chat)
            assert isinstance(snapshot, ChatState)
            assert snapshot.turns[-1].message.text == "after"
            assert 0 < _bytes(snapshot.turns) <= SNAPSHOT_BUDGET
            actor = running.host.chats[chat]
            assert 0 < actor.turn_bytes == _bytes(actor.state.turns) <= MEMORY_BUDGET
            assert actor.turn_offset + len(actor.state.turns) == TURNS + 1
            # Everything pages back in, in order, from the stored history.
            texts = [t.message.text for t in await _all_turns(reader, chat)]
            assert texts == [*(_text(i) for i in range(TURNS)), "after"]
            assert 0 < actor.turn_bytes <= MEMORY_BUDGET
    finally:
        await running.stop()


async def _all_turns(client: AhpClient, chat: str) -> tuple[Turn, ...]:
    while isinstance(cursor := client.confirmed(chat, ChatState).turns_next_cursor, str):
        await client.request("fetchTurns", {"channel": chat, "cursor": cursor})
        loaded = client.envelopes[-1].action
        assert isinstance(loaded, ChatTurnsLoadedAction)
        assert loaded.turns
        assert _bytes(loaded.turns) <= SNAPSHOT_BUDGET
    return client.confirmed(chat, ChatState).turns


async def test_one_turn_over_the_budget_is_sent_alone(tmp_path: Path) -> None:
    """The newest turn always goes, even alone over the budget (docs/protocol.md)."""
    settings = dataclasses.replace(_settings(tmp_path), snapshot_turn_bytes=16 * 1024)
    running = await start_host(settings)
    try:
        async with AhpClient.connect(running.url) as writer:
            chat = await writer.open_chat()
            for i in range(3):
                await writer.ask(chat, _text(i), timeout=TIMEOUT)
            async with AhpClient.connect(running.url) as reader:
                snapshot = await reader.subscribe(chat)
                assert isinstance(snapshot, ChatState)
                assert _numbers(snapshot.turns) == [2]
                assert _bytes(snapshot.turns) > 16 * 1024
                assert isinstance(snapshot.turns_next_cursor, str)
                numbers = []
                while isinstance(
                    cursor := reader.confirmed(chat, ChatState).turns_next_cursor, str
                ):
                    await reader.request("fetchTurns", {"channel": chat, "cursor": cursor})
                    loaded = reader.envelopes[-1].action
                    assert isinstance(loaded, ChatTurnsLoadedAction)
                    numbers.append(_numbers(loaded.turns))
                assert numbers == [[1], [0]]  # one turn per page, never an empty one
    finally:
        await running.stop()


async def test_a_killed_daemon_reloads_within_the_budgets(tmp_path: Path) -> None:
    """A real ``serve`` process, killed with SIGKILL: the reload is bounded the same way."""
    config = tmp_path / "ahp-server.toml"
    config.write_text(
        f"[storage]\nsnapshot_turn_bytes = {SNAPSHOT_BUDGET}\nmemory_turn_bytes = {MEMORY_BUDGET}\n"
    )
    daemon = Daemon(tmp_path / "data", "--config", str(config))
    try:
        url = await daemon.start()
        async with AhpClient.connect(url) as writer:
            chat = await writer.open_chat()
            await _fill(writer, chat)
        await daemon.kill()
        url = await daemon.start()
        async with AhpClient.connect(url) as reader:
            snapshot = await reader.subscribe(chat)
            assert isinstance(snapshot, ChatState)
            _assert_bounded_snapshot(snapshot)
            assert await _page_everything(reader, chat) == list(range(TURNS))
    finally:
        await daemon.close()

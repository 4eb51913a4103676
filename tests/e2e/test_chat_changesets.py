"""A chat's own changeset (1.0: per-chat changesets) end to end (issue 28, item 4).

Layer: tests (end to end). The real ACP agent ``tests/agents/scripted_agent.py``
writes files through the host (``tests/e2e/test_changesets.py`` has the
bench); the bundled client reads the chat's catalogue (``ChatState.changesets``),
subscribes to the chat's changeset, and checks the counts the session's
catalogue carries for the chat (``ChatSummary.changes``) against it. The
changeset is the chat's: it moves with the chat, goes with it, and survives
a restart. docs/workspace.md "Changesets".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec import UnsetType

from ahp_server.client import AhpClient, RemoteError
from ahp_server.config import UserConfig
from ahp_server.protocol.types import (
    ChangesetState,
    ChangesSummary,
    ChatState,
    SessionState,
)
from tests.agents.test_acp import open_chat
from tests.e2e.test_changesets import TIMEOUT, Bench, open_bench, turn_of, uri_of

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"


def chat_entry(client: AhpClient, chat: str) -> str:
    """The URI of the chat's own changeset, from its catalogue."""
    changesets = client.confirmed(chat, ChatState).changesets
    assert isinstance(changesets, tuple), "the chat advertises no changeset"
    (entry,) = changesets
    assert entry.change_kind == "chat"
    assert "{" not in entry.uri_template
    return entry.uri_template


async def changeset(client: AhpClient, uri: str) -> ChangesetState:
    if uri in client.subscriptions:
        await client.unsubscribe(uri)
    state = await client.subscribe(uri, timeout=TIMEOUT)
    assert isinstance(state, ChangesetState), state
    return state


def counted(state: ChangesetState) -> ChangesSummary:
    """What the counts must be: the changeset's files and their diff stats, summed."""
    added = removed = 0
    for file in state.files:
        diff = file.edit.diff
        assert not isinstance(diff, UnsetType)
        added += int(diff.added) if not isinstance(diff.added, UnsetType) else 0
        removed += int(diff.removed) if not isinstance(diff.removed, UnsetType) else 0
    return ChangesSummary(files=len(state.files), additions=added, deletions=removed)


async def catalogued(client: AhpClient, session: str, chat: str, wanted: ChangesSummary) -> None:
    def listed(c: AhpClient) -> bool:
        entries = c.confirmed(session, SessionState).chats
        return any(e.resource == chat and e.changes == wanted for e in entries)

    await client.wait_for(listed, timeout=TIMEOUT)


async def test_each_chat_lists_its_own_changes_and_counts_them(tmp_path: Path) -> None:
    bench = await open_bench(tmp_path)
    try:
        await each_chat_counts(bench)
    finally:
        await bench.running.stop()


async def each_chat_counts(bench: Bench) -> None:
    first_file, second_file = bench.work / "one.txt", bench.work / "two.txt"
    first_file.write_text("a\nb\n")
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        owner = bench.running.host.chat_index[chat]
        await client.subscribe(owner, timeout=TIMEOUT)
        other = await client.create_chat(owner, subscribe=True, timeout=TIMEOUT)
        assert (await turn_of(client, chat, f"/write {first_file} a\nB\nc\n"))[0] == "written"
        assert (await turn_of(client, other, f"/write {second_file} new"))[0] == "written"
        mine, theirs = chat_entry(client, chat), chat_entry(client, other)
        assert mine != theirs
        state = await changeset(client, mine)
        assert [f.id for f in state.files] == [uri_of(first_file)]
        assert [f.id for f in (await changeset(client, theirs)).files] == [uri_of(second_file)]
        assert counted(state) == ChangesSummary(files=1, additions=2, deletions=1)
        await catalogued(client, owner, chat, counted(state))
        # A second change in the chat: the counts follow the changeset.
        assert (await turn_of(client, chat, f"/write {second_file} mine"))[0] == "written"
        state = await changeset(client, mine)
        assert len(state.files) == 2
        await catalogued(client, owner, chat, counted(state))

        # Moved to another session: the changeset and its counts go with the chat.
        moved = await changeset(client, theirs)
        target = await client.create_session("scripted", [str(bench.work)], subscribe=True)
        await client.wait_for(
            lambda c: c.confirmed(target, SessionState).lifecycle == "ready", timeout=TIMEOUT
        )
        await client.request(
            "moveChat",
            {"channel": other, "destination": {"kind": "session", "session": target}},
            timeout=TIMEOUT,
        )
        assert await changeset(client, theirs) == moved
        await catalogued(client, target, other, counted(moved))

        # Disposed: its changeset goes with it; the other chat's stays.
        await client.dispose_chat(other, timeout=TIMEOUT)
        with pytest.raises(RemoteError) as gone:
            await client.subscribe(theirs, timeout=TIMEOUT)
        assert gone.value.code == -32008
        assert theirs not in bench.running.host.workspace_channels
        assert await changeset(client, mine) == state


async def test_a_chats_changeset_survives_a_restart(tmp_path: Path) -> None:
    target = tmp_path / "work" / "kept.txt"
    bench = await open_bench(tmp_path, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(bench.url) as client:
            chat = await open_chat(client, bench.work)
            await turn_of(client, chat, f"/write {target} kept")
            uri = chat_entry(client, chat)
            before = await changeset(client, uri)
            assert before.files
    finally:
        await bench.running.stop()
    bench = await open_bench(tmp_path, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(bench.url) as client:
            await client.subscribe(chat, timeout=TIMEOUT)
            assert chat_entry(client, chat) == uri
            assert await changeset(client, uri) == before
    finally:
        await bench.running.stop()


async def test_another_user_cannot_read_a_chats_changeset(tmp_path: Path) -> None:
    """Multi-user mode: a chat's changeset is its chat's session owner's (the catalogue
    says which session holds the chat; protocol/uris.py reads the URI)."""
    users = (UserConfig(name="alice", token=ALICE), UserConfig(name="bob", token=BOB))
    bench = await open_bench(tmp_path, users=users)
    try:
        async with AhpClient.connect(bench.url, token=ALICE) as alice:
            chat = await open_chat(alice, bench.work)
            await turn_of(alice, chat, f"/write {bench.work / 'secret.txt'} secret")
            uri = chat_entry(alice, chat)
            assert (await changeset(alice, uri)).files
            async with AhpClient.connect(bench.url, token=BOB) as bob:
                with pytest.raises(RemoteError) as refused:
                    await bob.subscribe(uri, timeout=TIMEOUT)
                assert refused.value.code == -32009
                assert uri not in bob.subscriptions
    finally:
        await bench.running.stop()

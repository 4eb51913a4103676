"""Changesets end to end: a real ACP agent changes files through the host, a client sees them.

The agent is ``tests/agents/scripted_agent.py`` (the official SDK's agent
side), run by the host as a configured ``[[agents]]`` entry; the client is the
bundled one over a real WebSocket. Nothing of ours is mocked.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from msgspec import UNSET

from ahp_server.client import AhpClient, RemoteError
from ahp_server.config import Settings
from ahp_server.protocol.types import (
    ActionEnvelope,
    ChangesetCapabilities,
    ChangesetClearedAction,
    ChangesetFile,
    ChangesetFileSetAction,
    ChangesetState,
    ChatState,
    FileEditDiffStats,
    FileEditSide,
    SessionState,
)
from tests.agents.test_acp import agent, open_chat
from tests.conftest import RunningHost, start_host

TIMEOUT = 20.0


@dataclasses.dataclass
class Bench:
    running: RunningHost
    work: Path

    @property
    def url(self) -> str:
        return self.running.url


async def open_bench(tmp_path: Path, **settings: Any) -> Bench:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = dataclasses.replace(Settings(), agents=(agent(),), **settings)
    return Bench(await start_host(config), work)


@pytest.fixture
async def bench(tmp_path: Path) -> AsyncIterator[Bench]:
    opened = await open_bench(tmp_path)
    try:
        yield opened
    finally:
        await opened.running.stop()


def uri_of(path: Path) -> str:
    return Path(os.path.realpath(path)).as_uri()


def text(side: object) -> str:
    assert isinstance(side, FileEditSide), side
    prefix = "data:text/plain;charset=utf-8;base64,"
    assert side.content.uri.startswith(prefix)
    return base64.b64decode(side.content.uri.removeprefix(prefix)).decode()


def by_id(state: ChangesetState) -> dict[str, ChangesetFile]:
    return {f.id: f for f in state.files}


class Catalogue:
    """What a client does with ``SessionState.changesets``: expand and subscribe."""

    def __init__(self, client: AhpClient, session: str) -> None:
        self.client = client
        self.session = session

    def entries(self) -> dict[str, str]:
        state = self.client.confirmed(self.session, SessionState)
        changesets = state.changesets
        assert isinstance(changesets, tuple), "no changeset is advertised"
        return {c.change_kind: c.uri_template for c in changesets}

    def turn(self, turn_id: str) -> str:
        # RFC 6570 simple expansion of {turnId}.
        return self.entries()["turn"].replace("{turnId}", quote(turn_id, safe=""))

    def whole(self) -> str:
        return self.entries()["session"]

    async def state(self, uri: str) -> ChangesetState:
        """A fresh snapshot (the client does not mirror changeset channels)."""
        if uri in self.client.subscriptions:
            await self.client.unsubscribe(uri)
        state = await self.client.subscribe(uri, timeout=TIMEOUT)
        assert isinstance(state, ChangesetState), state
        return state


async def chat_and_catalogue(client: AhpClient, work: Path) -> tuple[str, Catalogue]:
    chat = await open_chat(client, work)
    state = client.confirmed(chat, ChatState)
    session = next(s for s in client.subscriptions if s.startswith("ahp-session:/") and s != chat)
    assert state.resource == chat
    return chat, Catalogue(client, session)


async def turn_of(client: AhpClient, chat: str, text: str) -> tuple[str, str]:
    """Ask; return the answer and the id of the turn that answered."""
    answer = await client.ask(chat, text, timeout=TIMEOUT)
    return answer, client.confirmed(chat, ChatState).turns[-1].id


# -- what a turn changed ---------------------------------------------------------------------


async def test_a_write_through_the_host_is_listed_with_before_and_after(bench: Bench) -> None:
    existing = bench.work / "a.txt"
    existing.write_text("one\ntwo\n")
    async with AhpClient.connect(bench.url) as client:
        chat, catalogue = await chat_and_catalogue(client, bench.work)
        answer, turn = await turn_of(client, chat, f"/write {existing} one\nTWO\nthree\n")
        assert answer == "written"
        entries = client.confirmed(catalogue.session, SessionState).changesets
        assert isinstance(entries, tuple)
        assert [c.change_kind for c in entries] == ["turn", "session"]
        assert "{turnId}" in entries[0].uri_template
        assert "{" not in entries[1].uri_template
        assert entries[1].uri_template.endswith("/changeset/session")
        assert all(c.capabilities == ChangesetCapabilities(review={}) for c in entries)

        state = await catalogue.state(catalogue.turn(turn))
        assert state.status == "ready"
        (file,) = state.files
        assert file.id == uri_of(existing)
        assert text(file.edit.before) == "one\ntwo\n"
        assert text(file.edit.after) == "one\nTWO\nthree\n"
        assert file.edit.diff == FileEditDiffStats(added=2, removed=1)
        assert file.meta == {"status": "modified", "turnId": turn, "chat": chat}

        created = bench.work / "b.txt"
        assert (await turn_of(client, chat, f"/write {created} hello"))[0] == "written"
        second = client.confirmed(chat, ChatState).turns[-1].id
        (new,) = (await catalogue.state(catalogue.turn(second))).files
        assert new.id == uri_of(created)
        assert new.edit.before is UNSET
        assert text(new.edit.after) == "hello"
        assert new.meta == {"status": "added", "turnId": second, "chat": chat}

        # The first turn's changeset is unchanged; the session's lists both files.
        assert len((await catalogue.state(catalogue.turn(turn))).files) == 1
        whole = by_id(await catalogue.state(catalogue.whole()))
        assert set(whole) == {uri_of(existing), uri_of(created)}
        # A turn that changed nothing has an empty changeset, not an error.
        _, quiet = await turn_of(client, chat, "just talk")
        assert (await catalogue.state(catalogue.turn(quiet))).files == ()


async def test_two_writes_keep_the_first_before_and_the_last_after(bench: Bench) -> None:
    target = bench.work / "c.txt"
    target.write_text("original")
    async with AhpClient.connect(bench.url) as client:
        chat, catalogue = await chat_and_catalogue(client, bench.work)
        answer, turn = await turn_of(client, chat, f"/writes {target} first second")
        assert answer == "written twice"
        (file,) = (await catalogue.state(catalogue.turn(turn))).files
        assert (text(file.edit.before), text(file.edit.after)) == ("original", "second")
        # Written back to what it was: the file no longer differs in the session.
        await turn_of(client, chat, f"/write {target} original")
        assert (await catalogue.state(catalogue.whole())).files == ()


async def test_a_completed_diff_is_listed_and_a_failed_one_is_not(bench: Bench) -> None:
    target = bench.work / "d.py"
    async with AhpClient.connect(bench.url) as client:
        chat, catalogue = await chat_and_catalogue(client, bench.work)
        answer, failed_turn = await turn_of(client, chat, f"/diff-denied {target}")
        assert answer == "edit failed"
        answer, turn = await turn_of(client, chat, f"/diff {target} - print('hi')")
        assert answer == "edited"
        (file,) = (await catalogue.state(catalogue.turn(turn))).files
        assert file.id == uri_of(target)
        assert file.edit.before is UNSET
        assert text(file.edit.after) == "print('hi')"
        assert (await catalogue.state(catalogue.turn(failed_turn))).files == ()
        assert not target.exists()  # the agent only showed a diff


async def test_content_over_the_cap_is_listed_without_content(tmp_path: Path) -> None:
    bench = await open_bench(tmp_path, changeset_content_bytes=8)
    try:
        big, small = bench.work / "big.txt", bench.work / "small.txt"
        async with AhpClient.connect(bench.url) as client:
            chat, catalogue = await chat_and_catalogue(client, bench.work)
            _, turn = await turn_of(client, chat, f"/write {big} far-more-than-eight-bytes")
            await turn_of(client, chat, f"/write {small} tiny")
            (file,) = (await catalogue.state(catalogue.turn(turn))).files
            assert file.edit.before is UNSET
            assert file.edit.after is UNSET
            assert file.meta == {
                "status": "added",
                "turnId": turn,
                "chat": chat,
                "contentOmitted": True,
            }
            whole = by_id(await catalogue.state(catalogue.whole()))
            assert text(whole[uri_of(small)].edit.after) == "tiny"
    finally:
        await bench.running.stop()


async def test_files_beyond_the_limit_are_left_out_and_the_changeset_says_so(
    tmp_path: Path,
) -> None:
    bench = await open_bench(tmp_path, changeset_max_files=1)
    try:
        first, second = bench.work / "1.txt", bench.work / "2.txt"
        async with AhpClient.connect(bench.url) as client:
            chat, catalogue = await chat_and_catalogue(client, bench.work)
            assert client.confirmed(catalogue.session, SessionState).changesets is UNSET
            await turn_of(client, chat, f"/write {first} one")
            _, turn = await turn_of(client, chat, f"/write {second} two")
            whole = await catalogue.state(catalogue.whole())
            assert [f.id for f in whole.files] == [uri_of(first)]
            assert whole.status == "error"
            assert whole.error is not UNSET
            assert whole.error.error_type == "tooManyFiles"  # type: ignore[union-attr]
            # Each turn's own changeset has room for its one file.
            assert [f.id for f in (await catalogue.state(catalogue.turn(turn))).files] == [
                uri_of(second)
            ]
    finally:
        await bench.running.stop()


# -- what a client may do ------------------------------------------------------------------


async def test_review_is_client_dispatchable_and_nothing_else_is(bench: Bench) -> None:
    target = bench.work / "r.txt"
    async with AhpClient.connect(bench.url) as client:
        chat, catalogue = await chat_and_catalogue(client, bench.work)
        _, turn = await turn_of(client, chat, f"/write {target} review me")
        channel = catalogue.turn(turn)
        (file,) = (await catalogue.state(channel)).files
        envelopes: list[ActionEnvelope] = []
        client.on_envelope(lambda e: envelopes.append(e) if e.channel == channel else None)

        async def dispatch(seq: int, action: dict[str, Any]) -> ActionEnvelope:
            await client.notify(
                "dispatchAction", {"channel": channel, "clientSeq": seq, "action": action}
            )

            def echoed(_: AhpClient) -> bool:
                return any(getattr(e.origin, "client_seq", None) == seq for e in envelopes)

            await client.wait_for(echoed, timeout=TIMEOUT)
            return next(e for e in envelopes if getattr(e.origin, "client_seq", None) == seq)

        forged = {"type": "changeset/fileSet", "file": {"id": file.id, "edit": {}}}
        refused = await dispatch(1, forged)
        assert isinstance(refused.rejection_reason, str)
        assert "server-only" in refused.rejection_reason
        assert isinstance(refused.action, ChangesetFileSetAction)

        stranger = {"type": "changeset/filesReviewChanged", "files": ["x"], "reviewed": True}
        assert isinstance((await dispatch(2, stranger)).rejection_reason, str)

        review = {"type": "changeset/filesReviewChanged", "files": [file.id], "reviewed": True}
        accepted = await dispatch(3, review)
        assert not isinstance(accepted.rejection_reason, str)
        (reviewed,) = (await catalogue.state(channel)).files
        assert reviewed.reviewed is True
        # A later change of the file resets review (the server re-emits it).
        await turn_of(client, chat, f"/write {target} changed again")
        whole = by_id(await catalogue.state(catalogue.whole()))
        assert whole[file.id].reviewed is UNSET


async def test_invoking_an_operation_is_refused_clearly(bench: Bench) -> None:
    target = bench.work / "o.txt"
    async with AhpClient.connect(bench.url) as client:
        chat, catalogue = await chat_and_catalogue(client, bench.work)
        _, turn = await turn_of(client, chat, f"/write {target} x")
        with pytest.raises(RemoteError) as none_offered:
            await client.request(
                "invokeChangesetOperation",
                {"channel": catalogue.turn(turn), "operationId": "revert"},
                timeout=TIMEOUT,
            )
        assert none_offered.value.code == -32602
        assert "revert" in str(none_offered.value)
        with pytest.raises(RemoteError) as unknown:
            await client.request(
                "invokeChangesetOperation",
                {"channel": "ahp-changeset:/nobody/changeset/session", "operationId": "x"},
                timeout=TIMEOUT,
            )
        assert unknown.value.code == -32008


# -- lifecycle -------------------------------------------------------------------------------


async def test_disposing_the_session_clears_and_removes_its_changesets(bench: Bench) -> None:
    target = bench.work / "gone.txt"
    async with AhpClient.connect(bench.url) as client:
        chat, catalogue = await chat_and_catalogue(client, bench.work)
        _, turn = await turn_of(client, chat, f"/write {target} bye")
        channel = catalogue.turn(turn)
        assert (await catalogue.state(channel)).files
        cleared: list[ActionEnvelope] = []
        client.on_envelope(
            lambda e: cleared.append(e) if isinstance(e.action, ChangesetClearedAction) else None
        )
        await client.dispose_session(catalogue.session)
        await client.wait_for(lambda _: bool(cleared), timeout=TIMEOUT)
        assert cleared[0].channel == channel
        assert channel not in bench.running.host.workspace_channels
        with pytest.raises(RemoteError) as gone:
            await client.subscribe(channel, timeout=TIMEOUT)
        assert gone.value.code == -32008


async def test_changesets_survive_a_restart(tmp_path: Path) -> None:
    target = tmp_path / "work" / "kept.txt"
    bench = await open_bench(tmp_path, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(bench.url) as client:
            chat, catalogue = await chat_and_catalogue(client, bench.work)
            _, turn = await turn_of(client, chat, f"/write {target} kept")
            session = catalogue.session
            turn_uri = catalogue.turn(turn)
            before = await catalogue.state(turn_uri)
            whole_uri = catalogue.whole()
    finally:
        await bench.running.stop()
    bench = await open_bench(tmp_path, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(bench.url) as client:
            state = await client.subscribe(session, timeout=TIMEOUT)
            assert isinstance(state, SessionState)
            assert isinstance(state.changesets, tuple)
            assert len(state.changesets) == 2
            catalogue = Catalogue(client, session)
            assert await catalogue.state(turn_uri) == before
            assert set(by_id(await catalogue.state(whole_uri))) == {uri_of(target)}
    finally:
        await bench.running.stop()

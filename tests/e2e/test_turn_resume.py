"""``chat/turnResume`` end to end, over real sockets (issue 28; spec 1.0 REDUCER-CHANGES 10).

Layer: tests (end to end). Raw 1.0 WebSocket peers (``test_versions.Peer``:
every frame validated against ``../shared/spec-1.0/schema``) drive real hosts:

* the echo agent's ``/flaky`` (resumable by construction): the turn errs with
  ``resumable: true``, a resume continues the same turn to its end; the
  refusals a client can meet; what a 0.7 client on the same chat sees;
* the OpenAI-compatible provider against the local SSE test server
  (``tests/agents/openai_server.py``) cutting a stream mid-answer, and 429 and
  503 past the retries: resumable, and the resumed request carries the answer
  so far; a refused key is not resumable and its resume is refused;
* the ACP bridge with the scripted agent crashing mid-turn: resumed, the agent
  is started again, loads its session and is given the answer so far;
* storage: ``python -m ahp_server serve`` killed (``kill -9``) after a resumed
  turn ended and while one runs, then stopped gracefully: each time the chat
  comes back with every turn once, at its place, in its last version.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from ahp_server.agents.openai_chat import CONTINUE_PROMPT
from ahp_server.config import AgentConfig, Settings
from ahp_server.protocol.views import v0_7
from tests.agents.openai_server import MODEL, OpenAIServer
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import Daemon
from tests.e2e.test_versions import Peer, start_turn

SCRIPT = str(Path(__file__).parents[1] / "agents" / "scripted_agent.py")
FIRST_HALF = "The first half, "


# -- peers and turns -------------------------------------------------------------------------


@pytest.fixture
async def peers() -> AsyncIterator[Callable[..., Any]]:
    opened: list[Peer] = []

    async def open_peer(url: str, offered: list[str] | None = None) -> Peer:
        versions = offered or ["1.0.0"]
        peer = Peer(await connect(url), versions, validate=versions[0] != "0.7.0")
        opened.append(peer)
        await peer.initialize()
        return peer

    yield open_peer
    for peer in opened:
        await peer.close()


async def new_chat(peer: Peer, provider: str = "echo", directory: str | None = None) -> str:
    """A session of ``provider`` and its default chat, subscribed; the chat's URI."""
    session = f"ahp-session:/{uuid.uuid4()}"
    params: dict[str, Any] = {"channel": session, "provider": provider}
    if directory is not None:
        params["workingDirectories"] = [directory]
    await peer.call("createSession", params)
    snapshot = await peer.call("subscribe", {"channel": session})
    chat = snapshot["snapshot"]["state"].get("defaultChat")
    if chat is None:  # the agent is still opening the session
        changed = await peer.until(lambda: peer.actions(session, "session/defaultChatChanged"))
        chat = changed[-1]["defaultChat"]
    assert isinstance(chat, str)
    await peer.call("subscribe", {"channel": chat})
    return chat


def ended(peer: Peer, chat: str, turn: str) -> list[dict[str, Any]]:
    """The actions that ended ``turn``, in order (one per run of it)."""
    return [
        e["action"]
        for e in peer.envelopes
        if e["channel"] == chat
        and e["action"]["type"] in ("chat/turnComplete", "chat/error", "chat/turnCancelled")
        and e["action"].get("turnId") == turn
        and "rejectionReason" not in e
    ]


async def ends(peer: Peer, chat: str, turn: str, count: int) -> dict[str, Any]:
    """Wait until ``turn`` ended ``count`` times; the last end."""
    found = await peer.until(
        lambda: len(ended(peer, chat, turn)) >= count and ended(peer, chat, turn)
    )
    assert len(found) == count
    return found[-1]


async def resume(peer: Peer, chat: str, turn: str) -> dict[str, Any]:
    """Dispatch ``chat/turnResume``; its echo (``rejectionReason`` when refused)."""
    before = len(peer.envelopes)
    await peer.dispatch(chat, {"type": "chat/turnResume", "turnId": turn})

    def echo() -> list[dict[str, Any]]:
        return [
            e
            for e in peer.envelopes[before:]
            if e["action"]["type"] == "chat/turnResume" and e.get("origin", {}).get("clientId")
        ]

    (echoed,) = await peer.until(echo)
    return echoed


async def chat_state(peer: Peer, chat: str) -> dict[str, Any]:
    state: dict[str, Any] = (await peer.call("subscribe", {"channel": chat}))["snapshot"]["state"]
    return state


def markdown(turn: dict[str, Any]) -> str:
    return "".join(p["content"] for p in turn["responseParts"] if p["kind"] == "markdown")


def kinds(turn: dict[str, Any]) -> list[str]:
    return [p["kind"] for p in turn["responseParts"]]


# -- the echo agent: /flaky -------------------------------------------------------------------


async def test_a_resumable_error_is_resumed_and_the_same_turn_completes(
    running_host: RunningHost, peers: Callable[..., Any]
) -> None:
    peer = await peers(running_host.url)
    chat = await new_chat(peer)
    turn = await start_turn(peer, chat, "/flaky")
    failed = await ends(peer, chat, turn, 1)
    assert failed["type"] == "chat/error"
    assert failed["part"]["resumable"] is True
    assert failed["part"]["error"]["errorType"] == "echoFlaky"

    echoed = await resume(peer, chat, turn)
    assert "rejectionReason" not in echoed, echoed
    done = await ends(peer, chat, turn, 2)
    assert done["type"] == "chat/turnComplete"
    assert done["duration"] >= failed["duration"]  # counted from the turn's start

    state = await chat_state(peer, chat)
    assert "activeTurn" not in state
    (only,) = state["turns"]  # the same turn, once
    assert only["id"] == turn
    assert only["state"] == "complete"
    # What the user saw stays: the first half, the error, then the rest, which
    # the agent wrote knowing what it had been given back.
    assert kinds(only) == ["markdown", "error", "markdown"]
    assert markdown(only) == FIRST_HALF + f"resumed after {FIRST_HALF!r}: the second half."
    ids = [p["id"] for p in only["responseParts"] if "id" in p]
    assert len(ids) == len(set(ids))  # the resumed run's parts have ids of their own
    assert not peer.invalid, peer.invalid[:5]


async def test_resume_is_refused_unless_the_latest_turn_ended_in_a_resumable_error(
    running_host: RunningHost, peers: Callable[..., Any]
) -> None:
    peer = await peers(running_host.url)
    chat = await new_chat(peer)
    failed = await start_turn(peer, chat, "/error")  # not resumable
    error = await ends(peer, chat, failed, 1)
    assert "resumable" not in error["part"]
    refused = await resume(peer, chat, failed)
    assert "cannot be resumed" in refused["rejectionReason"]

    flaky = await start_turn(peer, chat, "/flaky 1 " + " ".join(f"w{i}" for i in range(60)))
    await ends(peer, chat, flaky, 1)
    older = await resume(peer, chat, failed)
    assert "not the chat's latest turn" in older["rejectionReason"]
    assert "rejectionReason" not in await resume(peer, chat, flaky)
    running = await resume(peer, chat, flaky)  # it runs again now
    assert "in progress" in running["rejectionReason"]
    await ends(peer, chat, flaky, 2)
    complete = await resume(peer, chat, flaky)
    assert "ended complete" in complete["rejectionReason"]

    state = await chat_state(peer, chat)
    assert [t["id"] for t in state["turns"]] == [failed, flaky]  # nothing else applied
    assert [t["state"] for t in state["turns"]] == ["error", "complete"]
    assert not peer.invalid, peer.invalid[:5]


async def test_a_0_7_client_on_the_chat_never_sees_the_resume_and_keeps_going(
    running_host: RunningHost, peers: Callable[..., Any]
) -> None:
    new = await peers(running_host.url)
    old = await peers(running_host.url, ["0.7.0"])
    chat = await new_chat(new)
    await old.call("subscribe", {"channel": chat})
    turn = await start_turn(new, chat, "/flaky")
    for peer in (new, old):
        await ends(peer, chat, turn, 1)
    assert old.actions(chat, "chat/error")[0]["error"]["errorType"] == "echoFlaky"
    assert "part" not in old.actions(chat, "chat/error")[0]

    await resume(new, chat, turn)
    await ends(new, chat, turn, 2)
    await ends(old, chat, turn, 2)  # the resumed turn's end reaches it too
    assert not old.actions(chat, "chat/turnResume")
    resumed_parts = [a for a in old.actions(chat, "chat/responsePart") if a["turnId"] == turn]
    assert len(resumed_parts) == 2  # the first half's, then the resumed run's
    assert all(a["part"]["kind"] == "markdown" for a in resumed_parts)
    assert await old.call("ping", {}) is None  # its connection is fine

    canonical = await chat_state(new, chat)
    legacy = await chat_state(old, chat)
    (turn_07,) = legacy["turns"]
    assert turn_07["state"] == "complete"
    assert "error" not in turn_07  # an error part not last has no 0.7 form
    assert [p["kind"] for p in turn_07["responseParts"]] == ["markdown", "markdown"]
    assert v0_7.state("chat", canonical) == legacy
    assert not new.invalid, new.invalid[:5]


# -- the OpenAI-compatible provider ------------------------------------------------------------


class ResumingServer(OpenAIServer):
    """The test endpoint, with answers for resumed turns.

    ``cut-once`` cuts its stream mid-answer unless the request carries an
    answer so far (an assistant message after the user's), then finishes it;
    ``429-thrice`` and ``503-thrice`` fail three requests, then answer.
    """

    async def scenario(self, body: dict[str, Any], writer: Any) -> None:
        messages = body["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        if "cut-once" in users:
            if messages[-1]["content"] == "cut-once":
                await super().scenario(
                    {**body, "messages": [{"role": "user", "content": "cut"}]}, writer
                )
            else:
                await self._stream(writer, [{"content": "and "}, {"content": "the end."}])
            return
        for status in ("429", "503"):
            if users[-1] == f"{status}-thrice":
                if self._seen(status) <= 3:
                    await self._status(
                        writer, int(status), {"error": {"message": "busy"}}, retry_after="0"
                    )
                else:
                    await self._stream(writer, [{"content": "at last"}])
                return
        await super().scenario(body, writer)


@pytest.fixture
async def endpoint() -> AsyncIterator[ResumingServer]:
    server = ResumingServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def model_host(endpoint: ResumingServer) -> AsyncIterator[RunningHost]:
    config = AgentConfig(
        name="model",
        kind="openai",
        display_name="Test model",
        base_url=endpoint.base_url,
        model=MODEL,
        system_prompt="Be brief.",
        max_retries=2,
    )
    running = await start_host(dataclasses.replace(Settings(), agents=(config,)))
    try:
        yield running
    finally:
        await running.stop()


async def test_a_cut_stream_is_resumed_with_the_answer_so_far_as_context(
    model_host: RunningHost, endpoint: ResumingServer, peers: Callable[..., Any]
) -> None:
    peer = await peers(model_host.url)
    chat = await new_chat(peer, "model")
    turn = await start_turn(peer, chat, "cut-once")
    failed = await ends(peer, chat, turn, 1)
    assert failed["part"]["error"]["errorType"] == "streamInterrupted"
    assert failed["part"]["resumable"] is True
    assert len(endpoint.requests) == 1

    assert "rejectionReason" not in await resume(peer, chat, turn)
    assert (await ends(peer, chat, turn, 2))["type"] == "chat/turnComplete"
    first, second = (r.body["messages"] for r in endpoint.requests)
    # The same conversation, then the answer so far as the assistant's, then
    # the request to go on (openai_chat._resumed says why this shape).
    assert second[: len(first)] == first
    assert second[len(first) :] == [
        {"role": "assistant", "content": "the beginning "},
        {"role": "user", "content": CONTINUE_PROMPT},
    ]
    (only,) = (await chat_state(peer, chat))["turns"]
    assert only["id"] == turn
    assert kinds(only) == ["markdown", "error", "markdown"]
    assert markdown(only) == "the beginning and the end."
    assert not peer.invalid, peer.invalid[:5]


@pytest.mark.parametrize("status", ["429", "503"])
async def test_429_and_5xx_past_the_retries_are_resumable(
    model_host: RunningHost, endpoint: ResumingServer, peers: Callable[..., Any], status: str
) -> None:
    peer = await peers(model_host.url)
    chat = await new_chat(peer, "model")
    turn = await start_turn(peer, chat, f"{status}-thrice")
    failed = await ends(peer, chat, turn, 1)
    assert failed["part"]["error"]["errorType"] == (
        "rateLimited" if status == "429" else "endpointError"
    )
    assert failed["part"]["resumable"] is True
    assert len(endpoint.requests) == 3  # the first try and max_retries = 2 more

    assert "rejectionReason" not in await resume(peer, chat, turn)
    assert (await ends(peer, chat, turn, 2))["type"] == "chat/turnComplete"
    assert len(endpoint.requests) == 4
    # Nothing was streamed before: the resumed request is the original one.
    assert endpoint.requests[3].body["messages"] == endpoint.requests[0].body["messages"]
    (only,) = (await chat_state(peer, chat))["turns"]
    assert markdown(only) == "at last"
    assert not peer.invalid, peer.invalid[:5]


async def test_a_refused_key_is_not_resumable_and_its_resume_is_refused(
    model_host: RunningHost, endpoint: ResumingServer, peers: Callable[..., Any]
) -> None:
    peer = await peers(model_host.url)
    chat = await new_chat(peer, "model")
    turn = await start_turn(peer, chat, "401")
    failed = await ends(peer, chat, turn, 1)
    assert failed["part"]["error"]["errorType"] == "authenticationFailed"
    assert "resumable" not in failed["part"]
    refused = await resume(peer, chat, turn)
    assert "cannot be resumed" in refused["rejectionReason"]
    assert len(endpoint.requests) == 1  # the provider was not run again
    state = await chat_state(peer, chat)
    assert "activeTurn" not in state
    assert state["turns"][-1]["state"] == "error"
    assert not peer.invalid, peer.invalid[:5]


# -- the ACP bridge ------------------------------------------------------------------------------


async def test_an_acp_agent_that_died_is_started_again_and_resumes_its_session(
    tmp_path: Path, peers: Callable[..., Any]
) -> None:
    state_dir = tmp_path / "agent-state"
    state_dir.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    os.environ["SCRIPTED_STATE"] = str(state_dir)  # the agent process inherits nothing else
    config = AgentConfig(
        name="scripted",
        display_name="Scripted",
        command=sys.executable,
        args=(SCRIPT, "--load"),
        pass_env=("SCRIPTED_STATE",),
    )
    running = await start_host(dataclasses.replace(Settings(), agents=(config,)))
    try:
        peer = await peers(running.url)
        chat = await new_chat(peer, "scripted", str(work))
        turn = await start_turn(peer, chat, "/crash-once")
        failed = await ends(peer, chat, turn, 1)
        assert failed["part"]["error"]["errorType"] == "agentCrashed"
        assert failed["part"]["resumable"] is True

        assert "rejectionReason" not in await resume(peer, chat, turn)
        assert (await ends(peer, chat, turn, 2))["type"] == "chat/turnComplete"
        (only,) = (await chat_state(peer, chat))["turns"]
        # A new process loaded the session (``loaded 1``: the prompt it saw) and
        # was given back what it had said before it died.
        assert markdown(only) == "about to crash" + "loaded 1 resumed; so far: 'about to crash'"
        assert kinds(only) == ["markdown", "error", "markdown"]
        assert not peer.invalid, peer.invalid[:5]
    finally:
        await running.stop()


# -- storage across restarts -------------------------------------------------------------------


async def test_a_resumed_turn_is_stored_in_its_place_across_kills_and_restarts(
    tmp_path: Path, peers: Callable[..., Any]
) -> None:
    daemon = Daemon(tmp_path / "data")
    try:
        url = await daemon.start()
        peer = await peers(url)
        chat = await new_chat(peer)
        first = await start_turn(peer, chat, "hello")
        await ends(peer, chat, first, 1)
        # A resumed turn that completed: then kill -9 before anything else.
        done = await start_turn(peer, chat, "/flaky")
        await ends(peer, chat, done, 1)
        await resume(peer, chat, done)
        await ends(peer, chat, done, 2)
        expected = await chat_state(peer, chat)
        await daemon.kill()

        url = await daemon.start()
        peer = await peers(url)
        assert (await chat_state(peer, chat))["turns"] == expected["turns"]

        # A resumed turn running when the host is killed: recovered like any
        # running turn (interrupted), in its place, with what it had streamed.
        words = " ".join(f"w{i}" for i in range(2000))
        cut = await start_turn(peer, chat, f"/flaky 20 {words}")
        await ends(peer, chat, cut, 1)
        await resume(peer, chat, cut)
        await peer.until(
            lambda: [a for a in peer.actions(chat, "chat/delta") if a["turnId"] == cut]
        )
        await daemon.kill()

        url = await daemon.start()
        peer = await peers(url)
        state = await chat_state(peer, chat)
        assert "activeTurn" not in state
        assert [t["id"] for t in state["turns"]] == [first, done, cut]
        assert state["turns"][:2] == expected["turns"]
        recovered = state["turns"][2]
        assert recovered["state"] == "error"
        errors = [p for p in recovered["responseParts"] if p["kind"] == "error"]
        assert [e["error"]["errorType"] for e in errors] == ["echoFlaky", "interrupted"]
        assert "resumable" not in errors[1]
        assert markdown(recovered).startswith(FIRST_HALF + "resumed after")
        refused = await resume(peer, chat, cut)
        assert "cannot be resumed" in refused["rejectionReason"]

        # The next turn goes after it; a graceful restart keeps all four.
        last = await start_turn(peer, chat, "after")
        await ends(peer, chat, last, 1)
        before = await chat_state(peer, chat)
        assert await daemon.terminate() == 0
        url = await daemon.start()
        peer = await peers(url)
        after = await chat_state(peer, chat)
        assert [t["id"] for t in after["turns"]] == [first, done, cut, last]
        assert after["turns"] == before["turns"]
        assert not peer.invalid, peer.invalid[:5]
    finally:
        await daemon.close()

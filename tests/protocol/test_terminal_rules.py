"""``check_dispatch`` on terminal channels (terminal-channel.md "Actions"; WIRE-SUMMARY §7).

The rejection cases with a code of their own are in ``test_dispatch_rules.py``'s
table; here: what a client may do, and the claim rules around it.
"""

from __future__ import annotations

from typing import Any

import pytest

from ahp_server.protocol import codec
from ahp_server.protocol.dispatch_rules import RejectionCode, check_dispatch
from ahp_server.protocol.types import TerminalState
from ahp_server.protocol.views import v0_7
from tests.protocol.builders import ME, action

SESSION = "ahp-session:/s1"


def terminal(**fields: Any) -> TerminalState:
    wire = {"title": "sh", "content": [], "claim": {"kind": "client", "clientId": ME}, **fields}
    # A 0.7 session claim names no chat: the session's chat, as the host lifts it.
    lifted = v0_7.lift("TerminalState", wire, chat_of=lambda session, turn: f"{session}#chat")
    return codec.convert(lifted, TerminalState)


MINE = terminal()
SESSIONS = terminal(claim={"kind": "session", "session": SESSION, "turnId": "t1"})


@pytest.mark.parametrize(
    ("state", "act"),
    [
        (MINE, action("terminal/input", data="ls\r")),
        (MINE, action("terminal/resized", cols=120, rows=40)),
        (MINE, action("terminal/titleChanged", title="build")),
        (MINE, action("terminal/cleared")),
        (MINE, action("terminal/claimed", claim={"kind": "client", "clientId": ME})),
        (MINE, action("terminal/claimed", claim={"kind": "session", "session": SESSION})),
        # A user may take, or narrow, what a session holds (guide: "Client Detaches").
        (SESSIONS, action("terminal/claimed", claim={"kind": "session", "session": SESSION})),
        (SESSIONS, action("terminal/claimed", claim={"kind": "client", "clientId": ME})),
        (SESSIONS, action("terminal/input", data="q")),
    ],
    ids=lambda v: v.type if hasattr(v, "type") else "",
)
def test_what_a_client_may_dispatch(state: TerminalState, act: Any) -> None:
    assert check_dispatch(state, act, ME) is None


@pytest.mark.parametrize(
    "kind",
    [
        "terminal/data",
        "terminal/exited",
        "terminal/cwdChanged",
        "terminal/commandExecuted",
        "terminal/commandFinished",
        "terminal/commandDetectionAvailable",
    ],
)
def test_server_only_terminal_actions_are_refused(kind: str) -> None:
    fields: dict[str, Any] = {
        "terminal/data": {"data": "x"},
        "terminal/cwdChanged": {"cwd": "file:///tmp"},
        "terminal/commandExecuted": {"commandId": "c", "commandLine": "ls", "timestamp": 1},
        "terminal/commandFinished": {"commandId": "c"},
    }.get(kind, {})
    rejection = check_dispatch(MINE, action(kind, **fields), ME)
    assert rejection is not None
    assert rejection.code is RejectionCode.ServerOnly


def test_other_channels_actions_are_refused_on_a_terminal() -> None:
    rejection = check_dispatch(MINE, action("chat/draftChanged"), ME)
    assert rejection is not None
    assert rejection.code is RejectionCode.WrongChannel


@pytest.mark.parametrize(("cols", "rows"), [(0, 24), (80, -1), (80.5, 24), (10_001, 24)])
def test_sizes_must_be_whole_and_sane(cols: float, rows: float) -> None:
    rejection = check_dispatch(MINE, action("terminal/resized", cols=cols, rows=rows), ME)
    assert rejection is not None
    assert rejection.code is RejectionCode.InvalidSize


def test_an_exited_terminal_takes_no_input_but_can_be_renamed() -> None:
    done = terminal(exitCode=0)
    rejection = check_dispatch(done, action("terminal/input", data="x"), ME)
    assert rejection is not None
    assert rejection.code is RejectionCode.TerminalUnavailable
    assert check_dispatch(done, action("terminal/titleChanged", title="old"), ME) is None

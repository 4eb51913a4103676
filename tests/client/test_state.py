"""The pure reconciliation model: confirmed state, pending actions, optimistic view.

WIRE-SUMMARY §7 and ``docs/guide/reconciliation.md``; no event loop involved.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

from ahp_server.client import (
    ClientState,
    EnvelopeOutcome,
    PendingOverflowError,
    UnknownChannelError,
    channel_kind,
)
from ahp_server.protocol.reducers import iso_timestamp, reduce
from ahp_server.protocol.types import ChatState, RootState, SessionState
from tests.client.wire import (
    CHAT,
    ME,
    OTHER,
    OTHER_CHAT,
    ROOT,
    SESSION,
    TERMINAL,
    action_json,
    as_action,
    chat_json,
    envelope,
    root_json,
    session_json,
    snapshot,
    terminal_json,
    title_json,
    turn_started_json,
)

CLOCK_MS = 9999.0


def clock() -> float:
    return CLOCK_MS


def fresh(*, max_pending: int = 1024) -> ClientState:
    state = ClientState(ME, clock=clock, max_pending=max_pending)
    state.reset_from_initialize(
        10,
        [
            snapshot(ROOT, root_json(), 10),
            snapshot(SESSION, session_json(), 10),
            snapshot(CHAT, chat_json(), 10),
        ],
        [ROOT, SESSION, CHAT],
    )
    return state


# -- channel kinds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "kind"),
    [
        ("ahp-root://", "root"),
        (SESSION, "session"),
        (CHAT, "chat"),
        (f"{SESSION}/annotations", None),
        (TERMINAL, None),
        ("ahp-changeset:/c1", None),
        ("ahp-otlp:logs", None),
        ("ahp-session:", None),
        ("no-scheme", None),
    ],
)
def test_channel_kind_is_decided_by_scheme(uri: str, kind: str | None) -> None:
    assert channel_kind(uri) == kind


def test_snapshots_of_root_session_and_chat_are_mirrored() -> None:
    state = fresh()
    assert state.channels == (ROOT, SESSION, CHAT)
    assert isinstance(state.confirmed(ROOT), RootState)
    assert isinstance(state.confirmed(SESSION), SessionState)
    assert state.view(CHAT, ChatState).resource == CHAT
    assert state.last_seen_server_seq == 10


def test_other_channel_kinds_are_subscribed_but_not_mirrored() -> None:
    state = fresh()
    assert state.load_snapshot(snapshot(TERMINAL, terminal_json(), 11)) is False
    annotations = f"{SESSION}/annotations"
    assert state.load_snapshot(snapshot(annotations, {"annotations": []}, 12)) is False
    # A state of the wrong type for the scheme is not mirrored either.
    assert state.load_snapshot(snapshot(OTHER_CHAT, session_json(), 12)) is False
    assert state.subscriptions[-3:] == (TERMINAL, annotations, OTHER_CHAT)
    assert not state.has_state(TERMINAL)
    with pytest.raises(UnknownChannelError) as info:
        state.view(TERMINAL)
    assert isinstance(info.value, KeyError)
    assert TERMINAL in str(info.value)

    result = state.apply_envelope(envelope(TERMINAL, action_json("terminal/cleared"), 13))
    assert result.outcome is EnvelopeOutcome.UNTRACKED
    assert state.last_seen_server_seq == 13


def test_expected_type_is_checked() -> None:
    state = fresh()
    with pytest.raises(TypeError, match="SessionState"):
        state.confirmed(CHAT, SessionState)


# -- optimistic dispatch and echoes --------------------------------------------------------


def test_dispatch_applies_optimistically_and_leaves_confirmed_alone() -> None:
    state = fresh()
    started = {**turn_started_json("turn-1"), "startedAt": iso_timestamp(CLOCK_MS)}
    first = state.dispatch(CHAT, as_action(started))
    assert first.client_seq == 1
    assert state.view(CHAT, ChatState).active_turn is not UNSET
    assert state.confirmed(CHAT, ChatState).active_turn is UNSET
    # 1.0: the turn's startedAt stamps modifiedAt in the optimistic view (no clock).
    assert state.confirmed(CHAT, ChatState).modified_at != iso_timestamp(CLOCK_MS)
    assert state.view(CHAT, ChatState).modified_at == iso_timestamp(CLOCK_MS)
    second = state.dispatch(SESSION, as_action(title_json("Mine")))
    assert second.client_seq == 2
    assert state.pending() == (first, second)
    assert state.pending(CHAT) == (first,)


def test_accepted_echo_moves_the_action_to_confirmed() -> None:
    state = fresh()
    entry = state.dispatch(CHAT, as_action(turn_started_json("turn-1")))
    echo = envelope(CHAT, turn_started_json("turn-1"), 11, origin=(ME, entry.client_seq))

    result = state.apply_envelope(echo)

    assert result.outcome is EnvelopeOutcome.APPLIED
    assert result.acknowledged == entry
    assert state.pending(CHAT) == ()
    confirmed = state.confirmed(CHAT, ChatState)
    assert not isinstance(confirmed.active_turn, type(UNSET))
    assert confirmed.active_turn.id == "turn-1"
    assert state.view(CHAT) == confirmed
    assert state.last_seen_server_seq == 11


def test_rejected_echo_drops_the_pending_action_and_reverts_the_view() -> None:
    state = fresh()
    before = state.confirmed(CHAT)
    entry = state.dispatch(CHAT, as_action(turn_started_json("turn-1")))
    rejection = envelope(
        CHAT, turn_started_json("turn-1"), 10, origin=(ME, entry.client_seq), rejection="busy"
    )

    result = state.apply_envelope(rejection)

    assert result.outcome is EnvelopeOutcome.REJECTED
    assert result.acknowledged == entry
    assert state.pending() == ()
    assert state.confirmed(CHAT) == before
    assert state.view(CHAT, ChatState).active_turn is UNSET


def test_foreign_envelope_rebases_pending_actions() -> None:
    state = fresh()
    state.dispatch(SESSION, as_action(action_json("session/isReadChanged", isRead=True)))
    result = state.apply_envelope(envelope(SESSION, title_json("Theirs"), 11, origin=(OTHER, 1)))

    assert result.outcome is EnvelopeOutcome.APPLIED
    assert result.acknowledged is None
    assert state.confirmed(SESSION, SessionState).title == "Theirs"
    assert state.confirmed(SESSION, SessionState).status & 32 == 0
    view = state.view(SESSION, SessionState)
    assert view.title == "Theirs"
    assert view.status & 32 == 32  # IsRead, still pending
    assert len(state.pending(SESSION)) == 1


def test_server_wins_over_a_pending_action() -> None:
    state = fresh()
    mine = state.dispatch(SESSION, as_action(title_json("Mine")))
    state.apply_envelope(envelope(SESSION, title_json("Theirs"), 11))  # server-originated
    assert state.view(SESSION, SessionState).title == "Mine"
    state.apply_envelope(envelope(SESSION, title_json("Mine"), 12, origin=(ME, mine.client_seq)))
    state.apply_envelope(envelope(SESSION, title_json("Final"), 13, origin=(OTHER, 7)))
    assert state.view(SESSION, SessionState).title == "Final"
    assert state.confirmed(SESSION) == state.view(SESSION)


def test_rejection_of_another_client_is_ignored() -> None:
    state = fresh()
    mine = state.dispatch(SESSION, as_action(title_json("Mine")))
    result = state.apply_envelope(
        envelope(SESSION, title_json("X"), 10, origin=(OTHER, mine.client_seq), rejection="no")
    )
    assert result.outcome is EnvelopeOutcome.REJECTED
    assert result.acknowledged is None
    assert state.pending() == (mine,)


def test_own_echo_without_a_pending_entry_is_applied() -> None:
    state = fresh()
    result = state.apply_envelope(envelope(SESSION, title_json("Replayed"), 11, origin=(ME, 42)))
    assert result.outcome is EnvelopeOutcome.APPLIED
    assert result.acknowledged is None
    assert state.confirmed(SESSION, SessionState).title == "Replayed"


def test_envelopes_already_in_the_snapshot_are_skipped() -> None:
    state = fresh()
    result = state.apply_envelope(envelope(SESSION, title_json("Old"), 10))
    assert result.outcome is EnvelopeOutcome.DUPLICATE
    assert state.confirmed(SESSION, SessionState).title == "Session"
    state.apply_envelope(envelope(SESSION, title_json("New"), 11))
    assert state.apply_envelope(envelope(SESSION, title_json("New"), 11)).outcome == "duplicate"


def test_envelopes_of_unknown_channels_are_ignored() -> None:
    state = fresh()
    result = state.apply_envelope(envelope(OTHER_CHAT, turn_started_json(), 20, origin=(ME, 1)))
    assert result.outcome is EnvelopeOutcome.UNTRACKED
    assert result.acknowledged is None
    assert state.last_seen_server_seq == 20


def test_unknown_action_types_are_no_ops_that_still_advance_the_sequence() -> None:
    state = fresh()
    before = state.confirmed(CHAT)
    result = state.apply_envelope(envelope(CHAT, action_json("chat/fromTheFuture", x=1), 11))
    assert result.outcome is EnvelopeOutcome.APPLIED
    assert state.confirmed(CHAT) == before
    assert state.apply_envelope(envelope(CHAT, turn_started_json(), 11)).outcome == "duplicate"


def test_last_seen_server_seq_is_the_maximum_seen() -> None:
    state = ClientState(ME, clock=clock)
    assert state.last_seen_server_seq == 0
    state.reset_from_initialize(5, [], [])
    assert state.last_seen_server_seq == 5
    state.load_snapshot(snapshot(SESSION, session_json(), 8))
    assert state.last_seen_server_seq == 8
    state.apply_envelope(envelope(SESSION, title_json("a"), 12))
    state.apply_envelope(envelope(OTHER_CHAT, turn_started_json(), 9))
    assert state.last_seen_server_seq == 12
    # A fresh initialize is authoritative, even when the server counts lower.
    state.reset_from_initialize(3, [], [])
    assert state.last_seen_server_seq == 3


def test_pending_actions_are_bounded() -> None:
    state = fresh(max_pending=2)
    state.dispatch(SESSION, as_action(title_json("1")))
    state.dispatch(SESSION, as_action(title_json("2")))
    with pytest.raises(PendingOverflowError):
        state.dispatch(SESSION, as_action(title_json("3")))
    # Dispatches to unmirrored channels allocate a clientSeq only.
    entry = state.dispatch(OTHER_CHAT, as_action(turn_started_json()))
    assert entry.client_seq == 3
    assert state.pending(OTHER_CHAT) == ()
    state.remove_subscription(SESSION)
    state.dispatch(CHAT, as_action(turn_started_json()))  # room again


def test_forget_pending_removes_one_entry() -> None:
    state = fresh()
    entry = state.dispatch(SESSION, as_action(title_json("lost")))
    assert state.forget_pending(SESSION, entry.client_seq) == entry
    assert state.forget_pending(SESSION, entry.client_seq) is None
    assert state.view(SESSION, SessionState).title == "Session"


def test_resubscribing_keeps_pending_actions() -> None:
    state = fresh()
    entry = state.dispatch(SESSION, as_action(title_json("Mine")))
    state.load_snapshot(snapshot(SESSION, session_json(title="Fresh"), 20))
    assert state.pending(SESSION) == (entry,)
    assert state.confirmed(SESSION, SessionState).title == "Fresh"
    assert state.view(SESSION, SessionState).title == "Mine"


# -- resets --------------------------------------------------------------------------------


def test_replay_clears_pending_drops_missing_and_applies_in_order() -> None:
    state = fresh()
    state.add_subscription("ahp-otlp:logs")
    lost = state.dispatch(SESSION, as_action(title_json("never sent")))
    echoed = state.dispatch(CHAT, as_action(turn_started_json("turn-1")))

    dropped = state.reset_from_replay(
        [
            envelope(CHAT, turn_started_json("turn-1"), 11, origin=(ME, echoed.client_seq)),
            envelope(CHAT, _part_json("p1"), 12),
            envelope(
                CHAT, action_json("chat/delta", turnId="turn-1", partId="p1", content="a"), 13
            ),
            envelope(
                CHAT, action_json("chat/delta", turnId="turn-1", partId="p1", content="b"), 14
            ),
        ],
        missing=[SESSION],
    )

    assert set(dropped) == {lost, echoed}
    assert state.pending() == ()
    assert state.subscriptions == (ROOT, CHAT, "ahp-otlp:logs")
    assert not state.has_state(SESSION)
    chat = state.confirmed(CHAT, ChatState)
    assert not isinstance(chat.active_turn, type(UNSET))
    assert chat.active_turn.response_parts[0].content == "ab"  # type: ignore[union-attr]
    assert state.view(CHAT) == chat
    assert state.last_seen_server_seq == 14


def test_snapshot_reset_replaces_states_and_drops_absent_channels() -> None:
    state = fresh()
    state.add_subscription("ahp-otlp:logs")  # stateless: no snapshot expected
    state.load_snapshot(snapshot(TERMINAL, terminal_json(), 10))  # state-bearing, unmirrored
    state.dispatch(SESSION, as_action(title_json("Mine")))

    dropped = state.reset_from_snapshots(
        [snapshot(SESSION, session_json(title="Fresh"), 30), snapshot(ROOT, root_json(), 30)]
    )

    assert len(dropped) == 1
    assert state.pending() == ()
    assert state.subscriptions == (ROOT, SESSION, "ahp-otlp:logs")
    assert state.channels == (ROOT, SESSION)
    assert state.view(SESSION, SessionState).title == "Fresh"
    assert state.last_seen_server_seq == 30
    # Envelopes are judged against the new snapshot's fromSeq.
    assert state.apply_envelope(envelope(SESSION, title_json("x"), 30)).outcome == "duplicate"
    assert state.apply_envelope(envelope(SESSION, title_json("y"), 31)).outcome == "applied"


def test_initialize_reset_replaces_everything() -> None:
    state = fresh()
    state.dispatch(SESSION, as_action(title_json("Mine")))
    dropped = state.reset_from_initialize(
        2, [snapshot(CHAT, chat_json(title="Again"), 2)], [CHAT, "ahp-otlp:logs"]
    )
    assert len(dropped) == 1
    assert state.subscriptions == (CHAT, "ahp-otlp:logs")
    assert state.channels == (CHAT,)
    assert state.confirmed(CHAT, ChatState).title == "Again"
    assert state.is_subscribed("ahp-otlp:logs")
    assert not state.is_subscribed(SESSION)


# -- property: after every echo, the client agrees with the server ---------------------------

_STEPS = st.lists(
    st.tuples(st.sampled_from(["mine-accepted", "mine-rejected", "foreign"]), st.text(max_size=3)),
    max_size=12,
)


@given(steps=_STEPS, echo_order=st.randoms(use_true_random=False))
def test_client_converges_to_the_server_state(
    steps: list[tuple[str, str]], echo_order: object
) -> None:
    """Client dispatches and foreign actions interleave in any order on the server;
    once every echo has arrived, confirmed == view == the server's own state."""
    client = ClientState(ME, clock=clock)
    client.reset_from_initialize(0, [snapshot(SESSION, session_json(), 0)], [SESSION])
    server_state = client.confirmed(SESSION, SessionState)
    in_flight: list[tuple[str, int, dict[str, object]]] = []
    for kind, text in steps:
        payload = title_json(text)
        if kind == "foreign":
            in_flight.append((kind, 0, payload))
        else:
            entry = client.dispatch(SESSION, as_action(payload))
            in_flight.append((kind, entry.client_seq, payload))
    echo_order.shuffle(in_flight)  # type: ignore[attr-defined]
    seq = 0
    for kind, client_seq, payload in in_flight:
        seq += 1
        if kind == "mine-rejected":
            client.apply_envelope(
                envelope(SESSION, payload, seq, origin=(ME, client_seq), rejection="no")
            )
            continue
        server_state = reduce(server_state, as_action(payload), clock)
        origin = (ME, client_seq) if kind == "mine-accepted" else (OTHER, 1)
        client.apply_envelope(envelope(SESSION, payload, seq, origin=origin))
    assert client.pending() == ()
    assert client.confirmed(SESSION) == server_state
    assert client.view(SESSION) == server_state


# -- helpers -------------------------------------------------------------------------------


def _part_json(part_id: str) -> dict[str, object]:
    return action_json(
        "chat/responsePart",
        turnId="turn-1",
        part={"kind": "markdown", "id": part_id, "content": ""},
    )


def test_the_state_model_is_pure() -> None:
    """state.py and errors.py never import I/O or event-loop modules."""
    forbidden = {"asyncio", "anyio", "websockets", "socket", "threading", "structlog", "logging"}
    package = Path(__file__).resolve().parents[2] / "ahp_server" / "client"
    for name in ("state.py", "errors.py"):
        tree = ast.parse((package / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] not in forbidden, (name, module)
                assert not module.startswith("ahp_server.client.connection"), (name, module)

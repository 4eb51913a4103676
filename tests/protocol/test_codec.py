"""Wire fidelity rules of the codec beyond the round-trip corpus."""

from __future__ import annotations

import json

import msgspec
import pytest

from ahp_server.protocol import codec
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.v0_7.types import (
    ActionEnvelope,
    ChatDeltaAction,
    ChatState,
    PartialChatSummary,
    ResponsePart,
    SessionChatUpdatedAction,
    SnapshotState,
    StateAction,
    ToolCallState,
)


def test_unknown_action_decodes_and_reencodes_verbatim() -> None:
    raw = b'{"type":"chat/fromTheFuture","nested":{"big":9007199254740993},"list":[null]}'
    action = codec.decode(raw, StateAction)
    assert isinstance(action, UnknownVariant)
    assert json.loads(codec.encode(action)) == json.loads(raw)


def test_unknown_variants_inside_known_types_survive() -> None:
    raw = {
        "kind": "toolCall",
        "toolCall": {"status": "paused-by-future", "toolCallId": "tc1", "extra": True},
    }
    part = codec.convert(raw, ResponsePart)
    assert isinstance(part.tool_call, UnknownVariant)  # type: ignore[union-attr]
    assert json.loads(codec.encode(part)) == raw


def test_known_discriminator_with_bad_payload_is_an_error() -> None:
    with pytest.raises(msgspec.ValidationError):
        codec.decode(b'{"type":"chat/delta","turnId":1}', StateAction)
    with pytest.raises(msgspec.ValidationError):
        codec.decode(b'{"toolCallId":"x"}', ToolCallState)  # no discriminator at all


def test_boolean_discriminator_is_closed() -> None:
    with pytest.raises(msgspec.ValidationError):
        codec.decode(
            b'{"type":"chat/toolCallConfirmed","turnId":"t","toolCallId":"c","approved":"yes"}',
            StateAction,
        )


def test_sixty_four_bit_integers_stay_exact() -> None:
    big = 2**63 - 1
    envelope = codec.decode(
        json.dumps(
            {
                "channel": "ahp-chat:/c",
                "action": {"type": "chat/delta", "turnId": "t", "partId": "p", "content": "x"},
                "serverSeq": big,
            }
        ),
        ActionEnvelope,
    )
    assert envelope.server_seq == big
    assert json.loads(codec.encode(envelope))["serverSeq"] == big


def test_absent_optional_fields_are_omitted_and_explicit_null_is_refused() -> None:
    action = ChatDeltaAction(turn_id="t", part_id="p", content="")
    assert json.loads(codec.encode(action)) == {
        "type": "chat/delta",
        "turnId": "t",
        "partId": "p",
        "content": "",
    }
    with pytest.raises(msgspec.ValidationError):
        codec.decode(
            b'{"type":"chat/delta","turnId":"t","partId":"p","content":"","_meta":null}',
            StateAction,
        )


def test_partial_updates_keep_null_distinct_from_absent() -> None:
    changes = codec.decode(b'{"activity":null,"title":"x"}', PartialChatSummary)
    assert changes.activity is None
    assert changes.status is msgspec.UNSET
    update = SessionChatUpdatedAction(chat="ahp-chat:/c", changes=changes)
    assert json.loads(codec.encode(update))["changes"] == {"activity": None, "title": "x"}


def test_snapshot_state_picks_the_state_type_by_shape() -> None:
    chat = {"resource": "ahp-chat:/c", "title": "", "status": 1, "modifiedAt": "x", "turns": []}
    assert isinstance(codec.convert(chat, SnapshotState), ChatState)
    unknown = codec.convert({"futureState": 1}, SnapshotState)
    assert isinstance(unknown, UnknownVariant)

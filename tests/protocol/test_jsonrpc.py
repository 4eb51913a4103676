"""JSON-RPC framing: each malformed input maps to the right error code, in one place."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from ahp_server.protocol import codec, jsonrpc
from ahp_server.protocol.errors import (
    AhpErrorCode,
    InvalidParams,
    InvalidRequest,
    JsonRpcErrorCode,
    ParseError,
    ProtocolError,
)
from ahp_server.protocol.v0_7.types import DispatchActionParams, InitializeParams


def encoded(message: object) -> Any:
    return json.loads(codec.encode(message))


def test_request_notification_and_responses_are_told_apart() -> None:
    assert isinstance(
        jsonrpc.parse_message(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}'),
        jsonrpc.JsonRpcRequest,
    )
    assert isinstance(
        jsonrpc.parse_message(b'{"jsonrpc":"2.0","method":"unsubscribe","params":{}}'),
        jsonrpc.JsonRpcNotification,
    )
    assert isinstance(
        jsonrpc.parse_message(b'{"jsonrpc":"2.0","id":"a","result":null}'),
        jsonrpc.JsonRpcSuccessResponse,
    )
    error = jsonrpc.parse_message(b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}')
    assert isinstance(error, jsonrpc.JsonRpcErrorResponse)
    assert error.error.code == -1


def test_params_are_kept_verbatim_until_decoded() -> None:
    raw = b'{"jsonrpc":"2.0","id":7,"method":"x","params":{"big":2148131814,"n":null}}'
    message = jsonrpc.parse_message(raw)
    assert encoded(message) == json.loads(raw)


@pytest.mark.parametrize(
    ("frame", "error_type"),
    [
        (b"{not json", ParseError),
        (b"", ParseError),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"', ParseError),
        (b"[]", InvalidRequest),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', InvalidRequest),
        (b'"ping"', InvalidRequest),
        (b'{"id":1,"method":"ping"}', InvalidRequest),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', InvalidRequest),
        (b'{"jsonrpc":"2.0","id":1,"method":5}', InvalidRequest),
        (b'{"jsonrpc":"2.0","id":1,"method":""}', InvalidRequest),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', InvalidRequest),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', InvalidRequest),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":3}', InvalidRequest),
        (b'{"jsonrpc":"2.0","id":1}', InvalidRequest),
        (b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}', InvalidRequest),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}', InvalidRequest),
    ],
)
def test_malformed_frames_raise_the_right_error(frame: bytes, error_type: type[Exception]) -> None:
    with pytest.raises(error_type):
        jsonrpc.parse_message(frame)


def test_invalid_request_keeps_a_readable_id() -> None:
    with pytest.raises(InvalidRequest) as caught:
        jsonrpc.parse_message(b'{"jsonrpc":"1.0","id":42,"method":"ping"}')
    assert caught.value.request_id == 42
    response = jsonrpc.error_response(caught.value.request_id, caught.value)
    assert encoded(response) == {
        "jsonrpc": "2.0",
        "id": 42,
        "error": {"code": -32600, "message": '"jsonrpc" must be "2.0"'},
    }


def test_decode_params_maps_validation_errors_to_invalid_params() -> None:
    message = jsonrpc.parse_message(
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"channel":"ahp-root://"}}'
    )
    assert isinstance(message, jsonrpc.JsonRpcRequest)
    with pytest.raises(InvalidParams) as caught:
        jsonrpc.decode_params(message.params, InitializeParams)
    assert caught.value.code == JsonRpcErrorCode.InvalidParams
    assert "protocolVersions" in caught.value.message or "clientId" in caught.value.message


def test_decode_params_decodes_unknown_actions_without_error() -> None:
    raw = msgspec.Raw(
        b'{"channel":"ahp-chat:/c","clientSeq":1,"action":{"type":"chat/future","x":[1]}}'
    )
    params = jsonrpc.decode_params(raw, DispatchActionParams)
    assert encoded(params)["action"] == {"type": "chat/future", "x": [1]}


def test_missing_params_decode_as_an_empty_object() -> None:
    with pytest.raises(InvalidParams):
        jsonrpc.decode_params(msgspec.UNSET, InitializeParams)


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (ParseError("bad json"), -32700, "bad json"),
        (InvalidParams("nope"), -32602, "nope"),
        (ProtocolError("gone", code=AhpErrorCode.SessionNotFound), -32001, "gone"),
        (RuntimeError("secret detail"), -32603, "internal error"),
    ],
)
def test_error_response_is_the_one_mapping(exc: BaseException, code: int, message: str) -> None:
    body = encoded(jsonrpc.error_response(9, exc))
    assert body == {"jsonrpc": "2.0", "id": 9, "error": {"code": code, "message": message}}


def test_error_data_is_carried() -> None:
    exc = ProtocolError(
        "unsupported",
        code=AhpErrorCode.UnsupportedProtocolVersion,
        data={"supportedVersions": ["0.7.0"]},
    )
    assert encoded(jsonrpc.error_response(None, exc))["error"]["data"] == {
        "supportedVersions": ["0.7.0"]
    }


@pytest.mark.parametrize("as_bytes", [False, True])
def test_nesting_depth_is_measured_outside_strings(as_bytes: bool) -> None:
    from ahp_server.protocol.jsonrpc import MAX_DEPTH, nested_deeper_than

    def check(text: str) -> bool:
        return nested_deeper_than(text.encode() if as_bytes else text, MAX_DEPTH)

    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert not check(at_limit)
    assert check("[" + at_limit + "]")
    assert check('{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1))
    many_flat = "[" + ",".join(["[]"] * 10_000) + "]"  # many brackets, depth 2
    assert not check(many_flat)
    in_string = '{"a":"' + "[" * 1000 + '"}'
    assert not check(in_string)
    escaped_quote = '{"a":"\\"' + "[" * 1000 + '"}'  # the \" does not end the string
    assert not check(escaped_quote)
    after_string = '["]", ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "]"
    assert check(after_string)

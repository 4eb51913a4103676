"""JSON-RPC 2.0 framing: message types, frame parsing, params decoding, error responses.

Layer: protocol (pure).

WIRE-SUMMARY §1: one JSON-RPC message per text frame; no batch arrays (an array
is answered with -32600). Parsing is split in two so each frame is parsed once:
:func:`parse_message` reads the envelope and keeps ``params``/``result`` as raw
JSON; :func:`decode_params` decodes the raw params into the method's type.
Those two functions are the only places a decode failure becomes a JSON-RPC
error (-32700 parse, -32600 invalid request, -32602 invalid params), and
:func:`error_response` is the only place an exception becomes an error response.
"""

from __future__ import annotations

import re
from typing import Any, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from ahp_server.protocol import codec
from ahp_server.protocol._base import ProtocolStruct
from ahp_server.protocol.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    ParseError,
    ProtocolError,
)
from ahp_server.protocol.uris import MAX_URI_LENGTH, long_uri

__all__ = [
    "MAX_DEPTH",
    "JsonRpcError",
    "JsonRpcErrorResponse",
    "JsonRpcMessage",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcSuccessResponse",
    "RequestId",
    "decode_params",
    "error_response",
    "parse_message",
]

T = TypeVar("T")

#: JSON-RPC allows string or number ids; AHP's own clients send numbers.
RequestId: TypeAlias = int | str


class JsonRpcError(ProtocolStruct, kw_only=True, frozen=True):
    """The ``error`` member of an error response."""

    code: int
    message: str
    data: Any | UnsetType = UNSET


class JsonRpcRequest(ProtocolStruct, kw_only=True, frozen=True):
    """A request: has ``id`` and ``method``; gets exactly one response."""

    # Required, never defaulted: a defaulted tag could vanish under omit_defaults.
    jsonrpc: Literal["2.0"]
    id: RequestId
    method: str
    params: msgspec.Raw | UnsetType = UNSET


class JsonRpcNotification(ProtocolStruct, kw_only=True, frozen=True):
    """A notification: ``method`` without ``id``; never answered."""

    jsonrpc: Literal["2.0"]
    method: str
    params: msgspec.Raw | UnsetType = UNSET


class JsonRpcSuccessResponse(ProtocolStruct, kw_only=True, frozen=True):
    """A successful response. ``result`` is required (``null`` for void methods)."""

    jsonrpc: Literal["2.0"]
    id: RequestId
    result: Any


class JsonRpcErrorResponse(ProtocolStruct, kw_only=True, frozen=True):
    """An error response. ``id`` is ``null`` when the request id could not be read."""

    jsonrpc: Literal["2.0"]
    id: RequestId | None
    error: JsonRpcError


JsonRpcMessage: TypeAlias = (
    JsonRpcRequest | JsonRpcNotification | JsonRpcSuccessResponse | JsonRpcErrorResponse
)


class _Frame(msgspec.Struct, kw_only=True):
    """Every JSON-RPC member, all optional: the shape is checked in :func:`parse_message`."""

    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: msgspec.Raw | UnsetType = UNSET
    result: msgspec.Raw | UnsetType = UNSET
    error: Any = UNSET


_FRAME_DECODER = msgspec.json.Decoder(_Frame)
_ERROR_DECODER = msgspec.json.Decoder(JsonRpcError)

#: The deepest nesting of arrays and objects a frame may have (serde_json's
#: default too). Decoding and later re-encoding recurse once per level, so a
#: frame nested thousands of levels deep would otherwise exhaust the stack —
#: while being parsed, or later, when the state holding it is encoded.
MAX_DEPTH = 128
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def nested_deeper_than(data: bytes | str, limit: int) -> bool:
    """Whether JSON text ``data`` nests arrays/objects more than ``limit`` deep.

    Linear, and nearly free for ordinary frames: with no more opening brackets
    than ``limit`` it cannot be deeper. Otherwise brackets inside strings are
    blanked out (regular expressions, in C) and the rest are counted.
    """
    if isinstance(data, str):
        if data.count("[") + data.count("{") <= limit:
            return False
        data = data.encode()
    elif data.count(b"[") + data.count(b"{") <= limit:
        return False
    depth = 0
    for match in _BRACKETS.finditer(_STRINGS.sub(b'""', data)):
        if match.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _request_id(frame: _Frame) -> RequestId | None:
    value = frame.id
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return value


def parse_message(data: bytes | str) -> JsonRpcMessage:
    """Parse one frame into a JSON-RPC message.

    Raises :class:`ParseError` for invalid JSON and :class:`InvalidRequest` for
    anything that is not a single JSON-RPC 2.0 object; the latter carries
    ``request_id`` when the frame's id could be read.
    """
    if nested_deeper_than(data, MAX_DEPTH):
        raise InvalidRequest(f"the frame nests arrays or objects more than {MAX_DEPTH} deep")
    try:
        frame = _FRAME_DECODER.decode(data)
    except RecursionError:  # (a deep nesting the check above let through: never expected)
        raise InvalidRequest("the frame nests arrays or objects too deep") from None
    except msgspec.ValidationError:
        # Valid JSON, but not an object (an array: a batch, which AHP does not use).
        raise InvalidRequest(
            "expected a single JSON-RPC 2.0 object (batches are not supported)"
        ) from None
    except msgspec.DecodeError as exc:
        raise ParseError(f"invalid JSON: {exc}") from None

    request_id = _request_id(frame)
    if frame.jsonrpc != "2.0":
        raise InvalidRequest('"jsonrpc" must be "2.0"', request_id=request_id)
    has_id = frame.id is not UNSET
    if has_id and request_id is None and frame.id is not None:
        raise InvalidRequest('"id" must be a number or a string')
    if frame.method is not UNSET:
        if not isinstance(frame.method, str) or not frame.method:
            raise InvalidRequest('"method" must be a non-empty string', request_id=request_id)
        if frame.params is not UNSET and bytes(memoryview(frame.params)[:1]) not in (b"{", b"["):
            raise InvalidRequest('"params" must be an object', request_id=request_id)
        if not has_id:
            return JsonRpcNotification(jsonrpc="2.0", method=frame.method, params=frame.params)
        if request_id is None:
            raise InvalidRequest('"id" must be a number or a string')
        return JsonRpcRequest(
            jsonrpc="2.0", id=request_id, method=frame.method, params=frame.params
        )
    if isinstance(frame.result, msgspec.Raw) and frame.error is UNSET and request_id is not None:
        return JsonRpcSuccessResponse(
            jsonrpc="2.0", id=request_id, result=msgspec.json.decode(memoryview(frame.result))
        )
    if frame.error is not UNSET and frame.result is UNSET and has_id:
        try:
            error = _ERROR_DECODER.decode(msgspec.json.encode(frame.error))
        except msgspec.ValidationError as exc:
            raise InvalidRequest(f"invalid error object: {exc}", request_id=request_id) from None
        return JsonRpcErrorResponse(jsonrpc="2.0", id=request_id, error=error)
    raise InvalidRequest("not a request, notification or response", request_id=request_id)


def decode_params(params: msgspec.Raw | UnsetType, type_: type[T]) -> T:
    """Decode a message's raw ``params`` into ``type_``, or raise :class:`InvalidParams`."""
    raw = b"{}" if isinstance(params, UnsetType) else memoryview(params)
    try:
        decoded = codec.decode(raw, type_)
    except msgspec.ValidationError as exc:
        raise InvalidParams(f"invalid params: {exc}") from None
    except RecursionError:  # pragma: no cover - parse_message bounds the depth
        raise InvalidParams("invalid params: nested too deep") from None
    except msgspec.DecodeError as exc:  # pragma: no cover - raw params were already valid JSON
        raise ParseError(f"invalid JSON: {exc}") from None
    field = long_uri(decoded)
    if field is not None:
        raise InvalidParams(f"invalid params: {field} is longer than {MAX_URI_LENGTH} characters")
    return decoded


def error_response(request_id: RequestId | None, exc: BaseException) -> JsonRpcErrorResponse:
    """The one place an exception becomes a JSON-RPC error response.

    A :class:`ProtocolError` keeps its code, message and data; anything else is
    reported as -32603 without leaking internals.
    """
    if not isinstance(exc, ProtocolError):
        exc = InternalError("internal error")
    data: Any = UNSET if exc.data is None else exc.data
    return JsonRpcErrorResponse(
        jsonrpc="2.0",
        id=request_id,
        error=JsonRpcError(code=int(exc.code), message=exc.message, data=data),
    )

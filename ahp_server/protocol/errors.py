"""JSON-RPC and AHP error codes, and the exception every protocol failure raises.

Layer: protocol (pure). WIRE-SUMMARY §8 / ``docs/reference/error-codes.md``.

Protocol code raises :class:`ProtocolError` (or a subclass); the host turns it
into a JSON-RPC error response in exactly one place
(:func:`ahp_server.protocol.jsonrpc.error_response`).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = [
    "AhpErrorCode",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "JsonRpcErrorCode",
    "MethodNotFound",
    "ParseError",
    "ProtocolError",
]


class JsonRpcErrorCode(IntEnum):
    """Standard JSON-RPC 2.0 error codes."""

    ParseError = -32700
    InvalidRequest = -32600
    MethodNotFound = -32601
    InvalidParams = -32602
    InternalError = -32603


class AhpErrorCode(IntEnum):
    """AHP application error codes (``AhpErrorCodes`` upstream)."""

    SessionNotFound = -32001
    ProviderNotFound = -32002
    SessionAlreadyExists = -32003
    TurnInProgress = -32004
    UnsupportedProtocolVersion = -32005
    ContentNotFound = -32006
    AuthRequired = -32007
    NotFound = -32008
    PermissionDenied = -32009
    AlreadyExists = -32010
    Conflict = -32011


class ProtocolError(Exception):
    """A failure that becomes a JSON-RPC error object ``{code, message, data?}``."""

    code: int = JsonRpcErrorCode.InternalError

    def __init__(
        self, message: str, *, code: int | None = None, data: Any = None, close: bool = False
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.data = data
        #: The connection must be closed after this error is sent (e.g. -32005).
        self.close = close


class ParseError(ProtocolError):
    """The frame is not valid JSON (-32700)."""

    code = JsonRpcErrorCode.ParseError


class InvalidRequest(ProtocolError):
    """Valid JSON but not a JSON-RPC 2.0 message (-32600).

    ``request_id`` is the frame's id when it could be read, so the error can
    still be answered to the right request (JSON-RPC 2.0 §5: else ``null``).
    """

    code = JsonRpcErrorCode.InvalidRequest

    def __init__(self, message: str, *, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class MethodNotFound(ProtocolError):
    """No such method (-32601)."""

    code = JsonRpcErrorCode.MethodNotFound


class InvalidParams(ProtocolError):
    """The method exists but its params do not fit its type (-32602)."""

    code = JsonRpcErrorCode.InvalidParams


class InternalError(ProtocolError):
    """The host failed while handling a valid request (-32603)."""

    code = JsonRpcErrorCode.InternalError

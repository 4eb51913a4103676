"""Encoding and decoding of wire values: the one place the msgspec hooks are wired.

Layer: protocol (pure).

Every decoder here resolves open unions (unknown actions and variants survive
as :class:`~ahp_server.protocol._base.UnknownVariant`) and every encoder writes
them back verbatim. Decoders are cached per type, so each message kind has one
reusable decoder.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, overload

import msgspec

from ahp_server.protocol._base import dec_hook, enc_hook

__all__ = ["convert", "decode", "decoder", "encode", "to_builtins"]

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder(enc_hook=enc_hook)


#: Encode any wire value (struct, union member, builtin) to JSON bytes. The
#: encoder's own method, not a function around it: every envelope a host sends
#: is encoded here, one Python call fewer each.
encode: Callable[[Any], bytes] = _ENCODER.encode


@functools.cache
def decoder(type_: object) -> msgspec.json.Decoder[Any]:
    """The shared JSON decoder for ``type_`` (open unions resolved)."""
    return msgspec.json.Decoder(type_, dec_hook=dec_hook)


@overload
def decode(data: bytes | memoryview | str, type_: type[T]) -> T: ...
@overload
def decode(data: bytes | memoryview | str, type_: object) -> Any: ...
def decode(data: bytes | memoryview | str, type_: object) -> Any:
    """Decode JSON into ``type_`` (a struct, or a union alias such as ``StateAction``).

    Raises ``msgspec.DecodeError`` / ``msgspec.ValidationError``.
    """
    return decoder(type_).decode(data)


@overload
def convert(value: object, type_: type[T]) -> T: ...
@overload
def convert(value: object, type_: object) -> Any: ...
def convert(value: object, type_: object) -> Any:
    """Convert already-parsed JSON builtins into ``type_``."""
    return msgspec.convert(value, type_, dec_hook=dec_hook)


def to_builtins(value: object) -> Any:
    """The JSON builtins (dicts, lists, …) a wire value encodes to."""
    return msgspec.to_builtins(value, enc_hook=enc_hook)

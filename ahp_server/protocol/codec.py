"""Encoding and decoding of wire values: the one place the msgspec hooks are wired.

Layer: protocol (pure).

Every decoder here resolves open unions (unknown actions and variants survive
as :class:`~ahp_server.protocol._base.UnknownVariant`) and every encoder writes
them back verbatim. Decoders are cached per type, so each message kind has one
reusable decoder.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

import msgspec

from ahp_server.protocol._base import dec_hook, enc_hook

__all__ = ["convert", "decode", "decoder", "encode", "to_builtins"]

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder(enc_hook=enc_hook)


def encode(value: object) -> bytes:
    """Encode any wire value (struct, union member, builtin) to JSON bytes."""
    return _ENCODER.encode(value)


@functools.cache
def decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    """The shared JSON decoder for ``type_`` (open unions resolved)."""
    return msgspec.json.Decoder(type_, dec_hook=dec_hook)


def decode(data: bytes | memoryview | str, type_: type[T]) -> T:
    """Decode JSON into ``type_``; raises ``msgspec.DecodeError``/``ValidationError``."""
    result: T = decoder(type_).decode(data)  # type: ignore[arg-type]  # types are hashable
    return result


def convert(value: object, type_: type[T]) -> T:
    """Convert already-parsed JSON builtins into ``type_``."""
    result: T = msgspec.convert(value, type_, dec_hook=dec_hook)
    return result


def to_builtins(value: object) -> Any:
    """The JSON builtins (dicts, lists, …) a wire value encodes to."""
    return msgspec.to_builtins(value, enc_hook=enc_hook)

"""Hypothesis strategies for any AHP wire type, derived from the msgspec type info.

Strings are drawn mostly from a small pool of ids and enum values, so generated
actions often hit the parts, turns and tool calls a generated state contains
(random unicode would almost never match and would leave the interesting
reducer paths untested).
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st
from msgspec import UNSET

from ahp_server.protocol._base import OpenUnion, UnknownVariant

#: Ids and enum values that make generated objects refer to each other.
POOL = (
    "t1",
    "t2",
    "tc1",
    "tc2",
    "p1",
    "p2",
    "q1",
    "r1",
    "c1",
    "",
    "user",
    "agent",
    "steering",
    "queued",
    "accept",
    "decline",
    "denied",
    "skipped",
    "not-needed",
    "user-action",
    "read-only",
    "file:///repo",
    "ahp-chat:/c1",
)

_text = st.one_of(st.sampled_from(POOL), st.text(max_size=8))
_json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_json = st.recursive(
    _json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(POOL), inner, max_size=3)
    ),
    max_leaves=6,
)


def _unknown_variant(union: type[OpenUnion]) -> st.SearchStrategy[UnknownVariant]:
    key = union.discriminator or "type"
    return st.builds(
        lambda extra: UnknownVariant({key: "future/unknownVariant", **extra}),
        st.dictionaries(st.sampled_from(("x", "y")), _json_scalar, max_size=2),
    )


def _from_info(info: mi.Type, depth: int) -> st.SearchStrategy[Any]:
    if isinstance(info, mi.StrType):
        return _text
    if isinstance(info, mi.BoolType):
        return st.booleans()
    if isinstance(info, mi.IntType):
        return st.integers(min_value=-(2**63), max_value=2**63 - 1)
    if isinstance(info, mi.FloatType):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(info, mi.NoneType):
        return st.none()
    if isinstance(info, mi.AnyType):
        return _json
    if isinstance(info, mi.LiteralType):
        return st.sampled_from(info.values)
    if isinstance(info, mi.UnionType):
        return st.one_of([_from_info(t, depth) for t in info.types])
    if isinstance(info, (mi.VarTupleType, mi.ListType)):
        if depth <= 0:
            return st.just(())
        return st.lists(_from_info(info.item_type, depth - 1), max_size=3).map(tuple)
    if isinstance(info, mi.DictType):
        if depth <= 0:
            return st.just({})
        return st.dictionaries(
            st.sampled_from(POOL), _from_info(info.value_type, depth - 1), max_size=3
        )
    if isinstance(info, mi.StructType):
        return _struct(info.cls, depth)
    if isinstance(info, mi.CustomType) and issubclass(info.cls, OpenUnion):
        return _union(info.cls, depth)
    raise NotImplementedError(f"no strategy for {info!r}")


def _union(union: type[OpenUnion], depth: int, *, nested: bool = False) -> st.SearchStrategy[Any]:
    members: list[type] = [m for _, m in union.shape] or list(
        dict.fromkeys(union.variants.values())
    )
    options = [
        _union(m, depth, nested=True) if OpenUnion in m.__mro__ else strategy_for(m, depth)
        for m in members
    ]
    # Unknown variants exist for open string discriminators only (not `approved`),
    # and a nested union's unknowns are its parent's.
    if nested or any(isinstance(tag, bool) for tag in union.variants):
        return st.one_of(options)
    return st.one_of([*options, _unknown_variant(union)])


@functools.cache
def _struct(cls: type, depth: int) -> st.SearchStrategy[Any]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in info.fields:
        value = _from_info(field.type, depth - 1) if depth > 0 else None
        if field.required:
            if value is None:
                value = _from_info(field.type, 0)
            fields[field.name] = value
        elif field.default is not UNSET and field.default is not msgspec.NODEFAULT:
            # A tag such as `type="chat/delta"`: keep its default. (msgspec
            # reports an `= UNSET` default as NODEFAULT: those are drawn below.)
            continue
        elif value is not None:
            fields[field.name] = st.one_of(st.just(UNSET), value)
    return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))


def strategy_for(type_: Any, depth: int = 4) -> st.SearchStrategy[Any]:
    """A strategy producing valid values of ``type_`` (structs, open unions, builtins)."""
    if isinstance(type_, type) and OpenUnion in type_.__mro__:
        return _union(type_, depth)
    return _from_info(mi.type_info(type_), depth)


def roundtrip(value: Any, type_: Any) -> Any:
    """decode(encode(value)) through the project codec."""
    from ahp_server.protocol import codec

    return codec.decode(codec.encode(value), type_)


__all__ = ["POOL", "roundtrip", "strategy_for"]

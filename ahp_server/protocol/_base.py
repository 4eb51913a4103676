"""Building blocks of the wire model: the struct base, open unions, unknown variants.

Layer: protocol (pure; stdlib + msgspec only).

The generated modules :mod:`ahp_server.protocol.types` (1.0) and
:mod:`ahp_server.protocol.v0_7.types` build every AHP type from
these pieces. Three wire rules are decided here:

* **Absent vs null.** An optional field (``field?: T`` in the TypeScript types)
  is ``T | UnsetType = UNSET``: absent on the wire stays absent, and an explicit
  ``null`` is rejected unless the type says ``T | null``. Fields the spec types as
  ``T | undefined`` (required-nullable, WIRE-SUMMARY §13) and every field of a
  ``Partial<…>`` update also admit ``None``, because a JavaScript peer may send
  ``null`` to clear them. We never use ``omit_defaults``: defaults such as an
  action's ``type`` tag are always encoded.
* **Open unions.** Every discriminated union (actions, response parts, tool-call
  states, customizations, …) decodes an unknown discriminator value into an
  :class:`UnknownVariant` that re-encodes verbatim, instead of failing the whole
  message (round-trip fixtures 002, 003). msgspec's tagged unions are closed, so
  an open union is a marker class that msgspec treats as a custom type; the
  decoder's ``dec_hook`` (:func:`dec_hook`) dispatches on the discriminator.
* **Unknown keys** on a known struct are dropped (Group B round-trip fixtures).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import msgspec

__all__ = [
    "OpenUnion",
    "ProtocolStruct",
    "UnknownVariant",
    "dec_hook",
    "enc_hook",
    "open_union",
    "shape_union",
]


class ProtocolStruct(msgspec.Struct, kw_only=True, frozen=True, gc=False):
    """Base of every wire struct: immutable, keyword-only, unknown keys ignored."""


class UnknownVariant:
    """A member of an open union whose discriminator this version does not know.

    Holds the decoded JSON object and re-encodes it unchanged, so a newer peer's
    action, part or customization passes through an older host untouched.
    """

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data: Final = data

    @property
    def discriminator_value(self) -> object:
        """The value of the usual discriminator key (``type``/``kind``/``status``), if any."""
        for key in ("type", "kind", "status", "state"):
            if key in self.data:
                return self.data[key]
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownVariant) and self.data == other.data

    __hash__ = None  # type: ignore[assignment]  # holds a dict, like the structs around it

    def __repr__(self) -> str:
        return f"UnknownVariant({self.data!r})"


class OpenUnion(abc.ABC):
    """Runtime marker for an open discriminated union (see module docstring).

    Subclasses are created by :func:`open_union`; their members are registered
    as virtual subclasses so msgspec's post-``dec_hook`` type check passes.
    """

    discriminator: ClassVar[str]
    variants: ClassVar[Mapping[object, type]]
    #: For unions without a discriminator (``Snapshot.state``): (key, member)
    #: pairs; the first key present in the object picks the member.
    shape: ClassVar[tuple[tuple[str, type], ...]] = ()
    #: False for a boolean discriminator (``approved``): it has no future values.
    open_tags: ClassVar[bool] = True

    @classmethod
    def decode_obj(cls, obj: object) -> object:
        """Turn one decoded JSON value into the matching member struct."""
        if type(obj) is not dict:
            raise TypeError(f"expected an object for {cls.__name__}")
        if cls.shape:
            for key, member in cls.shape:
                if key in obj:
                    return msgspec.convert(obj, member, dec_hook=dec_hook)
            return UnknownVariant(obj)
        try:
            tag = obj[cls.discriminator]
        except KeyError:
            raise ValueError(
                f"{cls.__name__} is missing its discriminator `{cls.discriminator}`"
            ) from None
        if not isinstance(tag, (str, bool, int)):
            raise TypeError(f"`{cls.discriminator}` of {cls.__name__} must be a string")
        target = cls.variants.get(tag)
        if target is None:
            if not cls.open_tags:
                raise ValueError(f"invalid `{cls.discriminator}` for {cls.__name__}")
            return UnknownVariant(obj)
        if _is_open_union(target):
            return target.decode_obj(obj)  # type: ignore[attr-defined]
        return msgspec.convert(obj, target, dec_hook=dec_hook)


def _is_open_union(type_: object) -> bool:
    # Not issubclass(): registered members are *virtual* subclasses of OpenUnion.
    return isinstance(type_, type) and OpenUnion in type_.__mro__


def open_union(name: str, discriminator: str, variants: Mapping[object, type]) -> type[OpenUnion]:
    """Create the runtime marker class for an open union."""
    cls: type[OpenUnion] = abc.ABCMeta(  # type: ignore[assignment]
        name,
        (OpenUnion,),
        {
            "discriminator": discriminator,
            "variants": dict(variants),
            "open_tags": not any(isinstance(tag, bool) for tag in variants),
            "__module__": __name__,
        },
    )
    for member in set(variants.values()):
        cls.register(member)
    cls.register(UnknownVariant)
    return cls


def shape_union(name: str, shape: tuple[tuple[str, type], ...]) -> type[OpenUnion]:
    """Create an open union whose member is picked by which key is present."""
    cls = open_union(name, "", {})
    cls.shape = shape
    for _, member in shape:
        cls.register(member)
    return cls


def dec_hook(type_: type, obj: Any) -> Any:
    """msgspec decode hook: resolves open unions. Pass it to every decoder."""
    if _is_open_union(type_):
        return type_.decode_obj(obj)  # type: ignore[attr-defined]
    raise NotImplementedError(f"no decoder for {type_!r}")


def enc_hook(obj: Any) -> Any:
    """msgspec encode hook: writes unknown variants back verbatim."""
    if isinstance(obj, UnknownVariant):
        return obj.data
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")

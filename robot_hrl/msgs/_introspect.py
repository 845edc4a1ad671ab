"""Field-by-field description of the message classes, for generic conversions (rclpy, rosbags)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Annotated, get_args, get_origin

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct
from cyclonedds.idl._type_normalize import get_extended_type_hints


@dataclass(frozen=True)
class FieldKind:
    """What a field holds: a primitive (``prim`` names its ROS type: float64, uint8, bool,
    string, ...), ``bytes`` (a uint8 sequence held as bytes), a nested ``struct``, or a
    ``sequence`` / ``array`` (``length``) of ``elem``."""

    kind: str
    prim: str | None = None
    struct: type | None = None
    elem: "FieldKind | None" = None
    length: int | None = None


_PRIM_NAMES = {bool: "bool", str: "string", int: "int64", float: "float64"}


def kind_of(tp) -> FieldKind:
    if isinstance(tp, type) and issubclass(tp, IdlStruct):
        return FieldKind("struct", struct=tp)
    if tp is bytes:
        return FieldKind("bytes", prim="uint8")
    if tp in _PRIM_NAMES:
        return FieldKind("prim", prim=_PRIM_NAMES[tp])
    if get_origin(tp) is Annotated:
        base, name = get_args(tp)[:2]
        if isinstance(name, str):
            return FieldKind("prim", prim=name)
        return kind_of(base)
    if isinstance(tp, t.sequence):
        return FieldKind("sequence", elem=kind_of(tp.subtype))
    if isinstance(tp, t.array):
        return FieldKind("array", elem=kind_of(tp.subtype), length=tp.length)
    raise TypeError(f"unsupported message field type {tp!r}")


@functools.lru_cache(maxsize=None)
def message_fields(cls: type) -> tuple[tuple[str, FieldKind], ...]:
    """The (name, kind) of every field of a message class, in declaration (= wire) order."""
    as_bytes = getattr(cls, "_bytes_fields", ())
    return tuple((name, FieldKind("bytes", prim="uint8") if name in as_bytes else kind_of(tp))
                 for name, tp in get_extended_type_hints(cls).items())

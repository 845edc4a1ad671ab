"""Field-by-field copies between our message classes and ROS message classes.

Two flavours of "ROS message class" exist in this stack's world:

- ``"rclpy"``: the generated Python classes of a ROS 2 install (``from nav_msgs.msg import
  Odometry``). Fixed-size numeric arrays are numpy arrays, numeric sequences ``array.array``,
  ``byte`` fields one-byte ``bytes``.
- ``"rosbags"``: rosbags' typestore classes (same field names; numpy for every numeric array,
  ``byte`` as int8). Used in tests and for bag tooling without ROS.

Both are built with keyword arguments, so one recursive walk over
:func:`robot_hrl.msgs._introspect.message_fields` serves both.
"""

from __future__ import annotations

import array
import importlib
from typing import Any, Callable

import numpy as np

from robot_hrl.msgs import MessageTypeError, message_class, ros_type_name
from robot_hrl.msgs._introspect import message_fields

_NP = {"float64": np.float64, "float32": np.float32, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
       "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
       "bool": np.bool_, "byte": np.uint8}
_ARRAY_CODES = {"float64": "d", "float32": "f", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H",
                "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q"}
FLAVOURS = ("rclpy", "rosbags")
PLACEHOLDER_FIELD = "structure_needs_at_least_one_member"
"""The uint8 member rosidl gives an IDL struct without fields (``std_msgs/msg/Empty``): it is on the
wire, in our classes and in rosbags' classes, but rclpy's generated class hides it. It is always 0."""


def rclpy_message_class(ros_type: str) -> type:
    """The generated rclpy class of ``pkg/msg/T`` (imports ``pkg.msg``)."""
    pkg, _, name = ros_type.split("/")
    try:
        return getattr(importlib.import_module(f"{pkg}.msg"), name)
    except (ImportError, AttributeError) as exc:
        raise MessageTypeError(f"ROS 2 message {ros_type} is not importable ({exc}); is its package installed and "
                               "the ROS 2 environment sourced?") from exc


def to_ros(msg: Any, flavour: str = "rclpy", resolve: Callable[[str], type] | None = None) -> Any:
    """Our message -> a ROS message object of ``flavour``; ``resolve`` maps a ROS type name to its
    class (default: import it from the ROS install)."""
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown ROS message flavour {flavour!r}; choose one of {FLAVOURS}")
    resolve = resolve or rclpy_message_class
    return _struct_to(msg, flavour, resolve)


def _struct_to(msg, flavour, resolve):
    cls = resolve(ros_type_name(msg))
    return cls(**{name: _to(kind, getattr(msg, name), flavour, resolve) for name, kind in message_fields(type(msg))
                  if name != PLACEHOLDER_FIELD or _has_field(cls, name)})


def _has_field(cls, name: str) -> bool:
    """Whether the ROS class ``cls`` takes the field ``name`` (rclpy lists its fields in
    ``get_fields_and_field_types``; rosbags' dataclasses in ``__dataclass_fields__``)."""
    fields = getattr(cls, "get_fields_and_field_types", None)
    if fields is not None:
        return name in fields()
    return name in getattr(cls, "__dataclass_fields__", {name: None})


def _to(kind, value, flavour, resolve):
    k = kind.kind
    if k == "prim":
        if kind.prim == "byte":
            return bytes([value]) if flavour == "rclpy" else (value - 256 if value > 127 else value)
        return value
    if k == "bytes":
        data = value if isinstance(value, (bytes, bytearray)) else bytes(value)
        return array.array("B", data) if flavour == "rclpy" else np.frombuffer(data, dtype=np.uint8).copy()
    if k == "struct":
        return _struct_to(value, flavour, resolve)
    elem = kind.elem
    if elem.kind == "prim" and elem.prim not in ("string", "byte"):
        if k == "sequence" and flavour == "rclpy":
            return array.array(_ARRAY_CODES[elem.prim], value) if elem.prim != "bool" else [bool(v) for v in value]
        return np.asarray(value, dtype=_NP[elem.prim])
    return [_to(elem, v, flavour, resolve) for v in value]


def from_ros(obj: Any, cls: type | None = None) -> Any:
    """A ROS message object (rclpy or rosbags) -> our message class ``cls`` (default: looked up
    by the object's ROS type name)."""
    if cls is None:
        cls = message_class(_ros_type_of(obj))
    return cls(**{name: _from(kind, _field(obj, name)) for name, kind in message_fields(cls)})


def _field(obj, name: str):
    if name == PLACEHOLDER_FIELD and not hasattr(obj, name):
        return 0  # rclpy's empty message (see PLACEHOLDER_FIELD)
    return getattr(obj, name)


def _ros_type_of(obj) -> str:
    name = getattr(obj, "__msgtype__", None)  # rosbags
    if name:
        return name
    module = type(obj).__module__.split(".")  # rclpy: nav_msgs.msg._odometry
    if len(module) >= 2 and module[1] == "msg":
        return f"{module[0]}/msg/{type(obj).__name__}"
    raise MessageTypeError(f"cannot tell the ROS type of {type(obj).__module__}.{type(obj).__name__}")


def _from(kind, value):
    k = kind.kind
    if k == "prim":
        if kind.prim == "byte":
            if isinstance(value, (bytes, bytearray)):
                return value[0] if value else 0
            return int(value) & 0xFF
        return value.item() if isinstance(value, np.generic) else value
    if k == "bytes":
        if isinstance(value, np.ndarray):
            return value.astype(np.uint8, copy=False).tobytes()
        if isinstance(value, array.array):
            return value.tobytes()
        return bytes(value)
    if k == "struct":
        return from_ros(value, kind.struct)
    if hasattr(value, "tolist") and kind.elem.kind == "prim":
        return value.tolist()
    return [_from(kind.elem, v) for v in value]

"""std_msgs/msg: Header, String, Bool, Float32, Empty."""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

from dataclasses import dataclass, field

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct

from robot_hrl.msgs._base import dds_typename, register
from robot_hrl.msgs.builtin_interfaces import Time


@register
@dataclass
class Header(IdlStruct, typename=dds_typename("std_msgs/msg/Header")):
    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@register
@dataclass
class String(IdlStruct, typename=dds_typename("std_msgs/msg/String")):
    data: str = ""


@register
@dataclass
class Bool(IdlStruct, typename=dds_typename("std_msgs/msg/Bool")):
    data: bool = False


@register
@dataclass
class Float32(IdlStruct, typename=dds_typename("std_msgs/msg/Float32")):
    data: t.float32 = 0.0


@register
@dataclass
class Empty(IdlStruct, typename=dds_typename("std_msgs/msg/Empty")):
    # ROS 2 gives an empty message this one byte member (IDL structs cannot be empty).
    structure_needs_at_least_one_member: t.uint8 = 0

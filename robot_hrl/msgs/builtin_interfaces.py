"""builtin_interfaces/msg: Time, Duration."""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

from dataclasses import dataclass

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct

from robot_hrl.msgs._base import dds_typename, register


@register
@dataclass
class Time(IdlStruct, typename=dds_typename("builtin_interfaces/msg/Time")):
    sec: t.int32 = 0
    nanosec: t.uint32 = 0


@register
@dataclass
class Duration(IdlStruct, typename=dds_typename("builtin_interfaces/msg/Duration")):
    sec: t.int32 = 0
    nanosec: t.uint32 = 0

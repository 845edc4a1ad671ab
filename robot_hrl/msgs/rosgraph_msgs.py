"""rosgraph_msgs/msg: Clock (published by a simulator when ``use_sim_time`` is set)."""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

from dataclasses import dataclass, field

from cyclonedds.idl import IdlStruct

from robot_hrl.msgs._base import dds_typename, register
from robot_hrl.msgs.builtin_interfaces import Time


@register
@dataclass
class Clock(IdlStruct, typename=dds_typename("rosgraph_msgs/msg/Clock")):
    clock: Time = field(default_factory=Time)

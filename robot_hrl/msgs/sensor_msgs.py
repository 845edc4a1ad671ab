"""sensor_msgs/msg: Image, BatteryState."""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

from dataclasses import dataclass, field

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct

from robot_hrl.msgs._base import dds_typename, register
from robot_hrl.msgs.std_msgs import Header


@register
@dataclass
class Image(IdlStruct, typename=dds_typename("sensor_msgs/msg/Image")):
    """``data`` is ``bytes`` (on the wire a ``sequence<uint8>``, as in ROS), for speed."""

    header: Header = field(default_factory=Header)
    height: t.uint32 = 0
    width: t.uint32 = 0
    encoding: str = ""
    is_bigendian: t.uint8 = 0
    step: t.uint32 = 0
    data: bytes = b""


@register
@dataclass
class BatteryState(IdlStruct, typename=dds_typename("sensor_msgs/msg/BatteryState")):
    header: Header = field(default_factory=Header)
    voltage: t.float32 = 0.0
    temperature: t.float32 = 0.0
    current: t.float32 = 0.0
    charge: t.float32 = 0.0
    capacity: t.float32 = 0.0
    design_capacity: t.float32 = 0.0
    percentage: t.float32 = 0.0
    power_supply_status: t.uint8 = 0
    power_supply_health: t.uint8 = 0
    power_supply_technology: t.uint8 = 0
    present: bool = False
    cell_voltage: t.sequence[t.float32] = field(default_factory=list)
    cell_temperature: t.sequence[t.float32] = field(default_factory=list)
    location: str = ""
    serial_number: str = ""

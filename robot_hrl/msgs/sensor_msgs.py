"""sensor_msgs/msg: Image, BatteryState."""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

import logging
from dataclasses import dataclass, field

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct
from cyclonedds.idl._machinery import BytesMachine, StructMachine

from robot_hrl.msgs._base import dds_typename, register
from robot_hrl.msgs.std_msgs import Header


@register
@dataclass
class Image(IdlStruct, typename=dds_typename("sensor_msgs/msg/Image")):
    """``data`` is a ``sequence<uint8>`` as in ROS; decoded messages hold it as ``bytes`` (fast),
    and ``bytes``, ``bytearray``, a memoryview or a list of ints may be given."""

    header: Header = field(default_factory=Header)
    height: t.uint32 = 0
    width: t.uint32 = 0
    encoding: str = ""
    is_bigendian: t.uint8 = 0
    step: t.uint32 = 0
    data: t.sequence[t.uint8] = b""


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


class _Uint8SequenceAsBytes(BytesMachine):
    """``sequence<uint8>`` on the wire (uint32 length, raw bytes), ``bytes`` in Python: the stock
    machine decodes one int per byte, far too slow for camera images."""

    def serialize(self, buffer, value, *args, **kwargs):
        super().serialize(buffer, value if isinstance(value, (bytes, bytearray)) else bytes(value), *args, **kwargs)


def _decode_as_bytes(cls, field: str) -> None:
    idl = cls.__idl__
    idl.populate()
    machines = (idl.v1_machine, idl.v2_machine)
    if not all(isinstance(m, StructMachine) and field in m.members_machines for m in machines):
        # another cyclonedds version: keep its (slower, list of ints) decoding, still correct
        logging.getLogger(__name__).warning("cyclonedds internals differ: %s.%s decodes as a list of ints",
                                            cls.__name__, field)
        return
    for machine in machines:
        machine.members_machines[field] = _Uint8SequenceAsBytes()
    cls._bytes_fields = (*getattr(cls, "_bytes_fields", ()), field)


_decode_as_bytes(Image, "data")

"""sensor_msgs/msg: Image, BatteryState, Range."""

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


@dataclass
class Range(IdlStruct, typename=dds_typename("sensor_msgs/msg/Range")):
    """A single range reading (REP 117: +inf = no target within max_range, -inf = below min_range).

    The layout of ROS 2 up to Iron. Jazzy appended ``float32 variance``: :class:`RangeJazzy`.
    The two layouts share one type name, so neither is in ``message_class()`` (as the
    rmw_dds_common graph types): :func:`range_class_for_distro` picks the one of the ROS 2
    distribution on the graph (``ROS_DISTRO``)."""

    ULTRASOUND = 0
    INFRARED = 1
    header: Header = field(default_factory=Header)
    radiation_type: t.uint8 = 0
    field_of_view: t.float32 = 0.0
    min_range: t.float32 = 0.0
    max_range: t.float32 = 0.0
    range: t.float32 = 0.0


@dataclass
class RangeJazzy(IdlStruct, typename=dds_typename("sensor_msgs/msg/Range")):
    """``sensor_msgs/msg/Range`` from Jazzy on: Humble's fields, then ``variance`` (m^2, 0 = unknown).
    Not in ``message_class()`` (one class per type name there); see :func:`range_class_for_distro`."""

    ULTRASOUND = 0
    INFRARED = 1
    header: Header = field(default_factory=Header)
    radiation_type: t.uint8 = 0
    field_of_view: t.float32 = 0.0
    min_range: t.float32 = 0.0
    max_range: t.float32 = 0.0
    range: t.float32 = 0.0
    variance: t.float32 = 0.0


_DISTROS_WITHOUT_RANGE_VARIANCE = ("foxy", "galactic", "humble", "iron")


def range_class_for_distro(distro: str | None) -> type:
    """The Range class of a ROS 2 distribution name (``ROS_DISTRO``): :class:`Range` up to Iron,
    :class:`RangeJazzy` (with ``variance``) for jazzy, kilted, rolling and unset."""
    return Range if (distro or "").strip().lower() in _DISTROS_WITHOUT_RANGE_VARIANCE else RangeJazzy


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

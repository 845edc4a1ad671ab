"""diagnostic_msgs/msg: KeyValue, DiagnosticStatus, DiagnosticArray."""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

from dataclasses import dataclass, field

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct

from robot_hrl.msgs._base import dds_typename, register
from robot_hrl.msgs.std_msgs import Header


@register
@dataclass
class KeyValue(IdlStruct, typename=dds_typename("diagnostic_msgs/msg/KeyValue")):
    key: str = ""
    value: str = ""


@register
@dataclass
class DiagnosticStatus(IdlStruct, typename=dds_typename("diagnostic_msgs/msg/DiagnosticStatus")):
    """``level``: OK 0, WARN 1, ERROR 2, STALE 3 (ROS ``byte``, an octet on the wire)."""

    level: t.byte = 0
    name: str = ""
    message: str = ""
    hardware_id: str = ""
    values: t.sequence[KeyValue] = field(default_factory=list)


DiagnosticStatus.OK = 0
DiagnosticStatus.WARN = 1
DiagnosticStatus.ERROR = 2
DiagnosticStatus.STALE = 3


@register
@dataclass
class DiagnosticArray(IdlStruct, typename=dds_typename("diagnostic_msgs/msg/DiagnosticArray")):
    header: Header = field(default_factory=Header)
    status: t.sequence[DiagnosticStatus] = field(default_factory=list)

"""nav_msgs/msg: Odometry, Path."""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

from dataclasses import dataclass, field

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct

from robot_hrl.msgs._base import dds_typename, register
from robot_hrl.msgs.geometry_msgs import PoseStamped, PoseWithCovariance, TwistWithCovariance
from robot_hrl.msgs.std_msgs import Header


@register
@dataclass
class Odometry(IdlStruct, typename=dds_typename("nav_msgs/msg/Odometry")):
    """Pose in ``header.frame_id`` (world); twist in ``child_frame_id`` (body), REP 105."""

    header: Header = field(default_factory=Header)
    child_frame_id: str = ""
    pose: PoseWithCovariance = field(default_factory=PoseWithCovariance)
    twist: TwistWithCovariance = field(default_factory=TwistWithCovariance)


@register
@dataclass
class Path(IdlStruct, typename=dds_typename("nav_msgs/msg/Path")):
    header: Header = field(default_factory=Header)
    poses: t.sequence[PoseStamped] = field(default_factory=list)

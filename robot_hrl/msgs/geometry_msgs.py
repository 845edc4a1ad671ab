"""geometry_msgs/msg: points, poses, twists, wrenches (and their stamped / covariance forms)."""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

from dataclasses import dataclass, field

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct

from robot_hrl.msgs._base import dds_typename, register
from robot_hrl.msgs.std_msgs import Header


def _zeros36():
    return [0.0] * 36


@register
@dataclass
class Point(IdlStruct, typename=dds_typename("geometry_msgs/msg/Point")):
    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@register
@dataclass
class Vector3(IdlStruct, typename=dds_typename("geometry_msgs/msg/Vector3")):
    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@register
@dataclass
class Quaternion(IdlStruct, typename=dds_typename("geometry_msgs/msg/Quaternion")):
    """ROS order (x, y, z, w); the identity by default, as in ROS 2."""

    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0
    w: t.float64 = 1.0


@register
@dataclass
class Pose(IdlStruct, typename=dds_typename("geometry_msgs/msg/Pose")):
    position: Point = field(default_factory=Point)
    orientation: Quaternion = field(default_factory=Quaternion)


@register
@dataclass
class PoseStamped(IdlStruct, typename=dds_typename("geometry_msgs/msg/PoseStamped")):
    header: Header = field(default_factory=Header)
    pose: Pose = field(default_factory=Pose)


@register
@dataclass
class PoseWithCovariance(IdlStruct, typename=dds_typename("geometry_msgs/msg/PoseWithCovariance")):
    pose: Pose = field(default_factory=Pose)
    covariance: t.array[t.float64, 36] = field(default_factory=_zeros36)


@register
@dataclass
class PointStamped(IdlStruct, typename=dds_typename("geometry_msgs/msg/PointStamped")):
    header: Header = field(default_factory=Header)
    point: Point = field(default_factory=Point)


@register
@dataclass
class Twist(IdlStruct, typename=dds_typename("geometry_msgs/msg/Twist")):
    linear: Vector3 = field(default_factory=Vector3)
    angular: Vector3 = field(default_factory=Vector3)


@register
@dataclass
class TwistStamped(IdlStruct, typename=dds_typename("geometry_msgs/msg/TwistStamped")):
    header: Header = field(default_factory=Header)
    twist: Twist = field(default_factory=Twist)


@register
@dataclass
class TwistWithCovariance(IdlStruct, typename=dds_typename("geometry_msgs/msg/TwistWithCovariance")):
    twist: Twist = field(default_factory=Twist)
    covariance: t.array[t.float64, 36] = field(default_factory=_zeros36)


@register
@dataclass
class Wrench(IdlStruct, typename=dds_typename("geometry_msgs/msg/Wrench")):
    force: Vector3 = field(default_factory=Vector3)
    torque: Vector3 = field(default_factory=Vector3)


@register
@dataclass
class WrenchStamped(IdlStruct, typename=dds_typename("geometry_msgs/msg/WrenchStamped")):
    header: Header = field(default_factory=Header)
    wrench: Wrench = field(default_factory=Wrench)

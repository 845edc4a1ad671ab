"""ROS 2 message types as cyclonedds IDL structs: same names, fields and CDR bytes as ROS 2.

``pkg/msg/T`` is the class ``T`` here, with DDS type name ``pkg::msg::dds_::T_``; so
``Odometry().pose.pose.position.x`` reads like rclpy code. :func:`message_class` finds a class
by its ROS type name and :func:`ros_type_name` gives it back. Conversions at the boundary
(stamps, RobotState <-> Odometry, numpy <-> Image) are in :mod:`robot_hrl.msgs.conversions`.
"""

from robot_hrl.msgs._base import (
    MessageTypeError,
    all_message_classes,
    dds_typename,
    message_class,
    ros_type_from_dds,
    ros_type_name,
)
from robot_hrl.msgs.builtin_interfaces import Duration, Time
from robot_hrl.msgs.diagnostic_msgs import DiagnosticArray, DiagnosticStatus, KeyValue
from robot_hrl.msgs.geometry_msgs import (
    Point,
    PointStamped,
    Pose,
    PoseStamped,
    PoseWithCovariance,
    Quaternion,
    Twist,
    TwistStamped,
    TwistWithCovariance,
    Vector3,
    Wrench,
    WrenchStamped,
)
from robot_hrl.msgs.nav_msgs import Odometry, Path
from robot_hrl.msgs.rmw_dds_common import (  # the ROS 2 graph (ros_discovery_info); not in message_class()
    Gid,
    GidHumble,
    NodeEntitiesInfo,
    NodeEntitiesInfoHumble,
    ParticipantEntitiesInfo,
    ParticipantEntitiesInfoHumble,
)
from robot_hrl.msgs.rosgraph_msgs import Clock
from robot_hrl.msgs.sensor_msgs import BatteryState, Image, Range, RangeJazzy, range_class_for_distro
from robot_hrl.msgs.std_msgs import Bool, Empty, Float32, Header, String
from robot_hrl.msgs.conversions import (  # noqa: E402  (after the types it converts)
    array_from_image,
    header,
    image_from_array,
    odometry_from_state,
    seconds_from_time,
    state_from_odometry,
    time_from_seconds,
)

__all__ = [
    "BatteryState", "Bool", "Clock", "DiagnosticArray", "DiagnosticStatus", "Duration", "Empty", "Float32", "Gid",
    "GidHumble", "Header", "Image", "KeyValue", "MessageTypeError", "NodeEntitiesInfo", "NodeEntitiesInfoHumble",
    "Odometry", "ParticipantEntitiesInfo", "ParticipantEntitiesInfoHumble", "Path", "Point", "PointStamped", "Pose",
    "PoseStamped",
    "PoseWithCovariance", "Quaternion", "Range", "RangeJazzy", "String", "Time", "Twist", "TwistStamped", "TwistWithCovariance", "Vector3",
    "Wrench", "WrenchStamped", "all_message_classes", "array_from_image", "dds_typename", "header",
    "image_from_array", "message_class", "odometry_from_state", "range_class_for_distro", "ros_type_from_dds", "ros_type_name",
    "seconds_from_time", "state_from_odometry", "time_from_seconds",
]

"""How a ROS 2 message type name maps onto a DDS type name, and the registry of our types.

ROS 2 (rmw_cyclonedds, rmw_fastrtps) names the DDS type of ``pkg/msg/T`` ``pkg::msg::dds_::T_``.
Every class in :mod:`robot_hrl.msgs` is a cyclonedds ``IdlStruct`` with that type name, ROS field
names and ROS field types, so its CDR bytes are those a ROS 2 node sends.
"""

from __future__ import annotations

from cyclonedds.idl import IdlStruct

from robot_hrl.errors import RobotHrlError


class MessageTypeError(RobotHrlError):
    """A message type is unknown to the stack, or a value is not a message of the expected type."""


def dds_typename(ros_type: str) -> str:
    """``"nav_msgs/msg/Odometry"`` -> ``"nav_msgs::msg::dds_::Odometry_"``."""
    parts = ros_type.split("/")
    if len(parts) != 3 or parts[1] != "msg" or not all(parts):
        raise MessageTypeError(f"{ros_type!r} is not a ROS 2 message type name; expected 'pkg/msg/Type'")
    return f"{parts[0]}::msg::dds_::{parts[2]}_"


def ros_type_from_dds(typename: str) -> str:
    """``"nav_msgs::msg::dds_::Odometry_"`` -> ``"nav_msgs/msg/Odometry"``."""
    parts = typename.split("::")
    if len(parts) != 4 or parts[1] != "msg" or parts[2] != "dds_" or not parts[3].endswith("_"):
        raise MessageTypeError(f"DDS type {typename!r} does not follow the ROS 2 naming 'pkg::msg::dds_::Type_'")
    return f"{parts[0]}/msg/{parts[3][:-1]}"


def ros_type_name(msg_or_type) -> str:
    """The ROS 2 type name (``pkg/msg/T``) of a message class or instance."""
    cls = msg_or_type if isinstance(msg_or_type, type) else type(msg_or_type)
    if not (isinstance(cls, type) and issubclass(cls, IdlStruct)):
        raise MessageTypeError(f"{cls!r} is not a message class of robot_hrl.msgs (an IdlStruct with a ROS 2 type name)")
    return ros_type_from_dds(cls.__idl_typename__)


_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make a message class findable by its ROS 2 type name."""
    _REGISTRY[ros_type_name(cls)] = cls
    return cls


def message_class(ros_type: str) -> type:
    """The message class of a ROS 2 type name (``"nav_msgs/msg/Odometry"`` or ``"nav_msgs/Odometry"``)."""
    name = ros_type
    parts = name.split("/")
    if len(parts) == 2:
        name = f"{parts[0]}/msg/{parts[1]}"
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise MessageTypeError(f"unknown message type {ros_type!r}; the stack knows: {known}") from None


def all_message_classes() -> dict[str, type]:
    """Every registered message class, by ROS 2 type name."""
    return dict(_REGISTRY)

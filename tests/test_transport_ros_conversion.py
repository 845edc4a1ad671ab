"""Field-by-field conversion to and from ROS message classes, checked with rosbags' ROS 2 classes
(and with rclpy's generated classes when ROS 2 is installed)."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore
from test_msgs_cdr import ALL_TYPES, fill

from robot_hrl.msgs import MessageTypeError, message_class
from robot_hrl.transport.ros_conversion import from_ros, rclpy_message_class, to_ros

TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)


def _resolve(ros_type: str) -> type:
    return TYPESTORE.types[ros_type]


@pytest.mark.parametrize("ros_type", ALL_TYPES)
def test_round_trip_through_ros_classes(ros_type):
    cls = message_class(ros_type)
    msg = fill(cls, np.random.default_rng(7))
    ros = to_ros(msg, "rosbags", _resolve)
    # the ROS object serializes to exactly our bytes
    assert bytes(TYPESTORE.serialize_cdr(ros, ros_type)) == msg.serialize()
    assert from_ros(ros) == msg
    assert from_ros(ros, cls) == msg


def test_bad_flavour_and_unknown_objects():
    with pytest.raises(ValueError, match="flavour"):
        to_ros(message_class("std_msgs/msg/String")(), "ros1")
    with pytest.raises(MessageTypeError, match="cannot tell the ROS type"):
        from_ros(object())


def test_missing_ros_package_is_a_clear_error():
    try:
        import nav_msgs.msg  # noqa: F401
    except ImportError:
        with pytest.raises(MessageTypeError, match="sourced"):
            rclpy_message_class("nav_msgs/msg/Odometry")
    else:
        assert rclpy_message_class("nav_msgs/msg/Odometry").__name__ == "Odometry"


@pytest.mark.parametrize("ros_type", ALL_TYPES)
def test_rclpy_classes_round_trip(ros_type):
    pytest.importorskip("rclpy")
    from rclpy.serialization import serialize_message

    cls = message_class(ros_type)
    msg = fill(cls, np.random.default_rng(3))
    ros = to_ros(msg, "rclpy")
    assert from_ros(ros) == msg
    assert serialize_message(ros) == msg.serialize()

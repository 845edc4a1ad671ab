"""Field-by-field conversion to and from ROS message classes, checked with rosbags' ROS 2 classes
(and with rclpy's generated classes when ROS 2 is installed)."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore
from test_msgs_cdr import ALL_TYPES, fill

from robot_hrl.msgs import MessageTypeError, message_class
from robot_hrl.transport.ros_conversion import PLACEHOLDER_FIELD, from_ros, rclpy_message_class, to_ros

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


def _rclpy_fill(cls, seed: int):
    """A random message whose rosidl placeholder member (``std_msgs/Empty``) is 0, as ROS sends it."""
    msg = fill(cls, np.random.default_rng(seed))
    if hasattr(msg, PLACEHOLDER_FIELD):
        setattr(msg, PLACEHOLDER_FIELD, 0)
    return msg


@pytest.mark.ros
@pytest.mark.parametrize("seed", [3, 11, 29])
@pytest.mark.parametrize("ros_type", ALL_TYPES)
def test_rclpy_classes_round_trip(ros_type, seed):
    """Our message -> rclpy's class -> rclpy's CDR -> our decoder (and back) gives the same values.

    Compared by decoded value, never by bytes: Fast DDS's serializer leaves alignment padding
    uninitialised and pads the end to 4 bytes, so two equal messages may differ in those bytes."""
    pytest.importorskip("rclpy")
    from rclpy.serialization import deserialize_message, serialize_message

    cls = message_class(ros_type)
    msg = _rclpy_fill(cls, seed)
    ros = to_ros(msg, "rclpy")
    assert from_ros(ros) == msg
    assert from_ros(ros, cls) == msg
    # rclpy's bytes decode to our message with our decoder...
    assert cls.deserialize(bytes(serialize_message(ros))) == msg
    # ...and our bytes decode to the same message with rclpy's.
    back = deserialize_message(msg.serialize(), type(ros))
    assert from_ros(back, cls) == msg


@pytest.mark.ros
def test_rclpy_empty_message_converts_both_ways():
    pytest.importorskip("rclpy")
    from rclpy.serialization import deserialize_message, serialize_message
    from std_msgs.msg import Empty as RosEmpty

    from robot_hrl.msgs import Empty

    assert from_ros(RosEmpty()) == Empty()
    assert isinstance(to_ros(Empty(), "rclpy"), RosEmpty)
    assert Empty.deserialize(bytes(serialize_message(RosEmpty()))) == Empty()
    assert isinstance(deserialize_message(Empty().serialize(), RosEmpty), RosEmpty)


def test_empty_message_placeholder_is_kept_for_rosbags():
    from robot_hrl.msgs import Empty

    ros = to_ros(Empty(), "rosbags", _resolve)
    assert getattr(ros, PLACEHOLDER_FIELD) == 0
    assert from_ros(ros) == Empty()

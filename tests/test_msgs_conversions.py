"""Stamps, RobotState <-> Odometry (REP 105 frames), numpy <-> Image, and the type registry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_hrl.errors import ObservationError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.msgs import (
    Image,
    MessageTypeError,
    Odometry,
    PoseStamped,
    String,
    Time,
    array_from_image,
    dds_typename,
    image_from_array,
    message_class,
    odometry_from_state,
    ros_type_from_dds,
    ros_type_name,
    seconds_from_time,
    state_from_odometry,
    time_from_seconds,
)
from robot_hrl.state import RobotState


@pytest.mark.parametrize("seconds", [0.0, 1.5, 1763776800.123456789, -0.25, 2.999999999])
def test_stamp_round_trip(seconds):
    stamp = time_from_seconds(seconds)
    assert 0 <= stamp.nanosec < 1_000_000_000
    assert seconds_from_time(stamp) == pytest.approx(seconds, abs=1e-9 * max(1.0, abs(seconds)) + 1e-9)


def test_negative_stamp_keeps_nanosec_positive():
    assert time_from_seconds(-0.25) == Time(sec=-1, nanosec=750_000_000)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 3e9])
def test_bad_stamp_is_refused(bad):
    with pytest.raises(ValueError):
        time_from_seconds(bad)


def _state():
    return RobotState(
        position_w=np.array([1.0, -2.0, 0.5]),
        quat_wxyz=quat_from_euler_rpy(0.1, -0.2, 1.2),
        linear_velocity_w=np.array([0.3, 0.4, -0.1]),
        angular_velocity_b=np.array([0.01, 0.02, -0.5]),
        stamp_s=12.25,
    )


def test_odometry_twist_is_in_the_body_frame():
    state = _state()
    msg = odometry_from_state(state, frame_id="odom", child_frame_id="base_link")
    assert msg.header.frame_id == "odom" and msg.child_frame_id == "base_link"
    o = msg.pose.pose.orientation
    assert [o.w, o.x, o.y, o.z] == pytest.approx(state.quat_wxyz.tolist())
    v_b = np.array([msg.twist.twist.linear.x, msg.twist.twist.linear.y, msg.twist.twist.linear.z])
    # speed is frame independent, the components are not (yaw 1.2 rad)
    assert np.linalg.norm(v_b) == pytest.approx(np.linalg.norm(state.linear_velocity_w))
    assert not np.allclose(v_b, state.linear_velocity_w)


def test_pure_yaw_rotates_velocity_as_expected():
    state = RobotState(quat_wxyz=quat_from_euler_rpy(0.0, 0.0, math.pi / 2), linear_velocity_w=np.array([1.0, 0, 0]))
    v = odometry_from_state(state).twist.twist.linear
    # facing +y (world), moving along +x (world) is moving to the right: body -y
    assert [v.x, v.y, v.z] == pytest.approx([0.0, -1.0, 0.0], abs=1e-12)


def test_state_odometry_round_trip():
    state = _state()
    back = state_from_odometry(Odometry.deserialize(odometry_from_state(state).serialize()))
    np.testing.assert_allclose(back.position_w, state.position_w)
    np.testing.assert_allclose(back.quat_wxyz, state.quat_wxyz)
    np.testing.assert_allclose(back.linear_velocity_w, state.linear_velocity_w, atol=1e-12)
    np.testing.assert_allclose(back.angular_velocity_b, state.angular_velocity_b)
    assert back.stamp_s == pytest.approx(state.stamp_s)


def test_non_finite_state_is_not_published():
    state = _state()
    state.position_w[0] = math.nan
    with pytest.raises(ObservationError):
        odometry_from_state(state)


def test_zero_or_nan_quaternion_in_odometry_is_refused():
    msg = Odometry()
    msg.pose.pose.orientation.w = 0.0
    with pytest.raises(ObservationError, match="quaternion"):
        state_from_odometry(msg)
    msg.pose.pose.orientation.w = math.nan
    with pytest.raises(ObservationError):
        state_from_odometry(msg)


def test_non_finite_odometry_is_refused():
    msg = Odometry()
    msg.twist.twist.linear.x = math.inf
    with pytest.raises(ObservationError, match="non-finite"):
        state_from_odometry(msg)


def test_state_from_wrong_message_type():
    with pytest.raises(MessageTypeError):
        state_from_odometry(PoseStamped())


@pytest.mark.parametrize("encoding,shape,dtype", [("rgb8", (4, 5, 3), np.uint8), ("mono8", (4, 5), np.uint8),
                                                   ("bgra8", (2, 3, 4), np.uint8), ("32FC1", (3, 2), np.float32),
                                                   ("mono16", (3, 7), np.uint16)])
def test_image_round_trip(encoding, shape, dtype):
    rng = np.random.default_rng(0)
    a = (rng.random(shape) * 200).astype(dtype)
    msg = image_from_array(a, encoding, stamp_s=3.5, frame_id="cam")
    assert (msg.height, msg.width) == shape[:2]
    assert msg.step == shape[1] * (shape[2] if len(shape) == 3 else 1) * np.dtype(dtype).itemsize
    back = array_from_image(Image.deserialize(msg.serialize()))
    assert back.dtype == dtype and back.shape == shape
    np.testing.assert_array_equal(back, a)


def test_image_with_row_padding_and_big_endian():
    a = np.arange(6, dtype=np.uint16).reshape(2, 3)
    rows = [a[i].astype(">u2").tobytes() + b"\xee\xee" for i in range(2)]
    msg = Image(height=2, width=3, encoding="mono16", is_bigendian=1, step=8, data=b"".join(rows))
    np.testing.assert_array_equal(array_from_image(msg), a)


def test_bad_images_are_refused():
    with pytest.raises(ValueError, match="unsupported image encoding"):
        image_from_array(np.zeros((2, 2, 3), np.uint8), "yuv422")
    with pytest.raises(ValueError, match="shape"):
        image_from_array(np.zeros((2, 2), np.uint8), "rgb8")
    with pytest.raises(ValueError, match="dtype"):
        image_from_array(np.zeros((2, 2, 3), np.float64), "rgb8")
    with pytest.raises(ValueError, match="too small"):
        array_from_image(Image(height=4, width=4, encoding="rgb8", step=12, data=b"\0" * 10))
    with pytest.raises(ValueError, match="unsupported"):
        array_from_image(Image(height=1, width=1, encoding="weird", step=1, data=b"\0"))


def test_type_names():
    assert dds_typename("nav_msgs/msg/Odometry") == "nav_msgs::msg::dds_::Odometry_"
    assert ros_type_from_dds("std_msgs::msg::dds_::String_") == "std_msgs/msg/String"
    assert ros_type_name(String("x")) == "std_msgs/msg/String"
    assert message_class("nav_msgs/Odometry") is Odometry
    assert message_class("nav_msgs/msg/Odometry") is Odometry


@pytest.mark.parametrize("bad", ["Odometry", "nav_msgs/srv/Foo", "a/b/c/d", ""])
def test_bad_type_names(bad):
    with pytest.raises(MessageTypeError):
        dds_typename(bad)


def test_unknown_type_lists_the_known_ones():
    with pytest.raises(MessageTypeError, match="nav_msgs/msg/Odometry"):
        message_class("foo_msgs/msg/Bar")
    with pytest.raises(MessageTypeError):
        ros_type_from_dds("Odometry")
    with pytest.raises(MessageTypeError):
        ros_type_name(int)


def test_defaults_construct():
    odom = Odometry()
    assert odom.pose.pose.orientation.w == 1.0
    assert len(odom.pose.covariance) == 36 and len(odom.twist.covariance) == 36
    assert Odometry() is not odom and Odometry().pose.covariance is not odom.pose.covariance

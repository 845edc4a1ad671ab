"""Conversions at the ROS message boundary: stamps, RobotState <-> Odometry, numpy <-> Image.

Frames (REP 105): Odometry's pose is in ``header.frame_id`` (world), its twist in
``child_frame_id`` (body). :class:`~robot_hrl.state.RobotState` keeps the linear velocity in the
world frame, so the conversion rotates it; quaternions go from (w, x, y, z) to ROS (x, y, z, w).
"""

from __future__ import annotations

import math

import numpy as np

from robot_hrl.errors import ObservationError
from robot_hrl.geometry import quat_normalize, rotation_matrix_from_quat
from robot_hrl.msgs._base import MessageTypeError
from robot_hrl.msgs.builtin_interfaces import Time
from robot_hrl.msgs.geometry_msgs import Point, Pose, PoseWithCovariance, Quaternion, Twist, TwistWithCovariance, Vector3
from robot_hrl.msgs.nav_msgs import Odometry
from robot_hrl.msgs.sensor_msgs import Image
from robot_hrl.msgs.std_msgs import Header
from robot_hrl.state import RobotState

_NS = 1_000_000_000


def time_from_seconds(seconds: float) -> Time:
    """A ``builtin_interfaces/Time`` from float seconds (rounded to the nanosecond; may be negative)."""
    if not math.isfinite(seconds):
        raise ValueError(f"cannot make a time stamp from {seconds!r}: it must be a finite number of seconds")
    ns = int(round(seconds * _NS))
    sec, nanosec = divmod(ns, _NS)
    if not -(2**31) <= sec < 2**31:
        raise ValueError(f"{seconds} s does not fit a ROS time stamp (int32 seconds)")
    return Time(sec=sec, nanosec=nanosec)


def seconds_from_time(stamp: Time) -> float:
    """Float seconds of a ``builtin_interfaces/Time``."""
    return stamp.sec + stamp.nanosec * 1e-9


def header(stamp_s: float, frame_id: str) -> Header:
    return Header(stamp=time_from_seconds(stamp_s), frame_id=frame_id)


def _vec3(v, cls):
    return cls(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def _arr(v) -> np.ndarray:
    return np.array([v.x, v.y, v.z], dtype=np.float64)


def odometry_from_state(state: RobotState, frame_id: str = "odom", child_frame_id: str = "base_link") -> Odometry:
    """An Odometry message of a state: world velocity rotated into the body (child) frame."""
    if not state.is_finite():
        raise ObservationError(f"refusing to publish a non-finite state as Odometry: {state}")
    q = quat_normalize(np.asarray(state.quat_wxyz, dtype=np.float64))
    rot = rotation_matrix_from_quat(q)  # body -> world
    v_body = rot.T @ np.asarray(state.linear_velocity_w, dtype=np.float64)
    return Odometry(
        header=header(state.stamp_s, frame_id),
        child_frame_id=child_frame_id,
        pose=PoseWithCovariance(
            pose=Pose(
                position=_vec3(state.position_w, Point),
                orientation=Quaternion(x=float(q[1]), y=float(q[2]), z=float(q[3]), w=float(q[0])),
            )
        ),
        twist=TwistWithCovariance(
            twist=Twist(linear=_vec3(v_body, Vector3), angular=_vec3(state.angular_velocity_b, Vector3))
        ),
    )


def state_from_odometry(msg: Odometry) -> RobotState:
    """The RobotState of an Odometry message: body-frame linear velocity rotated into the world.

    Raises :class:`~robot_hrl.errors.ObservationError` on a non-finite or zero quaternion or
    non-finite values, since a skill must not act on them.
    """
    if not isinstance(msg, Odometry):
        raise MessageTypeError(f"expected a nav_msgs/Odometry, got {type(msg).__name__}")
    o = msg.pose.pose.orientation
    q = np.array([o.w, o.x, o.y, o.z], dtype=np.float64)
    n = float(np.linalg.norm(q))
    if not np.isfinite(n) or n < 1e-9:
        raise ObservationError(f"Odometry orientation {q.tolist()} (w, x, y, z) is not a usable quaternion")
    q = q / n
    v_body = _arr(msg.twist.twist.linear)
    if not np.all(np.isfinite(v_body)):
        raise ObservationError(f"Odometry message has non-finite values: linear velocity {v_body.tolist()}")
    state = RobotState(
        position_w=_arr(msg.pose.pose.position),
        quat_wxyz=q,
        linear_velocity_w=rotation_matrix_from_quat(q) @ v_body,
        angular_velocity_b=_arr(msg.twist.twist.angular),
        stamp_s=seconds_from_time(msg.header.stamp),
    )
    if not state.is_finite():
        raise ObservationError(f"Odometry message has non-finite values: {state}")
    return state


# ---- images -------------------------------------------------------------------------------------
_ENCODINGS = {
    # encoding: (dtype, channels)
    "rgb8": (np.uint8, 3),
    "bgr8": (np.uint8, 3),
    "rgba8": (np.uint8, 4),
    "bgra8": (np.uint8, 4),
    "mono8": (np.uint8, 1),
    "mono16": (np.uint16, 1),
    "16UC1": (np.uint16, 1),
    "32FC1": (np.float32, 1),
}


def image_from_array(array: np.ndarray, encoding: str = "rgb8", stamp_s: float = 0.0,
                     frame_id: str = "camera") -> Image:
    """A sensor_msgs/Image of an (H, W) or (H, W, C) array in one of the supported encodings."""
    if encoding not in _ENCODINGS:
        raise ValueError(f"unsupported image encoding {encoding!r}; supported: {sorted(_ENCODINGS)}")
    dtype, channels = _ENCODINGS[encoding]
    a = np.asarray(array)
    if a.ndim == 2 and channels == 1:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] != channels:
        raise ValueError(f"an image of encoding {encoding!r} needs shape (H, W, {channels}), got {a.shape}")
    if a.dtype != dtype:
        raise ValueError(f"an image of encoding {encoding!r} needs dtype {np.dtype(dtype).name}, got {a.dtype}")
    a = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"), copy=False))
    h, w = a.shape[:2]
    return Image(header=header(stamp_s, frame_id), height=h, width=w, encoding=encoding, is_bigendian=0,
                 step=w * channels * a.dtype.itemsize, data=a.tobytes())


def array_from_image(msg: Image) -> np.ndarray:
    """The numpy array (H, W, C), or (H, W) for one channel, of a sensor_msgs/Image."""
    if msg.encoding not in _ENCODINGS:
        raise ValueError(f"unsupported image encoding {msg.encoding!r}; supported: {sorted(_ENCODINGS)}")
    dtype, channels = _ENCODINGS[msg.encoding]
    dt = np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<")
    row = msg.width * channels * dt.itemsize
    if msg.step < row or len(msg.data) < msg.step * msg.height:
        raise ValueError(f"image {msg.width}x{msg.height} {msg.encoding}: step {msg.step} and "
                         f"{len(msg.data)} data bytes are too small (need step >= {row}, data >= step*height)")
    buf = np.frombuffer(bytes(msg.data), dtype=np.uint8, count=msg.step * msg.height).reshape(msg.height, msg.step)
    a = buf[:, :row].copy().view(dt).reshape(msg.height, msg.width, channels).astype(dt.newbyteorder("="))
    return a[:, :, 0] if channels == 1 else a

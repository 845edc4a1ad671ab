"""The skill node's fast CDR codecs: the state out of ``/odom``'s bytes, the command into its message's bytes.

On every tick's path to the actuators the generic (de)serializer costs tens of microseconds
(nested classes, two 36-element covariances); these precompiled :class:`struct.Struct` s read and
write only what the tick needs, with the same bytes. The layout is XCDR1 little-endian, as ROS 2
sends it: encapsulation header, then the body aligned from its start.
tests/test_skill_node_timing.py checks both against the generic serializer, and tests/test_msgs_cdr.py
checks the generic serializer against rosbags' ROS 2 one.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from operator import itemgetter

import numpy as np

from robot_hrl.geometry import rotation_matrix_from_quat
from robot_hrl.msgs import Odometry, header, message_class, state_from_odometry, time_from_seconds
from robot_hrl.msgs._introspect import message_fields
from robot_hrl.state import RobotState

COMMAND_FRAME = "base_link"
"""``header.frame_id`` of a command: the body frame (REP 105)."""


# ---- the command ------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def float64_body(message_type: str) -> tuple[str, ...] | None:
    """The dotted paths of the float64 fields after the header of ``message_type``, in wire order, when
    its body is a header and nothing but float64 values (WrenchStamped, TwistStamped); else None."""
    fields = message_fields(message_class(message_type))
    if not fields or fields[0][0] != "header":
        return None
    paths: list[str] = []

    def walk(cls, prefix: str) -> bool:
        for name, kind in message_fields(cls):
            if kind.kind == "struct":
                if not walk(kind.struct, f"{prefix}{name}."):
                    return False
            elif kind.kind == "prim" and kind.prim == "float64":
                paths.append(prefix + name)
            else:
                return False
        return True

    for name, kind in fields[1:]:
        if kind.kind != "struct" or not walk(kind.struct, f"{name}."):
            return None
    return tuple(paths)


def command_message(message_type: str, message_fields_: tuple[str, ...], command, stamp_s: float,
                    frame_id: str = COMMAND_FRAME):
    """The command as a message of ``message_type``: each term into its field (``wrench.force.z``, ...),
    every other field zero."""
    msg = message_class(message_type)(header=header(stamp_s, frame_id))
    for path, value in zip(message_fields_, command):
        *parents, leaf = path.split(".")
        target = msg
        for part in parents:
            target = getattr(target, part)
        setattr(target, leaf, float(value))
    return msg


class StampedCommandEncoder:
    """The CDR bytes of :func:`command_message` for a header-plus-float64 message (WrenchStamped,
    TwistStamped), packed with one precompiled :class:`struct.Struct` (a few microseconds instead of
    the ~26 us of the generic Python serializer): stamp (int32 sec, uint32 nanosec), frame_id (uint32
    length with the NUL, bytes, padding to 8), then the float64 values, each command term in its slot."""

    _ENCAPSULATION = b"\x00\x01\x00\x00"  # CDR_LE, no options

    def __init__(self, message_type: str, message_fields_: tuple[str, ...], frame_id: str = COMMAND_FRAME):
        body = float64_body(message_type)
        if body is None:
            raise ValueError(f"{message_type} is not a header followed by float64 fields; publish it with publish()")
        missing = [f for f in message_fields_ if f not in body]
        if missing:
            raise ValueError(f"{message_type} has no float64 field(s) {missing}; its fields are {list(body)}")
        name = frame_id.encode() + b"\0"
        pad = -(4 + 4 + 4 + len(name)) % 8  # the doubles are 8-aligned, counted after the encapsulation
        self._struct = struct.Struct(f"<4siiI{len(name)}s{pad}x{len(body)}d")
        self._name = name
        n = len(message_fields_)
        # one getter over [command terms..., 0.0]: the values of every slot, in wire order
        self._slots = itemgetter(*[message_fields_.index(path) if path in message_fields_ else n for path in body])

    def encode(self, command, stamp_s: float) -> bytes:
        t = time_from_seconds(stamp_s)  # the one stamp conversion (rounding, range checks) of the stack
        c = command.tolist() if isinstance(command, np.ndarray) else [float(v) for v in command]
        c.append(0.0)
        return self._struct.pack(self._ENCAPSULATION, t.sec, t.nanosec, len(self._name), self._name, *self._slots(c))


WRENCH_FIELDS = ("wrench.force.z", "wrench.torque.x", "wrench.torque.y", "wrench.torque.z")
"""A quadrotor's command in geometry_msgs/WrenchStamped (robot_hrl.contract.action_modes)."""


def wrench_msg(wrench, stamp_s: float, frame_id: str = COMMAND_FRAME):
    """[thrust N, tau_x, tau_y, tau_z N m] as geometry_msgs/WrenchStamped."""
    return command_message("geometry_msgs/msg/WrenchStamped", WRENCH_FIELDS, wrench, stamp_s, frame_id)


class WrenchEncoder(StampedCommandEncoder):
    """The CDR bytes of :func:`wrench_msg`."""

    def __init__(self, frame_id: str = COMMAND_FRAME):
        super().__init__("geometry_msgs/msg/WrenchStamped", WRENCH_FIELDS, frame_id)


# ---- the state ----------------------------------------------------------------------------------------
_CDR_LE = b"\x00\x01"
_STAMP_AND_LEN = struct.Struct("<iII")
_U32 = struct.Struct("<I")
_POSE = struct.Struct("<7d")
_TWIST = struct.Struct("<6d")
_COVARIANCE_BYTES = 36 * 8


class OdometryDecoder:
    """The :class:`RobotState` of ``/odom``'s CDR bytes, reading the 13 numbers it needs with
    precompiled :class:`struct.Struct` s instead of decoding the whole message (two 36-element
    covariances, nested classes: ~35 us hot, ~130 us on a cold loop, on the path to the motors).

    The state is computed exactly as :func:`robot_hrl.msgs.state_from_odometry` does (same numpy
    operations, so the same bits); any sample off the fast path (another encapsulation, lengths
    that do not add up, an unusable quaternion, non-finite values) goes the generic way,
    ``state_from_odometry(Odometry.deserialize(data))``, which raises its errors."""

    def __call__(self, data: bytes) -> RobotState:
        state = self.fast(data)
        if state is None:
            state = state_from_odometry(Odometry.deserialize(data))
        return state

    @staticmethod
    def frames(data: bytes) -> tuple[str, str]:
        """(``header.frame_id``, ``child_frame_id``) of the sample (the odometry unit judges them); raises
        as the generic deserializer does on a sample off the fast path."""
        if len(data) >= 4 and data[:2] == _CDR_LE:
            body = memoryview(data)[4:]
            try:
                _, _, frame_len = _STAMP_AND_LEN.unpack_from(body, 0)
                o = (12 + frame_len + 3) & ~3
                (child_len,) = _U32.unpack_from(body, o)
                if frame_len >= 1 and child_len >= 1 and o + 4 + child_len <= len(body):
                    frame = bytes(body[12:12 + frame_len - 1]).decode("utf-8", "replace")
                    child = bytes(body[o + 4:o + 4 + child_len - 1]).decode("utf-8", "replace")
                    return frame, child
            except struct.error:
                pass
        msg = Odometry.deserialize(data)
        return msg.header.frame_id, msg.child_frame_id

    @staticmethod
    def fast(data: bytes) -> RobotState | None:
        """The state, or None when the sample is off the fast path."""
        if len(data) < 4 or data[:2] != _CDR_LE:
            return None
        body = memoryview(data)[4:]  # XCDR1 aligns to the start of the body
        try:
            sec, nanosec, frame_len = _STAMP_AND_LEN.unpack_from(body, 0)
            if frame_len < 1:
                return None
            o = (12 + frame_len + 3) & ~3
            (child_len,) = _U32.unpack_from(body, o)
            if child_len < 1:
                return None
            o = (o + 4 + child_len + 7) & ~7
            if o + 56 + _COVARIANCE_BYTES + 48 + _COVARIANCE_BYTES > len(body):
                return None
            x, y, z, qx, qy, qz, qw = _POSE.unpack_from(body, o)
            vx, vy, vz, wx, wy, wz = _TWIST.unpack_from(body, o + 56 + _COVARIANCE_BYTES)
        except struct.error:
            return None
        q = np.array([qw, qx, qy, qz], dtype=np.float64)
        n = float(np.linalg.norm(q))
        if not np.isfinite(n) or n < 1e-9:
            return None
        q = q / n
        v_body = np.array([vx, vy, vz], dtype=np.float64)
        state = RobotState(position_w=np.array([x, y, z], dtype=np.float64), quat_wxyz=q,
                           linear_velocity_w=rotation_matrix_from_quat(q) @ v_body,
                           angular_velocity_b=np.array([wx, wy, wz], dtype=np.float64),
                           stamp_s=sec + nanosec * 1e-9)
        return state if state.is_finite() else None

"""Small numpy rotation helpers. Quaternions are (w, x, y, z), Hamilton, body-to-world.

Every array argument may carry leading batch dimensions. ROS messages order quaternions
(x, y, z, w): convert at the message boundary with :func:`quat_wxyz_from_xyzw`.
"""

from __future__ import annotations

import numpy as np


def quat_wxyz_from_xyzw(q_xyzw: np.ndarray) -> np.ndarray:
    q = np.asarray(q_xyzw, dtype=np.float64)
    return np.concatenate([q[..., 3:4], q[..., 0:3]], axis=-1)


def quat_xyzw_from_wxyz(q_wxyz: np.ndarray) -> np.ndarray:
    q = np.asarray(q_wxyz, dtype=np.float64)
    return np.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1)


def quat_normalize(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def rotation_matrix_from_quat(q_wxyz: np.ndarray) -> np.ndarray:
    """Rotation matrix R (body to world) of a unit quaternion; shape (..., 3, 3)."""
    q = np.asarray(q_wxyz, dtype=np.float64)
    if q.shape == (4,):
        # One quaternion (the control tick): float arithmetic beats a dozen tiny numpy ops.
        w, x, y, z = q.tolist()
        return np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
            ]
        )
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    r = np.empty(q.shape[:-1] + (3, 3), dtype=np.float64)
    r[..., 0, 0] = 1 - 2 * (y * y + z * z)
    r[..., 0, 1] = 2 * (x * y - w * z)
    r[..., 0, 2] = 2 * (x * z + w * y)
    r[..., 1, 0] = 2 * (x * y + w * z)
    r[..., 1, 1] = 1 - 2 * (x * x + z * z)
    r[..., 1, 2] = 2 * (y * z - w * x)
    r[..., 2, 0] = 2 * (x * z - w * y)
    r[..., 2, 1] = 2 * (y * z + w * x)
    r[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return r


def quat_from_euler_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Quaternion (w, x, y, z) of intrinsic Z-Y-X (yaw, pitch, roll) Euler angles, radians."""
    cr, sr = np.cos(roll / 2), np.sin(roll / 2)
    cp, sp = np.cos(pitch / 2), np.sin(pitch / 2)
    cy, sy = np.cos(yaw / 2), np.sin(yaw / 2)
    return np.array(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ]
    )


def euler_rpy_from_quat(q_wxyz: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw (radians) of a quaternion (w, x, y, z); shape (..., 3)."""
    q = np.asarray(q_wxyz, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.stack([roll, pitch, yaw], axis=-1)


def tilt_angle_from_quat(q_wxyz: np.ndarray) -> np.ndarray:
    """Angle between body z and world z (radians)."""
    r22 = rotation_matrix_from_quat(q_wxyz)[..., 2, 2]
    return np.arccos(np.clip(r22, -1.0, 1.0))

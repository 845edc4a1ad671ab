"""What the shield hands its units about the tick's inputs: facts in plain floats.

:func:`read_state` checks a :class:`robot_hrl.state.RobotState` once per tick (sizes, finite,
a usable quaternion) and gives its values as float lists; :func:`rotation_from_quat` is the
body-to-world rotation as 9 floats, row-major (the same formulas as
:func:`robot_hrl.geometry.rotation_matrix_from_quat`).
"""

from __future__ import annotations

import math


def rotation_from_quat(qw: float, qx: float, qy: float, qz: float) -> tuple:
    """Body-to-world rotation matrix, row-major, as 9 floats."""
    return (
        1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy),
        2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx),
        2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy),
    )


def read_state(state, stamp: float):
    """``(p, v, q, w, ok)`` of ``state`` as float lists; ``ok``: finite, with a non-degenerate
    quaternion (normalized here when it is off by more than 1e-6). A ValueError when the arrays
    have the wrong sizes (a programming error, not a bad measurement)."""
    p = state.position_w.tolist()
    v = state.linear_velocity_w.tolist()
    q = state.quat_wxyz.tolist()
    w = state.angular_velocity_b.tolist()
    if not (len(p) == 3 and len(v) == 3 and len(q) == 4 and len(w) == 3):
        raise ValueError("RobotState arrays must have sizes position 3, quat_wxyz 4, velocity 3, angular velocity 3")
    qn = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]
    total = sum(p) + sum(v) + sum(w) + qn + stamp
    ok = math.isfinite(total) and qn > 1e-6
    if ok and abs(qn - 1.0) > 1e-6:
        s = 1.0 / math.sqrt(qn)
        q = [q[0] * s, q[1] * s, q[2] * s, q[3] * s]
    return p, v, q, w, ok

"""Plain-float geometry of the shield's per-tick path.

:func:`rotation_from_quat` is the body-to-world rotation as 9 floats, row-major (the same
formulas as :func:`robot_hrl.geometry.rotation_matrix_from_quat`).
"""

from __future__ import annotations


def rotation_from_quat(qw: float, qx: float, qy: float, qz: float) -> tuple:
    """Body-to-world rotation matrix, row-major, as 9 floats."""
    return (
        1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy),
        2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx),
        2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy),
    )


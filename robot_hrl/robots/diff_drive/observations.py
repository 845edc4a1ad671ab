"""The differential drive's observation terms (numpy; inputs may carry leading batch dimensions).

A ground robot sees its subgoal in its own frame, in the plane: the policy needs no world
heading. Each term is a small pure function of (state, subgoal, last action), as
robot_hrl.contract.observations; the robot registers them (``robot.observation_terms()``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from robot_hrl.contract.observations import ObservationInputs, last_action


def heading_rad(quat_wxyz: np.ndarray) -> np.ndarray:
    """Yaw of the body x axis in the world, rad (REP 103: counter-clockwise from world x), shape (...)."""
    q = np.asarray(quat_wxyz, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def subgoal_error_xy_b(x: ObservationInputs) -> np.ndarray:
    """Subgoal minus position in the body frame, x forward and y left, m (2)."""
    psi = heading_rad(x["quat_wxyz"])
    c, s = np.cos(psi), np.sin(psi)
    d = np.asarray(x["subgoal_w"]) - np.asarray(x["position_w"])
    return np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], axis=-1)


def forward_speed_b(x: ObservationInputs) -> np.ndarray:
    """Velocity along the body x axis, m/s (1)."""
    psi = heading_rad(x["quat_wxyz"])
    v = np.asarray(x["linear_velocity_w"])
    return (np.cos(psi) * v[..., 0] + np.sin(psi) * v[..., 1])[..., None]


def yaw_rate_b(x: ObservationInputs) -> np.ndarray:
    """Rate about the body z axis, rad/s (1)."""
    return np.asarray(x["angular_velocity_b"])[..., 2:3]


DIFF_DRIVE_OBSERVATION_TERMS: dict[str, Callable[[ObservationInputs], np.ndarray]] = {
    fn.__name__: fn for fn in (subgoal_error_xy_b, forward_speed_b, yaw_rate_b, last_action)
}
"""The terms a differential drive's contract may name."""

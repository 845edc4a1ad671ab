"""The state estimate the skill consumes: what a robot or simulator reports each tick."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _vec(n: int):
    return field(default_factory=lambda: np.zeros(n))


@dataclass
class RobotState:
    """Pose and twist of the robot, all in SI units.

    Note the frames: nav_msgs/Odometry carries its twist in the *child* (body) frame
    (REP 105), whereas ``linear_velocity_w`` here is in the world frame. The message
    conversion rotates it; forgetting that is a classic sim-to-real bug.
    """

    position_w: np.ndarray = _vec(3)
    """Position in the world (map/odom) frame, ENU, m."""
    quat_wxyz: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))
    """Orientation body-to-world, Hamilton (w, x, y, z)."""
    linear_velocity_w: np.ndarray = _vec(3)
    """Linear velocity in the world frame, m/s."""
    angular_velocity_b: np.ndarray = _vec(3)
    """Body rates in the body FLU frame, rad/s."""
    stamp_s: float = 0.0
    """Time of the estimate, seconds (sim or wall clock)."""

    def is_finite(self) -> bool:
        return bool(
            np.all(np.isfinite(self.position_w))
            and np.all(np.isfinite(self.quat_wxyz))
            and np.all(np.isfinite(self.linear_velocity_w))
            and np.all(np.isfinite(self.angular_velocity_b))
            and np.isfinite(self.stamp_s)
        )

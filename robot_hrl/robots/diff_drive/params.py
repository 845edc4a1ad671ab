"""A minimal differential-drive robot: two driven wheels, commanded by body velocity (``cmd_vel``).

Its numbers are the ROBOTIS TurtleBot3 Burger's, each with its source; it is the stack's second
robot, the proof that a robot is an addition (this package), not a rewrite. It answers the robot
protocol (robot_hrl.robots.base.Robot): the ``body_velocity`` action mode (forward speed, yaw
rate), ``geometry_msgs/TwistStamped`` on ``/cmd_vel`` as ros2_controllers' diff_drive_controller
takes it, its own shield family (robot_hrl/robots/diff_drive/shield.py) and observation terms
(robot_hrl/robots/diff_drive/observations.py).

Conventions (REP 103): world ENU, body FLU, SI units. The robot moves in the plane of the floor.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from robot_hrl.robots.base import CommandOutput, package_shield_config, resolve_mode

if TYPE_CHECKING:
    from robot_hrl.contract.schema import ActionSpec

VELOCITY_COMMAND_TOPIC = "/cmd_vel"
"""Where a differential drive's body velocity goes (geometry_msgs/TwistStamped, frame base_link)."""


@dataclass(frozen=True)
class DiffDriveParams:
    """Kinematic parameters of a differential-drive robot."""

    name: str
    """Robot name used in the policy contract."""
    wheel_separation_m: float
    """Distance between the two driven wheels' contact points."""
    wheel_radius_m: float
    max_speed_mps: float
    """Largest forward (or backward) speed."""
    max_yaw_rate_radps: float
    """Largest yaw rate."""
    collision_radius_m: float
    """Radius of a circle (sphere) that encloses the footprint."""
    body_height_m: float
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    """Where each value comes from; excluded from the hash."""

    def params_sha256(self) -> str:
        """Hash of the parameters: a contract records it, a mismatch is reported."""
        payload = {k: v for k, v in asdict(self).items() if k != "sources"}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    # ---- the robot protocol (robot_hrl.robots.base.Robot) -------------------------------------
    @property
    def action_modes(self) -> tuple[str, ...]:
        return ("body_velocity",)

    def action_spec(self, mode: str | None = None) -> "ActionSpec":
        """Forward speed and yaw rate, each symmetric up to the robot's maximum."""
        resolve_mode(self, mode)
        from robot_hrl.contract.schema import ActionSpec, ActionTerm

        return ActionSpec(mode="body_velocity", terms=(
            ActionTerm(name="linear_x", units="m/s", low=-self.max_speed_mps, high=self.max_speed_mps),
            ActionTerm(name="angular_z", units="rad/s", low=-self.max_yaw_rate_radps, high=self.max_yaw_rate_radps),
        ))

    def neutral_command(self, mode: str | None = None) -> np.ndarray:
        """Standing still."""
        resolve_mode(self, mode)
        return np.zeros(2)

    def command_output(self, mode: str | None = None) -> CommandOutput:
        resolve_mode(self, mode)
        return CommandOutput(VELOCITY_COMMAND_TOPIC)

    @property
    def lands(self) -> bool:
        """A ground robot: a subgoal on the floor is just a subgoal."""
        return False

    @property
    def shield_config_path(self) -> Path:
        return package_shield_config(self.name)

    @property
    def shield_family(self) -> str:
        return "robot_hrl.robots.diff_drive.shield"

    def observation_terms(self) -> Mapping[str, Callable]:
        from robot_hrl.robots.diff_drive.observations import DIFF_DRIVE_OBSERVATION_TERMS

        return DIFF_DRIVE_OBSERVATION_TERMS


DIFF_DRIVE = DiffDriveParams(
    name="diff_drive",
    wheel_separation_m=0.160,
    wheel_radius_m=0.033,
    max_speed_mps=0.22,
    max_yaw_rate_radps=2.84,
    collision_radius_m=0.113,
    body_height_m=0.192,
    sources={
        "wheel_separation_m": "ROBOTIS TurtleBot3 Burger (turtlebot3 description: wheel separation 0.160 m)",
        "wheel_radius_m": "ROBOTIS TurtleBot3 Burger (turtlebot3 description: wheel radius 0.033 m)",
        "max_speed_mps": "ROBOTIS turtlebot3_teleop BURGER_MAX_LIN_VEL = 0.22 m/s",
        "max_yaw_rate_radps": "ROBOTIS turtlebot3_teleop BURGER_MAX_ANG_VEL = 2.84 rad/s",
        "collision_radius_m": "half the diagonal of the 138 x 178 mm footprint (ROBOTIS e-Manual, TurtleBot3 Burger: 138 x 178 x 192 mm), 112.6 mm rounded up",
        "body_height_m": "ROBOTIS e-Manual: 192 mm",
    },
)

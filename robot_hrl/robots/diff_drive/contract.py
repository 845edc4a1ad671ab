"""The differential drive's go-to contract: its own observation terms, its body-velocity action."""

from __future__ import annotations

from robot_hrl.contract.schema import ObservationTerm, PolicyContract, RobotRef
from robot_hrl.robots.diff_drive.params import DiffDriveParams

CONTROL_RATE_HZ = 20.0
"""The policy rate: Nav2's controller_server runs its controllers at 20 Hz by default (controller_frequency)."""
SUBGOAL_RADIUS_M = 1.0


def goto_observation_terms(robot: DiffDriveParams) -> tuple[ObservationTerm, ...]:
    return (
        ObservationTerm(name="subgoal_error_xy_b", size=2, frame="body_flu", units="m", clip=(-2.0, 2.0),
                        description="subgoal minus position in the body frame, in the plane"),
        ObservationTerm(name="forward_speed_b", size=1, frame="body_flu", units="m/s",
                        clip=(-2.0 * robot.max_speed_mps, 2.0 * robot.max_speed_mps), description="speed along body x"),
        ObservationTerm(name="yaw_rate_b", size=1, frame="body_flu", units="rad/s",
                        clip=(-2.0 * robot.max_yaw_rate_radps, 2.0 * robot.max_yaw_rate_radps), description="yaw rate"),
        ObservationTerm(name="last_action", size=2, frame="none", units="1", clip=(-1.0, 1.0),
                        description="previous normalized action"),
    )


def goto_contract(robot: DiffDriveParams, control_rate_hz: float = CONTROL_RATE_HZ,
                  subgoal_radius_m: float = SUBGOAL_RADIUS_M) -> PolicyContract:
    """The go-to skill of a differential drive."""
    return PolicyContract(
        skill="goto",
        robot=RobotRef(name=robot.name, params_sha256=robot.params_sha256()),
        control_rate_hz=control_rate_hz,
        observations=goto_observation_terms(robot),
        action=robot.action_spec("body_velocity"),
        subgoal_radius_m=subgoal_radius_m,
    )

"""The contract of the go-to-subgoal skill: observation terms and their ranges.

The simulator's environment config, the exporter and the tests all start from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robot_hrl.contract.schema import FirmwareRef, ObservationTerm, PolicyContract, RobotRef

if TYPE_CHECKING:
    from robot_hrl.robots.base import Robot

DEFAULT_CONTROL_RATE_HZ = 100.0
"""Policy rate. The Crazyflie stabilizer loop runs at 1 kHz; an out-of-tree controller
executes the policy every 10th tick (RATE_DO_EXECUTE(RATE_100_HZ, tick))."""
DEFAULT_SUBGOAL_RADIUS_M = 1.0


def goto_observation_terms(action_size: int) -> tuple[ObservationTerm, ...]:
    """The go-to skill's observation of a rigid body flying in 3-D, with the last action of ``action_size`` terms."""
    return _GOTO_STATE_TERMS + (
        ObservationTerm(name="last_action", size=action_size, frame="none", units="1", clip=(-1.0, 1.0),
                        description="previous normalized action"),
    )


_GOTO_STATE_TERMS: tuple[ObservationTerm, ...] = (
    ObservationTerm(name="subgoal_error_w", size=3, frame="world_enu", units="m", clip=(-2.0, 2.0),
                    description="subgoal minus position"),
    ObservationTerm(name="rotation_matrix_wb", size=9, frame="body_to_world", units="1", clip=(-1.0, 1.0),
                    description="body-to-world rotation matrix, row-major"),
    ObservationTerm(name="linear_velocity_w", size=3, frame="world_enu", units="m/s", clip=(-5.0, 5.0),
                    description="linear velocity"),
    ObservationTerm(name="angular_velocity_b", size=3, frame="body_flu", units="rad/s", clip=(-35.0, 35.0),
                    description="body rates (gyro range 2000 deg/s)"),
)
GOTO_OBSERVATION_TERMS: tuple[ObservationTerm, ...] = goto_observation_terms(4)
"""The quadrotor's go-to observation (22 values: 4 actions of collective thrust and body torques)."""


def goto_contract(
    robot: "Robot",
    control_rate_hz: float = DEFAULT_CONTROL_RATE_HZ,
    subgoal_radius_m: float = DEFAULT_SUBGOAL_RADIUS_M,
    action_mode: str | None = None,
) -> PolicyContract:
    """The go-to skill's contract for ``robot`` in ``action_mode`` (None: the robot's default mode)."""
    action = robot.action_spec(action_mode)
    return PolicyContract(
        skill="goto",
        robot=RobotRef(name=robot.name, params_sha256=robot.params_sha256()),
        control_rate_hz=control_rate_hz,
        observations=goto_observation_terms(action.size),
        action=action,
        subgoal_radius_m=subgoal_radius_m,
        firmware=_firmware(robot.name),
    )


def _firmware(robot_name: str) -> FirmwareRef | None:
    from robot_hrl.robots.actuator_chain import firmware_of

    firmware = firmware_of(robot_name)
    return None if firmware is None else FirmwareRef(**firmware)

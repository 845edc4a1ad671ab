"""The contract of the go-to-subgoal skill: observation terms and their ranges.

The simulator's environment config, the exporter and the tests all start from here.
"""

from __future__ import annotations

from robot_hrl.contract.actions import goto_action_spec
from robot_hrl.contract.schema import ObservationTerm, PolicyContract, RobotRef
from robot_hrl.robots.quadrotor import QuadrotorParams

DEFAULT_CONTROL_RATE_HZ = 100.0
"""Policy rate. The Crazyflie stabilizer loop runs at 1 kHz; an out-of-tree controller
executes the policy every 10th tick (RATE_DO_EXECUTE(RATE_100_HZ, tick))."""
DEFAULT_SUBGOAL_RADIUS_M = 1.0

GOTO_OBSERVATION_TERMS: tuple[ObservationTerm, ...] = (
    ObservationTerm(name="subgoal_error_w", size=3, frame="world_enu", units="m", clip=(-2.0, 2.0),
                    description="subgoal minus position"),
    ObservationTerm(name="rotation_matrix_wb", size=9, frame="body_to_world", units="1", clip=(-1.0, 1.0),
                    description="body-to-world rotation matrix, row-major"),
    ObservationTerm(name="linear_velocity_w", size=3, frame="world_enu", units="m/s", clip=(-5.0, 5.0),
                    description="linear velocity"),
    ObservationTerm(name="angular_velocity_b", size=3, frame="body_flu", units="rad/s", clip=(-35.0, 35.0),
                    description="body rates (gyro range 2000 deg/s)"),
    ObservationTerm(name="last_action", size=4, frame="none", units="1", clip=(-1.0, 1.0),
                    description="previous normalized action"),
)


def goto_contract(
    robot: QuadrotorParams,
    control_rate_hz: float = DEFAULT_CONTROL_RATE_HZ,
    subgoal_radius_m: float = DEFAULT_SUBGOAL_RADIUS_M,
) -> PolicyContract:
    return PolicyContract(
        skill="goto",
        robot=RobotRef(name=robot.name, params_sha256=robot.params_sha256()),
        control_rate_hz=control_rate_hz,
        observations=GOTO_OBSERVATION_TERMS,
        action=goto_action_spec(robot),
        subgoal_radius_m=subgoal_radius_m,
    )

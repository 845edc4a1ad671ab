"""The quadrotor's action spec: collective thrust and body torques, sized from the robot model.

Executed by crazyflie-firmware's controlModeForceTorque (thrustSi N, torqueX/Y/Z N m, mixed
onboard). The mapping from normalized actions is the contract's
(:mod:`robot_hrl.contract.action_modes`); this module only sizes the bounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from robot_hrl.contract.schema import ActionSpec, ActionTerm

if TYPE_CHECKING:
    from robot_hrl.robots.quadrotor.params import QuadrotorParams

TORQUE_AUTHORITY_FRACTION = 0.5
"""Fraction of the per-rotor thrust range that the full torque command may differentially use."""


def quadrotor_action_spec(robot: "QuadrotorParams") -> ActionSpec:
    """Collective thrust in [0, max] and symmetric body torques, sized from the robot model."""
    arm_xy = float(np.max(np.abs(np.asarray(robot.rotor_positions_m)[:, :2])))
    differential = TORQUE_AUTHORITY_FRACTION * robot.max_rotor_thrust_n / 2.0
    torque_xy = robot.num_rotors * arm_xy * differential / 2.0
    torque_z = robot.num_rotors * robot.torque_to_thrust_m * differential / 2.0
    return ActionSpec(
        mode="collective_thrust_body_torque",
        firmware_control_mode="controlModeForceTorque",
        terms=(
            ActionTerm(name="collective_thrust", units="N", low=0.0, high=robot.max_total_thrust_n),
            ActionTerm(name="torque_x", units="N m", low=-torque_xy, high=torque_xy),
            ActionTerm(name="torque_y", units="N m", low=-torque_xy, high=torque_xy),
            ActionTerm(name="torque_z", units="N m", low=-torque_z, high=torque_z),
        ),
    )

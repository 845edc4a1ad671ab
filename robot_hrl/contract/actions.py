"""From normalized policy outputs to physical commands, and the firmware's mixer.

The mixer reproduces crazyflie-firmware's controlModeForceTorque power distribution
(power_distribution_quadrotor.c): thrust and torques are split over the four rotors through
the inverse allocation matrix, then capped so that saturation sacrifices collective thrust
before attitude torque. The simulators apply the same mixer, so the policy trains against
what the firmware will actually do.
"""

from __future__ import annotations

import numpy as np

from robot_hrl.contract.schema import ActionSpec, ActionTerm
from robot_hrl.robots.quadrotor import QuadrotorParams

TORQUE_AUTHORITY_FRACTION = 0.5
"""Fraction of the per-rotor thrust range that the full torque command may differentially use."""


def goto_action_spec(robot: QuadrotorParams) -> ActionSpec:
    """Collective thrust in [0, max] and symmetric body torques, sized from the robot model."""
    arm_xy = float(np.max(np.abs(np.asarray(robot.rotor_positions_m)[:, :2])))
    differential = TORQUE_AUTHORITY_FRACTION * robot.max_rotor_thrust_n / 2.0
    torque_xy = robot.num_rotors * arm_xy * differential / 2.0
    torque_z = robot.num_rotors * robot.torque_to_thrust_m * differential / 2.0
    return ActionSpec(
        terms=(
            ActionTerm(name="collective_thrust", units="N", low=0.0, high=robot.max_total_thrust_n),
            ActionTerm(name="torque_x", units="N m", low=-torque_xy, high=torque_xy),
            ActionTerm(name="torque_y", units="N m", low=-torque_xy, high=torque_xy),
            ActionTerm(name="torque_z", units="N m", low=-torque_z, high=torque_z),
        )
    )


_BOUNDS: dict[int, tuple[ActionSpec, np.ndarray, np.ndarray, np.ndarray]] = {}


def action_bounds(spec: ActionSpec) -> tuple[np.ndarray, np.ndarray]:
    """Physical values at a = -1 and a = +1; resolved once per spec (this runs every tick)."""
    cached = _BOUNDS.get(id(spec))
    if cached is None or cached[0] is not spec:
        low = np.array([t.low for t in spec.terms])
        high = np.array([t.high for t in spec.terms])
        low.flags.writeable = high.flags.writeable = False
        cached = _BOUNDS[id(spec)] = (spec, low, high, (high - low) * 0.5)
    return cached[1], cached[2]


def actions_to_wrench(spec: ActionSpec, actions: np.ndarray) -> np.ndarray:
    """Normalized actions (..., 4) in [-1, 1] -> [thrust N, tau_x, tau_y, tau_z N m]."""
    action_bounds(spec)
    _, low, _, half_span = _BOUNDS[id(spec)]
    a = np.minimum(np.maximum(np.asarray(actions, dtype=np.float64), -1.0), 1.0)
    return low + (a + 1.0) * half_span


def wrench_to_actions(spec: ActionSpec, wrench: np.ndarray) -> np.ndarray:
    """Inverse of :func:`actions_to_wrench` (clipped to [-1, 1])."""
    low, high = action_bounds(spec)
    return np.clip(2.0 * (np.asarray(wrench, dtype=np.float64) - low) / (high - low) - 1.0, -1.0, 1.0)


def mix_wrench_to_rotor_thrusts(robot: QuadrotorParams, wrench: np.ndarray) -> np.ndarray:
    """Firmware-style mixer: [thrust, tau] (..., 4) -> per-rotor thrust (..., 4) in [0, f_max]."""
    inverse = np.linalg.inv(robot.allocation_matrix())
    thrusts = np.asarray(wrench, dtype=np.float64) @ inverse.T
    # powerDistributionCap: shift all motors down by the overshoot of the highest one, so the
    # torque (the differences) survives and collective thrust gives way.
    overshoot = np.maximum(np.max(thrusts, axis=-1, keepdims=True) - robot.max_rotor_thrust_n, 0.0)
    return np.clip(thrusts - overshoot, 0.0, robot.max_rotor_thrust_n)


def hover_actions(spec: ActionSpec, robot: QuadrotorParams) -> np.ndarray:
    """The normalized action that holds a level hover for the nominal robot."""
    return wrench_to_actions(spec, np.array([robot.weight_n, 0.0, 0.0, 0.0]))

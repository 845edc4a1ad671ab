"""From normalized policy outputs to physical commands (the names the stack used before action modes),
and the Crazyflie firmware's mixer.

The mapping itself lives in :mod:`robot_hrl.contract.action_modes` (one implementation, numpy and
array-API); ``actions_to_wrench`` and ``wrench_to_actions`` are its names for the quadrotor's
collective-thrust/body-torque mode. The quadrotor's action spec (``goto_action_spec``, sized from the
robot) moved to :mod:`robot_hrl.robots.quadrotor.actions`: the robot answers ``robot.action_spec()``.

The mixer reproduces crazyflie-firmware's controlModeForceTorque power distribution
(power_distribution_quadrotor.c): thrust and torques are split over the four rotors through
the inverse allocation matrix, then capped so that saturation sacrifices collective thrust
before attitude torque. The simulators apply the same mixer, so the policy trains against
what the firmware will actually do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from robot_hrl.contract.action_modes import action_bounds, command_to_normalized, normalized_to_command
from robot_hrl.contract.schema import ActionSpec

if TYPE_CHECKING:
    from robot_hrl.robots.base import Robot
    from robot_hrl.robots.quadrotor import QuadrotorParams


def actions_to_wrench(spec: ActionSpec, actions: np.ndarray) -> np.ndarray:
    """Normalized actions (..., 4) in [-1, 1] -> [thrust N, tau_x, tau_y, tau_z N m] (:func:`normalized_to_command`)."""
    return normalized_to_command(spec, actions)


def wrench_to_actions(spec: ActionSpec, wrench: np.ndarray) -> np.ndarray:
    """Inverse of :func:`actions_to_wrench`, clipped to [-1, 1] (:func:`command_to_normalized`)."""
    return command_to_normalized(spec, wrench)


def hover_actions(spec: ActionSpec, robot: "Robot") -> np.ndarray:
    """The normalized action of the robot's neutral command (a quadrotor: level hover at nominal mass)."""
    return command_to_normalized(spec, robot.neutral_command(spec.mode))


def mix_wrench_to_rotor_thrusts(robot: "QuadrotorParams", wrench: np.ndarray) -> np.ndarray:
    """Firmware-style mixer: [thrust, tau] (..., 4) -> per-rotor thrust (..., 4) in [0, f_max]."""
    inverse = np.linalg.inv(robot.allocation_matrix())
    thrusts = np.asarray(wrench, dtype=np.float64) @ inverse.T
    # powerDistributionCap: shift all motors down by the overshoot of the highest one, so the
    # torque (the differences) survives and collective thrust gives way.
    overshoot = np.maximum(np.max(thrusts, axis=-1, keepdims=True) - robot.max_rotor_thrust_n, 0.0)
    return np.clip(thrusts - overshoot, 0.0, robot.max_rotor_thrust_n)


def __getattr__(name: str):
    """``goto_action_spec`` and ``TORQUE_AUTHORITY_FRACTION`` moved to robot_hrl.robots.quadrotor.actions;
    the old import path forwards there (lazily: the contract does not import the robots)."""
    if name in ("goto_action_spec", "TORQUE_AUTHORITY_FRACTION"):
        from robot_hrl.robots.quadrotor import actions

        return getattr(actions, "quadrotor_action_spec" if name == "goto_action_spec" else name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["action_bounds", "actions_to_wrench", "hover_actions", "mix_wrench_to_rotor_thrusts", "wrench_to_actions"]

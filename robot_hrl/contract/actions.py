"""From normalized policy outputs to physical commands (the names the stack used before action modes).

The mapping itself lives in :mod:`robot_hrl.contract.action_modes` (one implementation, numpy and
array-API); ``actions_to_wrench`` and ``wrench_to_actions`` are its names for the quadrotor's
collective-thrust/body-torque mode. The quadrotor's action spec (sized from the robot) is
:func:`robot_hrl.robots.quadrotor.quadrotor_action_spec`: any robot answers ``robot.action_spec()``.

The Crazyflie firmware's mixer and actuator chain live with the robot:
:mod:`robot_hrl.robots.crazyflie_2x.actuators`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from robot_hrl.contract.action_modes import action_bounds, command_to_normalized, normalized_to_command
from robot_hrl.contract.schema import ActionSpec

if TYPE_CHECKING:
    from robot_hrl.robots.base import Robot


def actions_to_wrench(spec: ActionSpec, actions: np.ndarray) -> np.ndarray:
    """Normalized actions (..., 4) in [-1, 1] -> [thrust N, tau_x, tau_y, tau_z N m] (:func:`normalized_to_command`)."""
    return normalized_to_command(spec, actions)


def wrench_to_actions(spec: ActionSpec, wrench: np.ndarray) -> np.ndarray:
    """Inverse of :func:`actions_to_wrench`, clipped to [-1, 1] (:func:`command_to_normalized`)."""
    return command_to_normalized(spec, wrench)


def hover_actions(spec: ActionSpec, robot: "Robot") -> np.ndarray:
    """The normalized action of the robot's neutral command (a quadrotor: level hover at nominal mass)."""
    return command_to_normalized(spec, robot.neutral_command(spec.mode))


__all__ = ["action_bounds", "actions_to_wrench", "hover_actions", "wrench_to_actions"]

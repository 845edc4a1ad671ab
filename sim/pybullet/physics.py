"""The PyBullet quadrotor's aerodynamics beyond the actuator chain, as small pure functions.

All numbers come from a :class:`robot_hrl.robots.QuadrotorParams`; nothing here is tuned.

- The firmware, the motors and the rotors are the robot's actuator chain
  (``robot_hrl/robots/<robot>/actuators.py``, run on Python floats): the wrench command through the
  firmware mixer and cap to rotor speed commands (the nominal robot), the motor lag, the rotor
  thrusts and drag torque (the true airframe). The torch and C steps run the same functions.
- Ground effect: ``robot_hrl/robots/quadrotor/ground_effect.py`` (its one home; the shield's dead
  reckoning predicts with it too), per rotor.
- Linear drag: ``F_b = -diag(c) v_b`` in the body frame (airspeed = ground speed, no wind).
"""

from __future__ import annotations

import numpy as np

from robot_hrl.robots.actuator_chain import MATH, chain_of
from robot_hrl.robots.quadrotor.ground_effect import GROUND_EFFECT_MAX_GAIN, ground_effect_height_clip_m  # noqa: F401
from robot_hrl.robots.quadrotor.ground_effect import ground_effect_gain as _gain
from robot_hrl.robots.quadrotor import QuadrotorParams


def rpm_command_from_wrench(robot: QuadrotorParams, wrench: np.ndarray) -> np.ndarray:
    """The actuator chain's command of the nominal robot hovering for ``wrench`` (4,): for the Crazyflie the firmware's
    motor PWM (mixer, battery compensation at the nominal battery's hover voltage, cap); rpm for a chain that
    commands rotor speeds."""
    chain = chain_of(robot.name)
    k = chain.constants(robot)
    nominal = chain.derive({p.name: p.nominal(k) for p in chain.PARAMETERS}, k, 1.0, MATH)
    w = tuple(float(v) for v in np.asarray(wrench, dtype=np.float64))
    state = chain.initial_state(robot.weight_n, nominal, k, MATH)
    return np.asarray(chain.command(w, state, nominal, k, MATH), dtype=np.float64)


def ground_effect_gain(robot: QuadrotorParams, hub_heights_m: np.ndarray, body_z_up_component: float) -> np.ndarray:
    """Per-rotor thrust multiplier (>= 1) from the ground effect: ``robot_hrl.robots.quadrotor.ground_effect`` (the
    shield's dead reckoning predicts with the same function) for each hub height."""
    clip = ground_effect_height_clip_m(robot)
    return np.array([_gain(robot, float(h), float(body_z_up_component), clip) for h in np.asarray(hub_heights_m, dtype=np.float64).ravel()])


def linear_drag_force_b(coefficients: np.ndarray, velocity_b: np.ndarray) -> np.ndarray:
    """Body-frame linear drag force (N)."""
    return -np.asarray(coefficients, dtype=np.float64) * np.asarray(velocity_b, dtype=np.float64)

"""The PyBullet quadrotor's aerodynamics beyond the actuator chain, as small pure functions.

All numbers come from a :class:`robot_hrl.robots.QuadrotorParams`; nothing here is tuned.

- The firmware, the motors and the rotors are the robot's actuator chain
  (``robot_hrl/robots/<robot>/actuators.py``, run on Python floats): the wrench command through the
  firmware mixer and cap to rotor speed commands (the nominal robot), the motor lag, the rotor
  thrusts and drag torque (the true airframe). The torch and C steps run the same functions.
- Ground effect (gym-pybullet-drones, after Shi et al., "Neural Lander", 2019): each rotor's
  thrust is multiplied by ``1 + c_ge * (r_prop / (4 h))^2``, h the hub height above the ground,
  clipped at the height where the gain reaches GROUND_EFFECT_MAX_GAIN; applied only while
  |roll| and |pitch| are below 90 degrees (rotors facing the ground, R_wb[2, 2] > 0).
- Linear drag: ``F_b = -diag(c) v_b`` in the body frame (airspeed = ground speed, no wind).
"""

from __future__ import annotations

import numpy as np

from robot_hrl.robots.actuator_chain import MATH, chain_of
from robot_hrl.robots.quadrotor import QuadrotorParams

GROUND_EFFECT_MAX_GAIN = 4.0 / 15.0
"""Largest relative thrust gain from ground effect. gym-pybullet-drones clips the prop height at
GND_EFF_H_CLIP = 0.25 r sqrt(15 rpm_max^2 k_f c_ge / max_thrust) with max_thrust = 4 k_f rpm_max^2,
where c_ge (r / 4h)^2 equals 4/15."""


def rpm_command_from_wrench(robot: QuadrotorParams, wrench: np.ndarray) -> np.ndarray:
    """The actuator chain's command of the nominal robot for ``wrench`` (4,): for the Crazyflie the rotor speed
    commands (rpm) of the firmware mixer, cap and thrust -> speed map."""
    chain = chain_of(robot.name)
    k = chain.constants(robot)
    nominal = chain.derive({p.name: p.nominal(k) for p in chain.PARAMETERS}, k, 1.0, MATH)
    w = tuple(float(v) for v in np.asarray(wrench, dtype=np.float64))
    state = chain.initial_state(robot.weight_n, nominal, k, MATH)
    return np.asarray(chain.command(w, state, nominal, k, MATH), dtype=np.float64)


def ground_effect_height_clip_m(robot: QuadrotorParams) -> float:
    """Hub height below which the ground-effect gain stops growing."""
    if robot.ground_effect_coefficient <= 0.0 or robot.propeller_radius_m <= 0.0:
        return 0.0
    return robot.propeller_radius_m / 4.0 * np.sqrt(robot.ground_effect_coefficient / GROUND_EFFECT_MAX_GAIN)


def ground_effect_gain(robot: QuadrotorParams, hub_heights_m: np.ndarray, body_z_up_component: float) -> np.ndarray:
    """Per-rotor thrust multiplier (>= 1) from the ground effect.

    ``body_z_up_component`` is R_wb[2, 2] = cos(roll) cos(pitch); gym-pybullet-drones applies the
    effect while |roll| < 90 deg and |pitch| < 90 deg, which is exactly R_wb[2, 2] > 0.
    """
    h = np.asarray(hub_heights_m, dtype=np.float64)
    if robot.ground_effect_coefficient <= 0.0 or robot.propeller_radius_m <= 0.0 or body_z_up_component <= 0.0:
        return np.ones_like(h)
    h = np.maximum(h, ground_effect_height_clip_m(robot))
    return 1.0 + robot.ground_effect_coefficient * (robot.propeller_radius_m / (4.0 * h)) ** 2


def linear_drag_force_b(coefficients: np.ndarray, velocity_b: np.ndarray) -> np.ndarray:
    """Body-frame linear drag force (N)."""
    return -np.asarray(coefficients, dtype=np.float64) * np.asarray(velocity_b, dtype=np.float64)

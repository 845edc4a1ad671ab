"""Rotor, motor and aerodynamic models of the PyBullet quadrotor, as small pure functions.

All numbers come from a :class:`robot_hrl.robots.QuadrotorParams`; nothing here is tuned.

- Firmware: the wrench command goes through ``robot_hrl.contract.mix_wrench_to_rotor_thrusts``
  (crazyflie-firmware's controlModeForceTorque mixer) with the *nominal* robot, and each rotor
  thrust becomes a speed command ``rpm = sqrt(f / k_f)`` (again nominal: the firmware does not
  know the true airframe), clipped to [rpm_min, rpm_max] (saturation).
- Motor: first-order lag on rotor speed, discretized exactly for a held command:
  ``rpm += (rpm_cmd - rpm) * (1 - exp(-dt / tau))`` each physics step.
- Rotor: thrust ``k_f * rpm^2`` along body +z at the rotor hub; drag torque about body z
  ``-spin * torque_to_thrust * thrust`` (a counter-clockwise rotor pushes the body clockwise).
- Ground effect (gym-pybullet-drones, after Shi et al., "Neural Lander", 2019): each rotor's
  thrust is multiplied by ``1 + c_ge * (r_prop / (4 h))^2``, h the hub height above the ground,
  clipped at the height where the gain reaches GROUND_EFFECT_MAX_GAIN; applied only while
  |roll| and |pitch| are below 90 degrees (rotors facing the ground, R_wb[2, 2] > 0).
- Linear drag: ``F_b = -diag(c) v_b`` in the body frame (airspeed = ground speed, no wind).
"""

from __future__ import annotations

import numpy as np

from robot_hrl.contract.actions import mix_wrench_to_rotor_thrusts
from robot_hrl.robots.quadrotor import QuadrotorParams

GROUND_EFFECT_MAX_GAIN = 4.0 / 15.0
"""Largest relative thrust gain from ground effect. gym-pybullet-drones clips the prop height at
GND_EFF_H_CLIP = 0.25 r sqrt(15 rpm_max^2 k_f c_ge / max_thrust) with max_thrust = 4 k_f rpm_max^2,
where c_ge (r / 4h)^2 equals 4/15."""


def rpm_command_from_wrench(robot: QuadrotorParams, wrench: np.ndarray) -> np.ndarray:
    """Firmware mixer then thrust->speed map of the nominal robot: wrench (4,) -> rpm command (4,)."""
    thrusts = mix_wrench_to_rotor_thrusts(robot, np.asarray(wrench, dtype=np.float64))
    rpm = np.sqrt(np.maximum(thrusts, 0.0) / robot.thrust_coefficient_n_per_rpm2)
    return np.clip(rpm, robot.rpm_min, robot.rpm_max)


def motor_lag_step(rpm: np.ndarray, rpm_command: np.ndarray, dt_s: float, time_constant_s: float) -> np.ndarray:
    """One exact step of the first-order motor lag (command held over dt)."""
    if time_constant_s <= 0.0:
        return np.asarray(rpm_command, dtype=np.float64).copy()
    alpha = 1.0 - np.exp(-dt_s / time_constant_s)
    return rpm + (rpm_command - rpm) * alpha


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


def rotor_thrusts(kf: float, rpm: np.ndarray) -> np.ndarray:
    """Static rotor thrust k_f rpm^2 (N)."""
    return kf * np.square(rpm)


def yaw_drag_torque(robot: QuadrotorParams, thrusts_n: np.ndarray, torque_to_thrust_m: float | None = None) -> float:
    """Sum of the rotors' drag torques about body z (N m); the coefficient defaults to the robot's."""
    spins = np.asarray(robot.rotor_spin_directions, dtype=np.float64)
    c = robot.torque_to_thrust_m if torque_to_thrust_m is None else torque_to_thrust_m
    return float(np.sum(-spins * c * thrusts_n))


def linear_drag_force_b(coefficients: np.ndarray, velocity_b: np.ndarray) -> np.ndarray:
    """Body-frame linear drag force (N)."""
    return -np.asarray(coefficients, dtype=np.float64) * np.asarray(velocity_b, dtype=np.float64)

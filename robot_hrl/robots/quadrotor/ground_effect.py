"""Ground effect on one rotor, on Python floats: the one home of the model PyBullet flies
(sim/pybullet/physics.py calls it per rotor) and the shield's dead reckoning predicts with.

Each rotor's thrust is multiplied by ``1 + c_ge * (r_prop / (4 h))^2``, h the hub height above the
ground, clipped at the height where the gain reaches GROUND_EFFECT_MAX_GAIN; applied only while
|roll| and |pitch| are below 90 degrees (rotors facing the ground, R_wb[2, 2] > 0). After
gym-pybullet-drones (``_groundEffect``; Shi et al., "Neural Lander", 2019); the coefficient and the
propeller radius are the robot's (QuadrotorParams).
"""

from __future__ import annotations

import math

GROUND_EFFECT_MAX_GAIN = 4.0 / 15.0
"""Largest relative thrust gain from ground effect. gym-pybullet-drones clips the prop height at
GND_EFF_H_CLIP = 0.25 r sqrt(15 rpm_max^2 k_f c_ge / max_thrust) with max_thrust = 4 k_f rpm_max^2,
where c_ge (r / 4h)^2 equals 4/15."""


def ground_effect_height_clip_m(robot) -> float:
    """Hub height below which the ground-effect gain stops growing."""
    if robot.ground_effect_coefficient <= 0.0 or robot.propeller_radius_m <= 0.0:
        return 0.0
    return robot.propeller_radius_m / 4.0 * math.sqrt(robot.ground_effect_coefficient / GROUND_EFFECT_MAX_GAIN)


def ground_effect_gain(robot, hub_height_m: float, body_z_up_component: float, clip_m: float | None = None) -> float:
    """One rotor's thrust multiplier (>= 1). ``body_z_up_component`` is R_wb[2, 2] = cos(roll) cos(pitch);
    ``clip_m``: :func:`ground_effect_height_clip_m` when the caller has it at hand."""
    c = robot.ground_effect_coefficient
    if c <= 0.0 or robot.propeller_radius_m <= 0.0 or body_z_up_component <= 0.0:
        return 1.0
    h = max(hub_height_m, ground_effect_height_clip_m(robot) if clip_m is None else clip_m)
    q = robot.propeller_radius_m / (4.0 * h)
    return 1.0 + c * q * q

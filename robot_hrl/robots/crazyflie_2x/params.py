"""Bitcraze Crazyflie 2.x (2.0 / 2.1 with the stock 7x16 mm brushed motors and 45 mm props).

Motor order and spin follow crazyflie-firmware (power_distribution_quadrotor.c): M1 front
right, M2 back right, M3 back left, M4 front left; M1 and M3 spin counter-clockwise, M2 and
M4 clockwise (seen from above). Each value names its published source.
"""

from __future__ import annotations

import math

from robot_hrl.robots.quadrotor.params import QuadrotorParams

_ARM_LENGTH_M = 0.046
"""Centre to motor axis; 92 mm motor-to-motor diagonal (Bitcraze Crazyflie 2.1 datasheet;
crazyflie-firmware ARM_LENGTH)."""
_ARM_XY_M = _ARM_LENGTH_M / math.sqrt(2.0)

CRAZYFLIE_2X = QuadrotorParams(
    name="crazyflie_2x",
    mass_kg=0.0315,
    inertia_kgm2=(1.657171e-5, 1.6655602e-5, 2.9261652e-5),
    rotor_positions_m=(
        (_ARM_XY_M, -_ARM_XY_M, 0.0),  # M1 front right
        (-_ARM_XY_M, -_ARM_XY_M, 0.0),  # M2 back right
        (-_ARM_XY_M, _ARM_XY_M, 0.0),  # M3 back left
        (_ARM_XY_M, _ARM_XY_M, 0.0),  # M4 front left
    ),
    rotor_spin_directions=(1, -1, 1, -1),
    thrust_coefficient_n_per_rpm2=3.16e-10,
    torque_to_thrust_m=0.0069928948992470565,
    motor_time_constant_s=0.05,
    rpm_min=0.0,
    rpm_max=21702.0,
    collision_radius_m=0.065,
    body_height_m=0.025,
    linear_drag_coefficient_ns_per_m=(0.0, 0.0, 0.0),
    ground_effect_coefficient=11.36859,
    propeller_radius_m=0.0231348,
    max_tilt_rad=math.radians(35.0),
    max_speed_mps=2.0,
    sources={
        "mass_kg": "the middle of the airframes flown, 27 g (Bitcraze Crazyflie 2.1 datasheet, bare) to 36 g (CF_MASS 29 g of "
                   "crazyflie-firmware 2026.08 platform_defaults_cf2.h, plus a positioning deck and more); training draws "
                   "the whole range",
        "inertia_kgm2": "J. Förster, 'System Identification of the Crazyflie 2.0 Nano Quadrocopter', ETH Zurich 2015, Table 3.3",
        "rotor_positions_m": "92 mm motor-to-motor diagonal, Bitcraze datasheet; motor order from crazyflie-firmware",
        "rotor_spin_directions": "crazyflie-firmware power_distribution_quadrotor.c mixer signs",
        "thrust_coefficient_n_per_rpm2": "Eschmann et al., 'Learning to Fly in Seconds', 2023 (k_f = 3.16e-10 N/rpm^2); gym-pybullet-drones cf2x kf",
        "torque_to_thrust_m": "crazyflie-firmware 2026.08 src/platform/interface/platform_defaults_cf2.h THRUST2TORQUE, "
                              "CONFIG_CRAZYFLIE_21_PLUS (2.1+ propellers, PR #1526, since 2025.12.1); Förster 2015's "
                              "0.005964552 was the legacy propellers'",
        "motor_time_constant_s": "no single identification is published; 0.05 s lies inside the 0.02-0.15 s span used by published Crazyflie simulators, and training randomizes it over that span",
        "rpm_max": "Eschmann et al. 2023 (21702 rpm, thrust-to-weight about 2.25 as gym-pybullet-drones cf2x); sizes the "
                   "action spec's command range only: the rotors' limit is the firmware's PWM cap at the battery voltage "
                   "(robot_hrl/robots/crazyflie_2x/actuators.py)",
        "collision_radius_m": "92 mm diagonal plus 45 mm propellers, rounded up",
        "ground_effect_coefficient": "gym-pybullet-drones cf2x.urdf gnd_eff_coeff (after Shi et al., 'Neural Lander', 2019)",
        "propeller_radius_m": "gym-pybullet-drones cf2x.urdf prop_radius",
        "linear_drag_coefficient_ns_per_m": "disabled in the nominal model; randomized in training. gym-pybullet-drones drag_coeff_xy/z are per rad/s of rotor speed, not used as-is",
        "max_tilt_rad": "operating limit chosen for indoor flight, not a physical limit",
        "max_speed_mps": "operating limit chosen for indoor flight with the Flow deck / Lighthouse",
    },
)

"""One control step without resets or random draws: a pure function, so ``torch.compile``
(``PhysicsCfg.compile``) can fuse it into a few kernels.

action mapping → firmware mixer → decimation × physics substep → terminations → rewards.
Per-step scalars that change (curriculum values) come in as 0-dim tensors so that a compiled
graph is not re-specialized every step; configuration floats are compile-time constants.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from sim.envs import dynamics
from sim.envs.terms import rewards as rew_terms
from sim.envs.terms import terminations as term_terms


class StepConstants(NamedTuple):
    """Configuration floats of one environment (constants for the compiler)."""

    decimation: int
    physics_dt: float
    gravity: float
    rpm_min: float
    rpm_max: float
    max_rotor_thrust_n: float
    thrust_coefficient_nominal: float
    floor_z: float
    ground_friction: float
    contact_height: float
    terminate_on_ground_contact: bool
    out_of_bounds_distance_m: float
    ceiling_m: float
    position_tolerance_m: float
    speed_tolerance_mps: float
    position_coarse_weight: float
    position_coarse_scale_m: float
    position_fine_weight: float
    position_fine_scale_m: float
    velocity_weight: float
    angular_velocity_weight: float
    tilt_weight: float
    termination_weight: float


def control_step(
    c: StepConstants,
    pos: torch.Tensor, quat: torch.Tensor, vel: torch.Tensor, omega: torch.Tensor, rpm: torch.Tensor,
    goal: torch.Tensor, actions: torch.Tensor, applied: torch.Tensor, last_action: torch.Tensor,
    motor_alpha: torch.Tensor, kf: torch.Tensor, ktau: torch.Tensor, mass: torch.Tensor, inertia: torch.Tensor,
    force: torch.Tensor, torque: torch.Tensor,
    action_low: torch.Tensor, action_high: torch.Tensor, inverse_allocation_t: torch.Tensor,
    rotor_xy: torch.Tensor, spin: torch.Tensor, action_rate_weight: torch.Tensor,
):
    """Returns (pos, quat, vel, omega, rpm, crashed, out_of_bounds, distance, speed, within_tolerance, reward)."""
    wrench = dynamics.actions_to_wrench(applied, action_low, action_high)
    thrust_cmd = dynamics.mix_wrench_to_rotor_thrusts(wrench, inverse_allocation_t, c.max_rotor_thrust_n)
    rpm_cmd = dynamics.rotor_thrust_to_rpm(thrust_cmd, c.thrust_coefficient_nominal, c.rpm_min, c.rpm_max)
    touched = torch.zeros_like(pos[:, 0], dtype=torch.bool)
    for _ in range(c.decimation):
        pos, quat, vel, omega, rpm, contact = dynamics.physics_substep(
            pos, quat, vel, omega, rpm, rpm_cmd, motor_alpha, kf, ktau, mass, inertia, force, torque,
            rotor_xy, spin, c.physics_dt, c.gravity, c.rpm_min, c.rpm_max, c.floor_z, c.ground_friction,
        )
        touched = touched | contact
    # terminations
    crashed = term_terms.non_finite_state(pos, quat, vel, omega)
    if c.terminate_on_ground_contact:
        crashed = crashed | touched | term_terms.ground_contact(pos, c.contact_height)
    out = term_terms.out_of_bounds(pos, goal, c.out_of_bounds_distance_m, c.ceiling_m) & ~crashed
    terminated = crashed | out
    # rewards
    distance = torch.nan_to_num(torch.linalg.vector_norm(goal - pos, dim=-1), nan=1e3, posinf=1e3)
    r22 = 1.0 - 2.0 * (quat[:, 1].square() + quat[:, 2].square())
    r = c.position_coarse_weight * rew_terms.position_tanh(distance, c.position_coarse_scale_m)
    r = r + c.position_fine_weight * rew_terms.position_tanh(distance, c.position_fine_scale_m)
    r = r + c.velocity_weight * rew_terms.velocity_l2(vel).clamp(max=100.0)
    r = r + c.angular_velocity_weight * rew_terms.angular_velocity_l2(omega).clamp(max=1e4)
    r = r + c.tilt_weight * rew_terms.tilt(r22)
    r = r + action_rate_weight * rew_terms.action_rate_l2(actions, last_action)
    r = r + c.termination_weight * rew_terms.termination(terminated)
    reward = torch.nan_to_num(r, nan=0.0, posinf=0.0, neginf=0.0)
    speed = torch.linalg.vector_norm(vel, dim=-1)
    within = term_terms.success(distance, speed, c.position_tolerance_m, c.speed_tolerance_mps)
    return pos, quat, vel, omega, rpm, crashed, out, distance, speed, within, reward

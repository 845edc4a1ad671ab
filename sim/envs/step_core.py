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
from sim.envs.terms import observations as obs_terms
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


# ---- the fused (compiled) path --------------------------------------------------------------
# ``GotoEnv`` with ``PhysicsCfg.compile`` runs one control step as two compiled graphs around
# the (rare, eager) resets: ``fused_pre_reset`` (action sanitizing, latency buffer, the control
# step, termination bookkeeping) and ``fused_observations``. Random draws stay outside the
# graphs, made with the environment's generator in the same order as the eager path, so both
# paths consume the same random stream and agree to float tolerance.


class FusedConstants(NamedTuple):
    """Compile-time constants of the fused step beyond ``StepConstants``."""

    step: StepConstants
    max_episode_length: int
    latency: bool
    """Whether the action buffer holds more than the current action."""
    noise: bool
    """Whether observation noise is added to the policy group."""
    force_norm: float
    torque_norm: float
    motor_tau_norm: float
    term_names: tuple[str, ...]
    """The contract's observation terms, in order."""


def fused_pre_reset(
    f: FusedConstants,
    raw_actions: torch.Tensor, action_buffer: torch.Tensor, latency_steps: torch.Tensor,
    pos: torch.Tensor, quat: torch.Tensor, vel: torch.Tensor, omega: torch.Tensor, rpm: torch.Tensor,
    goal: torch.Tensor, last_action: torch.Tensor,
    motor_alpha: torch.Tensor, kf: torch.Tensor, ktau: torch.Tensor, mass: torch.Tensor, inertia: torch.Tensor,
    disturbance_force: torch.Tensor, disturbance_torque: torch.Tensor, dist_scale: torch.Tensor,
    action_low: torch.Tensor, action_high: torch.Tensor, inverse_allocation_t: torch.Tensor,
    rotor_xy: torch.Tensor, spin: torch.Tensor, action_rate_weight: torch.Tensor,
    episode_length: torch.Tensor, sq_error_sum: torch.Tensor,
):
    """Everything of ``GotoEnv.step`` before the resets, as one pure function (new tensors out)."""
    actions = torch.nan_to_num(raw_actions, nan=0.0, posinf=1.0, neginf=-1.0).clamp(-1.0, 1.0)
    if f.latency:
        action_buffer = torch.cat((actions.unsqueeze(1), action_buffer[:, :-1]), dim=1)
        applied = torch.gather(action_buffer, 1, latency_steps.view(-1, 1, 1).expand(-1, 1, action_buffer.shape[2])).squeeze(1)
    else:
        applied = actions
    force = disturbance_force * dist_scale
    torque = disturbance_torque * dist_scale
    pos, quat, vel, omega, rpm, crashed, out, distance, speed, within, reward = control_step(
        f.step, pos, quat, vel, omega, rpm, goal, actions, applied, last_action, motor_alpha, kf, ktau, mass, inertia,
        force, torque, action_low, action_high, inverse_allocation_t, rotor_xy, spin, action_rate_weight,
    )
    episode_length = episode_length + 1
    terminated = crashed | out
    time_out = term_terms.time_out(episode_length, f.max_episode_length) & ~terminated
    dones = terminated | time_out
    sq_error_sum = sq_error_sum + distance.square()
    success = within & time_out
    rms = torch.sqrt(sq_error_sum / episode_length.clamp(min=1).float())
    return (actions, action_buffer, pos, quat, vel, omega, rpm, crashed, out, distance, speed, reward,
            episode_length, time_out, dones, dones.long(), sq_error_sum, success, rms)


def fused_observations(
    f: FusedConstants,
    pos: torch.Tensor, quat: torch.Tensor, vel: torch.Tensor, omega: torch.Tensor, goal: torch.Tensor,
    actions: torch.Tensor, dones: torch.Tensor, noise: torch.Tensor | None,
    noise_std: torch.Tensor | None, obs_low: torch.Tensor, obs_high: torch.Tensor,
    mass_scale: torch.Tensor, inertia_scale: torch.Tensor, thrust_scale: torch.Tensor, torque_scale: torch.Tensor,
    motor_tau: torch.Tensor, latency_steps: torch.Tensor, disturbance_force: torch.Tensor, disturbance_torque: torch.Tensor,
    dist_scale: torch.Tensor, rpm: torch.Tensor,
):
    """The last action (zeroed where reset) and the policy and critic observation groups.

    The same terms, in the same order, as ``GotoEnv._compute_observations`` (the contract's).
    """
    last_action = torch.where(dones.unsqueeze(-1), torch.zeros_like(actions), actions)
    inputs = {
        "position_w": pos, "quat_wxyz": quat, "linear_velocity_w": vel, "angular_velocity_b": omega,
        "subgoal_w": goal, "last_action": last_action,
    }
    raw = torch.cat([obs_terms.OBSERVATION_TERMS[name](inputs) for name in f.term_names], dim=-1)
    clean = torch.maximum(torch.minimum(raw, obs_high), obs_low)
    if f.noise:
        noisy = raw + noise_std * noise
        policy = torch.maximum(torch.minimum(noisy, obs_high), obs_low)
    else:
        policy = clean
    privileged = torch.cat(
        (
            mass_scale - 1.0,
            inertia_scale - 1.0,
            thrust_scale - 1.0,
            torque_scale - 1.0,
            motor_tau / f.motor_tau_norm,
            latency_steps.float().unsqueeze(-1),
            disturbance_force * dist_scale / f.force_norm,
            disturbance_torque * dist_scale / f.torque_norm,
            rpm / f.step.rpm_max,
        ),
        dim=-1,
    )
    critic = torch.cat((clean, torch.nan_to_num(privileged)), dim=-1)
    return last_action, policy, critic

"""One control step without resets or random draws: a pure function, so ``torch.compile``
(``PhysicsCfg.compile``) can fuse it into a few kernels.

action mapping → firmware mixer → decimation × physics substep → terminations → rewards.
Per-step scalars that change (curriculum values) come in as 0-dim tensors so that a compiled
graph is not re-specialized every step; configuration floats are compile-time constants.
"""

from __future__ import annotations

import math
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
    reward = torch.where(torch.abs(r) < math.inf, r, 0.0)  # nan_to_num(nan=0, posinf=0, neginf=0)
    speed = torch.linalg.vector_norm(vel, dim=-1)
    within = term_terms.success(distance, speed, c.position_tolerance_m, c.speed_tolerance_mps)
    return pos, quat, vel, omega, rpm, crashed, out, distance, speed, within, reward



# ---- the fused (compiled) path --------------------------------------------------------------
# ``GotoEnv`` with ``PhysicsCfg.compile`` keeps its state structure-of-arrays: one (K, N) float
# tensor (``StateLayout``: each row one component over the N environments; the env's (N, 3)
# attributes are transposed views of it) and one (13, N) tensor of randomized parameters. A
# control step is ONE compiled graph, ``fused_control_step``: action sanitizing, latency buffer,
# mixer, motor lag, physics substeps, terminations, rewards, episode bookkeeping, the resets of
# finished environments and both observation groups. Every quantity inside it is an (N,) row, so
# inductor emits element-wise loops vectorized over the environments. The random numbers come from
# counter-based generators evaluated inside the graph (``counter_uniform``: a 32-bit integer hash
# of (key, counter)), not from the env's torch.Generator: torch.randn's Mersenne Twister costs
# ~10 ns per number, and drawing only for the finished environments would need their indices on
# the host (a dynamic shape and ~60 small eager ops per step). The resets therefore draw a fresh
# start state and parameters for EVERY environment each step (a pure function of the reset key
# and the environment's index) and keep them where an episode ended (``torch.where``): same
# distributions as the eager resets, a different random stream; the eager step gives the same
# numbers with ``GotoEnv(noise_stream="counter", reset_stream="counter")``.


class StateLayout(NamedTuple):
    """Rows of the structure-of-arrays state (K, N) and parameters (13, N)."""

    latency_slots: int
    """Slots of the action buffer (1 + maximum latency)."""

    POS = slice(0, 3)
    QUAT = slice(3, 7)
    VEL = slice(7, 10)
    OMEGA = slice(10, 13)
    RPM = slice(13, 17)
    GOAL = slice(17, 20)
    LAST_ACTION = slice(20, 24)
    SQ_ERROR = slice(24, 25)
    BUFFER_START = 25

    @property
    def rows(self) -> int:
        return self.BUFFER_START + 4 * self.latency_slots

    @property
    def buffer(self) -> slice:
        return slice(self.BUFFER_START, self.rows)

    # parameters: (key in GotoEnv.params, rows)
    PARAMS = (
        ("mass_scale", slice(0, 1)),
        ("inertia_scale", slice(1, 4)),
        ("thrust_coefficient_scale", slice(4, 5)),
        ("torque_coefficient_scale", slice(5, 6)),
        ("motor_time_constant_s", slice(6, 7)),
        ("disturbance_force_w", slice(7, 10)),
        ("disturbance_torque_b", slice(10, 13)),
    )
    PARAM_ROWS = 13


class ResetConstants(NamedTuple):
    """The distributions of a reset (``GotoEnv._reset_idx`` and ``randomization.sample_parameters``)."""

    randomize: bool
    """False: the nominal robot (all scales 1, nominal motor lag, no disturbance, no latency)."""
    mass_scale_range: tuple[float, float]
    inertia_scale_range: tuple[float, float]
    thrust_coefficient_scale_range: tuple[float, float]
    torque_coefficient_scale_range: tuple[float, float]
    motor_time_constant_range_s: tuple[float, float]
    """The range drawn from (log-uniform): the training range where configured, else the whole one."""
    nominal_motor_time_constant_s: float
    max_disturbance_force_n: float
    max_disturbance_torque_nm: float
    action_latency_steps_range: tuple[int, int]
    spawn_xy_half_extent_m: float
    spawn_height_range_m: tuple[float, float]
    max_initial_tilt_rad: float
    max_initial_speed_mps: float
    max_initial_body_rate_radps: float
    subgoal_radius_m: float
    min_goal_height_m: float
    gravity: float


class FusedConstants(NamedTuple):
    """Compile-time constants of the fused step beyond ``StepConstants``."""

    step: StepConstants
    reset: ResetConstants
    max_episode_length: int
    latency_slots: int
    """Slots of the action buffer (1: no latency)."""
    force_norm: float
    torque_norm: float
    motor_tau_norm: float
    term_names: tuple[str, ...]
    """The contract's observation terms, in order."""
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    inverse_allocation_t: tuple[tuple[float, ...], ...]
    rotor_xy: tuple[tuple[float, float], ...]
    spin: tuple[float, ...]
    mass_kg: float
    inertia_kgm2: tuple[float, float, float]
    thrust_coefficient: float
    torque_to_thrust_m: float
    obs_low: tuple[float, ...]
    obs_high: tuple[float, ...]
    noise_std: tuple[float, ...]
    """Per observation column; all 0: no noise."""


def _rows(t: torch.Tensor, sl: slice) -> tuple:
    return tuple(t[i] for i in range(sl.start, sl.stop))


class StepRows(NamedTuple):
    """``physics_rows``' result: the state rows after the step (before resets) and the step's values."""

    state: tuple
    """The new state rows in StateLayout order (last action, squared-error sum, action buffer included)."""
    episode_length: torch.Tensor
    reward: torch.Tensor
    dones: torch.Tensor
    time_out: torch.Tensor
    crashed: torch.Tensor
    out_of_bounds: torch.Tensor
    distance: torch.Tensor
    speed: torch.Tensor
    success: torch.Tensor
    rms: torch.Tensor


def physics_rows(
    f: FusedConstants, raw_actions: torch.Tensor, state: torch.Tensor, params: torch.Tensor,
    latency_steps: torch.Tensor, episode_length: torch.Tensor, dist_scale: torch.Tensor, action_rate_weight: torch.Tensor,
) -> StepRows:
    """Everything of ``GotoEnv.step`` before the resets, on the structure-of-arrays state.

    raw_actions: (4, N) rows (strided loads of an (N, 4) tensor stop inductor vectorizing).
    The new last action is already zeroed where an episode ends (as the resets do).
    """
    c, L = f.step, StateLayout
    raw = raw_actions
    # nan_to_num(nan=0, posinf=1, neginf=-1) then the clip, written with where/clamp: torch.isnan (inside
    # nan_to_num) has no vectorized inductor lowering and would fall back to a scalar loop
    actions = tuple(torch.where(raw[i] != raw[i], 0.0, raw[i]).clamp(-1.0, 1.0) for i in range(4))
    # action latency: buffer slot 0 is the newest action; the applied one is `latency` slots old
    slots = f.latency_slots
    old = _rows(state, slice(L.BUFFER_START, L.BUFFER_START + 4 * slots))
    buffer = actions + old[: 4 * (slots - 1)]
    applied = list(buffer[0:4])
    for s in range(1, slots):
        applied = [torch.where(latency_steps == s, buffer[4 * s + a], applied[a]) for a in range(4)]
    # per-environment parameters (GotoEnv._derive_parameters)
    mass = f.mass_kg * params[0]
    inertia = tuple(f.inertia_kgm2[i] * params[1 + i] for i in range(3))
    kf = f.thrust_coefficient * params[4]
    ktau = f.torque_to_thrust_m * params[5]
    motor_alpha = 1.0 - torch.exp(-c.physics_dt / params[6])
    force = tuple(params[7 + i] * dist_scale for i in range(3))
    torque = tuple(params[10 + i] * dist_scale for i in range(3))
    # firmware: normalized action -> wrench -> mixer (powerDistributionCap) -> rotor speed command
    wrench = [lo + (a.clamp(-1.0, 1.0) + 1.0) * 0.5 * (hi - lo) for a, lo, hi in zip(applied, f.action_low, f.action_high)]
    inv = f.inverse_allocation_t
    thrusts = [wrench[0] * inv[0][j] + wrench[1] * inv[1][j] + wrench[2] * inv[2][j] + wrench[3] * inv[3][j] for j in range(4)]
    overshoot = (torch.maximum(torch.maximum(thrusts[0], thrusts[1]), torch.maximum(thrusts[2], thrusts[3])) - c.max_rotor_thrust_n).clamp(min=0.0)
    rpm_cmd = tuple(
        torch.sqrt((t - overshoot).clamp(0.0, c.max_rotor_thrust_n).clamp(min=0.0) / c.thrust_coefficient_nominal).clamp(c.rpm_min, c.rpm_max)
        for t in thrusts
    )
    pos, quat, vel, omega, rpm = (_rows(state, sl) for sl in (L.POS, L.QUAT, L.VEL, L.OMEGA, L.RPM))
    goal, last_action = _rows(state, L.GOAL), _rows(state, L.LAST_ACTION)
    touched = None
    for _ in range(c.decimation):
        pos, quat, vel, omega, rpm, contact = dynamics.physics_substep_soa(
            pos, quat, vel, omega, rpm, rpm_cmd, motor_alpha, kf, ktau, mass, inertia, force, torque,
            f.rotor_xy, f.spin, c.physics_dt, c.gravity, c.rpm_min, c.rpm_max, c.floor_z, c.ground_friction,
        )
        touched = contact if touched is None else touched | contact
    # terminations (terms/terminations.py)
    finite = torch.isfinite(pos[0])
    for v in pos[1:] + quat + vel + omega:
        finite = finite & torch.isfinite(v)
    crashed = ~finite
    if c.terminate_on_ground_contact:
        crashed = crashed | touched | (pos[2] <= c.contact_height)
    err = tuple(g - p for g, p in zip(goal, pos))
    distance_raw = torch.sqrt(err[0] * err[0] + err[1] * err[1] + err[2] * err[2])
    out = ((distance_raw > c.out_of_bounds_distance_m) | (pos[2] > c.ceiling_m)) & ~crashed
    terminated = crashed | out
    # rewards (terms/rewards.py)
    distance = torch.where(distance_raw < math.inf, distance_raw, 1e3)  # nan_to_num(nan=1e3, posinf=1e3) of a norm
    r22 = 1.0 - 2.0 * (quat[1] * quat[1] + quat[2] * quat[2])
    speed_sq = vel[0] * vel[0] + vel[1] * vel[1] + vel[2] * vel[2]
    omega_sq = omega[0] * omega[0] + omega[1] * omega[1] + omega[2] * omega[2]
    da = [a - b for a, b in zip(actions, last_action)]
    rate = da[0] * da[0] + da[1] * da[1] + da[2] * da[2] + da[3] * da[3]
    r = c.position_coarse_weight * (1.0 - torch.tanh(distance / c.position_coarse_scale_m))
    r = r + c.position_fine_weight * (1.0 - torch.tanh(distance / c.position_fine_scale_m))
    r = r + c.velocity_weight * speed_sq.clamp(max=100.0)
    r = r + c.angular_velocity_weight * omega_sq.clamp(max=1e4)
    r = r + c.tilt_weight * (1.0 - r22)
    r = r + action_rate_weight * rate
    r = r + c.termination_weight * terminated.float()
    reward = torch.where(torch.abs(r) < math.inf, r, 0.0)  # nan_to_num(nan=0, posinf=0, neginf=0)
    speed = torch.sqrt(speed_sq)
    within = (distance < c.position_tolerance_m) & (speed < c.speed_tolerance_mps)
    # episode bookkeeping
    episode_length = episode_length + 1
    time_out = (episode_length >= f.max_episode_length) & ~terminated
    dones = terminated | time_out
    sq_error = state[L.SQ_ERROR.start] + distance * distance
    success = within & time_out
    rms = torch.sqrt(sq_error / episode_length.clamp(min=1).float())
    new_last = tuple(torch.where(dones, 0.0, a) for a in actions)
    rows = pos + quat + vel + omega + rpm + goal + new_last + (sq_error,) + buffer
    return StepRows(rows, episode_length, reward, dones, time_out, crashed, out, distance, speed, success, rms)


# counter-based random numbers: a 32-bit integer hash ("lowbias32", C. Wellons) of (per-draw key,
# counter), in int32 arithmetic (wrapping multiply, masked shifts for the logical right shift) so
# that inductor vectorizes it.
_M1 = 0x7FEB352D
_M2 = 0x846CA68B - (1 << 32)
_GOLDEN64 = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1
NOISE_STREAM, RESET_STREAM = 0, 1
"""``counter_key`` streams: observation noise, reset draws."""


def _hash32(x: torch.Tensor) -> torch.Tensor:
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _M1
    x = x ^ ((x >> 15) & 0x1FFFF)
    x = x * _M2
    return x ^ ((x >> 16) & 0xFFFF)


def counter_key(seed: int, draw: int, stream: int = NOISE_STREAM) -> int:
    """The int32 key of one draw of a stream (splitmix64 of seed, draw index and stream, low 32 bits, signed)."""
    z = (((seed & 0xFFFFFFFF) << 32 | (draw & 0xFFFFFFFF)) + (2 * stream + 1) * _GOLDEN64) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    z = (z ^ (z >> 31)) & 0xFFFFFFFF
    return z - (1 << 32) if z >= (1 << 31) else z


def noise_key(seed: int, draw: int) -> int:
    """The int32 key of one observation-noise draw (``counter_key`` of the noise stream)."""
    return counter_key(seed, draw, NOISE_STREAM)


def _unit_interval(counter: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Uniform floats in [0, 1) (24 bits, like torch.rand) from int32 counters and a key."""
    h = _hash32(_hash32(counter) ^ key)
    return ((h >> 8) & 0xFFFFFF).float() * (1.0 / 16777216.0)


def counter_gaussian(key: torch.Tensor, rows: int, n: int) -> torch.Tensor:
    """(rows, n) standard normal numbers, a pure function of the int32 ``key`` (0-dim tensor).

    Box-Muller on two 24-bit uniforms. Independent of the device and of compilation (to float
    rounding); rows must be even.
    """
    pairs = rows // 2
    counter = torch.arange(2 * pairs * n, dtype=torch.int32, device=key.device).view(pairs, n, 2)
    u = _unit_interval(counter, key) + (0.5 / 16777216.0)  # (0, 1)
    radius = torch.sqrt(-2.0 * torch.log(u[..., 0]))
    angle = (2.0 * math.pi) * u[..., 1]
    return torch.cat((radius * torch.cos(angle), radius * torch.sin(angle)), dim=0)


def noise_rows(noise_std: tuple[float, ...]) -> int:
    """Rows of ``counter_gaussian`` one observation draw needs (the noisy columns, rounded up to even)."""
    k = sum(1 for s in noise_std if s > 0.0)
    return k + (k % 2)


RESET_UNIFORMS = 29
"""Uniform numbers per environment and reset draw: 14 for the parameters, 15 for the start state."""


def _unit_vector(u_z: torch.Tensor, u_phi: torch.Tensor) -> tuple:
    """A direction uniform on the sphere from two uniforms (Archimedes: z uniform in [-1, 1], azimuth uniform),
    the distribution of the eager path's normalized Gaussian vector with two numbers instead of three."""
    z = 2.0 * u_z - 1.0
    phi = (2.0 * math.pi) * u_phi
    s = torch.sqrt((1.0 - z * z).clamp(min=0.0))
    return s * torch.cos(phi), s * torch.sin(phi), z


def reset_draws(f: FusedConstants, key: torch.Tensor, env_index: torch.Tensor, start_scale: torch.Tensor):
    """A fresh start state and parameters for the environments ``env_index`` (int32 (n,)), drawn from the
    counter-based stream ``key``: the distributions of ``GotoEnv._reset_idx`` (and sample_parameters).

    Draw j of environment e is uniform number ``e * RESET_UNIFORMS + j`` of the key, so an environment's
    draws do not depend on which others reset. Returns (state rows POS..GOAL (20), parameter rows (13),
    action latency steps (n,) long).
    """
    r = f.reset
    base = env_index * RESET_UNIFORMS

    def u(j: int) -> torch.Tensor:
        return _unit_interval(base + j, key)

    def between(j: int, lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * u(j)

    if r.randomize:
        tau_lo, tau_hi = r.motor_time_constant_range_s
        direction = _unit_vector(u(7), u(8))
        magnitude = between(9, 0.0, r.max_disturbance_force_n)
        lat_lo, lat_hi = r.action_latency_steps_range
        params = (
            (between(0, *r.mass_scale_range),)
            + tuple(between(1 + i, *r.inertia_scale_range) for i in range(3))
            + (between(4, *r.thrust_coefficient_scale_range), between(5, *r.torque_coefficient_scale_range))
            # log-uniform over the span: as many slow as fast motors in relative terms
            + (torch.exp(between(6, math.log(tau_lo), math.log(tau_hi))).clamp(tau_lo, tau_hi),)
            + tuple(d * magnitude for d in direction)
            + tuple(between(10 + i, -r.max_disturbance_torque_nm, r.max_disturbance_torque_nm) for i in range(3))
        )
        latency = (lat_lo + torch.floor(u(13) * (lat_hi - lat_lo + 1))).clamp(lat_lo, lat_hi).long()
    else:
        one = torch.ones_like(env_index, dtype=torch.float32)
        params = (one,) * 6 + (one * r.nominal_motor_time_constant_s,) + (one * 0.0,) * 6
        latency = torch.zeros_like(env_index, dtype=torch.long)
    pos = (between(14, -r.spawn_xy_half_extent_m, r.spawn_xy_half_extent_m),
           between(15, -r.spawn_xy_half_extent_m, r.spawn_xy_half_extent_m), between(16, *r.spawn_height_range_m))
    # attitude: random yaw, then a tilt of random size about a random horizontal axis:
    # quat_mul(quat_from_rotvec(tilt * (cos a, sin a, 0)), (cos yaw/2, 0, 0, sin yaw/2)) term by term
    half_yaw = 0.5 * between(17, -math.pi, math.pi)
    axis_angle = (2.0 * math.pi) * u(18)
    tilt = (r.max_initial_tilt_rad * start_scale) * u(19)
    rx, ry = torch.cos(axis_angle) * tilt, torch.sin(axis_angle) * tilt
    angle = torch.sqrt(rx * rx + ry * ry)
    small = angle < 1e-4
    k = torch.where(small, 0.5 - angle * angle / 48.0, torch.sin(0.5 * angle) / torch.where(small, 1.0, angle))
    aw, ax, ay = torch.cos(0.5 * angle), rx * k, ry * k
    bw, bz = torch.cos(half_yaw), torch.sin(half_yaw)
    quat = (aw * bw, ax * bw + ay * bz, ay * bw - ax * bz, aw * bz)
    speed = (r.max_initial_speed_mps * start_scale) * u(22)
    vel = tuple(d * speed for d in _unit_vector(u(20), u(21)))
    omega = tuple((2.0 * u(23 + i) - 1.0) * (r.max_initial_body_rate_radps * start_scale) for i in range(3))
    radius = r.subgoal_radius_m * u(26).pow(1.0 / 3.0)
    goal_dir = _unit_vector(u(27), u(28))
    goal = (pos[0] + goal_dir[0] * radius, pos[1] + goal_dir[1] * radius,
            (pos[2] + goal_dir[2] * radius).clamp(min=r.min_goal_height_m))
    hover = torch.sqrt((f.mass_kg * params[0]) * r.gravity / (4.0 * (f.thrust_coefficient * params[4])))
    return pos + quat + vel + omega + (hover,) * 4 + goal, params, latency


def observation_rows(
    f: FusedConstants, state: tuple, params: tuple, latency_steps: torch.Tensor, noise_key: torch.Tensor, dist_scale: torch.Tensor,
) -> tuple[list, list]:
    """The policy and critic observation columns (lists of (N,) rows) of the state and parameter rows.

    The same terms, in the same order, as ``GotoEnv._compute_observations`` (the contract's);
    noise (where ``noise_std`` > 0) from ``counter_gaussian(noise_key)``, added before the clip.
    """
    L = StateLayout
    inputs = {
        "position_w": state[L.POS], "quat_wxyz": state[L.QUAT], "linear_velocity_w": state[L.VEL],
        "angular_velocity_b": state[L.OMEGA], "subgoal_w": state[L.GOAL], "last_action": state[L.LAST_ACTION],
    }
    raw = [v for name in f.term_names for v in obs_terms.SOA_OBSERVATION_TERMS[name](inputs)]
    clean = [v.clamp(lo, hi) for v, lo, hi in zip(raw, f.obs_low, f.obs_high)]
    rows = noise_rows(f.noise_std)
    if rows:
        z = counter_gaussian(noise_key, rows, latency_steps.shape[0])
        policy, k = [], 0
        for v, lo, hi, std in zip(raw, f.obs_low, f.obs_high, f.noise_std):
            if std > 0.0:
                v = (v + std * z[k]).clamp(lo, hi)
                k += 1
            else:
                v = v.clamp(lo, hi)
            policy.append(v)
    else:
        policy = clean
    privileged = (
        [params[0] - 1.0, params[1] - 1.0, params[2] - 1.0, params[3] - 1.0, params[4] - 1.0, params[5] - 1.0,
         params[6] / f.motor_tau_norm, latency_steps.float()]
        + [v * dist_scale / f.force_norm for v in params[7:10]]
        + [v * dist_scale / f.torque_norm for v in params[10:13]]
        + [v / f.step.rpm_max for v in state[L.RPM]]
    )
    big = torch.finfo(torch.float32).max
    critic = clean + [torch.where(v != v, 0.0, v).clamp(-big, big) for v in privileged]  # nan_to_num
    return policy, critic


def observation_groups(policy: list, critic: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (N, 22) policy and (N, 40) critic tensors of observation columns, feature-major.

    One (62, N) buffer of rows (one vectorized loop over the environments); the groups are its
    transposed views, strides (1, N), not row-major copies. Every consumer reads them as they are:
    the first ``nn.Linear`` hands the transposed operand to BLAS, and rsl_rl's rollout storage and
    ``.contiguous()`` copy them. The tiled transposes to row-major copies cost ~8 % of the step at
    65536 environments (benchmarks/README.md), for a layout no consumer needs. The row buffer is
    returned too so that it stays one buffer.
    """
    rows_out = torch.stack(policy + critic, dim=0)
    k = len(policy)
    return rows_out[:k].t(), rows_out[k:].t(), rows_out


def observations_soa(
    f: FusedConstants, state: torch.Tensor, params: torch.Tensor, latency_steps: torch.Tensor, noise_key: torch.Tensor,
    dist_scale: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(policy, critic) of a structure-of-arrays state (after construction and ``reset()``; eager)."""
    policy, critic = observation_rows(f, tuple(state), tuple(params), latency_steps, noise_key, dist_scale)
    return observation_groups(policy, critic)[:2]


def fused_control_step(
    f: FusedConstants, actions: torch.Tensor, state: torch.Tensor, params: torch.Tensor,
    latency_steps: torch.Tensor, episode_length: torch.Tensor, scalars: torch.Tensor, keys: torch.Tensor,
):
    """One whole control step of ``GotoEnv`` on the structure-of-arrays state, resets included.

    actions: (N, 4) as the policy gives them (NaN/inf allowed). scalars: (disturbance scale of the step, action-rate weight, start-state scale of the resets,
    disturbance scale of the new observations); keys: int32 (noise key, reset key).
    Returns (state, params, latency steps, episode length after the resets, reward, dones, dones as
    long, time_out, crashed, out_of_bounds, distance, speed, success, rms, episode length at the end
    of the step, policy, critic, episode statistics, observation rows, action rows); the flags as uint8 0/1
    (``.view(torch.bool)`` makes them bool without a copy: inductor stores bool outputs lane by lane).
    The statistics are float sums over the finished episodes: (count, successes, crashes, out of
    bounds, final distance).
    """
    # (4, N) action rows, returned so that they stay one buffer written by one tiled transpose (~0.1 ms at
    # 65536 envs; the eager .t().contiguous() took 0.7 ms): read in place, the strided (N, 4) loads would
    # stop inductor vectorizing the physics loop
    action_rows = actions.t().contiguous()
    s = physics_rows(f, action_rows, state, params, latency_steps, episode_length, scalars[0], scalars[1])
    done = s.dones
    index = torch.arange(state.shape[1], dtype=torch.int32, device=state.device)
    fresh_state, fresh_params, fresh_latency = reset_draws(f, keys[1], index, scalars[2])
    n_fresh = len(fresh_state)  # rows POS..GOAL; the rest (last action, error sum, buffer) restart at 0
    new_state = tuple(torch.where(done, a, b) for a, b in zip(fresh_state, s.state[:n_fresh]))
    new_state = new_state + tuple(torch.where(done, 0.0, v) for v in s.state[n_fresh:])
    new_params = tuple(torch.where(done, a, b) for a, b in zip(fresh_params, tuple(params)))
    new_latency = torch.where(done, fresh_latency, latency_steps)
    policy, critic = observation_rows(f, new_state, new_params, new_latency, keys[0], scalars[3])
    policy_out, critic_out, obs_rows = observation_groups(policy, critic)
    zero = torch.zeros_like(s.distance)
    stats = torch.stack((done.float().sum(), s.success.float().sum(), s.crashed.float().sum(),
                         s.out_of_bounds.float().sum(), torch.where(done, s.distance, zero).sum()))
    u8 = torch.uint8
    return (torch.stack(new_state, dim=0), torch.stack(new_params, dim=0), new_latency,
            torch.where(done, 0, s.episode_length), s.reward, done.to(u8), done.long(), s.time_out.to(u8),
            s.crashed.to(u8), s.out_of_bounds.to(u8), s.distance, s.speed, s.success.to(u8), s.rms, s.episode_length,
            policy_out, critic_out, stats, obs_rows, action_rows)

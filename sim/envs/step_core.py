"""The control step of the crazyflie-goto environment, once, on a structure-of-arrays state.

``fused_control_step`` is ONE control step of every environment, resets and observations included:
action sanitizing, the latency buffer, the contract's action mapping, the robot's actuator chain
(``robot_hrl.robots.<robot>.actuators``), the rigid-body substeps (``dynamics``), terminations,
rewards, episode bookkeeping, the resets of finished environments and both observation groups. It
is a pure function of tensors, run by every step backend (``sim/envs/backends.py``): eagerly, as
one ``torch.compile``d graph, or as its C twin (``sim/envs/native``, which generates its chain,
layout, parameter draws and privileged columns from the same Python).

The state is one (K, N) float tensor (``layout.StateLayout``: each row one component over the N
environments) and the parameters one (P, N) tensor, so every quantity inside the step is an (N,)
row and inductor emits element-wise loops vectorized over the environments. The random numbers
come from counter-based generators evaluated inside the step (``counter_random``): a reset draws a
fresh start state for EVERY environment inside a compiled graph (a pure function of the reset key
and the environment's index, kept where an episode ended: no dynamic shape), and for the finished
environments only when eager; the numbers are the same.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from robot_hrl.robots.actuator_chain import state_columns, state_dict
from sim.envs import dynamics
from sim.envs.array_ops import TORCH
from sim.envs.counter_random import counter_gaussian, noise_rows, uniforms
from sim.envs.layout import LATENCY, PrivilegedContext, actuator_chain, param_specs, privileged_columns, unit_vector
from sim.envs.step_constants import FusedConstants
from sim.envs.terms import error_integral
from sim.envs.terms import observations as obs_terms


class StepTables(NamedTuple):
    """A robot's chain module and the tables built from it (``layout``)."""

    chain: object
    params: tuple
    privileged: tuple


_TABLES: dict[str, StepTables] = {}


def step_tables(robot: str) -> StepTables:
    """The actuator chain of robot ``robot`` and the tables built from it (once per chain module; plain dict
    lookups inside a compiled graph)."""
    chain = actuator_chain(robot)
    tables = _TABLES.get(chain.__name__)
    if tables is None or tables.chain is not chain:
        tables = _TABLES[chain.__name__] = StepTables(chain, param_specs(chain), privileged_columns(chain))
    return tables


def reset_uniforms(f: FusedConstants) -> int:
    """Uniform numbers per environment and reset draw: the parameters', the latency's, and 15 for the start state."""
    return sum(s.distribution.uniforms for s in step_tables(f.robot).params) + 1 + 15


def _rows(t, sl: slice) -> tuple:
    return tuple(t[i] for i in range(sl.start, sl.stop))


def param_columns(f: FusedConstants, params) -> dict:
    """The parameter rows by name: a column for a size-1 parameter, a tuple of columns for a larger one."""
    out = {}
    for name, start, size in f.layout.params:
        out[name] = params[start] if size == 1 else tuple(params[start + i] for i in range(size))
    return out


def _columns(v) -> tuple:
    return v if isinstance(v, tuple) else (v,)


def normalized_to_command(actions: tuple, low: tuple[float, ...], high: tuple[float, ...]) -> tuple:
    """The contract's action mapping on columns: a in [-1, 1] (clipped) -> low + (a + 1) (high - low) / 2
    (``robot_hrl.contract.actions_to_wrench``; tests/test_observation_parity.py)."""
    return tuple(lo + (a.clamp(-1.0, 1.0) + 1.0) * 0.5 * (hi - lo) for a, lo, hi in zip(actions, low, high))


class StepRows(NamedTuple):
    """``physics_rows``' result: the state rows after the step (before resets) and the step's values."""

    state: tuple
    """The new state rows in layout order (last action, squared-error sum, action buffer included)."""
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
    """Everything of the step before the resets, on the structure-of-arrays state.

    raw_actions: (A, N) rows (strided loads of an (N, A) tensor stop inductor vectorizing).
    The new last action is already zeroed where an episode ends (as the resets do).
    """
    c, L = f.step, f.layout
    chain = step_tables(f.robot).chain
    na = L.num_actions
    raw = raw_actions
    # nan_to_num(nan=0, posinf=1, neginf=-1) then the clip, written with where/clamp: torch.isnan (inside
    # nan_to_num) has no vectorized inductor lowering and would fall back to a scalar loop
    actions = tuple(torch.where(raw[i] != raw[i], 0.0, raw[i]).clamp(-1.0, 1.0) for i in range(na))
    # action latency: buffer slot 0 is the newest action; the applied one is `latency` slots old
    slots = L.latency_slots
    old = _rows(state, L.buffer)
    buffer = actions + old[: na * (slots - 1)]
    applied = list(buffer[0:na])
    for s in range(1, slots):
        applied = [torch.where(latency_steps == s, buffer[na * s + a], applied[a]) for a in range(na)]
    # per-environment parameters
    p = param_columns(f, params)
    mass = f.mass_kg * p["mass_scale"]
    inertia = tuple(f.inertia_kgm2[i] * p["inertia_scale"][i] for i in range(3))
    derived = chain.derive({n: p[n] for n in L.chain_params}, f.chain, c.physics_dt, TORCH)
    force = tuple(v * dist_scale for v in p["disturbance_force_w"])
    torque = tuple(v * dist_scale for v in p["disturbance_torque_b"])
    # the contract's action mapping (normalized -> command), then the firmware's and the motors' chain
    wrench = normalized_to_command(applied, f.action_low, f.action_high)
    chain_state = state_dict(chain.STATE, _rows(state, L.chain_state_rows))
    command = chain.command(wrench, chain_state, derived, f.chain, TORCH)
    pos, quat, vel, omega = (_rows(state, L.rows(n)) for n in ("position_w", "quat_wxyz", "linear_velocity_w", "angular_velocity_b"))
    goal, last_action = _rows(state, L.rows("goal_w")), _rows(state, L.rows("last_action"))
    # the position error's integral advances with the error the policy saw (the state before the physics)
    integral = error_integral.integral_step(_rows(state, L.rows("position_error_integral")),
                                            error_integral.integral_error(pos, quat, goal, c.integral_yaw_frame, c.integral_active_radius_sq_m2),
                                            c.integral_decay, c.integral_dt_s, c.integral_limit_m_s)
    touched = None
    for _ in range(c.decimation):
        sub = chain.substep(chain_state, command, derived, f.chain, TORCH)
        chain_state = sub.state
        pos, quat, vel, omega, contact = dynamics.rigid_body_substep(
            pos, quat, vel, omega, sub.thrust_n, sub.torque_b, mass, inertia, force, torque,
            c.physics_dt, c.gravity, c.floor_z, c.ground_friction,
        )
        touched = contact if touched is None else touched | contact
    # terminations (terms/terminations.py)
    finite = torch.isfinite(pos[0])
    for v in pos[1:] + quat + vel + omega:
        finite = finite & torch.isfinite(v)
    crashed = ~finite
    if c.terminate_on_ground_contact:
        crashed = crashed | touched | (pos[2] <= c.contact_height)
    err = tuple(g - q for g, q in zip(goal, pos))
    distance_raw = torch.sqrt(err[0] * err[0] + err[1] * err[1] + err[2] * err[2])
    out = ((distance_raw > c.out_of_bounds_distance_m) | (pos[2] > c.ceiling_m)) & ~crashed
    terminated = crashed | out
    # rewards (terms/rewards.py)
    distance = torch.where(distance_raw < math.inf, distance_raw, 1e3)  # nan_to_num(nan=1e3, posinf=1e3) of a norm
    r22 = 1.0 - 2.0 * (quat[1] * quat[1] + quat[2] * quat[2])
    speed_sq = vel[0] * vel[0] + vel[1] * vel[1] + vel[2] * vel[2]
    omega_sq = omega[0] * omega[0] + omega[1] * omega[1] + omega[2] * omega[2]
    da = [a - b for a, b in zip(actions, last_action)]
    rate = da[0] * da[0]
    for d in da[1:]:
        rate = rate + d * d
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
    sq_error = state[L.rows("sq_error_sum").start] + distance * distance
    success = within & time_out
    rms = torch.sqrt(sq_error / episode_length.clamp(min=1).float())
    new_last = tuple(torch.where(dones, 0.0, a) for a in actions)
    integral = tuple(torch.where(dones, 0.0, i) for i in integral)
    rows = pos + quat + vel + omega + state_columns(chain.STATE, chain_state) + goal + new_last + (sq_error,) + integral + buffer
    return StepRows(rows, episode_length, reward, dones, time_out, crashed, out, distance, speed, success, rms)


def reset_draws(f: FusedConstants, key: torch.Tensor, env_index: torch.Tensor, start_scale: torch.Tensor):
    """A fresh start state and parameters for the environments ``env_index`` (int32 (n,)), drawn from the
    counter-based stream ``key`` with the configured distributions.

    Draw j of environment e is uniform number ``e * reset_uniforms(f) + j`` of the key, so an environment's
    draws do not depend on which others reset: first the parameters (in row order, each taking as many
    uniforms as its distribution needs), then the action latency, then the start state. Returns (state rows
    of the body, the chain and the goal, parameter rows, action latency steps (n,) long).
    """
    r, L = f.reset, f.layout
    tables = step_tables(f.robot)
    count = reset_uniforms(f)
    u = uniforms(key, env_index * count, count)

    def between(j: int, lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * u(j)

    params: list = []
    j = 0
    one = torch.ones_like(env_index, dtype=torch.float32)
    for spec, bounds, nominal in zip(tables.params, r.param_bounds, r.param_nominal):
        if r.randomize:
            params += spec.distribution.draw(lambda i, j=j: u(j + i), *bounds, TORCH)
        else:
            params += [one * nominal] * spec.size
        j += spec.distribution.uniforms
    if r.randomize:
        lat_lo, lat_hi = r.action_latency_steps_range
        latency = (lat_lo + torch.floor(u(j) * (lat_hi - lat_lo + 1))).clamp(lat_lo, lat_hi).long()
    else:
        latency = torch.zeros_like(env_index, dtype=torch.long)
    j += 1
    pos = (between(j, -r.spawn_xy_half_extent_m, r.spawn_xy_half_extent_m),
           between(j + 1, -r.spawn_xy_half_extent_m, r.spawn_xy_half_extent_m), between(j + 2, *r.spawn_height_range_m))
    # attitude: random yaw, then a tilt of random size about a random horizontal axis:
    # quat_mul(quat_from_rotvec(tilt * (cos a, sin a, 0)), (cos yaw/2, 0, 0, sin yaw/2)) term by term
    half_yaw = 0.5 * between(j + 3, -math.pi, math.pi)
    axis_angle = (2.0 * math.pi) * u(j + 4)
    tilt = (r.max_initial_tilt_rad * start_scale) * u(j + 5)
    rx, ry = torch.cos(axis_angle) * tilt, torch.sin(axis_angle) * tilt
    angle = torch.sqrt(rx * rx + ry * ry)
    small = angle < 1e-4
    k = torch.where(small, 0.5 - angle * angle / 48.0, torch.sin(0.5 * angle) / torch.where(small, 1.0, angle))
    aw, ax, ay = torch.cos(0.5 * angle), rx * k, ry * k
    bw, bz = torch.cos(half_yaw), torch.sin(half_yaw)
    quat = (aw * bw, ax * bw + ay * bz, ay * bw - ax * bz, aw * bz)
    speed = (r.max_initial_speed_mps * start_scale) * u(j + 8)
    vel = tuple(d * speed for d in unit_vector(u(j + 6), u(j + 7), TORCH))
    omega = tuple((2.0 * u(j + 9 + i) - 1.0) * (r.max_initial_body_rate_radps * start_scale) for i in range(3))
    radius = r.subgoal_radius_m * u(j + 12).pow(1.0 / 3.0)
    goal_dir = unit_vector(u(j + 13), u(j + 14), TORCH)
    goal = (pos[0] + goal_dir[0] * radius, pos[1] + goal_dir[1] * radius,
            (pos[2] + goal_dir[2] * radius).clamp(min=r.min_goal_height_m))
    p = param_columns(f, params)
    chain = tables.chain
    derived = chain.derive({n: p[n] for n in L.chain_params}, f.chain, f.step.physics_dt, TORCH)
    weight = (f.mass_kg * p["mass_scale"]) * r.gravity
    chain_state = state_columns(chain.STATE, chain.initial_state(weight, derived, f.chain, TORCH))
    chain_state = tuple(v if isinstance(v, torch.Tensor) else torch.full_like(weight, v) for v in chain_state)  # (a number: every env)
    return pos + quat + vel + omega + chain_state + goal, tuple(params), latency


def observation_rows(
    f: FusedConstants, state: tuple, params: tuple, latency_steps: torch.Tensor, noise_key: torch.Tensor, dist_scale: torch.Tensor,
) -> tuple[list, list]:
    """The policy and critic observation columns (lists of (N,) rows) of the state and parameter rows.

    The contract's terms in order; noise (where ``noise_std`` > 0) from ``counter_gaussian(noise_key)``,
    added before the clip. The critic: the clean terms, then the privileged columns of the layout table.
    """
    L = f.layout
    inputs = {name: state[L.rows(key)] for name, key in (
        ("position_w", "position_w"), ("quat_wxyz", "quat_wxyz"), ("linear_velocity_w", "linear_velocity_w"),
        ("angular_velocity_b", "angular_velocity_b"), ("subgoal_w", "goal_w"), ("last_action", "last_action"),
        ("position_error_integral", "position_error_integral"))}
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
    tables = step_tables(f.robot)
    values = {**param_columns(f, params), LATENCY: latency_steps.float(),
              **state_dict(tables.chain.STATE, state[L.chain_state_rows.start:L.chain_state_rows.stop])}
    ctx = PrivilegedContext(dist_scale, f.force_norm, f.torque_norm, f.chain)
    privileged = [entry.normalize(v, ctx) for entry in tables.privileged for v in _columns(values[entry.source])]
    big = torch.finfo(torch.float32).max
    critic = clean + [torch.where(v != v, 0.0, v).clamp(-big, big) for v in privileged]  # nan_to_num
    return policy, critic


def observation_groups(policy: list, critic: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (N, 22) policy and (N, 40) critic tensors of observation columns, feature-major.

    One (62, N) buffer of rows (one vectorized loop over the environments); the groups are its
    transposed views, strides (1, N), not row-major copies. Every consumer reads them as they are:
    the first ``nn.Linear`` hands the transposed operand to BLAS, and rsl_rl's rollout storage and
    ``.contiguous()`` copy them (benchmarks/README.md: the row-major copies cost ~8 % of the step at
    65536 environments). The row buffer is returned too so that it stays one buffer.
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
    finished_only: bool = False,
):
    """One whole control step of every environment on the structure-of-arrays state, resets included.

    actions: (N, A) as the policy gives them (NaN/inf allowed). scalars: (disturbance scale of the step,
    action-rate weight, start-state scale of the resets, disturbance scale of the new observations); keys:
    int32 (noise key, reset key). ``finished_only`` (eager): draw the resets for the finished environments
    only (the same numbers; a compiled graph draws for all and keeps the finished ones' with ``where``).
    Returns (state, params, latency steps, episode length after the resets, reward, dones, dones as
    long, time_out, crashed, out_of_bounds, distance, speed, success, rms, episode length at the end
    of the step, policy, critic, episode statistics, observation rows, action rows); the flags as uint8 0/1
    (``.view(torch.bool)`` makes them bool without a copy: inductor stores bool outputs lane by lane).
    The statistics are float sums over the finished episodes: (count, successes, crashes, out of
    bounds, final distance).
    """
    # (A, N) action rows, returned so that they stay one buffer written by one tiled transpose (~0.1 ms at
    # 65536 envs; the eager .t().contiguous() took 0.7 ms): read in place, the strided (N, A) loads would
    # stop inductor vectorizing the physics loop
    action_rows = actions.t().contiguous()
    s = physics_rows(f, action_rows, state, params, latency_steps, episode_length, scalars[0], scalars[1])
    done = s.dones
    n_fresh = f.layout.reset_state_rows  # rows of the body, the chain and the goal; the rest restart at 0
    if finished_only:
        ids = done.nonzero().squeeze(-1)
        new_state = [v for v in s.state[:n_fresh]]
        new_params = list(params)
        new_latency = latency_steps
        if ids.numel():
            fresh_state, fresh_params, fresh_latency = reset_draws(f, keys[1], ids.to(torch.int32), scalars[2])
            new_state = [v.index_put((ids,), a) for v, a in zip(new_state, fresh_state)]
            new_params = [v.index_put((ids,), a) for v, a in zip(new_params, fresh_params)]
            new_latency = latency_steps.index_put((ids,), fresh_latency)
        new_state = tuple(new_state)
        new_params = tuple(new_params)
    else:
        index = torch.arange(state.shape[1], dtype=torch.int32, device=state.device)
        fresh_state, fresh_params, fresh_latency = reset_draws(f, keys[1], index, scalars[2])
        new_state = tuple(torch.where(done, a, b) for a, b in zip(fresh_state, s.state[:n_fresh]))
        new_params = tuple(torch.where(done, a, b) for a, b in zip(fresh_params, tuple(params)))
        new_latency = torch.where(done, fresh_latency, latency_steps)
    new_state = new_state + tuple(torch.where(done, 0.0, v) for v in s.state[n_fresh:])
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

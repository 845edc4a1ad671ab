"""The ``crazyflie-goto`` environment: a batched torch quadrotor that flies to a goal and holds it.

Implements rsl-rl-lib's ``VecEnv``: ``get_observations()`` returns a TensorDict with groups
``policy`` (the contract's 22 observations, noisy, clipped) and ``critic`` (the same terms
without noise, plus privileged information: the randomized parameters, the disturbances and
the rotor speeds). ``step()`` returns ``(obs, rewards, dones, extras)`` and resets finished
environments itself; ``extras["time_outs"]`` marks time-limit ends and ``extras["log"]``
carries episode statistics. ``extras["episode_end"]`` holds per-environment final values
(valid where ``dones``) for evaluation.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from robot_hrl.contract import GOTO_OBSERVATION_TERMS, goto_contract
from robot_hrl.errors import ConfigError
from robot_hrl.robots import get_robot
from sim.envs import curriculum as curriculum_terms
from sim.envs import dynamics
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.envs.math_utils import quat_from_rotvec, quat_mul
from sim.envs.randomization import sample_parameters
from sim.envs import step_core
from sim.envs.step_core import (
    NOISE_STREAM, RESET_STREAM, FusedConstants, ResetConstants, StateLayout, StepConstants, control_step, fused_control_step,
)
from sim.envs.terms import observations as obs_terms
from sim.envs.terms import terminations as term_terms

PRIVILEGED_SIZE = 18
"""mass, inertia (3), k_f, k_tau, motor tau, latency, force (3), torque (3), rotor speeds (4)."""


class _SoaView:
    """An (N, k) state attribute (``env.position_w``, ...): a plain tensor on the eager path; on the compiled
    path a view of rows of the structure-of-arrays state, made on access: the compiled step returns a new
    state tensor every step, and rebinding every view after each step cost ~40 us of Python per step.
    Indexed writes (``env.position_w[ids] = ...``) write through to the state."""

    def __init__(self, view):
        self.view = view

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, env, owner=None):
        if env is None:
            return self
        d = env.__dict__
        return d[self.name] if d.get("_state") is None else self.view(env)

    def __set__(self, env, value) -> None:
        env.__dict__[self.name] = value


def _rows_view(rows: slice) -> _SoaView:
    return _SoaView(lambda env: env._state[rows].t())


def _writable_state(method):
    """Run an env method outside ``torch.inference_mode`` even when its caller is inside it.

    rsl_rl steps the env in inference mode, and a tensor made there can never be updated in
    place outside it: the env's state (reassigned every step) would make a later ``reset()``,
    or an indexed write such as ``env.position_w[ids] = ...``, fail after an evaluation.
    Reading the policy's inference-mode actions is allowed; nothing here needs gradients.
    """

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with torch.inference_mode(False):
            return method(*args, **kwargs)

    return wrapper


class GotoEnv(VecEnv):
    """Batched quadrotor go-to-goal task on CPU or CUDA."""

    position_w = _rows_view(StateLayout.POS)
    quat_wxyz = _rows_view(StateLayout.QUAT)
    linear_velocity_w = _rows_view(StateLayout.VEL)
    angular_velocity_b = _rows_view(StateLayout.OMEGA)
    rotor_rpm = _rows_view(StateLayout.RPM)
    goal_w = _rows_view(StateLayout.GOAL)
    last_action = _rows_view(StateLayout.LAST_ACTION)
    _sq_error_sum = _SoaView(lambda env: env._state[StateLayout.SQ_ERROR.start])
    action_buffer = _SoaView(lambda env: env._state[StateLayout.BUFFER_START:].view(env._fused.latency_slots, 4, env.num_envs).permute(2, 0, 1))
    params = _SoaView(lambda env: {**{key: env._params_soa[rows].t() for key, rows in StateLayout.PARAMS},
                                   "action_latency_steps": env._latency})
    """Randomized parameters: (N, k) tensors by name, and "action_latency_steps" (N,) long."""

    def __init__(
        self, cfg: GotoEnvCfg | None = None, num_envs: int = 1024, device: str | torch.device = "cpu", seed: int | None = None,
        noise_stream: str | None = None, reset_stream: str | None = None,
    ):
        """``noise_stream``: where the observation noise comes from: ``"generator"`` (torch.randn on the env's
        generator, the eager default) or ``"counter"`` (``step_core.counter_gaussian``, keyed by the seed and a
        draw counter: the compiled default, see step_core). Both are N(0, std^2) per term; they differ in
        the random stream. ``reset_stream``: the same choice for the reset draws (start states, goals,
        parameters): ``"generator"`` (the eager default) or ``"counter"`` (``step_core.reset_draws``, one
        draw per step for every environment, kept where an episode ended: the compiled default). Both
        follow the configured distributions; with both "counter" the env's generator is not used and the
        eager step gives the compiled step's numbers."""
        self.cfg = (cfg or GotoEnvCfg()).validate()
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
            raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
        try:
            self.device = torch.device(device)
            torch.empty(0, device=self.device)
        except (RuntimeError, AssertionError) as exc:
            raise ConfigError(f"device {device!r} is not available ({exc}); use 'cpu' or an available 'cuda:N'") from None
        self.num_envs = int(num_envs)
        self.num_actions = 4
        self.robot = get_robot(self.cfg.robot)
        cmd = self.cfg.command
        self.contract = goto_contract(self.robot, cmd.control_rate_hz, cmd.subgoal_radius_m)
        self.observation_terms = GOTO_OBSERVATION_TERMS
        obs_terms.check_terms(self.observation_terms)
        self.step_dt = 1.0 / cmd.control_rate_hz
        self.decimation = int(round(self.cfg.physics.physics_rate_hz / cmd.control_rate_hz))
        self.physics_dt = self.step_dt / self.decimation
        self.max_episode_length = int(round(cmd.episode_length_s / self.step_dt))
        self.k = dynamics.RobotConstants.from_robot(self.robot, self.device)
        self.floor_z = self.cfg.physics.ground_height_m + self.robot.body_height_m / 2.0
        self.contact_height = self.floor_z + self.cfg.terminations.ground_contact_margin_m

        if seed is None:
            seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
        self.seed = int(seed)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed)

        n, dev = self.num_envs, self.device
        f32 = dict(dtype=torch.float32, device=dev)
        # true state
        self.position_w = torch.zeros((n, 3), **f32)
        self.quat_wxyz = torch.zeros((n, 4), **f32)
        self.quat_wxyz[:, 0] = 1.0
        self.linear_velocity_w = torch.zeros((n, 3), **f32)
        self.angular_velocity_b = torch.zeros((n, 3), **f32)
        self.rotor_rpm = torch.full((n, 4), self.k.hover_rpm, **f32)
        self.goal_w = torch.zeros((n, 3), **f32)
        self.last_action = torch.zeros((n, 4), **f32)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.common_step_counter = 0
        max_latency = int(self.cfg.randomization.action_latency_steps_range[1]) if self.cfg.randomization.enabled else 0
        self.action_buffer = torch.zeros((n, max_latency + 1, 4), **f32)
        self._sq_error_sum = torch.zeros(n, **f32)
        self.params = sample_parameters(self.cfg.randomization, n, self.generator, dev, self.k.motor_time_constant_s)
        self._derive_parameters()
        c, t, w = self.cfg, self.cfg.terminations, self.cfg.rewards
        self._constants = StepConstants(
            decimation=self.decimation, physics_dt=self.physics_dt, gravity=c.physics.gravity_mps2,
            rpm_min=self.k.rpm_min, rpm_max=self.k.rpm_max, max_rotor_thrust_n=self.k.max_rotor_thrust_n,
            thrust_coefficient_nominal=self.k.thrust_coefficient, floor_z=self.floor_z,
            ground_friction=c.physics.ground_friction, contact_height=self.contact_height,
            terminate_on_ground_contact=t.terminate_on_ground_contact, out_of_bounds_distance_m=t.out_of_bounds_distance_m,
            ceiling_m=t.ceiling_m, position_tolerance_m=c.success.position_tolerance_m,
            speed_tolerance_mps=c.success.speed_tolerance_mps, position_coarse_weight=w.position_coarse_weight,
            position_coarse_scale_m=w.position_coarse_scale_m, position_fine_weight=w.position_fine_weight,
            position_fine_scale_m=w.position_fine_scale_m, velocity_weight=w.velocity_weight,
            angular_velocity_weight=w.angular_velocity_weight, tilt_weight=w.tilt_weight,
            termination_weight=w.termination_weight,
        )
        self._core = control_step
        lows, highs, stds = [], [], []
        for term in self.observation_terms:
            lows += [term.clip[0]] * term.size
            highs += [term.clip[1]] * term.size
            stds += [float(getattr(self.cfg.randomization.observation_noise, term.name, 0.0))] * term.size
        self._obs_low = torch.tensor(lows, **f32)
        self._obs_high = torch.tensor(highs, **f32)
        self._noise_std = torch.tensor(stds, **f32) if self.cfg.randomization.enabled and any(stds) else None
        rcfg = c.randomization
        self.compiled = bool(c.physics.compile or c.physics.native)  # the structure-of-arrays step, as a graph or as C
        self._native: "NativeControlStep | None" = None
        self._native_views: dict[int, tuple] = {}  # buffer set of the native step -> (TensorDict, episode_end, time_out)
        self.noise_stream = _random_stream("noise_stream", noise_stream, self.compiled, "observation noise")
        self.reset_stream = _random_stream("reset_stream", reset_stream, self.compiled, "resets")
        self._draws = {NOISE_STREAM: 0, RESET_STREAM: 0}
        self._noise_columns = [i for i, s in enumerate(stds) if s > 0.0] if self._noise_std is not None else []
        k = self.k
        cmd = c.command
        self._fused = FusedConstants(
            step=self._constants,
            reset=ResetConstants(
                randomize=rcfg.enabled, mass_scale_range=tuple(rcfg.mass_scale_range), inertia_scale_range=tuple(rcfg.inertia_scale_range),
                thrust_coefficient_scale_range=tuple(rcfg.thrust_coefficient_scale_range),
                torque_coefficient_scale_range=tuple(rcfg.torque_coefficient_scale_range),
                motor_time_constant_range_s=tuple(rcfg.motor_time_constant_train_range_s or rcfg.motor_time_constant_range_s),
                nominal_motor_time_constant_s=float(self.k.motor_time_constant_s),
                max_disturbance_force_n=rcfg.max_disturbance_force_n, max_disturbance_torque_nm=rcfg.max_disturbance_torque_nm,
                action_latency_steps_range=tuple(int(v) for v in rcfg.action_latency_steps_range),
                spawn_xy_half_extent_m=cmd.spawn_xy_half_extent_m, spawn_height_range_m=tuple(cmd.spawn_height_range_m),
                max_initial_tilt_rad=cmd.max_initial_tilt_rad, max_initial_speed_mps=cmd.max_initial_speed_mps,
                max_initial_body_rate_radps=cmd.max_initial_body_rate_radps, subgoal_radius_m=cmd.subgoal_radius_m,
                min_goal_height_m=cmd.min_goal_height_m, gravity=c.physics.gravity_mps2,
            ),
            max_episode_length=self.max_episode_length, latency_slots=int(self.action_buffer.shape[1]),
            force_norm=max(rcfg.max_disturbance_force_n, 1e-9), torque_norm=max(rcfg.max_disturbance_torque_nm, 1e-12),
            motor_tau_norm=0.1, term_names=tuple(t.name for t in self.observation_terms),
            action_low=tuple(k.action_low.tolist()), action_high=tuple(k.action_high.tolist()),
            inverse_allocation_t=tuple(tuple(r) for r in k.inverse_allocation_t.tolist()),
            rotor_xy=tuple(tuple(r) for r in k.rotor_xy.tolist()), spin=tuple(k.spin.tolist()), mass_kg=float(k.mass_kg),
            inertia_kgm2=tuple(k.inertia_kgm2.tolist()), thrust_coefficient=float(k.thrust_coefficient),
            torque_to_thrust_m=float(k.torque_to_thrust_m), obs_low=tuple(lows), obs_high=tuple(highs),
            noise_std=tuple(stds) if self._noise_std is not None else (0.0,) * len(stds),
        )
        if self.compiled:
            missing = [t.name for t in self.observation_terms if t.name not in obs_terms.SOA_OBSERVATION_TERMS]
            if missing:
                raise ConfigError(f"the compiled step has no structure-of-arrays twin of observation term(s) {missing}; "
                                  "add them to SOA_OBSERVATION_TERMS in sim/envs/terms/observations.py")
            # structure-of-arrays state and parameters; the usual attributes become (N, k) views of them
            layout = StateLayout(int(self.action_buffer.shape[1]))
            soa_keys = {key for key, _ in layout.PARAMS} | {"action_latency_steps"}
            if set(self.params) != soa_keys:
                raise ConfigError(f"the compiled step stores the parameters {sorted(soa_keys)}; sample_parameters gives "
                                  f"{sorted(self.params)}: add the new ones to step_core.StateLayout.PARAMS")
            # (every row is written by the first reset below)
            self._params_soa = torch.zeros((layout.PARAM_ROWS, n), **f32)
            self._latency = torch.zeros(n, dtype=torch.long, device=dev)
            self._state = torch.zeros((layout.rows, n), **f32)
            if c.physics.native:  # the same step as C, built now (sim/envs/native)
                from sim.envs.native import NativeControlStep

                self._native = self._fused_control = NativeControlStep(self._fused, n, dev)
            else:
                # the whole control step, resets and observations included, as one fused graph (see step_core);
                # compiled on the first step
                self._fused_control = torch.compile(fused_control_step, dynamic=False, fullgraph=True)
        self._reset_idx(torch.arange(n, device=dev))
        self._obs = self._compute_observations()

    # ---- VecEnv ---------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        return self._obs

    @_writable_state
    def reset(self) -> TensorDict:
        """Reset every environment (new start states, goals and parameters); returns the observations."""
        self._reset_idx(torch.arange(self.num_envs, device=self.device))
        self._obs = self._compute_observations()
        return self._obs

    @_writable_state
    def step(self, actions) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        if self.compiled:
            return self._step_compiled(actions)
        actions = self._sanitize_actions(actions)
        # action latency: the applied action is the one from `latency` control steps ago
        if self.action_buffer.shape[1] > 1:
            self.action_buffer = torch.roll(self.action_buffer, shifts=1, dims=1)
            self.action_buffer[:, 0] = actions
            applied = self.action_buffer[torch.arange(self.num_envs, device=self.device), self.params["action_latency_steps"]]
        else:
            applied = actions
        progress = curriculum_terms.ramp_progress(self.cfg.curriculum, self.common_step_counter)
        dist_scale = curriculum_terms.ramp(self.cfg.curriculum.disturbance_scale, progress)
        action_rate_weight = self.cfg.rewards.action_rate_weight * curriculum_terms.ramp(self.cfg.curriculum.action_rate_weight_scale, progress)
        force = self.params["disturbance_force_w"] * dist_scale
        torque = self.params["disturbance_torque_b"] * dist_scale
        pos, quat, vel, omega, rpm, crashed, out, distance, speed, within, rewards = self._core(
            self._constants, self.position_w, self.quat_wxyz, self.linear_velocity_w, self.angular_velocity_b, self.rotor_rpm,
            self.goal_w, actions, applied, self.last_action, self._motor_alpha, self._kf, self._ktau, self._mass, self._inertia,
            force, torque, self.k.action_low, self.k.action_high, self.k.inverse_allocation_t, self.k.rotor_xy, self.k.spin,
            torch.tensor(action_rate_weight, dtype=torch.float32, device=self.device),
        )
        self.position_w, self.quat_wxyz, self.linear_velocity_w, self.angular_velocity_b, self.rotor_rpm = pos, quat, vel, omega, rpm
        self.episode_length_buf += 1
        self.common_step_counter += 1
        terminated = crashed | out
        time_out = term_terms.time_out(self.episode_length_buf, self.max_episode_length) & ~terminated
        dones = terminated | time_out
        self._sq_error_sum += distance.square()
        success = within & time_out
        rms = torch.sqrt(self._sq_error_sum / self.episode_length_buf.clamp(min=1).float())
        extras, done_ids = self._end_episodes(progress, dones, success, crashed, out, time_out, distance, speed, rms)
        self.last_action = actions
        if done_ids.numel() > 0:
            self.last_action = self.last_action.clone()
            self.last_action[done_ids] = 0.0
        self._obs = self._compute_observations()
        return self._obs, rewards, dones.long(), extras

    def _end_episodes(self, progress, dones, success, crashed, out, time_out, distance, speed, rms) -> tuple[dict, torch.Tensor]:
        """The step's extras (per-env episode-end values, episode logs) and the resets of finished
        environments; shared by the eager and the compiled step. Returns the extras and the reset ids."""
        episode_end = {
            "dones": dones.clone(),
            "success": success,
            "crashed": crashed,
            "out_of_bounds": out,
            "time_out": time_out,
            "final_position_error_m": distance,
            "final_speed_mps": speed,
            "rms_position_error_m": rms,
            "episode_length": self.episode_length_buf.clone(),
        }
        extras: dict = {"time_outs": time_out, "episode_end": episode_end, "log": {"/curriculum/progress": progress}}
        done_ids = dones.nonzero(as_tuple=False).squeeze(-1)
        if done_ids.numel() > 0:
            log = extras["log"]
            log["/episode/success_rate"] = success[done_ids].float().mean()
            log["/episode/crash_rate"] = crashed[done_ids].float().mean()
            log["/episode/out_of_bounds_rate"] = out[done_ids].float().mean()
            log["/episode/final_position_error_m"] = distance[done_ids].mean()
        self._reset_idx(done_ids)  # (with reset_stream="counter" every step consumes a reset draw)
        return extras, done_ids

    def _step_compiled(self, actions) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """``step`` as one fused graph (step_core.fused_control_step), or its C twin, on the structure-of-arrays
        state: the eager step's computation and random stream (with ``noise_stream="counter", reset_stream="counter"``)."""
        raw = self._check_actions(actions)
        cur, counter = self.cfg.curriculum, self.common_step_counter
        progress = curriculum_terms.ramp_progress(cur, counter)
        after = curriculum_terms.ramp_progress(cur, counter + 1)  # the resets and the new observations see the next step's
        scalars = (curriculum_terms.ramp(cur.disturbance_scale, progress),
                   self.cfg.rewards.action_rate_weight * curriculum_terms.ramp(cur.action_rate_weight_scale, progress),
                   curriculum_terms.ramp(cur.initial_state_scale, after), curriculum_terms.ramp(cur.disturbance_scale, after))
        keys = (self._next_key(NOISE_STREAM), self._next_key(RESET_STREAM))
        if self._native is not None:  # (numbers, not tensors: at 1024 envs the per-step Python work is as long as the C)
            slot, result = self._native.step_numbers(raw, self._state, self._params_soa, self._latency, self.episode_length_buf, scalars, keys)
        else:
            slot, result = None, self._fused_control(
                self._fused, raw, self._state, self._params_soa, self._latency, self.episode_length_buf,
                torch.tensor(scalars, dtype=torch.float32, device=self.device), torch.tensor(keys, dtype=torch.int32, device=self.device),
            )
        (self._state, self._params_soa, self._latency, self.episode_length_buf, rewards, dones, dones_long, time_out, crashed, out,
         distance, speed, success, rms, length, policy, critic, stats, *_) = result
        self.common_step_counter += 1
        views = self._native_views.get(slot) if slot is not None else None
        if views is None:  # the native step returns the same tensors from each of its two buffer sets: built once per set
            dones, time_out, crashed, out, success = (t.view(torch.bool) for t in (dones, time_out, crashed, out, success))
            episode_end = {
                "dones": dones, "success": success, "crashed": crashed, "out_of_bounds": out, "time_out": time_out,
                "final_position_error_m": distance, "final_speed_mps": speed, "rms_position_error_m": rms, "episode_length": length,
            }
            views = (self._observation_dict(policy, critic), episode_end, time_out)
            if slot is not None:
                self._native_views[slot] = views
        self._obs, episode_end, time_out = views
        log = {"/curriculum/progress": progress}
        count, successes, crashes, outs, distance_sum = stats.tolist()  # (CPU: no device synchronization)
        if count > 0:  # the eager step's means over the finished episodes
            log["/episode/success_rate"], log["/episode/crash_rate"] = successes / count, crashes / count
            log["/episode/out_of_bounds_rate"], log["/episode/final_position_error_m"] = outs / count, distance_sum / count
        return self._obs, rewards, dones_long, {"time_outs": time_out, "episode_end": dict(episode_end), "log": log}

    def _observation_dict(self, policy: torch.Tensor, critic: torch.Tensor) -> TensorDict:
        return TensorDict({"policy": policy, "critic": critic}, batch_size=[self.num_envs], device=self.device)

    def _next_key(self, stream: int) -> int:
        """The int32 key of the next draw of a counter-based stream (step_core.NOISE_STREAM, RESET_STREAM)."""
        key = step_core.counter_key(self.seed, self._draws[stream], stream)
        self._draws[stream] += 1
        return key

    # ---- internals ------------------------------------------------------------------------
    def _sanitize_actions(self, actions) -> torch.Tensor:
        """Accept any actions: tensors or arrays, NaN/inf replaced, clipped to [-1, 1]."""
        # NaN -> 0 (mid-range), +inf -> 1, -inf -> -1, then the contract's clip
        return torch.nan_to_num(self._check_actions(actions), nan=0.0, posinf=1.0, neginf=-1.0).clamp(-1.0, 1.0)

    def _check_actions(self, actions) -> torch.Tensor:
        """Actions as a float32 (num_envs, 4) tensor on the device, or a clear error."""
        try:
            a = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"actions must be a numeric tensor or array of shape ({self.num_envs}, 4); got {type(actions).__name__} ({exc})") from None
        if a.dim() == 1 and self.num_envs == 1 and a.shape[0] == self.num_actions:
            a = a.unsqueeze(0)
        if a.shape != (self.num_envs, self.num_actions):
            raise ValueError(
                f"actions must have shape ({self.num_envs}, {self.num_actions}) (num_envs, [thrust, tau_x, tau_y, tau_z] "
                f"normalized to [-1, 1]); got {tuple(a.shape)}"
            )
        return a

    def _derive_parameters(self) -> None:
        p, k = self.params, self.k
        self._mass = k.mass_kg * p["mass_scale"]
        self._inertia = k.inertia_kgm2 * p["inertia_scale"]
        self._kf = k.thrust_coefficient * p["thrust_coefficient_scale"]
        self._ktau = k.torque_to_thrust_m * p["torque_coefficient_scale"]
        self._motor_alpha = 1.0 - torch.exp(-self.physics_dt / p["motor_time_constant_s"])

    def _observation_inputs(self) -> dict[str, torch.Tensor]:
        return {
            "position_w": self.position_w,
            "quat_wxyz": self.quat_wxyz,
            "linear_velocity_w": self.linear_velocity_w,
            "angular_velocity_b": self.angular_velocity_b,
            "subgoal_w": self.goal_w,
            "last_action": self.last_action,
        }

    def _compute_observations(self) -> TensorDict:
        if self.compiled:  # after construction and reset(): eager
            progress = curriculum_terms.ramp_progress(self.cfg.curriculum, self.common_step_counter)
            scale = torch.tensor(curriculum_terms.ramp(self.cfg.curriculum.disturbance_scale, progress), device=self.device)
            key = torch.tensor(self._next_key(NOISE_STREAM), dtype=torch.int32, device=self.device)
            return self._observation_dict(*step_core.observations_soa(self._fused, self._state, self._params_soa, self._latency, key, scale))
        # one pass over the terms; noise (if any) is added before the per-term clip, as the contract says
        raw = torch.cat([obs_terms.OBSERVATION_TERMS[t.name](self._observation_inputs()) for t in self.observation_terms], dim=-1)
        clean = torch.maximum(torch.minimum(raw, self._obs_high), self._obs_low)
        if self._noise_std is not None:
            noisy = raw + self._noise_std * self._draw_noise(raw.shape)
            policy = torch.maximum(torch.minimum(noisy, self._obs_high), self._obs_low)
        else:
            policy = clean
        p = self.params
        rcfg = self.cfg.randomization
        progress = curriculum_terms.ramp_progress(self.cfg.curriculum, self.common_step_counter)
        dist_scale = curriculum_terms.ramp(self.cfg.curriculum.disturbance_scale, progress)
        privileged = torch.cat(
            (
                p["mass_scale"] - 1.0,
                p["inertia_scale"] - 1.0,
                p["thrust_coefficient_scale"] - 1.0,
                p["torque_coefficient_scale"] - 1.0,
                p["motor_time_constant_s"] / 0.1,
                p["action_latency_steps"].float().unsqueeze(-1),
                p["disturbance_force_w"] * dist_scale / max(rcfg.max_disturbance_force_n, 1e-9),
                p["disturbance_torque_b"] * dist_scale / max(rcfg.max_disturbance_torque_nm, 1e-12),
                self.rotor_rpm / self.k.rpm_max,
            ),
            dim=-1,
        )
        critic = torch.cat((clean, torch.nan_to_num(privileged)), dim=-1)
        return TensorDict({"policy": policy, "critic": critic}, batch_size=[self.num_envs], device=self.device)

    def _draw_noise(self, shape) -> torch.Tensor:
        """Standard normal observation noise (num_envs, terms) from the env's ``noise_stream``."""
        if self.noise_stream == "generator":
            return torch.randn(shape, generator=self.generator, device=self.device)
        # the compiled path's numbers: counter_gaussian rows for the noisy columns, zeros elsewhere
        cols = self._noise_columns
        key = torch.tensor(self._next_key(NOISE_STREAM), dtype=torch.int32, device=self.device)
        z = step_core.counter_gaussian(key, step_core.noise_rows(self._fused.noise_std), self.num_envs)
        noise = torch.zeros(shape, device=self.device)
        noise[:, cols] = z[: len(cols)].t()
        return noise

    def _reset_idx(self, ids: torch.Tensor) -> None:
        """New start states, goals and parameters for the environments ``ids`` (from the ``reset_stream``)."""
        key = self._next_key(RESET_STREAM) if self.reset_stream == "counter" else None  # one draw per call, even for none
        n = int(ids.numel())
        if n == 0:
            return
        progress = curriculum_terms.ramp_progress(self.cfg.curriculum, self.common_step_counter)
        start_scale = curriculum_terms.ramp(self.cfg.curriculum.initial_state_scale, progress)
        if key is None:
            state, params, latency = self._generator_reset_draws(n, start_scale)
        else:
            rows = step_core.reset_draws(
                self._fused, torch.tensor(key, dtype=torch.int32, device=self.device), ids.to(torch.int32),
                torch.tensor(start_scale, dtype=torch.float32, device=self.device),
            )
            state, params, latency = torch.stack(rows[0]), torch.stack(rows[1]), rows[2]
        self._write_reset(ids, state, params, latency)

    def _generator_reset_draws(self, n: int, start_scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The eager reset draws from the env's generator, in their historical order: (state rows POS..GOAL
        (20, n), parameter rows (13, n) in StateLayout.PARAMS order, action latency steps (n,))."""
        g, dev, cmd = self.generator, self.device, self.cfg.command

        def rand(*shape):
            return torch.rand(shape, generator=g, device=dev)

        new = sample_parameters(self.cfg.randomization, n, g, dev, self.k.motor_time_constant_s)
        pos = torch.empty((n, 3), device=dev)
        pos[:, :2] = (2.0 * rand(n, 2) - 1.0) * cmd.spawn_xy_half_extent_m
        lo, hi = cmd.spawn_height_range_m
        pos[:, 2] = lo + (hi - lo) * rand(n)
        # attitude: random yaw, then a tilt of random size about a random horizontal axis
        yaw = (2.0 * rand(n) - 1.0) * math.pi
        q_yaw = torch.stack((torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)), dim=-1)
        axis_angle = 2.0 * math.pi * rand(n)
        tilt = cmd.max_initial_tilt_rad * start_scale * rand(n)
        rotvec = torch.stack((torch.cos(axis_angle), torch.sin(axis_angle), torch.zeros_like(tilt)), dim=-1) * tilt.unsqueeze(-1)
        quat = quat_mul(quat_from_rotvec(rotvec), q_yaw)
        vel = _random_unit(n, g, dev) * (cmd.max_initial_speed_mps * start_scale * rand(n, 1))
        omega = (2.0 * rand(n, 3) - 1.0) * (cmd.max_initial_body_rate_radps * start_scale)
        radius = cmd.subgoal_radius_m * rand(n, 1).pow(1.0 / 3.0)
        goal = pos + _random_unit(n, g, dev) * radius
        goal[:, 2] = goal[:, 2].clamp(min=cmd.min_goal_height_m)
        mass = self.k.mass_kg * new["mass_scale"]
        kf = self.k.thrust_coefficient * new["thrust_coefficient_scale"]
        hover = torch.sqrt(mass * self.cfg.physics.gravity_mps2 / (4.0 * kf))
        state = torch.cat((pos.t(), quat.t(), vel.t(), omega.t(), hover.t().expand(4, n), goal.t()))
        params = torch.cat([new[key].t() for key, _ in StateLayout.PARAMS])
        return state, params, new["action_latency_steps"]

    def _write_reset(self, ids: torch.Tensor, state: torch.Tensor, params: torch.Tensor, latency: torch.Tensor) -> None:
        """Write reset draws (rows as ``_generator_reset_draws`` returns them) into environments ``ids``;
        last action, action buffer, error sum and episode length restart at 0."""
        L, n = StateLayout, int(ids.numel())
        self.episode_length_buf[ids] = 0
        if self.compiled:  # one indexed write of every state row (StateLayout order), zeros for the rest
            rest = torch.zeros((self._state.shape[0] - state.shape[0], n), device=self.device)
            self._state.index_copy_(1, ids, torch.cat((state, rest)))
            self._params_soa.index_copy_(1, ids, params)
            self._latency[ids] = latency
            return
        for key, rows in L.PARAMS:
            self.params[key][ids] = params[rows].t()
        self.params["action_latency_steps"][ids] = latency
        self._derive_parameters()
        self.position_w[ids] = state[L.POS].t()
        self.quat_wxyz[ids] = state[L.QUAT].t()
        self.linear_velocity_w[ids] = state[L.VEL].t()
        self.angular_velocity_b[ids] = state[L.OMEGA].t()
        self.goal_w[ids] = state[L.GOAL].t()
        self.rotor_rpm[ids] = state[L.RPM].t()
        self.last_action[ids] = 0.0
        self.action_buffer[ids] = 0.0
        self._sq_error_sum[ids] = 0.0


def _random_stream(name: str, value: str | None, compiled: bool, what: str) -> str:
    """Validate a random-stream choice: 'generator' (the env's torch.Generator, eager only) or 'counter'
    (the in-graph counter-based numbers); None picks the one the step path uses."""
    if value is None:
        return "counter" if compiled else "generator"
    if value not in ("generator", "counter"):
        raise ConfigError(f"{name} must be 'generator' or 'counter', got {value!r}")
    if compiled and value != "counter":
        raise ConfigError(f"the compiled step (physics.compile or physics.native) draws its {what} with {name}='counter'")
    return value


def _random_unit(n: int, g: torch.Generator, dev) -> torch.Tensor:
    v = torch.randn((n, 3), generator=g, device=dev)
    return v / torch.linalg.vector_norm(v, dim=-1, keepdim=True).clamp(min=1e-6)

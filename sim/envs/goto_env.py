"""The ``crazyflie-goto`` environment: a batched quadrotor that flies to a goal and holds it.

A facade implementing rsl-rl-lib's ``VecEnv`` over a step backend (``sim/envs/backends.py``: eager
torch, ``torch.compile``, native C), all running ``step_core.fused_control_step`` on one
structure-of-arrays state. ``get_observations()`` returns a TensorDict with groups ``policy`` (the
contract's observations, noisy, clipped) and ``critic`` (the same terms without noise, plus the
privileged columns of ``layout``: the randomized parameters, the disturbances and the actuator
chain's state). ``step()`` returns ``(obs, rewards, dones, extras)`` and resets finished
environments itself; ``extras["time_outs"]`` marks time-limit ends and ``extras["log"]`` carries
episode statistics. ``extras["episode_end"]`` holds per-environment final values (valid where
``dones``) for evaluation.

The state attributes (``position_w``, ``quat_wxyz``, ``linear_velocity_w``, ``angular_velocity_b``,
``rotor_rpm``, ``goal_w``, ``last_action``, ``action_buffer``, ``params``) are (N, k) views of the
state rows: indexed writes (``env.position_w[ids] = ...``) reach the next step.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from robot_hrl.errors import ConfigError
from robot_hrl.robots import get_robot
from sim.envs import curriculum as curriculum_terms
from sim.envs import step_core
from sim.envs.backends import StepBackend, backend_name, make_step_backend
from sim.envs.counter_random import NOISE_STREAM, RESET_STREAM, counter_key
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.envs.layout import LATENCY
from sim.envs.step_constants import fused_constants
from sim.envs.terms import observations as obs_terms


class _StateView:
    """An (N, k) state attribute: a view of rows of the structure-of-arrays state, made on access (the step
    returns a new state tensor every step). Assigning copies into the rows."""

    def __init__(self, view):
        self.view = view

    def __get__(self, env, owner=None):
        return self if env is None else self.view(env)

    def __set__(self, env, value) -> None:
        self.view(env)[...] = torch.as_tensor(value, dtype=torch.float32, device=env.device)


def _rows_view(name: str) -> _StateView:
    return _StateView(lambda env: env._state[env.layout.rows(name)].t())


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

    position_w = _rows_view("position_w")
    quat_wxyz = _rows_view("quat_wxyz")
    linear_velocity_w = _rows_view("linear_velocity_w")
    angular_velocity_b = _rows_view("angular_velocity_b")
    rotor_rpm = _rows_view("rotor_speed_rpm")
    goal_w = _rows_view("goal_w")
    last_action = _rows_view("last_action")
    position_error_integral = _rows_view("position_error_integral")
    """(N, 3) the position error's leaky integral, yaw frame, m s (robot_hrl.contract.error_integral)."""
    action_buffer = _StateView(lambda env: env._state[env.layout.buffer].view(env.layout.latency_slots, env.num_actions, env.num_envs)
                               .permute(2, 0, 1))
    """(N, slots, actions): slot 0 the newest action, slot s the one applied with latency s."""

    def __init__(self, cfg: GotoEnvCfg | None = None, num_envs: int = 1024, device: str | torch.device = "cpu", seed: int | None = None):
        self.cfg = (cfg or GotoEnvCfg()).validate()
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
            raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
        try:
            self.device = torch.device(device)
            torch.empty(0, device=self.device)
        except (RuntimeError, AssertionError) as exc:
            raise ConfigError(f"device {device!r} is not available ({exc}); use 'cpu' or an available 'cuda:N'") from None
        self.num_envs = int(num_envs)
        self.robot = get_robot(self.cfg.robot)
        cmd = self.cfg.command
        self.contract = self.cfg.contract(self.robot)
        self.observation_terms = self.contract.observations
        obs_terms.check_terms(self.observation_terms)
        missing = [t.name for t in self.observation_terms if t.name not in obs_terms.SOA_OBSERVATION_TERMS]
        if missing:
            raise ConfigError(f"the step has no structure-of-arrays twin of observation term(s) {missing}; "
                              "add them to SOA_OBSERVATION_TERMS in sim/envs/terms/observations.py")
        self._fused = f = fused_constants(self.cfg, self.robot, self.contract)
        self.layout = f.layout
        self.num_actions = f.layout.num_actions
        self.step_dt = 1.0 / cmd.control_rate_hz
        self.decimation = f.step.decimation
        self.physics_dt = f.step.physics_dt
        self.max_episode_length = f.max_episode_length
        self.floor_z = f.step.floor_z
        self.contact_height = f.step.contact_height
        self.action_low = torch.tensor(f.action_low, device=self.device)
        self.action_high = torch.tensor(f.action_high, device=self.device)
        """The contract's action bounds: the command at a = -1 and a = +1."""

        if seed is None:
            seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
        self.seed = int(seed)
        self._draws = {NOISE_STREAM: 0, RESET_STREAM: 0}
        n, dev = self.num_envs, self.device
        self.backend_name = backend_name(self.cfg.physics)
        self.backend: StepBackend = make_step_backend(self.cfg.physics, f, n, dev)
        self._views: dict[int, tuple] = {}  # buffer set of the native step -> (TensorDict, episode_end, time_out)
        # the structure-of-arrays state (every row is written by the first reset below)
        self._state = torch.zeros((f.layout.num_rows, n), dtype=torch.float32, device=dev)
        self._params_soa = torch.zeros((f.layout.num_params, n), dtype=torch.float32, device=dev)
        self._latency = torch.zeros(n, dtype=torch.long, device=dev)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.common_step_counter = 0
        self._reset_idx(torch.arange(n, device=dev))
        self._obs = self._compute_observations()

    @property
    def params(self) -> dict[str, torch.Tensor]:
        """Randomized parameters: (N, k) views by name (writes reach the next step), and "action_latency_steps" (N,) long."""
        return {**{name: self._params_soa[start:start + size].t() for name, start, size in self.layout.params}, LATENCY: self._latency}

    @property
    def privileged_size(self) -> int:
        """Columns of the critic group beyond the policy's."""
        return self.layout.privileged_size

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
        """One control step of every environment through the backend; finished environments are reset."""
        raw = self._check_actions(actions)
        cur, counter = self.cfg.curriculum, self.common_step_counter
        progress = curriculum_terms.ramp_progress(cur, counter)
        after = curriculum_terms.ramp_progress(cur, counter + 1)  # the resets and the new observations see the next step's
        scalars = (curriculum_terms.ramp(cur.disturbance_scale, progress),
                   self.cfg.rewards.action_rate_weight * curriculum_terms.ramp(cur.action_rate_weight_scale, progress),
                   curriculum_terms.ramp(cur.initial_state_scale, after), curriculum_terms.ramp(cur.disturbance_scale, after))
        keys = (self._next_key(NOISE_STREAM), self._next_key(RESET_STREAM))
        slot, result = self.backend.step(raw, self._state, self._params_soa, self._latency, self.episode_length_buf, scalars, keys)
        (self._state, self._params_soa, self._latency, self.episode_length_buf, rewards, dones, dones_long, time_out, crashed, out,
         distance, speed, success, rms, length, policy, critic, stats, *_) = result
        self.common_step_counter += 1
        views = self._views.get(slot) if slot is not None else None
        if views is None:  # the native step returns the same tensors from each of its two buffer sets: built once per set
            dones, time_out, crashed, out, success = (t.view(torch.bool) for t in (dones, time_out, crashed, out, success))
            episode_end = {
                "dones": dones, "success": success, "crashed": crashed, "out_of_bounds": out, "time_out": time_out,
                "final_position_error_m": distance, "final_speed_mps": speed, "rms_position_error_m": rms, "episode_length": length,
            }
            views = (self._observation_dict(policy, critic), episode_end, time_out)
            if slot is not None:
                self._views[slot] = views
        self._obs, episode_end, time_out = views
        log = {"/curriculum/progress": progress}
        count, successes, crashes, outs, distance_sum = stats.tolist()  # (CPU: no device synchronization)
        if count > 0:  # means over the finished episodes
            log["/episode/success_rate"], log["/episode/crash_rate"] = successes / count, crashes / count
            log["/episode/out_of_bounds_rate"], log["/episode/final_position_error_m"] = outs / count, distance_sum / count
        return self._obs, rewards, dones_long, {"time_outs": time_out, "episode_end": dict(episode_end), "log": log}

    # ---- internals ------------------------------------------------------------------------
    def _observation_dict(self, policy: torch.Tensor, critic: torch.Tensor) -> TensorDict:
        return TensorDict({"policy": policy, "critic": critic}, batch_size=[self.num_envs], device=self.device)

    def _next_key(self, stream: int) -> int:
        """The int32 key of the next draw of a counter-based stream (NOISE_STREAM, RESET_STREAM)."""
        key = counter_key(self.seed, self._draws[stream], stream)
        self._draws[stream] += 1
        return key

    def _check_actions(self, actions) -> torch.Tensor:
        """Actions as a float32 (num_envs, actions) tensor on the device, or a clear error (NaN and inf are the step's to handle)."""
        try:
            a = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"actions must be a numeric tensor or array of shape ({self.num_envs}, {self.num_actions}); "
                             f"got {type(actions).__name__} ({exc})") from None
        if a.dim() == 1 and self.num_envs == 1 and a.shape[0] == self.num_actions:
            a = a.unsqueeze(0)
        if a.shape != (self.num_envs, self.num_actions):
            names = ", ".join(t.name for t in self.contract.action.terms)
            raise ValueError(
                f"actions must have shape ({self.num_envs}, {self.num_actions}) (num_envs, [{names}] "
                f"normalized to [-1, 1]); got {tuple(a.shape)}"
            )
        return a

    def _compute_observations(self) -> TensorDict:
        """The observations of the current state (after construction and ``reset()``; eager)."""
        progress = curriculum_terms.ramp_progress(self.cfg.curriculum, self.common_step_counter)
        scale = torch.tensor(curriculum_terms.ramp(self.cfg.curriculum.disturbance_scale, progress), device=self.device)
        key = torch.tensor(self._next_key(NOISE_STREAM), dtype=torch.int32, device=self.device)
        return self._observation_dict(*step_core.observations_soa(self._fused, self._state, self._params_soa, self._latency, key, scale))

    def _reset_idx(self, ids: torch.Tensor) -> None:
        """New start states, goals and parameters for the environments ``ids`` (one reset-stream draw per call)."""
        key = self._next_key(RESET_STREAM)
        n = int(ids.numel())
        if n == 0:
            return
        progress = curriculum_terms.ramp_progress(self.cfg.curriculum, self.common_step_counter)
        start_scale = curriculum_terms.ramp(self.cfg.curriculum.initial_state_scale, progress)
        state, params, latency = step_core.reset_draws(
            self._fused, torch.tensor(key, dtype=torch.int32, device=self.device), ids.to(torch.int32),
            torch.tensor(start_scale, dtype=torch.float32, device=self.device),
        )
        # one indexed write of every drawn state row, zeros for the rest (last action, error sum, action buffer)
        state = torch.stack(state)
        rest = torch.zeros((self._state.shape[0] - state.shape[0], n), device=self.device)
        self.episode_length_buf[ids] = 0
        self._state.index_copy_(1, ids, torch.cat((state, rest)))
        self._params_soa.index_copy_(1, ids, torch.stack(params))
        self._latency[ids] = latency

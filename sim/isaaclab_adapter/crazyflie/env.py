"""The ``crazyflie-goto`` task inside Isaac Lab 3.0: ``Isaac-Crazyflie-Goto-Direct`` (direct workflow).

Isaac Lab (Newton, MuJoCo-Warp) integrates the rigid body; everything else is this project's, called,
not copied:

- the robot: ``robot_hrl.robots`` (``GotoEnvCfg.robot``), spawned from the USD generated from it (``usd.py``);
- the task's numbers: a ``GotoEnvCfg`` (``cfg.goto``: the dict of its overrides, as ``--env-cfg`` takes them):
  physics rate and control rate (Isaac Lab's ``sim.dt`` and ``decimation`` are derived from it), gravity,
  episode length, terminations, success, randomization, curriculum, rewards;
- the contract (``goto_contract``: the shipped model's), the action sanitizing, the action latency, the
  contract's action mapping and the firmware actuator chain of the robot, through the chain registry
  (``robot_hrl.robots.actuator_chain.chain_of``, via ``sim.envs.step_core.step_tables``): ``chain.command``
  once per control step, ``chain.substep`` once per physics step, whose thrust (body +z) and torque are set
  on the body with ``permanent_wrench_composer`` in ``_apply_action``, plus the episode's disturbance;
- the resets: ``sim.envs.step_core.reset_draws`` (start states, goals, per-airframe parameters and action
  latency from the same counter-based streams); the randomized mass and inertia are written to the body
  (``set_masses_index`` / ``set_inertias_index``);
- the observations: ``sim.envs.step_core.observation_rows`` (the contract's terms, their noise and clip;
  the critic's clean terms and privileged columns) on the same structure-of-arrays layout;
- terminations, rewards and success: ``sim/envs/terms`` with the ``GotoEnvCfg`` weights and tolerances.

Differences from the project's simulator (budgeted in tests/test_isaaclab_crazyflie.py's parity test):
MuJoCo's semi-implicit Euler and its quaternion integration instead of ``sim.envs.dynamics``; no floor
collider (the body cannot rest on the floor: touching it ends the episode in both, the floor is the
termination check at ``floor_z``); the project's floor friction therefore never acts.

Per-episode success for the evaluator: ``extras["episode_end"]`` (success, final position error, final
speed), and Isaac Lab's ``extras["log"]["Metrics/success_rate"]``.
"""

from __future__ import annotations


import torch
from isaaclab.envs import DirectRLEnv

from robot_hrl.robots import get_robot
from robot_hrl.robots.actuator_chain import state_columns, state_dict
from sim.envs import curriculum as curriculum_terms
from sim.envs import step_core
from sim.envs.array_ops import TORCH
from sim.envs.counter_random import NOISE_STREAM, RESET_STREAM, counter_key
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.envs.step_constants import fused_constants
from sim.envs.terms import error_integral
from sim.envs.terms import rewards as reward_terms
from sim.envs.terms import terminations as termination_terms
from sim.isaaclab_adapter.crazyflie.env_cfg import CrazyflieGotoEnvCfg, configure


def quat_xyzw(quat_wxyz: torch.Tensor) -> torch.Tensor:
    """(w, x, y, z) -> Isaac Lab 3.0's (x, y, z, w)."""
    return quat_wxyz[:, [1, 2, 3, 0]]


def quat_wxyz(quat_xyzw: torch.Tensor) -> torch.Tensor:
    """Isaac Lab 3.0's (x, y, z, w) -> this project's (w, x, y, z)."""
    return quat_xyzw[:, [3, 0, 1, 2]]


def rotate(q_wxyz: torch.Tensor, v: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """R(q) v (body to world), or R(q)^T v (world to body) with ``inverse``; (N, 4) and (N, 3)."""
    w, xyz = q_wxyz[:, :1], q_wxyz[:, 1:]
    if inverse:
        xyz = -xyz
    t = 2.0 * torch.linalg.cross(xyz, v, dim=-1)
    return v + w * t + torch.linalg.cross(xyz, t, dim=-1)


class CrazyflieGotoEnv(DirectRLEnv):
    """``crazyflie-goto`` on Isaac Lab's physics (see the module docstring)."""

    cfg: CrazyflieGotoEnvCfg

    def __init__(self, cfg: CrazyflieGotoEnvCfg, render_mode: str | None = None, **kwargs):
        self.goto: GotoEnvCfg = configure(cfg)  # sim.dt, decimation, episode length and the USD from the GotoEnvCfg
        self.quadrotor = get_robot(self.goto.robot)
        self.contract = self.goto.contract(self.quadrotor)
        self._fused = f = fused_constants(self.goto, self.quadrotor, self.contract)
        self.layout = f.layout
        self.chain = step_core.step_tables(f.robot).chain
        super().__init__(cfg, render_mode, **kwargs)
        self.robot = self.scene["robot"]
        self._body_ids = self.robot.find_bodies(cfg.body_name)[0]
        n, dev = self.num_envs, self.device
        self.seed_value = int(cfg.seed) if cfg.seed is not None else int(torch.randint(0, 2**31 - 1, (1,)).item())
        self._draws = {NOISE_STREAM: 0, RESET_STREAM: 0}
        self._state = torch.zeros((f.layout.num_rows, n), dtype=torch.float32, device=dev)
        self._params = torch.zeros((f.layout.num_params, n), dtype=torch.float32, device=dev)
        self._latency = torch.zeros(n, dtype=torch.long, device=dev)
        self._forces_b = torch.zeros((n, 1, 3), device=dev)
        self._torques_b = torch.zeros((n, 1, 3), device=dev)
        self._touched = torch.zeros(n, dtype=torch.bool, device=dev)
        self._substep = 0
        self._actions = tuple(torch.zeros(n, device=dev) for _ in range(f.layout.num_actions))
        self._nominal_mass = float(self.quadrotor.mass_kg)
        self.episode_end: dict[str, torch.Tensor] = {}

    # ---- the project's state rows ---------------------------------------------------------------------
    def _rows(self, name: str) -> torch.Tensor:
        return self._state[self.layout.rows(name)]

    def _sync_body(self) -> None:
        """The rigid-body rows from Isaac Lab's state: position (env frame), quaternion (w, x, y, z), world
        velocity, body rates."""
        d = self.robot.data
        self._rows("position_w")[:] = (d.root_pos_w.torch - self.scene.env_origins).t()
        self._rows("quat_wxyz")[:] = quat_wxyz(d.root_quat_w.torch).t()
        self._rows("linear_velocity_w")[:] = d.root_lin_vel_w.torch.t()
        self._rows("angular_velocity_b")[:] = d.root_ang_vel_b.torch.t()

    def _param_columns(self) -> dict:
        return step_core.param_columns(self._fused, tuple(self._params))

    def _scales(self) -> tuple[float, float, float]:
        """(start-state scale of resets, disturbance scale, action-rate weight) of the curriculum now."""
        cur = self.goto.curriculum
        progress = curriculum_terms.ramp_progress(cur, self.common_step_counter)
        return (curriculum_terms.ramp(cur.initial_state_scale, progress), curriculum_terms.ramp(cur.disturbance_scale, progress),
                self.goto.rewards.action_rate_weight * curriculum_terms.ramp(cur.action_rate_weight_scale, progress))

    def _next_key(self, stream: int) -> int:
        key = counter_key(self.seed_value, self._draws[stream], stream)
        self._draws[stream] += 1
        return key

    # ---- actions: latency, the contract's mapping, the firmware chain ------------------------------------
    def _pre_physics_step(self, actions: torch.Tensor) -> None:
        f, L = self._fused, self.layout
        na = L.num_actions
        raw = actions.to(self.device, torch.float32).t()
        self._actions = tuple(torch.where(raw[i] != raw[i], 0.0, raw[i]).clamp(-1.0, 1.0) for i in range(na))  # as step_core
        old = tuple(self._state[L.buffer].clone())  # (copies: the rows are overwritten below)
        buffer = self._actions + old[: na * (L.latency_slots - 1)]
        self._state[L.buffer] = torch.stack(buffer)
        applied = list(buffer[:na])
        for s in range(1, L.latency_slots):
            applied = [torch.where(self._latency == s, buffer[na * s + a], applied[a]) for a in range(na)]
        p = self._param_columns()
        self._derived = self.chain.derive({k: p[k] for k in L.chain_params}, f.chain, f.step.physics_dt, TORCH)
        wrench = step_core.normalized_to_command(tuple(applied), f.action_low, f.action_high)
        chain_state = state_dict(self.chain.STATE, tuple(self._state[L.chain_state_rows]))
        self._command = self.chain.command(wrench, chain_state, self._derived, f.chain, TORCH)
        _, dist_scale, _ = self._scales()
        self._force_ext_w = torch.stack([v * dist_scale for v in p["disturbance_force_w"]], dim=-1)
        self._torque_ext_b = torch.stack([v * dist_scale for v in p["disturbance_torque_b"]], dim=-1)
        # the position error's integral advances with the error the policy saw (as step_core.physics_rows; resets zero it)
        c = f.step
        integral = error_integral.integral_step(
            tuple(self._state[L.rows("position_error_integral")]),
            error_integral.integral_error(tuple(self._rows("position_w")), tuple(self._rows("quat_wxyz")), tuple(self._rows("goal_w")),
                                          c.integral_yaw_frame, c.integral_active_radius_sq_m2),
            c.integral_decay, c.integral_dt_s, c.integral_limit_m_s)
        self._state[L.rows("position_error_integral")] = torch.stack(integral)
        self._touched.zero_()
        self._substep = 0

    def _apply_action(self) -> None:
        f, L = self._fused, self.layout
        quat = quat_wxyz(self.robot.data.root_quat_w.torch)
        if self._substep > 0:  # the body after the previous physics step of this control step: did it touch the floor?
            z = self.robot.data.root_pos_w.torch[:, 2] - self.scene.env_origins[:, 2]
            self._touched |= z <= f.step.floor_z
        self._substep += 1
        chain_state = state_dict(self.chain.STATE, tuple(self._state[L.chain_state_rows]))
        sub = self.chain.substep(chain_state, self._command, self._derived, f.chain, TORCH)
        self._state[L.chain_state_rows] = torch.stack(state_columns(self.chain.STATE, sub.state))
        self._forces_b[:, 0] = rotate(quat, self._force_ext_w, inverse=True)  # the disturbance (world) in the body frame
        self._forces_b[:, 0, 2] += sub.thrust_n
        self._torques_b[:, 0] = torch.stack(tuple(sub.torque_b), dim=-1) + self._torque_ext_b
        self.robot.permanent_wrench_composer.set_forces_and_torques_index(
            forces=self._forces_b, torques=self._torques_b, body_ids=self._body_ids)

    # ---- terminations, rewards, success ---------------------------------------------------------------
    def _get_dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        f, c = self._fused, self._fused.step
        self._sync_body()
        pos, quat = self._rows("position_w").t(), self._rows("quat_wxyz").t()
        vel, omega = self._rows("linear_velocity_w").t(), self._rows("angular_velocity_b").t()
        goal = self._rows("goal_w").t()
        crashed = termination_terms.non_finite_state(pos, quat, vel, omega)
        if c.terminate_on_ground_contact:
            crashed = crashed | self._touched | termination_terms.ground_contact(pos, c.contact_height)
        out = termination_terms.out_of_bounds(pos, goal, c.out_of_bounds_distance_m, c.ceiling_m) & ~crashed
        terminated = crashed | out
        time_out = termination_terms.time_out(self.episode_length_buf, f.max_episode_length) & ~terminated
        distance = torch.linalg.vector_norm(goal - pos, dim=-1).nan_to_num(nan=1e3, posinf=1e3)
        speed = torch.linalg.vector_norm(vel, dim=-1)
        sq_error = self._rows("sq_error_sum")[0] + distance * distance
        self._rows("sq_error_sum")[0] = sq_error
        success = termination_terms.success(distance, speed, c.position_tolerance_m, c.speed_tolerance_mps) & time_out
        length = self.episode_length_buf.clamp(min=1).float()
        self._terminated, self._distance, self._speed = terminated, distance, speed
        self.episode_end = {"success": success, "crashed": crashed, "out_of_bounds": out, "time_out": time_out,
                            "final_position_error_m": distance, "final_speed_mps": speed,
                            "rms_position_error_m": torch.sqrt(sq_error / length)}
        self.extras["episode_end"] = self.episode_end
        done = terminated | time_out
        if bool(done.any()):
            self.extras.setdefault("log", {})["Metrics/success_rate"] = success[done].float().mean()
        return terminated, time_out

    def _get_rewards(self) -> torch.Tensor:
        c = self._fused.step
        vel, omega = self._rows("linear_velocity_w").t(), self._rows("angular_velocity_b").t()
        quat = self._rows("quat_wxyz")
        r22 = 1.0 - 2.0 * (quat[1] * quat[1] + quat[2] * quat[2])
        actions = torch.stack(self._actions, dim=-1)
        _, _, action_rate_weight = self._scales()
        r = c.position_coarse_weight * reward_terms.position_tanh(self._distance, c.position_coarse_scale_m)
        r = r + c.position_fine_weight * reward_terms.position_tanh(self._distance, c.position_fine_scale_m)
        r = r + c.velocity_weight * reward_terms.velocity_l2(vel).clamp(max=100.0)
        r = r + c.angular_velocity_weight * reward_terms.angular_velocity_l2(omega).clamp(max=1e4)
        r = r + c.tilt_weight * reward_terms.tilt(r22)
        r = r + action_rate_weight * reward_terms.action_rate_l2(actions, self._rows("last_action").t())
        r = r + c.termination_weight * reward_terms.termination(self._terminated)
        self._rows("last_action")[:] = torch.stack(self._actions)  # (the resets below zero it where an episode ends)
        return torch.nan_to_num(r, nan=0.0, posinf=0.0, neginf=0.0)

    # ---- resets ---------------------------------------------------------------------------------------
    def _reset_idx(self, env_ids) -> None:
        super()._reset_idx(env_ids)
        ids = torch.as_tensor(env_ids, device=self.device).long()
        key = self._next_key(RESET_STREAM)
        if ids.numel() == 0:
            return
        start_scale, _, _ = self._scales()
        f = self._fused
        state, params, latency = step_core.reset_draws(
            f, torch.tensor(key, dtype=torch.int32, device=self.device), ids.to(torch.int32),
            torch.tensor(start_scale, dtype=torch.float32, device=self.device))
        state = torch.stack(state)
        rest = torch.zeros((self._state.shape[0] - state.shape[0], ids.numel()), device=self.device)
        self._state.index_copy_(1, ids, torch.cat((state, rest)))
        self._params.index_copy_(1, ids, torch.stack(params))
        self._latency[ids] = latency
        self._write_body(ids)

    def _write_body(self, ids: torch.Tensor) -> None:
        """Write the state rows of the body (and the airframe's mass and inertia) of envs ``ids`` to the simulation."""
        rows = self._state[:, ids]
        L = self.layout
        pos, quat = rows[L.rows("position_w")].t(), rows[L.rows("quat_wxyz")].t()
        vel, omega_b = rows[L.rows("linear_velocity_w")].t(), rows[L.rows("angular_velocity_b")].t()
        pose = torch.cat((pos + self.scene.env_origins[ids], quat_xyzw(quat)), dim=-1)
        self.robot.write_root_pose_to_sim_index(root_pose=pose, env_ids=ids)
        self.robot.write_root_velocity_to_sim_index(root_velocity=torch.cat((vel, rotate(quat, omega_b)), dim=-1), env_ids=ids)
        p = step_core.param_columns(self._fused, tuple(self._params[:, ids]))
        mass = (self._nominal_mass * p["mass_scale"]).reshape(-1, 1)
        inertia = torch.zeros((ids.numel(), 1, 9), device=self.device)
        for i in range(3):
            inertia[:, 0, 4 * i] = self._fused.inertia_kgm2[i] * p["inertia_scale"][i]
        self.robot.set_masses_index(masses=mass.contiguous(), body_ids=self._body_ids, env_ids=ids)
        self.robot.set_inertias_index(inertias=inertia, body_ids=self._body_ids, env_ids=ids)

    def write_state(self, env_ids, position_w, quat_wxyz_, linear_velocity_w, angular_velocity_b, goal_w=None, chain_state=None) -> None:
        """Put envs ``env_ids`` into the given state (this project's conventions: env-frame position, (w, x, y, z),
        world velocity, body rates), e.g. to start the same states as the project's simulator. ``chain_state``:
        the chain's state rows (N_ids, rows), default the airframe's hover (``chain.initial_state``)."""
        ids = torch.as_tensor(env_ids, device=self.device).long()
        L = self.layout
        for name, value in (("position_w", position_w), ("quat_wxyz", quat_wxyz_), ("linear_velocity_w", linear_velocity_w),
                            ("angular_velocity_b", angular_velocity_b), ("goal_w", goal_w)):
            if value is not None:
                self._state[L.rows(name), ids] = torch.as_tensor(value, dtype=torch.float32, device=self.device).t()
        if chain_state is not None:
            self._state[L.chain_state_rows, ids] = torch.as_tensor(chain_state, dtype=torch.float32, device=self.device).t()
        self._write_body(ids)
        self.robot.permanent_wrench_composer.reset()
        self.scene.update(dt=0.0)

    # ---- observations ---------------------------------------------------------------------------------
    def _get_observations(self) -> dict:
        self._sync_body()
        _, dist_scale, _ = self._scales()
        key = torch.tensor(self._next_key(NOISE_STREAM), dtype=torch.int32, device=self.device)
        policy, critic = step_core.observation_rows(self._fused, tuple(self._state), tuple(self._params), self._latency, key,
                                                    torch.tensor(dist_scale, device=self.device))
        policy, critic, _ = step_core.observation_groups(policy, critic)
        return {"policy": policy.contiguous(), "critic": critic.contiguous()}

    # ---- the contract -----------------------------------------------------------------------------------
    def policy_contract(self):
        """The task's policy contract: the project's go-to contract of the robot (the shipped model's); the
        adapter's contract generator (``sim/isaaclab_adapter/contract.py``) returns it."""
        return self.contract

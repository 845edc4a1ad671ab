"""The low level of the navigation environment: the goto environment's physics flown by a frozen goto skill.

Everything the navigation environment asks of ``GotoEnv`` goes through this one class, so a change
of the goto environment (step backends, the actuator chain) is a change here only. What it uses of
``GotoEnv``: its constructor and config, ``step(actions)`` (the returned ``dones`` are the goto
environment's own crash ends: ground contact), and the state attributes ``position_w``,
``quat_wxyz``, ``linear_velocity_w``, ``angular_velocity_b``, ``rotor_rpm``, ``goal_w``,
``last_action`` and ``episode_length_buf`` (indexed writes go through to the state on every
step backend). Its own time-outs and out-of-bounds ends are switched off; the navigation
environment ends episodes.

The skill's observation is built from the SKILL'S contract (its ordered terms, with the torch
twins of ``sim/envs/terms/observations.py`` and the goto environment's noise per term), so a
skill with other terms runs as long as the simulator implements them (the skill's contract is
checked against the robot and rate first). When the skill's terms are exactly the goto
environment's own (today's skill), the observation the goto step returns is the same function of
the same state and is reused between subgoal changes (one full build per decision, then the
step's own; tests/test_navigate_env.py checks the two agree).
"""

from __future__ import annotations

import dataclasses

import torch

from robot_hrl.errors import ConfigError, ContractError
from sim.envs.frozen_skill import FrozenSkill
from sim.envs.goto_env import GotoEnv
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.envs.terms import observations as obs_terms
from sim.envs.terms.navigate_observations import yaw_from_quat

NEVER_M = 1.0e6
"""Distance/time standing for 'never' in the goto environment's own termination settings."""


def _native_available() -> bool:
    import shutil

    return shutil.which("gcc") is not None or shutil.which("cc") is not None


class SkillDrivenQuadrotor:
    """N quadrotors, each flown to its subgoal by the frozen skill."""

    def __init__(self, skill: FrozenSkill, num_envs: int, device: str | torch.device = "cpu", seed: int = 0,
                 randomize: bool = True, native: bool | None = None, episode_length_s: float = 1.0e4,
                 randomization: dict | None = None):
        cfg = GotoEnvCfg()
        cfg.randomization.enabled = bool(randomize)
        for name, value in (randomization or {}).items():  # (validate() below checks the ranges)
            if not hasattr(cfg.randomization, name):
                raise ConfigError(f"randomization override {name!r}: the goto environment has no such range "
                                    f"(sim/envs/goto_env_cfg.py)")
            setattr(cfg.randomization, name, tuple(value) if isinstance(value, list) else value)
        cfg.randomization.motor_time_constant_train_range_s = None
        cfg.curriculum.enabled = False
        cfg.command.episode_length_s = float(episode_length_s)
        cfg.command.subgoal_radius_m = skill.contract.subgoal_radius_m
        cfg.command.control_rate_hz = skill.contract.control_rate_hz
        cfg.terminations.out_of_bounds_distance_m = NEVER_M
        cfg.terminations.ceiling_m = NEVER_M
        cfg.physics.native = _native_available() if native is None and str(device) == "cpu" else bool(native)
        # a skill that observes the position error's integral: the goto step keeps it (a state row)
        integral = next((t.integral for t in skill.contract.observations if t.integral is not None), None)
        cfg.command.observe_error_integral = integral is not None
        cfg.command.error_integral = None if integral is None else integral.model_dump()  # the skill's own parameters
        self.subgoal_change_m = None if integral is None else integral.subgoal_change_m
        self.env = GotoEnv(cfg.validate(), num_envs=num_envs, device=device, seed=seed)
        self.skill = skill.to(device)
        problems = skill.contract.mismatches(self.env.robot, control_rate_hz=self.env.contract.control_rate_hz)
        if skill.contract.action != self.env.contract.action:
            problems.append("action mapping: the skill's contract maps actions differently from the simulator's robot")
        simulated = next((t.integral for t in self.env.contract.observations if t.integral is not None), None)
        if integral != simulated:
            problems.append(f"position error integral: the skill's is {integral}, the simulator keeps {simulated} "
                            "(robot_hrl.contract.GOTO_ERROR_INTEGRAL); export the skill with the simulator's parameters")
        if problems:
            raise ContractError(f"the skill {skill.path.name} does not fit the simulated robot: " + "; ".join(problems))
        obs_terms.check_terms(skill.contract.observations)
        self.terms = skill.contract.observations
        noise = cfg.randomization.observation_noise
        self.noise_std = {f.name: float(getattr(noise, f.name)) for f in dataclasses.fields(noise)} if randomize else None
        self.generator = torch.Generator(device=device).manual_seed(seed + 1)
        self.num_envs, self.device = int(num_envs), torch.device(device)
        self.step_dt_s = self.env.step_dt
        self.skill_last_action = torch.zeros((num_envs, skill.action_size), device=device)
        self.robot = self.env.robot
        self.reuse_env_observation = tuple(self.terms) == tuple(self.env.observation_terms)
        self._env_obs: torch.Tensor | None = None
        self.heading = None
        """The yaw loop under the skill (robot_hrl.runtime.heading.HeadingLoop: it owns the yaw torque), or None."""

    def set_heading(self, spec) -> None:
        """Fly with the heading loop of ``spec`` (a navigate contract's HeadingSpec; None: without one)."""
        from types import SimpleNamespace

        from robot_hrl.runtime.heading import heading_loop

        loop = heading_loop(spec, SimpleNamespace(contract=self.skill.contract, robot=self.robot), self.num_envs)
        self.heading = None if loop is None else loop.to(self.env.position_w[:, 0])

    # -- state ----------------------------------------------------------------------------
    @property
    def position_w(self) -> torch.Tensor:
        return self.env.position_w

    @property
    def quat_wxyz(self) -> torch.Tensor:
        return self.env.quat_wxyz

    @property
    def linear_velocity_w(self) -> torch.Tensor:
        return self.env.linear_velocity_w

    def skill_observation(self, subgoal_w: torch.Tensor, yaw: torch.Tensor | None = None) -> torch.Tensor:
        """The skill's observation (in its own frame under a heading loop; ``yaw``: the robots' yaw when the caller has it)."""
        env = self.env
        inputs = {"position_w": env.position_w, "quat_wxyz": env.quat_wxyz, "linear_velocity_w": env.linear_velocity_w,
                  "angular_velocity_b": env.angular_velocity_b, "subgoal_w": subgoal_w, "last_action": self.skill_last_action,
                  "position_error_integral": env.position_error_integral}
        obs = obs_terms.compute_observation(self.terms, inputs, self.noise_std, self.generator)
        if self.heading is not None:  # the skill observes in its own frame (robot_hrl.runtime.heading.turn_observation)
            from robot_hrl.runtime.heading import turn_observation

            yaw = yaw_from_quat(env.quat_wxyz) if yaw is None else yaw
            obs = turn_observation(obs, self.heading.turned, self.heading.frame_offset_rad(yaw))
        return obs

    def new_subgoal(self) -> None:
        """The subgoal changed: the next step builds the observation from the contract."""
        self._env_obs = None

    @torch.no_grad()
    def step(self, subgoal_w: torch.Tensor, action_filter=None) -> torch.Tensor:
        """One control period of the skill towards ``subgoal_w`` (N, 3); returns the goto env's crash ends (N,) bool.

        ``action_filter``: the skill's normalized actions (N, A) -> the actions applied (a shield in the loop,
        ``sim/navigate_shield.py``); the skill still observes its own last action, as the runtime's policy does."""
        yaw = None if self.heading is None else yaw_from_quat(self.env.quat_wxyz)  # one per step: the turn and the loop
        if self._env_obs is None:
            if self.subgoal_change_m is not None:  # a subgoal moved: its integral starts again (as the runtime's)
                moved = (subgoal_w - self.env.goal_w).abs().amax(dim=-1) > self.subgoal_change_m
                self.env.position_error_integral[moved] = 0.0
            obs = self.skill_observation(subgoal_w, yaw)
            self.env.goal_w[:] = subgoal_w
        else:
            obs = self._env_obs
        actions = self.skill(obs)
        applied = actions
        if self.heading is not None:  # the yaw loop owns the yaw torque; the skill observes its own action
            env = self.env
            applied = self.heading.apply(actions, yaw, env.angular_velocity_b[:, 2], env.linear_velocity_w)
        applied = applied if action_filter is None else action_filter(applied)
        out, _, dones, _ = self.env.step(applied)
        # (the goto step's own observation holds the APPLIED last action: built from the contract when they differ)
        self._env_obs = (out["policy"] if self.reuse_env_observation and action_filter is None and self.heading is None
                         else None)
        self.skill_last_action = actions
        crashed = dones.bool()
        if crashed.any():
            self.skill_last_action = torch.where(crashed[:, None], torch.zeros_like(actions), actions)
        return crashed

    def place(self, ids: torch.Tensor, position_w: torch.Tensor, yaw: torch.Tensor) -> None:
        """Put environments ``ids`` at rest, level, at ``position_w`` (n, 3) facing ``yaw`` (n,), rotors at hover."""
        env, n = self.env, int(ids.numel())
        if n == 0:
            return
        zeros = torch.zeros((n, 3), device=self.device)
        quat = torch.stack((torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)), dim=-1)
        env.position_w[ids] = position_w
        env.quat_wxyz[ids] = quat
        env.linear_velocity_w[ids] = zeros
        env.angular_velocity_b[ids] = zeros
        env.rotor_rpm[ids] = float(self.robot.hover_rpm)
        env.goal_w[ids] = position_w
        env.last_action[ids] = 0.0
        env.position_error_integral[ids] = 0.0
        env.episode_length_buf[ids] = 0
        self.skill_last_action[ids] = 0.0
        if self.heading is not None:
            self.heading.reset(ids)
        self._env_obs = None

"""The ``navigate`` environment: a high-level policy gives the frozen goto skill its subgoals from range readings.

rsl-rl-lib ``VecEnv``. One ``step`` is one decision: the action (2, in [-1, 1]) becomes a subgoal
offset in the robot's yaw frame inside the skill's subgoal radius (``robot_hrl.contract.navigate``),
and the skill flies towards it for ``control_rate / decision_rate`` control steps. Observation
(group ``policy``, the contract's terms): goal in the yaw frame, the six ranges, the velocity, the
last subgoal. The critic also sees the geodesic distance to the goal and its direction (privileged,
from the room's map). An episode ends at the goal (within ``goal_tolerance_m``: success), at a
collision with an obstacle, the fence, the ceiling or the floor, or at the time limit.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from robot_hrl.contract import normalized_to_command
from robot_hrl.contract.navigate import (
    LowerSkillRef, NavigateContract, RangeMemorySpec, SensorSuiteRef, SubgoalSpec, TrailSpec, contract_sha256,
    navigate_observation_terms, subgoal_offset_action_spec,
)
from robot_hrl.errors import ConfigError
from robot_hrl.sensing import robot_range_sensors, sensor_suite_sha256
from robot_hrl.world.rooms import DENSITIES, generate_room, room_seeds
from sim.envs.frozen_skill import FrozenSkill
from sim.envs.nav_low_level import SkillDrivenQuadrotor
from sim.envs.nav_rooms import RoomPool
from sim.envs.navigate_env_cfg import NavigateEnvCfg
from sim.envs.ranging import RangeSensorArray
from sim.envs.terms.navigate_memory import TorchRangeMemory
from sim.envs.terms.navigate_observations import compute_navigate_observation, world_to_yaw, yaw_from_quat, yaw_to_world


def build_room_pool(cfg: NavigateEnvCfg, device) -> RoomPool:
    rooms = [generate_room(d, s, cfg.room_split) for d in cfg.densities
             for s in room_seeds(cfg.room_split, cfg.rooms_per_density, cfg.room_seed_offset)]
    return RoomPool.from_rooms(rooms, device)


class NavigateEnv(VecEnv):
    """Batched map-free navigation over the frozen goto skill."""

    def __init__(self, cfg: NavigateEnvCfg | None = None, num_envs: int = 256, device: str | torch.device = "cpu",
                 seed: int = 0, pool: RoomPool | None = None, skill: FrozenSkill | None = None):
        self.cfg = cfg = cfg or NavigateEnvCfg()
        unknown = [d for d in cfg.densities if d not in DENSITIES]
        if unknown:
            raise ConfigError(f"unknown densities {unknown}; choose from {list(DENSITIES)}")
        if cfg.rewards.proximity_source not in ("rangers", "all_directions"):
            raise ConfigError(f"rewards.proximity_source must be 'rangers' or 'all_directions', got {cfg.rewards.proximity_source!r}")
        if not 0 < cfg.max_offset_fraction <= 1.0:
            raise ConfigError(f"max_offset_fraction must be in (0, 1] (the adjacency constraint), got {cfg.max_offset_fraction}")
        self.device = torch.device(device)
        self.num_envs = int(num_envs)
        self.num_actions = 2
        self.skill = skill or FrozenSkill(Path(cfg.skill_path), self.device)
        rate = self.skill.contract.control_rate_hz
        ratio = rate / cfg.decision_rate_hz
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise ConfigError(f"decision_rate_hz {cfg.decision_rate_hz} must divide the skill's control rate {rate} Hz")
        self.low_steps = int(round(ratio))
        self.decision_dt_s = 1.0 / cfg.decision_rate_hz
        self.max_episode_length = int(round(cfg.episode_length_s * cfg.decision_rate_hz))
        self.low = SkillDrivenQuadrotor(self.skill, self.num_envs, self.device, seed, cfg.randomize, cfg.native,
                                       randomization=cfg.randomization)
        self.robot = self.low.robot
        self.sensors = robot_range_sensors(self.robot)
        if not self.sensors:
            raise ConfigError(f"robot {self.robot.name!r} carries no range sensors (robot_hrl.sensing.robot_range_sensors)")
        self.rangers = RangeSensorArray.from_specs(self.sensors, cfg.rays_per_sensor, self.device)
        max_offset = cfg.max_offset_fraction * self.skill.contract.subgoal_radius_m
        self.action_spec = subgoal_offset_action_spec(max_offset)
        m = cfg.memory
        memory = None
        if m.enabled:
            rate = m.update_rate_hz or cfg.decision_rate_hz
            memory = RangeMemorySpec(sensors=tuple(m.sensors), capacity=m.capacity, min_spacing_m=m.min_spacing_m,
                                     sectors=m.sectors, range_m=m.range_m, update_rate_hz=rate)
            every = self.skill.contract.control_rate_hz / rate
            if abs(every - round(every)) > 1e-9 or self.low_steps % round(every):
                raise ConfigError(f"memory update_rate_hz {rate} must divide the skill's control rate and be a multiple "
                                  f"of the decision rate {cfg.decision_rate_hz} Hz")
            self.memory_every = int(round(every))
            self.memory = TorchRangeMemory.from_spec(memory, self.sensors, self.num_envs, self.device)
        else:
            self.memory_every, self.memory = self.low_steps, None
        trail = None
        self.trail = None
        """The robot's earlier positions (a TorchRangeMemory without sensors; the ``trail_yaw`` term), or None."""
        if cfg.trail.enabled:
            t = cfg.trail
            trail = TrailSpec(capacity=t.capacity, min_spacing_m=t.min_spacing_m, sectors=t.sectors, range_m=t.range_m)
            self.trail = TorchRangeMemory.for_positions(trail, self.num_envs, self.device)
        self.observation_terms = navigate_observation_terms(max(s.max_range_m for s in self.sensors), len(self.sensors),
                                                            max_offset, memory, trail)
        self.contract = NavigateContract(
            robot=self.skill.contract.robot, decision_rate_hz=cfg.decision_rate_hz, observations=self.observation_terms,
            action=self.action_spec, subgoal=SubgoalSpec(flight_height_m=cfg.flight_height_m),
            lower_skill=LowerSkillRef(skill=self.skill.contract.skill, model_sha256=self.skill.sha256,
                                      contract_sha256=contract_sha256(self.skill.contract),
                                      subgoal_radius_m=self.skill.contract.subgoal_radius_m,
                                      control_rate_hz=self.skill.contract.control_rate_hz),
            sensors=SensorSuiteRef(names=tuple(s.name for s in self.sensors), sha256=sensor_suite_sha256(self.sensors)),
            memory=memory, trail=trail, heading=cfg.heading.spec(),
        )
        if self.contract.heading is not None:  # the yaw loop under the skill (robot_hrl.runtime.heading)
            self.low.set_heading(self.contract.heading)
        self.pool = pool or build_room_pool(cfg, self.device)
        dens = self.pool.density
        self._density_rooms = [torch.nonzero(dens == i).squeeze(-1) for i in range(len(DENSITIES))]
        self._available = [i for i, r in enumerate(self._density_rooms) if r.numel() > 0]
        self.generator = torch.Generator(device=self.device).manual_seed(seed + 2)
        n, f32 = self.num_envs, dict(dtype=torch.float32, device=self.device)
        self.room = torch.zeros(n, dtype=torch.long, device=self.device)
        self.goal_w = torch.zeros((n, 3), **f32)
        self.subgoal_w = torch.zeros((n, 3), **f32)
        self.ranges = torch.zeros((n, len(self.sensors)), **f32)
        self.true_ranges = torch.zeros((n, len(self.sensors)), **f32)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=self.device)
        self.path_length_m = torch.zeros(n, **f32)
        self.potential = torch.zeros(n, **f32)
        self.level = 0 if cfg.curriculum.enabled else max(self._available)
        self._window: list[float] = []
        self.forced_rooms: torch.Tensor | None = None
        """Evaluation: when set (N,), episode k of env i runs room forced_rooms[i] (reset picks it)."""
        self.shield = None
        """A shield between the skill and the physics (``sim.navigate_shield.BatchedShield``: the runtime's shield per
        environment, reset with each episode; the shielded evaluation, and training with ``--range-shield-envs``);
        None: the level and the skill alone."""
        self._reset_envs(torch.arange(n, device=self.device))
        self._obs = self._observations(torch.arange(n, device=self.device))

    # ---- VecEnv -----------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        return self._obs

    def reset(self) -> TensorDict:
        ids = torch.arange(self.num_envs, device=self.device)
        self._reset_envs(ids)
        self._obs = self._observations(ids)
        return self._obs

    @torch.no_grad()
    def step(self, actions: torch.Tensor):
        with torch.inference_mode(False):
            return self._step(actions)

    def _step(self, actions):
        a = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        if a.shape != (self.num_envs, 2):
            raise ValueError(f"actions must have shape ({self.num_envs}, 2): a subgoal offset in the yaw frame, in [-1, 1]; "
                             f"got {tuple(a.shape)}")
        r_max = self.contract.max_offset_m  # the contract's mapping, then the disc (robot_hrl.contract.navigate.offset_from_action)
        a = normalized_to_command(self.action_spec, torch.nan_to_num(a, nan=0.0, posinf=1.0, neginf=-1.0))
        a = a * (r_max / a.norm(dim=-1, keepdim=True).clamp(min=1e-12)).clamp(max=1.0)
        low = self.low
        yaw = yaw_from_quat(low.quat_wxyz)
        self.subgoal_w = torch.cat((low.position_w[:, :2] + yaw_to_world(a, yaw),
                                    torch.full((self.num_envs, 1), self.cfg.flight_height_m, device=self.device)), dim=-1)
        low.new_subgoal()
        shield = self.shield
        flown_w = self.subgoal_w if shield is None else shield.subgoals(self, self.subgoal_w)
        ended = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        success = torch.zeros_like(ended)
        collided = torch.zeros_like(ended)
        r = self.room
        lo, hi, valid = self.pool.box_lower[r], self.pool.box_upper[r], self.pool.box_valid[r]
        room_lo, room_hi = self.pool.room_lower[r], self.pool.room_upper[r]
        radius = float(self.robot.collision_radius_m)
        prev = low.position_w.clone()
        end_position_w = low.position_w.clone()  # where each episode ended (the check that saw the hit or the goal)
        end_velocity_w = low.linear_velocity_w.clone()
        ground = torch.zeros_like(ended)
        fell = torch.zeros_like(ended)
        for k in range(self.low_steps):
            if shield is None:
                ground |= low.step(flown_w)
            else:
                ground |= low.step(flown_w, lambda a, k=k: shield.actions(self, k, a))
                shield.after_step(self, k)
            if (k + 1) % self.memory_every == 0:
                self._sense()  # the rangers at their rate: the memory, and the rewards' proximity at the last one
                if self.memory is not None:
                    self.memory.add(low.position_w, low.quat_wxyz, self.ranges)
            if (k + 1) % self.cfg.check_every_steps and k + 1 < self.low_steps:
                continue  # (collisions and the goal are checked every few control steps: ~4 cm of flight at 1 m/s)
            p = low.position_w
            live = ~ended
            self.path_length_m += torch.where(live, (p - prev).norm(dim=-1), torch.zeros_like(self.path_length_m))
            before, prev = prev, p.clone()
            d_box = (torch.maximum(lo - p[:, None], p[:, None] - hi).clamp(min=0.0).norm(dim=-1))
            hit_box = ((d_box < radius) & valid).any(dim=-1)
            hit_fence = ((p[:, :2] - radius < room_lo[:, :2]) | (p[:, :2] + radius > room_hi[:, :2])).any(dim=-1) | (
                p[:, 2] + radius > room_hi[:, 2])
            bad = ~torch.isfinite(p).all(dim=-1)
            hit = (hit_box | hit_fence | ground | bad) & live
            reached = ((p - self.goal_w).norm(dim=-1) < self.cfg.goal_tolerance_m) & live & ~hit
            collided |= hit
            success |= reached
            now = hit | reached
            fell |= ground & live
            # (a ground contact resets the goto environment's robot: its last position is the previous check's)
            end_position_w = torch.where(now[:, None], torch.where((ground & live)[:, None], before, p), end_position_w)
            end_velocity_w = torch.where(now[:, None], low.linear_velocity_w, end_velocity_w)
            ended |= now
            ground = torch.zeros_like(ended)
        self.episode_length_buf += 1
        time_out = (self.episode_length_buf >= self.max_episode_length) & ~ended
        end_position_w = torch.where(ended[:, None], end_position_w, low.position_w)
        end_velocity_w = torch.where(ended[:, None], end_velocity_w, low.linear_velocity_w)
        dones = ended | time_out
        # rewards
        w = self.cfg.rewards
        new_potential = self.pool.geodesic_at(self.room, low.position_w[:, :2])
        progress = (self.potential - new_potential).clamp(-2.0, 2.0)
        near = (w.proximity_m - self._proximity_distance(lo, hi, valid, room_lo, room_hi)).clamp(min=0.0)
        rewards = (w.progress_weight * progress + w.time_penalty + w.proximity_weight * near
                   + w.success_reward * success.float() + w.collision_penalty * collided.float())
        if shield is not None and w.shield_stop_weight:
            rewards = rewards + w.shield_stop_weight * torch.as_tensor(shield.range_ticks, dtype=rewards.dtype) / self.low_steps
        self.potential = new_potential
        # episode ends: statistics, then resets
        episode_end = {
            "dones": dones.clone(), "success": success.clone(), "collided": collided.clone(), "time_out": time_out.clone(),
            "time_to_goal_s": self.episode_length_buf.float() * self.decision_dt_s,
            "path_length_m": self.path_length_m.clone(), "optimal_path_length_m": self.pool.optimal_path_length_m[r],
            "density": self.pool.density[r].clone(), "room": r.clone(),
            "final_distance_m": (low.position_w - self.goal_w).norm(dim=-1),
            "end_position_w": end_position_w, "end_velocity_w": end_velocity_w, "ground_contact": fell,
        }
        extras = {"time_outs": time_out, "episode_end": episode_end, "log": {"/curriculum/level": float(self.level)}}
        done_ids = dones.nonzero().squeeze(-1)
        if done_ids.numel() > 0:
            extras["log"]["/episode/success_rate"] = success[done_ids].float().mean()
            extras["log"]["/episode/collision_rate"] = collided[done_ids].float().mean()
            extras["log"]["/episode/time_out_rate"] = time_out[done_ids].float().mean()
            self._curriculum(done_ids, success)
            self._reset_envs(done_ids)
        self._obs = self._observations(done_ids)
        return self._obs, rewards, dones.long(), extras

    # ---- internals ----------------------------------------------------------------------------
    def _curriculum(self, done_ids, success) -> None:
        c = self.cfg.curriculum
        if not c.enabled or self.level >= max(self._available):
            return
        at_top = self.pool.density[self.room[done_ids]] == self.level
        self._window.extend(success[done_ids][at_top].float().tolist())
        self._window = self._window[-c.window_episodes:]
        if len(self._window) >= c.window_episodes and np.mean(self._window) >= c.promote_success_rate:
            higher = [i for i in self._available if i > self.level]
            self.level = min(higher)
            self._window = []

    def _draw_density(self, n: int) -> torch.Tensor:
        unlocked = [i for i in self._available if i <= self.level] or [min(self._available)]
        top = max(unlocked)
        if len(unlocked) == 1:
            return torch.full((n,), top, dtype=torch.long, device=self.device)
        u = torch.rand(n, generator=self.generator, device=self.device)
        lower = torch.tensor(unlocked[:-1], device=self.device)
        pick = lower[torch.randint(len(lower), (n,), generator=self.generator, device=self.device)]
        return torch.where(u < self.cfg.curriculum.top_level_share, torch.full_like(pick, top), pick)

    def _reset_envs(self, ids: torch.Tensor) -> None:
        n = int(ids.numel())
        if n == 0:
            return
        if self.forced_rooms is not None:
            rooms = self.forced_rooms[ids]
        else:
            dens = self._draw_density(n)
            rooms = torch.empty(n, dtype=torch.long, device=self.device)
            for d in dens.unique().tolist():
                sel = dens == d
                choices = self._density_rooms[d]
                rooms[sel] = choices[torch.randint(len(choices), (int(sel.sum()),), generator=self.generator, device=self.device)]
        self.room[ids] = rooms
        start = self.pool.start_w[rooms].clone()
        start[:, 2] = self.cfg.flight_height_m
        yaw = ((2 * torch.rand(n, generator=self.generator, device=self.device) - 1) * math.pi if self.cfg.random_yaw
               else torch.zeros(n, device=self.device))
        self.low.place(ids, start, yaw)
        self.goal_w[ids] = self.pool.goal_w[rooms]
        self.goal_w[ids, 2] = self.cfg.flight_height_m
        self.subgoal_w[ids] = start
        self.episode_length_buf[ids] = 0
        self.path_length_m[ids] = 0.0
        self.potential[ids] = self.pool.geodesic_at(rooms, start[:, :2])
        if self.memory is not None:
            self.memory.reset(ids)
        if self.trail is not None:
            self.trail.reset(ids)
        if self.shield is not None:
            self.shield.reset(self, ids)

    def _proximity_distance(self, lo, hi, valid, room_lo, room_hi) -> torch.Tensor:
        """(N,) the distance the proximity reward judges (``cfg.rewards.proximity_source``)."""
        source = self.cfg.rewards.proximity_source
        if source == "rangers":
            return self.true_ranges[:, :4].amin(dim=-1)
        p = self.low.position_w
        d_box = torch.maximum(lo - p[:, None], p[:, None] - hi).clamp(min=0.0).norm(dim=-1)
        d_box = torch.where(valid, d_box, torch.full_like(d_box, float("inf"))).amin(dim=-1)
        d_fence = torch.cat((p[:, :2] - room_lo[:, :2], room_hi[:, :2] - p[:, :2]), dim=-1).amin(dim=-1)
        return torch.minimum(d_box, d_fence)

    def read_rangers(self, ids: torch.Tensor | None = None, generator: torch.Generator | None = None):
        """Cast the rangers of every environment (or of ``ids``): (true ranges, noisy readings), (n, sensors), m.
        ``generator``: the noise stream (None: the environment's own, the level's readings)."""
        low = self.low
        sel = slice(None) if ids is None else ids
        r = self.room[sel]
        true = self.rangers.true_ranges(low.position_w[sel], low.quat_wxyz[sel], self.pool.box_lower[r], self.pool.box_upper[r],
                                        self.pool.box_valid[r], self.pool.room_lower[r], self.pool.room_upper[r])
        return true, self.rangers.readings(true, generator or self.generator, noise=self.cfg.range_noise)

    def _sense(self, ids: torch.Tensor | None = None) -> None:
        """Cast the rangers of every environment (or of ``ids``): ``true_ranges`` and the noisy ``ranges``."""
        true, reading = self.read_rangers(ids)
        if ids is None:
            self.true_ranges, self.ranges = true, reading
        else:
            self.true_ranges[ids], self.ranges[ids] = true, reading

    def observation_inputs(self) -> dict[str, torch.Tensor]:
        low = self.low
        x = {"position_w": low.position_w, "quat_wxyz": low.quat_wxyz, "linear_velocity_w": low.linear_velocity_w,
             "goal_w": self.goal_w, "ranges_m": self.ranges, "last_subgoal_w": self.subgoal_w}
        if self.memory is not None:
            x["range_memory_yaw"] = self.memory.sectors(low.position_w, low.quat_wxyz)
        if self.trail is not None:
            x["trail_yaw"] = self.trail.sectors(low.position_w, low.quat_wxyz)
        return x

    def _observations(self, new_ids: torch.Tensor | None = None) -> TensorDict:
        """The observation groups; ``new_ids``: environments that just started (sensed again, their first reading remembered)."""
        if new_ids is not None and new_ids.numel() > 0:
            self._sense(new_ids)
            if self.memory is not None:
                self.memory.add(self.low.position_w[new_ids], self.low.quat_wxyz[new_ids], self.ranges[new_ids], new_ids)
        policy = compute_navigate_observation(self.observation_terms, self.observation_inputs())
        if self.trail is not None:  # after the observation: the trail holds where the robot was, not where it is
            self.trail.add_points_w(self.low.position_w)
        low, r = self.low, self.room
        xy = low.position_w[:, :2]
        geo = self.pool.geodesic_at(r, xy)
        h = 0.2
        gx = self.pool.geodesic_at(r, xy + torch.tensor([h, 0.0], device=self.device)) - self.pool.geodesic_at(r, xy - torch.tensor([h, 0.0], device=self.device))
        gy = self.pool.geodesic_at(r, xy + torch.tensor([0.0, h], device=self.device)) - self.pool.geodesic_at(r, xy - torch.tensor([0.0, h], device=self.device))
        grad = torch.stack((gx, gy), dim=-1)
        grad = world_to_yaw(-grad / grad.norm(dim=-1, keepdim=True).clamp(min=1e-6), yaw_from_quat(low.quat_wxyz))
        critic = torch.cat((policy, (geo / 10.0).clamp(max=3.0).unsqueeze(-1), grad,
                            (self.episode_length_buf.float() / self.max_episode_length).unsqueeze(-1)), dim=-1)
        return TensorDict({"policy": policy, "critic": critic}, batch_size=[self.num_envs], device=self.device)

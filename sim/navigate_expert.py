"""A privileged expert for the ``navigate`` level: it knows the room (a geodesic distance field to the goal on
a grid whose obstacles are grown by the robot radius and a safety margin) and picks, from any position, the
reachable subgoal that brings the robot closest to the goal along free space.

It is the teacher of the DAgger pre-training (sim/train_navigate.py ``--dagger-iterations``): the student
sees only what the contract's observation holds (goal, ranges, range memory, velocity, last subgoal),
the expert labels the states the *student* visits (DAgger: Ross, Gordon and Bagnell, AISTATS 2011), so
the student learns to recover from its own mistakes; PPO then fine-tunes it. Unlike the symbolic carrot
(sim/navigate_baselines.py), which follows one plan from the start, the expert answers from any state.

Candidates: ``directions`` bearings times ``radii`` (fractions of the offset radius), plus the goal itself
when it is within the offset radius. A candidate is scored by the geodesic distance at its end point plus a
penalty per blocked grid cell sampled along the straight segment to it, plus a small cost for leaving
the expert's previous choice (commitment); the lowest score wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.world.rooms import Room
from sim.envs.nav_rooms import FIELD_RESOLUTION_M, RoomPool
from sim.envs.terms.navigate_observations import world_to_yaw, yaw_from_quat


@dataclass
class GeodesicExpertCfg:
    safety_margin_m: float = 0.25
    """Obstacles are grown by the robot radius plus this (the goto skill overshoots a moving subgoal by ~0.1 m)."""
    directions: int = 32
    radii: tuple[float, ...] = (0.35, 0.6, 0.8, 1.0)
    """Candidate distances, fractions of the offset radius."""
    segment_samples: int = 8
    blocked_penalty_m: float = 50.0
    """Added per blocked sample along a candidate's segment."""
    consistency_weight: float = 0.5
    """Added per metre between a candidate's end point and the expert's previous choice (world frame): the
    expert commits to one side of an obstacle instead of flipping between two near-equal ones, which a
    student that sees its last subgoal (``last_subgoal_yaw``) can learn; 0: no memory."""


class GeodesicExpert:
    """The teacher: (room ids, position, attitude) -> normalized subgoal-offset actions in [-1, 1]."""

    def __init__(self, rooms: Sequence[Room], max_offset_m: float, cfg: GeodesicExpertCfg | None = None,
                 device: str | torch.device = "cpu"):
        self.cfg = cfg = cfg or GeodesicExpertCfg()
        self.max_offset_m = float(max_offset_m)
        self.pool = RoomPool.from_rooms(rooms, device, inflation_m=CRAZYFLIE_2X.collision_radius_m + cfg.safety_margin_m)
        field = self.pool.geodesic_m
        self.blocked_m = field.flatten(1).amax(dim=1)
        """(R,) the value of blocked (and unreachable) cells: the largest in each field."""
        bearings = torch.arange(cfg.directions, device=device) * (2.0 * math.pi / cfg.directions)
        unit = torch.stack((bearings.cos(), bearings.sin()), dim=-1)                            # (D, 2)
        self.offsets_w = torch.cat([unit * r * self.max_offset_m for r in cfg.radii])           # (K, 2)
        self.t = torch.linspace(0.0, 1.0, cfg.segment_samples + 1, device=device)[1:]          # (S,)

    def _geodesic(self, room_ids: torch.Tensor, xy_w: torch.Tensor) -> torch.Tensor:
        shape = xy_w.shape[:-1]
        rooms = room_ids.reshape(-1, *([1] * (len(shape) - 1))).expand(shape).reshape(-1)
        return self.pool.geodesic_at(rooms, xy_w.reshape(-1, 2)).reshape(shape)

    def targets_w(self, room_ids: torch.Tensor, position_w: torch.Tensor, goal_w: torch.Tensor,
                  previous_w: torch.Tensor | None = None) -> torch.Tensor:
        """(N, 2) the chosen subgoal, world frame; ``previous_w`` (N, 2): the previous choice (NaN rows: none)."""
        p = position_w[:, :2]
        to_goal = goal_w[:, :2] - p
        goal_near = to_goal.norm(dim=-1, keepdim=True) <= self.max_offset_m
        cand = torch.cat((self.offsets_w[None].expand(len(p), -1, -1), to_goal[:, None]), dim=1)   # (N, K+1, 2)
        end = p[:, None] + cand
        samples = p[:, None, None] + cand[:, :, None] * self.t[None, None, :, None]               # (N, K+1, S, 2)
        blocked = self._geodesic(room_ids, samples) >= self.blocked_m[room_ids][:, None, None] - FIELD_RESOLUTION_M
        score = self._geodesic(room_ids, end) + self.cfg.blocked_penalty_m * blocked.float().sum(-1)
        if previous_w is not None and self.cfg.consistency_weight > 0:
            shift = (end - previous_w[:, None]).norm(dim=-1)
            score = score + self.cfg.consistency_weight * torch.nan_to_num(shift, nan=0.0)
        score[:, -1] = torch.where(goal_near[:, 0] & ~blocked[:, -1].any(-1), -1.0e3, float("inf"))
        best = score.argmin(dim=1)
        return end[torch.arange(len(p)), best]

    def __call__(self, room_ids: torch.Tensor, position_w: torch.Tensor, quat_wxyz: torch.Tensor,
                 goal_w: torch.Tensor, previous_w: torch.Tensor | None = None) -> torch.Tensor:
        offset = world_to_yaw(self.targets_w(room_ids, position_w, goal_w, previous_w) - position_w[:, :2],
                              yaw_from_quat(quat_wxyz))
        return (offset / self.max_offset_m).clamp(-1.0, 1.0)

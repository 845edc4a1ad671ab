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
    clearance_m: float = 0.0
    """Soft clearance (clearance-aware labels): a candidate pays ``clearance_weight`` per metre by which its
    segment's samples come, on average, closer than this to a box or the fence (the robot's centre to the
    surface, horizontal); 0: off (the grown grid's hard margin alone). The hard margin keeps narrow passages
    open; this keeps the expert, and so the student that copies it within ~0.2 m, off the obstacles where
    there is room."""
    clearance_weight: float = 2.0
    """Score (m of geodesic distance) per metre of mean intrusion into ``clearance_m``."""
    clearance_resolution_m: float = 0.05
    """Cell of the clearance grid the candidates are scored on (computed once per room with :meth:`clearance_m`
    at ``clearance_height_m``; a lookup is within half a cell's diagonal of the exact value)."""
    clearance_height_m: float = 1.0
    """The flight height the clearance grid is computed at (the environment's ``flight_height_m``)."""


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
        self.clearance_grid_m = self._clearance_grid() if cfg.clearance_m > 0 else None
        """(R, ny, nx) :meth:`clearance_m` at the cells' centres (clearance-aware labels only)."""

    def _clearance_grid(self) -> torch.Tensor:
        """:meth:`clearance_m`'s rule on every cell centre, box by box (the same boxes, the fence, the height)."""
        res, pool, z = self.cfg.clearance_resolution_m, self.pool, self.cfg.clearance_height_m
        size = (pool.room_upper[:, :2] - pool.room_lower[:, :2]).amax(dim=0)
        nx, ny = (math.ceil(float(v) / res) for v in size)
        gy, gx = torch.meshgrid((torch.arange(ny) + 0.5) * res, (torch.arange(nx) + 0.5) * res, indexing="ij")
        xy = pool.room_lower[:, None, None, :2] + torch.stack((gx, gy), dim=-1)[None]           # (R, ny, nx, 2)
        out = torch.minimum(xy - pool.room_lower[:, None, None, :2], pool.room_upper[:, None, None, :2] - xy).amin(dim=-1)
        r = CRAZYFLIE_2X.collision_radius_m
        lo, hi = pool.box_lower, pool.box_upper
        spans = pool.box_valid & (lo[..., 2] <= z + r) & (hi[..., 2] >= z - r)                 # (R, B)
        for b in range(lo.shape[1]):
            gap = torch.maximum(lo[:, None, None, b, :2] - xy, xy - hi[:, None, None, b, :2]).clamp(min=0.0).norm(dim=-1)
            out = torch.where(spans[:, None, None, b], torch.minimum(out, gap), out)
        return out

    def _clearance_lookup(self, room_ids: torch.Tensor, xy_w: torch.Tensor) -> torch.Tensor:
        """(N, M) the clearance grid at points (N, M, 2) of rooms (N,), nearest cell."""
        ny, nx = self.clearance_grid_m.shape[1:]
        cell = torch.floor((xy_w - self.pool.room_lower[room_ids][:, None, :2]) / self.cfg.clearance_resolution_m).long()
        ix, iy = cell[..., 0].clamp(0, nx - 1), cell[..., 1].clamp(0, ny - 1)
        return self.clearance_grid_m[room_ids[:, None], iy, ix]

    def clearance_m(self, room_ids: torch.Tensor, xy_w: torch.Tensor, z_w: torch.Tensor) -> torch.Tensor:
        """Horizontal distance (N, M) from points ``xy_w`` (N, M, 2) at heights ``z_w`` (N,) to the nearest box
        that spans that height (within the robot radius) or the fence of rooms ``room_ids`` (N,): the room's
        ground truth (training only)."""
        pool = self.pool
        lo, hi = pool.box_lower[room_ids], pool.box_upper[room_ids]                              # (N, B, 3)
        r = CRAZYFLIE_2X.collision_radius_m
        spans = pool.box_valid[room_ids] & (lo[..., 2] <= z_w[:, None] + r) & (hi[..., 2] >= z_w[:, None] - r)
        gap = torch.maximum(lo[:, None, :, :2] - xy_w[:, :, None], xy_w[:, :, None] - hi[:, None, :, :2]).clamp(min=0.0)
        d_box = torch.where(spans[:, None], gap.norm(dim=-1), torch.full_like(gap[..., 0], float("inf"))).amin(dim=-1)
        d_fence = torch.minimum(xy_w - pool.room_lower[room_ids][:, None, :2], pool.room_upper[room_ids][:, None, :2] - xy_w)
        return torch.minimum(d_box, d_fence.amin(dim=-1))

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
        if self.cfg.clearance_m > 0:
            n, k, s_, _ = samples.shape
            near = self.cfg.clearance_m - self._clearance_lookup(room_ids, samples.reshape(n, k * s_, 2))
            score = score + self.cfg.clearance_weight * near.clamp(min=0.0).reshape(n, k, s_).mean(-1)
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

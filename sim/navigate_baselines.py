"""High-level planners to compare the learned one with, on the same observation or the same map.

- :func:`reactive_potential_field`: a classical reactive planner on the SAME ranges the learned
  level sees (the navigate observation): attraction to the goal, repulsion from the four
  horizontal rangers' readings, and a bug-style slide along an obstacle that blocks the goal
  direction. Torch, batched; PyBullet calls it with a batch of one.
- :class:`SymbolicCarrot`: the upper bound: the symbolic planner (robot_hrl.planning) plans on the
  full map of each room (obstacles grown by the robot radius and a 0.25 m margin: the goto skill
  overshoots a moving subgoal by ~0.1 m); the subgoal is the point of that plan ``lookahead_m``
  ahead of the robot's nearest point on it (a carrot), inside the same subgoal radius.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from robot_hrl.planning import PlannerConfig, SymbolicPlanner
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.world.rooms import Room
from sim.envs.terms.navigate_observations import world_to_yaw, yaw_from_quat

HORIZONTAL_AXES_YAW = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
"""front, back, left, right (the first four ranges of the Crazyflie's suite), level flight."""


@dataclass
class PotentialFieldCfg:
    influence_m: float = 1.2
    """Obstacles closer than this repel."""
    repulsion_gain: float = 0.6
    slide_trigger_m: float = 1.0
    """A reading closer than this in the goal's direction starts the slide along the obstacle."""
    step_fraction: float = 0.8
    """Subgoal offset as a fraction of the maximum."""


def reactive_potential_field(obs: torch.Tensor, cfg: PotentialFieldCfg | None = None) -> torch.Tensor:
    """Actions (N, 2) in [-1, 1] from navigate observations (N, 13): goal (2), ranges (6), velocity (3), last subgoal (2)."""
    cfg = cfg or PotentialFieldCfg()
    goal, ranges = obs[:, 0:2], obs[:, 2:6]
    axes = HORIZONTAL_AXES_YAW.to(obs.device)
    to_goal = goal / goal.norm(dim=-1, keepdim=True).clamp(min=1e-6)
    push = (1.0 / ranges.clamp(min=0.05) - 1.0 / cfg.influence_m).clamp(min=0.0)        # (N, 4)
    repulse = -(push.unsqueeze(-1) * axes).sum(dim=1) * cfg.repulsion_gain
    # the reading along the goal direction (cosine-weighted over the axes facing it)
    facing = (to_goal @ axes.t()).clamp(min=0.0)                                         # (N, 4)
    ahead = (facing * ranges).sum(-1) / facing.sum(-1).clamp(min=1e-6)
    blocked = (ahead < cfg.slide_trigger_m).float().unsqueeze(-1)
    # slide: turn left of the goal direction, or right if the left reading is the shorter
    left = torch.stack((-to_goal[:, 1], to_goal[:, 0]), dim=-1)
    left_range = (left @ axes.t()).clamp(min=0.0).mul(ranges).sum(-1)
    right_range = (-(left @ axes.t())).clamp(min=0.0).mul(ranges).sum(-1)
    side = torch.where(left_range >= right_range, 1.0, -1.0).unsqueeze(-1)
    direction = to_goal * (1.0 - blocked) + blocked * (0.3 * to_goal + side * left) + repulse
    direction = direction / direction.norm(dim=-1, keepdim=True).clamp(min=1e-6)
    near_goal = goal.norm(dim=-1, keepdim=True).clamp(max=1.0)
    return (direction * cfg.step_fraction * near_goal).clamp(-1.0, 1.0)


class SymbolicCarrot:
    """The symbolic planner's plan on each room's full map, followed by a carrot inside the subgoal radius."""

    def __init__(self, rooms: list[Room], max_offset_m: float, lookahead_m: float = 0.5, subgoal_radius_m: float = 1.0,
                 safety_margin_m: float = 0.25, robot_radius_m: float | None = None):
        self.max_offset_m, self.lookahead_m = float(max_offset_m), float(lookahead_m)
        self.paths, self.lengths = [], []
        for room in rooms:
            config = PlannerConfig(robot_radius_m=robot_radius_m or CRAZYFLIE_2X.collision_radius_m, safety_margin_m=safety_margin_m)
            planner = SymbolicPlanner(room.world, subgoal_radius_m, config)
            leg = planner.leg(np.array(room.start_w), np.array(room.goal_w))
            if leg is None:
                leg = np.array([room.start_w, room.goal_w])
            pts = []
            for a, b in zip(leg[:-1], leg[1:]):
                n = max(int(np.ceil(np.linalg.norm(b - a) / 0.05)), 1)
                pts.append(np.linspace(a, b, n, endpoint=False))
            pts.append(leg[-1:])
            self.paths.append(np.concatenate(pts)[:, :2])
            self.lengths.append(float(np.sum(np.linalg.norm(np.diff(leg, axis=0), axis=1))))
        m = max(len(p) for p in self.paths)
        self.path = torch.tensor(np.stack([np.vstack([p, np.repeat(p[-1:], m - len(p), 0)]) for p in self.paths]), dtype=torch.float32)
        self.step_m = 0.05

    def __call__(self, room_ids: torch.Tensor, position_w: torch.Tensor, quat_wxyz: torch.Tensor) -> torch.Tensor:
        path = self.path[room_ids]                                             # (N, M, 2)
        d = (path - position_w[:, None, :2]).norm(dim=-1)
        nearest = d.argmin(dim=1)
        ahead = (nearest + int(round(self.lookahead_m / self.step_m))).clamp(max=path.shape[1] - 1)
        target = path[torch.arange(len(room_ids)), ahead]
        offset = world_to_yaw(target - position_w[:, :2], yaw_from_quat(quat_wxyz))
        return (offset / self.max_offset_m).clamp(-1.0, 1.0)

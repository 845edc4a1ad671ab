"""The DAgger teacher (sim/navigate_expert.py): its subgoals stay within the offset radius and out of the grown
obstacles, and it flies the frozen goto skill to the goal in the batched simulator; judged by the simulator's
collision and success checks, not by the expert's own field."""

from __future__ import annotations

import numpy as np
import torch

from robot_hrl.world.rooms import generate_room, room_seeds
from sim.evaluate_navigate import evaluate_batched
from sim.navigate_expert import GeodesicExpert


def test_expert_subgoals_are_reachable_and_free():
    rooms = [generate_room(d, s, "eval") for d in ("sparse", "dense") for s in room_seeds("eval", 2)]
    expert = GeodesicExpert(rooms, 1.0)
    rng = np.random.default_rng(0)
    n = 400
    ids = torch.tensor(rng.integers(0, len(rooms), n))
    pos = torch.tensor(np.c_[rng.uniform(0.5, 9.5, (n, 2)), np.ones(n)], dtype=torch.float32)
    goal = expert.pool.goal_w[ids]
    target = expert.targets_w(ids, pos, goal)
    assert torch.all((target - pos[:, :2]).norm(dim=-1) <= 1.0 + 1e-5)
    # from a free start the chosen end point is free (not in a blocked cell of the grown map)
    free_start = expert.pool.geodesic_at(ids, pos[:, :2]) < expert.blocked_m[ids] - 0.2
    end_free = expert.pool.geodesic_at(ids, target) < expert.blocked_m[ids] - 0.2
    assert free_start.sum() > 100 and torch.all(end_free[free_start])
    quat = torch.tensor([[1.0, 0.0, 0.0, 0.0]]).expand(n, 4)
    a = expert(ids, pos, quat, goal)
    assert torch.all(a.abs() <= 1.0)


def test_expert_reaches_held_out_goals(repo_root):
    rooms = [generate_room(d, s, "eval") for d in ("sparse", "medium", "dense") for s in room_seeds("eval", 3)]
    expert = GeodesicExpert(rooms, 1.0)
    res = evaluate_batched({"expert": lambda env, obs: expert(env.room, env.low.position_w, env.low.quat_wxyz, env.goal_w,
                                                              env.subgoal_w[:, :2])},
                           rooms, repo_root / "models/crazyflie_goto.onnx", randomize=False, episode_length_s=15.0)
    eps = res["expert"]["episodes"]
    assert sum(e["success"] for e in eps) >= 8, eps

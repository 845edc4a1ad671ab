"""The DAgger teacher (sim/navigate_expert.py): its subgoals stay within the offset radius and out of the grown
obstacles, and it flies the frozen goto skill to the goal in the batched simulator; judged by the simulator's
collision and success checks, not by the expert's own field."""

from __future__ import annotations

import numpy as np
import torch

from robot_hrl.world.rooms import generate_room, room_seeds
from sim.evaluate_navigate import evaluate_batched
from sim.navigate_expert import GeodesicExpert, GeodesicExpertCfg


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


def _free_points(rooms, n, seed):
    rng = np.random.default_rng(seed)
    ids = torch.tensor(rng.integers(0, len(rooms), n))
    pos = torch.tensor(np.c_[rng.uniform(0.3, 9.7, (n, 2)), np.ones(n)], dtype=torch.float32)
    return ids, pos


def test_clearance_is_the_rooms_distance_to_the_nearest_obstacle_or_fence():
    rooms = [generate_room(d, s, "eval") for d in ("medium", "dense") for s in room_seeds("eval", 2)]
    expert = GeodesicExpert(rooms, 1.0)
    ids, pos = _free_points(rooms, 300, 1)
    got = expert.clearance_m(ids, pos[:, None, :2], pos[:, 2])[:, 0].numpy()
    checked = 0
    for k, (i, p) in enumerate(zip(ids.tolist(), pos.numpy().astype(np.float64))):
        room = rooms[i]
        lo, hi = np.array(room.world.bounds.min), np.array(room.world.bounds.max)
        fence = min(p[0] - lo[0], p[1] - lo[1], hi[0] - p[0], hi[1] - p[1])
        # World's own Box.distance, for the obstacles whose height holds the point (there horizontal = 3-D distance)
        spanning = [o for o in room.world.obstacles if o.lower[2] <= p[2] <= o.upper[2]]
        others = [o for o in room.world.obstacles if not o.lower[2] <= p[2] <= o.upper[2]]
        if any(o.distance(p) < 1.0 + got[k] for o in others):
            continue  # a low box nearby: its rule (within the robot radius of the height) is not what is checked here
        want = min([fence] + [o.distance(p) for o in spanning])
        assert abs(got[k] - want) < 1e-4, (room.name, p, got[k], want)
        checked += 1
    assert checked > 200


def test_clearance_aware_expert_keeps_farther_from_obstacles():
    rooms = [generate_room(d, s, "eval") for d in ("medium", "dense") for s in room_seeds("eval", 3)]
    plain = GeodesicExpert(rooms, 1.0)
    aware = GeodesicExpert(rooms, 1.0, GeodesicExpertCfg(clearance_m=0.55))
    ids, pos = _free_points(rooms, 600, 2)
    start_clear = plain.clearance_m(ids, pos[:, None, :2], pos[:, 2])[:, 0]
    free = (plain.pool.geodesic_at(ids, pos[:, :2]) < plain.blocked_m[ids] - 0.2) & (start_clear > 0.2)
    ids, pos, goal = ids[free], pos[free], plain.pool.goal_w[ids[free]]
    t = torch.linspace(0.0, 1.0, 9)[1:]

    def path_clearance(target):  # the nearest approach along the straight flight to the chosen subgoal
        seg = pos[:, None, :2] + (target - pos[:, :2])[:, None] * t[None, :, None]
        return plain.clearance_m(ids, seg, pos[:, 2]).amin(dim=-1)

    c_plain, c_aware = path_clearance(plain.targets_w(ids, pos, goal)), path_clearance(aware.targets_w(ids, pos, goal))
    close = lambda c, m: float((c < m).float().mean())  # share of flights passing closer than m
    assert close(c_aware, 0.35) <= 0.5 * close(c_plain, 0.35) and close(c_plain, 0.35) > 0.02, (close(c_aware, 0.35), close(c_plain, 0.35))
    assert close(c_aware, 0.45) < 0.8 * close(c_plain, 0.45)
    assert float(c_aware.mean()) > float(c_plain.mean())
    # and it still makes progress: its subgoal's geodesic distance is below the start's in (nearly) every state
    gained = plain.pool.geodesic_at(ids, pos[:, :2]) - plain.pool.geodesic_at(ids, aware.targets_w(ids, pos, goal))
    assert float((gained > 0).float().mean()) > 0.95


def test_expert_reaches_held_out_goals(repo_root):
    """The default expert and the clearance-aware one (``clearance_m``), each on the same 9 held-out rooms, in one
    batched run (envs 0-8 the default, 9-17 the clearance-aware)."""
    rooms = [generate_room(d, s, "eval") for d in ("sparse", "medium", "dense") for s in room_seeds("eval", 3)]
    n = len(rooms)
    plain = GeodesicExpert(rooms * 2, 1.0)
    aware = GeodesicExpert(rooms * 2, 1.0, GeodesicExpertCfg(clearance_m=0.55))

    def both(env, obs):
        args = (env.room, env.low.position_w, env.low.quat_wxyz, env.goal_w, env.subgoal_w[:, :2])
        return torch.cat((plain(*args)[:n], aware(*args)[n:]))

    res = evaluate_batched({"expert": both}, rooms * 2, repo_root / "models/crazyflie_goto.onnx", randomize=False,
                           episode_length_s=15.0)
    eps = res["expert"]["episodes"]
    assert sum(e["success"] for e in eps[:n]) >= 8, eps[:n]
    assert sum(e["success"] for e in eps[n:]) >= 8, eps[n:]

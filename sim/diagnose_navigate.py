"""Why the learned level fails in the batched simulator: every failed flight, what it hit and how.

    python sim/diagnose_navigate.py --model models/crazyflie_navigate.onnx --rooms 50 --json diag.json
    python sim/diagnose_navigate.py --model ... --rooms 10 --pybullet-json pb.json   # the same rooms, PyBullet's outcome beside

The rooms, seeds and environment are ``sim/evaluate_navigate.py``'s batched evaluation (the same flights: its
success counts come out the same). For every collision the script takes the level's last decision before it
(robot position ``p0``, velocity, the subgoal ``s`` it sent) and the point where the batched collision test fired
(``end_position_w``), finds what was hit (a box, a pillar, the wall across the start-goal line, the fence, the
floor), and measures, against that obstacle, with the robot's collision radius taken off (the clearance the
collision test uses):

- ``subgoal_clearance_m``: the subgoal's horizontal clearance (< 0: the level put the subgoal inside the obstacle);
- ``segment_clearance_m``: the least clearance along the straight segment p0 -> s (< 0: the level's own line runs
  through the obstacle: it cut the corner);
- ``off_line_m`` and ``along``: how far the hit point lies from that segment and where along it (0 at p0, 1 at s);
- ``bearing_deg``, ``cone_off_deg``: the direction of the obstacle's nearest point from p0 in the robot's yaw frame,
  and its angle to the nearest horizontal ranger's axis (more than the cone's half angle: no ranger could see it);
  ``memory_m`` the range memory's reading in that direction at the decision, ``distance_m`` the true distance.

Each collision gets one cause, the first that holds:

``floor`` the goto skill lost height; ``subgoal_in_clearance`` the subgoal within ``--clearance-m`` of the obstacle
(inside included); ``corner_cut`` the segment p0 -> s runs through the obstacle; ``overshoot`` the hit lies beyond the
subgoal (along > 1); ``off_line`` the skill left the straight segment (the segment itself clear). And, beside the cause,
``unseen``: the obstacle outside every horizontal cone and not in the memory (within 0.3 m) at the decision.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CAUSES = ("floor", "subgoal_in_clearance", "corner_cut", "overshoot", "off_line", "other")


def box_distance_xy(lower: np.ndarray, upper: np.ndarray, p_xy: np.ndarray) -> np.ndarray:
    """Horizontal distance from points ``p_xy`` (..., 2) to an axis-aligned box's footprint (0 inside)."""
    d = np.maximum(np.maximum(lower[:2] - p_xy, p_xy - upper[:2]), 0.0)
    return np.linalg.norm(d, axis=-1)


def nearest_point_xy(lower: np.ndarray, upper: np.ndarray, p_xy: np.ndarray) -> np.ndarray:
    return np.clip(p_xy, lower[:2], upper[:2])


def what_was_hit(room, p: np.ndarray, radius_m: float) -> tuple[str, np.ndarray | None, np.ndarray | None, float]:
    """(name, lower, upper, clearance) of the obstacle nearest ``p`` (3D, as the batched test), the fence or the floor."""
    best = ("none", None, None, math.inf)
    for o in room.world.obstacles:
        lo, hi = np.asarray(o.lower), np.asarray(o.upper)
        d = float(np.linalg.norm(np.maximum(np.maximum(lo - p, p - hi), 0.0))) - radius_m
        if d < best[3]:
            best = (o.name, lo, hi, d)
    b0, b1 = np.asarray(room.world.bounds.min), np.asarray(room.world.bounds.max)
    fence = min(p[0] - b0[0], p[1] - b0[1], b1[0] - p[0], b1[1] - p[1]) - radius_m
    if fence < best[3]:
        best = ("fence", None, None, float(fence))
    ceiling = b1[2] - p[2] - radius_m
    if ceiling < best[3]:
        best = ("ceiling", None, None, float(ceiling))
    if p[2] - radius_m < min(best[3], 0.0) or p[2] < 0.3:
        best = ("floor", None, None, float(p[2]))
    return best


def classify(rec: dict, clearance_m: float) -> str:
    if rec["hit"] == "floor":
        return "floor"
    if rec.get("subgoal_clearance_m") is None:
        return "other"
    if rec["subgoal_clearance_m"] < clearance_m:
        return "subgoal_in_clearance"
    if rec["segment_clearance_m"] < 0.0:
        return "corner_cut"
    if rec["along"] > 1.0:
        return "overshoot"
    return "off_line"


def analyse_collision(room, radius_m: float, p0: np.ndarray, yaw0: float, v0: np.ndarray, subgoal: np.ndarray,
                      end_p: np.ndarray, end_v: np.ndarray, memory_m: np.ndarray | None, axes_deg=(0.0, 90.0, 180.0, 270.0),
                      half_cone_deg: float = 13.5, clearance_m: float = 0.1, ground: bool = False) -> dict:
    name, lo, hi, hit_clear = what_was_hit(room, end_p, radius_m)
    if ground:  # the goto environment's own crash end (ground contact or a non-finite state): the skill lost the airframe
        name, lo, hi, hit_clear = "floor", None, None, float(end_p[2])
    rec = {"hit": name, "hit_kind": name.split("_")[0], "hit_clearance_m": hit_clear,
           "speed_at_decision_mps": float(np.linalg.norm(v0[:2])), "speed_at_hit_mps": float(np.linalg.norm(end_v[:2])),
           "p0_w": p0.tolist(), "subgoal_w": subgoal.tolist(), "hit_w": end_p.tolist()}
    seg = subgoal[:2] - p0[:2]
    length = float(np.linalg.norm(seg))
    rel = end_p[:2] - p0[:2]
    along = float(rel @ seg / length**2) if length > 1e-6 else 0.0
    foot = p0[:2] + np.clip(along, 0.0, 1.0) * seg
    rec.update(subgoal_offset_m=length, along=along, off_line_m=float(np.linalg.norm(end_p[:2] - foot)))
    if lo is not None:
        ts = np.linspace(0.0, 1.0, 101)[:, None]
        rec["subgoal_clearance_m"] = float(box_distance_xy(lo, hi, subgoal[:2])) - radius_m
        rec["segment_clearance_m"] = float(box_distance_xy(lo, hi, p0[:2] + ts * seg).min()) - radius_m
        rec["decision_clearance_m"] = float(box_distance_xy(lo, hi, p0[:2])) - radius_m
        near = nearest_point_xy(lo, hi, p0[:2]) - p0[:2]
        bearing = math.degrees(math.atan2(near[1], near[0])) - math.degrees(yaw0)
        bearing = (bearing + 180.0) % 360.0 - 180.0
        off = min(abs((bearing - a + 180.0) % 360.0 - 180.0) for a in axes_deg)
        dist = float(np.linalg.norm(near))
        rec.update(bearing_deg=bearing, cone_off_deg=off, distance_m=dist)
        if memory_m is not None:
            k = len(memory_m)
            sector = int(math.floor(math.radians(bearing) / (2 * math.pi / k) + 0.5)) % k
            rec["memory_m"] = float(memory_m[sector])
            rec["remembered"] = bool(memory_m[sector] < dist + 0.3)
        rec["in_cone"] = off <= half_cone_deg
        rec["unseen"] = (not rec["in_cone"]) and not rec.get("remembered", False)
    rec["cause"] = classify(rec, clearance_m)
    return rec


def run(model: str, skill: str, rooms, seed: int = 0, clearance_m: float = 0.1, randomize: bool = True) -> list[dict]:
    """Fly the learned level on ``rooms`` (evaluate_navigate's batched setup); one record per room."""
    import torch

    from sim.envs.nav_rooms import RoomPool
    from sim.envs.navigate_env import NavigateEnv
    from sim.envs.navigate_env_cfg import NavigateEnvCfg, NavigateHeadingCfg, NavigateTrailCfg
    from sim.envs.terms.navigate_observations import yaw_from_quat
    from sim.evaluate_navigate import TIME_LIMIT_S, BatchedLevel, load_learned, stuck

    contract, session = load_learned(model, skill)
    names = [t.name for t in contract.observations]
    sizes = [t.size for t in contract.observations]
    start = dict(zip(names, np.cumsum([0] + sizes[:-1])))
    mem_slice = slice(start["range_memory_yaw"], start["range_memory_yaw"] + sizes[names.index("range_memory_yaw")]) \
        if "range_memory_yaw" in start else None
    cfg = NavigateEnvCfg(skill_path=str(skill), randomize=randomize, episode_length_s=TIME_LIMIT_S)
    cfg.curriculum.enabled = False
    cfg.trail = NavigateTrailCfg.of(contract.trail)
    cfg.heading = NavigateHeadingCfg.of(contract.heading)  # the yaw loop the level was trained with, if any
    env = NavigateEnv(cfg, num_envs=len(rooms), seed=seed, pool=RoomPool.from_rooms(rooms))
    env.forced_rooms = torch.arange(len(rooms))
    obs = env.reset()
    level = BatchedLevel(session)  # (a recurrent level's state carried from decision to decision)
    radius = float(env.robot.collision_radius_m)
    n = len(rooms)
    finished = torch.zeros(n, dtype=torch.bool)
    records: list[dict | None] = [None] * n
    trail = []
    while not finished.all():
        o = obs["policy"].numpy().astype(np.float32)
        p0 = env.low.position_w.clone().numpy()
        v0 = env.low.linear_velocity_w.clone().numpy()
        yaw0 = yaw_from_quat(env.low.quat_wxyz).numpy().copy()
        trail.append(p0[:, :2].copy())
        actions = level(env, obs["policy"])
        sub = subgoals_w(env, actions).numpy()  # the env's own mapping (a done env's subgoal_w is reset by step)
        obs, _, dones, extras = env.step(actions)
        e = extras["episode_end"]
        for i in torch.nonzero(dones.bool() & ~finished).squeeze(-1).tolist():
            room = rooms[i]
            r = {"room": room.name, "density": room.density, "success": bool(e["success"][i]),
                 "collided": bool(e["collided"][i]), "time_out": bool(e["time_out"][i]),
                 "time_s": float(e["time_to_goal_s"][i])}
            if r["time_out"]:
                r["stuck"] = stuck(np.stack(trail)[:, i], env.decision_dt_s)
            if r["collided"]:
                r.update(analyse_collision(room, radius, p0[i], float(yaw0[i]), v0[i], sub[i],
                                           e["end_position_w"][i].numpy(), e["end_velocity_w"][i].numpy(),
                                           o[i, mem_slice] if mem_slice is not None else None, clearance_m=clearance_m,
                                           ground=bool(e["ground_contact"][i])))
            records[i] = r
        finished |= dones.bool()
    return records


def subgoals_w(env, actions):
    """The subgoals ``env.step(actions)`` will send (NavigateEnv._step's mapping, computed before it)."""
    import torch

    from robot_hrl.contract import normalized_to_command
    from sim.envs.terms.navigate_observations import yaw_from_quat, yaw_to_world

    r_max = env.contract.max_offset_m
    a = normalized_to_command(env.action_spec, torch.nan_to_num(actions.float(), nan=0.0, posinf=1.0, neginf=-1.0))
    a = a * (r_max / a.norm(dim=-1, keepdim=True).clamp(min=1e-12)).clamp(max=1.0)
    xy = env.low.position_w[:, :2] + yaw_to_world(a, yaw_from_quat(env.low.quat_wxyz))
    return torch.cat((xy, torch.full((env.num_envs, 1), env.cfg.flight_height_m)), dim=-1)


def summarise(records: list[dict], pybullet: dict | None = None) -> dict:
    out = {}
    for d in ("sparse", "medium", "dense"):
        rs = [r for r in records if r["density"] == d]
        if not rs:
            continue
        col = [r for r in rs if r["collided"]]
        s = {"flights": len(rs), "success": sum(r["success"] for r in rs), "collisions": len(col),
             "time_outs": sum(r["time_out"] for r in rs),
             "causes": {c: sum(r["cause"] == c for r in col) for c in CAUSES},
             "hit_kind": {k: sum(r["hit_kind"] == k for r in col) for k in ("wall", "box", "pillar", "fence", "ceiling", "floor")},
             "unseen": sum(bool(r.get("unseen")) for r in col),
             "in_cone": sum(bool(r.get("in_cone")) for r in col),
             "median_speed_at_hit_mps": float(np.median([r["speed_at_hit_mps"] for r in col])) if col else None,
             "median_subgoal_clearance_m": float(np.median([r["subgoal_clearance_m"] for r in col if "subgoal_clearance_m" in r]))
             if any("subgoal_clearance_m" in r for r in col) else None}
        if pybullet:
            pb = {r["room"]: r for r in pybullet.get(d, [])}
            same = [r for r in rs if r["room"] in pb]
            s["pybullet_same_rooms"] = {"rooms": len(same), "batched_success": sum(r["success"] for r in same),
                                        "pybullet_success": sum(pb[r["room"]]["success"] for r in same),
                                        "batched_collisions": sum(r["collided"] for r in same),
                                        "pybullet_collisions": sum(pb[r["room"]]["collided"] for r in same)}
        out[d] = s
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python sim/diagnose_navigate.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--model", required=True, help="the exported navigate level (.onnx)")
    parser.add_argument("--skill", default="models/crazyflie_goto.onnx")
    parser.add_argument("--rooms", type=int, default=50, help="held-out rooms per density (evaluation seeds from the first)")
    parser.add_argument("--split", choices=["eval", "train"], default="eval")
    parser.add_argument("--seed-offset", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0, help="the simulator's seed (evaluate_navigate's --seed)")
    parser.add_argument("--clearance-m", type=float, default=0.1,
                        help="a subgoal closer than this (beyond the collision radius) to the obstacle hit counts as placed in its clearance")
    parser.add_argument("--pybullet-json", default=None,
                        help="a `sim/evaluate_navigate.py --sim pybullet --json` file: its learned flights beside the batched ones, room by room")
    parser.add_argument("--nominal", action="store_true",
                        help="fly the nominal robot (no domain randomization: PyBullet's robot) instead of the evaluation's randomized ones")
    parser.add_argument("--json", default=None, help="write every record and the summary here")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    from robot_hrl.world.rooms import generate_room, room_seeds

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    rooms = [generate_room(d, s, args.split) for d in ("sparse", "medium", "dense")
             for s in room_seeds(args.split, args.rooms, args.seed_offset)]
    records = run(args.model, args.skill, rooms, args.seed, args.clearance_m, not args.nominal)
    pybullet = None
    if args.pybullet_json:
        eps = json.loads(Path(args.pybullet_json).read_text())["learned"]["episodes"]
        pybullet = {}
        for r in eps:
            pybullet.setdefault(r["density"], []).append(r)
    summary = summarise(records, pybullet)
    for r in records:
        if r["collided"]:
            print(f"{r['room']:24s} {r['cause']:20s} hit {r['hit']:9s} v {r['speed_at_hit_mps']:.2f} m/s  "
                  f"subgoal clr {r.get('subgoal_clearance_m', float('nan')):+.2f}  segment clr {r.get('segment_clearance_m', float('nan')):+.2f}  "
                  f"off line {r['off_line_m']:.2f} along {r['along']:+.2f}  bearing {r.get('bearing_deg', float('nan')):+6.1f} "
                  f"(cone off {r.get('cone_off_deg', float('nan')):4.1f}) dist {r.get('distance_m', float('nan')):.2f} "
                  f"memory {r.get('memory_m', float('nan')):.2f}{'  UNSEEN' if r.get('unseen') else ''}")
    for d, s in summary.items():
        print(d, json.dumps(s))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"summary": summary, "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

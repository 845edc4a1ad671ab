#!/usr/bin/env python
"""How much the range source's picture costs a planner flying through the shield: phantoms, and an oracle bound.

A single-zone ranger (the Multi-ranger's VL53L1x) reports the nearest target anywhere in its 27-degree cone, so the
``range_obstacles`` unit puts every reading's hit on an arc across the cone (robot_hrl/safety/units/range_obstacles.py):
points where there may be nothing ("phantoms"), which the unit forgets only when a later reading sees through them or
they age out. This benchmark flies one planner through the shield in the batched simulator (``sim/evaluate_navigate.py
--range-shield``'s flights, the same rooms and seeds) twice:

* **the real picture**: at every control tick the range stop rejects a command, the nearest remembered hit and how far
  it lies from any true surface (the room's boxes and walls, from the simulator's ground truth, at the flight's
  height): the share of rejections whose nearest hit is a phantom (more than 0.1 / 0.2 m off every surface);
* **the oracle picture**: after every tick's readings are taken in, the memory keeps only the points within
  ``--oracle-tolerance-m`` of a true surface (no phantoms; a shield no robot can have). Its success bounds what any
  better model of the cone's hits could win.

Both runs judge success and contacts from the simulator, as the evaluation does. Issue #19 used it to ask whether the
dense rooms' failures through the shield are the picture's or the planner's (benchmarks/README.md, "Issue #19: what
the range picture costs").

    python benchmarks/bench_range_picture.py --planner learned --density dense --rooms 100 --split train --seed-offset 150
    python benchmarks/bench_range_picture.py --planner symbolic_full_map --density dense --rooms 100 --split train --seed-offset 150
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PHANTOM_M = (0.1, 0.2)
"""A remembered hit farther than these from every true surface is a phantom (the two shares printed)."""


def surface_distance_m(room, xy: np.ndarray, z_m: float) -> np.ndarray:
    """(K,) distance from each horizontal point ``xy`` (K, 2) at height ``z_m`` to the nearest true surface: the room's
    boxes (0 inside one) and the walls of its fence (the rangers see those too)."""
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    p = np.column_stack((xy, np.full(len(xy), z_m)))
    lo, hi = room.world.bounds.min, room.world.bounds.max
    best = np.minimum.reduce([xy[:, 0] - lo[0], hi[0] - xy[:, 0], xy[:, 1] - lo[1], hi[1] - xy[:, 1]])
    for box in room.world.obstacles:
        gap = np.maximum(np.maximum(np.asarray(box.lower) - p, p - np.asarray(box.upper)), 0.0)
        best = np.minimum(best, np.sqrt((gap * gap).sum(-1)))
    return best


class PictureProbe:
    """Wraps every flight's ``range_obstacles`` unit (``sim.navigate_shield.range_shield``'s shields): records each
    stop rejection's nearest remembered hit against the ground truth, and with ``oracle_tolerance_m`` prunes the
    memory to the points near a true surface after each tick's readings are taken in."""

    def __init__(self, oracle_tolerance_m: float | None):
        self.oracle_tolerance_m = oracle_tolerance_m
        self.rejections: list[tuple[float, float, float]] = []
        """Per stop rejection: (remembered clearance, true clearance, nearest hit's distance to a true surface), m."""

    def wrap(self, shield, room) -> None:
        unit = shield.unit("range_obstacles")
        from robot_hrl.sensing.memory import FAR_M

        take_in, check = unit._take_in, unit.check

        def pruned_take_in(tick):
            take_in(tick)
            pts = unit.memory.points_w[0]
            live = np.flatnonzero(pts[:, 0] < FAR_M)  # an empty slot holds FAR_M
            if len(live):
                off = surface_distance_m(room, pts[live], float(tick.p[2])) > self.oracle_tolerance_m
                if off.any():
                    mask = np.zeros(len(pts), dtype=bool)
                    mask[live[off]] = True
                    unit.memory.forget(mask[None])

        def probed_check(tick):
            check(tick)
            if tick.has_state and tick.reject_unit is unit and tick.reject_constraint == "stop":
                pts = unit.memory.points_w[0]
                dist = np.sqrt(((pts - (tick.p[0], tick.p[1])) ** 2).sum(-1))
                k = int(np.argmin(dist))
                true = float(surface_distance_m(room, np.array([tick.p[:2]]), float(tick.p[2]))[0])
                off = float(surface_distance_m(room, pts[k:k + 1], float(tick.p[2]))[0])
                self.rejections.append((float(dist[k]) - unit.radius, true - unit.radius, off))

        if self.oracle_tolerance_m is not None:
            unit._take_in = pruned_take_in
        unit.check = probed_check
        # the shield binds its units' checks when it is built: bind the probed one in its stage's place
        shield._envelope_checks = tuple(u.check for u in shield.units if u.stage == "envelope")


def fly(planner: str, rooms, model: str, skill: str, seed: int, probe: PictureProbe) -> list[dict]:
    """Every room once through the range shield, every flight's unit wrapped by ``probe``."""
    import torch

    import sim.navigate_shield as navigate_shield
    from sim.evaluate_navigate import batched_planners, evaluate_batched, load_learned

    contract, session = load_learned(model, skill) if planner == "learned" else (None, None)
    planners = batched_planners(session, rooms)
    if planner not in planners:
        raise SystemExit(f"--planner {planner!r}: choose one of {sorted(planners)}")
    build = navigate_shield.range_shield

    def probed(policy, room, **kw):
        shield = build(policy, room, **kw)
        probe.wrap(shield, room)
        return shield

    navigate_shield.range_shield = probed
    try:
        torch.set_num_threads(1)
        out = evaluate_batched({planner: planners[planner]}, rooms, skill, seed=seed, shielded=True,
                               trail=None if contract is None else contract.trail,
                               heading=None if contract is None else contract.heading)
    finally:
        navigate_shield.range_shield = build
    return out[planner]["episodes"]


def summary(episodes: list[dict], probe: PictureProbe) -> dict:
    a = np.array(probe.rejections).reshape(-1, 3)
    row = {"flights": len(episodes), "success": sum(e["success"] for e in episodes),
           "contacts": sum(e["collided"] for e in episodes), "stop_rejections": len(a)}
    if len(a):
        row["remembered_clearance_p50_m"] = float(np.median(a[:, 0]))
        row["true_clearance_p50_m"] = float(np.median(a[:, 1]))
        for m in PHANTOM_M:
            row[f"nearest_hit_phantom_over_{m}_m"] = float((a[:, 2] > m).mean())
    return row


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    from robot_hrl.world.rooms import DENSITIES, generate_room, room_seeds

    parser = argparse.ArgumentParser(prog="python benchmarks/bench_range_picture.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--planner", default="learned", help="learned, reactive or symbolic_full_map")
    parser.add_argument("--model", default=str(ROOT / "models" / "crazyflie_navigate.onnx"), help="the navigate level (learned)")
    parser.add_argument("--skill", default=str(ROOT / "models" / "crazyflie_goto.onnx"))
    parser.add_argument("--density", default="dense", choices=list(DENSITIES))
    parser.add_argument("--rooms", type=int, default=100)
    parser.add_argument("--split", default="train", choices=["eval", "train"],
                        help="train (default): choosing rooms, as candidates are compared; eval: the held-out rooms")
    parser.add_argument("--seed-offset", type=int, default=150, help="first room seed of the split")
    parser.add_argument("--seed", type=int, default=0, help="the simulator's seed")
    parser.add_argument("--oracle-tolerance-m", type=float, default=0.05,
                        help="the oracle keeps remembered hits this close to a true surface")
    parser.add_argument("--json", help="write both runs' summaries here")
    args = parser.parse_args(argv)
    if args.rooms < 1:
        parser.error(f"--rooms must be at least 1 (got {args.rooms})")
    if not (math.isfinite(args.oracle_tolerance_m) and args.oracle_tolerance_m >= 0.0):
        parser.error(f"--oracle-tolerance-m must be a distance >= 0 in metres (got {args.oracle_tolerance_m}); 0.05 is "
                     "the default")
    rooms = [generate_room(args.density, s, args.split) for s in room_seeds(args.split, args.rooms, args.seed_offset)]
    rows = {}
    for name, tol in tqdm((("real", None), ("oracle", args.oracle_tolerance_m)), desc="pictures"):
        probe = PictureProbe(tol)
        rows[name] = summary(fly(args.planner, rooms, args.model, args.skill, args.seed, probe), probe)
    for name, row in rows.items():
        shares = " ".join(f"phantom>{m} m {row.get(f'nearest_hit_phantom_over_{m}_m', float('nan')):.3f}" for m in PHANTOM_M)
        print(f"{args.planner:18s} {args.density:6s} {name:6s} success {row['success']}/{row['flights']} contacts "
              f"{row['contacts']} stop rejections {row['stop_rejections']} (nearest hit: {shares}; clearance p50 "
              f"remembered {row.get('remembered_clearance_p50_m', float('nan')):.3f} m, true "
              f"{row.get('true_clearance_p50_m', float('nan')):.3f} m)")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

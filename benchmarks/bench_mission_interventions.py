"""What the shield changes on whole missions flown as the stack flies them (issue #16's < 1 % of ticks).

Each flight is one mission from the ground: the robot at rest on the floor at the world's start with its motors
stopped, a fresh shield (nothing declared: the airframe's hover thrust and motor lag unknown, the design's worst case
until the flight identifies them), the symbolic planner, the shipped ONNX policy through the skill's core, PyBullet
in lockstep at the control rate (sim/fault_drill.py ``MissionRig``: the wiring of the node graph without the
transport). The task is drawn per flight: ``takeoff H; goto P1; goto P2; goto P3; land`` with H in 0.6-1.5 m and
each P a free point of the world (0.6 m from every box and wall, 0.6-1.5 m high). ``--randomize`` draws each
flight's airframe from the training's ranges (mass 27-36 g, rotors 0.9-1.1, motors 0.02-0.15 s, battery 3.3-4.2 V,
0-1 tick of latency, a steady disturbance).

    python benchmarks/bench_mission_interventions.py --flights 100 --seed 0
    python benchmarks/bench_mission_interventions.py --flights 100 --seed 0 --randomize

Prints: flights, the missions done and landed, those the battery unit ended (the randomized battery starts as low as
3.3 V open-circuit: it holds, then lands), violations from PyBullet's ground truth (fence, ceiling, obstacles,
a floor impact, motors on at the end), and the shield's interventions: ticks changed over the ticks with the motors running, less the requested landing the
shield's backup flies (``command.land_request``: the mission's own ``land`` step, not a change of the policy's
command), per constraint, and over the first 1.5 s after the take-off (while the
shield learns the airframe) against the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.fault_drill import MissionRig  # noqa: E402
from sim.safety_eval import sample_free_starts  # noqa: E402

LEARNING_S = 1.5
"""The first seconds after the take-off, reported apart (the hover-thrust estimate converges in about 1 s)."""
BATTERY_ENDS = frozenset({"battery.low_battery_hold", "battery.low_battery_land"})
"""The battery unit's constraints: a flight with either was ended by the battery unit."""


def random_task(world, rng: np.random.Generator, legs: int = 3) -> str:
    """``takeoff H; goto P1; ...; land``: H in 0.6-1.5 m, each P a free point (0.6 m clear), 0.6-1.5 m high."""
    height = rng.uniform(0.6, 1.5)
    points = sample_free_starts(world, legs, rng, clearance_m=0.6, z_range=(0.6, 1.5))
    steps = [f"takeoff {height:.2f}"] + [f"goto {p[0]:.2f} {p[1]:.2f} {p[2]:.2f}" for p in points] + ["land"]
    return "; ".join(steps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flights", type=int, default=100, help="missions, each with its own task (and airframe with --randomize)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the tasks and the airframes")
    ap.add_argument("--randomize", action="store_true", help="each flight's airframe from the training's randomization ranges")
    ap.add_argument("--legs", type=int, default=3, help="goto steps per mission (default 3)")
    ap.add_argument("--margin", type=float, default=None,
                    help="the planner's safety_margin_m (default: the launch's, launch/params/navigation.yaml)")
    ap.add_argument("--config", type=Path, default=None, help="the shield's YAML (default: the robot's own)")
    ap.add_argument("--json", type=Path, default=None, help="write every flight's figures here")
    args = ap.parse_args(argv)
    if args.flights < 1 or args.legs < 1:
        ap.error("--flights and --legs must be at least 1")
    if args.margin is not None and not args.margin >= 0.0:
        ap.error(f"--margin must be a distance >= 0 m, got {args.margin}")
    if args.config is not None and not args.config.is_file():
        ap.error(f"--config {args.config}: no such file; give a shield YAML (e.g. robot_hrl/robots/crazyflie_2x/shield.yaml)")
    from tqdm import tqdm

    randomization = None
    if args.randomize:
        from sim.pybullet import RandomizationCfg

        randomization = RandomizationCfg.from_training()
    rig = MissionRig(safety_margin_m=args.margin, shield_config=args.config)
    rng = np.random.default_rng(args.seed)
    flights = []
    t0 = time.perf_counter()
    for i in tqdm(range(args.flights), desc="missions", unit="flight"):
        task = random_task(rig.world, rng, args.legs)
        f = rig.fly(task, seed=args.seed * 100_000 + i, randomization=randomization)
        flights.append((task, f))
    wall = time.perf_counter() - t0
    window_ticks = int(round(LEARNING_S * float(rig.policy.contract.control_rate_hz)))

    air_ticks = early_ticks = 0
    changed = early_changed = 0
    by_constraint: dict[str, int] = {}
    done = battery_ended = 0
    violated = []
    rows = []
    for task, f in flights:
        air = f.flying_ticks
        air_ticks += air
        changed += len(f.intervened_s)
        t_off = f.takeoff_s if f.takeoff_s is not None else 0.0
        n_early = sum(1 for t in f.intervened_s if t < t_off + LEARNING_S)
        early_changed += n_early
        early_ticks += min(window_ticks, air)
        for k, n in f.flying_interventions.items():
            by_constraint[k] = by_constraint.get(k, 0) + n
        ok = f.planner_state == "done" and "landed" in f.skill_states
        done += ok
        by_battery = bool(BATTERY_ENDS & f.flying_interventions.keys())
        battery_ended += by_battery
        if not f.ok:
            violated.append((f.seed, f.violations))
        rows.append({"task": task, "seed": f.seed, "airframe": f.airframe, "done": ok, "violations": f.violations,
                     "air_ticks": air, "ticks_intervened": len(f.intervened_s), "landing_ticks": f.landing_ticks,
                     "early_intervened": n_early, "interventions": f.flying_interventions, "duration_s": f.duration_s,
                     "mode_ticks": f.mode_ticks, "battery_ended": by_battery})
    n = len(flights)
    kind = "randomized airframes" if args.randomize else "nominal airframe"
    print(f"== missions from the ground, fresh shield, {kind}, seed {args.seed}, planner margin {rig.safety_margin_m} m: "
          f"{n} flights, {wall:.0f} s wall")
    print(f"done and landed      {done} of {n} ({100.0 * done / n:.1f} %)")
    print(f"ended by the battery {battery_ended} (the battery unit's hold and landing: an open-circuit voltage near 3.3 V)")
    print(f"violations           {len(violated)} flights (PyBullet ground truth)")
    for seed, v in violated:
        print(f"  seed {seed}: {v}")
    print(f"interventions        {changed} of {air_ticks} ticks in the air = {100.0 * changed / max(air_ticks, 1):.2f} %")
    late_changed, late_ticks = changed - early_changed, air_ticks - early_ticks
    print(f"  first {LEARNING_S} s after take-off: {early_changed} of {early_ticks} = {100.0 * early_changed / max(early_ticks, 1):.2f} %; "
          f"after: {late_changed} of {late_ticks} = {100.0 * late_changed / max(late_ticks, 1):.2f} %")
    if battery_ended:
        kept = [r for r in rows if not r["battery_ended"]]
        c, a = sum(r["ticks_intervened"] for r in kept), sum(r["air_ticks"] for r in kept)
        print(f"  the {len(kept)} flights the battery did not end: {c} of {a} = {100.0 * c / max(a, 1):.2f} %")
    per_flight = np.array([r["ticks_intervened"] / max(r["air_ticks"], 1) for r in rows]) * 100.0
    print(f"  per flight: median {np.median(per_flight):.2f} %, p90 {np.percentile(per_flight, 90):.2f} %, max {per_flight.max():.2f} %")
    print(f"mission time         median {np.median([r['duration_s'] for r in rows]):.1f} s simulated")
    print("-- records per unit.constraint (ticks it acted on)")
    for k, v in sorted(by_constraint.items(), key=lambda kv: -kv[1]):
        print(f"  {k:34s} {v:6d}  ({100.0 * v / max(air_ticks, 1):.2f} % of ticks in the air)")
    if args.json is not None:
        args.json.write_text(json.dumps({"flights": rows, "randomize": args.randomize, "seed": args.seed}, indent=1))
    return 0 if not violated else 1


if __name__ == "__main__":
    sys.exit(main())

"""Safety shield figures: overhead per control tick, adversarial closed-loop violations, and the
trained policy with and without the shield.

    python benchmarks/bench_shield.py                 # everything, >= 1000 episodes per policy
    python benchmarks/bench_shield.py --episodes 200  # a quicker run
    python benchmarks/bench_shield.py --only overhead

Prints:
- Shield.step wall time per tick (p50 / p99 / mean, microseconds) on one core, in four
  situations: nominal hover (policy passes), flight near an obstacle with clamps (policy
  clamped), backup controller in charge (policy output NaN), motors off (estop); and the
  differential drive's shield (robot_hrl/robots/diff_drive) driving in free space;
- for the uniform-random and the fence/floor/obstacle adversary policies, with the shield in
  the loop of the torch simulator (demo world): episodes, ticks, geofence / altitude /
  collision violation counts (required: 0), and the same without the shield for contrast;
- nominal flight: a well-behaved cascaded PD flying to goals, with and without the shield
  (success rates, the shield's intervention rate);
- the adversarial runs again with the training's domain randomization (the shield is designed for the whole range: target zero, see benchmarks/README.md);
- the trained policy (models/crazyflie_goto.onnx) with and without the shield: success rates
  and the shield's intervention rate (the fraction of ticks on which it changed the command).
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from robot_hrl.robots import get_robot  # noqa: E402
from robot_hrl.safety import Shield, ShieldInput, load_shield_config  # noqa: E402
from robot_hrl.state import RobotState  # noqa: E402
from robot_hrl.world import load_world  # noqa: E402

WORLD = REPO / "models" / "worlds" / "demo.yaml"
CRAZYFLIE_2X = get_robot("crazyflie_2x")


def _percentiles(samples_ns: np.ndarray) -> str:
    """p50, p99, mean and min: on a shared machine the min (the tick no other process interrupted) is
    the steadiest figure to compare two versions by."""
    us = samples_ns / 1e3
    return (f"p50 {np.percentile(us, 50):6.1f} us   p99 {np.percentile(us, 99):6.1f} us   mean {us.mean():6.1f} us   "
            f"min {us.min():5.1f} us")


def bench_overhead(ticks: int, drop_units: tuple[str, ...] = ()) -> None:
    world = load_world(WORLD)
    cfg = load_shield_config()
    if drop_units:  # the shipped shield without these units (what a unit costs per tick)
        cfg = cfg.model_copy(update={"units": tuple(u for u in cfg.units if u not in drop_units),
                                     **{u: None for u in drop_units if hasattr(cfg, u)}})
        print(f"  without the units {list(drop_units)}")
    rng = np.random.default_rng(0)

    def measure(name, make_inputs, setup=None, robot=CRAZYFLIE_2X):
        shield = Shield(cfg, robot, world, 1.0) if robot is CRAZYFLIE_2X else Shield.from_yaml(None, robot, world, 1.0)
        if setup:
            setup(shield)
        inputs = make_inputs(shield)
        step = shield.step
        pc = time.perf_counter_ns
        for inp in inputs[:500]:  # warm up
            step(inp)
        out = np.empty(len(inputs), dtype=np.int64)
        for k, inp in enumerate(inputs):
            t0 = pc()
            step(inp)
            out[k] = pc() - t0
        print(f"  {name:<34} {_percentiles(out[500:])}   (modes: {dict((m, n) for m, n in shield.mode_ticks.items() if n)})")

    def hover(shield):
        a = np.array([shield.model.wrench_to_action(0, CRAZYFLIE_2X.weight_n), 0.0, 0.0, 0.0])
        out = []
        for k in range(ticks):
            t = 1.0 + k * 0.01
            st = RobotState(np.array([2.0, 2.3, 1.0]) + rng.normal(0, 1e-3, 3), np.array([1.0, 0, 0, 0]), rng.normal(0, 0.01, 3), rng.normal(0, 0.01, 3), t)
            out.append(ShieldInput(t, st, a + rng.normal(0, 1e-3, 4), subgoal_w=np.array([2.0, 2.3, 1.0]), subgoal_stamp_s=t, inference_s=1e-3, battery_v=4.0))
        return out

    def clamped(shield):
        out = []
        for k in range(ticks):
            t = 1.0 + k * 0.01
            st = RobotState(np.array([1.0, 1.5, 1.0]), np.array([1.0, 0, 0, 0]), np.array([0.05, 0.0, 0.0]), rng.normal(0, 0.5, 3), t)
            a = rng.uniform(-1, 1, 4)
            a[0] = -0.1
            out.append(ShieldInput(t, st, a, subgoal_w=np.array([1.0, 1.5, 1.0]), subgoal_stamp_s=t, inference_s=1e-3, battery_v=4.0))
        return out

    def backup(shield):
        out = []
        for k in range(ticks):
            t = 1.0 + k * 0.01
            st = RobotState(np.array([2.0, 2.3, 1.0]), np.array([1.0, 0, 0, 0]), rng.normal(0, 0.01, 3), rng.normal(0, 0.01, 3), t)
            out.append(ShieldInput(t, st, np.full(4, np.nan), subgoal_w=np.array([2.0, 2.3, 1.0]), subgoal_stamp_s=t, inference_s=1e-3))
        return out

    def driving(shield):
        out = []
        for k in range(ticks):
            t = 1.0 + k * 0.05
            st = RobotState(np.array([1.0, 2.3, 0.0]) + rng.normal(0, 1e-3, 3), np.array([1.0, 0, 0, 0]),
                            np.array([0.1, 0.0, 0.0]) + rng.normal(0, 0.01, 3), rng.normal(0, 0.01, 3), t)
            out.append(ShieldInput(t, st, np.array([0.4, 0.0]) + rng.normal(0, 1e-3, 2), subgoal_w=np.array([1.5, 2.3, 0.0]),
                                   subgoal_stamp_s=t, inference_s=1e-3))
        return out

    print(f"shield overhead per tick (Shield.step only, {ticks} ticks each, single thread):")
    measure("nominal hover (policy passes)", hover)
    measure("near pillar_a, random torques", clamped)
    measure("backup in charge (NaN policy)", backup)
    measure("emergency stop latched", backup, setup=lambda s: s.estop("bench"))
    try:
        diff_drive = get_robot("diff_drive")
    except KeyError:  # a checkout before the differential drive (issue #20)
        return
    measure("diff drive driving (policy passes)", driving, robot=diff_drive)


def bench_range_overhead(ticks: int) -> None:
    """Shield.step with the range source (the skill node's ``range_shield``: shield_ranges.yaml over the shipped
    shield), flying 0.8 m/s down a 1.2 m corridor, the four horizontal rangers read every 10th tick (10 Hz at 100 Hz),
    with the section's ``unknown`` rule as shipped and off (what that rule costs per tick)."""
    from robot_hrl.nodes.skill_node import range_shield

    world = load_world(WORLD)
    print(f"range source overhead per tick (Shield.step, {ticks} ticks each, 0.8 m/s down a corridor, rangers at 10 Hz):")
    for label, creep in (("as shipped", "shipped"), ("unknown rule off", None)):
        shield = range_shield(None, CRAZYFLIE_2X, world, 1.0, CRAZYFLIE_2X.action_spec())
        unit = shield.unit("range_obstacles")
        if creep != "shipped":
            unit.unknown_creep_m = creep
        a = np.array([shield.model.wrench_to_action(0, CRAZYFLIE_2X.weight_n), 0.0, 0.0, 0.0])
        pc = time.perf_counter_ns
        out = np.empty(ticks, dtype=np.int64)
        for k in range(ticks):
            t = 1.0 + k * 0.01
            x = 0.5 + (0.8 * k * 0.01) % 3.0  # back and forth along the corridor's 3 m
            if k % 10 == 0:
                for name, r in (("front", math.inf), ("back", math.inf), ("left", 0.55), ("right", 0.55)):
                    unit.update(name, r, t)
            st = RobotState(np.array([x, 2.3, 1.0]), np.array([1.0, 0, 0, 0]), np.array([0.8, 0.0, 0.0]), np.zeros(3), t)
            inp = ShieldInput(t, st, a, subgoal_w=np.array([x + 0.5, 2.3, 1.0]), subgoal_stamp_s=t, inference_s=1e-3,
                              battery_v=4.0)
            t0 = pc()
            shield.step(inp)
            out[k] = pc() - t0
        print(f"  {label:<34} {_percentiles(out[500:])}   unknown_creep_m {unit.unknown_creep_m}")


def bench_closed_loop(episodes: int, episode_s: float, seed: int, trained: bool, onnx: str | None, randomized: int,
                      declare_mass: str | None = None) -> None:
    import torch

    from sim import safety_eval

    torch.set_num_threads(1)
    print(f"\nadversarial closed loop in the torch simulator (world {WORLD.name}, {episode_s:g} s episodes at 100 Hz, nominal robot):")
    for policy in ("random", "adversary"):
        t0 = time.perf_counter()
        res = safety_eval.run(policy, episodes=episodes, episode_s=episode_s, seed=seed, progress=True)
        print(f"  {res.summary()}  wall {time.perf_counter() - t0:.0f} s")
        base = safety_eval.run(policy, episodes=min(episodes, 200), episode_s=episode_s, seed=seed, shielded=False)
        print(f"  {base.summary()}  (no shield, for contrast)")
    print("\nnominal flight: a well-behaved cascaded PD flying to goals within the subgoal radius (intervention rate reference):")
    res = safety_eval.run("pd", episodes=episodes, episode_s=episode_s, seed=seed, progress=True)
    print(f"  {res.summary()}")
    base = safety_eval.run("pd", episodes=episodes, episode_s=episode_s, seed=seed, shielded=False)
    print(f"  {base.summary()}  (no shield)")
    if randomized:
        print(f"\nwith the training's domain randomization (mass, inertia, k_f, motor lag 0.02-0.15 s, disturbances, 0-1 step latency), {randomized} episodes:")
        for policy in ("random", "adversary"):
            res = safety_eval.run(policy, episodes=randomized, episode_s=episode_s, seed=seed, randomize=True)
            print(f"  {res.summary()}")
    if trained:
        bench_trained(episodes, episode_s, seed, onnx, declare_mass)


def bench_trained(episodes: int, episode_s: float, seed: int, onnx: str | None, declare_mass: str | None = None) -> None:
    import torch

    from sim import safety_eval

    torch.set_num_threads(1)
    print("\ntrained policy (models/crazyflie_goto.onnx), goals within the subgoal radius in free space:")
    for shielded in (False, True):
        res = safety_eval.run("trained", episodes=episodes, episode_s=episode_s, seed=seed, shielded=shielded, progress=True, onnx_path=onnx)
        print(f"  {res.summary()}")
    if declare_mass:
        res = safety_eval.run("trained", episodes=episodes, episode_s=episode_s, seed=seed, progress=True, onnx_path=onnx,
                              declare_mass=declare_mass)
        print(f"  {res.summary()}  (airframe declared: {declare_mass})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " Prints the figures for benchmarks/README.md.")
    parser.add_argument("--only", choices=("overhead", "closed-loop", "trained"), default=None, help="run one part only")
    parser.add_argument("--ticks", type=int, default=20000, help="ticks per overhead measurement")
    parser.add_argument("--episodes", type=int, default=1000, help="batched episodes per closed-loop run (>= 1000 for the record)")
    parser.add_argument("--episode-s", type=float, default=5.0, help="episode length, s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-trained", action="store_true", help="skip the trained-policy runs")
    parser.add_argument("--randomized", type=int, default=200, help="episodes of the randomized-robot runs (0: skip)")
    parser.add_argument("--onnx", default=None, help="policy for the trained runs (default models/crazyflie_goto.onnx)")
    parser.add_argument("--declare-mass", nargs="?", const="mass", default=None, choices=("mass", "hover-thrust"),
                        help="also run the trained policy with each shield's airframe declared (stopping.airframe_mass_kg; "
                             "sim/safety_eval.py --declare-mass): 'mass' (the default) or 'hover-thrust'")
    parser.add_argument("--drop-unit", action="append", default=[], metavar="NAME",
                        help="overhead without this listed unit (repeatable), e.g. motor_lag: what a unit costs per tick")
    args = parser.parse_args(argv)
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    if args.only in (None, "overhead"):
        bench_overhead(args.ticks, tuple(args.drop_unit))
        bench_range_overhead(args.ticks)
    if args.only in (None, "closed-loop"):
        bench_closed_loop(args.episodes, args.episode_s, args.seed, not args.no_trained, args.onnx, args.randomized,
                          args.declare_mass)
    if args.only == "trained":
        bench_trained(args.episodes, args.episode_s, args.seed, args.onnx, args.declare_mass)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

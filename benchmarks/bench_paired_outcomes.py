#!/usr/bin/env python
"""Two go-to models on the same episodes: how each episode ends, and the episodes only one of them fails.

Both models fly the same starts, goals, airframes, disturbances and noise (the training simulator on the firmware
chain, full randomization, the evaluation settings of bench_firmware_chain.py; one episode per env, the env's seed
fixes everything but the actions). Each episode ends as success, crash, out of bounds, "far" (timed out 0.10 m or
more from the goal) or "fast" (timed out within 0.10 m but faster than 0.2 m/s). For the episodes only the second
model fails it prints what it was doing: whether it ever came within 0.10 m, its largest tilt, the largest value its
position error integral reached (when it observes one) and the airframe's motor lag and latency. Issue 17 used it to
find why the hand-set no-sag candidate lost a point of success (benchmarks/README.md).

    python benchmarks/bench_paired_outcomes.py --model models/crazyflie_goto.onnx --against runs/cand.onnx --seed 10000 --episodes 8000
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CATEGORIES = ("success", "crash", "out_of_bounds", "far", "fast")


def outcomes(path: Path, episodes: int, seed: int, num_envs: int = 250) -> list[dict]:
    """Per episode: its category and what the flight did (see the module docstring)."""
    import torch

    from benchmarks.bench_firmware_chain import OnnxActor, _cfg
    from robot_hrl.robots import CRAZYFLIE_2X
    from sim.envs import GotoEnv

    actor = OnnxActor(path, CRAZYFLIE_2X.action_spec())
    cfg = _cfg(actor.error_integral)
    rows: list[dict] = []
    for first in range(0, episodes, num_envs):
        n = min(num_envs, episodes - first)
        env = GotoEnv(cfg, num_envs=n, seed=seed + first)
        tol = cfg.success.position_tolerance_m
        lag = env.params["motor_time_constant_s"][:, 0].clone()
        latency = env.params["action_latency_steps"].clone()
        obs = env.get_observations()["policy"]
        live = torch.ones(n, dtype=torch.bool)
        came_within = torch.zeros(n, dtype=torch.bool)
        max_tilt = torch.zeros(n)
        max_integral = torch.zeros(n)
        for _ in range(env.max_episode_length):
            max_integral = torch.where(live, torch.maximum(max_integral, env.position_error_integral.abs().amax(dim=1)), max_integral)
            td, _, dones, extras = env.step(torch.as_tensor(actor(obs.numpy()), dtype=torch.float32))
            obs = td["policy"]
            q = env.quat_wxyz
            tilt = torch.rad2deg(torch.acos((1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2)).clamp(-1.0, 1.0)))
            max_tilt = torch.where(live, torch.maximum(max_tilt, tilt), max_tilt)
            came_within |= live & ((env.goal_w - env.position_w).norm(dim=1) < tol)
            end = extras["episode_end"]
            for i in torch.nonzero(dones.bool() & live).flatten().tolist():
                err = float(end["final_position_error_m"][i])
                category = ("success" if end["success"][i] else "crash" if end["crashed"][i] else
                            "out_of_bounds" if end["out_of_bounds"][i] else "far" if err >= tol else "fast")
                rows.append({"episode": first + i, "category": category, "final_error_m": err,
                             "came_within": bool(came_within[i]), "max_tilt_deg": float(max_tilt[i]),
                             "max_integral_m_s": float(max_integral[i]) if actor.observes_error_integral else None,
                             "motor_time_constant_s": float(lag[i]), "latency_steps": int(latency[i])})
            live &= ~dones.bool()
            if not live.any():
                break
    return sorted(rows, key=lambda r: r["episode"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", type=Path, default=ROOT / "models" / "crazyflie_goto.onnx", help="the reference model")
    p.add_argument("--against", type=Path, required=True, help="the model compared with it on the same episodes")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--seed", type=int, default=10000, help="the first env seed (each batch of 250 episodes takes the next)")
    p.add_argument("--list", type=int, default=20, help="print at most this many episodes only --against fails")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    a, b = outcomes(args.model, args.episodes, args.seed), outcomes(args.against, args.episodes, args.seed)
    for name, rows in ((args.model.name, a), (args.against.name, b)):
        counts = collections.Counter(r["category"] for r in rows)
        print(f"{name:28s} success {counts['success'] / len(rows):.4f}  " + "  ".join(f"{c} {counts[c]}" for c in CATEGORIES[1:]))
    moved = collections.Counter((x["category"], y["category"]) for x, y in zip(a, b) if x["category"] != y["category"])
    print("episodes that end differently (model -> against):")
    for (x, y), k in moved.most_common():
        print(f"  {x:14s} -> {y:14s} {k}")
    only = [(x, y) for x, y in zip(a, b) if x["category"] == "success" and y["category"] != "success"]
    print(f"{len(only)} episodes only {args.against.name} fails ({sum(1 for x, y in zip(a, b) if y['category'] == 'success' != x['category'])} "
          f"only {args.model.name} fails); the first {min(args.list, len(only))}:")
    for x, y in only[:args.list]:
        integral = "" if y["max_integral_m_s"] is None else f"  max |integral| {y['max_integral_m_s']:.4f} m s"
        print(f"  episode {y['episode']:5d} {y['category']:14s} final {1000 * y['final_error_m']:7.1f} mm (reference {1000 * x['final_error_m']:5.1f})"
              f"  came within 0.1 m: {y['came_within']!s:5s} (reference {x['came_within']!s:5s})  max tilt {y['max_tilt_deg']:5.1f} deg"
              f" (reference {x['max_tilt_deg']:5.1f}){integral}  motor lag {y['motor_time_constant_s']:.3f} s, latency {y['latency_steps']}")
    print(f"load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""Where a go-to policy's final error comes from: the distance to the goal against time over whole episodes.

Runs the models (onnxruntime, deterministic actions) on the same randomized episodes of the training simulator
(the evaluation configuration of bench_firmware_chain.py: the firmware chain, the whole motor-lag range) and,
for every episode that runs to its time-out, splits the final error into

- **bias**: the mean position error over the last ``--window-s`` seconds (what an integral could remove);
- **ripple**: the RMS of the error about a straight line fitted over the window (a limit cycle, or the answer to noise);
- **drift**: the mean error over the window minus the one over the window before (still converging?);

and reports the median distance at each second, the medians of the three parts (vertical and horizontal), and
the same by motor time constant, mass and battery. ``--png`` plots the median distance against time.

    python benchmarks/bench_settling.py --model models/crazyflie_goto.onnx --model /tmp/old.onnx --episodes 400 --seed 4000
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def trace_episodes(actor, cfg, episodes: int, seed: int, num_envs: int = 250) -> dict:
    """Every env's first episode: the true position error (goal minus position, world, m) at every tick, the
    integral the policy saw, the episode's parameters, and whether it ran to its time-out and succeeded."""
    import torch

    from sim.envs import GotoEnv

    errors, integrals, params, complete, success = [], [], {}, [], []
    done_total = 0
    while done_total < episodes:
        n = min(num_envs, episodes - done_total)
        env = GotoEnv(cfg, num_envs=n, seed=seed + done_total)
        for k, v in env.params.items():
            params.setdefault(k, []).append(v.clone().reshape(n, -1).float().numpy())
        T = env.max_episode_length
        err3 = np.full((n, T, 3), np.nan, dtype=np.float64)
        integ = np.full((n, T, 3), np.nan, dtype=np.float64)
        finished = torch.zeros(n, dtype=torch.bool)
        ok = np.zeros(n, dtype=bool)
        timed_out = np.zeros(n, dtype=bool)
        obs = env.get_observations()["policy"]
        has_integral = "position_error_integral" in [t.name for t in env.contract.observations]
        for t in range(T):
            live = (~finished).numpy()
            e = (env.goal_w - env.position_w).numpy().astype(np.float64)
            err3[live, t] = e[live]
            if has_integral:
                integ[live, t] = env.position_error_integral.numpy()[live]
            actions = torch.as_tensor(actor(obs.numpy()), dtype=torch.float32)
            td, _, dones, extras = env.step(actions)
            obs = td["policy"]
            new = dones.bool() & ~finished
            if new.any():
                idx = torch.nonzero(new).flatten().numpy()
                ok[idx] = extras["episode_end"]["success"][idx].numpy().astype(bool)
                timed_out[idx] = extras["time_outs"][idx].numpy().astype(bool)
                finished |= new
            if finished.all():
                break
        errors.append(err3)
        integrals.append(integ)
        complete.append(timed_out)
        success.append(ok)
        done_total += n
    return {"error_w": np.concatenate(errors), "integral": np.concatenate(integrals), "timed_out": np.concatenate(complete),
            "success": np.concatenate(success), "params": {k: np.concatenate(v) for k, v in params.items()},
            "control_rate_hz": 1.0 / env.step_dt}


def decompose(trace: dict, window_s: float) -> dict:
    """Bias, ripple and drift of the episodes that ran to their time-out (see the module docstring), m."""
    e = trace["error_w"][trace["timed_out"]]
    w = round(window_s * trace["control_rate_hz"])
    last, before = e[:, -w:], e[:, -2 * w:-w]
    mean_last = last.mean(axis=1)
    mean_before = before.mean(axis=1)
    tt = np.arange(w) - (w - 1) / 2.0
    slope = (last * tt[None, :, None]).sum(axis=1) / (tt * tt).sum()  # per tick, a least-squares line through the window
    ripple = np.sqrt(((last - mean_last[:, None] - slope[:, None] * tt[None, :, None]) ** 2).mean(axis=1))  # (n, 3) about the line
    final = e[:, -1]
    return {
        "episodes_timed_out": e.shape[0],
        "median_final_m": float(np.median(np.linalg.norm(final, axis=-1))),
        "median_final_z_m": float(np.median(np.abs(final[:, 2]))),
        "median_final_xy_m": float(np.median(_horizontal(final))),
        "median_bias_m": float(np.median(np.linalg.norm(mean_last, axis=-1))),
        "median_bias_z_m": float(np.median(np.abs(mean_last[:, 2]))),
        "median_bias_xy_m": float(np.median(_horizontal(mean_last))),
        "mean_bias_z_m": float(np.mean(mean_last[:, 2])),
        "median_ripple_m": float(np.median(np.linalg.norm(ripple, axis=-1))),
        "median_ripple_z_m": float(np.median(ripple[:, 2])),
        "median_ripple_xy_m": float(np.median(_horizontal(ripple))),
        "median_drift_m": float(np.median(np.linalg.norm(mean_last - mean_before, axis=-1))),
    }


def _horizontal(v: np.ndarray) -> np.ndarray:
    """The length of the x/y part (last axis)."""
    return np.linalg.norm(v[..., :2], axis=-1)


def by_bins(trace: dict, name: str, edges, scale: float = 1.0) -> list:
    """The median final distance of the timed-out episodes, by bins of one parameter."""
    p = trace["params"][name][trace["timed_out"]][:, 0] * scale
    final = np.linalg.norm(trace["error_w"][trace["timed_out"]][:, -1], axis=-1)
    rows = []
    for lo, hi in itertools.pairwise(edges):
        m = (p >= lo) & (p < hi)
        rows.append((lo, hi, int(m.sum()), float(np.median(final[m])) if m.any() else float("nan")))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", type=Path, action="append", required=True, help="an ONNX go-to model (repeat to compare)")
    p.add_argument("--episodes", type=int, default=400)
    p.add_argument("--seed", type=int, default=4000, help="not a seed the reported figures use (2027+ and 7)")
    p.add_argument("--mass-g", type=float, default=None, help="fix the mass (the rest randomized)")
    p.add_argument("--battery-v", type=float, default=None, help="fix the open-circuit voltage (the rest randomized)")
    p.add_argument("--window-s", type=float, default=1.0)
    p.add_argument("--png", type=Path, default=None, help="plot the median distance against time")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    import torch
    from bench_firmware_chain import OnnxActor, _cfg

    from robot_hrl.robots import CRAZYFLIE_2X

    torch.set_num_threads(1)
    ranges = {}
    if args.mass_g is not None:
        s = args.mass_g / 1000.0 / CRAZYFLIE_2X.mass_kg
        ranges["mass_scale_range"] = (s, s)
    if args.battery_v is not None:
        ranges["battery_open_circuit_range_v"] = (args.battery_v, args.battery_v)
    out = {"load_average_1min_before": os.getloadavg()[0], "models": {}}
    curves = {}
    for path in args.model:
        actor = OnnxActor(path, CRAZYFLIE_2X.action_spec())
        tr = trace_episodes(actor, _cfg(actor.error_integral, **ranges), args.episodes, args.seed)
        d = decompose(tr, args.window_s)
        dist = np.linalg.norm(tr["error_w"][tr["timed_out"]], axis=-1)
        rate = tr["control_rate_hz"]
        at_s = {f"{s:.1f}": float(np.median(dist[:, min(int(s * rate), dist.shape[1] - 1)])) for s in (1, 2, 3, 3.5, 4, 4.5, 4.99)}
        e_to = tr["error_w"][tr["timed_out"]]
        d["median_abs_z_at_s_m"] = {f"{s:.1f}": float(np.median(np.abs(e_to[:, min(int(s * rate), e_to.shape[1] - 1), 2]))) for s in (2, 3, 4, 4.99)}
        d["median_xy_at_s_m"] = {f"{s:.1f}": float(np.median(np.linalg.norm(e_to[:, min(int(s * rate), e_to.shape[1] - 1), :2], axis=-1)))
                                 for s in (2, 3, 4, 4.99)}
        d["median_distance_at_s_m"] = at_s
        d["success_rate"] = float(tr["success"].mean())
        integ = tr["integral"][tr["timed_out"]][:, -1]
        d["median_abs_final_integral_m_s"] = [float(v) for v in np.median(np.abs(integ), axis=0)] if np.isfinite(integ).all() else None
        d["by_motor_time_constant_s"] = by_bins(tr, "motor_time_constant_s", [0.02, 0.04, 0.07, 0.10, 0.151])
        d["by_mass_g"] = by_bins(tr, "mass_scale", [27, 30, 33, 36.01], scale=1000 * CRAZYFLIE_2X.mass_kg)
        d["by_battery_v"] = by_bins(tr, "battery_open_circuit_v", [3.3, 3.6, 3.9, 4.21])
        d["by_latency_steps"] = by_bins({**tr, "params": {"l": tr["params"]["action_latency_steps"].astype(float)}}, "l", [0, 0.5, 1.5])
        out["models"][str(path)] = d
        curves[path.name] = np.median(dist, axis=0)
        print(f"== {path}  success {d['success_rate']:.3f}  ({d['episodes_timed_out']} timed out)")
        print("  median distance at " + ", ".join(f"{k} s {1000 * v:.1f} mm" for k, v in at_s.items()))
        print("  median |z| at " + ", ".join(f"{k} s {1000 * v:.1f}" for k, v in d["median_abs_z_at_s_m"].items())
              + "; median xy at " + ", ".join(f"{k} s {1000 * v:.1f}" for k, v in d["median_xy_at_s_m"].items()) + " mm")
        print(f"  final {1000 * d['median_final_m']:.1f} mm (z {1000 * d['median_final_z_m']:.1f}, xy {1000 * d['median_final_xy_m']:.1f}); "
              f"bias over the last {args.window_s} s {1000 * d['median_bias_m']:.1f} (z {1000 * d['median_bias_z_m']:.1f}, "
              f"xy {1000 * d['median_bias_xy_m']:.1f}; mean z {1000 * d['mean_bias_z_m']:+.1f}); ripple {1000 * d['median_ripple_m']:.1f} "
              f"(z {1000 * d['median_ripple_z_m']:.1f}, xy {1000 * d['median_ripple_xy_m']:.1f}); drift {1000 * d['median_drift_m']:.1f} mm")
        print(f"  |integral| at the end (x, y, z): {d['median_abs_final_integral_m_s']}")
        for key in ("by_motor_time_constant_s", "by_mass_g", "by_battery_v", "by_latency_steps"):
            print(f"  {key}: " + "; ".join(f"[{lo:g}, {hi:g}) n={n} {1000 * m:.1f} mm" for lo, hi, n, m in d[key]))
    out["load_average_1min_after"] = os.getloadavg()[0]
    print(f"load average (1 min): {out['load_average_1min_before']:.2f} before, {out['load_average_1min_after']:.2f} after")
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for name, c in curves.items():
            ax.semilogy(np.arange(c.size) / rate, 1000 * c, label=name)
        ax.set_xlabel("time, s")
        ax.set_ylabel("median distance to the goal, mm")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

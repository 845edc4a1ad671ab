#!/usr/bin/env python
"""Training wall time from scratch until an evaluation reaches the target success rate.

Runs `sim/train.py --target-success 0.95` (PPO, rsl-rl-lib) and prints the wall time, the
environment steps and where the time went (simulation, policy inference, PPO update,
evaluations), read back from the run's eval.json.

    python benchmarks/bench_train.py                        # CPU, defaults of sim/train.py
    python benchmarks/bench_train.py --num-envs 4096 --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--target-success", type=float, default=0.95)
    p.add_argument("--num-envs", type=int, default=2048)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2, help="torch threads (2: both cores of the reference machine; use 1 on a shared machine)")
    p.add_argument("--max-iterations", type=int, default=1500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-interval", type=int, default=10)
    p.add_argument("--eval-skip-margin", type=float, default=0.3, help="see sim/train.py --help")
    p.add_argument("--eval-episodes", type=int, default=1000, help="final evaluation episodes")
    p.add_argument("--eval-episodes-during-training", type=int, default=1000, help="episodes of each evaluation that decides the stop")
    p.add_argument("--compile", action="store_true", help="sim/train.py --compile: the compiled env for training and evaluations (the first run on a machine compiles for minutes; later runs load inductor's cache)")
    p.add_argument("--native", action="store_true", help="sim/train.py --native: the C step for training and evaluations (built in ~1 s; sim/train.py's default on a CPU with a C compiler)")
    p.add_argument("--eager", action="store_true", help="sim/train.py --eager: the plain torch step")
    p.add_argument("--run-dir", default=None, help="keep the run here (default: a temporary directory)")
    args = p.parse_args(argv)
    from sim.train import main as train_main

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.run_dir or Path(tmp) / "bench_train")
        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        rc = train_main([
            "--num-envs", str(args.num_envs), "--device", args.device, "--threads", str(args.threads),
            "--max-iterations", str(args.max_iterations), "--seed", str(args.seed), "--target-success", str(args.target_success),
            "--eval-interval", str(args.eval_interval), "--eval-skip-margin", str(args.eval_skip_margin), "--eval-episodes", str(args.eval_episodes),
            "--eval-episodes-during-training", str(args.eval_episodes_during_training),
            "--run-dir", str(run_dir), "--no-progress", *(["--compile"] if args.compile else []), *(["--native"] if args.native else []), *(["--eager"] if args.eager else []),
        ])
        total = time.perf_counter() - t0
        load_after = os.getloadavg()[0]
        if rc != 0:
            return rc
        r = json.loads((run_dir / "eval.json").read_text())
    tb = r["time_breakdown_s"]
    reached = r["target_reached"]
    print("\n== bench_train ==")
    print(f"machine: {os.cpu_count()} CPUs, torch threads {args.threads}, 1-min load average {load_before:.2f} before / {load_after:.2f} after "
          f"(the run itself adds about {args.threads}; more means other processes shared the CPU and the wall time is inflated)")
    print(f"target success {args.target_success:.2f}: {'reached' if reached else 'NOT reached'} after {r['iterations']} iterations, "
          f"{r['env_steps']:,} env steps, {r['train_wall_time_s']:.1f} s training wall time "
          f"({total:.1f} s including start-up and the final evaluation)")
    print(f"time: simulation {tb['simulation_s']:.1f} s, policy inference + rollout bookkeeping {tb['inference_s']:.1f} s, "
          f"PPO update {tb['ppo_update_s']:.1f} s, evaluations during training {tb['evaluation_s']:.1f} s, other {tb['other_s']:.1f} s")
    print(f"final evaluation ({r['num_episodes']} episodes, randomization on): success {r['success_rate']:.3f}, "
          f"crash {r['crash_rate']:.3f}, mean final position error {r['mean_final_position_error_m']:.3f} m")
    return 0


if __name__ == "__main__":
    sys.exit(main())

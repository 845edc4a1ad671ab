#!/usr/bin/env python
"""Throughput of the batched crazyflie-goto simulator: env steps per second.

Each env step is one 100 Hz control step: action mapping, firmware mixer, the physics
substeps, terminations, rewards, resets of finished episodes and the observations (policy
and critic groups). Random actions, domain randomization on, so resets happen.

    python benchmarks/bench_sim_throughput.py                       # 1, 1024, 16384, 65536 envs, CPU, native step
    python benchmarks/bench_sim_throughput.py --eager               # the plain torch step
    python benchmarks/bench_sim_throughput.py --compile --threads 2
    python benchmarks/bench_sim_throughput.py --native --threads 2          # the C step (physics.native)
    python benchmarks/bench_sim_throughput.py --device cuda --num-envs 65536 262144
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(num_envs: int, device: str, steps: int, compile_physics: bool, seed: int = 0, native: bool = False) -> dict:
    import torch

    from sim.envs import GotoEnv, GotoEnvCfg

    cfg = GotoEnvCfg()
    cfg.physics.compile = compile_physics
    cfg.physics.native = native
    env = GotoEnv(cfg, num_envs=num_envs, device=device, seed=seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    actions = [torch.rand((num_envs, 4), generator=gen, device=device) * 2 - 1 for _ in range(8)]
    t0 = time.perf_counter()
    env.step(actions[0])  # first call: compilation (with --compile)
    first = time.perf_counter() - t0
    for i in range(1, 3):  # warm-up
        env.step(actions[i % 8])
    warm = time.perf_counter() - t0
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    sync()
    resets = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(steps):
        _, _, dones, _ = env.step(actions[i % 8])
        resets += int(dones.sum()) if i % 16 == 0 else 0
    sync()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"num_envs": num_envs, "steps": steps, "seconds": dt, "env_steps_per_s": num_envs * steps / dt,
            "ms_per_step": 1e3 * dt / steps, "warmup_s": warm, "first_step_s": first,
            "cpu_env_steps_per_s": num_envs * steps / max(cpu, 1e-9)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--num-envs", type=int, nargs="+", default=[1, 1024, 16384, 65536], help="batch sizes to measure")
    p.add_argument("--device", default="cpu", help="torch device")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    step = p.add_mutually_exclusive_group()
    step.add_argument("--compile", action="store_true", help="fused torch.compile path (PhysicsCfg.compile): first step compiles")
    step.add_argument("--native", action="store_true", help="the C step (PhysicsCfg.native, sim/envs/native), built with the system C compiler: "
                      "the default on a CPU with a C compiler, as in sim/train.py")
    step.add_argument("--eager", action="store_true", help="the plain torch step")
    p.add_argument("--seconds", type=float, default=3.0, help="approximate measuring time per batch size")
    args = p.parse_args(argv)
    import torch

    if not (args.compile or args.native or args.eager) and torch.device(args.device).type == "cpu":
        from sim.envs.native.build import compiler_missing

        reason = compiler_missing()
        args.native = reason is None
        if reason:
            print(f"note: the eager step: {reason}")

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"crazyflie-goto env throughput | device {args.device} | torch {torch.__version__} | threads {torch.get_num_threads()} "
          f"| compile {args.compile} | native {args.native} | {platform.processor() or platform.machine()} x{os.cpu_count()}")
    # cpu steps/s: env steps per second of this process's CPU time; with --threads 1 on a shared
    # machine it is what an unshared core would give (wall time also counts waiting for the CPU)
    print(f"{'num_envs':>9} {'ms/step':>9} {'env steps/s':>14} {'cpu steps/s':>14} {'first step s':>13}")
    for n in args.num_envs:
        probe = measure(n, args.device, 3, args.compile, native=args.native)  # its first step compiles (with --compile); later envs reuse the graph
        steps = max(5, min(2000, int(args.seconds / max(probe["ms_per_step"] / 1e3, 1e-6))))
        r = measure(n, args.device, steps, args.compile, native=args.native)
        print(f"{n:>9} {r['ms_per_step']:>9.3f} {r['env_steps_per_s']:>14,.0f} {r['cpu_env_steps_per_s']:>14,.0f} "
              f"{probe['first_step_s']:>13.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Single-sample latency of the onboard policy runtime (robot_hrl.runtime.OnnxPolicy).

Prints p50 / p99 / p99.9 / max in microseconds for:
  raw onnxruntime   InferenceSession.run on a (1, n_obs) array (the floor; no runtime code)
  infer             OnnxPolicy.infer(obs) for one observation (checks + pre-bound I/O)
  observe           the contract observation from a RobotState + subgoal
  to_command        normalized actions -> the robot's command with the contract's mapping
                    (the Crazyflie: [thrust, tau_x, tau_y, tau_z]; called to_wrench before issue #20)
  tick              step(state, subgoal) + to_command: one whole control tick
  tick, heading     with --heading-from LEVEL: the tick under the level's heading loop (HeadingLoop.step: the
                    observation turned into the skill's frame, the loop's yaw torque) + to_command, as the skill
                    node runs it under planner:=learned (no target: issue #3's is for the plain tick)
  infer batch 1024  OnnxPolicy.infer on 1024 observations at once (throughput)

Targets (issue #3): infer p50 <= 20 us, tick p99 <= 100 us. The garbage collector stays on,
as it would in a node. Run it on an otherwise idle machine; a shared CPU inflates p99.

    python benchmarks/bench_runtime_latency.py [--model models/crazyflie_goto.onnx] [--iterations 20000]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from robot_hrl.geometry import quat_from_euler_rpy  # noqa: E402
from robot_hrl.nodes.deadline import LoopGc  # noqa: E402
from robot_hrl.runtime import OnnxPolicy  # noqa: E402
from robot_hrl.state import RobotState  # noqa: E402

TARGETS_US = {"infer": ("p50", 20.0), "tick": ("p99", 100.0)}


def measure(fn, iterations: int, warmup: int, gc_after_tick: bool = True) -> np.ndarray:
    """Microseconds per call. With ``gc_after_tick`` the garbage collector runs as in the skill node's loop
    (robot_hrl.nodes.deadline.LoopGc: start-up objects frozen, the due collection right after a call,
    outside the timed window); without it Python collects whenever an allocation crosses its threshold."""
    loop_gc = LoopGc(after_tick=gc_after_tick)
    loop_gc.start()
    try:
        for _ in range(warmup):
            fn()
            loop_gc.after_tick()
        samples = np.empty(iterations, dtype=np.int64)
        clock = time.perf_counter_ns
        for i in range(iterations):
            start = clock()
            fn()
            samples[i] = clock() - start
            loop_gc.after_tick()
    finally:
        loop_gc.close()
    return samples / 1000.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "crazyflie_goto.onnx", help="exported policy")
    parser.add_argument("--iterations", type=int, default=20000, help="timed calls per case (default 20000)")
    parser.add_argument("--warmup", type=int, default=2000, help="untimed calls first (default 2000)")
    parser.add_argument("--provider", default="cpu", help="execution provider (auto, tensorrt, cuda, cpu; default cpu)")
    parser.add_argument("--gc-auto", action="store_true",
                        help="Python's automatic garbage collection inside the timed calls (default: as the skill node runs, "
                             "the due collection after each call)")
    parser.add_argument("--heading-from", type=Path, default=None, metavar="LEVEL.onnx",
                        help="also time the tick under this navigate level's heading loop (e.g. models/crazyflie_navigate.onnx)")
    args = parser.parse_args(argv)
    if args.iterations < 100 or args.warmup < 0:
        parser.error("--iterations must be >= 100 and --warmup >= 0")

    policy = OnnxPolicy(args.model, provider=args.provider)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-0.5, 0.5, policy.observation_size).astype(np.float32)
    state = RobotState(
        position_w=np.array([0.1, -0.2, 1.0]),
        quat_wxyz=quat_from_euler_rpy(0.05, -0.03, 0.4),
        linear_velocity_w=np.array([0.2, 0.1, -0.05]),
        angular_velocity_b=np.array([0.3, -0.1, 0.05]),
    )
    subgoal = np.array([0.6, 0.3, 1.2])
    actions = policy.step(state, subgoal)

    session = policy._session  # the same session, driven directly: the floor under the runtime
    feed = {session.get_inputs()[0].name: obs[None]}
    out_names = [session.get_outputs()[0].name]

    def tick():
        policy.to_command(policy.step(state, subgoal))

    cases = {
        "raw onnxruntime": lambda: session.run(out_names, feed),
        "infer": lambda: policy.infer(obs),
        "observe": lambda: policy.observe(state, subgoal),
        "to_command": lambda: policy.to_command(actions),
        "tick": tick,
    }
    if args.heading_from is not None:
        from robot_hrl.errors import RobotHrlError
        from robot_hrl.runtime.heading import heading_of_level

        try:
            loop = heading_of_level(args.heading_from, policy, required=True)
        except RobotHrlError as exc:
            parser.error(f"--heading-from {args.heading_from}: {exc}")
        cases["tick, heading"] = lambda: policy.to_command(loop.step(policy, state, subgoal))
    print(f"model     {args.model} ({args.model.stat().st_size / 1024:.1f} KiB), provider {policy.provider}")
    print(f"machine   {platform.machine()}, {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
          f"onnxruntime {__import__('onnxruntime').__version__}, load average {os.getloadavg()[0]:.2f}")
    print(f"samples   {args.iterations} timed calls per case after {args.warmup} warm-up calls; microseconds; "
          f"garbage collection {'automatic' if args.gc_auto else 'after each call, as the skill node loop'}\n")
    print(f"{'case':<17}{'p50':>9}{'p99':>9}{'p99.9':>9}{'max':>10}{'mean':>9}")
    failed = []
    for name, fn in cases.items():
        us = measure(fn, args.iterations, args.warmup, gc_after_tick=not args.gc_auto)
        p50, p99, p999 = np.percentile(us, [50, 99, 99.9])
        print(f"{name:<17}{p50:9.1f}{p99:9.1f}{p999:9.1f}{us.max():10.1f}{us.mean():9.1f}")
        if name in TARGETS_US:
            stat, limit = TARGETS_US[name]
            value = {"p50": p50, "p99": p99}[stat]
            if value > limit:
                failed.append(f"{name} {stat} {value:.1f} us > {limit:.0f} us")
    batch = rng.uniform(-0.5, 0.5, (1024, policy.observation_size)).astype(np.float32)
    us = measure(lambda: policy.infer(batch), max(args.iterations // 100, 20), 10)
    print(f"{'infer batch 1024':<17}{np.percentile(us, 50):9.0f}{np.percentile(us, 99):9.0f}{'':>9}{us.max():10.0f}{us.mean():9.0f}"
          f"   ({1024 / np.percentile(us, 50):.2f} M observations/s at p50)")
    print("\ntargets   " + ", ".join(f"{n} {s} <= {v:.0f} us" for n, (s, v) in TARGETS_US.items())
          + (": met" if not failed else ": MISSED (" + "; ".join(failed) + ")"))
    print("GPU providers (CUDA, TensorRT): not measured here (no GPU on this machine).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

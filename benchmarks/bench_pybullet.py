#!/usr/bin/env python3
"""PyBullet real-time factor for one Crazyflie: camera off, and camera on.

Prints simulated seconds per wall-clock second (real-time factor) of PyBulletQuadrotorSim at
500 Hz physics / 100 Hz control, flown closed loop by the reference geometric controller
through the ONNX runtime (so the figure includes observation building and inference), with:

- the camera off;
- the onboard camera (320x240 RGB + depth, TinyRenderer) rendered at 30 Hz and at 100 Hz.

Also prints the raw simulator step rate (no policy) and the render time of one frame.

    python benchmarks/bench_pybullet.py [--seconds 20] [--world models/worlds/demo.yaml]
"""

from __future__ import annotations

import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import argparse  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="simulated seconds per measurement (default 20)")
    parser.add_argument("--world", type=Path, default=_REPO / "models" / "worlds" / "demo.yaml",
                        help="world file of the scene (default models/worlds/demo.yaml)")
    args = parser.parse_args()
    if not args.seconds > 0:
        parser.error("--seconds must be positive")

    from robot_hrl.perception import PinholeCamera
    from robot_hrl.robots import CRAZYFLIE_2X
    from robot_hrl.runtime import OnnxPolicy
    from sim.pybullet import PyBulletQuadrotorSim
    from sim.pybullet.reference_policy import write_reference_policy

    tmp = Path(tempfile.mkdtemp(prefix="bench_pybullet_"))
    policy = OnnxPolicy(write_reference_policy(tmp / "reference.onnx", CRAZYFLIE_2X), provider="cpu")
    camera = PinholeCamera()
    start, goal = np.array([0.5, 0.5, 1.0]), np.array([1.0, 3.5, 1.2])
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"PyBullet {args.seconds:g} s simulated per run, physics 500 Hz, control 100 Hz, world {args.world.name}")

    def run(camera_hz: float | None, with_policy: bool = True) -> tuple[float, float, float]:
        sim = PyBulletQuadrotorSim(world=args.world, physics_hz=500, control_hz=100,
                                   camera=camera if camera_hz else None)
        steps = int(round(args.seconds * sim.control_hz))
        every = max(1, int(round(sim.control_hz / camera_hz))) if camera_hz else 0
        hover = np.array([CRAZYFLIE_2X.weight_n, 0.0, 0.0, 0.0])
        state = sim.reset(start)
        policy.reset()
        renders = 0
        render_s = 0.0
        t0 = time.perf_counter()
        c0 = time.process_time()
        for k in range(steps):
            if k % 500 == 0:  # a new goal every 5 s, so the drone keeps flying
                goal_k = goal if (k // 500) % 2 == 0 else start
            wrench = policy.to_wrench(policy.step(state, goal_k)) if with_policy else hover
            state = sim.step(wrench)
            if every and k % every == 0:
                r0 = time.perf_counter()
                sim.camera_image()
                render_s += time.perf_counter() - r0
                renders += 1
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        simulated = sim.time_s
        sim.close()
        return simulated / wall, simulated / cpu, (render_s / renders if renders else 0.0)

    print("real-time factor = simulated s / wall-clock s; 'cpu' divides by this process's CPU time instead "
          "(less sensitive to other load on a shared machine)")
    for label, camera_hz, with_policy in (
        ("simulator only (hover wrench), camera off", None, False),
        ("closed loop (ONNX policy),     camera off", None, True),
        ("closed loop, camera 320x240 at  30 Hz    ", 30.0, True),
        ("closed loop, camera 320x240 at 100 Hz    ", 100.0, True),
    ):
        rtf, rtf_cpu, frame = run(camera_hz, with_policy)
        extra = f"  ({frame * 1e3:.1f} ms wall per frame)" if camera_hz else ""
        print(f"{label}: real-time factor {rtf:6.1f}x wall, {rtf_cpu:6.1f}x cpu{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Emergency stop: time from `/estop true` on a NEW publisher to motors off, per transport (prints it;
results in benchmarks/README.md).

The skill node executable runs on its own (real time, ``realtime_priority`` 50 as the launch sets
it) on the backend under test; a feeder process publishes /odom at 200 Hz (hovering at 1 m); this
process sends a /subgoal stream (5 Hz, a new point each trial so that the node flies again after
a release) and watches /cmd_wrench. Each trial waits until the node commands thrust, then creates
a NEW /estop publisher with ROS 2's default QoS (reliable, volatile, keep last 10), waits for a
matched subscription (as ``ros2 topic pub`` does), publishes ``true`` once, and measures from the
publish call to the arrival of the first /cmd_wrench with zero thrust. Then it releases the stop
and destroys the publisher.

Pairs (skill node backend / e-stop sender backend): cyclonedds/cyclonedds, rclpy/rclpy and
cyclonedds/rclpy (a ROS 2 user stopping the Cyclone DDS graph: finding 4 of issue 15). The rclpy
pairs need rclpy (run it with .venv-ros/bin/python, built by .ci/ros).

    python benchmarks/bench_estop.py [--trials 20] [--pairs cyclonedds/cyclonedds rclpy/rclpy cyclonedds/rclpy]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from robot_hrl.transport.dds_config import LOCALHOST_RANGE, RANGE_VARIABLE, loopback_env  # noqa: E402

MODEL = "models/crazyflie_goto.onnx"
WORLD = "models/worlds/demo.yaml"
HOVER = (0.5, 0.5, 1.0)
TARGET_P99_MS = 100.0


def _environment(domain: int) -> dict[str, str]:
    """Both transports on this machine only: Cyclone's loopback profile, Fast DDS's LOCALHOST range."""
    env = {**os.environ, **loopback_env(domain), RANGE_VARIABLE: LOCALHOST_RANGE}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def feeder(backend: str, domain: int) -> int:
    from robot_hrl.msgs import Odometry, odometry_from_state
    from robot_hrl.state import RobotState
    from robot_hrl.transport import SENSOR_QOS, create_node

    node = create_node("bench_feeder", backend=backend, domain_id=domain)
    odom = node.create_publisher(Odometry, "/odom", SENSOR_QOS)
    k, t0 = 0, time.perf_counter()
    while True:
        odom.publish(odometry_from_state(RobotState(position_w=np.array(HOVER), stamp_s=time.time())))
        k += 1
        delay = t0 + k / 200.0 - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


def trials(skill_backend: str, sender_backend: str, n: int, domain: int) -> dict:
    os.environ.update(_environment(domain))
    from robot_hrl.msgs import Bool, PoseStamped, WrenchStamped
    from robot_hrl.nodes.common import pose_stamped
    from robot_hrl.transport import INPUT_QOS, SENSOR_QOS, create_node

    env = _environment(domain)
    procs = [
        subprocess.Popen([sys.executable, __file__, "--feeder", skill_backend, str(domain)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([sys.executable, "-m", "robot_hrl.nodes.skill_node", "--backend", skill_backend,
                          "--domain-id", str(domain), "--ros-args", "-p", "use_sim_time:=false",
                          "-p", f"world:={WORLD}", "-p", f"model:={MODEL}", "-p", "realtime_priority:=50"],
                         env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    watcher = create_node("bench_watch", backend=skill_backend, domain_id=domain)
    sender = watcher if sender_backend == skill_backend else create_node("bench_estop", backend=sender_backend,
                                                                          domain_id=domain)
    nodes = [watcher] if sender is watcher else [watcher, sender]
    commands: list[tuple[float, float]] = []
    watcher.create_subscription(WrenchStamped, "/cmd_wrench",
                                lambda m: commands.append((time.perf_counter(), m.wrench.force.z)), SENSOR_QOS)
    subgoal_pub = watcher.create_publisher(PoseStamped, "/subgoal", INPUT_QOS)

    def spin(seconds: float, until=lambda: False) -> bool:
        end = time.perf_counter() + seconds
        next_subgoal = 0.0
        while time.perf_counter() < end:
            now = time.perf_counter()
            if now >= next_subgoal:
                subgoal_pub.publish(pose_stamped(goal, time.time()))
                next_subgoal = now + 0.2
            for node in nodes:
                node.spin_once(0.001)
            if until():
                return True
        return False

    latencies, matched_s, lost = [], [], 0
    try:
        for trial in range(n + 1):  # trial 0 warms up (discovery, first flight), not counted
            goal = (HOVER[0], HOVER[1], HOVER[2] + 0.01 * (trial % 5))
            mark = len(commands)
            if not spin(60.0, lambda: any(f > 0 for _, f in commands[mark:])):
                raise RuntimeError(f"trial {trial}: the skill node never commanded thrust (is it running?)")
            pub = sender.create_publisher(Bool, "/estop", INPUT_QOS)
            t_new = time.perf_counter()
            if not spin(30.0, lambda: pub.get_subscription_count() > 0):
                raise RuntimeError(f"trial {trial}: the new /estop publisher was never matched")
            matched = time.perf_counter() - t_new
            mark = len(commands)
            t0 = time.perf_counter()
            pub.publish(Bool(data=True))
            off = spin(10.0, lambda: any(f == 0.0 for _, f in commands[mark:]))
            if trial > 0:
                if off:
                    t_off = next(t for t, f in commands[mark:] if f == 0.0)
                    latencies.append(t_off - t0)
                    matched_s.append(matched)
                else:
                    lost += 1
            pub.publish(Bool(data=False))
            spin(0.3)
            if hasattr(pub, "destroy"):
                pub.destroy()
    finally:
        for node in {id(n): n for n in nodes}.values():
            node.shutdown()
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    lat = np.array(latencies) * 1e3
    return {"skill": skill_backend, "sender": sender_backend, "trials": n, "stopped": int(len(lat)),
            "never_stopped": lost, "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
            "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None,
            "max_ms": float(lat.max()) if len(lat) else None,
            "match_p50_ms": float(np.percentile(np.array(matched_s) * 1e3, 50)) if matched_s else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per pair (one warm-up trial more)")
    parser.add_argument("--pairs", nargs="+", default=["cyclonedds/cyclonedds", "rclpy/rclpy", "cyclonedds/rclpy"],
                        help="SKILL_BACKEND/SENDER_BACKEND pairs")
    parser.add_argument("--domain-id", type=int, default=211)
    parser.add_argument("--feeder", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.feeder is not None:
        return feeder(args.feeder[0], int(args.feeder[1]))
    os.chdir(ROOT)
    out = {"machine": f"{os.cpu_count()} CPUs", "python": sys.version.split()[0], "load_avg": os.getloadavg()}
    for i, pair in enumerate(args.pairs):
        skill_backend, _, sender_backend = pair.partition("/")
        r = trials(skill_backend, sender_backend, args.trials, args.domain_id + i)
        out[pair] = r
        verdict = "" if r["p99_ms"] is None else (" (target < 100 ms: met)" if r["p99_ms"] < TARGET_P99_MS
                                                  else " (target < 100 ms: NOT met)")
        print(f"estop {pair}: {r['stopped']}/{r['trials']} stopped, publish -> motors off p50 {r['p50_ms']:.1f} ms, "
              f"p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms{verdict}; new publisher matched after "
              f"{r['match_p50_ms']:.0f} ms (p50)", flush=True)
    out["load_avg_end"] = os.getloadavg()
    print(f"load average: {out['load_avg'][0]:.2f} at start, {out['load_avg_end'][0]:.2f} at end", flush=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

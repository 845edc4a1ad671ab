"""Figures of the skill node and the launch: prints them (results in benchmarks/README.md).

1. Fixed-rate loop at 100 Hz and 500 Hz (real time): tick duration p50/p99 (policy + shield +
   publish) and deadline misses per 10,000 ticks. The real SkillNode, OnnxPolicy and Shield on a
   Cyclone DDS participant, its loop in this process's main thread (as in the executable); a
   separate feeder process publishes /odom at 200 Hz and /subgoal at 5 Hz. (At 500 Hz the policy's contract says 100 Hz: the model is loaded without the rate check,
   as this measures the loop, not the flight.)
2. /odom -> /cmd_wrench latency over DDS: the skill node executable as its own process on
   use_sim_time; this process plays the simulator (publishes /odom, then /clock) and waits for
   the motor command stamped with that period. p50/p99 of the round trip, from the /odom publish
   call (the messages are built before) to the command's arrival in this process.
3. The demo (`make demo`'s command): wall time, simulated time and success.

4. With ``--backends cyclonedds rclpy`` (the default where rclpy is importable, e.g.
   ``.venv-ros/bin/python``): 1 and 2 on each transport in the same run (every process of a
   measurement on that backend; Fast DDS with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``), and the
   ratio of the rclpy figures to the Cyclone DDS ones (issue 15's target: misses at most 2x).

The skill node runs with its default loop timing (``spin_margin_us``, ``gc_after_tick``,
``cpu_affinity``, ``realtime_dds_threads``) unless ``--spin-margin-us``, ``--gc-auto``,
``--cpu-affinity`` or ``--no-realtime-dds-threads`` say otherwise.

    python benchmarks/bench_skill_node.py [--ticks 10000] [--samples 5000] [--no-demo]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from robot_hrl.transport import rclpy_available  # noqa: E402
from robot_hrl.transport.dds_config import LOCALHOST_RANGE, RANGE_VARIABLE, loopback_env  # noqa: E402

MODEL = "models/crazyflie_goto.onnx"
WORLD = "models/worlds/demo.yaml"
HOVER = (0.5, 0.5, 1.0)
DEMO_TASK = "takeoff 1.0; goto red_box; goto green_box; goto blue_box; goto 1.5 3.0 1.0; land"


def _join_domain(domain: int) -> None:
    """This process and its children on ``domain``, on this machine only (both transports)."""
    os.environ.update(loopback_env(domain))
    os.environ[RANGE_VARIABLE] = LOCALHOST_RANGE


def _hover_odom(stamp_s: float):
    from robot_hrl.msgs import odometry_from_state
    from robot_hrl.state import RobotState

    return odometry_from_state(RobotState(position_w=np.array(HOVER), stamp_s=stamp_s))


# ---- the feeder process --------------------------------------------------------------------------
def feeder(domain: int, backend: str = "cyclonedds") -> int:
    _join_domain(domain)
    from robot_hrl.msgs import Odometry, PoseStamped
    from robot_hrl.nodes.common import pose_stamped
    from robot_hrl.transport import SENSOR_QOS, create_node

    node = create_node("bench_feeder", backend=backend, domain_id=domain)
    odom = node.create_publisher(Odometry, "/odom", SENSOR_QOS)
    sub = node.create_publisher(PoseStamped, "/subgoal")
    k = 0
    t0 = time.perf_counter()
    while True:
        odom.publish(_hover_odom(time.time()))
        if k % 40 == 0:
            sub.publish(pose_stamped(HOVER, time.time()))
        k += 1
        delay = t0 + k / 200.0 - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


# ---- 1. the fixed-rate loop ----------------------------------------------------------------------
class _StopAfter:
    """The loop's stop condition (``is_set``, checked between ticks and while waiting): warm up until
    odometry and a subgoal flow and ``warmup_s`` more, then count from zero and stop after ``ticks``."""

    def __init__(self, skill, ticks: int, warmup_s: float, timeout_s: float):
        self.skill = skill
        self.ticks = ticks
        self.warmup_s = warmup_s
        self.timeout_at = time.monotonic() + timeout_s
        self.flowing_at: float | None = None
        self.counting = False
        self.error = ""

    def is_set(self) -> bool:
        if self.counting:
            return self.skill.deadline.ticks >= self.ticks
        now = time.monotonic()
        if self.flowing_at is None:
            if self.skill.core.state is not None and self.skill.core.requested is not None:
                self.flowing_at = now
            elif now > self.timeout_at:
                self.error = "the feeder's odometry and subgoal did not arrive within 30 s"
                return True
        elif now >= self.flowing_at + self.warmup_s:
            from robot_hrl.nodes.deadline import DeadlineMonitor

            self.skill.deadline = DeadlineMonitor(self.skill.period_s, window=self.ticks)
            self.counting = True
        return False


def bench_loop(rate_hz: float, ticks: int, domain: int, priority: int = 0, timing: dict | None = None,
               backend: str = "cyclonedds") -> dict:
    """``timing``: the skill node's loop parameters to set (spin_margin_us, gc_after_tick, cpu_affinity);
    the node's defaults otherwise."""
    _join_domain(domain)
    from robot_hrl.nodes.skill_node import SkillNode
    from robot_hrl.robots import CRAZYFLIE_2X
    from robot_hrl.runtime import OnnxPolicy
    from robot_hrl.transport import create_node

    proc = subprocess.Popen([sys.executable, __file__, "--feeder", str(domain), "--feeder-backend", backend],
                            env={**os.environ},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        node = create_node("skill_node", parameters={"world": WORLD, "control_rate_hz": float(rate_hz),
                                                     "use_sim_time": False, "diagnostics_rate_hz": 1.0,
                                                     "realtime_priority": priority, **(timing or {})},
                           backend=backend, domain_id=domain)
        policy = OnnxPolicy(ROOT / MODEL, CRAZYFLIE_2X, provider="cpu", control_rate_hz=None)
        skill = SkillNode(node, policy=policy)
        # The loop runs in this (main) thread, as the skill_node executable runs it: no second Python
        # thread to hand the GIL to in the middle of the measurement.
        stop = _StopAfter(skill, ticks, warmup_s=0.5, timeout_s=30.0)
        skill.run(stop)
        if stop.error:
            raise RuntimeError(stop.error)
        stats = skill.deadline.stats()
        node.shutdown()
        stats["last_misses_ms"] = [[round(1e3 * late, 3), round(1e3 * d, 3), k] for late, d, k in skill.deadline.last_misses]
        stats["mode_at_end"] = skill.core.last_mode
        stats["realtime_priority"] = priority
        stats["backend"] = backend
        stats["timing"] = {"spin_margin_us": skill.timing.spin_margin_s * 1e6, "gc_after_tick": skill.timing.gc_after_tick,
                           "cpu_affinity": skill.timing.cpu, "realtime_dds_threads": skill.timing.realtime_dds_threads,
                           "gc_collections": skill.loop_gc.collections}
        return stats
    finally:
        proc.kill()
        proc.wait()


# ---- 2. /odom -> /cmd_wrench latency ---------------------------------------------------------------
def bench_latency(samples: int, domain: int, timing: dict | None = None, backend: str = "cyclonedds") -> dict:
    _join_domain(domain)
    from robot_hrl.msgs import Clock, Odometry, PoseStamped, WrenchStamped, seconds_from_time, time_from_seconds
    from robot_hrl.nodes.common import pose_stamped
    from robot_hrl.transport import SENSOR_QOS, create_node

    skill = subprocess.Popen([sys.executable, "-m", "robot_hrl.nodes.skill_node", "--backend", backend, "--domain-id",
                              str(domain), "--ros-args", "-p", "use_sim_time:=true",
                              "-p", f"world:={WORLD}", "-p", f"model:={MODEL}",
                              *[a for k, v in (timing or {}).items() for a in ("-p", f"{k}:={json.dumps(v)}")]],
                             env={**os.environ}, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        node = create_node("bench_sim", backend=backend, domain_id=domain)
        odom = node.create_publisher(Odometry, "/odom", SENSOR_QOS)
        clock = node.create_publisher(Clock, "/clock", SENSOR_QOS)
        sub = node.create_publisher(PoseStamped, "/subgoal")
        got: dict[int, float] = {}
        node.create_subscription(WrenchStamped, "/cmd_wrench",
                                 lambda m: got.setdefault(round(seconds_from_time(m.header.stamp) * 1000), time.perf_counter()))
        latencies = []
        t = 0.0
        k = 0
        warmup = 200
        end = time.monotonic() + 120
        while len(latencies) < samples and time.monotonic() < end:
            t = round(k * 0.01, 6)
            if k % 20 == 0:
                sub.publish(pose_stamped(HOVER, t))
            key = round(t * 1000)
            # The simulator's messages are built before the clock starts: the figure is publish -> command.
            odom_msg, clock_msg = _hover_odom(t), Clock(clock=time_from_seconds(t))
            start = time.perf_counter()
            odom.publish(odom_msg)
            clock.publish(clock_msg)
            limit = start + 0.5
            while key not in got and time.perf_counter() < limit:
                node.spin(until=lambda: key in got or time.perf_counter() >= limit)
            if key in got and k >= warmup:
                latencies.append(got[key] - start)
            k += 1
            got.pop(key, None)
        node.shutdown()
        lat = np.array(latencies) * 1e3
        if not len(lat):
            raise RuntimeError("no motor command came back: is the skill node starting? "
                               "run it by hand with the same arguments to see its error")
        return {"backend": backend, "samples": int(len(lat)), "p50_ms": float(np.percentile(lat, 50)),
                "p99_ms": float(np.percentile(lat, 99)), "max_ms": float(lat.max())}
    finally:
        skill.terminate()
        skill.wait(10)


# ---- 3. the demo -------------------------------------------------------------------------------
def bench_demo(domain: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, "-c", "import sys; from robot_hrl.cli import main; sys.exit(main())", "launch",
               "navigation", "--world", WORLD, "--task", DEMO_TASK, "--out", str(Path(tmp) / "demo"), "--result",
               str(result), "--no-live", "--domain-id", str(domain)]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **loopback_env(domain)})
        wall = time.monotonic() - t0
        if not result.is_file():
            return {"success": False, "error": proc.stderr[-2000:] or proc.stdout[-2000:], "command_wall_s": wall}
        r = json.loads(result.read_text())
        return {"success": r["success"], "reason": r["reason"], "goals": f"{r['goals_reached']}/{r['goals_total']}",
                "flight_wall_s": r["wall_time_s"], "sim_s": r["sim_time_s"], "command_wall_s": round(wall, 1),
                "violations": r["violations"], "interventions": r["interventions"],
                "skill_deadline": r["deadline"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=10_000, help="ticks measured per rate")
    parser.add_argument("--rates", type=float, nargs="+", default=[100.0, 500.0])
    parser.add_argument("--samples", type=int, default=5000, help="latency samples")
    parser.add_argument("--priorities", type=int, nargs="+", default=[0, 50],
                        help="skill node realtime_priority values to measure (0 = normal scheduling)")
    parser.add_argument("--spin-margin-us", type=float, default=None,
                        help="skill node spin_margin_us (busy-wait before each deadline; 0 = sleep only; "
                             "default: the node's)")
    parser.add_argument("--gc-auto", action="store_true",
                        help="gc_after_tick:=false (Python's automatic GC during the loop)")
    parser.add_argument("--cpu-affinity", type=int, default=None, help="skill node cpu_affinity (-1 = no pinning)")
    parser.add_argument("--launch-timing", action="store_true",
                        help="the loop timing launch/params/navigation.yaml gives the skill node (spin_margin_us, "
                             "gc_after_tick, cpu_affinity, realtime_dds_threads), as `robot-hrl launch` and "
                             "`ros2 launch` run it; other timing flags still win")
    parser.add_argument("--no-realtime-dds-threads", action="store_true",
                        help="realtime_dds_threads:=false (DDS threads stay at normal priority under SCHED_FIFO)")
    parser.add_argument("--no-demo", action="store_true")
    parser.add_argument("--backends", nargs="+", choices=("cyclonedds", "rclpy"),
                        default=["cyclonedds", "rclpy"] if rclpy_available() else ["cyclonedds"],
                        help="transports to measure the loop and the latency on, in this run "
                             "(default: both where rclpy is importable)")
    parser.add_argument("--domain-id", type=int, default=221)
    parser.add_argument("--feeder", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--feeder-backend", default="cyclonedds", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.feeder is not None:
        return feeder(args.feeder, args.feeder_backend)
    os.chdir(ROOT)
    timing: dict = {}
    if args.launch_timing:
        from robot_hrl.nodes.args import load_params_file

        launch = load_params_file(ROOT / "launch" / "params" / "navigation.yaml", "skill_node")
        timing.update({k: launch[k] for k in ("spin_margin_us", "gc_after_tick", "cpu_affinity",
                                              "realtime_dds_threads") if k in launch})
    if args.spin_margin_us is not None:
        timing["spin_margin_us"] = args.spin_margin_us
    if args.gc_auto:
        timing["gc_after_tick"] = False
    if args.no_realtime_dds_threads:
        timing["realtime_dds_threads"] = False
    if args.cpu_affinity is not None:
        timing["cpu_affinity"] = args.cpu_affinity
    out = {"machine": f"{os.cpu_count()} CPUs", "python": sys.version.split()[0], "load_avg": os.getloadavg(),
           "skill_timing": timing}
    runs = 0
    for rate, prio in [(r, p) for p in args.priorities for r in args.rates]:
        for backend in args.backends:  # interleaved, so that both see the same load
            runs += 1  # a domain of its own per measurement: nothing of the previous one is heard
            s = bench_loop(rate, args.ticks, args.domain_id - 10 - runs, prio, timing, backend)
            out[f"loop_{rate:g}hz_prio{prio}" + ("" if backend == "cyclonedds" else f"_{backend}")] = s
            print(f"skill loop [{backend}] {rate:g} Hz, {'SCHED_FIFO ' + str(prio) if prio else 'normal priority'}: "
                  f"{s['ticks']} ticks, tick p50 {s['p50_ms']:.3f} ms, p99 {s['p99_ms']:.3f} ms, "
                  f"max {s['max_ms']:.2f} ms, misses {s['misses']} ({s['misses_per_10k']:.1f} per 10,000), "
                  f"start lateness p99 {s['late_p99_ms']:.3f} ms, load {os.getloadavg()[0]:.2f}", flush=True)
        if len(args.backends) == 2:
            cyc = out[f"loop_{rate:g}hz_prio{prio}"]["misses_per_10k"]
            ros = out[f"loop_{rate:g}hz_prio{prio}_rclpy"]["misses_per_10k"]
            ratio = ros / cyc if cyc else (0.0 if ros == 0 else float("inf"))
            print(f"  rclpy / cyclonedds misses at {rate:g} Hz: {ros:.1f} / {cyc:.1f} per 10,000 = {ratio:.2f}x "
                  f"(target <= 2x: {'met' if ros <= 2 * cyc else 'NOT met'})", flush=True)
    for i, backend in enumerate(args.backends):
        lat = bench_latency(args.samples, args.domain_id + 1 + 3 * i, timing, backend)
        out["odom_to_cmd_wrench" + ("" if backend == "cyclonedds" else f"_{backend}")] = lat
        print(f"/odom -> /cmd_wrench [{backend}] (separate processes): {lat['samples']} samples, p50 {lat['p50_ms']:.3f} ms, "
              f"p99 {lat['p99_ms']:.3f} ms, max {lat['max_ms']:.2f} ms", flush=True)
    if not args.no_demo:
        demo = bench_demo(args.domain_id + 2)
        out["demo"] = demo
        print(f"demo: {json.dumps(demo)}", flush=True)
    out["load_avg_end"] = os.getloadavg()
    print(f"load average: {out['load_avg'][0]:.2f} at start, {out['load_avg_end'][0]:.2f} at end", flush=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

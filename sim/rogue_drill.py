"""Rogue /cmd_wrench drill: the demo mission on the real node graph, and a second writer at full thrust.

Each flight starts the launcher's graph (sim, skill and planner nodes as separate processes over Cyclone
DDS, loopback, a quiet domain of its own, simulated time in lockstep: robot_hrl.launch.launcher) with the
demo mission, and a **separate process** (this file with ``--writer``) that joins the same domain and, from
a random moment of the mission (sim time, read from ``/clock``), publishes geometry_msgs/WrenchStamped at the
robot's full collective thrust on ``/cmd_wrench`` as fast as it can, until the flight ends. Its stamps:

* ``zero``: stamped 0 (the writer of issue #16, which took the robot through the ceiling);
* ``wall``: stamped with its wall clock, as ``ros2 topic pub`` stamps a header it fills with ``now``;
* ``clock``: stamped with the latest ``/clock``, the current lockstep period: a writer that knows the
  protocol, indistinguishable by its stamps from the skill node's commands; the sim node refuses it by its
  writer's identity (robot_hrl/nodes/command_writer.py).

Violations are the launcher's own (robot_hrl.launch.monitor): judged from the simulator's ground truth on
``/diagnostics`` (collisions with any box or the floor too fast, the true position leaving the fence or
crossing the ceiling), never from ``/odom``. A flight counts as violating when that list is not empty or
the sim counted a collision.

    python sim/rogue_drill.py --flights 10 --stamp zero,wall --seed 0
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
# `python sim/rogue_drill.py` puts sim/ first on sys.path, where sim/pybullet would shadow the real pybullet
sys.path[:] = [p for p in sys.path if (Path(p).resolve() if p else Path.cwd().resolve()) != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402

STAMPS = ("zero", "wall", "clock")
DEMO_TASK = "takeoff 1.0; goto red_box; goto green_box; goto blue_box; goto 1.5 3.0 1.0; land"
"""The README's demo mission (as sim/fault_drill.py)."""
NOMINAL_MISSION_S = 26.0
"""Sim seconds of the demo mission in the graph (26-27 s; the rogue's moment is drawn within 1 s .. this)."""


# ---- the rogue writer (its own process) ------------------------------------------------------------
def writer_main(domain_id: int, at_s: float, stamp: str, robot_name: str) -> int:
    """Join ``domain_id``, wait for sim time ``at_s`` on /clock, then publish full thrust on /cmd_wrench as fast as
    the transport takes it, until killed."""
    from robot_hrl.msgs import Clock, WrenchStamped, seconds_from_time
    from robot_hrl.nodes.skill_codecs import wrench_msg
    from robot_hrl.robots import get_robot
    from robot_hrl.transport import create_node
    from robot_hrl.transport.interface import COMMAND_QOS, SENSOR_QOS

    thrust = float(get_robot(robot_name).max_total_thrust_n)
    node = create_node("rogue_writer", backend="cyclonedds", domain_id=domain_id)
    clock = [None]
    node.create_subscription(Clock, "/clock", lambda m: clock.__setitem__(0, seconds_from_time(m.clock)), SENSOR_QOS)
    pub = node.create_publisher(WrenchStamped, "/cmd_wrench", COMMAND_QOS)
    sent = 0
    try:
        while True:
            node.spin_once(0.0005)
            t = clock[0]
            if t is None or t < at_s:
                continue
            s = 0.0 if stamp == "zero" else time.time() if stamp == "wall" else t
            pub.publish(wrench_msg([thrust, 0.0, 0.0, 0.0], s))
            sent += 1
            if sent == 1 or sent % 1000 == 0:
                print(f"rogue: {sent} full-thrust commands sent (sim time {t:.2f} s)", flush=True)
    except KeyboardInterrupt:
        return 0
    finally:
        node.shutdown()


# ---- the drill ---------------------------------------------------------------------------------------
@dataclass
class RogueFlight:
    stamp: str
    at_s: float
    seed: int
    domain_id: int
    success: bool = False
    reason: str = ""
    violations: list = field(default_factory=list)
    collisions: int = 0
    goals: str = ""
    sim_time_s: float = 0.0
    wall_time_s: float = 0.0
    rogue_log_tail: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations and self.collisions == 0


def quiet_domain_id(rng: random.Random, tries: int = 30) -> int:
    """A DDS domain id on which nobody is heard (other runs on this machine use ids 1..232 too)."""
    from robot_hrl.transport.quiet_domain import first_quiet_domain

    return first_quiet_domain(rng.randrange(1, 233) for _ in range(tries))


def fly(stamp: str, at_s: float, seed: int, out: Path, task: str = DEMO_TASK, timeout_s: float | None = None) -> RogueFlight:
    """One flight; ``timeout_s`` of wall time (None: 240 s)."""
    from robot_hrl.launch.launcher import Launcher, LaunchOptions

    if timeout_s is None:
        timeout_s = 240.0
    domain = quiet_domain_id(random.Random(seed))
    flight = RogueFlight(stamp, round(at_s, 3), seed, domain)
    out.mkdir(parents=True, exist_ok=True)
    launcher = Launcher(LaunchOptions(arguments={"use_sim": "true", "task": task}, out=out, domain_id=domain,
                                      record=False, live=False, timeout_s=timeout_s,
                                      params={"sim_node": {"seed": seed}}))
    log_path = out / "logs" / "rogue_writer.log"
    with open(log_path, "w") as log:
        rogue = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--writer", "--domain-id", str(domain),
                                  "--at-s", str(at_s), "--stamp", stamp], env=launcher.env, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=str(_HERE.parent))
        try:
            result = launcher.run()
        finally:
            rogue.terminate()
            try:
                rogue.wait(5)
            except subprocess.TimeoutExpired:
                rogue.kill()
                rogue.wait(5)
    flight.success, flight.reason = result.success, result.reason
    flight.violations = [f"{v['kind']}@{v['t']:.2f}s: {v['detail']}" for v in result.violation_events]
    flight.collisions = int(result.collisions)
    flight.goals = f"{result.goals_reached}/{result.goals_total}"
    flight.sim_time_s, flight.wall_time_s = result.sim_time_s, result.wall_time_s
    flight.rogue_log_tail = log_path.read_text()[-300:]
    return flight


def drill(flights: int, seed: int, stamps=STAMPS, out: Path | None = None, progress: bool = True) -> list[RogueFlight]:
    """``flights`` flights, the stamp modes in turn, each with the rogue starting at a moment drawn uniformly over
    the mission (1 s .. NOMINAL_MISSION_S of sim time)."""
    rng = random.Random(seed)
    out = Path(out or tempfile.mkdtemp(prefix="rogue_drill_"))
    result = []
    iterator = range(flights)
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="rogue drill", unit="flight")
    for i in iterator:
        stamp = stamps[i % len(stamps)]
        f = fly(stamp, rng.uniform(1.0, NOMINAL_MISSION_S), seed * 1000 + i, out / f"flight_{i:03d}_{stamp}")
        result.append(f)
        if not f.ok:
            print(f"  VIOLATION rogue stamped {stamp} from {f.at_s:.2f} s (seed {f.seed}): {f.violations}, "
                  f"collisions {f.collisions}", flush=True)
    return result


def summary(flights: list[RogueFlight], stamps) -> list[str]:
    lines = []
    for stamp in stamps:
        fs = [f for f in flights if f.stamp == stamp]
        if fs:
            lines.append(f"rogue stamped {stamp:5s} flights {len(fs):3d}  with a violation {sum(not f.ok for f in fs):3d}  "
                         f"mission completed {sum(f.success for f in fs):3d}")
    lines.append(f"total: {len(flights)} flights, {sum(not f.ok for f in flights)} with a violation (target 0)")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Fly the demo mission on the real node graph while a second process writes "
                                 "full thrust on /cmd_wrench from a random moment; violations from the simulator's "
                                 "ground truth (the launcher's monitor).")
    ap.add_argument("--flights", type=int, default=10, help="flights (the stamp modes in turn; default 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stamp", default=",".join(STAMPS), help=f"comma-separated, from {','.join(STAMPS)}")
    ap.add_argument("--out", default=None, help="run folders (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write every flight's record here")
    ap.add_argument("--writer", action="store_true", help="(internal) run as the rogue writer process")
    ap.add_argument("--domain-id", type=int, default=0, help="(with --writer) the DDS domain")
    ap.add_argument("--at-s", type=float, default=0.0, help="(with --writer) sim time to start at")
    ap.add_argument("--robot", default="crazyflie_2x", help="(with --writer) whose full thrust")
    args = ap.parse_args(argv)
    stamps = tuple(s.strip() for s in args.stamp.split(",") if s.strip())
    bad = [s for s in stamps if s not in STAMPS]
    if bad:
        ap.error(f"unknown stamp mode(s) {bad}; choose from {list(STAMPS)}")
    if args.writer:
        return writer_main(args.domain_id, args.at_s, stamps[0], args.robot)
    load = open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else "?"
    t0 = time.perf_counter()
    flights = drill(args.flights, args.seed, stamps, Path(args.out) if args.out else None)
    print(f"task: {DEMO_TASK!r}; seed {args.seed}; wall {time.perf_counter() - t0:.0f} s; load average (1 min) at start {load}")
    for line in summary(flights, stamps):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps([{**asdict(f), "ok": f.ok} for f in flights], indent=1))
    return 0 if all(f.ok for f in flights) else 1


if __name__ == "__main__":
    sys.exit(main())

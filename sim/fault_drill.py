"""Fault drills of a whole mission, judged from the simulator's ground truth.

One flight: the planner's core (robot_hrl.nodes.planner_node.PlannerCore, the symbolic planner),
the skill's core (robot_hrl.nodes.skill_core.SkillCore: the shipped ONNX policy, then the shield,
with its odometry unit judging every sample) and the PyBullet robot, in one process, in lockstep
at the control rate, wired as the nodes are on the graph (odometry to both, subgoals re-sent as a
heartbeat, the skill status back to the planner at 10 Hz and on every change). The transport is
left out: the node-level process tests cover it (tests/test_nodes*.py).

At a chosen moment one fault starts and lasts to the end of the flight:

* ``odom_lost``: no odometry sample arrives any more;
* ``future_stamp``: the source re-sends the latest pose stamped 1000 s ahead (issue #16);
* ``teleport``: the source's position jumps 1.5 m in a random horizontal direction and goes on from there;
* ``frozen``: the source keeps re-sending the latest pose with fresh, monotonic stamps (a hung estimator, or a
  replay): per flight at random, with its twist frozen too, or with the live twist;

Violations are judged on the simulator's true state against the world file, as sim/safety_eval.py
judges them: the collision sphere leaving the fence (x, y) or crossing the ceiling; touching an
obstacle or landmark box; hitting the floor faster than 1 m/s; and the motors still on when the
flight's time is up (no bounded stop). Nothing here reads the odometry the skill saw.

    python sim/fault_drill.py --flights 50 --seed 0
    python sim/fault_drill.py --flights 50 --seed 0 --heading-from models/crazyflie_navigate.onnx   # under the level's yaw loop
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
# `python sim/fault_drill.py` puts sim/ first on sys.path, where sim/pybullet would shadow the real
# pybullet package: replace it with the repository root (as sim/evaluate.py does).
sys.path[:] = [p for p in sys.path if (Path(p).resolve() if p else Path.cwd().resolve()) != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import math  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import numpy as np  # noqa: E402

from robot_hrl.robots import CRAZYFLIE_2X  # noqa: E402
from robot_hrl.state import RobotState  # noqa: E402
from robot_hrl.world import load_world  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_WORLD = REPO_ROOT / "models" / "worlds" / "demo.yaml"
DEMO_MODEL = REPO_ROOT / "models" / "crazyflie_goto.onnx"
DEMO_TASK = "takeoff 1.0; goto red_box; goto green_box; goto blue_box; goto 1.5 3.0 1.0; land"
"""The README's demo mission."""
FAULTS = ("odom_lost", "future_stamp", "teleport", "frozen")
FLOOR_IMPACT_MPS = 1.0
"""Hitting the floor faster than this is a violation (a landing touches down at the backup's 0.3 m/s)."""


@dataclass
class Flight:
    """What one flight did, from the simulator's ground truth."""

    fault: str | None
    fault_at_s: float | None
    seed: int
    violations: list[str] = field(default_factory=list)
    """'fence', 'ceiling', 'obstacle:<name>', 'floor_impact', 'motors_on_at_end': each once, with the first time."""
    duration_s: float = 0.0
    motors_off_s: float | None = None
    """When the shield first cut the motors (sim time), None if never."""
    final_position_w: tuple = ()
    reckoning_error_m: float | None = None
    """Horizontal distance between the shield's dead-reckoned position and the true one when the motors went off
    (None when the shield was not dead-reckoning then)."""
    skill_states: list[str] = field(default_factory=list)
    planner_state: str = ""
    odometry_refusals: dict = field(default_factory=dict)
    mode_ticks: dict = field(default_factory=dict)
    """Ticks per shield mode."""
    ticks_intervened: int = 0
    interventions: dict = field(default_factory=dict)
    """Per unit.constraint, ticks on which it acted."""
    airframe: dict = field(default_factory=dict)
    """The simulated airframe: mass, kg; the chain's parameters (motor time constant, battery, rotor scales)."""
    intervened_s: list = field(default_factory=list)
    """The sim time of each tick the shield changed while the motors ran, less the requested landing (the mission's own
    ``land``, flown by the backup)."""
    flying_interventions: dict = field(default_factory=dict)
    """Per unit.constraint, the ticks of ``intervened_s`` it acted on."""
    flying_ticks: int = 0
    """Ticks with the motors running, less the requested landing's (the denominator of ``intervened_s``)."""
    landing_ticks: int = 0
    """Ticks of the requested landing with the motors running (flown by the backup)."""
    takeoff_s: float | None = None
    """The first tick the rotors were commanded thrust (the take-off)."""

    @property
    def ok(self) -> bool:
        return not self.violations


class _Source:
    """The odometry the skill and the planner receive: the true state, or the fault's."""

    def __init__(self, fault: str | None, at_s: float | None, rng: np.random.Generator):
        self.fault, self.at_s = fault, at_s
        angle = rng.uniform(0, 2 * math.pi)
        self.offset = np.array([1.5 * math.cos(angle), 1.5 * math.sin(angle), 0.0])
        self.frozen_twist = bool(rng.integers(0, 2))
        """``frozen``: the twist is replayed too (else the live one goes with the frozen pose)."""
        self.last: RobotState | None = None

    def sample(self, truth: RobotState, now: float) -> RobotState | None:
        if self.fault is None or now < self.at_s:
            self.last = truth
            return truth
        if self.fault == "odom_lost":
            return None
        if self.fault == "future_stamp":
            last = self.last
            return RobotState(position_w=last.position_w, quat_wxyz=last.quat_wxyz, linear_velocity_w=last.linear_velocity_w,
                              angular_velocity_b=last.angular_velocity_b, stamp_s=now + 1000.0)
        if self.fault == "frozen":
            last = self.last
            twist = last if self.frozen_twist else truth
            return RobotState(position_w=last.position_w.copy(), quat_wxyz=last.quat_wxyz.copy(),
                              linear_velocity_w=twist.linear_velocity_w.copy(),
                              angular_velocity_b=twist.angular_velocity_b.copy(), stamp_s=now)
        if self.fault == "teleport":
            return RobotState(position_w=truth.position_w + self.offset, quat_wxyz=truth.quat_wxyz,
                              linear_velocity_w=truth.linear_velocity_w, angular_velocity_b=truth.angular_velocity_b,
                              stamp_s=now)
        raise ValueError(f"unknown fault {self.fault!r}; one of {FAULTS}")


def _sim_skill_core():
    from robot_hrl.nodes.skill_core import SkillCore

    class SimSkillCore(SkillCore):
        """The skill core with the inference time 0 to the watchdog: in simulation a wall-clock deadline
        says nothing about the robot (as sim/pybullet/shield_adapter.py; the skill node measures it)."""

        def shield_step(self, now, state, state_stamp, subgoal, subgoal_stamp, actions, inference_s, land):
            return super().shield_step(now, state, state_stamp, subgoal, subgoal_stamp, actions, 0.0, land)

    return SimSkillCore


def launch_safety_margin_m() -> float:
    """The planner node's ``safety_margin_m`` in the launch's parameters (launch/params/navigation.yaml)."""
    import yaml

    from robot_hrl.launch.graph import params_file

    with open(params_file()) as fh:
        return float(yaml.safe_load(fh)["planner_node"]["ros__parameters"]["safety_margin_m"])


class MissionRig:
    """The policy, world and planner of the drills, loaded once; :meth:`fly` builds a fresh skill, shield
    and simulator for each flight."""

    def __init__(self, world_path=DEMO_WORLD, model_path=DEMO_MODEL, robot=CRAZYFLIE_2X, safety_margin_m: float | None = None,
                 shield_config=None, heading_from=None):
        from robot_hrl.runtime import OnnxPolicy

        self.shield_config = shield_config
        """The shield's YAML (None: the robot's own)."""
        self.safety_margin_m = launch_safety_margin_m() if safety_margin_m is None else float(safety_margin_m)
        """The planner's margin around the inflated obstacles, m (the launch's ``planner_node.safety_margin_m``)."""
        self.robot = robot
        self.world = load_world(world_path)
        self.policy = OnnxPolicy(model_path, robot, provider="cpu")
        self.heading = None
        """The heading loop's spec of the navigate level ``heading_from`` (its contract's ``heading``; the skill node's
        ``heading_model``) that runs under the skill, or None: the skill's own yaw."""
        if heading_from is not None:
            from robot_hrl.runtime.heading import heading_of_level

            self.heading = heading_of_level(Path(heading_from), self.policy, required=True).spec  # refused here, not mid-drill

    def fly(self, task: str = DEMO_TASK, fault: str | None = None, fault_at_s: float | None = None, seed: int = 0,
            max_time_s: float = 90.0, randomization=None) -> Flight:
        """One flight of ``task`` from the world's start, at rest on the floor with the motors stopped, with a fresh
        shield. ``randomization``: a ``sim.pybullet.RandomizationCfg`` (the airframe drawn from ``seed``), None the
        nominal robot."""
        from robot_hrl.nodes.planner_node import PlannerCore
        from robot_hrl.planning import PlannerConfig
        from robot_hrl.planning.llm import make_planner
        from robot_hrl.safety import Shield
        from sim.pybullet import PyBulletQuadrotorSim

        robot, world, policy = self.robot, self.world, self.policy
        rng = np.random.default_rng(seed)
        contract = policy.contract
        shield = Shield.from_yaml(self.shield_config, robot, world, contract.subgoal_radius_m, action=contract.action)
        if hasattr(policy, "reset"):
            policy.reset()
        from robot_hrl.runtime.heading import heading_loop

        # a fresh loop per flight, as a fresh skill node has
        skill = _sim_skill_core()(policy, shield, world, heading=heading_loop(self.heading, policy))
        config = PlannerConfig(robot_radius_m=robot.collision_radius_m, safety_margin_m=self.safety_margin_m)
        planner = PlannerCore(make_planner("symbolic", world, contract.subgoal_radius_m, config=config),
                              floor_z=float(world.bounds.min[2]))
        dt = 1.0 / float(contract.control_rate_hz)
        sim = PyBulletQuadrotorSim(robot, world, control_hz=1.0 / dt, seed=seed, randomization=randomization)
        flight = Flight(fault, fault_at_s, seed)
        try:
            start = np.asarray(world.start, dtype=np.float64)
            start[2] = max(start[2], world.bounds.min[2] + robot.body_height_m / 2.0)
            truth = sim.reset(start, np.array([1.0, 0.0, 0.0, 0.0]), motor_rpm=np.zeros(robot.num_rotors))
            dyn = sim.dynamics
            flight.airframe = {"mass_kg": round(float(dyn.mass_kg), 5), **{k_: round(float(v), 5) for k_, v in dyn.chain_parameters.items()}}
            source = _Source(fault, fault_at_s, rng)
            lo, hi = np.asarray(world.bounds.min, float), np.asarray(world.bounds.max, float)
            r = robot.collision_radius_m
            first: dict[str, float] = {}
            task_sent = False
            last_state_name = None
            n = int(round(max_time_s / dt))
            for k in range(n):
                now = k * dt
                sample = source.sample(truth, now)
                if sample is not None:
                    skill.on_state(sample, now, "odom", "base_link")
                    planner.on_position(sample.position_w)
                if not task_sent and planner.position is not None:
                    planner.on_task(task, now)
                    task_sent = True
                if k % 20 == 0:  # the planner's 5 Hz heartbeat
                    planner.update(now)
                sub = planner.current_subgoal()
                if sub is not None and (k % 20 == 0 or not np.array_equal(sub, skill.requested)):
                    skill.on_subgoal(sub, now)
                if k % 10 == 0:  # the measured battery, as the sim node publishes /battery (10 Hz)
                    skill.on_battery(float(sim.chain_state["battery_voltage_v"]), now, now)
                out = skill.tick(now)
                if out.mode != "motors_off":
                    names = {f"{i.unit}.{i.constraint}" for i in out.interventions}
                    if "command.land_request" in names:
                        flight.landing_ticks += 1
                    else:
                        flight.flying_ticks += 1
                        if names:
                            flight.intervened_s.append(round(now, 3))
                            for name in names:
                                flight.flying_interventions[name] = flight.flying_interventions.get(name, 0) + 1
                if flight.takeoff_s is None and out.mode == "policy" and float(out.command[0]) > 0.0:
                    flight.takeoff_s = now
                if out.state != last_state_name or k % 10 == 0:
                    status = out.status
                    planner.on_skill_status(dict(status), now)
                    if out.state != last_state_name:
                        flight.skill_states.append(out.state)
                    last_state_name = out.state
                if out.mode == "motors_off" and flight.motors_off_s is None:
                    flight.motors_off_s = now
                    pr = shield.predictor
                    if pr.valid:
                        flight.reckoning_error_m = round(float(math.hypot(pr.p[0] - truth.position_w[0], pr.p[1] - truth.position_w[1])), 3)
                vz_before = float(truth.linear_velocity_w[2])
                truth = sim.step(out.command)
                # ground truth
                p = truth.position_w
                if p[0] - r < lo[0] or p[0] + r > hi[0] or p[1] - r < lo[1] or p[1] + r > hi[1]:
                    first.setdefault("fence", now)
                if p[2] + r > hi[2]:
                    first.setdefault("ceiling", now)
                for c in sim.collisions():
                    if c.body == "ground":
                        if vz_before < -FLOOR_IMPACT_MPS:
                            first.setdefault("floor_impact", now)
                    else:
                        first.setdefault(f"obstacle:{c.body}", now)
                off_for_s = now - flight.motors_off_s if out.mode == "motors_off" and flight.motors_off_s is not None else 0.0
                done_flying = out.mode == "motors_off" and (planner.state in ("done", "idle", "error") or fault is not None
                                                            or off_for_s >= 2.0)  # (the shield ended it: a low battery)
                if done_flying and float(np.linalg.norm(truth.linear_velocity_w)) < 0.02 and p[2] < lo[2] + 0.05:
                    break
            else:
                if out.mode != "motors_off":  # (a flight the shield ended, e.g. on a low battery, is over: not this)
                    first.setdefault("motors_on_at_end", max_time_s)
            flight.duration_s = (k + 1) * dt
            flight.violations = [f"{name}@{t:.2f}s" for name, t in sorted(first.items(), key=lambda kv: kv[1])]
            flight.final_position_w = tuple(round(float(v), 3) for v in truth.position_w)
            flight.planner_state = planner.state
            flight.mode_ticks = dict(shield.mode_ticks)
            flight.ticks_intervened = shield.ticks_intervened
            flight.interventions = {f"{u.name}.{c}": n for u in shield.units for c, n in u.counters.by_constraint.items() if n}
            unit = shield.unit("odometry")
            if unit is not None:
                flight.odometry_refusals = {k_: v for k_, v in unit.counters.by_constraint.items() if v}
        finally:
            sim.close()
        return flight


def drill(rig: MissionRig, flights: int, seed: int, faults=FAULTS, task: str = DEMO_TASK, progress: bool = True):
    """``flights`` flights, each with a fault drawn from ``faults`` at a moment drawn uniformly over the
    nominal mission (its duration measured by a flight without fault first). Returns (nominal, flights)."""
    nominal = rig.fly(task, None, None, seed)
    rng = np.random.default_rng(seed)
    moments = rng.uniform(1.0, max(1.5, nominal.duration_s - 0.5), size=flights)
    kinds = [faults[i % len(faults)] for i in range(flights)]
    out = []
    iterator = range(flights)
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="fault drill", unit="flight")
    for i in iterator:
        out.append(rig.fly(task, kinds[i], float(moments[i]), seed + 1 + i))
    return nominal, out


def heading_rig(parser: argparse.ArgumentParser, heading_from) -> MissionRig:
    """The drills' rig for a command line's ``--heading-from``: a missing, corrupted or loop-less level is a usage
    error that names the fix (exit 2), not a traceback."""
    from robot_hrl.errors import RobotHrlError

    try:
        return MissionRig(heading_from=heading_from)
    except RobotHrlError as exc:
        parser.error(f"--heading-from {heading_from}: {exc}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Fly the demo mission with a fault at a random moment (odometry lost, "
                                 "future-stamped, teleporting or frozen) and judge fence, ceiling, obstacle and floor "
                                 "violations from PyBullet's ground truth.")
    ap.add_argument("--flights", type=int, default=50, help="flights with a fault (default 50)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the fault moments and directions")
    ap.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, from {','.join(FAULTS)}")
    ap.add_argument("--task", default=DEMO_TASK)
    ap.add_argument("--heading-from", metavar="LEVEL.onnx", default=None,
                    help="run the heading loop a navigate level names (its contract's heading: the robot faces its "
                         "velocity, the skill observes in its own frame) under the skill, as the skill node does under "
                         "planner:=learned")
    args = ap.parse_args(argv)
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    bad = [f for f in faults if f not in FAULTS]
    if bad:
        ap.error(f"unknown fault(s) {bad}; choose from {list(FAULTS)}")
    rig = heading_rig(ap, args.heading_from)
    nominal, flights = drill(rig, args.flights, args.seed, faults, args.task)
    print(f"nominal flight: {nominal.duration_s:.1f} s, planner {nominal.planner_state}, violations {nominal.violations}")
    for f in flights:
        if not f.ok:
            print(f"  VIOLATION {f.fault} at {f.fault_at_s:.2f} s (seed {f.seed}): {f.violations}, ended at {f.final_position_w}")
    by_fault = {}
    for f in flights:
        by_fault.setdefault(f.fault, []).append(f)
    for name, fs in by_fault.items():
        stops = [f.motors_off_s - f.fault_at_s for f in fs if f.motors_off_s is not None and f.motors_off_s >= f.fault_at_s]
        errs = [f.reckoning_error_m for f in fs if f.reckoning_error_m is not None]
        print(f"{name:13s} flights {len(fs):3d}  with violations {sum(not f.ok for f in fs):3d}  "
              f"fault->motors off median {np.median(stops) if stops else float('nan'):.2f} s, max {max(stops) if stops else float('nan'):.2f} s; "
              f"dead reckoning off by median {np.median(errs) if errs else float('nan'):.3f} m, max {max(errs) if errs else float('nan'):.3f} m at motors off")
    total = sum(not f.ok for f in flights)
    print(f"total: {len(flights)} flights, {total} with violations")
    return 0 if total == 0 and nominal.ok else 1


if __name__ == "__main__":
    sys.exit(main())

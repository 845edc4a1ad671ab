"""The nodes' logic without the transport: argv, parameters files, plan execution, deadlines, monitoring."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_hrl.errors import ConfigError
from robot_hrl.launch import graph
from robot_hrl.launch.monitor import RunMonitor
from robot_hrl.nodes.args import load_params_file, parse_node_args
from robot_hrl.nodes.deadline import DeadlineMonitor
from robot_hrl.nodes.planner_node import PlannerCore
from robot_hrl.nodes.resources import resolve_resource
from robot_hrl.world import load_world
from robot_hrl.planning import PlannerConfig
from robot_hrl.robots import CRAZYFLIE_2X

ROBOT_RADIUS_M = CRAZYFLIE_2X.collision_radius_m
"""The planner asks the robot for its collision radius; these tests fly the Crazyflie 2.x."""

TASK = "takeoff 1.0; goto red_box; goto 2.0 2.2 1.0; land"


# ---- argv and parameters ------------------------------------------------------------------------
def test_ros_args_parse_like_ros2_launch(repo_root):
    params = str(repo_root / "launch" / "params" / "navigation.yaml")
    a = parse_node_args(["--ros-args", "-r", "__node:=skill_node", "-r", "__ns:=/cf1", "--params-file", params,
                         "-p", "control_rate_hz:=500", "-p", "use_sim_time:=true"], "x")
    assert a.name == "skill_node" and a.namespace == "/cf1"
    assert a.parameters["control_rate_hz"] == 500 and a.parameters["use_sim_time"] is True
    assert a.parameters["robot"] == "crazyflie_2x"  # from the /** wildcard
    assert a.parameters["model"] == "models/crazyflie_goto.onnx"
    assert "planner" not in a.parameters  # another node's


@pytest.mark.parametrize("argv, message", [
    (["-p", "novalue"], "NAME:=VALUE"),
    (["--params-file"], "needs a value"),
    (["--params-file", "/nonexistent.yaml"], "does not exist"),
    (["--frobnicate"], "unknown argument"),
    (["--backend", "ros1"], "choose auto"),
    (["--domain-id", "999"], "0..232"),
])
def test_bad_node_arguments_are_clear_errors(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse_node_args(argv, "skill_node")


def test_bad_params_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("skill_node: [1, 2]\n")
    with pytest.raises(ConfigError, match="ros__parameters"):
        load_params_file(bad, "skill_node")
    bad.write_text("a: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_params_file(bad, "skill_node")


def test_resources_resolve_from_the_checkout_and_say_where_they_looked():
    assert resolve_resource("models/worlds/demo.yaml").is_file()
    with pytest.raises(ConfigError, match="tried"):
        resolve_resource("models/worlds/nope.yaml", "world file")
    with pytest.raises(ConfigError, match="no model"):
        resolve_resource("", "model")


# ---- the graph both launchers read ---------------------------------------------------------------
def test_graph_and_params_file_agree():
    params = graph.params_file()
    for spec in graph.NAVIGATION_NODES:
        assert load_params_file(params, spec.name), f"{spec.name} has no parameters in {params}"
    args = graph.check_arguments({"use_sim": "false", "task": "takeoff 1"})
    names = [n.name for n in graph.nodes_to_launch(args)]
    assert names == ["skill_node", "planner_node"]
    planner = next(n for n in graph.NAVIGATION_NODES if n.name == "planner_node")
    assert graph.node_parameters(planner, args) == {"use_sim_time": False, "planner": "symbolic",
                                                    "world": "models/worlds/demo.yaml", "task": "takeoff 1",
                                                    "model": "models/crazyflie_goto.onnx",
                                                    "navigate_model": "models/crazyflie_navigate.onnx"}


@pytest.mark.parametrize("values, message", [({"planner": "gpt"}, "choose one of"), ({"speed": "1"}, "unknown launch")])
def test_bad_launch_arguments(values, message):
    with pytest.raises(ValueError, match=message):
        graph.check_arguments(values)


def test_launch_file_builds_its_description_when_ros_is_installed(repo_root):
    pytest.importorskip("launch_ros", reason="launch_ros (ROS 2) is not installed")
    import importlib.util

    spec = importlib.util.spec_from_file_location("navigation_launch", repo_root / "launch" / "navigation.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    assert len(description.entities) == len(graph.LAUNCH_ARGUMENTS) + len(graph.NAVIGATION_NODES)


def test_launch_file_compiles_and_names_every_argument(repo_root):
    """Without ROS 2 the launch file cannot run; it must still compile and declare the shared arguments."""
    source = (repo_root / "launch" / "navigation.launch.py").read_text()
    compile(source, "navigation.launch.py", "exec")
    assert "generate_launch_description" in source and "LAUNCH_ARGUMENTS" in source and "NAVIGATION_NODES" in source


# ---- plan execution ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world(demo_world_path):
    return load_world(demo_world_path)


@pytest.fixture
def core(world):
    from robot_hrl.planning import SymbolicPlanner

    c = PlannerCore(SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M)), floor_z=0.0)
    c.on_position((0.5, 0.5, 0.0125))
    return c


def _status(core, state, distance=0.0):
    return {"state": state, "requested": core.current_subgoal().tolist(), "distance": distance}


def test_planner_core_walks_the_plan_and_lands(core):
    assert core.on_task(TASK, 0.0) is None
    assert core.state == "executing" and core.goals_total == 4
    seen = []
    t = 0.0
    while core.state == "executing":
        seen.append(core.current_subgoal())
        core.on_skill_status(_status(core, "reached"), t)
        t += 1.0
    assert core.state == "landing" and core.goals_reached == 3
    assert core.current_subgoal()[2] == 0.0  # a landing request on the floor
    core.on_skill_status({"state": "landing"}, t)
    assert core.state == "landing"
    core.on_skill_status({"state": "landed"}, t)
    assert core.state == "done" and core.goals_reached == 4 and core.status()["ends_landed"]
    assert len(seen) >= 4 and all(np.all(np.isfinite(s)) for s in seen)


def test_planner_core_ignores_a_status_for_another_subgoal(core):
    core.on_task(TASK, 0.0)
    first = core.current_subgoal()
    core.on_skill_status({"state": "reached", "requested": [9.0, 9.0, 9.0]}, 0.0)
    assert np.array_equal(core.current_subgoal(), first)


def test_planner_core_malformed_task_keeps_the_current_subgoal(core):
    core.on_task(TASK, 0.0)
    core.on_skill_status(_status(core, "reached"), 0.0)
    current = core.current_subgoal()
    error = core.on_task("fly to the moon", 1.0)
    assert "unknown action" in error and core.state == "error"
    assert np.array_equal(core.current_subgoal(), current)
    core.on_skill_status(_status(core, "reached"), 2.0)  # no progress while in error
    assert np.array_equal(core.current_subgoal(), current)
    for bad in ("", "   ", '{"steps": [{"action": "goto"}]}', "goto nowhere_box", {"steps": "x"}, 42):
        assert core.on_task(bad, 3.0)
    assert core.on_task(TASK, 4.0) is None and core.state == "executing"


def test_planner_core_hover_ends_by_time(core):
    core.on_task("takeoff 1.0; hover 2; land", 0.0)
    while core.state == "executing":
        core.on_skill_status(_status(core, "reached"), 0.0)
    assert core.state == "hovering"
    core.update(1.0)
    assert core.state == "hovering"
    core.update(2.5)
    assert core.state == "landing"


def test_planner_core_replans_when_blocked_then_gives_up(core):
    core.on_task("takeoff 1.0; goto 3.5 2.0 1.0; land", 0.0)
    while core.current_step.action == "takeoff":
        core.on_skill_status(_status(core, "reached"), 0.0)
    core.on_position((1.0, 1.0, 1.0))
    version = core.plan_version
    t = 10.0
    for _ in range(40):
        if core.current_step is None or core.current_step.action != "goto":
            break
        core.on_skill_status(_status(core, "blocked", 1.0), t)
        t += 1.0
    assert core.plan_version > version  # replanned
    assert core.goals_failed == ["(3.50, 2.00, 1.00)"] or core.goals_failed  # abandoned after max_replans
    assert core.state == "landing"


def test_planner_core_waits_for_odometry(world):
    from robot_hrl.planning import SymbolicPlanner

    c = PlannerCore(SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M)))
    assert c.on_task(TASK, 0.0) is None and c.state == "waiting_for_odom"
    c.on_position((0.5, 0.5, 0.0125))
    assert c.poll_pending(0.0) is None and c.state == "executing"


# ---- deadline monitor and run monitor ------------------------------------------------------------
def test_deadline_monitor_counts_misses():
    m = DeadlineMonitor(0.01)
    for _ in range(98):
        assert not m.record(0.001)
    assert m.record(0.011)
    assert m.record(0.001, skipped=2)
    s = m.stats()
    assert s["ticks"] == 100 and s["misses"] == 2 and s["skipped_periods"] == 2 and s["misses_per_10k"] == 200
    assert 0.9 < s["p50_ms"] < 1.1
    with pytest.raises(ValueError):
        DeadlineMonitor(0.0)


def test_run_monitor_judges_violations_from_ground_truth(world):
    m = RunMonitor(world)
    m.on_odom(0.0, (0.5, 0.5, 1.0))
    m.on_odom(0.1, (1.5, 1.5, 1.0))  # inside pillar_a
    m.on_odom(0.2, (1.5, 1.5, 1.0))  # still inside: one event
    m.on_odom(0.3, (9.0, 0.5, 1.0))  # outside the fence
    m.on_diagnostic("sim_node: physics", 2, "1 collision", {"collisions": "1", "last_collision_with": "wall"}, 0.3)
    kinds = [v.kind for v in m.violations]
    assert kinds == ["obstacle", "geofence", "collision"]
    m.on_diagnostic("skill_node: interventions", 1, "mode hold", {"interventions.subgoal": "3", "mode": "hold"}, 0.4)
    assert m.snapshot()["interventions"] == {"subgoal": 3}
    m.on_planner_status(json.dumps({"state": "done", "ends_landed": True}))
    assert not m.finished()
    m.on_skill_status(json.dumps({"state": "landed"}))
    assert m.finished()
    m.on_skill_status("not json")
    assert m.snapshot()["skill"] == {"raw": "not json"}


def test_with_a_simulator_violations_come_from_its_ground_truth_never_from_odom(world):
    """Issue #16: result.json's violations judged from the simulator's ground truth; a rogue /odom neither
    fakes nor hides one."""
    m = RunMonitor(world)
    truth = {"true_position": "[0.5, 0.5, 1.0]", "collisions": "0", "truth_fence_exits": "0", "truth_box_entries": "0"}
    m.on_diagnostic("sim_node: physics", 0, "running", truth, 0.0)
    m.on_odom(0.1, (9.0, 0.5, 1.0))  # a rogue /odom outside the fence: not a violation
    m.on_odom(0.2, (1.5, 1.5, 1.0))  # nor inside a pillar
    assert m.violations == []
    m.on_diagnostic("sim_node: physics", 0, "running", {**truth, "true_position": "[1.5, 1.5, 1.0]",
                                                         "truth_box_entries": "1", "truth_last_box": "pillar_a"}, 0.5)
    m.on_diagnostic("sim_node: physics", 0, "running", {**truth, "truth_box_entries": "1", "truth_fence_exits": "2"}, 1.0)
    kinds = [v.kind for v in m.violations]
    assert kinds == ["obstacle", "geofence", "geofence"] and "pillar_a" in m.violations[0].detail


# ---- the skill core: real policy and shield, no transport -----------------------------------------
@pytest.fixture
def skill(world, repo_root):
    from robot_hrl.nodes.skill_node import SkillCore
    from robot_hrl.robots import CRAZYFLIE_2X
    from robot_hrl.runtime import OnnxPolicy
    from robot_hrl.safety import Shield

    policy = OnnxPolicy(repo_root / "models" / "crazyflie_goto.onnx", CRAZYFLIE_2X, provider="cpu")
    return SkillCore(policy, Shield.from_yaml(None, CRAZYFLIE_2X, world, policy.contract.subgoal_radius_m), world)


def _state(position, t):
    from robot_hrl.state import RobotState

    return RobotState(position_w=np.asarray(position, dtype=float), stamp_s=t)


def test_skill_core_idles_until_a_finite_subgoal(skill):
    out = skill.tick(0.0)
    assert out.status["state"] == "waiting" and np.all(out.wrench == 0)
    skill.on_state(_state((0.5, 0.5, 0.0125), 0.0), 0.0)
    skill.on_subgoal((np.nan, 1.0, 1.0), 0.0)  # a rogue NaN does not start the motors
    out = skill.tick(0.01)
    assert out.status["state"] == "idle" and np.all(out.wrench == 0)
    assert out.status["requested"] == [None, 1.0, 1.0]
    json.dumps(out.status, allow_nan=False)
    skill.on_subgoal((0.5, 0.5, 1.0), 0.02)
    out = skill.tick(0.02)
    assert out.mode in ("policy", "backup_hold") and out.wrench[0] > 0


def test_skill_core_shields_subgoals_and_counts_interventions_once_per_request(skill):
    skill.on_state(_state((0.5, 0.5, 1.0), 0.0), 0.0)
    for t in (0.0, 0.2, 0.4):  # the planner's heartbeat re-sends the same subgoal
        skill.on_subgoal((50.0, 0.5, 1.0), t)
    assert skill.interventions["subgoal"] == 2  # fence and radius, once
    assert skill.safe_subgoal[0] <= 1.5 + 1e-6  # within the subgoal radius of the robot
    skill.on_subgoal((0.5, 0.5, 40.0), 0.6)
    assert skill.interventions["subgoal"] == 3


def test_skill_core_lands_on_request_and_reports_each_phase(skill):
    skill.on_state(_state((0.5, 0.5, 1.0), 0.0), 0.0)
    skill.on_subgoal((0.5, 0.5, 1.0), 0.0)
    skill.on_subgoal((0.5, 0.5, 0.0), 0.0)  # on the floor: a landing request
    states = []
    for k in range(800):  # the scripted pose stands still for 1 s (not news: the landing flies dead-reckoned), and a
        t = 0.01 * k      # landing without a position ends within 1.5 z / land speed + 2 s = 7 s (docs/safety.md)
        z = max(0.0125, 1.0 - max(0.0, t - 1.0) * 0.3)  # the robot descends as the backup asks
        skill.on_state(_state((0.5, 0.5, z), t), t)
        states.append(skill.tick(t).status["state"])
    seen = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert seen[-2:] == ["landing", "landed"], seen
    assert "command" not in skill.interventions and "watchdog" not in skill.interventions  # requested: no intervention


def test_skill_core_estop_latches_until_released(skill):
    skill.on_state(_state((0.5, 0.5, 1.0), 0.0), 0.0)
    skill.on_subgoal((0.5, 0.5, 1.0), 0.0)
    skill.estop(True, 0.0)
    out = skill.tick(0.01)
    assert out.status["state"] == "estop" and np.all(out.wrench == 0)
    skill.estop(False, 0.02)
    assert skill.tick(0.03).status["state"] != "estop"


# ---- the executables refuse bad parameters with one clear line ---------------------------------------
@pytest.mark.parametrize("module, args, message", [
    ("robot_hrl.nodes.skill_node", ["-p", "model:=models/nope.onnx"], "model file 'models/nope.onnx' was not found"),
    ("robot_hrl.nodes.skill_node", ["-p", "robot:=hummingbird"], "unknown robot 'hummingbird'"),
    ("robot_hrl.nodes.planner_node", ["-p", "planner:=oracle"], "choose symbolic, llm, vlm or learned"),
    ("robot_hrl.nodes.planner_node", ["-p", "world:=/nonexistent/world.yaml"], "does not exist"),
    ("robot_hrl.nodes.planner_node", ["-p", "robot_radius_m:=-0.1"], "robot_radius_m=-0.1 must be >= 0"),
    ("robot_hrl.nodes.planner_node", ["-p", "robot:=hummingbird"], "unknown robot 'hummingbird'"),
    ("robot_hrl.nodes.planner_node", ["-p", "planning_timeout_s:=-1"], "planning_timeout_s=-1 must be >= 0"),
    ("sim.nodes.sim_node", ["-p", "physics_hz:=-5"], "must be > 0"),
    ("sim.nodes.sim_node", ["-p"], "needs a value"),
])
def test_node_executables_refuse_bad_parameters(repo_root, module, args, message):
    import os
    import subprocess
    import sys

    from robot_hrl.transport.dds_config import loopback_env, unique_domain_id

    env = {**os.environ, **loopback_env(unique_domain_id(block=3))}  # block 3: as tests/test_e2e_support.py
    proc = subprocess.run([sys.executable, "-m", module, "--ros-args", *args], cwd=repo_root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr


def test_live_summary_renders_every_state(world):
    from rich.console import Console

    from robot_hrl.launch.launcher import _LiveSummary

    m = RunMonitor(world)
    console = Console(record=True, width=120)
    console.print(_LiveSummary(m, enabled=False)._table(0.0))  # nothing known yet
    m.on_planner_status(json.dumps({"state": "executing", "goals_reached": 2, "goals_total": 6,
                                    "current_goal": "goto red_box"}))
    m.on_skill_status(json.dumps({"state": "tracking", "subgoal": [1.0, 2.0, 1.0], "distance": 0.42}))
    m.on_diagnostic("skill_node: shield", 1, "mode backup_hold", {"mode": "backup_hold"}, 1.0)
    m.on_diagnostic("skill_node: interventions", 1, "", {"interventions.obstacles": "2"}, 1.0)
    m.on_diagnostic("planner_node: task", 2, "task rejected: bad", {}, 1.0)
    console.print(_LiveSummary(m, enabled=False)._table(3.5))
    text = console.export_text()
    assert "goal 2/6" in text and "0.42 m" in text and "backup_hold" in text and "obstacles: 2" in text
    assert "task rejected" in text


def test_skill_core_takes_off_again_only_for_a_new_subgoal_and_fresh_odometry(skill):
    skill.on_state(_state((0.5, 0.5, 0.0125), 0.0), 0.0)
    skill.on_subgoal((0.5, 0.5, 1.0), 0.0)
    skill.on_subgoal((0.5, 0.5, 0.0), 0.0)  # land at once
    t = 0.0
    while skill.tick(t).state != "landed":
        t += 0.01
        skill.on_state(_state((0.5, 0.5, 0.0125), t), t)
        assert t < 30
    skill.on_subgoal((0.5, 0.5, 0.0), t)  # the planner's heartbeat: the same landing
    assert skill.tick(t + 0.01).state == "landed"
    skill.on_subgoal((1.0, 1.0, 1.0), t + 5.0)  # a new flight, but the odometry is 5 s old
    assert skill.tick(t + 5.0).state == "landed"
    skill.on_state(_state((0.5, 0.5, 0.0125), t + 5.0), t + 5.0)
    skill.on_subgoal((1.0, 1.2, 1.0), t + 5.0)  # a new flight with fresh odometry: take off
    assert skill.tick(t + 5.01).state != "landed"

"""The planner node's inputs without the transport: planning off the executor with a deadline, the
skill-status validation, the shared JSON and diagnostics helpers, the input guard."""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import pytest

from robot_hrl.msgs import DiagnosticArray, String
from robot_hrl.nodes.common import diag_status, finite_json, json_string, safe_text
from robot_hrl.nodes.input_guard import GuardedNode, InputGuard
from robot_hrl.nodes.planner_node import PlannerCore, default_planning_timeout_s, run_job
from robot_hrl.nodes.skill_status import SKILL_STATES, SkillStatusError, parse_skill_status
from robot_hrl.planning import PlannerConfig, SymbolicPlanner, make_planner
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.world import load_world

START = (0.5, 0.5, 0.0125)
TASK = "takeoff 1.0; goto red_box; goto 2.0 2.2 1.0; land"


@pytest.fixture(scope="module")
def world(demo_world_path):
    return load_world(demo_world_path)


@pytest.fixture
def planner(world):
    return SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=CRAZYFLIE_2X.collision_radius_m))


class Worker:
    """The node's runner in miniature: jobs are queued and run when the test says (a real thread)."""

    def __init__(self):
        self.jobs = []

    def __call__(self, job):
        self.jobs.append(job)

    def run(self, core, index=-1, now=1.0):
        job = self.jobs.pop(index)
        out = {}
        thread = threading.Thread(target=lambda: out.update(result=run_job(job)))
        thread.start()
        thread.join(60)
        assert not thread.is_alive(), "planning hung"
        return core.finish_job(job, *out["result"], now)


# ---- planning off the executor ------------------------------------------------------------------------
def test_planning_runs_in_the_worker_and_the_heartbeat_keeps_the_old_subgoal(planner):
    worker = Worker()
    core = PlannerCore(planner, runner=worker)
    core.on_position(START)
    assert core.on_task(TASK, 0.0) is None and core.state == "planning" and core.status()["planning"] == "task"
    assert core.current_subgoal() is None  # nothing to send before the first plan
    assert worker.run(core) == (True, None) and core.state == "executing"
    first = core.current_subgoal()
    # A second task: while it is planned, the current subgoal keeps being sent and progress waits.
    assert core.on_task("takeoff 1.0; goto blue_box; land", 1.0) is None and core.state == "planning"
    core.on_skill_status({"state": "reached", "requested": first.tolist(), "distance": 0.0}, 1.5)
    assert np.array_equal(core.current_subgoal(), first)
    assert worker.run(core) == (True, None) and core.state == "executing" and core.plan_version == 2


def test_a_newer_task_cancels_the_plan_being_made(planner):
    worker = Worker()
    core = PlannerCore(planner, runner=worker)
    core.on_position(START)
    core.on_task(TASK, 0.0)
    core.on_task("takeoff 1.2; land", 0.1)
    old, new = worker.jobs
    assert old.deadline.cancelled.is_set() and "a newer task arrived" in old.deadline.reason
    assert worker.run(core, 0) == (False, None)  # superseded: not applied
    assert core.state == "planning"
    assert worker.run(core, 0) == (True, None) and core.goals_total == 2


def test_planning_past_its_deadline_is_rejected_and_changes_nothing(planner):
    worker = Worker()
    core = PlannerCore(planner, runner=worker, planning_timeout_s=1e-6)
    core.on_position(START)
    core.on_task("takeoff 1.0; visit red_box green_box blue_box 1,3,1 3.5,2.5,1; land", 0.0)
    applied, error = worker.run(core)
    assert applied and "took longer than its deadline" in error and "planning_timeout_s" in error
    assert core.state == "error" and core.plan is None and core.status()["planning"] is None


def test_without_a_runner_the_core_plans_at_once(planner):
    core = PlannerCore(planner)
    core.on_position(START)
    assert core.on_task(TASK, 0.0) is None and core.state == "executing"


@pytest.mark.parametrize("task, needle", [
    ("hover 1; " * 20000, "at most 65536"),
    ({"steps": [{"action": "hover", "duration_s": math.nan}]}, "not JSON"),
    ('{"steps": [{"action": "takeoff"}, {"action": "hover", "duration_s": NaN}]}', "NaN is not a JSON number"),
    ('{"steps": ' + "[" * 60000 + "]" * 60000 + "}", "at most 65536"),
    ('{"steps": ' + "[" * 30000 + "]" * 30000 + "}", "nests 30001 levels"),
    ('{"steps": [{"action": "takeoff", "altitude_m": ' + "1" * 400 + "}]}", "400 digits"),
    ("takeoff 1; goto red_b\u043ex", "red_b\\u043ex"),
    ("takeoff 1; " + "hover 0.1; " * 70, "at most 64"),
])
def test_hostile_tasks_are_refused_with_a_reason_and_the_node_goes_on(planner, task, needle):
    worker = Worker()
    core = PlannerCore(planner, runner=worker)
    core.on_position(START)
    error = core.on_task(task, 0.0)
    if error is None:
        applied, error = worker.run(core)
    assert error is not None and needle in error, error
    assert core.state == "error" and core.on_task(TASK, 1.0) is None


def test_the_llm_planning_deadline_covers_its_requests(world):
    llm = make_planner("llm", world, 1.0, llm_url="http://127.0.0.1:9/v1", model="m", timeout_s=7.0,
                       max_attempts=3, robot_radius_m=CRAZYFLIE_2X.collision_radius_m)
    assert default_planning_timeout_s(llm) == 10.0 + 3 * 7.0
    assert default_planning_timeout_s(llm.symbolic) == 10.0


def test_non_finite_positions_are_not_taken(planner):
    core = PlannerCore(planner)
    core.on_position((math.nan, 0.0, 1.0))
    assert core.position is None
    core.on_position(START)
    core.on_position((math.inf, 0.0, 1.0))
    assert np.allclose(core.position, START)


# ---- /skill/status ------------------------------------------------------------------------------------
def test_a_skill_status_of_the_skill_node_is_read():
    s = parse_skill_status(json.dumps({"state": "reached", "requested": [1.0, 2.0, 1.0], "distance": 0.01,
                                       "speed": 0.0, "mode": "policy", "non_finite": []}))
    assert s.state == "reached" and np.allclose(s.requested, [1, 2, 1]) and s.distance == 0.01
    assert parse_skill_status('{"state": "holding", "requested": [null, 1, 1]}').requested is None
    assert set(SKILL_STATES) >= {"reached", "blocked", "landed"}


@pytest.mark.parametrize("text, needle", [
    ("", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"state": "teleported"}', "expected one of"),
    ('{"state": ["reached"]}', "expected one of"),
    ('{"state": "reached", "requested": ["a", "b", "c"]}', "must hold numbers"),
    ('{"state": "reached", "requested": [1, 2]}', "must be [x, y, z]"),
    ('{"state": "reached", "requested": [NaN, 1, 1]}', "NaN is not a JSON number"),
    ('{"state": "reached", "distance": 1e999}', "overflows a double"),
    ('{"state": "reached", "distance": -1}', "finite number >= 0"),
    ('{"state": "reached", "distance": "far"}', "must be a number or null"),
    ('{"state": "reached", "state": "landed"}', "appears twice"),
    ('{"state": "landed", "requested": ' + "[" * 5000 + "]" * 5000 + "}", "nests"),
    ('{"state": "reached", "requested": [' + "9" * 400 + ", 1, 1]}", "400 digits"),
    ("x" * 20000, "at most 16384"),
])
def test_a_malformed_skill_status_is_refused_with_its_reason(text, needle):
    with pytest.raises(SkillStatusError, match=None) as info:
        parse_skill_status(text)
    assert needle in str(info.value), str(info.value)


# ---- the shared JSON and diagnostics helpers -----------------------------------------------------------
def test_a_status_with_huge_or_non_finite_numbers_is_still_sent_and_says_what_it_dropped():
    state = np.array([1e308, -1e308, 0.0])
    with np.errstate(over="ignore"):
        distance = float(np.linalg.norm(state))  # overflows to inf, as the skill node's did
    payload = {"state": "tracking", "distance": distance, "speed": math.nan,
               "position": state, "requested": [np.float64(math.inf), 1.0, None], "t": np.float32(1.5)}
    msg = json_string(payload)
    data = json.loads(msg.data)  # valid JSON (no NaN / Infinity tokens)
    assert data["distance"] is None and data["speed"] is None and data["position"] == [1e308, -1e308, 0.0]
    assert data["non_finite"] == ["distance", "speed", "requested[0]"]
    assert data["t"] == 1.5
    assert "non_finite" not in json.loads(json_string({"ok": 1.0}).data)
    assert finite_json({"a": [math.nan]}) == ({"a": [None]}, ["a[0]"])


def test_diagnostics_text_is_always_sendable():
    status = diag_status("planner_node: task\x00", 2, "bad \udcff task", {
        "task": "\udcff" * 3 + "x" * 5000, "nan": math.nan, "list": [math.inf, 1.0], "k\x00": "v"})
    DiagnosticArray(status=[status]).serialize()  # raised before on a lone surrogate
    values = {kv.key: kv.value for kv in status.values}
    assert status.message == "bad \\udcff task" and values["list"] == "[null, 1.0]" and values["nan"] == "nan"
    assert len(values["task"]) < 2100 and values["task"].startswith("\\udcff")
    assert safe_text("a\x00b") == "a\\x00b" and safe_text("caf\u00e9") == "caf\u00e9"


# ---- the input guard ----------------------------------------------------------------------------------
class _Recorder:
    """The transport's side, as far as the guard uses it: a logger, a clock, subscriptions, a publisher."""

    def __init__(self):
        import logging

        self.name = "test_node"
        self.published = []
        self.subs = []
        self._log = logging.getLogger("test_node")

    def get_logger(self):
        return self._log

    def now(self):
        return 12.5

    def create_subscription(self, msg_type, topic, callback, qos, raw=False):
        sub = type("Sub", (), {"dropped": 0, "callback": staticmethod(callback), "topic": topic})()
        self.subs.append(sub)
        return sub

    def create_publisher(self, msg_type, topic, qos):
        recorder = self

        class Pub:
            def publish(self, msg):
                recorder.published.append(msg)

        return Pub()

    def create_timer(self, period_s, callback):
        return callback


def test_a_raising_callback_is_counted_and_reported_and_the_node_goes_on(caplog):
    bare = _Recorder()
    node = GuardedNode(bare)
    guard = node.input_guard
    calls = []

    def callback(msg):
        calls.append(msg)
        if msg == "bad":
            raise ValueError("cannot read this")

    sub = node.create_subscription(String, "/task", callback)
    guard.start_reporting()
    assert guard.report() is False  # nothing dropped yet: nothing published
    for msg in ("ok", "bad", "ok", "bad"):
        sub.callback(msg)
    sub.dropped = 2  # what the transport counts for undecodable samples
    guard.reject("/skill/status", "the skill status is not valid JSON")
    assert calls == ["ok", "bad", "ok", "bad"]
    assert guard.report() is True and guard.report() is False  # only when a count changed
    (array,) = bare.published
    (status,) = array.status
    values = {kv.key: kv.value for kv in status.values}
    assert status.name == "test_node: inputs" and status.level == 1
    assert values["/task.callback_errors"] == "2" and values["/task.undecodable"] == "2"
    assert values["/task.received"] == "4" and "ValueError: cannot read this" in values["/task.last_reason"]
    assert values["/skill/status.rejected"] == "1"
    assert "5 input(s) dropped on /skill/status, /task" == status.message
    assert "Traceback" in caplog.text  # a non-RobotHrlError in a callback is a bug: logged with its traceback


def test_the_guard_of_a_bare_node_and_of_a_guarded_one():
    from robot_hrl.nodes.input_guard import input_guard_of

    bare = _Recorder()
    assert isinstance(input_guard_of(bare), InputGuard)
    guarded = GuardedNode(bare)
    assert input_guard_of(guarded) is guarded.input_guard
    assert guarded.now() == 12.5  # everything else is the node's own

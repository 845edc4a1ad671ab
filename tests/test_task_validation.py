"""Task validation: text and JSON tasks have the same limits, every number is finite, untrusted names are
shown with ascii(), JSON is read strictly; plans are checked finite; a planning deadline stops a plan."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_hrl.errors import PlanningError
from robot_hrl.planning import PlannerConfig, PlanningDeadline, PlanningTimeout, SymbolicPlanner
from robot_hrl.planning.plan import Plan, PlanStep
from robot_hrl.planning.task import (
    MAX_HOVER_S, MAX_LANDMARK_CHARS, MAX_STEPS, MAX_TASK_CHARS, MAX_VISIT_TARGETS, TASK_SCHEMA, Task, TaskStep,
    parse_task, parse_task_json, parse_task_text,
)
from robot_hrl.planning.untrusted import json_depth, loads_strict, plain, show
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.world import load_world


@pytest.fixture(scope="module")
def demo(demo_world_path):
    return load_world(demo_world_path)


@pytest.fixture(scope="module")
def planner(demo):
    return SymbolicPlanner(demo, 1.0, config=PlannerConfig(robot_radius_m=CRAZYFLIE_2X.collision_radius_m))


def test_the_schema_and_the_text_parser_share_their_limits():
    steps = TASK_SCHEMA["properties"]["steps"]
    assert steps["maxItems"] == MAX_STEPS
    hover = next(s for s in steps["items"]["oneOf"] if s["properties"]["action"].get("const") == "hover")
    assert hover["properties"]["duration_s"]["maximum"] == MAX_HOVER_S
    visit = next(s for s in steps["items"]["oneOf"] if s["properties"]["action"].get("const") == "visit")
    assert visit["properties"]["targets"]["maxItems"] == MAX_VISIT_TARGETS
    assert visit["properties"]["targets"]["items"]["properties"]["landmark"]["maxLength"] == MAX_LANDMARK_CHARS


# One abstract task, written both ways: each form must accept it, or refuse it, alike.
_duration = st.one_of(st.floats(-10, 4000), st.sampled_from([0.0, MAX_HOVER_S, MAX_HOVER_S + 0.5, math.nan,
                                                            math.inf, 1e308]))
_altitude = st.one_of(st.floats(-1, 3), st.sampled_from([0.0, 1e-9, math.nan, math.inf, 1e308]))
_coord = st.one_of(st.floats(-5, 5), st.sampled_from([math.nan, math.inf, -math.inf, 1e308]))
_name = st.one_of(st.sampled_from(["red_box", "green_box", "b" * MAX_LANDMARK_CHARS, "b" * (MAX_LANDMARK_CHARS + 1)]),
                  st.from_regex(r"[a-z_]{1,70}", fullmatch=True))
_target = st.one_of(_name.map(lambda n: ("landmark", n)), st.tuples(_coord, _coord, _coord).map(lambda p: ("position", p)))
_step = st.one_of(
    _altitude.map(lambda a: ("takeoff", a)),
    _target.map(lambda t: ("goto", t)),
    _duration.map(lambda d: ("hover", d)),
    st.lists(_target, min_size=1, max_size=MAX_VISIT_TARGETS + 3).map(lambda ts: ("visit", ts)),
    st.just(("land", None)),
)


def _num(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else {math.inf: "inf", -math.inf: "-inf"}.get(v, "nan")


def as_text(steps) -> str:
    out = []
    for verb, arg in steps:
        if verb == "takeoff":
            out.append(f"takeoff {_num(arg)}")
        elif verb == "hover":
            out.append(f"hover {_num(arg)}")
        elif verb == "goto":
            kind, value = arg
            out.append(f"goto {value}" if kind == "landmark" else "goto " + " ".join(_num(v) for v in value))
        elif verb == "visit":
            out.append("visit " + " ".join(v if k == "landmark" else ",".join(_num(x) for x in v) for k, v in arg))
        else:
            out.append("land")
    return "; ".join(out)


def as_json(steps) -> dict:
    out = []
    for verb, arg in steps:
        if verb == "takeoff":
            out.append({"action": "takeoff", "altitude_m": arg})
        elif verb == "hover":
            out.append({"action": "hover", "duration_s": arg})
        elif verb == "goto":
            kind, value = arg
            out.append({"action": "goto", kind: value if kind == "landmark" else list(value)})
        elif verb == "visit":
            out.append({"action": "visit", "targets": [{k: v if k == "landmark" else list(v)} for k, v in arg]})
        else:
            out.append({"action": "land"})
    return {"steps": out}


def _accepts(parse, value) -> bool:
    try:
        parse(value)
    except PlanningError as exc:
        assert str(exc)
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(st.lists(_step, min_size=1, max_size=MAX_STEPS + 4))
def test_text_and_json_tasks_accept_and_refuse_alike(steps):
    text, data = as_text(steps), as_json(steps)
    by_text, by_dict = _accepts(parse_task_text, text), _accepts(parse_task_json, data)
    assert by_text == by_dict, (text[:300], by_text, by_dict)
    if len(json.dumps(data)) <= MAX_TASK_CHARS and all(
            isinstance(v, (int, float)) and math.isfinite(v) or not isinstance(v, float)
            for v in _numbers(data)):
        assert _accepts(parse_task_json, json.dumps(data)) == by_dict  # the JSON text reads the same
    if by_text:
        task = parse_task_text(text)
        for step in task.steps:
            for v in (step.altitude_m, step.duration_s):
                assert v is None or math.isfinite(v)
            assert all(math.isfinite(c) for t in step.targets if t.position for c in t.position)


def _numbers(data):
    stack = [data]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float):
            yield v


@pytest.mark.parametrize("text, needle", [
    ("hover 3601", "longer than 3600 s"),
    ("hover nan", "not finite"),
    ("takeoff inf", "not finite"),
    ("goto 1e400 1 1", "not finite"),
    ("takeoff 1; " + "hover 1; " * 64, "at most 64"),
    ("visit " + " ".join(["red_box"] * 33), "at most 32 targets"),
    ("goto " + "b" * 65, "at most 64"),
    ("x" * (MAX_TASK_CHARS + 1), "at most 65536"),
    ("fly\u0430 1 2 3", "unknown action 'fly\\u0430'"),
])
def test_text_limits_are_the_schema_limits(text, needle):
    with pytest.raises(PlanningError) as info:
        parse_task_text(text)
    assert needle in str(info.value), str(info.value)
    assert len(str(info.value)) < 600  # the task is never copied whole into the message


@pytest.mark.parametrize("data, needle", [
    ({"steps": [{"action": "hover", "duration_s": math.nan}]}, "non-finite number nan at steps/0/duration_s"),
    ({"steps": [{"action": "takeoff", "altitude_m": math.nan}]}, "non-finite"),
    ({"steps": [{"action": "goto", "position": [1.0, math.inf, 1.0]}]}, "non-finite"),
    ({"steps": [{"action": "takeoff", "altitude_m": 10 ** 40}]}, "41 digits"),
    ('{"steps": [{"action": "hover", "duration_s": NaN}]}', "NaN is not a JSON number"),
    ('{"steps": [{"action": "hover", "duration_s": Infinity}]}', "Infinity is not a JSON number"),
    ('{"steps": [{"action": "hover", "duration_s": 1e400}]}', "overflows a double"),
    ('{"steps": [{"action": "takeoff", "altitude_m": ' + "1" * 400 + "}]}", "400 digits"),
    ('{"steps": ' + "[" * 2000 + "]" * 2000 + "}", "nests 2001 levels deep; at most 8"),
    ('{"steps": [{"action": "land"}], "steps": [{"action": "land"}]}', "the key 'steps' appears twice"),
    ('{"steps": [{"action": "land", "' + "p" * 100000 + '": 1}]}', "at most 65536"),
    ({"steps": [{"action": "land", "p" * 10000: 1}]}, "chars)"),
    ({"steps": [{"action": "goto", "landmark": "red_b\u043ex" * 20}]}, "\\u043e"),
])
def test_bad_json_tasks_are_refused_with_a_short_clear_message(data, needle):
    with pytest.raises(PlanningError) as info:
        parse_task_json(data)
    assert needle in str(info.value), str(info.value)
    assert len(str(info.value)) < 700


def test_a_task_object_with_nan_is_refused_too():
    with pytest.raises(PlanningError, match="duration_s nan is not finite"):
        parse_task(Task((TaskStep("hover", duration_s=math.nan),)))
    assert parse_task("goto 2 3").steps[0].targets[0].xy_only  # z is the planner's: not a NaN from the user


def test_homoglyph_landmarks_are_shown_escaped(planner, demo):
    for name in ("red_b\u043ex", "r\u0435d_box", "red_box\u200b", "blac\u212a_box"):
        with pytest.raises(PlanningError) as info:
            planner.plan(f"takeoff 1; goto {name}", demo.start)
        message = str(info.value)
        assert ascii(name)[1:-1] in message and "non-ASCII" in message, message
        assert name not in message or name.isascii()


def test_strict_json_helpers():
    assert loads_strict('{"a": [1, 2.5, "x"]}', "x", 100) == {"a": [1, 2.5, "x"]}
    assert json_depth(b'{"a": "[[[[[", "b": [[1]]}') == 3
    assert show("\u043e" * 200).endswith("(200 chars)") and plain("caf\u00e9") == "caf\\xe9"
    with pytest.raises(PlanningError, match="not UTF-8"):
        loads_strict(b'{"a": "\xff"}', "x", 100)


def test_a_plan_with_a_non_finite_point_is_refused(planner, demo):
    plan = planner.plan("takeoff 1; hover 1; land", demo.start)
    plan.check_finite()
    plan.steps[1].subgoals[0] = np.array([np.nan, 0.0, 1.0])
    with pytest.raises(PlanningError, match="step 2 .* non-finite point"):
        plan.check_finite()
    bad = Plan(task=Task(()), start=np.zeros(3), planner="symbolic",
               steps=[PlanStep("hover", np.ones(3), "hover", [np.ones(3)], duration_s=math.inf)])
    with pytest.raises(PlanningError, match="non-finite duration"):
        bad.check_finite()


def test_a_planning_deadline_stops_the_symbolic_planner_between_legs(planner, demo):
    task = "takeoff 1; visit " + " ".join(f"{0.3 + (i % 6) * 0.7:.1f},{0.3 + (i // 6) * 0.7:.1f},1.2"
                                          for i in range(30)) + "; land"
    with pytest.raises(PlanningTimeout, match="deadline of 1e-09 s"):
        planner.plan(task, demo.start, deadline=PlanningDeadline(1e-9))
    cancelled = PlanningDeadline(60.0)
    cancelled.cancel("a newer task arrived")
    with pytest.raises(PlanningTimeout, match="cancelled: a newer task arrived"):
        planner.plan("takeoff 1; land", demo.start, deadline=cancelled)
    with pytest.raises(PlanningError, match="positive number of seconds"):
        PlanningDeadline(math.nan)

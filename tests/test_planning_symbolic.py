"""The symbolic planner: task language, paths on maps with known shortest paths, ordering, replanning, errors."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_hrl.errors import PlanningError
from robot_hrl.planning import PlannerConfig, SymbolicPlanner, parse_task, parse_task_json, parse_task_text
from robot_hrl.planning.ordering import held_karp_open, order_goals, path_cost
from robot_hrl.planning.search import astar, line_of_sight, space_polyline
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.world import Box, World, load_world

ROBOT_RADIUS_M = CRAZYFLIE_2X.collision_radius_m
"""The planner asks the robot for its collision radius; these tests fly the Crazyflie 2.x."""

INFLATION = 0.165  # robot radius 0.065 + margin 0.10 (the defaults)


def make_world(obstacles=(), landmarks=(), size=10.0, height=3.0) -> World:
    return World.model_validate({
        "name": "test", "bounds": {"min": [0, 0, 0], "max": [size, size, height]}, "start": [1.0, 1.0, 0.0],
        "obstacles": [{"name": f"o{i}", "center": c, "size": s} for i, (c, s) in enumerate(obstacles)],
        "landmarks": list(landmarks),
    })


def assert_clear(world: World, plan, clearance=CRAZYFLIE_2X.collision_radius_m):
    """Every point of the flown path keeps the robot's radius from every box."""
    for step in plan.steps:
        if step.path is None:
            continue
        for a, b in zip(step.path[:-1], step.path[1:]):
            for t in np.linspace(0, 1, 200):
                p = a + (b - a) * t
                for box in world.solid_boxes():
                    assert box.distance(p) > clearance, f"{step.action} passes {box.distance(p):.3f} m from a box"


def assert_spacing(plan, start, radius):
    pts = np.vstack([start, *plan.subgoals])
    gaps = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    assert gaps.max() <= PlannerConfig.subgoal_spacing_fraction * radius + 1e-9


@pytest.fixture(scope="module")
def demo(demo_world_path):
    return load_world(demo_world_path)


# -- the task language -----------------------------------------------------------------------
def test_text_and_json_forms_agree():
    text = "takeoff 1.5; goto 2.0 3.0 1.0; goto the red box; hover 2\nvisit green_box blue_box 1,2,1; land"
    task = parse_task_text(text)
    assert [s.action for s in task.steps] == ["takeoff", "goto", "goto", "hover", "visit", "land"]
    assert task.steps[2].targets[0].landmark == "red_box"
    as_json = task.to_json()
    assert parse_task_json(as_json) == task
    assert parse_task(json.dumps(as_json)) == task
    assert parse_task(str(task)) == task
    assert parse_task("takeoff").steps[0].altitude_m == 1.0
    assert parse_task("# a comment\ntakeoff 2\n\nland") == parse_task("takeoff 2; land")
    with pytest.raises(PlanningError, match="text or JSON"):
        parse_task(42)
    xy = parse_task("goto 2 3").steps[0].targets[0]
    assert xy.xy_only and math.isnan(xy.position[2])


_coord = st.floats(-50, 50, allow_nan=False).map(lambda v: round(v, 3))
_target = st.one_of(st.sampled_from(["red_box", "green_box", "blue_box"]),
                    st.tuples(_coord, _coord, _coord).map(lambda p: ",".join(f"{v:g}" for v in p)))
_statement = st.one_of(
    st.floats(0.1, 3.0).map(lambda v: f"takeoff {round(v, 3):g}"),
    st.tuples(_coord, _coord, _coord).map(lambda p: "goto " + " ".join(f"{v:g}" for v in p)),
    _target.filter(lambda t: "," not in t).map(lambda t: f"goto {t}"),
    st.floats(0, 60).map(lambda v: f"hover {round(v, 2):g}"),
    st.lists(_target, min_size=1, max_size=5).map(lambda ts: "visit " + " ".join(ts)),
    st.just("land"),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_statement, min_size=1, max_size=8))
def test_task_text_round_trips_through_text_and_json(statements):
    task = parse_task_text("; ".join(statements))
    assert parse_task_text(str(task)) == task
    assert parse_task_json(task.to_json()) == task


@pytest.mark.parametrize("text, needle", [
    ("", "empty"),
    ("fly to 2 3", "unknown action 'fly'"),
    ("goto 1", "2 or 3 coordinates"),
    ("goto 1 2 3 4", "2 or 3 coordinates"),
    ("goto 1 two 3", "not a number"),
    ("goto", "needs a target"),
    ("takeoff 0", "above 0 m"),
    ("takeoff 1 2", "one altitude"),
    ("hover", "duration in seconds"),
    ("hover -1", "must not be negative"),
    ("land now", "no arguments"),
    ("visit", "needs targets"),
    ("visit 1,2", "X,Y,Z"),
    ("goto nan 1 1", "not finite"),
])
def test_bad_task_text_is_explained(text, needle):
    with pytest.raises(PlanningError, match=needle):
        parse_task_text(text)


@pytest.mark.parametrize("data, needle", [
    ({"steps": []}, "non-empty"),
    ({"steps": [{"action": "goto", "landmark": "red_box", "speed": 3}]}, "'speed' was unexpected"),
    ({"steps": [{"action": "teleport"}]}, "unknown action 'teleport'"),
    ({"steps": [{"action": "goto", "position": [1, 2]}]}, "too short"),
    ({"steps": [{"action": "hover"}]}, "'duration_s' is a required property"),
    ({"plan": []}, "'plan' was unexpected"),
    ({}, "'steps' is a required property"),
    ("{not json", "not valid JSON"),
])
def test_bad_task_json_is_explained(data, needle):
    with pytest.raises(PlanningError, match=needle):
        parse_task_json(data)


# -- paths with known shortest lengths ---------------------------------------------------------
def test_open_space_is_a_straight_line_with_spaced_subgoals():
    world = make_world()
    planner = SymbolicPlanner(world, subgoal_radius_m=1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("takeoff 1; goto 8 6 2", world.start)
    goto = plan.steps[1]
    assert np.allclose(goto.path, [[1, 1, 1], [8, 6, 2]])
    length = math.dist((1, 1, 1), (8, 6, 2))
    assert len(goto.subgoals) == math.ceil(length / (1.0 * PlannerConfig.subgoal_spacing_fraction))
    assert np.allclose(goto.subgoals[-1], [8, 6, 2])
    assert_spacing(plan, world.start, 1.0)
    assert all(isinstance(s, np.ndarray) and s.shape == (3,) for s in plan.subgoals)


def test_detour_around_a_wall_is_near_the_shortest():
    # A thin wall from y = 0 to 8 at x = 5: the shortest path bends around its top end.
    world = make_world([((5.0, 4.0, 1.5), (0.2, 8.0, 3.0))])
    planner = SymbolicPlanner(world, subgoal_radius_m=0.5, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("takeoff 1; goto 8 2 1", (2.0, 2.0, 0.0))
    length = plan.steps[1].path[:, :2]
    length = float(np.linalg.norm(np.diff(length, axis=0), axis=1).sum())
    lower = 2 * math.dist((2, 2), (4.9, 8.0)) + 0.2  # around the bare wall
    upper = 2 * math.dist((2, 2), (4.9 - INFLATION, 8.0 + INFLATION)) + 0.2 + 2 * INFLATION  # square inflation
    assert lower < length <= upper * 1.01
    assert_clear(world, plan)
    assert_spacing(plan, (2.0, 2.0, 0.0), 0.5)


def test_corridor_path_is_exact():
    # Two walls leave a 1 m wide corridor along y = 5; start and goal sit on its axis.
    world = make_world([((5.0, 2.25, 1.5), (4.0, 4.5, 3.0)), ((5.0, 7.75, 1.5), (4.0, 4.5, 3.0))])
    planner = SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("goto 9 5 1", (1.0, 5.0, 1.0))
    assert np.allclose(plan.steps[0].path, [[1, 5, 1], [9, 5, 1]])
    # Off the axis it must enter the corridor: longer than straight, clear of the walls.
    plan = planner.plan("goto 9 8.5 1", (1.0, 1.5, 1.0))
    assert plan.path_length_m > math.dist((1, 1.5), (9, 8.5)) + 0.1
    assert_clear(world, plan)


def test_low_box_is_flown_over_but_avoided_below_its_top():
    world = make_world([((5.0, 5.0, 0.25), (2.0, 2.0, 0.5))])
    planner = SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    high = planner.plan("goto 8 5 1.5", (2.0, 5.0, 1.5))
    assert np.allclose(high.steps[0].path, [[2, 5, 1.5], [8, 5, 1.5]])
    low = planner.plan("goto 8 5 0.4", (2.0, 5.0, 0.4))
    assert low.path_length_m > 6.5
    assert_clear(world, low)


def test_demo_task_is_clear_and_spaced(demo):
    planner = SymbolicPlanner(demo, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("takeoff 1.0; goto 2.0 3.0 1.0; goto red_box; hover 2; visit green_box blue_box; "
                        "goto 2 2 1; land", demo.start)
    assert [s.action for s in plan.steps] == ["takeoff", "goto", "goto", "hover", "goto", "goto", "goto", "land"]
    assert plan.planner == "symbolic" and plan.fallback_reason is None
    assert np.allclose(plan.subgoals[-1], [2.0, 2.0, 0.0])
    assert plan.steps[3].duration_s == 2.0
    assert_clear(demo, plan)
    assert_spacing(plan, demo.start, 1.0)
    assert plan.step_index_of_subgoal(0) == 0
    json.dumps(plan.to_dict())


def test_astar_matches_known_grid_distances():
    blocked = np.zeros((20, 20), bool)
    path = astar(blocked, (0, 0), (10, 5))
    assert len(path) == 11  # 5 diagonal + 5 straight moves
    blocked[:, 10] = True
    assert astar(blocked, (0, 0), (15, 0)) is None
    blocked[19, 10] = False
    path = astar(blocked, (0, 0), (15, 0))
    assert path[0] == (0, 0) and path[-1] == (15, 0) and (10, 19) in path
    assert line_of_sight(blocked, [[0.5, 0.5]], [[5.5, 18.5]])[0]
    assert not line_of_sight(blocked, [[0.5, 0.5]], [[15.5, 0.5]])[0]
    with pytest.raises(ValueError):
        space_polyline(np.zeros((2, 3)), 0.0)


# -- ordering ---------------------------------------------------------------------------------
def test_visit_order_is_the_shortest(demo):
    planner = SymbolicPlanner(demo, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    start = np.array([2.0, 2.0, 1.0])
    plan = planner.plan("visit blue_box red_box green_box", start)
    pts = [start] + [demo.landmark(n).approach_point for n in ("blue_box", "red_box", "green_box")]
    best = min(sum(planner.leg_cost(pts[a], pts[b]) for a, b in zip((0, *p[:-1]), p))
               for p in itertools.permutations((1, 2, 3)))
    assert plan.path_length_m == pytest.approx(best, rel=1e-9)


def test_visit_points_on_a_line_are_taken_in_order():
    world = make_world()
    planner = SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("visit 5,1,1 2,1,1 9,1,1 3,1,1 7,1,1", (1.0, 1.0, 1.0))
    assert [g[0] for g in plan.goals] == [2, 3, 5, 7, 9]


def test_exact_ordering_matches_brute_force():
    rng = np.random.default_rng(3)
    pts = rng.random((8, 2)) * 10
    cost = np.linalg.norm(pts[:, None] - pts[None], axis=2)
    order, best = held_karp_open(cost)
    brute = min(path_cost(cost, list(p)) for p in itertools.permutations(range(1, 8)))
    assert best == pytest.approx(brute) and path_cost(cost, order) == pytest.approx(brute)
    # The lazy scheme, with true costs above the straight line, gives the same order as the full matrix.
    true = cost * (1.0 + 0.3 * rng.random(cost.shape))
    true = np.maximum(true, true.T)
    calls = []
    lazy = order_goals(pts, lambda a, b: (calls.append((a, b)), true[a, b])[1])
    assert path_cost(true, lazy) == pytest.approx(held_karp_open(true)[1])


def test_many_goals_use_two_opt():
    world = make_world()
    planner = SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    angles = np.linspace(0, 2 * np.pi, 12, endpoint=False)
    pts = [(5 + 3 * math.cos(a), 5 + 3 * math.sin(a), 1.0) for a in angles]
    shuffled = [pts[i] for i in np.random.default_rng(0).permutation(12)]
    task = "visit " + " ".join(",".join(f"{v:.4f}" for v in p) for p in shuffled)
    plan = planner.plan(task, (8.0, 5.0, 1.0))
    assert len(plan.goals) == 12
    arc = 2 * 3 * math.sin(np.pi / 12)  # chord between neighbours on the circle
    assert plan.path_length_m <= 11 * arc * 1.001


# -- errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("task, start, needle", [
    ("takeoff 1; goto 20 1 1", None, "outside the map"),
    ("takeoff 1; goto 1.5 1.5 1", None, "inside obstacle 'pillar_a'"),
    ("takeoff 1; goto 1.5 1.8 1", None, "from obstacle 'pillar_a'"),
    ("takeoff 1; goto purple_box", None, "unknown landmark 'purple_box'"),
    ("goto red_box", None, "on the ground"),
    ("hover 1", None, "on the ground"),
    ("takeoff 1.95", None, "flight band"),
    ("takeoff 1; goto 2 2 0.05", None, "flight band"),
    ("takeoff 1; goto 4.4 2 1", None, "too close to the fence"),
    ("takeoff 1", (9.0, 9.0, 0.0), "start position"),
    ("takeoff 1", (1.5, 1.5, 1.0), "inside obstacle"),
    ("takeoff 1", (float("nan"), 0.0, 0.0), "not finite"),
    ("takeoff 1", (1.0, 2.0), "x, y, z"),
])
def test_unplannable_tasks_are_explained(demo, task, start, needle):
    planner = SymbolicPlanner(demo, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    with pytest.raises(PlanningError, match=needle):
        planner.plan(task, demo.start if start is None else start)


def test_land_over_a_landmark_moves_aside_first(demo):
    planner = SymbolicPlanner(demo, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("takeoff 1; goto blue_box; land", demo.start)
    land = plan.steps[-1]
    assert land.action == "land" and land.target[2] == 0.0
    box = demo.landmark("blue_box")
    assert box.distance(land.target) >= INFLATION
    assert_clear(demo, plan)
    no_room = SymbolicPlanner(demo, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M, landing_search_m=0.05))
    with pytest.raises(PlanningError, match="cannot land.*no clear landing spot"):
        no_room.plan("takeoff 1; goto blue_box; land", demo.start)


def test_unreachable_goal_is_explained():
    # A closed ring of walls around (5, 5).
    ring = [((5.0, 3.5, 1.5), (3.2, 0.2, 3.0)), ((5.0, 6.5, 1.5), (3.2, 0.2, 3.0)),
            ((3.5, 5.0, 1.5), (0.2, 3.2, 3.0)), ((6.5, 5.0, 1.5), (0.2, 3.2, 3.0))]
    planner = SymbolicPlanner(make_world(ring), 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    with pytest.raises(PlanningError, match="unreachable"):
        planner.plan("takeoff 1; goto 5 5 1", (1.0, 1.0, 0.0))


def test_visit_with_an_unreachable_target_fails_and_drops_nothing():
    ring = [((5.0, 3.5, 1.5), (3.2, 0.2, 3.0)), ((5.0, 6.5, 1.5), (3.2, 0.2, 3.0)),
            ((3.5, 5.0, 1.5), (0.2, 3.2, 3.0)), ((6.5, 5.0, 1.5), (0.2, 3.2, 3.0))]
    planner = SymbolicPlanner(make_world(ring), 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    with pytest.raises(PlanningError, match="unreachable"):
        planner.plan("visit 1,8,1 5,5,1 8,8,1 8,1,1", (1.0, 1.0, 1.0))
    cost = np.array([[0, 1, np.inf], [1, 0, np.inf], [np.inf, np.inf, 0]], dtype=float)
    order, best = held_karp_open(cost)
    assert sorted(order) == [1, 2] and best == math.inf


def test_bad_planner_parameters(demo):
    with pytest.raises(PlanningError, match="subgoal_radius_m"):
        SymbolicPlanner(demo, 0.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    with pytest.raises(PlanningError, match="ambiguous"):
        lm = [{"id": f"r{i}", "color": "red", "rgb": [1, 0, 0], "center": [2 + 3 * i, 8, 0.15], "size": [0.3] * 3}
              for i in range(2)]
        SymbolicPlanner(make_world(landmarks=lm), 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M)).plan("takeoff 1; goto red", (1.0, 1.0, 0.0))


# -- replanning -------------------------------------------------------------------------------
def test_replan_around_an_obstacle_that_appears():
    world = make_world()
    planner = SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("takeoff 1; goto 9 5 1; hover 1", (1.0, 5.0, 0.0))
    assert np.allclose(plan.steps[1].path, [[1, 5, 1], [9, 5, 1]])
    box = Box(center=(5.0, 5.0, 1.5), size=(1.0, 3.0, 3.0))
    pos = np.array([3.0, 5.0, 1.0])
    index = len(plan.steps[0].subgoals) + 2
    new = planner.replan(plan, pos, blocked=box, subgoal_index=index)
    assert [s.action for s in new.steps] == ["goto", "hover"]
    assert np.allclose(new.goals[0], [9, 5, 1])
    for p in np.linspace(new.steps[0].path[:-1], new.steps[0].path[1:], 100).reshape(-1, 3):
        assert box.distance(p) > CRAZYFLIE_2X.collision_radius_m
    assert new.path_length_m > 6.0
    assert_spacing(new, pos, 1.0)


def test_replan_when_the_skill_reports_blocked_points(demo):
    planner = SymbolicPlanner(demo, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("takeoff 1; goto 3.8 2.0 1.0", demo.start)
    pos = plan.steps[0].target
    before = plan.path_length_m - 1.0
    new = planner.replan(plan, pos, blocked=[[2.2, 2.0, 1.0]])  # nearest subgoal picks the step
    assert new.path_length_m > before
    assert new.steps[0].action in ("takeoff", "goto")
    for p in new.subgoals:
        assert not (abs(p[0] - 2.2) < 0.3 and abs(p[1] - 2.0) < 0.3)


def test_replan_errors(demo):
    planner = SymbolicPlanner(demo, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("takeoff 1; goto 3.0 2.0 1.0", demo.start)
    with pytest.raises(PlanningError, match="not in the plan"):
        planner.replan(plan, (0.5, 0.5, 1.0), subgoal_index=99)
    with pytest.raises(PlanningError, match="blocked"):
        planner.replan(plan, (0.5, 0.5, 1.0), blocked="somewhere")
    with pytest.raises(PlanningError, match="blocked points"):
        planner.replan(plan, (0.5, 0.5, 1.0), blocked=[[1.0, 2.0]])
    # Blocking the goal itself makes it unplannable, with a clear message.
    with pytest.raises(PlanningError, match="added obstacle"):
        planner.replan(plan, (0.5, 0.5, 1.0), blocked=[[3.0, 2.0, 1.0]])

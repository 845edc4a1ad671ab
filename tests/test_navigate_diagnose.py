"""sim/diagnose_navigate.py: the causes it gives on hand-built geometry, and its flights are evaluate_navigate's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_hrl.world.rooms import generate_room
from sim.diagnose_navigate import analyse_collision, run, summarise, what_was_hit

RADIUS_M = 0.065


@pytest.fixture(scope="module")
def room():
    return generate_room("sparse", 1_000_000_000, "eval")


def _wall(room):
    o = room.world.obstacles[0]
    return np.asarray(o.lower), np.asarray(o.upper)


def _analyse(room, p0, subgoal, hit, yaw=0.0, memory=None):
    return analyse_collision(room, RADIUS_M, np.array([*p0, 1.0]), yaw, np.zeros(3), np.array([*subgoal, 1.0]),
                             np.array([*hit, 1.0]), np.array([0.5, 0.0, 0.0]), memory)


def test_what_was_hit_names_the_obstacle_the_fence_and_the_floor(room):
    lo, hi = _wall(room)
    mid = (lo + hi) / 2
    assert what_was_hit(room, np.array([hi[0] + 0.03, mid[1], 1.0]), RADIUS_M)[0] == room.world.obstacles[0].name
    assert what_was_hit(room, np.array([0.04, 0.04, 1.0]), RADIUS_M)[0] == "fence" or \
        what_was_hit(room, np.array([0.04, 0.04, 1.0]), RADIUS_M)[3] < 0
    assert what_was_hit(room, np.array([mid[0], mid[1], 0.05]), RADIUS_M)[0] == "floor"


def test_causes_on_hand_built_flights(room):
    lo, hi = _wall(room)
    y = (lo[1] + hi[1]) / 2
    x_face = hi[0]  # the wall's +x face; the robot comes from +x
    # the subgoal inside the wall
    r = _analyse(room, (x_face + 0.8, y), (x_face - 0.05, y), (x_face + 0.05, y), yaw=math.pi)
    assert r["cause"] == "subgoal_in_clearance" and r["subgoal_clearance_m"] < 0 and r["in_cone"]
    # a subgoal clear of the wall, the straight segment through its corner
    corner = np.array([x_face, hi[1]])
    p0, s = corner + np.array([0.3, -0.5]), corner + np.array([-0.5, 0.3])
    r = _analyse(room, p0, s, corner + np.array([0.04, 0.0]))
    assert r["cause"] == "corner_cut" and r["segment_clearance_m"] < 0 < r["subgoal_clearance_m"]
    # a clear segment parallel to the face, the hit 0.3 m off it: the skill left its line
    p0, s = (x_face + 0.4, y - 0.4), (x_face + 0.4, y + 0.4)
    r = _analyse(room, p0, s, (x_face + 0.06, y))
    assert r["cause"] == "off_line" and r["off_line_m"] == pytest.approx(0.34, abs=1e-6) and 0 < r["along"] < 1
    # ... and beyond the subgoal: an overshoot
    r = _analyse(room, (x_face + 1.2, y), (x_face + 0.6, y), (x_face + 0.05, y), yaw=math.pi)
    assert r["cause"] == "overshoot" and r["along"] > 1
    # the obstacle 45 degrees off the heading: outside every 27-degree cone; unseen unless the memory holds it
    p0 = corner + np.array([0.3, 0.3])
    memory = np.full(16, 4.0)
    r = _analyse(room, p0, p0 + np.array([0.5, 0.0]), corner + np.array([0.05, 0.05]), yaw=-math.pi / 2, memory=memory)
    assert not r["in_cone"] and r["unseen"] and r["cone_off_deg"] == pytest.approx(45.0, abs=1e-6)
    memory[round(r["bearing_deg"] / 22.5) % 16] = r["distance_m"]
    r = _analyse(room, p0, p0 + np.array([0.5, 0.0]), corner + np.array([0.05, 0.05]), yaw=-math.pi / 2, memory=memory)
    assert r["remembered"] and not r["unseen"]


def test_its_flights_are_the_evaluations(repo_root):
    """The same rooms, seed and environment as sim/evaluate_navigate.py's batched evaluation: the same outcomes."""
    import torch

    from sim.evaluate_navigate import BatchedLevel, evaluate_batched, load_learned

    torch.set_num_threads(1)
    model, skill = repo_root / "models/crazyflie_navigate.onnx", repo_root / "models/crazyflie_goto.onnx"
    rooms = [generate_room(d, 1_000_000_000 + i, "eval") for d in ("medium", "dense") for i in range(2)]
    records = run(str(model), str(skill), rooms)
    contract, session = load_learned(model, skill)
    planner = {"learned": BatchedLevel(session)}  # (the evaluation's own: a recurrent level's state carried)
    reference = evaluate_batched(planner, rooms, skill, trail=contract.trail, heading=contract.heading)["learned"]["episodes"]
    assert [(r["room"], r["success"], r["collided"], r["time_out"]) for r in records] == \
        [(r["room"], r["success"], r["collided"], r["time_out"]) for r in reference]
    for r in records:
        if r["collided"]:
            assert r["cause"] in ("floor", "subgoal_in_clearance", "corner_cut", "overshoot", "off_line", "other")
            assert r["hit"] == "floor" or r["hit_clearance_m"] < 0.05
    summary = summarise(records, {"medium": [dict(r, success=True, collided=False) for r in records if r["density"] == "medium"]})
    assert summary["medium"]["pybullet_same_rooms"]["pybullet_success"] == 2
    assert sum(summary[d]["flights"] for d in summary) == len(rooms)

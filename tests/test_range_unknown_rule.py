"""The range source's ``unknown`` rule (robot_hrl/safety/units/range_obstacles.py, robot_hrl/sensing/seen_cells.py) on
the real quadrotor stopping model (hypothesis, derandomized):

* safety, judged with physics the unit does not use: a command let through never has the robot closing on a cell no
  cone has seen empty faster than full thrust could stop it before ``min_clearance_m`` of it, or within
  ``unknown_creep_m``;
* the case it was made for: a robot flying along its front cone's look turns toward the gap between two cones, where
  nothing was seen: 1 m/s that way is refused, the same speed along the looked-at way passes, and so does a creep;
* the held-out contact's geometry, judged from the wall (the simulator's ray casts give the readings): with
  ``unknown_blind_creep_m`` a wall face between the front cone and a side one, ahead of a robot whose yaw is off its
  motion, is not crept into; with the Crazyflie's section (the option off) its three cases go through, an expected
  failure that keeps the gap in view;
* the cells seen are the cones' (up to the reading less ``clear_margin_m``) and the robot's own disk;
* the section's keys: the Crazyflie's range source turns the rule on, a section without them leaves it off, and a
  negative creep and a zero cell are refused with the key named.

An empty room throughout (no hit in the picture): only the ``unknown`` rule can act.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from robot_hrl.geometry import quat_from_euler_rpy
from tests.test_range_approach_rule import _feed, _tick

CREEP_M = 0.25
"""The creep these tests fly: the Crazyflie's section's (benchmarks/README.md, "Issue #19: where no cone has looked")."""
angle = st.floats(-math.pi, math.pi)
tilt = st.floats(-0.25, 0.25)


@pytest.fixture(scope="module")
def unknown_parts():
    """The range source as the skill node builds it, with the ``unknown`` rule on and the ``unseen`` rule off."""
    from robot_hrl.robots import get_robot
    from robot_hrl.safety import Shield
    from robot_hrl.world.rooms import generate_room

    from sim.range_drill import range_shield_config

    robot = get_robot("crazyflie_2x")
    world = generate_room("sparse", 0).world.model_copy(update={"obstacles": ()})
    cfg = range_shield_config(robot, ("range_obstacles",), unseen_travel_m=None, unknown_creep_m=CREEP_M)
    shield = Shield(cfg, robot, world, 1.0, action=robot.action_spec())
    unit = shield.unit("range_obstacles")
    assert unit.unknown_creep_m == CREEP_M and unit.unseen_travel_m is None
    return shield, unit, shield.model


@settings(max_examples=150, deadline=None, derandomize=True)
@given(yaw=angle, bearing=angle, speed=st.floats(0.0, 2.0), thrust=st.floats(0.0, 0.6), roll=tilt, pitch=tilt,
       ranges=st.tuples(*[st.one_of(st.just(math.inf), st.floats(0.3, 2.5))] * 4))
def test_a_command_let_through_never_closes_on_unknown_space_faster_than_it_can_stop(
        unknown_parts, yaw, bearing, speed, thrust, roll, pitch, ranges):
    _, unit, model = unknown_parts
    unit.reset()
    p = (5.0, 5.0, 1.0)
    _feed(unit, model, 1.0, p, yaw, ranges)
    unit.memory.reset()  # the readings' cones are seen empty; their hits are left out (only the unknown rule judges)
    v = (speed * math.cos(bearing), speed * math.sin(bearing), 0.0)
    tick = _tick(model, 1.05, p, yaw, roll, pitch, v, thrust=thrust)
    unit.check(tick)
    if tick.reject_unit is not None:
        assert tick.reject_constraint == "unknown", tick.reject_detail
        return
    cells = unit.seen_cells
    centres = cells.unknown_near(p[:2], unit.memory_range_m)
    rel = centres - np.array(p[:2])
    rho = np.hypot(rel[:, 0], rel[:, 1])
    room = np.maximum(rho - 0.5 * math.sqrt(2.0) * cells.cell_m - model.collision_radius_m - unit.min_clearance_m, CREEP_M)
    closing = np.maximum(rel @ np.array(v[:2]) / rho, 0.0)
    a_max = model.robot.max_total_thrust_n / model.mass  # any acceleration the robot can make, m/s^2
    assert np.all(closing ** 2 <= 2.0 * a_max * room + 1e-9), (closing.max(), speed)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(yaw=angle, k=st.integers(0, 3), off=st.floats(-0.15, 0.15), slow=st.floats(0.0, 0.25))
def test_a_turn_into_the_gap_between_two_cones_is_refused_the_way_looked_along_is_not(unknown_parts, yaw, k, off, slow):
    """The robot came 1 m along its front cone's axis (a reading every 5 cm, nothing hit): the way ahead is seen, the
    gap between the front cone and a side one beside the robot is not. 1 m/s toward the gap is refused (``unknown``),
    1 m/s ahead passes, and so does a creep toward the gap."""
    _, unit, model = unknown_parts
    unit.reset()
    ahead = np.array([math.cos(yaw), math.sin(yaw)])
    for step in range(21):
        q = np.array([5.0, 5.0]) + (step * 0.05 - 1.0) * ahead
        _feed(unit, model, 1.0 + 0.05 * step, (q[0], q[1], 1.0), yaw, (math.inf,) * 4)
    now = 1.0 + 0.05 * 21
    p = (5.0, 5.0, 1.0)

    def judged(bearing, speed):
        tick = _tick(model, now, p, yaw, 0.0, 0.0, (speed * math.cos(bearing), speed * math.sin(bearing), 0.0))
        unit.check(tick)
        return tick.reject_constraint if tick.reject_unit is not None else None

    gap = yaw + math.pi / 4 + k * math.pi / 2 + off
    if k in (0, 3):  # the front diagonals: the last 1 m of look covers their first few centimetres only
        assert judged(gap, 1.0) == "unknown"
    assert judged(yaw, 1.0) is None
    assert judged(gap, slow) is None  # up to 0.25 m/s: a stopping travel within the creep


def test_the_cones_and_the_robots_disk_are_what_is_seen(unknown_parts):
    _, unit, model = unknown_parts
    unit.reset()
    p = (5.0, 5.0, 1.0)
    _feed(unit, model, 1.0, p, 0.0, (1.0, math.inf, 0.4, math.inf))
    seen = unit.seen_cells
    look = lambda x, y: bool(seen.seen(seen.cells_of([[x, y]]))[0])  # noqa: E731
    front, left = unit.specs[0], unit.specs[2]
    assert look(p[0] + front.offset_b[0] + 0.8, p[1])                     # in front, nearer than 1.0 - 0.1
    assert not look(p[0] + front.offset_b[0] + 1.0, p[1])                 # at the hit: not seen empty
    assert look(p[0], p[1] + left.offset_b[1] + 0.25)                     # left, nearer than 0.4 - 0.1
    assert not look(p[0], p[1] + left.offset_b[1] + 0.38)
    assert look(p[0] - 1.5, p[1]) and look(p[0], p[1] - 1.5)               # back and right read nothing: seen to 2 m
    assert look(p[0] + 0.03, p[1] + 0.03)                                  # the robot's own disk
    assert not look(p[0] + 0.3, p[1] + 0.3)                                # the gap between front and left


def test_the_crazyflies_section_turns_the_rule_on_and_bad_values_are_refused_with_the_key_named():
    from robot_hrl.errors import ConfigError
    from robot_hrl.nodes.skill_node import range_shield
    from robot_hrl.robots import get_robot
    from robot_hrl.safety.units.range_obstacles import RangeObstaclesCfg
    from robot_hrl.world.rooms import generate_room

    from sim.range_drill import range_shield_config

    robot = get_robot("crazyflie_2x")
    world = generate_room("sparse", 0).world
    unit = range_shield(None, robot, world, 1.0, robot.action_spec()).unit("range_obstacles")  # shield_ranges.yaml
    assert (unit.unknown_creep_m, unit.seen_cells.cell_m) == (CREEP_M, 0.05)
    assert RangeObstaclesCfg.model_fields["unknown_creep_m"].default is None  # a section without the key: off
    assert range_shield_config(robot, ("range_obstacles",), unknown_creep_m=None).range_obstacles.unknown_creep_m is None
    with pytest.raises(ConfigError, match="unknown_creep_m"):
        range_shield_config(robot, unknown_creep_m=-0.1)
    with pytest.raises(ConfigError, match="unknown_cell_m"):
        range_shield_config(robot, unknown_creep_m=0.15, unknown_cell_m=0.0)


@pytest.fixture(scope="module")
def wall_rangers():
    """The batched simulator's ray-cast rangers (sim/envs/ranging.py, the Crazyflie's four horizontal cones): the
    readings the held-out flights fed the shield."""
    from robot_hrl.robots.crazyflie_2x.rangers import CRAZYFLIE_RANGERS
    from sim.envs.ranging import RangeSensorArray

    horizontal = tuple(s for s in CRAZYFLIE_RANGERS if s.name in HORIZONTAL_NAMES)
    assert tuple(s.name for s in horizontal) == HORIZONTAL_NAMES
    return RangeSensorArray.from_specs(horizontal)


HORIZONTAL_NAMES = ("front", "back", "left", "right")
WALL_LOWER, WALL_UPPER = (6.67, 5.60, 0.0), (8.31, 5.90, 2.0)
"""The wall of the held-out contact (dense room 1000000165 of the evaluation split, benchmarks/README.md, "Issue #19:
the creep into the blind sector"): its east end at x 8.31, its south face at y 5.60."""


BLIND_CREEP_M = 0.06
"""The ``unknown_blind_creep_m`` these tests fly (the value measured in benchmarks/README.md, "Issue #19: the creep into
the blind sector"; off in the Crazyflie's section)."""
CONTACT_EXAMPLES = ((-0.1, 0.2, 70.0, 17.0, 0.7, False), (-0.02, 0.2, 75.0, 17.0, 0.7, True),
                    (0.05, 0.1, 85.0, 17.0, 0.5, False))
"""(dx, gap, bearing_deg, lag_deg, speed, turned): the held-out contact's geometry, each let through by the creep at
0.5-0.7 m/s with less clearance than its stopping travel."""


@pytest.fixture(scope="module")
def blind_parts():
    """The range source with the ``unknown`` rule and ``unknown_blind_creep_m`` on, the ``unseen`` rule off."""
    from robot_hrl.robots import get_robot
    from robot_hrl.safety import Shield
    from robot_hrl.world.rooms import generate_room

    from sim.range_drill import range_shield_config

    robot = get_robot("crazyflie_2x")
    world = generate_room("sparse", 0).world.model_copy(update={"obstacles": ()})
    cfg = range_shield_config(robot, ("range_obstacles",), unseen_travel_m=None, unknown_creep_m=CREEP_M,
                              unknown_blind_creep_m=BLIND_CREEP_M)
    shield = Shield(cfg, robot, world, 1.0, action=robot.action_spec())
    unit = shield.unit("range_obstacles")
    assert unit.unknown_blind_creep_m == BLIND_CREEP_M
    return shield, unit, shield.model


def _at_the_wall(unit, model, wall_rangers, dx, gap, bearing_deg, lag_deg, speed, turned):
    """The held-out contact's geometry (see the test below): None when the unit rejects the command, else (the
    robot's stopping travel along the shortest way to the wall, its clearance from the wall), m."""
    import torch

    from robot_hrl.safety.stopping import travel_along

    unit.reset()
    bearing, yaw = math.radians(bearing_deg), math.radians(bearing_deg - lag_deg)
    motion = np.array([math.cos(bearing), math.sin(bearing)])
    radius = model.collision_radius_m
    p = np.array([WALL_UPPER[0] + dx, WALL_LOWER[1] - radius - gap])
    lower, upper = torch.tensor([[WALL_LOWER]]), torch.tensor([[WALL_UPPER]])
    room_lo, room_hi = torch.tensor([[0.0, 0.0, 0.0]]), torch.tensor([[12.0, 12.0, 2.5]])
    quat = torch.tensor(np.array([quat_from_euler_rpy(0.0, 0.0, yaw)]), dtype=torch.float32)
    east = torch.tensor(np.array([quat_from_euler_rpy(0.0, 0.0, 0.0)]), dtype=torch.float32)
    for step in range(21):
        back = step * 0.05 - 1.0  # m along the way, from -1 (1 m before) to 0 (here)
        before = turned and back < -0.3
        q = p + (np.array([back, 0.0]) if before else back * motion)
        ranges = wall_rangers.true_ranges(torch.tensor([[q[0], q[1], 1.0]], dtype=torch.float32), east if before else quat,
                                          lower, upper, torch.ones(1, 1, dtype=torch.bool), room_lo, room_hi)[0].tolist()
        ranges = [r if r < 4.0 else math.inf for r in ranges]
        _feed(unit, model, 1.0 + 0.05 * step, (q[0], q[1], 1.0), 0.0 if before else yaw, ranges)
    tick = _tick(model, 1.0 + 0.05 * 21, (p[0], p[1], 1.0), yaw, 0.0, 0.0, (speed * motion[0], speed * motion[1], 0.0))
    unit.check(tick)
    if tick.reject_unit is not None:
        return None
    nearest = np.clip(p, WALL_LOWER[:2], WALL_UPPER[:2])
    distance = float(np.hypot(*(nearest - p)))
    n = (nearest - p) / max(distance, 1e-9)
    return travel_along(model, tick, (float(n[0]), float(n[1]), 0.0)), distance - radius


@settings(max_examples=150, deadline=None, derandomize=True)
@given(dx=st.floats(-0.25, 0.12), gap=st.floats(0.05, 0.45), bearing_deg=st.floats(60.0, 100.0),
       lag_deg=st.floats(14.0, 35.0), speed=st.floats(0.2, 1.0), turned=st.booleans())
@example(*CONTACT_EXAMPLES[0])
@example(*CONTACT_EXAMPLES[1])
@example(*CONTACT_EXAMPLES[2])
def test_with_the_blind_creep_a_wall_face_in_the_blind_sector_ahead_is_not_crept_into(
        blind_parts, wall_rangers, dx, gap, bearing_deg, lag_deg, speed, turned):
    """The held-out contact's geometry, judged from the wall itself: the robot flies north-ish toward a wall's south
    face near its east end, its yaw off its motion by more than the cone's half angle (13.5 degrees: the heading loop
    lagging in a quick turn, as in the held-out flight's 17), so the face ahead can lie between the front cone and a
    side one while the side cone sees only the face's far part. It came 1 m along its motion (readings every 5 cm from
    the batched simulator's ray casts against the wall); ``turned``: the last 0.7 m of it came east, facing east, before
    the turn north. With ``unknown_blind_creep_m`` set, a command the unit lets through leaves the robot able to stop
    short of the wall along the shortest way to it (its stopping travel that way, the family's model, less than the
    clearance), or is the blind creep itself (about 0.19 m/s, so that its heading loop can turn a cone there). What
    this leaves (benchmarks/README.md, "Issue #19: the creep into the blind sector"): with the yaw within the half
    angle of the motion, a corner at the robot's shoulder nearer than about 0.28 m lies outside the cone's fan (narrower
    than the robot there) and the creep still reaches it (4 of 576 cases of a grid at a 10-degree lag)."""
    _, unit, model = blind_parts
    judged = _at_the_wall(unit, model, wall_rangers, dx, gap, bearing_deg, lag_deg, speed, turned)
    if judged is not None:
        travel, clearance = judged
        # (the rule asks the stopping model along each 5-degree sector's centre; along the true way to the wall the
        # travel may be a few per cent more)
        assert travel < clearance or travel <= 1.1 * BLIND_CREEP_M, (travel, clearance)


@pytest.mark.xfail(strict=True, reason="the Crazyflie's section leaves unknown_blind_creep_m off (it costs about 2.3 s "
                                       "per flight and dense successes): its creep lets the held-out contact's geometry "
                                       "through (benchmarks/README.md, 'Issue #19: the creep into the blind sector')")
@pytest.mark.parametrize("case", CONTACT_EXAMPLES)
def test_the_shipped_creep_lets_a_wall_face_in_the_blind_sector_ahead_through(unknown_parts, wall_rangers, case):
    """The known gap, kept in view: the same three cases through the Crazyflie's own creep (no blind creep). Each is
    let through with less clearance than its stopping travel (a contact), so this test fails, as marked; the day it
    passes, the gap is closed and the mark must go."""
    _, unit, model = unknown_parts
    judged = _at_the_wall(unit, model, wall_rangers, *case)
    assert judged is None or judged[0] < judged[1], judged

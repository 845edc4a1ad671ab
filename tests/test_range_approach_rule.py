"""The range shield's approach rule (robot_hrl/safety/units/range_obstacles.py) on the real quadrotor stopping model,
with random readings, attitudes, velocities and commands (hypothesis, derandomized):

* safety, judged with physics the unit does not use: a command the unit lets through never has the robot moving
  toward a remembered hit faster than it could stop before ``min_clearance_m`` with the most acceleration the robot
  has (the contract's full thrust), and never moving toward one already inside ``min_clearance_m``;
* the picture: every reading that hit something is an arc across the ranger's cone at that range (a target
  anywhere in the cone), and a later reading that sees through a point forgets it;
* liveness: next to a wall (inside the stop zone, 0.2-0.6 m of clearance; the wall's readings from a ray-plane model
  of the cones), sliding along it (up to 0.3 m/s) and moving away from it (up to 0.2 m/s) pass; flying at it faster
  than it can stop is refused. Faster, the rangers that graze the wall leave arc points on the open side too (a cone's
  reading does not say where in the cone its target is) and the rule holds the robot off them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.safety.frames import rotation_from_quat
from robot_hrl.safety.units.base import Tick

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)
HORIZONTAL = ("front", "back", "left", "right")


@pytest.fixture(scope="module")
def parts():
    from robot_hrl.nodes.skill_node import range_shield
    from robot_hrl.robots import get_robot
    from robot_hrl.world.rooms import generate_room

    robot = get_robot("crazyflie_2x")
    world = generate_room("sparse", 0).world.model_copy(update={"obstacles": ()})
    shield = range_shield(None, robot, world, 1.0, robot.action_spec())
    return shield, shield.unit("range_obstacles"), shield.model


UNSEEN_TRAVEL_M = 0.25
"""The ``unseen`` rule's limit in these tests (the Crazyflie's section's, flown on held-out rooms)."""


@pytest.fixture(scope="module")
def unseen_parts():
    """The range source as the skill node builds it, with the ``unseen`` rule on."""
    from robot_hrl.robots import get_robot
    from robot_hrl.safety import Shield
    from robot_hrl.world.rooms import generate_room

    from sim.range_drill import range_shield_config

    robot = get_robot("crazyflie_2x")
    world = generate_room("sparse", 0).world.model_copy(update={"obstacles": ()})
    shield = Shield(range_shield_config(robot, ("range_obstacles",), unseen_travel_m=UNSEEN_TRAVEL_M), robot, world, 1.0,
                    action=robot.action_spec())
    assert shield.unit("range_obstacles").unseen_travel_m == UNSEEN_TRAVEL_M
    return shield, shield.unit("range_obstacles"), shield.model


def _tick(model, now, p, yaw, roll, pitch, v, w=(0.0, 0.0, 0.0), thrust=None, torque=(0.0, 0.0, 0.0)) -> Tick:
    t = Tick()
    t.now, t.has_state = now, True
    t.p, t.v, t.w = list(p), list(v), list(w)
    t.r = rotation_from_quat(*quat_from_euler_rpy(roll, pitch, yaw))
    thrust = model.weight / (math.cos(roll) * math.cos(pitch)) if thrust is None else thrust
    t.cmd = [thrust, *torque]
    t.est = [thrust, *torque]
    t.clear()
    return t


def _feed(unit, model, now, p, yaw, ranges, roll=0.0, pitch=0.0):
    """Readings of the four horizontal rangers at ``now``, taken in by a tick at that pose (hovering still)."""
    for name, r in zip(HORIZONTAL, ranges):
        unit.update(name, r, now)
    unit.check(_tick(model, now, p, yaw, roll, pitch, (0.0, 0.0, 0.0)))


reading = st.one_of(st.just(math.inf), st.floats(0.04, 2.5))
angle = st.floats(-math.pi, math.pi)
tilt = st.floats(-0.25, 0.25)
speed = st.floats(-2.0, 2.0)


@SETTINGS
@given(ranges=st.tuples(reading, reading, reading, reading), yaw=angle, roll=tilt, pitch=tilt,
       vx=speed, vy=speed, vz=st.floats(-0.5, 0.5), thrust=st.floats(0.0, 0.6), tx=st.floats(-2e-3, 2e-3),
       ty=st.floats(-2e-3, 2e-3), wx=st.floats(-3.0, 3.0), wy=st.floats(-3.0, 3.0))
def test_a_command_let_through_never_approaches_a_hit_faster_than_it_can_stop(parts, ranges, yaw, roll, pitch, vx, vy, vz,
                                                                               thrust, tx, ty, wx, wy):
    _, unit, model = parts
    unit.reset()
    p = (5.0, 5.0, 1.0)
    _feed(unit, model, 1.0, p, yaw, ranges, roll, pitch)
    for name, r in zip(HORIZONTAL, ranges):
        unit.update(name, r, 1.05)  # fresh again: the tick below takes the same readings in once more
    tick = _tick(model, 1.05, p, yaw, roll, pitch, (vx, vy, vz), (wx, wy, 0.0), thrust, (tx, ty, 0.0))
    unit.check(tick)
    if tick.reject_unit is not None:
        return
    pts = unit.memory.points_w[0]
    rel = pts - np.array(p[:2])
    dist = np.hypot(rel[:, 0], rel[:, 1])
    keep = dist < 100.0
    clearance = dist[keep] - model.collision_radius_m
    toward = (rel[keep] @ np.array([vx, vy])) / np.maximum(dist[keep], 1e-9)
    a_max = model.robot.max_total_thrust_n / model.mass          # any acceleration the robot can make, m/s^2
    floor = unit.min_clearance_m
    inside = clearance <= floor
    assert np.all(toward[inside] <= 1e-9), (toward[inside], clearance[inside])
    room = np.maximum(clearance[~inside] - floor, 0.0)
    closing = np.maximum(toward[~inside], 0.0)                    # moving away needs no room to stop
    assert np.all(closing ** 2 <= 2.0 * a_max * room + 1e-9), (toward[~inside], clearance[~inside])


def _cone_points(spec, p, yaw, r, step_rad=math.radians(1.0)):
    """Where a target at range ``r`` can be in the ranger's cone (horizontal plane), sampled every degree."""
    axis = math.atan2(spec.direction_b[1], spec.direction_b[0]) + yaw
    half = 0.5 * spec.field_of_view_rad
    a = np.arange(-half, half + 1e-12, step_rad) + axis
    return np.stack([p[0] + r * np.cos(a), p[1] + r * np.sin(a)], axis=1)


@SETTINGS
@given(ranges=st.tuples(reading, reading, reading, reading), yaw=angle, later=st.floats(0.1, 1.0))
def test_a_reading_is_an_arc_across_the_cone_and_a_longer_one_sees_through_it(parts, ranges, yaw, later):
    _, unit, model = parts
    unit.reset()
    p = (5.0, 5.0, 1.0)
    _feed(unit, model, 1.0, p, yaw, ranges)
    pts = unit.memory.points_w[0]
    for spec, r in zip(unit.specs, ranges):
        if not r < unit.memory_range_m:
            continue
        cone = _cone_points(spec, p, yaw, r)
        gap = np.sqrt(((cone[:, None] - pts[None]) ** 2).sum(-1)).min(axis=1)
        # every place in the cone at that range lies within half the arc's spacing of a remembered point
        assert gap.max() <= 0.5 * r * unit.angle_step + unit.memory.min_spacing_m + 1e-6, (spec.name, r, gap.max())
    # the same rangers read farther now: what they saw through is forgotten (each kept only where another cone holds it)
    longer = [r + later if math.isfinite(r) else r for r in ranges]
    _feed(unit, model, 1.1, p, yaw, longer)
    pts = unit.memory.points_w[0]
    rel = pts - np.array(p[:2])
    dist = np.hypot(rel[:, 0], rel[:, 1])
    for spec, r_new in zip(unit.specs, longer):
        axis = math.atan2(spec.direction_b[1], spec.direction_b[0]) + yaw
        bearing = np.abs((np.arctan2(rel[:, 1], rel[:, 0]) - axis + math.pi) % (2 * math.pi) - math.pi)
        inside = (bearing < 0.5 * spec.field_of_view_rad - 1e-6) & (dist < min(r_new, spec.max_range_m) - unit.clear_margin_m - 1e-6)
        assert not inside.any(), (spec.name, pts[inside])


def _wall_reading(spec, p, yaw, normal, h):
    """A ranger's reading of the plane ``x . normal = p . normal + h`` (the nearest ray of its cone)."""
    axis = math.atan2(spec.direction_b[1], spec.direction_b[0]) + yaw
    off = abs((axis - math.atan2(normal[1], normal[0]) + math.pi) % (2 * math.pi) - math.pi)
    nearest = max(0.0, off - 0.5 * spec.field_of_view_rad)
    if nearest >= math.pi / 2 - 1e-6:
        return math.inf
    r = h / math.cos(nearest)
    return r if r < spec.max_range_m else math.inf


@settings(max_examples=60, deadline=None, derandomize=True)
@given(yaw=angle, side=angle, clearance=st.floats(0.2, 0.6), along_speed=st.floats(-0.3, 0.3),
       away_speed=st.floats(0.0, 0.2))
def test_sliding_along_a_wall_and_leaving_it_pass_flying_at_it_does_not(parts, yaw, side, clearance, along_speed, away_speed):
    _, unit, model = parts
    # a ranger faces the wall (its axis within the cone's half angle of the wall's normal): the wall is seen
    normal = np.array([math.cos(side), math.sin(side)])
    tangent = np.array([-normal[1], normal[0]])
    facing = math.atan2(normal[1], normal[0]) - yaw
    turn = (round(facing / (math.pi / 2)) * (math.pi / 2)) - facing
    yaw -= turn * 0.9
    h = clearance + model.collision_radius_m
    unit.reset()
    # the robot came along the wall: readings from 1 m of its path, 5 cm apart
    for k, s in enumerate(np.linspace(-1.0, 0.0, 21)):
        q = np.array([5.0, 5.0]) + s * tangent * np.sign(along_speed or 1.0)
        _feed(unit, model, 1.0 + 0.1 * k, (q[0], q[1], 1.0), yaw,
              [_wall_reading(spec, q, yaw, normal, h) for spec in unit.specs])
    now = 1.0 + 0.1 * 21
    p = (5.0, 5.0, 1.0)
    for v, passes in ((along_speed * tangent, True), (-away_speed * normal, True), (1.5 * normal, False)):
        tick = _tick(model, now, p, yaw, 0.0, 0.0, (v[0], v[1], 0.0))
        for spec in unit.specs:
            unit.update(spec.name, _wall_reading(spec, np.array(p[:2]), yaw, normal, h), now)
        unit.fresh = [False] * len(unit.specs)  # the readings' stamps only: the picture is the one built above
        unit.check(tick)
        rejected = tick.reject_unit is not None
        assert rejected != passes, (v, clearance, tick.reject_detail)


def test_the_hold_target_moves_off_the_remembered_hits_within_the_fence(parts):
    """The backup's hold target (Shield.safe_position) leaves a remembered hit to halfway between min_clearance_m and
    stop_distance_m of clearance, at most HOLD_PUSH_MAX_M, and stays inside the fence."""
    shield, unit, model = parts
    unit.reset()
    keep = model.collision_radius_m + 0.5 * (unit.min_clearance_m + unit.stop_distance_m)
    # a wall ahead (front ranger, 0.1 m): the target goes back from it, out to the kept clearance
    _feed(unit, model, 1.0, (5.0, 5.0, 1.0), 0.0, [0.1, math.inf, math.inf, math.inf])
    x, y, _ = shield.safe_position([5.0, 5.0, 1.0])
    pts = unit.memory.points_w[0]
    dist = np.hypot(pts[:, 0] - x, pts[:, 1] - y)
    assert x < 5.0 and dist.min() >= keep - 1e-6, (x, y, dist.min())
    assert math.hypot(x - 5.0, y - 5.0) <= unit.HOLD_PUSH_MAX_M + 1e-9
    # next to the fence, pushed toward it: the target stays inside the fence's hold inset
    unit.reset()
    g = shield.unit("geofence")
    edge = g.x_hi - shield.config.backup.hold_inset_m
    _feed(unit, model, 2.0, (edge, 5.0, 1.0), math.pi, [0.1, math.inf, math.inf, math.inf])  # facing -x: a hit at x - 0.1
    x, _, _ = shield.safe_position([edge, 5.0, 1.0])
    assert x <= edge + 1e-9, (x, edge)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(left=st.floats(0.05, 0.5), right=st.floats(0.05, 0.5), front=st.one_of(st.just(math.inf), st.floats(0.05, 0.5)),
       yaw=angle, dx=st.floats(-0.1, 0.1), dy=st.floats(-0.1, 0.1))
def test_the_hold_target_never_brings_the_nearest_hit_closer(parts, left, right, front, yaw, dx, dy):
    """Between walls (the side rangers' hits, a front one too) nearer than the hold's kept clearance, the pushed hold
    target leaves the nearest remembered hit at least as far as the unpushed one: a push off one wall never carries the
    target into another (a training-split flight was held 0.4 s against a wall that way)."""
    shield, unit, model = parts
    unit.reset()
    _feed(unit, model, 1.0, (5.0, 5.0, 1.0), yaw, [front, math.inf, left, right])
    p = (5.0 + dx, 5.0 + dy)
    pts = unit.memory.points_w[0]
    before = np.hypot(pts[:, 0] - p[0], pts[:, 1] - p[1]).min()
    x, y = unit.hold_clear_of_hits(*p)
    after = np.hypot(pts[:, 0] - x, pts[:, 1] - y).min()
    assert after >= before - 1e-9, (before, after)
    assert math.hypot(x - p[0], y - p[1]) <= unit.HOLD_PUSH_MAX_M + 1e-9


@settings(max_examples=60, deadline=None, derandomize=True)
@given(r=st.floats(0.1, 0.3), yaw=angle, later_s=st.floats(2.1, 8.0), speed=st.floats(0.2, 1.0))
def test_a_hit_seen_once_near_the_robot_is_not_aged_out_while_no_cone_looks_at_it(parts, r, yaw, later_s, speed):
    """A corner seen once by one ranger, at a random range inside the stop zone; the robot turns 45 deg so the hit
    lies between two cones, and the rangers (reporting nothing, as they do there) never look at it again. Points
    seen from one place only are aged out after ``memory_age_s`` (a single arc's open places) but not inside the
    stop zone and the stopping reach: the shipped goto skill in PyBullet crept into a pillar 2 s after its corner
    went out of view when they were (tests/test_shield_range_obstacles.py, room_medium_27). After a random wait
    the hit is still there: flying at it at 2 m/s is refused, and a random speed passes only where it can still
    stop before ``min_clearance_m`` at full thrust. A hit seen 1.8 m away is aged out (liveness)."""
    _, unit, model = parts
    p = (5.0, 5.0, 1.0)
    for rng_m, kept in ((r, True), (1.8, False)):
        unit.reset()
        _feed(unit, model, 1.0, p, yaw, (rng_m, math.inf, math.inf, math.inf))
        assert int(unit.memory.count[0]) > 0
        t = 1.0
        while t < 1.0 + later_s:
            t += 0.1
            _feed(unit, model, t, p, yaw + math.pi / 4, (math.inf,) * 4)
        rel = unit.memory.points_w[0] - np.array(p[:2])
        near = np.hypot(rel[:, 0], rel[:, 1]) < rng_m + 0.05
        assert near.any() == kept, (rng_m, later_s)
        if kept:
            pts = unit.memory.points_w[0][near]
            clearance = float(np.hypot(*(pts - np.array(p[:2])).T).min()) - model.collision_radius_m
            a_max = model.robot.max_total_thrust_n / model.mass
            for s, must_refuse in ((speed, False), (2.0, True)):   # at the hit, along the ranger that saw it
                tick = _tick(model, t, p, yaw + math.pi / 4, 0.0, 0.0, (s * math.cos(yaw), s * math.sin(yaw), 0.0))
                unit.check(tick)
                refused = tick.reject_unit is not None and tick.reject_constraint == "stop"
                # let through only where physics the unit does not use says it can still stop before min_clearance_m
                assert refused or (not must_refuse and s * s <= 2.0 * a_max * (clearance - unit.min_clearance_m)), \
                    (r, later_s, s, clearance)


def _diagonal(yaw, k, off):
    """A world bearing between two rangers' cones: the body diagonal ``k`` (0-3), turned by ``off``."""
    return yaw + math.pi / 4 + k * math.pi / 2 + off


@SETTINGS
@given(yaw=angle, bearing=angle, speed=st.floats(0.0, 2.0), thrust=st.floats(0.0, 0.6), roll=tilt, pitch=tilt)
def test_a_command_let_through_never_moves_toward_an_unseen_bearing_faster_than_it_can_stop_within_the_limit(
        unseen_parts, yaw, bearing, speed, thrust, roll, pitch):
    """The ``unseen`` rule, judged with physics it does not use: after the rangers' first readings (an empty room: only
    their four cones looked along), a command let through never has the robot closing on a bearing no cone has
    swept faster than it could stop within ``unseen_travel_m`` at full thrust."""
    _, unit, model = unseen_parts
    unit.reset()
    p = (5.0, 5.0, 1.0)
    _feed(unit, model, 1.0, p, yaw, (math.inf,) * 4)
    v = (speed * math.cos(bearing), speed * math.sin(bearing), 0.0)
    tick = _tick(model, 1.05, p, yaw, roll, pitch, v, thrust=thrust)
    unit.check(tick)
    if tick.reject_unit is not None:
        assert tick.reject_constraint == "unseen", tick.reject_detail
        return
    a_max = model.robot.max_total_thrust_n / model.mass
    closing = np.maximum(unit.sector_w[~unit.looked] @ np.array(v[:2]), 0.0)
    assert np.all(closing ** 2 <= 2.0 * a_max * unit.unseen_travel_m + 1e-9), (closing.max(), speed)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(yaw=angle, k=st.integers(0, 3), off=st.floats(-0.2, 0.2), slow=st.floats(0.0, 0.3), turn=st.sampled_from((-1.0, 1.0)),
       later=angle)
def test_an_unseen_bearing_is_refused_fast_until_the_cones_have_swept_it(unseen_parts, yaw, k, off, slow, turn, later):
    """Liveness and the sweep: at the start the way between two cones is refused at 1.5 m/s (``unseen``) and passes
    slowly. The robot then turns 70 degrees (either way, a reading every 10 degrees, as the Multi-ranger reads at
    10 Hz while the heading loop turns at 2 rad/s): the four cones have swept every bearing (their gaps are 63
    degrees), and 1.5 m/s passes along the way and along any other bearing. An empty room: no hit is in the picture,
    only the unseen rule acts."""
    _, unit, model = unseen_parts
    p = (5.0, 5.0, 1.0)

    def judged(bearing, speed, at, facing):
        tick = _tick(model, at, p, facing, 0.0, 0.0, (speed * math.cos(bearing), speed * math.sin(bearing), 0.0))
        unit.check(tick)
        return tick.reject_constraint if tick.reject_unit is not None else None

    unit.reset()
    _feed(unit, model, 1.0, p, yaw, (math.inf,) * 4)
    way = _diagonal(yaw, k, off)
    assert judged(way, 1.5, 1.05, yaw) == "unseen"
    assert judged(way, slow, 1.05, yaw) is None
    for step in range(1, 8):
        _feed(unit, model, 1.0 + 0.1 * step, p, yaw + turn * math.radians(10.0 * step), (math.inf,) * 4)
    assert unit.looked.all()
    facing = yaw + turn * math.radians(70.0)
    assert judged(way, 1.5, 1.75, facing) is None and judged(later, 1.5, 1.75, facing) is None


@pytest.fixture(scope="module")
def within_parts():
    """The range source with the ``unseen`` rule on within 1 m of the start."""
    from robot_hrl.robots import get_robot
    from robot_hrl.safety import Shield
    from robot_hrl.world.rooms import generate_room

    from sim.range_drill import range_shield_config

    robot = get_robot("crazyflie_2x")
    world = generate_room("sparse", 0).world.model_copy(update={"obstacles": ()})
    shield = Shield(range_shield_config(robot, ("range_obstacles",), unseen_travel_m=UNSEEN_TRAVEL_M, unseen_within_m=1.0),
                    robot, world, 1.0, action=robot.action_spec())
    return shield, shield.unit("range_obstacles"), shield.model


@settings(max_examples=40, deadline=None, derandomize=True)
@given(yaw=angle, k=st.integers(0, 3), off=st.floats(-0.2, 0.2), away=angle,
       gone=st.one_of(st.floats(0.0, 0.95), st.floats(1.05, 2.0)))
def test_with_unseen_within_m_the_rule_acts_only_near_the_start(within_parts, yaw, k, off, away, gone):
    """``unseen_within_m``: the start is the first measured position; 1.5 m/s toward the way between two cones is
    refused within 1 m of it and passes beyond (the cones' gaps elsewhere are the picture's own limits)."""
    _, unit, model = within_parts
    unit.reset()
    start = (5.0, 5.0, 1.0)
    _feed(unit, model, 1.0, start, yaw, (math.inf,) * 4)
    way = _diagonal(yaw, k, off)
    p = (start[0] + gone * math.cos(away), start[1] + gone * math.sin(away), 1.0)
    tick = _tick(model, 1.05, p, yaw, 0.0, 0.0, (1.5 * math.cos(way), 1.5 * math.sin(way), 0.0))
    unit.check(tick)
    refused = tick.reject_unit is not None and tick.reject_constraint == "unseen"
    assert refused == (gone < 1.0), (gone, tick.reject_detail)


def test_the_crazyflies_section_turns_the_unseen_rule_on_near_the_start_and_a_negative_limit_is_refused(parts):
    from robot_hrl.errors import ConfigError
    from robot_hrl.robots import get_robot

    from sim.range_drill import range_shield_config

    robot = get_robot("crazyflie_2x")
    assert (parts[1].unseen_travel_m, parts[1].unseen_within_m) == (UNSEEN_TRAVEL_M, 1.0)  # shield_ranges.yaml
    assert range_shield_config(robot, unseen_travel_m=None).range_obstacles.unseen_travel_m is None
    with pytest.raises(ConfigError, match="unseen_travel_m"):
        range_shield_config(robot, unseen_travel_m=-0.1)
    with pytest.raises(ConfigError, match="unseen_within_m"):
        range_shield_config(robot, unseen_travel_m=0.25, unseen_within_m=0.0)

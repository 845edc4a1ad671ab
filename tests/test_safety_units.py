"""Property tests (hypothesis) for each shield unit: its output always satisfies its
constraints, and a command that already satisfies them passes through unchanged."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.safety import Shield, ShieldInput, load_shield_config
from robot_hrl.robots.quadrotor.shield.model import stopping_box
from robot_hrl.safety.frames import rotation_from_quat
from robot_hrl.safety.units import Tick
from robot_hrl.state import RobotState
from robot_hrl.world import load_world

WORLD_PATH = Path(__file__).resolve().parents[1] / "models" / "worlds" / "demo.yaml"
SETTINGS = settings(max_examples=100, deadline=None)
TOL = 1e-9


@lru_cache(maxsize=1)
def _inputs():
    return load_shield_config(), load_world(WORLD_PATH)


@lru_cache(maxsize=1)
def shield() -> Shield:
    return fresh_shield()


def fresh_shield() -> Shield:
    cfg, world = _inputs()
    return Shield(cfg, CRAZYFLIE_2X, world, subgoal_radius_m=1.0)


# ---- strategies ------------------------------------------------------------------------------
angle = st.floats(-1.2, 1.2)
rate = st.floats(-12.0, 12.0)
speed = st.floats(-3.0, 3.0)
norm_action = st.floats(-1.3, 1.3)


def position(s=None):
    s = s or shield()
    g, a = s.geofence, s.altitude
    return st.tuples(st.floats(g.x_lo - 0.5, g.x_hi + 0.5), st.floats(g.y_lo - 0.5, g.y_hi + 0.5), st.floats(a.z_lo - 0.3, a.z_hi + 0.3))


def wrench_of(actions):
    m = shield().model
    return [m.low[i] + (actions[i] + 1.0) * m.half_span[i] for i in range(4)]


def make_tick(p, v, rpy, w, cmd, prev=None, thrust_est=None) -> Tick:
    m = shield().model
    t = Tick()
    t.dt = m.dt
    t.has_state = True
    t.p, t.v, t.w = list(p), list(v), list(w)
    q = quat_from_euler_rpy(*rpy)
    t.r = rotation_from_quat(*q)
    t.cmd = list(cmd)
    t.policy = tuple(cmd)
    t.prev = list(prev if prev is not None else cmd)
    t.thrust_est = cmd[0] if thrust_est is None else thrust_est
    return t


def constraint_names(t: Tick) -> set[str]:
    return {i.constraint for i in (t.interventions or [])}


# ---- limits ----------------------------------------------------------------------------------
@SETTINGS
@given(
    rpy=st.tuples(angle, angle, st.floats(-3.1, 3.1)), w=st.tuples(rate, rate, rate), v=st.tuples(speed, speed, speed),
    cmd=st.tuples(norm_action, norm_action, norm_action, norm_action), prev=st.tuples(*[st.floats(-1, 1)] * 4),
)
def test_limits_output_satisfies_its_constraints(rpy, w, v, cmd, prev):
    unit = shield().limits
    t = make_tick((2.0, 2.0, 1.0), v, rpy, w, wrench_of(cmd), wrench_of(prev))
    unit.check(t)
    out = t.cmd
    names = constraint_names(t)
    # actuator range: always
    for i in range(4):
        assert unit.lo[i] - TOL <= out[i] <= unit.hi[i] + TOL
    # attitude: whenever some torque in the range satisfies it
    hp = unit.tilt_halfplane(t.r, w)
    if hp is not None:
        gx, gy, rhs = hp
        best = gx * (unit.lo[1] if gx > 0 else unit.hi[1]) + gy * (unit.lo[2] if gy > 0 else unit.hi[2])
        if best <= rhs:
            assert gx * out[1] + gy * out[2] <= rhs + 1e-9 * (1 + abs(rhs))
    # the swing back: the other side of the slab, whenever both sides can be met in the range
    hb = unit.tilt_back_halfplane(t.r, w)
    if hp is not None and hb is not None:
        gx, gy, rhs = hb
        best_back = gx * (unit.lo[1] if gx > 0 else unit.hi[1]) + gy * (unit.lo[2] if gy > 0 else unit.hi[2])
        fwd_best = hp[0] * (unit.lo[1] if hp[0] > 0 else unit.hi[1]) + hp[1] * (unit.lo[2] if hp[1] > 0 else unit.hi[2])
        if best_back <= rhs and fwd_best <= hp[2] and -rhs <= hp[2]:
            assert gx * out[1] + gy * out[2] <= rhs + 1e-9 * (1 + abs(rhs))
    # the rate across the tilt axis: the stop ends within the limit whenever the rate along the axis alone does and
    # the torque that takes the rate across away is in the range
    theta, ax, ay = unit.tilt_axis(t.r)
    h, (jx, jy, _) = unit.att_h, unit.m.inertia
    ox, oy = w[0] + h * out[1] / jx, w[1] + h * out[2] / jy
    x, y = ax * ox + ay * oy, ax * oy - ay * ox
    if unit.stop_tilt(theta, x, y) > unit.max_tilt + 1e-9:
        t0x, t0y = (x * ax - w[0]) * jx / h, (x * ay - w[1]) * jy / h  # the same rate along, none across
        assert "attitude" in names
        assert unit.stop_tilt(theta, x, 0.0) > unit.max_tilt or not (
            unit.lo[1] <= t0x <= unit.hi[1] and unit.lo[2] <= t0y <= unit.hi[2])
    # body rate: whenever the attitude did not need the torque outside the rate box
    if "attitude" not in names:
        for axis in range(3):
            rlo, rhi = unit.rate_box(w, axis)
            if max(rlo, unit.lo[axis + 1]) <= min(rhi, unit.hi[axis + 1]):
                assert rlo - TOL <= out[axis + 1] <= rhi + TOL
    # slew: whenever neither rate nor attitude needed more
    if not names & {"attitude", "body_rate"}:
        for i in range(4):
            assert abs(out[i] - t.prev[i]) <= unit.slew[i] + TOL
    # velocity: rejected exactly when the predicted speed (the model's one prediction) is over the limit and growing
    from robot_hrl.robots.quadrotor.shield.model import predicted_speed as _predicted_speed

    vh, v0 = _predicted_speed(t, unit.m, unit.speed_h), math.sqrt(sum(c * c for c in v))
    assert (t.reject_constraint == "velocity") == (vh > unit.max_speed and vh >= v0)


@SETTINGS
@given(
    rpy=st.tuples(st.floats(-0.5, 0.5), st.floats(-0.5, 0.5), st.floats(-3.1, 3.1)), w=st.tuples(*[st.floats(-3, 3)] * 3),
    cmd=st.tuples(st.floats(-0.9, 1), *[st.floats(-0.1, 0.1)] * 3), delta=st.tuples(*[st.floats(-0.999, 0.999)] * 4),
)
def test_limits_pass_a_satisfying_command_unchanged(rpy, w, cmd, delta):
    unit = shield().limits
    cmd_w = wrench_of(cmd)
    prev = [cmd_w[i] - delta[i] * unit.slew[i] for i in range(4)]
    t = make_tick((2.0, 2.0, 1.0), (0.0, 0.0, 0.0), rpy, w, cmd_w, prev)
    assume(all(unit.lo[i] <= cmd_w[i] <= unit.hi[i] for i in range(4)))
    for axis in range(3):
        rlo, rhi = unit.rate_box(w, axis)
        assume(rlo <= cmd_w[axis + 1] <= rhi)
    hp = unit.tilt_halfplane(t.r, w)
    assume(hp is None or hp[0] * cmd_w[1] + hp[1] * cmd_w[2] <= hp[2])
    hb = unit.tilt_back_halfplane(t.r, w)
    assume(hb is None or hb[0] * cmd_w[1] + hb[1] * cmd_w[2] <= hb[2])  # the swing back too
    assume(unit.tilt_cross(t.r, w, cmd_w[1], cmd_w[2]) is None)  # and the rate across the tilt axis
    unit.check(t)
    assert t.cmd == cmd_w
    assert t.interventions is None


# ---- geofence and altitude -------------------------------------------------------------------
THRUST_TICK = dict(
    p=position(), v=st.tuples(speed, speed, speed), rpy=st.tuples(st.floats(-0.6, 0.6), st.floats(-0.6, 0.6), st.floats(-3.1, 3.1)),
    w=st.tuples(rate, rate, rate), thrust=st.floats(-1, 1), est=st.floats(-1, 1),
)
"""A state and a pure collective-thrust command (normalized), with the hover-thrust estimate (normalized)."""


def thrust_tick(p, v, rpy, w, thrust: float, est: float):
    """The command (as the tick holds it), the hover-thrust estimate (N) and the tick of THRUST_TICK's draws."""
    cmd = wrench_of((thrust, 0.0, 0.0, 0.0))
    t_est = wrench_of((est, 0, 0, 0))[0]
    return cmd, t_est, make_tick(p, v, rpy, w, cmd, thrust_est=t_est)


@SETTINGS
@given(**THRUST_TICK)
def test_geofence_and_altitude_accept_exactly_the_commands_that_stop_inside(p, v, rpy, w, thrust, est):
    s = shield()
    cmd, t_est, t = thrust_tick(p, v, rpy, w, thrust, est)
    s.geofence.check(t)
    s.altitude.check(t)
    g, a = s.geofence, s.altitude

    def box_of(thrust_n):
        return stopping_box(s.model, t.p, t.v, t.r, t.w, thrust_n, t.thrust_est)[:6]

    floor = a.z_lo  # within the hold's sag of the band's floor (climb_into_band): the height now less the sag; none on the floor
    low = p[2] - s.model.backup_sag_down_m
    climb = False
    if a.climb_into_band and low < a.z_lo:
        floor = -math.inf if p[2] <= a.rest_z and v[2] >= -a.rest_speed else low
        climb = floor == low
    # there, a box that sinks still passes when the backup's vertical flow after the command keeps the hold's
    # (altitude.flow_check; tests/test_vertical_flow.py tests the flow itself)
    # (the ceiling likewise, on the flow from above)
    def flows(tick):
        return (a.flow_check and a._flow(tick, climb)[0], a.flow_check and a._flow_high(tick) <= a.z_hi)

    flow_keeps = flows(thrust_tick(p, v, rpy, w, thrust, est)[2])

    def inside(b, band=True, flow=(False, False)):
        x0, x1, y0, y1, z0, z1 = b
        return g.x_lo <= x0 and x1 <= g.x_hi and g.y_lo <= y0 and y1 <= g.y_hi and (
            not band or ((floor <= z0 or flow[0]) and (z1 <= a.z_hi or flow[1])))

    x0, x1, y0, y1, z0, z1 = box_of(cmd[0])
    assert x0 <= p[0] <= x1 and y0 <= p[1] <= y1 and z0 <= p[2] <= z1
    # (a clamp, for the fence or the ceiling, is judged on the box alone: the flow passed the command's own thrust)
    if inside(box_of(cmd[0]), flow=flow_keeps):  # a command that stops inside passes unchanged
        assert t.reject_unit is None and t.cmd == cmd and t.interventions is None
        return
    if t.reject_unit is not None:  # handed over: nothing between the command's thrust and the motors' stops inside
        assert t.reject_unit in (g, a)
        assert not inside(box_of(t_est))
        return
    # clamped (geofence / altitude clamp_thrust): only the collective thrust moved, toward the motors' and not past
    # them, and the new command's box is inside the fence and the band
    assert t.interventions and {i.unit for i in t.interventions} <= {"geofence", "altitude"}
    assert all(getattr(s, i.unit).clamp_thrust for i in t.interventions)
    assert t.cmd[1:] == cmd[1:]
    assert min(cmd[0], t_est) - TOL <= t.cmd[0] <= max(cmd[0], t_est) + TOL
    # (the altitude unit judges the fence's clamped command on its box, or on the vertical flow after it)
    clamped = make_tick(p, v, rpy, w, list(t.cmd), thrust_est=t_est)
    assert inside(box_of(t.cmd[0]), flow=flows(clamped))
    assert tuple(t.stop_box[:6]) == tuple(box_of(t.cmd[0]))  # the box the later units judge is the new command's


def test_altitude_clamp_lets_a_descent_from_hover_start_instead_of_holding():
    # issue #16: at rest 1.18 m up, the shipped policy asks for no thrust toward a goal 0.7 m below; the box of a
    # free fall for the descent's reaction time reaches under the floor, and a hold kept the robot there for good
    # (the policy's next command is the same). The clamp gives the least thrust whose box stops above the floor.
    # With the vertical flow (altitude.flow_check) the command passes as it is: one tick of it, then the hold, keeps the
    # band (the box's free fall for the whole reaction time is blind to the motors that keep most of their thrust).
    on = fresh_shield()
    t = make_tick((2.0, 2.3, 1.18), (0, 0, 0), (0, 0, 0), (0, 0, 0), [0.0, 0, 0, 0], thrust_est=on.model.weight)
    on.altitude.check(t)
    assert on.altitude.flow_check and t.reject_unit is None and t.interventions is None and t.cmd[0] == 0.0
    assert on.model.backup_flow_lowest(t, 0.0, 0.0, 2.0, math.inf) >= on.altitude.z_lo
    cfg, world = _inputs()
    s = Shield(cfg.model_copy(update={"altitude": cfg.altitude.model_copy(update={"flow_check": False})}), CRAZYFLIE_2X,
               world, subgoal_radius_m=1.0)
    m = s.model
    t = make_tick((2.0, 2.3, 1.18), (0, 0, 0), (0, 0, 0), (0, 0, 0), [0.0, 0, 0, 0], thrust_est=m.weight)
    s.altitude.check(t)
    assert t.reject_unit is None
    assert 0.0 < t.cmd[0] < m.weight
    assert stopping_box(m, t.p, t.v, t.r, t.w, t.cmd[0], m.weight)[4] >= s.altitude.z_lo
    # the least such thrust: 1 % less and the box reaches under the floor
    assert stopping_box(m, t.p, t.v, t.r, t.w, t.cmd[0] * 0.99, m.weight)[4] < s.altitude.z_lo
    # a descent the motors cannot stop any more (they are already spun down) is handed over
    t = make_tick((2.0, 2.3, 0.35), (0, 0, -1.5), (0, 0, 0), (0, 0, 0), [0.0, 0, 0, 0], thrust_est=0.05)
    s.altitude.check(t)
    assert t.reject_unit is s.altitude and t.reject_constraint == "floor"


@SETTINGS
@given(v=st.floats(0.0, 2.0), extra=st.floats(0.0, 1.0))
def test_stopping_distance_grows_with_speed(v, extra):
    m = shield().model
    assert m.stopping_distance(v + extra, 0.0, v + extra, m.brake_horizontal) >= m.stopping_distance(v, 0.0, v, m.brake_horizontal)


def test_hover_in_the_middle_passes_every_envelope_unit():
    s = shield()
    t = make_tick((2.0, 2.3, 1.0), (0, 0, 0), (0, 0, 0), (0, 0, 0), [s.robot.weight_n, 0, 0, 0])
    for unit in (s.limits, s.geofence, s.altitude, s.obstacles):
        unit.check(t)
    assert t.reject_unit is None and t.interventions is None


def test_fast_flight_at_the_fence_is_handed_over():
    s = shield()
    t = make_tick((4.0, 2.3, 1.0), (1.5, 0, 0), (0, 0, 0), (0, 0, 0), [s.robot.weight_n, 0, 0, 0])
    s.geofence.check(t)
    assert t.reject_unit is s.geofence and t.reject_constraint == "x_max"
    t = make_tick((2.0, 2.3, 0.35), (0, 0, -1.5), (0, 0, 0), (0, 0, 0), [s.robot.weight_n, 0, 0, 0])
    s.altitude.check(t)
    assert t.reject_constraint == "floor"


def test_geofence_clamp_lowers_a_tilted_full_thrust_near_the_fence():
    # 0.15 m inside the fence's inset, pitched 0.25 rad toward it, at rest: full thrust would carry the stopping point
    # past the fence; the thrust is lowered toward the motors' (hover) just enough, the torques kept (0.1 m in, even
    # the hover thrust's drift is more than the backup's linear stop leaves room for: docs/safety.md, "The backup's stop")
    s = fresh_shield()
    g, m = s.geofence, s.model
    full = [m.high[0], 0.0, 0.0, 0.0]
    t = make_tick((g.x_hi - 0.15, 2.3, 1.0), (0, 0, 0), (0, 0.25, 0), (0, 0, 0), list(full), thrust_est=m.weight)
    g.check(t)
    assert t.reject_unit is None and [(i.constraint, i.action) for i in t.interventions] == [("x_max", "clamp")]
    assert m.weight < t.cmd[0] < full[0] and t.cmd[1:] == full[1:]
    assert stopping_box(m, t.p, t.v, t.r, t.w, t.cmd[0], m.weight)[1] <= g.x_hi
    assert stopping_box(m, t.p, t.v, t.r, t.w, t.cmd[0] * 1.01, m.weight)[1] > g.x_hi  # the least change
    # moving toward the fence at 0.4 m/s even the motors' thrust does not stop inside: handed over, unchanged
    t = make_tick((g.x_hi - 0.15, 2.3, 1.0), (0.4, 0, 0), (0, 0.25, 0), (0, 0, 0), list(full), thrust_est=m.weight)
    g.check(t)
    assert t.reject_unit is g and t.reject_constraint == "x_max" and t.cmd == full


# ---- obstacles -------------------------------------------------------------------------------
@SETTINGS
@given(
    p=position(), v=st.tuples(speed, speed, speed), rpy=st.tuples(st.floats(-0.6, 0.6), st.floats(-0.6, 0.6), st.floats(-3.1, 3.1)),
    w=st.tuples(rate, rate, rate), thrust=st.floats(-1, 1),
)
def test_obstacles_accepted_commands_keep_their_clearance(p, v, rpy, w, thrust):
    s = shield()
    unit = s.obstacles
    cmd = wrench_of((thrust, 0.0, 0.0, 0.0))
    t = make_tick(p, v, rpy, w, cmd)
    unit.check(t)
    assert t.cmd == cmd
    if t.reject_unit is not None:
        return
    b = stopping_box(s.model, t.p, t.v, t.r, t.w, t.cmd[0], t.thrust_est)
    for raw in unit.raw:
        assert kept_clearance(s.model, t, b, raw, unit.radius) >= min(unit.margin, clearance_now(p, raw, unit.radius)) - 1e-9
    speed_now = math.sqrt(sum(c * c for c in v))
    for i, slow in enumerate(unit.slow_boxes):
        if slow[0] <= p[0] <= slow[3] and slow[1] <= p[1] <= slow[4] and slow[2] <= p[2] <= slow[5]:
            from robot_hrl.robots.quadrotor.shield.model import predicted_speed as _predicted_speed

            vh = _predicted_speed(t, s.model, unit.speed_h)
            assert vh <= unit.slow_speed + TOL or vh < speed_now


def clearance_now(p, raw, radius) -> float:
    return math.dist([max(raw[i] - p[i], p[i] - raw[i + 3], 0.0) for i in range(3)], [0, 0, 0]) - radius


def kept_clearance(m, t, b, raw, radius) -> float:
    """The clearance from ``raw`` the stop keeps by the best bound written out here: the stopping box ``b`` (its
    conservative top), or a separating plane: for a unit direction ``u`` the box lies where ``u.(y - p)`` is at least
    its minimum over the box, and the stop travels at most the model's ``horizontal_travel_m`` along a horizontal ``u``
    (the nearest point's direction: plus its vertical part times the box's vertical extent). Planes: the nearest
    point's, across the velocity, and 720 around the circle (the unit tries fewer)."""
    box = (b[0], b[1], b[2], b[3], b[4], b[6])
    best = math.dist([max(raw[i] - box[2 * i + 1], box[2 * i] - raw[i + 3], 0.0) for i in range(3)], [0, 0, 0]) - radius
    p, v = t.p, t.v
    q = [min(max(p[i], raw[i]), raw[i + 3]) for i in range(3)]
    d = math.dist(p, q)
    if d > 1e-9:
        n = [(q[i] - p[i]) / d for i in range(3)]
        h = math.hypot(n[0], n[1])
        travel = h * m.horizontal_travel_m(t, n[0] / h, n[1] / h) if h > 1e-9 else 0.0
        travel += n[2] * (b[6] - p[2]) if n[2] > 0 else -n[2] * (p[2] - b[4])
        best = max(best, d - radius - travel)
    sp = math.hypot(v[0], v[1])
    dirs = [(math.cos(a), math.sin(a)) for a in np.linspace(0.0, 2.0 * math.pi, 720, endpoint=False)]
    if sp > 1e-6:
        dirs += [(-v[1] / sp, v[0] / sp), (v[1] / sp, -v[0] / sp)]
    for ux, uy in dirs:
        lead = min(ux * (raw[0] - p[0]), ux * (raw[3] - p[0])) + min(uy * (raw[1] - p[1]), uy * (raw[4] - p[1]))
        best = max(best, lead - m.horizontal_travel_m(t, ux, uy) - radius)
    return best


@lru_cache(maxsize=1)
def clamping_obstacles_shield() -> Shield:
    """The shipped shield with ``obstacles.clamp_thrust`` on (as shipped since branch ``obsclamp``; set here so that the test
    does not depend on the YAML: docs/safety.md, "The thrust clamp")."""
    cfg, world = _inputs()
    cfg = cfg.model_copy(update={"obstacles": cfg.obstacles.model_copy(update={"clamp_thrust": True})})
    return Shield(cfg, CRAZYFLIE_2X, world, subgoal_radius_m=1.0)


@SETTINGS
@given(**THRUST_TICK)
def test_obstacles_thrust_clamp_keeps_the_clearance(p, v, rpy, w, thrust, est):
    s = clamping_obstacles_shield()
    unit = s.obstacles
    cmd, t_est, t = thrust_tick(p, v, rpy, w, thrust, est)
    unit.check(t)
    if t.reject_unit is not None or not t.interventions or t.interventions[-1].constraint != "approach":
        return
    # clamped on the approach: only the thrust moved, toward the motors' and not past them; the new box keeps the
    # clearance (or, inside the margin, comes no closer than the robot is)
    assert t.cmd[1:] == cmd[1:] and min(cmd[0], t_est) - TOL <= t.cmd[0] <= max(cmd[0], t_est) + TOL
    b = stopping_box(s.model, t.p, t.v, t.r, t.w, t.cmd[0], t.thrust_est)
    assert unit._approach_violation(b, p, t) is None
    for raw in unit.raw:
        assert kept_clearance(s.model, t, b, raw, unit.radius) >= min(unit.margin, clearance_now(p, raw, unit.radius)) - 1e-9
    assert tuple(t.stop_box) == tuple(b)


def test_obstacles_pass_hover_far_from_boxes_and_stop_motion_into_a_box():
    s = shield()
    t = make_tick((2.0, 2.3, 1.0), (0, 0, 0), (0, 0, 0), (0, 0, 0), [s.robot.weight_n, 0, 0, 0])
    s.obstacles.check(t)
    assert t.reject_unit is None
    # pillar_a spans x 1.3..1.7 at y 1.5: flying at it in +x from 0.9 m
    t = make_tick((0.9, 1.5, 1.0), (1.2, 0, 0), (0, 0, 0), (0, 0, 0), [s.robot.weight_n, 0, 0, 0])
    s.obstacles.check(t)
    assert t.reject_unit is s.obstacles and t.reject_constraint in ("approach", "slowdown")
    t = make_tick((1.2, 1.5, 1.0), (-0.3, 0, 0), (0, 0, 0), (0, 0, 0), [s.robot.weight_n, 0, 0, 0])
    s.obstacles.check(t)  # inside the margin, moving away: allowed
    assert t.reject_unit is None


def test_obstacles_slowdown_lowers_the_thrust_instead_of_holding_the_robot_in_place():
    # at rest 0.4 m from pillar_a (inside its slowdown zone), the policy asks for a hard climbing
    # take-off toward the next subgoal: the thrust is lowered until the predicted speed is the
    # zone's limit and the policy keeps control (a hold here would never end: the robot sat
    # next to a box until the planner gave up)
    from robot_hrl.robots.quadrotor.shield.model import predicted_speed as _predicted_speed

    s = shield()
    unit, m = s.obstacles, s.model
    hard = s.model.high[0]  # (the whole thrust range: the 31.5 g model climbs slower than the 27 g one did)
    t = make_tick((0.9, 1.5, 1.0), (0, 0, 0), (0.35, 0, 0), (0, 0, 0), [hard, 0, 0, 0], thrust_est=s.robot.weight_n)
    assert _predicted_speed(t, m, unit.speed_h) > unit.slow_speed
    unit.check(t)
    assert t.reject_unit is None
    assert constraint_names(t) == {"slowdown"}
    assert m.mass * m.g / t.r[8] <= t.cmd[0] < hard
    assert math.isclose(_predicted_speed(t, m, unit.speed_h), unit.slow_speed, rel_tol=1e-9)
    # already at the limit and speeding up: lowering the thrust to the hover thrust is not enough
    t = make_tick((0.9, 1.5, 1.0), (0, -0.2, 1.1), (0.35, 0, 0), (0, 0, 0), [hard, 0, 0, 0], thrust_est=s.robot.weight_n)
    unit.check(t)
    assert t.reject_unit is unit and t.reject_constraint == "slowdown"


# ---- subgoal ---------------------------------------------------------------------------------
coord = st.one_of(st.floats(-10, 15), st.sampled_from([float("nan"), float("inf"), -float("inf")]))


@SETTINGS
@given(goal=st.tuples(coord, coord, coord), pos=st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)))
def test_subgoal_output_always_satisfies_its_constraints(goal, pos):
    s = shield()
    u = s.subgoal
    p = [u.lo[i] + pos[i] * (u.hi[i] - u.lo[i]) for i in range(3)]
    assume(u.colliding(p) is None)
    safe, records = s.filter_subgoal(np.array(goal), np.array(p), 1.0)
    assert safe.shape == (3,)
    assert u.satisfied(list(safe), p), (goal, p, safe, records)
    if not np.allclose(safe, goal, equal_nan=False):
        assert records and all(r.unit == "subgoal" and r.time_s == 1.0 for r in records)


@SETTINGS
@given(pos=st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)), d=st.tuples(*[st.floats(-0.55, 0.55)] * 3))
def test_subgoal_that_satisfies_passes_unchanged(pos, d):
    s = shield()
    u = s.subgoal
    p = [u.lo[i] + pos[i] * (u.hi[i] - u.lo[i]) for i in range(3)]
    g = [p[i] + d[i] for i in range(3)]
    assume(u.satisfied(g, p))
    safe, records = s.filter_subgoal(np.array(g), np.array(p), 0.0)
    assert safe.tolist() == g
    assert records == []


# ---- watchdog --------------------------------------------------------------------------------
@SETTINGS
@given(
    state_age=st.floats(0, 5), state_ok=st.booleans(), subgoal_age=st.floats(0, 30), subgoal_ok=st.booleans(),
    infer=st.one_of(st.floats(0, 0.05), st.just(float("nan"))), finite=st.booleans(), stale_for=st.floats(0, 3),
)
def test_watchdog_acts_exactly_on_its_faults(state_age, state_ok, subgoal_age, subgoal_ok, infer, finite, stale_for):
    s = fresh_shield()
    wd = s.watchdog

    def facts(now: float) -> Tick:  # what the shield reads into the tick for the input units
        t = Tick()
        t.now, t.state_ok, t.state_age, t.subgoal_ok, t.subgoal_age = now, state_ok, state_age, subgoal_ok, subgoal_age
        t.inference_s, t.output_finite = infer, finite
        return t

    wd.check(facts(100.0 - stale_for))  # the fault starts here (if any)
    t = facts(100.0)
    wd.check(t)
    state_bad = not state_ok or state_age > wd.state_timeout
    subgoal_bad = not subgoal_ok or subgoal_age > wd.subgoal_timeout
    # a stale state is held for state_hold_s (the model's braking time, at most hold_s), a stale subgoal for hold_s
    state_old, subgoal_old = stale_for >= wd.state_hold_s, stale_for >= wd.hold_s
    lands = (state_bad and state_old) or (subgoal_bad and subgoal_old)
    assert (t.land_unit is not None) == lands
    assert (t.hold_unit is not None) == ((state_bad and not state_old) or (subgoal_bad and not subgoal_old))
    output_bad = not finite or not infer <= wd.deadline
    assert (t.reject_unit is not None) == output_bad
    assert t.policy_valid == (not output_bad)
    if not (state_bad or subgoal_bad or output_bad):
        assert wd.status()[0] == 0


# ---- battery ---------------------------------------------------------------------------------
@SETTINGS
@given(volts=st.floats(2.5, 4.3), duration=st.floats(0, 10))
def test_battery_holds_then_lands_below_its_thresholds(volts, duration):
    s = fresh_shield()
    b = s.battery
    seen_hold = seen_land = False
    steps = int(duration / 0.05) + 1
    for k in range(steps):
        t = Tick()
        t.now, t.battery_v = k * 0.05, volts
        b.check(t)
        seen_hold |= t.hold_unit is b
        seen_land |= t.land_unit is b
    elapsed = (steps - 1) * 0.05
    if volts >= b.hold_v:
        assert not seen_hold and not seen_land
    if volts < b.land_v and elapsed >= b.debounce + 1e-9:
        assert seen_land
    if b.land_v <= volts < b.hold_v and elapsed >= b.debounce + b.hold_s + 1e-9:
        assert seen_land
    if b.land_v <= volts < b.hold_v and b.debounce + 1e-9 <= elapsed < b.debounce + b.hold_s - 1e-9:
        assert seen_hold and not seen_land


def test_battery_unknown_voltage_is_no_fault():
    b = fresh_shield().battery
    t = Tick()
    t.battery_v = None
    b.check(t)
    assert t.hold_unit is None and t.land_unit is None


# ---- emergency stop --------------------------------------------------------------------------
@SETTINGS
@given(actions=st.tuples(*[st.floats(-1, 1)] * 4), z=st.floats(0.3, 1.5))
def test_estop_always_commands_motors_off(actions, z):
    s = fresh_shield()
    s.estop("test")
    st_ = RobotState(position_w=np.array([2.0, 2.3, z]))
    for k in range(3):
        out = s.step(ShieldInput(k * 0.01, st_, np.array(actions), subgoal_w=st_.position_w, state_stamp_s=k * 0.01))
        assert out.mode == "motors_off"
        assert out.wrench.tolist() == [0.0, 0.0, 0.0, 0.0]


# ---- backup controller -----------------------------------------------------------------------
@SETTINGS
@given(
    p=position(), v=st.tuples(speed, speed, speed), rpy=st.tuples(angle, angle, st.floats(-3.1, 3.1)), w=st.tuples(rate, rate, rate),
    land=st.booleans(),
)
def test_backup_command_is_finite_and_in_range(p, v, rpy, w, land):
    s = shield()
    r = rotation_from_quat(*quat_from_euler_rpy(*rpy))
    out = s.backup.command(list(p), list(v), r, list(w), (2.0, 2.0, 1.0), land=land)
    m = s.model
    assert all(math.isfinite(x) for x in out)
    assert s.backup.min_thrust - TOL <= out[0] <= s.backup.max_thrust + TOL
    for i in range(1, 4):
        assert m.low[i] - TOL <= out[i] <= m.high[i] + TOL


def test_backup_levels_and_pulls_toward_the_target():
    s = fresh_shield()
    level = rotation_from_quat(1.0, 0.0, 0.0, 0.0)
    out = s.backup.command([2.0, 2.0, 1.0], [0, 0, 0], level, [0, 0, 0], (2.0, 2.0, 1.0))
    assert abs(out[0] - s.robot.weight_n) < 1e-9 and max(abs(x) for x in out[1:]) < 1e-12
    out = s.backup.command([2.0, 2.0, 1.0], [0, 0, 0], level, [0, 0, 0], (2.0, 2.0, 1.5))
    assert out[0] > s.robot.weight_n
    s.backup.reset()
    # target ahead in +x: pitch forward, i.e. a positive torque about body y
    out = s.backup.command([2.0, 2.0, 1.0], [0, 0, 0], level, [0, 0, 0], (3.0, 2.0, 1.0))
    assert out[2] > 0


def test_backup_rate_lead_damps_a_growing_rate_harder():
    """The rate term acts on w + rate_lead_s dw/dt: a roll rate that grew since the last tick is
    opposed harder than the same rate that did not; reset forgets the last rate."""
    s = fresh_shield()
    b = s.backup
    assert b.lead > 0.0
    level = rotation_from_quat(1.0, 0.0, 0.0, 0.0)
    hold = (2.0, 2.0, 1.0)
    b.reset()
    first = b.command([2.0, 2.0, 1.0], [0, 0, 0], level, [1.0, 0, 0], hold)  # no previous rate: no lead
    steady = b.command([2.0, 2.0, 1.0], [0, 0, 0], level, [1.0, 0, 0], hold)
    assert first[1] == steady[1] < 0.0
    b.reset()
    b.command([2.0, 2.0, 1.0], [0, 0, 0], level, [0.5, 0, 0], hold)
    growing = b.command([2.0, 2.0, 1.0], [0, 0, 0], level, [1.0, 0, 0], hold)
    assert growing[1] < steady[1]
    expected = s.model.inertia[0] * (-b.kw * (1.0 + b.lead / b.dt * 0.5))
    assert math.isclose(growing[1], max(expected, s.model.low[1]), rel_tol=1e-9)


def test_carried_rate_is_the_integral_of_the_decaying_motor_torque():
    """c = 0: the torque decays to zero, T tau / J; c > 0 (counter-torque): less, same sign,
    growing with the torque."""
    unit = shield().limits
    m = shield().model
    tau = 0.5 * m.high[1]
    assert unit.motor_tau == m.design_motor_tau == 0.15
    if unit.counter_torque[0] == 0.0:
        assert math.isclose(unit.carried_rate(tau, 0), 0.15 * tau / m.inertia[0])
    assert unit.carried_rate(0.0, 0) == 0.0
    assert unit.carried_rate(-tau, 1) == -unit.carried_rate(tau, 1)
    # numerically: integrate the first-order motor torque toward -c until it crosses zero
    for frac in (0.0, 0.25, 0.5):
        unit.counter_torque = (frac * m.high[1], frac * m.high[2])
        try:
            c, t_m, x, dt, rate, t = frac * m.high[1], 0.15, tau, 1e-5, 0.0, 0.0
            while x > 0.0 and t < 20 * t_m:  # c = 0: decays without crossing; 20 T leaves e^-20
                rate += x / m.inertia[0] * dt
                x += (-c - x) * dt / t_m
                t += dt
            assert math.isclose(unit.carried_rate(tau, 0), rate, rel_tol=2e-3)
            assert 0.0 < unit.carried_rate(0.5 * tau, 0) < unit.carried_rate(tau, 0)
        finally:
            unit.__init__(shield().config, m)


@SETTINGS
@given(
    w=st.tuples(st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3)), est=st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    cmd=st.tuples(st.floats(-0.2, 1), *[st.floats(-1, 1)] * 3),
)
def test_limits_count_the_torque_still_in_the_slow_motors(w, est, cmd):
    """Level flight: the roll and pitch torques keep the rate predicted with what the motors
    still add (w + carried) within the body-rate box, whenever that is feasible."""
    unit = shield().limits
    m = shield().model
    t = make_tick((2.0, 2.0, 1.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), w, wrench_of(cmd))
    t.torque_est = (est[0] * m.high[1], est[1] * m.high[2], 0.0)
    unit.check(t)
    w_eff = (w[0] + unit.carried_rate(t.torque_est[0], 0), w[1] + unit.carried_rate(t.torque_est[1], 1), w[2])
    if "attitude" not in constraint_names(t):
        for axis in range(2):
            rlo, rhi = unit.rate_box(w_eff, axis)
            if max(rlo, unit.lo[axis + 1]) <= min(rhi, unit.hi[axis + 1]):
                assert rlo - TOL <= t.cmd[axis + 1] <= rhi + TOL
    # a torque pushing the same way as a large one already in the motors is cut back
    t = make_tick((2.0, 2.0, 1.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), wrench_of((0.0, 1.0, 0.0, 0.0)), wrench_of((0.0, 1.0, 0.0, 0.0)))
    t.torque_est = (m.high[1], 0.0, 0.0)
    unit.check(t)
    assert t.cmd[1] < 0.0 and "body_rate" in constraint_names(t) | {"attitude"}


# ---- the composed shield ---------------------------------------------------------------------
anything = st.one_of(st.floats(-3, 3), st.sampled_from([float("nan"), float("inf"), -float("inf")]))


@SETTINGS
@given(
    actions=st.tuples(anything, anything, anything, anything), p=position(), v=st.tuples(speed, speed, speed),
    rpy=st.tuples(angle, angle, st.floats(-3.1, 3.1)), w=st.tuples(rate, rate, rate), infer=st.floats(0, 0.02),
    volts=st.one_of(st.none(), st.floats(2.8, 4.2)), state_age=st.floats(0, 0.2),
)
def test_shield_output_is_always_a_valid_command(actions, p, v, rpy, w, infer, volts, state_age):
    s = fresh_shield()
    state = RobotState(np.array(p), quat_from_euler_rpy(*rpy), np.array(v), np.array(w), 10.0 - state_age)
    out = s.step(ShieldInput(10.0, state, np.array(actions), subgoal_w=np.array(p), inference_s=infer, battery_v=volts))
    assert out.mode in ("policy", "backup_hold", "backup_land", "motors_off")
    assert out.actions.shape == (4,) and np.all(np.isfinite(out.actions)) and np.all(np.abs(out.actions) <= 1.0)
    assert np.all(np.isfinite(out.wrench))
    assert (out.mode == "policy") == (out.reason == "")
    if out.mode != "policy":
        assert out.interventions  # a hand-over is always recorded


def test_nominal_hover_passes_the_whole_shield_unchanged():
    s = fresh_shield()
    m = s.model
    hover = np.array([m.wrench_to_action(0, s.robot.weight_n), 0.0, 0.0, 0.0])
    state = RobotState(position_w=np.array([2.0, 2.3, 1.0]))
    for k in range(50):
        state.stamp_s = k * 0.01
        out = s.step(ShieldInput(k * 0.01, state, hover, subgoal_w=state.position_w, subgoal_stamp_s=0.0, inference_s=0.001, battery_v=4.0))
        assert out.mode == "policy" and out.interventions == ()
        np.testing.assert_allclose(out.actions, hover, atol=1e-12)
    assert s.ticks == 50 and s.ticks_intervened == 0 and s.intervention_rate == 0.0


@SETTINGS
@given(latched=st.booleans(), cmd=st.tuples(*[st.floats(-1, 1)] * 4))
def test_estop_unit_acts_only_when_latched(latched, cmd):
    s = fresh_shield()
    if latched:
        s.estop("test")
    t = make_tick((2.0, 2.0, 1.0), (0, 0, 0), (0, 0, 0), (0, 0, 0), wrench_of(cmd))
    s.estop_unit.check(t)
    assert (t.motors_off is not None) == latched
    assert t.cmd == wrench_of(cmd) and t.interventions is None  # the unit never edits the command itself


@SETTINGS
@given(requested=st.booleans(), ticks=st.integers(1, 5))
def test_command_unit_lands_exactly_when_asked(requested, ticks):
    s = fresh_shield()
    if requested:
        s.request_land(0.0, "test")
    for _ in range(ticks):
        t = Tick()
        s.command.check(t)
        assert (t.land_unit is s.command) == requested
        assert t.hold_unit is None and t.reject_unit is None


def test_limits_bound_the_swing_back_through_level_that_the_tilt_axis_alone_passed():
    """2026-11-25: the adversary under randomization took 7 ticks of full torque that tilted the body back toward level
    from 16 deg; the 0.14 s motors carried it through level and out to 61 deg. The half-plane judged only how far the
    tilt could grow (a rate back toward level was always allowed); the slab's other side judges the swing back."""
    unit = shield().limits
    t = make_tick((2.0, 2.0, 1.0), (0.0, 0.0, 0.0), (0.2, 0.0, 0.0), (0.0, 0.0, 0.0), wrench_of((0.0, 0.0, 0.0, 0.0)))
    s = math.sqrt(1.0 - t.r[8] ** 2)
    ax, ay = t.r[7] / s, -t.r[6] / s
    w = (-4.5 * ax, -4.5 * ay, 0.0)  # 4.5 rad/s back toward level (inside the 300 deg/s rate limit)
    cmd = wrench_of((0.0, -1.0 if ax > 0 else 1.0, -1.0 if ay > 0 else 1.0, 0.0))  # and full torque further that way
    t = make_tick((2.0, 2.0, 1.0), (0.0, 0.0, 0.0), (0.2, 0.0, 0.0), w, cmd, cmd)
    gx, gy, rhs = unit.tilt_halfplane(t.r, w)
    assert gx * cmd[1] + gy * cmd[2] <= rhs  # the tilt axis alone passes it
    bx, by, brhs = unit.tilt_back_halfplane(t.r, w)
    assert bx * cmd[1] + by * cmd[2] > brhs  # yet it swings out past the limit on the other side
    unit.check(t)
    assert "attitude" in constraint_names(t)
    assert bx * t.cmd[1] + by * t.cmd[2] <= brhs + 1e-9
    assert gx * t.cmd[1] + gy * t.cmd[2] <= rhs + 1e-9
    # the swing the stop leaves: theta + the back rate's travel past level, within the limit
    x = ax * (w[0] + unit.att_h * t.cmd[1] / unit.m.inertia[0]) + ay * (w[1] + unit.att_h * t.cmd[2] / unit.m.inertia[1])
    theta = math.acos(t.r[8])
    assert -x * unit.tilt_lag + x * x / (2.0 * unit.tilt_alpha) - theta <= unit.max_tilt + 1e-6


def test_limits_bound_the_rate_across_the_tilt_axis_near_level():
    """2026-11-28: the adversary with the airframes declared (0.15 s motors, 3.5 V) put full roll and pitch torque on
    the body at 1-2 deg of tilt, across the direction the slab judges; the motors carried it to 57 deg. The stop's end
    point, the tilt vector moved along the whole rate, must stay within the limit."""
    unit = shield().limits
    rpy = (math.radians(1.5), 0.0, 0.0)
    t = make_tick((2.0, 2.0, 1.0), (0.0, 0.0, 0.0), rpy, (0.0, 0.0, 0.0), wrench_of((0.0, 0.0, 0.0, 0.0)))
    theta, ax, ay = unit.tilt_axis(t.r)
    bx, by = -ay, ax  # across the tilt axis
    w = (3.0 * bx, 3.0 * by, 0.0)  # 3 rad/s across it (inside the 300 deg/s rate limit)
    cmd = wrench_of((0.0, 1.0 if bx > 0 else -1.0, 1.0 if by > 0 else -1.0, 0.0))  # and full torque further across
    cmd[1] = cmd[1] if abs(bx) > 1e-6 else 0.0
    cmd[2] = cmd[2] if abs(by) > 1e-6 else 0.0
    t = make_tick((2.0, 2.0, 1.0), (0.0, 0.0, 0.0), rpy, w, cmd, cmd)
    for gx, gy, rhs in unit.tilt_slab(t.r, w):
        assert gx * cmd[1] + gy * cmd[2] <= rhs  # both sides of the slab pass it
    h, (jx, jy, _) = unit.att_h, unit.m.inertia

    def end_tilt(c):
        ox, oy = w[0] + h * c[1] / jx, w[1] + h * c[2] / jy
        return unit.stop_tilt(theta, ax * ox + ay * oy, ax * oy - ay * ox)

    assert math.degrees(end_tilt(cmd)) > 50.0  # yet the stop ends far beyond the 35 deg limit
    unit.check(t)
    assert "attitude" in constraint_names(t)
    assert end_tilt(t.cmd) <= unit.max_tilt + 1e-9
    for gx, gy, rhs in unit.tilt_slab(t.r, w):
        assert gx * t.cmd[1] + gy * t.cmd[2] <= rhs + 1e-9


def test_stop_tilt_is_the_slab_on_the_tilt_axis():
    """The slab's sides are the y = 0 section of stop_tilt: at the side's rate the stop ends at the limit."""
    unit = shield().limits
    for deg in (0.0, 1.0, 10.0, 30.0):
        th = math.radians(deg)
        x_max = unit._stop_rate(unit.max_tilt - th)
        x_back = unit._stop_rate(th + unit.max_tilt)
        assert abs(unit.stop_tilt(th, x_max, 0.0) - unit.max_tilt) < 1e-9
        assert abs(unit.stop_tilt(th, -x_back, 0.0) - unit.max_tilt) < 1e-9


# ---- the approach past a corner, and the take-off (issue #16: whole missions) -------------------
@SETTINGS
@given(**THRUST_TICK, handback=st.booleans())
def test_horizontal_travel_is_the_stopping_box_extent_along_each_axis(p, v, rpy, w, thrust, est, handback):
    # parity: the model's travel along a horizontal direction is the stopping box's extent turned to that direction
    s = shield()
    m = s.model
    cmd, t_est, t = thrust_tick(p, v, rpy, w, thrust, est)
    t.cmd[1], t.cmd[2] = 1e-3 * rpy[0], -1e-3 * rpy[1]  # some roll and pitch torque: the hand-back box commits them
    t.handback = handback
    x0, x1, y0, y1 = m.stopping_box(t)[:4]
    for (ux, uy), extent in (((1.0, 0.0), x1 - p[0]), ((-1.0, 0.0), p[0] - x0), ((0.0, 1.0), y1 - p[1]), ((0.0, -1.0), p[1] - y0)):
        assert math.isclose(m.horizontal_travel_m(t, ux, uy), extent, rel_tol=1e-12, abs_tol=1e-12)


def test_obstacles_let_a_diagonal_pass_by_a_corner_that_the_box_refused_and_stop_one_at_the_face():
    # a mission's leg past pillar_a (x 1.3..1.7, y 1.3..1.7): at (1.74, 1.02) flying 1 m/s up and to the right, 0.22 m
    # from the corner. The stopping box holds (1.74 +- , 1.02 .. 1.4): its corner reaches the pillar's, although the
    # robot's travel toward the corner keeps the margin. Flying straight at the face from the same clearance is refused.
    s = clamping_obstacles_shield()
    m, unit = s.model, s.obstacles
    hover = [m.weight, 0.0, 0.0, 0.0]
    v = (0.62, 0.78, 0.0)
    t = make_tick((1.74, 1.02, 1.08), v, (0, 0, 0), (0, 0, 0), list(hover), thrust_est=m.weight)
    box = m.stopping_box(t)
    pillar = unit.raw[unit.names.index("pillar_a")]
    by_box = math.dist([max(pillar[i] - (box[1], box[3], box[6])[i], (box[0], box[2], box[4])[i] - pillar[i + 3], 0.0)
                        for i in range(3)], [0, 0, 0]) - unit.radius
    assert by_box < unit.margin  # the box alone refuses it
    unit.check(t)
    assert t.reject_unit is None and t.interventions is None and t.cmd == hover
    assert kept_clearance(m, t, box, pillar, unit.radius) >= unit.margin
    t = make_tick((1.5, 1.3 - 0.065 - 0.22, 1.08), (0.0, 1.0, 0.0), (0, 0, 0), (0, 0, 0), list(hover), thrust_est=m.weight)
    unit.check(t)
    assert t.reject_unit is unit and t.reject_constraint in ("approach", "slowdown")


def _altitude_unit(climb: bool):
    cfg, world = _inputs()
    cfg = cfg.model_copy(update={"altitude": cfg.altitude.model_copy(update={"climb_into_band": climb})})
    return Shield(cfg, CRAZYFLIE_2X, world, subgoal_radius_m=1.0)


def test_altitude_lets_the_policy_take_off_and_never_sink_below_the_band():
    on, off = _altitude_unit(True), _altitude_unit(False)
    m = on.model
    rest = (0.5, 0.5, 0.0125)  # the body's centre at rest on the floor (half its height)
    for s, passes in ((on, True), (off, False)):  # at rest, motors spinning up, the policy's take-off thrust
        t = make_tick(rest, (0, 0, 0), (0, 0, 0), (0, 0, 0), [0.47, 0, 0, 0], thrust_est=0.05)
        s.altitude.check(t)
        assert (t.reject_unit is None and t.interventions is None) is passes
        assert passes or t.reject_constraint == "floor"
    # below the band and sinking: refused, named
    t = make_tick((0.5, 0.5, 0.12), (0, 0, -0.3), (0, 0, 0), (0, 0, 0), [0.0, 0, 0, 0], thrust_est=0.05)
    on.altitude.check(t)
    assert t.reject_unit is on.altitude and t.reject_constraint == "floor"
    assert "the robot may only climb" in t.reject_detail
    # above the band by less than the backup's hold sag (a fresh shield: the weakest airframe's), hovering: no hold
    # could keep the band's floor from here, so the policy may hover, as the hold would; sinking is still refused
    sag = m.backup_sag_down_m
    assert sag > 0.1
    z = on.altitude.z_lo + 0.5 * sag
    for s, passes in ((on, True), (off, False)):
        t = make_tick((0.5, 0.5, z), (0, 0, 0), (0, 0, 0), (0, 0, 0), [m.weight, 0, 0, 0], thrust_est=m.weight)
        s.altitude.check(t)
        assert (t.reject_unit is None and t.interventions is None) is passes
    t = make_tick((0.5, 0.5, z), (0, 0, -0.3), (0, 0, 0), (0, 0, 0), [0.0, 0, 0, 0], thrust_est=0.05)
    on.altitude.check(t)
    assert t.reject_unit is on.altitude and t.reject_constraint == "floor"
    # below the band and climbing on the motors' full thrust: the command's own stop does not sink (the box's floor
    # is the height now less the backup's hold sag)
    t = make_tick((0.5, 0.5, 0.12), (0, 0, 0.4), (0, 0, 0), (0, 0, 0), [m.high[0], 0, 0, 0], thrust_est=m.high[0])
    z0 = m.stopping_box(t)[4]
    on.altitude.check(t)
    assert z0 + m.backup_sag_down_m >= 0.12 - 1e-9 and t.reject_unit is None and t.interventions is None


@SETTINGS
@given(z=st.floats(0.0, 0.8), vz=st.floats(-2.0, 2.0), thrust=st.floats(-1, 1), est=st.floats(-1, 1))
def test_altitude_below_the_band_accepts_only_a_stop_at_or_above_the_height_now(z, vz, thrust, est):
    # whatever it passes low down (unclamped or clamped) keeps the band, or its own stop sinks no lower than the robot
    # is (the backup's hold sag aside: the hold sags the same), unless on the floor
    s = _altitude_unit(True)
    a = s.altitude
    cmd, t_est, t = thrust_tick((2.0, 2.3, z), (0.0, 0.0, vz), (0, 0, 0), (0, 0, 0), thrust, est)
    a.check(t)
    if t.reject_unit is not None:
        return
    m = s.model
    z0 = stopping_box(m, t.p, t.v, t.r, t.w, t.cmd[0], t.thrust_est)[4]
    on_floor = z <= a.rest_z and vz >= -a.rest_speed
    # the box's floor less the backup's own sag: the command's stop sinks no lower than the height now, or keeps the band;
    # or, passed unchanged, the backup's vertical flow after it keeps the hold's (altitude.flow_check)
    unchanged = t.interventions is None
    assert on_floor or z0 >= min(a.z_lo, z - m.backup_sag_down_m) - 1e-9 or (
        unchanged and a.flow_check and a._flow(thrust_tick((2.0, 2.3, z), (0.0, 0.0, vz), (0, 0, 0), (0, 0, 0), thrust, est)[2],
                                               not on_floor and z - m.backup_sag_down_m < a.z_lo)[0])

"""Holds that never ended (issue #16): the hand-back torque clamp and the hold's creep toward the subgoal.

* ``clamp_handback_torque`` (robot_hrl/robots/quadrotor/shield/model.py): on a hand-back tick, the roll and pitch
  torques are moved toward the motors' just enough that the stopping box fits; property-tested against the same box
  and the same test the obstacle unit applies, and on the case that held the shipped policy at its goal beside the
  demo world's wall.
* ``Shield._creep_target``: a hold an envelope or command unit put in place moves its target toward the subgoal,
  never closer to a box than the subgoal's margin or than it already was; not for an input unit's hold, not with a
  dead-reckoned state, not with the range source listed (no map).
* closed loop: the shipped policy under the shield (the real batched simulator and the ONNX policy) ends no episode
  held where the unshielded policy reaches its goal.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.safety import Shield, load_shield_config
from robot_hrl.safety.units import Tick
from robot_hrl.world import load_world
from tests.test_safety_units import make_tick

WORLD_PATH = Path(__file__).resolve().parents[1] / "models" / "worlds" / "demo.yaml"
SETTINGS = settings(max_examples=80, deadline=None)


@lru_cache(maxsize=1)
def _inputs():
    return load_shield_config(), load_world(WORLD_PATH)


def fresh_shield(**backup) -> Shield:
    cfg, world = _inputs()
    if backup:
        cfg = cfg.model_copy(update={"backup": cfg.backup.model_copy(update=backup)})
    return Shield(cfg, CRAZYFLIE_2X, world, subgoal_radius_m=1.0)


def handback_tick(p, v, w, cmd, est):
    t = make_tick(p, v, (0.0, 0.0, 0.0), w, list(cmd), thrust_est=est[0])
    t.est = list(est)
    t.handback = True
    return t


# ---- the hand-back torque clamp ------------------------------------------------------------------------------------
def test_shipped_policy_hovering_beside_the_wall_gets_control_back_with_its_torque_scaled():
    # the case that held the shipped policy at its goal (safety_eval seed 0, episode 250): at rest 0.27 m from the
    # wall's face (x 2.6), the policy's hover command carries 5e-4 N m of pitch torque that the backup's hold did not
    # (here with the body's yaw at 0, the torque that swings the thrust toward the wall, -x);
    # the hand-back box (the rates that torque step commits the slowest motor to) reached into the wall, the backup
    # held again, and so on to the end of the episode
    s = fresh_shield()
    m = s.model
    p, v, w = (2.87, 1.306, 1.256), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    cmd = [0.3205, 1e-4, -5e-4, 2e-4]
    est = [m.weight, 0.0, 0.0, 0.0]
    # the raw hand-back box breaks the wall's approach clearance
    raw = handback_tick(p, v, w, cmd, est)
    assert s.obstacles._approach_violation(m.stopping_box(raw), p) is not None
    # and at the motors' torques it keeps it: the clamp keeps part of the step
    t = handback_tick(p, v, w, cmd, est)
    s.obstacles.check(t)
    assert t.reject_unit is None
    rec = t.interventions[-1]
    assert (rec.unit, rec.constraint, rec.action) == ("obstacles", "approach", "clamp")
    assert "hand-back torque" in rec.detail
    assert t.cmd[0] == cmd[0] and t.cmd[3] == cmd[3]
    assert abs(t.cmd[2]) < abs(cmd[2])
    assert s.obstacles._approach_violation(t.stop_box, p) is None
    # not a hand-back tick: the clamp does nothing (the box has no committed rates)
    t = handback_tick(p, v, w, cmd, est)
    t.handback = False
    assert m.clamp_handback_torque(t, lambda b: False) is None


vec = st.tuples(st.floats(-1.0, 1.0), st.floats(-1.0, 1.0), st.floats(-0.5, 0.5))


@SETTINGS
@given(
    p=st.tuples(st.floats(-0.3, 4.3), st.floats(-0.3, 4.3), st.floats(0.3, 1.8)),
    v=vec,
    w=st.tuples(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0), st.floats(-1.0, 1.0)),
    torque=st.tuples(st.floats(-3e-3, 3e-3), st.floats(-3e-3, 3e-3), st.floats(-1e-3, 1e-3)),
    est_torque=st.tuples(st.floats(-3e-3, 3e-3), st.floats(-3e-3, 3e-3)),
    thrust=st.floats(0.1, 0.55),
)
def test_handback_torque_clamp_is_judged_by_the_same_box_and_test(p, v, w, torque, est_torque, thrust):
    s = fresh_shield()
    m = s.model
    cmd = [thrust, *torque]
    est = [m.weight, est_torque[0], est_torque[1], 0.0]
    t = handback_tick(p, v, w, cmd, est)

    def fits(b):
        return s.obstacles._approach_violation(b, p) is None and s.geofence.x_lo <= b[0] and b[1] <= s.geofence.x_hi \
            and s.geofence.y_lo <= b[2] and b[3] <= s.geofence.y_hi

    before_box = m.stopping_box(t)
    t.stop_box = before_box
    out = m.clamp_handback_torque(t, fits)
    if out is None:  # nothing moved: the command and its box are as they were
        assert t.cmd == cmd and t.stop_box == before_box
        return
    kept, _ = out
    assert kept[0] == cmd[0] and kept[3] == cmd[3]  # thrust and yaw untouched
    for i in (1, 2):  # roll and pitch between the motors' and the command's, toward the motors'
        assert min(cmd[i], est[i]) - 1e-15 <= kept[i] <= max(cmd[i], est[i]) + 1e-15
    assert t.cmd == cmd  # the tick's command is the caller's to replace
    judged = handback_tick(p, v, w, kept, est)
    box = m.stopping_box(judged)
    assert tuple(box) == tuple(t.stop_box)  # the box left on the tick is the kept command's
    assert fits(box)


# ---- the creep --------------------------------------------------------------------------------------------------
def creep_tick(s: Shield, p, goal, predicted=False, age=0.0) -> Tick:
    t = make_tick(p, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), [s.model.weight, 0.0, 0.0, 0.0])
    t.subgoal_w = tuple(goal)
    t.subgoal_ok = True
    t.subgoal_age = age
    t.predicted = predicted
    return t


def clearance(s: Shield, q) -> float:
    return s._clearance_m(q)


@SETTINGS
@given(
    start=st.tuples(st.floats(0.0, 4.0), st.floats(0.0, 4.0), st.floats(0.35, 1.8)),
    goal=st.tuples(st.floats(-0.5, 4.5), st.floats(-0.5, 4.5), st.floats(0.0, 2.0)),
)
def test_creep_never_comes_closer_to_a_box_and_stays_a_safe_hold(start, goal):
    s = fresh_shield(creep_speed_mps=0.3)
    h0 = s.safe_position(list(start))
    g, _ = s.filter_subgoal(goal, h0, 0.0)  # as the skill node passes it: filtered on arrival
    goal = [float(c) for c in g]
    s._hold_target = list(h0)
    s._reason_unit = s.obstacles
    floor = min(s._creep_margin, clearance(s, h0))
    step = s._creep_step_m
    prev = list(h0)
    for _ in range(1000):
        s._creep_target(creep_tick(s, prev, goal))
        q = s._hold_target
        assert math.dist(prev, q) <= step + 1e-12
        assert s.safe_position(q) == q  # every target is one a hold could have had
        assert clearance(s, q) >= floor - 1e-12
        if q == prev:
            break
        prev = list(q)
    # it stops only at the subgoal or where the next step would come closer to a box than allowed
    d = math.dist(s._hold_target, goal)
    if d > 1e-9:
        h = s._hold_target
        nxt = list(goal) if d <= step else [h[i] + step / d * (goal[i] - h[i]) for i in range(3)]
        assert clearance(s, nxt) < floor or s.safe_position(nxt) != nxt


def test_creep_carries_a_hold_beside_a_pillar_to_the_goal():
    s = fresh_shield(creep_speed_mps=0.3)
    # as safety_eval seed 0, episode 35: a goal 0.22 m from pillar_b (x, y 2.8-3.2), the hold 0.31 m short of it
    goal = [2.78, 3.42, 1.16]
    s._hold_target = s.safe_position([2.47, 3.45, 1.17])
    s._reason_unit = s.obstacles
    for k in range(200):
        s._creep_target(creep_tick(s, s._hold_target, goal))
    assert s._hold_target == goal
    # from the south-west the straight way dips under the subgoal's clearance past the pillar's corner: the creep
    # goes as far as it keeps it and stops there (the policy is judged again every tick)
    s._hold_target = s.safe_position([2.47, 3.22, 1.17])
    for k in range(200):
        s._creep_target(creep_tick(s, s._hold_target, goal))
    assert 0.1 < math.dist(s._hold_target, [2.47, 3.22, 1.17]) and s._hold_target != goal
    assert clearance(s, s._hold_target) >= s._creep_margin


@pytest.mark.parametrize("case", ["input_unit", "predicted", "stale_subgoal", "no_subgoal", "off"])
def test_creep_does_not_move_the_hold_when_it_must_not(case):
    s = fresh_shield(creep_speed_mps=0.0 if case == "off" else 0.3)
    goal = [2.0, 2.0, 1.0]
    h0 = s.safe_position([1.0, 2.0, 1.0])
    s._hold_target = list(h0)
    s._reason_unit = s.watchdog if case == "input_unit" else s.geofence
    t = creep_tick(s, h0, goal, predicted=case == "predicted", age=60.0 if case == "stale_subgoal" else 0.0)
    if case == "no_subgoal":
        t.subgoal_w = None
    if case == "off":
        s._backup_command(t, "backup_hold", 0.0)  # the backup's path: no creep at speed 0
    else:
        s._creep_target(t)
    assert s._hold_target == h0


def test_no_creep_with_the_range_source_listed():
    # a room nobody mapped: nothing says the way to the subgoal is clear
    from robot_hrl.world.rooms import generate_room
    from sim.navigate_shield import range_shield_config

    room = generate_room("sparse", 1_000_000_000, "eval")
    cfg = range_shield_config(CRAZYFLIE_2X)
    cfg = cfg.model_copy(update={"backup": cfg.backup.model_copy(update={"creep_speed_mps": 0.3})})
    s = Shield(cfg, CRAZYFLIE_2X, room.world.model_copy(update={"obstacles": ()}), subgoal_radius_m=1.0)
    assert "range_obstacles" in s._by_name
    h0 = s.safe_position([room.start_w[0], room.start_w[1], 1.0])
    s._hold_target = list(h0)
    s._reason_unit = s.unit("range_obstacles")
    s._creep_target(creep_tick(s, h0, [h0[0] + 0.5, h0[1], h0[2]]))
    assert s._hold_target == h0


# ---- closed loop: the shipped policy ----------------------------------------------------------------------------
def test_shipped_policy_ends_no_episode_held_where_it_reaches_its_goal_unshielded():
    pytest.importorskip("torch")
    from sim import safety_eval

    last_modes: list = []

    def observe(k, env, outputs, shields):
        if k == 499:
            last_modes[:] = [o.mode for o in outputs]

    shielded = safety_eval.run("trained", episodes=60, episode_s=5.0, seed=0, observer=observe)
    twin = safety_eval.run("trained", episodes=60, episode_s=5.0, seed=0, shielded=False)
    assert shielded.violations == 0, shielded.summary()
    held = [i for i, m in enumerate(last_modes) if m != "policy" and twin.episode_success[i]]
    assert held == [], f"episodes still held at the end that succeed unshielded: {held}"
    lost = [i for i in range(60) if twin.episode_success[i] and not shielded.episode_success[i]]
    assert lost == [], shielded.summary()


# ---- the evaluation in flight: --warm-s -----------------------------------------------------------------------------
def test_warm_start_counts_the_timed_episode_with_the_estimate_converged():
    """``safety_eval.run(warm_s=...)``: the same shield watches the policy hold its start first; the timed episode then
    begins with every episode's hover-thrust estimate converged, and only its ticks are counted."""
    pytest.importorskip("torch")
    from sim import safety_eval

    first: list = []

    def observe(k, env, outputs, shields):
        if k == 0:
            first[:] = [s._by_name["hover_thrust"].converged for s in shields]
            assert env.episode_length_buf.numel() == 20

    res = safety_eval.run("trained", episodes=20, episode_s=1.0, seed=3, observer=observe, warm_s=2.5)
    assert res.ticks == 20 * 100  # the warm-up's 250 ticks are not counted
    assert sum(res.mode_ticks.values()) == res.ticks
    assert first and all(first), first
    assert res.violations == 0, res.summary()
    cold: list = []

    def observe_cold(k, env, outputs, shields):
        if k == 0:
            cold[:] = [s._by_name["hover_thrust"].converged for s in shields]

    safety_eval.run("trained", episodes=20, episode_s=1.0, seed=3, observer=observe_cold)
    assert not any(cold)  # a fresh shield at the spawn knows no airframe


@pytest.mark.parametrize("policy, warm, fix", [("adversary", 1.0, "trained and pd"), ("trained", -1.0, ">= 0"),
                                               ("trained", float("nan"), ">= 0")])
def test_warm_start_refuses_what_it_cannot_mean(policy, warm, fix):
    pytest.importorskip("torch")
    from sim import safety_eval

    with pytest.raises(ValueError, match=fix):
        safety_eval.run(policy, episodes=2, episode_s=0.1, seed=0, warm_s=warm)

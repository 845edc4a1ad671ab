"""Fault cases through the composed shield: odometry stops, NaN/inf policy output, a bad
subgoal, a missed deadline, low battery, the emergency stop; and the records and diagnostics."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.safety import ERROR, OK, STALE, WARN, Shield, ShieldInput, load_shield_config
from robot_hrl.state import RobotState
from robot_hrl.world import load_world

WORLD_PATH = Path(__file__).resolve().parents[1] / "models" / "worlds" / "demo.yaml"
DT = 0.01


@lru_cache(maxsize=1)
def _inputs():
    return load_shield_config(), load_world(WORLD_PATH)


def make_shield() -> Shield:
    cfg, world = _inputs()
    return Shield(cfg, CRAZYFLIE_2X, world, subgoal_radius_m=1.0)


def hover_actions(shield: Shield) -> np.ndarray:
    return np.array([shield.model.wrench_to_action(0, CRAZYFLIE_2X.weight_n), 0.0, 0.0, 0.0])


def state_at(position, stamp) -> RobotState:
    return RobotState(position_w=np.asarray(position, dtype=float), stamp_s=stamp)


def test_odometry_stops_hold_then_land_then_motors_off():
    s = make_shield()
    hover = hover_actions(s)
    pos = np.array([2.0, 2.3, 1.0])
    last = state_at(pos, 0.0)
    modes = []
    for k in range(100):  # 1 s nominal
        last = state_at(pos, k * DT)
        out = s.step(ShieldInput(k * DT, last, hover, subgoal_w=pos))
        assert out.mode == "policy"
    t_stop = 99 * DT
    reasons = set()
    k = 100
    while k < 100 + int(30 / DT):  # the odometry stops: the same old state keeps coming
        out = s.step(ShieldInput(k * DT, last, hover, subgoal_w=pos))
        modes.append(out.mode)
        reasons.add(out.reason)
        if out.mode == "motors_off":
            break
        k += 1
    assert "watchdog.stale_state" in reasons
    first_hold = modes.index("backup_hold")
    first_land = modes.index("backup_land")
    assert first_hold < first_land < modes.index("motors_off")
    # stale after state_timeout_s, brake without a position for the model's braking time (< hold_s), then land
    hold_s = s.watchdog.state_hold_s
    assert hold_s == pytest.approx(min(s.config.watchdog.hold_s, s.model.blind_brake_s))
    assert (first_land - first_hold) * DT == pytest.approx(hold_s, abs=2 * DT)
    assert (100 + first_hold) * DT - t_stop == pytest.approx(s.config.watchdog.state_timeout_s, abs=2 * DT)
    # landed on the dead-reckoned state (descending at land speed from 1 m) well before the timeout
    assert (len(modes) - first_land) * DT < 1.5 * 1.0 / s.config.backup.land_speed_mps + 1.0  # the blind deadline
    assert s.predictor.p[2] <= s.config.backup.touchdown_altitude_m + 0.05
    # latched: fresh odometry again does not restart the motors until the faults are reset
    out = s.step(ShieldInput(k * DT + DT, state_at([2.0, 2.3, 0.0], k * DT + DT), hover, subgoal_w=pos))
    assert out.mode == "motors_off"
    s.reset_faults()
    out = s.step(ShieldInput(k * DT + 2 * DT, state_at(pos, k * DT + 2 * DT), hover, subgoal_w=pos))
    assert out.mode != "motors_off"


def test_dead_reckoning_starts_from_the_commands_sent_since_the_last_measurement():
    # The odometry stops; for state_timeout_s the last measurement still counts as fresh and the
    # policy keeps commanding (here a roll torque). When the state goes stale, the prediction must
    # include those commands: it starts where the robot is now, not where it was measured.
    s = make_shield()
    hover = hover_actions(s)
    roll = hover.copy()
    roll[1] = 0.3  # a moderate roll torque, within the shield's limits
    pos = np.array([2.0, 2.3, 1.0])
    before = []
    for k in range(50):
        last = state_at(pos, k * DT)
        before.append(s.step(ShieldInput(k * DT, last, hover, subgoal_w=pos)).wrench.copy())
    sent = [before.pop()]  # the output of the tick the latest state arrived on is sent after it
    k = 50
    while True:
        out = s.step(ShieldInput(k * DT, last, roll, subgoal_w=pos))
        if out.mode != "policy":
            break
        sent.append(out.wrench.copy())
        k += 1
    assert out.reason == "watchdog.stale_state" and len(sent) >= 3
    # the same replay by hand: from the measured state, through every command sent since
    from robot_hrl.robots.quadrotor.shield import StatePredictor

    ref = StatePredictor(s.model)
    ref.reset(pos, [0, 0, 0], [1, 0, 0, 0], [0, 0, 0], before[-s.WARMUP_TICKS:])  # the chain settled on the outputs before
    for wrench in sent:
        ref.step(wrench)
    ref.step(out.wrench)  # and this tick's backup command
    assert s.predictor.w[0] > 0.1  # the roll the policy started is known to the dead reckoning
    assert np.allclose(s.predictor.w, ref.w, atol=1e-9) and np.allclose(s.predictor.q, ref.q, atol=1e-9)


def test_odometry_that_comes_back_during_the_hold_returns_control():
    s = make_shield()
    hover = hover_actions(s)
    pos = [2.0, 2.3, 1.0]
    st = state_at(pos, 0.0)
    s.step(ShieldInput(0.0, st, hover, subgoal_w=np.array(pos)))
    out = s.step(ShieldInput(0.2, st, hover, subgoal_w=np.array(pos)))
    assert out.mode == "backup_hold" and out.reason == "watchdog.stale_state"
    modes = [s.step(ShieldInput(0.2 + k * DT, state_at(pos, 0.2 + k * DT), hover, subgoal_w=np.array(pos))).mode for k in range(1, 60)]
    assert modes[-1] == "policy"


def test_no_state_at_all_is_stale_and_still_gives_a_finite_command():
    s = make_shield()
    out = s.step(ShieldInput(0.0, None, hover_actions(s)))
    assert out.mode == "backup_hold" and out.reason == "watchdog.stale_state"
    assert np.all(np.isfinite(out.actions))
    assert s.watchdog.status()[0] == STALE


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_policy_output_goes_to_the_backup(bad):
    s = make_shield()
    pos = np.array([2.0, 2.3, 1.0])
    actions = hover_actions(s)
    actions[1] = bad
    out = s.step(ShieldInput(0.0, state_at(pos, 0.0), actions, subgoal_w=pos))
    assert out.mode == "backup_hold" and out.reason == "watchdog.non_finite_output"
    assert np.all(np.isfinite(out.actions)) and np.all(np.abs(out.actions) <= 1)
    rec = out.interventions[-1]
    assert rec.unit == "watchdog" and rec.constraint == "non_finite_output" and rec.action == "backup_hold"
    assert np.isnan(rec.before[1]) or np.isinf(rec.before[1])
    # at hover, the backup commands hover
    assert out.wrench[0] == pytest.approx(CRAZYFLIE_2X.weight_n, rel=1e-6)
    assert s.watchdog.counters.by_constraint["non_finite_output"] == 1


@pytest.mark.parametrize("recover_s", [None, 0.1, 0.2])
def test_one_rejected_tick_holds_for_the_debounce_and_no_longer(recover_s):
    # backup.recover_s is a debounce: after one rejected tick the policy's (safe) command gets control back once it
    # has been judged safe that long, not later (every single-tick rejection costs the policy recover_s of flight:
    # issue #16, benchmarks/README.md "Issue #16: the hold's debounce"); None: the shipped YAML's value
    cfg, world = _inputs()
    if recover_s is not None:
        cfg = cfg.model_copy(update={"backup": cfg.backup.model_copy(update={"recover_s": recover_s})})
    s = Shield(cfg, CRAZYFLIE_2X, world, subgoal_radius_m=1.0)
    pos = np.array([2.0, 2.3, 1.0])
    hover = hover_actions(s)
    for k in range(50):
        assert s.step(ShieldInput(k * DT, state_at(pos, k * DT), hover, subgoal_w=pos)).mode == "policy"
    bad = hover.copy()
    bad[1] = np.nan
    assert s.step(ShieldInput(50 * DT, state_at(pos, 50 * DT), bad, subgoal_w=pos)).mode == "backup_hold"
    held = 1
    k = 51
    while s.step(ShieldInput(k * DT, state_at(pos, k * DT), hover, subgoal_w=pos)).mode == "backup_hold":
        held += 1
        k += 1
        assert k < 200, "the policy never got control back"
    # judged safe from tick 51 on; control returns on the tick at which recover_s has passed since then
    assert held == 1 + round(cfg.backup.recover_s / DT)


def test_missed_inference_deadline_goes_to_the_backup_for_that_tick():
    s = make_shield()
    pos = np.array([2.0, 2.3, 1.0])
    out = s.step(ShieldInput(0.0, state_at(pos, 0.0), hover_actions(s), subgoal_w=pos, inference_s=0.05))
    assert out.mode == "backup_hold" and out.reason == "watchdog.inference_deadline"
    assert "ms" in out.interventions[-1].detail


def test_subgoal_outside_the_fence_is_clamped_and_reported():
    s = make_shield()
    pos = np.array([4.0, 2.0, 1.0])
    safe, records = s.filter_subgoal(np.array([9.0, 2.0, 1.0]), pos, 3.5)
    assert safe[0] <= s.world.bounds.max[0] - s.config.subgoal.fence_margin_m - CRAZYFLIE_2X.collision_radius_m + 1e-9
    assert [r.constraint for r in records] == ["fence"]
    assert records[0].before == (9.0, 2.0, 1.0) and records[0].after == tuple(safe) and records[0].time_s == 3.5
    assert s.subgoal.counters.by_constraint["fence"] == 1 and s.log[-1] is records[0]


def test_subgoal_inside_an_obstacle_is_pushed_out_and_reported():
    s = make_shield()
    pos = np.array([1.0, 1.5, 1.0])
    safe, records = s.filter_subgoal(np.array([1.5, 1.5, 1.0]), pos, 0.0)  # pillar_a's centre
    assert not s.world.collides(safe, margin=CRAZYFLIE_2X.collision_radius_m + s.config.subgoal.obstacle_margin_m - 1e-3)
    assert "obstacle" in [r.constraint for r in records]


def test_subgoal_below_the_floor_far_away_and_nan_are_clamped():
    s = make_shield()
    pos = np.array([2.0, 2.3, 1.0])
    safe, records = s.filter_subgoal(np.array([2.0, 2.3, -3.0]), pos, 0.0)
    assert safe[2] >= s.config.subgoal.min_altitude_m and [r.constraint for r in records] == ["altitude", "radius"] or safe[2] >= 0.3
    safe, records = s.filter_subgoal(np.array([2.0, 4.4, 1.0]), np.array([2.0, 2.3, 1.0]), 0.0)
    assert np.linalg.norm(safe - pos) <= 1.0 + 1e-9 and "radius" in [r.constraint for r in records]
    safe, records = s.filter_subgoal(np.array([np.nan, 1.0, 1.0]), pos, 0.0)
    assert np.allclose(safe, pos) and records[0].constraint == "non_finite"


@pytest.mark.parametrize("bad", [np.zeros(2), np.zeros((3, 1)), "abc"])
def test_subgoal_of_the_wrong_shape_is_an_error(bad):
    s = make_shield()
    with pytest.raises((ValueError, TypeError)):
        s.filter_subgoal(bad, np.zeros(3), 0.0)


def test_wrong_action_size_is_an_error():
    s = make_shield()
    with pytest.raises(ValueError, match="4 entries"):
        s.step(ShieldInput(0.0, state_at([2, 2, 1], 0.0), np.zeros(3)))


def test_stale_subgoal_holds_then_lands():
    s = make_shield()
    pos = np.array([2.0, 2.3, 1.0])
    timeout = s.config.watchdog.subgoal_timeout_s
    out = s.step(ShieldInput(timeout + 0.5, state_at(pos, timeout + 0.5), hover_actions(s), subgoal_w=pos, subgoal_stamp_s=0.0))
    assert out.mode == "backup_hold" and out.reason == "watchdog.stale_subgoal"
    t = timeout + 0.5 + s.config.watchdog.hold_s + 0.1
    out = s.step(ShieldInput(t, state_at(pos, t), hover_actions(s), subgoal_w=pos, subgoal_stamp_s=0.0))
    assert out.mode == "backup_land"


def test_low_battery_holds_then_lands_and_critical_lands_at_once():
    s = make_shield()
    b = s.config.battery
    pos = np.array([2.0, 2.3, 1.0])
    low = (b.hold_voltage_v + b.land_voltage_v) / 2
    modes = []
    for k in range(int((b.debounce_s + b.hold_s + 0.5) / DT)):
        out = s.step(ShieldInput(k * DT, state_at(pos, k * DT), hover_actions(s), subgoal_w=pos, battery_v=low))
        modes.append(out.mode)
    assert modes[0] == "policy"
    assert modes.index("backup_hold") * DT == pytest.approx(b.debounce_s, abs=2 * DT)
    assert modes.index("backup_land") * DT == pytest.approx(b.debounce_s + b.hold_s, abs=2 * DT)
    assert s.battery.status()[0] == ERROR
    s2 = make_shield()
    for k in range(int((b.debounce_s + 0.1) / DT)):
        out = s2.step(ShieldInput(k * DT, state_at(pos, k * DT), hover_actions(s2), subgoal_w=pos, battery_v=b.land_voltage_v - 0.2))
    assert out.mode == "backup_land" and out.reason == "battery.low_battery_land"


def test_estop_turns_motors_off_latches_and_resets_only_explicitly():
    s = make_shield()
    pos = np.array([2.0, 2.3, 1.0])
    hover = hover_actions(s)
    assert s.step(ShieldInput(0.0, state_at(pos, 0.0), hover, subgoal_w=pos)).mode == "policy"
    s.estop("operator", now_s=0.01)
    for k in range(1, 200):
        out = s.step(ShieldInput(k * DT, state_at(pos, k * DT), hover, subgoal_w=pos))
        assert out.mode == "motors_off" and out.reason == "estop.emergency_stop"
        assert out.wrench.tolist() == [0.0, 0.0, 0.0, 0.0]
        assert out.actions[0] == -1.0 and out.actions[1:].tolist() == [0.0, 0.0, 0.0]
    s.reset_faults()  # not enough
    assert s.step(ShieldInput(2.0, state_at(pos, 2.0), hover, subgoal_w=pos)).mode == "motors_off"
    assert s.estopped and s.estop_unit.status()[0] == ERROR
    s.reset_estop()
    out = s.step(ShieldInput(2.01, state_at(pos, 2.01), hover, subgoal_w=pos))
    assert out.mode == "policy" and not s.estopped
    assert s.estop_unit.counters.interventions == 200


def test_diagnostics_map_onto_diagnostic_array():
    s = make_shield()
    pos = np.array([2.0, 2.3, 1.0])
    s.step(ShieldInput(0.0, state_at(pos, 0.0), hover_actions(s), subgoal_w=pos))
    diags = s.diagnostics()
    assert [d["name"] for d in diags] == ["shield"] + [f"shield/{u.name}" for u in s.units]
    for d in diags:
        assert set(d) == {"name", "level", "message", "hardware_id", "values"}
        assert d["level"] in (OK, WARN, ERROR, STALE) and isinstance(d["level"], int)
        assert d["hardware_id"] == CRAZYFLIE_2X.name
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in d["values"].items())
    assert all(d["level"] == OK for d in diags)
    nan = np.full(4, np.nan)
    s.step(ShieldInput(0.01, state_at(pos, 0.01), nan, subgoal_w=pos))
    by_name = {d["name"]: d for d in s.diagnostics()}
    assert by_name["shield"]["level"] == WARN and by_name["shield"]["values"]["mode"] == "backup_hold"
    assert by_name["shield/watchdog"]["level"] == WARN
    assert by_name["shield/watchdog"]["values"]["count.non_finite_output"] == "1"
    s.estop()
    s.step(ShieldInput(0.02, state_at(pos, 0.02), nan, subgoal_w=pos))
    by_name = {d["name"]: d for d in s.diagnostics()}
    assert by_name["shield/estop"]["level"] == ERROR and by_name["shield"]["level"] == ERROR
    c = s.counters()
    assert c["ticks"] == 3 and c["mode_ticks"]["motors_off"] == 1 and c["units"]["estop"]["interventions"] == 1


def test_every_intervention_is_recorded_with_unit_constraint_before_after_and_time():
    s = make_shield()
    pos = np.array([2.0, 2.3, 1.0])
    actions = np.array([1.0, 1.0, -1.0, 1.0])  # full torques while already spinning: clamped
    prev_log = len(s.log)
    state = state_at(pos, 0.5)
    state.angular_velocity_b = np.array([4.0, -4.0, 0.0])
    out = s.step(ShieldInput(0.5, state, actions, subgoal_w=pos))
    assert out.interventions
    for rec in out.interventions:
        assert rec.time_s == 0.5 and rec.unit and rec.constraint in next(u for u in s.units if u.name == rec.unit).constraints
        assert rec.before != rec.after
        assert set(rec.as_dict()) == {"time_s", "unit", "constraint", "before", "after", "action", "detail"}
    assert len(s.log) == prev_log + len(out.interventions)


def test_requested_landing_lands_then_cuts_the_motors_and_latches():
    s = make_shield()
    pos = np.array([2.0, 2.3, 1.0])
    assert s.step(ShieldInput(0.0, state_at(pos, 0.0), hover_actions(s), subgoal_w=pos)).mode == "policy"
    s.request_land(0.0, "operator")
    out = s.step(ShieldInput(0.01, state_at(pos, 0.01), hover_actions(s), subgoal_w=pos))
    assert out.mode == "backup_land" and out.reason == "command.land_request"
    assert out.wrench[0] < CRAZYFLIE_2X.weight_n  # descending
    out = s.step(ShieldInput(0.02, state_at([2.0, 2.3, 0.01], 0.02), hover_actions(s), subgoal_w=pos))
    assert out.mode == "motors_off"
    out = s.step(ShieldInput(0.03, state_at(pos, 0.03), hover_actions(s), subgoal_w=pos))
    assert out.mode == "motors_off"
    s.reset_faults()
    assert s.step(ShieldInput(0.04, state_at(pos, 0.04), hover_actions(s), subgoal_w=pos)).mode == "policy"

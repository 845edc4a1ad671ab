"""Odometry validation in one place (robot_hrl/safety/units/odometry.py): each refusal named and counted,
through the unit, the skill core (the real policy and shield) and the node's decoder on real CDR bytes.
Streams of plausible samples with one hostile sample at a random moment (hypothesis) are refused exactly
at that sample, and the state the skill flies on stays the last good one."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_hrl.msgs import odometry_from_state
from robot_hrl.nodes.skill_codecs import OdometryDecoder
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.safety import Shield
from robot_hrl.state import RobotState
from robot_hrl.world import load_world

ROOT = Path(__file__).resolve().parents[1]
WORLD = load_world(ROOT / "models" / "worlds" / "demo.yaml")
DT = 0.01


def _shield() -> Shield:
    return Shield.from_yaml(None, CRAZYFLIE_2X, WORLD, 1.0)


def _state(p, v, t) -> RobotState:
    return RobotState(position_w=np.asarray(p, float), linear_velocity_w=np.asarray(v, float), stamp_s=t)


def _flight(n: int, seed: int):
    """A smooth flight at up to 1.5 m/s: (state, now) per sample."""
    rng = np.random.default_rng(seed)
    p, v = np.array([1.0, 1.0, 1.0]), np.zeros(3)
    out = []
    for k in range(n):
        a = rng.uniform(-8, 8, size=3)
        v = np.clip(v + a * DT, -1.5, 1.5)
        p = p + v * DT
        out.append((_state(p, v, k * DT), k * DT))
    return out


HOSTILE = {
    "future_stamp": lambda s, now: _state(s.position_w, s.linear_velocity_w, now + 1000.0),
    "non_monotonic_stamp": lambda s, now: _state(s.position_w + 0.001, s.linear_velocity_w, s.stamp_s - 0.05),
    "position_jump": lambda s, now: _state(s.position_w + np.array([1.5, 0.0, 0.0]), s.linear_velocity_w, s.stamp_s),
    "velocity_jump": lambda s, now: _state(s.position_w, s.linear_velocity_w + np.array([0.0, 3.0, 0.0]), s.stamp_s),
}


def test_a_smooth_flight_is_accepted_whole():
    unit = _shield().odometry
    for s, now in _flight(300, 0):
        assert unit.judge(s, now, "odom", "base_link") is None
    assert unit.accepted == 300 and unit.counters.interventions == 0


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(sorted(HOSTILE)), at=st.integers(5, 150), seed=st.integers(0, 2**16))
def test_a_hostile_sample_at_a_random_moment_is_refused_by_name(kind, at, seed):
    unit = _shield().odometry
    flight = _flight(160, seed)
    latches = kind in ("position_jump", "velocity_jump")
    for k, (s, now) in enumerate(flight):
        if k == at:
            bad = HOSTILE[kind](s, now)
            refusal = unit.judge(bad, now, "odom", "base_link")
            assert refusal is not None and refusal.startswith(kind + ":"), (kind, refusal)
            assert unit.counters.by_constraint[kind] == 1
        verdict = unit.judge(s, now, "odom", "base_link")
        if latches and k >= at:  # a jump latches: the source is not trusted again until the faults are reset
            assert verdict.startswith(kind + ":")
        else:
            assert verdict is None, (k, unit.last_rejection)
    assert unit.counters.interventions == (1 + len(flight) - at if latches else 1)


def test_frames_are_judged_and_named():
    unit = _shield().odometry
    s, now = _flight(1, 1)[0]
    assert unit.judge(s, now, "map", "base_link").startswith("frame_id:")
    assert unit.judge(s, now, "odom", "imu_link").startswith("child_frame_id:")
    assert unit.judge(s, now, "odom\u200b", "base_link").startswith("frame_id: pose in frame 'odom\\u200b'")
    assert unit.judge(s, now, None, None) is None  # not known to the caller: not judged
    assert unit.counters.by_constraint["frame_id"] == 2 and unit.counters.by_constraint["child_frame_id"] == 1


def test_an_exact_repeat_is_not_news_and_not_counted():
    unit = _shield().odometry
    s, now = _flight(1, 2)[0]
    assert unit.judge(s, now) is None
    assert unit.judge(s, now + DT) == ""  # a lockstep simulator re-sends the period's odometry
    assert unit.counters.interventions == 0


def test_a_teleported_source_stays_refused_until_faults_are_reset():
    s = _shield()
    unit = s.odometry
    flight = _flight(50, 3)
    for st_, now in flight[:20]:
        assert unit.judge(st_, now) is None
    for st_, now in flight[20:]:  # the source jumped 2 m and goes on from there
        moved = _state(st_.position_w + np.array([0.0, 2.0, 0.0]), st_.linear_velocity_w, st_.stamp_s)
        assert unit.judge(moved, now).startswith("position_jump:")
    assert unit.distrusted == "position_jump"
    s.reset_faults()  # a new flight: judged on its own again
    assert unit.judge(moved, flight[-1][1]) is None


def test_a_dropout_latches_nothing_and_the_sample_after_it_is_judged_over_the_gap():
    unit = _shield().odometry
    flight = _flight(120, 4)
    for st_, now in flight[:20]:
        assert unit.judge(st_, now) is None
    for st_, now in flight[80:]:  # 0.6 s without samples, then the same source again
        assert unit.judge(st_, now) is None


def test_the_skill_core_flies_on_the_last_good_sample_and_names_the_refusals(repo_root=ROOT):
    from robot_hrl.nodes.skill_core import SkillCore
    from robot_hrl.runtime import OnnxPolicy

    policy = OnnxPolicy(ROOT / "models" / "crazyflie_goto.onnx", CRAZYFLIE_2X, provider="cpu")
    shield = Shield.from_yaml(None, CRAZYFLIE_2X, WORLD, policy.contract.subgoal_radius_m)
    core = SkillCore(policy, shield, WORLD)
    good = _state((1.0, 1.0, 1.0), (0, 0, 0), 0.0)
    assert core.on_state(good, 0.0, "odom", "base_link")
    core.on_subgoal((1.2, 1.0, 1.0), 0.0)
    assert not core.on_state(_state((1.0, 1.0, 1.0), (0, 0, 0), 1000.0), 0.01, "odom", "base_link")
    assert not core.on_state(_state((2.5, 1.0, 1.0), (0, 0, 0), 0.01), 0.01, "odom", "base_link")
    assert core.state is good and core.odom_errors == 2 and core.last_odom_error.startswith("position_jump:")
    core.on_bad_odometry("truncated CDR", 0.02)
    out = core.tick(0.02)
    diag = {d["name"]: d for d in shield.diagnostics()}["shield/odometry"]
    assert diag["values"]["count.future_stamp"] == "1" and diag["values"]["count.position_jump"] == "1"
    assert diag["values"]["count.malformed"] == "1" and "refused" in diag["message"]
    assert out.mode in ("policy", "backup_hold")
    # the stale good sample ages: the watchdog takes over on its own clock
    for k in range(3, 20):
        out = core.tick(k * DT)
    assert out.mode != "policy" and shield.reason == "watchdog.stale_state"


@settings(max_examples=30, deadline=None)
@given(frame=st.text(min_size=1, max_size=20), child=st.text(min_size=1, max_size=20),
       t=st.floats(0, 1e6, allow_nan=False))
def test_the_decoder_reads_the_frames_the_generic_deserializer_reads(frame, child, t):
    msg = odometry_from_state(_state((1, 2, 3), (0.1, 0.2, 0.3), t), frame_id=frame, child_frame_id=child)
    assert OdometryDecoder.frames(msg.serialize()) == (frame, child)


def test_the_watchdog_takes_a_future_stamp_for_stale():
    s = _shield()
    from robot_hrl.safety import ShieldInput

    hover = np.array([s.model.wrench_to_action(0, CRAZYFLIE_2X.weight_n), 0.0, 0.0, 0.0])
    out = s.step(ShieldInput(0.0, _state((1, 1, 1), (0, 0, 0), 1000.0), hover, subgoal_w=np.array([1.0, 1.0, 1.0])))
    assert out.mode == "backup_hold" and out.reason == "watchdog.stale_state"
    assert math.isinf(s.watchdog.state_age_s) or s.watchdog.state_age_s < 0

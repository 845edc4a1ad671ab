"""A frozen pose re-sent with fresh stamps (issue #16): a hung estimator, or a source replaying its last pose
(or pose and twist) with new, monotonic, plausible stamps. The odometry unit (robot_hrl/safety/units/odometry.py)
must not let it refresh the state (the watchdog's loss-of-state stop follows), must name it (``frozen_state``,
``pose_velocity_mismatch``) and count it; and must not trip on a robot at rest on the ground, on PyBullet's
states in flight or at rest, or on the take-off from rest (the nominal mission: tests/test_fault_drill.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.safety import Shield
from robot_hrl.state import RobotState
from robot_hrl.world import load_world

ROOT = Path(__file__).resolve().parents[1]
WORLD = load_world(ROOT / "models" / "worlds" / "demo.yaml")
DT = 0.01


def _shield() -> Shield:
    return Shield.from_yaml(None, CRAZYFLIE_2X, WORLD, 1.0)


def _state(p, v, t, q=(1.0, 0.0, 0.0, 0.0)) -> RobotState:
    return RobotState(position_w=np.asarray(p, float), quat_wxyz=np.asarray(q, float),
                      linear_velocity_w=np.asarray(v, float), stamp_s=t)


def _flight(n: int, seed: int, speed: float = 1.5):
    """A smooth flight (position the exact integral of a piecewise-linear velocity): (state, now) per sample."""
    rng = np.random.default_rng(seed)
    p, v = np.array([1.0, 1.0, 1.0]), np.zeros(3)
    out = []
    for k in range(n):
        v_new = np.clip(v + rng.uniform(-8, 8, size=3) * DT, -speed, speed)
        p = p + 0.5 * (v + v_new) * DT
        v = v_new
        out.append((_state(p, v, k * DT), k * DT))
    return out


def test_the_shipped_config_names_the_new_checks():
    unit = _shield().odometry
    assert {"frozen_state", "pose_velocity_mismatch"} <= set(unit.constraints)
    assert unit.frozen_after_s <= _shield().watchdog.state_timeout + 1e-12


@settings(max_examples=25, deadline=None)
@given(at=st.integers(5, 150), seed=st.integers(0, 2**16), twist=st.booleans())
@example(at=115, seed=351, twist=False)  # frozen 9 cm above the floor under a live 1.6 m/s twist: not at rest
def test_a_pose_frozen_at_a_random_moment_is_not_news_then_refused_by_name(at, seed, twist):
    """From the first repeat the state is not refreshed; past frozen_after_s the repeats are refused as
    frozen_state (counted, latched). ``twist``: the twist is replayed too, else it stays live."""
    unit = _shield().odometry
    flight = _flight(220, seed)
    frozen = flight[at][0]
    named = None
    for k, (s, now) in enumerate(flight):
        if k <= at:
            assert unit.judge(s, now, "odom", "base_link") is None, (k, unit.last_rejection)
            continue
        sample = _state(frozen.position_w, frozen.linear_velocity_w if twist else s.linear_velocity_w, now)
        verdict = unit.judge(sample, now, "odom", "base_link")
        assert verdict is not None, f"a replayed pose {k - at} samples after the freeze was taken as news"
        if verdict and named is None:
            named = k
            assert verdict.split(":")[0] in ("frozen_state", "velocity_jump", "pose_velocity_mismatch"), verdict
    assert named is not None and (named - at) * DT <= unit.frozen_after_s + 1.5 * DT, (named, at)
    assert unit.distrusted is not None and unit.accepted == at + 1
    assert sum(unit.counters.by_constraint.values()) == unit.counters.interventions >= 1
    assert int(unit.diagnostic("cf")["values"]["repeats"]) >= 1


@settings(max_examples=20, deadline=None)
@given(at=st.integers(5, 60), seed=st.integers(0, 2**16), speed=st.floats(0.4, 2.0))
def test_a_pose_faked_with_noise_while_the_twist_says_moving_is_a_mismatch(at, seed, speed):
    """No exact repeat (the replayed pose carries a millimetre of noise), the live twist says the robot moves
    at ``speed``: the position disagrees with the integrated velocity within the consistency window."""
    shield = _shield()
    unit = shield.odometry
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=3)
    direction[2] *= 0.2
    direction /= np.linalg.norm(direction)
    v = speed * direction
    p = np.array([2.0, 2.0, 1.0])
    t = 0.0
    for k in range(at):  # a straight flight at constant velocity: consistent
        assert unit.judge(_state(p + v * t, v, t), t, "odom", "base_link") is None
        t += DT
    frozen = p + v * (t - DT)
    refusal = None
    for k in range(int(2.5 / DT)):
        refusal = unit.judge(_state(frozen + rng.normal(scale=1e-3, size=3), v, t), t, "odom", "base_link")
        t += DT
        if refusal:
            break
    assert refusal and refusal.startswith("pose_velocity_mismatch:"), refusal
    window = unit.consistency_window_s
    # detected within two windows (the anchor renews once per window)
    assert k * DT <= 2 * window + 0.05, (k, speed)
    assert unit.counters.by_constraint["pose_velocity_mismatch"] == 1


def test_a_robot_at_rest_on_the_ground_repeats_its_pose_and_is_accepted():
    unit = _shield().odometry
    rest = (1.0, 1.0, WORLD.bounds.min[2] + CRAZYFLIE_2X.body_height_m / 2.0)
    for k in range(500):
        assert unit.judge(_state(rest, (0, 0, 0), k * DT), k * DT, "odom", "base_link") is None
    assert unit.counters.interventions == 0 and unit.accepted == 500


def test_a_pose_frozen_on_the_ground_while_the_motors_drive_is_refused_after_driving_frozen_s():
    """Frozen before take-off: the robot climbs while the source says it is still on the floor. Through the
    skill core (the real policy and shield): once the shield has driven the motors for driving_frozen_s with
    the pose unchanged, frozen_state, and the stop without a position takes over."""
    from robot_hrl.nodes.skill_core import SkillCore
    from robot_hrl.runtime import OnnxPolicy

    policy = OnnxPolicy(ROOT / "models" / "crazyflie_goto.onnx", CRAZYFLIE_2X, provider="cpu")
    shield = Shield.from_yaml(None, CRAZYFLIE_2X, WORLD, policy.contract.subgoal_radius_m)
    core = SkillCore(policy, shield, WORLD)
    rest = (1.0, 1.0, WORLD.bounds.min[2] + CRAZYFLIE_2X.body_height_m / 2.0)
    unit = shield.odometry
    for k in range(50):  # at rest, motors off: repeats accepted
        assert core.on_state(_state(rest, (0, 0, 0), k * DT), k * DT, "odom", "base_link")
        core.tick(k * DT)
    core.on_subgoal((1.0, 1.0, 1.0), 0.5)  # take off, on a source that stays frozen
    refused_at = None
    for k in range(50, 400):
        now = k * DT
        if not core.on_state(_state(rest, (0, 0, 0), now), now, "odom", "base_link") and refused_at is None:
            refused_at = now
        out = core.tick(now)
    assert refused_at is not None and core.last_odom_error.startswith("frozen_state:"), core.last_odom_error
    assert refused_at - 0.5 <= unit.driving_frozen_s + 0.1
    assert out.mode != "policy" and shield.reason == "watchdog.stale_state"


def test_a_frozen_pose_in_flight_stops_trusting_the_state_within_the_state_timeout():
    """Through the skill core: the first repeat does not refresh the state, so the watchdog's stale-state
    stop (brake without a position, then the timed descent) starts within state_timeout_s + one tick."""
    from robot_hrl.nodes.skill_core import SkillCore
    from robot_hrl.runtime import OnnxPolicy

    policy = OnnxPolicy(ROOT / "models" / "crazyflie_goto.onnx", CRAZYFLIE_2X, provider="cpu")
    shield = Shield.from_yaml(None, CRAZYFLIE_2X, WORLD, policy.contract.subgoal_radius_m)
    core = SkillCore(policy, shield, WORLD)
    flight = _flight(100, 7, speed=0.5)
    core.on_state(flight[0][0], 0.0, "odom", "base_link")
    core.on_subgoal((1.3, 1.2, 1.0), 0.0)
    freeze = 40
    stale_at = None
    for k, (s, now) in enumerate(flight):
        sample = s if k < freeze else _state(flight[freeze - 1][0].position_w, flight[freeze - 1][0].linear_velocity_w, now)
        core.on_state(sample, now, "odom", "base_link")
        out = core.tick(now)
        if stale_at is None and shield.reason == "watchdog.stale_state":
            stale_at = now
    t_freeze = flight[freeze - 1][1]
    assert stale_at is not None and stale_at - t_freeze <= shield.watchdog.state_timeout + 1.5 * DT, (stale_at, t_freeze)
    assert out.mode in ("backup_hold", "backup_land")
    diag = {d["name"]: d for d in shield.diagnostics()}["shield/odometry"]
    assert diag["values"]["count.frozen_state"] != "0"


def test_the_planner_and_the_skill_share_the_one_validator():
    """OdometryUnit.for_robot builds the same unit, from the same YAML, as the shield does (one home)."""
    from robot_hrl.safety.units.odometry import OdometryUnit

    alone = OdometryUnit.for_robot(CRAZYFLIE_2X, WORLD)
    shielded = _shield().odometry
    assert type(alone) is type(shielded)
    for name in ("frame_id", "child_frame_id", "future_tolerance_s", "position_margin_m", "velocity_margin_mps",
                 "max_acceleration_mps2", "rest_height_m", "frozen_after_s", "consistency_window_s",
                 "consistency_margin_m", "floor_z_m"):
        assert getattr(alone, name) == getattr(shielded, name), name


pybullet = pytest.importorskip("pybullet")


@pytest.mark.parametrize("thrust_scale", [0.0, 0.98, 1.02])
def test_pybullet_states_at_rest_and_in_flight_pass_the_validator(thrust_scale):
    """PyBullet's own states (the sim the drills and the node graph fly): at rest on the floor with the motors
    off, nearly hovering, and climbing: every sample accepted, nothing named."""
    from sim.pybullet import PyBulletQuadrotorSim

    from robot_hrl.msgs import odometry_from_state
    from robot_hrl.nodes.skill_codecs import OdometryDecoder

    robot = CRAZYFLIE_2X
    sim = PyBulletQuadrotorSim(robot, WORLD, control_hz=100.0, seed=1)
    try:
        start = np.array([1.0, 1.0, WORLD.bounds.min[2] + robot.body_height_m / 2.0])
        if thrust_scale:
            start[2] = 1.0
        state = sim.reset(start, np.array([1.0, 0.0, 0.0, 0.0]), motor_rpm=np.full(robot.num_rotors, robot.hover_rpm if thrust_scale else 0.0))
        unit = _shield().odometry
        decode = OdometryDecoder()
        hover = robot.mass_kg * 9.81 * thrust_scale
        for k in range(150):
            state.stamp_s = k * DT
            wire = odometry_from_state(state, frame_id="odom", child_frame_id="base_link").serialize()
            assert unit.judge(decode(wire), k * DT, *decode.frames(wire)) is None, (k, unit.last_rejection)
            state = sim.step(np.array([hover, 0.0, 0.0, 0.0]))
        assert unit.counters.interventions == 0
    finally:
        sim.close()

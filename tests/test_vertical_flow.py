"""The backup's vertical flow (robot_hrl/robots/quadrotor/shield/vertical_flow.py) against the real backup on PyBullet,
and the altitude unit's floor check built on it (``altitude.flow_check``).

The flow claims a lower bound: the lowest height the robot reaches when a command flies one tick and the backup then
holds, on every airframe the model allows. benchmarks/bench_vertical_flow.py flies exactly that on PyBullet's
randomized airframes (the training's ranges: mass 27-36 g, rotors 0.9-1.1, motors 0.02-0.15 s, 0-1 tick of latency, the
steady disturbance, the battery) with the real ``BackupController`` holding the target the shield sets, and compares
with the flow from the same state; the test runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.robots.quadrotor.shield.backup import BackupController, vertical_accel
from robot_hrl.safety import Shield, load_shield_config
from robot_hrl.world import load_world
from tests.test_safety_units import make_tick

REPO = Path(__file__).resolve().parents[1]
WORLD = REPO / "models" / "worlds" / "demo.yaml"


def _shield(flow: bool = True) -> Shield:
    cfg = load_shield_config()
    cfg = cfg.model_copy(update={"altitude": cfg.altitude.model_copy(update={"flow_check": flow})})
    return Shield(cfg, CRAZYFLIE_2X, load_world(WORLD), subgoal_radius_m=1.0)


def test_the_flow_flies_the_backups_own_vertical_law():
    # level, still, below its target: the flow's first backup command is the BackupController's thrust (one law)
    s = _shield()
    m, b = s.model, s.config.backup
    bc = BackupController(m, s.config)
    for z, vz, target in ((0.1, 0.4, 0.3), (0.5, -0.2, 0.5), (0.25, 0.0, 0.3), (1.0, 1.5, 0.6)):
        thrust = bc.command([0.0, 0.0, z], [0.0, 0.0, vz], (1, 0, 0, 0, 1, 0, 0, 0, 1), [0.0, 0.0, 0.0], (0.0, 0.0, target))[0]
        bc.reset()
        vr = max(-b.max_speed_mps, min(b.max_speed_mps, b.position_gain_per_s * (target - z)))
        az, _ = vertical_accel(b.velocity_gain_per_s, b.velocity_integral_gain_per_s2 * m.dt, b.integral_limit_mps2, vr - vz,
                               0.0, m._backup_min_thrust / m.ff_mass - m.g,
                               m.backup_max_thrust_fraction * m.max_total_thrust / m.ff_mass - m.g)
        flow_thrust = min(max(m.ff_mass * (az + m.g), m._backup_min_thrust), m.backup_max_thrust_fraction * m.max_total_thrust)
        assert flow_thrust == pytest.approx(thrust, rel=1e-12, abs=1e-12)


def test_the_flow_is_a_lower_bound_of_the_real_backup_on_randomized_airframes():
    # benchmarks/bench_vertical_flow.py's comparison (one home): random starts below and just above the band, a quarter
    # of them a thrust cut, half of them moving and tilted, each on an airframe of the training's randomization
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_vertical_flow import TOLERANCE_M, compare

    rows = compare(60, seed=20261128)
    assert len(rows) == 60
    for r in rows:
        assert r["margin_m"] >= -TOLERANCE_M, r
        assert r["margin_high_m"] >= -TOLERANCE_M, r  # the ceiling's flow, from above
    # and not a vacuous one: its tightest case within a decimetre of PyBullet's (5.1 cm at this seed, 2026-11-28)
    assert min(r["margin_m"] for r in rows) < 0.1


def test_the_benchmark_prints_its_figures_and_refuses_bad_arguments():
    script = str(REPO / "benchmarks" / "bench_vertical_flow.py")
    proc = subprocess.run([sys.executable, script, "--cases", "4", "--seed", "3"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"bounded\s+4 of 4", proc.stdout) and re.search(r"bounded above\s+4 of 4", proc.stdout), proc.stdout
    assert "flow cost" in proc.stdout, proc.stdout
    proc = subprocess.run([sys.executable, script, "--cases", "0"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--cases must be at least 1" in proc.stderr


def test_the_altitude_unit_lets_a_take_off_slow_down_that_the_box_alone_clamped():
    on, off = _shield(True), _shield(False)
    m = on.model
    # within the hold's sag above the band, climbing at 0.95 m/s, the policy easing its thrust below the hover thrust
    # (a take-off slowing down; a state of the demo mission's)
    for s, passes in ((on, True), (off, False)):
        t = make_tick((0.5, 0.5, 0.35), (0, 0, 0.95), (0, 0, 0), (0, 0, 0), [0.27, 0, 0, 0], prev=[0.28, 0, 0, 0],
                      thrust_est=0.33)
        s.altitude.check(t)
        assert (t.interventions is None and t.reject_unit is None) is passes
        if not passes:
            assert t.interventions[0].constraint == "floor"
    # below the band and sinking, the command cutting its thrust: the flow after it sinks below the hold's: refused
    t = make_tick((0.5, 0.5, 0.12), (0, 0, -0.3), (0, 0, 0), (0, 0, 0), [0.0, 0, 0, 0], thrust_est=0.05)
    on.altitude.check(t)
    assert t.reject_unit is on.altitude and t.reject_constraint == "floor"
    assert "vertical flow" in t.reject_detail
    # in the band, falling at 1 m/s onto its floor with the motors cut: the flow agrees with the box (refused)
    t = make_tick((0.5, 0.5, 0.45), (0, 0, -1.0), (0, 0, 0), (0, 0, 0), [0.0, 0, 0, 0], thrust_est=0.05)
    on.altitude.check(t)
    assert t.reject_unit is on.altitude and t.reject_constraint == "floor"


def test_the_altitude_unit_judges_the_ceiling_on_the_flow_from_above():
    on, off = _shield(True), _shield(False)
    # 1.55 m, climbing at 0.2 m/s at the hover thrust: the box's top (the strongest airframe's hold climbing above its
    # target, summed with the climb's stop) breaks the band's top; the flow from above keeps it
    for s, passes in ((on, True), (off, False)):
        t = make_tick((2.0, 2.3, 1.55), (0, 0, 0.2), (0, 0, 0), (0, 0, 0), [0.31, 0, 0, 0], prev=[0.31, 0, 0, 0],
                      thrust_est=0.31)
        assert s.model.stopping_box(t)[5] > s.altitude.z_hi
        s.altitude.check(t)
        assert (t.interventions is None and t.reject_unit is None) is passes
    assert on.altitude._flow_high(t) <= on.altitude.z_hi
    # 1.6 m, climbing at 0.6 m/s on 0.55 N: the flow from above breaks the top too, and the refusal says so
    t = make_tick((2.0, 2.3, 1.6), (0, 0, 0.6), (0, 0, 0), (0, 0, 0), [0.55, 0, 0, 0], prev=[0.31, 0, 0, 0], thrust_est=0.31)
    on.altitude.check(t)
    records = [i for i in (t.interventions or []) if i.constraint == "ceiling"]
    assert (t.reject_unit is on.altitude and t.reject_constraint == "ceiling") or records
    assert "vertical flow after it reaches" in (t.reject_detail or records[0].detail)

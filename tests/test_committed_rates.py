"""The quadrotor's stopping box counts the rate a torque step commits the robot to (DynamicsModel.committed_rates,
issue #16: the randomized adversary, handed control back after a hold 0.1 m from a wall, stepped to full roll and
pitch torque for two ticks and swung 19 degrees into the wall). A step toward a nearby box is refused; the same
step away from it, and a steady torque the motors already hold, are not judged differently than before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.safety import Shield, ShieldInput
from robot_hrl.state import RobotState
from robot_hrl.world import load_world

WORLD = load_world(Path(__file__).resolve().parents[1] / "models" / "worlds" / "demo.yaml")
DT = 0.01


def _shield() -> Shield:
    return Shield.from_yaml(None, CRAZYFLIE_2X, WORLD, 1.0)


def _hover(shield: Shield, tau_y: float = 0.0) -> np.ndarray:
    m = shield.model
    return np.asarray(shield.action.normalized([m.mass * m.g, 0.0, tau_y, 0.0]))


def _run(x: float, tau_y: float, ticks: int = 60):
    """Level at rest at (x, 0.6, 1.0), beside the wall (x in [2.4, 2.6]): hover 0.5 s (the motors settle), then
    step the pitch torque to ``tau_y`` (negative tilts body z toward -x, the wall). The first step tick's mode."""
    shield = _shield()
    state = RobotState(position_w=np.array([x, 0.6, 1.0]), stamp_s=0.0)
    for k in range(50):
        state.stamp_s = k * DT
        shield.step(ShieldInput(k * DT, state, _hover(shield), subgoal_w=state.position_w, subgoal_stamp_s=k * DT))
    state.stamp_s = 50 * DT
    return shield.step(ShieldInput(50 * DT, state, _hover(shield, tau_y), subgoal_w=state.position_w,
                                   subgoal_stamp_s=50 * DT))


@settings(max_examples=10, deadline=None)
@given(gap=st.floats(0.05, 0.09), frac=st.floats(0.8, 1.0))
def test_a_torque_step_toward_a_nearby_wall_is_refused_and_away_from_it_is_not(gap, frac):
    """Before the committed rates, every one of these steps (5-11 cm from the wall) was accepted."""
    m = _shield().model
    x = 2.6 + CRAZYFLIE_2X.collision_radius_m + gap  # clearance ``gap`` from the wall's face
    toward = _run(x, -frac * m.high[2])
    assert toward.mode == "backup_hold" and toward.reason == "obstacles.approach", (gap, frac, toward.reason)
    away = _run(x, frac * m.high[2])
    assert away.mode == "policy" or away.reason != "obstacles.approach", (gap, frac, away.reason)


def test_a_torque_the_motors_already_hold_commits_no_extra_rate():
    shield = _shield()
    m = shield.model

    class T:
        w = [0.3, -0.2, 0.1]
        est = [0.3, 1e-3, -5e-4, 0.0]
        cmd = [0.3, 1e-3, -5e-4, 0.0]

    assert m.committed_rates(T) == (0.3, -0.2, 0.1)
    T.cmd = [0.3, 2e-3, -5e-4, 0.0]
    wx, wy, _ = m.committed_rates(T)
    expected = m.design_motor_tau * m.estimate_gain * 1e-3 / m.inertia[0]
    assert abs(wx - 0.3 - expected) < 1e-12 and wy == -0.2

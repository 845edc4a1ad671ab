"""The shield's dead reckoning (robot_hrl/robots/quadrotor/shield/model.py StatePredictor) against the
PyBullet robot: both run the robot's one actuator chain (robot_hrl/robots/crazyflie_2x/actuators.py), the
predictor on Python floats through robots/quadrotor/shield/rotors.py. Seeded random wrench sequences
(hard roll/pitch/yaw torques, thrust from 0.3 to 1.3 x weight), the prediction started from a measured state
with the outputs sent before it, compared with the simulator's ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.robots.actuator_chain import MATH, chain_of
from robot_hrl.robots.quadrotor.shield import StatePredictor
from robot_hrl.robots.quadrotor.shield.rotors import RotorModel
from robot_hrl.safety import load_shield_config
from robot_hrl.safety.families import get_family
from robot_hrl.contract.action_modes import action_map

pybullet_sim = pytest.importorskip("sim.pybullet.quadrotor_sim")


def _model():
    cfg = load_shield_config(CRAZYFLIE_2X.shield_config_path)
    return get_family(cfg.model).build_model(CRAZYFLIE_2X, cfg, action_map(CRAZYFLIE_2X.action_spec()))


def _tilt_deg(q) -> float:
    qw, qx, qy, qz = q
    return float(np.degrees(np.arccos(np.clip(1 - 2 * (qx * qx + qy * qy), -1, 1))))


def _random_wrenches(rng, n: int) -> list[list[float]]:
    robot = CRAZYFLIE_2X
    out, held = [], None
    for k in range(n):
        if held is None or rng.random() < 0.2:  # a new command every few ticks
            held = [robot.weight_n * rng.uniform(0.3, 1.3),
                    *(rng.uniform(-1, 1, size=2) * 1.5e-3 * rng.choice([0.1, 1.0])),
                    rng.uniform(-1, 1) * 3e-4]
        out.append([float(v) for v in held])
    return out


def test_the_rotor_model_is_the_chain_on_floats():
    """rotors.py holds no mixer or lag of its own: its command and substep are the registered chain's."""
    rotors = RotorModel(CRAZYFLIE_2X, 0.01, 5)
    chain = chain_of(CRAZYFLIE_2X.name)
    assert rotors.chain is chain
    state = rotors.initial_state()
    wrench = (0.5, 3e-3, -2e-3, 5e-4)
    assert rotors.command(wrench, state) == chain.command(wrench, state, rotors.derived, rotors.k, MATH)
    # holding the weight: the rotors' wrench is the weight, no torque
    w = rotors.wrench(state)
    assert w[0] == pytest.approx(CRAZYFLIE_2X.weight_n, rel=1e-9) and max(map(abs, w[1:])) < 1e-12


@pytest.mark.parametrize("seed", range(6))
def test_dead_reckoning_follows_the_pybullet_robot(seed):
    rng = np.random.default_rng(seed)
    model = _model()
    sim = pybullet_sim.PyBulletQuadrotorSim(CRAZYFLIE_2X, ground_effect=False)
    try:
        sim.reset((0.0, 0.0, 20.0))
        wrenches = _random_wrenches(rng, 70)
        states = [sim.state()]
        for w in wrenches:
            states.append(sim.step(w))
    finally:
        sim.close()
    start, horizon = 40, 20  # lost after 0.4 s of hard manoeuvres, predicted 0.2 s ahead
    s0 = states[start]
    pr = StatePredictor(model)
    pr.reset(s0.position_w, s0.linear_velocity_w, s0.quat_wxyz, s0.angular_velocity_b, wrenches[:start])
    for w in wrenches[start:start + horizon]:
        pr.step(w)
    truth = states[start + horizon]
    rate_err = np.abs(np.asarray(pr.w) - truth.angular_velocity_b).max()
    assert rate_err < 1e-3, f"body rate off by {rate_err:.3f} rad/s after {horizon} ticks"
    assert abs(_tilt_deg(pr.q) - _tilt_deg(truth.quat_wxyz)) < 0.5  # the quaternion integrated to first order per physics step
    assert np.linalg.norm(np.asarray(pr.p) - truth.position_w) < 1e-3
    assert np.linalg.norm(np.asarray(pr.v) - truth.linear_velocity_w) < 1e-2

"""Physics of the batched simulator: free fall, hover, rotor torque signs, saturation, floor."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from robot_hrl.contract import hover_actions
from robot_hrl.robots.quadrotor import quadrotor_action_spec
from robot_hrl.robots import CRAZYFLIE_2X, STANDARD_GRAVITY_MPS2
from robot_hrl.robots.crazyflie_2x import actuators
from sim.envs import GotoEnv, GotoEnvCfg, dynamics
from sim.envs.array_ops import TORCH

K = actuators.constants(CRAZYFLIE_2X)


def _cols(t: torch.Tensor) -> tuple:
    return tuple(t.t())


def _state(n: int = 1, z: float = 10.0, rpm: float = 0.0):
    pos = torch.zeros(n, 3)
    pos[:, 2] = z
    quat = torch.zeros(n, 4)
    quat[:, 0] = 1.0
    return pos, quat, torch.zeros(n, 3), torch.zeros(n, 3), torch.full((n, 4), rpm)


def _step(state, rpm_cmd, steps: int, dt: float = 0.005, tau: float = 0.05, force=None, floor_z: float = -100.0):
    """``steps`` physics steps of the training step's physics: the actuator chain's substep, then the rigid body."""
    n = state[0].shape[0]
    pos, quat, vel, omega, rpm = (_cols(t) for t in state)
    params = {"thrust_coefficient_scale": torch.ones(n), "torque_coefficient_scale": torch.ones(n),
              "motor_time_constant_s": torch.full((n,), tau), "battery_open_circuit_v": torch.full((n,), 4.0),
              "battery_resistance_ohm": torch.zeros(n)}  # (a battery without sag: the voltage stays at 4 V)
    derived = actuators.derive(params, K, dt, TORCH)
    battery = torch.full((n,), 4.0)
    chain_state = {"rotor_speed_rpm": rpm, "battery_voltage_v": battery}
    # the PWM under which each motor settles at the asked speed (the firmware's output, held)
    command = actuators.hold_command({"rotor_speed_rpm": _cols(rpm_cmd), "battery_voltage_v": battery}, derived, K, TORCH)
    mass, inertia = torch.full((n,), CRAZYFLIE_2X.mass_kg), tuple(torch.full((n,), v) for v in CRAZYFLIE_2X.inertia_kgm2)
    force = _cols(torch.zeros(n, 3) if force is None else force)
    contact = None
    for _ in range(steps):
        sub = actuators.substep(chain_state, command, derived, K, TORCH)
        chain_state = sub.state
        pos, quat, vel, omega, contact = dynamics.rigid_body_substep(
            pos, quat, vel, omega, sub.thrust_n, sub.torque_b, mass, inertia, force, _cols(torch.zeros(n, 3)),
            dt, STANDARD_GRAVITY_MPS2, floor_z, 0.5,
        )
    stack = lambda cols: torch.stack(cols, dim=-1)  # noqa: E731
    return stack(pos), stack(quat), stack(vel), stack(omega), stack(chain_state["rotor_speed_rpm"]), contact


def test_free_fall_follows_gravity():
    dt, steps = 0.005, 200  # 1 s
    pos, quat, vel, *_ = _step(_state(z=10.0), torch.zeros(1, 4), steps, dt=dt)
    t = dt * steps
    assert vel[0, 2].item() == pytest.approx(-STANDARD_GRAVITY_MPS2 * t, rel=1e-5)
    # semi-implicit Euler: z = z0 - g dt^2 n(n+1)/2, within g*dt*t of the exact parabola
    assert pos[0, 2].item() == pytest.approx(10.0 - 0.5 * STANDARD_GRAVITY_MPS2 * t * t, abs=STANDARD_GRAVITY_MPS2 * dt * t)
    assert torch.allclose(pos[0, :2], torch.zeros(2)) and torch.allclose(quat[0], torch.tensor([1.0, 0, 0, 0]))


def test_hover_thrust_equals_weight():
    hover = CRAZYFLIE_2X.hover_rpm
    # the rotor speed the firmware mixer commands for a weight-sized collective thrust is the hover speed
    wrench = (torch.tensor([CRAZYFLIE_2X.weight_n]),) + (torch.zeros(1),) * 3
    thrusts = actuators.mixed_rotor_thrusts(wrench, K, TORCH, torch.tensor([4.0]))
    assert sum(float(t) for t in thrusts) == pytest.approx(CRAZYFLIE_2X.weight_n, rel=1e-4)
    rpm_cmd = torch.stack(actuators.rotor_speed_command(thrusts, K, TORCH), dim=-1)
    assert torch.allclose(rpm_cmd, torch.full((1, 4), hover), rtol=1e-4)
    pos, quat, vel, omega, *_ = _step(_state(z=1.0, rpm=hover), rpm_cmd, 400)
    assert vel.abs().max().item() < 1e-3 and abs(pos[0, 2].item() - 1.0) < 1e-3
    assert omega.abs().max().item() < 1e-4


def test_env_hover_action_holds_position():
    cfg = GotoEnvCfg()
    cfg.randomization.enabled = False
    env = GotoEnv(cfg, num_envs=1, seed=0)
    env.quat_wxyz[:] = torch.tensor([1.0, 0, 0, 0])
    env.linear_velocity_w.zero_()
    env.angular_velocity_b.zero_()
    env.position_w[:] = torch.tensor([0.0, 0.0, 1.5])
    env.goal_w[:] = env.position_w
    a = torch.tensor(hover_actions(quadrotor_action_spec(CRAZYFLIE_2X), CRAZYFLIE_2X), dtype=torch.float32).unsqueeze(0)
    for _ in range(100):
        env.step(a)
    assert torch.linalg.vector_norm(env.position_w - torch.tensor([0.0, 0.0, 1.5])).item() < 5e-3
    assert env.episode_length_buf.item() == 100


# Expected signs of body torque (x, y, z) when one rotor speeds up, from geometry alone:
# M1 front right CCW, M2 back right CW, M3 back left CCW, M4 front left CW (FLU body frame).
EXPECTED_SIGNS = {0: (-1, -1, -1), 1: (-1, 1, 1), 2: (1, 1, -1), 3: (1, -1, 1)}


@pytest.mark.parametrize("rotor", [0, 1, 2, 3])
def test_sign_of_each_rotor_torque(rotor):
    hover = CRAZYFLIE_2X.hover_rpm
    rpm_cmd = torch.full((1, 4), hover)
    rpm_cmd[0, rotor] = hover * 1.2
    state = _state(z=1.0, rpm=hover)
    state = state[:4] + (rpm_cmd.clone(),)  # motors already at the commanded speed
    *_, omega, _, _ = _step(state, rpm_cmd, 2)
    signs = tuple(int(s) for s in torch.sign(omega[0]).tolist())
    assert signs == EXPECTED_SIGNS[rotor]


def test_no_nan_under_saturated_and_invalid_commands():
    env = GotoEnv(GotoEnvCfg(), num_envs=64, seed=1)
    gen = torch.Generator().manual_seed(0)
    extremes = [
        torch.ones(64, 4), -torch.ones(64, 4), torch.full((64, 4), 1e9), torch.full((64, 4), float("nan")),
        torch.full((64, 4), float("inf")), torch.full((64, 4), -float("inf")),
    ]
    for i in range(120):
        a = extremes[i % len(extremes)] if i % 2 else torch.sign(torch.rand(64, 4, generator=gen) - 0.5)
        obs, rew, dones, extras = env.step(a)
        assert torch.isfinite(obs["policy"]).all() and torch.isfinite(obs["critic"]).all()
        assert torch.isfinite(rew).all()
        for t in (env.position_w, env.quat_wxyz, env.linear_velocity_w, env.angular_velocity_b, env.rotor_rpm):
            assert torch.isfinite(t).all()
        assert (env.rotor_rpm <= K.rpm_max + 1e-2).all() and (env.rotor_rpm >= K.rpm_min).all()


def test_nothing_falls_through_the_floor():
    cfg = GotoEnvCfg()
    cfg.terminations.terminate_on_ground_contact = False
    cfg.randomization.enabled = False
    env = GotoEnv(cfg, num_envs=16, seed=2)
    for _ in range(200):  # motors off: everything drops to the floor and stays there
        env.step(-torch.ones(16, 4))
    floor = env.floor_z
    assert (env.position_w[:, 2] >= floor - 1e-6).all()
    on_floor = env.position_w[:, 2] <= floor + 1e-4
    assert on_floor.any()
    assert (env.linear_velocity_w[on_floor, 2] >= -1e-6).all()


def test_ground_contact_is_a_crash_by_default():
    cfg = GotoEnvCfg()
    cfg.randomization.enabled = False
    env = GotoEnv(cfg, num_envs=8, seed=3)
    crashed = torch.zeros(8, dtype=torch.bool)
    for _ in range(150):
        _, _, dones, extras = env.step(-torch.ones(8, 4))
        crashed |= extras["episode_end"]["crashed"] & dones.bool()
    assert crashed.all()


def test_motor_lag_time_constant():
    hover = CRAZYFLIE_2X.hover_rpm
    tau, dt = 0.05, 0.005
    state = _state(z=1.0, rpm=0.0)
    *_, rpm, _ = _step(state, torch.full((1, 4), hover), int(round(tau / dt)), dt=dt, tau=tau)
    # after one time constant a first-order lag covers 1 - 1/e of the step
    assert rpm[0, 0].item() / hover == pytest.approx(1.0 - math.exp(-1.0), rel=1e-4)
    np.testing.assert_allclose(rpm.numpy(), rpm[0, 0].item(), rtol=1e-6)

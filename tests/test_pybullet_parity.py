"""PyBullet against the training simulator's physics: same start, same wrenches, same trajectory.

With the ground effect off (the training env has none) the two integrate the same model: the
actuator chain (firmware mixer, motor lag, rotor thrusts and drag torque: one source, run on torch
columns here and on Python floats in PyBullet), gravity and Euler's equations; PyBullet applies the
rotor forces at the hubs and integrates the rigid body itself. A wrong frame (body rates, quaternion
order), sign or unit in either shows up here.
"""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("pybullet")
torch = pytest.importorskip("torch")

from robot_hrl.geometry import quat_from_euler_rpy  # noqa: E402
from robot_hrl.robots import CRAZYFLIE_2X as ROBOT  # noqa: E402
from robot_hrl.robots import STANDARD_GRAVITY_MPS2  # noqa: E402
from robot_hrl.robots.crazyflie_2x import actuators  # noqa: E402
from sim.envs import dynamics  # noqa: E402
from sim.envs.array_ops import TORCH  # noqa: E402
from sim.pybullet import PyBulletQuadrotorSim  # noqa: E402

PHYSICS_HZ = 500.0


def _col(v):
    """A float64 torch column of one value (the training step's layout)."""
    return torch.tensor([float(v)], dtype=torch.float64)


def _training_substeps(n, chain_state, command, derived, k, body, mass, inertia, force, torque, dt):
    """``n`` physics substeps of the training step (the actuator chain, then ``dynamics.rigid_body_substep``) from
    ``body`` = (pos, quat, vel, omega): the new body and chain state."""
    pos, quat, vel, omega = body
    for _ in range(n):
        sub = actuators.substep(chain_state, command, derived, k, TORCH)
        chain_state = sub.state
        pos, quat, vel, omega, _ = dynamics.rigid_body_substep(
            pos, quat, vel, omega, sub.thrust_n, sub.torque_b, mass, inertia, force, torque,
            dt, STANDARD_GRAVITY_MPS2, -10.0, 0.0,
        )
    return (pos, quat, vel, omega), chain_state


def _assert_twins_agree(sim, state, body, chain_state, where=""):
    """PyBullet's state after a step against the training physics' ``body`` and ``chain_state``."""
    pos, quat, vel, omega = (torch.cat(x).numpy() for x in body)
    assert np.allclose(state.position_w, pos, atol=1e-6), where
    assert np.allclose(state.linear_velocity_w, vel, atol=1e-5), where
    assert np.allclose(state.angular_velocity_b, omega, atol=1e-4), where
    assert abs(abs(float(np.dot(state.quat_wxyz, quat))) - 1.0) < 1e-8, where
    assert np.allclose(sim.motor_rpm, torch.cat(chain_state["rotor_speed_rpm"]).numpy(), rtol=1e-9), where


def test_open_loop_trajectories_agree_with_the_training_physics():
    """The training step's physics in float64 (the actuator chain on torch columns, ``dynamics.rigid_body_substep``)
    against PyBullet (the same chain on Python floats, PyBullet's rigid body and contacts)."""
    k = actuators.constants(ROBOT)
    q0 = quat_from_euler_rpy(0.3, -0.2, 1.0)
    p0, v0, w0 = np.array([0.1, -0.2, 1.5]), np.array([0.4, -0.3, 0.2]), np.array([1.0, -2.0, 0.5])
    body = tuple(tuple(_col(v) for v in x) for x in (p0, q0, v0, w0))
    dt = 1.0 / PHYSICS_HZ
    nominal = {p.name: _col(p.nominal(k)) for p in actuators.PARAMETERS}
    derived = actuators.derive(nominal, k, dt, TORCH)
    chain_state = actuators.initial_state(_col(ROBOT.weight_n), derived, k, TORCH)
    mass, inertia = _col(ROBOT.mass_kg), tuple(_col(v) for v in ROBOT.inertia_kgm2)
    zero3 = (_col(0.0),) * 3
    rng = np.random.default_rng(0)
    with PyBulletQuadrotorSim(ground_effect=False, physics_hz=PHYSICS_HZ) as sim:
        sim.reset(p0, q0, v0, w0)
        for _ in range(30):  # 0.3 s of varied thrust and torques
            wrench = np.array([ROBOT.weight_n * rng.uniform(0.8, 1.3), *rng.uniform(-1e-3, 1e-3, 2),
                               rng.uniform(-1e-4, 1e-4)])
            command = actuators.command(tuple(_col(v) for v in wrench), chain_state, derived, k, TORCH)  # (the battery it has)
            body, chain_state = _training_substeps(sim.substeps, chain_state, command, derived, k, body, mass, inertia,
                                                   zero3, zero3, dt)
            state = sim.step(wrench)
        assert np.linalg.norm(state.position_w - p0) > 0.1  # it did move
        _assert_twins_agree(sim, state, body, chain_state)


def test_randomized_airframes_agree_with_the_training_physics():
    """The same comparison on airframes PyBullet's randomization draws (mass, inertia, k_f and drag torque scales,
    motor lag, battery charge and resistance, the constant disturbance force and torque, the action latency): the
    drawn values go into the training step's physics unchanged, so a parameter one twin ignores, scales differently
    or draws in other units shows up as a diverging trajectory (issue 17's PyBullet gap)."""
    from sim.pybullet import RandomizationCfg

    k = actuators.constants(ROBOT)
    dt = 1.0 / PHYSICS_HZ
    rng = np.random.default_rng(1)
    randomization = RandomizationCfg.from_training()
    with PyBulletQuadrotorSim(ground_effect=False, physics_hz=PHYSICS_HZ, seed=3, randomization=randomization) as sim:
        latencies = set()
        for episode in range(4):
            q0 = quat_from_euler_rpy(*rng.uniform(-0.4, 0.4, 3))
            p0, v0, w0 = np.array([0.0, 0.0, 1.5]), rng.uniform(-0.5, 0.5, 3), rng.uniform(-1.5, 1.5, 3)
            sim.reset(p0, q0, v0, w0)
            dyn = sim.dynamics
            latencies.add(dyn.action_latency_steps)
            derived = actuators.derive({n: _col(v) for n, v in dyn.chain_parameters.items()}, k, dt, TORCH)
            mass, inertia = _col(dyn.mass_kg), tuple(_col(v) for v in dyn.inertia_kgm2)
            force, torque = tuple(_col(v) for v in dyn.disturbance_force_w), tuple(_col(v) for v in dyn.disturbance_torque_b)
            body = tuple(tuple(_col(v) for v in x) for x in (p0, q0, v0, w0))
            chain_state = actuators.initial_state(_col(dyn.mass_kg * STANDARD_GRAVITY_MPS2), derived, k, TORCH)
            command = actuators.hold_command(chain_state, derived, k, TORCH)  # until the first wrench takes effect
            pending = []
            for _ in range(25):
                wrench = np.array([dyn.mass_kg * STANDARD_GRAVITY_MPS2 * rng.uniform(0.7, 1.4),
                                   *rng.uniform(-1e-3, 1e-3, 2), rng.uniform(-1e-4, 1e-4)])
                pending.append(wrench)
                if len(pending) > dyn.action_latency_steps:
                    command = actuators.command(tuple(_col(v) for v in pending.pop(0)), chain_state, derived, k, TORCH)
                body, chain_state = _training_substeps(sim.substeps, chain_state, command, derived, k, body, mass,
                                                       inertia, force, torque, dt)
                state = sim.step(wrench)
            where = f"episode {episode}, airframe {dyn}"
            _assert_twins_agree(sim, state, body, chain_state, where)
            assert np.isclose(sim.chain_state["battery_voltage_v"], float(chain_state["battery_voltage_v"]), rtol=1e-9), where
        assert latencies == {0, 1}, latencies  # both latencies were flown (seed 3)

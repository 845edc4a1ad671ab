"""PyBullet against the training simulator's physics: same start, same wrenches, same trajectory.

With the ground effect off (the training env has none) the two integrate the same model: the
firmware mixer, the motor lag, rotor forces at the hubs, drag torque, gravity and Euler's
equations. A wrong frame (body rates, quaternion order), sign or unit in either shows up here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pybullet")
torch = pytest.importorskip("torch")

from robot_hrl.geometry import quat_from_euler_rpy  # noqa: E402
from robot_hrl.robots import CRAZYFLIE_2X as ROBOT  # noqa: E402
from robot_hrl.robots import STANDARD_GRAVITY_MPS2  # noqa: E402
from sim.envs import dynamics  # noqa: E402
from sim.pybullet import PyBulletQuadrotorSim  # noqa: E402
from sim.pybullet.physics import rpm_command_from_wrench  # noqa: E402

PHYSICS_HZ = 500.0


def test_open_loop_trajectories_agree_with_the_training_physics():
    k = dynamics.RobotConstants.from_robot(ROBOT, "cpu")
    f64 = dict(dtype=torch.float64)
    q0 = quat_from_euler_rpy(0.3, -0.2, 1.0)
    p0, v0, w0 = np.array([0.1, -0.2, 1.5]), np.array([0.4, -0.3, 0.2]), np.array([1.0, -2.0, 0.5])
    pos, quat, vel, omega = (torch.tensor(x, **f64).unsqueeze(0) for x in (p0, q0, v0, w0))
    rpm = torch.full((1, 4), ROBOT.hover_rpm, **f64)
    dt = 1.0 / PHYSICS_HZ
    alpha = torch.tensor([[1.0 - math.exp(-dt / ROBOT.motor_time_constant_s)]], **f64)
    per_env = dict(
        thrust_coefficient=torch.tensor([[ROBOT.thrust_coefficient_n_per_rpm2]], **f64),
        torque_coefficient=torch.tensor([[ROBOT.torque_to_thrust_m]], **f64),
        mass=torch.tensor([[ROBOT.mass_kg]], **f64),
        inertia=torch.tensor([ROBOT.inertia_kgm2], **f64),
        force_ext_w=torch.zeros(1, 3, **f64),
        torque_ext_b=torch.zeros(1, 3, **f64),
        rotor_xy=torch.tensor(np.asarray(ROBOT.rotor_positions_m)[:, :2], **f64),
        spin=torch.tensor(ROBOT.rotor_spin_directions, **f64),
    )
    rng = np.random.default_rng(0)
    with PyBulletQuadrotorSim(ground_effect=False, physics_hz=PHYSICS_HZ) as sim:
        substeps = sim.substeps
        sim.reset(p0, q0, v0, w0)
        for _ in range(30):  # 0.3 s of varied thrust and torques
            wrench = np.array([ROBOT.weight_n * rng.uniform(0.8, 1.3), *rng.uniform(-1e-3, 1e-3, 2),
                               rng.uniform(-1e-4, 1e-4)])
            cmd = torch.tensor(rpm_command_from_wrench(ROBOT, wrench), **f64).unsqueeze(0)
            for _ in range(substeps):
                pos, quat, vel, omega, rpm, _ = dynamics.physics_substep(
                    pos, quat, vel, omega, rpm, cmd, alpha, per_env["thrust_coefficient"],
                    per_env["torque_coefficient"], per_env["mass"], per_env["inertia"], per_env["force_ext_w"],
                    per_env["torque_ext_b"], per_env["rotor_xy"], per_env["spin"], dt, STANDARD_GRAVITY_MPS2,
                    ROBOT.rpm_min, ROBOT.rpm_max, -10.0, 0.0,
                )
            state = sim.step(wrench)
    assert np.linalg.norm(state.position_w - p0) > 0.1  # it did move
    assert np.allclose(state.position_w, pos[0].numpy(), atol=1e-6)
    assert np.allclose(state.linear_velocity_w, vel[0].numpy(), atol=1e-5)
    assert np.allclose(state.angular_velocity_b, omega[0].numpy(), atol=1e-4)
    assert abs(abs(float(np.dot(state.quat_wxyz, quat[0].numpy()))) - 1.0) < 1e-8
    assert np.allclose(sim.motor_rpm, rpm[0].numpy(), rtol=1e-9)

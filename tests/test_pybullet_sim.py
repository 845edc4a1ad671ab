"""The PyBullet quadrotor world: URDF, physics, scene, camera, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

pybullet = pytest.importorskip("pybullet")

from robot_hrl.errors import WorldError  # noqa: E402
from robot_hrl.geometry import quat_from_euler_rpy  # noqa: E402
from robot_hrl.perception import PinholeCamera  # noqa: E402
from robot_hrl.robots import CRAZYFLIE_2X  # noqa: E402
from robot_hrl.world import load_world  # noqa: E402
from sim.pybullet import PyBulletQuadrotorSim, RandomizationCfg, urdf_text, write_urdf  # noqa: E402
from sim.pybullet import physics  # noqa: E402

HOVER = np.array([CRAZYFLIE_2X.weight_n, 0.0, 0.0, 0.0])


@pytest.fixture
def sim():
    s = PyBulletQuadrotorSim()
    yield s
    s.close()


def test_urdf_mass_and_inertia_match_the_robot_model(sim, tmp_path):
    info = sim.bullet.getDynamicsInfo(sim.body_id, -1)
    assert info[0] == pytest.approx(CRAZYFLIE_2X.mass_kg, rel=1e-9)
    assert np.allclose(info[2], CRAZYFLIE_2X.inertia_kgm2, rtol=1e-6)
    assert np.allclose(info[3], 0.0)  # inertial frame at the body origin
    path = write_urdf(CRAZYFLIE_2X, tmp_path)
    assert path.read_text() == urdf_text(CRAZYFLIE_2X)
    assert f'radius="{CRAZYFLIE_2X.collision_radius_m:.9g}"' in path.read_text()
    assert write_urdf(CRAZYFLIE_2X, tmp_path) == path  # cached


def test_hover_thrust_holds_altitude(sim):
    sim.reset((0.0, 0.0, 1.0))
    for _ in range(200):  # 2 s
        state = sim.step(HOVER)
    assert sim.time_s == pytest.approx(2.0)
    assert abs(state.position_w[2] - 1.0) < 0.02
    assert np.linalg.norm(state.position_w[:2]) < 1e-6
    assert np.allclose(sim.motor_rpm, CRAZYFLIE_2X.hover_rpm, rtol=2e-5)  # (the firmware's int32 command: 1.8e-6 N steps)


def test_torque_commands_turn_the_body_about_the_right_axes(sim):
    for axis in range(3):
        sim.reset((0.0, 0.0, 1.0), quat_from_euler_rpy(0.0, 0.0, 1.0))
        wrench = HOVER.copy()
        wrench[1 + axis] = 1e-5
        for _ in range(5):
            state = sim.step(wrench)
        rates = state.angular_velocity_b
        assert rates[axis] > 0.005
        assert np.all(np.abs(np.delete(rates, axis)) < 1e-6 * abs(rates[axis]) + 1e-9)
        # first-order motor lag: 1e-5 N m / I for t - tau (1 - exp(-t / tau))
        t, tau = 0.05, CRAZYFLIE_2X.motor_time_constant_s
        expected = 1e-5 / CRAZYFLIE_2X.inertia_kgm2[axis] * (t - tau * (1 - math.exp(-t / tau)))
        assert rates[axis] == pytest.approx(expected, rel=0.1)


def test_state_reports_body_rates_in_the_body_frame(sim):
    q = quat_from_euler_rpy(0.0, 0.0, math.pi / 2)  # yawed 90 deg: body x = world y
    state = sim.reset((0.0, 0.0, 1.0), q, linear_velocity_w=(0.3, 0.0, 0.0), angular_velocity_b=(1.0, 0.0, 0.0))
    assert np.allclose(state.angular_velocity_b, (1.0, 0.0, 0.0), atol=1e-9)
    assert np.allclose(state.linear_velocity_w, (0.3, 0.0, 0.0), atol=1e-9)
    _, rates_w = sim.bullet.getBaseVelocity(sim.body_id)
    assert np.allclose(rates_w, (0.0, 1.0, 0.0), atol=1e-9)


def test_motor_lag_is_first_order_and_saturates(sim):
    """Beyond saturation the firmware caps every motor at full PWM; the rotors accelerate with the motor lag towards
    the speed of the fit at the (sagging) battery voltage, never beyond it."""
    from robot_hrl.robots.crazyflie_2x import actuators

    sim.reset((0.0, 0.0, 1.0))
    hover, tau = sim.motor_rpm.copy(), CRAZYFLIE_2X.motor_time_constant_s
    sim.step([CRAZYFLIE_2X.max_total_thrust_n * 2, 0, 0, 0])  # beyond saturation
    assert np.all(sim.motor_rpm_command == actuators.PWM_FULL)
    battery_v = sim.chain_state["battery_voltage_v"]
    top = math.sqrt(float(actuators.max_rotor_force_n(battery_v)) / CRAZYFLIE_2X.thrust_coefficient_n_per_rpm2)
    assert np.all(hover < sim.motor_rpm) and np.all(sim.motor_rpm < top)
    # a first-order lag over 0.01 s covers about 1 - exp(-0.01 / tau) of the way (the target moves with the sag)
    covered = (sim.motor_rpm - hover) / (top - hover)
    assert np.allclose(covered, 1.0 - math.exp(-0.01 / tau), rtol=0.1) and np.ptp(sim.motor_rpm) < 1e-6


def test_ground_effect_lifts_near_the_ground_only():
    r = CRAZYFLIE_2X
    gains = physics.ground_effect_gain(r, np.array([0.0, 0.03, 0.1, 1.0]), 1.0)
    assert gains[0] == pytest.approx(1.0 + physics.GROUND_EFFECT_MAX_GAIN)
    assert gains[0] >= gains[1] > gains[2] > gains[3] > 1.0
    assert gains[3] < 1.001
    assert np.all(physics.ground_effect_gain(r, np.array([0.05]), -0.5) == 1.0)  # upside down
    with PyBulletQuadrotorSim() as s:
        s.reset((0.0, 0.0, 0.05))
        for _ in range(20):
            state = s.step(HOVER)
        assert state.position_w[2] > 0.06  # hover thrust climbs in ground effect
        assert np.all(s.rotor_thrusts_n > r.weight_n / 4)
    with PyBulletQuadrotorSim(ground_effect=False) as s:
        s.reset((0.0, 0.0, 0.05))
        for _ in range(20):
            state = s.step(HOVER)
        assert abs(state.position_w[2] - 0.05) < 1e-3
        assert np.allclose(s.rotor_thrusts_n, r.weight_n / 4, rtol=2e-5)


def test_obstacle_contact_is_reported(demo_world_path):
    world = load_world(demo_world_path)
    with PyBulletQuadrotorSim(world=world) as s:
        pillar = next(o for o in world.obstacles if o.name == "pillar_a")
        start = np.asarray(pillar.center) - np.array([0.4, 0.0, 0.0])
        s.reset(start, linear_velocity_w=(1.5, 0.0, 0.0))
        names = set()
        for _ in range(50):
            s.step(HOVER)
            names |= {c.body for c in s.collisions()}
        assert s.collided()
        assert "pillar_a" in names
        s.reset((0.0, 0.0, 0.3))
        assert not s.collided() and s.collisions() == []


def test_ground_contact_is_not_an_obstacle_collision(sim):
    sim.reset((0.0, 0.0, 0.2))
    for _ in range(60):
        sim.step([0.0, 0.0, 0.0, 0.0])
    assert "ground" in {c.body for c in sim.collisions()}
    assert not sim.collided()
    assert sim.state().position_w[2] == pytest.approx(CRAZYFLIE_2X.body_height_m / 2, abs=0.005)


def test_camera_matches_the_pinhole_model(demo_world_path):
    cam = PinholeCamera(width=160, height=120)
    world = load_world(demo_world_path)
    q = quat_from_euler_rpy(0.0, 0.0, math.pi / 4)
    with PyBulletQuadrotorSim(world=world, camera=cam) as s:
        s.reset((0.5, 0.5, 1.0), q)
        rgb, depth = s.camera_image()
        assert rgb.shape == (120, 160, 3) and rgb.dtype == np.uint8
        assert depth.shape == (120, 160) and depth.dtype == np.float32
        # the robot does not see its own frame or rotors
        assert depth.min() > 0.5
        # pillar_a's near edge (the vertical edge facing the robot) projects where the model says,
        # at the depth the model says
        edge = np.array([[1.3, 1.3, 1.0]])
        uv, z = cam.project(edge, (0.5, 0.5, 1.0), q)
        u, v = np.round(uv[0]).astype(int)
        assert 0 <= u < 160 and 0 <= v < 120
        assert depth[v, u] == pytest.approx(z[0], abs=0.03)
        expected = np.array(world.obstacles[0].color) * 255
        assert np.all(np.abs(rgb[v, u].astype(float) - expected) < 80)
        # physics unaffected by rendering
        assert np.allclose(s.state().position_w, (0.5, 0.5, 1.0))


def test_randomization_samples_the_airframe_per_reset():
    cfg = RandomizationCfg.from_training()
    with PyBulletQuadrotorSim(randomization=cfg, seed=3) as s:
        masses = set()
        for _ in range(3):
            s.reset((0.0, 0.0, 1.0))
            m = s.bullet.getDynamicsInfo(s.body_id, -1)[0]
            assert m == pytest.approx(s.dynamics.mass_kg)
            lo, hi = cfg.mass_scale
            assert lo * CRAZYFLIE_2X.mass_kg <= m <= hi * CRAZYFLIE_2X.mass_kg
            masses.add(round(m, 9))
        assert len(masses) == 3
    with pytest.raises(ValueError, match="mass_scale"):
        RandomizationCfg(mass_scale=(1.1, 0.9))
    with pytest.raises(ValueError, match="action_latency_steps"):
        RandomizationCfg(action_latency_steps=(0, -1))


def test_gui_without_a_display_is_refused(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(RuntimeError, match="needs a display"):
        PyBulletQuadrotorSim(gui=True)


def test_bad_inputs_give_clear_errors(sim, tmp_path):
    with pytest.raises(ValueError, match="integer multiple"):
        PyBulletQuadrotorSim(physics_hz=250, control_hz=100)
    with pytest.raises(ValueError, match="below 240"):
        PyBulletQuadrotorSim(physics_hz=200, control_hz=100)
    with pytest.raises(ValueError, match="control_hz"):
        PyBulletQuadrotorSim(control_hz=float("nan"))
    with pytest.raises(WorldError, match="does not exist"):
        PyBulletQuadrotorSim(world=tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nbounds: {min: [0, 0, 0], max: [-1, 1, 1]}\n")
    with pytest.raises(WorldError, match="bounds"):
        PyBulletQuadrotorSim(world=bad)
    with pytest.raises(TypeError, match="world"):
        PyBulletQuadrotorSim(world=42)
    with pytest.raises(TypeError, match="camera"):
        PyBulletQuadrotorSim(camera="front")
    with pytest.raises(ValueError, match="wrench must have 4"):
        sim.step([0.1, 0.0, 0.0])
    with pytest.raises(ValueError, match="wrench must be finite"):
        sim.step([float("nan"), 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="quat_wxyz"):
        sim.reset((0, 0, 1), quat_wxyz=(0, 0, 0, 0))
    with pytest.raises(ValueError, match="position_w"):
        sim.reset((0, 0))
    with pytest.raises(RuntimeError, match="no camera"):
        sim.camera_image()
    sim.close()
    sim.close()
    with pytest.raises(RuntimeError, match="closed"):
        sim.step(HOVER)

"""The stand-in of the firmware's output stage (firmware_stubs/power_distribution_stub.c) against the formulas.

The hand-over tests judge the motors through this stand-in, so it is checked here against an
independent numpy evaluation of the formulas in docs/firmware_actuator_chain.md (crazyflie-firmware
power_distribution_quadrotor.c, motors.c, platform_defaults_cf2.h; cf2 with the 2.1+ propellers),
and the doc's voltage table against the same formulas.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.example_model import build_mlp_onnx
from deploy.crazyflie.host import HostController

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")

LEGACY, FORCE_TORQUE, FORCE = 0, 1, 2
# crazyflie-firmware src/platform/interface/platform_defaults_cf2.h, CONFIG_CRAZYFLIE_21_PLUS
VMOTOR2THRUST = (-0.02476537915958403, 0.06523793527519485, -0.026792504967750107, 0.006776789303971145)
THRUST_MIN_N, THRUST_MAX_N, THRUST2TORQUE_M, ARM_LENGTH_M = 0.012817578393224994, 0.12, 0.0069928948992470565, 0.046


def rotor_force_n(motor_v):
    """Rotor thrust (N) at motor voltage (V): the firmware's cubic fit."""
    return np.polynomial.polynomial.polyval(motor_v, VMOTOR2THRUST)


def motor_voltage_v(force_n):
    """Inverse of :func:`rotor_force_n` (its one real root)."""
    roots = np.roots([VMOTOR2THRUST[3], VMOTOR2THRUST[2], VMOTOR2THRUST[1], VMOTOR2THRUST[0] - force_n])
    return float(roots[np.argmin(np.abs(roots.imag))].real)


def pwm_for_force(force_n, battery_v):
    """PWM (before the cap) that gives ``force_n`` at ``battery_v``; 0 below THRUST_MIN."""
    quantized = np.floor(np.float32(force_n) / np.float32(THRUST_MAX_N) * np.float32(65535))  # int32 command
    force = quantized / 65535 * THRUST_MAX_N
    return 0 if force < THRUST_MIN_N else int(65535 * motor_voltage_v(force) / battery_v)


def mix_force_torque(thrust_n, torque_nm):
    arm = 0.707106781 * ARM_LENGTH_M
    roll, pitch = 0.25 / arm * torque_nm[0], 0.25 / arm * torque_nm[1]
    yaw = 0.25 * torque_nm[2] / THRUST2TORQUE_M
    t = 0.25 * thrust_n
    return np.maximum([t - roll - pitch - yaw, t - roll + pitch + yaw, t + roll + pitch - yaw, t + roll - pitch + yaw],
                      0.0)


def cap(pwm):
    pwm = np.asarray(pwm, dtype=np.int64)
    return np.maximum(pwm - max(int(pwm.max()) - 65535, 0), 0)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pd")
    return HostController.build(generate_project(build_mlp_onnx(tmp / "m.onnx", hidden=(8,)), tmp / "cf"), tmp / "h")


def test_force_torque_to_pwm_matches_the_formulas(lib):
    rng = np.random.default_rng(0)
    for _ in range(300):
        battery_v = rng.uniform(3.0, 4.2)
        thrust_n, torque = rng.uniform(0.0, 1.0), rng.uniform(-4e-3, 4e-3, 3) * [1, 1, 0.5]
        pwm, _ = lib.motors({"thrustSi": thrust_n, "torqueX": torque[0], "torqueY": torque[1], "torqueZ": torque[2]},
                            FORCE_TORQUE, battery_v)
        expected = cap([pwm_for_force(f, battery_v) for f in mix_force_torque(thrust_n, torque)])
        np.testing.assert_allclose(pwm, expected, atol=2)  # float32 in the firmware, float64 here


def test_the_per_rotor_force_limit_follows_the_battery(lib):
    """Full PWM gives the motor the whole battery voltage: the most a rotor can push is the fit at V_bat."""
    for battery_v, limit_n in ((4.2, 0.2787), (4.0, 0.2412), (3.7, 0.1931), (3.4, 0.1537), (3.1, 0.1219)):
        assert rotor_force_n(battery_v) == pytest.approx(limit_n, abs=1e-4)
        at_limit, _ = lib.motors({"thrustSi": 4 * limit_n * 0.999}, FORCE_TORQUE, battery_v)
        beyond, _ = lib.motors({"thrustSi": 4 * 0.6}, FORCE_TORQUE, battery_v)  # asks for more: capped
        assert 65000 < at_limit.min() <= 65535 and (beyond == 65535).all()


def test_below_thrust_min_a_rotor_is_off(lib):
    off, _ = lib.motors({"thrustSi": 4 * 0.0127}, FORCE_TORQUE, 3.8)
    on, _ = lib.motors({"thrustSi": 4 * 0.0130}, FORCE_TORQUE, 3.8)
    assert (off == 0).all() and (on > 0.9 * 65535 * motor_voltage_v(THRUST_MIN_N) / 3.8).all()


def test_the_cap_lowers_all_four_by_the_same_amount(lib):
    command = {"thrustSi": 0.9, "torqueX": 3e-3, "torqueY": 0.0, "torqueZ": 0.0}
    pwm, uncapped = lib.motors(command, FORCE_TORQUE, 3.7)
    raw = np.array([pwm_for_force(f, 3.7) for f in mix_force_torque(0.9, (3e-3, 0.0, 0.0))])
    assert raw.max() > 65535 and pwm.max() == 65535
    np.testing.assert_allclose(np.diff(pwm.astype(int)), np.diff(raw), atol=2)  # the steering differences stay
    assert (uncapped >= 0).all()


def test_legacy_and_force_modes_read_their_own_view_of_the_union(lib):
    pwm, uncapped = lib.motors({"roll": 1001, "pitch": -600, "yaw": 200, "thrust": 30000.0}, LEGACY, 3.8)
    r, p, y = 500, -300, 200  # roll/2 and pitch/2 truncated to int16
    np.testing.assert_array_equal(uncapped, [30000 - r + p + y, 30000 - r - p - y, 30000 + r - p + y,
                                             30000 + r + p - y])
    np.testing.assert_allclose(pwm, [pwm_for_force(u / 65535 * THRUST_MAX_N, 3.8) for u in uncapped], atol=2)
    _, uncapped = lib.motors({"forces": [0.0, 0.5, 1.2, -0.1]}, FORCE, 3.8)
    np.testing.assert_array_equal(uncapped, [0, 32767, 65535, 0])
    dead, _ = lib.motors({"thrustSi": 0.3}, FORCE_TORQUE, 1.9)  # supply below 2 V: no compensation, motors off
    assert (dead == 0).all()


def test_the_docs_voltage_table_follows_the_formula(repo_root):
    text = (repo_root / "docs" / "firmware_actuator_chain.md").read_text()
    rows = re.findall(r"^\|\s*(\d\.\d+)\s*\|\s*(0\.\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|", text, re.M)
    assert len(rows) >= 6, "the voltage -> max per-rotor force table is missing"
    for battery_v, force_n, grams, twr in rows:
        f = rotor_force_n(float(battery_v))
        assert float(force_n) == pytest.approx(f, abs=6e-4)
        assert float(grams) == pytest.approx(4 * f / 9.81 * 1000, abs=0.06)
        assert float(twr) == pytest.approx(4 * f / (0.029 * 9.81), abs=0.006)

"""The hand-over from the policy to the firmware's PID, through the firmware's output stage.

The stabilizer's ``control_t`` is one static union that lives across ticks; the real
``controllerPid`` sets ``controlModeLegacy`` and the thrust on every tick but its int16
roll/pitch/yaw only on attitude ticks (500 Hz: even ticks). These tests run the generated
controller with host gcc against stand-ins of the real PID (that timing), of the estimator
selection and of the output stage (power distribution, battery compensation, cap), with a
``control_t`` kept across ticks as stabilizer.c keeps it, and judge the motor PWM: on every tick
the PID flies, the motors get exactly what the firmware makes of the PID's own command, never of
the policy's float thrustSi/torqueX read as roll/pitch/yaw. Hand-overs happen on odd and even
ticks, by every path (parameter, setpoint, estimator switch, NaN), at moments hypothesis picks.
"""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.example_model import build_mlp_onnx
from deploy.crazyflie.host import HostController

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")

MODE_POLICY, MODE_PID_NO_SETPOINT, MODE_PID_DISABLED, MODE_PID_NONFINITE, MODE_PID_NO_KALMAN = 0, 1, 2, 3, 4
MODE_ABS, MODE_VELOCITY = 1, 2
LEGACY, FORCE_TORQUE = 0, 1
COMPLEMENTARY, KALMAN = 1, 2
PATHS = ("disable", "velocity_setpoint", "estimator", "nan")


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("handover")
    project = generate_project(build_mlp_onnx(tmp / "m.onnx", hidden=(32, 32), activation="elu", seed=7), tmp / "cf")
    return HostController.build(project, tmp / "host")


def _row(gyro_dps=(0.0, 0.0, 0.0), z=1.0, vz=0.0, setpoint=(0.3, -0.2, 1.2), nan=False):
    """Host state row: position, quaternion w x y z, velocity, gyro (deg/s), setpoint position."""
    row = np.array([0.0, 0.0, z, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, vz, *gyro_dps, *setpoint], dtype=np.float32)
    if nan:
        row[7] = np.nan  # velocity x
    return row


def _reset(lib):
    lib.set_enable(True)
    lib.set_estimator(KALMAN)
    lib.init()


def _fly_policy(lib, first_tick, last_tick, rng, battery_v=3.8):
    """Take off with the PID (velocity setpoints, through one position-loop tick), then the policy flies."""
    for tick in range(first_tick, last_tick):
        position_mode = MODE_VELOCITY if tick <= first_tick + 10 else MODE_ABS
        row = _row(gyro_dps=rng.uniform(-30, 30, 3), setpoint=rng.uniform(-0.8, 0.8, 3) + [0, 0, 1])
        mode, control, _ = lib.tick(row, tick, position_mode=position_mode, battery_v=battery_v)
    assert mode == MODE_POLICY and control["controlMode"] == FORCE_TORQUE
    assert control["thrustSi"] > 0.0  # the union holds the policy's floats now


def _trigger(lib, path):
    """Start a hand-over by ``path``; returns (position mode, NaN in the state, expected rlPolicy.mode)."""
    if path == "disable":
        lib.set_enable(False)
        return MODE_ABS, False, MODE_PID_DISABLED
    if path == "velocity_setpoint":
        return MODE_VELOCITY, False, MODE_PID_NO_SETPOINT
    if path == "estimator":
        lib.set_estimator(COMPLEMENTARY)
        return MODE_ABS, False, MODE_PID_NO_KALMAN
    return MODE_ABS, True, MODE_PID_NONFINITE


def _expected_pid_command(lib, attitude_written: bool) -> dict[str, float]:
    """What the PID leaves in a cleared control_t: its attitude outputs once an attitude tick ran, else 0."""
    out = lib.pid_outputs()
    roll, pitch, yaw = (out["roll"], out["pitch"], -out["yaw"]) if attitude_written else (0.0, 0.0, 0.0)
    if out["thrust"] == 0.0:
        roll = pitch = yaw = 0.0
    return {"roll": roll, "pitch": pitch, "yaw": yaw, "thrust": out["thrust"]}


def _check_pid_ticks(lib, start, n_ticks, path, rng, battery_v, gyro_scale=40.0):
    """Run ``n_ticks`` after the hand-over at ``start``; every tick the motors get the PID's own command."""
    position_mode, nan, expected_mode = _trigger(lib, path)
    while nan and start % 10:  # the policy holds its command until its next tick finds the NaN
        mode, control, _ = lib.tick(_row(nan=True), start, battery_v=battery_v)
        assert mode == MODE_POLICY and control["controlMode"] == FORCE_TORQUE
        start += 1
    attitude_written = False
    for tick in range(start, start + n_ticks):
        gyro = rng.uniform(-gyro_scale, gyro_scale, 3)
        mode, control, pwm = lib.tick(_row(gyro_dps=gyro, nan=nan), tick, position_mode=position_mode,
                                      battery_v=battery_v)
        assert mode == expected_mode == lib.log_mode, (tick, mode)
        assert control["controlMode"] == LEGACY
        attitude_written = attitude_written or tick % 2 == 0
        expected = _expected_pid_command(lib, attitude_written)
        for field in ("roll", "pitch", "yaw", "thrust"):
            assert control[field] == expected[field], (tick, field, control, expected)
        reference, _ = lib.motors(expected, LEGACY, battery_v)
        np.testing.assert_array_equal(pwm, reference, err_msg=f"tick {tick}")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("parity", ["odd", "even"])
def test_hand_over_on_odd_and_even_ticks(lib, path, parity):
    rng = np.random.default_rng(17)
    _reset(lib)
    _fly_policy(lib, 1, 43, rng)
    start = 43 if parity == "odd" else 44  # neither is a policy tick: the policy's command is held there
    _check_pid_ticks(lib, start, 25, path, rng, battery_v=3.8)


def test_hand_over_in_hover_keeps_the_four_motors_level(lib):
    """No rotation rates, an odd tick: the issue's case (36136/38928/17064/51872 instead of ~36000 each)."""
    rng = np.random.default_rng(3)
    _reset(lib)
    _fly_policy(lib, 1, 43, rng)
    lib.set_enable(False)
    for tick in range(43, 60):
        _, control, pwm = lib.tick(_row(), tick, battery_v=3.7)
        assert control["roll"] == control["pitch"] == control["yaw"] == 0.0
        assert int(pwm.max()) - int(pwm.min()) == 0, (tick, pwm)
        assert 20000 < pwm[0] < 65535


def test_the_stand_in_pid_writes_roll_pitch_yaw_only_on_attitude_ticks(lib):
    """The stand-in keeps the real controllerPid's timing: without the clearing, an odd tick shows the floats."""
    _reset(lib)
    policy = {"controlMode": FORCE_TORQUE, "thrustSi": 0.29, "torqueX": 1.5e-4, "torqueY": -2e-4, "torqueZ": 1e-5}
    lo, hi = struct.unpack("<hh", struct.pack("<f", policy["thrustSi"]))
    yaw_bits = struct.unpack("<hh", struct.pack("<f", policy["torqueX"]))[0]
    odd = lib.pid_tick(_row(gyro_dps=(5.0, -3.0, 2.0)), 41, policy)
    assert odd["controlMode"] == LEGACY  # the mode: every tick
    assert (odd["roll"], odd["pitch"], odd["yaw"]) == (lo, hi, yaw_bits)  # the policy's bytes, as int16
    assert odd["thrust"] == lib.pid_outputs()["thrust"]  # the thrust: every tick
    even = lib.pid_tick(_row(gyro_dps=(5.0, -3.0, 2.0)), 42, policy)
    out = lib.pid_outputs()
    assert (even["roll"], even["pitch"], even["yaw"]) == (out["roll"], out["pitch"], -out["yaw"]) != (0, 0, 0)
    # What that odd tick would have done to the motors: far from level.
    garbage, _ = lib.motors({k: odd[k] for k in ("roll", "pitch", "yaw", "thrust")}, LEGACY, 3.8)
    level, _ = lib.motors({"thrust": odd["thrust"]}, LEGACY, 3.8)
    assert int(garbage.max()) - int(garbage.min()) > 5000 and int(level.max()) == int(level.min())


def test_the_pid_is_reinitialized_at_each_hand_over_and_only_then(lib):
    rng = np.random.default_rng(5)
    _reset(lib)
    before = lib.pid_counters()
    _fly_policy(lib, 1, 31, rng)  # PID (take-off), then the policy: one hand-over (the first PID tick after init)
    after_policy = lib.pid_counters()
    assert after_policy["hand_overs"] == before["hand_overs"] + 1 and after_policy["inits"] == before["inits"] + 1
    lib.set_enable(False)
    for tick in range(31, 51):  # the PID flies for 20 ticks: re-initialized once, at the first of them
        lib.tick(_row(), tick)
    counters = lib.pid_counters()
    assert counters["inits"] == after_policy["inits"] + 1 and counters["hand_overs"] == after_policy["hand_overs"] + 1
    assert counters["calls"] == after_policy["calls"] + 20
    assert counters["attitude_inits"] == 1  # as the real attitudeControllerInit: once per boot
    assert counters["position_inits"] == counters["inits"]


def test_back_and_forth_many_times_never_reaches_the_motors(lib):
    """Policy, PID, policy, ... with a hand-over at every possible phase of the 10-tick policy period."""
    rng = np.random.default_rng(11)
    _reset(lib)
    _fly_policy(lib, 1, 21, rng)
    tick = 21
    for phase in range(10):
        while tick % 10 != phase:
            lib.tick(_row(gyro_dps=rng.uniform(-20, 20, 3)), tick)
            tick += 1
        _check_pid_ticks(lib, tick, 7, "disable", rng, battery_v=3.9)
        tick += 7
        lib.set_enable(True)
        while True:  # back to the policy at its next tick
            mode, _, _ = lib.tick(_row(gyro_dps=rng.uniform(-20, 20, 3)), tick)
            tick += 1
            if mode == MODE_POLICY:
                break


@settings(max_examples=40, deadline=None, derandomize=True)
@given(start=st.integers(min_value=21, max_value=160), path=st.sampled_from(PATHS),
       battery_v=st.floats(min_value=3.0, max_value=4.2), seed=st.integers(0, 2**31 - 1))
def test_hand_over_at_any_moment(lib, start, path, battery_v, seed):
    rng = np.random.default_rng(seed)
    _reset(lib)
    _fly_policy(lib, 1, start, rng, battery_v=battery_v)
    _check_pid_ticks(lib, start, 12, path, rng, battery_v=battery_v, gyro_scale=200.0)

"""The actuator chain's physics step applies each rotor's MEAN thrust over the step (issue 17, "the substep's mean thrust").

The end-of-step thrust it replaced let the thrust act up to one step early: at the training simulator's 200 Hz the
rotors' equivalent delay was 9.3 ms instead of the continuous system's 11.9 ms (tau = 20 ms). With the mean, a 200 Hz
step response matches a 4000 Hz one: what the policy learns on is the continuous system's actuator delay. The
chain's twins (torch, C, Python floats) are held equal by tests/test_actuator_chain.py; this is the physics.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.robots.actuator_chain import MATH
from robot_hrl.robots.crazyflie_2x import actuators
from sim.envs.array_ops import TORCH

K = actuators.constants(CRAZYFLIE_2X)
REFERENCE_HZ = 4000
TRAINING_HZ = 200


def _means_by_quadrature(x: float) -> tuple[float, float]:
    """mean g and mean g^2 of g(s) = 1 - exp(-s) over s in [0, x], by Gauss-Legendre quadrature (float64)."""
    nodes, weights = np.polynomial.legendre.leggauss(64)
    s = 0.5 * x * (nodes + 1.0)
    g = -np.expm1(-s)
    return float(0.5 * np.sum(weights * g)), float(0.5 * np.sum(weights * g * g))


@pytest.mark.parametrize("x", [1e-5, 1e-3, 0.0067, 0.033, 0.25, 0.9, 1.0, 1.1, 5.0, 50.0])
def test_the_mean_rise_is_the_mean_of_the_lag_over_the_step(x):
    """``motor_mean_rise`` (series below dt / tau = 1, closed form above) against quadrature: to float64's rounding on
    Python floats, to float32's relative precision in the float32 step (the closed form alone would lose it for small
    dt / tau: 1 - exp(-x) cancels)."""
    tau = 0.05
    dt = x * tau
    expected = _means_by_quadrature(x)
    got = actuators.motor_mean_rise(dt, tau, actuators.motor_alpha(dt, tau, MATH), MATH)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    t32 = torch.tensor([tau], dtype=torch.float32)
    got32 = actuators.motor_mean_rise(dt, t32, actuators.motor_alpha(dt, t32, TORCH), TORCH)
    np.testing.assert_allclose([float(v) for v in got32], expected, rtol=1e-6)


@settings(max_examples=200, deadline=None)
@given(start=st.floats(-3e4, 3e4), command=st.floats(0.0, K.rpm_max), tau=st.floats(1e-3, 2.0), rate=st.sampled_from([200, 500, 1000]))
def test_the_mean_thrust_lies_between_the_start_and_end_thrusts(start, command, tau, rate):
    """The lag is monotone between the (clipped) start and the command, so the mean of rpm^2 lies between the squares of
    its start and end speeds, and never outside the clip's range."""
    dt = 1.0 / rate
    alpha = actuators.motor_alpha(dt, tau, MATH)
    rise = actuators.motor_mean_rise(dt, tau, alpha, MATH)
    (mean_sq,) = actuators.mean_square_speeds((start,), (command,), *rise, K, MATH)
    (end,) = actuators.motor_lag((min(max(start, K.rpm_min), K.rpm_max),), (command,), alpha, K, MATH)
    w0 = min(max(start, K.rpm_min), K.rpm_max)
    lo, hi = sorted((w0 * w0, end * end))
    slack = 1e-9 * K.rpm_max ** 2
    assert lo - slack <= mean_sq <= hi + slack
    assert K.rpm_min ** 2 - slack <= mean_sq <= K.rpm_max ** 2 + slack


def _step_response(tau_s: float, rate_hz: int, end_of_step: bool = False, duration_s: float = 2.0) -> np.ndarray:
    """The nominal airframe's total rotor thrust over each physics step after a 1.3 x weight thrust step from hover
    (the firmware's PWM computed once and held: the chain alone, no rigid body). ``end_of_step``: the thrust of the
    speeds at each step's end, what the chain applied before the mean."""
    dt = 1.0 / rate_hz
    params = {p.name: float(p.nominal(K)) for p in actuators.PARAMETERS}
    params["motor_time_constant_s"] = tau_s
    derived = actuators.derive(params, K, dt, MATH)
    weight = CRAZYFLIE_2X.weight_n
    state = dict(actuators.initial_state(weight, derived, K, MATH))
    command = actuators.command((1.3 * weight, 0.0, 0.0, 0.0), state, derived, K, MATH)
    thrust = []
    for _ in range(int(round(duration_s * rate_hz))):
        sub = actuators.substep(state, command, derived, K, MATH)
        state = sub.state
        thrust.append(sum(actuators.rotor_thrusts(state["rotor_speed_rpm"], derived["thrust_coefficient"]))
                      if end_of_step else sub.thrust_n)
    return np.asarray(thrust)


def _equivalent_delay_s(thrust: np.ndarray, rate_hz: int) -> float:
    """The time-integral of the thrust's shortfall from its final value, over the step's size: the delay of the pure
    dead time that would give the body the same impulse."""
    final, start = thrust[-1], CRAZYFLIE_2X.weight_n
    return float(np.sum(final - thrust) / rate_hz / (final - start))


@pytest.mark.parametrize("tau_s", [0.02, 0.05, 0.15])
def test_a_200_hz_step_response_matches_a_4000_hz_one(tau_s):
    """The equivalent actuator delay at the training rate within 0.3 ms of the 4000 Hz reference (the end-of-step
    thrust was 2.3-2.6 ms short of it, checked too); and each 5 ms step's thrust is the mean of the reference's over the
    same 5 ms to 0.2 % of the step's size (what is left: the battery's voltage, which the motors' target follows a
    physics step late at either rate)."""
    duration = 10 * tau_s + 1.0
    fine = _step_response(tau_s, REFERENCE_HZ, duration_s=duration)
    coarse = _step_response(tau_s, TRAINING_HZ, duration_s=duration)
    reference = _equivalent_delay_s(fine, REFERENCE_HZ)
    # under tau: the battery sags as the thrust grows, so the thrust overshoots its final value while the voltage follows
    assert 0.5 * tau_s < reference < tau_s
    assert abs(_equivalent_delay_s(coarse, TRAINING_HZ) - reference) < 3e-4
    before = _equivalent_delay_s(_step_response(tau_s, TRAINING_HZ, end_of_step=True, duration_s=duration), TRAINING_HZ)
    assert reference - before > 2e-3
    windows = fine.reshape(-1, REFERENCE_HZ // TRAINING_HZ).mean(axis=1)
    step_size = fine[-1] - CRAZYFLIE_2X.weight_n
    assert np.max(np.abs(coarse - windows)) < 2e-3 * step_size


def test_at_hover_the_mean_thrust_is_the_hover_thrust():
    """A rotor at its command gives its thrust over the whole step: the chain's initial state holds the weight."""
    params = {p.name: float(p.nominal(K)) for p in actuators.PARAMETERS}
    for rate in (200, 500, 1000):
        derived = actuators.derive(params, K, 1.0 / rate, MATH)
        state = dict(actuators.initial_state(CRAZYFLIE_2X.weight_n, derived, K, MATH))
        sub = actuators.substep(state, actuators.hold_command(state, derived, K, MATH), derived, K, MATH)
        assert sub.thrust_n == pytest.approx(CRAZYFLIE_2X.weight_n, rel=1e-6)
        assert math.isfinite(sub.state["battery_voltage_v"])

"""The Crazyflie 2.x actuator chain, written once: crazyflie-firmware's output stage, then the motors.

    wrench [T N, tau_x, tau_y, tau_z N m]  (controlModeForceTorque)
      --firmware mixer (powerDistributionForceTorque: per-rotor force, floored at 0)--> rotor forces, N
      --THRUST_MIN dead zone (a rotor commanded below it is switched off)-->
      --motorsCompensateBatteryVoltage (the motor voltage of the cubic fit, over the battery voltage)--> PWM
      --powerDistributionCap (all four lowered by the highest one's excess over 65535, floored at 0)--> PWM, [0, 65535]
    ... held over the control period; every physics step:
      motor voltage = PWM / 65535 * battery voltage --cubic fit x the airframe's thrust scale--> static rotor force
      --first-order motor lag (on rotor speed, exact for a held command)--> rotor speeds
      --the mean of k_f rpm(t)^2 over the physics step (exact for the lag)--> forces, drag torques
      --the current drawn (idle + per newton of thrust)--> battery voltage = open-circuit - R * current (lagged)

The firmware part follows crazyflie-firmware release 2026.08 (``deploy/crazyflie/firmware.py``), cf2 platform,
2.1+ propellers (the Kconfig default ``CONFIG_CRAZYFLIE_21_PLUS``), ``CONFIG_ENABLE_THRUST_BAT_COMPENSATED=y``:

- ``src/modules/src/power_distribution_quadrotor.c``: ``powerDistributionForceTorque`` (mixer, negative rotor
  forces floored at 0, no redistribution) and ``powerDistributionCap`` (excess over 65535 subtracted from all
  four, floored at the idle thrust, 0 on cf2 without ``CONFIG_MOTORS_REQUIRE_ARMING``);
- ``src/drivers/src/motors.c``: ``motorsCompensateBatteryVoltage`` (below 2 V: 0; force below ``THRUST_MIN``:
  0; else PWM = 65535 v / V_b with v the real root of the cubic fit, solved in closed form);
- ``src/platform/interface/platform_defaults_cf2.h`` (``CONFIG_CRAZYFLIE_21_PLUS``, PR #1526, released in
  2025.12.1): ``VMOTOR2THRUST0..3``, ``THRUST_MIN``, ``THRUST_MAX``, ``THRUST2TORQUE`` (the robot's
  ``torque_to_thrust_m``), ``ARM_LENGTH``; ``CF_MASS`` 29 g.

Facts and their stored sources: docs/firmware_actuator_chain.md. The mixer's int32 command is truncated as
the firmware does; the PWM's own truncation to uint16 and the brushed timer's 8 bits are left out: the chain's PWM
is a float (``HostController.motors`` agrees within 2 counts, tests/test_actuator_chain.py). The firmware recomputes the PWM at 1 kHz with the
measured (low-pass filtered) battery voltage; here it is computed once per control period with the battery
state at its start and held; the battery state moves with a 0.1 s time constant, so the difference is small.

The battery (a documented simple model, not a Bitcraze figure): the terminal voltage the firmware measures
is ``V_oc - R * I``, with the current ``I = idle + per_newton * (sum of the rotor forces)`` (a DC motor's
current is proportional to its load torque, and a propeller's torque to its thrust), from the one published
thrust-stand sweep (docs/functional-areas/pwm-to-thrust.md: 0.24 A at rest, 4.44 A at 57.9 g). ``V_oc`` is
drawn over the usable range of a 1S LiPo (3.3 V nearly empty to 4.2 V full; motors.c and
platform_defaults_cf2.h: 4.2 V full, 3.2 V low, 3.0 V critical) and ``R`` (cell and connector) over 0.03-0.06
ohm, so that the weakest airframe (36 g, 3.3 V, 0.06 ohm) keeps a thrust-to-weight of about 1.35 under full
load (1.4 with 0.05 ohm); a battery sagging more would fail the firmware's health test long before
(config.h ``BAT_LOADING_SAG_THRESHOLD`` 0.70 V at full thrust allows up to 0.16 ohm) and such airframes are
flown by no policy here.

The physics step applies each rotor's MEAN thrust over the step (:func:`mean_square_speeds`), not the thrust of the
speed at its end: an end-of-step thrust acts up to one step early, which gave the training simulator (200 Hz) about
2.3 ms less actuator delay than the continuous system and made a policy trained on it fail more often at 500-1000 Hz
(benchmarks/README.md, issue 17, "the PyBullet gap" and "the substep's mean thrust"). With the mean, the impulse the
rotors give over a step is exact at any physics rate; the battery sags on the same mean load.

Every function is written column by column over an array namespace ``xp``
(``robot_hrl.robots.actuator_chain``): the torch step, the C step (generated from these functions
by ``sim/envs/native/codegen.py``), PyBullet and numpy all run this source. Parity:
tests/test_actuator_chain.py (numpy, Python floats, torch and C on hostile inputs, and the firmware's
output stage as ``deploy/crazyflie/host.py``'s ``HostController.motors`` builds it).
"""

from __future__ import annotations

import math
from typing import Mapping, NamedTuple

import numpy as np

from robot_hrl.robots.actuator_chain import MATH, NUMPY, ArrayNamespace, ChainField, ChainParameter, Column, Substep
from robot_hrl.robots.quadrotor import QuadrotorParams

NAME = "crazyflie_2x_force_torque"
"""The chain: controlModeForceTorque through the stock power distribution with battery compensation, brushed motors."""

FIRMWARE_RELEASE = "2026.08"
"""The crazyflie-firmware release whose output stage this chain is (``deploy/crazyflie/firmware.py``
FIRMWARE_RELEASE; a test checks they agree: robot_hrl does not import deploy)."""

FIRMWARE: dict[str, str] = {
    "name": "crazyflie-firmware", "release": FIRMWARE_RELEASE, "platform": "cf2", "propellers": "2.1+",
    "control_mode": "controlModeForceTorque",
}
"""The firmware this chain is, as the policy contract records it (``PolicyContract.firmware``): the runtime refuses a
model trained on another, and ``deploy/crazyflie`` checks it against the release it builds into."""

# ---- crazyflie-firmware 2026.08, src/platform/interface/platform_defaults_cf2.h, CONFIG_CRAZYFLIE_21_PLUS ----
VMOTOR2THRUST: tuple[float, float, float, float] = (
    -0.02476537915958403, 0.06523793527519485, -0.026792504967750107, 0.006776789303971145)
"""VMOTOR2THRUST0..3: rotor thrust (N) = c0 + c1 v + c2 v^2 + c3 v^3 at motor voltage v (V), 2.1+ propellers
(thrust-stand fit, PR #1465; constants PR #1526)."""
THRUST_MIN_N = 0.012817578393224994
"""THRUST_MIN: a rotor commanded below this force is switched off (motors.c returns PWM 0)."""
THRUST_MAX_N = 0.12
"""THRUST_MAX: the mixer's scale (65535 = THRUST_MAX); cancels in force-torque mode (kept for the int32 command)."""
THRUST2TORQUE_M = 0.0069928948992470565
"""THRUST2TORQUE: rotor drag torque per newton of thrust (2.1+ propellers); the robot's torque_to_thrust_m."""
MIN_SUPPLY_V = 2.0
"""motors.c motorsCompensateBatteryVoltage: below this battery voltage every motor gets PWM 0."""
PWM_FULL = 65535.0
"""uint16 full scale of motorsSetRatio."""
MAX_INVERTED_FORCE_N = 100.0
"""Forces above this are inverted as this (no rotor gives more than 0.28 N: its PWM is far beyond the cap either
way); keeps the cube roots' arguments finite in float32."""

# ---- the battery: a documented simple model (see the module docstring) --------------------------------------
IDLE_CURRENT_A = 0.24
"""Current at zero thrust (electronics and radio): crazyflie-firmware docs/functional-areas/pwm-to-thrust.md
(2015 thrust stand, 4.01 V at 0.24 A)."""
CURRENT_PER_THRUST_A_PER_N = (4.44 - 0.24) / (57.9e-3 * 9.80665)
"""Motor current per newton of total thrust: the same page's full-thrust row (4.44 A at 57.9 g), linear in
thrust (a DC motor's current follows its load torque, THRUST2TORQUE times the thrust). 7.40 A/N."""
BATTERY_TIME_CONSTANT_S = 0.1
"""Lag of the measured battery voltage: the firmware low-pass filters it (docs/functional-areas/
battery_compensation.md; motors.c's test mode: V += 0.01 (V_meas - V) per 1 kHz tick, 0.1 s)."""
OPEN_CIRCUIT_RANGE_V = (3.3, 4.2)
"""A 1S LiPo's usable open-circuit range: 4.2 V full (motors.c), 3.3 V near DEFAULT_BAT_LOW_VOLTAGE 3.2 V
(platform_defaults_cf2.h); training and evaluation draw from it."""
RESISTANCE_RANGE_OHM = (0.03, 0.06)
"""Cell plus connector resistance of a healthy battery (see the module docstring)."""


# ---- the cubic fit and its inverse (closed form, as the firmware) ---------------------------------------------
def _cardano_constants() -> tuple[float, float, float, float]:
    """v = t - b/(3a) with t the real root of t^3 + p t + q = 0, q = q0 - f/a (f the force): (shift, p, q0, 1/a)."""
    d, c, b, a = VMOTOR2THRUST
    p = (3.0 * a * c - b * b) / (3.0 * a * a)
    q0 = (2.0 * b ** 3 - 9.0 * a * b * c + 27.0 * a * a * d) / (27.0 * a ** 3)
    return b / (3.0 * a), p, q0, 1.0 / a


_SHIFT_V, _P, _Q0, _INV_A = _cardano_constants()
assert _P > 0.0, "the fit's slope has a real zero: the closed-form inverse below assumes it has none"


def _cbrt_positive(x: Column, xp: ArrayNamespace) -> Column:
    """Cube root of a column that is positive in exact arithmetic (rounding may give 0 or less: then 0)."""
    return xp.exp(xp.log(xp.maximum(x, 1e-30)) * (1.0 / 3.0))


def thrust_at_voltage(v: Column) -> Column:
    """The cubic fit: rotor thrust (N) at mean motor voltage ``v`` (V) (negative below 0.455 V)."""
    c0, c1, c2, c3 = VMOTOR2THRUST
    return c0 + v * (c1 + v * (c2 + v * c3))


def voltage_for_thrust(f: Column, xp: ArrayNamespace) -> Column:
    """The motor voltage (V) at which a rotor gives ``f`` (N): the one real root of the cubic (Cardano; the fit's
    slope never vanishes, so the discriminant is positive and both cube roots' arguments are positive)."""
    half_q = 0.5 * (_Q0 - xp.clip(f, None, MAX_INVERTED_FORCE_N) * _INV_A)
    root = xp.sqrt(half_q * half_q + (_P / 3.0) ** 3)
    v = _cbrt_positive(root - half_q, xp) - _cbrt_positive(root + half_q, xp) - _SHIFT_V
    return v + (half_q - half_q)  # NaN in, NaN out (C's log of a NaN is not one); 0 for any other force


class ChainConstants(NamedTuple):
    """The nominal robot's numbers the chain uses (Python floats; what the firmware knows)."""

    inverse_allocation: tuple[tuple[float, ...], ...]
    """Row j: rotor j's force per unit of [T, tau_x, tau_y, tau_z] (the inverse of the robot's allocation
    matrix = the firmware mixer with ARM_LENGTH and THRUST2TORQUE)."""
    max_rotor_thrust_n: float
    """The fit's force at the top of the open-circuit range (the most any rotor can give), N."""
    thrust_coefficient_n_per_rpm2: float
    """Nominal k_f: maps the static force to a rotor speed for the motor lag (speed = sqrt(force / k_f))."""
    torque_to_thrust_m: float
    """Nominal rotor drag torque per unit thrust (THRUST2TORQUE)."""
    rpm_min: float
    rpm_max: float
    """Rotor speed at ``max_rotor_thrust_n`` with the nominal k_f (the motor lag's saturation)."""
    rotor_x_m: tuple[float, ...]
    rotor_y_m: tuple[float, ...]
    spin: tuple[float, ...]
    """+1 counter-clockwise (drag torque clockwise on the body), -1 clockwise."""
    motor_time_constant_s: float
    """Nominal first-order motor lag."""
    nominal_open_circuit_v: float
    """The battery's open-circuit voltage without randomization (the middle of the range), V."""
    nominal_resistance_ohm: float
    """The battery's resistance without randomization, ohm."""


def constants(robot: QuadrotorParams) -> ChainConstants:
    """The chain's constants of ``robot`` (float64; the float32 simulators round them as they use them)."""
    inverse = np.linalg.inv(robot.allocation_matrix())
    positions = np.asarray(robot.rotor_positions_m, dtype=np.float64)
    max_force = float(thrust_at_voltage(OPEN_CIRCUIT_RANGE_V[1]))
    return ChainConstants(
        inverse_allocation=tuple(tuple(float(v) for v in row) for row in inverse),
        max_rotor_thrust_n=max_force,
        thrust_coefficient_n_per_rpm2=float(robot.thrust_coefficient_n_per_rpm2),
        torque_to_thrust_m=float(robot.torque_to_thrust_m),
        rpm_min=float(robot.rpm_min),
        rpm_max=math.sqrt(max_force / float(robot.thrust_coefficient_n_per_rpm2)),
        rotor_x_m=tuple(float(v) for v in positions[:, 0]),
        rotor_y_m=tuple(float(v) for v in positions[:, 1]),
        spin=tuple(float(v) for v in robot.rotor_spin_directions),
        motor_time_constant_s=float(robot.motor_time_constant_s),
        nominal_open_circuit_v=3.8,
        nominal_resistance_ohm=0.045,
    )


STATE: tuple[ChainField, ...] = (
    ChainField("rotor_speed_rpm", 4, "rotor speeds after the motor lag, M1..M4, rpm", critic_scale=lambda k: k.rpm_max),
    ChainField("battery_voltage_v", 1, "the battery voltage under load, as the firmware measures it (filtered), V",
               critic_scale=lambda k: k.nominal_open_circuit_v),
)
"""The chain's state rows."""

PARAMETERS: tuple[ChainParameter, ...] = (
    ChainParameter(
        "thrust_coefficient_scale", "true rotor force over the fit's at the same motor voltage (all four rotors)",
        nominal=lambda k: 1.0, range_key="thrust_coefficient_scale_range", critic_offset=1.0,
    ),
    ChainParameter(
        "torque_coefficient_scale", "true rotor drag torque coefficient over THRUST2TORQUE",
        nominal=lambda k: 1.0, range_key="torque_coefficient_scale_range", critic_offset=1.0,
    ),
    ChainParameter(
        "motor_time_constant_s", "first-order motor lag of the airframe, s",
        nominal=lambda k: k.motor_time_constant_s,
        range_key="motor_time_constant_range_s", train_range_key="motor_time_constant_train_range_s",
        distribution="log_uniform", critic_scale=0.1,
    ),
    ChainParameter(
        "battery_open_circuit_v", "the battery's open-circuit voltage (its charge), V",
        nominal=lambda k: k.nominal_open_circuit_v, range_key="battery_open_circuit_range_v",
        critic_offset=3.75, critic_scale=0.45,
    ),
    ChainParameter(
        "battery_resistance_ohm", "the battery's internal plus connector resistance, ohm",
        nominal=lambda k: k.nominal_resistance_ohm, range_key="battery_resistance_range_ohm",
        critic_offset=0.045, critic_scale=0.015,
    ),
)
"""The chain's randomized parameters (drawn per episode; nominal without randomization)."""


# ---- the firmware ---------------------------------------------------------------------------------
def _dot(columns: tuple, weights: tuple[float, ...]) -> Column:
    """sum_i columns[i] * weights[i], left to right (the same order in every language)."""
    acc = columns[0] * weights[0]
    for c, w in zip(columns[1:], weights[1:]):
        acc = acc + c * w
    return acc


def _max_all(columns: tuple, xp: ArrayNamespace) -> Column:
    """The largest column (a pairwise tree: max(max(a, b), max(c, d)) for four)."""
    cols = list(columns)
    while len(cols) > 1:
        cols = [xp.maximum(cols[i], cols[i + 1]) if i + 1 < len(cols) else cols[i] for i in range(0, len(cols), 2)]
    return cols[0]


def mix(wrench: tuple, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """powerDistributionForceTorque: [T, tau_x, tau_y, tau_z] -> rotor forces (N), negative ones floored at 0, as the
    firmware's int32 command carries them (truncated to a 65535th of THRUST_MAX, 1.8e-6 N)."""
    return tuple(xp.floor(xp.maximum(_dot(tuple(wrench), row), 0.0) * (PWM_FULL / THRUST_MAX_N)) * (THRUST_MAX_N / PWM_FULL)
                 for row in k.inverse_allocation)


def compensate_battery_voltage(forces: tuple, battery_v: Column, xp: ArrayNamespace) -> tuple:
    """motorsCompensateBatteryVoltage: each force -> PWM (float, may exceed 65535): 0 below THRUST_MIN or below
    2 V of battery, else 65535 v / V_b with v the motor voltage of the cubic fit."""
    scale = PWM_FULL / xp.maximum(battery_v, MIN_SUPPLY_V)
    on = battery_v >= MIN_SUPPLY_V
    return tuple(xp.where(on, xp.where(f < THRUST_MIN_N, 0.0, voltage_for_thrust(f, xp) * scale), 0.0) for f in forces)


def power_distribution_cap(pwm: tuple, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """powerDistributionCap: every motor down by the highest one's excess over 65535 (the differences, the torques,
    survive; the collective thrust gives way), floored at the idle thrust (0)."""
    excess = xp.maximum(_max_all(pwm, xp) - PWM_FULL, 0.0)
    return tuple(xp.clip(p - excess, 0.0, PWM_FULL) for p in pwm)


def firmware_pwm(wrench: tuple, battery_v: Column, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """The firmware's output stage: the PWM (0..65535, float) of each motor for ``wrench`` at battery voltage ``battery_v``."""
    return power_distribution_cap(compensate_battery_voltage(mix(wrench, k, xp), battery_v, xp), k, xp)


def static_rotor_forces(pwm: tuple, battery_v: Column, xp: ArrayNamespace) -> tuple:
    """The force (N) each rotor settles at under PWM ``pwm`` at battery voltage ``battery_v`` (the fit, >= 0)."""
    return tuple(xp.maximum(thrust_at_voltage(p * (1.0 / PWM_FULL) * battery_v), 0.0) for p in pwm)


def rotor_speed_command(thrusts: tuple, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """The speed at which a rotor gives ``thrusts`` with the nominal k_f, saturated to [rpm_min, rpm_max]."""
    return tuple(xp.clip(xp.sqrt(t / k.thrust_coefficient_n_per_rpm2), k.rpm_min, k.rpm_max) for t in thrusts)


def mixed_rotor_thrusts(wrench: tuple, k: ChainConstants, xp: ArrayNamespace, battery_v: Column = None) -> tuple:
    """The static rotor forces (N) the firmware's output stage gives for ``wrench`` (at the nominal battery's
    voltage while hovering unless ``battery_v`` is given)."""
    if battery_v is None:
        battery_v = k.nominal_open_circuit_v
    return static_rotor_forces(firmware_pwm(wrench, battery_v, k, xp), battery_v, xp)


# ---- the motors and rotors ------------------------------------------------------------------------
def motor_alpha(physics_dt_s: float, time_constant_s: Column, xp: ArrayNamespace) -> Column:
    """The exact discretization of a first-order lag over ``physics_dt_s`` for a held command."""
    return 1.0 - xp.exp(-physics_dt_s / time_constant_s)


_SERIES_BELOW = 1.0
"""dt / tau below which the step's mean rise (:func:`motor_mean_rise`) is summed as its power series: 1 - exp(-x) of a
small x loses float32's digits (the closed form's error there is float32's eps over x), the series keeps them."""
_SERIES_TERMS = 16
"""Terms of the series (the first left out is below 1e-10 of the sum at dt / tau = 1)."""


def _alternating_series(x: Column, coefficient, terms: int) -> Column:
    """sum_{n = 1 .. terms} (-1)^(n + 1) coefficient(n) x^n, by Horner's rule (from the smallest term)."""
    acc = x * coefficient(terms)
    for n in range(terms - 1, 0, -1):
        acc = x * (coefficient(n) - acc)
    return acc


def motor_mean_rise(physics_dt_s: float, time_constant_s: Column, alpha: Column, xp: ArrayNamespace) -> tuple:
    """The means of g(t) = 1 - exp(-t / tau) (the part of the way from the start speed to the command a first-order
    lag covers by t) and of g(t)^2 over one physics step [0, dt]; with x = dt / tau and alpha = g(dt) = 1 - exp(-x):

        mean g   = 1 - alpha / x
        mean g^2 = 1 - 2 alpha / x + (1 - exp(-2 x)) / (2 x) = mean g - alpha^2 / (2 x)

    both in [0, 1): 0 for a motor infinitely slow, 1 for one infinitely fast. Below dt / tau = 1 as their power series
    (sum (-1)^(n+1) x^n / (n+1)! and sum (-1)^n (2^n - 2) x^n / (n+1)!), which keep float32's relative precision where
    the closed forms cancel (the training physics has x = 0.03-0.25)."""
    x = physics_dt_s / time_constant_s
    series_g = _alternating_series(x, lambda n: 1.0 / math.factorial(n + 1), _SERIES_TERMS)
    series_g2 = -_alternating_series(x, lambda n: (2.0 ** n - 2.0) / math.factorial(n + 1), _SERIES_TERMS)
    closed_g = 1.0 - alpha / x
    closed_g2 = closed_g - alpha * alpha / (2.0 * x)
    small = x < _SERIES_BELOW
    return xp.where(small, series_g, closed_g), xp.where(small, series_g2, closed_g2)


def motor_lag(speeds: tuple, commands: tuple, alpha: Column, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """One physics step of each motor: speed += alpha (command - speed), saturated."""
    return tuple(xp.clip(r + alpha * (c - r), k.rpm_min, k.rpm_max) for r, c in zip(speeds, commands))


def mean_square_speeds(speeds: tuple, commands: tuple, mean_rise: Column, mean_rise_sq: Column, k: ChainConstants,
                       xp: ArrayNamespace) -> tuple:
    """The exact mean of each rotor's rpm(t)^2 over one physics step of the lag :func:`motor_lag` integrates.

    With w0 the speed at the step's start, u = command - w0 and g(t) = 1 - exp(-t / tau), rpm(t) = w0 + u g(t) on
    [0, dt], so the mean of rpm^2 = w0^2 + 2 w0 u g + u^2 g^2 is w0 (w0 + 2 u mean g) + u^2 mean g^2
    (:func:`motor_mean_rise`): w0^2 for a motor infinitely slow, the command's square for one infinitely fast.

    The rpm clip: the command is inside [rpm_min, rpm_max] (:func:`rotor_speed_command` saturates it) and so is
    every state the lag reaches (:func:`motor_lag` saturates it), and rpm(t) lies between w0 and the command, so the
    continuous lag never leaves the range: the mean needs no clip (no part of the step is saturated). A start
    outside the range is no state the chain reaches (the hostile tests feed them): it is clipped first."""
    out = []
    for r, c in zip(speeds, commands):
        w0 = xp.clip(r, k.rpm_min, k.rpm_max)
        u = c - w0
        out.append(w0 * (w0 + 2.0 * u * mean_rise) + u * u * mean_rise_sq)
    return tuple(out)


def rotor_thrusts(speeds: tuple, thrust_coefficient: Column) -> tuple:
    """Static rotor thrust k_f rpm^2, N."""
    return tuple(thrust_coefficient * r * r for r in speeds)


def mean_rotor_thrusts(mean_squares: tuple, thrust_coefficient: Column) -> tuple:
    """Each rotor's mean thrust over a physics step, k_f times its mean rpm^2 (:func:`mean_square_speeds`), N."""
    return tuple(thrust_coefficient * m for m in mean_squares)


def rotor_wrench(thrusts: tuple, torque_coefficient: Column, k: ChainConstants) -> tuple:
    """The rotors' [T, tau_x, tau_y, tau_z] on the body (FLU): tau_x = sum y f, tau_y = -sum x f, and the
    drag tau_z = -sum spin c_tau f (a counter-clockwise rotor turns the body clockwise)."""
    thrust = thrusts[0]
    for f in thrusts[1:]:
        thrust = thrust + f
    return (thrust, _dot(thrusts, k.rotor_y_m), -_dot(thrusts, k.rotor_x_m), -_dot(thrusts, k.spin) * torque_coefficient)


# ---- the battery ---------------------------------------------------------------------------------------------
def battery_current_a(total_thrust_n: Column) -> Column:
    """The current drawn (A) while the rotors give ``total_thrust_n`` (N) in all."""
    return IDLE_CURRENT_A + CURRENT_PER_THRUST_A_PER_N * total_thrust_n


def loaded_voltage_v(total_thrust_n: Column, open_circuit_v: Column, resistance_ohm: Column) -> Column:
    """The battery's terminal voltage (V) under the load of ``total_thrust_n``: V_oc - R I."""
    return open_circuit_v - resistance_ohm * battery_current_a(total_thrust_n)


# ---- the chain as the simulators call it ------------------------------------------------------------
def derive(parameters: Mapping[str, Column], k: ChainConstants, physics_dt_s: float, xp: ArrayNamespace) -> dict:
    """The airframe's true k_f and torque coefficient, its battery, and the motor and battery lags over one physics step
    (the motor's: alpha, and the means of its rise over the step for the mean thrust)."""
    alpha = motor_alpha(physics_dt_s, parameters["motor_time_constant_s"], xp)
    mean_rise, mean_rise_sq = motor_mean_rise(physics_dt_s, parameters["motor_time_constant_s"], alpha, xp)
    return {
        "thrust_coefficient": k.thrust_coefficient_n_per_rpm2 * parameters["thrust_coefficient_scale"],
        "torque_coefficient": k.torque_to_thrust_m * parameters["torque_coefficient_scale"],
        "motor_alpha": alpha,
        "motor_mean_rise": mean_rise,
        "motor_mean_rise_sq": mean_rise_sq,
        "open_circuit_v": parameters["battery_open_circuit_v"],
        "resistance_ohm": parameters["battery_resistance_ohm"],
        "battery_alpha": 1.0 - math.exp(-physics_dt_s / BATTERY_TIME_CONSTANT_S),
    }


def command(wrench: tuple, state: Mapping[str, Column], derived: Mapping[str, Column], k: ChainConstants,
            xp: ArrayNamespace) -> tuple:
    """The motors' PWM (0..65535) the firmware gives for ``wrench`` at the battery voltage it measures."""
    return firmware_pwm(wrench, state["battery_voltage_v"], k, xp)


def substep(state: Mapping[str, Column], command: tuple, derived: Mapping[str, Column], k: ChainConstants,
            xp: ArrayNamespace) -> Substep:
    """One physics step: the motor voltage of the held PWM, the motor lag towards the rotor speed of its force,
    the rotors' MEAN thrusts over the step (exact for the lag: :func:`mean_square_speeds`) and their wrench on the
    body, and the battery sagging under the mean current they draw. The new state holds the speeds at the step's end."""
    battery_v = state["battery_voltage_v"]
    targets = rotor_speed_command(static_rotor_forces(command, battery_v, xp), k, xp)
    start = state["rotor_speed_rpm"]
    speeds = motor_lag(start, targets, derived["motor_alpha"], k, xp)
    thrusts = mean_rotor_thrusts(mean_square_speeds(start, targets, derived["motor_mean_rise"], derived["motor_mean_rise_sq"], k, xp),
                                 derived["thrust_coefficient"])
    total, tau_x, tau_y, tau_z = rotor_wrench(thrusts, derived["torque_coefficient"], k)
    loaded = loaded_voltage_v(total, derived["open_circuit_v"], derived["resistance_ohm"])
    battery_v = battery_v + derived["battery_alpha"] * (loaded - battery_v)
    return Substep({"rotor_speed_rpm": speeds, "battery_voltage_v": battery_v}, thrusts, total, (tau_x, tau_y, tau_z))


def initial_state(weight_n: Column, derived: Mapping[str, Column], k: ChainConstants, xp: ArrayNamespace) -> dict:
    """Every rotor at the speed that carries ``weight_n`` with the airframe's true k_f; the battery sagged under that load."""
    hover = xp.sqrt(weight_n / (float(len(k.spin)) * derived["thrust_coefficient"]))
    return {"rotor_speed_rpm": (hover,) * len(k.spin),
            "battery_voltage_v": loaded_voltage_v(weight_n, derived["open_circuit_v"], derived["resistance_ohm"])}


def hold_command(state: Mapping[str, Column], derived: Mapping[str, Column], k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """Each motor at the PWM under which its rotor keeps the speed it has (the fit's voltage of its nominal force)."""
    scale = PWM_FULL / xp.maximum(state["battery_voltage_v"], MIN_SUPPLY_V)
    return tuple(xp.clip(voltage_for_thrust(k.thrust_coefficient_n_per_rpm2 * r * r, xp) * scale, 0.0, PWM_FULL)
                 for r in state["rotor_speed_rpm"])


# ---- what the others use: the limits, numpy conveniences ------------------------------------------------------
def max_rotor_force_n(battery_v):
    """The most a rotor gives at battery voltage ``battery_v`` (PWM 65535: the whole voltage on the motor), N."""
    return np.maximum(thrust_at_voltage(np.asarray(battery_v, dtype=np.float64)), 0.0)


MEASURED_VOLTAGE_RANGE_V = (MIN_SUPPLY_V, 4.35)
"""A battery reading the shield believes (V): from motors.c's MIN_SUPPLY_V (below it the firmware gives every motor
PWM 0: nothing flies) to 4.35 V, the most a charged 1S LiPo (LiHV) cell holds (4.2 V for the stock cell,
motors.c). A reading outside it (or NaN, or none) is not a measurement: the stopping model keeps the worst case."""

_FIXED_POINT_ITERATIONS = 8
"""Iterations of the sag's fixed point: each shrinks the error by R I'(T) T'(V) < 0.06 * 7.4 * 0.26 = 0.12, so 8 leave
well under a microvolt of the 2 V the range spans."""


def max_total_thrust_at_battery_n(robot: QuadrotorParams, measured_v: float) -> float:
    """The least total thrust (N) the rotors reach at full PWM (65535) on a battery the firmware measures at
    ``measured_v`` (its filtered pm voltage), whatever the airframe's battery and load:

    The reading is ``V_oc - R I`` filtered over past loads, each drawing at least ``IDLE_CURRENT_A``, so
    ``V_oc >= measured_v + R I_idle``; at full PWM the terminal voltage settles at ``V = V_oc - R I(T(V))``, hence
    ``V >= measured_v - R_max (I(T(V)) - I_idle)`` with ``R_max`` the top of ``RESISTANCE_RANGE_OHM``: the fixed point
    of that bound, and the fit's force at it on every rotor. At the emptiest, most resistive battery of the range
    read at idle (``3.3 - 0.06 * 0.24`` V) this is :func:`worst_case_max_total_thrust_n`. Plain floats (the shield
    calls it on a changed reading); the rotors' own spread (``thrust_coefficient_scale``) is not in it: the shield's
    ``stopping.thrust_fraction`` covers it."""
    v_meas = float(measured_v)
    r = RESISTANCE_RANGE_OHM[1]
    n = robot.num_rotors
    v = v_meas
    for _ in range(_FIXED_POINT_ITERATIONS):  # a contraction (R I' f' << 1)
        v = v_meas - r * (battery_current_a(n * max(float(thrust_at_voltage(v)), 0.0)) - IDLE_CURRENT_A)
    return n * max(float(thrust_at_voltage(v)), 0.0)


def worst_case_max_total_thrust_n(robot: QuadrotorParams) -> float:
    """The least total thrust any airframe of the randomization range can reach at full PWM (N): the emptiest, most
    resistive battery sagging under that full load, with the fit's force (the shields' stopping model's limit when
    no battery voltage is measured). The same function as :func:`max_total_thrust_at_battery_n`, read at idle on
    that battery."""
    return max_total_thrust_at_battery_n(robot, OPEN_CIRCUIT_RANGE_V[0] - RESISTANCE_RANGE_OHM[1] * IDLE_CURRENT_A)


def mix_wrench_to_rotor_thrusts(robot: QuadrotorParams, wrench: np.ndarray, battery_v: float | None = None) -> np.ndarray:
    """Firmware output stage: [thrust, tau] (..., 4) -> the rotors' static forces (..., 4), N (numpy)."""
    w = np.asarray(wrench, dtype=np.float64)
    k = constants(robot)
    return np.stack(mixed_rotor_thrusts(tuple(np.moveaxis(w, -1, 0)), k, NUMPY, battery_v), axis=-1)


def motor_pwm(robot: QuadrotorParams, wrench, battery_v: float) -> np.ndarray:
    """The firmware's PWM (float, shape (..., 4)) for wrenches (..., 4) at battery voltage ``battery_v`` (numpy)."""
    w = np.asarray(wrench, dtype=np.float64)
    return np.stack(firmware_pwm(tuple(np.moveaxis(w, -1, 0)), battery_v, constants(robot), NUMPY), axis=-1)


def rotor_speed_commands(robot: QuadrotorParams, wrench, battery_v: float | None = None) -> np.ndarray:
    """The rotor speeds (rpm, shape (..., 4)) the motors settle at for wrenches (..., 4) (numpy; nominal k_f)."""
    k = constants(robot)
    return np.stack(rotor_speed_command(tuple(np.moveaxis(mix_wrench_to_rotor_thrusts(robot, wrench, battery_v), -1, 0)),
                                        k, NUMPY), axis=-1)


__all__ = [
    "FIRMWARE", "FIRMWARE_RELEASE", "MATH", "NAME", "NUMPY", "PARAMETERS", "STATE", "THRUST2TORQUE_M", "THRUST_MAX_N", "THRUST_MIN_N",
    "MEASURED_VOLTAGE_RANGE_V", "VMOTOR2THRUST", "ChainConstants", "battery_current_a", "command", "compensate_battery_voltage", "constants", "derive",
    "firmware_pwm", "hold_command", "initial_state", "loaded_voltage_v", "max_rotor_force_n", "max_total_thrust_at_battery_n", "mix",
    "mix_wrench_to_rotor_thrusts", "mixed_rotor_thrusts", "mean_rotor_thrusts", "mean_square_speeds", "motor_alpha",
    "motor_lag", "motor_mean_rise", "motor_pwm", "power_distribution_cap",
    "rotor_speed_command", "rotor_speed_commands", "rotor_thrusts", "rotor_wrench", "static_rotor_forces", "substep",
    "thrust_at_voltage", "voltage_for_thrust", "worst_case_max_total_thrust_n",
]

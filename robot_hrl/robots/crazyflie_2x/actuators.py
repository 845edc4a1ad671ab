"""The Crazyflie 2.x actuator chain, written once: from the commanded wrench to the rotors' forces.

    wrench [T N, tau_x, tau_y, tau_z N m]  (controlModeForceTorque)
      --firmware mixer (nominal inverse allocation)--> rotor thrust commands, N
      --powerDistributionCap (all motors down by the highest one's overshoot, then [0, f_max])-->
      --the firmware's thrust -> speed map, nominal k_f (sqrt(f / k_f), saturated)--> rotor speed commands, rpm
      --first-order motor lag, exact for a command held over dt (alpha = 1 - exp(-dt / tau))--> rotor speeds
      --true k_f, true torque coefficient--> per-rotor thrust and drag torque --> the rotors' wrench on the body

The firmware parts follow crazyflie-firmware ``src/modules/src/power_distribution_quadrotor.c``
(``powerDistributionForceTorque``, ``powerDistributionCap``; commit 045c9558), with the nominal
robot: the firmware does not know the true airframe, the physics does (the parameters below).

Every function is written column by column over an array namespace ``xp``
(``robot_hrl.robots.actuator_chain``): the torch step, the C step (generated from these functions
by ``sim/envs/native/codegen.py``), PyBullet and numpy all run this source. Parity:
tests/test_actuator_chain.py (numpy, Python floats, torch and C on hostile inputs).

To change the chain (say the firmware's force -> PWM map with battery compensation): edit the
functions here; a new state row goes into ``STATE`` (its initial value into ``initial_state``), a
new randomized quantity into ``PARAMETERS`` (its range as a field of the training ``RandomizationCfg``
named by ``range_key`` and of PyBullet's named as the parameter); the simulators pick both up from the
declarations.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np

from robot_hrl.robots.actuator_chain import MATH, NUMPY, ArrayNamespace, ChainField, ChainParameter, Column, Substep
from robot_hrl.robots.quadrotor import QuadrotorParams

NAME = "crazyflie_2x_force_torque"
"""The chain: controlModeForceTorque through the stock power distribution, brushed motors."""


class ChainConstants(NamedTuple):
    """The nominal robot's numbers the chain uses (Python floats; what the firmware knows)."""

    inverse_allocation: tuple[tuple[float, ...], ...]
    """Row j: rotor j's thrust command per unit of [T, tau_x, tau_y, tau_z] (the inverse of the robot's allocation matrix)."""
    max_rotor_thrust_n: float
    thrust_coefficient_n_per_rpm2: float
    """Nominal k_f: the firmware's thrust -> speed map, and the true k_f's nominal value."""
    torque_to_thrust_m: float
    """Nominal rotor drag torque per unit thrust."""
    rpm_min: float
    rpm_max: float
    rotor_x_m: tuple[float, ...]
    rotor_y_m: tuple[float, ...]
    spin: tuple[float, ...]
    """+1 counter-clockwise (drag torque clockwise on the body), -1 clockwise."""
    motor_time_constant_s: float
    """Nominal first-order motor lag."""


def constants(robot: QuadrotorParams) -> ChainConstants:
    """The chain's constants of ``robot`` (float64; the float32 simulators round them as they use them)."""
    inverse = np.linalg.inv(robot.allocation_matrix())
    positions = np.asarray(robot.rotor_positions_m, dtype=np.float64)
    return ChainConstants(
        inverse_allocation=tuple(tuple(float(v) for v in row) for row in inverse),
        max_rotor_thrust_n=float(robot.max_rotor_thrust_n),
        thrust_coefficient_n_per_rpm2=float(robot.thrust_coefficient_n_per_rpm2),
        torque_to_thrust_m=float(robot.torque_to_thrust_m),
        rpm_min=float(robot.rpm_min),
        rpm_max=float(robot.rpm_max),
        rotor_x_m=tuple(float(v) for v in positions[:, 0]),
        rotor_y_m=tuple(float(v) for v in positions[:, 1]),
        spin=tuple(float(v) for v in robot.rotor_spin_directions),
        motor_time_constant_s=float(robot.motor_time_constant_s),
    )


STATE: tuple[ChainField, ...] = (
    ChainField("rotor_speed_rpm", 4, "rotor speeds after the motor lag, M1..M4, rpm", critic_scale=lambda k: k.rpm_max),
)
"""The chain's state rows."""

PARAMETERS: tuple[ChainParameter, ...] = (
    ChainParameter(
        "thrust_coefficient_scale", "true k_f over the nominal one (all four rotors; the firmware keeps the nominal)",
        nominal=lambda k: 1.0, range_key="thrust_coefficient_scale_range", critic_offset=1.0,
    ),
    ChainParameter(
        "torque_coefficient_scale", "true rotor drag torque coefficient over the nominal one",
        nominal=lambda k: 1.0, range_key="torque_coefficient_scale_range", critic_offset=1.0,
    ),
    ChainParameter(
        "motor_time_constant_s", "first-order motor lag of the airframe, s",
        nominal=lambda k: k.motor_time_constant_s,
        range_key="motor_time_constant_range_s", train_range_key="motor_time_constant_train_range_s",
        distribution="log_uniform", critic_scale=0.1,
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
    """The firmware mixer: [T, tau_x, tau_y, tau_z] -> uncapped rotor thrust commands (N), one per rotor."""
    return tuple(_dot(tuple(wrench), row) for row in k.inverse_allocation)


def power_distribution_cap(thrusts: tuple, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """powerDistributionCap: shift every motor down by the overshoot of the highest one, so the
    differences (the torques) survive and collective thrust gives way; then clip to [0, f_max]."""
    overshoot = xp.maximum(_max_all(thrusts, xp) - k.max_rotor_thrust_n, 0.0)
    return tuple(xp.clip(t - overshoot, 0.0, k.max_rotor_thrust_n) for t in thrusts)


def rotor_speed_command(thrusts: tuple, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """The speed a thrust command asks for with the nominal k_f, saturated to [rpm_min, rpm_max]."""
    return tuple(xp.clip(xp.sqrt(t / k.thrust_coefficient_n_per_rpm2), k.rpm_min, k.rpm_max) for t in thrusts)


def mixed_rotor_thrusts(wrench: tuple, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """Mixer and cap: the rotor thrust commands (N) the firmware gives for ``wrench``."""
    return power_distribution_cap(mix(wrench, k, xp), k, xp)


# ---- the motors and rotors ------------------------------------------------------------------------
def motor_alpha(physics_dt_s: float, time_constant_s: Column, xp: ArrayNamespace) -> Column:
    """The exact discretization of a first-order lag over ``physics_dt_s`` for a held command."""
    return 1.0 - xp.exp(-physics_dt_s / time_constant_s)


def motor_lag(speeds: tuple, commands: tuple, alpha: Column, k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """One physics step of each motor: speed += alpha (command - speed), saturated."""
    return tuple(xp.clip(r + alpha * (c - r), k.rpm_min, k.rpm_max) for r, c in zip(speeds, commands))


def rotor_thrusts(speeds: tuple, thrust_coefficient: Column) -> tuple:
    """Static rotor thrust k_f rpm^2, N."""
    return tuple(thrust_coefficient * r * r for r in speeds)


def rotor_wrench(thrusts: tuple, torque_coefficient: Column, k: ChainConstants) -> tuple:
    """The rotors' [T, tau_x, tau_y, tau_z] on the body (FLU): tau_x = sum y f, tau_y = -sum x f, and the
    drag tau_z = -sum spin c_tau f (a counter-clockwise rotor turns the body clockwise)."""
    thrust = thrusts[0]
    for f in thrusts[1:]:
        thrust = thrust + f
    return (thrust, _dot(thrusts, k.rotor_y_m), -_dot(thrusts, k.rotor_x_m), -_dot(thrusts, k.spin) * torque_coefficient)


# ---- the chain as the simulators call it ------------------------------------------------------------
def derive(parameters: Mapping[str, Column], k: ChainConstants, physics_dt_s: float, xp: ArrayNamespace) -> dict:
    """The airframe's true k_f and torque coefficient, and the motor lag's alpha over one physics step."""
    return {
        "thrust_coefficient": k.thrust_coefficient_n_per_rpm2 * parameters["thrust_coefficient_scale"],
        "torque_coefficient": k.torque_to_thrust_m * parameters["torque_coefficient_scale"],
        "motor_alpha": motor_alpha(physics_dt_s, parameters["motor_time_constant_s"], xp),
    }


def command(wrench: tuple, state: Mapping[str, Column], derived: Mapping[str, Column], k: ChainConstants,
            xp: ArrayNamespace) -> tuple:
    """The rotor speed commands (rpm) the firmware gives for ``wrench``."""
    return rotor_speed_command(mixed_rotor_thrusts(wrench, k, xp), k, xp)


def substep(state: Mapping[str, Column], command: tuple, derived: Mapping[str, Column], k: ChainConstants,
            xp: ArrayNamespace) -> Substep:
    """One physics step: the motor lag, then the rotors' thrusts and their wrench on the body."""
    speeds = motor_lag(state["rotor_speed_rpm"], command, derived["motor_alpha"], k, xp)
    thrusts = rotor_thrusts(speeds, derived["thrust_coefficient"])
    total, tau_x, tau_y, tau_z = rotor_wrench(thrusts, derived["torque_coefficient"], k)
    return Substep({"rotor_speed_rpm": speeds}, thrusts, total, (tau_x, tau_y, tau_z))


def initial_state(weight_n: Column, derived: Mapping[str, Column], k: ChainConstants, xp: ArrayNamespace) -> dict:
    """Every rotor at the speed that carries ``weight_n`` with the airframe's true k_f."""
    hover = xp.sqrt(weight_n / (float(len(k.spin)) * derived["thrust_coefficient"]))
    return {"rotor_speed_rpm": (hover,) * len(k.spin)}


def hold_command(state: Mapping[str, Column], derived: Mapping[str, Column], k: ChainConstants, xp: ArrayNamespace) -> tuple:
    """Each motor commanded to the speed it has."""
    return tuple(state["rotor_speed_rpm"])


# ---- numpy conveniences ---------------------------------------------------------------------------
def mix_wrench_to_rotor_thrusts(robot: QuadrotorParams, wrench: np.ndarray) -> np.ndarray:
    """Firmware-style mixer: [thrust, tau] (..., 4) -> per-rotor thrust (..., 4) in [0, f_max] (numpy)."""
    w = np.asarray(wrench, dtype=np.float64)
    k = constants(robot)
    return np.stack(mixed_rotor_thrusts(tuple(np.moveaxis(w, -1, 0)), k, NUMPY), axis=-1)


def rotor_speed_commands(robot: QuadrotorParams, wrench) -> np.ndarray:
    """The rotor speed commands (rpm, shape (..., 4)) for wrenches (..., 4) (numpy)."""
    w = np.asarray(wrench, dtype=np.float64)
    k = constants(robot)
    return np.stack(command(tuple(np.moveaxis(w, -1, 0)), {}, {}, k, NUMPY), axis=-1)


__all__ = [
    "MATH", "NAME", "NUMPY", "PARAMETERS", "STATE", "ChainConstants", "command", "constants", "derive", "hold_command", "initial_state",
    "mix", "mix_wrench_to_rotor_thrusts", "mixed_rotor_thrusts", "motor_alpha", "motor_lag", "power_distribution_cap",
    "rotor_speed_command", "rotor_speed_commands", "rotor_thrusts", "rotor_wrench", "substep",
]

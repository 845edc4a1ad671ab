"""A variant of the Crazyflie actuator chain with a second (toy) battery, written as the next chain change would be.

One edit of a chain module, nothing else: a state row (the battery voltage, sagging under the motors'
current), a randomized parameter (the battery's internal resistance) and chain steps (the firmware
scales the thrust command up as the voltage drops; a motor cannot spin faster than the voltage
allows). tests/test_chain_extension.py registers it for the Crazyflie and runs the torch step, the C
step and PyBullet on it with no change to any of them.

Its numbers are test values, not a battery model (the real chain, with the firmware's battery
compensation and a sagging battery, is robot_hrl/robots/crazyflie_2x/actuators.py): the point is the
mechanism. Its row is ``pack_voltage_v`` (the real chain's is ``battery_voltage_v``); it drives the
motors with rotor-speed commands as the chain did before the firmware's PWM.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from robot_hrl.robots.actuator_chain import ArrayNamespace, ChainField, ChainParameter, Column, Substep
from robot_hrl.robots.crazyflie_2x import actuators as cf

NAME = "test_crazyflie_2x_with_battery"


class BatteryConstants(NamedTuple):
    """The Crazyflie chain's constants and the toy battery's (test values)."""

    inverse_allocation: tuple
    max_rotor_thrust_n: float
    thrust_coefficient_n_per_rpm2: float
    torque_to_thrust_m: float
    rpm_min: float
    rpm_max: float
    rotor_x_m: tuple
    rotor_y_m: tuple
    spin: tuple
    motor_time_constant_s: float
    nominal_open_circuit_v: float
    nominal_resistance_ohm: float
    open_circuit_v: float
    internal_resistance_ohm: float
    current_per_thrust_a_per_n: float
    battery_time_constant_s: float


def constants(robot) -> BatteryConstants:
    return BatteryConstants(*cf.constants(robot), open_circuit_v=4.2, internal_resistance_ohm=0.05,
                            current_per_thrust_a_per_n=15.0, battery_time_constant_s=0.02)


STATE = cf.STATE + (ChainField("pack_voltage_v", 1, "the toy battery's terminal voltage, V", critic_scale=lambda k: k.open_circuit_v),)
PARAMETERS = cf.PARAMETERS + (
    ChainParameter("internal_resistance_scale", "the battery's internal resistance over the nominal one", nominal=lambda k: 1.0,
                   range_key="torque_coefficient_scale_range", critic_offset=1.0),
)


def derive(parameters: Mapping[str, Column], k: BatteryConstants, physics_dt_s: float, xp: ArrayNamespace) -> dict:
    derived = cf.derive(parameters, k, physics_dt_s, xp)
    derived["internal_resistance_ohm"] = k.internal_resistance_ohm * parameters["internal_resistance_scale"]
    derived["battery_alpha"] = cf.motor_alpha(physics_dt_s, k.battery_time_constant_s, xp)
    return derived


def command(wrench: tuple, state: Mapping[str, Column], derived: Mapping[str, Column], k: BatteryConstants, xp: ArrayNamespace) -> tuple:
    """The Crazyflie's mixer and cap, the thrust commands scaled up for a low battery (capped), then speeds."""
    compensation = k.open_circuit_v / state["pack_voltage_v"]
    thrusts = tuple(xp.minimum(t * compensation, k.max_rotor_thrust_n) for t in cf.mix(wrench, k, xp))
    return cf.rotor_speed_command(thrusts, k, xp)


def substep(state: Mapping[str, Column], command: tuple, derived: Mapping[str, Column], k: BatteryConstants, xp: ArrayNamespace) -> Substep:
    voltage = state["pack_voltage_v"]
    top_speed = k.rpm_max * voltage / k.open_circuit_v
    reachable = tuple(xp.minimum(c, top_speed) for c in command)
    speeds = cf.motor_lag(state["rotor_speed_rpm"], reachable, derived["motor_alpha"], k, xp)
    thrusts = cf.rotor_thrusts(speeds, derived["thrust_coefficient"])
    total, tau_x, tau_y, tau_z = cf.rotor_wrench(thrusts, derived["torque_coefficient"], k)
    sagged = k.open_circuit_v - derived["internal_resistance_ohm"] * (k.current_per_thrust_a_per_n * total)
    voltage = voltage + derived["battery_alpha"] * (sagged - voltage)
    return Substep({"rotor_speed_rpm": speeds, "battery_voltage_v": state["battery_voltage_v"], "pack_voltage_v": voltage},
                   thrusts, total, (tau_x, tau_y, tau_z))


def initial_state(weight_n: Column, derived: Mapping[str, Column], k: BatteryConstants, xp: ArrayNamespace) -> dict:
    return {**cf.initial_state(weight_n, derived, k, xp), "pack_voltage_v": k.open_circuit_v}


def hold_command(state: Mapping[str, Column], derived: Mapping[str, Column], k: BatteryConstants, xp: ArrayNamespace) -> tuple:
    return tuple(state["rotor_speed_rpm"])

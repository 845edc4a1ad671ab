"""The quadrotor's shield model: prior knowledge of the dynamics the shield units use, plain floats, no allocation.

* :class:`DynamicsModel`: the rigid-body constants of the robot (robot_hrl.robots), the bounds of
  the contract's action mapping, and the decelerations the backup controller can brake with. It
  meets the stopping-model protocol (robot_hrl.safety.stopping) the robot-neutral geofence,
  altitude and obstacle units use, and the shield-model protocol (robot_hrl.safety.families).
* :meth:`DynamicsModel.stopping_distance`: how far the robot travels toward a wall before it
  stands still, if the current command acts for the reaction time and the backup then brakes.
* :class:`StatePredictor`: dead reckoning of the state from the commanded wrench through the
  robot's actuator chain (:mod:`.rotors`), used while the odometry is stale.

The stopping model along one direction n (speed v = v.n, acceleration a = a.n):

    reaction (the command keeps acting):  s_r = max(0, v t_r + a t_r^2 / 2),  v_1 = max(0, v + a t_r)
    braking (the backup at deceleration b): s_b = v_1 * |v_1_vec| / (2 b)
    the backup's linear stop (its P loop):  s_l = (P - t_r) v_1,  s_0 = P max(v, 0) + Q max(a, 0)
    stopping distance d = max(s_r + max(s_b, s_l), s_0)

``P`` (s) and ``Q`` (s^2, vertical only) are the farthest the backup's closed loop carries a unit speed and a unit
push of the command (:func:`backup_linear_stop_s`): a proportional velocity loop brakes a slow motion over about
``P v``, more than ``v^2 / 2b`` below a few tenths of a m/s (docs/safety.md, "The backup's stop").

``|v_1_vec|`` is the speed in the braking plane: braking along the velocity vector, the travel
along n is the straight-line stopping distance projected on n. ``b`` is the deceleration the
backup reaches at its tilt limit (horizontal), with its thrust range (vertical), times
``brake_decel_fraction``; ``t_r`` is ``stopping.reaction_time_s`` horizontally (a tick, the
motor lag and the attitude swing), :func:`descent_reaction_time` for stopping a descent (the tick and the
latency, levelling from the predicted tilt, the rotors' spool-up with the slowest motor), and
``stopping.vertical_reaction_time_s`` for stopping a climb (a tick and the motor lag: less
thrust brakes a climb at any attitude).
"""

from __future__ import annotations

import functools
import math

from robot_hrl.contract.action_modes import ActionMap
from robot_hrl.errors import ConfigError
from robot_hrl.robots.quadrotor.ground_effect import ground_effect_gain, ground_effect_height_clip_m
from robot_hrl.robots.quadrotor.params import STANDARD_GRAVITY_MPS2, QuadrotorParams
from robot_hrl.robots.quadrotor.shield.vertical_flow import backup_flow_extreme_m
from robot_hrl.safety.frames import rotation_from_quat  # noqa: F401  (the quadrotor code's name for it)


def worst_case_max_total_thrust_n(robot: QuadrotorParams) -> float:
    """The total thrust the robot is sure to reach: the actuator chain's worst case where the chain declares one
    (``worst_case_max_total_thrust_n`` of ``robot_hrl.robots.<robot>.actuators``), capped at the robot model's
    maximum (the contract's thrust range)."""
    chain = _chain(robot)
    worst = getattr(chain, "worst_case_max_total_thrust_n", None)
    return robot.max_total_thrust_n if worst is None else min(robot.max_total_thrust_n, float(worst(robot)))


def _chain(robot: QuadrotorParams):
    """The robot's actuator chain module, or None for a robot without one."""
    from robot_hrl.robots.actuator_chain import chain_of

    try:
        return chain_of(robot.name)
    except ValueError:
        return None


class BatteryThrust:
    """The total thrust the rotors are sure to reach on the battery the robot measures, from its actuator chain
    (``max_total_thrust_at_battery_n`` and ``MEASURED_VOLTAGE_RANGE_V`` of ``robot_hrl.robots.<robot>.actuators``),
    capped at the robot model's maximum; the chain's worst case (``worst_case_max_total_thrust_n``) while no
    plausible reading is at hand (None, NaN, outside the range). A chain without them: always the worst case.

    A reading is rounded down to a millivolt and the thrust recomputed only when that changes (a few microseconds)."""

    QUANTUM_V = 1e-3

    def __init__(self, robot: QuadrotorParams):
        chain = _chain(robot)
        self._robot = robot
        self._cap = robot.max_total_thrust_n
        self.worst_n = worst_case_max_total_thrust_n(robot)
        """The thrust without a measurement (the chain's worst case), N."""
        self._at = getattr(chain, "max_total_thrust_at_battery_n", None)
        lo, hi = getattr(chain, "MEASURED_VOLTAGE_RANGE_V", (math.inf, -math.inf))
        self.range_v = (float(lo), float(hi))
        """A reading outside it is not believed (the worst case stays)."""
        self._key: float | None = None
        self._value = self.worst_n

    def plausible(self, battery_v) -> bool:
        """A finite reading inside the chain's range (None, NaN, inf, negative, 1e308: not)."""
        if self._at is None or battery_v is None:
            return False
        try:
            v = float(battery_v)
        except (TypeError, ValueError):
            return False
        return self.range_v[0] <= v <= self.range_v[1]  # False for NaN

    def __call__(self, battery_v) -> float:
        """The thrust (N) the stopping model and the backup count on with this reading."""
        if not self.plausible(battery_v):
            return self.worst_n
        key = math.floor(float(battery_v) / self.QUANTUM_V) * self.QUANTUM_V
        if key != self._key:
            self._key = key
            self._value = min(self._cap, float(self._at(self._robot, key)))
        return self._value


def check_config_fits(cfg, robot: QuadrotorParams) -> None:
    """Refuse limits beyond what the robot model can do (ConfigError naming each key)."""
    problems = []
    if robot.max_tilt_rad > 0 and math.radians(cfg.limits.max_tilt_deg) > robot.max_tilt_rad + 1e-9:
        problems.append(
            f"limits.max_tilt_deg {cfg.limits.max_tilt_deg} exceeds the robot model's max tilt {math.degrees(robot.max_tilt_rad):.1f} deg"
        )
    if robot.max_speed_mps > 0 and cfg.limits.max_speed_mps > robot.max_speed_mps + 1e-9:
        problems.append(f"limits.max_speed_mps {cfg.limits.max_speed_mps} exceeds the robot model's {robot.max_speed_mps} m/s")
    if cfg.limits.max_thrust_n > robot.max_total_thrust_n * (1 + 1e-3):
        problems.append(f"limits.max_thrust_n {cfg.limits.max_thrust_n} exceeds the robot's maximum thrust {robot.max_total_thrust_n:.4f} N")
    if cfg.limits.min_thrust_n >= robot.weight_n:
        problems.append(f"limits.min_thrust_n {cfg.limits.min_thrust_n} N would not let the robot descend (weight {robot.weight_n:.4f} N)")
    if cfg.stopping.motor_time_constant_s < robot.motor_time_constant_s - 1e-12:
        problems.append(
            f"stopping.motor_time_constant_s {cfg.stopping.motor_time_constant_s} s is faster than the robot model's "
            f"{robot.motor_time_constant_s} s (the predictions must assume the slowest motor, not a faster one)"
        )
    if problems:
        raise ConfigError("the shield config does not fit the robot: " + "; ".join(problems))


class DynamicsModel:
    """Robot constants as floats, and the braking capability of the backup controller."""

    def __init__(self, robot: QuadrotorParams, cfg, action: ActionMap):
        self.robot = robot
        self.action = action
        """The contract's action mapping (its bounds are the actuator range the units and the backup use)."""
        control_rate_hz = cfg.control_rate_hz
        self.g = STANDARD_GRAVITY_MPS2
        self.mass = robot.mass_kg
        self.weight = robot.weight_n
        self.inertia = tuple(float(v) for v in robot.inertia_kgm2)
        self.dt = 1.0 / control_rate_hz
        self.motor_tau = robot.motor_time_constant_s
        """The robot model's motor time constant, s (dead reckoning: the best estimate)."""
        self.design_motor_tau = cfg.stopping.motor_time_constant_s
        """The motor time constant the safety predictions assume (the slowest motor designed for), s."""
        self.latency = cfg.stopping.actuation_latency_s
        self.low = action.low
        self.high = action.high
        self.half_span = action.half_span
        self.battery_thrust = BatteryThrust(robot)
        """The total thrust the chain reaches on the measured battery (its worst case without a reading)."""
        self.max_total_thrust = self.battery_thrust.worst_n
        """The least total thrust the robot is sure to reach now, within the contract's thrust range: what the backup
        commands at most and the stopping model brakes a descent with. On the measured battery voltage
        (:meth:`set_battery_voltage`, every tick); without a plausible reading the actuator chain's worst case (for
        the Crazyflie the firmware's PWM cap at the emptiest, most resistive battery under full load)."""
        self.worst_max_total_thrust = self.max_total_thrust
        """The actuator chain's worst case (no battery reading), N."""
        self.battery_v: float | None = None
        """The battery reading the thrust is computed from (None: none plausible, the worst case)."""
        self.max_acceleration_mps2 = robot.max_total_thrust_n / self.mass + self.g
        """The largest acceleration the robot can reach: the contract's full thrust pointing down, with gravity (odometry jumps)."""
        self.collision_radius_m = robot.collision_radius_m
        self.max_speed_mps = cfg.limits.max_speed_mps
        """The speed limit (limits.max_speed_mps): the obstacles' slowdown zone scales it."""
        self.speed_horizon_s = cfg.limits.speed_horizon_s
        self.estimate_gain = self.dt / (self.design_motor_tau + self.dt)
        """Per-tick gain of the thrust and torque estimate: a lag of the outputs with the design (slowest) motor."""
        self.torque_motor_tau = self.design_motor_tau
        """The motor the attitude limit's stop assumes, s: the design motor, or the slowest one the flight so far allows
        (the ``motor_lag`` unit, :meth:`set_torque_motor_tau`)."""
        self.reaction_time = cfg.stopping.reaction_time_s
        self.vertical_reaction_time = cfg.stopping.vertical_reaction_time_s
        self.tilt_lag = self.design_motor_tau + self.dt + self.latency
        """Time before a new torque command takes effect (design motor lag + one tick + latency), s: the stopping model's."""
        self.attitude_lag = self.tilt_lag
        """The same with :attr:`torque_motor_tau`: the attitude limit's (``LimitsUnit.tilt_lag``), s."""
        self.tilt_alpha = 0.5 * self.high[1] / max(self.inertia[0], self.inertia[1])
        """Angular deceleration (roll/pitch) with half the torque range, rad/s^2."""
        self.handback_ticks = int(math.ceil(self.tilt_lag / self.dt))
        """Ticks after the backup gives control back during which :meth:`committed_rates` still counts: a torque
        commanded then reaches the body within the design motor lag, a tick and the latency (the design motor's, also
        once the motors are identified faster: the longer window)."""
        frac = cfg.stopping.brake_decel_fraction
        tilt = math.radians(cfg.backup.max_tilt_deg)
        self.backup_max_thrust_fraction = cfg.backup.max_thrust_fraction_of_max
        backup_min_thrust = cfg.backup.min_thrust_fraction_of_weight * self.weight
        self.brake_mass = cfg.stopping.airframe_mass_kg or self.mass
        """The mass the vertical brakes divide by: the airframe's measured mass where the config declares it
        (``stopping.airframe_mass_kg``), else the robot model's (then ``thrust_fraction`` covers the heaviest)."""
        # horizontal: thrust tilted by the backup's tilt limit while holding altitude
        self.brake_horizontal = frac * self.g * math.tan(tilt)
        # stopping a descent: the most upward acceleration the backup commands, with the weakest
        # robot designed for (thrust_fraction: heavier and weaker motors than the model); per thrust, N
        self._brake_up_per_n = frac * cfg.stopping.thrust_fraction * self.backup_max_thrust_fraction * math.cos(tilt) / self.brake_mass
        self._brake_up_g = frac * self.g
        self.brake_up = self._brake_up_per_n * self.max_total_thrust - self._brake_up_g
        # stopping a climb: thrust down to the backup's minimum, on the strongest robot designed for (thrust_fraction_max:
        # lighter and stronger than the model)
        self.weak_fraction = cfg.stopping.thrust_fraction
        """The weakest airframe's thrust over the model's (mass and rotor spread; with ``brake_mass``)."""
        self.strong_fraction = cfg.stopping.thrust_fraction_max
        """The strongest airframe's thrust over the model's."""
        self.brake_down = frac * (self.g - self.strong_fraction * backup_min_thrust / self.brake_mass)
        self.weak_fraction_cfg = self.weak_fraction
        """The configured weakest airframe (``stopping.thrust_fraction``): the worst case, and the bound of any estimate."""
        self.strong_fraction_cfg = self.strong_fraction
        """The configured strongest airframe (``stopping.thrust_fraction_max``)."""
        self._brake_per_n_per_fraction = frac * self.backup_max_thrust_fraction * math.cos(tilt) / self.brake_mass
        self._brake_down_per_fraction = frac * backup_min_thrust / self.brake_mass
        self._brake_frac_g = frac * self.g
        self.ff_mass = self.mass
        """The mass the backup's thrust feed-forward divides by: the model's until the airframe's hover thrust is estimated
        (:meth:`set_hover_thrust`), then that hover thrust over g (the mass the rotors carry, within the airframe range)."""
        self.reaction_weak_fraction = 1.0
        """The descent's reaction phase: the command's upward thrust times this (1: the nominal airframe's response to
        it; with a converged hover-thrust estimate in the model, its weak bound when below 1: a heavy, weak airframe
        descends faster under the same command, and the descent's reaction lasts 0.2-0.6 s)."""
        self.hover_thrust_n: float | None = None
        """The converged hover-thrust estimate the model uses (None: none; the worst case and the model's mass)."""
        self.disturbance_accel_mps2 = 0.0
        """A steady vertical disturbance (m/s^2) the estimate's bounds are derated for (the hover-thrust unit sets it)."""
        self.blind_brake_s = self.reaction_time + self.max_speed_mps / self.brake_horizontal
        b = cfg.backup
        self.backup_stop_vertical_s = backup_linear_stop_s(
            b.position_gain_per_s, b.velocity_gain_per_s, (self.design_motor_tau,), self.dt + self.latency)
        """The backup's linear stop, vertically: the farthest its closed loop (position into velocity gain, the slowest
        motor's lag, the tick and the latency) carries a speed v from the handover, per unit of v, s
        (:func:`backup_linear_stop_s`; :meth:`stopping_distance` counts ``(this - t_r) v_1`` at least)."""
        self.backup_stop_horizontal_s = backup_linear_stop_s(
            b.position_gain_per_s, b.velocity_gain_per_s, (self.design_motor_tau, b.rate_gain_per_s / b.attitude_gain_per_s2),
            self.dt + self.latency)
        """... horizontally, with the attitude loop's lag (``rate_gain / attitude_gain``: its lag behind a ramp) after the
        motor's: the tilt the velocity loop asks for is reached through it, s."""
        self.backup_stop_vertical_s2 = backup_linear_stop_s(
            b.position_gain_per_s, b.velocity_gain_per_s, (self.design_motor_tau,), self.dt + self.latency, 0.0, 1.0)
        """... per unit of the judged command's acceleration away from the target, vertically (the thrust's excess
        decays through the motors), s^2. Not horizontally: the tilt's own decay is the horizontal reaction time's
        (docs/safety.md, "Limits of what is shown")."""
        self._flow_gains = (b.position_gain_per_s, b.velocity_gain_per_s, b.velocity_integral_gain_per_s2,
                            b.integral_limit_mps2, b.max_speed_mps)
        fast = cfg.stopping.fastest_motor_time_constant_s
        self._flow_alphas = tuple(1.0 - math.exp(-self.dt / tau) for tau in
                                  ((self.design_motor_tau,) if fast is None or fast == self.design_motor_tau else (self.design_motor_tau, fast)))
        """Per-tick gains of the rotor-speed lag the vertical flow is simulated with: the slowest motor designed for, and the
        fastest (``stopping.fastest_motor_time_constant_s``) where given."""
        self._flow_latency_ticks = int(math.ceil(self.latency / self.dt - 1e-9))
        self._flow_ground_k_full = robot.ground_effect_coefficient * robot.propeller_radius_m ** 2 / 16.0
        """The model's whole ground effect as the vertical flow counts it: ``c_ge r^2 / 16`` (the gain ``1 + c_ge (r / 4h)^2``),
        m^2 (the flow from above counts all of it)."""
        self._flow_ground_k = cfg.stopping.flow_ground_effect_fraction * self._flow_ground_k_full
        """... the share the flow from below counts on (``stopping.flow_ground_effect_fraction``), m^2."""
        self._flow_ground_clip = ground_effect_height_clip_m(robot)
        self.floor_z = 0.0
        """Height of the world's floor, m (the shield sets it): the vertical flow's ground effect is counted from it."""
        self._sag_params = (b.position_gain_per_s, b.velocity_gain_per_s, b.velocity_integral_gain_per_s2,
                            b.integral_limit_mps2, self.design_motor_tau, self.dt + self.latency, self.g)
        self._backup_min_thrust = backup_min_thrust
        self._sag_key = None
        self.backup_sag_down_m = 0.0
        """How far the backup's hold sinks below its target on the weakest airframe the model allows now (m): its
        feed-forward turns ``ff_mass (a + g)`` into ``w_lo`` times the thrust that holds the airframe
        (:func:`backup_hold_sag_m`; :meth:`_update_backup_sag`). The stopping box's floor counts it."""
        self.backup_sag_up_m = 0.0
        """... how far it climbs above its target on the strongest one (``w_hi``), m: the box's top counts it."""
        self.descent_dead_time_s = self.dt + self.latency
        """The part of a descent's reaction time nothing shortens: the tick the judged command flies, then the actuation
        latency before the backup's first command reaches the motors, s (:func:`descent_reaction_time`)."""
        self.backup_brake_tilt_rad = tilt
        """The backup's tilt limit (``backup.max_tilt_deg``): the descent brake ``brake_up`` is computed at it."""
        self.level_cos = math.cos(tilt)
        """Cosine of the largest tilt at which the backup's full thrust, projected on the body z axis as it commands it
        (vertical part ``T cos^2``), still gives the descent brake ``brake_up``: above it the body must level first
        (:meth:`_update_level_tilt`, whenever ``brake_up`` changes)."""
        self.level_tilt_rad = tilt
        self._update_level_tilt()
        self._update_backup_sag()
        """How long the backup takes to stop the fastest motion the limits allow (the stale-state hold)."""
        if self.brake_up <= 0.0:
            backup_max_thrust = self.backup_max_thrust_fraction * self.max_total_thrust
            raise ConfigError(
                f"the backup cannot stop a descent: max thrust {backup_max_thrust:.3f} N (x stopping.thrust_fraction "
                f"{cfg.stopping.thrust_fraction}) at {cfg.backup.max_tilt_deg} deg does not lift {self.brake_mass * self.g:.3f} N; "
                "raise backup.max_thrust_fraction_of_max or lower backup.max_tilt_deg"
            )

    MIN_BRAKE_UP_MPS2 = 1e-3
    """The descent brake never counts on less (a battery too weak to lift the robot: the stopping box reaches the
    floor from any descent, and the battery unit lands it)."""

    def set_battery_voltage(self, battery_v) -> None:
        """The battery voltage the robot measures now (V; None, NaN or implausible: unknown): the thrust the backup
        commands at most and the descent brake follow it (:class:`BatteryThrust`). Called every tick by the shield."""
        thrust = self.battery_thrust(battery_v)
        self.battery_v = float(battery_v) if self.battery_thrust.plausible(battery_v) else None
        if thrust != self.max_total_thrust:
            self.max_total_thrust = thrust
            brake = self._brake_up_per_n * thrust - self._brake_up_g
            self.brake_up = brake if brake > self.MIN_BRAKE_UP_MPS2 else self.MIN_BRAKE_UP_MPS2
            self._update_level_tilt()
            self._update_backup_sag()

    def set_hover_thrust(self, estimate_n: float | None, low_n: float | None = None, high_n: float | None = None) -> None:
        """The airframe's hover thrust, estimated (robot_hrl/robots/quadrotor/shield/hover_thrust.py), N: ``estimate_n``
        feeds the backup's thrust forward (within the airframe range; None: the model's mass), ``high_n`` (the estimate
        plus its margin) is the weakest airframe the descent brake counts on, ``low_n`` the strongest the climb brake
        counts on; each derated by the steady vertical disturbance ``disturbance_accel_mps2`` and kept within the
        configured fractions (None: the worst case, the configured fractions).

        An airframe hovering at ``H`` accelerates ``a = rho (T - H)`` under the command ``T``, with ``rho`` its
        acceleration per newton of command; with a vertical disturbance ``d`` (``|d| <= d_max``) ``rho H = g - d``, so
        ``rho >= (g - d_max) / H_high``: the weak fraction (acceleration per newton times ``brake_mass``) is
        ``brake_mass (g - d_max) / H_high`` and the strong one ``brake_mass (g + d_max) / H_low``."""
        lo_f, hi_f = self.weak_fraction_cfg, self.strong_fraction_cfg
        bm = self.brake_mass
        self.hover_thrust_n = estimate_n
        if estimate_n is None:
            ff = self.mass
        else:
            ff = estimate_n / self.g
            ff_lo, ff_hi = bm / hi_f, bm / lo_f  # the airframe range
            ff = ff_lo if ff < ff_lo else ff_hi if ff > ff_hi else ff
        ff_changed = ff != self.ff_mass
        self.ff_mass = ff
        if low_n is None or high_n is None:
            weak, strong = lo_f, hi_f
            self.reaction_weak_fraction = 1.0
        else:
            d = self.disturbance_accel_mps2
            weak = bm * (self.g - d) / high_n
            strong = bm * (self.g + d) / low_n
            weak = lo_f if weak < lo_f else hi_f if weak > hi_f else weak
            strong = lo_f if strong < lo_f else hi_f if strong > hi_f else strong
            self.reaction_weak_fraction = weak if weak < 1.0 else 1.0
        if weak == self.weak_fraction and strong == self.strong_fraction:
            if ff_changed:
                self._update_backup_sag()
            return
        self.weak_fraction = weak
        self.strong_fraction = strong
        self._brake_up_per_n = self._brake_per_n_per_fraction * weak
        brake = self._brake_up_per_n * self.max_total_thrust - self._brake_up_g
        self.brake_up = brake if brake > self.MIN_BRAKE_UP_MPS2 else self.MIN_BRAKE_UP_MPS2
        self.brake_down = self._brake_frac_g - self._brake_down_per_fraction * strong
        self._update_level_tilt()
        self._update_backup_sag()

    def _update_level_tilt(self) -> None:
        """The largest tilt the descent brake holds at (``level_cos``, ``level_tilt_rad``).

        The backup commands the thrust vector's projection on the body z axis, so at a tilt ``theta`` from the thrust
        vector its full thrust ``T_b`` (on the weakest airframe: ``weak_fraction``) lifts ``T_b cos^2(theta)``. The
        brake ``brake_up`` = ``f (T_b cos(tilt_b) / m - g)`` (``f`` = ``brake_decel_fraction``) is reached while
        ``T_b cos^2(theta) / m - g >= brake_up``: ``cos^2(theta) >= (brake_up + g) m / T_b``. Never above the backup's
        tilt limit (the brake was computed at it); 0 rad when even level flight gives no more than the brake."""
        full = self._brake_up_per_n * self.max_total_thrust / (self._brake_up_g / self.g)  # T_b cos(tilt_b) / m
        full /= math.cos(self.backup_brake_tilt_rad)                                         # T_b / m
        c2 = (self.brake_up + self.g) / full if full > 0.0 else 1.0
        c = math.sqrt(c2) if c2 < 1.0 else 1.0
        lim = math.cos(self.backup_brake_tilt_rad)
        self.level_cos = c if c > lim else lim
        self.level_tilt_rad = math.acos(self.level_cos)

    SAG_QUANTUM = 0.005
    """The thrust ratios of :meth:`_update_backup_sag` are rounded outward (away from 1) to this (the sag grows with the
    distance from 1: conservative), so that the per-tick moves of a converged estimate reuse a cached integration."""

    SAG_ACCEL_QUANTUM_MPS2 = 0.05
    """... and the backup's acceleration command range inward to this (a narrower range sags more: conservative)."""

    def thrust_ratio_range(self) -> tuple[float, float]:
        """(``w_lo``, ``w_hi``): the thrust the airframes the model allows produce, over the thrust that would hold them,
        when the backup commands ``ff_mass (a + g)``. An airframe's acceleration per newton is at least
        ``weak_fraction / brake_mass`` and at most ``strong_fraction / brake_mass``, so ``w = ff_mass rho`` lies between
        ``weak_fraction ff_mass / brake_mass`` and ``strong_fraction ff_mass / brake_mass``: before the hover-thrust
        estimate converges the randomization's 0.7875-1.2833; with a converged estimate (its bounds and the steady
        disturbance) about 0.91-1.09."""
        r = self.ff_mass / self.brake_mass
        return self.weak_fraction * r, self.strong_fraction * r

    def _update_backup_sag(self) -> None:
        """``backup_sag_down_m`` and ``backup_sag_up_m`` for the thrust ratios the model allows now
        (:meth:`thrust_ratio_range`, rounded outward to :attr:`SAG_QUANTUM`)."""
        lo, hi = self.thrust_ratio_range()
        q = self.SAG_QUANTUM
        lo = math.floor(lo / q + 1e-9) * q
        hi = math.ceil(hi / q - 1e-9) * q
        # the backup's acceleration command range (its thrust range over its feed-forward mass), rounded inward
        qa = self.SAG_ACCEL_QUANTUM_MPS2
        a_hi = math.floor((self.backup_max_thrust_fraction * self.max_total_thrust / self.ff_mass - self.g) / qa) * qa
        a_lo = math.ceil((self._backup_min_thrust / self.ff_mass - self.g) / qa) * qa
        key = (lo, hi, a_lo, a_hi)
        if key == self._sag_key:
            return
        self._sag_key = key
        self.backup_sag_down_m = backup_hold_sag_m(*self._sag_params, min(lo, 1.0), a_lo, a_hi)
        self.backup_sag_up_m = backup_hold_sag_m(*self._sag_params, max(hi, 1.0), a_lo, a_hi)

    def _flow_asked_tilt(self, v) -> float:
        """The tilt the backup asks for to brake the horizontal speed of ``v`` (``k_v |v_h|`` over its least vertical
        thrust per mass), within its tilt limit, rad: its collective thrust is its desired vector projected on body z."""
        vh = math.sqrt(v[0] * v[0] + v[1] * v[1])
        asked = math.atan(self._flow_gains[1] * vh / (self._backup_min_thrust / self.ff_mass))
        return asked if asked < self.backup_brake_tilt_rad else self.backup_brake_tilt_rad

    def flow_axis(self, tick) -> tuple[float, float] | None:
        """(``cz``, ``align``) the backup's vertical flow is simulated with (robot_hrl/robots/quadrotor/shield/vertical_flow.py),
        one pair for the tick (the command's flow and the hold's are compared on the same axis); None where no upward
        thrust can be counted on.

        ``cz``: the vertical component of the worst thrust axis: the body z now, once the rates are stopped
        (:func:`thrust_axes`), and once the rates the torque in the motors still adds are stopped too: what they hold
        now decays through the slowest motor (``T_m tau_est / J``), and the judged command's tick adds
        ``dt (tau_cmd - tau_est) / J`` (a thrust cut under a full torque tilted the body 17 deg under the backup: the
        adversary under randomization). ``align``: the cosine of that tilt plus :meth:`_flow_asked_tilt`."""
        c, d = thrust_axes(self, tick.r, tick.w)
        cz = c[2] if c[2] < d[2] else d[2]
        w, est, cmd = tick.w, tick.est, tick.cmd
        tm, dt, jx, jy = self.design_motor_tau, self.dt, self.inertia[0], self.inertia[1]
        e = thrust_axes(self, tick.r, (w[0] + (tm * est[1] + dt * (cmd[1] - est[1])) / jx,
                                       w[1] + (tm * est[2] + dt * (cmd[2] - est[2])) / jy, w[2]))[1]
        cz = cz if cz < e[2] else e[2]
        if not cz > 0.0:
            return None
        delta = math.acos(cz if cz < 1.0 else 1.0) + self._flow_asked_tilt(tick.v)
        if not delta < 0.5 * math.pi:
            return None
        return cz, math.cos(delta)

    def backup_flow_lowest(self, tick, first_n: float | None, target_lo: float, target_hi: float,
                           target_cap: float, axis: tuple[float, float] | None = None) -> float:
        """The lowest height (m) the robot reaches if ``first_n`` (the collective thrust going out this tick, N; None:
        the backup takes over now) flies one tick and the backup then holds, on the weakest airframe the model allows
        now, the lower over the slowest motor designed for (from the thrust the shield estimates now) and the fastest
        (from the last command: it has followed it) (robot_hrl/robots/quadrotor/shield/vertical_flow.py); the hold target
        within ``target_lo``..``target_hi`` and no higher than ``target_cap``; ``axis``: :meth:`flow_axis` (computed
        here when not given). -inf where no upward thrust can be counted on."""
        if axis is None:
            axis = self.flow_axis(tick)
            if axis is None:
                return -math.inf
        return self._flow_extreme(tick, first_n, target_lo, target_hi, target_cap, axis[0], axis[1],
                                  self.weak_fraction, self._flow_ground_k, False)

    def backup_flow_highest(self, tick, first_n: float, target_lo: float, target_hi: float, target_cap: float) -> float:
        """The highest height (m) the robot reaches if ``first_n`` (N) flies one tick and the backup then holds, on the
        strongest airframe the model allows now, the higher over the slowest and the fastest motor (as
        :meth:`backup_flow_lowest`); the thrust counted straight up (the vertical part of a thrust is never more), the
        backup's collective thrust at most its desired vector's length (``1 / cos`` of :meth:`_flow_asked_tilt`), all of
        the model's ground effect; the hold target within ``target_lo``..``target_hi``, no lower than ``target_cap`` (a
        hold creeps toward its subgoal)."""
        return self._flow_extreme(tick, first_n, target_lo, target_hi, target_cap, 1.0,
                                  1.0 / math.cos(self._flow_asked_tilt(tick.v)), self.strong_fraction,
                                  self._flow_ground_k_full, True)

    def _flow_extreme(self, tick, first_n, target_lo, target_hi, target_cap, cz, align, fraction, ground_k,
                      highest: bool) -> float:
        """:func:`backup_flow_extreme_m` for each motor (the slowest from the shield's thrust estimate, the fastest from
        the last command), the airframe ``fraction`` of the model's thrust per mass; the lowest of them, or the highest."""
        kp, kv, ki, i_max, vmax = self._flow_gains
        prev = tick.prev[0]
        queued = (prev,) * self._flow_latency_ticks
        accel_per_n = fraction / self.brake_mass
        thrust_hi = self.backup_max_thrust_fraction * self.max_total_thrust
        extremes = [backup_flow_extreme_m(
            tick.p[2], tick.v[2], cz, align, tick.est[0] if i == 0 else prev, queued, first_n, accel_per_n, self.ff_mass,
            self._backup_min_thrust, thrust_hi, self.g, kp, kv, ki, i_max, vmax, alpha, self.dt, target_lo, target_hi,
            target_cap, ground_k, self._flow_ground_clip, self.floor_z, highest=highest)
            for i, alpha in enumerate(self._flow_alphas)]
        return max(extremes) if highest else min(extremes)

    # ---- commands ---------------------------------------------------------------------------
    def wrench_to_action(self, i: int, w: float) -> float:
        """Wrench term ``i`` -> its normalized action, through the contract's mapping (not clipped)."""
        return self.action.normalized_value(i, w)

    def neutral_command(self) -> list[float]:
        """Hover: the weight as thrust, no torque."""
        return [self.weight, 0.0, 0.0, 0.0]

    def blind_command(self) -> list[float]:
        """No state to control with: level thrust slightly below hover, no torque."""
        return [0.9 * self.weight, 0.0, 0.0, 0.0]

    def off_command(self) -> list[float]:
        return [0.0, 0.0, 0.0, 0.0]

    # ---- the stopping-model protocol (robot_hrl.safety.stopping) ------------------------------
    def stopping_box(self, tick) -> tuple:
        """:func:`stopping_box` between the commanded thrust and the motors' estimated thrust. While the policy is
        handed control back (``tick.handback``) its horizontal extents also take the body rates this tick's roll and
        pitch torque commits the slowest motor to (:meth:`committed_rates`)."""
        box = stopping_box(self, tick.p, tick.v, tick.r, tick.w, tick.cmd[0], tick.est[0])
        if not tick.handback:
            return box
        # the horizontal extents with the committed rates (the hand-back's swing toward a wall); the vertical ones with
        # the measured rates: committed there too, the floor held the trained policy off every low approach after a
        # hold (the demo mission ended with 2 of 6 goals)
        wide = stopping_box(self, tick.p, tick.v, tick.r, self.committed_rates(tick), tick.cmd[0], tick.est[0])
        return (min(box[0], wide[0]), max(box[1], wide[1]), min(box[2], wide[2]), max(box[3], wide[3]),
                box[4], box[5], box[6])

    def set_torque_motor_tau(self, tau_s: float) -> None:
        """The motor the attitude limit's stop assumes from now on (the ``motor_lag`` unit's bound; never slower than the
        design motor): its lag before the braking torque acts (:attr:`attitude_lag`). Nothing else changes: the torque
        estimate, the rate the torque in the motors still adds, the committed rates and the stopping model keep the
        design motor (narrowing those too let the adversary into obstacles: benchmarks/README.md, "Issue #16: the motor
        lag, identified")."""
        tau_s = min(float(tau_s), self.design_motor_tau)
        self.torque_motor_tau = tau_s
        self.attitude_lag = tau_s + self.dt + self.latency

    def committed_rates(self, tick) -> list:
        """The body rates plus what the change of roll and pitch torque from the motors' estimate to this tick's
        command adds before the backup can take it out again: the torque reaches the body through the slowest
        motor designed for and keeps acting about that long after it is withdrawn, ``T_m (tau_cmd - tau_est) / J``.

        Counted only on the policy's first ticks after the backup gives control back (its horizontal extents): a
        policy handed control beside a wall stepped to full roll and pitch torque for two ticks and swung the body
        12-19 deg toward it before the measured rates showed it (the adversary under domain randomization,
        benchmarks/README.md). Counted on every tick it doubled the demo mission (the trained policy's torques
        change every tick near the landmarks); counted while the backup holds too, it kept the trained policy from
        ever getting control back beside a landmark (the demo mission: 2 of 6 goals)."""
        w, cmd, est = tick.w, tick.cmd, tick.est
        tm = self.design_motor_tau
        return [w[0] + tm * (cmd[1] - est[1]) / self.inertia[0], w[1] + tm * (cmd[2] - est[2]) / self.inertia[1], w[2]]

    def predicted_speed(self, tick, horizon_s: float) -> float:
        return predicted_speed(tick, self, horizon_s)

    def slowdown(self, tick, horizon_s: float, limit_mps: float):
        """The collective thrust lowered to :func:`slowdown_thrust` (or None)."""
        thrust = slowdown_thrust(tick, self, horizon_s, limit_mps)
        if thrust is None:
            return None
        cmd = tick.cmd
        return [thrust, cmd[1], cmd[2], cmd[3]], f"thrust {cmd[0]:.3f} -> {thrust:.3f} N"

    CLAMP_ITERATIONS = 14
    """Bisection steps of :meth:`clamp_thrust` (the thrust range over 2^14: about 0.04 mN on the Crazyflie)."""

    def clamp_thrust(self, tick, accept):
        """The command with its collective thrust moved toward the motors' estimated thrust just enough that
        ``accept(box)`` holds for its stopping box (``tick.stop_box`` left as the new command's box), or None
        (``tick.cmd`` and the box unchanged) when no thrust between the command's and the estimate gives one.

        :func:`stopping_box` holds the thrust between the command's and the estimate for the reaction time: moving the
        command's thrust toward the estimate narrows that interval, so every extent of the box (x, y, z, either side)
        only shrinks or stays, and the descent's reaction time (the spool-up from the weaker thrust) only shortens.
        Beyond the estimate nothing changes (the box holds the weaker and the stronger of the two), so the estimate is
        the end of the search. ``accept`` must be monotone in that sense (a box inside an accepted one is accepted:
        the fence, the altitude band, the obstacles' clearances are). The clamped thrust lies between the command and
        the motors' lagged output: inside the actuator range and the slew limit the command was already held to, and
        the predicted speed (the larger of the two) does not grow. Bisection (:attr:`CLAMP_ITERATIONS`), keeping the
        accepted end: the result is judged exactly as an unchanged command would be (the same box, the same test)."""
        t_cmd, t_est = tick.cmd[0], tick.est[0]
        kept = self._toward_motors(tick, accept, (0,))
        if kept is None:
            return None
        return kept, f"thrust {t_cmd:.3f} -> {kept[0]:.3f} N (motors {t_est:.3f} N)"

    def _toward_motors(self, tick, accept, terms: tuple) -> list | None:
        """The one search of both clamps: the command with its ``terms`` moved from the command's values toward the
        motors' estimate (``tick.est``) by the least share for which ``accept(box)`` holds, by bisection on the share of
        the step kept (:attr:`CLAMP_ITERATIONS`, keeping the accepted end); ``tick.stop_box`` left as the kept command's
        box and ``tick.cmd`` unchanged. None (box unchanged too) when the terms already are the motors' or even the
        motors' give no accepted box."""
        cmd, est = tick.cmd, tick.est
        orig = [cmd[i] for i in terms]
        if all(cmd[i] == est[i] for i in terms):
            return None
        box = tick.stop_box

        def judge(share: float):
            for i, c in zip(terms, orig):
                cmd[i] = est[i] + share * (c - est[i])
            tick.stop_box = None
            return self.stopping_box(tick)

        end = judge(0.0)
        if not accept(end):
            for i, c in zip(terms, orig):
                cmd[i] = c
            tick.stop_box = box
            return None
        bad, good = 1.0, 0.0
        for _ in range(self.CLAMP_ITERATIONS):
            mid = 0.5 * (bad + good)
            b = judge(mid)
            if accept(b):
                good, end = mid, b
            else:
                bad = mid
        kept = list(cmd)
        for i, c in zip(terms, orig):
            kept[i] = est[i] + good * (c - est[i])
            cmd[i] = c
        tick.stop_box = end
        return kept

    def clamp_handback_torque(self, tick, accept):
        """On a hand-back tick (``tick.handback``): the command with its roll and pitch torques moved toward the motors'
        estimated torques just enough that ``accept(box)`` holds (``tick.stop_box`` left as the new command's box), or
        None (``tick.cmd`` and the box unchanged) when even the motors' own torques give none, or on any other tick.

        The hand-back box takes the body rates the torque step from the motors' torques to the command commits the
        slowest motor to (:meth:`committed_rates`: ``T_m (tau_cmd - tau_est) / J``, about 1 rad/s per 1e-4 N m on the
        Crazyflie). A trained policy hovering beside a wall or at its goal commands a few 1e-4 N m more than the
        backup's hold; refused for that, the backup held again, judged the policy safe for ``backup.recover_s``,
        handed back, and refused it again, until the episode ended (issue #16: the holds that never ended at the goal).
        Moving the two torques toward the estimate scales that step down, and at the estimate the committed rates are
        the measured ones: the box of any tick that is not a hand-back. Bisection (:attr:`CLAMP_ITERATIONS`) keeping
        the accepted end: the result is judged exactly as an unchanged command would be (the same box, the same test).
        Thrust and yaw torque untouched."""
        if not tick.handback:
            return None
        r_cmd, p_cmd = tick.cmd[1], tick.cmd[2]
        kept = self._toward_motors(tick, accept, (1, 2))
        if kept is None:
            return None
        return kept, f"hand-back torque (roll {r_cmd:.2e} -> {kept[1]:.2e}, pitch {p_cmd:.2e} -> {kept[2]:.2e} N m)"

    def horizontal_travel_m(self, tick, ux: float, uy: float) -> float:
        """How far the stopping box reaches from the robot along the unit horizontal direction ``(ux, uy)``, m (>= 0):
        :func:`stopping_box`'s x extent in a frame turned to ``u``. The same worst cases: the thrust between the
        command's and the motors' estimate over ``brake_mass``, along body z now or once the rates are stopped, the same
        plane speed after the reaction time (each axis's worst: it bounds the speed of every realization, whichever way
        the frame is turned), the same brake; on a hand-back tick the larger of the measured and the committed rates',
        as the box. At ``u`` = +x it is ``x1 - p_x`` of the box, at -y ``p_y - y0`` (tests/test_safety_units.py
        checks the four). The obstacle unit's approach test intersects the box with this bound toward a box's nearest
        point (robot_hrl/safety/units/obstacles.py): a box is a loose hull of a diagonal stop."""
        d = self._horizontal_travel(tick, tick.w, ux, uy)
        if tick.handback:
            wide = self._horizontal_travel(tick, self.committed_rates(tick), ux, uy)
            d = d if d > wide else wide
        return d

    def _horizontal_travel(self, tick, w, ux: float, uy: float) -> float:
        t_a, t_b = tick.cmd[0], tick.est[0]
        strong, weak = (t_a, t_b) if t_a > t_b else (t_b, t_a)
        strong /= self.brake_mass
        weak /= self.brake_mass
        c, d = thrust_axes(self, tick.r, w)
        a_u = -math.inf
        ax = ay = 0.0
        for axis in (c, d):
            along = axis[0] * ux + axis[1] * uy
            a = strong * along if along > 0 else weak * along
            if a > a_u:
                a_u = a
            kx, ky = strong * abs(axis[0]), strong * abs(axis[1])  # each world axis's worst acceleration, as the box's
            ax = ax if ax > kx else kx
            ay = ay if ay > ky else ky
        v = tick.v
        t = self.reaction_time
        v1x = abs(v[0]) + ax * t
        v1y = abs(v[1]) + ay * t
        return self.stopping_distance(v[0] * ux + v[1] * uy, a_u, math.sqrt(v1x * v1x + v1y * v1y), self.brake_horizontal)

    def approach_travel_m(self, tick, n) -> float:
        """How far the robot travels along the unit world direction ``n`` before it stands still, if the tick's
        command acts for the reaction time and the backup then brakes (:meth:`stopping_distance` along ``n``;
        the direction-aware obstacle rule of ``range_obstacles``, robot_hrl.safety.stopping.travel_along).

        Speed along ``n``: ``v.n``; acceleration along ``n``: the worst of the commanded and the estimated thrust
        along body z now or along the axis the body rates carry it to (:func:`thrust_axes`, as :func:`stopping_box`),
        with gravity. A horizontal-ish ``n`` brakes with the horizontal deceleration in the plane of the velocity
        after the reaction time, a vertical one as the stopping box does. 0 when the robot moves away from ``n``
        and the command does not turn it around within the reaction time; the command's own turning point when it
        does (``v.n^2 / 2|a.n|``: the formula's travel at the end of the reaction time would miss that peak)."""
        v = tick.v
        nx, ny, nz = n[0], n[1], n[2]
        vn = v[0] * nx + v[1] * ny + v[2] * nz
        c, d = thrust_axes(self, tick.r, tick.w)
        cmd, est = tick.cmd[0], tick.est[0]
        an, best = -math.inf, c
        for axis in (c, d):
            along = axis[0] * nx + axis[1] * ny + axis[2] * nz
            for thrust in (cmd, est):
                a = thrust / self.mass * along
                if a > an:
                    an, best = a, axis
        an -= self.g * nz
        t = self.reaction_time if nz <= 0.0 or abs(nz) < 0.7 else self.vertical_reaction_time
        if nz <= -0.7:  # a descent: the reaction of stopping one (levelling, then the rotors' spool-up)
            cz = c[2] if c[2] < d[2] else d[2]
            t = descent_reaction_time(self, cz, tick.w, cmd if cmd < est else est)
        # the backup's hold then sinks on a weak airframe, climbs on a strong one (backup_sag_down_m / _up_m)
        sag = self.backup_sag_down_m if nz <= -0.7 else self.backup_sag_up_m if nz >= 0.7 else 0.0
        if vn > 0.0 and an < 0.0 and vn + an * t <= 0.0:  # the command itself turns it around: its peak
            return vn * vn / (-2.0 * an) + sag
        if abs(nz) < 0.7:  # (about) horizontal: the tilt brakes, in the plane of the velocity after the reaction time
            acc = (cmd if cmd > est else est) / self.mass
            px, py = v[0] + acc * best[0] * t, v[1] + acc * best[1] * t
            return self.stopping_distance(vn, an, math.sqrt(px * px + py * py), self.brake_horizontal, t)
        if nz > 0.0:  # a climb: less thrust brakes it; the hold climbs on a strong airframe
            return self.stopping_distance(vn, an, 0.0, self.brake_down, self.vertical_reaction_time,
                                          self.backup_stop_vertical_s, self.backup_stop_vertical_s2) + sag
        return (self.stopping_distance(vn, an, 0.0, self.brake_up, t, self.backup_stop_vertical_s, self.backup_stop_vertical_s2)
                + sag)

    # ---- stopping distance ----------------------------------------------------------------
    def stopping_distance(self, v: float, a: float, speed_plane: float, brake: float, t: float | None = None,
                          linear_s: float | None = None, linear_s2: float = 0.0) -> float:
        """Travel along a direction with speed ``v`` and acceleration ``a`` (both along it)
        before standing still; ``speed_plane`` is the speed in the braking plane after the
        reaction time ``t`` (default: the horizontal one) (>= |v_1|), ``brake`` the
        deceleration available in that plane.

        The braking phase is the longer of the full brake's ``v_1 |v_1_vec| / (2 brake)`` and the backup's linear stop
        beyond the reaction time, ``(linear_s - t) v_1`` (``linear_s``: :attr:`backup_stop_horizontal_s` by default,
        :attr:`backup_stop_vertical_s` for the vertical brakes): a proportional loop brakes a slow motion gently, over
        more than ``v^2 / 2b``. And never less than that linear stop from the state now, ``linear_s v + linear_s2 a``
        (``linear_s2``: :attr:`backup_stop_vertical_s2` for the vertical brakes, 0 horizontally): a command that brakes harder than the
        backup does so for its tick only; one that pushes away keeps pushing through the motors' lag (docs/safety.md, "The backup's stop")."""
        if t is None:
            t = self.reaction_time
        if linear_s is None:
            linear_s = self.backup_stop_horizontal_s
        s_r = v * t + 0.5 * a * t * t
        if s_r < 0.0:
            s_r = 0.0
        # the backup's linear stop from the handover: the command's own braking lasts a tick, not t_r; its push decays
        # through the motors (the sum of the two peaks bounds the peak of the sum)
        s_0 = linear_s * (v if v > 0.0 else 0.0) + linear_s2 * (a if a > 0.0 else 0.0)
        v1 = v + a * t
        if v1 <= 0.0:
            return s_r if s_r > s_0 else s_0
        if speed_plane < v1:
            speed_plane = v1
        s_b = v1 * speed_plane / (2.0 * brake)
        s_l = (linear_s - t) * v1
        d = s_r + (s_b if s_b > s_l else s_l)
        return d if d > s_0 else s_0


def thrust_axes(m: DynamicsModel, r, w) -> tuple[tuple, tuple]:
    """(body z now, body z once the body rates are stopped: the motor lag, then ``m.tilt_alpha``), world frame:
    the two thrust axes the stopping predictions take the worst of."""
    w0, w1 = w[0], w[1]
    tp = m.tilt_lag + math.sqrt(w0 * w0 + w1 * w1) / (2.0 * m.tilt_alpha)
    c = (r[2], r[5], r[8])
    qx = r[2] + tp * (w1 * r[0] - w0 * r[1])
    qy = r[5] + tp * (w1 * r[3] - w0 * r[4])
    qz = r[8] + tp * (w1 * r[6] - w0 * r[7])
    n = math.sqrt(qx * qx + qy * qy + qz * qz)
    return c, (qx / n, qy / n, qz / n)


def backup_linear_stop_s(position_gain_per_s: float, velocity_gain_per_s: float, lags_s, delay_s: float,
                         speed: float = 1.0, accel: float = 0.0, step_s: float = 1e-3, horizon_s: float = 3.0) -> float:
    """The farthest the backup's linear loop carries a motion away from its hold target: per unit speed (s, m per
    m/s; ``speed`` 1, ``accel`` 0) or per unit acceleration (s^2; ``speed`` 0, ``accel`` 1).

    The loop: acceleration command ``u = -k_v (k_p x + x')`` (the backup's position gain into its velocity gain,
    the hold target where it took over), delayed by ``delay_s`` (the tick and the latency), then through the
    first-order ``lags_s`` in series (the slowest motor; horizontally the attitude loop too), acting on a double
    integrator from ``x = 0, x' = speed`` with the judged command's ``accel`` in the pipeline (the delay and every
    lag hold it: it flies its tick, then decays through the motors). Integrated at ``step_s`` until the motion
    reverses. The excursion grows with every lag and the delay (so the slowest motor bounds the randomization's) and
    is linear in the speed and the acceleration: below the saturation ``v P + a Q``, above it the full brake's
    ``v^2 / 2b`` is the longer one. Plain floats, once per model (a few ms)."""
    n = max(1, int(round(delay_s / step_s)))
    queue = [accel] * n
    stages = [accel] * len(lags_s)
    x, v, peak, k = 0.0, speed, 0.0, 0
    for _ in range(int(horizon_s / step_s)):
        queue.append(-velocity_gain_per_s * (position_gain_per_s * x + v))
        u = queue[k]
        k += 1
        for i, lag in enumerate(lags_s):
            stages[i] += (u - stages[i]) * step_s / lag
            u = stages[i]
        v += u * step_s
        x += v * step_s
        if x > peak:
            peak = x
        if v <= 0.0 and x > 0.0:
            break
    return peak


@functools.lru_cache(maxsize=None)
def backup_hold_sag_m(position_gain_per_s: float, velocity_gain_per_s: float, integral_gain_per_s2: float,
                      integral_limit_mps2: float, lag_s: float, delay_s: float, g: float, ratio: float,
                      accel_low_mps2: float = -math.inf, accel_high_mps2: float = math.inf,
                      step_s: float = 2e-3, horizon_s: float = 4.0) -> float:
    """How far the backup's vertical hold moves away from its target on an airframe that turns the backup's
    feed-forward thrust into ``ratio`` times the thrust that holds it (m, >= 0; down for ``ratio`` < 1, up above 1).

    The backup commands ``ff_mass (a + g)`` with ``a = k_v (k_p e - v) + i`` (its position gain into its velocity
    gain, and the vertical integral ``i' = k_i (k_p e - v)`` bounded at ``integral_limit_mps2``, reset at the takeover:
    robot_hrl/robots/quadrotor/shield/backup.py). An airframe with ``ratio = ff_mass rho`` (``rho`` its acceleration
    per newton) accelerates ``ratio (a + g) - g = ratio a - (1 - ratio) g``: the loop sees a steady push of
    ``(1 - ratio) g``, which the proportional loop alone leaves at ``(1 - ratio) g / (ratio k_v k_p)`` and the bounded
    integral takes out only slowly (0.28 m at a ratio of 0.7875 with the slowest motor). Integrated from rest at the
    target, the push acting from the judged tick on, the backup's commands after ``delay_s`` (the tick and the
    latency) through the first-order ``lag_s`` (the slowest motor), over ``horizon_s``; the largest excursion is
    returned (the motion of the handover itself is :func:`backup_linear_stop_s`'s: the two add, and the sum of their
    peaks bounds the peak of the sum). The backup's acceleration command is bounded by its thrust range over its
    feed-forward mass (``accel_low_mps2``, ``accel_high_mps2``: its least thrust, and its most on the measured battery),
    its integral frozen while the command is saturated in its direction (the backup's anti-windup): a weak airframe on
    an empty battery is held up by little more than its weight, and sinks further.
    Plain floats, cached per argument tuple (about 1 ms the first time; the model rounds its arguments so that the
    keys stay few: :attr:`DynamicsModel.SAG_QUANTUM`)."""
    if ratio == 1.0:
        return 0.0
    n = max(1, int(round(delay_s / step_s)))
    queue = [0.0] * n
    stage = 0.0  # the motors' output, as the backup's acceleration command (deviation from ff_mass g)
    x = v = i = peak = 0.0
    sign = -1.0 if ratio < 1.0 else 1.0
    kp, kv, ki = position_gain_per_s, velocity_gain_per_s, integral_gain_per_s2
    lo, hi = accel_low_mps2, accel_high_mps2
    for k in range(int(horizon_s / step_s)):
        e = -kp * x - v
        i1 = i + ki * e * step_s
        i1 = -integral_limit_mps2 if i1 < -integral_limit_mps2 else integral_limit_mps2 if i1 > integral_limit_mps2 else i1
        a = kv * e + i1
        if (a > hi and i1 > i) or (a < lo and i1 < i):  # anti-windup
            i1 = i
            a = kv * e + i1
        i = i1
        queue.append(lo if a < lo else hi if a > hi else a)
        stage += (queue[k] - stage) * step_s / lag_s
        v += (ratio * (stage + g) - g) * step_s
        x += v * step_s
        if sign * x > peak:
            peak = sign * x
    return peak


SPOOL_DEFICIT_FROM_REST = 1.5
"""The spool-up's dead time in motor time constants from rotors at rest (:func:`spool_dead_time_s`)."""


def spool_dead_time_s(m: DynamicsModel, thrust_n: float) -> float:
    """The dead time equivalent to the rotors spooling from ``thrust_n`` (N, total) up to the backup's full thrust
    ``T_b`` with the slowest motor designed for (``T_m`` = ``stopping.motor_time_constant_s``), s.

    The motors lag the rotor speed first-order (robot_hrl/robots/crazyflie_2x/actuators.py; thrust ~ speed^2). From
    speed ``w0`` toward ``w1`` the thrust that is missing against a step, integrated, is
    ``k T_m (T_b - T_0)`` with ``k = (1.5 w1 + 0.5 w0) / (w1 + w0)`` (1 for a thrust-space lag, 1.5 from rest). The
    missing thrust decays monotonically, so a dead time of ``k T_m`` under the starting thrust followed by the full
    brake never lifts the robot more, at any moment, than the spool-up does (its deficit, integrated, is never less).
    ``w0 / w1 = sqrt(T_0 / T_b)``; the weakest airframe does not change the ratio (both thrusts scale with it)."""
    full = m.backup_max_thrust_fraction * m.max_total_thrust
    rho = math.sqrt(thrust_n / full) if 0.0 < thrust_n < full else (1.0 if thrust_n >= full else 0.0)
    k = (SPOOL_DEFICIT_FROM_REST + (SPOOL_DEFICIT_FROM_REST - 1.0) * rho) / (1.0 + rho)
    return k * m.design_motor_tau


def level_time_s(m: DynamicsModel, cz: float, w) -> float:
    """How long the backup needs before its thrust points up enough for the descent brake (``m.level_cos``), from a
    body z axis whose vertical component is at worst ``cz`` (the tilt now or once the rates are stopped), s.

    0 within the brake's tilt. Beyond it, the airframe's attitude response: the torque acts after the design motor
    lag, a tick and the latency (``m.tilt_lag``), the body rates are stopped at ``m.tilt_alpha`` (half the torque
    authority over the largest inertia: the weakest rotors and the heaviest inertia of the randomization keep more
    than that), then the rest of the tilt is taken out accelerating and decelerating at ``m.tilt_alpha``:
    ``2 sqrt(delta / alpha)``."""
    if cz >= m.level_cos:
        return 0.0
    w0, w1 = w[0], w[1]
    tilt = math.acos(cz if cz > -1.0 else -1.0)
    delta = tilt - m.level_tilt_rad
    return m.tilt_lag + math.sqrt(w0 * w0 + w1 * w1) / m.tilt_alpha + 2.0 * math.sqrt(delta / m.tilt_alpha)


def descent_reaction_time(m: DynamicsModel, cz: float, w, thrust_n: float) -> float:
    """The reaction time before the backup brakes a descent at ``m.brake_up``: the tick and the latency
    (``m.descent_dead_time_s``), levelling the body from its worst tilt (:func:`level_time_s`), then the rotors'
    spool-up from the weaker of the commanded and estimated thrusts (:func:`spool_dead_time_s`), in series (the
    backup's thrust at a large tilt is only the projection of its thrust vector: the spool-up is counted after the
    levelling, from the thrust before it).

    The levelling time is counted from now and already holds the tick and the latency (its torque lag
    ``m.tilt_lag`` = the design motor lag + the tick + the latency: the backup's first torque command leaves after the
    judged tick and reaches the motors after the latency), so the dead time is added only without a levelling: the
    reaction ends at the later of the two, and the levelling's is never the earlier (it was counted twice, 0.02 s)."""
    level = level_time_s(m, cz, w)
    return (level if level > m.descent_dead_time_s else m.descent_dead_time_s) + spool_dead_time_s(m, thrust_n)


def stopping_box(m: DynamicsModel, p, v, r, w, thrust_a: float, thrust_b: float) -> tuple:
    """(x0, x1, y0, y1, z0, z1, z1c): the box the robot stays in until it stands still.

    Braking a climb only needs less thrust, which works at any attitude: z1 uses the short
    vertical reaction time. Braking a descent needs the thrust pointed up again (an attitude
    recovery first, after a tilting command): z0 uses the full reaction time. z1c is the
    climb extent with the full reaction time, the conservative top for the obstacle boxes.

    The thrust lies between ``thrust_a`` and ``thrust_b`` (N) during the reaction time (its upward part times
    ``strong_fraction`` for the climb: the lightest, strongest airframe's response to it), along
    the body z axis now or the one reached once the body rates are stopped (motor lag, then
    ``m.tilt_alpha``); every coordinate takes its worst case. Then the backup brakes
    (:meth:`DynamicsModel.stopping_distance`).
    """
    strong, weak = (thrust_a, thrust_b) if thrust_a > thrust_b else (thrust_b, thrust_a)
    strong /= m.brake_mass
    weak /= m.brake_mass
    c, d = thrust_axes(m, r, w)
    lo = [0.0, 0.0, 0.0]
    hi = [0.0, 0.0, 0.0]
    for i in range(3):
        a, b = c[i], d[i]
        a_hi = strong * a if a > 0 else weak * a
        a_lo = weak * a if a > 0 else strong * a
        b_hi = strong * b if b > 0 else weak * b
        b_lo = weak * b if b > 0 else strong * b
        hi[i] = a_hi if a_hi > b_hi else b_hi
        lo[i] = a_lo if a_lo < b_lo else b_lo
    # a light, strong airframe turns the command into more thrust: its climb (the weak side is the descent brake's
    # thrust_fraction; on the command itself it would hold every hover of an unknown airframe)
    hi[2] = (hi[2] * m.strong_fraction if hi[2] > 0.0 else hi[2]) - m.g
    # ... and with a converged hover-thrust estimate in the model, a heavy, weak one turns it into less: its descent
    # (the estimate's weak bound, never above the nominal airframe's)
    lo[2] = (lo[2] * m.reaction_weak_fraction if lo[2] > 0.0 else lo[2]) - m.g
    t = m.reaction_time
    cz = c[2] if c[2] < d[2] else d[2]
    td = descent_reaction_time(m, cz, w, weak * m.brake_mass)
    ax = hi[0] if hi[0] > -lo[0] else -lo[0]
    ay = hi[1] if hi[1] > -lo[1] else -lo[1]
    v1x = abs(v[0]) + ax * t
    v1y = abs(v[1]) + ay * t
    plane = math.sqrt(v1x * v1x + v1y * v1y)
    sd = m.stopping_distance
    bh = m.brake_horizontal
    tv = m.vertical_reaction_time
    lv, lv2 = m.backup_stop_vertical_s, m.backup_stop_vertical_s2
    return (
        p[0] - sd(-v[0], -lo[0], plane, bh), p[0] + sd(v[0], hi[0], plane, bh),
        p[1] - sd(-v[1], -lo[1], plane, bh), p[1] + sd(v[1], hi[1], plane, bh),
        p[2] - sd(-v[2], -lo[2], 0.0, m.brake_up, td, lv, lv2) - m.backup_sag_down_m,
        p[2] + sd(v[2], hi[2], 0.0, m.brake_down, tv, lv, lv2) + m.backup_sag_up_m,
        p[2] + sd(v[2], hi[2], 0.0, m.brake_down, t, lv, lv2) + m.backup_sag_up_m,
    )


class StatePredictor:
    """Dead reckoning: the rigid body integrated under the rotors' wrench (rotor speeds lagged).

    Holds position, velocity, quaternion (w, x, y, z), body rate and the rotor speeds, all floats.
    ``reset`` from a measured state and the outputs sent before it (they give the rotor speeds,
    :meth:`RotorModel.settle`), ``step`` by one control period under a command (``substeps`` of the
    rotor lag and the rigid body, as the PyBullet robot is stepped).
    """

    SUBSTEPS = 5
    """Physics steps per control period (the PyBullet robot: ``physics_hz`` 500 under ``control_hz`` 100)."""

    def __init__(self, model: DynamicsModel):
        from robot_hrl.robots.quadrotor.shield.rotors import RotorModel

        self.m = model
        self.rotors = RotorModel(model.robot, model.dt, self.SUBSTEPS)
        """The robot's actuator chain on floats (robot_hrl/robots/<robot>/actuators.py, nominal airframe)."""
        self.p = [0.0, 0.0, 0.0]
        self.v = [0.0, 0.0, 0.0]
        self.q = [1.0, 0.0, 0.0, 0.0]
        self.w = [0.0, 0.0, 0.0]
        self.chain_state = self.rotors.initial_state()
        """The actuator chain's state (rotor speeds, ...)."""
        self.floor_z = 0.0
        """Height of the ground under the robot (the ground effect's reference), m; the shield sets the world's floor."""
        robot = model.robot
        self._hubs = tuple((float(x), float(y), float(z)) for x, y, z in robot.rotor_positions_m)
        self._ge_clip = ground_effect_height_clip_m(robot)
        self.wrench = self.rotors.wrench(self.chain_state)
        self.valid = False

    def reset(self, p, v, q, w, history) -> None:
        """From the measured state and the outputs sent before it (oldest first: they settle the chain's state)."""
        self.p = [float(p[0]), float(p[1]), float(p[2])]
        self.v = [float(v[0]), float(v[1]), float(v[2])]
        self.q = [float(q[0]), float(q[1]), float(q[2]), float(q[3])]
        self.w = [float(w[0]), float(w[1]), float(w[2])]
        self.chain_state = self.rotors.settle(history)
        self.wrench = self.rotors.wrench(self.chain_state)
        self.valid = True

    def step(self, command) -> None:
        """One control period under ``command``: the chain's command, then each physics step the motors and the body."""
        rotors = self.rotors
        cmd = rotors.command(command, self.chain_state)
        h = rotors.substep_s
        robot, clip = self.m.robot, self._ge_clip
        for _ in range(rotors.substeps):
            # the ground effect per rotor at its hub's height (robots/quadrotor/ground_effect.py, as PyBullet applies it)
            qw, qx, qy, qz = self.q
            r20, r21, r22 = 2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)
            z0 = self.p[2] - self.floor_z
            gains = [ground_effect_gain(robot, z0 + r20 * x + r21 * y + r22 * z, r22, clip) for x, y, z in self._hubs]
            self.chain_state, self.wrench = rotors.substep(self.chain_state, cmd, gains)
            self._integrate(h)

    def _integrate(self, dt: float) -> None:
        m = self.m
        wr = self.wrench
        qw, qx, qy, qz = self.q
        # body z axis in the world (third column of R)
        zx = 2 * (qx * qz + qw * qy)
        zy = 2 * (qy * qz - qw * qx)
        zz = 1 - 2 * (qx * qx + qy * qy)
        acc = wr[0] / m.mass
        v = self.v
        v[0] += acc * zx * dt
        v[1] += acc * zy * dt
        v[2] += (acc * zz - m.g) * dt
        p = self.p
        p[0] += v[0] * dt
        p[1] += v[1] * dt
        p[2] += v[2] * dt
        jx, jy, jz = m.inertia
        w = self.w
        wx, wy, wz = w
        w[0] += (wr[1] - (jz - jy) * wy * wz) / jx * dt
        w[1] += (wr[2] - (jx - jz) * wz * wx) / jy * dt
        w[2] += (wr[3] - (jy - jx) * wx * wy) / jz * dt
        wx, wy, wz = w
        h = 0.5 * dt
        nq = (
            qw - h * (qx * wx + qy * wy + qz * wz),
            qx + h * (qw * wx + qy * wz - qz * wy),
            qy + h * (qw * wy + qz * wx - qx * wz),
            qz + h * (qw * wz + qx * wy - qy * wx),
        )
        n = math.sqrt(nq[0] ** 2 + nq[1] ** 2 + nq[2] ** 2 + nq[3] ** 2)
        self.q = [nq[0] / n, nq[1] / n, nq[2] / n, nq[3] / n]


def slowdown_thrust(tick, m: DynamicsModel, h: float, limit: float) -> float | None:
    """The largest collective thrust below the command whose predicted speed is within ``limit``.

    The predicted velocity ``v + h (T / m a - g e_z)`` (``a`` the thrust axis) reaches the
    limit at the larger root of a quadratic in T. None when that thrust is below the altitude
    hold thrust ``m g / a_z`` or below the motors' present thrust (lowering the command further
    would not act in time, or would add a descent next to a box).
    """
    r, v = tick.r, tick.v
    ax, ay, az = r[2], r[5], r[8]
    wx, wy, wz = v[0], v[1], v[2] - h * m.g  # the predicted velocity without thrust
    k = h / m.mass
    along = wx * ax + wy * ay + wz * az
    disc = along * along - (wx * wx + wy * wy + wz * wz) + limit * limit
    if disc < 0.0:
        return None
    thrust = (-along + math.sqrt(disc)) / k
    floor = tick.est[0]
    if az > 0.0:
        floor = max(floor, m.mass * m.g / az)
    if thrust < floor or thrust >= tick.cmd[0]:
        return None
    return thrust


def predicted_speed(tick, m: DynamicsModel, h: float) -> float:
    """Speed ``h`` ahead with the larger of the commanded and the estimated thrust along body z."""
    r = tick.r
    v = tick.v
    est = tick.est[0]
    acc = (tick.cmd[0] if tick.cmd[0] > est else est) / m.mass
    px = v[0] + h * acc * r[2]
    py = v[1] + h * acc * r[5]
    pz = v[2] + h * (acc * r[8] - m.g)
    return math.sqrt(px * px + py * py + pz * pz)

"""The composed shield: units in a fixed order, the backup controller, the records.

Per control tick (:meth:`Shield.step`), in this order:

1. ``estop``     emergency stop latched -> motors off.
2. ``watchdog``  stale state / stale subgoal -> hold, then land; late or non-finite policy
                 output -> rejected (backup holds this tick).
3. ``battery``   low -> hold, then land; critical -> land.
   ``command``   a landing requested through :meth:`Shield.request_land` -> land.
4. ``limits``    actuator range, actuator slew, body rate, attitude (clamps); speed (reject).
5. ``geofence``  predicted stopping point inside the horizontal fence (reject).
6. ``altitude``  predicted stopping height inside the altitude band (reject).
7. ``obstacles`` stop / slowdown / approach zones around the world's boxes (reject).

Then the mode: ``motors_off`` (estop latched, or landed), ``backup_land`` (a land request;
latched), ``backup_hold`` (a hold request, a rejected command, or the policy's command not yet
safe for ``backup.recover_s`` after a rejection), else ``policy`` (the clamped command). The
backup controller (:mod:`robot_hrl.safety.backup`) produces the command in the backup modes
(simplex). Subgoals are filtered separately, on arrival (:meth:`Shield.filter_subgoal`).

The per-tick path is plain Python floats: no pydantic, no numpy except the two output arrays,
and no allocation for records unless something is changed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_hrl.errors import ConfigError
from robot_hrl.robots.quadrotor import QuadrotorParams
from robot_hrl.safety.backup import BackupController
from robot_hrl.safety.config import DEFAULT_SHIELD_CONFIG, ShieldConfig, load_shield_config
from robot_hrl.safety.model import DynamicsModel, StatePredictor, rotation_from_quat
from robot_hrl.safety.records import ERROR, OK, WARN, Intervention, LEVEL_NAMES
from robot_hrl.safety.units import (
    AltitudeUnit, BatteryUnit, EmergencyStopUnit, GeofenceUnit, LandRequestUnit, LimitsUnit, ObstacleUnit, SubgoalUnit, Tick,
    WatchdogUnit,
)
from robot_hrl.state import RobotState

MODES = ("policy", "backup_hold", "backup_land", "motors_off")
_NO_INTERVENTIONS: tuple = ()


@dataclass(slots=True)
class ShieldInput:
    """What the skill node hands the shield each control tick."""

    now_s: float
    """The current time (sim or wall clock), s."""
    state: RobotState | None
    """The latest state estimate, or None if none has arrived."""
    actions: np.ndarray
    """The policy's normalized actions (4,), as the policy produced them."""
    subgoal_w: np.ndarray | None = None
    """The subgoal the policy is flying to (already filtered), or None."""
    subgoal_stamp_s: float | None = None
    """When that subgoal arrived; None: ``now_s`` (always fresh)."""
    state_stamp_s: float | None = None
    """When the state was measured; None: ``state.stamp_s``."""
    inference_s: float = 0.0
    """How long the policy inference took, s."""
    battery_v: float | None = None
    """Battery voltage, V; None: unknown (no battery check)."""


@dataclass(slots=True)
class ShieldOutput:
    """What goes to the actuators, and why."""

    actions: np.ndarray
    """Final normalized actions (4,), in [-1, 1]."""
    wrench: np.ndarray
    """The same command as [collective thrust N, tau_x, tau_y, tau_z N m] (geometry_msgs/Wrench)."""
    mode: str
    """'policy' | 'backup_hold' | 'backup_land' | 'motors_off'."""
    interventions: tuple
    """This tick's :class:`Intervention` records (empty when the policy's command passed)."""
    reason: str = ""
    """'unit.constraint' that put the backup in charge ('' in policy mode)."""


class Shield:
    """Shield units composed in a fixed order, with a backup controller (simplex)."""

    LOG_SIZE = 10000
    """Interventions kept in :attr:`log` (oldest dropped); counters count them all."""
    MAX_REPLAY_TICKS = 100
    """Outputs kept for dead reckoning since the latest measured state (1 s at 100 Hz; the watchdog lands long before)."""

    def __init__(self, config: ShieldConfig, robot: QuadrotorParams, world, subgoal_radius_m: float, hardware_id: str | None = None):
        self._validate(config, robot)
        self.config = config
        self.robot = robot
        self.world = world
        self.hardware_id = hardware_id or robot.name
        self.model = DynamicsModel(robot, config, config.control_rate_hz)
        self.estop_unit = EmergencyStopUnit()
        self.watchdog = WatchdogUnit(config)
        self.battery = BatteryUnit(config)
        self.command = LandRequestUnit()
        self.limits = LimitsUnit(config, self.model)
        self.geofence = GeofenceUnit(config, self.model, world)
        self.altitude = AltitudeUnit(config, self.model, world)
        self.obstacles = ObstacleUnit(config, self.model, world)
        self.subgoal = SubgoalUnit(config, robot, world, subgoal_radius_m, world.bounds.min[2] + config.altitude.max_altitude_m)
        self.units = (
            self.estop_unit, self.watchdog, self.battery, self.command, self.limits, self.geofence, self.altitude, self.obstacles,
            self.subgoal,
        )
        """Every unit, in the order they run (the subgoal unit runs on subgoal arrival)."""
        self.backup = BackupController(self.model, config)
        self.predictor = StatePredictor(self.model)
        self.log: deque[Intervention] = deque(maxlen=self.LOG_SIZE)
        self._tick = Tick()
        self._tick.dt = self.model.dt
        self._motor_k = self.model.dt / (self.model.design_motor_tau + self.model.dt)
        self._motor_k_best = self.model.dt / (self.model.motor_tau + self.model.dt)  # the dead reckoning's lag
        """Thrust estimate: first-order lag of the outputs with the design (slowest) motor time constant."""
        self._recover_s = config.backup.recover_s
        self._hold_inset = config.backup.hold_inset_m
        self._touchdown = config.backup.touchdown_altitude_m
        self._touchdown_speed = 1.5 * config.backup.land_speed_mps
        """Landed: within touchdown_altitude_m of the floor and no faster than this (m/s)."""
        self._land_timeout = config.backup.land_timeout_s
        self._floor = world.bounds.min[2]
        self._zero_actions = tuple(self.model.wrench_to_action(i, 0.0) for i in range(4))
        self.ticks = 0
        self.ticks_intervened = 0
        self.mode_ticks = {m: 0 for m in MODES}
        self.reset_faults()

    @classmethod
    def from_yaml(cls, path: str | Path | None, robot: QuadrotorParams, world, subgoal_radius_m: float, **kwargs) -> "Shield":
        """Load the limits from a YAML file (None: the shipped Crazyflie file) and build the shield."""
        return cls(load_shield_config(path if path is not None else DEFAULT_SHIELD_CONFIG), robot, world, subgoal_radius_m, **kwargs)

    @staticmethod
    def _validate(cfg: ShieldConfig, robot: QuadrotorParams) -> None:
        problems = []
        if cfg.robot != robot.name:
            problems.append(f"robot: the config is for {cfg.robot!r}, the shield is built for {robot.name!r}")
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

    # ---- latches --------------------------------------------------------------------------
    def estop(self, reason: str = "requested", now_s: float | None = None) -> None:
        """Latch the emergency stop: motors off until :meth:`reset_estop`."""
        self.estop_unit.trigger(reason, now_s)

    def reset_estop(self) -> None:
        """Release the emergency stop (the only way to)."""
        self.estop_unit.release()

    @property
    def estopped(self) -> bool:
        return self.estop_unit.latched

    def request_land(self, now_s: float | None = None, reason: str = "requested") -> None:
        """Land now (backup_land, then motors off); latched until :meth:`reset_faults`."""
        self.command.request(reason, now_s)

    def reset_faults(self) -> None:
        """Clear the hold/land/landed latches (battery, watchdog, land request) and the backup state."""
        for unit in self.units:
            if unit is not self.estop_unit:
                unit.reset()
        self.mode = "policy"
        self.reason = ""
        self._reason_unit = None
        self._reason_constraint = ""
        self._landing = False
        self._land_since = 0.0
        self._landed = False
        self._hold_target: list[float] | None = None
        self._land_xy: list[float] | None = None
        self._safe_since: float | None = None
        self._prev = [self.robot.weight_n, 0.0, 0.0, 0.0]
        self._thrust_est = self.robot.weight_n
        self._torque_est = (0.0, 0.0, 0.0)
        self._last_state = None
        self._last_stamp: float | None = None
        self._sent_since_state: list = []
        """Every output since the latest measured state arrived: dead reckoning replays them, so the
        prediction starts where the robot is now, not where it was when the odometry went quiet."""
        self._wrench_lag = [self.robot.weight_n, 0.0, 0.0, 0.0]
        """The wrench the motors produce, first-order lag of the outputs with the robot model's motor time constant."""
        self._wrench_lag_at_state = list(self._wrench_lag)
        self.predictor.valid = False

    # ---- subgoals -------------------------------------------------------------------------
    def filter_subgoal(self, subgoal_w, position_w, now_s: float) -> tuple[np.ndarray, list[Intervention]]:
        """Clamp a subgoal into the safe set; returns (safe subgoal (3,), interventions)."""

        def record(unit, constraint, before, after, action, detail):
            item = Intervention(now_s, unit.name, constraint, before, after, action, detail)
            unit.counters.record(item)
            unit.active_constraint = constraint
            self.log.append(item)
            return item

        return self.subgoal.filter(subgoal_w, position_w, now_s, record)

    # ---- the control tick -----------------------------------------------------------------
    def step(self, inp: ShieldInput) -> ShieldOutput:
        t = self._tick
        t.clear()
        now = float(inp.now_s)
        t.now = now
        t.policy_valid = True
        m = self.model
        # --- facts about the inputs
        st = inp.state
        state_ok = False
        age = math.inf
        if st is not None:
            p = st.position_w.tolist()
            v = st.linear_velocity_w.tolist()
            q = st.quat_wxyz.tolist()
            w = st.angular_velocity_b.tolist()
            stamp = st.stamp_s if inp.state_stamp_s is None else inp.state_stamp_s
            if len(p) == 3 and len(v) == 3 and len(q) == 4 and len(w) == 3:
                qn = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]
                total = sum(p) + sum(v) + sum(w) + qn + stamp
                if math.isfinite(total) and qn > 1e-6:
                    state_ok = True
                    age = now - stamp
            else:
                raise ValueError("RobotState arrays must have sizes position 3, quat_wxyz 4, velocity 3, angular velocity 3")
        sg = inp.subgoal_w
        subgoal_ok = sg is not None and math.isfinite(float(sg[0]) + float(sg[1]) + float(sg[2]))
        subgoal_age = 0.0 if inp.subgoal_stamp_s is None else now - inp.subgoal_stamp_s
        a = inp.actions
        if len(a) != 4:
            raise ValueError(f"policy actions must have 4 entries (thrust, tau_x, tau_y, tau_z normalized), got {len(a)}")
        a0, a1, a2, a3 = float(a[0]), float(a[1]), float(a[2]), float(a[3])
        output_finite = math.isfinite(a0 + a1 + a2 + a3)
        inference_s = float(inp.inference_s)
        # --- 1-3: estop, watchdog, battery
        self.estop_unit.check(t)
        self.watchdog.check_inputs(t, state_ok, age, subgoal_ok, subgoal_age, inference_s, output_finite)
        self.battery.check_voltage(t, inp.battery_v)
        self.command.check(t)
        # --- the state the units and the backup use
        fresh = state_ok and age <= self.watchdog.state_timeout
        if fresh:
            t.has_state = True
            t.predicted = False
            t.p = p
            t.v = v
            if abs(qn - 1.0) > 1e-6:
                s = 1.0 / math.sqrt(qn)
                q = [q[0] * s, q[1] * s, q[2] * s, q[3] * s]
            t.r = rotation_from_quat(q[0], q[1], q[2], q[3])
            t.w = w
            self._last_state = (p, v, q, w)
            if stamp != self._last_stamp:  # a new measurement (not the same one, growing older)
                self._last_stamp = stamp
                self._sent_since_state.clear()
                self._wrench_lag_at_state = list(self._wrench_lag)
            self.predictor.valid = False
        elif self._last_state is not None:
            pr = self.predictor
            if not pr.valid:
                lp, lv, lq, lw = self._last_state
                pr.reset(lp, lv, lq, lw, self._wrench_lag_at_state)
                for sent in self._sent_since_state:  # the commands sent since that measurement
                    pr.step(sent)
            t.has_state = True
            t.predicted = True
            t.p, t.v, t.w = pr.p, pr.v, pr.w
            t.r = rotation_from_quat(*pr.q)
        else:
            t.has_state = False
        t.prev = self._prev
        t.thrust_est = self._thrust_est
        t.torque_est = self._torque_est
        # --- the policy's command, as a wrench (the contract's mapping clips to [-1, 1])
        if output_finite:
            lo, hs = m.low, m.half_span
            c0 = -1.0 if a0 < -1.0 else 1.0 if a0 > 1.0 else a0
            c1 = -1.0 if a1 < -1.0 else 1.0 if a1 > 1.0 else a1
            c2 = -1.0 if a2 < -1.0 else 1.0 if a2 > 1.0 else a2
            c3 = -1.0 if a3 < -1.0 else 1.0 if a3 > 1.0 else a3
            cmd = [lo[0] + (c0 + 1.0) * hs[0], lo[1] + (c1 + 1.0) * hs[1], lo[2] + (c2 + 1.0) * hs[2], lo[3] + (c3 + 1.0) * hs[3]]
            t.policy = (cmd[0], cmd[1], cmd[2], cmd[3])
        else:
            cmd = list(self._prev)
            t.policy = (a0, a1, a2, a3)
        t.cmd = cmd
        # --- 4-7: shape or judge the policy's command
        if t.motors_off is None and t.policy_valid and t.has_state and not t.predicted:
            self.limits.check(t)
            self.geofence.check(t)
            self.altitude.check(t)
            self.obstacles.check(t)
        elif t.policy_valid and t.motors_off is None:
            self.limits.check(t)  # range and slew still apply without a state
        # --- the mode
        mode = self._decide(t, now)
        if mode == "policy":
            out = cmd
            reason = ""
        else:
            out = self._backup_command(t, mode, now)
            reason = self.reason
            item = Intervention(now, self._reason_unit.name, self._reason_constraint, t.policy, tuple(out), mode, t.reject_detail)
            self._reason_unit.counters.record(item)
            if t.interventions is None:
                t.interventions = [item]
            else:
                t.interventions.append(item)
        # --- bookkeeping
        self._prev = out
        k = self._motor_k
        self._thrust_est += (out[0] - self._thrust_est) * k
        te = self._torque_est
        self._torque_est = (te[0] + (out[1] - te[0]) * k, te[1] + (out[2] - te[1]) * k, te[2] + (out[3] - te[2]) * k)
        wl, kb = self._wrench_lag, self._motor_k_best
        for i in range(4):
            wl[i] += (out[i] - wl[i]) * kb
        if t.predicted:
            self.predictor.step(out)
        elif len(self._sent_since_state) < self.MAX_REPLAY_TICKS:
            self._sent_since_state.append(tuple(out))
        self.ticks += 1
        self.mode_ticks[mode] += 1
        self.mode = mode
        if t.interventions is None:
            interventions = _NO_INTERVENTIONS
        else:
            self.ticks_intervened += 1
            interventions = tuple(t.interventions)
            self.log.extend(interventions)
        hs = m.half_span
        lo = m.low
        n0 = (out[0] - lo[0]) / hs[0] - 1.0
        n1 = (out[1] - lo[1]) / hs[1] - 1.0
        n2 = (out[2] - lo[2]) / hs[2] - 1.0
        n3 = (out[3] - lo[3]) / hs[3] - 1.0
        actions = np.array([
            -1.0 if n0 < -1.0 else 1.0 if n0 > 1.0 else n0,
            -1.0 if n1 < -1.0 else 1.0 if n1 > 1.0 else n1,
            -1.0 if n2 < -1.0 else 1.0 if n2 > 1.0 else n2,
            -1.0 if n3 < -1.0 else 1.0 if n3 > 1.0 else n3,
        ])
        return ShieldOutput(actions, np.array(out), mode, interventions, reason)

    def _set_reason(self, unit, constraint: str) -> None:
        self._reason_unit = unit
        self._reason_constraint = constraint
        self.reason = f"{unit.name}.{constraint}"

    def _decide(self, t: Tick, now: float) -> str:
        if t.motors_off is not None:
            self._set_reason(t.motors_off, "emergency_stop")
            return "motors_off"
        if self._landed:
            return "motors_off"
        if t.land_unit is not None and not self._landing:
            self._landing = True
            self._land_since = now
            self._land_xy = None
            self._set_reason(t.land_unit, t.land_constraint)
        if self._landing:
            if t.has_state:
                z = t.p[2] - self._floor
                if (z <= self._touchdown and abs(t.v[2]) <= self._touchdown_speed) or now - self._land_since >= self._land_timeout:
                    self._landed = True
                    return "motors_off"
            elif now - self._land_since >= self._land_timeout:
                self._landed = True
                return "motors_off"
            return "backup_land"
        rejected = t.hold_unit is not None or t.reject_unit is not None
        if rejected:
            self._safe_since = None
            if t.hold_unit is not None:
                self._set_reason(t.hold_unit, t.hold_constraint)
            else:
                self._set_reason(t.reject_unit, t.reject_constraint)
            if self.mode != "backup_hold":
                self._hold_target = None
            return "backup_hold"
        if self.mode == "policy":
            return "policy"
        if self._safe_since is None:
            self._safe_since = now
        if now - self._safe_since >= self._recover_s and self.mode == "backup_hold":
            self._hold_target = None
            return "policy"
        if self.mode == "motors_off":  # released estop or reset faults: back to the policy
            return "policy"
        return "backup_hold"

    def safe_position(self, p) -> list[float]:
        """``p`` brought inside the fence and altitude band (``backup.hold_inset_m`` further in, room
        for the backup's own overshoot) and out of the obstacles' stop zones."""
        g, a = self.geofence, self.altitude
        d = self._hold_inset
        x = min(max(p[0], g.x_lo + d), g.x_hi - d)
        y = min(max(p[1], g.y_lo + d), g.y_hi - d)
        z = min(max(p[2], a.z_lo + d), a.z_hi - d)
        for box in self.obstacles.stop_boxes:
            if box[0] < x < box[3] and box[1] < y < box[4] and box[2] < z < box[5]:
                # out through the nearest side face that stays inside the fence
                cands = []
                for axis, lo_c, hi_c in ((0, g.x_lo, g.x_hi), (1, g.y_lo, g.y_hi)):
                    cur = (x, y)[axis]
                    for face in (box[axis], box[axis + 3]):
                        if lo_c <= face <= hi_c:
                            cands.append((abs(cur - face), axis, face))
                if box[5] < a.z_hi:
                    cands.append((abs(z - box[5]), 2, box[5]))
                if cands:
                    _, axis, face = min(cands)
                    if axis == 0:
                        x = face
                    elif axis == 1:
                        y = face
                    else:
                        z = face
        return [x, y, z]

    def _backup_command(self, t: Tick, mode: str, now: float) -> list[float]:
        if self.mode == "policy" or self.mode == "motors_off":
            self.backup.reset()
        if mode == "motors_off":
            return [0.0, 0.0, 0.0, 0.0]
        if not t.has_state:  # nothing to control with: level thrust slightly below hover, no torque
            return [0.9 * self.robot.weight_n, 0.0, 0.0, 0.0]
        if mode == "backup_land":
            if self._land_xy is None:
                sp = self.safe_position(t.p)
                xy = [sp[0], sp[1]]
                # not above a box: move clear of its footprint first
                for box in self.obstacles.stop_boxes:
                    if box[0] < xy[0] < box[3] and box[1] < xy[1] < box[4]:
                        xy = self.safe_position([xy[0], xy[1], (box[2] + box[5]) / 2])[:2]
                self._land_xy = xy
            target = (self._land_xy[0], self._land_xy[1], t.p[2])
            off = math.hypot(t.p[0] - target[0], t.p[1] - target[1])
            return self.backup.command(t.p, t.v, t.r, t.w, target, land=off < 0.1)
        if self._hold_target is None:
            self._hold_target = self.safe_position(t.p)
        return self.backup.command(t.p, t.v, t.r, t.w, self._hold_target)

    # ---- reporting ------------------------------------------------------------------------
    @property
    def intervention_rate(self) -> float:
        """Fraction of ticks on which the output differed from the policy's command."""
        return self.ticks_intervened / self.ticks if self.ticks else 0.0

    def counters(self) -> dict:
        """Plain-data counters: per unit, and per mode."""
        return {
            "ticks": self.ticks,
            "ticks_intervened": self.ticks_intervened,
            "mode_ticks": dict(self.mode_ticks),
            "units": {u.name: u.counters.as_dict() for u in self.units},
        }

    def diagnostics(self) -> list[dict]:
        """One diagnostic_msgs/DiagnosticStatus per unit, plus one for the shield, as plain data:
        ``{name, level (0 OK, 1 WARN, 2 ERROR, 3 STALE), message, hardware_id, values: {str: str}}``."""
        statuses = [u.diagnostic(self.hardware_id) for u in self.units]
        level = {"policy": OK, "backup_hold": WARN, "backup_land": ERROR, "motors_off": ERROR}[self.mode]
        message = f"mode {self.mode}" + (f" ({self.reason})" if self.mode != "policy" and self.reason else "")
        statuses.insert(0, {
            "name": "shield",
            "level": level,
            "message": message,
            "hardware_id": self.hardware_id,
            "values": {
                "mode": self.mode,
                "reason": self.reason if self.mode != "policy" else "",
                "level_name": LEVEL_NAMES[level],
                "ticks": str(self.ticks),
                "ticks_intervened": str(self.ticks_intervened),
                "intervention_rate": f"{self.intervention_rate:.6f}",
                **{f"mode_ticks.{k}": str(v) for k, v in self.mode_ticks.items()},
            },
        })
        return statuses

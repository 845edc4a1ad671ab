"""The composed shield: the robot's units in the order of its YAML, the backup controller, the records.

As Nav2's collision monitor composes its polygons, the shield composes the units its YAML lists
(robot_hrl/robots/<robot>/shield.yaml), every unit with the same ``check(tick)``. Per control tick
(:meth:`Shield.step`):

1. the tick's facts: the state (measured, dead-reckoned while the odometry is stale, or none), the
   subgoal, the policy output, the inference time, the battery voltage;
2. the ``input`` units in list order (a quadrotor: estop, watchdog, battery, command);
3. the policy's normalized output mapped ONCE to the robot's command with the contract's action
   mapping (``contract.action``; robot_hrl.contract.action_modes); every later step works on that
   command (a quadrotor: [collective thrust N, tau_x, tau_y, tau_z N m]);
4. when the output is usable and the motors are not off, the ``command`` units (a quadrotor's
   limits) and, with a measured state, the ``envelope`` units (geofence, altitude, obstacles);
5. the mode, the most restrictive request winning: ``motors_off`` (estop latched, or landed),
   ``backup_land`` (a land request; latched), ``backup_hold`` (a hold request, a rejected command,
   or the policy's command not yet safe for ``backup.recover_s`` after a rejection), else
   ``policy`` (the clamped command). The robot family's backup controller produces the command in
   the backup modes (simplex); every takeover is recorded.

Subgoals are filtered separately, on arrival (:meth:`Shield.filter_subgoal`). The per-tick path is
plain Python floats: no pydantic, no numpy except the output array, and no allocation for records
unless something is changed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_hrl.contract.action_modes import action_map
from robot_hrl.contract.schema import ActionSpec, action_mismatches
from robot_hrl.errors import ConfigError
from robot_hrl.safety.config import ShieldConfig, load_shield_config, unit_types
from robot_hrl.safety.families import get_family
from robot_hrl.safety.frames import rotation_from_quat
from robot_hrl.safety.records import ERROR, LEVEL_NAMES, OK, WARN, Intervention
from robot_hrl.safety.units import ShieldContext, Tick
from robot_hrl.state import RobotState

MODES = ("policy", "backup_hold", "backup_land", "motors_off")
_NO_INTERVENTIONS: tuple = ()


def _unrolled_lag(size: int, k_est: float):
    """``lag(est, out)``: the first-order lag of the output, ``x += (out - x) * k`` per term, unrolled for
    ``size`` terms with the gain as a constant (as dataclasses writes its methods: this runs every tick)."""
    lines = [f"    est[{i}] += (out[{i}] - est[{i}]) * {k_est!r}\n" for i in range(size)]
    namespace: dict = {}
    exec("def lag(est, out):\n" + "".join(lines), namespace)  # noqa: S102 - generated from floats only
    return namespace["lag"]


@dataclass(slots=True)
class ShieldInput:
    """What the skill node hands the shield each control tick."""

    now_s: float
    """The current time (sim or wall clock), s."""
    state: RobotState | None
    """The latest state estimate, or None if none has arrived."""
    actions: np.ndarray
    """The policy's normalized actions (the contract's action size), as the policy produced them."""
    subgoal_w: np.ndarray | None = None
    """The subgoal the policy is flying to (already filtered), or None."""
    subgoal_stamp_s: float | None = None
    """When that subgoal arrived; None: ``now_s`` (always fresh)."""
    state_stamp_s: float | None = None
    """When the state was measured; None: ``state.stamp_s``."""
    inference_s: float = 0.0
    """How long the policy inference took, s."""
    battery_v: float | None = None
    """The battery voltage the robot measures (the Crazyflie: the firmware's filtered pm voltage under load), V; None:
    unknown. The battery unit holds and lands on it; a quadrotor's stopping model and backup brake with the thrust
    the actuator chain reaches at it (its worst case while it is None, NaN or implausible)."""


class ShieldOutput:
    """What goes to the actuators, and why."""

    __slots__ = ("command", "mode", "interventions", "reason", "_map", "_actions")

    def __init__(self, command: np.ndarray, mode: str, interventions: tuple, reason: str, mapping):
        self.command = command
        """The command in the contract's command space (a quadrotor: [collective thrust N, tau_x, tau_y, tau_z N m],
        geometry_msgs/Wrench; a differential drive: [forward speed m/s, yaw rate rad/s])."""
        self.mode = mode
        """'policy' | 'backup_hold' | 'backup_land' | 'motors_off'."""
        self.interventions = interventions
        """This tick's :class:`Intervention` records (empty when the policy's command passed)."""
        self.reason = reason
        """'unit.constraint' that put the backup in charge ('' in policy mode)."""
        self._map = mapping
        self._actions = None

    @property
    def wrench(self) -> np.ndarray:
        """A quadrotor's name for :attr:`command`."""
        return self.command

    @property
    def actions(self) -> np.ndarray:
        """The same command as normalized actions, clipped to [-1, 1] (computed when asked for)."""
        if self._actions is None:
            self._actions = np.array(self._map.normalized(self.command.tolist()))
        return self._actions


class Shield:
    """The units of the robot's shield YAML, composed, with the robot family's backup controller (simplex).

    Args:
        config: the validated shield configuration (its ``robot`` must be ``robot``'s name).
        robot: the robot (robot_hrl.robots.base.Robot).
        world: the world file (fence and boxes).
        subgoal_radius_m: the contract's subgoal radius.
        hardware_id: the diagnostics' hardware id (default: the robot's name).
        action: the contract's action spec (``contract.action``): the mapping and the actuator range
            every unit uses. None: the robot's own spec for its default mode (no model at hand: tests,
            evaluations); a node passes its model's.
    """

    LOG_SIZE = 10000
    """Interventions kept in :attr:`log` (oldest dropped); counters count them all."""
    MAX_REPLAY_TICKS = 100
    """Outputs replayed by the dead reckoning since the latest measured state (1 s at 100 Hz; the state is
    stale after ``watchdog.state_timeout_s``, long before)."""
    WARMUP_TICKS = 40
    """Outputs before the latest measured state the dead reckoning's actuators are settled on (0.4 s at
    100 Hz: several motor time constants)."""

    STAMP_TOLERANCE_S = 1e-9
    """Rounding allowed when a duration between two stamps is compared with a configured one (stamps k / rate in
    floating point: 0.61 - 0.51 < 0.1, which held the robot a tick past ``backup.recover_s``)."""

    BLIND_SETTLE_S = 1.0
    """A landing on a dead-reckoned state: once the estimate touches down, the collective thrust ramps to zero
    over this long, then the motors go off. The estimate knows neither the ground effect (which holds the robot
    a few centimetres up at the thrust of a steady descent) nor the ground; the ramp lets it sink, slowly."""

    def __init__(self, config: ShieldConfig, robot, world, subgoal_radius_m: float, hardware_id: str | None = None,
                 *, action: ActionSpec | None = None):
        if config.robot != robot.name:
            raise ConfigError(f"the shield config does not fit the robot: robot: the config is for {config.robot!r}, "
                              f"the shield is built for {robot.name!r}")
        action = robot.action_spec() if action is None else action
        problems = action_mismatches(action, robot)
        if problems:
            raise ConfigError("the shield's action spec does not fit the robot: " + "; ".join(problems))
        family = get_family(config.model)
        self.config = config
        self.robot = robot
        self.world = world
        self.hardware_id = hardware_id or robot.name
        self.action = action_map(action)
        """The contract's action mapping: the one normalized -> command conversion of a tick."""
        self._to_command = self.action.command
        self.model = family.build_model(robot, config, self.action)
        ctx = ShieldContext(config, self.model, world, robot, subgoal_radius_m)
        types = unit_types(family)
        self.units = tuple(types[name].build(ctx) for name in config.units)
        """Every unit, in the order of the YAML."""
        self._by_name = {u.name: u for u in self.units}
        # each stage's checks, bound once (the envelope units are listed after the command units)
        self._input_checks = tuple(u.check for u in self.units if u.stage == "input")
        self._command_checks = tuple(u.check for u in self.units if u.stage == "command")
        self._envelope_checks = tuple(u.check for u in self.units if u.stage == "envelope")
        self.estop_unit = self._by_name["estop"]
        self.watchdog = self._by_name["watchdog"]
        self.subgoal = self._by_name["subgoal"]
        self.backup = family.build_backup(self.model, config)
        self._set_battery = getattr(self.model, "set_battery_voltage", None)
        self._handback_ticks = int(getattr(self.model, "handback_ticks", 0))
        """Ticks after the backup gives control back during which the hand-back is still judged (the family's model)."""
        self._policy_ticks = 1 << 30
        """Ticks in policy mode since the last takeover (large: none yet)."""
        """The family model's hook for the measured battery voltage (the quadrotor: the thrust it brakes with)."""
        self.predictor = family.build_predictor(self.model)
        if hasattr(self.predictor, "floor_z"):
            self.predictor.floor_z = float(world.bounds.min[2])
        if hasattr(self.model, "floor_z"):  # (a quadrotor's vertical flow counts the ground effect from it)
            self.model.floor_z = float(world.bounds.min[2])
        self.log: deque[Intervention] = deque(maxlen=self.LOG_SIZE)
        self._tick = Tick()
        self._tick.dt = self.model.dt
        self._lag = _unrolled_lag(self.action.size, self.model.estimate_gain)
        self._recover_s = config.backup.recover_s
        self._hold_inset = config.backup.hold_inset_m
        no_map = "range_obstacles" in self._by_name  # a room nobody mapped: nothing says the way is clear
        self._creep_step_m = 0.0 if no_map else config.backup.creep_speed_mps * self.model.dt
        """How far a hold's target moves toward the subgoal per tick (``backup.creep_speed_mps``; 0: it stays, and
        always with the range source listed)."""
        self._hold_turns = getattr(config.backup, "hold_turn_max_rate_dps", None) is not None
        """A hold keeps the refused command's yaw torque (a family backup's ``turned_as_commanded``): a hold an envelope
        or command unit put in place on a measured state, as for the creep (:meth:`_creep_target`); not a hold an input
        unit asked for (battery, watchdog, odometry, a hold request) nor a late or non-finite command."""
        self._creep_boxes = world.solid_boxes()
        """The world's boxes the creep keeps its clearance from (``Box.distance``)."""
        self._creep_margin = config.subgoal.obstacle_margin_m + robot.collision_radius_m
        self._land_timeout = config.backup.land_timeout_s
        self._floor = world.bounds.min[2]
        self.ticks = 0
        self.ticks_intervened = 0
        self.mode_ticks = {m: 0 for m in MODES}
        self.reset_faults()

    def __getattr__(self, name: str):
        """A unit by its name (``shield.limits``, ``shield.geofence``, ...)."""
        units = self.__dict__.get("_by_name")
        if units is not None and name in units:
            return units[name]
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r} (units: {sorted(units or ())})")

    def unit(self, name: str):
        """The unit ``name``, or None when the YAML does not list it."""
        return self._by_name.get(name)

    @classmethod
    def from_yaml(cls, path: str | Path | None, robot, world, subgoal_radius_m: float, **kwargs) -> "Shield":
        """Load the units and limits from a YAML file (None: the robot's own, ``robot.shield_config_path``)."""
        return cls(load_shield_config(path if path is not None else robot.shield_config_path), robot, world,
                   subgoal_radius_m, **kwargs)

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
        unit = self._by_name.get("command")
        if unit is None:
            raise ConfigError("this shield lists no 'command' unit: add it to the YAML's units to take land requests")
        unit.request(reason, now_s)

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
        self._blind_deadline: float | None = None
        self._settle_since: float | None = None
        """When a landing on a dead-reckoned state touched down in the estimate (its thrust ramp's start)."""
        """When a landing without a position (dead reckoning) ends in motors off at the latest."""
        self._safe_since: float | None = None
        neutral = self.model.neutral_command()
        self._prev = list(neutral)
        self._est = list(neutral)
        """What the actuators produce now: first-order lag of the outputs with the slowest actuator designed for."""
        self._last_state = None
        self._last_stamp: float | None = None
        self._outputs: deque = deque(maxlen=self.WARMUP_TICKS + self.MAX_REPLAY_TICKS)
        """The latest outputs, oldest first: the dead reckoning settles its actuators on those before the
        latest measured state and replays those since, so the prediction starts where the robot is now,
        not where it was when the odometry went quiet."""
        self._sent = 0
        """Outputs sent so far."""
        self._sent_at_state = 0
        """Outputs sent when the latest measured state arrived."""
        self._lost_since: float | None = None
        """When the state went stale (the no-position stop's clock), None while it is fresh."""
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
        now = t.now = float(inp.now_s)
        self._read_inputs(t, inp, now)
        t.prev = self._prev
        t.est = self._est
        t.mode_prev = self.mode
        t.reason_stage_prev = "" if self.mode == "policy" or self._reason_unit is None else self._reason_unit.stage
        for check in self._input_checks:
            check(t)
        t.handback = self.mode == "policy" and self._policy_ticks < self._handback_ticks
        if t.output_finite:  # the one mapping of the tick: normalized -> command (contract.action)
            t.cmd = self._to_command(self._actions)
            t.policy = tuple(t.cmd)
        else:
            t.cmd = list(self._prev)
            t.policy = tuple(self._actions)
        if t.motors_off is None and t.policy_valid:
            for check in self._command_checks:
                check(t)
            if t.has_state and not t.predicted:  # the world's envelope is judged on a measured state only
                for check in self._envelope_checks:
                    check(t)
        mode = self._decide(t, now)
        out = t.cmd if mode == "policy" else self._takeover(t, mode, now)
        self._after(t, out, mode)
        interventions = _NO_INTERVENTIONS
        if t.interventions is not None:
            self.ticks_intervened += 1
            interventions = tuple(t.interventions)
            self.log.extend(interventions)
        return ShieldOutput(np.array(out), mode, interventions, self.reason if mode != "policy" else "", self.action)

    def _read_inputs(self, t: Tick, inp: ShieldInput, now: float) -> None:
        """The facts the input units judge (state present and well-formed, ages, subgoal, output) and the
        state every unit and the backup use."""
        st = inp.state
        t.state_ok = False
        t.state_age = math.inf
        if st is not None:  # sizes, finite, a usable quaternion (normalized when off by more than 1e-6)
            stamp = st.stamp_s if inp.state_stamp_s is None else inp.state_stamp_s
            p, v = st.position_w.tolist(), st.linear_velocity_w.tolist()
            q, w = st.quat_wxyz.tolist(), st.angular_velocity_b.tolist()
            if not (len(p) == 3 and len(v) == 3 and len(q) == 4 and len(w) == 3):
                raise ValueError("RobotState arrays must have sizes position 3, quat_wxyz 4, velocity 3, angular velocity 3")
            qn = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]
            if math.isfinite(sum(p) + sum(v) + sum(w) + qn + stamp) and qn > 1e-6:
                if abs(qn - 1.0) > 1e-6:
                    n = 1.0 / math.sqrt(qn)
                    q = [q[0] * n, q[1] * n, q[2] * n, q[3] * n]
                t.state_ok = True
                t.state_age = now - stamp
                self._state = (p, v, q, w)
                self._state_stamp = stamp
        sg = inp.subgoal_w
        if sg is not None:  # converted once: the finiteness test and the tick's copy share it
            g = (float(sg[0]), float(sg[1]), float(sg[2]))
            t.subgoal_ok = math.isfinite(g[0] + g[1] + g[2])
            t.subgoal_w = g if t.subgoal_ok else None
        else:
            t.subgoal_ok = False
            t.subgoal_w = None
        t.subgoal_age = 0.0 if inp.subgoal_stamp_s is None else now - inp.subgoal_stamp_s
        a = inp.actions
        a = a.tolist() if type(a) is np.ndarray else [float(x) for x in a]
        if len(a) != self.action.size:
            raise ValueError(f"policy actions must have {self.action.size} entries (the contract's "
                             f"{', '.join(t.name for t in self.action.spec.terms)}, normalized), got {len(a)}")
        self._actions = a
        t.output_finite = math.isfinite(sum(a))
        t.policy_valid = True
        t.inference_s = float(inp.inference_s)
        t.battery_v = inp.battery_v
        if self._set_battery is not None:  # the model's thrust on the measured battery (worst case without a reading)
            self._set_battery(inp.battery_v)
        # the state the units and the backup use: measured when fresh, else dead-reckoned, else none
        if t.state_ok and t.state_age <= self.watchdog.state_timeout:
            p, v, q, w = self._state
            t.has_state, t.predicted = True, False
            t.p, t.v, t.w = p, v, w
            t.r = rotation_from_quat(q[0], q[1], q[2], q[3])
            self._last_state = (p, v, q, w)
            if self._state_stamp != self._last_stamp:  # a new measurement (not the same one, growing older)
                self._last_stamp = self._state_stamp
                self._sent_at_state = self._sent
            self.predictor.valid = False
            self._lost_since = None
        elif self._last_state is not None:
            pr = self.predictor
            if not pr.valid:
                lp, lv, lq, lw = self._last_state
                outputs = list(self._outputs)
                since = min(self._sent - self._sent_at_state, len(outputs))
                split = len(outputs) - since
                pr.reset(lp, lv, lq, lw, outputs[max(0, split - self.WARMUP_TICKS):split])
                for sent in outputs[split:]:  # the commands sent since that measurement
                    pr.step(sent)
                self._lost_since = now
            t.has_state, t.predicted = True, True
            t.p, t.v, t.w = pr.p, pr.v, pr.w
            t.r = rotation_from_quat(*pr.q)
        else:
            t.has_state = False

    def _takeover(self, t: Tick, mode: str, now: float) -> list[float]:
        """The backup's command, recorded as an intervention of the unit that put it in charge."""
        out = self._backup_command(t, mode, now)
        item = Intervention(now, self._reason_unit.name, self._reason_constraint, t.policy, tuple(out), mode, t.reject_detail)
        self._reason_unit.counters.record(item)
        if t.interventions is None:
            t.interventions = [item]
        else:
            t.interventions.append(item)
        return out

    def _after(self, t: Tick, out: list[float], mode: str) -> None:
        """Bookkeeping: the actuator estimates, the dead reckoning's replay, the counters."""
        self._prev = out
        self._lag(self._est, out)
        self._policy_ticks = self._policy_ticks + 1 if mode == "policy" else 0
        if t.predicted:
            self.predictor.step(out)
        self._outputs.append(out)
        self._sent += 1
        self.ticks += 1
        self.mode_ticks[mode] += 1
        self.mode = mode

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
            self._blind_deadline = None
            self._settle_since = None
            self._set_reason(t.land_unit, t.land_constraint)
        if self._landing:
            if not t.predicted:
                self._blind_deadline = None  # measured again: the normal landing and its timeout
            elif self._blind_deadline is None:
                self._blind_deadline = now + self._blind_descent_s(t)
            deadline = self._land_timeout if self._blind_deadline is None else self._blind_deadline - self._land_since
            if t.predicted:
                if self._settle_since is None and self.backup.landed(t, self._floor):
                    self._settle_since = now
                touched = self._settle_since is not None and now - self._settle_since >= self.BLIND_SETTLE_S
            else:
                self._settle_since = None
                touched = t.has_state and self.backup.landed(t, self._floor)
            if touched or now - self._land_since >= deadline:
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
        if now - self._safe_since >= self._recover_s - self.STAMP_TOLERANCE_S and self.mode == "backup_hold":
            self._hold_target = None
            return "policy"
        if self.mode == "motors_off":  # released estop or reset faults: back to the policy
            return "policy"
        return "backup_hold"

    def _blind_descent_s(self, t: Tick) -> float:
        """The longest a descent without a position may take: from the dead-reckoned height at the landing
        speed, half as long again, plus a second; then the motors go off whatever the estimate says."""
        speed = getattr(self.backup, "land_speed", None)
        if not speed:
            return self.watchdog.state_hold_s
        return 1.5 * max(0.0, t.p[2] - self._floor) / speed + self.BLIND_SETTLE_S + 1.0

    def safe_position(self, p) -> list[float]:
        """``p`` brought inside the fence and altitude band (``backup.hold_inset_m`` further in, room
        for the backup's own overshoot) and out of the obstacles' stop zones (each where its unit is listed; the
        range source's: :meth:`RangeObstacleUnit.hold_clear_of_hits`)."""
        g, a, o = self.unit("geofence"), self.unit("altitude"), self.unit("obstacles")
        d = self._hold_inset
        x, y, z = p[0], p[1], p[2]
        if g is not None:
            x = min(max(x, g.x_lo + d), g.x_hi - d)
            y = min(max(y, g.y_lo + d), g.y_hi - d)
        if a is not None:  # (the altitude unit's hold band: the vertical flow holds toward the same target)
            z = min(max(z, a.hold_lo), a.hold_hi)
        for box in () if o is None else o.stop_boxes:
            if box[0] < x < box[3] and box[1] < y < box[4] and box[2] < z < box[5]:
                # out through the nearest side face that stays inside the fence
                cands = []
                fence = ((g.x_lo, g.x_hi), (g.y_lo, g.y_hi)) if g is not None else ((-math.inf, math.inf),) * 2
                for axis, (lo_c, hi_c) in enumerate(fence):
                    cur = (x, y)[axis]
                    for face in (box[axis], box[axis + 3]):
                        if lo_c <= face <= hi_c:
                            cands.append((abs(cur - face), axis, face))
                if a is None or box[5] < a.z_hi:
                    cands.append((abs(z - box[5]), 2, box[5]))
                if cands:
                    _, axis, face = min(cands)
                    if axis == 0:
                        x = face
                    elif axis == 1:
                        y = face
                    else:
                        z = face
        r = self.unit("range_obstacles")
        if r is not None:  # off the remembered range hits too (no map), then back inside the fence
            x, y = r.hold_clear_of_hits(x, y)
            if g is not None:
                x = min(max(x, g.x_lo + d), g.x_hi - d)
                y = min(max(y, g.y_lo + d), g.y_hi - d)
        return [x, y, z]

    BLIND_CLEARANCE_M = 0.25
    """A landing on a dead-reckoned state keeps this much more off an obstacle's stop zone where it can: room for
    what the estimate drifts over a whole stop without a position (sim/fault_drill.py, benchmarks/README.md)."""

    def landing_spot(self, xy, extra_m: float = 0.0) -> list[float]:
        """Where a landing goes down: ``xy`` when no obstacle's stop zone (its box grown by the collision radius
        and the stop distance) lies within ``backup.hold_inset_m + extra_m`` of it, else the nearest such point
        inside the fence (``backup.hold_inset_m`` in), searched on rings around ``xy`` (0.05 m apart, 16
        directions); where none is clear with ``extra_m``, the nearest clear without it. The descent starts
        within ``LAND_ALIGN_M`` of the spot, so the robot's sphere keeps clear of the box all the way down.
        Never on top of or against a box (issue #16)."""
        o, g = self.unit("obstacles"), self.unit("geofence")
        boxes = () if o is None else o.stop_boxes
        inset = self._hold_inset
        x_lo, x_hi = (g.x_lo + inset, g.x_hi - inset) if g is not None else (-math.inf, math.inf)
        y_lo, y_hi = (g.y_lo + inset, g.y_hi - inset) if g is not None else (-math.inf, math.inf)
        x0, y0 = float(xy[0]), float(xy[1])

        def clear(x: float, y: float, d: float) -> bool:
            return not any(b[0] - d < x < b[3] + d and b[1] - d < y < b[4] + d for b in boxes)

        for d in ((inset + extra_m, inset) if extra_m > 0 else (inset,)):
            if clear(x0, y0, d):
                return [x0, y0]
            for ring in range(1, 121):
                r = 0.05 * ring
                best = None
                for k in range(16):
                    a = k * math.pi / 8.0
                    x, y = x0 + r * math.cos(a), y0 + r * math.sin(a)
                    if x_lo <= x <= x_hi and y_lo <= y <= y_hi and clear(x, y, d):
                        best = [x, y]
                        break
                if best is not None:
                    return best
        return [x0, y0]

    LAND_ALIGN_M = 0.05
    """A landing descends once within this horizontal distance of its spot (it corrects first beyond it)."""

    def _backup_command(self, t: Tick, mode: str, now: float) -> list[float]:
        if self.mode == "policy" or self.mode == "motors_off":
            self.backup.reset()
        if mode == "motors_off":
            return self.model.off_command()
        if not t.has_state:  # nothing to control with
            return self.model.blind_command()
        if t.predicted and mode != "backup_land":  # no position to hold: brake on the dead-reckoned velocity
            return self.backup.command(t.p, t.v, t.r, t.w, t.p)
        if mode == "backup_land":
            if self._land_xy is None:
                sp = self.safe_position(t.p)
                self._land_xy = self.landing_spot([sp[0], sp[1]], self.BLIND_CLEARANCE_M if t.predicted else 0.0)
            target = (self._land_xy[0], self._land_xy[1], t.p[2])
            off = math.hypot(t.p[0] - target[0], t.p[1] - target[1])
            out = self.backup.command(t.p, t.v, t.r, t.w, target, land=off < self.LAND_ALIGN_M)
            if self._settle_since is not None:  # touched down in the estimate: the thrust ramps to zero
                out[0] *= max(0.0, 1.0 - (now - self._settle_since) / self.BLIND_SETTLE_S)
            return out
        if self._hold_target is None:
            self._hold_target = self.safe_position(t.p)
        elif self._creep_step_m > 0.0:
            self._creep_target(t)
        out = self.backup.command(t.p, t.v, t.r, t.w, self._hold_target)
        if self._hold_turns and t.policy_valid and t.output_finite and self._reason_unit is not None \
                and self._reason_unit.stage in ("envelope", "command"):
            out = self.backup.turned_as_commanded(out, t.w, t.policy)  # the refused command's yaw: the cone turns on
        return out

    def _clearance_m(self, q) -> float:
        """The distance from ``q`` to the nearest of the world's boxes (inf without any)."""
        return min((b.distance(q) for b in self._creep_boxes), default=math.inf)

    def _creep_target(self, t: Tick) -> None:
        """A hold that an envelope or command unit put in place (the policy's command refused: a stopping box that
        leaves the band, the fence or an obstacle's clearance; a limit) moves its target toward the subgoal by
        ``backup.creep_speed_mps`` per second, so the backup carries the robot where the policy was taking it and the
        policy, judged again every tick, gets control back there (issue #16: holds that never ended, the policy's
        next command as unsafe as the last, 0.3 m from a goal beside a pillar or the fence).

        Where the creep may go: the subgoal was accepted by the subgoal unit (inside its fence, altitude and
        obstacle margins, which lie inside the hold's own insets), the hold target was :meth:`safe_position`; the
        box those insets make is convex, so the straight segment between them stays inside it. Each step keeps at
        least the subgoal unit's obstacle clearance (collision radius + ``subgoal.obstacle_margin_m``) from every
        world box, or, where the target is already closer, no less than it has: the target never moves closer to an
        obstacle than a hold already was. No creep with a measured state missing, with the range source listed
        (a room nobody mapped: nothing says the way is clear), or for a hold an input unit asked for (battery,
        watchdog, odometry, a hold request)."""
        unit = self._reason_unit
        goal = t.subgoal_w
        if goal is None or t.predicted or unit is None or unit.stage not in ("envelope", "command"):
            return
        if t.subgoal_age > self.watchdog.subgoal_timeout:
            return
        h = self._hold_target
        d = math.dist(h, goal)
        if d <= 1e-9:
            return
        if d <= self._creep_step_m:
            q = list(goal)
        else:
            f = self._creep_step_m / d
            q = [h[0] + f * (goal[0] - h[0]), h[1] + f * (goal[1] - h[1]), h[2] + f * (goal[2] - h[2])]
        if self.safe_position(q) != q:  # the subgoal's side of the fence or band (an unfiltered subgoal)
            return
        if self._clearance_m(q) < min(self._creep_margin, self._clearance_m(h)):
            return
        self._hold_target = q

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

"""The skill's tick without I/O: the policy, then the shield, once per control period.

:class:`SkillCore` takes the state, subgoals and emergency stops from the node's callbacks
(thread-safe), runs the policy on the latest state and the shielded subgoal, hands its normalized
output to the shield (which maps it once, with the contract's action mapping, to the robot's
command and shapes it), and tells the status state machine (robot_hrl.nodes.skill_state) what
happened. The node (robot_hrl.nodes.skill_node) publishes the result.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from robot_hrl.nodes.skill_state import SkillConfig, SkillStateMachine
from robot_hrl.safety.shield import ShieldInput


class TickOutput:
    """One tick's command and state; the full status dict is built only when asked for (it is
    published at ``status_rate_hz``, not every tick)."""

    __slots__ = ("command", "mode", "state", "interventions", "_make", "_status")

    def __init__(self, command: np.ndarray, mode: str, state: str, interventions, make_status):
        self.command = command
        """The command for the actuators, in the contract's command space."""
        self.mode = mode
        self.state = state
        self.interventions = interventions
        self._make = make_status
        self._status = None

    @property
    def wrench(self) -> np.ndarray:
        """A quadrotor's name for :attr:`command`."""
        return self.command

    @property
    def status(self) -> dict[str, Any]:
        if self._status is None:
            self._status = self._make()
        return self._status


class SkillCore:
    """Policy, then shield, once per tick; no I/O. Thread-safe inputs (callbacks may run elsewhere).

    Robot-neutral: the action size comes from the policy's contract, the idle command (motors off)
    from the shield's model, and whether a subgoal on the floor asks for a landing from the robot
    (``robot.lands``; ``lands`` overrides it)."""

    def __init__(self, policy, shield, world, config: SkillConfig | None = None, *, lands: bool | None = None,
                 heading=None):
        self.policy = policy
        self.heading = heading
        """The yaw loop under the skill (robot_hrl.runtime.heading.HeadingLoop: the policy observes in its own frame, and
        the loop owns the yaw torque of its command, before the shield), or None."""
        self.shield = shield
        self.world = world
        self.config = config or SkillConfig()
        self.floor_z = float(world.bounds.min[2])
        n = int(policy.contract.action_size)
        model = getattr(shield, "model", None)
        self._idle = np.asarray(model.off_command() if model is not None else np.zeros(n), dtype=np.float64)
        """The command while nothing is asked (on the ground, motors off)."""
        self._idle.flags.writeable = False
        self._zero_actions = np.zeros(n)
        self._nan_actions = np.full(n, np.nan)
        self._last_out = None
        """The shield's latest output: re-sent (as normalized actions) while there is no new policy command."""
        robot = getattr(policy, "robot", None)
        self.lands = bool(getattr(robot, "lands", True)) if lands is None else bool(lands)
        """A subgoal on the floor is a landing request (robots that fly)."""
        self.status_machine = SkillStateMachine(self.config)
        self._lock = threading.Lock()
        self.state = None
        self.state_received_s: float | None = None
        self.requested: np.ndarray | None = None
        self.safe_subgoal: np.ndarray | None = None
        self.subgoal_received_s: float | None = None
        self.subgoals_received = 0
        self.subgoals_shielded = 0
        """Subgoals the subgoal unit changed (clamped, or replaced when non-finite)."""
        self.land_requested = False
        self.odom_errors = 0
        """Odometry samples refused (malformed, or by the shield's odometry unit)."""
        unit = getattr(shield, "unit", None)
        self._odometry = unit("odometry") if callable(unit) else None
        """The shield's odometry unit (robot_hrl.safety.units.odometry), None when its YAML lists none."""
        self.last_odom_error = ""
        self.interventions: dict[str, int] = {}
        self.last_mode = "idle"
        self.last_reason = ""
        self.last_status: dict[str, Any] = {"state": "waiting"}
        self.last_state = "waiting"
        self.engaged = False
        """A finite subgoal has arrived since start: the policy flies."""
        self.landed_request: np.ndarray | None = None
        """The requested subgoal when the shield cut the motors after landing."""
        from robot_hrl.nodes.battery_input import BatteryInput

        self.battery = BatteryInput.for_shield(shield)
        """The measured battery voltage (``/battery``), judged on arrival; stale or refused: None to the shield."""
        self._reset_faults = False
        self._land_sent = False
        self._subgoal_active: set = set()
        self._tick_active: set = set()

    # ---- inputs -------------------------------------------------------------------------------
    def on_state(self, state, now: float, frame_id: str | None = None, child_frame_id: str | None = None) -> bool:
        """A state sample; the shield's odometry unit (where its YAML lists one) judges it first. Returns
        whether it was taken (a refused sample is counted there and here; the previous state grows older)."""
        with self._lock:
            unit = self._odometry
            if unit is not None:
                refusal = unit.judge(state, now, frame_id, child_frame_id)
                if refusal is not None:
                    if refusal:  # '' : an exact repeat of the latest sample, not news
                        self.odom_errors += 1
                        self.last_odom_error = refusal
                    return False
            self.state = state
            self.state_received_s = now
            return True

    def on_bad_odometry(self, error: str, now: float | None = None) -> None:
        with self._lock:
            self.odom_errors += 1
            unit = self._odometry
            self.last_odom_error = error if unit is None else unit.refuse_malformed(0.0 if now is None else now, error)

    def on_battery(self, voltage, stamp_s, now: float) -> str | None:
        """A battery reading (V, its stamp); returns the refusal, or None when taken (robot_hrl.nodes.battery_input)."""
        with self._lock:
            return self.battery.update(voltage, stamp_s, now)

    def on_subgoal(self, position, now: float) -> list:
        """Pass a requested subgoal through the shield's subgoal unit; returns its interventions."""
        p = np.asarray(position, dtype=np.float64)
        with self._lock:
            current = None if self.state is None else np.asarray(self.state.position_w, dtype=np.float64)
            self.subgoals_received += 1
            finite = bool(np.all(np.isfinite(p)))
            land = self.lands and finite and p[2] <= self.floor_z + self.config.land_request_m
            if land:
                # A landing request: the shield checks the point as if it were in the air; the
                # backup lands under where the robot is (the planner sends the point below it).
                probe = np.array([p[0], p[1], self.floor_z + 1.0])
                safe, interventions = self._filter_subgoal(probe, current, now)
                safe = np.array([safe[0], safe[1], p[2]])
            else:
                safe, interventions = self._filter_subgoal(p, current, now)
            new_request = self.requested is None or not np.array_equal(p, self.requested, equal_nan=True)
            self._count_subgoal(interventions, new_request)
            if interventions:
                self.subgoals_shielded += 1
            if new_request:
                self.status_machine.new_request(now)
            self.requested = p
            self.safe_subgoal = safe
            self.subgoal_received_s = now
            self.land_requested = land
            if finite and not land:
                if not self.engaged:
                    self.engaged = True
                elif self.last_mode == "motors_off" and not self.shield_latched() and new_request \
                        and self.landed_request is not None and not np.array_equal(p, self.landed_request) \
                        and self._state_fresh(now):
                    self._reset_faults = True  # landed, and a new flight is asked for: take off again
            return interventions

    def _state_fresh(self, now: float) -> bool:
        """A state younger than the shield's state timeout (never take off again on stale odometry)."""
        if self.state is None:
            return False
        watchdog = getattr(self.shield, "watchdog", None)
        timeout = float(getattr(watchdog, "state_timeout", 0.1))
        return now - float(self.state.stamp_s) <= timeout

    def _filter_subgoal(self, p, current, now):
        safe, interventions = self.shield.filter_subgoal(p, current, now)
        return np.asarray(safe, dtype=np.float64), list(interventions or [])

    def _count_subgoal(self, interventions, new_request: bool) -> None:
        """Subgoal interventions count once per distinct requested subgoal (the planner re-sends it)."""
        for item in interventions or []:
            key = (item.unit, item.constraint)
            if new_request or key not in self._subgoal_active:
                self.interventions[item.unit] = self.interventions.get(item.unit, 0) + 1
        self._subgoal_active = {(i.unit, i.constraint) for i in interventions or []}

    def _count_tick(self, interventions, land_requested: bool) -> None:
        """Tick interventions count once per episode: when a unit.constraint starts acting.
        The landing that carries out a request is not an intervention."""
        active = set()
        for item in interventions or []:
            key = (item.unit, item.constraint)
            if land_requested and key in (("watchdog", "stale_subgoal"), ("command", "land_request")):
                continue
            active.add(key)
            if key not in self._tick_active:
                self.interventions[item.unit] = self.interventions.get(item.unit, 0) + 1
        self._tick_active = active

    def estop(self, latch: bool, now: float) -> None:
        with self._lock:
            if latch:
                self.shield.estop("/estop", now)
            else:
                self.shield.reset_estop()

    # ---- the tick -----------------------------------------------------------------------------
    def tick(self, now: float) -> TickOutput:
        with self._lock:
            state, subgoal = self.state, self.safe_subgoal
            state_stamp = None if state is None else state.stamp_s
            subgoal_stamp = self.subgoal_received_s
            land = self.land_requested
            engaged = self.engaged
            if self._reset_faults:
                self._reset_faults = False
                self.landed_request = None
                self.shield.reset_faults()
                if hasattr(self.policy, "reset"):
                    self.policy.reset()
                if self.heading is not None:
                    self.heading.reset()
        if not engaged and not self.shield_latched():
            # Nothing asked of us yet (on the ground, motors off): idle; the shield has nothing to guard.
            name = "waiting" if state is None else "idle"
            self.last_state = name
            return TickOutput(self._idle, "idle", name, (), lambda: self._status(name, state, "idle", "", now))
        t0 = time.perf_counter()
        # no new command (landing, no state yet): the last one again
        actions = self._zero_actions if self._last_out is None else None
        if state is not None and subgoal is not None and not land:
            try:
                actions = (self.policy.step(state, subgoal) if self.heading is None
                           else self.heading.step(self.policy, state, subgoal))
            except Exception as exc:  # noqa: BLE001 - an observation error: the watchdog sees a non-finite output
                self.last_reason = f"policy: {exc}"
                actions = self._nan_actions
        if actions is None:
            actions = self._last_out.actions
        inference_s = time.perf_counter() - t0
        out = self.shield_step(now, state, state_stamp, subgoal, subgoal_stamp, actions, inference_s, land)
        command, mode, reason, interventions = out.command, str(out.mode), out.reason, out.interventions
        self._count_tick(interventions, land)
        self._last_out = out
        if mode == "motors_off" and self.last_mode != "motors_off":
            self.landed_request = None if self.requested is None else self.requested.copy()
        self.last_mode = mode
        self.last_reason = reason
        status_state = self._state_of(mode, state, now, land)
        self.last_state = status_state
        return TickOutput(np.asarray(command, dtype=np.float64), mode, status_state, interventions,
                          lambda: self._status(status_state, state, mode, reason, now))

    def shield_step(self, now, state, state_stamp, subgoal, subgoal_stamp, actions, inference_s, land):
        """One shield tick. A requested landing goes to ``Shield.request_land`` once (the shield's
        command unit: backup land, then motors off, latched until a new flight resets it)."""
        request_land = getattr(self.shield, "request_land", None)
        if land and not self._land_sent:
            self._land_sent = True
            if request_land is not None:
                request_land(now, "landing requested on /subgoal")
        elif not land:
            self._land_sent = False
        # Without request_land (older shields) the subgoal is withheld: the watchdog holds, then lands.
        inp = ShieldInput(now, state, actions, subgoal_w=None if land and request_land is None else subgoal,
                          subgoal_stamp_s=subgoal_stamp, state_stamp_s=state_stamp, inference_s=inference_s,
                          battery_v=self.battery.voltage(now))
        return self.shield.step(inp)

    def shield_latched(self) -> bool:
        return bool(getattr(self.shield, "estopped", False))

    def _state_of(self, mode: str, state, now: float, land: bool) -> str:
        return self.status_machine.state(mode, self.last_reason, state, self.requested, now, land, self.shield_latched())

    def _status(self, status_state: str, state, mode: str, reason: str, now: float) -> dict[str, Any]:
        s = SkillStateMachine.report(status_state, state, mode, reason, now, self.requested, self.safe_subgoal)
        self.last_status = s
        return s

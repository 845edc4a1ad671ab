"""Watchdog: stale state, stale subgoal, a missed inference deadline, a non-finite policy output.

* ``stale_state``: no state, a non-finite one, or one older than ``watchdog.state_timeout_s`` (or
  stamped more than that ahead of the clock: a negative age is not "fresh").
  The backup stops without a position (robot_hrl.safety.shield: it brakes on the dead-reckoned
  velocity), and after ``watchdog.hold_s`` or the robot model's braking time, whichever is shorter,
  descends (a timed descent, motors off on the ground; docs/safety.md "Loss of state").
* ``stale_subgoal``: no subgoal, a non-finite one, or one older than ``watchdog.subgoal_timeout_s``.
  The backup holds the current position, and lands after ``watchdog.hold_s``.
* ``inference_deadline``: the policy took longer than ``watchdog.inference_deadline_s``; its
  command is late and is not used this tick (the backup holds).
* ``non_finite_output``: a NaN or infinite policy output; not used (the backup holds).

A fault that clears before ``hold_s`` returns control (after the shield's recovery time);
once landing has begun it stays latched until ``Shield.reset_faults()``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from robot_hrl.safety.records import ERROR, OK, STALE, WARN
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick


class WatchdogCfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    state_timeout_s: float = Field(gt=0.0)
    subgoal_timeout_s: float = Field(gt=0.0)
    inference_deadline_s: float = Field(gt=0.0)
    hold_s: float = Field(ge=0.0)


class WatchdogUnit(ShieldUnit):
    name = "watchdog"
    constraints = ("stale_state", "stale_subgoal", "inference_deadline", "non_finite_output")
    description = "fresh state and subgoal, a policy on time with a finite output"
    stage = "input"
    section = "watchdog"
    config_model = WatchdogCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "WatchdogUnit":
        return cls(ctx.config, getattr(ctx.model, "blind_brake_s", None))

    def __init__(self, cfg, blind_brake_s: float | None = None):
        super().__init__()
        w = cfg.watchdog
        self.state_timeout = w.state_timeout_s
        self.subgoal_timeout = w.subgoal_timeout_s
        self.deadline = w.inference_deadline_s
        self.hold_s = w.hold_s
        self.state_hold_s = w.hold_s if blind_brake_s is None else min(w.hold_s, float(blind_brake_s))
        """How long a stale state is held (braking without a position) before the blind descent: at most
        ``hold_s``, and no longer than the robot model's braking time (``blind_brake_s``)."""
        self.state_stale_since: float | None = None
        self.subgoal_stale_since: float | None = None
        self.state_age_s: float = float("inf")

    def reset(self) -> None:
        self.state_stale_since = None
        self.subgoal_stale_since = None

    def check(self, tick: Tick) -> None:
        """The shield computes the raw facts (finite, ages) into the tick; this unit judges them."""
        self.begin()
        now = tick.now
        state_ok, state_age = tick.state_ok, tick.state_age
        subgoal_ok, subgoal_age = tick.subgoal_ok, tick.subgoal_age
        inference_s, output_finite = tick.inference_s, tick.output_finite
        self.state_age_s = state_age
        if not state_ok or not -self.state_timeout <= state_age <= self.state_timeout:  # a future stamp is not fresh
            if self.state_stale_since is None:
                self.state_stale_since = now
            if now - self.state_stale_since >= self.state_hold_s:
                tick.request_land(self, "stale_state")
            else:
                tick.request_hold(self, "stale_state")
        else:
            self.state_stale_since = None
        if not subgoal_ok or subgoal_age > self.subgoal_timeout:
            if self.subgoal_stale_since is None:
                self.subgoal_stale_since = now
            if now - self.subgoal_stale_since >= self.hold_s:
                tick.request_land(self, "stale_subgoal")
            else:
                tick.request_hold(self, "stale_subgoal")
        else:
            self.subgoal_stale_since = None
        if not output_finite:
            tick.policy_valid = False
            tick.reject(self, "non_finite_output", "NaN or inf in the policy output")
        elif not inference_s <= self.deadline:  # also catches a NaN duration
            tick.policy_valid = False
            tick.reject(self, "inference_deadline", f"inference took {inference_s * 1e3:.2f} ms > {self.deadline * 1e3:.2f} ms")

    def status(self) -> tuple[int, str]:
        c = self.active_constraint
        if self.state_stale_since is not None and c is not None:
            return STALE, (f"state is stale (age {self.state_age_s:.3f} s, limit {self.state_timeout} s); braking without a "
                           "position, then a timed descent")
        if self.subgoal_stale_since is not None and c is not None:
            return ERROR, f"subgoal is stale (> {self.subgoal_timeout} s); holding, then landing"
        if c is not None:
            return WARN, f"policy output rejected: {c}"
        return OK, "state, subgoal and policy on time"

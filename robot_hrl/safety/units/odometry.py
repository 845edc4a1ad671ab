"""Odometry validation, in one place: every state sample is judged here before anything uses it.

A sample is refused (and the previous accepted one stays the latest, growing older, so the watchdog
sees the odometry go stale and the shield's no-position stop takes over) when

* ``malformed``: it could not be decoded into a finite state (the skill node's decoder failed);
* ``frame_id`` / ``child_frame_id``: its frames are not the expected ones (REP 105: pose in
  ``frame_id``, the world's odometry frame; twist in ``child_frame_id``, the body);
* ``future_stamp``: it is stamped later than the receiver's clock plus ``future_tolerance_s`` (a
  negative age would read as "fresh" forever; issue #16: a source re-sending the last pose +1000 s);
* ``non_monotonic_stamp``: it is stamped before the latest accepted sample, or at the same time with
  a different state (an exact repeat of the latest sample, as a lockstep simulator re-sends it, is
  not news and is dropped without counting);
* ``position_jump``: its position is farther from where the latest accepted sample, moving with its
  velocity, can be after the stamps' difference than the robot's largest acceleration allows
  (``0.5 a_max dt^2``) plus ``position_margin_m`` (the estimator's noise);
* ``velocity_jump``: its velocity differs from the latest accepted one by more than ``a_max dt``
  plus ``velocity_margin_mps``.

``a_max`` is the robot model's ``max_acceleration_mps2`` (a quadrotor: full thrust along gravity).
A jump latches: once a sample jumped, every later one is refused too (as ``position_jump`` /
``velocity_jump``) until the shield's faults are reset (:meth:`reset`). Judged against the latest
accepted sample alone, a source that teleported would be accepted again a few hundred milliseconds
later, when the growing ``0.5 a_max dt^2`` covers the jump; and a relocalization in flight is a
loss of state, not news. A gap in the samples (a dropout) latches nothing: the first sample after it
is judged on the same physics over the whole gap.
Each refusal is counted by name and shown on ``/diagnostics`` (this unit's status); the unit has
no per-tick effect of its own (the watchdog judges the age of what was accepted).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from robot_hrl.errors import ConfigError
from robot_hrl.safety.records import OK, WARN, Intervention
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick


class OdometryCfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    frame_id: str = Field(min_length=1, description="the pose's frame (the world's odometry frame)")
    child_frame_id: str = Field(min_length=1, description="the twist's frame (the body)")
    future_tolerance_s: float = Field(ge=0.0, le=1.0, description="a stamp may be this far ahead of the receiver's clock")
    position_margin_m: float = Field(gt=0.0, le=1.0, description="position noise on top of the physically possible motion")
    velocity_margin_mps: float = Field(gt=0.0, le=5.0, description="velocity noise on top of the physically possible change")


class OdometryUnit(ShieldUnit):
    name = "odometry"
    constraints = ("malformed", "frame_id", "child_frame_id", "future_stamp", "non_monotonic_stamp", "position_jump",
                   "velocity_jump")
    description = "odometry samples finite, in the expected frames, in time order, not from the future, physically possible"
    stage = "input"
    section = "odometry"
    config_model = OdometryCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "OdometryUnit":
        a_max = getattr(ctx.model, "max_acceleration_mps2", None)
        if a_max is None or not a_max > 0:
            raise ConfigError(f"unit 'odometry': the {ctx.config.model} shield model gives no max_acceleration_mps2 "
                              "(the largest acceleration the robot can reach) to judge jumps with")
        return cls(ctx.config.odometry, float(a_max))

    def __init__(self, cfg: OdometryCfg, max_acceleration_mps2: float):
        super().__init__()
        self.frame_id = cfg.frame_id
        self.child_frame_id = cfg.child_frame_id
        self.future_tolerance_s = cfg.future_tolerance_s
        self.position_margin_m = cfg.position_margin_m
        self.velocity_margin_mps = cfg.velocity_margin_mps
        self.max_acceleration_mps2 = max_acceleration_mps2
        """The largest acceleration the robot can reach, m/s^2 (the robot model's)."""
        self.samples = 0
        """Samples judged."""
        self.accepted = 0
        self._last: tuple | None = None
        """(stamp, position, velocity) of the latest accepted sample."""
        self._since_tick = 0
        """Refusals since the latest tick."""
        self.distrusted: str | None = None
        """The jump that latched the source's refusal ('position_jump' or 'velocity_jump'), None while trusted."""
        self.last_rejection = ""

    def reset(self) -> None:
        """Forget the latest accepted sample and the latch (the next one is judged on its own: frames, stamp, finite)."""
        self._last = None
        self.distrusted = None

    def judge(self, state, now_s: float, frame_id: str | None = None, child_frame_id: str | None = None) -> str | None:
        """Judge one sample; returns None when it is accepted, else the refusal ('constraint: detail'), counted.

        ``frame_id``/``child_frame_id`` None: not known to the caller (not judged). An exact repeat of
        the latest accepted sample returns ``''`` (not news; not counted)."""
        self.samples += 1
        if frame_id is not None and frame_id != self.frame_id:
            return self._refuse(now_s, "frame_id", f"pose in frame {ascii(frame_id)[:80]}, expected {self.frame_id!r}")
        if child_frame_id is not None and child_frame_id != self.child_frame_id:
            return self._refuse(now_s, "child_frame_id",
                                f"twist in frame {ascii(child_frame_id)[:80]}, expected {self.child_frame_id!r}")
        stamp = float(state.stamp_s)
        p = [float(c) for c in state.position_w]
        v = [float(c) for c in state.linear_velocity_w]
        if not math.isfinite(stamp + sum(p) + sum(v)):
            return self._refuse(now_s, "malformed", "non-finite stamp, position or velocity")
        if stamp > now_s + self.future_tolerance_s:
            return self._refuse(now_s, "future_stamp", f"stamped {stamp - now_s:.3g} s ahead of the clock "
                                f"(tolerance {self.future_tolerance_s} s)")
        if self.distrusted is not None:
            return self._refuse(now_s, self.distrusted, "the source jumped earlier; refused until the faults are reset")
        last = self._last
        if last is not None:
            t0, p0, v0 = last
            dt = stamp - t0
            if dt < 0.0 or (dt == 0.0 and (p != p0 or v != v0)):
                return self._refuse(now_s, "non_monotonic_stamp", f"stamped {dt:.3g} s after the latest accepted sample")
            if dt == 0.0:
                return ""
            a = self.max_acceleration_mps2
            off = math.sqrt(sum((p[i] - p0[i] - v0[i] * dt) ** 2 for i in range(3)))
            allowed = 0.5 * a * dt * dt + self.position_margin_m
            if off > allowed:
                self.distrusted = "position_jump"
                return self._refuse(now_s, "position_jump", f"position {off:.3g} m from where the robot can be after "
                                    f"{dt:.3g} s (at most {allowed:.3g} m)")
            dv = math.sqrt(sum((v[i] - v0[i]) ** 2 for i in range(3)))
            allowed_v = a * dt + self.velocity_margin_mps
            if dv > allowed_v:
                self.distrusted = "velocity_jump"
                return self._refuse(now_s, "velocity_jump", f"velocity changed by {dv:.3g} m/s in {dt:.3g} s "
                                    f"(at most {allowed_v:.3g} m/s)")
        self._last = (stamp, p, v)
        self.accepted += 1
        return None

    def refuse_malformed(self, now_s: float, error: str) -> str:
        """A sample the decoder could not turn into a state."""
        return self._refuse(now_s, "malformed", error[:200])

    def _refuse(self, now_s: float, constraint: str, detail: str) -> str:
        self.counters.record(Intervention(now_s, self.name, constraint, (), (), "drop", detail))
        self._since_tick += 1
        self.last_rejection = f"{constraint}: {detail}"
        return self.last_rejection

    def check(self, tick: Tick) -> None:
        """Per tick: shows a refusal since the previous tick as this unit's active constraint (no request)."""
        self.begin()
        if self._since_tick:
            self._since_tick = 0
            self.active_constraint = self.counters.last_intervention.constraint

    def status(self) -> tuple[int, str]:
        if self.active_constraint is not None:
            return WARN, f"odometry refused: {self.last_rejection}"
        if self.counters.interventions:
            return OK, f"{self.accepted} of {self.samples} samples accepted; latest refusal: {self.last_rejection}"
        return OK, f"{self.accepted} of {self.samples} samples accepted"

    def diagnostic(self, hardware_id: str) -> dict:
        d = super().diagnostic(hardware_id)
        d["values"].update({"samples": str(self.samples), "accepted": str(self.accepted)})
        if self.last_rejection:
            d["values"]["last.rejection"] = self.last_rejection
        return d

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
  plus ``velocity_margin_mps``;
* ``frozen_state`` (a hung estimator, or a source replaying its last pose with fresh stamps, issue #16):
  its pose (position and orientation) is bit for bit the latest accepted one's under a newer stamp. An
  estimator's output never repeats exactly while the robot flies or drives (a Kalman filter's state moves
  with every prediction step), so a repeat off the ground is not news: it is dropped without refreshing
  the state (which grows older: the watchdog's stale-state stop follows within ``state_timeout_s``), and
  once the run of repeats is longer than ``frozen_after_s`` it is refused by name and latches. On the ground
  (``rest_height_m`` above the floor) a robot at rest does repeat its pose: accepted, unless the actuators have
  been driving (the shield's output not its motors-off command) for ``driving_frozen_s`` with the pose unchanged;
* ``pose_velocity_mismatch``: the position moved differently from the source's own velocity integrated over
  the stamps (trapezoids since an anchor renewed every ``consistency_window_s``) by more than
  ``consistency_margin_m`` plus the integration's own error bound, ``a_max dt^2 / 4`` per interval. A pose
  replayed (or slowly faked) while the twist says the robot moves is caught here even without an exact repeat.

``a_max`` is the robot model's ``max_acceleration_mps2`` (a quadrotor: full thrust along gravity).
A jump, a frozen state and a mismatch latch: once a sample jumped, every later one is refused too (as ``position_jump`` /
``velocity_jump``) until the shield's faults are reset (:meth:`reset`). Judged against the latest
accepted sample alone, a source that teleported would be accepted again a few hundred milliseconds
later, when the growing ``0.5 a_max dt^2`` covers the jump; and a relocalization in flight is a
loss of state, not news. A gap in the samples (a dropout) latches nothing: the first sample after it
is judged on the same physics over the whole gap.
Each refusal is counted by name and shown on ``/diagnostics`` (this unit's status); the unit has
no per-tick effect of its own (the watchdog judges the age of what was accepted).

Not detected: a source that fabricates a state consistent in itself (pose moving with its own twist, never
repeating) while the robot is elsewhere; only an independent sensor can tell that apart.

The same validator serves every node that reads odometry (:meth:`OdometryUnit.for_robot`: the planner node
builds one from the robot's shield YAML; the skill node's is its shield's).
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
    rest_height_m: float = Field(ge=0.0, le=1.0, description="a pose this close above the floor may repeat exactly (at rest)")
    rest_speed_mps: float = Field(ge=0.0, le=1.0, description="... if the sample's own speed is at most this (at rest)")
    frozen_after_s: float = Field(gt=0.0, le=1.0, description="a pose repeated exactly this long off the ground: frozen_state")
    driving_frozen_s: float = Field(gt=0.0, le=10.0, description="on the ground with the actuators driving: the same, after this long")
    consistency_window_s: float = Field(gt=0.0, le=10.0, description="the position is checked against the integrated velocity over this window")
    consistency_margin_m: float = Field(gt=0.0, le=2.0, description="position/velocity disagreement allowed on top of the integration's error")


class OdometryUnit(ShieldUnit):
    name = "odometry"
    constraints = ("malformed", "frame_id", "child_frame_id", "future_stamp", "non_monotonic_stamp", "position_jump",
                   "velocity_jump", "frozen_state", "pose_velocity_mismatch")
    description = ("odometry samples finite, in the expected frames, in time order, not from the future, physically "
                   "possible, not frozen, position consistent with velocity")
    stage = "input"
    section = "odometry"
    config_model = OdometryCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "OdometryUnit":
        a_max = getattr(ctx.model, "max_acceleration_mps2", None)
        if a_max is None or not a_max > 0:
            raise ConfigError(f"unit 'odometry': the {ctx.config.model} shield model gives no max_acceleration_mps2 "
                              "(the largest acceleration the robot can reach) to judge jumps with")
        return cls(ctx.config.odometry, float(a_max), float(ctx.world.bounds.min[2]), list(ctx.model.off_command()))

    @classmethod
    def for_robot(cls, robot, world, config_path=None) -> "OdometryUnit":
        """The validator alone, for a node without a shield (the planner node): the robot's shield YAML
        (``config_path`` None: ``robot.shield_config_path``) and its family's model, exactly as the shield builds it."""
        from robot_hrl.contract.action_modes import action_map
        from robot_hrl.safety.config import load_shield_config
        from robot_hrl.safety.families import get_family
        from robot_hrl.safety.units.base import ShieldContext

        config = load_shield_config(config_path if config_path is not None else robot.shield_config_path)
        if "odometry" not in config.units:
            raise ConfigError(f"the shield config of {robot.name} lists no 'odometry' unit (its units: {list(config.units)}); "
                              "add it to validate odometry")
        model = get_family(config.model).build_model(robot, config, action_map(robot.action_spec()))
        return cls.build(ShieldContext(config, model, world, robot, 0.0))

    def __init__(self, cfg: OdometryCfg, max_acceleration_mps2: float, floor_z_m: float = 0.0,
                 off_command: list | None = None):
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
        self.rest_height_m = cfg.rest_height_m
        self.rest_speed_mps = cfg.rest_speed_mps
        self.frozen_after_s = cfg.frozen_after_s
        self.driving_frozen_s = cfg.driving_frozen_s
        self.consistency_window_s = cfg.consistency_window_s
        self.consistency_margin_m = cfg.consistency_margin_m
        self.floor_z_m = floor_z_m
        """The world's floor (a pose within ``rest_height_m`` above it may repeat: at rest on the ground)."""
        self._off = None if off_command is None else [float(c) for c in off_command]
        """The shield model's motors-off command: any other output is the actuators driving."""
        self._driving_since: float | None = None
        """Since when (shield time) the shield's output has been other than motors off; None: not driving."""
        self.repeats = 0
        """Samples whose pose repeated the latest accepted one exactly (not news off the ground)."""
        self.reset()

    def reset(self) -> None:
        """Forget the latest accepted sample and the latch (the next one is judged on its own: frames, stamp, finite)."""
        self._last = None
        self.distrusted = None
        self._same_since: float | None = None
        """Stamp of the first sample of the current run of identical poses."""
        self._anchor: tuple | None = None
        """(stamp, position, integrated velocity [3], integration error bound) of the consistency check."""

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
        q = [float(c) for c in state.quat_wxyz]
        if not math.isfinite(stamp + sum(p) + sum(v) + sum(q)):
            return self._refuse(now_s, "malformed", "non-finite stamp, position or velocity")
        if stamp > now_s + self.future_tolerance_s:
            return self._refuse(now_s, "future_stamp", f"stamped {stamp - now_s:.3g} s ahead of the clock "
                                f"(tolerance {self.future_tolerance_s} s)")
        if self.distrusted is not None:
            return self._refuse(now_s, self.distrusted, "the source jumped earlier; refused until the faults are reset")
        last = self._last
        if last is not None:
            t0, p0, v0, q0 = last
            dt = stamp - t0
            if dt < 0.0 or (dt == 0.0 and (p != p0 or v != v0)):
                return self._refuse(now_s, "non_monotonic_stamp", f"stamped {dt:.3g} s after the latest accepted sample")
            if dt == 0.0:
                return ""
            if p == p0 and q == q0:  # the same pose under a newer stamp
                frozen = self._frozen(stamp, p, v, now_s)
                if frozen is not None:
                    return frozen
            else:
                self._same_since = None
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
            mismatch = self._consistency(stamp, p, v, dt, v0, now_s)
            if mismatch is not None:
                return mismatch
        if self._anchor is None:
            self._anchor = (stamp, p, [0.0, 0.0, 0.0], 0.0)
        self._last = (stamp, p, v, q)
        self.accepted += 1
        return None

    def _frozen(self, stamp: float, p: list, v: list, now_s: float) -> str | None:
        """The latest accepted pose again under a newer stamp: '' (not news), a refusal, or None (at rest: accepted).

        At rest means on the ground (``rest_height_m``) with the sample's own twist saying so (``rest_speed_mps``):
        a pose replayed near the floor under a live twist that says the robot moves is not a robot at rest."""
        if self._same_since is None:
            self._same_since = self._last[0]
        self.repeats += 1
        run_s = stamp - self._same_since
        moving = math.sqrt(sum(c * c for c in v)) > self.rest_speed_mps
        if moving or p[2] > self.floor_z_m + self.rest_height_m:  # an estimator's output never repeats exactly in motion
            if run_s <= self.frozen_after_s:
                return ""  # not news: the state is not refreshed (it ages; the watchdog judges it)
            self.distrusted = "frozen_state"
            return self._refuse(now_s, "frozen_state", f"the same pose for {run_s:.3g} s under newer stamps, "
                                f"{p[2] - self.floor_z_m:.3g} m above the floor, twist {math.sqrt(sum(c * c for c in v)):.3g} m/s "
                                "(a hung estimator or a replayed pose)")
        driving = self._driving_since
        if driving is not None and stamp - max(driving, self._same_since) > self.driving_frozen_s:
            self.distrusted = "frozen_state"
            return self._refuse(now_s, "frozen_state", f"the same pose on the ground for {stamp - max(driving, self._same_since):.3g} s "
                                "while the actuators drive (a hung estimator or a replayed pose)")
        return None  # at rest on the ground

    def _consistency(self, stamp: float, p: list, v: list, dt: float, v0: list, now_s: float) -> str | None:
        """The position against the source's velocity integrated since the anchor (trapezoids)."""
        anchor = self._anchor
        if anchor is None:
            return None
        ta, pa, integral, bound = anchor
        integral = [integral[i] + 0.5 * (v0[i] + v[i]) * dt for i in range(3)]
        bound += 0.25 * self.max_acceleration_mps2 * dt * dt  # trapezoid error with |dv/dt| <= a_max
        off = math.sqrt(sum((p[i] - pa[i] - integral[i]) ** 2 for i in range(3)))
        allowed = self.consistency_margin_m + bound
        if off > allowed:
            self.distrusted = "pose_velocity_mismatch"
            return self._refuse(now_s, "pose_velocity_mismatch", f"moved {off:.3g} m away from its own velocity integrated over "
                                f"{stamp - ta:.3g} s (at most {allowed:.3g} m)")
        self._anchor = (stamp, p, [0.0, 0.0, 0.0], 0.0) if stamp - ta >= self.consistency_window_s else (ta, pa, integral, bound)
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
        """Per tick: shows a refusal since the previous tick as this unit's active constraint (no request), and
        notes whether the actuators drive (the previous output is not the motors-off command)."""
        self.begin()
        off = self._off
        if off is not None:
            prev = tick.prev
            if any(prev[i] != off[i] for i in range(len(off))):
                if self._driving_since is None:
                    self._driving_since = tick.now
            else:
                self._driving_since = None
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
        d["values"].update({"samples": str(self.samples), "accepted": str(self.accepted), "repeats": str(self.repeats)})
        if self.last_rejection:
            d["values"]["last.rejection"] = self.last_rejection
        return d

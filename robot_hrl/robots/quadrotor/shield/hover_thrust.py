"""The quadrotor's hover-thrust unit: the airframe it flies, estimated online (issue #16).

The shield does not know the airframe: its stopping model brakes a descent as the weakest airframe of the
randomization would (``stopping.thrust_fraction``) and the backup's thrust feed-forward is the model's mass. This
unit estimates the **hover thrust** ``H`` (the collective thrust command under which the airframe holds its height:
its mass, its rotors' force and any steady vertical disturbance in one number) every tick from what the shield
already sees, with the one-state Kalman filter of robot_hrl/safety/hover_thrust.py (PX4's
``mc_hover_thrust_estimator`` design):

* the **thrust** it produced over the last tick: the commands the shield passed (``tick.prev``, and the one before
  it for a step of latency) through the motor lag, known only within a band: first-order lags in rotor-speed
  space (sqrt of thrust) with the fastest and the slowest motor designed for (``motor_time_constant_range_s``),
  each with and without the latency; the band's middle is the sample's thrust, its half-width (as an
  acceleration) the sample's own variance; its vertical part along the measured body z, times the ground
  effect's gain at the measured height (robot_hrl/robots/quadrotor/ground_effect.py);
* the **vertical acceleration**: the change of the odometry's vertical velocity between two measured samples over
  their stamps;
* the **battery**: a sample is used only while the command is below ``max_thrust_fraction_of_max`` of what the
  chain reaches on the measured battery (beyond, the rotors saturate and the thrust is not the command's).

A sample is also skipped below ``min_height_m`` (contact, the strongest ground effect), with the body tilted beyond
``max_tilt_deg``, with a thrust below ``min_thrust_fraction_of_weight`` of the model's weight (rotors near idle),
or while the band is wider than ``max_band_fraction_of_weight`` (a transient: no information).

**Faults** start the filter again from its prior, and the stopping model goes back to the worst case until it has
converged again (the backup keeps the latest converged estimate as its feed-forward: the airframe has not changed,
and any value inside the airframe range is as good a feed-forward as the model's mass): no state or a non-finite one, a stale (dead-reckoned) state, a vertical
acceleration beyond what the robot can do (``DynamicsModel.max_acceleration_mps2``: a velocity jump), no plausible
battery reading, and a takeover by the backup for an input unit's reason (watchdog, odometry, battery, land
request, emergency stop): the situations in which the inputs themselves are in doubt. A hold for an envelope or
limits reason is the shield's normal work and keeps the estimate.

**Converged**: the standard deviation below ``converged_sigma_n`` for ``converged_hold_s`` and no offset detected
(the filter's innovations not falling on one side). Then (``DynamicsModel.set_hover_thrust``):

* the backup's thrust feed-forward uses the estimate, within the airframe range;
* the stopping model's weakest airframe is the estimate plus ``bound_sigma`` standard deviations (never weaker than
  the configured ``stopping.thrust_fraction``), its strongest the estimate minus them (never stronger than
  ``stopping.thrust_fraction_max``), each derated by ``max_disturbance_accel_mps2`` (docs/safety.md).

Its diagnostic, ``shield/hover_thrust``, says what the model brakes with (``braking_on``: the estimate, or the
worst case and why), the estimate, its standard deviation and bounds, and the faults by name.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_hrl.robots.quadrotor.ground_effect import (
    ground_effect_gain,
    ground_effect_height_clip_m,
)
from robot_hrl.safety.hover_thrust import HoverThrustFilter
from robot_hrl.safety.records import OK, WARN
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick


class HoverThrustCfg(BaseModel):
    """The hover-thrust estimate (robot_hrl/robots/quadrotor/shield/hover_thrust.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    process_noise_n_per_sqrt_s: float = Field(gt=0.0, le=1.0, description="random walk of the hover thrust, N/sqrt(s)")
    gate_sigma: float = Field(ge=1.0, le=10.0, description="innovation gate, standard deviations (PX4 HTE_ACC_GATE: 3)")
    min_accel_var_m2ps4: float = Field(gt=0.0, description="the learned acceleration noise never below this, (m/s^2)^2")
    init_accel_var_m2ps4: float = Field(gt=0.0, description="the acceleration noise at a (re)start, (m/s^2)^2")
    bound_sigma: float = Field(ge=1.0, le=10.0, description="the stopping model's airframe: the estimate +- this many sigma")
    converged_sigma_n: float = Field(gt=0.0, description="converged below this standard deviation, N")
    converged_hold_s: float = Field(ge=0.0, le=10.0, description="... for this long")
    motor_time_constant_range_s: tuple[float, float] = Field(description="the motors the thrust band covers, s")
    max_latency_ticks: int = Field(ge=0, le=5, description="control ticks of actuation latency the band covers")
    min_height_m: float = Field(ge=0.0, description="no sample closer to the floor (contact, ground effect)")
    max_tilt_deg: float = Field(gt=0.0, lt=90.0, description="no sample with the body tilted more")
    min_thrust_fraction_of_weight: float = Field(ge=0.0, lt=1.0, description="no sample below this thrust (rotors near idle)")
    max_thrust_fraction_of_max: float = Field(gt=0.0, le=1.0, description="no sample above this of the chain's thrust on the battery")
    max_thrust_uncertainty_fraction: float = Field(gt=0.0, lt=0.5, description=(
        "no sample while the band's half-width is more than this fraction of its middle (a transient); each fused "
        "sample's own fraction enters the bounds as a systematic error (the filter's bias_n)"))
    max_torque_spread_fraction: float = Field(gt=0.0, le=1.0, description=(
        "no sample while the torques split the rotors' forces by more than this fraction of their mean"))
    max_disturbance_accel_mps2: float = Field(ge=0.0, description="a steady vertical disturbance the bounds are derated for")
    use_in_stopping_model: bool = Field(description=(
        "the stopping model's airframe from the converged estimate's bounds (True) or always the configured worst case "
        "(False: the estimate feeds the backup's thrust forward only)"))
    narrow_after_samples: int = Field(default=0, ge=0, le=10_000, description=(
        "before convergence too, the stopping model's airframe narrows to the estimate's bounds once this many samples "
        "are fused since the last (re)start and no offset is detected (0: the worst case until converged); with "
        "use_in_stopping_model only"))

    @model_validator(mode="after")
    def _ordered(self) -> HoverThrustCfg:
        lo, hi = self.motor_time_constant_range_s
        if not 0.0 < lo <= hi:
            raise ValueError(f"hover_thrust.motor_time_constant_range_s must be 0 < min <= max, got {self.motor_time_constant_range_s}")
        return self


FAULTS = ("no_state", "stale_state", "velocity_jump", "battery", "takeover")
"""What starts the estimate again (the model brakes with the worst case until it has converged again)."""


class HoverThrustUnit(ShieldUnit):
    BAND_MOTORS = 4
    """Motor time constants the thrust band is the envelope of (log-spaced over ``motor_time_constant_range_s``), each
    with every latency up to ``max_latency_ticks``: a first-order lag is not monotone in its time constant under a
    command that turns around, so the two ends alone do not bound it."""
    name = "hover_thrust"
    constraints = ()
    description = "the airframe's hover thrust, estimated online: the backup's feed-forward and the stopping model's airframe"
    stage = "input"
    section = "hover_thrust"
    config_model = HoverThrustCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> HoverThrustUnit:
        return cls(ctx.config, ctx.model, ctx.world)

    def __init__(self, cfg, model, world=None):
        super().__init__()
        c = cfg.hover_thrust
        self.m = model
        self.cfg = c
        g = model.g
        self.prior_n = model.brake_mass * g
        """The hover thrust of the airframe the model assumes (its mass, or the declared one)."""
        self.min_n = model.brake_mass * g / model.strong_fraction_cfg
        self.max_n = model.brake_mass * g / model.weak_fraction_cfg
        """The airframe range (the configured fractions): the estimate never leaves it."""
        self.filter = HoverThrustFilter(
            self.prior_n, 0.5 * (self.max_n - self.min_n), self.min_n, self.max_n, c.process_noise_n_per_sqrt_s,
            c.gate_sigma, c.min_accel_var_m2ps4, c.init_accel_var_m2ps4, g)
        dt = model.dt
        lo_tau, hi_tau = c.motor_time_constant_range_s
        taus = [lo_tau * (hi_tau / lo_tau) ** (i / (self.BAND_MOTORS - 1)) for i in range(self.BAND_MOTORS)] if hi_tau > lo_tau else [lo_tau]
        self._alphas = tuple(1.0 - math.exp(-dt / tau) for tau in taus)
        self._latency = c.max_latency_ticks
        self._floor = float(world.bounds.min[2]) if world is not None else 0.0
        self._cos_tilt = math.cos(math.radians(c.max_tilt_deg))
        self._a_jump = model.max_acceleration_mps2 * 1.5
        robot = model.robot
        xs = [abs(p[0]) for p in robot.rotor_positions_m]
        ys = [abs(p[1]) for p in robot.rotor_positions_m]
        n = len(xs)
        # a rotor's share of each torque (an X or + mixer: the rotors' lever arms; yaw through the drag torque)
        self._spread_k = (1.0 / (n * max(min(ys), 1e-6)), 1.0 / (n * max(min(xs), 1e-6)), 1.0 / (n * robot.torque_to_thrust_m))
        self._n_rotors = n
        self.ground_effect_fraction = ground_effect_gain(robot, c.min_height_m, 1.0, ground_effect_height_clip_m(robot)) - 1.0
        """The systematic error the bounds allow for on top of the samples' thrust bands (the filter's ``bias_n``), as a
        fraction of the estimate: the ground effect at ``min_height_m`` (not compensated: the training simulator has
        none)."""
        model.disturbance_accel_mps2 = c.max_disturbance_accel_mps2
        self._narrowing = c.use_in_stopping_model and c.narrow_after_samples > 0
        self.fault_counts = {f: 0 for f in FAULTS}
        self.samples_used = 0
        self.samples_skipped = 0
        self.reset()

    def reset(self) -> None:
        self.filter.reset()
        self.converged = False
        self.ever_converged = False
        self.narrowed = False
        """The stopping model's airframe is the estimate's bounds (converged, or converging: ``narrow_after_samples``)."""
        self.feedforward_n: float | None = None
        """The latest converged estimate: the backup's feed-forward (kept through a fault: the airframe has not changed;
        the bounds go back to the worst case). None: never converged, the model's mass."""
        self._good_since: float | None = None
        self._last_stamp: float | None = None
        self._last_vz = 0.0
        w = self.m.weight
        # per motor, per latency, from both ends of what the rotors may produce at the start (their state is unknown: a
        # robot on the ground, or hovering on another airframe): the sqrt of the thrust. The band covers any start and
        # narrows as the lags forget it (the slowest motor: about 1 s to 1 %)
        top = math.sqrt(self.m.high[0])
        self._lags = [[a, j, start] for a in self._alphas for j in range(self._latency + 1) for start in (0.0, top)]
        self._distinct_lags = len(self._alphas) * (self._latency + 1)
        self._queue = [w] * (self._latency + 1)
        self._spread = [0.0] * (self._latency + 1)
        self.last_fault = ""
        self.last_fault_s: float | None = None
        self._in_fault = False
        self.m.set_hover_thrust(None)

    def _fault(self, name: str, now: float) -> None:
        if not self._in_fault:  # counted once per fault, when it begins
            self.fault_counts[name] += 1
            self.last_fault = name
            self.last_fault_s = now
        self._in_fault = True
        self.filter.reset()
        self.converged = False
        self.narrowed = False
        self._good_since = None
        self._last_stamp = None
        self.m.set_hover_thrust(self.feedforward_n)

    def _band(self, prev) -> tuple[float, float]:
        """Advance the lags with the command passed last tick; the thrust band over that tick (mean of each lag).

        Two lags of one motor and latency whose states have become equal (the two starts, forgotten) stay equal: one
        of them is dropped (the band is bit for bit the same, the loop half as long once the starts are forgotten)."""
        q = self._queue
        prev_thrust = prev[0]
        q.append(prev_thrust if prev_thrust > 0.0 else 0.0)
        del q[0]
        k = self._spread_k
        sp = self._spread
        sp.append(abs(prev[1]) * k[0] + abs(prev[2]) * k[1] + abs(prev[3]) * k[2])
        del sp[0]
        sqrt = math.sqrt
        targets = [sqrt(x) for x in reversed(q)]  # latency 0, 1, ...
        lo, hi = math.inf, -math.inf
        lags = self._lags
        for lag in lags:
            s0 = lag[2]
            s1 = s0 + lag[0] * (targets[lag[1]] - s0)
            lag[2] = s1
            mean = 0.5 * (s0 * s0 + s1 * s1)
            if mean < lo:
                lo = mean
            if mean > hi:
                hi = mean
        if len(lags) > self._distinct_lags:  # the starts of a motor and latency met: keep one
            seen = set()
            kept = [lag for lag in lags if (key := (lag[0], lag[1], lag[2])) not in seen and not seen.add(key)]
            if len(kept) < len(lags):
                self._lags = kept
        return lo, hi

    def check(self, tick: Tick) -> None:
        self.begin()
        now = tick.now
        lo_t, hi_t = self._band(tick.prev)
        doubt = tick.inputs_in_doubt(any_landing=True)
        if doubt is not None:
            self._fault(doubt, now)
            return
        m = self.m
        if m.battery_v is None:
            self._fault("battery", now)
            return
        self._in_fault = False
        stamp = now - tick.state_age
        vz = tick.v[2]
        last = self._last_stamp
        if last is not None and stamp == last:
            return  # no new measurement this tick
        self._last_stamp = stamp
        last_vz, self._last_vz = self._last_vz, vz
        if last is None:
            return
        dt = stamp - last
        if not 0.0 < dt <= 2.5 * m.dt:
            return  # a gap: the acceleration over it says little about last tick's thrust
        a_z = (vz - last_vz) / dt
        if not abs(a_z) <= self._a_jump:
            self._fault("velocity_jump", now)
            return
        f = self.filter
        f.predict(dt)
        c = self.cfg
        r22 = tick.r[8]
        height = tick.p[2] - self._floor
        w = m.weight
        mid, half = 0.5 * (lo_t + hi_t), 0.5 * (hi_t - lo_t)
        per_rotor = lo_t / self._n_rotors
        spread = max(self._spread)
        usable = (height >= c.min_height_m and r22 >= self._cos_tilt and lo_t >= c.min_thrust_fraction_of_weight * w
                  and hi_t <= c.max_thrust_fraction_of_max * m.max_total_thrust and half <= c.max_thrust_uncertainty_fraction * mid
                  and spread <= c.max_torque_spread_fraction * per_rotor
                  and (hi_t / self._n_rotors + spread) * self._n_rotors <= c.max_thrust_fraction_of_max * m.max_total_thrust)
        if usable:
            acc_half = half * r22 * m.g / f.hover_n
            f.fuse(a_z, mid * r22, dt, acc_half * acc_half, half / mid)
            self.samples_used += 1
        else:
            self.samples_skipped += 1
        offset = f.offset_detected
        if f.sigma_n < c.converged_sigma_n and not offset:
            if self._good_since is None:
                self._good_since = now
            if now - self._good_since >= c.converged_hold_s:
                self.converged = True
        else:
            self._good_since = None
            self.converged = False
        if self.converged:
            self.feedforward_n = f.hover_n
            self.ever_converged = True
            self.narrowed = c.use_in_stopping_model
            if c.use_in_stopping_model:
                lo_n, hi_n = self.bounds()
                m.set_hover_thrust(f.hover_n, lo_n, hi_n)
            else:
                m.set_hover_thrust(f.hover_n)
        elif self._narrowing and f.fused >= c.narrow_after_samples and not offset:
            self.narrowed = True  # converging: the bounds (wide while sigma is) already hold the airframe
            lo_n, hi_n = self.bounds()
            m.set_hover_thrust(self.feedforward_n, lo_n, hi_n)
        elif self.narrowed:  # back to the worst case (the feed-forward is unchanged)
            self.narrowed = False
            m.set_hover_thrust(self.feedforward_n)

    def bounds(self) -> tuple[float, float]:
        """The hover thrust's bounds the model may use, N: the estimate -+ (``bound_sigma`` standard deviations + the
        systematic error of the fused samples' thrust bands, ``bias_n``, + the ground effect's ``ground_effect_fraction``
        of it), within the airframe range."""
        f = self.filter
        d = self.cfg.bound_sigma * f.sigma_n + f.bias_n + self.ground_effect_fraction * f.hover_n
        lo, hi = f.hover_n - d, f.hover_n + d
        return (max(f.min_n, lo), min(f.max_n, hi))

    def status(self) -> tuple[int, str]:
        if self.converged:
            return OK, f"converged: hover thrust {self.filter.hover_n:.4f} N"
        if self.last_fault and self.ever_converged:  # an estimate lost to a fault
            return WARN, f"worst case (after {self.last_fault})"
        return OK, f"worst case ({'after ' + self.last_fault if self.last_fault else 'converging'})"

    def diagnostic(self, hardware_id: str) -> dict:
        d = super().diagnostic(hardware_id)
        f, m = self.filter, self.m
        lo, hi = self.bounds()
        v = d["values"]
        v["braking_on"] = ("estimate" if self.converged and self.cfg.use_in_stopping_model else
                           "estimate, converging (hover_thrust.narrow_after_samples)" if self.narrowed else
                           "worst case (the estimate feeds the backup only: hover_thrust.use_in_stopping_model false)"
                           if self.converged else
                           f"worst case ({'after ' + self.last_fault if self.last_fault else 'not converged'})")
        v["hover_thrust_n"] = f"{f.hover_n:.5f}"
        v["sigma_n"] = f"{f.sigma_n:.5f}"
        v["bound_low_n"] = f"{lo:.5f}"
        v["bound_high_n"] = f"{hi:.5f}"
        v["weak_fraction"] = f"{m.weak_fraction:.4f}"
        v["strong_fraction"] = f"{m.strong_fraction:.4f}"
        v["feedforward_mass_kg"] = f"{m.ff_mass:.5f}"
        v["samples_used"] = str(self.samples_used)
        v["samples_skipped"] = str(self.samples_skipped)
        v["gate_rejections"] = str(f.rejected)
        for name, n in self.fault_counts.items():
            v[f"faults.{name}"] = str(n)
        if self.last_fault:
            v["last_fault"] = self.last_fault
            v["last_fault.time_s"] = f"{self.last_fault_s:.3f}"
        return d

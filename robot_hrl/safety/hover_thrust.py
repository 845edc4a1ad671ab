"""A one-state Kalman filter on the hover thrust: what a vehicle's thrust command must be to hold its height.

The design is PX4's hover thrust estimator (PX4/PX4-Autopilot, ``src/modules/mc_hover_thrust_estimator``:
``zero_order_hover_thrust_ekf.hpp/.cpp`` and ``MulticopterHoverThrustEstimator.cpp``, M. Bresciani, 2020), written
here from its documented design, not from its code:

* the state is the hover thrust ``H`` (here in the command's own unit, N), constant up to a random walk
  (``predict``: ``P += q^2 dt``);
* the measurement is the vertical acceleration, modelled from the vertical component of the thrust the vehicle
  produced, ``a_z = g T_z / H - g``, with the Jacobian ``dh/dH = -g T_z / H^2`` (an extended Kalman update);
* a measurement whose normalized innovation squared exceeds ``gate^2`` is not fused (PX4's ``HTE_ACC_GATE``, 3
  standard deviations); when the low-passed signed test ratio says the innovations keep falling on one side (PX4:
  more than 0.2 after a 1 s low-pass) the state variance is bumped, so the filter can follow a changed vehicle;
* the acceleration noise variance is learned from the residuals (PX4, after Akhlaghi et al. 2017,
  "Adaptive adjustment of noise covariance in Kalman filter for dynamic state estimation"):
  ``R = (1 - a) R + a (r_unbiased^2 + H P H)`` with a 2 s forgetting time, bounded below by ``min_accel_var``;
* the estimate is bounded to ``[min_n, max_n]`` (PX4: ``MPC_THR_HOVER`` +- ``HTE_THR_RANGE``; here the airframe
  range the vehicle is designed for).

What PX4 does not have and a shield needs: a per-measurement extra variance (``extra_var``), so a caller that knows
the thrust only within a band (motors of unknown lag) can say how uncertain each sample's thrust is; a **bias
bound** (``bias_n``): a thrust known only within a band is a systematic error, not noise (the same motors lag the
same way sample after sample), so each fused sample's band (``thrust_bias_fraction``) enters the estimate's bound
with the weight the update gives that sample, ``bias <- (1 - kappa) bias + kappa f H`` (``kappa = K dh/dH``, the
share of the new estimate the sample makes up: in the linearized update the estimate is a weighted mean of the
prior and the samples' implied hover thrusts, each off by at most its band's fraction ``f``); and
:meth:`HoverThrustFilter.bounds` (the estimate +- k standard deviations, within the range). Plain floats; robot-neutral
(any vehicle whose vertical acceleration is its thrust over its mass minus gravity). The caller decides when a sample
is usable and when to start again (:meth:`reset`): robot_hrl/robots/quadrotor/shield/hover_thrust.py.
"""

from __future__ import annotations

import math

NOISE_LEARNING_TIME_S = 2.0
"""Forgetting time of the learned acceleration noise (PX4 ``_noise_learning_time_constant``, 2 s)."""
OFFSET_LPF_TIME_S = 1.0
"""Low-pass time of the residual and of the signed test ratio (PX4 ``_lpf_time_constant``, 1 s)."""
LARGE_OFFSET_RATIO = 0.2
"""The low-passed signed test ratio beyond which the innovations are taken to say the state is off (PX4, 0.2)."""
BUMP_FACTOR = 1e3
"""A detected offset adds this many seconds' worth of process variance (PX4 ``bumpStateVariance``: 1e3 q^2 dt)."""


class HoverThrustFilter:
    """One-state EKF on the hover thrust (see the module docstring). All quantities in SI; the thrust in the unit of
    the command the vehicle is given (a quadrotor: its collective thrust command, N)."""

    __slots__ = (
        "accel_var",
        "bias_n",
        "fused",
        "g",
        "gate",
        "hover_n",
        "init_accel_var",
        "innovation",
        "max_n",
        "min_accel_var",
        "min_n",
        "prior_n",
        "prior_sigma_n",
        "q",
        "ratio_lpf",
        "rejected",
        "residual_lpf",
        "test_ratio",
        "var",
    )

    def __init__(self, prior_n: float, prior_sigma_n: float, min_n: float, max_n: float, process_noise_n: float,
                 gate_sigma: float, min_accel_var: float, init_accel_var: float, gravity_mps2: float = 9.80665):
        if not (0.0 < min_n <= prior_n <= max_n):
            raise ValueError(f"the hover thrust prior {prior_n} must lie in [{min_n}, {max_n}] (and the range above 0)")
        self.g = gravity_mps2
        self.prior_n = prior_n
        self.prior_sigma_n = prior_sigma_n
        self.min_n = min_n
        self.max_n = max_n
        self.q = process_noise_n
        """Random-walk noise of the hover thrust, N/sqrt(s)."""
        self.gate = gate_sigma
        self.min_accel_var = min_accel_var
        self.init_accel_var = init_accel_var
        self.reset()

    def reset(self) -> None:
        """Back to the prior: the estimate at ``prior_n`` with its standard deviation ``prior_sigma_n``."""
        self.hover_n = self.prior_n
        self.var = self.prior_sigma_n * self.prior_sigma_n
        self.accel_var = self.init_accel_var
        self.residual_lpf = 0.0
        self.ratio_lpf = 0.0
        self.innovation = 0.0
        self.test_ratio = 0.0
        self.bias_n = 0.0
        """Bound on the estimate's systematic error from the fused samples' thrust bands, N (0 at the prior: its
        uncertainty is its standard deviation)."""
        self.fused = 0
        """Measurements fused since the last reset."""
        self.rejected = 0
        """Measurements refused by the innovation gate since the last reset."""

    @property
    def sigma_n(self) -> float:
        return math.sqrt(self.var)

    def predict(self, dt_s: float) -> None:
        """The hover thrust may drift: its variance grows by ``q^2 dt`` (capped at the prior's)."""
        var = self.var + self.q * self.q * dt_s
        cap = self.prior_sigma_n * self.prior_sigma_n
        self.var = min(cap, var)

    def fuse(self, accel_z_mps2: float, thrust_z_n: float, dt_s: float, extra_var: float = 0.0,
             thrust_bias_fraction: float = 0.0) -> bool:
        """Fuse one vertical acceleration (m/s^2, up) measured while the vertical thrust was ``thrust_z_n``;
        ``extra_var`` (m^2/s^4): this sample's own uncertainty on top of the learned noise (a thrust known only within
        a band); ``thrust_bias_fraction``: the most the thrust may be off as a fraction of ``thrust_z_n``, systematically
        (the band's half-width over its middle; it enters ``bias_n``). True when it passed the innovation gate and
        was fused."""
        g, h = self.g, self.hover_n
        jac = -g * thrust_z_n / (h * h)
        p = self.var
        r = self.accel_var + extra_var
        s = jac * p * jac + r
        innov = accel_z_mps2 - (g * thrust_z_n / h - g)
        ratio = innov * innov / (self.gate * self.gate * s)
        self.innovation = innov
        self.test_ratio = ratio
        residual = innov
        if ratio < 1.0:
            k = p * jac / s
            h = h + k * innov
            self.hover_n = self.min_n if h < self.min_n else min(h, self.max_n)
            kappa = k * jac  # in [0, 1): the sample's share of the new estimate
            self.bias_n = (1.0 - kappa) * self.bias_n + kappa * thrust_bias_fraction * self.hover_n
            var = (1.0 - k * jac) * p
            self.var = max(1e-12, var)
            residual = accel_z_mps2 - (g * thrust_z_n / self.hover_n - g)
            self.fused += 1
            passed = True
        else:
            self.rejected += 1
            passed = False
            if abs(self.ratio_lpf) > LARGE_OFFSET_RATIO:  # the innovations keep falling on one side: let it move
                self.var = min(self.var + BUMP_FACTOR * self.q * self.q * dt_s, self.prior_sigma_n * self.prior_sigma_n)
        a = dt_s / (OFFSET_LPF_TIME_S + dt_s)
        self.residual_lpf += a * (residual - self.residual_lpf)
        signed = math.copysign(min(ratio, 1.0), innov)
        self.ratio_lpf += a * (signed - self.ratio_lpf)
        b = dt_s / (NOISE_LEARNING_TIME_S + dt_s)
        unbiased = residual - self.residual_lpf
        jac = -g * thrust_z_n / (self.hover_n * self.hover_n)
        av = (1.0 - b) * self.accel_var + b * (unbiased * unbiased + jac * self.var * jac)
        self.accel_var = max(self.min_accel_var, av)
        return passed

    @property
    def offset_detected(self) -> bool:
        """The innovations keep falling on one side (the low-passed signed test ratio beyond 0.2): the estimate is off."""
        return abs(self.ratio_lpf) > LARGE_OFFSET_RATIO

    def bounds(self, k_sigma: float) -> tuple[float, float]:
        """(estimate - k sigma, estimate + k sigma), within ``[min_n, max_n]``."""
        d = k_sigma * math.sqrt(self.var)
        lo, hi = self.hover_n - d, self.hover_n + d
        return (max(self.min_n, lo), min(self.max_n, hi))

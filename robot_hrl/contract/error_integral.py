"""The leaky, clipped integral of the position error: the one stateful observation term (numpy, the runtime side).

A policy that sees only the current error settles where its thrust balances the weight it was trained on: a
heavier airframe or a sagging battery leaves a steady-state offset (issue 17: 38.8 mm at 36 g). This term gives
the policy integral action. Its definition, once (``ErrorIntegral`` in the contract carries the numbers):

    e_k   = subgoal_k - position_k                             the error the policy sees on tick k, m: world ENU
                                                               (frame world_enu), or rotated by R_z(-yaw_k) (yaw_flu)
    I_0   = 0                                                  on the first tick after a reset or a subgoal move
    I_k   = clip(exp(-dt / tau) I_{k-1} + dt g_{k-1} e_{k-1}, -L, L)   every other tick; dt = 1 / control rate
    g_k   = 1 if |subgoal_k - position_k| <= R else 0          the gate (conditional integration, R =
                                                               ``active_radius_m``: world distance); g = 1 without R

so the observation of tick k integrates the errors of the ticks before it. The gate keeps the approach free of the
integral: without it the 0.02 m s clip is reached within two ticks of a 1 m approach and the integral acts as a
sign(error) bias all the way in (issue 17: a point of strict success lost, mostly slow-motor episodes tipped over). The simulators keep I as a state row
(``sim/envs/layout.py`` ``task_state``; the torch step, its C twin), the generated Crazyflie controller as a
static (``deploy/crazyflie``); ``tests/test_error_integral_parity.py`` proves the three equal.
"""

from __future__ import annotations

import math

import numpy as np

from robot_hrl.contract.schema import ErrorIntegral

TERM_NAME = "position_error_integral"
"""The contract term (size 3, units m s, frame world_enu or yaw_flu: ``ErrorIntegral.frame``)."""

MIN_HEADING_NORM = 1e-3
"""Below this horizontal length of the body x axis (pointing within 0.06 deg of straight up or down) the yaw is
taken from it anyway, divided by this instead of its length: the error's horizontal part shrinks rather than becoming
NaN. Large against float32 rounding (~6e-8 on that length), so the float32 twins (torch, native and generated C) and
numpy agree there too: at 1e-6 the rounding alone turned the heading by 3 % at a pitch of exactly 90 deg (hypothesis,
tests/test_error_integral_parity.py)."""


def yaw_frame_error(position_w: np.ndarray, quat_wxyz: np.ndarray, subgoal_w: np.ndarray) -> np.ndarray:
    """Subgoal minus position rotated by minus the robot's yaw (x along the heading, z up), m; leading batch dims allowed."""
    ex = subgoal_w[..., 0] - position_w[..., 0]
    ey = subgoal_w[..., 1] - position_w[..., 1]
    ez = subgoal_w[..., 2] - position_w[..., 2]
    w, x, y, z = (quat_wxyz[..., i] for i in range(4))
    r00 = 1.0 - 2.0 * (y * y + z * z)  # the body x axis in the world (rotation_matrix_from_quat's first column)
    r10 = 2.0 * (x * y + w * z)
    h = np.maximum(np.sqrt(r00 * r00 + r10 * r10), MIN_HEADING_NORM)
    c, s = r00 / h, r10 / h
    return np.stack((c * ex + s * ey, -s * ex + c * ey, ez), axis=-1)


def frame_error(position_w: np.ndarray, quat_wxyz: np.ndarray, subgoal_w: np.ndarray, frame: str) -> np.ndarray:
    """Subgoal minus position in the integral's ``frame`` ('world_enu' or 'yaw_flu'), m."""
    if frame == "world_enu":
        return subgoal_w - position_w
    if frame == "yaw_flu":
        return yaw_frame_error(position_w, quat_wxyz, subgoal_w)
    raise ValueError(f"unknown error-integral frame {frame!r}; 'world_enu' or 'yaw_flu'")


def gated_error(error: np.ndarray, world_error: np.ndarray, spec: ErrorIntegral) -> np.ndarray:
    """``error`` where the world error's length is within ``spec.active_radius_m`` (or no radius is set), else zero."""
    if spec.active_radius_m is None:
        return error
    inside = np.sum(world_error * world_error, axis=-1) <= spec.active_radius_m * spec.active_radius_m
    return np.where(inside[..., None], error, 0.0)


def decay(spec: ErrorIntegral, control_rate_hz: float) -> float:
    """The factor the integral keeps per tick: exp(-dt / time_constant_s)."""
    return math.exp(-1.0 / (control_rate_hz * spec.time_constant_s))


def integral_step(integral: np.ndarray, previous_error: np.ndarray, spec: ErrorIntegral, control_rate_hz: float) -> np.ndarray:
    """One tick of the integral: decay, add dt times the previous tick's error, clip (anti-windup)."""
    value = decay(spec, control_rate_hz) * integral + previous_error / control_rate_hz
    return np.clip(value, -spec.limit_m_s, spec.limit_m_s)


class ErrorIntegrator:
    """The integral's state between the runtime's ticks (one robot): :meth:`update` each tick, :meth:`reset` at an
    episode start or a takeover. A subgoal move beyond ``spec.subgoal_change_m`` restarts it by itself."""

    def __init__(self, spec: ErrorIntegral, control_rate_hz: float):
        if not control_rate_hz > 0:
            raise ValueError(f"control_rate_hz must be > 0, got {control_rate_hz}")
        self.spec = spec
        self.control_rate_hz = float(control_rate_hz)
        self.value = np.zeros(3)
        """The integral of the latest tick, in ``spec.frame``, m s."""
        self._previous_error: np.ndarray | None = None
        self._subgoal: np.ndarray | None = None

    def reset(self) -> None:
        """The next :meth:`update` returns zero (a new episode, a takeover by the backup controller)."""
        self.value = np.zeros(3)
        self._previous_error = None
        self._subgoal = None

    def update(self, position_w: np.ndarray, quat_wxyz: np.ndarray, subgoal_w: np.ndarray) -> np.ndarray:
        """The integral for this tick's state and subgoal (and remember this tick's error for the next)."""
        subgoal = np.array(subgoal_w, dtype=np.float64)
        moved = self._subgoal is None or bool(np.any(np.abs(subgoal - self._subgoal) > self.spec.subgoal_change_m))
        if moved or self._previous_error is None:
            self.value = np.zeros(3)
        else:
            self.value = integral_step(self.value, self._previous_error, self.spec, self.control_rate_hz)
        self._subgoal = subgoal
        position = np.asarray(position_w, dtype=np.float64)
        error = frame_error(position, np.asarray(quat_wxyz, dtype=np.float64), subgoal, self.spec.frame)
        self._previous_error = gated_error(error, subgoal - position, self.spec)
        return self.value.copy()


def integral_terms(terms) -> list:
    """The contract's stateful terms (those with an ``integral``)."""
    return [t for t in terms if t.integral is not None]

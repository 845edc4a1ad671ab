"""The position error's leaky integral, torch twin of ``robot_hrl.contract.error_integral`` on columns.

The step (``step_core.physics_rows``) advances it once per control step from the error of the state the policy
saw (before the physics): ``I <- clip(decay I + dt e, -L, L)`` (e in the contract's frame: world ENU or yaw; zero
outside the contract's ``active_radius_m`` where it has one), zeroed where an episode ends (the reset's
observation shows zero). ``tests/test_error_integral_parity.py`` proves it equal to the numpy runtime's and the
generated C controller's.
"""

from __future__ import annotations

import torch

from robot_hrl.contract.error_integral import MIN_HEADING_NORM


def yaw_frame_error(position: tuple, quat: tuple, goal: tuple) -> tuple:
    """Goal minus position rotated by minus the yaw of ``quat`` (w, x, y, z): three columns, m."""
    ex, ey, ez = (g - p for g, p in zip(goal, position))
    w, x, y, z = quat
    r00 = 1.0 - 2.0 * (y * y + z * z)
    r10 = 2.0 * (x * y + w * z)
    h = (r00 * r00 + r10 * r10).sqrt().clamp(min=MIN_HEADING_NORM)
    c, s = r00 / h, r10 / h
    return c * ex + s * ey, -s * ex + c * ey, ez


def frame_error(position: tuple, quat: tuple, goal: tuple, yaw_frame: bool) -> tuple:
    """Goal minus position: world ENU, or (``yaw_frame``) rotated by minus the yaw of ``quat``."""
    return yaw_frame_error(position, quat, goal) if yaw_frame else tuple(g - p for g, p in zip(goal, position))


def integral_error(position: tuple, quat: tuple, goal: tuple, yaw_frame: bool, active_radius_sq_m2: float | None) -> tuple:
    """The error the integral adds this step: ``frame_error``, zero where the robot is farther from the goal than the
    contract's ``active_radius_m`` (``active_radius_sq_m2`` its square; None: no gate)."""
    error = frame_error(position, quat, goal, yaw_frame)
    if active_radius_sq_m2 is None:
        return error
    inside = sum((g - p) * (g - p) for g, p in zip(goal, position)) <= active_radius_sq_m2
    return tuple(torch.where(inside, e, 0.0) for e in error)


def integral_step(integral: tuple, error: tuple, decay: float, dt_s: float, limit_m_s: float) -> tuple:
    """One control step of the integral on (N,) columns."""
    return tuple((decay * i + dt_s * e).clamp(-limit_m_s, limit_m_s) for i, e in zip(integral, error))

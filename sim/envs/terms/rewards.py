"""Reward terms: pure functions of the environment state, weighted by RewardsCfg."""

from __future__ import annotations

import torch


def position_tanh(distance: torch.Tensor, scale_m: float) -> torch.Tensor:
    """1 at the goal, falling to 0 with distance: 1 - tanh(d / scale)."""
    return 1.0 - torch.tanh(distance / scale_m)


def velocity_l2(linear_velocity_w: torch.Tensor) -> torch.Tensor:
    """Squared speed (m/s)^2."""
    return linear_velocity_w.square().sum(dim=-1)


def angular_velocity_l2(angular_velocity_b: torch.Tensor) -> torch.Tensor:
    """Squared body rate (rad/s)^2."""
    return angular_velocity_b.square().sum(dim=-1)


def tilt(rotation_r22: torch.Tensor) -> torch.Tensor:
    """1 - cos(tilt): 0 level, 2 upside down."""
    return 1.0 - rotation_r22


def action_rate_l2(actions: torch.Tensor, last_actions: torch.Tensor) -> torch.Tensor:
    """Squared change of the normalized action between control steps."""
    return (actions - last_actions).square().sum(dim=-1)


def termination(terminated: torch.Tensor) -> torch.Tensor:
    """1 on the step an episode ends by crash or leaving the bounds."""
    return terminated.float()

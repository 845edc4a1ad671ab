"""Termination terms: pure functions returning (N,) bool tensors."""

from __future__ import annotations

import torch


def ground_contact(position_w: torch.Tensor, contact_height_m: float) -> torch.Tensor:
    """The airframe touches the floor."""
    return position_w[:, 2] <= contact_height_m


def out_of_bounds(position_w: torch.Tensor, goal_w: torch.Tensor, max_distance_m: float, ceiling_m: float) -> torch.Tensor:
    """Too far from the goal, or above the ceiling."""
    far = torch.linalg.vector_norm(position_w - goal_w, dim=-1) > max_distance_m
    return far | (position_w[:, 2] > ceiling_m)


def non_finite_state(*tensors: torch.Tensor) -> torch.Tensor:
    """Any NaN or inf in the state (cannot happen with finite actions; a guard for the env's callers)."""
    bad = torch.zeros(tensors[0].shape[0], dtype=torch.bool, device=tensors[0].device)
    for t in tensors:
        bad |= ~torch.isfinite(t).all(dim=-1)
    return bad


def time_out(episode_length: torch.Tensor, max_episode_length: int) -> torch.Tensor:
    """The episode reached its time limit."""
    return episode_length >= max_episode_length


def success(distance_m: torch.Tensor, speed_mps: torch.Tensor, position_tolerance_m: float, speed_tolerance_mps: float) -> torch.Tensor:
    """Within tolerance of the goal and slow enough (judged at the episode end)."""
    return (distance_m < position_tolerance_m) & (speed_mps < speed_tolerance_mps)

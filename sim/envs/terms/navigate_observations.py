"""Observation terms of the ``navigate`` level, torch (twins of ``robot_hrl.contract.navigate``'s numpy terms,
same names and input keys; tests/test_navigate_env.py proves they agree)."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from robot_hrl.errors import ObservationError

Inputs = dict[str, torch.Tensor]


def yaw_from_quat(q: torch.Tensor) -> torch.Tensor:
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def world_to_yaw(v: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack((c * v[..., 0] + s * v[..., 1], -s * v[..., 0] + c * v[..., 1]), dim=-1)


def yaw_to_world(v: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack((c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]), dim=-1)


def goal_yaw(x: Inputs) -> torch.Tensor:
    return world_to_yaw(x["goal_w"] - x["position_w"], yaw_from_quat(x["quat_wxyz"]))


def ranges_m(x: Inputs) -> torch.Tensor:
    return x["ranges_m"]


def velocity_yaw(x: Inputs) -> torch.Tensor:
    v = x["linear_velocity_w"]
    return torch.cat((world_to_yaw(v, yaw_from_quat(x["quat_wxyz"])), v[..., 2:3]), dim=-1)


def last_subgoal_yaw(x: Inputs) -> torch.Tensor:
    return world_to_yaw(x["last_subgoal_w"] - x["position_w"], yaw_from_quat(x["quat_wxyz"]))


def range_memory_yaw(x: Inputs) -> torch.Tensor:
    """The memory's sectors (sim/envs/terms/navigate_memory.py), read by the environment that keeps the memory."""
    return x["range_memory_yaw"]


def trail_yaw(x: Inputs) -> torch.Tensor:
    """The trail's sectors (a TorchRangeMemory of earlier positions), read by the environment that keeps it."""
    return x["trail_yaw"]


NAVIGATE_TERMS: dict[str, Callable[[Inputs], torch.Tensor]] = {
    f.__name__: f for f in (goal_yaw, ranges_m, velocity_yaw, last_subgoal_yaw, range_memory_yaw, trail_yaw)
}


def compute_navigate_observation(terms: Sequence, inputs: Inputs) -> torch.Tensor:
    parts = []
    for term in terms:
        fn = NAVIGATE_TERMS.get(term.name)
        if fn is None:
            raise ObservationError(f"the navigate contract asks for term {term.name!r}, which the torch simulator does not "
                                   f"implement (known: {sorted(NAVIGATE_TERMS)}); add its twin here")
        parts.append(fn(inputs).clamp(term.clip[0], term.clip[1]))
    return torch.cat(parts, dim=-1)

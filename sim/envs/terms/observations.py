"""Observation terms, torch implementation (the simulator side).

Twins of ``robot_hrl.contract.observations`` with the SAME names and the same input keys
(position_w, quat_wxyz, linear_velocity_w, angular_velocity_b, subgoal_w, last_action, and the stateful
position_error_integral, which ``sim/envs/terms/error_integral.py`` advances);
``tests/test_observation_parity.py`` proves they agree with the numpy terms.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from robot_hrl.contract.schema import ObservationTerm
from robot_hrl.errors import ObservationError
from sim.envs.math_utils import rotation_matrix_from_quat

ObservationInputs = dict[str, torch.Tensor]


def subgoal_error_w(x: ObservationInputs) -> torch.Tensor:
    """Subgoal minus position, world ENU, m."""
    return x["subgoal_w"] - x["position_w"]


def rotation_matrix_wb(x: ObservationInputs) -> torch.Tensor:
    """Body-to-world rotation matrix, row-major (9)."""
    r = rotation_matrix_from_quat(x["quat_wxyz"])
    return r.reshape(r.shape[:-2] + (9,))


def linear_velocity_w(x: ObservationInputs) -> torch.Tensor:
    """Linear velocity, world ENU, m/s."""
    return x["linear_velocity_w"]


def angular_velocity_b(x: ObservationInputs) -> torch.Tensor:
    """Body rates, body FLU, rad/s."""
    return x["angular_velocity_b"]


def last_action(x: ObservationInputs) -> torch.Tensor:
    """The policy's previous normalized output, in [-1, 1]."""
    return x["last_action"]


def position_error_integral(x: ObservationInputs) -> torch.Tensor:
    """The leaky integral of the position error, yaw frame, m s: the step's state row (``error_integral.integral_step``)."""
    return x["position_error_integral"]


OBSERVATION_TERMS: dict[str, Callable[[ObservationInputs], torch.Tensor]] = {
    fn.__name__: fn for fn in (subgoal_error_w, rotation_matrix_wb, linear_velocity_w, angular_velocity_b, last_action,
                               position_error_integral)
}


# ---- structure-of-arrays twins (the compiled step): inputs and outputs are tuples of (N,) tensors
SoAInputs = dict[str, tuple]


def _subgoal_error_w_soa(x: SoAInputs) -> tuple:
    return tuple(g - p for g, p in zip(x["subgoal_w"], x["position_w"]))


def _rotation_matrix_wb_soa(x: SoAInputs) -> tuple:
    w, qx, qy, qz = x["quat_wxyz"]  # math_utils.rotation_matrix_from_quat, row-major
    return (
        1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - w * qz), 2 * (qx * qz + w * qy),
        2 * (qx * qy + w * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - w * qx),
        2 * (qx * qz - w * qy), 2 * (qy * qz + w * qx), 1 - 2 * (qx * qx + qy * qy),
    )


SOA_OBSERVATION_TERMS: dict[str, Callable[[SoAInputs], tuple]] = {
    "subgoal_error_w": _subgoal_error_w_soa,
    "rotation_matrix_wb": _rotation_matrix_wb_soa,
    "linear_velocity_w": lambda x: tuple(x["linear_velocity_w"]),
    "angular_velocity_b": lambda x: tuple(x["angular_velocity_b"]),
    "last_action": lambda x: tuple(x["last_action"]),
    "position_error_integral": lambda x: tuple(x["position_error_integral"]),
}
"""The same terms as ``OBSERVATION_TERMS``, component by component (tests/test_sim_compiled.py checks they agree)."""


def check_terms(terms: Sequence[ObservationTerm]) -> None:
    """Raise if the contract names a term the simulator does not implement."""
    for term in terms:
        if term.name not in OBSERVATION_TERMS:
            raise ObservationError(
                f"the contract asks for observation term {term.name!r}, which the torch simulator does not "
                f"implement (known: {sorted(OBSERVATION_TERMS)}); add its twin to sim/envs/terms/observations.py"
            )


def compute_observation(
    terms: Sequence[ObservationTerm],
    inputs: ObservationInputs,
    noise_std: dict[str, float] | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Concatenate the contract's terms in order; Gaussian noise (if any) is added before clipping."""
    parts = []
    for term in terms:
        value = OBSERVATION_TERMS[term.name](inputs)
        std = 0.0 if noise_std is None else float(noise_std.get(term.name, 0.0))
        if std > 0.0:
            value = value + std * torch.randn(value.shape, generator=generator, device=value.device, dtype=value.dtype)
        parts.append(value.clamp(term.clip[0], term.clip[1]))
    return torch.cat(parts, dim=-1)

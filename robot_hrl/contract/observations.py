"""Observation terms, numpy implementation (the runtime side).

Each term is a small pure function of (state, subgoal, last action). Inputs may carry
leading batch dimensions. The simulator has a torch twin of every term
(``sim/envs/terms/observations.py``); ``tests/test_observation_parity.py`` proves they agree.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from robot_hrl.errors import ObservationError
from robot_hrl.geometry import rotation_matrix_from_quat

ObservationInputs = dict[str, np.ndarray]
"""Keys: position_w, quat_wxyz, linear_velocity_w, angular_velocity_b, subgoal_w, last_action."""


def subgoal_error_w(x: ObservationInputs) -> np.ndarray:
    """Subgoal minus position, world ENU, m."""
    return x["subgoal_w"] - x["position_w"]


def rotation_matrix_wb(x: ObservationInputs) -> np.ndarray:
    """Body-to-world rotation matrix, row-major (9). Free of the quaternion sign ambiguity."""
    r = rotation_matrix_from_quat(x["quat_wxyz"])
    return r.reshape(r.shape[:-2] + (9,))


def linear_velocity_w(x: ObservationInputs) -> np.ndarray:
    """Linear velocity, world ENU, m/s."""
    return x["linear_velocity_w"]


def angular_velocity_b(x: ObservationInputs) -> np.ndarray:
    """Body rates, body FLU, rad/s (what the gyro measures)."""
    return x["angular_velocity_b"]


def last_action(x: ObservationInputs) -> np.ndarray:
    """The policy's previous normalized output, in [-1, 1]."""
    return x["last_action"]


OBSERVATION_TERMS: dict[str, Callable[[ObservationInputs], np.ndarray]] = {
    fn.__name__: fn for fn in (subgoal_error_w, rotation_matrix_wb, linear_velocity_w, angular_velocity_b, last_action)
}


def compute_observation(terms, inputs: ObservationInputs) -> np.ndarray:
    """Concatenate the contract's terms in order, each clipped to its range; float32.

    ``terms`` is a sequence of :class:`robot_hrl.contract.schema.ObservationTerm`.
    """
    parts = []
    for term in terms:
        fn = OBSERVATION_TERMS.get(term.name)
        if fn is None:
            raise ObservationError(
                f"the contract asks for observation term {term.name!r}, which this runtime does not "
                f"implement (known: {sorted(OBSERVATION_TERMS)}); update robot_hrl"
            )
        value = np.asarray(fn(inputs), dtype=np.float64)
        if value.shape[-1] != term.size:
            raise ObservationError(f"observation term {term.name!r} has size {value.shape[-1]}, contract says {term.size}")
        parts.append(np.clip(value, term.clip[0], term.clip[1]))
    obs = np.concatenate(parts, axis=-1).astype(np.float32)
    if not np.all(np.isfinite(obs)):
        raise ObservationError("the observation is not finite (NaN or inf in the state or subgoal); the command is withheld")
    return obs

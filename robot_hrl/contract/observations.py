"""Observation terms, numpy implementation (the runtime side).

Each term is a small pure function of (state, subgoal, last action). Inputs may carry
leading batch dimensions. The simulator has a torch twin of every term
(``sim/envs/terms/observations.py``); ``tests/test_observation_parity.py`` proves they agree.

``OBSERVATION_TERMS`` are the terms of a rigid body's state (any robot with a ``RobotState``).
A robot registers the terms its contracts may use (``robot.observation_terms()``: these, or its
own); :func:`compute_observation` resolves a contract's term names in that registry.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from robot_hrl.errors import ObservationError
from robot_hrl.geometry import rotation_matrix_from_quat

ObservationInputs = dict[str, np.ndarray]
"""Keys: position_w, quat_wxyz, linear_velocity_w, angular_velocity_b, subgoal_w, last_action (and
position_error_integral where the contract observes it)."""


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


def position_error_integral(x: ObservationInputs) -> np.ndarray:
    """The leaky integral of the position error, yaw frame, m s: a state the caller keeps
    (``robot_hrl.contract.error_integral.ErrorIntegrator``; ``OnnxPolicy`` does) and passes in."""
    value = x.get("position_error_integral")
    if value is None:
        raise ObservationError("the contract observes position_error_integral, a state the caller keeps: update a "
                               "robot_hrl.contract.error_integral.ErrorIntegrator every tick and pass its value under that key "
                               "(OnnxPolicy.step does this)")
    return value


OBSERVATION_TERMS: dict[str, Callable[[ObservationInputs], np.ndarray]] = {
    fn.__name__: fn for fn in (subgoal_error_w, rotation_matrix_wb, linear_velocity_w, angular_velocity_b, last_action,
                               position_error_integral)
}


ObservationRegistry = dict[str, Callable[[ObservationInputs], np.ndarray]]


class _CompiledTerms:
    """The term functions and the stacked clip bounds of one contract, resolved once."""

    def __init__(self, terms, registry: ObservationRegistry):
        self.terms = tuple(terms)  # keeps the key's object alive while cached
        self.registry = registry
        self.functions = []
        for term in self.terms:
            fn = registry.get(term.name)
            if fn is None:
                raise ObservationError(
                    f"the contract asks for observation term {term.name!r}, which this runtime does not "
                    f"implement for the robot (known: {sorted(registry)}); update robot_hrl"
                )
            self.functions.append(fn)
        self.sizes = [term.size for term in self.terms]
        self.low = np.concatenate([np.full(t.size, t.clip[0]) for t in self.terms])
        self.high = np.concatenate([np.full(t.size, t.clip[1]) for t in self.terms])


_COMPILED: dict[tuple[int, int], _CompiledTerms] = {}


def _compiled(terms, registry: ObservationRegistry) -> _CompiledTerms:
    key = (id(terms), id(registry))
    compiled = _COMPILED.get(key)
    if compiled is None or compiled.registry is not registry or compiled.terms is not terms and compiled.terms != tuple(terms):
        compiled = _COMPILED[key] = _CompiledTerms(terms, registry)
    return compiled


def compute_observation(terms, inputs: ObservationInputs, registry: ObservationRegistry | None = None) -> np.ndarray:
    """Concatenate the contract's terms in order, each clipped to its range; float32.

    ``terms`` is a sequence of :class:`robot_hrl.contract.schema.ObservationTerm`, resolved in
    ``registry`` (the robot's ``observation_terms()``; None: :data:`OBSERVATION_TERMS`). The term
    functions and the clip bounds are resolved once per contract (this runs every tick).
    """
    compiled = _compiled(terms, OBSERVATION_TERMS if registry is None else registry)
    parts = [fn(inputs) for fn in compiled.functions]
    obs = np.concatenate(parts, axis=-1)
    if obs.shape[-1] != compiled.low.shape[0]:  # one check per tick; name the culprit only on failure
        for part, size, term in zip(parts, compiled.sizes, compiled.terms):
            if np.shape(part)[-1] != size:
                raise ObservationError(f"observation term {term.name!r} has size {np.shape(part)[-1]}, contract says {size}")
    obs = np.minimum(np.maximum(obs, compiled.low), compiled.high).astype(np.float32)
    if not math.isfinite(obs.sum()):
        raise ObservationError("the observation is not finite (NaN or inf in the state or subgoal); the command is withheld")
    return obs

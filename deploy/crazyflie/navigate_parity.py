"""The generated navigate level against the Python level it was generated from, on sequences of readings and poses.

A sequence is a float32 array, one row per call: ``[op, position_w (3), quat_wxyz (4), ranges_m (S), velocity_w (3),
goal_w (3)]`` with ``op`` one of :data:`OP_RESET`, :data:`OP_SENSE`, :data:`OP_DECIDE`. The reference runs it through
:class:`robot_hrl.planning.learned.LearnedNavigator` (numpy memory, the contract's observation, onnxruntime, the
contract's action mapping: the planner node's code); the C runs it through ``navReset`` / ``navSense`` /
``navDecide`` (host gcc here, the Cortex-M4 build under QEMU in deploy/crazyflie/qemu_navigate.py). Both get the
same float32 inputs (as the C gets them onboard), the Python computes in float64. Each row gives
``[ok, subgoal_w (3), observation (n)]`` (NaN where the row gives none).

A recurrent level (its contract's ``recurrent``) carries a state from one decision to the next and starts from zeros
at a reset and at every new goal: its sequences hold several decisions toward one goal, then another
(``random_sequence(..., goals=3)``), so a state that drifted or a reset that differed moves the later subgoals.
:func:`network_parity` compares the network alone, the state fed back over steps.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from robot_hrl.errors import ObservationError
from robot_hrl.sensing.range import RangeSensorSpec

OP_RESET, OP_SENSE, OP_DECIDE = 0.0, 1.0, 2.0


def row_size(n_rangers: int) -> int:
    return 1 + 3 + 4 + n_rangers + 3 + 3


def split_row(row: np.ndarray, n_rangers: int):
    """(op, position, quaternion, ranges, velocity, goal) of one row, float64 (the float32 values)."""
    r = np.asarray(row, dtype=np.float64)
    s = n_rangers
    return int(r[0]), r[1:4], r[4:8], r[8:8 + s], r[8 + s:11 + s], r[11 + s:14 + s]


def random_sequence(rng: np.random.Generator, sensors: Sequence[RangeSensorSpec], decisions: int = 40,
                    room_half_m: float = 5.0, goals: int = 1) -> np.ndarray:
    """A random but valid episode: reset, then a robot that wanders (steps up to 0.6 m, yaw drifting and
    sometimes turning fast, tilted a little), its rangers reading within their limits (some at the limits:
    max range is no target, as the planner node converts a ROS reading), 1-3 readings before each decision,
    ``goals`` goals one after the other (each for an equal share of the decisions; no reset between them: a
    recurrent level's state starts again from zeros at each). ``goals=1`` draws exactly what it always drew."""
    if not 1 <= goals <= decisions:
        raise ValueError(f"goals={goals}: give 1 to decisions ({decisions}) goals per episode")
    s = len(sensors)
    lo = np.array([x.min_range_m for x in sensors])
    hi = np.array([x.max_range_m for x in sensors])
    rows = [np.r_[OP_RESET, np.zeros(row_size(s) - 1)]]
    pos = np.r_[rng.uniform(-room_half_m, room_half_m, 2), rng.uniform(0.3, 2.0)]
    yaw = rng.uniform(-math.pi, math.pi)
    goal = np.r_[rng.uniform(-room_half_m, room_half_m, 2), 1.0]
    changes = {-(-j * decisions // goals) for j in range(1, goals)}  # the first decision toward each later goal
    for k in range(decisions):
        if k in changes:
            goal = np.r_[rng.uniform(-room_half_m, room_half_m, 2), 1.0]
        for _ in range(int(rng.integers(1, 4))):
            pos = pos + np.r_[rng.uniform(-0.6, 0.6, 2), rng.uniform(-0.05, 0.05)]
            yaw += rng.normal(0.0, 0.2) if rng.random() < 0.8 else rng.uniform(-math.pi, math.pi)
            tilt = rng.normal(0.0, 0.05, 2)
            q = np.array([math.cos(yaw / 2), tilt[0], tilt[1], math.sin(yaw / 2)])
            q /= np.linalg.norm(q)
            ranges = rng.uniform(lo, hi)
            ranges = np.where(rng.random(s) < 0.25, hi, ranges)   # no target
            ranges = np.where(rng.random(s) < 0.03, lo, ranges)   # at the minimum
            vel = rng.normal(0.0, 1.0, 3)
            rows.append(np.r_[OP_SENSE, pos, q, ranges, vel, goal])
        rows.append(np.r_[OP_DECIDE, pos, q, ranges, vel, goal])
    return np.asarray(rows, dtype=np.float32)


def run_python(navigator, sequence: np.ndarray) -> np.ndarray:
    """The reference: ``navigator`` (a LearnedNavigator) through the sequence."""
    s = len(navigator.sensors)
    n_obs = navigator.contract.observation_size
    out = np.full((len(sequence), 4 + n_obs), np.nan)
    for k, row in enumerate(sequence):
        op, p, q, r, v, g = split_row(row, s)
        if op == OP_RESET:
            navigator.reset()
            out[k, 0] = 1.0
        elif op == OP_SENSE:
            try:
                navigator.sense(p, q, r)
                out[k, 0] = 1.0
            except ObservationError:
                out[k, 0] = 0.0
        else:
            try:
                obs = navigator.observation(p, q, v, g)
                out[k, 1:4] = navigator.decide(p, q, v, g)
                out[k, 4:] = obs
                out[k, 0] = 1.0
            except ObservationError:
                out[k, 0] = 0.0
    return out


def run_host(host_navigator, sequence: np.ndarray) -> np.ndarray:
    """The generated C (host build, :class:`deploy.crazyflie.host_navigate.HostNavigator`) through the sequence."""
    s, n_obs = host_navigator.n_rangers, host_navigator.n_obs
    out = np.full((len(sequence), 4 + n_obs), np.nan)
    for k, row in enumerate(sequence):
        op, p, q, r, v, g = split_row(row, s)
        if op == OP_RESET:
            host_navigator.reset()
            out[k, 0] = 1.0
        elif op == OP_SENSE:
            out[k, 0] = float(host_navigator.sense(p, q, r))
        else:
            obs, ok = host_navigator.observation(p, q, v, g)
            sg, ok2 = host_navigator.decide(p, q, v, g)
            out[k, 0] = float(ok and ok2)
            if ok and ok2:
                out[k, 1:4], out[k, 4:] = sg, obs
    return out


def network_parity(host_navigator, act, observations: np.ndarray, steps: int = 8) -> float:
    """max |C - reference| of the network alone on ``observations`` (n, n_obs): ``host_navigator.forward`` against
    ``act`` (a LearnedNavigator's: onnxruntime). A recurrent level: the rows as ``steps`` consecutive decisions of
    n // steps parallel streams from zeros, each step's state fed back to both; the states are compared too."""
    x = np.asarray(observations, dtype=np.float32)
    if not host_navigator.state_size:
        return float(np.max(np.abs(host_navigator.forward(x) - act(x))))
    batch = len(x) // steps
    if batch < 1:
        raise ValueError(f"{len(x)} observations make no {steps} steps of a stream; give at least {steps}")
    h_c = h_ref = np.zeros((1, batch, host_navigator.state_size), np.float32)
    err = 0.0
    for xs in x[:steps * batch].reshape(steps, batch, -1):
        out_c, h_c = host_navigator.forward(xs, h_c)
        out_ref, h_ref = act(xs, h_ref)
        err = max(err, float(np.max(np.abs(out_c - out_ref))), float(np.max(np.abs(h_c - h_ref))))
    return err


def compare(reference: np.ndarray, c: np.ndarray) -> tuple[float, float, int]:
    """(max |subgoal C - Python| in m, max |observation C - Python|, rows whose accept/refuse differ)."""
    disagree = int(np.sum(reference[:, 0] != c[:, 0]))
    both = (reference[:, 0] == 1.0) & (c[:, 0] == 1.0) & np.isfinite(reference[:, 1])
    if not both.any():
        return 0.0, 0.0, disagree
    return (float(np.max(np.abs(reference[both, 1:4] - c[both, 1:4]))),
            float(np.max(np.abs(reference[both, 4:] - c[both, 4:]))), disagree)


def onnxruntime_navigator(level, weights: str | None = None):
    """A LearnedNavigator of a generated level (its contract and rangers) acting through onnxruntime on its file, with
    the weights the C stores (``level.weights``; or ``weights``): ``float16`` runs the file's copy whose weights went
    through the generator's rounding (deploy/crazyflie/float16.py), the network the C computes; ``float32`` the file."""
    import onnxruntime as ort

    from deploy.crazyflie.float16 import float16_reference_onnx
    from robot_hrl.planning.learned import LearnedNavigator, session_act

    weights = weights or level.weights
    source = float16_reference_onnx(level.model_path) if weights == "float16" else str(level.model_path)
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return LearnedNavigator(level.contract, level.sensors, session_act(session, level.contract, level.model_path))

"""The torch twins (simulator) agree with the numpy terms (runtime) within 1e-6; the actuator chain on torch columns with numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robot_hrl.contract import (
    GOTO_OBSERVATION_TERMS,
    OBSERVATION_TERMS,
    actions_to_wrench,
    compute_observation,
)
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.robots.quadrotor import quadrotor_action_spec
from robot_hrl.robots.crazyflie_2x import actuators
from sim.envs.array_ops import TORCH
from sim.envs.step_core import normalized_to_command
from sim.envs.terms import observations as torch_terms

N = 512


def _random_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    q = rng.normal(size=(N, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return {
        "position_w": rng.uniform(-3, 3, size=(N, 3)),
        "quat_wxyz": q,
        "linear_velocity_w": rng.uniform(-7, 7, size=(N, 3)),  # beyond the clip range on purpose
        "angular_velocity_b": rng.uniform(-50, 50, size=(N, 3)),
        "subgoal_w": rng.uniform(-3, 3, size=(N, 3)),
        "last_action": rng.uniform(-1.2, 1.2, size=(N, 4)),
        "position_error_integral": rng.uniform(-0.2, 0.2, size=(N, 3)),  # the stateful term's value (its own parity test)
    }


def _to_torch(x: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in x.items()}


def test_same_term_names_in_both_implementations():
    assert set(torch_terms.OBSERVATION_TERMS) == set(OBSERVATION_TERMS)
    for term in GOTO_OBSERVATION_TERMS:
        assert term.name in torch_terms.OBSERVATION_TERMS


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_term_matches_numpy(seed):
    x = _random_inputs(np.random.default_rng(seed))
    xt = _to_torch(x)
    for name, fn in OBSERVATION_TERMS.items():
        expected = np.asarray(fn(x))
        got = torch_terms.OBSERVATION_TERMS[name](xt).numpy()
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0, err_msg=name)


@pytest.mark.parametrize("seed", [3, 4])
def test_full_clipped_observation_matches_numpy_float32(seed):
    x = _random_inputs(np.random.default_rng(seed))
    expected = compute_observation(GOTO_OBSERVATION_TERMS, x)
    xt = {k: torch.tensor(v, dtype=torch.float32) for k, v in x.items()}
    got = torch_terms.compute_observation(GOTO_OBSERVATION_TERMS, xt).numpy()
    assert got.shape == expected.shape == (N, 22)
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)


def test_env_observation_matches_numpy_on_its_own_state():
    from sim.envs import GotoEnv, GotoEnvCfg

    cfg = GotoEnvCfg()
    cfg.randomization.enabled = False  # no noise: the policy group is the exact contract observation
    env = GotoEnv(cfg, num_envs=64, seed=0)
    for _ in range(5):
        obs, *_ = env.step(torch.rand(64, 4) * 2 - 1)
    inputs = {"position_w": env.position_w, "quat_wxyz": env.quat_wxyz, "linear_velocity_w": env.linear_velocity_w,
              "angular_velocity_b": env.angular_velocity_b, "subgoal_w": env.goal_w, "last_action": env.last_action}
    expected = compute_observation(env.contract.observations, {k: v.double().numpy() for k, v in inputs.items()})
    np.testing.assert_allclose(obs["policy"].numpy(), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_action_to_wrench_matches_contract(seed):
    """The step's action mapping (step_core.normalized_to_command, on columns) against the contract's."""
    spec = quadrotor_action_spec(CRAZYFLIE_2X)
    low, high = (tuple(float(getattr(t, end)) for t in spec.terms) for end in ("low", "high"))
    a = np.random.default_rng(seed).uniform(-1.5, 1.5, size=(N, 4))
    expected = actions_to_wrench(spec, a)
    got = torch.stack(normalized_to_command(tuple(torch.tensor(a.T)), low, high), dim=-1).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("seed", [0, 1])
def test_mixer_on_torch_columns_matches_numpy(seed):
    """The actuator chain's mixer and cap (one source) on torch columns (float64, and float32 as the step runs it)
    against numpy arrays."""
    spec = quadrotor_action_spec(CRAZYFLIE_2X)
    k = actuators.constants(CRAZYFLIE_2X)
    a = np.random.default_rng(seed).uniform(-1, 1, size=(N, 4))
    a[:8] = np.sign(a[:8])  # saturated corners exercise powerDistributionCap
    wrench = actions_to_wrench(spec, a)
    expected = actuators.mix_wrench_to_rotor_thrusts(CRAZYFLIE_2X, wrench)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 3e-5)):  # (float32: the cubic's closed-form inverse)
        got = torch.stack(actuators.mixed_rotor_thrusts(tuple(torch.tensor(wrench.T, dtype=dtype)), k, TORCH), dim=-1)
        np.testing.assert_allclose(got.double().numpy(), expected, atol=tol, rtol=0)

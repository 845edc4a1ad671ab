"""sim/agents/fast_elu.py: the C ELU of the training networks against torch's, built with the real compiler."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from sim.agents.fast_elu import FastELU, use_fast_elu


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ROBOT_HRL_CACHE", str(tmp_path_factory.getbasetemp() / "robot_hrl_cache"))


def _inputs(n: int) -> torch.Tensor:
    x = torch.randn(n, 64, generator=torch.Generator().manual_seed(0)) * 4
    x[0, :6] = torch.tensor([0.0, -0.0, -100.0, 100.0, float("inf"), -float("inf")])
    x[1, 0] = float("nan")
    return x


@pytest.mark.parametrize("rows, threads", [(64, 1), (2048, 2), (2048, 1)])  # 2048 x 64 takes the two-thread path
def test_forward_and_backward_match_torch(rows, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = _inputs(rows).requires_grad_()
        grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
        expected = torch.nn.functional.elu(x)
        (expected_grad,) = torch.autograd.grad(expected, x, grad)
        got = FastELU()(x)
        (got_grad,) = torch.autograd.grad(got, x, grad)
    finally:
        torch.set_num_threads(before)
    assert torch.allclose(got, expected, atol=1e-6, rtol=1e-6, equal_nan=True)
    finite = torch.isfinite(x)  # (d/dx at +-inf: torch gives 1 and 0, as here; NaN gives NaN in both)
    assert torch.allclose(got_grad[finite], expected_grad[finite], atol=1e-6, rtol=1e-6)
    assert torch.isnan(got[1, 0]) and got[0, 4] == float("inf") and got[0, 5] == -1.0


def test_gradcheck():
    x = torch.randn(40, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: FastELU()(t.float()).double(), (x,), eps=1e-3, atol=2e-3, rtol=2e-3)


def test_other_inputs_fall_back_to_torch():
    elu = FastELU()
    x64 = torch.randn(8, 5, dtype=torch.float64)
    strided = torch.randn(5, 8).t()
    assert elu(x64).dtype == torch.float64 and torch.equal(elu(x64), torch.nn.functional.elu(x64))
    assert torch.equal(elu(strided), torch.nn.functional.elu(strided))


def test_use_fast_elu_swaps_rsl_rl_networks_without_changing_them():
    from rsl_rl.runners import OnPolicyRunner

    from sim.tasks import default_agent_cfg, make_env

    env = make_env("crazyflie-goto", num_envs=8, device="cpu", cfg=None, seed=0)
    with contextlib.redirect_stdout(io.StringIO()):
        runner = OnPolicyRunner(env, default_agent_cfg("crazyflie-goto"), log_dir=None, device="cpu")
    obs = env.get_observations()
    actor, critic = runner.alg.actor, runner.alg.critic
    keys = (list(actor.state_dict()), list(critic.state_dict()))
    with torch.inference_mode():
        before = (actor(obs, stochastic_output=False), critic(obs))
    # rsl_rl's MLP puts one activation object under two names: both must go
    assert use_fast_elu(actor) == 2 and use_fast_elu(critic) == 2
    assert not any(type(m) is torch.nn.ELU for m in list(actor.modules()) + list(critic.modules()))
    assert (list(actor.state_dict()), list(critic.state_dict())) == keys  # checkpoints load into the plain networks
    with torch.inference_mode():
        after = (actor(obs, stochastic_output=False), critic(obs))
    for b, a in zip(before, after):
        assert torch.allclose(a, b, atol=1e-6)

"""A manager-based Isaac Lab task (Isaac-Cartpole) through the same adapter and evaluator as the direct one:
its per-episode success found from its own reward term (isaaclab.envs.mdp.survival_success_rate) and checked
against the figure that term logs, the generic evaluator on it, and what a policy contract would be generated
from (observation and action managers, control rate), read from the live env."""

from __future__ import annotations

import math

import pytest

from tests.isaaclab_helpers import requires_isaaclab, use_stand_in_assets

pytestmark = [pytest.mark.isaaclab, requires_isaaclab]
use_stand_in_assets()

TASK = "Isaac-Cartpole"
NUM_ENVS = 32
EPISODE_S = 1.0


@pytest.fixture(scope="module")
def env():
    from sim.tasks import make_env

    wrapped = make_env(TASK, num_envs=NUM_ENVS, device="cpu", cfg={"episode_length_s": EPISODE_S}, seed=11)
    yield wrapped
    wrapped.close()


def _pushes(steps: int, seed: int):
    import torch

    generator = torch.Generator().manual_seed(seed)
    bias = torch.linspace(-0.6, 0.6, NUM_ENVS).unsqueeze(-1)
    for _ in range(steps):
        yield bias + 0.1 * torch.randn(NUM_ENVS, 1, generator=generator)


def test_success_comes_from_the_tasks_survival_term_and_agrees_with_its_log(env):
    assert env.success is not None and env.success.name == "time-out (survival)"
    env.reset()
    kinds = set()
    for actions in _pushes(int(1.3 * env.max_episode_length), seed=0):
        _, _, dones, extras = env.step(actions)
        done = dones.bool()
        if done.any():
            success = extras["episode_end"]["success"][done]
            assert success.float().mean().item() == pytest.approx(float(extras["log"]["Metrics/success_rate"]), abs=1e-6)
            kinds |= set(success.tolist())
    assert kinds == {True, False}


def test_generic_evaluator_on_a_manager_based_task(env):
    from sim.isaaclab_adapter.evaluator import evaluate_isaaclab

    pushes = _pushes(10 * int(env.max_episode_length), seed=1)
    result = evaluate_isaaclab(env, lambda obs: next(pushes), NUM_ENVS)
    assert result["num_episodes"] == NUM_ENVS and not result["stopped_early"]
    assert 0.0 < result["time_out_rate"] < 1.0 and result["success_rate"] == result["time_out_rate"]
    assert result["mean_episode_length_steps"] <= env.max_episode_length
    assert math.isfinite(result["mean_return"]) and result["logged_success_episodes"] >= NUM_ENVS


def test_what_a_contract_would_be_generated_from(env):
    """The facts sim/isaaclab_adapter's notes (/work/notes/isaaclab_notes.md) tell the contract's next engineer."""
    u = env.unwrapped
    observations = u.observation_manager
    assert observations.active_terms["policy"] == ["joint_pos_rel", "joint_vel_rel"]
    assert observations.group_obs_term_dim["policy"] == [(2,), (2,)]
    assert observations.group_obs_concatenate["policy"]
    term_cfg = observations._group_obs_term_cfgs["policy"][0]
    assert term_cfg.scale is None and term_cfg.clip is None and term_cfg.history_length == 0
    actions = u.action_manager
    assert actions.active_terms == ["joint_effort"] and actions.total_action_dim == 1
    effort = actions.get_term("joint_effort")
    assert list(effort._joint_names) == ["slider_to_cart"]
    assert float(effort._scale) == 100.0 and float(effort._offset) == 0.0  # cartpole_manager_env_cfg.py: scale=100.0
    assert list(u.scene["robot"].joint_names) == ["slider_to_cart", "cart_to_pole"]  # obs order: the articulation's
    assert 1.0 / (u.cfg.sim.dt * u.cfg.decimation) == pytest.approx(60.0)  # control rate: 120 Hz physics / 2

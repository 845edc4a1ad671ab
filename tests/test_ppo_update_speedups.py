"""sim/agents/update_speedups.py: the same mini-batches and the same Adam step as rsl-rl-lib, cheaper."""

from __future__ import annotations

import contextlib
import copy
import io
import types

import pytest
import torch
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.storage.rollout_storage import RolloutStorage

from sim.agents import ppo_goto_cfg
from sim.agents.update_speedups import install_permuted_mini_batches, use_fused_adam
from sim.tasks import make_env


def _runner(num_envs: int = 16, steps: int = 4, cfg_edit=None):
    torch.manual_seed(0)
    env = make_env("crazyflie-goto", num_envs=num_envs, device="cpu", seed=0)
    cfg = ppo_goto_cfg()
    cfg["num_steps_per_env"] = steps
    cfg["algorithm"]["num_mini_batches"] = 4
    if cfg_edit:
        cfg_edit(cfg)
    with contextlib.redirect_stdout(io.StringIO()):
        runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    return env, runner


def _fill_rollout(env, runner):
    alg = runner.alg
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(runner.cfg["num_steps_per_env"]):
            obs, rewards, dones, extras = env.step(alg.act(obs))
            alg.process_env_step(obs, rewards, dones, extras)
        alg.compute_returns(obs)


def _batch_tensors(batch) -> list[torch.Tensor]:
    return [batch.observations["policy"], batch.observations["critic"], batch.actions, batch.values, batch.advantages,
            batch.returns, batch.old_actions_log_prob, *batch.old_distribution_params]


def test_permuted_mini_batches_are_rsl_rls_mini_batches():
    env, runner = _runner()
    _fill_rollout(env, runner)
    storage = runner.alg.storage
    torch.manual_seed(7)
    reference = [_batch_tensors(b) for b in RolloutStorage.mini_batch_generator(storage, 4, 2)]
    assert install_permuted_mini_batches(runner.alg)
    torch.manual_seed(7)
    ours = [_batch_tensors(b) for b in storage.mini_batch_generator(4, 2)]
    assert len(ours) == len(reference) == 8
    for got, want in zip(ours, reference):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and torch.equal(g, w)
    # the observations stay a TensorDict of the mini-batch size, as PPO.update reads them
    batch = next(storage.mini_batch_generator(4, 1))
    assert batch.observations.batch_size[0] == 16 * 4 // 4


def test_recurrent_models_keep_rsl_rls_generator():
    env, runner = _runner()
    runner.alg.actor.is_recurrent = True
    assert not install_permuted_mini_batches(runner.alg)
    assert runner.alg.storage.mini_batch_generator.__func__ is RolloutStorage.mini_batch_generator


def test_fused_adam_takes_the_same_step_as_adam():
    env, runner = _runner()
    _fill_rollout(env, runner)
    alg = runner.alg
    plain = copy.deepcopy(alg)
    assert use_fused_adam(alg)
    assert alg.optimizer.defaults["fused"] and type(alg.optimizer) is torch.optim.Adam
    assert alg.optimizer.param_groups[0]["lr"] == plain.optimizer.param_groups[0]["lr"]
    params = list(alg.actor.parameters()) + list(alg.critic.parameters())
    assert [id(p) for g in alg.optimizer.param_groups for p in g["params"]] == [id(p) for p in params]
    for a in (alg, plain):
        torch.manual_seed(3)
        a.update()
    for p, q in zip(params, list(plain.actor.parameters()) + list(plain.critic.parameters())):
        assert torch.allclose(p, q, atol=1e-5, rtol=1e-4)
    assert not use_fused_adam(alg), "a fused Adam is left as it is"


def test_fused_adam_checkpoints_round_trip(tmp_path):
    env, runner = _runner()
    use_fused_adam(runner.alg)
    _fill_rollout(env, runner)
    runner.alg.update()
    path = tmp_path / "model.pt"
    runner.save(str(path))
    env2, runner2 = _runner()
    use_fused_adam(runner2.alg)
    runner2.load(str(path))
    state, state2 = runner.alg.optimizer.state_dict(), runner2.alg.optimizer.state_dict()
    assert state2["param_groups"][0]["fused"]
    for k, v in state["state"].items():
        assert torch.equal(v["exp_avg"], state2["state"][k]["exp_avg"])


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_other_optimizers_are_left_alone(name):
    env, runner = _runner(cfg_edit=lambda cfg: cfg["algorithm"].__setitem__("optimizer", name))
    before = runner.alg.optimizer
    assert not use_fused_adam(runner.alg)
    assert runner.alg.optimizer is before


def test_train_uses_both(monkeypatch, tmp_path):
    """sim/train.py applies both to the runner it builds."""
    from sim import train
    from sim.agents.runner import TrainingRunner

    seen = {}
    real_learn = TrainingRunner.learn

    def spy(runner, *args, **kwargs):
        seen["fused"] = runner.alg.optimizer.defaults.get("fused")
        seen["generator"] = isinstance(runner.alg.storage.mini_batch_generator, types.MethodType) and (
            runner.alg.storage.mini_batch_generator.__func__.__name__ == "permuted_mini_batch_generator")
        return real_learn(runner, *args, **kwargs)

    monkeypatch.setattr(TrainingRunner, "learn", spy)
    assert train.main(["--num-envs", "16", "--max-iterations", "1", "--eval-episodes", "4", "--no-progress",
                       "--run-dir", str(tmp_path / "run")]) == 0
    assert seen == {"fused": True, "generator": True}

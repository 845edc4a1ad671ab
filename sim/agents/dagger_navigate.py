"""DAgger pre-training of the ``navigate`` actor from the privileged geodesic expert (sim/navigate_expert.py).

Ross, Gordon and Bagnell, "A Reduction of Imitation Learning and Structured Prediction to No-Regret Online
Learning" (AISTATS 2011): each iteration rolls the environment out with the expert's action with
probability ``beta`` and the student's otherwise (``beta`` decays to 0), labels every visited state with
the expert's action, aggregates the labelled states, and fits the student to all of them. The student is
the rsl_rl actor PPO then fine-tunes (sim/train_navigate.py), so it sees only the contract's observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict


@dataclass
class DaggerCfg:
    iterations: int = 30
    steps_per_env: int = 24
    """Decisions per environment and iteration."""
    beta_decay_iterations: int = 8
    """beta falls linearly from 1 (pure expert) to 0 over these iterations (0: the student from the start)."""
    epochs: int = 4
    minibatch: int = 4096
    learning_rate: float = 1.0e-3
    dataset_size: int = 600_000
    """Aggregated samples kept (the oldest are dropped)."""
    finetune_std: float = 0.2
    """The actor's action noise after pre-training (PPO explores around the imitated policy, not from 0.6)."""


def run_dagger(env, actor, expert, cfg: DaggerCfg, writer=None, progress=None, on_iteration=None, should_stop=None) -> dict:
    """Pre-train ``actor`` (rsl_rl MLPModel) on ``env`` (NavigateEnv) from ``expert`` (GeodesicExpert);
    ``on_iteration(it)`` after each iteration (the trainer saves a checkpoint: a run stopped early keeps its work);
    ``should_stop()`` true ends the pre-training after the current iteration (the trainer's wall-time budget)."""
    opt = torch.optim.Adam(actor.mlp.parameters(), lr=cfg.learning_rate)
    data_obs: list[torch.Tensor] = []
    data_act: list[torch.Tensor] = []
    obs = env.get_observations()
    successes: list[float] = []
    loss_value = float("nan")
    done, x = 0, torch.zeros(0)
    for it in range(cfg.iterations):
        if should_stop is not None and should_stop():
            break
        beta = max(0.0, 1.0 - it / cfg.beta_decay_iterations) if cfg.beta_decay_iterations > 0 else 0.0
        for _ in range(cfg.steps_per_env):
            low = env.low
            label = expert(env.room, low.position_w, low.quat_wxyz, env.goal_w, env.subgoal_w[:, :2])
            actor.update_normalization(obs)
            with torch.no_grad():
                student = actor(obs)
            data_obs.append(obs["policy"].clone())
            data_act.append(label)
            mix = torch.rand(env.num_envs, 1) < beta
            obs, _, dones, extras = env.step(torch.where(mix, label, student))
            ended = dones.bool()
            if ended.any():
                successes.extend(extras["episode_end"]["success"][ended].float().tolist())
        x, y = torch.cat(data_obs), torch.cat(data_act)
        if len(x) > cfg.dataset_size:
            x, y = x[-cfg.dataset_size:], y[-cfg.dataset_size:]
            data_obs, data_act = [x], [y]
        for _ in range(cfg.epochs):
            perm = torch.randperm(len(x))
            for k in range(0, len(x), cfg.minibatch):
                idx = perm[k:k + cfg.minibatch]
                pred = actor(TensorDict({"policy": x[idx]}, batch_size=[len(idx)]))
                loss = torch.nn.functional.mse_loss(pred, y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                loss_value = float(loss.detach())
        recent = successes[-400:]
        rate = sum(recent) / len(recent) if recent else float("nan")
        if writer is not None:
            writer.add_scalar("dagger/loss", loss_value, it)
            writer.add_scalar("dagger/beta", beta, it)
            writer.add_scalar("dagger/success_rate_window", rate, it)
            writer.add_scalar("dagger/level", env.level, it)
            writer.add_scalar("dagger/dataset", len(x), it)
        done = it + 1
        if on_iteration is not None:
            on_iteration(it)
        if progress is not None:
            progress.update(1)
            progress.set_postfix(loss=f"{loss_value:.3f}", success=f"{rate:.2f}", level=env.level, beta=f"{beta:.2f}")
    std = getattr(getattr(actor, "distribution", None), "std_param", None)
    if std is not None and cfg.finetune_std > 0:
        with torch.no_grad():
            std.fill_(cfg.finetune_std)
    recent = successes[-400:]
    return {"iterations": done, "samples": int(len(x)), "final_loss": loss_value,
            "success_rate_window": sum(recent) / len(recent) if recent else None, "level": env.level}

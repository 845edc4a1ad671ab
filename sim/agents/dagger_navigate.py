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
    near_weight: float = 0.0
    """Loss weighting of near-obstacle decisions: a labelled state whose robot is ``near_m`` or closer to an obstacle
    (the room's ground truth, ``expert.clearance_m``) weighs up to 1 + this in the fit (linearly, from ``near_m`` to
    the robot's collision radius); 0: every state weighs 1 (plain MSE). Collisions come from the few decisions taken
    close to an obstacle, which an unweighted fit averages away."""
    near_m: float = 0.8
    """Clearance (robot centre to surface, m) under which a state's weight rises."""
    checkpoint_every: int = 0
    """``on_checkpoint(it)`` every this many iterations (the trainer keeps a copy to choose from); 0: never."""


def near_obstacle_weight(clearance_m: torch.Tensor, cfg: DaggerCfg, radius_m: float) -> torch.Tensor:
    """(N,) the fit's weight of each state: 1, rising linearly to 1 + ``near_weight`` from ``near_m`` to ``radius_m``."""
    closeness = ((cfg.near_m - clearance_m) / max(cfg.near_m - radius_m, 1e-6)).clamp(0.0, 1.0)
    return 1.0 + cfg.near_weight * closeness


def fit_student(actor, opt, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, cfg: DaggerCfg) -> float:
    """``cfg.epochs`` passes of weighted MSE over the aggregated set (observations ``x``, expert actions ``y``,
    weights ``w`` with mean 1: all ones is the plain MSE); the last minibatch's loss."""
    loss_value = float("nan")
    for _ in range(cfg.epochs):
        perm = torch.randperm(len(x))
        for k in range(0, len(x), cfg.minibatch):
            idx = perm[k:k + cfg.minibatch]
            pred = actor(TensorDict({"policy": x[idx]}, batch_size=[len(idx)]))
            loss = (((pred - y[idx]) ** 2).mean(-1) * w[idx]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_value = float(loss.detach())
    return loss_value


def fit_student_sequences(actor, opt, chunks: list[dict], cfg: DaggerCfg) -> float:
    """The recurrent student's fit: ``cfg.epochs`` passes of weighted MSE through time over the aggregated chunks
    (each a rollout of ``steps_per_env`` decisions: ``obs`` [T, N, D], ``act`` [T, N, 2], ``w`` [T, N], ``dones``
    [T, N], ``h0`` the student's state before it), minibatches of whole trajectories; the last minibatch's loss."""
    obs = torch.cat([c["obs"] for c in chunks], dim=1)
    act = torch.cat([c["act"] for c in chunks], dim=1)
    w = torch.cat([c["w"] for c in chunks], dim=1)
    w = w / w.mean()
    dones = torch.cat([c["dones"] for c in chunks], dim=1)
    h0 = torch.cat([c["h0"] for c in chunks], dim=1)
    per_batch = max(1, cfg.minibatch // obs.shape[0])  # trajectories per minibatch: about cfg.minibatch decisions
    loss_value = float("nan")
    for _ in range(cfg.epochs):
        perm = torch.randperm(obs.shape[1])
        for k in range(0, len(perm), per_batch):
            idx = perm[k:k + per_batch]
            pred = actor.sequence_output(obs[:, idx], h0[:, idx], dones[:, idx])
            loss = (((pred - act[:, idx]) ** 2).mean(-1) * w[:, idx]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_value = float(loss.detach())
    return loss_value


def run_dagger(env, actor, expert, cfg: DaggerCfg, writer=None, progress=None, on_iteration=None, should_stop=None,
               on_checkpoint=None) -> dict:
    """Pre-train ``actor`` (rsl_rl MLPModel) on ``env`` (NavigateEnv) from ``expert`` (GeodesicExpert);
    ``on_iteration(it)`` after each iteration (the trainer saves a checkpoint: a run stopped early keeps its work);
    ``should_stop()`` true ends the pre-training after the current iteration (the trainer's wall-time budget)."""
    recurrent = bool(getattr(actor, "is_recurrent", False))
    params = list(actor.mlp.parameters()) + (list(actor.rnn.parameters()) if recurrent else [])
    opt = torch.optim.Adam(params, lr=cfg.learning_rate)
    chunks: list[dict] = []  # (recurrent: whole rollouts, the fit runs through time)
    if recurrent:
        actor.reset()
    data_obs: list[torch.Tensor] = []
    data_act: list[torch.Tensor] = []
    data_w: list[torch.Tensor] = []
    obs = env.get_observations()
    successes: list[float] = []
    loss_value = float("nan")
    done, samples = 0, 0
    for it in range(cfg.iterations):
        if should_stop is not None and should_stop():
            break
        beta = max(0.0, 1.0 - it / cfg.beta_decay_iterations) if cfg.beta_decay_iterations > 0 else 0.0
        first, chunk_dones = len(data_obs), []
        if recurrent:
            state = actor.get_hidden_state()
            h0 = (torch.zeros(actor.rnn.rnn.num_layers, env.num_envs, actor.rnn.rnn.hidden_size) if state is None
                  else state.detach().clone())
        for _ in range(cfg.steps_per_env):
            low = env.low
            label = expert(env.room, low.position_w, low.quat_wxyz, env.goal_w, env.subgoal_w[:, :2])
            actor.update_normalization(obs)
            with torch.no_grad():
                student = actor(obs)
            data_obs.append(obs["policy"].clone())
            data_act.append(label)
            if cfg.near_weight > 0:
                clearance = expert.clearance_m(env.room, low.position_w[:, None, :2], low.position_w[:, 2])[:, 0]
                data_w.append(near_obstacle_weight(clearance, cfg, float(env.robot.collision_radius_m)))
            else:
                data_w.append(torch.ones(env.num_envs))
            mix = torch.rand(env.num_envs, 1) < beta
            obs, _, dones, extras = env.step(torch.where(mix, label, student))
            if recurrent:
                actor.reset(dones)  # (a done environment's next decision starts a new flight from zeros)
                chunk_dones.append(dones.bool().clone())
            ended = dones.bool()
            if ended.any():
                successes.extend(extras["episode_end"]["success"][ended].float().tolist())
        if recurrent:
            chunks.append({"obs": torch.stack(data_obs[first:]), "act": torch.stack(data_act[first:]),
                           "w": torch.stack(data_w[first:]), "dones": torch.stack(chunk_dones), "h0": h0})
            del data_obs[first:], data_act[first:], data_w[first:]
            while len(chunks) > 1 and sum(c["w"].numel() for c in chunks) > cfg.dataset_size:
                chunks.pop(0)
            w = torch.cat([c["w"].reshape(-1) for c in chunks])
            samples = len(w)
            hidden = actor.get_hidden_state()
            loss_value = fit_student_sequences(actor, opt, chunks, cfg)
            actor.reset(None, None if hidden is None else hidden.detach())  # (acting goes on from where it was)
        else:
            x, y, w = torch.cat(data_obs), torch.cat(data_act), torch.cat(data_w)
            if len(x) > cfg.dataset_size:
                x, y, w = x[-cfg.dataset_size:], y[-cfg.dataset_size:], w[-cfg.dataset_size:]
                data_obs, data_act, data_w = [x], [y], [w]
            w = w / w.mean()  # the weighted fit keeps the plain fit's scale
            samples = len(x)
            loss_value = fit_student(actor, opt, x, y, w, cfg)
        recent = successes[-400:]
        rate = sum(recent) / len(recent) if recent else float("nan")
        if writer is not None:
            writer.add_scalar("dagger/loss", loss_value, it)
            writer.add_scalar("dagger/beta", beta, it)
            writer.add_scalar("dagger/success_rate_window", rate, it)
            writer.add_scalar("dagger/level", env.level, it)
            writer.add_scalar("dagger/dataset", samples, it)
            writer.add_scalar("dagger/near_share", float((w > w.min() + 1e-6).float().mean()), it)
        done = it + 1
        if on_iteration is not None:
            on_iteration(it)
        if on_checkpoint is not None and cfg.checkpoint_every > 0 and done % cfg.checkpoint_every == 0:
            on_checkpoint(done)
        if progress is not None:
            progress.update(1)
            progress.set_postfix(loss=f"{loss_value:.3f}", success=f"{rate:.2f}", level=env.level, beta=f"{beta:.2f}")
    std = getattr(getattr(actor, "distribution", None), "std_param", None)
    if std is not None and cfg.finetune_std > 0:
        with torch.no_grad():
            std.fill_(cfg.finetune_std)
    recent = successes[-400:]
    return {"iterations": done, "samples": int(samples), "final_loss": loss_value,
            "success_rate_window": sum(recent) / len(recent) if recent else None, "level": env.level}

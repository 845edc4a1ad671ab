"""Whole-episode evaluation of a policy on any Isaac Lab task.

``evaluate_isaaclab(env, policy, num_episodes)`` resets the env (an :class:`IsaacLabVecEnv`),
steps it with ``policy`` (TensorDict of observation groups -> actions, e.g. rsl_rl's
``runner.get_inference_policy()``), and collects each environment's first ``episode_quota``
episodes (``sim.evaluation.episode_quota``: fixed before the run, so the short failing episodes
that end first do not crowd out the long ones). Per episode: the return (sum of the task's
rewards, the step that ended it included), the length, whether it ended by time-out, and success
where the task defines it per episode (``success.py``). At the end the env is reset again, so a
trainer that evaluates on its training env continues from fresh episodes.

Reported: ``num_episodes``, ``mean_return``, ``median_return``, ``std_return``,
``mean_episode_length_steps``, ``mean_episode_length_s``, ``time_out_rate``, ``stopped_early``;
with a per-episode success also ``success_rate`` and ``success_source``; for every floating-point
entry ``k`` of the task's own ``extras["episode_end"]``, ``mean_k`` over the episodes; when the task logs
``extras["log"]["Metrics/success_rate"]`` (a mean over the envs reset in a step) also
``logged_success_rate``: that figure weighted by the resets, over every episode that ended during
the evaluation (``logged_success_episodes``), quota or not.

``stop_below=X`` (needs a per-episode success) ends the evaluation once more than
``num_episodes * (1 - X)`` episodes failed, as ``sim.evaluation.evaluate`` does.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from robot_hrl.errors import ConfigError
from sim.evaluation import episode_quota

LOGGED_SUCCESS_KEY = "Metrics/success_rate"
"""Where Isaac Lab 3.0 tasks log their success (e.g. ``isaaclab.envs.mdp.survival_success_rate``)."""


def _validate(env, num_episodes, stop_below) -> None:
    if not isinstance(num_episodes, int) or isinstance(num_episodes, bool) or num_episodes < 1:
        raise ConfigError(f"num_episodes must be a positive integer, got {num_episodes!r}")
    if stop_below is not None:
        if not 0.0 <= stop_below <= 1.0:
            raise ConfigError(f"stop_below must be in [0, 1], got {stop_below!r}")
        if getattr(env, "success", None) is None:
            raise ConfigError(
                f"{getattr(env, 'task', 'this task')} defines no per-episode success (see sim/isaaclab_adapter/success.py), "
                "so an evaluation cannot stop below a success rate; drop --target-success"
            )


@torch.inference_mode()
def evaluate_isaaclab(
    env, policy: Callable, num_episodes: int, progress: bool = False, stop_below: float | None = None
) -> dict:
    """Run ``num_episodes`` whole episodes of ``env`` under ``policy``; see the module docstring for the result."""
    _validate(env, num_episodes, stop_below)
    n = env.num_envs
    device = env.device
    quota = episode_quota(num_episodes, n).to(device)
    count = torch.zeros(n, dtype=torch.long, device=device)
    episode_return = torch.zeros(n, dtype=torch.float64, device=device)
    episode_length = torch.zeros(n, dtype=torch.long, device=device)
    collected: dict[str, list[torch.Tensor]] = {"return": [], "length": [], "time_out": [], "success": []}
    has_success = getattr(env, "success", None) is not None
    max_failures = math.inf if stop_below is None else num_episodes - stop_below * num_episodes + 1e-9
    failures = 0
    logged_sum = 0.0
    logged_episodes = 0
    stopped_early = False
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=num_episodes, desc="evaluate", unit="ep", leave=False)
    obs, _ = env.reset()  # Isaac Lab's wrapper returns (observations, extras)
    max_steps = math.ceil(num_episodes / n) * int(env.max_episode_length) + 1
    for _ in range(max_steps):
        obs, rewards, dones, extras = env.step(policy(obs))
        episode_return += rewards.to(torch.float64)
        episode_length += 1
        done = dones.bool()
        if bool(done.any()):
            ended = int(done.sum())
            log = extras.get("log") or {}
            if LOGGED_SUCCESS_KEY in log:  # written by this step's reset: the mean over exactly these envs
                logged_sum += float(log[LOGGED_SUCCESS_KEY]) * ended
                logged_episodes += ended
            take = done & (count < quota)
            if bool(take.any()):
                idx = take.nonzero(as_tuple=False).squeeze(-1)
                collected["return"].append(episode_return[idx].cpu())
                collected["length"].append(episode_length[idx].cpu())
                collected["time_out"].append(env.unwrapped.reset_time_outs[idx].bool().cpu())
                for key, value in (extras.get("episode_end") or {}).items():  # the task's own per-episode figures
                    if torch.is_tensor(value) and value.is_floating_point() and value.shape[:1] == done.shape:
                        collected.setdefault(f"mean_{key}", []).append(value[idx].double().cpu())
                if has_success:
                    success = extras["episode_end"]["success"][idx].bool().cpu()
                    collected["success"].append(success)
                    failures += int(idx.numel()) - int(success.sum())
                count[idx] += 1
                if bar is not None:
                    bar.update(int(idx.numel()))
            episode_return[done] = 0.0
            episode_length[done] = 0
        if bool((count >= quota).all()):
            break
        if failures > max_failures:
            stopped_early = True
            break
    if bar is not None:
        bar.close()
    env.reset()  # fresh episodes for whatever steps this env next (the trainer, when it evaluates on its env)
    data = {k: torch.cat(v) if v else torch.zeros(0) for k, v in collected.items()}
    m = int(data["return"].numel())
    if m == 0:
        raise RuntimeError(f"no episode of {getattr(env, 'task', 'the task')} ended within {max_steps} steps; is max_episode_length set?")
    returns = data["return"]
    result = {
        "task": getattr(env, "task", None),
        "stopped_early": stopped_early,
        "num_episodes": m,
        "mean_return": float(returns.mean()),
        "median_return": float(returns.median()),
        "std_return": float(returns.std(unbiased=False)),
        "mean_episode_length_steps": float(data["length"].double().mean()),
        "mean_episode_length_s": float(data["length"].double().mean()) * float(env.step_dt),
        "time_out_rate": int(data["time_out"].count_nonzero()) / m,
    }
    if stopped_early:
        result["success_rate_at_most"] = (num_episodes - failures) / num_episodes
        result["episodes_planned"] = num_episodes
    if has_success:
        result["success_rate"] = int(data["success"].count_nonzero()) / m
        result["success_source"] = env.success.name
    for key in sorted(k for k in data if k.startswith("mean_") and data[k].numel() == m):
        result[key] = float(data[key].mean())  # e.g. the Crazyflie task's mean_final_position_error_m
    if logged_episodes:
        result["logged_success_rate"] = logged_sum / logged_episodes
        result["logged_success_episodes"] = logged_episodes
    return result


def summary(result: dict) -> str:
    """One line for the end of training."""
    text = (
        f"return {result['mean_return']:.3f} (median {result['median_return']:.3f}, std {result['std_return']:.3f}), "
        f"episode length {result['mean_episode_length_s']:.2f} s, time-outs {result['time_out_rate']:.3f}"
    )
    if "success_rate" in result:
        text += f", success {result['success_rate']:.3f} ({result['success_source']})"
    return text + f" over {result['num_episodes']} episodes"

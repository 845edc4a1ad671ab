"""Whole-episode evaluation of a policy in a batched environment.

``evaluate(env, act_fn, num_episodes)`` resets the environment, then steps it; each
environment contributes a fixed number of its first finished episodes (``episode_quota``), so
every episode runs from a fresh start state to its end (crash, out of bounds or time-out).
The quotas are fixed before the run, not filled first come first served: the episodes that
end first are the crashes, and keeping whichever finished first would bias the result.
``act_fn`` maps the ``policy`` observation tensor (num_envs, 22) to actions (num_envs, 4).

``stop_below=X`` ends the evaluation as soon as so many episodes have failed that the success
rate over all ``num_episodes`` can no longer reach X: the answer to "does it reach X?" is then
known exactly, and ``sim/train.py --target-success`` spends no more simulation on it.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from robot_hrl.errors import ConfigError


@torch.inference_mode()
def evaluate(
    env, act_fn: Callable[[torch.Tensor], torch.Tensor], num_episodes: int, progress: bool = False, stop_below: float | None = None,
) -> dict:
    """Run ``num_episodes`` whole episodes; return success_rate, crash_rate, mean_final_position_error_m,
    rms_tracking_error_m, out_of_bounds_rate, mean_final_speed_mps, mean_episode_length_s, num_episodes.

    With ``stop_below`` in [0, 1], stop once more than ``num_episodes * (1 - stop_below)`` episodes
    have failed; the result then has ``stopped_early: True``, ``success_rate_at_most`` (the best
    success rate the whole evaluation could still have had, below ``stop_below``), and the other
    rates over the ``num_episodes`` episodes that did end (the early failures: not an estimate
    of the policy's rates). Without an early stop, ``stopped_early`` is False.
    """
    if not isinstance(num_episodes, int) or isinstance(num_episodes, bool) or num_episodes < 1:
        raise ConfigError(f"num_episodes must be a positive integer, got {num_episodes!r}")
    if stop_below is not None and not 0.0 <= stop_below <= 1.0:
        raise ConfigError(f"stop_below must be in [0, 1], got {stop_below!r}")
    # more failures than this and the success rate over num_episodes is below stop_below
    max_failures = math.inf if stop_below is None else num_episodes - stop_below * num_episodes + 1e-9
    failures = 0
    stopped_early = False
    n = env.num_envs
    quota = episode_quota(num_episodes, n).to(env.device)
    rounds = math.ceil(num_episodes / n)
    keys = ("success", "crashed", "out_of_bounds", "final_position_error_m", "final_speed_mps", "rms_position_error_m", "episode_length")
    collected: dict[str, list[torch.Tensor]] = {k: [] for k in keys}
    total = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=num_episodes, desc="evaluate", unit="ep", leave=False)
    obs = env.reset()["policy"]
    count = torch.zeros(n, dtype=torch.long, device=env.device)
    max_steps = rounds * int(env.max_episode_length) + 1
    for _ in range(max_steps):
        actions = act_fn(obs)
        out, _, dones, extras = env.step(actions)
        obs = out["policy"]
        end = extras["episode_end"]
        take = dones.bool() & (count < quota)
        if take.any():
            idx = take.nonzero(as_tuple=False).squeeze(-1)
            for k in keys:
                collected[k].append(end[k][idx].detach().float().cpu())
            count[idx] += 1
            total += int(idx.numel())
            failures += int(idx.numel()) - int(end["success"][idx].sum())
            if bar is not None:
                bar.update(min(int(idx.numel()), max(0, num_episodes - bar.n)))
        if bool((count >= quota).all()):
            break
        if failures > max_failures:
            stopped_early = True
            break
    if bar is not None:
        bar.close()
    data = {k: torch.cat(v) if v else torch.zeros(0) for k, v in collected.items()}
    m = int(data["success"].numel())
    if m == 0:
        raise RuntimeError("no episode finished during evaluation; is env.max_episode_length set?")
    step_dt = float(getattr(env, "step_dt", 0.0)) or 1.0
    early = {"success_rate_at_most": (num_episodes - failures) / num_episodes, "episodes_planned": num_episodes} if stopped_early else {}
    return {
        "stopped_early": stopped_early,
        **early,
        "num_episodes": m,
        # rates as exact fractions of counts: a float32 mean makes 950 of 1000 0.94999999 < 0.95
        "success_rate": _fraction(data["success"]),
        "crash_rate": _fraction(data["crashed"]),
        "out_of_bounds_rate": _fraction(data["out_of_bounds"]),
        "mean_final_position_error_m": float(data["final_position_error_m"].mean()),
        "median_final_position_error_m": float(data["final_position_error_m"].median()),
        "mean_final_speed_mps": float(data["final_speed_mps"].mean()),
        "rms_tracking_error_m": float(data["rms_position_error_m"].square().mean().sqrt()),
        "mean_episode_length_s": float(data["episode_length"].mean()) * step_dt,
    }


def _fraction(flags: torch.Tensor) -> float:
    """The fraction of non-zero entries, computed from integer counts."""
    return int(flags.count_nonzero()) / int(flags.numel())


def episode_quota(num_episodes: int, num_envs: int) -> torch.Tensor:
    """Episodes each environment contributes: ``num_episodes`` spread as evenly as possible,
    the first ``num_episodes % num_envs`` environments one more (sums to ``num_episodes``)."""
    quota = torch.full((num_envs,), num_episodes // num_envs, dtype=torch.long)
    quota[: num_episodes % num_envs] += 1
    return quota


def policy_act_fn(policy) -> Callable[[torch.Tensor], torch.Tensor]:
    """Wrap an rsl_rl actor (MLPModel, which reads a TensorDict) as an act_fn on the policy tensor."""
    from tensordict import TensorDict

    def act(obs: torch.Tensor) -> torch.Tensor:
        return policy(TensorDict({"policy": obs}, batch_size=[obs.shape[0]], device=obs.device))

    return act

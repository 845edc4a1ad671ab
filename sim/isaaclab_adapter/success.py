"""Per-episode success of an Isaac Lab task, where the task defines one.

Isaac Lab 3.0 has no per-environment success signal. Many tasks log a batch figure instead:
at every reset, ``extras["log"]["Metrics/success_rate"]`` = the mean over the environments reset
in that step. A batch mean cannot say which of those episodes succeeded, and an unbiased
evaluation (``sim.evaluation.episode_quota``: each environment's first k episodes) needs to
know. So success is read per environment where the task defines it per environment:

1. the task's own ``extras["episode_end"]["success"]`` (this project's convention; left as is);
2. a manager-based task's termination term named ``success`` (the convention of the Isaac Lab
   tasks that terminate on success, e.g. ``contrib/franka_pour``);
3. survival, where that *is* the task's success metric: a manager-based task with Isaac Lab's
   ``isaaclab.envs.mdp.survival_success_rate`` reward term ("an episode counts as a success when
   it timed out without terminating early"; it logs ``termination_manager.time_outs``), or a
   direct task listed in :data:`SURVIVAL_DIRECT_TASKS`.

Other tasks have no per-episode success; their evaluation reports return and length, and the
task's logged ``Metrics/success_rate`` over every episode that ended (``logged_success_rate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

SURVIVAL_DIRECT_TASKS: dict[str, str] = {
    "Isaac-Cartpole-Direct": "isaaclab_tasks/core/cartpole/cartpole_direct_env.py (Isaac Lab 3.0.0), CartpoleEnv._reset_idx: "
    "survived = self.reset_time_outs[env_ids]; extras['log']['Metrics/success_rate'] = survived.mean()",
}
"""Direct-workflow tasks whose logged success is survival to the time-out: task id -> where it says so."""


@dataclass(frozen=True)
class SuccessSource:
    """How a task's per-environment success is read right after ``env.step``."""

    name: str
    """What the success is, for reports (e.g. ``"time-out (survival)"``)."""
    read: Callable[[], torch.Tensor]
    """() -> bool tensor (num_envs,): success of the episodes that ended in the last step (others: undefined)."""


def _is_survival_term(func) -> bool:
    from isaaclab.envs.mdp import survival_success_rate

    return isinstance(func, survival_success_rate) or func is survival_success_rate


def success_source(unwrapped, task: str) -> SuccessSource | None:
    """The per-environment success of ``unwrapped`` (an Isaac Lab env), or None if it defines none."""
    own = getattr(unwrapped, "episode_end", None)
    if isinstance(own, dict):  # the task writes extras["episode_end"]["success"] itself (this project's tasks)
        return SuccessSource("the task's episode_end['success']", lambda: unwrapped.episode_end["success"].bool().clone())
    terminations = getattr(unwrapped, "termination_manager", None)
    if terminations is not None and "success" in terminations.active_terms:
        return SuccessSource("termination term 'success'", lambda: terminations.get_term("success").bool().clone())
    time_out = SuccessSource("time-out (survival)", lambda: unwrapped.reset_time_outs.bool().clone())
    rewards = getattr(unwrapped, "reward_manager", None)
    if rewards is not None:
        for name in rewards.active_terms:
            if _is_survival_term(rewards.get_term_cfg(name).func):
                return time_out
    if task in SURVIVAL_DIRECT_TASKS:
        return time_out
    return None

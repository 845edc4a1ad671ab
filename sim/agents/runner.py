"""rsl-rl-lib's ``OnPolicyRunner``, hooked: ``sim/train.py`` trains with rsl_rl's own ``learn`` loop.

rsl_rl's loop has no callbacks, so the hooks sit on what it calls:

- ``TimedEnv`` wraps the environment: the time spent in ``env.step`` (the simulation share).
- ``HookedLogger`` is rsl_rl's ``Logger`` (TensorBoard scalars, episode statistics) with a quiet
  console (rsl_rl prints a block per iteration) that also counts the training episodes' successes
  (``extras["episode_end"]``) and calls the runner back once per iteration, from ``log``, after the
  PPO update.
- ``TrainingRunner`` uses that call for what rsl_rl does not do: the progress bar (tqdm), the rolling
  training success (``Train/success_rate_rolling``), the late KL target (``kl_schedule``), the
  evaluations and the early stop of ``--target-success`` (``on_iteration`` returning True stops
  training: the checkpoint of that iteration is saved as rsl_rl saves its last one).

Everything else (the rollout, ``check_for_nan``, the returns, the update, the checkpoints every
``save_interval``, multi-GPU) is rsl_rl's, unchanged, so a run is the same run as rsl_rl's ``learn``
gives (tests/test_train.py compares the checkpoints).
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import torch
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger


@dataclass
class Timers:
    """Where training time goes, s."""

    simulation_s: float = 0.0
    """In ``env.step``."""
    inference_s: float = 0.0
    """The rest of the rollouts: the policy's actions and rsl_rl's bookkeeping of each step."""
    ppo_update_s: float = 0.0
    """Returns and the PPO update."""
    evaluation_s: float = 0.0
    other_s: float = 0.0

    def as_dict(self) -> dict:
        return {k: round(v, 3) for k, v in vars(self).items()}


class TimedEnv(VecEnv):
    """A ``VecEnv`` that passes everything to ``env`` and adds up the time of its ``step`` calls."""

    def __init__(self, env: VecEnv):
        self.__dict__["env"] = env
        self.__dict__["step_s"] = 0.0
        self.__dict__["last_observations"] = None

    def __getattr__(self, name):
        return getattr(self.__dict__["env"], name)

    def __setattr__(self, name, value):
        setattr(self.__dict__["env"], name, value)

    def get_observations(self):
        return self.env.get_observations()

    def step(self, actions):
        t = time.perf_counter()
        out = self.env.step(actions)
        self.__dict__["step_s"] += time.perf_counter() - t
        self.__dict__["last_observations"] = out[0]
        return out

    def refresh_last_observations(self) -> None:
        """Write the env's current observations into the ones its last ``step`` returned, in place.

        rsl_rl's loop keeps those in a local variable; an evaluation that steps and resets this same env
        (Isaac Lab: one simulation per process) leaves them stale, and the next rollout would act on them."""
        import torch

        last = self.__dict__["last_observations"]
        if last is None:
            return
        with torch.inference_mode():
            last.copy_(self.env.get_observations().to(last.device))


class HookedLogger(Logger):
    """rsl_rl's ``Logger`` with a quiet console, the training success of each step, and ``on_log(it, collect_time,
    learn_time)`` after each iteration's log."""

    def __init__(self, *args, on_log: Callable[[int, float, float], None], **kwargs):
        super().__init__(*args, **kwargs)
        self.on_log = on_log
        self.successes = 0
        self.episodes = 0

    def init_logging_writer(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # ("Storing git diff ...")
            super().init_logging_writer()

    def process_env_step(self, rewards, dones, extras, intrinsic_rewards=None) -> None:
        super().process_env_step(rewards, dones, extras, intrinsic_rewards)
        end = extras.get("episode_end")
        if end is not None:
            d = dones.bool()
            self.successes += int(end["success"][d].sum())
            self.episodes += int(d.sum())

    def log(self, it: int, start_it: int, total_it: int, collect_time: float, learn_time: float, *args, **kwargs) -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # (rsl_rl's block of text per iteration)
            super().log(it, start_it, total_it, collect_time, learn_time, *args, **kwargs)
        self.on_log(it, collect_time, learn_time)


ACTOR_INPUTS_FROM_KEY = "actor_train_inputs_from"
"""Train cfg key (not rsl_rl's): the actor trains only the first-layer weights of its inputs from this index on."""
ACTOR_FROZEN_KEY = "actor_frozen_iterations"
"""Train cfg key (not rsl_rl's): the first N iterations of ``learn`` update the critic alone."""


class StopTraining(Exception):
    """Raised from the iteration hook to leave rsl_rl's loop after the current iteration."""


class TrainingRunner(OnPolicyRunner):
    """``OnPolicyRunner`` with a progress bar, a time breakdown, the rolling training success, a KL schedule and
    an ``on_iteration(it, stats) -> bool`` hook that stops training when it returns True.

    ``stats`` holds ``train_success`` (rolling over 5 iterations; NaN before an episode ended) and
    ``mean_reward``; the hook may add ``eval_success`` or ``eval_success_at_most`` for the progress line.
    """

    def __init__(self, env: VecEnv, train_cfg: dict, log_dir: str | None = None, device: str = "cpu",
                 on_iteration: Callable[[int, dict], bool] | None = None, kl_schedule=None, show_progress: bool = True):
        self.timed_env = TimedEnv(env)
        super().__init__(self.timed_env, train_cfg, log_dir=log_dir, device=device)
        self.logger = HookedLogger(
            log_dir=log_dir, cfg=self.cfg, env_cfg=self.env.cfg, num_envs=self.env.num_envs, is_distributed=self.is_distributed,
            gpu_world_size=self.gpu_world_size, gpu_global_rank=self.gpu_global_rank, device=self.device, on_log=self._after_iteration,
        )
        self.on_iteration = on_iteration
        self.kl_schedule = kl_schedule
        self.show_progress = show_progress
        self.timers = Timers()
        self.iterations_done = 0
        self._window: deque = deque(maxlen=5)  # per-iteration (successes, episodes)
        self._bar = None
        self._iteration_start = 0.0
        self._step_s_at_start = 0.0
        self.actor_frozen_iterations = int(train_cfg.get(ACTOR_FROZEN_KEY) or 0)
        self.actor_inputs_from = train_cfg.get(ACTOR_INPUTS_FROM_KEY)
        """Set: the actor trains only its first layer's weights of inputs from this index on (e.g. a warm start's new
        observation terms); everything else of it stays as it is."""
        """The first this many iterations train the critic alone (the actor's parameters get no gradient): a fine-tune
        from a warm-started actor needs a critic that knows it first (a fresh critic's advantages wrecked one)."""

    @property
    def main_process(self) -> bool:
        return not self.is_distributed or self.gpu_global_rank == 0

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> int:
        """rsl_rl's ``learn`` (the same rollout, update, logging and checkpoints); returns the iterations done."""
        from tqdm import tqdm

        self._bar = tqdm(total=num_learning_iterations, desc="train", unit="it", disable=not (self.show_progress and self.main_process),
                         dynamic_ncols=True)
        self._iteration_start, self._step_s_at_start = time.perf_counter(), self.timed_env.step_s
        self._freeze_actor(self.actor_frozen_iterations > 0)
        try:
            super().learn(num_learning_iterations, init_at_random_ep_len)
        except StopTraining:  # what rsl_rl does after its last iteration
            if self.logger.writer is not None:
                self.save(os.path.join(self.logger.log_dir, f"model_{self.current_learning_iteration}.pt"))
                self.logger.stop_logging_writer()
        finally:
            self._bar.close()
        if self.logger.writer is not None:
            self.logger.writer.flush()
        return self.iterations_done

    def _freeze_actor(self, frozen: bool) -> None:
        """Stop (or restart) the actor's training: its parameters take no gradient, so Adam leaves them as they are."""
        first = self.actor_inputs_from
        for name, parameter in self.alg.actor.named_parameters():
            parameter.requires_grad_(not frozen and (first is None or name == "mlp.0.weight"))
        if first is not None and not frozen and not getattr(self, "_input_mask_hooked", False):
            weight = dict(self.alg.actor.named_parameters())["mlp.0.weight"]
            mask = torch.zeros_like(weight)
            mask[:, int(first):] = 1.0
            weight.register_hook(lambda grad: grad * mask)  # the old inputs' weights get no gradient
            self._input_mask_hooked = True

    def _after_iteration(self, it: int, collect_time: float, learn_time: float) -> None:
        """Once per iteration, after rsl_rl's update and log (the checkpoint of the iteration, if due, follows)."""
        step_s = self.timed_env.step_s - self._step_s_at_start
        self.timers.simulation_s += step_s
        self.timers.inference_s += max(0.0, collect_time - step_s)
        self.timers.ppo_update_s += learn_time
        self.iterations_done += 1
        if self.iterations_done == self.actor_frozen_iterations:
            self._freeze_actor(False)
        logger = self.logger
        self._window.append((logger.successes, logger.episodes))
        logger.successes = logger.episodes = 0
        s, e = sum(x[0] for x in self._window), sum(x[1] for x in self._window)
        train_success = s / e if e else float("nan")
        mean_reward = float(sum(logger.rewbuffer) / len(logger.rewbuffer)) if logger.rewbuffer else float("nan")
        writer = logger.writer
        if writer is not None:
            writer.add_scalar("Train/success_rate_rolling", train_success, it)
        stats = {"train_success": train_success, "mean_reward": mean_reward}
        if self.kl_schedule is not None and self.kl_schedule.update(self.alg, it, train_success) and writer is not None:
            writer.add_scalar("Train/desired_kl", self.kl_schedule.desired_kl, it)
        stop = bool(self.on_iteration(it, stats)) if self.on_iteration is not None else False
        if stats.get("observations_stale"):  # an evaluation stepped and reset this env (Isaac Lab)
            self.timed_env.refresh_last_observations()
        eval_text = _eval_text(stats)
        self._bar.set_postfix(success=f"{train_success:.2f}", reward=f"{mean_reward:.1f}", **({"eval": eval_text} if eval_text else {}))
        self._bar.update(1)
        now = time.perf_counter()
        if not self.show_progress and self.main_process:
            print(f"it {it}: {now - self._iteration_start:.2f} s, train success {train_success:.3f}, mean episode reward "
                  f"{mean_reward:.1f}" + (f", eval success {eval_text}" if eval_text else ""), flush=True)
        self._iteration_start, self._step_s_at_start = now, self.timed_env.step_s
        if stop:
            raise StopTraining


def _eval_text(stats: dict) -> str:
    """The evaluation's success rate for the progress line: '0.957', or '<0.912' for one stopped early."""
    if "eval_success" in stats:
        return f"{stats['eval_success']:.3f}"
    if "eval_success_at_most" in stats:
        return f"<{stats['eval_success_at_most']:.3f}"
    return ""


__all__ = ["HookedLogger", "StopTraining", "TimedEnv", "Timers", "TrainingRunner"]

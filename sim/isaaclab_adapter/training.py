"""What ``sim/train.py`` does differently for an Isaac Lab task (``--task Isaac-...``).

- ``--env-cfg`` is a nested dict of overrides of the task's registered env cfg (applied by
  ``make_isaaclab_env``); the run records it as its ``env_cfg``, so ``sim.runs.load_run`` rebuilds
  the same env, and the resolved cfg as ``resolved_env_cfg``.
- Evaluations run on the training env (one simulation per process), through
  :func:`~sim.isaaclab_adapter.evaluator.evaluate_isaaclab`; so ``--eval-env-cfg`` cannot apply.
- ``--no-randomization``, ``--native``, ``--compile`` and ``--eager`` belong to the built-in
  simulator; ``--target-success`` needs a task with a per-episode success.
"""

from __future__ import annotations

from robot_hrl.errors import ConfigError

BUILT_IN_ONLY_FLAGS = {
    "no_randomization": "--no-randomization (an Isaac Lab task randomizes through its own event terms; override them with --env-cfg)",
    "compile": "--compile (the built-in simulator's step)",
    "native": "--native (the built-in simulator's step)",
    "eager": "--eager (the built-in simulator's step)",
}


def isaaclab_env_cfg_overrides(args, overrides: dict) -> dict:
    """The env cfg overrides of an Isaac Lab run; refuses the flags that do not apply to Isaac Lab tasks."""
    for flag, text in BUILT_IN_ONLY_FLAGS.items():
        if getattr(args, flag, False):
            raise ConfigError(f"{text} applies to the built-in tasks only, not to {args.task}")
    if getattr(args, "eval_env_cfg", None):
        raise ConfigError(
            f"--eval-env-cfg cannot apply to {args.task}: Isaac Lab allows one simulation per process, so evaluations "
            "run on the training env; evaluate a changed env with a separate run (sim.runs.load_run in another process)"
        )
    return overrides


def check_env_for_args(env, args) -> None:
    """Refuse --target-success for a task without a per-episode success, before any training."""
    if getattr(args, "target_success", None) is not None and getattr(env, "success", None) is None:
        raise ConfigError(
            f"--target-success needs a per-episode success, which {args.task} does not define "
            "(see sim/isaaclab_adapter/success.py); train for --max-iterations instead"
        )

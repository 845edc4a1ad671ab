"""A late, smaller KL target for rsl-rl-lib's adaptive learning rate.

rsl_rl's ``adaptive`` schedule raises the learning rate while a mini-batch step moves the policy
less than ``desired_kl / 2`` and lowers it above ``2 * desired_kl``. A large target learns fast
early but keeps the learning rate at rsl_rl's cap (1e-2) until the end, and near its final
success rate the policy then jumps a few percent between evaluations. This schedule lowers
``desired_kl`` once, when the rolling success of the training episodes first reaches a level, so
the learning rate comes down for the last stretch (benchmarks/README.md, "Training time to a
target").

Configured by the ``desired_kl_schedule`` key of the train cfg (``sim/agents/ppo_goto.py``), read
by ``sim/train.py``; rsl_rl ignores the key. A resumed run starts at the initial target again
until its training episodes reach the level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from robot_hrl.errors import ConfigError

CFG_KEY = "desired_kl_schedule"
"""Key of the schedule in the rsl_rl train cfg dict (None or absent: no schedule)."""


@dataclass
class DesiredKlSchedule:
    """Switch PPO's ``desired_kl`` to ``desired_kl`` once the training success reaches ``train_success_at_least``."""

    train_success_at_least: float
    """Rolling success rate of the training episodes (stochastic actions) that triggers the switch."""
    desired_kl: float
    """The KL target from then on."""
    switched_at_iteration: int | None = None
    """The iteration of the switch (None before it)."""

    @classmethod
    def from_train_cfg(cls, train_cfg: dict) -> "DesiredKlSchedule | None":
        raw = train_cfg.get(CFG_KEY)
        if raw is None:
            return None
        if not isinstance(raw, dict) or set(raw) != {"train_success_at_least", "desired_kl"}:
            raise ConfigError(
                f"agent cfg {CFG_KEY!r} must be null or {{'train_success_at_least': 0..1, 'desired_kl': > 0}}, got {raw!r}"
            )
        level, kl = raw["train_success_at_least"], raw["desired_kl"]
        if not isinstance(level, (int, float)) or not 0.0 <= level <= 1.0:
            raise ConfigError(f"agent cfg {CFG_KEY}.train_success_at_least must be in [0, 1], got {level!r}")
        if not isinstance(kl, (int, float)) or not kl > 0.0 or math.isinf(kl):
            raise ConfigError(f"agent cfg {CFG_KEY}.desired_kl must be a positive number, got {kl!r}")
        return cls(float(level), float(kl))

    def update(self, alg, iteration: int, train_success: float) -> bool:
        """Switch ``alg.desired_kl`` if due (once); True on the iteration it switches."""
        if self.switched_at_iteration is not None or not train_success >= self.train_success_at_least:  # NaN: not yet
            return False
        if getattr(alg, "desired_kl", None) is None:  # a fixed schedule has no KL target to change
            return False
        alg.desired_kl = self.desired_kl
        self.switched_at_iteration = iteration
        return True

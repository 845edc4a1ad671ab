"""Cheaper PPO updates for rsl-rl-lib's ``PPO``, with the same mini-batches and the same optimizer math.

On a 2-core CPU the PPO update is most of the training wall time (benchmarks/README.md, "Training
time to a target"), and a tenth of it was bookkeeping around the small networks:

- ``RolloutStorage.mini_batch_generator`` gathers every field of every mini-batch with a fancy
  index, and indexing the observation TensorDict costs ~1 ms per mini-batch.
  :func:`install_permuted_mini_batches` draws the same permutation, gathers each field once per
  update, and yields the same mini-batches as contiguous slices of the permuted copy.
- ``torch.optim.Adam`` runs one small kernel per parameter and step on CPU.
  :func:`use_fused_adam` swaps in ``Adam(fused=True)`` (one kernel for all parameters; same update
  rule, float rounding aside) for the same parameters and learning rate.

Both are applied by ``sim/train.py`` right after the ``OnPolicyRunner`` is built, before a
checkpoint is loaded, so resumed runs load their optimizer state into the fused optimizer.
"""

from __future__ import annotations

import types
from collections.abc import Generator

import torch


def permuted_mini_batch_generator(storage, num_mini_batches: int, num_epochs: int = 8) -> Generator:
    """rsl_rl's feed-forward ``mini_batch_generator``, one gather per field instead of one per mini-batch.

    Draws ``torch.randperm`` exactly as rsl_rl does (so the random stream and the mini-batches are the
    same), permutes each flattened field once, and yields ``RolloutStorage.Batch`` es of slices.
    """
    from rsl_rl.storage.rollout_storage import RolloutStorage

    if storage.training_type != "rl":
        raise ValueError("This function is only available for reinforcement learning training.")
    batch_size = storage.num_envs * storage.num_transitions_per_env
    mini_batch_size = batch_size // num_mini_batches
    indices = torch.randperm(num_mini_batches * mini_batch_size, requires_grad=False, device=storage.device)

    def permuted(t):
        return t.flatten(0, 1)[indices]

    observations = permuted(storage.observations)
    actions, values, returns = permuted(storage.actions), permuted(storage.values), permuted(storage.returns)
    old_actions_log_prob, advantages = permuted(storage.actions_log_prob), permuted(storage.advantages)
    old_distribution_params = tuple(permuted(p) for p in storage.distribution_params)
    for _ in range(num_epochs):
        for i in range(num_mini_batches):
            s = slice(i * mini_batch_size, (i + 1) * mini_batch_size)
            yield RolloutStorage.Batch(
                observations=observations[s],
                actions=actions[s],
                values=values[s],
                advantages=advantages[s],
                returns=returns[s],
                old_actions_log_prob=old_actions_log_prob[s],
                old_distribution_params=tuple(p[s] for p in old_distribution_params),
            )


def install_permuted_mini_batches(alg) -> bool:
    """Give ``alg.storage`` the permuted generator; False (nothing changed) for recurrent models or other storages."""
    storage = getattr(alg, "storage", None)
    if storage is None or getattr(storage, "training_type", None) != "rl":
        return False
    if getattr(alg.actor, "is_recurrent", False) or getattr(alg.critic, "is_recurrent", False):
        return False  # rsl_rl uses its recurrent generator then
    storage.mini_batch_generator = types.MethodType(permuted_mini_batch_generator, storage)
    return True


def use_fused_adam(alg) -> bool:
    """Replace a plain ``torch.optim.Adam`` of ``alg`` by the fused one over the same parameter groups.

    False (nothing changed) when the optimizer is not a plain Adam, or its parameters sit on a
    device without a fused Adam kernel. Call before loading a checkpoint.
    """
    opt = getattr(alg, "optimizer", None)
    if type(opt) is not torch.optim.Adam or opt.defaults.get("fused"):
        return False
    params = [p for group in opt.param_groups for p in group["params"]]
    device_types = {p.device.type for p in params}
    if not device_types <= {"cpu", "cuda"}:
        return False
    # the same groups (parameters, lr, betas, ...) without the implementation flags
    groups = [{k: v for k, v in g.items() if k not in ("fused", "foreach")} for g in opt.param_groups]
    alg.optimizer = torch.optim.Adam(groups, fused=True)
    return True

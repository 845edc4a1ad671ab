"""Multi-GPU data-parallel training through torch.distributed (rsl-rl-lib's multi-GPU support).

Launch one process per GPU with torchrun::

    torchrun --nproc_per_node=4 sim/train.py --distributed --device cuda

rsl_rl's OnPolicyRunner reads WORLD_SIZE / RANK / LOCAL_RANK, initializes the NCCL process
group, broadcasts the initial parameters and averages gradients; each process runs its own
environments on ``cuda:<LOCAL_RANK>`` with seed + rank.
"""

from __future__ import annotations

import os

from robot_hrl.errors import ConfigError


def setup_distributed(device: str) -> tuple[int, int, str]:
    """Check the torchrun environment; return (global rank, world size, this process's device)."""
    import torch

    if "WORLD_SIZE" not in os.environ or "LOCAL_RANK" not in os.environ:
        raise ConfigError(
            "--distributed needs the torchrun environment (WORLD_SIZE, RANK, LOCAL_RANK); launch with "
            "`torchrun --nproc_per_node=<number of GPUs> sim/train.py --distributed --device cuda`"
        )
    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        raise ConfigError(
            "--distributed trains on several CUDA GPUs (rsl_rl uses the NCCL backend); "
            f"device {device!r} / CUDA available: {torch.cuda.is_available()}. Use --device cuda on a multi-GPU machine"
        )
    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ["LOCAL_RANK"])
    if local >= torch.cuda.device_count():
        raise ConfigError(f"LOCAL_RANK {local} but only {torch.cuda.device_count()} CUDA device(s); lower --nproc_per_node")
    return rank, world, f"cuda:{local}"

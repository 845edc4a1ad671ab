"""PPO configuration (rsl-rl-lib 5.x train cfg dict) for the ``navigate`` level.

A small actor (13 observations -> 2 subgoal-offset outputs) with observation normalization; the
critic sees the policy's terms plus the geodesic distance to the goal and its direction
(privileged, from the room's map). An episode is up to 60 decisions, so 24 steps per environment
and iteration, gamma 0.98.
"""

from __future__ import annotations

import copy
from typing import Any

PPO_NAVIGATE: dict[str, Any] = {
    "num_steps_per_env": 24,
    "save_interval": 50,
    "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
    "logger": "tensorboard",
    "check_for_nan": True,
    "torch_compile_mode": None,
    "actor": {
        "class_name": "MLPModel",
        "hidden_dims": [128, 128],
        "activation": "elu",
        "obs_normalization": True,
        "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.6, "std_type": "scalar"},
    },
    "critic": {"class_name": "MLPModel", "hidden_dims": [128, 128], "activation": "elu", "obs_normalization": True},
    "algorithm": {
        "class_name": "PPO",
        "num_learning_epochs": 4,
        "num_mini_batches": 4,
        "clip_param": 0.2,
        "gamma": 0.98,
        "lam": 0.95,
        "value_loss_coef": 1.0,
        "entropy_coef": 0.003,
        "learning_rate": 1.0e-3,
        "max_grad_norm": 1.0,
        "optimizer": "adam",
        "use_clipped_value_loss": False,
        "schedule": "adaptive",
        "desired_kl": 0.01,
    },
}


MEMORY_ACTOR_CLASS = "sim.agents.memory_model:MemoryMLPModel"
"""The actor with a GRU beside its MLP (``--memory-gru``)."""


def ppo_navigate_cfg(memory_gru: int = 0) -> dict[str, Any]:
    """The cfg; ``memory_gru`` > 0: the actor keeps a GRU memory of that many units beside its MLP
    (``sim/agents/memory_model.py``), and rsl_rl's PPO runs recurrent."""
    cfg = copy.deepcopy(PPO_NAVIGATE)
    if memory_gru > 0:
        cfg["actor"].update(class_name=MEMORY_ACTOR_CLASS, rnn_type="gru", rnn_hidden_dim=memory_gru, rnn_num_layers=1)
    return cfg

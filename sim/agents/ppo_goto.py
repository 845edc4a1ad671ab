"""PPO configuration (rsl-rl-lib 5.x train cfg dict) for ``crazyflie-goto``.

Small actor (it must fit the Crazyflie's STM32F405 as C code) with empirical observation
normalization; asymmetric critic on the ``critic`` group (clean terms + privileged info).
"""

from __future__ import annotations

import copy
from typing import Any

PPO_GOTO: dict[str, Any] = {
    "num_steps_per_env": 24,
    "save_interval": 50,
    "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
    "logger": "tensorboard",
    "check_for_nan": True,
    "torch_compile_mode": None,
    "actor": {
        "class_name": "MLPModel",
        "hidden_dims": [64, 64],
        "activation": "elu",
        "obs_normalization": True,
        "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.3, "std_type": "scalar"},
    },
    "critic": {
        "class_name": "MLPModel",
        "hidden_dims": [64, 64],
        "activation": "elu",
        "obs_normalization": True,
    },
    "algorithm": {
        "class_name": "PPO",
        "num_learning_epochs": 4,
        "num_mini_batches": 4,
        "clip_param": 0.2,
        "gamma": 0.99,
        "lam": 0.95,
        "value_loss_coef": 1.0,
        "entropy_coef": 0.002,
        "learning_rate": 1.0e-3,
        "max_grad_norm": 1.0,
        "optimizer": "adam",
        "use_clipped_value_loss": True,
        "schedule": "adaptive",
        "desired_kl": 0.01,
    },
}


def ppo_goto_cfg() -> dict[str, Any]:
    """A fresh deep copy of the PPO train cfg (rsl_rl mutates the dict it is given)."""
    return copy.deepcopy(PPO_GOTO)

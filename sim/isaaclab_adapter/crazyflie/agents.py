"""The rsl_rl runner cfg of ``Isaac-Crazyflie-Goto-Direct`` for Isaac Lab's own scripts
(``scripts/reinforcement_learning/rsl_rl/train.py``), generated from the project's ``sim.agents.ppo_goto.PPO_GOTO``
(one home for the hyperparameters). ``sim/train.py`` uses ``PPO_GOTO`` itself (with its KL schedule, which
Isaac Lab's runner cfg has no field for)."""

from __future__ import annotations

from isaaclab.utils import configclass
from isaaclab_rl.rsl_rl import RslRlMLPModelCfg, RslRlOnPolicyRunnerCfg, RslRlPpoAlgorithmCfg

from sim.agents.ppo_goto import PPO_GOTO

_ACTOR, _CRITIC, _ALGORITHM = PPO_GOTO["actor"], PPO_GOTO["critic"], PPO_GOTO["algorithm"]


@configclass
class CrazyflieGotoPPORunnerCfg(RslRlOnPolicyRunnerCfg):
    num_steps_per_env = PPO_GOTO["num_steps_per_env"]
    max_iterations = 1000
    save_interval = PPO_GOTO["save_interval"]
    experiment_name = "crazyflie_goto"
    obs_groups = {k: list(v) for k, v in PPO_GOTO["obs_groups"].items()}
    actor = RslRlMLPModelCfg(
        hidden_dims=list(_ACTOR["hidden_dims"]), activation=_ACTOR["activation"], obs_normalization=_ACTOR["obs_normalization"],
        distribution_cfg=RslRlMLPModelCfg.GaussianDistributionCfg(
            init_std=_ACTOR["distribution_cfg"]["init_std"], std_type=_ACTOR["distribution_cfg"]["std_type"]),
    )
    critic = RslRlMLPModelCfg(hidden_dims=list(_CRITIC["hidden_dims"]), activation=_CRITIC["activation"],
                              obs_normalization=_CRITIC["obs_normalization"])
    algorithm = RslRlPpoAlgorithmCfg(**{k: v for k, v in _ALGORITHM.items() if k != "class_name"})

"""``Isaac-Crazyflie-Goto-Direct``: this project's ``crazyflie-goto`` task inside Isaac Lab 3.0 (``env.py``).

Importing this package registers the task id with gymnasium (``sim.isaaclab_adapter.env.TASK_MODULES``
lists it, so ``sim/train.py --task Isaac-Crazyflie-Goto-Direct`` finds it); nothing of Isaac Lab is
imported until the env is made.
"""

import gymnasium as gym

TASK_ID = "Isaac-Crazyflie-Goto-Direct"

if TASK_ID not in gym.registry:
    gym.register(
        id=TASK_ID,
        entry_point=f"{__name__}.env:CrazyflieGotoEnv",
        disable_env_checker=True,
        kwargs={
            "env_cfg_entry_point": f"{__name__}.env_cfg:CrazyflieGotoEnvCfg",
            "rsl_rl_cfg_entry_point": f"{__name__}.agents:CrazyflieGotoPPORunnerCfg",
        },
    )

__all__ = ["TASK_ID"]

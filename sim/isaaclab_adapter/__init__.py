"""Isaac Lab 3.0 tasks in this project's trainer: ``python sim/train.py --task Isaac-Cartpole-Direct``.

Isaac Lab 3.0 installs from the package index without Isaac Sim (Python 3.12) and runs its tasks
kitless on Newton physics (MuJoCo-Warp), on the CPU or CUDA. The parts:

- ``availability``: is Isaac Lab importable here; what to install when not (no Isaac Lab import);
- ``env``: ``make_isaaclab_env``: a registered task as an rsl_rl VecEnv, launched kitless, one per process;
- ``agent``: ``isaaclab_agent_cfg``: the task's registered rsl_rl runner cfg as rsl_rl's dict;
- ``success``: per-episode success where the task defines one;
- ``evaluator``: ``evaluate_isaaclab``: return, length, time-outs and success of any task;
- ``training``: what ``sim/train.py`` does differently for these tasks;
- ``assets``: local stand-ins for the Nucleus USD assets (``ISAACSIM_ASSET_ROOT``);
- ``contract``: ``contract_from_env``: the policy contract of any task, generated from the env (``env.contract``);
- ``crazyflie``: ``Isaac-Crazyflie-Goto-Direct``, this project's ``crazyflie-goto`` on Isaac Lab's physics.

Only ``availability`` is imported here; the others import Isaac Lab and need its Python.
"""

from sim.isaaclab_adapter.availability import INSTALL_HINT, REQUIRED_MODULES, isaaclab_available, require_isaaclab


def make_isaaclab_env(*args, **kwargs):
    """See :func:`sim.isaaclab_adapter.env.make_isaaclab_env`."""
    require_isaaclab()
    from sim.isaaclab_adapter.env import make_isaaclab_env as make

    return make(*args, **kwargs)


def isaaclab_agent_cfg(task: str, device: str = "cpu") -> dict:
    """See :func:`sim.isaaclab_adapter.agent.isaaclab_agent_cfg`."""
    require_isaaclab()
    from sim.isaaclab_adapter.agent import isaaclab_agent_cfg as agent_cfg

    return agent_cfg(task, device)


__all__ = ["INSTALL_HINT", "REQUIRED_MODULES", "isaaclab_agent_cfg", "isaaclab_available", "make_isaaclab_env", "require_isaaclab"]

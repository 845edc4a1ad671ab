"""The Isaac Lab cfg of ``Isaac-Crazyflie-Goto-Direct``: Isaac Lab's fields, derived from the project's ``GotoEnvCfg``.

``goto`` holds the ``GotoEnvCfg`` overrides as a dict (``{"randomization": {"enabled": False}}``, what
``sim/train.py --env-cfg`` takes for ``crazyflie-goto``); :func:`configure` resolves it when the env is
built and sets Isaac Lab's fields from it: ``sim.dt`` (1 / physics rate), ``decimation`` (physics rate /
control rate), ``sim.gravity``, ``episode_length_s``, the spaces, and the robot's USD (generated from
``robot_hrl.robots``, ``usd.py``). Physics: Newton with MuJoCo-Warp (kitless; ``SimulationCfg``'s default
PhysX needs Isaac Sim).
"""

from __future__ import annotations

import isaaclab.sim as sim_utils
from isaaclab.assets import ArticulationCfg
from isaaclab.envs import DirectRLEnvCfg
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.sim import SimulationCfg
from isaaclab.utils import configclass
from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg

from robot_hrl.robots import get_robot
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.isaaclab_adapter.crazyflie.usd import BODY_NAME, write_usd

_DEFAULT = GotoEnvCfg()


@configclass
class CrazyflieSceneCfg(InteractiveSceneCfg):
    """One quadrotor per environment; no ground collider (touching the floor ends an episode: the task checks it)."""

    robot: ArticulationCfg = ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Robot",
        spawn=sim_utils.UsdFileCfg(usd_path=""),  # set by configure(): the USD generated from the robot model
        init_state=ArticulationCfg.InitialStateCfg(pos=(0.0, 0.0, 1.5), joint_pos={}, joint_vel={}),  # jointless
        actuators={},
    )


@configclass
class CrazyflieGotoEnvCfg(DirectRLEnvCfg):
    """``Isaac-Crazyflie-Goto-Direct``."""

    goto: dict = {}
    """Overrides of the project's ``GotoEnvCfg`` (sim/envs/goto_env_cfg.py); empty: its defaults (training)."""
    decimation: int = round(_DEFAULT.physics.physics_rate_hz / _DEFAULT.command.control_rate_hz)
    episode_length_s: float = _DEFAULT.command.episode_length_s
    action_space: int = 4
    observation_space: int = 22
    state_space: int = 0
    body_name: str = BODY_NAME
    sim: SimulationCfg = SimulationCfg(
        dt=1.0 / _DEFAULT.physics.physics_rate_hz,
        gravity=(0.0, 0.0, -_DEFAULT.physics.gravity_mps2),
        physics=NewtonCfg(solver_cfg=MJWarpSolverCfg(njmax=8, nconmax=8)),
    )
    scene: CrazyflieSceneCfg = CrazyflieSceneCfg(num_envs=1024, env_spacing=8.0, replicate_physics=True)


def configure(cfg: CrazyflieGotoEnvCfg) -> GotoEnvCfg:
    """Resolve ``cfg.goto`` and set Isaac Lab's fields of ``cfg`` from it (before the env is built); returns it."""
    goto = GotoEnvCfg.from_dict(dict(cfg.goto)).validate()
    cfg.decimation = int(round(goto.physics.physics_rate_hz / goto.command.control_rate_hz))
    cfg.sim.dt = 1.0 / goto.physics.physics_rate_hz
    cfg.sim.render_interval = cfg.decimation
    cfg.sim.gravity = (0.0, 0.0, -goto.physics.gravity_mps2)
    cfg.episode_length_s = goto.command.episode_length_s
    robot = get_robot(goto.robot)
    cfg.scene.robot.spawn.usd_path = str(write_usd(robot))
    return goto

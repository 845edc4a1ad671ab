"""The quadrotor's shield family: its dynamics and stopping model (``model.py``), its limits unit
(``limits.py``: actuator range and slew, body rate, attitude, speed), its backup controller
(``backup.py``: cascaded PD, hold then land) and their YAML sections (``config.py``).

The shield YAML of a quadrotor says ``model: quadrotor`` (robot_hrl.safety.families).
"""

from robot_hrl.robots.quadrotor.shield.backup import BackupController
from robot_hrl.robots.quadrotor.shield.config import BackupCfg, LimitsCfg, StoppingCfg
from robot_hrl.robots.quadrotor.shield.hover_thrust import HoverThrustCfg, HoverThrustUnit
from robot_hrl.robots.quadrotor.shield.limits import LimitsUnit
from robot_hrl.robots.quadrotor.shield.motor_lag import MotorLagCfg, MotorLagUnit
from robot_hrl.robots.quadrotor.shield.model import DynamicsModel, StatePredictor, check_config_fits, stopping_box
from robot_hrl.safety.families import ShieldFamily, register_family


def _build_model(robot, config, action_map) -> DynamicsModel:
    check_config_fits(config, robot)
    return DynamicsModel(robot, config, action_map)


FAMILY = register_family(ShieldFamily(
    name="quadrotor",
    sections={"limits": LimitsCfg, "stopping": StoppingCfg, "backup": BackupCfg},
    units={"limits": LimitsUnit, "hover_thrust": HoverThrustUnit, "motor_lag": MotorLagUnit},
    build_model=_build_model,
    build_backup=BackupController,
    build_predictor=StatePredictor,
    description="a quadrotor in collective thrust and body torques: stopping box from its dynamics, limits unit, "
                "cascaded PD backup (hold, then land)",
))

__all__ = ["BackupCfg", "BackupController", "DynamicsModel", "FAMILY", "HoverThrustCfg", "HoverThrustUnit", "LimitsCfg", "LimitsUnit", "MotorLagCfg", "MotorLagUnit",
           "StatePredictor",
           "StoppingCfg", "stopping_box"]

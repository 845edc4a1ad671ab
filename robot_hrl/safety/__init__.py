"""Safety shield units between the skill policy and the actuators (numpy only, no torch).

    from robot_hrl.safety import Shield, ShieldInput
    shield = Shield.from_yaml(None, CRAZYFLIE_2X, world, subgoal_radius_m=1.0)
    safe_goal, records = shield.filter_subgoal(goal_w, state.position_w, now_s)
    out = shield.step(ShieldInput(now_s, state, actions, subgoal_w=safe_goal, subgoal_stamp_s=t_goal,
                                  inference_s=dt_infer, battery_v=volts))
    out.actions, out.wrench, out.mode, out.interventions; shield.diagnostics()

See docs/safety.md.
"""

from robot_hrl.safety.backup import BackupController
from robot_hrl.safety.config import DEFAULT_SHIELD_CONFIG, ShieldConfig, load_shield_config, parse_shield_config
from robot_hrl.safety.model import DynamicsModel, StatePredictor
from robot_hrl.safety.records import ERROR, OK, STALE, WARN, Intervention, UnitCounters
from robot_hrl.safety.shield import MODES, Shield, ShieldInput, ShieldOutput

__all__ = [
    "BackupController", "DEFAULT_SHIELD_CONFIG", "DynamicsModel", "ERROR", "Intervention", "MODES", "OK", "STALE",
    "Shield", "ShieldConfig", "ShieldInput", "ShieldOutput", "StatePredictor", "UnitCounters", "WARN",
    "load_shield_config", "parse_shield_config",
]

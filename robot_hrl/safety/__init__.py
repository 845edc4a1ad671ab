"""Safety shield units between the skill policy and the actuators (numpy only, no torch).

    from robot_hrl.safety import Shield, ShieldInput
    shield = Shield.from_yaml(None, robot, world, subgoal_radius_m=1.0, action=policy.contract.action)
    safe_goal, records = shield.filter_subgoal(goal_w, state.position_w, now_s)
    out = shield.step(ShieldInput(now_s, state, actions, subgoal_w=safe_goal, subgoal_stamp_s=t_goal,
                                  inference_s=dt_infer, battery_v=volts))
    out.command, out.mode, out.interventions (out.actions: normalized); shield.diagnostics()

The robot-neutral units live in ``units/``; a robot family's model, units and backup controller in
its package (the quadrotor's: robot_hrl/robots/quadrotor/shield). See docs/safety.md.
"""

from robot_hrl.safety.config import DEFAULT_SHIELD_CONFIG, ShieldConfig, load_shield_config, parse_shield_config
from robot_hrl.safety.families import FAMILIES, ShieldFamily, get_family, register_family
from robot_hrl.safety.records import ERROR, OK, STALE, WARN, Intervention, UnitCounters
from robot_hrl.safety.shield import MODES, Shield, ShieldInput, ShieldOutput

__all__ = [
    "DEFAULT_SHIELD_CONFIG", "ERROR", "FAMILIES", "Intervention", "MODES", "OK", "STALE", "Shield", "ShieldConfig",
    "ShieldFamily", "ShieldInput", "ShieldOutput", "UnitCounters", "WARN", "get_family", "load_shield_config",
    "parse_shield_config", "register_family",
]

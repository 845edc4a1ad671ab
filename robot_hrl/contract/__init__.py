"""The policy contract and the code that builds observations and maps actions from it."""

from robot_hrl.contract.actions import (
    actions_to_wrench,
    goto_action_spec,
    hover_actions,
    mix_wrench_to_rotor_thrusts,
    wrench_to_actions,
)
from robot_hrl.contract.goto import DEFAULT_CONTROL_RATE_HZ, DEFAULT_SUBGOAL_RADIUS_M, GOTO_OBSERVATION_TERMS, goto_contract
from robot_hrl.contract.observations import OBSERVATION_TERMS, compute_observation
from robot_hrl.contract.schema import (
    CONTRACT_METADATA_KEY,
    CONTRACT_SCHEMA_VERSION,
    ActionSpec,
    ActionTerm,
    ObservationTerm,
    PolicyContract,
    RobotRef,
)

__all__ = [
    "ActionSpec", "ActionTerm", "CONTRACT_METADATA_KEY", "CONTRACT_SCHEMA_VERSION", "DEFAULT_CONTROL_RATE_HZ",
    "DEFAULT_SUBGOAL_RADIUS_M", "GOTO_OBSERVATION_TERMS", "OBSERVATION_TERMS", "ObservationTerm", "PolicyContract",
    "RobotRef", "actions_to_wrench", "compute_observation", "goto_action_spec", "goto_contract", "hover_actions",
    "mix_wrench_to_rotor_thrusts", "wrench_to_actions",
]

"""The policy contract and the code that builds observations and maps actions from it."""

from robot_hrl.contract.action_modes import (
    ACTION_MODES,
    ActionMap,
    ActionMode,
    action_bounds,
    action_map,
    command_to_normalized,
    get_action_mode,
    normalized_to_command,
    register_action_mode,
)
from robot_hrl.contract.actions import actions_to_wrench, hover_actions, wrench_to_actions
from robot_hrl.contract.goto import (
    DEFAULT_CONTROL_RATE_HZ,
    DEFAULT_SUBGOAL_RADIUS_M,
    GOTO_ERROR_INTEGRAL,
    GOTO_OBSERVATION_TERMS,
    goto_contract,
    goto_observation_terms,
)
from robot_hrl.contract.observations import OBSERVATION_TERMS, compute_observation
from robot_hrl.contract.reader import AnyContract, contract_kind, read_contract
from robot_hrl.contract.schema import (
    CONTRACT_METADATA_KEY,
    CONTRACT_SCHEMA_VERSION,
    ActionSpec,
    ActionTerm,
    ErrorIntegral,
    ObservationTerm,
    FirmwareRef,
    PolicyContract,
    RobotRef,
    action_mismatches,
)



__all__ = [
    "ACTION_MODES", "ActionMap", "AnyContract", "contract_kind", "read_contract", "ActionMode", "ActionSpec", "ActionTerm", "CONTRACT_METADATA_KEY",
    "CONTRACT_SCHEMA_VERSION", "DEFAULT_CONTROL_RATE_HZ", "DEFAULT_SUBGOAL_RADIUS_M", "ErrorIntegral", "GOTO_ERROR_INTEGRAL",
    "GOTO_OBSERVATION_TERMS",
    "FirmwareRef", "OBSERVATION_TERMS", "ObservationTerm", "PolicyContract", "RobotRef", "action_bounds", "action_map",
    "action_mismatches", "actions_to_wrench", "command_to_normalized", "compute_observation", "get_action_mode",
    "goto_contract", "goto_observation_terms", "hover_actions", "normalized_to_command",
    "register_action_mode", "wrench_to_actions",
]

"""One contract reader for every kind of exported model: a skill that commands the robot, or a level that
commands a skill (a discriminated union on the contract's action mode).

Both kinds are stored under the one metadata key (``robot_hrl.contract``). The action mode's registry
entry (robot_hrl.contract.action_modes) decides the kind: a mode whose command is a subgoal
(``ActionMode.subgoal``, e.g. ``subgoal_offset``) is a level's (:class:`~robot_hrl.contract.navigate.NavigateContract`),
any other mode a skill's (:class:`~robot_hrl.contract.schema.PolicyContract`). ``read_contract`` reads
either; each kind's own ``from_json`` refuses the other with an error that says where it belongs.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from robot_hrl.contract.action_modes import ACTION_MODES
from robot_hrl.contract.navigate import NAVIGATE_SCHEMA_VERSION, NavigateContract
from robot_hrl.contract.schema import CONTRACT_METADATA_KEY, CONTRACT_SCHEMA_VERSION, PolicyContract
from robot_hrl.errors import ContractError

SKILL, LEVEL = "skill", "level"
"""The two kinds: a skill's action mode commands the robot; a level's commands a subgoal of a lower skill."""
_SCHEMA_VERSIONS = {SKILL: CONTRACT_SCHEMA_VERSION, LEVEL: NAVIGATE_SCHEMA_VERSION}


def contract_kind(data: Any) -> str | None:
    """``level`` when the contract's action mode (or, before any action is read, its skill ``navigate``) commands
    a subgoal, ``skill`` otherwise; None for something that is no contract at all."""
    if isinstance(data, (PolicyContract, NavigateContract)):
        return LEVEL if isinstance(data, NavigateContract) else SKILL
    if not isinstance(data, dict):
        return None
    action = data.get("action")
    mode = action.get("mode") if isinstance(action, dict) else None
    if isinstance(mode, str) and mode in ACTION_MODES:
        return LEVEL if ACTION_MODES[mode].subgoal else SKILL
    return LEVEL if data.get("skill") == "navigate" else SKILL


AnyContract = Annotated[
    Union[Annotated[PolicyContract, Tag(SKILL)], Annotated[NavigateContract, Tag(LEVEL)]],
    Discriminator(contract_kind),
]
"""A skill's or a level's contract, told apart by :func:`contract_kind`."""

_ADAPTER = TypeAdapter(AnyContract)


def read_contract(text: str | bytes | None) -> PolicyContract | NavigateContract:
    """The contract of any exported model (its ``robot_hrl.contract`` metadata), as its kind's model."""
    if text is None or (isinstance(text, (str, bytes)) and not text.strip()):
        raise ContractError(f"the model carries no contract (metadata key {CONTRACT_METADATA_KEY!r}); re-export it "
                            "(skills: `python deploy/export.py <run-dir> --out <model>.onnx`; levels: "
                            "`python -m deploy.onnx_export.navigate <run-dir> --out <model>.onnx`)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(f"the contract is not valid JSON ({exc}); re-export the model") from exc
    kind = contract_kind(data)
    if kind is None:
        raise ContractError(f"the contract is a JSON {type(data).__name__}, not an object; re-export the model")
    if data.get("schema_version") != _SCHEMA_VERSIONS[kind]:
        raise ContractError(f"{kind} contract schema_version {data.get('schema_version')!r} is not supported (this runtime "
                            f"reads {_SCHEMA_VERSIONS[kind]}); re-export the model with this version of robot_hrl")
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ContractError(f"the {kind} contract is malformed: {exc}; re-export the model") from exc


def level_refusal(data: dict) -> str:
    """What :meth:`PolicyContract.from_json` says when it is handed a level's contract."""
    mode = (data.get("action") or {}).get("mode") if isinstance(data.get("action"), dict) else None
    return (f"this is the contract of a level above a skill (skill {data.get('skill')!r}, action mode {mode!r}: it "
            "outputs subgoals for a lower skill, not robot commands); it runs in the planner node "
            "(planner:=learned, parameter navigate_model), not in the skill node: give a skill model here "
            "(e.g. models/crazyflie_goto.onnx), or read it with robot_hrl.contract.read_contract")

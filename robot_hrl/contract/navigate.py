"""PROPOSAL: the contract of a learned high level, skill ``navigate``, and its numpy observation terms.

``PolicyContract`` describes a skill whose actions are actuator commands
(``ActionSpec.mode = collective_thrust_body_torque``). A level above it outputs a subgoal, and it
must name the skill it was trained over. Until the contract package is generalized (issue 20:
an action-mode registry, robot-neutral fields), this module holds what the ``navigate`` level
needs, reusing ``ObservationTerm`` and ``RobotRef``:

- ``action``: :class:`SubgoalActionSpec`: 2 outputs in [-1, 1] -> a horizontal offset from the
  robot's position, in its yaw frame, scaled by ``max_offset_m`` and projected onto the disc of
  that radius (the HRAC adjacency constraint: ``max_offset_m <= lower_skill.subgoal_radius_m``);
  the subgoal's altitude is ``flight_height_m``.
- ``lower_skill``: :class:`LowerSkillRef`: the skill name, the sha256 of its ONNX file and of its
  contract JSON, its subgoal radius and control rate; :meth:`NavigateContract.lower_skill_mismatches`
  lists every way a given goto model differs, and the runtime must refuse the pair.
- ``sensors``: the names of the range sensors in the order of the ``ranges_m`` term, and the hash
  of their full description (``robot_hrl.sensing.sensor_suite_sha256``).
- ``decision_rate_hz``: how often the level decides (the lower skill runs at its own rate).

The contract JSON is stored under the same metadata key as every contract
(``robot_hrl.contract``); ``skill`` tells the two kinds apart. The observation terms below have
torch twins in ``sim/envs/terms/navigate_observations.py`` (parity: tests/test_navigate_env.py).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Callable, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robot_hrl.contract.schema import CONTRACT_METADATA_KEY, Conventions, ObservationTerm, PolicyContract, RobotRef
from robot_hrl.errors import ContractError, ObservationError

NAVIGATE_SCHEMA_VERSION = 1
NAVIGATE_METADATA_KEY = CONTRACT_METADATA_KEY

_FROZEN = ConfigDict(frozen=True, extra="forbid")

GOAL_CLIP_M = 8.0
SPEED_CLIP_MPS = 3.0


def navigate_observation_terms(max_range_m: float, num_ranges: int, max_offset_m: float) -> tuple[ObservationTerm, ...]:
    """The ordered observation of the ``navigate`` level."""
    return (
        ObservationTerm(name="goal_yaw", size=2, frame="yaw", units="m", clip=(-GOAL_CLIP_M, GOAL_CLIP_M),
                        description="goal minus position, horizontal, in the robot's yaw frame"),
        ObservationTerm(name="ranges_m", size=num_ranges, frame="body_flu", units="m", clip=(0.0, max_range_m),
                        description="range readings in the contract's sensor order; max range = no target"),
        ObservationTerm(name="velocity_yaw", size=3, frame="yaw", units="m/s", clip=(-SPEED_CLIP_MPS, SPEED_CLIP_MPS),
                        description="linear velocity in the robot's yaw frame"),
        ObservationTerm(name="last_subgoal_yaw", size=2, frame="yaw", units="m", clip=(-2.0 * max_offset_m, 2.0 * max_offset_m),
                        description="the last subgoal minus position, horizontal, in the robot's yaw frame"),
    )


class SubgoalActionSpec(BaseModel):
    """Normalized outputs -> the next subgoal."""

    model_config = _FROZEN
    mode: Literal["subgoal_offset_yaw"] = "subgoal_offset_yaw"
    size: Literal[2] = 2
    max_offset_m: float = Field(gt=0, description="offset radius; outputs are scaled by it and projected onto its disc")
    flight_height_m: float = Field(gt=0, description="altitude of every subgoal, m (world ENU z)")


class LowerSkillRef(BaseModel):
    """The skill the level was trained over."""

    model_config = _FROZEN
    skill: str
    model_sha256: str
    contract_sha256: str
    subgoal_radius_m: float = Field(gt=0)
    control_rate_hz: float = Field(gt=0)


class SensorSuiteRef(BaseModel):
    model_config = _FROZEN
    names: tuple[str, ...]
    sha256: str


class NavigateContract(BaseModel):
    """The contract of a ``navigate`` level."""

    model_config = _FROZEN
    schema_version: int = NAVIGATE_SCHEMA_VERSION
    skill: Literal["navigate"] = "navigate"
    robot: RobotRef
    decision_rate_hz: float = Field(gt=0)
    observations: tuple[ObservationTerm, ...]
    action: SubgoalActionSpec
    lower_skill: LowerSkillRef
    sensors: SensorSuiteRef
    conventions: Conventions = Conventions()

    @model_validator(mode="after")
    def _adjacent(self) -> "NavigateContract":
        if self.action.max_offset_m > self.lower_skill.subgoal_radius_m + 1e-9:
            raise ValueError(f"action.max_offset_m {self.action.max_offset_m} exceeds the lower skill's subgoal radius "
                             f"{self.lower_skill.subgoal_radius_m} (the adjacency constraint)")
        ranges = [t for t in self.observations if t.name == "ranges_m"]
        if ranges and ranges[0].size != len(self.sensors.names):
            raise ValueError(f"observation ranges_m has size {ranges[0].size} but the contract names "
                             f"{len(self.sensors.names)} sensors")
        return self

    @property
    def observation_size(self) -> int:
        return sum(t.size for t in self.observations)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes | None) -> "NavigateContract":
        if text is None or not str(text).strip():
            raise ContractError(f"the model carries no contract (metadata key {NAVIGATE_METADATA_KEY!r}); re-export it "
                                "with `python sim/train_navigate.py --export`")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ContractError(f"the contract is not valid JSON ({exc}); re-export the model") from exc
        if not isinstance(data, dict) or data.get("skill") != "navigate":
            raise ContractError(f"this is the contract of skill {data.get('skill') if isinstance(data, dict) else None!r}, "
                                "not of a navigate level; give the navigation model")
        if data.get("schema_version") != NAVIGATE_SCHEMA_VERSION:
            raise ContractError(f"navigate contract schema_version {data.get('schema_version')!r} is not supported "
                                f"(this runtime reads {NAVIGATE_SCHEMA_VERSION}); re-export the model")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ContractError(f"the navigate contract is malformed: {exc}; re-export the model") from exc

    def lower_skill_mismatches(self, lower: PolicyContract, model_sha256: str | None = None) -> list[str]:
        """Every way the given lower skill differs from the one this level was trained over."""
        ref, problems = self.lower_skill, []
        if lower.skill != ref.skill:
            problems.append(f"lower skill: trained over {ref.skill!r}, given {lower.skill!r}")
        if lower.robot != self.robot:
            problems.append(f"robot: level trained for {self.robot.name} ({self.robot.params_sha256[:12]}), lower skill is for "
                            f"{lower.robot.name} ({lower.robot.params_sha256[:12]})")
        if contract_sha256(lower) != ref.contract_sha256:
            problems.append(f"lower skill contract: hash {contract_sha256(lower)[:12]}, trained over {ref.contract_sha256[:12]} "
                            "(its observation terms, action mapping or rates changed: retrain the level over it)")
        if model_sha256 is not None and model_sha256 != ref.model_sha256:
            problems.append(f"lower skill model: sha256 {model_sha256[:12]}, trained over {ref.model_sha256[:12]} "
                            "(another goto model: retrain the level with `python sim/train_navigate.py --skill <model>`)")
        if abs(lower.subgoal_radius_m - ref.subgoal_radius_m) > 1e-9:
            problems.append(f"subgoal radius: lower skill {lower.subgoal_radius_m} m, trained with {ref.subgoal_radius_m} m")
        return problems

    def check_lower_skill(self, lower: PolicyContract, model_sha256: str | None = None) -> None:
        problems = self.lower_skill_mismatches(lower, model_sha256)
        if problems:
            raise ContractError("the navigation model does not fit this goto skill: " + "; ".join(problems))


def contract_sha256(contract: PolicyContract) -> str:
    """A hash of a skill contract's canonical JSON."""
    return hashlib.sha256(json.dumps(json.loads(contract.to_json()), sort_keys=True).encode()).hexdigest()


# ---- numpy observation terms (the runtime side; inputs may carry batch dimensions) ---------------
NavigateInputs = dict[str, np.ndarray]
"""Keys: position_w (3), quat_wxyz (4), linear_velocity_w (3), goal_w (3), ranges_m (S), last_subgoal_w (3)."""


def yaw_from_quat(q_wxyz: np.ndarray) -> np.ndarray:
    w, x, y, z = np.moveaxis(np.asarray(q_wxyz, dtype=np.float64), -1, 0)
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def world_to_yaw(v_w: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Rotate the horizontal part of world vectors (..., >=2) into the yaw frame (..., 2)."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack((c * v_w[..., 0] + s * v_w[..., 1], -s * v_w[..., 0] + c * v_w[..., 1]), axis=-1)


def goal_yaw(x: NavigateInputs) -> np.ndarray:
    return world_to_yaw(x["goal_w"] - x["position_w"], yaw_from_quat(x["quat_wxyz"]))


def ranges_m(x: NavigateInputs) -> np.ndarray:
    return np.asarray(x["ranges_m"], dtype=np.float64)


def velocity_yaw(x: NavigateInputs) -> np.ndarray:
    v = np.asarray(x["linear_velocity_w"], dtype=np.float64)
    return np.concatenate((world_to_yaw(v, yaw_from_quat(x["quat_wxyz"])), v[..., 2:3]), axis=-1)


def last_subgoal_yaw(x: NavigateInputs) -> np.ndarray:
    return world_to_yaw(x["last_subgoal_w"] - x["position_w"], yaw_from_quat(x["quat_wxyz"]))


NAVIGATE_OBSERVATION_FUNCTIONS: dict[str, Callable[[NavigateInputs], np.ndarray]] = {
    f.__name__: f for f in (goal_yaw, ranges_m, velocity_yaw, last_subgoal_yaw)
}


def compute_navigate_observation(terms, inputs: NavigateInputs) -> np.ndarray:
    """The level's observation (float32), each term clipped; a non-finite input is refused."""
    parts = []
    for term in terms:
        fn = NAVIGATE_OBSERVATION_FUNCTIONS.get(term.name)
        if fn is None:
            raise ObservationError(f"the navigate contract asks for term {term.name!r}, which this runtime does not implement "
                                   f"(known: {sorted(NAVIGATE_OBSERVATION_FUNCTIONS)}); update robot_hrl")
        value = fn(inputs)
        if value.shape[-1] != term.size:
            raise ObservationError(f"navigate term {term.name!r} has size {value.shape[-1]}, the contract says {term.size}")
        parts.append(np.clip(value, term.clip[0], term.clip[1]))
    obs = np.concatenate(parts, axis=-1)
    if not np.all(np.isfinite(obs)) or not all(np.all(np.isfinite(np.asarray(inputs[k], dtype=np.float64))) for k in inputs):
        raise ObservationError("the navigation observation is not finite (NaN or inf in the state, goal or ranges); "
                               "no subgoal is sent")
    return obs.astype(np.float32)


def subgoal_from_action(action: np.ndarray, position_w: np.ndarray, quat_wxyz: np.ndarray, spec: SubgoalActionSpec) -> np.ndarray:
    """Normalized action (..., 2) -> subgoal (..., 3), world ENU: offset in the yaw frame, inside the disc."""
    a = np.clip(np.nan_to_num(np.asarray(action, dtype=np.float64), nan=0.0), -1.0, 1.0) * spec.max_offset_m
    norm = np.linalg.norm(a, axis=-1, keepdims=True)
    a = a * np.minimum(1.0, spec.max_offset_m / np.maximum(norm, 1e-12))
    yaw = yaw_from_quat(quat_wxyz)
    c, s = np.cos(yaw), np.sin(yaw)
    p = np.asarray(position_w, dtype=np.float64)
    x = p[..., 0] + c * a[..., 0] - s * a[..., 1]
    y = p[..., 1] + s * a[..., 0] + c * a[..., 1]
    return np.stack((x, y, np.full_like(x, spec.flight_height_m)), axis=-1)


"""The policy contract: what a policy was trained on, written into its ONNX metadata.

One contract describes, once, the robot, the control rate, the ordered observation terms
and the action mapping. The exporter writes it; the runtime, the C code generator and the
simulators read it. Mismatches are refused with an error that names them.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robot_hrl.errors import ContractError
from robot_hrl.robots.quadrotor import QuadrotorParams

CONTRACT_SCHEMA_VERSION = 1
CONTRACT_METADATA_KEY = "robot_hrl.contract"
"""Key of the contract JSON in the ONNX model's metadata_props."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ObservationTerm(BaseModel):
    """One slice of the observation vector."""

    model_config = _FROZEN
    name: str = Field(description="term function name in robot_hrl.contract.observations")
    size: int = Field(gt=0)
    frame: str = Field(description="'world_enu', 'body_flu' or 'none'")
    units: str
    clip: tuple[float, float] = Field(description="the term is clipped to [lo, hi] after noise")
    description: str = ""

    @model_validator(mode="after")
    def _check_clip(self) -> "ObservationTerm":
        if not self.clip[0] < self.clip[1]:
            raise ValueError(f"observation term {self.name!r}: clip {self.clip} must have lo < hi")
        return self


class ActionTerm(BaseModel):
    """One policy output a in [-1, 1], mapped linearly to ``low + (a + 1) / 2 * (high - low)``."""

    model_config = _FROZEN
    name: str
    units: str
    low: float
    high: float


class ActionSpec(BaseModel):
    """How the normalized policy outputs become a command the firmware executes."""

    model_config = _FROZEN
    mode: Literal["collective_thrust_body_torque"] = "collective_thrust_body_torque"
    firmware_control_mode: Literal["controlModeForceTorque"] = "controlModeForceTorque"
    """crazyflie-firmware control_t mode: thrustSi (N) and torqueX/Y/Z (N m), mixed onboard."""
    terms: tuple[ActionTerm, ...]

    @property
    def size(self) -> int:
        return len(self.terms)


class RobotRef(BaseModel):
    model_config = _FROZEN
    name: str
    params_sha256: str


class Conventions(BaseModel):
    model_config = _FROZEN
    world_frame: Literal["ENU"] = "ENU"
    body_frame: Literal["FLU"] = "FLU"
    quaternion_order: Literal["wxyz"] = "wxyz"


class PolicyContract(BaseModel):
    """The single source of truth between training, export and every runtime target."""

    model_config = _FROZEN
    schema_version: int = CONTRACT_SCHEMA_VERSION
    skill: str = "goto"
    robot: RobotRef
    control_rate_hz: float = Field(gt=0)
    observations: tuple[ObservationTerm, ...]
    action: ActionSpec
    subgoal_radius_m: float = Field(gt=0)
    conventions: Conventions = Conventions()

    @property
    def observation_size(self) -> int:
        return sum(term.size for term in self.observations)

    @property
    def action_size(self) -> int:
        return self.action.size

    # ---- serialization --------------------------------------------------------------------
    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes | None) -> "PolicyContract":
        if text is None or (isinstance(text, (str, bytes)) and not text.strip()):
            raise ContractError(
                f"the model carries no contract (metadata key {CONTRACT_METADATA_KEY!r}); "
                "re-export it with `python deploy/export.py <run-dir> --out models/<name>.onnx`"
            )
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ContractError(f"the contract is not valid JSON ({exc}); re-export the model") from exc
        version = data.get("schema_version") if isinstance(data, dict) else None
        if version != CONTRACT_SCHEMA_VERSION:
            raise ContractError(
                f"contract schema_version {version!r} is not supported (this runtime reads "
                f"version {CONTRACT_SCHEMA_VERSION}); re-export the model with this version of robot_hrl"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ContractError(f"the contract is malformed: {exc}; re-export the model") from exc

    # ---- compatibility --------------------------------------------------------------------
    def mismatches(
        self,
        robot: QuadrotorParams,
        *,
        control_rate_hz: float | None = None,
        observation_size: int | None = None,
        action_mode: str | None = None,
    ) -> list[str]:
        """Every way this contract disagrees with the robot and rate it is started for."""
        problems: list[str] = []
        if self.robot.name != robot.name:
            problems.append(f"robot: model trained for {self.robot.name!r}, started for {robot.name!r}")
        elif self.robot.params_sha256 != robot.params_sha256():
            problems.append(
                f"robot parameters: model trained on {robot.name} parameters with hash "
                f"{self.robot.params_sha256[:12]}, the runtime's robot model hashes to "
                f"{robot.params_sha256()[:12]} (robot_hrl/robots changed since training: retrain or pin the old values)"
            )
        if control_rate_hz is not None and abs(self.control_rate_hz - control_rate_hz) > 1e-9:
            problems.append(f"control rate: model runs at {self.control_rate_hz} Hz, node configured for {control_rate_hz} Hz")
        if observation_size is not None and observation_size != self.observation_size:
            problems.append(f"observation size: contract says {self.observation_size}, the graph takes {observation_size}")
        if action_mode is not None and action_mode != self.action.mode:
            problems.append(f"action mode: model outputs {self.action.mode!r}, robot expects {action_mode!r}")
        return problems

    def check_compatible(self, robot: QuadrotorParams, **kwargs) -> None:
        """Raise :class:`ContractError` naming every mismatch."""
        problems = self.mismatches(robot, **kwargs)
        if problems:
            raise ContractError("the model does not match this robot: " + "; ".join(problems))

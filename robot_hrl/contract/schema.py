"""The policy contract: what a policy was trained on, written into its ONNX metadata.

One contract describes, once, the robot, the control rate, the ordered observation terms
and the action mapping. The exporter writes it; the runtime, the C code generator and the
simulators read it. Mismatches are refused with an error that names them.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robot_hrl.contract.action_modes import ACTION_MODES, get_action_mode
from robot_hrl.errors import ContractError

if TYPE_CHECKING:
    from robot_hrl.robots.base import Robot

CONTRACT_SCHEMA_VERSION = 1
CONTRACT_METADATA_KEY = "robot_hrl.contract"
"""Key of the contract JSON in the ONNX model's metadata_props."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ErrorIntegral(BaseModel):
    """The parameters of a leaky, clipped integral of the position error (``robot_hrl.contract.error_integral``).

    Each control tick (period ``1 / control_rate_hz`` of the contract) the integral decays by
    ``exp(-dt / time_constant_s)``, adds ``dt`` times the position error the policy saw on the previous tick
    (subgoal minus position, in ``frame``: world ENU, or rotated into the robot's yaw frame), and is clipped to
    ``[-limit_m_s, limit_m_s]``
    per axis (anti-windup). It restarts at zero on the first tick after a reset and whenever the subgoal moves
    by more than ``subgoal_change_m``. With ``active_radius_m`` set (conditional integration), a tick's error counts
    only while the robot is within that distance of the subgoal (outside, zero is added and the integral only
    decays), so the approach sees no integral. A runtime builds it from these numbers alone.
    """

    model_config = _FROZEN
    time_constant_s: float = Field(gt=0, description="leak time constant, s")
    limit_m_s: float = Field(gt=0, description="anti-windup clip of each axis, m s")
    subgoal_change_m: float = Field(ge=0, description="a subgoal move larger than this (any axis, m) restarts the integral")
    frame: Literal["world_enu", "yaw_flu"] = Field(
        description="the error's frame: 'world_enu', or 'yaw_flu' (world ENU rotated by minus the robot's yaw: x along its heading)")
    active_radius_m: float | None = Field(
        default=None, gt=0,
        description="conditional integration: the error counts only while the distance to the subgoal (world, m) is at most "
                    "this; None: always (left out of the JSON, so contracts without it keep their bytes)")


class ObservationTerm(BaseModel):
    """One slice of the observation vector."""

    model_config = _FROZEN
    name: str = Field(description="term function name in robot_hrl.contract.observations")
    size: int = Field(gt=0)
    frame: str = Field(description="'world_enu', 'body_flu' or 'none'")
    units: str
    clip: tuple[float, float] = Field(description="the term is clipped to [lo, hi] after noise")
    description: str = ""
    scale: float | tuple[float, ...] | None = None
    """The clipped term is multiplied by this (one number, or one per value); None: 1. Isaac Lab's order:
    clip, then scale (``ObservationManager.compute_group``), so a term is ``clip(raw) * scale``."""
    history_length: int | None = Field(default=None, ge=0)
    """h > 0: the term holds its last h values (each ``size / h`` wide), oldest first, flattened, filled with
    the first value after a reset (Isaac Lab's ``CircularBuffer``); None or 0: the current value only."""
    source: str | None = None
    """What computes the raw term where this runtime does not (e.g. ``isaaclab.envs.mdp.observations:joint_pos_rel``):
    the deployment supplies its raw value by name (``OnnxPolicy.act_terms``)."""
    joints: tuple[str, ...] | None = None
    """The joints a per-joint term covers, in its order."""
    integral: ErrorIntegral | None = None
    """A stateful term: the leaky integral of the position error with these parameters (None: a pure term)."""

    @model_validator(mode="after")
    def _check_clip(self) -> "ObservationTerm":
        if not self.clip[0] < self.clip[1]:
            raise ValueError(f"observation term {self.name!r}: clip {self.clip} must have lo < hi")
        if self.history_length and self.size % self.history_length:
            raise ValueError(f"observation term {self.name!r}: size {self.size} is not a multiple of its "
                             f"history_length {self.history_length}")
        if isinstance(self.scale, tuple) and len(self.scale) != self.frame_size:
            raise ValueError(f"observation term {self.name!r}: {len(self.scale)} scales for {self.frame_size} values")
        if self.joints is not None and len(self.joints) != self.frame_size:
            raise ValueError(f"observation term {self.name!r}: {len(self.joints)} joints for {self.frame_size} values")
        if self.integral is not None and (self.size != 3 or self.history_length or self.scale is not None):
            raise ValueError(f"observation term {self.name!r}: an error integral has 3 values, no history and no scale")
        return self

    @property
    def frame_size(self) -> int:
        """Values of one time step of the term (``size`` without its history)."""
        return self.size // self.history_length if self.history_length else self.size


class ActionTerm(BaseModel):
    """One policy output a in [-1, 1], mapped linearly to ``low + (a + 1) / 2 * (high - low)``."""

    model_config = _FROZEN
    name: str
    units: str
    low: float
    high: float
    joint: str | None = None
    """The joint this term commands (joint modes), when it is one."""
    default_position: float | None = None
    """The joint's default position (rad or m), where the trainer had one (Isaac Lab's ``default_joint_pos``)."""

    @model_validator(mode="after")
    def _check_bounds(self) -> "ActionTerm":
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"action term {self.name!r}: bounds [{self.low}, {self.high}] must be finite with low < high")
        return self

    @property
    def offset(self) -> float:
        """The command at a = 0: (low + high) / 2 (Isaac Lab's action ``offset``)."""
        return 0.5 * (self.low + self.high)

    @property
    def scale(self) -> float:
        """The command per unit of normalized action: (high - low) / 2 (Isaac Lab's action ``scale``)."""
        return 0.5 * (self.high - self.low)


class ActionSpec(BaseModel):
    """How the normalized policy outputs become a command the robot executes
    (robot_hrl.contract.action_modes: the mapping, the message, the executing controller)."""

    model_config = _FROZEN
    mode: str = Field(description="a registered action mode (robot_hrl.contract.action_modes.ACTION_MODES)")
    firmware_control_mode: str | None = None
    """What executes the command on the robot, one of the mode's ``target_modes`` (for the Crazyflie:
    crazyflie-firmware's controlModeForceTorque, thrustSi (N) and torqueX/Y/Z (N m) mixed onboard);
    None: the mode's default."""
    terms: tuple[ActionTerm, ...]
    output_clip: float | None = Field(default=None, gt=0)
    """The policy's outputs are clipped to [-c, c] before the mapping (Isaac Lab's ``RslRlVecEnvWrapper``
    ``clip_actions``; the exported graph holds the clip); None: the mode's own (``[-1, 1]`` where it clips)."""

    @model_validator(mode="before")
    @classmethod
    def _default_target(cls, data):
        if isinstance(data, dict) and data.get("firmware_control_mode") is None and data.get("mode") in ACTION_MODES:
            data = {**data, "firmware_control_mode": ACTION_MODES[data["mode"]].target_modes[0]}
        return data

    @model_validator(mode="after")
    def _check_mode(self) -> "ActionSpec":
        if self.mode not in ACTION_MODES:
            raise ValueError(f"unknown action mode {self.mode!r}; known modes: {sorted(ACTION_MODES)}")
        mode = get_action_mode(self.mode)
        if self.firmware_control_mode not in mode.target_modes:
            raise ValueError(f"action mode {self.mode!r} is executed by {list(mode.target_modes)}, "
                             f"not firmware_control_mode {self.firmware_control_mode!r}")
        if not self.terms:
            raise ValueError("the action spec has no terms")
        if mode.size is not None and len(self.terms) != mode.size:
            raise ValueError(f"action mode {self.mode!r} takes {mode.size} terms "
                             f"({', '.join(mode.message_fields)}), the spec has {len(self.terms)}")
        return self

    @property
    def size(self) -> int:
        return len(self.terms)


class RobotRef(BaseModel):
    model_config = _FROZEN
    name: str
    params_sha256: str
    kind: str | None = None
    """None: a robot of the registry (robot_hrl.robots, ``name``). ``"articulation"``: a robot the contract
    itself describes (an Isaac Lab articulation: ``joints``, ``default_joint_positions``); its
    ``params_sha256`` hashes that description (robot_hrl.robots.articulation)."""
    joints: tuple[str, ...] | None = None
    """The articulation's joints in its order (``kind == "articulation"``)."""
    default_joint_positions: tuple[float, ...] | None = None
    """Their default positions (rad or m), in the same order."""
    source: str | None = None
    """Where the description comes from (e.g. the Isaac Lab task id and the robot's USD file)."""

    @model_validator(mode="after")
    def _check_kind(self) -> "RobotRef":
        if self.kind not in (None, "articulation"):
            raise ValueError(f"robot kind {self.kind!r} is unknown; known: None (a registered robot), 'articulation'")
        if self.kind == "articulation":
            if not self.joints or self.default_joint_positions is None or len(self.joints) != len(self.default_joint_positions):
                raise ValueError("an articulation robot needs its joints and one default position per joint")
        return self


class Conventions(BaseModel):
    model_config = _FROZEN
    world_frame: Literal["ENU"] = "ENU"
    body_frame: Literal["FLU"] = "FLU"
    quaternion_order: Literal["wxyz"] = "wxyz"


class FirmwareRef(BaseModel):
    """The flight firmware whose actuator chain the policy was trained on (its output stage turns the policy's
    command into motor PWM: a model trained on one chain's constants must not fly another's)."""

    model_config = _FROZEN
    name: str = Field(description="e.g. crazyflie-firmware")
    release: str = Field(description="the release whose sources the chain follows, e.g. 2026.08")
    platform: str = Field(description="the firmware's build platform, e.g. cf2")
    propellers: str = Field(description="the propeller constants the chain uses, e.g. 2.1+")
    control_mode: str = Field(description="the firmware's control mode the policy's command is written in, e.g. controlModeForceTorque")


class PolicyContract(BaseModel):
    """The single source of truth between training, export and every runtime target."""

    model_config = _FROZEN
    schema_version: int = CONTRACT_SCHEMA_VERSION
    skill: str = Field(description="the skill the policy performs, e.g. goto")
    robot: RobotRef
    control_rate_hz: float = Field(gt=0)
    observations: tuple[ObservationTerm, ...]
    action: ActionSpec
    subgoal_radius_m: float | None = Field(default=None, gt=0)
    """The reach of one subgoal (skills that take subgoals); None: the policy takes none (e.g. an Isaac Lab task)."""
    conventions: Conventions = Conventions()
    firmware: FirmwareRef | None = None
    """The firmware actuator chain of the robot at training time (``robot_hrl.robots.actuator_chain.firmware_of``);
    None for a robot without one."""

    @property
    def observation_size(self) -> int:
        return sum(term.size for term in self.observations)

    @property
    def action_size(self) -> int:
        return self.action.size

    # ---- serialization --------------------------------------------------------------------
    def to_json(self) -> str:
        """The JSON the model carries. Unset optional fields (None) are left out, so a contract that uses none of
        them serializes as before they existed (the shipped models' bytes)."""
        return self.model_dump_json(exclude_none=True)

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
        if isinstance(data, dict):
            from robot_hrl.contract.reader import LEVEL, contract_kind, level_refusal

            if contract_kind(data) == LEVEL:
                raise ContractError(level_refusal(data))
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
        robot: "Robot",
        *,
        control_rate_hz: float | None = None,
        observation_size: int | None = None,
        action_mode: str | None = None,
        action_size: int | None = None,
    ) -> list[str]:
        """Every way this contract disagrees with the robot (robot_hrl.robots.base.Robot) and the rate,
        graph sizes and action mode it is started for."""
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
        if action_size is not None and action_size != self.action_size:
            problems.append(f"action size: contract says {self.action_size}, the graph gives {action_size}")
        if action_mode is not None and action_mode != self.action.mode:
            problems.append(f"action mode: model outputs {self.action.mode!r}, the runtime expects {action_mode!r}")
        if self.robot.name == robot.name:
            problems.extend(action_mismatches(self.action, robot))
            problems.extend(firmware_mismatches(self.firmware, robot.name))
        return problems

    def check_compatible(self, robot: "Robot", **kwargs) -> None:
        """Raise :class:`ContractError` naming every mismatch."""
        problems = self.mismatches(robot, **kwargs)
        if problems:
            raise ContractError("the model does not match this robot: " + "; ".join(problems))


def firmware_mismatches(firmware: "FirmwareRef | None", robot_name: str) -> list[str]:
    """How a contract's firmware disagrees with the firmware actuator chain the robot declares now."""
    from robot_hrl.robots.actuator_chain import firmware_of

    expected = firmware_of(robot_name)
    if expected is None:
        return [] if firmware is None else [f"firmware: model trained on {firmware.name} {firmware.release}, robot {robot_name!r} declares no firmware chain"]
    if firmware is None:
        return [f"firmware: model trained without a firmware actuator chain, robot {robot_name!r} flies {expected['name']} "
                f"{expected['release']} ({expected['platform']}, {expected['propellers']} propellers): retrain on it"]
    got = firmware.model_dump()
    return [f"firmware {key}: model trained on {got[key]!r}, the robot's chain is {expected[key]!r} (retrain on the robot's chain)"
            for key in ("name", "release", "platform", "propellers", "control_mode") if got[key] != expected[key]]


ACTION_BOUND_RTOL = 1e-9
"""Relative tolerance of the action-bound comparison (JSON round trips of the bounds are exact)."""


def action_mismatches(spec: ActionSpec, robot: "Robot") -> list[str]:
    """How ``spec`` disagrees with what ``robot`` accepts: its action mode, its term names, units and
    sizes, and its bounds, which must lie within the robot's own action spec for that mode (a model may
    command less than the robot can do, never more)."""
    if spec.mode not in robot.action_modes:
        return [f"action mode: model outputs {spec.mode!r}, robot {robot.name!r} takes {list(robot.action_modes)}"]
    own = robot.action_spec(spec.mode)
    if spec.size != own.size:
        return [f"action size: model outputs {spec.size} terms, robot {robot.name!r} takes {own.size} in mode {spec.mode!r}"]
    problems = []
    for term, ref in zip(spec.terms, own.terms):
        if (term.name, term.units) != (ref.name, ref.units):
            problems.append(f"action term: model outputs {term.name!r} in {term.units!r}, robot {robot.name!r} "
                            f"expects {ref.name!r} in {ref.units!r}")
            continue
        tol = ACTION_BOUND_RTOL * max(abs(ref.low), abs(ref.high))
        if term.low < ref.low - tol or term.high > ref.high + tol:
            problems.append(
                f"action bounds: the model maps {term.name} onto [{term.low:.6g}, {term.high:.6g}] {term.units}, "
                f"beyond robot {robot.name!r}'s [{ref.low:.6g}, {ref.high:.6g}] (the robot's actuator model "
                "changed since export, or the model is for a stronger robot: retrain or re-export it)"
            )
    return problems

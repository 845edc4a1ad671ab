"""The contract of a learned level above a skill (skill ``navigate``), and its numpy observation terms.

Levels are skills too (DESIGN.md): a ``navigate`` level observes the goal, the ranges, the velocity,
the last subgoal and a memory of range hits, and outputs the next subgoal of the skill below it.
Its contract is a :class:`NavigateContract`:

- ``action``: an :class:`~robot_hrl.contract.schema.ActionSpec` in the registered action mode
  ``subgoal_offset`` (robot_hrl.contract.action_modes): two outputs in [-1, 1] -> a horizontal
  offset from the robot in its yaw frame, each term on [-R, R] (the one action mapping,
  ``normalized_to_command``), then projected onto the disc of radius R. R is at most the lower
  skill's subgoal radius: the HRAC adjacency constraint, checked when the contract is read.
- ``subgoal``: how the offset becomes a subgoal (frame, projection, the flight height).
- ``lower_skill``: the skill it was trained over, by name, the sha256 of its ONNX file and of its
  contract JSON, its subgoal radius and control rate. :meth:`NavigateContract.check_lower_skill`
  refuses any other goto model; the planner node and the evaluation call it before flying.
- ``sensors``: the range sensors in the order of the ``ranges_m`` term, and the suite's hash.
- ``memory``: the range memory's parameters (robot_hrl.sensing.memory; the ``range_memory_yaw`` term).
- ``heading``: how the yaw is steered under the level (robot_hrl.runtime.heading), when it is.
- ``recurrent``: the state a recurrent level carries from one decision to the next, when it has one.
- ``decision_rate_hz``: how often the level decides.

Every contract is stored under the one metadata key (``robot_hrl.contract``);
:func:`robot_hrl.contract.read_contract` reads either kind (a discriminated union on the action
mode), and each kind's ``from_json`` refuses the other with an error that says what to do.

The observation terms have torch twins in ``sim/envs/terms/navigate_observations.py`` and
``sim/envs/terms/navigate_memory.py`` (parity: tests/test_navigate_env.py, tests/test_navigate_memory.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robot_hrl.contract.action_modes import ACTION_MODES, SUBGOAL_OFFSET, normalized_to_command
from robot_hrl.contract.schema import CONTRACT_METADATA_KEY, ActionSpec, ActionTerm, Conventions, ObservationTerm, PolicyContract, RobotRef
from robot_hrl.errors import ContractError, ObservationError

NAVIGATE_SCHEMA_VERSION = 2
"""1: phase 1's proposal (its own action spec); 2: the registered ``subgoal_offset`` mode and the range memory."""
NAVIGATE_METADATA_KEY = CONTRACT_METADATA_KEY

_FROZEN = ConfigDict(frozen=True, extra="forbid")

GOAL_CLIP_M = 8.0
SPEED_CLIP_MPS = 3.0


class RangeMemorySpec(BaseModel):
    """The range memory (robot_hrl.sensing.memory): which sensors feed it, how it is kept and read."""

    model_config = _FROZEN
    sensors: tuple[str, ...] = Field(description="the rangers whose hits are remembered, in this order")
    capacity: int = Field(gt=0, description="points kept (a ring)")
    min_spacing_m: float = Field(ge=0.0, description="a hit this close to a remembered point is not added")
    sectors: int = Field(gt=0, description="sectors around the robot, sector 0 straight ahead")
    range_m: float = Field(gt=0.0, description="a sector with no point nearer reads this")
    update_rate_hz: float = Field(gt=0.0, description="how often the readings are added (the rangers' rate)")


class TrailSpec(BaseModel):
    """The trail (robot_hrl.sensing.memory: a :class:`RangeMemory` of the robot's own past positions): where the level
    has already been, read as the nearest earlier position per sector around the robot."""

    model_config = _FROZEN
    capacity: int = Field(gt=0, description="positions kept (a ring)")
    min_spacing_m: float = Field(ge=0.0, description="a position this close to a kept one is not added")
    sectors: int = Field(gt=0, description="sectors around the robot, sector 0 straight ahead")
    range_m: float = Field(gt=0.0, description="a sector with no earlier position nearer reads this")


class HeadingSpec(BaseModel):
    """How the robot's yaw is steered under the level (robot_hrl.runtime.heading): ``face_velocity`` turns the
    robot toward its horizontal velocity, so its front ranger looks along its path. A level trained with it is flown
    with it: its observations in the yaw frame (the ranges, the memory's sectors) saw the world that way."""

    model_config = _FROZEN
    mode: Literal["face_velocity"] = "face_velocity"
    max_rate_radps: float = Field(gt=0.0, le=10.0, description="the setpoint turns at most this fast, rad/s")
    natural_frequency_radps: float = Field(gt=0.0, le=50.0, description="the yaw loop's natural frequency, rad/s")
    damping_ratio: float = Field(gt=0.0, le=2.0, description="the yaw loop's damping ratio")
    min_speed_mps: float = Field(ge=0.0, description="below this horizontal speed the setpoint keeps its last target, m/s")
    max_error_rad: float = Field(gt=0.0, le=3.15, description="the setpoint stays this close to the yaw, rad")
    skill_yaw_rad: float = Field(ge=-3.1416, le=3.1416, description=(
        "the yaw the goto skill is shown, rad: its observation is built in a world frame turned about z so that the "
        "robot's yaw reads as this, the skill's own equilibrium yaw (a skill that observes world-frame terms is "
        "yaw-equivariant in the physics, not in its weights; sim/skill_yaw.py measures it)"))
    lead_s: float = Field(0.0, ge=0.0, le=2.0, description=(
        "the target leads the direction of motion into a turn: it is the direction of v + lead_s a_turn, where a_turn "
        "is the part of the velocity's rate of change across v (low-passed over lead_filter_s), s; 0: the velocity's "
        "own direction. A path that curves toward an edge between the front and side cones keeps the edge in the "
        "front cone"))
    lead_filter_s: float = Field(0.1, gt=0.0, le=1.0, description="time constant of the low-pass on the velocity's "
                                                                   "rate of change that the lead uses, s")
    max_yaw_rate_radps: float = Field(0.0, ge=0.0, le=20.0, description=(
        "the loop commands at most this yaw rate, rad/s: its law is a rate command (the setpoint's rate plus "
        "w_n / (2 zeta) times the yaw error) clipped to this, then a damping torque toward it; unclipped it is the "
        "plain PD. 0: no limit (the PD alone; its rate command reaches max_rate_radps + w_n max_error_rad / (2 zeta))"))


class RecurrentSpec(BaseModel):
    """A level that keeps a recurrent state between its decisions (a GRU beside its MLP: sim/agents/memory_model.py):
    the graph takes ``input_name`` [1, batch, hidden_size] beside ``obs`` and returns ``output_name`` of the same shape
    beside ``actions``; the runtime feeds each decision's output to the next and starts from zeros at every new goal."""

    model_config = _FROZEN
    kind: Literal["gru"] = "gru"
    hidden_size: int = Field(gt=0, le=1024, description="the state's size")
    input_name: str = "h_in"
    output_name: str = "h_out"
    reset: Literal["new_goal"] = Field("new_goal", description="the state is zeros at the first decision toward a goal")


def navigate_observation_terms(max_range_m: float, num_ranges: int, max_offset_m: float,
                               memory: RangeMemorySpec | None = None,
                               trail: TrailSpec | None = None) -> tuple[ObservationTerm, ...]:
    """The ordered observation of the ``navigate`` level (with the memory's sectors when ``memory`` is given, then the
    trail's when ``trail`` is)."""
    terms = (
        ObservationTerm(name="goal_yaw", size=2, frame="yaw", units="m", clip=(-GOAL_CLIP_M, GOAL_CLIP_M),
                        description="goal minus position, horizontal, in the robot's yaw frame"),
        ObservationTerm(name="ranges_m", size=num_ranges, frame="body_flu", units="m", clip=(0.0, max_range_m),
                        description="range readings in the contract's sensor order; max range = no target"),
        ObservationTerm(name="velocity_yaw", size=3, frame="yaw", units="m/s", clip=(-SPEED_CLIP_MPS, SPEED_CLIP_MPS),
                        description="linear velocity in the robot's yaw frame"),
        ObservationTerm(name="last_subgoal_yaw", size=2, frame="yaw", units="m", clip=(-2.0 * max_offset_m, 2.0 * max_offset_m),
                        description="the last subgoal minus position, horizontal, in the robot's yaw frame"),
    )
    if memory is not None:
        terms += (ObservationTerm(name="range_memory_yaw", size=memory.sectors, frame="yaw", units="m",
                                  clip=(0.0, memory.range_m),
                                  description="nearest remembered range hit per sector around the robot (sector 0 ahead, "
                                              "counter-clockwise); robot_hrl.sensing.memory"),)
    if trail is not None:
        terms += (ObservationTerm(name="trail_yaw", size=trail.sectors, frame="yaw", units="m", clip=(0.0, trail.range_m),
                                  description="nearest earlier position of the robot per sector around it (sector 0 "
                                              "ahead, counter-clockwise; added after each decision)"),)
    return terms


def subgoal_offset_action_spec(max_offset_m: float) -> ActionSpec:
    """The ``subgoal_offset`` action spec of a level whose subgoals lie within ``max_offset_m``."""
    r = float(max_offset_m)
    return ActionSpec(mode=SUBGOAL_OFFSET.name, terms=(ActionTerm(name="offset_x_yaw", units="m", low=-r, high=r),
                                                       ActionTerm(name="offset_y_yaw", units="m", low=-r, high=r)))


class SubgoalSpec(BaseModel):
    """How the action's offset becomes the subgoal sent to the lower skill."""

    model_config = _FROZEN
    frame: Literal["yaw"] = "yaw"
    """The offset is in the robot's yaw frame (x ahead, y left, horizontal)."""
    projection: Literal["disc"] = "disc"
    """The offset is projected onto the disc of the offset radius (the terms alone span a square)."""
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
    schema_version: Literal[2] = NAVIGATE_SCHEMA_VERSION
    skill: Literal["navigate"] = "navigate"
    robot: RobotRef
    decision_rate_hz: float = Field(gt=0)
    observations: tuple[ObservationTerm, ...]
    action: ActionSpec
    subgoal: SubgoalSpec
    lower_skill: LowerSkillRef
    sensors: SensorSuiteRef
    memory: RangeMemorySpec | None = None
    trail: TrailSpec | None = None
    heading: HeadingSpec | None = None
    """The yaw loop the level was trained with (None: the yaw is left as the goto skill holds it)."""
    recurrent: RecurrentSpec | None = None
    """The level's state between decisions (None: a feed-forward level, each decision from its observation alone)."""
    conventions: Conventions = Conventions()

    @model_validator(mode="after")
    def _adjacent(self) -> "NavigateContract":
        mode = ACTION_MODES[self.action.mode]
        if not mode.subgoal:
            raise ValueError(f"action mode {self.action.mode!r} commands the robot, not a subgoal; a navigate level "
                             f"outputs mode {SUBGOAL_OFFSET.name!r}")
        lows, highs = [t.low for t in self.action.terms], [t.high for t in self.action.terms]
        r = highs[0]
        if any(abs(h - r) > 1e-12 or abs(lo + r) > 1e-12 for lo, h in zip(lows, highs)):
            raise ValueError(f"the subgoal offset terms must all span [-R, R] with one R, got {list(zip(lows, highs))}")
        if r > self.lower_skill.subgoal_radius_m + 1e-9:
            raise ValueError(f"the subgoal offset radius {r} m exceeds the lower skill's subgoal radius "
                             f"{self.lower_skill.subgoal_radius_m} m (the adjacency constraint)")
        ranges = [t for t in self.observations if t.name == "ranges_m"]
        if ranges and ranges[0].size != len(self.sensors.names):
            raise ValueError(f"observation ranges_m has size {ranges[0].size} but the contract names "
                             f"{len(self.sensors.names)} sensors")
        memory = [t for t in self.observations if t.name == "range_memory_yaw"]
        if memory and (self.memory is None or memory[0].size != self.memory.sectors):
            raise ValueError("observation range_memory_yaw needs the contract's memory section with as many sectors as its size")
        trail = [t for t in self.observations if t.name == "trail_yaw"]
        if trail and (self.trail is None or trail[0].size != self.trail.sectors):
            raise ValueError("observation trail_yaw needs the contract's trail section with as many sectors as its size")
        if self.memory is not None:
            unknown = [n for n in self.memory.sensors if n not in self.sensors.names]
            if unknown:
                raise ValueError(f"memory sensors {unknown} are not among the contract's sensors {list(self.sensors.names)}")
        return self

    @property
    def observation_size(self) -> int:
        return sum(t.size for t in self.observations)

    @property
    def action_size(self) -> int:
        return self.action.size

    @property
    def max_offset_m(self) -> float:
        """The offset radius R (the subgoal lies within R of the robot)."""
        return float(self.action.terms[0].high)

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
                                "not of a navigate level; give the navigation model (e.g. models/crazyflie_navigate.onnx)")
        if data.get("schema_version") != NAVIGATE_SCHEMA_VERSION:
            raise ContractError(f"navigate contract schema_version {data.get('schema_version')!r} is not supported "
                                f"(this runtime reads {NAVIGATE_SCHEMA_VERSION}); retrain or re-export the level with "
                                "`python sim/train_navigate.py`")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ContractError(f"the navigate contract is malformed: {exc}; re-export the model") from exc

    # ---- the pair ---------------------------------------------------------------------------------
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

    def robot_mismatches(self, robot) -> list[str]:
        """How the level disagrees with the robot it is started for (name, parameter hash, range sensors)."""
        from robot_hrl.sensing import robot_range_sensors, sensor_suite_sha256

        problems = []
        if self.robot.name != robot.name:
            problems.append(f"robot: level trained for {self.robot.name!r}, started for {robot.name!r}")
        elif self.robot.params_sha256 != robot.params_sha256():
            problems.append(f"robot parameters: level trained on hash {self.robot.params_sha256[:12]}, the runtime's "
                            f"{robot.name} hashes to {robot.params_sha256()[:12]}")
        sensors = robot_range_sensors(robot)
        if not sensors:
            problems.append(f"robot {robot.name!r} describes no range sensors; the level needs {list(self.sensors.names)}")
        elif tuple(s.name for s in sensors) != self.sensors.names or sensor_suite_sha256(sensors) != self.sensors.sha256:
            problems.append(f"range sensors: level trained with {list(self.sensors.names)} (hash {self.sensors.sha256[:12]}), "
                            f"robot has {[s.name for s in sensors]} (hash {sensor_suite_sha256(sensors)[:12]})")
        return problems


def contract_sha256(contract: PolicyContract) -> str:
    """A hash of a skill contract's canonical JSON."""
    return hashlib.sha256(json.dumps(json.loads(contract.to_json()), sort_keys=True).encode()).hexdigest()


# ---- numpy observation terms (the runtime side; inputs may carry batch dimensions) ---------------
NavigateInputs = dict[str, np.ndarray]
"""Keys: position_w (3), quat_wxyz (4), linear_velocity_w (3), goal_w (3), ranges_m (S), last_subgoal_w (3),
and range_memory_yaw (K: the memory's sectors, robot_hrl.sensing.memory.RangeMemory.sectors) when the contract has it."""


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


def range_memory_yaw(x: NavigateInputs) -> np.ndarray:
    """The memory's sectors (robot_hrl.sensing.memory.RangeMemory.sectors), read by the caller that keeps the memory."""
    return np.asarray(x["range_memory_yaw"], dtype=np.float64)


def trail_yaw(x: NavigateInputs) -> np.ndarray:
    """The trail's sectors (a RangeMemory of earlier positions, RangeMemory.sectors), read by the caller that keeps it."""
    return np.asarray(x["trail_yaw"], dtype=np.float64)


NAVIGATE_OBSERVATION_FUNCTIONS: dict[str, Callable[[NavigateInputs], np.ndarray]] = {
    f.__name__: f for f in (goal_yaw, ranges_m, velocity_yaw, last_subgoal_yaw, range_memory_yaw, trail_yaw)
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


def offset_from_action(action, action_spec: ActionSpec) -> np.ndarray:
    """Normalized actions (..., 2) -> the offset in the yaw frame (..., 2), m: the action mapping
    (``normalized_to_command``), a non-finite output as 0 (+-inf as +-1), then projected onto the disc of the
    offset radius R (the terms' common bound)."""
    a = np.nan_to_num(np.asarray(action, dtype=np.float64), nan=0.0, posinf=1.0, neginf=-1.0)
    offset = normalized_to_command(action_spec, a)
    r = float(action_spec.terms[0].high)
    norm = np.linalg.norm(offset, axis=-1, keepdims=True)
    return offset * np.minimum(1.0, r / np.maximum(norm, 1e-12))


def subgoal_from_offset(offset_yaw: np.ndarray, position_w: np.ndarray, quat_wxyz: np.ndarray, flight_height_m: float) -> np.ndarray:
    """An offset (..., 2) in the yaw frame -> the subgoal (..., 3), world ENU: rotated by the yaw, added to the
    position, at the flight height."""
    a = np.asarray(offset_yaw, dtype=np.float64)
    yaw = yaw_from_quat(quat_wxyz)
    c, s = np.cos(yaw), np.sin(yaw)
    p = np.asarray(position_w, dtype=np.float64)
    x = p[..., 0] + c * a[..., 0] - s * a[..., 1]
    y = p[..., 1] + s * a[..., 0] + c * a[..., 1]
    return np.stack((x, y, np.full_like(x, flight_height_m)), axis=-1)


def subgoal_from_action(action: np.ndarray, position_w: np.ndarray, quat_wxyz: np.ndarray,
                        contract: NavigateContract) -> np.ndarray:
    """Normalized action (..., 2) -> subgoal (..., 3), world ENU, as the contract maps it."""
    return subgoal_from_offset(offset_from_action(action, contract.action), position_w, quat_wxyz,
                               contract.subgoal.flight_height_m)

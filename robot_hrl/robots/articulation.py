"""A robot the policy contract describes itself: an articulation trained in Isaac Lab.

The registry's robots (``robot_hrl/robots/<robot>/``) carry their physics in this package. A policy
trained on another simulator's robot (an Isaac Lab task: a cartpole, a legged robot) brings its
description in its contract instead (``contract.robot.kind == "articulation"``): the joints in the
articulation's order and their default positions, and the action terms name the joints they command.
:class:`ArticulationRobot` is that description as a :class:`robot_hrl.robots.base.Robot`, so the
runtime checks such a contract the way it checks the Crazyflie's: the parameter hash, the action mode
and the bounds, the observation terms.

It is not registered (it is not a package of ``robot_hrl.robots``); ``OnnxPolicy`` builds it from the
contract when it is started without a robot. It has no shield units and sends no ROS command yet: its
action modes (``joint_position``, ``joint_effort``, ``joint_velocity``) have no command output in this
runtime (``robot_hrl.contract.action_modes``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from robot_hrl.robots.base import CommandOutput

if TYPE_CHECKING:
    from robot_hrl.contract.schema import ActionSpec, PolicyContract

ARTICULATION_KIND = "articulation"
"""``RobotRef.kind`` of a contract that describes its robot."""


def articulation_params_sha256(name: str, joints: tuple[str, ...], default_joint_positions: tuple[float, ...]) -> str:
    """The hash of an articulation's description (what ``RobotRef.params_sha256`` holds for one)."""
    text = json.dumps({"name": name, "joints": list(joints), "default_joint_positions": [float(v) for v in default_joint_positions]},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def raw_term(name: str) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """An observation term that the deployment computes: its raw value, supplied under its name."""

    def term(x: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(x[name], dtype=np.float64)

    term.__name__ = name
    return term


@dataclass(frozen=True)
class ArticulationRobot:
    """The robot a contract describes (:data:`ARTICULATION_KIND`)."""

    name: str
    """The robot's name in the contract (Isaac Lab: the articulation's USD file name)."""
    joints: tuple[str, ...]
    """Its joints, in the articulation's order."""
    default_joint_positions: tuple[float, ...]
    """Their default positions (rad or m)."""
    spec: "ActionSpec"
    """The contract's action spec: the only mode and bounds this robot takes."""
    term_names: tuple[str, ...]
    """The contract's observation terms (computed by the deployment, supplied raw by name)."""
    collision_radius_m: float = 0.0
    """Unknown: an articulation's extent is not in its contract (no shield zone uses it)."""

    @classmethod
    def from_contract(cls, contract: "PolicyContract") -> "ArticulationRobot":
        ref = contract.robot
        if ref.kind != ARTICULATION_KIND:
            raise ValueError(f"the contract's robot {ref.name!r} is a registered robot (kind {ref.kind!r}), not an articulation it describes")
        return cls(ref.name, tuple(ref.joints), tuple(ref.default_joint_positions), contract.action,
                   tuple(t.name for t in contract.observations))

    def params_sha256(self) -> str:
        return articulation_params_sha256(self.name, self.joints, self.default_joint_positions)

    @property
    def action_modes(self) -> tuple[str, ...]:
        return (self.spec.mode,)

    def action_spec(self, mode: str | None = None) -> "ActionSpec":
        if mode not in (None, self.spec.mode):
            raise ValueError(f"robot {self.name!r} has no action mode {mode!r}; it takes [{self.spec.mode!r}]")
        return self.spec

    def neutral_command(self, mode: str | None = None) -> np.ndarray:
        """Joint positions: each commanded joint's default position; efforts and velocities: zero."""
        spec = self.action_spec(mode)
        if spec.mode == "joint_position":
            defaults = dict(zip(self.joints, self.default_joint_positions))
            return np.array([defaults.get(t.joint or t.name, 0.0) for t in spec.terms])
        return np.zeros(spec.size)

    def command_output(self, mode: str | None = None) -> CommandOutput:
        return CommandOutput(topic="/joint_commands")

    @property
    def lands(self) -> bool:
        return False

    @property
    def shield_config_path(self) -> Path | None:
        """None: no shield configuration for a contract-described robot yet."""
        return None

    @property
    def shield_family(self) -> str | None:
        return None

    def observation_terms(self) -> Mapping[str, Callable]:
        return {name: raw_term(name) for name in self.term_names}

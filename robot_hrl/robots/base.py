"""What the stack asks a robot: the robot protocol.

A robot is a package ``robot_hrl/robots/<robot>/`` (as mjlab's asset zoo) whose ``__init__`` names
its robot object ``ROBOT``; the registry (:mod:`robot_hrl.robots`) finds it there. The contract,
the runtime, the shield, the skill node, the planner and the simulators ask that object, never a
particular robot by name:

=========================  =================================================================
``name``                   the name in contracts, shield configs and node parameters
``params_sha256()``        hash of the physical parameters (a contract records it)
``collision_radius_m``     a sphere around the robot (shield zones, planner inflation)
``action_modes``           the action modes it executes (robot_hrl.contract.action_modes), default first
``action_spec(mode)``      each mode's action spec, its bounds sized from the robot
``neutral_command(mode)``  the command that keeps it where it is (a quadrotor: hover; a rover: stop)
``command_output(mode)``   the topic and frame of its command message (the message from the mode)
``lands``                  it flies: a subgoal on the floor asks it to land
``shield_config_path``     its shield YAML (units, limits), ``<package>/shield.yaml``
``shield_family``          the module of its shield model and own units (robot_hrl.safety.families)
``observation_terms()``    the observation terms its contracts may use, by name
=========================  =================================================================

The physical parameters stay plain frozen dataclasses (their fields are what the hash covers);
the protocol is met by methods and class attributes, which the hash does not see.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from robot_hrl.contract.schema import ActionSpec

ROBOTS_DIR = Path(__file__).resolve().parent
"""``robot_hrl/robots``: one package per robot below it."""


@dataclass(frozen=True)
class CommandOutput:
    """Where a robot's command goes on the ROS graph (the message type comes from the action mode)."""

    topic: str
    """Topic of the command, e.g. ``/cmd_wrench`` or ``/cmd_vel``."""
    frame_id: str = "base_link"
    """``header.frame_id`` of the command: the body frame (REP 105)."""


@runtime_checkable
class Robot(Protocol):
    """The robot protocol (see the module docstring)."""

    name: str
    collision_radius_m: float

    def params_sha256(self) -> str: ...

    @property
    def action_modes(self) -> tuple[str, ...]: ...

    def action_spec(self, mode: str | None = None) -> "ActionSpec": ...

    def neutral_command(self, mode: str | None = None) -> np.ndarray: ...

    def command_output(self, mode: str | None = None) -> CommandOutput: ...

    @property
    def lands(self) -> bool: ...

    @property
    def shield_config_path(self) -> Path: ...

    @property
    def shield_family(self) -> str: ...

    def observation_terms(self) -> Mapping[str, Callable]: ...


def resolve_mode(robot: Robot, mode: str | None) -> str:
    """``mode``, or the robot's default mode; a ValueError naming the robot's modes when it has not got it."""
    if mode is None:
        return robot.action_modes[0]
    if mode not in robot.action_modes:
        raise ValueError(f"robot {robot.name!r} has no action mode {mode!r}; it takes {list(robot.action_modes)}")
    return mode


def package_shield_config(name: str) -> Path:
    """``robot_hrl/robots/<name>/shield.yaml``: where a robot package keeps its shield configuration."""
    return ROBOTS_DIR / name / "shield.yaml"

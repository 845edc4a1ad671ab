"""Shield families: what a kind of robot adds to the robot-neutral shield.

A family (``quadrotor``, ``diff_drive``) brings the YAML sections its parts read, its own units
(a quadrotor's ``limits``), and three builders: its shield model (the robot's constants and its
stopping model, :mod:`robot_hrl.safety.stopping`, plus the neutral and blind commands and the
actuator-estimate gains), its backup controller and its dead reckoning. The shield YAML names the
family (``model: quadrotor``); the robot names the module that registers it
(``robot.shield_family``), so a new robot family is added with its robot package.

The model a family builds meets this protocol (besides the stopping model's):

* ``dt``: the control period, s;
* ``neutral_command()``: the command the actuators are assumed to produce at start (hover, standstill);
* ``blind_command()``: the command without any state (a quadrotor: level thrust below hover);
* ``off_command()``: motors off;
* ``estimate_gain``: the first-order lag gain per tick of the actuator estimate (the slowest actuator
  designed for).

The backup: ``reset()``, ``command(p, v, r, w, target, land=False) -> command``,
``landed(tick, floor_z) -> bool``, and the stop without a position, ``blind(tick, since_s, floor_z)
-> command or None`` (None: done, motors off; see :mod:`robot_hrl.safety.blind`). The dead
reckoning: ``reset(p, v, q, w, history)`` (``history``: the outputs sent before that state, oldest
first, for the actuators' state), ``step(command)``, ``p, v, q, w``, ``valid``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from robot_hrl.errors import ConfigError


@dataclass(frozen=True)
class ShieldFamily:
    """The parts of a shield one kind of robot brings."""

    name: str
    """The shield YAML's ``model`` value, e.g. ``quadrotor``."""
    sections: dict[str, type]
    """YAML sections the family's parts read (required), each a pydantic model."""
    units: dict[str, type]
    """The family's own units, by the name the YAML lists them under."""
    build_model: Callable[..., Any]
    """``(robot, config, action_map) -> model``; raises ConfigError when the config does not fit the robot."""
    build_backup: Callable[..., Any]
    """``(model, config) -> backup controller``."""
    build_predictor: Callable[..., Any]
    """``(model) -> dead reckoning``."""
    description: str = field(default="", compare=False)


FAMILIES: dict[str, ShieldFamily] = {}


def register_family(family: ShieldFamily) -> ShieldFamily:
    FAMILIES[family.name] = family
    return family


def get_family(name: str) -> ShieldFamily:
    """The family ``name``; the families of every registered robot are loaded on a miss."""
    if name not in FAMILIES:
        from robot_hrl.robots import ROBOTS

        for robot in ROBOTS.values():
            importlib.import_module(robot.shield_family)
    family = FAMILIES.get(name)
    if family is None:
        raise ConfigError(f"unknown shield model {name!r}; the robots' families are {sorted(FAMILIES)}")
    return family


def robot_family(robot) -> ShieldFamily:
    """The shield family of ``robot`` (imports its module)."""
    module = importlib.import_module(robot.shield_family)
    family = getattr(module, "FAMILY", None)
    if family is None:
        raise ConfigError(f"robot {robot.name!r}: its shield family module {robot.shield_family} defines no FAMILY")
    return family

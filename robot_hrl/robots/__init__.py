"""Robot models, one package per robot. Add a robot by adding its package.

A package ``robot_hrl/robots/<robot>/`` whose ``__init__`` defines ``ROBOT`` (an object that meets
:class:`robot_hrl.robots.base.Robot`) is registered under ``ROBOT.name`` when this package is
imported; nothing else needs editing. Family packages (``quadrotor``) define no ``ROBOT``.
"""

from __future__ import annotations

import importlib
import pkgutil

from robot_hrl.robots.base import CommandOutput, Robot
from robot_hrl.robots.quadrotor import STANDARD_GRAVITY_MPS2, QuadrotorParams

DEFAULT_ROBOT = "crazyflie_2x"
"""The robot the nodes and tools start for when none is named (their ``robot`` parameter's default)."""

ROBOTS: dict[str, Robot] = {}
"""Every registered robot, by name."""


def register_robot(robot: Robot) -> Robot:
    """Register ``robot`` under its name (a package's ``ROBOT`` is registered on import)."""
    if not isinstance(robot, Robot):
        missing = [m for m in ("name", "collision_radius_m", "params_sha256", "action_modes", "action_spec",
                               "neutral_command", "command_output", "lands", "shield_config_path", "shield_family",
                               "observation_terms") if not hasattr(robot, m)]
        raise TypeError(f"{robot!r} does not meet the robot protocol (robot_hrl.robots.base.Robot); missing: {missing}")
    other = ROBOTS.get(robot.name)
    if other is not None and other is not robot:
        raise ValueError(f"two robots are named {robot.name!r}; robot names must be unique")
    ROBOTS[robot.name] = robot
    return robot


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            module = importlib.import_module(f"{__name__}.{info.name}")
            robot = getattr(module, "ROBOT", None)
            if robot is not None:
                register_robot(robot)


_discover()


def get_robot(name: str) -> Robot:
    """Return the registered robot called ``name``."""
    try:
        return ROBOTS[name]
    except KeyError:
        raise KeyError(
            f"unknown robot {name!r}; known robots: {sorted(ROBOTS)}. "
            "Add a robot as a package robot_hrl/robots/<name>/ whose __init__ defines ROBOT."
        ) from None


def __getattr__(name: str):
    """``robot_hrl.robots.CRAZYFLIE_2X``: the registered robot of that name (robots are looked up, not imported)."""
    if name == "CRAZYFLIE_2X":
        return get_robot("crazyflie_2x")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_robot() -> Robot:
    """The robot named :data:`DEFAULT_ROBOT`."""
    return get_robot(DEFAULT_ROBOT)


__all__ = ["CRAZYFLIE_2X", "CommandOutput", "DEFAULT_ROBOT", "QuadrotorParams", "ROBOTS", "Robot", "STANDARD_GRAVITY_MPS2",
           "default_robot", "get_robot", "register_robot"]

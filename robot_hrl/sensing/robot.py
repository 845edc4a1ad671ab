"""Which range sensors a robot carries: ``RANGERS`` in its package's ``rangers`` module.

A robot package that carries rangers lists them, in the order its policies observe them, as
``RANGERS`` in ``robot_hrl/robots/<robot>/rangers.py`` (the Crazyflie: the Multi-ranger deck and the
Flow deck's down ranger). A robot object may instead answer ``range_sensors`` itself. Everything
else (the simulators, the sim node, the planner node, the range shield unit, a level's contract)
asks :func:`robot_range_sensors`, never a robot by name.
"""

from __future__ import annotations

import importlib

from robot_hrl.sensing.range import RangeSensorSpec


def robot_range_sensors(robot) -> tuple[RangeSensorSpec, ...]:
    """The robot's range sensors (empty when it carries none)."""
    own = getattr(robot, "range_sensors", None)
    if own is not None:
        return tuple(own)
    try:
        module = importlib.import_module(f"robot_hrl.robots.{robot.name}.rangers")
    except ModuleNotFoundError as exc:
        if exc.name in (f"robot_hrl.robots.{robot.name}", f"robot_hrl.robots.{robot.name}.rangers"):
            return ()
        raise
    return tuple(getattr(module, "RANGERS", ()))


def range_sensor(robot, name: str) -> RangeSensorSpec:
    """The robot's ranger ``name``; a KeyError naming the ones it has otherwise."""
    for s in robot_range_sensors(robot):
        if s.name == name:
            return s
    raise KeyError(f"robot {robot.name!r} has no range sensor {name!r}; it has {[s.name for s in robot_range_sensors(robot)]}")

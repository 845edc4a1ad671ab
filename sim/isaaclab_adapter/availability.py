"""Is Isaac Lab importable here, and what to install when it is not (no Isaac Lab import)."""

from __future__ import annotations

import importlib.util

from robot_hrl.errors import ConfigError

REQUIRED_MODULES = ("isaaclab", "isaaclab_rl", "isaaclab_tasks", "gymnasium")
"""All four come with ``pip install isaaclab==3.0.0`` (one wheel since 3.0)."""

INSTALL_HINT = (
    "Isaac Lab is not installed in this Python environment (module {missing!r} not found). "
    "Isaac Lab 3.0 runs without Isaac Sim (kitless, Newton physics, CPU or CUDA) but needs Python 3.12: "
    "in a Python 3.12 venv, `pip install isaaclab==3.0.0` and this project with `pip install -e '.[train]'` "
    "(`bash .ci/isaaclab --no-tests` builds such a venv under ~/.cache/robot_hrl/isaaclab and prints how to use it), "
    "then run sim/train.py with that Python. Built-in tasks need none of this: --task crazyflie-goto"
)


def isaaclab_available() -> bool:
    """True when Isaac Lab, its rsl_rl wrapper, its tasks and gymnasium can be imported."""
    return all(importlib.util.find_spec(m) is not None for m in REQUIRED_MODULES)


def require_isaaclab() -> None:
    """Raise :class:`ConfigError` naming what to install when Isaac Lab is missing."""
    for module in REQUIRED_MODULES:
        if importlib.util.find_spec(module) is None:
            raise ConfigError(INSTALL_HINT.format(missing=module))

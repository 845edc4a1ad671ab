"""What a robot's actuator chain declares, and the array namespaces its functions run on.

An actuator chain (for the Crazyflie: ``robot_hrl/robots/crazyflie_2x/actuators.py``) turns the
commanded body wrench into the forces the rotors put on the body. It is written ONCE, column by
column: every argument is one column (a Python float, a numpy array, an (N,) torch tensor, or a
symbolic C expression) and every function takes an array namespace ``xp`` for the few functions
that are not operators (``sqrt``, ``exp``, ``clip``, ``maximum``, ``where`` ...). The same source
then runs as

- numpy or Python floats (PyBullet, the runtime): :data:`NUMPY`, :data:`MATH` below;
- the torch step on structure-of-arrays rows (``sim/envs/step_core.py``, ``sim.envs.array_ops.TORCH``);
- C: ``sim/envs/native/codegen.py`` runs the functions on a recorder whose columns are C
  expressions and writes the C step's chain from them.

A chain declares its state rows (:class:`ChainField`) and its randomized parameters
(:class:`ChainParameter`); the simulators store, draw, reset and show them to the critic from these
declarations, so a new state row or parameter is an edit of the chain module only (plus, for a
parameter, its range as a field of the two RandomizationCfgs: ``range_key`` in training's, the
parameter's name in PyBullet's).

Columns must stay operators and ``xp`` calls: no ``if`` on a column, no Python ``min``/``max``/``abs``
(use ``xp.where``, ``xp.minimum``, ``xp.maximum``), no in-place updates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Protocol

import numpy as np

Column = Any
"""One column: a float, a numpy array, an (N,) torch tensor or a recorded C expression."""


class ArrayNamespace(Protocol):
    """The functions a chain may call on columns. NaN propagates through every one of them
    (as in numpy and torch); ``clip`` takes number bounds."""

    def sqrt(self, x: Column) -> Column: ...
    def exp(self, x: Column) -> Column: ...
    def log(self, x: Column) -> Column: ...
    def sin(self, x: Column) -> Column: ...
    def cos(self, x: Column) -> Column: ...
    def floor(self, x: Column) -> Column: ...
    def clip(self, x: Column, lo: float | None, hi: float | None) -> Column: ...
    def maximum(self, a: Column, b: Column) -> Column: ...
    def minimum(self, a: Column, b: Column) -> Column: ...
    def where(self, condition: Column, a: Column, b: Column) -> Column: ...


class _Math:
    """Python floats (PyBullet's one robot): numpy's semantics (NaN through, no exceptions)."""

    @staticmethod
    def sqrt(x: float) -> float:
        return math.sqrt(x) if x >= 0.0 else math.nan  # (NaN: the comparison is False)

    @staticmethod
    def exp(x: float) -> float:
        try:
            return math.exp(x)
        except OverflowError:
            return math.inf

    @staticmethod
    def log(x: float) -> float:
        if x > 0.0:
            return math.log(x)
        return -math.inf if x == 0.0 else math.nan

    sin = staticmethod(math.sin)
    cos = staticmethod(math.cos)

    @staticmethod
    def floor(x: float) -> float:
        return float(math.floor(x)) if math.isfinite(x) else x

    @staticmethod
    def clip(x: float, lo: float | None, hi: float | None) -> float:
        if lo is not None and x < lo:
            x = lo
        return hi if hi is not None and x > hi else x

    @staticmethod
    def maximum(a: float, b: float) -> float:
        return a if (a > b or a != a) else b

    @staticmethod
    def minimum(a: float, b: float) -> float:
        return a if (a < b or a != a) else b

    @staticmethod
    def where(condition: bool, a: float, b: float) -> float:
        return a if condition else b


class _Numpy:
    """numpy arrays (any shape, broadcasting) and numpy scalars."""

    sqrt = staticmethod(np.sqrt)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    floor = staticmethod(np.floor)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    where = staticmethod(np.where)

    @staticmethod
    def clip(x, lo: float | None, hi: float | None):
        return np.clip(x, lo, hi)


MATH: ArrayNamespace = _Math()
"""The namespace of Python floats."""
NUMPY: ArrayNamespace = _Numpy()
"""The namespace of numpy arrays."""


@dataclass(frozen=True)
class ChainField:
    """A state of the chain that persists between physics steps (rows of the simulators' state)."""

    name: str
    """Key of the field in the chain's state dict, and of its rows in the simulators' state layout."""
    size: int
    """Columns: a size-1 field is one column in the state dict, a larger one a tuple of columns."""
    doc: str
    """What it is, with units and frame."""
    critic_scale: Callable[[Any], float]
    """The critic sees ``value / critic_scale(constants)`` (a typical magnitude of the field)."""


Distribution = str
"""How a parameter is drawn from its range: ``"uniform"`` or ``"log_uniform"`` (uniform in log)."""


@dataclass(frozen=True)
class ChainParameter:
    """A quantity of the chain that differs between airframes: drawn per episode when randomizing."""

    name: str
    """Key in the parameter dict (and ``GotoEnv.params``); one column."""
    doc: str
    nominal: Callable[[Any], float]
    """Its value for the nominal robot (no randomization), from the chain constants."""
    range_key: str
    """The attribute of the training ``RandomizationCfg`` holding its (low, high) range (the whole range:
    what evaluations and PyBullet draw from). The PyBullet ``RandomizationCfg`` holds it as ``name``."""
    train_range_key: str | None = None
    """An attribute holding the part of the range training draws from instead (where not None)."""
    distribution: Distribution = "uniform"
    critic_offset: float = 0.0
    """The critic sees ``(value - critic_offset) / critic_scale``."""
    critic_scale: float = 1.0


class Substep(NamedTuple):
    """What one physics step of the chain gives the body."""

    state: dict
    """The chain's new state (same keys as its input)."""
    rotor_thrusts_n: tuple
    """Thrust of each rotor along body +z, N (a simulator that applies forces at the hubs uses these)."""
    thrust_n: Column
    """Sum of the rotor thrusts along body +z, N."""
    torque_b: tuple
    """The rotors' torque on the body about x, y, z (body FLU), N m (thrust moments and drag)."""


class ActuatorChain(Protocol):
    """A robot's actuator chain as the simulators use it (module-level names of the chain's module)."""

    NAME: str
    STATE: tuple[ChainField, ...]
    PARAMETERS: tuple[ChainParameter, ...]

    def constants(self, robot) -> NamedTuple:
        """The nominal numbers the chain needs (Python floats), from the robot's parameters."""

    def derive(self, parameters: Mapping[str, Column], k, physics_dt_s: float, xp: ArrayNamespace) -> dict:
        """Per-airframe quantities computed once per control step (or episode) from the parameters."""

    def command(self, wrench: tuple, state: Mapping[str, Column], derived: Mapping[str, Column], k, xp: ArrayNamespace) -> tuple:
        """What the firmware sends the motors for a commanded wrench [T N, tau_x, tau_y, tau_z N m] (held
        over the control period)."""

    def substep(self, state: Mapping[str, Column], command: tuple, derived: Mapping[str, Column], k, xp: ArrayNamespace) -> Substep:
        """One physics step of the motors under a held command."""

    def initial_state(self, weight_n: Column, derived: Mapping[str, Column], k, xp: ArrayNamespace) -> dict:
        """The chain's state at the start of an episode (the airframe of ``derived`` holding its weight)."""

    def hold_command(self, state: Mapping[str, Column], derived: Mapping[str, Column], k, xp: ArrayNamespace) -> tuple:
        """The command under which the motors keep the state they have (before a first wrench takes effect)."""


def state_columns(fields: tuple[ChainField, ...], state: Mapping[str, Column]) -> tuple:
    """A state dict as one flat tuple of columns, in the fields' order."""
    out: list = []
    for f in fields:
        value = state[f.name]
        out.extend(value if f.size > 1 else (value,))
    return tuple(out)


def state_dict(fields: tuple[ChainField, ...], columns) -> dict:
    """The inverse of :func:`state_columns`: flat columns (a sequence) to a state dict."""
    out, k = {}, 0
    for f in fields:
        out[f.name] = tuple(columns[k : k + f.size]) if f.size > 1 else columns[k]
        k += f.size
    if k != len(columns):
        raise ValueError(f"{len(columns)} columns for chain state fields of {k} columns")
    return out


def state_size(fields: tuple[ChainField, ...]) -> int:
    return sum(f.size for f in fields)


CHAINS: dict[str, Any] = {}
"""The actuator chain of each robot by name: ``robot_hrl.robots.<robot>.actuators``, imported on first use. Every
simulator asks :func:`chain_of`, so a variant registered here (a test's, a candidate firmware's) runs everywhere."""


def chain_of(robot_name: str):
    """The actuator chain of a robot (its module ``robot_hrl.robots.<robot_name>.actuators``, or one registered in ``CHAINS``)."""
    chain = CHAINS.get(robot_name)
    if chain is None:
        import importlib

        try:
            chain = importlib.import_module(f"robot_hrl.robots.{robot_name}.actuators")
        except ModuleNotFoundError as exc:
            raise ValueError(f"robot {robot_name!r} has no actuator chain (robot_hrl/robots/{robot_name}/actuators.py: "
                             f"{exc}); the simulators need one") from None
        CHAINS[robot_name] = chain
    return chain


def firmware_of(robot_name: str) -> dict | None:
    """The firmware a robot's actuator chain is (its module's ``FIRMWARE``: name, release, platform, propellers,
    control_mode), or None for a robot without a chain or a chain that names no firmware."""
    try:
        chain = chain_of(robot_name)
    except ValueError:
        return None
    firmware = getattr(chain, "FIRMWARE", None)
    return None if firmware is None else dict(firmware)

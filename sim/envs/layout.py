"""The one table of the structure-of-arrays step: its state rows, its parameter rows (with their
distributions), and the privileged columns the critic sees.

Every consumer reads it: the torch step (``step_core``), the C step (``sim/envs/native``: its row
enum, the chain's loads and stores, the parameter draws and the privileged columns are generated
from this table; tests/test_sim_native.py regenerates and diffs), the env's attribute views
(``env.position_w``, ``env.params``) and the critic's observation size. The robot's actuator chain
(``robot_hrl.robots.<robot>.actuators``) contributes its state fields and randomized parameters, so a
chain with a battery-voltage state or a new parameter changes this table without an edit here.

State rows (K, N), in order: the rigid body, the chain's state, the task's (goal, last action, the
sum of squared errors, the position error's integral), then the action latency buffer (``latency_slots`` x actions, newest first).
Parameter rows (P, N): mass and inertia scales, the chain's parameters, the disturbances. Privileged
columns: those parameters normalized (the action latency after the chain's parameters), then the
chain's state normalized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from robot_hrl.errors import ConfigError
from robot_hrl.robots.actuator_chain import ArrayNamespace, ChainParameter, chain_of


@dataclass(frozen=True)
class StateField:
    """Rows of the state."""

    name: str
    size: int
    doc: str


BODY_STATE = (
    StateField("position_w", 3, "position, world ENU, m"),
    StateField("quat_wxyz", 4, "attitude, body-to-world unit quaternion (w, x, y, z)"),
    StateField("linear_velocity_w", 3, "velocity, world ENU, m/s"),
    StateField("angular_velocity_b", 3, "body rates, body FLU, rad/s"),
)
"""The rigid body's state (integrated by ``dynamics.rigid_body_substep``)."""


def task_state(num_actions: int) -> tuple[StateField, ...]:
    return (
        StateField("goal_w", 3, "the episode's goal, world ENU, m"),
        StateField("last_action", num_actions, "the previous normalized action (zero after a reset)"),
        StateField("sq_error_sum", 1, "sum over the episode of the squared distance to the goal, m^2"),
        StateField("position_error_integral", 3, "the leaky integral of the position error, yaw frame, m s "
                   "(robot_hrl.contract.error_integral; zero after a reset)"),
    )


# ---- parameter distributions: column by column over an array namespace, so torch and C draw alike
Uniform01 = Callable[[int], Any]
"""u(j): the j-th uniform number in [0, 1) of this parameter (one column)."""


@dataclass(frozen=True)
class Uniform:
    """``size`` independent uniforms in [lo, hi]."""

    size: int = 1

    @property
    def uniforms(self) -> int:
        return self.size

    def draw(self, u: Uniform01, lo: float, hi: float, xp: ArrayNamespace) -> tuple:
        return tuple(lo + (hi - lo) * u(i) for i in range(self.size))


@dataclass(frozen=True)
class LogUniform:
    """One value uniform in log between lo and hi (as many slow as fast motors in relative terms)."""

    size: int = 1
    uniforms: int = 1

    def draw(self, u: Uniform01, lo: float, hi: float, xp: ArrayNamespace) -> tuple:
        log_lo, log_hi = math.log(lo), math.log(hi)
        return (xp.clip(xp.exp(log_lo + (log_hi - log_lo) * u(0)), lo, hi),)


def unit_vector(u_z, u_phi, xp: ArrayNamespace) -> tuple:
    """A direction uniform on the sphere from two uniforms (Archimedes: z uniform in [-1, 1], azimuth uniform)."""
    z = 2.0 * u_z - 1.0
    phi = (2.0 * math.pi) * u_phi
    s = xp.sqrt(xp.maximum(1.0 - z * z, 0.0))
    return s * xp.cos(phi), s * xp.sin(phi), z


@dataclass(frozen=True)
class RandomDirection:
    """A 3-vector of random direction and a magnitude uniform in [lo, hi]."""

    size: int = 3
    uniforms: int = 3

    def draw(self, u: Uniform01, lo: float, hi: float, xp: ArrayNamespace) -> tuple:
        direction = unit_vector(u(0), u(1), xp)
        magnitude = lo + (hi - lo) * u(2)
        return tuple(d * magnitude for d in direction)


Normalize = Callable[[Any, "PrivilegedContext"], Any]
"""(one column of the quantity, the context) -> the column the critic sees."""


class PrivilegedContext(NamedTuple):
    """What the privileged normalizations may use besides the quantity itself."""

    disturbance_scale: Any
    """The curriculum's disturbance scale of the step (a column or number)."""
    force_norm: float
    torque_norm: float
    chain: Any
    """The chain's constants."""


@dataclass(frozen=True)
class ParamSpec:
    """Rows of the parameters: one quantity drawn per episode."""

    name: str
    size: int
    doc: str
    distribution: Any
    """Uniform, LogUniform or RandomDirection: its ``uniforms`` and ``draw``."""
    bounds: Callable[[Any], tuple[float, float]]
    """(low, high) from the training ``RandomizationCfg``."""
    nominal: Callable[[Any], float]
    """The value without randomization, from the chain's constants."""
    privileged: Normalize


@dataclass(frozen=True)
class Privileged:
    """Columns of the critic's privileged observation: the quantity ``source`` (a parameter, the action
    latency or a chain state field), normalized."""

    source: str
    size: int
    normalize: Normalize


def _cfg_range(keys: tuple[str | None, ...]) -> Callable[[Any], tuple[float, float]]:
    """(low, high) from the first of the ``RandomizationCfg`` attributes ``keys`` that is not None."""

    def bounds(cfg) -> tuple[float, float]:
        for key in keys:
            if key is None:
                continue
            if not hasattr(cfg, key):
                raise ConfigError(f"the randomization cfg has no range {key!r} (named by the actuator chain's parameter "
                                  f"declaration); add the field to sim/envs/goto_env_cfg.py RandomizationCfg")
            value = getattr(cfg, key)
            if value is not None:
                return float(value[0]), float(value[1])
        raise ConfigError(f"all of the randomization ranges {keys} are None")

    return bounds


def _chain_param_spec(p: ChainParameter) -> ParamSpec:
    offset, scale = p.critic_offset, p.critic_scale

    def privileged(v, ctx):
        if offset != 0.0:
            v = v - offset
        return v / scale if scale != 1.0 else v

    dist = {"uniform": Uniform(1), "log_uniform": LogUniform()}.get(p.distribution)
    if dist is None:
        raise ConfigError(f"chain parameter {p.name!r}: unknown distribution {p.distribution!r} (uniform, log_uniform)")
    return ParamSpec(p.name, 1, p.doc, dist, _cfg_range((p.train_range_key, p.range_key)), p.nominal, privileged)


def _minus_one(v, ctx):
    return v - 1.0


def param_specs(chain) -> tuple[ParamSpec, ...]:
    """The parameter rows of a robot with actuator chain ``chain``, in row order (and draw order)."""
    return (
        ParamSpec("mass_scale", 1, "true mass over the nominal one", Uniform(1), _cfg_range(("mass_scale_range",)),
                  lambda k: 1.0, _minus_one),
        ParamSpec("inertia_scale", 3, "each principal moment of inertia over the nominal one", Uniform(3),
                  _cfg_range(("inertia_scale_range",)), lambda k: 1.0, _minus_one),
        *(_chain_param_spec(p) for p in chain.PARAMETERS),
        ParamSpec("disturbance_force_w", 3, "constant external force, world ENU, N (times the curriculum's scale)",
                  RandomDirection(), lambda r: (0.0, float(r.max_disturbance_force_n)), lambda k: 0.0,
                  lambda v, c: v * c.disturbance_scale / c.force_norm),
        ParamSpec("disturbance_torque_b", 3, "constant external torque, body FLU, N m (times the curriculum's scale)",
                  Uniform(3), lambda r: (-float(r.max_disturbance_torque_nm), float(r.max_disturbance_torque_nm)),
                  lambda k: 0.0, lambda v, c: v * c.disturbance_scale / c.torque_norm),
    )


LATENCY = "action_latency_steps"
"""The action latency: drawn with the parameters (the uniform after theirs), stored as an integer vector."""


def privileged_columns(chain) -> tuple[Privileged, ...]:
    """The critic's privileged columns, in order."""
    params = {s.name: s for s in param_specs(chain)}
    order = ("mass_scale", "inertia_scale", *(p.name for p in chain.PARAMETERS))
    rest = ("disturbance_force_w", "disturbance_torque_b")
    return (
        *(Privileged(n, params[n].size, params[n].privileged) for n in order),
        Privileged(LATENCY, 1, lambda v, c: v),
        *(Privileged(n, params[n].size, params[n].privileged) for n in rest),
        *(Privileged(f.name, f.size, _state_normalize(f.critic_scale)) for f in chain.STATE),
    )


def _state_normalize(critic_scale):
    return lambda v, c: v / critic_scale(c.chain)


# ---- the layout: rows by name --------------------------------------------------------------------
class StateLayout(NamedTuple):
    """Where each quantity lives in the structure-of-arrays state (K, N) and parameters (P, N)."""

    state: tuple[tuple[str, int, int], ...]
    """(name, first row, rows) of each state field, in row order (the action buffer follows)."""
    params: tuple[tuple[str, int, int], ...]
    """(name, first row, rows) of each parameter."""
    chain_state: tuple[str, ...]
    """The chain's state fields (contiguous rows)."""
    chain_params: tuple[str, ...]
    """The chain's parameters (contiguous rows)."""
    num_actions: int
    latency_slots: int
    """Slots of the action buffer (1 + the largest action latency)."""
    privileged_size: int

    def rows(self, name: str) -> slice:
        """The state rows of field ``name``."""
        for n, start, size in self.state:
            if n == name:
                return slice(start, start + size)
        raise KeyError(f"no state field {name!r}; fields: {[n for n, _, _ in self.state]}")

    def param_rows(self, name: str) -> slice:
        """The parameter rows of ``name``."""
        for n, start, size in self.params:
            if n == name:
                return slice(start, start + size)
        raise KeyError(f"no parameter {name!r}; parameters: {[n for n, _, _ in self.params]}")

    @property
    def buffer_start(self) -> int:
        return self.state[-1][1] + self.state[-1][2]

    @property
    def buffer(self) -> slice:
        return slice(self.buffer_start, self.num_rows)

    @property
    def num_rows(self) -> int:
        return self.buffer_start + self.num_actions * self.latency_slots

    @property
    def num_params(self) -> int:
        return self.params[-1][1] + self.params[-1][2]

    @property
    def chain_state_rows(self) -> slice:
        first, last = self.rows(self.chain_state[0]), self.rows(self.chain_state[-1])
        return slice(first.start, last.stop)

    @property
    def chain_param_rows(self) -> slice:
        first, last = self.param_rows(self.chain_params[0]), self.param_rows(self.chain_params[-1])
        return slice(first.start, last.stop)

    @property
    def reset_state_rows(self) -> int:
        """Rows a reset draws (the body, the chain and the goal); the rest restart at zero."""
        return self.rows("goal_w").stop


def _offsets(fields) -> tuple[tuple[str, int, int], ...]:
    out, k = [], 0
    for name, size in fields:
        out.append((name, k, size))
        k += size
    return tuple(out)


def state_layout(chain, num_actions: int, latency_slots: int) -> StateLayout:
    """The layout of a robot with actuator ``chain``, ``num_actions`` actions and ``latency_slots`` buffer slots."""
    fields = BODY_STATE + tuple(StateField(f.name, f.size, f.doc) for f in chain.STATE) + task_state(num_actions)
    return StateLayout(
        state=_offsets((f.name, f.size) for f in fields),
        params=_offsets((s.name, s.size) for s in param_specs(chain)),
        chain_state=tuple(f.name for f in chain.STATE),
        chain_params=tuple(p.name for p in chain.PARAMETERS),
        num_actions=int(num_actions),
        latency_slots=int(latency_slots),
        privileged_size=sum(p.size for p in privileged_columns(chain)),
    )


def actuator_chain(robot_name: str):
    """The actuator chain module of a robot package (``robot_hrl.robots.<robot_name>.actuators``)."""
    try:
        return chain_of(robot_name)
    except ValueError as exc:
        raise ConfigError(f"{exc} (the torch and C steps)") from None

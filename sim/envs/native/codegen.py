"""The C of the native step that is generated, not written: from the actuator chain and the layout table.

The actuator chain (``robot_hrl.robots.<robot>.actuators``) and the distributions and privileged
normalizations of ``sim/envs/layout.py`` are written column by column over an array namespace. Run
on a recorder whose columns are C expressions (:class:`CExpr`), they write straight-line C: every
operation one ``const float`` temporary, in the order Python performed it, so the C computes the
same IEEE operations as the torch step (the compiler may not reorder them: no -ffast-math, no FMA
contraction). ``step_tables_header`` emits, for one configuration:

- the row enums of the state and the parameters (``layout.StateLayout``);
- ``chain_derive``, ``chain_command``, ``chain_substep``, ``chain_initial_state``: the chain's functions
  (statement macros: they vectorize inside the environment loops, where inline functions taking the
  loop's local arrays did not);
- ``draw_parameters``, ``nominal_parameters``: the parameters' reset draws (the uniform numbers of
  ``step_core.reset_draws``, in the same order);
- ``privileged_columns``: the critic's privileged columns.

``control_step.c`` (the hand-written rigid body, rewards, resets of the start state and
observations) calls them. ``python -m sim.envs.native.regenerate`` writes the default configuration's
generated headers to ``sim/envs/native/generated/`` for review; tests/test_sim_native.py regenerates
them and fails on a difference.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from robot_hrl.robots.actuator_chain import state_columns, state_dict, state_size
from sim.envs.layout import LATENCY, PrivilegedContext
from sim.envs.step_constants import FusedConstants

GENERATED_DIR = Path(__file__).with_name("generated")


def c_float(x: float) -> str:
    """A C float literal of ``x`` rounded to float32 (as torch rounds a Python float it multiplies a float32 tensor by)."""
    x = float(x)
    if math.isnan(x):
        return "NAN"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "-INFINITY"
    return f"{str(np.float32(x))}f"  # the shortest decimal that reads back as this float32


def c_double(x: float) -> str:
    return repr(float(x))


class CRecorder:
    """Collects the statements of one generated function."""

    def __init__(self, vector: bool):
        self.vector = vector
        """Functions for the vectorized environment loop (exp_f, sincos_f) or scalar libm ones (expf, cosf)."""
        self.lines: list[str] = []
        self._count = 0

    def value(self, code: str) -> "CExpr":
        """An input of the function (an argument or an array element)."""
        return CExpr(self, code)

    def emit(self, code: str, ctype: str = "float") -> "CExpr":
        name = f"t{self._count}"
        self._count += 1
        self.lines.append(f"    const {ctype} {name} = {code};")
        return CExpr(self, name)


def _code(x) -> str:
    if isinstance(x, CExpr):
        return x.code
    if isinstance(x, (bool, np.bool_)):
        return "1" if x else "0"
    if isinstance(x, (int, float, np.integer, np.floating)):
        return c_float(float(x))
    raise TypeError(f"cannot write {type(x).__name__} {x!r} as C: a chain column must be a number or a column")


class CExpr:
    """A float column as C: arithmetic records a statement and returns its temporary."""

    __slots__ = ("rec", "code")

    def __init__(self, rec: CRecorder, code: str):
        self.rec = rec
        self.code = code

    def _bin(self, op: str, other, reverse: bool = False, ctype: str = "float") -> "CExpr":
        a, b = (other, self) if reverse else (self, other)
        return self.rec.emit(f"{_code(a)} {op} {_code(b)}", ctype)

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __neg__(self): return self.rec.emit(f"-{self.code}")
    def __pos__(self): return self
    def __lt__(self, o): return self._bin("<", o, ctype="int")
    def __le__(self, o): return self._bin("<=", o, ctype="int")
    def __gt__(self, o): return self._bin(">", o, ctype="int")
    def __ge__(self, o): return self._bin(">=", o, ctype="int")

    def __bool__(self):
        raise TypeError("a chain column has no truth value (the chain's functions must not branch on a column: use xp.where)")

    def __repr__(self) -> str:
        return f"CExpr({self.code})"


class _COps:
    """The array namespace of the recorder (``robot_hrl.robots.actuator_chain.ArrayNamespace``)."""

    def __init__(self, rec: CRecorder):
        self.rec = rec

    def _call(self, vector_fn: str, scalar_fn: str, *args) -> CExpr:
        fn = vector_fn if self.rec.vector else scalar_fn
        return self.rec.emit(f"{fn}({', '.join(_code(a) for a in args)})")

    def sqrt(self, x): return self._call("sqrtf", "sqrtf", x)
    def exp(self, x): return self._call("exp_f", "expf", x)
    def log(self, x): return self._call("log_f", "logf", x)
    def sin(self, x): return self._call("sin_f", "sinf", x)
    def cos(self, x): return self._call("cos_f", "cosf", x)
    def floor(self, x): return self._call("floorf", "floorf", x)

    def clip(self, x, lo, hi):
        lo = -math.inf if lo is None else lo
        hi = math.inf if hi is None else hi
        return self.rec.emit(f"clampf({_code(x)}, {_code(lo)}, {_code(hi)})")

    def maximum(self, a, b): return self.rec.emit(f"max_nan_f({_code(a)}, {_code(b)})")
    def minimum(self, a, b): return self.rec.emit(f"min_nan_f({_code(a)}, {_code(b)})")
    def where(self, c, a, b): return self.rec.emit(f"{_code(c)} ? {_code(a)} : {_code(b)}")


def _function(signature: str, doc: str, rec: CRecorder, outputs: list[tuple[str, object]]) -> str:
    """A generated function as a statement macro: ``signature`` is ``name(type arg[size], ...)``; the macro's
    arguments are the caller's arrays and values. (Not a static inline function: inside the ``omp simd`` loops
    GCC privatizes the caller's local arrays per lane, and an array whose address is passed to a function is no
    longer recognized as a lane access: the loop would not vectorize.)"""
    name, args = signature.split("(", 1)
    names = [a.strip().split()[-1].split("[")[0] for a in args.rstrip(")").split(",")]
    body = rec.lines + [f"    {target} = {_code(value)};" for target, value in outputs]
    lines = [f"#define {name}({', '.join(names)}) do {{", *body, "} while (0)"]
    return f"/* {doc}: {signature} */\n" + " \\\n".join(lines) + "\n"


def _c_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _as_tuple(v) -> tuple:
    return v if isinstance(v, tuple) else (v,)


def step_tables_header(f: FusedConstants) -> str:
    """``step_tables.h`` of a configuration: the layout enums and the generated functions."""
    from sim.envs.step_core import reset_uniforms, step_tables

    L = f.layout
    tables = step_tables(f.robot)
    chain, k = tables.chain, f.chain
    n_state = state_size(chain.STATE)
    param_names = [name for name, _, _ in L.params]
    chain_param_rows = L.chain_param_rows
    parts = [
        f"/* generated by sim/envs/native/codegen.py from sim/envs/layout.py and robot_hrl.robots.{f.robot}.actuators "
        f"({chain.NAME}); do not edit */",
        "#pragma once",
        "",
        "/* state rows (layout.StateLayout); the action buffer follows */",
        "enum {\n" + "\n".join(f"    ROW_{_c_name(n)} = {s}, /* {size} */" for n, s, size in L.state)
        + f"\n    BUFFER = {L.buffer_start},\n    STATE_ROWS = {L.num_rows},\n}};",
        "/* parameter rows */",
        "enum {\n" + "\n".join(f"    P_{_c_name(n)} = {s}, /* {size} */" for n, s, size in L.params)
        + f"\n    PARAM_ROWS = {L.num_params},\n}};",
    ]
    # ---- the chain ---------------------------------------------------------------------------
    rec = CRecorder(vector=True)
    xp = _COps(rec)
    params = {name: rec.value(f"param[{i}]") for i, name in enumerate(L.chain_params)}
    derived = chain.derive(params, k, f.step.physics_dt, xp)
    derived_names = list(derived)
    derive_fn = _function("chain_derive(const float param[CHAIN_PARAM_ROWS], float derived[CHAIN_DERIVED])",
                          f"{chain.__name__}.derive", rec, [(f"derived[{i}]", v) for i, v in enumerate(derived.values())])

    def derived_inputs(rec: CRecorder) -> dict:
        return {name: rec.value(f"derived[{i}]") for i, name in enumerate(derived_names)}

    rec = CRecorder(vector=True)
    xp = _COps(rec)
    state = state_dict(chain.STATE, tuple(rec.value(f"state[{i}]") for i in range(n_state)))
    wrench = tuple(rec.value(f"wrench[{i}]") for i in range(L.num_actions))
    command = chain.command(wrench, state, derived_inputs(rec), k, xp)
    command_fn = _function(
        "chain_command(const float wrench[NUM_ACTIONS], const float state[CHAIN_STATE_ROWS], const float derived[CHAIN_DERIVED], "
        "float command[CHAIN_COMMANDS])", f"{chain.__name__}.command", rec, [(f"command[{i}]", v) for i, v in enumerate(command)])

    rec = CRecorder(vector=True)
    xp = _COps(rec)
    state = state_dict(chain.STATE, tuple(rec.value(f"state[{i}]") for i in range(n_state)))
    cmd_in = tuple(rec.value(f"command[{i}]") for i in range(len(command)))
    sub = chain.substep(state, cmd_in, derived_inputs(rec), k, xp)
    substep_fn = _function(
        "chain_substep(const float state[CHAIN_STATE_ROWS], const float command[CHAIN_COMMANDS], const float derived[CHAIN_DERIVED], "
        "float state_out[CHAIN_STATE_ROWS], float wrench_out[4])",
        f"{chain.__name__}.substep: the new state and the rotors' [T, tau_x, tau_y, tau_z] on the body", rec,
        [(f"state_out[{i}]", v) for i, v in enumerate(state_columns(chain.STATE, sub.state))]
        + [(f"wrench_out[{i}]", v) for i, v in enumerate((sub.thrust_n, *sub.torque_b))])

    rec = CRecorder(vector=False)
    xp = _COps(rec)
    init = chain.initial_state(rec.value("(weight_n)"), derived_inputs(rec), k, xp)
    initial_fn = _function(
        "chain_initial_state(float weight_n, const float derived[CHAIN_DERIVED], float state_out[CHAIN_STATE_ROWS])",
        f"{chain.__name__}.initial_state", rec, [(f"state_out[{i}]", v) for i, v in enumerate(state_columns(chain.STATE, init))])

    # ---- the parameters' reset draws -------------------------------------------------------------
    rec = CRecorder(vector=False)
    xp = _COps(rec)
    uniforms: dict[int, CExpr] = {}

    def u(j: int) -> CExpr:
        if j not in uniforms:
            uniforms[j] = rec.emit(f"unit_interval((base) + {j}u, (key))")
        return uniforms[j]

    drawn: list = []
    j = 0
    for spec, bounds in zip(tables.params, f.reset.param_bounds):
        drawn += spec.distribution.draw(lambda i, j=j: u(j + i), *bounds, xp)
        j += spec.distribution.uniforms
    draw_fn = _function("draw_parameters(uint32_t base, uint32_t key, float p[PARAM_ROWS])",
                        "the parameters' reset draws (step_core.reset_draws): uniform base + j of the key", rec,
                        [(f"p[{i}]", v) for i, v in enumerate(drawn)])
    rec = CRecorder(vector=False)
    nominal = [v for spec, value in zip(tables.params, f.reset.param_nominal) for v in [value] * spec.size]
    nominal_fn = _function("nominal_parameters(float p[PARAM_ROWS])", "the parameters without randomization", rec,
                           [(f"p[{i}]", v) for i, v in enumerate(nominal)])

    # ---- the privileged columns ------------------------------------------------------------------
    rec = CRecorder(vector=True)
    values = {name: tuple(rec.value(f"param[{start + i}]") for i in range(size)) for name, start, size in L.params}
    values[LATENCY] = (rec.value("(latency)"),)
    values.update({name: _as_tuple(v) for name, v in state_dict(chain.STATE, tuple(rec.value(f"chain_state[{i}]") for i in range(n_state))).items()})
    ctx = PrivilegedContext(rec.value("(dist_scale)"), f.force_norm, f.torque_norm, k)
    columns = [entry.normalize(v, ctx) for entry in tables.privileged for v in values[entry.source]]
    privileged_fn = _function(
        "privileged_columns(const float param[PARAM_ROWS], const float chain_state[CHAIN_STATE_ROWS], float latency, float dist_scale, "
        "float out[PRIVILEGED])", "the critic's privileged columns (layout.privileged_columns), before nan_to_num", rec,
        [(f"out[{i}]", v) for i, v in enumerate(columns)])

    sizes = {
        "NUM_ACTIONS": L.num_actions, "CHAIN_STATE_ROW": L.chain_state_rows.start, "CHAIN_STATE_ROWS": n_state,
        "CHAIN_PARAM_ROW": chain_param_rows.start, "CHAIN_PARAM_ROWS": chain_param_rows.stop - chain_param_rows.start,
        "CHAIN_COMMANDS": len(command), "CHAIN_DERIVED": len(derived_names), "PRIVILEGED": len(columns),
        "RESET_UNIFORMS": reset_uniforms(f), "LATENCY_UNIFORM": j, "START_UNIFORM": j + 1,
    }
    assert len(columns) == L.privileged_size and len(drawn) == L.num_params
    parts += [
        "enum {\n" + "\n".join(f"    {name} = {value}," for name, value in sizes.items()) + "\n};",
        "/* the chain's derived quantities: " + ", ".join(f"derived[{i}] {n}" for i, n in enumerate(derived_names)) + " */",
        "/* the parameters: " + ", ".join(param_names) + " */",
        "",
        derive_fn, command_fn, substep_fn, initial_fn, draw_fn, nominal_fn, privileged_fn,
    ]
    return "\n".join(parts)


def write_generated(out_dir: Path = GENERATED_DIR) -> list[Path]:
    """Write the default configuration's generated headers (for review); returns the files."""
    from sim.envs.native.build import config_header, default_constants

    f = default_constants()
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"step_config.h": config_header(f), "step_tables.h": step_tables_header(f)}
    for name, text in files.items():
        (out_dir / name).write_text(text)
    return [out_dir / name for name in files]


"""C99 for the policy network: weights as ``static const float`` arrays (or 16-bit ones) and the forward pass.

No heap, no libraries beyond ``math.h`` (expf, tanhf). Intermediate rows live in a few static
scratch buffers (``.bss``), reused once a value is dead, so RAM is the widest layer or two,
not the sum of all layers. Every step carries the name of the ONNX node it came from.

A recurrent model (a :class:`~deploy.crazyflie.graph.Gru` step) takes its state as an argument,
``prefix_forward(in, state, out)``, and overwrites it with the next one: the state is the caller's
(the navigate level's ``navState`` in nav_io.c, kept between decisions), never a scratch buffer.

``weights="float16"`` stores the dense layers' matrices and a GRU's ``W`` and ``R`` as IEEE 754 binary16 bit patterns
(``static const uint16_t``, rounded by deploy/crazyflie/float16.py's :func:`round_weights_float16`), half the flash;
``prefix_half_to_float`` turns each into a float32 as the dense loop reads it, so the arithmetic stays float32. Biases,
normalisation constants, activation parameters and clamp bounds stay ``static const float`` (few, and exact).
"""

from __future__ import annotations

import numpy as np

from deploy.crazyflie.errors import CodegenError
from deploy.crazyflie.float16 import WEIGHT_STORAGES, float16_bits
from deploy.crazyflie.graph import (GRU_LINEAR_BEFORE_RESET, Activation, Clamp, Concat, ConstOp, Dense, Gru, LoweredModel,
                                    VarOp, step_reads)

PREFIX = "policy"
"""Prefix of every generated C symbol (``policy_forward``, ``policy_w0`` ...)."""


def c_float(value: float) -> str:
    """A float32 C literal that round-trips exactly (9 significant digits)."""
    v = np.float32(value)
    if not np.isfinite(v):
        raise CodegenError(f"the model holds a non-finite constant ({value}); it cannot be compiled, retrain or re-export it")
    s = "%.9g" % float(v)
    if not any(ch in s for ch in ".e"):
        s += ".0"
    return s + "f"


def c_array(name: str, values: np.ndarray, per_line: int = 8) -> str:
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    lines = []
    for k in range(0, flat.size, per_line):
        lines.append("  " + ", ".join(c_float(v) for v in flat[k:k + per_line]) + ",")
    return f"static const float {name}[{flat.size}] = {{\n" + "\n".join(lines) + "\n};\n"


def c_half_array(name: str, values: np.ndarray, what: str, per_line: int = 12) -> str:
    """``values`` rounded to binary16 (:func:`~deploy.crazyflie.float16.round_weights_float16`; CodegenError naming
    ``what`` for a value it cannot hold) as a ``static const uint16_t`` array of their bit patterns."""
    flat = float16_bits(np.asarray(values).reshape(-1), what)
    lines = ["  " + ", ".join(f"0x{int(v):04x}u" for v in flat[k:k + per_line]) + "," for k in range(0, flat.size, per_line)]
    return f"static const uint16_t {name}[{flat.size}] = {{\n" + "\n".join(lines) + "\n};\n"


def _allocate(model: LoweredModel, prefix: str = PREFIX) -> tuple[dict[str, str], list[int]]:
    """Storage of every row value: the input pointer, the output pointer, the state pointer (a recurrent model's state
    in and out: the GRU updates it in place), or a scratch buffer.

    Greedy liveness allocation. An element-wise step writes in place when its source dies there;
    a dense layer or a concatenation always writes to a different buffer than it reads.
    """
    steps = model.steps
    last_use: dict[str, int] = {}
    for k, s in enumerate(steps):
        for r in step_reads(s):
            last_use[r] = k
    storage: dict[str, str] = {model.input_name: "in"}
    if model.state_input is not None:
        storage[model.state_input] = "state"
    sizes: list[int] = []
    free: list[int] = []
    owner: dict[str, int] = {}
    for k, s in enumerate(steps):
        dying = [r for r in dict.fromkeys(step_reads(s)) if last_use.get(r) == k and r in owner]
        if isinstance(s, Gru):
            if s.state != model.state_input or s.dst != model.state_output:
                raise CodegenError(f"internal: GRU step {s.node!r} does not read and write the model's state")
            storage[s.dst] = "state"  # the next state, over the one read
        elif s.dst == model.output_name and k == len(steps) - 1:
            storage[s.dst] = "out"
        elif not isinstance(s, (Dense, Concat)) and dying:
            buf = owner[dying[0]]  # in place
            owner[s.dst] = buf
            storage[s.dst] = f"{prefix}_buf{buf}"
            sizes[buf] = max(sizes[buf], model.sizes[s.dst])
            dying = dying[1:]
        else:
            n = model.sizes[s.dst]
            if free:
                buf = max(free, key=lambda b: (sizes[b] >= n, -abs(sizes[b] - n)))
                free.remove(buf)
                sizes[buf] = max(sizes[buf], n)
            else:
                buf = len(sizes)
                sizes.append(n)
            owner[s.dst] = buf
            storage[s.dst] = f"{prefix}_buf{buf}"
        for r in dying:
            free.append(owner.pop(r))
    return storage, sizes


_HELPERS = r"""
/* y[o] = b[o] + sum_i w[o][i] * x[i]; four partial sums keep the FPU pipeline busy. */
static void {prefix}_dense(const {wtype} *w, const float *b, const float *x, float *y, int n_out, int n_in)
{
  for (int o = 0; o < n_out; ++o) {
    const {wtype} *row = w + o * n_in;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    int i = 0;
    for (; i + 4 <= n_in; i += 4) {
      a0 += {load}(row[i]) * x[i];
      a1 += {load}(row[i + 1]) * x[i + 1];
      a2 += {load}(row[i + 2]) * x[i + 2];
      a3 += {load}(row[i + 3]) * x[i + 3];
    }
    for (; i < n_in; ++i) {
      a0 += {load}(row[i]) * x[i];
    }
    y[o] = (b ? b[o] : 0.0f) + ((a0 + a1) + (a2 + a3));
  }
}
"""

_HALF_HELPER = r"""
/* IEEE 754 binary16 bits -> float32, exactly; inlined into the dense loop (a call per weight would cost more than the
 * multiply-accumulate). On an ARM FPU with the firmware's -mfp16-format=ieee (__ARM_FP16_FORMAT_IEEE) the compiler
 * converts an __fp16: on the Cortex-M4F's FPv4-SP one VCVTB.F32.F16. Elsewhere (the host build) portable C99: the
 * generator refused non-finite weights, so h is a zero, a subnormal or a normal; its exponent and mantissa move to
 * float32's places (<< 13) and the exponent is rebiased 15 -> 127 (+ 112 << 23); a zero or subnormal (exponent 0,
 * m * 2^-24) is first made the normal float 2^-14 * (1 + m / 1024), then 2^-14 is subtracted: exact, and no float32
 * subnormal is ever formed (a flush-to-zero FPU gives the same). */
#ifdef __GNUC__
#define {PREFIX}_ALWAYS_INLINE __attribute__((always_inline))
#else
#define {PREFIX}_ALWAYS_INLINE
#endif
static inline {PREFIX}_ALWAYS_INLINE float {prefix}_half_to_float(uint16_t h)
{
#if defined(__ARM_FP16_FORMAT_IEEE) && defined(__ARM_FP)
  union { uint16_t u; __fp16 f; } v;
  v.u = h;
  return (float)v.f;
#else
  union { uint32_t u; float f; } v;
  const uint32_t mag = (uint32_t)(h & 0x7fffu) << 13;
  if ((mag & 0x0f800000u) == 0u) {
    v.u = mag + (113u << 23);
    v.f -= 0x1p-14f;
  } else {
    v.u = mag + (112u << 23);
  }
  v.u |= (uint32_t)(h & 0x8000u) << 16;
  return v.f;
#endif
}
"""

_GRU_HELPER = r"""
/* One step of ONNX's GRU with linear_before_reset = {lbr}, gates in ONNX's order z, r, h (the rows of w, r, wb, rb):
 * gx = W x + Wb, gh = R h + Rb; z = sigmoid(gx_z + gh_z), r = sigmoid(gx_r + gh_r), n = tanh(gx_h + r * gh_h);
 * h = (1 - z) * n + z * h, in place: gh holds all of R h before any h[i] is written, each h[i] is read before. */
static void {prefix}_gru(const {wtype} *w, const float *wb, const {wtype} *r, const float *rb, const float *x, float *h,
    float *gx, float *gh, int n_in, int n_h)
{
  {prefix}_dense(w, wb, x, gx, 3 * n_h, n_in);
  {prefix}_dense(r, rb, h, gh, 3 * n_h, n_h);
  for (int i = 0; i < n_h; ++i) {
    const float z = 1.0f / (1.0f + expf(-(gx[i] + gh[i])));
    const float rg = 1.0f / (1.0f + expf(-(gx[n_h + i] + gh[n_h + i])));
    const float n = tanhf(gx[2 * n_h + i] + rg * gh[2 * n_h + i]);
    h[i] = (1.0f - z) * n + z * h[i];
  }
}
"""

_ACT_EXPR = {
    "relu": "v > 0.0f ? v : (v == v ? 0.0f : v)",
    "leaky_relu": "v >= 0.0f ? v : {alpha} * v",
    "elu": "v >= 0.0f ? v : {alpha} * (expf(v) - 1.0f)",
    "tanh": "tanhf(v)",
    "sigmoid": "1.0f / (1.0f + expf(-v))",
}
_OP_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def generate_model_c(model: LoweredModel, header: str, banner: str, prefix: str = PREFIX,
                     weights: str = "float32") -> tuple[str, str]:
    """(policy_model.h, policy_model.c) for ``model``; every symbol starts with ``prefix`` (``policy``: the goto
    skill's ``policy_forward``; ``nav``: the navigate level's ``nav_forward``, linked beside it), every macro with
    its upper case. ``weights``: the matrices' storage, one of :data:`~deploy.crazyflie.float16.WEIGHT_STORAGES`
    (``float16``: binary16 bits, biases and constants float32; see the module's docstring)."""
    if weights not in WEIGHT_STORAGES:
        raise CodegenError(f"weight storage {weights!r} is not one of {', '.join(WEIGHT_STORAGES)}")
    half = weights == "float16"

    def matrix(name: str, values: np.ndarray, node: str) -> str:
        return c_half_array(name, values, f"a weight of node {node!r}") if half else c_array(name, values)
    storage, buf_sizes = _allocate(model, prefix)
    up = prefix.upper()
    n_in, n_out = model.input_size, model.output_size
    if model.recurrent:
        signature = (f"void {prefix}_forward(const float in[{up}_MODEL_INPUT_SIZE], float state[{up}_MODEL_STATE_SIZE], "
                     f"float out[{up}_MODEL_OUTPUT_SIZE])")
        decl = f"""#define {up}_MODEL_STATE_SIZE {model.state_size}

/* One inference: in[{n_in}] (the contract's observation) and state[{model.state_size}] (the recurrent state the last
 * inference left; zeros to start) -> out[{n_out}] (normalized actions); state is overwritten with the next one.
 * The caller keeps the state. Not reentrant (static scratch buffers); call it from one task. */
{signature};"""
    else:
        signature = f"void {prefix}_forward(const float in[{up}_MODEL_INPUT_SIZE], float out[{up}_MODEL_OUTPUT_SIZE])"
        decl = f"""/* One inference: in[{n_in}] (the contract's observation) -> out[{n_out}] (normalized actions).
 * Not reentrant (static scratch buffers); call it from one task. */
{signature};"""
    h = f"""{banner}
#ifndef {up}_MODEL_H
#define {up}_MODEL_H

#define {up}_MODEL_INPUT_SIZE {n_in}
#define {up}_MODEL_OUTPUT_SIZE {n_out}
{decl}

#endif /* {up}_MODEL_H */
"""
    consts: list[str] = []
    body: list[str] = []
    gru_scratch: list[str] = []

    def ref(name: str) -> str:
        if name not in storage:
            raise CodegenError(f"internal: value {name!r} has no storage")
        return storage[name]

    for k, s in enumerate(model.steps):
        body.append(f"  /* step {k}: {type(s).__name__} from ONNX node '{s.node}' */")
        if isinstance(s, Dense):
            n_o, n_i = s.weight.shape
            wname = f"{prefix}_w{k}"
            consts.append(matrix(wname, s.weight, s.node))
            bname = "0"
            if s.bias is not None:
                bname = f"{prefix}_b{k}"
                consts.append(c_array(bname, s.bias))
            body.append(f"  {prefix}_dense({wname}, {bname}, {ref(s.src)}, {ref(s.dst)}, {n_o}, {n_i});")
        elif isinstance(s, ConstOp):
            n = model.sizes[s.dst]
            cname = f"{prefix}_c{k}"
            sym = _OP_SYMBOL[s.op]
            if np.all(s.const == s.const[0]):
                cval = c_float(s.const[0])
            else:
                consts.append(c_array(cname, s.const))
                cval = f"{cname}[i]"
            expr = f"{cval} {sym} {ref(s.src)}[i]" if s.reverse else f"{ref(s.src)}[i] {sym} {cval}"
            body.append(f"  for (int i = 0; i < {n}; ++i) {ref(s.dst)}[i] = {expr};")
        elif isinstance(s, VarOp):
            n = model.sizes[s.dst]
            body.append(f"  for (int i = 0; i < {n}; ++i) {ref(s.dst)}[i] = {ref(s.a)}[i] {_OP_SYMBOL[s.op]} {ref(s.b)}[i];")
        elif isinstance(s, Activation):
            n = model.sizes[s.dst]
            expr = _ACT_EXPR[s.kind].format(alpha=c_float(s.alpha))
            body.append(f"  for (int i = 0; i < {n}; ++i) {{ const float v = {ref(s.src)}[i]; {ref(s.dst)}[i] = {expr}; }}")
        elif isinstance(s, Clamp):
            n = model.sizes[s.dst]
            expr = "v"
            if s.high is not None:
                expr = f"(v > {c_float(s.high)} ? {c_float(s.high)} : {expr})"
            if s.low is not None:
                expr = f"(v < {c_float(s.low)} ? {c_float(s.low)} : {expr})"
            body.append(f"  for (int i = 0; i < {n}; ++i) {{ const float v = {ref(s.src)}[i]; {ref(s.dst)}[i] = {expr}; }}")
        elif isinstance(s, Concat):
            n_a, n_b = model.sizes[s.a], model.sizes[s.b]
            body.append(f"  for (int i = 0; i < {n_a}; ++i) {ref(s.dst)}[i] = {ref(s.a)}[i];")
            body.append(f"  for (int i = 0; i < {n_b}; ++i) {ref(s.dst)}[{n_a} + i] = {ref(s.b)}[i];")
        elif isinstance(s, Gru):
            n_h, n_i = s.hidden_size, s.w.shape[1]
            names = {part: f"{prefix}_gru{k}_{part}" for part in ("w", "r", "wb", "rb", "gx", "gh")}
            consts.extend((matrix(names["w"], s.w, s.node), c_array(names["wb"], s.wb), matrix(names["r"], s.r, s.node),
                           c_array(names["rb"], s.rb)))
            gru_scratch.append(f"static float {names['gx']}[{3 * n_h}];\nstatic float {names['gh']}[{3 * n_h}];\n")
            body.append(f"  {prefix}_gru({names['w']}, {names['wb']}, {names['r']}, {names['rb']}, {ref(s.src)}, "
                        f"{ref(s.state)}, {names['gx']}, {names['gh']}, {n_i}, {n_h});  /* state -> the next state */")
        else:  # pragma: no cover - the lowering only makes the types above
            raise CodegenError(f"internal: unknown step {s!r}")
    if storage.get(model.output_name) != "out":
        body.append(f"  for (int i = 0; i < {n_out}; ++i) out[i] = {ref(model.output_name)}[i];")

    bufs = "".join(f"static float {prefix}_buf{b}[{n}];\n" for b, n in enumerate(buf_sizes)) + "".join(gru_scratch)
    helpers = ((_HALF_HELPER if half else "") + _HELPERS
               + (_GRU_HELPER.replace("{lbr}", str(GRU_LINEAR_BEFORE_RESET)) if gru_scratch else ""))
    helpers = helpers.replace("{wtype}", "uint16_t" if half else "float").replace(
        "{load}", f"{prefix}_half_to_float" if half else "")
    dense_params = sum(int(np.asarray(d.weight).size) + (0 if d.bias is None else d.bias.size) for d in model.dense_layers)
    gru_params = sum(s.w.size + s.r.size + s.wb.size + s.rb.size for s in model.steps if isinstance(s, Gru))
    counted = f"{dense_params} parameters in dense layers" + (f", {gru_params} in the GRU" if gru_params else "")
    if half:
        counted += "; matrices as IEEE 754 binary16 bits, biases and constants float32"
    c = f"""{banner}
#include <math.h>
{"#include <stdint.h>" + chr(10) if half else ""}
#include "{header}"

/* ---- weights ({counted}) ---- */
{"".join(consts)}
/* ---- scratch rows (.bss) ---- */
{bufs}{helpers.replace("{prefix}", prefix).replace("{PREFIX}", up)}
{signature}
{{
{chr(10).join(body)}
}}
"""
    return h, c

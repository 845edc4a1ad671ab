"""Weights stored in 16 bits (IEEE 754 binary16): the one rounding, the reference that runs it, and how far it moves.

A generated model's weights (its dense layers' matrices and a GRU's ``W`` and ``R``) may be stored as binary16
(``static const uint16_t``, c_model.py) and converted to float32 as the dense loop reads them; the arithmetic stays
float32. Biases, normalisation constants and clamp bounds stay float32 (they are few, and an offset rounded is an
error every output carries). Three things live here, once:

- :func:`round_weights_float16`: the rounding (round to nearest even, what numpy's ``float16`` cast does), refused for
  a non-finite weight or one beyond binary16's range. The code generator stores its bits (:func:`float16_bits`); the
  reference runs its values.
- :func:`float16_reference_onnx`: a copy of the ONNX file whose weights (the same tensors) went through that rounding,
  for onnxruntime: the network the C computes, so the parity against it stays as tight as the float32 parity.
- :func:`float16_deviation_bound`: how far the rounded network's outputs can be from the float32 model's, from the
  rounding errors of the weights propagated through the layers (a bound, per output; see its docstring).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deploy.crazyflie.errors import CodegenError

WEIGHT_STORAGES: tuple[str, ...] = ("float32", "float16")
"""How a generated model stores its weights: ``float32`` (``static const float``) or ``float16`` (IEEE 754 binary16
in ``static const uint16_t``, converted to float32 as they are read)."""

FLOAT16_MAX = 65504.0
"""The largest finite binary16 value, (2 - 2**-10) * 2**15 (IEEE 754-2008, table 3.5: emax 15, p 11)."""

FLOAT16_UNIT_ROUNDOFF = 2.0 ** -11
"""Relative error of one round to nearest in binary16 (2**-p with p = 11 significant bits) for a normal value;
a subnormal's absolute error is at most half its spacing, 2**-25."""

_FIX = "retrain or re-export the level with smaller weights, or store them as float32 (--navigate-weights float32)"


def round_weights_float16(values: np.ndarray, what: str = "a weight") -> np.ndarray:
    """``values`` rounded to the nearest binary16, as float32 (the values the C computes with). CodegenError when
    one is not finite or beyond :data:`FLOAT16_MAX` (binary16 would hold infinity), naming ``what`` and the fix."""
    v = np.asarray(values, dtype=np.float32)
    bad = ~np.isfinite(v)
    if bad.any():
        raise CodegenError(f"{what} holds a non-finite value ({v[bad].reshape(-1)[0]}); it cannot be compiled: {_FIX}")
    big = np.abs(v) > FLOAT16_MAX
    if big.any():
        raise CodegenError(f"{what} holds {v[big].reshape(-1)[0]:g}, beyond float16's largest value {FLOAT16_MAX:g}: "
                           f"{_FIX}")
    return v.astype(np.float16).astype(np.float32)


def float16_bits(values: np.ndarray, what: str = "a weight") -> np.ndarray:
    """The binary16 bit patterns (uint16) of ``values`` rounded by :func:`round_weights_float16`."""
    return round_weights_float16(values, what).astype(np.float16).view(np.uint16)


def weight_initializers(onnx_model) -> dict[str, str]:
    """Initializer name -> the node that reads it as a weight: a Gemm's or MatMul's ``B``, a GRU's ``W`` and ``R``
    (the tensors c_model.py stores in 16 bits; a Gemm's ``C`` and a GRU's ``B``, biases, are not)."""
    names = {t.name for t in onnx_model.graph.initializer}
    picked: dict[str, str] = {}
    for node in onnx_model.graph.node:
        slots = {"Gemm": (1,), "MatMul": (1,), "GRU": (1, 2)}.get(node.op_type, ())
        for k in slots:
            if k < len(node.input) and node.input[k] in names:
                picked[node.input[k]] = node.name or node.op_type
    return picked


def float16_reference_onnx(path: str | Path) -> bytes:
    """The ONNX file at ``path`` with its weights (:func:`weight_initializers`) rounded by
    :func:`round_weights_float16`, serialized for ``onnxruntime.InferenceSession``: the network whose weights the C
    stores in 16 bits. CodegenError when the lowered copy's weights are not those (a weight computed from other
    constants, a Gemm ``alpha`` != 1): the C would then compute another network than this reference."""
    import onnx
    from onnx import numpy_helper

    from deploy.crazyflie.graph import Dense, Gru, lower_onnx

    model = onnx.load(str(path))
    weights = weight_initializers(model)
    for k, t in enumerate(model.graph.initializer):
        if t.name in weights and t.data_type == onnx.TensorProto.FLOAT:
            rounded = round_weights_float16(numpy_helper.to_array(t), f"weight {t.name!r} of node {weights[t.name]!r}")
            model.graph.initializer[k].CopyFrom(numpy_helper.from_array(rounded, t.name))
    lowered = lower_onnx(model, allow_state=True)
    for s in lowered.steps:
        mats = (s.weight,) if isinstance(s, Dense) else (s.w, s.r) if isinstance(s, Gru) else ()
        for m in mats:
            if not np.array_equal(round_weights_float16(m), m):
                raise CodegenError(f"{path}: the weights of node {s.node!r} are not an initializer the float16 "
                                   "reference can round (computed from other constants, or scaled by a Gemm alpha); "
                                   "store this level's weights as float32 (--navigate-weights float32)")
    return model.SerializeToString()


def _largest_slope(kind: str, alpha: float, v: np.ndarray, dv: np.ndarray) -> np.ndarray:
    """The activation's largest slope over ``[v - dv, v + dv]`` (elementwise): by the mean value theorem its output
    moves by at most that times ``dv``. ReLU and ELU(alpha <= 1) grow steepest at the interval's top (0, alpha e^x,
    1), tanh and sigmoid nearest to 0 (1 - tanh^2, s (1 - s)); leaky ReLU and ELU(alpha > 1): max(1, |alpha|)."""
    top, near0 = v + dv, np.maximum(np.abs(v) - dv, 0.0)
    if kind == "relu":
        return np.where(top > 0.0, 1.0, 0.0)
    if kind == "elu" and 0.0 <= alpha <= 1.0:
        return np.where(top >= 0.0, 1.0, alpha * np.exp(np.minimum(top, 0.0)))
    if kind == "tanh":
        return 1.0 - np.tanh(near0) ** 2
    if kind == "sigmoid":
        sg = 1.0 / (1.0 + np.exp(-near0))
        return sg * (1.0 - sg)
    return np.full(v.shape, max(1.0, abs(alpha)))


def float16_deviation_bound(model, x: np.ndarray, state: np.ndarray | None = None):
    """A bound on |outputs with float16 weights - outputs with float32 weights| per output, for rows ``x`` (and a
    recurrent model's ``state``, the same for both). Not a first-order estimate: each step's split of the difference
    below is exact, so the bound holds but for float32 arithmetic's own rounding (~1e-7 relative).

    A dense layer ``y = W x + b`` computed with rounded ``Ŵ = W + ΔW`` on an input that already moved by ``Δx``:
    ``Ŵ x̂ - W x = Ŵ Δx + ΔW x``, so ``|Δy| <= |Ŵ| |Δx| + |ΔW| |x|`` (row by row, absolute values), with
    ``|ΔW| <= 2**-11 |W|`` (binary16's unit roundoff) and in fact the exact rounding error used here. Each weight
    adds its rounding error times its input, summed over the layer; the next layers carry it through ``|Ŵ|``. An
    activation moves its output by at most its slope times the input's move (ReLU, ELU(alpha <= 1), tanh: 1;
    sigmoid: 1/4), and by its largest slope over the interval the input may be in (:func:`_largest_slope`: a unit
    deep in ELU's negative side barely moves); a constant add moves nothing, a multiply or divide scales by ``|c|``,
    a clamp does not widen it and holds an output still whose interval lies wholly beyond a bound.
    A GRU step: ``Δgx = |Ŵ| Δx + |ΔW| |x|``, ``Δgh = |R̂| Δh + |ΔR| |h|``; ``Δz, Δr <= slope (Δgx + Δgh)``
    (sigmoid's, at most 1/4); ``Δn <= slope (Δgx_h + Δgh_h + Δr |gh_h|)`` (tanh's; r in (0, 1)); the next state
    ``(1 - ẑ)(n̂ - n) - (ẑ - z)(n - h) + ẑ (ĥ - h)`` moves by at most ``Δn + Δz |n - h| + Δh``.

    Returns the bound on the outputs (batch, n_out) and, recurrent, on the next state (batch, H)."""
    from deploy.crazyflie.graph import Activation, Clamp, Concat, ConstOp, Dense, Gru, VarOp, _activation_np

    x = np.asarray(x, dtype=np.float32).reshape(-1, model.input_size)
    values = {model.input_name: x.astype(np.float64)}
    moved = {model.input_name: np.zeros(x.shape)}
    if model.recurrent:
        h = np.zeros((len(x), model.state_size)) if state is None else np.asarray(state, np.float64).reshape(len(x), -1)
        values[model.state_input], moved[model.state_input] = h, np.zeros(h.shape)
    for s in model.steps:
        if isinstance(s, Dense):
            w = s.weight.astype(np.float64)
            dw = np.abs(round_weights_float16(s.weight).astype(np.float64) - w)
            w_hat = np.abs(w) + dw
            y = values[s.src] @ w.T + (0.0 if s.bias is None else s.bias)
            values[s.dst], moved[s.dst] = y, moved[s.src] @ w_hat.T + np.abs(values[s.src]) @ dw.T
        elif isinstance(s, ConstOp):
            c = s.const.astype(np.float64)
            a, b = (c, values[s.src]) if s.reverse else (values[s.src], c)
            values[s.dst] = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}[s.op]
            if s.op in ("add", "sub"):
                moved[s.dst] = moved[s.src]
            elif s.op == "mul":
                moved[s.dst] = np.abs(c) * moved[s.src]
            elif not s.reverse:
                moved[s.dst] = moved[s.src] / np.abs(c)
            else:
                raise CodegenError(f"float16_deviation_bound: node {s.node!r} divides by the row; no bound is derived")
        elif isinstance(s, VarOp):
            a, b = values[s.a], values[s.b]
            if s.op not in ("add", "sub"):
                raise CodegenError(f"float16_deviation_bound: node {s.node!r} multiplies two rows; no bound is derived")
            values[s.dst], moved[s.dst] = (a + b if s.op == "add" else a - b), moved[s.a] + moved[s.b]
        elif isinstance(s, Activation):
            values[s.dst] = _activation_np(s.kind, values[s.src].astype(np.float32), s.alpha).astype(np.float64)
            moved[s.dst] = _largest_slope(s.kind, s.alpha, values[s.src], moved[s.src]) * moved[s.src]
        elif isinstance(s, Clamp):
            lo, hi = -np.inf if s.low is None else s.low, np.inf if s.high is None else s.high
            v, dv = values[s.src], moved[s.src]
            values[s.dst] = np.clip(v, lo, hi)
            moved[s.dst] = np.where((v - dv >= hi) | (v + dv <= lo), 0.0, dv)
        elif isinstance(s, Concat):
            values[s.dst] = np.concatenate((values[s.a], values[s.b]), axis=1)
            moved[s.dst] = np.concatenate((moved[s.a], moved[s.b]), axis=1)
        elif isinstance(s, Gru):
            n_h = s.hidden_size
            xs, hs = values[s.src], values[s.state]
            w, r = s.w.astype(np.float64), s.r.astype(np.float64)
            dw = np.abs(round_weights_float16(s.w).astype(np.float64) - w)
            dr = np.abs(round_weights_float16(s.r).astype(np.float64) - r)
            gx, gh = xs @ w.T + s.wb, hs @ r.T + s.rb
            d_gx = moved[s.src] @ (np.abs(w) + dw).T + np.abs(xs) @ dw.T
            d_gh = moved[s.state] @ (np.abs(r) + dr).T + np.abs(hs) @ dr.T
            sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
            z, rg = sig(gx[:, :n_h] + gh[:, :n_h]), sig(gx[:, n_h:2 * n_h] + gh[:, n_h:2 * n_h])
            n = np.tanh(gx[:, 2 * n_h:] + rg * gh[:, 2 * n_h:])
            dz_in, dr_in = d_gx[:, :n_h] + d_gh[:, :n_h], d_gx[:, n_h:2 * n_h] + d_gh[:, n_h:2 * n_h]
            dz = _largest_slope("sigmoid", 0.0, gx[:, :n_h] + gh[:, :n_h], dz_in) * dz_in
            dr_gate = _largest_slope("sigmoid", 0.0, gx[:, n_h:2 * n_h] + gh[:, n_h:2 * n_h], dr_in) * dr_in
            dn_in = d_gx[:, 2 * n_h:] + d_gh[:, 2 * n_h:] + dr_gate * np.abs(gh[:, 2 * n_h:])
            dn = _largest_slope("tanh", 0.0, gx[:, 2 * n_h:] + rg * gh[:, 2 * n_h:], dn_in) * dn_in
            values[s.dst] = (1.0 - z) * n + z * hs
            moved[s.dst] = dn + dz * np.abs(n - hs) + moved[s.state]  # (ẑ (ĥ - h): ẑ < 1)
        else:  # pragma: no cover - the lowering only makes the types above
            raise CodegenError(f"internal: unknown step {s!r}")
    out = moved[model.output_name]
    return out if not model.recurrent else (out, moved[model.state_output])

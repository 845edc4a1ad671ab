"""Lower an exported MLP policy (ONNX) to a short list of vector operations.

The ONNX graph of an rsl_rl / torch policy is a chain of dense layers, element-wise
normalization and activations on one observation row ``[1, n]``. This module walks the graph
once, folds everything that only depends on constants (initializers, ``Constant`` nodes),
and turns every operation on the observation into one :class:`Step`. The steps are what the
C code generator emits; :meth:`LoweredModel.run` evaluates them with numpy, which the tests use
to check the lowering on its own.

Supported on the observation path: Gemm, MatMul, Add, Sub, Mul, Div, Neg, Relu, LeakyRelu,
Elu, Tanh, Sigmoid, Clip, Identity, Constant, Dropout (inference), Concat of two rows, and
Reshape / Flatten / Squeeze / Unsqueeze of a ``[1, n]`` row. Any other operator is refused with
an error that names it.

A recurrent graph (``lower_onnx(..., allow_state=True)``: the navigate level of
sim/agents/memory_model.py, exported by deploy/onnx_export/navigate.py) takes its state as a
second input ``[1, batch, H]`` and returns the next state as a second output: one ONNX ``GRU``
node (one step, one layer, forward, ``linear_before_reset=1`` as torch exports it) reads it as
its ``initial_h`` and writes it as its ``Y_h``. The lowered model then carries the state's
names (:attr:`LoweredModel.state_input`, :attr:`LoweredModel.state_output`); its
:class:`Gru` step is ONNX's equations for that attribute, every other GRU variant is refused
with the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from deploy.crazyflie.errors import CodegenError, UnsupportedOperatorError

SUPPORTED_OPERATORS: tuple[str, ...] = (
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Neg", "Relu", "LeakyRelu", "Elu", "Tanh", "Sigmoid",
    "Clip", "Identity", "Constant", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "GRU",
)
"""Operators allowed on the observation path (operators on constants only are folded)."""

_CONST_FOLDABLE = tuple(o for o in SUPPORTED_OPERATORS if o != "GRU") + ("Cast", "Sqrt", "Reciprocal", "Transpose",
                                                                           "Shape", "Pow")

ACTIVATIONS = ("relu", "leaky_relu", "elu", "tanh", "sigmoid")
"""Element-wise nonlinearities a :class:`Activation` step may hold."""

TRANSCENDENTAL = ("elu", "tanh", "sigmoid")
"""Activations that cost one expf / tanhf call per element."""


# ---- the lowered program ----------------------------------------------------------------------
@dataclass(frozen=True)
class Dense:
    """``dst = weight @ src + bias``; weight is (out, in), row-major."""

    src: str
    dst: str
    weight: np.ndarray
    bias: np.ndarray | None
    node: str


@dataclass(frozen=True)
class ConstOp:
    """``dst = src OP c`` (or ``c OP src`` when ``reverse``), c broadcast to the row."""

    op: str  # add, sub, mul, div
    src: str
    dst: str
    const: np.ndarray  # (n,) float32, already broadcast
    reverse: bool
    node: str


@dataclass(frozen=True)
class VarOp:
    """``dst = a OP b`` for two rows of the same size (residual connections)."""

    op: str
    a: str
    b: str
    dst: str
    node: str


@dataclass(frozen=True)
class Activation:
    kind: str  # one of ACTIVATIONS
    src: str
    dst: str
    alpha: float
    node: str


@dataclass(frozen=True)
class Clamp:
    src: str
    dst: str
    low: float | None
    high: float | None
    node: str


@dataclass(frozen=True)
class Concat:
    """``dst = [a, b]``: two rows side by side (the observation beside a recurrent memory's output)."""

    a: str
    b: str
    dst: str
    node: str


GRU_LINEAR_BEFORE_RESET = 1
"""The ``linear_before_reset`` of the GRU steps lowered: what torch's exporter writes for ``torch.nn.GRU`` (its reset
gate multiplies ``R_h h + Rb_h``, after the linear map), the one variant the C implements."""


@dataclass(frozen=True)
class Gru:
    """One step of ONNX's GRU (``linear_before_reset=1``, the default Sigmoid / Tanh activations), ``dst`` the next
    state from the row ``src`` and the state ``state`` (size H); weights in ONNX's gate order z, r, h:

    ``gx = w @ src + wb``, ``gh = r @ state + rb`` (each 3H); ``z = sigmoid(gx_z + gh_z)``,
    ``r = sigmoid(gx_r + gh_r)``, ``n = tanh(gx_h + r * gh_h)``, ``dst = (1 - z) * n + z * state``.
    """

    src: str
    state: str
    dst: str
    w: np.ndarray  # (3H, n_in), row-major
    r: np.ndarray  # (3H, H)
    wb: np.ndarray  # (3H,)
    rb: np.ndarray  # (3H,)
    node: str

    @property
    def hidden_size(self) -> int:
        return int(self.r.shape[1])


Step = Dense | ConstOp | VarOp | Activation | Clamp | Concat | Gru

_READ_FIELDS = ("src", "a", "b", "state")


def step_reads(step: Step) -> tuple[str, ...]:
    """The row values a step reads (its sources, a GRU's state included), in order."""
    return tuple(getattr(step, a) for a in _READ_FIELDS if hasattr(step, a))


@dataclass
class LoweredModel:
    """The policy as straight-line vector code: one input row, one output row (and, recurrent, the state in and out)."""

    input_name: str
    output_name: str
    sizes: dict[str, int]
    """Length of every row value (input, intermediates, output)."""
    steps: list[Step]
    metadata: dict[str, str] = field(default_factory=dict)
    opset: int = 0
    state_input: str | None = None
    """A recurrent graph's state input (``[1, batch, H]``); None: feed-forward."""
    state_output: str | None = None
    """The row its GRU writes, returned as the graph's second output (the next decision's state)."""

    @property
    def input_size(self) -> int:
        return self.sizes[self.input_name]

    @property
    def output_size(self) -> int:
        return self.sizes[self.output_name]

    @property
    def dense_layers(self) -> list[Dense]:
        return [s for s in self.steps if isinstance(s, Dense)]

    @property
    def recurrent(self) -> bool:
        return self.state_input is not None

    @property
    def state_size(self) -> int:
        """H, the recurrent state's length (0: feed-forward)."""
        return self.sizes[self.state_input] if self.state_input is not None else 0

    def run(self, x: np.ndarray, state: np.ndarray | None = None):
        """Evaluate the steps with numpy in float32 on rows ``x`` of shape (batch, input_size) -> the output rows.

        Recurrent: ``state`` ([1, batch, H] as the graph takes it; None: zeros) -> ``(outputs, next state [1, batch, H])``,
        as onnxruntime returns the graph's two outputs."""
        x = np.asarray(x, dtype=np.float32).reshape(-1, self.input_size)
        values = {self.input_name: x}
        if self.state_input is None:
            if state is not None:
                raise CodegenError("a state was given to a feed-forward model; it takes the observation rows alone")
        else:
            h = np.zeros((len(x), self.state_size), np.float32) if state is None else np.asarray(state, np.float32)
            values[self.state_input] = h.reshape(len(x), self.state_size)
        for s in self.steps:
            if isinstance(s, Dense):
                y = values[s.src] @ s.weight.T
                values[s.dst] = (y + s.bias if s.bias is not None else y).astype(np.float32)
            elif isinstance(s, ConstOp):
                a, b = (s.const, values[s.src]) if s.reverse else (values[s.src], s.const)
                values[s.dst] = _ARITH[s.op](a, b).astype(np.float32)
            elif isinstance(s, VarOp):
                values[s.dst] = _ARITH[s.op](values[s.a], values[s.b]).astype(np.float32)
            elif isinstance(s, Activation):
                values[s.dst] = _activation_np(s.kind, values[s.src], s.alpha)
            elif isinstance(s, Clamp):
                lo = -np.inf if s.low is None else s.low
                hi = np.inf if s.high is None else s.high
                values[s.dst] = np.clip(values[s.src], lo, hi).astype(np.float32)
            elif isinstance(s, Concat):
                values[s.dst] = np.concatenate((values[s.a], values[s.b]), axis=1).astype(np.float32)
            elif isinstance(s, Gru):
                values[s.dst] = _gru_np(s, values[s.src], values[s.state])
        if self.state_output is None:
            return values[self.output_name]
        return values[self.output_name], values[self.state_output][None]


_ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _activation_np(kind: str, x: np.ndarray, alpha: float) -> np.ndarray:
    x = x.astype(np.float32)
    with np.errstate(over="ignore"):
        if kind == "relu":
            y = np.maximum(x, 0)
        elif kind == "leaky_relu":
            y = np.where(x >= 0, x, alpha * x)
        elif kind == "elu":
            y = np.where(x >= 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1))
        elif kind == "tanh":
            y = np.tanh(x)
        else:
            y = 1 / (1 + np.exp(-x))
    return y.astype(np.float32)


def _gru_np(s: Gru, x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """ONNX's GRU step (linear_before_reset=1) in float32: :class:`Gru`'s equations on rows (batch, n)."""
    n_h = s.hidden_size
    gx = (x @ s.w.T + s.wb).astype(np.float32)
    gh = (h @ s.r.T + s.rb).astype(np.float32)
    z = _activation_np("sigmoid", gx[:, :n_h] + gh[:, :n_h], 0.0)
    r = _activation_np("sigmoid", gx[:, n_h:2 * n_h] + gh[:, n_h:2 * n_h], 0.0)
    n = _activation_np("tanh", gx[:, 2 * n_h:] + r * gh[:, 2 * n_h:], 0.0)
    return ((np.float32(1.0) - z) * n + z * h).astype(np.float32)


# ---- loading -------------------------------------------------------------------------------------
def load_onnx(path: str | Path):
    """Load and check an ONNX file; a clear error when it is missing or corrupt."""
    import onnx

    path = Path(path)
    if not path.is_file():
        raise CodegenError(f"ONNX model {path} does not exist; export one with `python deploy/export.py` "
                           "or pass the path of models/<name>.onnx")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx raises several unrelated types
        raise CodegenError(f"{path} is not a valid ONNX model ({exc}); re-export it") from exc
    return model


def lower_onnx(model, allow_state: bool = False) -> LoweredModel:
    """Lower an ``onnx.ModelProto`` (or a path) to a :class:`LoweredModel`.

    ``allow_state``: a recurrent graph (observation and GRU state in, actions and next state out) is lowered too; the
    caller's C keeps the state (deploy/crazyflie/c_navigate.py does, for the navigate level). Without it a recurrent
    graph is refused."""
    if isinstance(model, (str, Path)):
        model = load_onnx(model)
    return _Lowerer(model, allow_state).lower()


class _Lowerer:
    def __init__(self, model, allow_state: bool = False):
        from onnx import numpy_helper

        self.model = model
        self.allow_state = allow_state
        self.state_input: str | None = None
        self.graph = model.graph
        self.numpy_helper = numpy_helper
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        self.consts: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.shapes: dict[str, tuple[int, ...]] = {}  # row values: their shape, all dims 1 but one
        self.alias: dict[str, str] = {}  # Identity / reshape outputs -> the value holding the row
        self.alias_shapes: dict[str, tuple[int, ...]] = {}  # the shape a reshape gave its alias
        self.steps: list[Step] = []
        self.sizes: dict[str, int] = {}

    # -- helpers ------------------------------------------------------------------------------
    def _name(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def _is_var(self, name: str) -> bool:
        return self._name(name) in self.shapes

    def _const(self, node, name: str, what: str) -> np.ndarray:
        if name not in self.consts:
            raise UnsupportedOperatorError(
                f"node {node.name!r} ({node.op_type}): its {what} ({name!r}) depends on the observation; "
                "the C code generator needs it to be a constant (weights, bias, clip bounds)")
        return self.consts[name]

    def _define(self, name: str, shape: tuple[int, ...]) -> None:
        n = int(np.prod(shape))
        if sum(1 for d in shape if d != 1) > 1:
            raise CodegenError(f"value {name!r} has shape {list(shape)}; only one row [1, n] per inference is supported")
        self.shapes[name] = tuple(int(d) for d in shape)
        self.sizes[name] = n

    @staticmethod
    def _attrs(node) -> dict:
        from onnx import helper

        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    # -- the walk -----------------------------------------------------------------------------
    def lower(self) -> LoweredModel:
        inputs = [i for i in self.graph.input if i.name not in self.consts]
        if len(inputs) == 2 and self._feeds_gru_state(inputs[1].name):
            return self._lower_recurrent(inputs)
        if len(inputs) != 1:
            raise CodegenError(f"the policy graph must have exactly one input (the observation), it has "
                               f"{len(inputs)}: {[i.name for i in inputs]}")
        if len(self.graph.output) != 1:
            raise CodegenError(f"the policy graph must have exactly one output (the actions), it has "
                               f"{len(self.graph.output)}: {[o.name for o in self.graph.output]}")
        inp = inputs[0]
        self._define_input(inp)
        for node in self.graph.node:
            self._lower_node(node)
        return self._finish(inp.name, None)

    def _define_input(self, inp) -> None:
        """The observation input: float32, ``[batch, n]`` or ``[n]`` (a symbolic batch taken as 1)."""
        tt = inp.type.tensor_type
        if tt.elem_type != 1:  # TensorProto.FLOAT
            raise CodegenError(f"input {inp.name!r} must be float32 (elem_type 1), it is elem_type {tt.elem_type}")
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]  # symbolic batch -> 1
        if not dims or len(dims) > 2 or (len(dims) == 2 and dims[0] != 1):
            raise CodegenError(f"input {inp.name!r} has shape {dims}; expected [batch, n] or [n]")
        self._define(inp.name, tuple(dims))

    def _finish(self, input_name: str, state_output: str | None) -> LoweredModel:
        out = self._name(self.graph.output[0].name)
        if out not in self.shapes:
            raise CodegenError(f"graph output {self.graph.output[0].name!r} does not depend on the observation")
        if out == input_name:
            raise CodegenError("the graph output is its input; there is no policy to compile")
        keep = (out,) if state_output is None else (out, state_output)
        steps = _fuse_bias(self.steps, keep)
        meta = {p.key: p.value for p in self.model.metadata_props}
        used = {input_name} | {s.dst for s in steps} | {r for s in steps for r in step_reads(s)}
        sizes = {k: v for k, v in self.sizes.items() if k in used}
        return LoweredModel(input_name=input_name, output_name=out, sizes=sizes, steps=steps, metadata=meta,
                            opset=self.opset, state_input=self.state_input, state_output=state_output)

    # -- a recurrent graph: observation and state in, actions and state out ----------------------------------------
    def _feeds_gru_state(self, name: str) -> bool:
        """Whether graph input ``name`` is some GRU node's ``initial_h`` (its 6th input)."""
        return any(n.op_type == "GRU" and len(n.input) > 5 and n.input[5] == name for n in self.graph.node)

    def _lower_recurrent(self, inputs) -> LoweredModel:
        obs, state = inputs
        if not self.allow_state:
            raise CodegenError(f"the graph is recurrent (input {state.name!r} is a GRU's state): the C generator keeps a "
                               "recurrent state for the navigate level only (--navigate); export this model feed-forward")
        if len(self.graph.output) != 2:
            raise CodegenError(f"the recurrent graph must have two outputs (the actions, then the next state), it has "
                               f"{len(self.graph.output)}: {[o.name for o in self.graph.output]}; re-export it "
                               "(deploy/onnx_export/navigate.py)")
        self._define_input(obs)
        tt = state.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]  # symbolic batch -> 1
        if tt.elem_type != 1 or len(dims) != 3 or dims[0] != 1 or dims[1] != 1:
            raise CodegenError(f"state input {state.name!r} has shape {dims} (elem_type {tt.elem_type}); expected float32 "
                               "[1, batch, H] (one layer, one direction): re-export the level")
        self._define(state.name, tuple(dims))
        self.state_input = state.name
        for node in self.graph.node:
            self._lower_node(node)
        grus = [s for s in self.steps if isinstance(s, Gru)]
        if len(grus) != 1:
            raise UnsupportedOperatorError(f"the recurrent graph has {len(grus)} GRU steps; the C generator keeps one "
                                           "state: export one single-layer GRU")
        readers = [s.node for s in self.steps if state.name in step_reads(s) and s is not grus[0]]
        if readers or grus[0].src == state.name:
            raise UnsupportedOperatorError(f"the state input {state.name!r} is read by {readers or [grus[0].node]} besides "
                                           "the GRU's initial_h; the C updates the state in place: read it in the GRU only")
        state_out = self._name(self.graph.output[1].name)
        if state_out != grus[0].dst:
            raise CodegenError(f"the graph's second output {self.graph.output[1].name!r} is not the GRU's next state "
                               f"(Y_h of node {grus[0].node!r}); export (actions, h_out) with h_out the GRU's own")
        if self._name(self.graph.output[0].name) == state_out:
            raise CodegenError("the graph's first output is its state; export (actions, h_out)")
        return self._finish(obs.name, state_out)

    def _lower_node(self, node) -> None:
        op = node.op_type
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOperatorError(
                f"operator {node.domain}::{op} (node {node.name!r}) is not supported by the Crazyflie C code "
                f"generator; supported: {', '.join(SUPPORTED_OPERATORS)}")
        ins = [self._name(i) for i in node.input]
        if op == "Constant":
            self.consts[node.output[0]] = self._constant_value(node)
            return
        present = [i for i in ins if i]
        if not any(self._is_var(i) for i in present):
            self._fold(node, ins)
            return
        if op not in SUPPORTED_OPERATORS:
            raise UnsupportedOperatorError(
                f"operator {op!r} (node {node.name!r}) is not supported by the Crazyflie C code generator; "
                f"supported: {', '.join(SUPPORTED_OPERATORS)}. Export the policy as a plain MLP or extend "
                "deploy/crazyflie/graph.py")
        getattr(self, f"_op_{op.lower()}")(node, ins, self._attrs(node))

    def _constant_value(self, node) -> np.ndarray:
        attrs = self._attrs(node)
        if "value" in attrs:
            return self.numpy_helper.to_array(attrs["value"])
        for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                           ("value_ints", np.int64)):
            if key in attrs:
                return np.asarray(attrs[key], dtype=dtype)
        raise UnsupportedOperatorError(f"Constant node {node.name!r} uses attributes {sorted(attrs)}, not supported")

    def _fold(self, node, ins: list[str]) -> None:
        """Evaluate a node whose inputs are all constants, once, at generation time."""
        op = node.op_type
        if op not in _CONST_FOLDABLE:
            raise UnsupportedOperatorError(
                f"operator {op!r} (node {node.name!r}) is not supported by the Crazyflie C code generator "
                f"(not even on constants); supported: {', '.join(SUPPORTED_OPERATORS)}")
        try:
            from onnx.reference import ReferenceEvaluator
            from onnx import helper

            names = [f"i{k}" if n else "" for k, n in enumerate(ins)]
            sub = helper.make_node(op, names, [f"o{k}" for k in range(len(node.output))], domain=node.domain,
                                   **self._attrs(node))
            graph = helper.make_graph([sub], "fold", [], [helper.make_tensor_value_info(f"o{k}", 0, None)
                                                          for k in range(len(node.output))])
            m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset or 18)])
            feeds = {f"i{k}": self.consts[n] for k, n in enumerate(ins) if n}
            results = ReferenceEvaluator(m).run(None, feeds)
        except KeyError as exc:
            raise CodegenError(f"node {node.name!r} ({op}) reads {exc}, which is neither an initializer nor "
                               "computed before it") from exc
        for name, value in zip(node.output, results):
            self.consts[name] = np.asarray(value)

    # -- operators on the observation row -------------------------------------------------------
    def _out(self, node, shape) -> str:
        name = node.output[0]
        self._define(name, shape)
        return name

    def _op_identity(self, node, ins, attrs):
        self.alias[node.output[0]] = ins[0]

    _op_dropout = _op_identity

    def _reshape_to(self, node, src: str, shape: tuple[int, ...]) -> None:
        """A reshape of the row is a new name for the same storage, with its own shape (rank)."""
        n = self.sizes[src]
        if int(np.prod(shape)) != n or sum(1 for d in shape if d != 1) > 1:
            raise CodegenError(f"node {node.name!r} ({node.op_type}) reshapes the row of {n} to {list(shape)}; only "
                               "reshapes between [1, n] and [n] are supported")
        self.alias[node.output[0]] = src
        self.alias_shapes[node.output[0]] = tuple(int(d) for d in shape)

    def _shape_of(self, raw_name: str) -> tuple[int, ...]:
        return self.alias_shapes.get(raw_name) or self.shapes[self._name(raw_name)]

    def _op_reshape(self, node, ins, attrs):
        src = ins[0]
        target = [int(d) for d in self._const(node, ins[1], "target shape")]
        old = self._shape_of(node.input[0])
        shape = [old[k] if d == 0 and k < len(old) else d for k, d in enumerate(target)]
        if shape.count(-1) == 1:
            known = int(np.prod([d for d in shape if d != -1]))
            shape[shape.index(-1)] = self.sizes[src] // max(known, 1)
        self._reshape_to(node, src, tuple(shape))

    def _op_flatten(self, node, ins, attrs):
        self._reshape_to(node, ins[0], (1, self.sizes[ins[0]]))

    def _op_squeeze(self, node, ins, attrs):
        self._reshape_to(node, ins[0], (self.sizes[ins[0]],))

    def _op_unsqueeze(self, node, ins, attrs):
        self._reshape_to(node, ins[0], (1, self.sizes[ins[0]]))

    def _op_gemm(self, node, ins, attrs):
        if not self._is_var(ins[0]) or any(self._is_var(i) for i in ins[1:] if i):
            raise UnsupportedOperatorError(f"Gemm node {node.name!r}: only observation-row x constant-weights is supported")
        if attrs.get("transA", 0):
            raise UnsupportedOperatorError(f"Gemm node {node.name!r} has transA=1; not supported")
        b = self._const(node, ins[1], "weight B").astype(np.float32)
        if b.ndim != 2:
            raise CodegenError(f"Gemm node {node.name!r}: weight has shape {list(b.shape)}, expected 2-D")
        w = b if attrs.get("transB", 0) else b.T
        w = (w * np.float32(attrs.get("alpha", 1.0))).astype(np.float32)
        n_in = self.sizes[ins[0]]
        if w.shape[1] != n_in:
            raise CodegenError(f"Gemm node {node.name!r}: weight takes {w.shape[1]} inputs, the row has {n_in}")
        bias = None
        if len(ins) > 2 and ins[2]:
            c = self._const(node, ins[2], "bias C").astype(np.float32) * np.float32(attrs.get("beta", 1.0))
            bias = self._broadcast(node, c, w.shape[0])
        dst = self._out(node, (1, w.shape[0]))
        self.steps.append(Dense(ins[0], dst, np.ascontiguousarray(w), bias, node.name))

    def _op_matmul(self, node, ins, attrs):
        if not self._is_var(ins[0]) or self._is_var(ins[1]):
            raise UnsupportedOperatorError(f"MatMul node {node.name!r}: only observation-row x constant-weights is supported")
        b = self._const(node, ins[1], "weight").astype(np.float32)
        if b.ndim != 2:
            raise CodegenError(f"MatMul node {node.name!r}: weight has shape {list(b.shape)}, expected 2-D")
        n_in = self.sizes[ins[0]]
        if b.shape[0] != n_in:
            raise CodegenError(f"MatMul node {node.name!r}: weight takes {b.shape[0]} inputs, the row has {n_in}")
        rank = len(self._shape_of(node.input[0]))
        dst = self._out(node, (b.shape[1],) if rank == 1 else (1, b.shape[1]))
        self.steps.append(Dense(ins[0], dst, np.ascontiguousarray(b.T), None, node.name))

    def _broadcast(self, node, c: np.ndarray, n: int) -> np.ndarray:
        c = np.asarray(c, dtype=np.float32)
        if c.size == 1:
            return np.full(n, c.reshape(()), dtype=np.float32)
        if c.size == n and sum(1 for d in c.shape if d != 1) == 1 and c.shape[-1] == n:
            return c.reshape(n).astype(np.float32)
        raise CodegenError(f"node {node.name!r} ({node.op_type}): constant of shape {list(c.shape)} does not "
                           f"broadcast to the row of {n}")

    def _arith(self, node, ins, op):
        a, b = ins[0], ins[1]
        if self._is_var(a) and self._is_var(b):
            if self.sizes[a] != self.sizes[b]:
                raise CodegenError(f"node {node.name!r} ({node.op_type}) combines rows of {self.sizes[a]} and "
                                   f"{self.sizes[b]}; only equal sizes are supported")
            dst = self._out(node, self._shape_of(node.input[0]))
            self.steps.append(VarOp(op, a, b, dst, node.name))
            return
        reverse = not self._is_var(a)
        var, const = (b, a) if reverse else (a, b)
        n = self.sizes[var]
        c = self._broadcast(node, self.consts[const], n)
        shape = self._shape_of(node.input[1] if reverse else node.input[0])
        if self.consts[const].ndim > len(shape):
            shape = (1,) * (self.consts[const].ndim - len(shape)) + tuple(shape)
        dst = self._out(node, shape)
        self.steps.append(ConstOp(op, var, dst, c, reverse, node.name))

    def _op_add(self, node, ins, attrs):
        self._arith(node, ins, "add")

    def _op_sub(self, node, ins, attrs):
        self._arith(node, ins, "sub")

    def _op_mul(self, node, ins, attrs):
        self._arith(node, ins, "mul")

    def _op_div(self, node, ins, attrs):
        self._arith(node, ins, "div")

    def _op_neg(self, node, ins, attrs):
        n = self.sizes[ins[0]]
        dst = self._out(node, self._shape_of(node.input[0]))
        self.steps.append(ConstOp("mul", ins[0], dst, np.full(n, -1.0, dtype=np.float32), False, node.name))

    def _activation(self, node, ins, kind, alpha=0.0):
        dst = self._out(node, self._shape_of(node.input[0]))
        self.steps.append(Activation(kind, ins[0], dst, float(alpha), node.name))

    def _op_relu(self, node, ins, attrs):
        self._activation(node, ins, "relu")

    def _op_leakyrelu(self, node, ins, attrs):
        self._activation(node, ins, "leaky_relu", attrs.get("alpha", 0.01))

    def _op_elu(self, node, ins, attrs):
        self._activation(node, ins, "elu", attrs.get("alpha", 1.0))

    def _op_tanh(self, node, ins, attrs):
        self._activation(node, ins, "tanh")

    def _op_sigmoid(self, node, ins, attrs):
        self._activation(node, ins, "sigmoid")

    def _op_clip(self, node, ins, attrs):
        if self.opset and self.opset < 11:
            low, high = attrs.get("min"), attrs.get("max")
        else:
            def bound(k, what):
                if len(ins) > k and ins[k]:
                    v = self._const(node, ins[k], what)
                    if v.size != 1:
                        raise CodegenError(f"Clip node {node.name!r}: {what} must be a scalar, has shape {list(v.shape)}")
                    return float(v.reshape(()))
                return None
            low, high = bound(1, "min"), bound(2, "max")
        dst = self._out(node, self._shape_of(node.input[0]))
        self.steps.append(Clamp(ins[0], dst, low, high, node.name))

    def _op_concat(self, node, ins, attrs):
        """Two rows side by side along the row's axis (the last): ``[batch, a] ++ [batch, b]``."""
        if len(ins) != 2 or not all(self._is_var(i) for i in ins):
            raise UnsupportedOperatorError(
                f"Concat node {node.name!r} joins {len(ins)} values ({['row' if self._is_var(i) else 'constant' for i in ins]}); "
                "the C code generator joins two observation-path rows: export the concatenation of two computed rows")
        rank = max(len(self._shape_of(r)) for r in node.input)
        axis = int(attrs.get("axis", 0))
        if axis % rank != rank - 1:
            raise UnsupportedOperatorError(f"Concat node {node.name!r} joins along axis {axis} of rank-{rank} rows; only the "
                                           "row's own (last) axis keeps one row per inference: concatenate with axis=-1")
        n = self.sizes[ins[0]] + self.sizes[ins[1]]
        dst = self._out(node, (1,) * (rank - 1) + (n,))
        self.steps.append(Concat(ins[0], ins[1], dst, node.name))

    def _op_gru(self, node, ins, attrs):
        """One GRU step on the row ``X`` from the graph's state input (see :class:`Gru`); every variant the C does not
        implement is refused with the fix."""
        where = f"GRU node {node.name!r}"
        fix = ("export torch.nn.GRU(num_layers=1, bidirectional=False) stepped once per decision, as "
               "deploy/onnx_export/navigate.py does")
        expected = {"direction": "forward", "layout": 0, "linear_before_reset": GRU_LINEAR_BEFORE_RESET}
        for key, want in expected.items():
            got = attrs.get(key, {"direction": "forward", "layout": 0, "linear_before_reset": 0}[key])
            got = got.decode() if isinstance(got, bytes) else got
            if got != want:
                raise UnsupportedOperatorError(f"{where} has {key}={got!r}; the C code generator implements ONNX's GRU with "
                                               f"{key}={want!r} only: {fix}")
        acts = [a.decode() if isinstance(a, bytes) else a for a in attrs.get("activations", [])]
        if acts and [a.lower() for a in acts] != ["sigmoid", "tanh"]:
            raise UnsupportedOperatorError(f"{where} has activations {acts}; the C implements the default "
                                           f"['Sigmoid', 'Tanh']: {fix}")
        for key in ("clip", "activation_alpha", "activation_beta"):
            if key in attrs:
                raise UnsupportedOperatorError(f"{where} sets {key}={attrs[key]!r}; the C implements the GRU without it: {fix}")
        if len(ins) > 4 and ins[4]:
            raise UnsupportedOperatorError(f"{where} takes sequence_lens; the C steps one decision at a time: {fix}")
        if len(ins) < 6 or not ins[5] or ins[5] != self.state_input:
            raise UnsupportedOperatorError(f"{where}: its initial_h must be the graph's state input (the level's state "
                                           f"carried from decision to decision), it is {ins[5] if len(ins) > 5 else None!r}: "
                                           f"export the GRU with h_in as its initial state")
        if not self._is_var(ins[0]) or any(self._is_var(i) for i in ins[1:4] if i):
            raise UnsupportedOperatorError(f"{where}: only an observation-path row X with constant W, R, B is supported")
        w = self._const(node, ins[1], "weight W").astype(np.float32)
        r = self._const(node, ins[2], "recurrence weight R").astype(np.float32)
        n_h = int(attrs.get("hidden_size", r.shape[-1]))
        n_in = self.sizes[ins[0]]
        if w.shape != (1, 3 * n_h, n_in) or r.shape != (1, 3 * n_h, n_h):
            raise CodegenError(f"{where}: W {list(w.shape)} and R {list(r.shape)} do not fit hidden_size {n_h} and a row of "
                               f"{n_in} (expected [1, {3 * n_h}, {n_in}] and [1, {3 * n_h}, {n_h}]); re-export the level")
        if self.sizes[ins[5]] != n_h:
            raise CodegenError(f"{where}: the state input holds {self.sizes[ins[5]]} values, the GRU's hidden_size is {n_h}")
        b = np.zeros(6 * n_h, np.float32)
        if len(ins) > 3 and ins[3]:
            b = self._const(node, ins[3], "bias B").astype(np.float32)
            if b.shape != (1, 6 * n_h):
                raise CodegenError(f"{where}: B has shape {list(b.shape)}, expected [1, {6 * n_h}]; re-export the level")
            b = b.reshape(6 * n_h)
        outs = list(node.output) + [""] * (2 - len(node.output))
        y, y_h = outs[0], outs[1]
        dst = y_h or y
        self._define(dst, (1, 1, n_h) if y_h else (1, 1, 1, n_h))
        if y and y_h:  # seq_length 1: Y [1, 1, batch, H] holds the one step, Y_h
            self.alias[y] = y_h
            self.alias_shapes[y] = (1, 1, 1, n_h)
        self.steps.append(Gru(ins[0], ins[5], dst, np.ascontiguousarray(w[0]), np.ascontiguousarray(r[0]),
                              np.ascontiguousarray(b[:3 * n_h]), np.ascontiguousarray(b[3 * n_h:]), node.name))


def _fuse_bias(steps: list[Step], outputs: tuple[str, ...]) -> list[Step]:
    """Fold ``Dense`` (no bias) followed by ``Add``/``Sub`` of a constant into one biased layer.

    MatMul + Add is how some exporters write a Linear layer; fusing it saves a pass.
    """
    readers: dict[str, int] = {}
    for s in steps:
        for r in step_reads(s):
            readers[r] = readers.get(r, 0) + 1
    out: list[Step] = []
    for s in steps:
        prev = out[-1] if out else None
        if (isinstance(s, ConstOp) and s.op in ("add", "sub") and not s.reverse and isinstance(prev, Dense)
                and s.src == prev.dst and readers.get(prev.dst, 0) == 1 and prev.dst not in outputs):
            c = s.const if s.op == "add" else -s.const
            bias = c if prev.bias is None else (prev.bias + c).astype(np.float32)
            out[-1] = Dense(prev.src, s.dst, prev.weight, bias.astype(np.float32), f"{prev.node}+{s.node}")
            continue
        out.append(s)
    return out

"""A frozen lower skill: an exported ONNX policy run as a torch module on the simulator's device.

The ONNX graph is read node by node into torch: ``Sub``/``Div`` (the exported observation
normalization), ``Gemm`` / ``MatMul`` + ``Add`` (linear layers), ``Elu``, ``Relu``, ``Tanh``,
``Sigmoid`` and a final ``Clip``: the architecture is the one the file describes, with the
file's initializers as constants. Anything else is refused with the op's name. The contract is
read from the file's metadata (``robot_hrl.runtime.read_model_metadata``) and the file's sha256
is kept, so a level trained over this skill can name it. ``tests/test_navigate_frozen_skill.py``
checks the torch module against onnxruntime.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract
from robot_hrl.errors import ModelLoadError

_UNARY = {"Elu": None, "Relu": torch.relu, "Tanh": torch.tanh, "Sigmoid": torch.sigmoid, "Identity": lambda x: x}


class OnnxGraphModule(torch.nn.Module):
    """The straight-line ONNX graph of an exported policy, evaluated with torch ops."""

    def __init__(self, model: onnx.ModelProto, source: str = "model"):
        super().__init__()
        graph = model.graph
        self.input_name = graph.input[0].name
        self.output_name = graph.output[0].name
        inits = {i.name: torch.from_numpy(numpy_helper.to_array(i).astype(np.float32).copy()) for i in graph.initializer}
        for k, (name, value) in enumerate(inits.items()):
            self.register_buffer(f"c{k}", value)
        self._const = {name: f"c{k}" for k, name in enumerate(inits)}
        self.nodes = []
        for node in graph.node:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type == "Constant":
                tensor = numpy_helper.to_array(attrs["value"]).astype(np.float32)
                key = f"c{len(self._const)}"
                self.register_buffer(key, torch.from_numpy(tensor.copy()))
                self._const[node.output[0]] = key
                continue
            if node.op_type not in ("Sub", "Div", "Add", "Mul", "Gemm", "MatMul", "Clip", *_UNARY):
                raise ModelLoadError(f"{source}: ONNX op {node.op_type!r} (node {node.name!r}) is not supported by the frozen-skill "
                                     "loader (it reads MLP policies: Gemm/MatMul/Add/Sub/Div/Mul, Elu/Relu/Tanh/Sigmoid, Clip); "
                                     "export the skill as such an MLP or extend sim/envs/frozen_skill.py")
            if node.op_type == "Gemm" and (attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0):
                raise ModelLoadError(f"{source}: Gemm node {node.name!r} with transA/alpha/beta is not supported")
            self.nodes.append((node.op_type, list(node.input), node.output[0], attrs))

    def _value(self, values: dict, name: str) -> torch.Tensor:
        return values[name] if name in values else getattr(self, self._const[name])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        values = {self.input_name: obs}
        for op, inputs, output, attrs in self.nodes:
            x = [self._value(values, n) if n else None for n in inputs]
            if op == "Sub":
                y = x[0] - x[1]
            elif op == "Div":
                y = x[0] / x[1]
            elif op == "Add":
                y = x[0] + x[1]
            elif op == "Mul":
                y = x[0] * x[1]
            elif op == "MatMul":
                y = x[0] @ x[1]
            elif op == "Gemm":
                w = x[1].t() if attrs.get("transB", 0) else x[1]
                y = x[0] @ w
                if len(x) > 2 and x[2] is not None:
                    y = y + x[2]
            elif op == "Elu":
                y = torch.nn.functional.elu(x[0], alpha=float(attrs.get("alpha", 1.0)))
            elif op == "Clip":
                lo = x[1] if len(x) > 1 and x[1] is not None else None
                hi = x[2] if len(x) > 2 and x[2] is not None else None
                y = torch.clamp(x[0], min=lo, max=hi)
            else:
                y = _UNARY[op](x[0])
            values[output] = y
        return values[self.output_name]


class FrozenSkill(torch.nn.Module):
    """An exported skill (``.onnx`` with its contract) as a frozen torch policy: ``skill(obs) -> actions``."""

    def __init__(self, path: str | Path, device: str | torch.device = "cpu"):
        super().__init__()
        path = Path(path)
        if not path.is_file():
            raise ModelLoadError(f"skill model {path} does not exist; give the path of an exported .onnx "
                                 "(e.g. models/crazyflie_goto.onnx)")
        data = path.read_bytes()
        self.path = path
        self.sha256 = hashlib.sha256(data).hexdigest()
        try:
            model = onnx.load_model_from_string(data)
        except Exception as exc:  # onnx raises DecodeError and others for a corrupted file
            raise ModelLoadError(f"{path} is not a readable ONNX model ({exc}); re-export it") from None
        meta = {p.key: p.value for p in model.metadata_props}
        self.contract = PolicyContract.from_json(meta.get(CONTRACT_METADATA_KEY))
        self.graph = OnnxGraphModule(model, str(path)).to(device)
        self.requires_grad_(False)
        self.eval()

    @property
    def observation_size(self) -> int:
        return self.contract.observation_size

    @property
    def action_size(self) -> int:
        return self.contract.action_size

    @torch.no_grad()
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.shape[-1] != self.observation_size:
            raise ValueError(f"the skill {self.path.name} takes {self.observation_size} observations (its contract), got {obs.shape[-1]}")
        return self.graph(obs)

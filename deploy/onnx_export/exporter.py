"""Export an actor to ONNX with its contract and provenance, check it, and write its checksum.

The file is written next to its destination under a temporary name, checked, and only then
moved into place, so a failed export never leaves a file that looks valid.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

from deploy.onnx_export.actor import ExportableActor
from deploy.onnx_export.errors import ExportError
from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract, get_action_mode
from robot_hrl.runtime.integrity import sha256_file, write_sha256_sidecar
from robot_hrl.runtime.metadata import PROVENANCE_EXPORT_KEY, PROVENANCE_PREFIX
from robot_hrl.runtime.policy import session_options

OPSET = 18
"""ONNX opset of the exported graph (onnxruntime >= 1.14, TensorRT 8.6+)."""
IR_VERSION = 9
"""ONNX IR version written (onnxruntime >= 1.15, as shipped with JetPack 5/6); the graph uses nothing newer."""
INPUT_NAME, OUTPUT_NAME = "obs", "actions"
DEFAULT_NUM_CHECK = 1000
DEFAULT_TOLERANCE = 1e-5

Progress = Callable[[str], None]


@dataclass
class ExportReport:
    """What an export produced and how it checked out."""

    path: Path
    sha256_path: Path
    sha256: str
    size_bytes: int
    n_obs: int
    n_actions: int
    num_checked: int
    max_abs_diff: float
    tolerance: float
    ops: list[str] = field(default_factory=list)
    metadata_keys: list[str] = field(default_factory=list)


def output_clip(contract: PolicyContract) -> float | None:
    """What the graph clips its output to: the contract's ``output_clip``, else 1 where the action mode clips
    (its mapping expects [-1, 1]), else nothing."""
    if contract.action.output_clip is not None:
        return contract.action.output_clip
    return 1.0 if get_action_mode(contract.action.mode).clip else None


CHECK_BOUND = 10.0
"""The self-check samples an unclipped (or widely clipped) term within +-this (float32 max would overflow the MLP)."""


def graph_input_bounds(contract: PolicyContract) -> tuple[np.ndarray, np.ndarray]:
    """Per graph input: the range its term can take (clip, then scale; history repeats it), capped at
    +-:data:`CHECK_BOUND` for the self-check."""
    lo_parts, hi_parts = [], []
    for t in contract.observations:
        scale = np.ones(t.frame_size) if t.scale is None else np.broadcast_to(np.asarray(t.scale, dtype=np.float64), (t.frame_size,))
        a, b = t.clip[0] * scale, t.clip[1] * scale
        reps = t.history_length or 1
        lo_parts.append(np.tile(np.clip(np.minimum(a, b), -CHECK_BOUND, CHECK_BOUND), reps))
        hi_parts.append(np.tile(np.clip(np.maximum(a, b), -CHECK_BOUND, CHECK_BOUND), reps))
    return np.concatenate(lo_parts), np.concatenate(hi_parts)


def self_check_observations(contract: PolicyContract, n: int, seed: int = 0) -> np.ndarray:
    """``n`` observations spread over each term's clip range, with the corners first (float32)."""
    if n < 3:
        raise ExportError(f"the self-check needs at least 3 observations, got {n}")
    lo, hi = graph_input_bounds(contract)
    rng = np.random.default_rng(seed)
    obs = rng.uniform(lo, hi, size=(n, lo.size))
    obs[0], obs[1], obs[2] = 0.0, lo, hi
    # A quarter of the samples near the origin, where a hovering policy spends its time.
    near = slice(3, 3 + n // 4)
    obs[near] = np.clip(rng.normal(0.0, 0.1, size=obs[near].shape) * (hi - lo), lo, hi)
    return obs.astype(np.float32)


@contextlib.contextmanager
def _quiet_torch_export():
    """torch.onnx's dynamo exporter logs about optional packages (torchvision) and deprecations."""
    names = ["torch.onnx", "torch.export", "torch._dynamo", "torch.fx", "onnxscript", "onnx_ir"]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _torch_to_onnx(module: ExportableActor, path: Path) -> None:
    dummy = torch.zeros(2, module.n_obs)
    batch = torch.export.Dim("batch", min=1)
    with _quiet_torch_export():
        torch.onnx.export(
            module,
            (dummy,),
            str(path),
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            opset_version=OPSET,
            dynamic_shapes=({0: batch},),
            dynamo=True,
            external_data=False,
            optimize=True,
            verbose=False,
        )


def _tidy_graph(model: onnx.ModelProto) -> None:
    """Drop the exporter's per-node debug metadata (stack traces with local paths) and intermediate
    value_info, and give the normalization and clip constants stable names."""
    graph = model.graph
    for node in graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    del graph.value_info[:]
    initializers = {init.name: init for init in graph.initializer}
    renames: dict[str, str] = {}
    nodes = list(graph.node)
    if len(nodes) >= 2 and nodes[0].op_type == "Sub" and nodes[1].op_type == "Div":
        renames[nodes[0].input[1]] = "obs_mean"
        renames[nodes[1].input[1]] = "obs_std_plus_eps"
    if nodes and nodes[-1].op_type == "Clip" and len(nodes[-1].input) == 3:
        renames[nodes[-1].input[1]] = "action_low"
        renames[nodes[-1].input[2]] = "action_high"
    renames = {old: new for old, new in renames.items() if old in initializers and new not in initializers}
    for init in graph.initializer:
        init.name = renames.get(init.name, init.name)
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in renames:
                node.input[i] = renames[name]


def _write_metadata(path: Path, metadata: dict[str, str], doc: str) -> list[str]:
    model = onnx.load(str(path))
    _tidy_graph(model)
    model.ir_version = min(model.ir_version, IR_VERSION)
    del model.metadata_props[:]
    for key in sorted(metadata):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, metadata[key]
    model.producer_name = "robot_hrl deploy/export.py"
    model.doc_string = doc
    model.graph.name = "policy"
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as exc:
        raise ExportError(f"the exported graph is not valid ONNX: {exc}") from exc
    onnx.save(model, str(path))
    return [node.op_type for node in model.graph.node]


def _self_check(module: nn.Module, path: Path, obs: np.ndarray, tolerance: float) -> float:
    session = ort.InferenceSession(str(path), session_options(), providers=["CPUExecutionProvider"])
    with torch.inference_mode():
        expected = module(torch.from_numpy(obs)).numpy()
    got = session.run([OUTPUT_NAME], {INPUT_NAME: obs})[0]
    single = np.concatenate([session.run([OUTPUT_NAME], {INPUT_NAME: obs[i : i + 1]})[0] for i in range(3)])
    if got.shape != expected.shape:
        raise ExportError(f"self-check: onnxruntime gave shape {got.shape}, torch {expected.shape}")
    if not np.all(np.isfinite(got)):
        raise ExportError("self-check: onnxruntime produced non-finite actions; the checkpoint is broken (NaN weights?)")
    diff = float(max(np.max(np.abs(got - expected)), np.max(np.abs(single - expected[:3]))))
    if not diff <= tolerance:
        raise ExportError(
            f"self-check failed: onnxruntime and torch differ by up to {diff:.3g} on {len(obs)} observations "
            f"(tolerance {tolerance:g}); the exported graph does not reproduce the policy. Report this with "
            "the torch and onnxruntime versions"
        )
    if module.clip is not None and np.any(np.abs(got) > module.clip * (1.0 + 1e-6)):
        raise ExportError(f"self-check: actions outside [-{module.clip:g}, {module.clip:g}]; the clip is missing from the graph")
    return diff


def export_policy(
    actor: nn.Module,
    contract: PolicyContract,
    out: str | Path,
    *,
    provenance: dict[str, Any] | None = None,
    num_check: int = DEFAULT_NUM_CHECK,
    tolerance: float = DEFAULT_TOLERANCE,
    seed: int = 0,
    progress: Progress | None = None,
) -> ExportReport:
    """Export ``actor`` (an rsl_rl MLPModel) with ``contract`` and ``provenance`` to ``out``.

    ``provenance`` maps short names (command, git_commit, seed, config, eval, checkpoint) to
    JSON-serializable values; each becomes the metadata key ``robot_hrl.provenance.<name>``.
    """
    say = progress or (lambda _msg: None)
    out = Path(out)
    if out.suffix != ".onnx":
        raise ExportError(f"the output file must end in .onnx, got {out}; e.g. --out models/crazyflie_goto.onnx")
    if num_check < 1000:
        raise ExportError(f"the self-check runs on at least 1000 observations; got --num-check {num_check}")
    module = ExportableActor(actor, clip=output_clip(contract)).to("cpu").eval()
    if module.n_obs != contract.observation_size or module.n_actions != contract.action_size:
        raise ExportError(
            f"the actor takes {module.n_obs} observations and gives {module.n_actions} actions, but the contract "
            f"says {contract.observation_size} and {contract.action_size}; the checkpoint belongs to a different "
            "task or contract version: export it from its own run directory"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        say(f"exporting the actor ({module.n_obs} -> {module.n_actions}, opset {OPSET}, dynamic batch)")
        _torch_to_onnx(module, tmp)

        obs = self_check_observations(contract, num_check, seed)
        metadata = {CONTRACT_METADATA_KEY: contract.to_json()}
        for name, value in (provenance or {}).items():
            metadata[PROVENANCE_PREFIX + name] = json.dumps(value, sort_keys=True, default=str)
        metadata[PROVENANCE_EXPORT_KEY] = json.dumps(
            {
                "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "torch": torch.__version__,
                "onnx": onnx.__version__,
                "onnxruntime": ort.__version__,
                "opset": OPSET,
                "self_check": {"observations": num_check, "tolerance": tolerance, "seed": seed},
            },
            sort_keys=True,
        )
        say(f"writing the contract and {len(metadata) - 1} provenance entries into the metadata")
        doc = (
            f"robot_hrl '{contract.skill}' policy for {contract.robot.name} at {contract.control_rate_hz:g} Hz: "
            f"obs[batch, {contract.observation_size}] -> actions[batch, {contract.action_size}]"
            f"{'' if module.clip is None else f' in [-{module.clip:g}, {module.clip:g}]'}. "
            f"Contract JSON in metadata key '{CONTRACT_METADATA_KEY}'."
        )
        ops = _write_metadata(tmp, metadata, doc)

        say(f"self-check: torch against onnxruntime on {num_check} observations")
        diff = _self_check(module, tmp, obs, tolerance)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    sidecar = write_sha256_sidecar(out)
    return ExportReport(
        path=out,
        sha256_path=sidecar,
        sha256=sha256_file(out),
        size_bytes=out.stat().st_size,
        n_obs=module.n_obs,
        n_actions=module.n_actions,
        num_checked=num_check,
        max_abs_diff=diff,
        tolerance=tolerance,
        ops=ops,
        metadata_keys=sorted(metadata),
    )

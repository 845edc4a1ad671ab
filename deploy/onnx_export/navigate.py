"""Export a trained ``navigate`` level (sim/train_navigate.py run) to ONNX with its contract.

The same graph and checks as the goto export (``deploy/onnx_export/exporter.py``: the actor's
deterministic path with its normalization, clipped to [-1, 1], checked against onnxruntime),
with the navigate contract (``robot_hrl.contract.navigate``) under the contract metadata key.

    python -m deploy.onnx_export.navigate runs/navigate --out models/crazyflie_navigate.onnx
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from deploy.onnx_export.actor import ExportableActor
from deploy.onnx_export.errors import ExportError
from deploy.onnx_export.exporter import _torch_to_onnx, _write_metadata
from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract


class RecurrentExportable(torch.nn.Module):
    """A recurrent level's deterministic step, clipped as ``ExportableActor`` clips: (obs, h_in) -> (actions, h_out)."""

    def __init__(self, actor) -> None:
        super().__init__()
        self.policy = actor.as_onnx(verbose=False)
        self.policy.eval()
        self.n_obs, self.hidden_size = self.policy.input_size, self.policy.hidden_size

    def forward(self, obs: torch.Tensor, h_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        actions, h_out = self.policy(obs, h_in)
        return torch.clamp(actions, -1.0, 1.0), h_out


def _recurrent_to_onnx(module: RecurrentExportable, path: Path, spec) -> None:
    """The recurrent graph: ``obs [batch, n_obs], <spec.input_name> [1, batch, H] -> actions, <spec.output_name>``
    (``spec``: the contract's RecurrentSpec, which names the state; the TorchScript exporter: its GRU op is ONNX's
    own)."""
    from deploy.onnx_export.exporter import INPUT_NAME, OPSET, OUTPUT_NAME

    dummy = (torch.zeros(2, module.n_obs), torch.zeros(1, 2, module.hidden_size))
    torch.onnx.export(module, dummy, str(path), input_names=[INPUT_NAME, spec.input_name],
                      output_names=[OUTPUT_NAME, spec.output_name], opset_version=OPSET,
                      dynamic_axes={INPUT_NAME: {0: "batch"}, spec.input_name: {1: "batch"},
                                    OUTPUT_NAME: {0: "batch"}, spec.output_name: {1: "batch"}},
                      dynamo=False)


def export_navigate(run_dir: str | Path, out: str | Path, tolerance: float = 1e-5, checkpoint: str | None = None) -> Path:
    from rsl_rl.runners import OnPolicyRunner  # noqa: F401  (the checkpoint's classes)

    run_dir, out = Path(run_dir), Path(out)
    contract_path = run_dir / "navigate_contract.json"
    if not contract_path.is_file():
        raise ExportError(f"{run_dir} has no navigate_contract.json; give a run directory of sim/train_navigate.py")
    contract = NavigateContract.from_json(contract_path.read_text())
    checkpoints = sorted(run_dir.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    if checkpoint is not None:
        checkpoints = [run_dir / checkpoint]
        if not checkpoints[0].is_file():
            raise ExportError(f"{run_dir} has no checkpoint {checkpoint!r}; give one of {[p.name for p in sorted(run_dir.glob('model_*.pt'))]}")
    if not checkpoints:
        raise ExportError(f"{run_dir} has no model_*.pt checkpoint; train first")
    actor = torch.load(checkpoints[-1], map_location="cpu", weights_only=False)
    state = actor["actor_state_dict"]
    cfg = json.loads((run_dir / "train_cfg.json").read_text())
    obs = {"policy": torch.zeros(1, contract.observation_size)}
    from tensordict import TensorDict
    from rsl_rl.models import MLPModel as Model
    from rsl_rl.utils import resolve_callable

    if cfg["actor"].get("class_name", "MLPModel") != "MLPModel":
        Model = resolve_callable(cfg["actor"]["class_name"])
    model = Model(TensorDict(obs, batch_size=[1]), {"actor": ["policy"]}, "actor", 2, **{k: v for k, v in cfg["actor"].items() if k != "class_name"})
    model.load_state_dict(state)
    out.parent.mkdir(parents=True, exist_ok=True)
    if getattr(model, "is_recurrent", False):
        from robot_hrl.contract.navigate import RecurrentSpec

        module = RecurrentExportable(model)
        contract = contract.model_copy(update={"recurrent": RecurrentSpec(hidden_size=module.hidden_size)})
        _recurrent_to_onnx(module, out, contract.recurrent)
    else:
        module = ExportableActor(model)
        _torch_to_onnx(module, out)
    metadata = {NAVIGATE_METADATA_KEY: contract.to_json(),
                "robot_hrl.provenance.checkpoint": json.dumps({"file": checkpoints[-1].name, "run_dir": str(run_dir)}),
                "robot_hrl.provenance.export": json.dumps({"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                                           "torch": torch.__version__})}
    if (run_dir / "eval.json").is_file():
        metadata["robot_hrl.provenance.eval"] = (run_dir / "eval.json").read_text()
    _write_metadata(out, metadata, "robot_hrl navigate level: goal, ranges, velocity, last subgoal -> next subgoal offset")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, contract.observation_size)).astype(np.float32)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    if contract.recurrent is None:
        with torch.no_grad():
            ref = module(torch.from_numpy(x)).numpy()
        got = session.run(None, {"obs": x})[0]
        err = float(np.max(np.abs(ref - got)))
    else:  # a sequence of decisions, the state carried: onnxruntime's against torch's
        h_t = torch.zeros(1, 64, module.hidden_size)
        h_o = h_t.numpy().copy()
        err = 0.0
        for k in range(8):
            xk = x[64 * k:64 * (k + 1)]
            with torch.no_grad():
                ref, h_t = module(torch.from_numpy(xk), h_t)
            got, h_o = session.run(None, {"obs": xk, contract.recurrent.input_name: h_o})
            err = max(err, float(np.max(np.abs(ref.numpy() - got))), float(np.max(np.abs(h_t.numpy() - h_o))))
    if err > tolerance:
        raise ExportError(f"onnxruntime differs from torch by {err:.2e} (> {tolerance}); the export is broken")
    out.with_name(out.name + ".sha256").write_text(f"{hashlib.sha256(out.read_bytes()).hexdigest()}  {out.name}\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.onnx_export.navigate",
                                     description="Export a trained navigate level (a sim/train_navigate.py run directory) "
                                                 "to ONNX with its navigate contract and a .sha256.")
    parser.add_argument("run_dir")
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", default=None, help="model_<it>.pt in the run directory (default: the latest)")
    args = parser.parse_args(argv)
    try:
        path = export_navigate(args.run_dir, args.out, checkpoint=args.checkpoint)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

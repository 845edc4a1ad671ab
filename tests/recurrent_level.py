"""The small recurrent navigate level the recurrent tests share (tests/test_navigate_recurrent.py,
tests/test_crazyflie_navigate_recurrent.py): two recurrent PPO iterations of ``sim/train_navigate.py --memory-gru``
from the feed-forward level shipped until 2026-11-30 (``models/crazyflie_navigate_mlp.onnx``), then its memory columns set to random weights (a level that uses its state), exported to
``<run>/nav.onnx``. conftest.py's session fixture ``recurrent_run`` builds it once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

HIDDEN = 8
"""The test level's GRU units (``--memory-gru``)."""


def build_recurrent_level(run: Path, repo_root: Path) -> Path:
    """Train, perturb and export the level into ``run`` (its run directory); returns ``run``."""
    import torch

    from deploy.onnx_export.navigate import export_navigate

    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(run), "--num-envs", "8",
                          "--init-onnx", "models/crazyflie_navigate_mlp.onnx", "--memory-gru", str(HIDDEN),
                          "--max-iterations", "2", "--dagger-iterations", "0", "--rooms-per-density", "1",
                          "--threads", "1", "--start-level", "2", "--minutes", "5"],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"memory ({HIDDEN} units) beside the file's MLP, at zero weight" in out.stdout
    ckpt = torch.load(sorted(run.glob("model_*.pt"))[-1], weights_only=False)
    w = ckpt["actor_state_dict"]["mlp.0.weight"]
    w[:, -HIDDEN:] = torch.from_numpy(np.random.default_rng(0).normal(0.0, 0.1, (w.shape[0], HIDDEN)).astype(np.float32))
    torch.save(ckpt, run / "model_999.pt")
    export_navigate(run, run / "nav.onnx", checkpoint="model_999.pt")
    return run

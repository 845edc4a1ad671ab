"""benchmarks/bench_settling.py: the error-against-time traces of real episodes (the training simulator, onnxruntime)
and their split into bias, ripple and drift."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("sim_torch")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_settling", ROOT / "benchmarks" / "bench_settling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_decompose_splits_a_known_trace():
    """A constant offset is all bias, a sine about it all ripple, a ramp between the windows drift (no simulator)."""
    bench = _bench()
    rate, n = 100.0, 500
    t = np.arange(n) / rate
    e = np.zeros((2, n, 3))
    e[0, :, 2] = 0.01  # 10 mm constant below the goal
    e[1, :, 0] = 0.004 * np.sin(2 * np.pi * 10.0 * t)  # 4 mm amplitude, 10 Hz, no mean
    trace = {"error_w": e, "timed_out": np.array([True, True]), "control_rate_hz": rate}
    d = bench.decompose(trace, window_s=1.0)
    assert d["episodes_timed_out"] == 2
    assert d["median_bias_z_m"] == pytest.approx(0.005, abs=1e-9)  # median of 10 mm and 0 mm
    ripple_sine = 0.004 / np.sqrt(2.0)
    assert d["median_ripple_m"] == pytest.approx(ripple_sine / 2.0, rel=0.05)  # median of 0 and the sine's RMS
    assert d["median_drift_m"] == pytest.approx(0.0, abs=1e-4)


def test_the_shipped_model_traced_on_a_few_episodes(tmp_path, capsys):
    import torch

    torch.set_num_threads(1)
    bench = _bench()
    out = tmp_path / "settle.json"
    assert bench.main(["--model", str(ROOT / "models" / "crazyflie_goto.onnx"), "--episodes", "6", "--seed", "4000",
                       "--mass-g", "36", "--json", str(out)]) == 0
    d = next(iter(json.loads(out.read_text())["models"].values()))
    assert 1 <= d["episodes_timed_out"] <= 6 and 0.0 <= d["success_rate"] <= 1.0
    for key in ("median_final_m", "median_bias_m", "median_ripple_m", "median_drift_m"):
        assert np.isfinite(d[key]) and d[key] >= 0.0
    assert d["median_final_m"] < 0.5  # timed-out episodes end near their goal, not at the bounds (2.5 m)
    assert sum(n for _, _, n, _ in d["by_mass_g"]) == d["episodes_timed_out"]  # every episode at 36 g lands in a bin
    assert "median distance at" in capsys.readouterr().out

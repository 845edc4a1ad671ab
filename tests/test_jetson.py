"""Jetson tooling on this CPU-only machine: the TensorRT/CUDA fallback, its log line, the verb.

No timing is asserted: the benchmark's report is checked for shape and consistency only.
"""

from __future__ import annotations

import json
import logging

import pytest

from deploy.crazyflie.example_model import build_mlp_onnx
from deploy.jetson.bench import benchmark
from deploy.jetson.engine import build_engine, environment_report
from robot_hrl.cli import main
from robot_hrl.runtime import available_providers


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_mlp_onnx(tmp_path_factory.mktemp("jetson") / "m.onnx", hidden=(32, 32))


@pytest.mark.skipif("tensorrt" in available_providers(), reason="TensorRT is available: nothing falls back")
def test_build_falls_back_with_a_log_line(model, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="robot_hrl.runtime"):
        result = build_engine(model, provider="auto", fp16=True, cache_dir=tmp_path / "trt")
    assert result.provider in ("cuda", "cpu") and result.provider != "tensorrt"
    lines = [r.getMessage() for r in caplog.records if r.name == "robot_hrl.runtime" and r.levelno == logging.WARNING]
    assert any(f"execution provider: {result.provider}" in m and "tensorrt" in m and "unavailable" in m for m in lines)
    assert "no TensorRT engine" in result.describe()


@pytest.mark.skipif("tensorrt" in available_providers(), reason="TensorRT is available")
def test_naming_a_missing_provider_is_an_error(model, capsys):
    assert main(["jetson", "build", str(model), "--provider", "tensorrt", "--cache-dir", "/nonexistent/x"]) == 1
    err = capsys.readouterr().err
    assert "'tensorrt'" in err and "not available" in err


def test_bench_verb_reports_latency_percentiles(model, tmp_path, capsys):
    out = tmp_path / "latency.json"
    assert main(["jetson", "bench", str(model), "--iterations", "50", "--warmup", "5", "--cache-dir",
                 str(tmp_path / "trt"), "--json", str(out)]) == 0
    assert "infer (1 observation) us" in capsys.readouterr().out
    report = json.loads(out.read_text())
    for key in ("infer_us", "step_us"):
        s = report[key]
        assert 0 < s["p50"] <= s["p99"] <= s["max"]
    assert report["provider"] in available_providers() and report["iterations"] == 50
    assert report["environment"]["onnxruntime"]


def test_info_and_bad_arguments(model, tmp_path, capsys):
    assert main(["jetson", "info"]) == 0
    assert "onnxruntime" in capsys.readouterr().out
    assert set(environment_report()) >= {"onnxruntime", "providers", "l4t", "tensorrt"}
    assert main(["jetson", "bench", str(model), "--iterations", "0"]) == 1
    assert "iterations must be >= 1" in capsys.readouterr().err
    assert main(["jetson", "build", str(tmp_path / "missing.onnx")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_benchmark_function_uses_the_policy_runtime(model, tmp_path):
    report = benchmark(model, provider="cpu", iterations=20, warmup=2, cache_dir=None)
    assert report.provider == "cpu" and report.infer_us["mean"] > 0

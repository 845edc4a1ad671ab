"""Execution-provider choice: TensorRT, then CUDA, then CPU; explicit requests are promises."""

from __future__ import annotations

import logging

import onnxruntime as ort
import pytest

from robot_hrl.errors import ConfigError, ModelLoadError
from robot_hrl.runtime import OnnxPolicy, ProviderUnavailableError, available_providers, plan_providers
from test_runtime_models import make_policy_model

GPU_BUILD = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture()
def model_path(tmp_path):
    path = tmp_path / "policy.onnx"
    make_policy_model(path)
    return path


@pytest.mark.skipif(GPU_BUILD, reason="this onnxruntime build has CUDA")
def test_auto_on_a_cpu_build_picks_cpu_and_logs_what_was_missing(model_path, caplog):
    with caplog.at_level(logging.INFO, logger="robot_hrl.runtime"):
        policy = OnnxPolicy(model_path, provider="auto")
    assert policy.provider == "cpu"
    lines = [r.getMessage() for r in caplog.records if r.name == "robot_hrl.runtime"]
    assert len(lines) == 1, lines
    assert "TensorrtExecutionProvider" in lines[0] and "CUDAExecutionProvider" in lines[0] and "unavailable" in lines[0]
    assert caplog.records[0].levelno == logging.WARNING


@pytest.mark.skipif(GPU_BUILD, reason="this onnxruntime build has CUDA")
@pytest.mark.parametrize("name", ["cuda", "tensorrt", "CUDA"])
def test_explicit_gpu_provider_that_is_unavailable_is_an_error(model_path, name):
    with pytest.raises(ProviderUnavailableError, match="not available in this onnxruntime build.*provider='auto' or 'cpu'"):
        OnnxPolicy(model_path, provider=name)
    assert issubclass(ProviderUnavailableError, ModelLoadError)


def test_explicit_cpu(model_path, caplog):
    with caplog.at_level(logging.WARNING, logger="robot_hrl.runtime"):
        policy = OnnxPolicy(model_path, provider="cpu")
    assert policy.provider == "cpu"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("name", ["gpu", "", "openvino", None, 3])
def test_unknown_provider(model_path, name):
    with pytest.raises(ConfigError, match="unknown execution provider.*'auto', 'tensorrt', 'cuda', 'cpu'"):
        OnnxPolicy(model_path, provider=name)


def test_available_providers_always_include_cpu():
    assert available_providers()[-1] == "cpu"


def test_plan_on_a_jetson_build_prefers_tensorrt_with_cache_and_fallbacks(tmp_path):
    cache = tmp_path / "trt_cache"
    plan = plan_providers("auto", available=["tensorrt", "cuda", "cpu"], trt_cache_dir=cache, trt_fp16=True)
    assert plan.primary == "tensorrt" and plan.skipped == ()
    (trt_name, options), cuda, cpu = plan.providers
    assert (trt_name, cuda, cpu) == ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")
    assert options["trt_engine_cache_enable"] == "True"
    assert options["trt_engine_cache_path"] == str(cache) and cache.is_dir()
    assert options["trt_fp16_enable"] == "True"


def test_plan_without_cache_dir_leaves_the_engine_cache_off():
    plan = plan_providers("tensorrt", available=["tensorrt", "cuda", "cpu"])
    options = plan.providers[0][1]
    assert "trt_engine_cache_enable" not in options and options["trt_fp16_enable"] == "False"


def test_plan_auto_on_a_cuda_build_skips_tensorrt():
    plan = plan_providers("auto", available=["cuda", "cpu"])
    assert plan.primary == "cuda" and plan.skipped == ("tensorrt",)
    assert plan.providers == ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_plan_explicit_cuda_on_a_tensorrt_build_does_not_use_tensorrt():
    plan = plan_providers("cuda", available=["tensorrt", "cuda", "cpu"])
    assert plan.providers == ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_plan_explicit_tensorrt_missing_on_a_cuda_build():
    with pytest.raises(ProviderUnavailableError, match="'tensorrt'.*available: \\['cuda', 'cpu'\\]"):
        plan_providers("tensorrt", available=["cuda", "cpu"])

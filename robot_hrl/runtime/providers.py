"""Execution-provider choice: TensorRT, then CUDA, then CPU.

``"auto"`` takes the best provider this onnxruntime build offers and logs one line naming the
ones it had to skip. Asking for a provider by name is a promise the caller relies on (a
Jetson deployment that silently ran on the CPU would miss its deadlines), so an explicit
request for a provider that is not available is an error, not a fallback.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnxruntime as ort

from robot_hrl.errors import ConfigError, ModelLoadError

LOG = logging.getLogger("robot_hrl.runtime")

ORT_PROVIDER_NAMES: dict[str, str] = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
"""Short name -> onnxruntime provider name, in order of preference."""
PROVIDER_CHOICES: tuple[str, ...] = ("auto", *ORT_PROVIDER_NAMES)
SHORT_NAMES: dict[str, str] = {v: k for k, v in ORT_PROVIDER_NAMES.items()}


class ProviderUnavailableError(ModelLoadError):
    """The execution provider asked for by name is not in this onnxruntime build."""


@dataclass(frozen=True)
class ProviderPlan:
    """What to hand to ``onnxruntime.InferenceSession(providers=...)``."""

    requested: str
    """The caller's choice: auto, tensorrt, cuda or cpu."""
    primary: str
    """Short name of the provider expected to run the graph."""
    providers: list[Any]
    """onnxruntime provider list, best first, each a name or a (name, options) pair."""
    skipped: tuple[str, ...]
    """Short names of better providers that were not available (auto only)."""


def available_providers() -> list[str]:
    """Short names of the providers this onnxruntime build offers, best first."""
    have = set(ort.get_available_providers())
    return [short for short, name in ORT_PROVIDER_NAMES.items() if name in have]


def tensorrt_options(cache_dir: str | Path | None, fp16: bool) -> dict[str, str]:
    """TensorRT provider options: engine cache (building an engine takes minutes on a Jetson) and precision."""
    options = {"trt_fp16_enable": "True" if fp16 else "False"}
    if cache_dir is not None:
        cache = Path(cache_dir).expanduser()
        cache.mkdir(parents=True, exist_ok=True)
        options.update(
            trt_engine_cache_enable="True",
            trt_engine_cache_path=str(cache),
            trt_timing_cache_enable="True",
            trt_timing_cache_path=str(cache),
        )
    return options


def plan_providers(
    requested: str,
    *,
    available: list[str] | None = None,
    trt_cache_dir: str | Path | None = None,
    trt_fp16: bool = False,
) -> ProviderPlan:
    """Resolve ``requested`` against the ``available`` short names (default: this onnxruntime build)."""
    if not isinstance(requested, str) or requested.lower() not in PROVIDER_CHOICES:
        raise ConfigError(
            f"unknown execution provider {requested!r}; choose one of {list(PROVIDER_CHOICES)} "
            "('auto' takes TensorRT, then CUDA, then CPU, whichever this onnxruntime build offers)"
        )
    requested = requested.lower()
    available = available_providers() if available is None else list(available)
    if "cpu" not in available:
        available.append("cpu")  # every onnxruntime build has it

    skipped: tuple[str, ...] = ()
    if requested == "auto":
        primary = next(short for short in ORT_PROVIDER_NAMES if short in available)
        order = list(ORT_PROVIDER_NAMES)
        skipped = tuple(order[: order.index(primary)])
    else:
        if requested not in available:
            raise ProviderUnavailableError(
                f"execution provider {requested!r} ({ORT_PROVIDER_NAMES[requested]}) is not available in this "
                f"onnxruntime build (available: {available}). Install the matching onnxruntime package "
                "(onnxruntime-gpu, or JetPack's build for TensorRT), or ask for provider='auto' or 'cpu'"
            )
        primary = requested

    # The chosen provider first, then the cheaper ones as per-node fallbacks (ops TensorRT cannot take).
    order = list(ORT_PROVIDER_NAMES)
    chain = [short for short in order[order.index(primary):] if short in available]
    providers: list[Any] = []
    for short in chain:
        if short == "tensorrt":
            providers.append((ORT_PROVIDER_NAMES[short], tensorrt_options(trt_cache_dir, trt_fp16)))
        else:
            providers.append(ORT_PROVIDER_NAMES[short])
    return ProviderPlan(requested=requested, primary=primary, providers=providers, skipped=skipped)


def log_plan(plan: ProviderPlan) -> None:
    """One warning line when ``auto`` had to skip better providers, else one info line."""
    if plan.skipped:
        LOG.warning(
            "execution provider: %s (%s unavailable in this onnxruntime build: %s)",
            plan.primary,
            " and ".join(plan.skipped),
            ", ".join(ORT_PROVIDER_NAMES[s] for s in plan.skipped),
        )
    else:
        LOG.info("execution provider: %s", plan.primary)

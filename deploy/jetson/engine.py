"""Build (and cache) the TensorRT engine of a policy through onnxruntime's TensorRT provider.

onnxruntime compiles the TensorRT engine when the session first sees an input shape, which
takes seconds to minutes on a Jetson; with ``trt_engine_cache_enable`` it writes the engine
(``*.engine``), its optimization profile (``*.profile``) and the timing cache into the cache
folder, and later sessions load them in milliseconds. :func:`build_engine` opens the policy
with :class:`robot_hrl.runtime.OnnxPolicy` (the runtime's provider choice: TensorRT, then
CUDA, then CPU, with one log line naming what was missing) and runs one inference at the
deployed shape (one observation) so that the engine is built and cached now rather than on
the robot's first control tick.
"""

from __future__ import annotations

import logging
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort

from robot_hrl.robots import get_robot
from robot_hrl.runtime import OnnxPolicy, available_providers, read_model_metadata
from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract

LOG = logging.getLogger("deploy.jetson")

DEFAULT_CACHE_DIR = Path("~/.cache/robot_hrl/trt").expanduser()
"""Engine cache folder; keep it on persistent storage of the Jetson."""
ENGINE_SUFFIXES = (".engine", ".profile", ".timing", ".cache")


@dataclass
class EngineBuild:
    model: Path
    requested: str
    provider: str
    """Short name of the provider that runs the graph: tensorrt, cuda or cpu."""
    fp16: bool
    cache_dir: Path | None
    seconds: float
    """Session creation plus the first inference (the engine build when TensorRT runs)."""
    cache_files: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"model     {self.model}",
                 f"provider  {self.provider} (asked: {self.requested}; fp16 {'on' if self.fp16 else 'off'})",
                 f"first run {self.seconds:.2f} s (session + first inference)"]
        if self.provider == "tensorrt":
            lines.append(f"cache     {self.cache_dir}: {', '.join(self.cache_files) or 'no files (check permissions)'}")
        else:
            lines.append(f"cache     none: no TensorRT engine on this machine ({self.provider} runs the graph)")
        return "\n".join(lines)


def environment_report() -> dict[str, str]:
    """What decides which provider can run: onnxruntime build, JetPack / L4T, TensorRT and CUDA versions."""
    info = {"onnxruntime": ort.__version__, "onnxruntime_device": ort.get_device(),
            "providers": ", ".join(available_providers()), "machine": platform.machine()}
    release = Path("/etc/nv_tegra_release")
    info["l4t"] = release.read_text().splitlines()[0].strip() if release.is_file() else "not a Jetson (no /etc/nv_tegra_release)"
    try:
        import tensorrt  # type: ignore[import-not-found]

        info["tensorrt"] = tensorrt.__version__
    except ImportError:
        info["tensorrt"] = "python module not installed"
    return info


def _robot_of(model: Path):
    contract = PolicyContract.from_json(read_model_metadata(model).get(CONTRACT_METADATA_KEY))
    try:
        return get_robot(contract.robot.name)
    except KeyError as exc:
        from robot_hrl.errors import ContractError

        raise ContractError(str(exc.args[0])) from None


def open_policy(model: str | Path, provider: str = "auto", fp16: bool = False,
                cache_dir: str | Path | None = DEFAULT_CACHE_DIR) -> OnnxPolicy:
    """The policy on the best available provider (the runtime logs the choice and any fallback)."""
    model = Path(model)
    return OnnxPolicy(model, robot=_robot_of(model), provider=provider, trt_cache_dir=cache_dir, trt_fp16=fp16)


def build_engine(model: str | Path, provider: str = "auto", fp16: bool = False,
                 cache_dir: str | Path | None = DEFAULT_CACHE_DIR) -> EngineBuild:
    """Open the policy and run it once at the deployed shape, which builds and caches the TensorRT engine."""
    model = Path(model)
    start = time.perf_counter()
    policy = open_policy(model, provider, fp16, cache_dir)
    policy.infer(np.zeros(policy.observation_size, dtype=np.float32))
    seconds = time.perf_counter() - start
    files: list[str] = []
    cache = Path(cache_dir).expanduser() if cache_dir is not None else None
    if cache is not None and cache.is_dir():
        files = sorted(p.name for p in cache.iterdir() if p.suffix in ENGINE_SUFFIXES or "engine" in p.name)
    if policy.provider == "tensorrt":
        LOG.info("TensorRT engine ready in %.2f s, cached in %s", seconds, cache)
    return EngineBuild(model=model, requested=provider, provider=policy.provider, fp16=fp16, cache_dir=cache,
                       seconds=seconds, cache_files=files)

"""Policy inference latency on this machine's best onnxruntime provider (TensorRT, CUDA or CPU).

    python benchmarks/bench_jetson.py [--model models/crazyflie_goto.onnx] [--provider auto] [--fp16]

On a Jetson or a GPU PC with onnxruntime-gpu / JetPack's onnxruntime, ``auto`` takes TensorRT
(engine cached in --cache-dir; the first run builds it) then CUDA. On a CPU-only machine it
logs the fallback and measures the CPU, and says that GPU latency was not measured.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from deploy.jetson.bench import benchmark  # noqa: E402
from deploy.jetson.engine import DEFAULT_CACHE_DIR, build_engine  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(REPO / "models" / "crazyflie_goto.onnx"))
    parser.add_argument("--provider", default="auto")
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR))
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=500)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    model = Path(args.model)
    tmp = None
    if not model.is_file():
        from deploy.crazyflie.example_model import build_mlp_onnx

        tmp = tempfile.TemporaryDirectory(prefix="bench_jetson_")
        model = build_mlp_onnx(Path(tmp.name) / "standin.onnx", hidden=(64, 64))
        print(f"{args.model} is missing: using a stand-in 64x64 Elu MLP")
    build = build_engine(model, args.provider, args.fp16, args.cache_dir)
    print(build.describe())
    report = benchmark(model, args.provider, args.fp16, args.iterations, args.warmup, args.cache_dir)
    for key, value in report.environment.items():
        print(f"{key:18s} {value}")
    print(report.describe())
    if report.provider == "cpu":
        print("GPU latency: not measured (no CUDA/TensorRT provider on this machine)")
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

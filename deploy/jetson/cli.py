"""``robot-hrl jetson build|bench|info``: TensorRT engine cache and latency on Jetsons and GPU PCs.

    robot-hrl jetson info
    robot-hrl jetson build models/crazyflie_goto.onnx --fp16 --cache-dir ~/.cache/robot_hrl/trt
    robot-hrl jetson bench models/crazyflie_goto.onnx --fp16 --iterations 5000 --json latency.json

``--provider auto`` (the default) takes TensorRT, then CUDA, then the CPU, whichever this
onnxruntime build offers, and logs one line naming what it had to skip; naming a provider
that is missing is an error.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from robot_hrl.runtime import PROVIDER_CHOICES

from deploy.jetson.bench import benchmark
from deploy.jetson.engine import DEFAULT_CACHE_DIR, build_engine, environment_report

DEFAULT_MODEL = "models/crazyflie_goto.onnx"


def _ensure_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


class JetsonCommand:
    name = "jetson"
    help = ("Jetson / GPU deployment: 'build' builds and caches the TensorRT engine through onnxruntime's TensorRT "
            "provider, 'bench' measures single-observation latency, 'info' shows onnxruntime/TensorRT/JetPack versions. "
            "Falls back to CUDA, then CPU, with a log line, when TensorRT is missing.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("build", "bench", "info"), help="what to do")
        parser.add_argument("model", nargs="?", default=DEFAULT_MODEL, help="the exported policy (.onnx)")
        parser.add_argument("--provider", default="auto", choices=PROVIDER_CHOICES,
                            help="execution provider; auto = TensorRT, then CUDA, then CPU")
        parser.add_argument("--fp16", action="store_true", help="let TensorRT build an FP16 engine")
        parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR), help="TensorRT engine and timing cache folder")
        parser.add_argument("--iterations", type=int, default=2000, help="bench: timed inferences")
        parser.add_argument("--warmup", type=int, default=200, help="bench: untimed inferences first")
        parser.add_argument("--json", default=None, help="bench: also write the report to this JSON file")

    def run(self, args: argparse.Namespace) -> int:
        _ensure_logging()
        if args.action == "info":
            for key, value in environment_report().items():
                print(f"{key:18s} {value}")
            return 0
        if args.action == "build":
            result = build_engine(args.model, args.provider, args.fp16, args.cache_dir)
            print(result.describe())
            return 0
        report = benchmark(args.model, args.provider, args.fp16, args.iterations, args.warmup, args.cache_dir)
        print(report.describe())
        if args.json:
            Path(args.json).write_text(json.dumps(report.as_dict(), indent=2) + "\n")
        return 0


COMMAND = JetsonCommand()

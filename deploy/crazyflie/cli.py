"""``robot-hrl export-c`` and ``robot-hrl flash``.

    robot-hrl export-c models/crazyflie_goto.onnx --out build/crazyflie
    robot-hrl export-c models/crazyflie_goto.onnx --navigate models/crazyflie_navigate.onnx --out build/crazyflie
    make -C build/crazyflie CRAZYFLIE_BASE=~/crazyflie-firmware
    robot-hrl flash --uri radio://0/80/2M --dry-run
    robot-hrl flash --uri radio://0/80/2M
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deploy.crazyflie.codegen import GeneratedProject, generate_project
from deploy.crazyflie.codegen_navigate import NAVIGATE_WEIGHTS
from deploy.crazyflie.cost import NavigateDecisionCost
from deploy.crazyflie.cost import NOMINAL, PESSIMISTIC, CycleModel, InferenceCost, cycle_models_from_object, inference_cost
from deploy.crazyflie.errors import BudgetError, CodegenError, FlashError, ToolchainError
from deploy.crazyflie.float16 import WEIGHT_STORAGES
from deploy.crazyflie.flash import DEFAULT_IMAGE, check_image, flash_image, require_link
from deploy.crazyflie.size import DEFAULT_FLASH_BUDGET_KB, DEFAULT_RAM_BUDGET_KB, SizeReport, arm_size_report, check_budget

PARITY_TOLERANCE = 1e-4
DEFAULT_PARITY_SAMPLES = 10_000
DEFAULT_TIME_BUDGET_US = 1000.0


DEFAULT_NAVIGATE_SEQUENCES = 10
"""Random episodes (40 decisions each) of the navigate level's decision parity check."""


@dataclass
class NavigateFigures:
    """The navigate level's checks and figures (``--navigate``)."""

    cost: NavigateDecisionCost
    size: SizeReport | None
    network_parity_max_abs: float | None
    decision_parity_max_m: float | None
    observation_parity_max_abs: float | None
    decisions_checked: int
    nominal: CycleModel = NOMINAL
    pessimistic: CycleModel = PESSIMISTIC
    cycles_detail: str = "default cycle model (no ARM object to read)"

    def as_dict(self) -> dict:
        c = self.cost
        return {"macs": c.network.macs, "transcendentals": c.network.transcendentals,
                "parameters": c.network.parameters, "memory_spacing_checks": c.io.spacing_checks,
                "memory_points_binned": c.io.sector_points, "cycles_per_mac_nominal": self.nominal.cycles_per_mac,
                "cycles_detail": self.cycles_detail, "decision_rate_hz": c.decision_rate_hz,
                "estimated_us_nominal": c.microseconds(self.nominal),
                "estimated_us_pessimistic": c.microseconds(self.pessimistic),
                "estimated_us_network_nominal": c.network_microseconds(self.nominal),
                "estimated_us_memory_and_observation_nominal": c.io.microseconds(self.nominal),
                "cpu_share_nominal": c.cpu_share(self.nominal),
                "size": self.size.as_dict() if self.size else None,
                "network_parity_max_abs": self.network_parity_max_abs,
                "decision_parity_max_m": self.decision_parity_max_m,
                "observation_parity_max_abs": self.observation_parity_max_abs,
                "decisions_checked": self.decisions_checked}


@dataclass
class ExportResult:
    project: GeneratedProject
    cost: InferenceCost
    size: SizeReport | None
    parity_max_abs: float | None
    parity_samples: int
    nominal: CycleModel = NOMINAL
    pessimistic: CycleModel = PESSIMISTIC
    cycles_detail: str = "default cycle model (no ARM object to read)"
    navigate: NavigateFigures | None = None
    """The navigate level's figures when it was generated beside the controller."""

    @property
    def estimated_us(self) -> float:
        return self.cost.microseconds(self.nominal)

    def time_summary(self) -> str:
        return self.cost.summary(self.nominal, self.pessimistic)

    def as_dict(self) -> dict:
        c = self.cost
        return {
            "out_dir": str(self.project.out_dir),
            "model_sha256": self.project.model_sha256,
            "layers": [list(d.weight.shape[::-1]) for d in self.project.model.dense_layers],
            "macs": c.macs, "flops": c.flops, "transcendentals": c.transcendentals, "parameters": c.parameters,
            "cycles_per_mac_nominal": self.nominal.cycles_per_mac, "cycles_detail": self.cycles_detail,
            "estimated_us_nominal": c.microseconds(self.nominal),
            "estimated_us_pessimistic": c.microseconds(self.pessimistic),
            "size": self.size.as_dict() if self.size else None,
            "parity_max_abs": self.parity_max_abs, "parity_samples": self.parity_samples,
            "navigate": self.navigate.as_dict() if self.navigate else None,
        }


def host_parity(project: GeneratedProject, model_path: str | Path, n: int = DEFAULT_PARITY_SAMPLES,
                seed: int = 0, build_dir: str | Path | None = None) -> float:
    """Max |C - onnxruntime| over ``n`` random observations (host gcc build of the generated code)."""
    import onnxruntime as ort

    from deploy.crazyflie.example_model import random_observations
    from deploy.crazyflie.host import HostController

    tmp = None
    if build_dir is None:
        tmp = tempfile.mkdtemp(prefix="robot_hrl_host_")
        build_dir = tmp
    try:
        lib = HostController.build(project, build_dir)
        x = random_observations(n, project.model.input_size, seed)
        session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        fixed = session.get_inputs()[0].shape[0]
        if isinstance(fixed, int) and fixed == 1:
            ref = np.concatenate([session.run(None, {name: x[k:k + 1]})[0] for k in range(n)])
        else:
            ref = session.run(None, {name: x})[0]
        return float(np.max(np.abs(lib.forward(x) - ref)))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def navigate_parity(project: GeneratedProject, n_samples: int = DEFAULT_PARITY_SAMPLES,
                    n_sequences: int = DEFAULT_NAVIGATE_SEQUENCES, seed: int = 0,
                    build_dir: str | Path | None = None) -> tuple[float, float, float, int]:
    """The generated level (host gcc) against its Python twin: (max |nav_forward - onnxruntime| over ``n_samples``
    random observations, max |subgoal C - LearnedNavigator.decide| in m and max |observation C - Python| over
    ``n_sequences`` random episodes, decisions compared). A decision one accepts and the other refuses is an error. A
    level whose weights are stored as float16 is compared with its network with those weights (the weights rounded to
    float16 in the reference too: navigate_parity.onnxruntime_navigator)."""
    from deploy.crazyflie import navigate_parity as nav_parity
    from deploy.crazyflie.example_model import random_observations
    from deploy.crazyflie.host import HostController
    from deploy.crazyflie.host_navigate import HostNavigator

    level = project.navigate
    tmp = None
    if build_dir is None:
        tmp = tempfile.mkdtemp(prefix="robot_hrl_nav_")
        build_dir = tmp
    try:
        host = HostNavigator(HostController.build(project, build_dir))
        navigator = nav_parity.onnxruntime_navigator(level)
        x = random_observations(n_samples, level.model.input_size, seed)
        net = nav_parity.network_parity(host, navigator.act, x)
        rng = np.random.default_rng(seed)
        goals = 3 if level.contract.recurrent is not None else 1  # (the state's reset at a new goal checked too)
        seq = np.concatenate([nav_parity.random_sequence(rng, level.sensors, goals=goals) for _ in range(n_sequences)])
        ref, c = nav_parity.run_python(navigator, seq), nav_parity.run_host(host, seq)
        sub, obs, disagree = nav_parity.compare(ref, c)
        if disagree:
            raise CodegenError(f"the generated navigate level accepts or refuses {disagree} calls differently from "
                               "robot_hrl.planning.learned.LearnedNavigator on random sequences; please report this with the model")
        return net, sub, obs, int(np.sum(seq[:, 0] == nav_parity.OP_DECIDE))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def export_c(model: str | Path, out: str | Path, *, size_check: bool = True, parity_check: bool = True,
             parity_samples: int = DEFAULT_PARITY_SAMPLES, flash_budget_kb: float = DEFAULT_FLASH_BUDGET_KB,
             ram_budget_kb: float = DEFAULT_RAM_BUDGET_KB,
             time_budget_us: float = DEFAULT_TIME_BUDGET_US, navigate: str | Path | None = None,
             navigate_sequences: int = DEFAULT_NAVIGATE_SEQUENCES, navigate_weights: str | None = None) -> ExportResult:
    """Generate, check parity on the host, cross-compile and check the budgets; write report.json. With ``navigate``
    (a navigate level trained over ``model``) the level too: its parity (network and decisions), its size and time;
    the flash and RAM budgets then hold for both levels together. ``navigate_weights``: the level's weight storage
    (``float32``, ``float16``; None: its default); its parity is then against the network with those weights."""
    project = generate_project(model, out, navigate=navigate, navigate_weights=navigate_weights)
    cost = inference_cost(project.model)
    parity = None
    if parity_check:
        parity = host_parity(project, model, parity_samples, build_dir=project.out_dir / "build_host")
        if not parity <= PARITY_TOLERANCE:
            raise CodegenError(f"the generated C differs from onnxruntime by {parity:.3g} (> {PARITY_TOLERANCE:g}) on "
                               f"{parity_samples} random observations; please report this with the model")
    size = None
    result = ExportResult(project=project, cost=cost, size=None, parity_max_abs=parity, parity_samples=parity_samples)
    if size_check:
        result.size = arm_size_report(project, project.out_dir / "build_size")
        try:
            result.nominal, result.pessimistic, result.cycles_detail = cycle_models_from_object(
                project.out_dir / "build_size" / "policy_model.o")
        except (ValueError, OSError):
            pass  # keep the default cycle model
    if project.navigate is not None:
        result.navigate = _navigate_figures(project, result.size, parity_check, parity_samples, navigate_sequences)
    size = result.size
    (project.out_dir / "report.json").write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    if size is not None:
        check_budget(size, flash_budget_kb, ram_budget_kb)
    if result.navigate is not None:
        period_us = 1e6 / result.navigate.cost.decision_rate_hz
        if result.navigate.cost.microseconds(result.navigate.pessimistic) > period_us:
            raise BudgetError(f"the navigate level's estimated decision time exceeds its decision period ({period_us:.0f} us); "
                              f"{result.navigate.cost.summary()}. Train a smaller level")
    if result.estimated_us > time_budget_us:
        raise BudgetError(f"estimated inference time {result.estimated_us:.0f} us exceeds the time budget "
                          f"{time_budget_us:g} us (one 1 kHz stabilizer tick is 1000 us); {result.time_summary()}. "
                          "Train a smaller network or raise --time-budget-us")
    return result


def _navigate_figures(project: GeneratedProject, size: SizeReport | None, parity_check: bool, parity_samples: int,
                      sequences: int) -> NavigateFigures:
    from deploy.crazyflie.c_navigate import NAV_TASK_SOURCES
    from deploy.crazyflie.cost import navigate_decision_cost

    figures = NavigateFigures(cost=navigate_decision_cost(project.navigate), size=size.subset(NAV_TASK_SOURCES) if size else None,
                              network_parity_max_abs=None, decision_parity_max_m=None, observation_parity_max_abs=None,
                              decisions_checked=0)
    if parity_check:
        net, sub, obs, n = navigate_parity(project, parity_samples, sequences, build_dir=project.out_dir / "build_host_nav")
        for what, value in (("network", net), ("subgoal", sub), ("observation", obs)):
            if not value <= PARITY_TOLERANCE:
                raise CodegenError(f"the generated navigate level's {what} differs from the Python level by {value:.3g} "
                                   f"(> {PARITY_TOLERANCE:g}); please report this with the model")
        figures.network_parity_max_abs, figures.decision_parity_max_m, figures.observation_parity_max_abs = net, sub, obs
        figures.decisions_checked = n
    if size is not None:
        try:
            figures.nominal, figures.pessimistic, figures.cycles_detail = cycle_models_from_object(
                project.out_dir / "build_size" / "nav_model.o", function="nav_dense")
        except (ValueError, OSError):
            pass
    return figures


class ExportC:
    name = "export-c"
    help = ("Generate C code for the Crazyflie from an exported policy: weights, forward pass, the contract's "
            "observation/action mapping and an out-of-tree crazyflie-firmware controller; check parity with "
            "onnxruntime (host gcc), flash/RAM size (arm-none-eabi-gcc) and estimated time. With --navigate, the "
            "navigate level above it too (both levels on the Crazyflie).")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("model", help="the exported policy, e.g. models/crazyflie_goto.onnx")
        parser.add_argument("--out", default="build/crazyflie", help="output folder (out-of-tree build project)")
        parser.add_argument("--navigate", metavar="LEVEL.onnx", default=None,
                            help="also generate the navigate level trained over this goto model (e.g. "
                                 "models/crazyflie_navigate.onnx): src/nav_model.c (its network) and src/nav_io.c (range "
                                 "memory, observation, subgoal mapping; navReset/navSense/navDecide), checked against "
                                 "robot_hrl's LearnedNavigator on random sequences; the flash and RAM budgets then hold for "
                                 "both levels together. Refused when the level was trained over another goto model or "
                                 "robot")
        parser.add_argument("--navigate-weights", choices=WEIGHT_STORAGES, default=None,
                            help=f"how src/nav_model.c stores the navigate level's matrices (default {NAVIGATE_WEIGHTS}): "
                                 "float32, or float16 (IEEE 754 binary16, converted to float as they are read: half the "
                                 "flash of its weights, for a level over the flash budget; the computation stays float32, "
                                 "biases and normalisation stay float32; its parity is checked against the level with its "
                                 "weights rounded to float16)")
        parser.add_argument("--navigate-sequences", type=int, default=DEFAULT_NAVIGATE_SEQUENCES,
                            help="random episodes (40 decisions each) for the navigate level's decision parity check")
        parser.add_argument("--flash-budget-kb", type=float, default=DEFAULT_FLASH_BUDGET_KB,
                            help="fail when the controller's flash (text+rodata+data) exceeds this many KiB")
        parser.add_argument("--ram-budget-kb", type=float, default=DEFAULT_RAM_BUDGET_KB,
                            help="fail when the controller's RAM (data+bss) exceeds this many KiB")
        parser.add_argument("--time-budget-us", type=float, default=DEFAULT_TIME_BUDGET_US,
                            help="fail when the estimated inference time at 168 MHz exceeds this many microseconds")
        parser.add_argument("--parity-samples", type=int, default=DEFAULT_PARITY_SAMPLES,
                            help="random observations for the host parity check against onnxruntime")
        parser.add_argument("--no-parity-check", action="store_true", help="skip the host gcc parity check")
        parser.add_argument("--no-size-check", action="store_true",
                            help="skip the arm-none-eabi-gcc size report and the flash/RAM budget")

    def run(self, args: argparse.Namespace) -> int:
        if args.parity_samples < 1:
            raise CodegenError(f"--parity-samples must be at least 1, got {args.parity_samples}")
        if args.navigate_sequences < 1:
            raise CodegenError(f"--navigate-sequences must be at least 1, got {args.navigate_sequences}")
        for flag in ("flash_budget_kb", "ram_budget_kb", "time_budget_us"):
            if not getattr(args, flag) > 0:
                raise CodegenError(f"--{flag.replace('_', '-')} must be positive, got {getattr(args, flag)}")
        result = export_c(args.model, args.out, size_check=not args.no_size_check,
                          parity_check=not args.no_parity_check, parity_samples=args.parity_samples,
                          flash_budget_kb=args.flash_budget_kb, ram_budget_kb=args.ram_budget_kb,
                          time_budget_us=args.time_budget_us, navigate=args.navigate,
                          navigate_sequences=args.navigate_sequences, navigate_weights=args.navigate_weights)
        p = result.project
        layers = " -> ".join([str(p.model.input_size)] + [str(d.weight.shape[0]) for d in p.model.dense_layers])
        print(f"wrote {p.out_dir}/ (src/policy_model.c, src/policy_io.c, src/controller_policy.c, Makefile, Kbuild, "
              f"app-config)")
        print(f"network  {layers}, {result.cost.parameters} parameters")
        if result.parity_max_abs is not None:
            print(f"parity   max |C - onnxruntime| = {result.parity_max_abs:.3g} on {result.parity_samples} "
                  f"observations (tolerance {PARITY_TOLERANCE:g})")
        if result.size is not None:
            print(f"size     {result.size.summary()} (budget {args.flash_budget_kb:g} KiB flash, "
                  f"{args.ram_budget_kb:g} KiB RAM)")
        print(f"time     {result.time_summary()}")
        print(f"         ({result.cycles_detail})")
        nav = result.navigate
        if nav is not None:
            layers = " -> ".join([str(p.navigate.model.input_size)] + [str(d.weight.shape[0]) for d in p.navigate.model.dense_layers])
            if p.navigate.model.state_size:
                layers += f" beside a GRU of {p.navigate.model.state_size} (its state kept between decisions)"
            print(f"navigate level {p.navigate.model_path.name}: src/nav_model.c, src/nav_io.c; network {layers}, "
                  f"{nav.cost.network.parameters} parameters ({p.navigate.weights} weights), "
                  f"{p.navigate.contract.decision_rate_hz:g} Hz")
            if nav.decision_parity_max_m is not None:
                rounded = ", weights rounded to float16 in both" if p.navigate.weights == "float16" else ""
                print(f"  parity max |C - onnxruntime| = {nav.network_parity_max_abs:.3g} (network{rounded}); subgoal "
                      f"{nav.decision_parity_max_m:.3g} m, observation {nav.observation_parity_max_abs:.3g} against "
                      f"LearnedNavigator on {nav.decisions_checked} decisions of random sequences")
            if nav.size is not None:
                print(f"  size   {nav.size.summary()}")
                print(f"  both levels: flash {result.size.flash / 1024:.1f} KiB, RAM {result.size.ram / 1024:.2f} KiB "
                      f"(budget {args.flash_budget_kb:g} KiB flash, {args.ram_budget_kb:g} KiB RAM)")
            print(f"  time   {nav.cost.summary(nav.nominal, nav.pessimistic)}")
        print(f"next     make -C {p.out_dir} CRAZYFLIE_BASE=/path/to/crazyflie-firmware && "
              f"robot-hrl flash --image {p.out_dir}/build/cf2.bin --uri radio://0/80/2M")
        return 0


class Flash:
    name = "flash"
    help = ("Flash the firmware built from the generated out-of-tree controller to a Crazyflie through cflib's "
            "bootloader (Crazyradio or USB). --dry-run checks the image and shows what would be flashed.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--uri", default="radio://0/80/2M", help="Crazyflie link URI (radio://... or usb://0)")
        parser.add_argument("--image", default=str(DEFAULT_IMAGE),
                            help="firmware image: build/cf2.bin from `make` in the export-c output folder")
        parser.add_argument("--dry-run", action="store_true",
                            help="check the image and print what would be flashed; touch no radio")

    def run(self, args: argparse.Namespace) -> int:
        if args.dry_run:
            check = check_image(args.image)
            print("dry run: nothing is flashed")
            print(check.describe())
            print(f"target  STM32F405 (cf2, stm32, fw) of the Crazyflie at {args.uri}")
            try:
                require_link(args.uri)
                print("link    found")
            except FlashError as exc:
                print(f"link    not available now: {exc}")
            print("method  cflib.bootloader.Bootloader(uri).flash_full(warm=True, targets=[cf2/stm32/fw]); "
                  "the Crazyflie reboots into the new firmware")
            return 0
        check = flash_image(args.image, args.uri,
                            progress=lambda msg, pct: print(f"\r{pct:3d}% {msg}", end="", flush=True))
        print(f"\nflashed {check.path} ({check.size} B, sha256 {check.sha256[:16]}...) to {args.uri}")
        return 0


EXPORT_C = ExportC()
FLASH = Flash()

__all__ = ["EXPORT_C", "FLASH", "ExportResult", "ToolchainError", "export_c", "host_parity"]

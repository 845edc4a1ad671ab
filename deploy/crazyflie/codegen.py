"""``export_c``: an exported policy (ONNX + contract) -> an out-of-tree crazyflie-firmware controller.

    project = generate_project("models/crazyflie_goto.onnx", "build/crazyflie")

writes::

    build/crazyflie/
      Makefile, Kbuild, app-config       out-of-tree build against crazyflie-firmware
      src/Kbuild
      src/policy_model.[ch]              weights (static const float) and the forward pass
      src/policy_io.[ch]                 the contract: observation from state_t/sensorData_t/setpoint_t,
                                         actions -> control_t (controlModeForceTorque)
      src/controller_policy.c            controllerOutOfTreeInit/Test/controllerOutOfTree, PID fallback
      manifest.json                      model hash, contract, architecture
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract
from robot_hrl.robots import get_robot

from deploy.crazyflie.c_contract import check_contract, generate_contract_c
from deploy.crazyflie.c_controller import APP_CONFIG, CONTROLLER_C, KBUILD_SRC, KBUILD_TOP, MAKEFILE, SOURCES
from deploy.crazyflie.c_heading import generate_heading_c
from deploy.crazyflie.c_model import generate_model_c
from deploy.crazyflie.c_navigate import NAV_TASK_SOURCES
from deploy.crazyflie.c_navigate_task import navigate_app_config
from deploy.crazyflie.errors import CodegenError
from deploy.crazyflie.firmware import FIRMWARE_MIN_RELEASE, FIRMWARE_PLATFORM, FIRMWARE_RELEASE
from deploy.crazyflie.graph import LoweredModel, load_onnx, lower_onnx

if TYPE_CHECKING:
    from deploy.crazyflie.codegen_navigate import NavigateLevel

STUB_DIR = Path(__file__).resolve().parent / "firmware_stubs"
"""Our own minimal firmware headers for the host/ARM test builds (see firmware_stubs/README.md)."""


@dataclass
class GeneratedProject:
    """What :func:`generate_project` wrote."""

    out_dir: Path
    model: LoweredModel
    contract: PolicyContract
    model_sha256: str
    navigate: "NavigateLevel | None" = None
    """The navigate level generated beside the controller (``--navigate``), or None."""

    @property
    def src_dir(self) -> Path:
        return self.out_dir / "src"

    @property
    def sources(self) -> list[Path]:
        """Every generated C source: the controller's, then the navigate level's when there is one."""
        return [self.src_dir / s for s in SOURCES] + (self.navigate.sources if self.navigate else [])

    @property
    def app_config(self) -> str:
        """The project's app-config as it is on disk (the test builds derive autoconf.h from it)."""
        return (self.out_dir / "app-config").read_text()


def read_contract(model, path: Path | None = None) -> PolicyContract:
    meta = {p.key: p.value for p in model.metadata_props}
    text = meta.get(CONTRACT_METADATA_KEY)
    try:
        skill = json.loads(text).get("skill") if text else None
    except (json.JSONDecodeError, AttributeError):
        skill = None
    if skill == "navigate":
        raise CodegenError(f"{path or 'the model'} is a navigate level, not a skill: give the goto skill as the model and "
                           "the level with --navigate (robot-hrl export-c models/crazyflie_goto.onnx --navigate "
                           "models/crazyflie_navigate.onnx)")
    return PolicyContract.from_json(text)


def generate_project(model_path: str | Path, out_dir: str | Path, navigate: str | Path | None = None,
                     navigate_weights: str | None = None) -> GeneratedProject:
    """Lower ``model_path`` and write the out-of-tree controller project to ``out_dir``; with ``navigate`` (a
    navigate level's ONNX, trained over this goto model) the level's C too (deploy/crazyflie/codegen_navigate.py),
    its matrices stored as ``navigate_weights`` (``float32`` or ``float16``; None: the level's default,
    codegen_navigate.NAVIGATE_WEIGHTS). The goto skill's weights are float32."""
    if navigate_weights is not None and navigate is None:
        raise CodegenError("navigate_weights (--navigate-weights) is the navigate level's storage: give the level too "
                           "(--navigate LEVEL.onnx)")
    model_path = Path(model_path)
    onnx_model = load_onnx(model_path)
    contract = read_contract(onnx_model, model_path)
    try:
        robot = get_robot(contract.robot.name)
    except KeyError as exc:
        raise CodegenError(str(exc.args[0])) from None
    check_contract(contract)  # the onboard code's own refusals first (they name the C field)
    contract.check_compatible(robot)
    lowered = lower_onnx(onnx_model)
    if lowered.input_size != contract.observation_size:
        raise CodegenError(f"the graph takes {lowered.input_size} observations, its contract says "
                           f"{contract.observation_size}; re-export the model")
    if lowered.output_size != contract.action_size:
        raise CodegenError(f"the graph gives {lowered.output_size} actions, its contract says "
                           f"{contract.action_size}; re-export the model")

    sha = hashlib.sha256(model_path.read_bytes()).hexdigest()
    banner = (f"/* Generated by `robot-hrl export-c` from {model_path.name} (sha256 {sha[:16]}...).\n"
              f" * Skill '{contract.skill}', robot '{contract.robot.name}', {contract.control_rate_hz:g} Hz, "
              f"{contract.observation_size} observations -> {contract.action_size} actions.\n"
              f" * Out-of-tree controller for crazyflie-firmware {FIRMWARE_RELEASE} ({FIRMWARE_PLATFORM}), the tested release "
              f"({FIRMWARE_MIN_RELEASE} or later).\n"
              " * Do not edit: regenerate from the ONNX model. */")
    model_h, model_c = generate_model_c(lowered, "policy_model.h", banner)
    io_h, io_c = generate_contract_c(contract, banner)
    controller_c = CONTROLLER_C.format(banner=banner)
    level = None
    if navigate is not None:
        from deploy.crazyflie.codegen_navigate import NAVIGATE_WEIGHTS, generate_navigate_level

        level = generate_navigate_level(navigate, Path(out_dir) / "src", contract, sha,
                                        f"For crazyflie-firmware {FIRMWARE_RELEASE} ({FIRMWARE_PLATFORM}); plain C, math.h only.",
                                        weights=navigate_weights or NAVIGATE_WEIGHTS)
    # the heading loop the level was trained with (its contract's heading), under the goto in the controller
    heading_h, heading_c = generate_heading_c(contract, level.contract.heading if level is not None else None, robot,
                                              banner)

    out = Path(out_dir)
    src = out / "src"
    src.mkdir(parents=True, exist_ok=True)
    files = {
        out / "Makefile": MAKEFILE,
        out / "Kbuild": KBUILD_TOP,
        out / "app-config": APP_CONFIG + (navigate_app_config() if level else ""),
        src / "Kbuild": KBUILD_SRC + "".join(f"obj-y += {s[:-2]}.o\n" for s in (NAV_TASK_SOURCES if level else ())),
        src / "policy_model.h": model_h,
        src / "policy_model.c": model_c,
        src / "policy_io.h": io_h,
        src / "policy_io.c": io_c,
        src / "policy_heading.h": heading_h,
        src / "policy_heading.c": heading_c,
        src / "controller_policy.c": controller_c,
    }
    for path, text in files.items():
        path.write_text(text)
    manifest = {
        "model": str(model_path),
        "model_sha256": sha,
        "contract": json.loads(contract.to_json()),
        "layers": [list(d.weight.shape[::-1]) for d in lowered.dense_layers],
        "steps": [f"{type(s).__name__}:{s.node}" for s in lowered.steps],
        "sources": [f"src/{s}" for s in SOURCES],
        "firmware_release": FIRMWARE_RELEASE,
    }
    if level is not None:
        manifest["navigate"] = level.manifest()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return GeneratedProject(out_dir=out, model=lowered, contract=contract, model_sha256=sha, navigate=level)

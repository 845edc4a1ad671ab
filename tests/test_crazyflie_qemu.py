"""The generated code executed on an emulated STM32F405 (QEMU netduinoplus2, Cortex-M4F).

Cross-compiled with the firmware's flags and newlib's libm, run under qemu-system-arm with
semihosting: the network matches onnxruntime and the observation matches the Python contract
on the Crazyflie's own instruction set and FPU. Skipped without qemu-system-arm.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import onnxruntime as ort
import pytest

from deploy.crazyflie.cli import PARITY_TOLERANCE
from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.example_model import build_mlp_onnx, random_observations
from deploy.crazyflie.qemu import run_on_qemu
from robot_hrl.contract import compute_observation
from robot_hrl.contract.error_integral import TERM_NAME as INTEGRAL_TERM, ErrorIntegrator
from robot_hrl.geometry import quat_normalize

pytestmark = pytest.mark.skipif(
    shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
    reason="needs qemu-system-arm and arm-none-eabi-gcc")


def test_network_and_observation_on_an_emulated_cortex_m4(repo_root, tmp_path):
    model = repo_root / "models" / "crazyflie_goto.onnx"
    if not model.is_file():
        model = build_mlp_onnx(tmp_path / "m.onnx", hidden=(64, 64))
    project = generate_project(model, tmp_path / "cf")
    x = random_observations(2000, project.model.input_size, seed=11)

    rng = np.random.default_rng(12)
    n = 500
    inputs = {"position_w": rng.uniform(-3, 3, (n, 3)), "quat_wxyz": quat_normalize(rng.standard_normal((n, 4))),
              "linear_velocity_w": rng.uniform(-6, 6, (n, 3)), "angular_velocity_b": rng.uniform(-40, 40, (n, 3)),
              "last_action": rng.uniform(-1.2, 1.2, (n, 4))}
    inputs["subgoal_w"] = inputs["position_w"] + rng.uniform(-3, 3, (n, 3))
    inputs = {k: v.astype(np.float32).astype(np.float64) for k, v in inputs.items()}
    rows = np.concatenate([inputs["position_w"], inputs["quat_wxyz"], inputs["linear_velocity_w"],
                           inputs["angular_velocity_b"] * 180.0 / math.pi, inputs["subgoal_w"]], axis=1)
    rows[0, 8] = np.nan  # one faulty state: reported, not computed

    actions, obs, ok = run_on_qemu(project, x, rows, inputs["last_action"], tmp_path / "qemu")

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    ref = session.run(None, {session.get_inputs()[0].name: x})[0]
    assert actions.shape == ref.shape
    assert float(np.max(np.abs(actions - ref))) <= PARITY_TOLERANCE
    assert not ok[0] and ok[1:].all()
    integral = next((t.integral for t in project.contract.observations if t.integral is not None), None)
    if integral is not None:  # the shipped contract's error integral: the C keeps it from row to row, as the runtime does
        integrator = ErrorIntegrator(integral, project.contract.control_rate_hz)
        inputs[INTEGRAL_TERM] = np.array([integrator.update(p, q, g) for p, q, g in
                                          zip(inputs["position_w"], inputs["quat_wxyz"], inputs["subgoal_w"])])
    expected = compute_observation(project.contract.observations, {k: v[1:] for k, v in inputs.items()})
    assert float(np.max(np.abs(obs[1:] - expected))) < 2e-5

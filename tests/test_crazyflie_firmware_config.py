"""What the generated controller takes from the firmware's configuration: the estimator and the OOT prototypes.

- The policy flies only when the Kalman estimator runs; otherwise the PID flies and
  ``rlPolicy.mode`` (read through the log table) says 4. The estimator can change in flight
  (parameter ``stabilizer.estimator``), and a build whose app-config does not select the Kalman
  estimator never flies the policy.
- ``controller.h`` declares ``controllerOutOfTree*`` only under ``CONFIG_CONTROLLER_OOT``, from
  ``autoconf.h``, which no firmware header we use includes: the generated code includes it
  first, so a wrong signature fails to compile, and a build without the app-config stops with
  a message that names it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.errors import ToolchainError
from deploy.crazyflie.example_model import build_mlp_onnx
from deploy.crazyflie.firmware import FIRMWARE_RELEASE, autoconf_h, parse_app_config
from deploy.crazyflie.host import HostController
from deploy.crazyflie.size import stub_includes

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")

MODE_POLICY, MODE_PID_NO_KALMAN = 0, 4
AUTO_SELECT, COMPLEMENTARY, KALMAN = 0, 1, 2
LEGACY, FORCE_TORQUE = 0, 1


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_mlp_onnx(tmp_path_factory.mktemp("m") / "m.onnx", hidden=(16, 16), seed=3)


@pytest.fixture(scope="module")
def lib(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cfg")
    return HostController.build(generate_project(model, tmp / "cf"), tmp / "host")


def _row(setpoint=(0.4, 0.1, 1.1)):
    return np.array([0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, *setpoint], dtype=np.float32)


def _project_with_app_config(model, tmp_path, edit):
    project = generate_project(model, tmp_path / "cf")
    path = project.out_dir / "app-config"
    path.write_text(edit(path.read_text()))
    return project


def test_the_policy_flies_only_on_the_kalman_estimator(lib):
    lib.set_enable(True)
    lib.set_estimator(KALMAN)
    lib.init()
    for tick in range(1, 12):  # take-off with the PID (velocity setpoints), through one position-loop tick
        lib.tick(_row(), tick, position_mode=2)
    mode, control, _ = lib.tick(_row(), 20)
    assert mode == lib.log_mode == MODE_POLICY and control["controlMode"] == FORCE_TORQUE
    for estimator in (COMPLEMENTARY, AUTO_SELECT):  # auto-select resolves to the complementary estimator
        lib.set_estimator(estimator)
        for tick in (21, 30, 40):  # on and between policy ticks
            mode, control, pwm = lib.tick(_row(), tick)
            assert mode == lib.log_mode == MODE_PID_NO_KALMAN and control["controlMode"] == LEGACY
            assert pwm.min() > 0  # the PID holds it in the air
    lib.set_estimator(KALMAN)
    mode, control, _ = lib.tick(_row(), 41)
    assert mode == MODE_PID_NO_KALMAN and control["controlMode"] == LEGACY  # the PID until the next policy tick
    mode, control, _ = lib.tick(_row(), 50)
    assert mode == MODE_POLICY and control["controlMode"] == FORCE_TORQUE


def test_without_the_kalman_selection_the_policy_never_flies(model, tmp_path):
    def drop_selection(text):
        return "\n".join(line for line in text.splitlines() if not line.startswith("CONFIG_ESTIMATOR_KALMAN=")) + "\n"

    project = _project_with_app_config(model, tmp_path, drop_selection)
    lib = HostController.build(project, tmp_path / "host")
    lib.init()
    for tick in range(0, 60, 5):
        mode, control, _ = lib.tick(_row(), tick)
        assert mode == lib.log_mode == MODE_PID_NO_KALMAN and control["controlMode"] == LEGACY


def test_app_config_selects_the_kalman_estimator_and_autoconf_follows_it(model, tmp_path):
    text = generate_project(model, tmp_path / "cf").app_config
    config = parse_app_config(text)
    assert config == {"CONFIG_CONTROLLER_OOT": "y", "CONFIG_ESTIMATOR_KALMAN_ENABLE": "y", "CONFIG_ESTIMATOR_KALMAN": "y"}
    header = autoconf_h(text + "CONFIG_FOO=n\nCONFIG_BAR=42\nCONFIG_NAME=\"x\"\n")
    defines = dict(re.findall(r"^#define (\w+) (.+)$", header, re.M))
    assert defines == {"CONFIG_CONTROLLER_OOT": "1", "CONFIG_ESTIMATOR_KALMAN_ENABLE": "1",
                       "CONFIG_ESTIMATOR_KALMAN": "1", "CONFIG_BAR": "42", "CONFIG_NAME": '"x"'}
    assert FIRMWARE_RELEASE in text


def test_a_build_without_config_controller_oot_stops_and_names_it(model, tmp_path):
    project = _project_with_app_config(model, tmp_path, lambda t: t.replace("CONFIG_CONTROLLER_OOT=y", ""))
    with pytest.raises(ToolchainError, match="CONFIG_CONTROLLER_OOT is not set"):
        HostController.build(project, tmp_path / "host")


def _compile(project, source_text, tmp_path, name):
    src = tmp_path / f"{name}.c"
    src.write_text(source_text)
    return subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-fsyntax-only",
                           *stub_includes(project, tmp_path / f"b_{name}"), str(src)], capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"})


def test_a_wrong_signature_fails_to_compile(model, tmp_path):
    project = generate_project(model, tmp_path / "cf")
    text = (project.src_dir / "controller_policy.c").read_text()
    assert _compile(project, text, tmp_path, "ok").returncode == 0
    wrong = re.sub(r"(void controllerOutOfTree\(control_t \*control,.*?)const stabilizerStep_t tick\)",
                   r"\1const uint16_t tick)", text, count=1, flags=re.S)
    assert wrong != text
    res = _compile(project, wrong, tmp_path, "wrong")
    assert res.returncode != 0 and "conflicting types for 'controllerOutOfTree'" in res.stderr
    # The trap the include closes: controller.h (real and stand-in) hides the prototypes without
    # CONFIG_CONTROLLER_OOT, so without autoconf.h first the same wrong signature compiles silently.
    unguarded = wrong.replace('#include "autoconf.h"', "").replace("#ifndef CONFIG_CONTROLLER_OOT", "#if 0")
    assert _compile(project, unguarded, tmp_path, "unguarded").returncode == 0

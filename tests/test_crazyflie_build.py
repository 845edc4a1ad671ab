"""The generated out-of-tree build files: Makefile variables, Kbuild object list, app-config.

crazyflie-firmware is not in this repository, so the Makefile is run against a stand-in
``tools/make/oot.mk`` that prints what the firmware's oot.mk receives, and the objects named
in ``src/Kbuild`` are compiled with arm-none-eabi-gcc against our firmware header stubs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.firmware import FIRMWARE_CFLAGS, FIRMWARE_RELEASE
from deploy.crazyflie.size import ARM_CFLAGS, stub_includes

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.fixture(scope="module")
def project(repo_root, tmp_path_factory):
    model = repo_root / "models" / "crazyflie_goto.onnx"
    if not model.is_file():
        from deploy.crazyflie.example_model import build_mlp_onnx

        model = build_mlp_onnx(tmp_path_factory.mktemp("m") / "m.onnx", hidden=(16, 16))
    return generate_project(model, tmp_path_factory.mktemp("oot") / "crazyflie")


def test_makefile_hands_the_project_to_oot_mk_from_any_directory(project, tmp_path):
    base = tmp_path / "fake-firmware"
    (base / "tools" / "make").mkdir(parents=True)
    (base / "tools" / "make" / "oot.mk").write_text(
        "all:\n\t@echo OOT=$(OOT) OOT_CONFIG=$(OOT_CONFIG) EXTRA_CFLAGS=$(EXTRA_CFLAGS)\n")
    res = subprocess.run(["make", "-s", "-C", str(project.out_dir), f"CRAZYFLIE_BASE={base}"], cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    out = project.out_dir.resolve()
    assert f"OOT={out} " in res.stdout
    assert f"OOT_CONFIG={out}/app-config" in res.stdout
    assert f"-I{out}/src" in res.stdout


def test_makefile_without_a_firmware_checkout_says_what_to_do(project, tmp_path):
    res = subprocess.run(["make", "-C", str(project.out_dir), f"CRAZYFLIE_BASE={tmp_path / 'none'}"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "not a crazyflie-firmware checkout" in res.stderr


def test_app_config_and_kbuild(project):
    config = (project.out_dir / "app-config").read_text()
    assert re.search(r"^CONFIG_CONTROLLER_OOT=y$", config, re.M)
    assert (project.out_dir / "Kbuild").read_text().strip() == "obj-y += src/"
    objects = re.findall(r"^obj-y \+= (\S+)\.o$", (project.src_dir / "Kbuild").read_text(), re.M)
    assert sorted(objects) == sorted(p.stem for p in project.sources)


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
def test_every_kbuild_object_compiles_for_the_cortex_m4(project, tmp_path):
    objects = re.findall(r"^obj-y \+= (\S+)\.o$", (project.src_dir / "Kbuild").read_text(), re.M)
    for name in objects:
        subprocess.run(["arm-none-eabi-gcc", *ARM_CFLAGS, "-Wextra", *stub_includes(project, tmp_path),
                        "-c", str(project.src_dir / f"{name}.c"), "-o", str(tmp_path / f"{name}.o")],
                       check=True, capture_output=True)
    nm = subprocess.run(["arm-none-eabi-nm", *[str(tmp_path / f"{n}.o") for n in objects]], capture_output=True,
                        text=True, check=True).stdout
    defined = {line.split()[-1] for line in nm.splitlines() if re.match(r"^[0-9a-f]+ [TDBR] ", line)}
    assert {"controllerOutOfTreeInit", "controllerOutOfTreeTest", "controllerOutOfTree", "policy_forward"} <= defined
    undefined = {line.split()[-1] for line in nm.splitlines() if line.strip().startswith("U ")} - defined
    # Beyond each other, the objects need only the firmware's PID and libc/libm.
    assert undefined <= {"controllerPid", "controllerPidInit", "controllerPidTest", "stateEstimatorGetType", "expf",
                         "sqrtf", "tanhf", "memcpy", "memset"}, undefined


def test_the_tested_firmware_release_is_named_in_the_code_and_the_docs(project, repo_root):
    banner = (project.src_dir / "controller_policy.c").read_text().split("*/", 1)[0]
    assert f"crazyflie-firmware {FIRMWARE_RELEASE}" in banner
    assert json.loads((project.out_dir / "manifest.json").read_text())["firmware_release"] == FIRMWARE_RELEASE
    assert f"--branch {FIRMWARE_RELEASE}" in (project.out_dir / "Makefile").read_text()
    for doc in ("docs/deploy_hardware.md", "docs/firmware_actuator_chain.md", "README.md"):
        assert f"crazyflie-firmware {FIRMWARE_RELEASE}" in (repo_root / doc).read_text(), doc


def test_the_size_check_and_the_docs_use_the_firmwares_own_flags(repo_root):
    assert ARM_CFLAGS == FIRMWARE_CFLAGS
    assert {"-Os", "-Werror", "-std=gnu11", "-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard",
            "-ffunction-sections", "-fdata-sections", "-fno-math-errno"} <= set(ARM_CFLAGS)
    assert not {"-O2", "-O3", "-O0"} & set(ARM_CFLAGS)
    doc = (repo_root / "docs" / "deploy_hardware.md").read_text()
    block = re.search(r"The firmware's flags.*?```\n(.*?)```", doc, re.S).group(1)
    assert block.split() == list(FIRMWARE_CFLAGS)
    assert "arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard -O2" not in doc

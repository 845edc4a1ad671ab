"""ARM cross-compilation of the generated controller: size report, budgets, cost estimate, CLI."""

from __future__ import annotations

import json
import shutil

import pytest

from deploy.crazyflie.cli import export_c
from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.cost import NOMINAL, PESSIMISTIC, cycle_models_from_object, inference_cost
from deploy.crazyflie.errors import BudgetError
from deploy.crazyflie.example_model import build_mlp_onnx
from deploy.crazyflie.graph import lower_onnx
from deploy.crazyflie.size import arm_size_report, check_budget, link_probe_image, parse_size_a, parse_stack_usage
from robot_hrl.cli import main

needs_arm = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                               reason="needs arm-none-eabi-gcc (apt-get install gcc-arm-none-eabi)")


@pytest.fixture(scope="module")
def model_path(repo_root, tmp_path_factory):
    shipped = repo_root / "models" / "crazyflie_goto.onnx"
    if shipped.is_file():
        return shipped
    return build_mlp_onnx(tmp_path_factory.mktemp("m") / "standin.onnx", hidden=(64, 64))


def test_parse_size_and_stack_usage():
    text = """x.o  :
section           size   addr
.text.policy_dense  120  0
.text              420      0
.rodata.policy_w2 5632     0
.data                1      0
.bss.policy_buf0   256      0
.comment            39      0
Total              664
"""
    assert parse_size_a(text) == {"text": 540, "rodata": 5632, "data": 1, "bss": 256}
    assert parse_stack_usage("policy_model.c:20:13:policy_dense\t36\tstatic\nio.c:3:6:f\t0\tstatic\n") == {
        "policy_dense": 36, "f": 0}


def test_cost_counts_macs_and_transcendentals(model_path):
    project_model = lower_onnx(model_path)
    cost = inference_cost(project_model)
    dense = project_model.dense_layers
    assert cost.macs == sum(d.weight.size for d in dense)
    assert cost.flops >= 2 * cost.macs
    assert PESSIMISTIC.cycles_per_mac > NOMINAL.cycles_per_mac
    assert cost.microseconds(PESSIMISTIC) > cost.microseconds(NOMINAL) > 0
    assert cost.microseconds(NOMINAL) < 1000.0  # fits a 1 kHz stabilizer tick (and the 2 ms of 500 Hz)


@needs_arm
def test_arm_size_report_within_default_budget(model_path, tmp_path):
    project = generate_project(model_path, tmp_path / "cf")
    report = arm_size_report(project)
    params = inference_cost(project.model).parameters
    assert report.rodata >= 4 * params  # the weights are float32 constants in flash
    assert report.text > 0 and report.bss > 0
    assert report.flash == report.text + report.rodata + report.data
    assert report.ram == report.data + report.bss
    assert "controllerOutOfTree" in report.stack_frames and report.stack_upper_bound < 1024
    check_budget(report)  # 128 KiB flash, 16 KiB RAM
    nominal, pessimistic, detail = cycle_models_from_object(tmp_path / "cf" / "build_size" / "policy_model.o")
    assert 3.0 <= nominal.cycles_per_mac <= 12.0 and pessimistic.cycles_per_mac > nominal.cycles_per_mac
    assert "MACs in the inner loop of policy_dense" in detail
    assert inference_cost(project.model).microseconds(nominal) < 1000.0


@needs_arm
def test_probe_image_links_with_libm(model_path, tmp_path):
    project = generate_project(model_path, tmp_path / "cf")
    image = link_probe_image(project, tmp_path / "probe")
    assert image.bin.stat().st_size == image.flash
    assert image.flash > arm_size_report(project).flash  # + expf, vectors, stand-in PID


@needs_arm
def test_model_over_the_flash_budget_fails_the_build(tmp_path):
    big = build_mlp_onnx(tmp_path / "big.onnx", hidden=(192, 192), seed=1)  # ~42 k parameters, ~170 KiB
    with pytest.raises(BudgetError, match=r"flash .* > budget 128 KiB"):
        export_c(big, tmp_path / "cf", parity_samples=200)
    report = json.loads((tmp_path / "cf" / "report.json").read_text())
    assert report["size"]["flash"] > 128 * 1024


@needs_arm
def test_budget_flags_via_cli(model_path, tmp_path, capsys):
    out = tmp_path / "cf"
    assert main(["export-c", str(model_path), "--out", str(out), "--parity-samples", "500"]) == 0
    printed = capsys.readouterr().out
    assert "parity" in printed and "flash" in printed and "MACs" in printed
    assert (out / "Makefile").is_file() and (out / "app-config").read_text().count("CONFIG_CONTROLLER_OOT=y") == 1
    assert main(["export-c", str(model_path), "--out", str(out), "--no-parity-check", "--ram-budget-kb", "0.1"]) == 1
    assert "RAM" in capsys.readouterr().err
    assert main(["export-c", str(model_path), "--out", str(out), "--no-parity-check", "--no-size-check",
                 "--time-budget-us", "1"]) == 1
    assert "time budget" in capsys.readouterr().err
    assert main(["export-c", str(model_path), "--out", str(out), "--flash-budget-kb", "-1"]) == 1
    assert "must be positive" in capsys.readouterr().err


@needs_arm
def test_export_c_with_a_relative_out_builds_and_measures(model_path, tmp_path, monkeypatch, capsys):
    """`robot-hrl export-c --out <relative dir>`: gcc runs in the size build folder, so every path it gets must be
    absolute (was: `arm-none-eabi-gcc failed on policy_model.c: ... No such file`)."""
    model = model_path.resolve()
    monkeypatch.chdir(tmp_path)
    assert main(["export-c", str(model), "--out", "build/cf_rel", "--parity-samples", "200"]) == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "build" / "cf_rel" / "report.json").read_text())
    assert report["size"]["flash"] > 0 and report["parity_max_abs"] <= 1e-4
    assert (tmp_path / "build" / "cf_rel" / "build_size" / "policy_model.o").is_file()


def test_missing_arm_toolchain_is_a_clear_error(model_path, tmp_path, monkeypatch):
    from deploy.crazyflie.errors import ToolchainError

    monkeypatch.setenv("PATH", str(tmp_path))  # no compilers on PATH
    project = generate_project(model_path, tmp_path / "cf")
    with pytest.raises(ToolchainError, match="apt-get install gcc-arm-none-eabi"):
        arm_size_report(project)


def test_cycles_per_mac_parser_takes_the_innermost_fma_loop():
    from deploy.crazyflie.cost import dense_loop_cycles_per_mac

    text = """
00000000 <policy_dense>:
   0:\tpush\t{r4, lr}
   2:\tvldr\ts13, [pc, #16]
   4:\tvldr\ts4, [ip]
   8:\tvldr\ts5, [lr]
   c:\tadds\tr0, #4
   e:\tvfma.f32\ts15, s4, s5
  12:\tvfma.f32\ts14, s4, s5
  16:\tbne.n\t4 <policy_dense+0x4>
  18:\tvadd.f32\ts14, s14, s15
  1c:\tbne.n\t2 <policy_dense+0x2>
  1e:\tpop\t{r4, pc}

00000020 <policy_forward>:
"""
    cpm, detail = dense_loop_cycles_per_mac(text)
    # inner loop 0x4..0x16: vldr 2 + vldr 1 + adds 1 + 2 x vfma 3 + branch 3 = 13 cycles for 2 MACs
    assert cpm == pytest.approx(6.5) and "2 MACs" in detail
    with pytest.raises(ValueError, match="no multiply-accumulate loop"):
        dense_loop_cycles_per_mac("00000000 <policy_dense>:\n   0:\tbx\tlr\n")

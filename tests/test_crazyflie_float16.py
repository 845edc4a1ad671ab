"""The navigate level's weights stored in 16 bits (``--navigate-weights float16``; deploy/crazyflie/float16.py).

Checked with real compilers: the host gcc build of a float16 level computes the network with its weights rounded to
float16 (onnxruntime on the rounded copy) to the float32 parity's tolerance, decisions included; the rounding moves the
level from its float32 network by no more than the bound derived from the weights' rounding errors; the half ->
float conversion is exact for every finite binary16; a weight float16 cannot hold is refused with the fix; the
level's flash (arm-none-eabi-gcc, the firmware's flags) drops by about half its matrices' float32 bytes.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from deploy.crazyflie import navigate_parity as nav_parity
from deploy.crazyflie.cli import PARITY_TOLERANCE
from deploy.crazyflie.c_model import _HALF_HELPER
from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.errors import CodegenError
from deploy.crazyflie.example_model import random_observations
from deploy.crazyflie.float16 import FLOAT16_MAX, float16_deviation_bound, round_weights_float16
from deploy.crazyflie.graph import Gru
from deploy.crazyflie.host import HostController
from deploy.crazyflie.host_navigate import HostNavigator
from test_crazyflie_navigate import _assert_same  # (one definition of "the C decides as Python")

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")
needs_arm = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")

GOTO, NAV = "models/crazyflie_goto.onnx", "models/crazyflie_navigate.onnx"
ARITHMETIC_SLACK = 1e-5
"""float32 arithmetic's own rounding in both networks (the parity tolerance's order, 1e-4, ten times tighter): what
float16_deviation_bound, exact but for it, may be exceeded by."""


@pytest.fixture(scope="module", params=["shipped", "recurrent"])
def built16(request, repo_root, tmp_path_factory):
    """(project, host C level, Python level on the float16-rounded copy) of the shipped level and of the recurrent test
    level (tests/recurrent_level.py), their weights stored as float16."""
    nav = repo_root / NAV if request.param == "shipped" else request.getfixturevalue("recurrent_run") / "nav.onnx"
    out = tmp_path_factory.mktemp(f"cf_nav16_{request.param}")
    project = generate_project(repo_root / GOTO, out / "cf", navigate=nav, navigate_weights="float16")
    host = HostNavigator(HostController.build(project, out / "host"))
    return project, host, nav_parity.onnxruntime_navigator(project.navigate)


def test_the_float16_c_computes_the_network_with_its_weights_rounded(built16):
    """The C against onnxruntime on the copy whose weights went through round_weights_float16, to the float32 parity's
    tolerance (a recurrent level over 8 steps, the state fed back); against the float32 file it differs by more than
    that tolerance, so the comparison sees which weights the C holds."""
    project, host, navigator = built16
    assert project.navigate.weights == "float16"
    src = (project.src_dir / "nav_model.c").read_text()
    assert "static const uint16_t nav_w" in src and "nav_half_to_float(row[i])" in src
    assert "static const float nav_b" in src  # biases stay float32
    x = random_observations(2000, project.navigate.model.input_size, seed=11)
    assert nav_parity.network_parity(host, navigator.act, x) <= PARITY_TOLERANCE
    float32 = nav_parity.onnxruntime_navigator(project.navigate, "float32")
    assert nav_parity.network_parity(host, float32.act, x) > 10 * PARITY_TOLERANCE


def test_the_float16_c_decides_as_the_rounded_python_level(built16):
    project, host, navigator = built16
    goals = 3 if project.navigate.contract.recurrent is not None else 1
    rng = np.random.default_rng(16)
    seq = np.concatenate([nav_parity.random_sequence(rng, project.navigate.sensors, decisions=30, goals=goals)
                          for _ in range(3)])
    _assert_same(nav_parity.run_python(navigator, seq), nav_parity.run_host(host, seq))


def test_float16_moves_the_network_within_the_rounding_bound(built16):
    """|C with float16 weights - the float32 network| per output (and per next-state unit), one step from the same
    state, stays within float16_deviation_bound: each weight's rounding error (at most 2**-11 of it, binary16's unit
    roundoff) times its input, summed over the layer, carried through the next layers' |weights| and the activations'
    slopes (its docstring derives it; every split is exact, so only float32 arithmetic can exceed it, by
    ARITHMETIC_SLACK). The rounding does move the outputs (the check is not of zeros)."""
    project, host, _ = built16
    model = project.navigate.model
    float32 = nav_parity.onnxruntime_navigator(project.navigate, "float32")
    x = random_observations(2000, model.input_size, seed=5)
    if model.recurrent:
        h = np.random.default_rng(6).uniform(-1.0, 1.0, (1, len(x), model.state_size)).astype(np.float32)
        (out_c, h_c), (out_32, h_32) = host.forward(x, h), float32.act(x, h)
        bound, bound_h = float16_deviation_bound(model, x, h)
        assert np.all(np.abs(h_c - h_32)[0] <= bound_h + ARITHMETIC_SLACK)
    else:
        out_c, out_32 = host.forward(x), float32.act(x)
        bound = float16_deviation_bound(model, x)
    moved = np.abs(out_c - out_32)
    assert np.all(moved <= bound + ARITHMETIC_SLACK), float((moved - bound).max())
    assert moved.max() > 1e-4
    print(f"float16 vs float32: max |output moved| {moved.max():.3g}, max bound {bound.max():.3g}")


def test_half_to_float_is_exact_for_every_finite_binary16(tmp_path):
    """The generated conversion (its portable branch, the host build's) on all 63488 finite bit patterns (zeros,
    subnormals, normals, both signs) equals numpy's float16 -> float32, bit for bit."""
    src = tmp_path / "half.c"
    src.write_text("#include <stdint.h>\n" + _HALF_HELPER.replace("{prefix}", "t").replace("{PREFIX}", "T")
                   + "void convert(const uint16_t *h, float *f, int n);\n"
                   + "void convert(const uint16_t *h, float *f, int n) { for (int i = 0; i < n; ++i) f[i] = t_half_to_float(h[i]); }\n")
    lib = tmp_path / "half.so"
    subprocess.run(["gcc", "-std=c99", "-pedantic", "-O2", "-Wall", "-Wextra", "-Wconversion", "-Werror", "-fPIC",
                    "-shared", str(src), "-o", str(lib)], check=True)
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    bits = bits[np.isfinite(bits.view(np.float16))]
    out = np.zeros(len(bits), np.float32)
    ctypes.CDLL(str(lib)).convert(bits.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
                                  ctypes.c_int(len(bits)))
    np.testing.assert_array_equal(out.view(np.uint32), bits.view(np.float16).astype(np.float32).view(np.uint32))


def _with_weight(src, dst, value: float):
    """A copy of the level with one weight of its first dense layer set to ``value``."""
    model = onnx.load(str(src))
    t = next(t for t in model.graph.initializer if t.name == "policy.mlp.0.weight")
    w = numpy_helper.to_array(t).copy()
    w[3, 4] = value
    t.CopyFrom(numpy_helper.from_array(w, t.name))
    onnx.save(model, str(dst))
    return dst


@pytest.mark.parametrize("value, match", [(70000.0, r"holds 70000, beyond float16's largest value 65504"),
                                          (np.inf, r"holds a non-finite value")])
def test_a_weight_float16_cannot_hold_is_refused_with_the_fix(repo_root, tmp_path, value, match):
    """Beyond 65504 (binary16's largest finite value) or not finite: refused at generation, naming the node and the
    fix; float32 storage of the same file is generated (a weight of 70000 is finite in float32)."""
    bad = _with_weight(repo_root / NAV, tmp_path / "big.onnx", value)
    with pytest.raises(CodegenError, match=match + r".*--navigate-weights float32"):
        generate_project(repo_root / GOTO, tmp_path / "cf16", navigate=bad, navigate_weights="float16")
    if np.isfinite(value):
        generate_project(repo_root / GOTO, tmp_path / "cf32", navigate=bad, navigate_weights="float32")
    assert round_weights_float16(np.array([FLOAT16_MAX, -FLOAT16_MAX]))[0] == FLOAT16_MAX


def test_navigate_weights_needs_a_level_and_a_known_storage(repo_root, tmp_path):
    with pytest.raises(CodegenError, match=r"give the level too \(--navigate LEVEL.onnx\)"):
        generate_project(repo_root / GOTO, tmp_path / "a", navigate_weights="float16")
    with pytest.raises(CodegenError, match=r"--navigate-weights 'bfloat16': give one of float32, float16"):
        generate_project(repo_root / GOTO, tmp_path / "b", navigate=repo_root / NAV, navigate_weights="bfloat16")


@needs_arm
def test_float16_halves_the_flash_of_the_levels_matrices(recurrent_run, repo_root, tmp_path):
    """The recurrent test level (GRU + MLP) generated both ways and compiled with arm-none-eabi-gcc and the firmware's
    flags (-Werror): nav_model.c's read-only data drops by 2 bytes per matrix weight (its biases stay 4 bytes), about
    half, and both levels stay within the 128 KiB flash budget."""
    from deploy.crazyflie.c_navigate import NAV_TASK_SOURCES
    from deploy.crazyflie.size import DEFAULT_FLASH_BUDGET_KB, arm_size_report

    nav = recurrent_run / "nav.onnx"
    sizes = {}
    for weights in ("float32", "float16"):
        project = generate_project(repo_root / GOTO, tmp_path / weights, navigate=nav, navigate_weights=weights)
        report = arm_size_report(project, tmp_path / weights / "build_size")
        sizes[weights] = (report.sections["nav_model.c"], report.subset(NAV_TASK_SOURCES).flash, report.flash)
    model = project.navigate.model
    matrices = sum(d.weight.size for d in model.dense_layers) + sum(s.w.size + s.r.size for s in model.steps
                                                                      if isinstance(s, Gru))
    saved = sizes["float32"][0]["rodata"] - sizes["float16"][0]["rodata"]
    assert abs(saved - 2 * matrices) <= 64, (saved, matrices)  # (64: the arrays' alignment)
    assert sizes["float16"][0]["rodata"] < 0.55 * sizes["float32"][0]["rodata"]
    assert sizes["float16"][1] < sizes["float32"][1] - 1.9 * matrices  # the level's flash, its code included
    assert sizes["float16"][2] <= DEFAULT_FLASH_BUDGET_KB * 1024
    print(f"nav_model.c rodata {sizes['float32'][0]['rodata']} B -> {sizes['float16'][0]['rodata']} B "
          f"({matrices} matrix weights); level flash {sizes['float32'][1]} B -> {sizes['float16'][1]} B")


@needs_arm
def test_export_c_takes_navigate_weights(repo_root, tmp_path, capsys):
    """``robot-hrl export-c GOTO --navigate LEVEL --navigate-weights float16``: the parity check (on by default) passes
    against the rounded level, the manifest and the report say the storage; --help explains it."""
    import json

    from robot_hrl.cli import main

    out = tmp_path / "cf"
    assert main(["export-c", str(repo_root / GOTO), "--navigate", str(repo_root / NAV), "--navigate-weights", "float16",
                 "--out", str(out), "--parity-samples", "500", "--navigate-sequences", "2"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "(float16 weights)" in printed and "weights rounded to float16 in both" in printed
    assert json.loads((out / "manifest.json").read_text())["navigate"]["weights"] == "float16"
    assert json.loads((out / "report.json").read_text())["navigate"]["network_parity_max_abs"] <= PARITY_TOLERANCE
    with pytest.raises(SystemExit):
        main(["export-c", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--navigate-weights {float32,float16}" in text and "IEEE 754 binary16" in text

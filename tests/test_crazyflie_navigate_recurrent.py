"""A recurrent navigate level on the Crazyflie: its GRU lowered (deploy/crazyflie/graph.py), generated as C
(c_model.py's ``nav_gru``; nav_io.c keeps the state between decisions) and checked against the real thing.

The level is conftest.py's ``recurrent_run`` (tests/recurrent_level.py: a GRU of 8 beside the shipped level's MLP, its
memory columns random so the state moves the actions). Checked: the numpy lowering against onnxruntime with the state
fed back; the host gcc build's network against onnxruntime over steps, and its decisions against
:class:`robot_hrl.planning.learned.LearnedNavigator` over episodes of several goals (the state carried toward one goal,
from zeros at the next and after a reset; a refused decision leaves it alone); the Cortex-M4 build (arm-none-eabi-gcc
with the firmware's -Werror flags, and under QEMU); the GRU variants and graph/contract mismatches the C cannot honour
are refused with the fix.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from deploy.crazyflie import navigate_parity as nav_parity
from deploy.crazyflie.cli import PARITY_TOLERANCE
from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.errors import CodegenError, UnsupportedOperatorError
from deploy.crazyflie.graph import TRANSCENDENTAL, Activation, Concat, Gru, lower_onnx
from deploy.crazyflie.host import HostController
from deploy.crazyflie.host_navigate import HostNavigator
from recurrent_level import HIDDEN
from test_crazyflie_navigate import _assert_same  # (one definition of "the C decides as Python")
from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY
from robot_hrl.planning.learned import LearnedNavigator

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")
needs_arm = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="needs qemu-system-arm and arm-none-eabi-gcc")

GOTO = "models/crazyflie_goto.onnx"


@pytest.fixture(scope="module")
def level_path(recurrent_run):
    return recurrent_run / "nav.onnx"


@pytest.fixture(scope="module")
def gru_built(level_path, repo_root, tmp_path_factory):
    """(project, host C level, Python level on onnxruntime) of the recurrent level over the shipped goto skill."""
    out = tmp_path_factory.mktemp("cf_nav_gru")
    project = generate_project(repo_root / GOTO, out / "cf", navigate=level_path)
    host = HostNavigator(HostController.build(project, out / "host"))
    return project, host, nav_parity.onnxruntime_navigator(project.navigate)


# ---- the lowering on its own ----------------------------------------------------------------------------------
def test_the_lowering_steps_as_onnxruntime_with_the_state_fed_back(level_path):
    """graph.py's steps (numpy, float32) against onnxruntime over 12 decisions of 16 streams, each step's state fed
    back to both: the same actions and the same states, and the state moves the actions (the check is not of zeros)."""
    model = lower_onnx(level_path, allow_state=True)
    assert (model.state_input, model.state_output, model.state_size) == ("h_in", "h_out", HIDDEN)
    assert sum(isinstance(s, Gru) for s in model.steps) == 1 and sum(isinstance(s, Concat) for s in model.steps) == 1
    session = ort.InferenceSession(str(level_path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    h_ref = h_low = np.zeros((1, 16, HIDDEN), np.float32)
    err = moved = 0.0
    for _ in range(12):
        x = rng.normal(size=(16, model.input_size)).astype(np.float32)
        a_ref, h_ref = session.run(None, {"obs": x, "h_in": h_ref})
        a_low, h_low = model.run(x, h_low)
        assert h_low.shape == h_ref.shape
        err = max(err, float(np.abs(a_low - a_ref).max()), float(np.abs(h_low - h_ref).max()))
        moved = max(moved, float(np.abs(model.run(x, np.zeros_like(h_low))[0] - a_low).max()))
    assert err <= 1e-5, err
    assert moved > 1e-3


def test_a_recurrent_graph_is_refused_where_no_one_keeps_its_state(level_path):
    """Without allow_state (the goto skill's lowering: its policy_io.c keeps no state) the graph is refused with the
    fix."""
    with pytest.raises(CodegenError, match=r"recurrent \(input 'h_in' is a GRU's state\).*navigate level only.*feed-forward"):
        lower_onnx(level_path)


# ---- the C network and decisions against the Python level ------------------------------------------------------
def test_the_c_network_steps_as_onnxruntime(gru_built):
    """nav_forward(in, state, out) over 8 steps of 500 streams from zeros, the state fed back: actions and states."""
    from deploy.crazyflie.example_model import random_observations

    project, host, navigator = gru_built
    assert host.state_size == HIDDEN
    x = random_observations(4000, project.navigate.model.input_size, seed=3)
    assert nav_parity.network_parity(host, navigator.act, x, steps=8) <= PARITY_TOLERANCE


class _NoGoalReset(LearnedNavigator):
    """The Python level with the goal rule broken (the state carried across goals; a reset still clears it): what a C
    that missed the new-goal reset would decide. The tests' proof that the parity can see that reset."""

    def decide(self, position_w, quat_wxyz, linear_velocity_w, goal_w):
        if self.state is not None and np.all(np.isfinite(goal_w)):
            self.state_goal_w = np.asarray(goal_w, dtype=np.float64).copy()
        return super().decide(position_w, quat_wxyz, linear_velocity_w, goal_w)


def _without_goal_reset(navigator) -> _NoGoalReset:
    return _NoGoalReset(navigator.contract, navigator.sensors, navigator.act)


def test_c_level_carries_the_state_and_resets_it_at_each_new_goal(gru_built):
    """Random episodes of three goals each (no reset between them): the C's subgoals are the Python level's; the same
    sequence through a Python level that kept the state across goals differs, so the reset is what is checked."""
    project, host, navigator = gru_built
    rng = np.random.default_rng(2027)
    worst = broken = 0.0
    for _ in range(6):
        seq = nav_parity.random_sequence(rng, project.navigate.sensors, decisions=30, goals=3)
        goals = {tuple(r) for r in seq[seq[:, 0] == nav_parity.OP_DECIDE][:, -3:]}
        assert len(goals) == 3
        c = nav_parity.run_host(host, seq)
        worst = max(worst, _assert_same(nav_parity.run_python(navigator, seq), c))
        broken = max(broken, nav_parity.compare(nav_parity.run_python(_without_goal_reset(navigator), seq), c)[0])
    print(f"recurrent decisions: max |subgoal C - Python| = {worst:.3g} m; without the goal reset {broken:.3g} m")
    assert broken > 100 * PARITY_TOLERANCE


def _rows(n_rangers: int, plan) -> np.ndarray:
    """A sequence from ``plan``: "reset", or (goal_w, decisions) toward it from a fixed pose and readings (only the
    state changes the answers), or ("nan_goal", 1): a decision with a NaN goal."""
    p, q = np.array([0.5, -1.0, 1.0]), np.array([np.cos(0.2), 0.0, 0.0, np.sin(0.2)])
    ranges, v = np.linspace(0.5, 3.5, n_rangers), np.array([0.3, -0.1, 0.0])
    rows = []
    for step in plan:
        if step == "reset":
            rows.append(np.r_[nav_parity.OP_RESET, np.zeros(nav_parity.row_size(n_rangers) - 1)])
            rows.append(np.r_[nav_parity.OP_SENSE, p, q, ranges, v, np.zeros(3)])
            continue
        goal, n = step
        goal = np.full(3, np.nan) if isinstance(goal, str) else np.asarray(goal, dtype=np.float64)
        rows.extend(np.r_[nav_parity.OP_DECIDE, p, q, ranges, v, goal] for _ in range(n))
    return np.asarray(rows, dtype=np.float32)


def test_the_goal_rule_is_exact_equality_of_all_three_components(gru_built):
    """From one pose and reading: decisions toward A, toward A at another height (a new goal although the observation
    does not see the height: the state from zeros), a refused decision (a NaN goal: the state untouched), A at that
    height again (carried), A (new again), a reset and A: the C and the Python level agree at every decision; a
    Python level that missed the new goal differs from the C at the height change, not before."""
    project, host, navigator = gru_built
    a, a_high = [4.0, 2.0, 1.0], [4.0, 2.0, 1.25]
    seq = _rows(len(project.navigate.sensors), ["reset", (a, 4), (a_high, 3), ("nan_goal", 1), (a_high, 2), (a, 3),
                                                 "reset", (a, 2)])
    ref, c = nav_parity.run_python(navigator, seq), nav_parity.run_host(host, seq)
    _assert_same(ref, c)
    decide = seq[:, 0] == nav_parity.OP_DECIDE
    assert np.sum(ref[decide, 0] == 0.0) == 1  # the NaN goal, refused by both
    accepted = decide & (ref[:, 0] == 1.0)
    sub_c = c[accepted, 1:4]
    np.testing.assert_array_equal(sub_c[0], sub_c[12])  # a reset starts everything again
    broken = nav_parity.run_python(_without_goal_reset(navigator), seq)[accepted, 1:4]
    miss = np.abs(broken - sub_c).max(axis=1)
    assert miss[:4].max() <= PARITY_TOLERANCE and miss[4] > 1e-3, miss  # the height alone made a new goal


def test_a_refused_decision_leaves_the_state_alone(gru_built):
    """NaN or inf poses, readings and goals at random moments of three-goal episodes: refused by both, and every later
    decision (the state carried past the fault) still agrees."""
    project, host, navigator = gru_built
    rng = np.random.default_rng(5)
    s = len(project.navigate.sensors)
    for trial in range(8):
        seq = nav_parity.random_sequence(rng, project.navigate.sensors, decisions=18, goals=3)
        decide_rows = np.nonzero(seq[:, 0] == nav_parity.OP_DECIDE)[0]
        k = int(rng.choice(decide_rows[1:-1]))
        column = int(rng.choice([1, 4, 8, 8 + s, 11 + s]))  # position, quaternion, a range, velocity, goal (x / w)
        seq[k, column] = [np.nan, np.inf, -np.inf][trial % 3]
        ref = nav_parity.run_python(navigator, seq)
        _assert_same(ref, nav_parity.run_host(host, seq))


# ---- the Cortex-M4 build ---------------------------------------------------------------------------------------
@needs_arm
def test_export_c_builds_the_recurrent_level_for_the_stm32(level_path, repo_root, tmp_path, capsys):
    """``robot-hrl export-c GOTO --navigate LEVEL`` (its parity check on, as by default): arm-none-eabi-gcc with the firmware's flags (-Werror and stricter
    warnings) builds both levels; the GRU's weights are in flash, its state (navState) and its scratch in RAM, within
    the budgets; the cost model counts the GRU's MACs and its 3 transcendentals per unit."""
    from robot_hrl.cli import main

    out = tmp_path / "cf"
    assert main(["export-c", str(repo_root / GOTO), "--navigate", str(level_path), "--out", str(out)]) == 0, \
        capsys.readouterr().err
    printed = capsys.readouterr().out  # (the default parity check: the network stepped with its state, then decisions
    assert f"beside a GRU of {HIDDEN}" in printed  # over three-goal episodes against LearnedNavigator)
    assert "parity max |C - onnxruntime|" in printed
    report = json.loads((out / "report.json").read_text())
    nav = report["navigate"]
    assert set(nav["size"]["files"]) == {"nav_model.c", "nav_io.c", "nav_task.c"}
    model = lower_onnx(level_path, allow_state=True)
    gru = next(s for s in model.steps if isinstance(s, Gru))
    gru_bytes = 4 * (gru.w.size + gru.r.size + gru.wb.size + gru.rb.size)
    assert nav["size"]["files"]["nav_model.c"]["rodata"] >= gru_bytes
    assert nav["size"]["files"]["nav_io.c"]["bss"] >= 4 * HIDDEN  # navState
    assert nav["size"]["files"]["nav_model.c"]["bss"] >= 2 * 4 * 3 * HIDDEN  # the gates' scratch
    mem = report["size"]
    assert mem["flash"] <= 128 * 1024 and mem["ram"] <= 16 * 1024
    assert 0 < nav["estimated_us_nominal"] < 1e6 / nav["decision_rate_hz"]

    from deploy.crazyflie.cost import inference_cost

    cost = inference_cost(model)
    dense_macs = sum(d.weight.size for d in model.dense_layers)
    assert cost.macs == dense_macs + 3 * HIDDEN * (model.input_size + HIDDEN)
    elus = sum(model.sizes[s.dst] for s in model.steps if isinstance(s, Activation) and s.kind in TRANSCENDENTAL)
    assert cost.transcendentals == elus + 3 * HIDDEN


@needs_qemu
def test_cortex_m4_build_decides_as_the_python_level_over_goals(gru_built, tmp_path):
    """The level cross-compiled with the firmware's flags and newlib (expf, tanhf, atan2f) on QEMU's STM32F405, over
    three-goal episodes."""
    from deploy.crazyflie.qemu_navigate import run_navigate_on_qemu

    project, _, navigator = gru_built
    rng = np.random.default_rng(8)
    seq = np.concatenate([nav_parity.random_sequence(rng, project.navigate.sensors, decisions=24, goals=3)
                          for _ in range(2)])
    _assert_same(nav_parity.run_python(navigator, seq), run_navigate_on_qemu(project, seq, tmp_path / "qemu"))


# ---- refusals --------------------------------------------------------------------------------------------------
def _edited(src, dst, gru_attrs=None, contract_edit=None):
    """A copy of the level with its GRU node's attributes replaced by ``gru_attrs`` and/or its contract edited."""
    model = onnx.load(str(src))
    if gru_attrs:
        node = next(n for n in model.graph.node if n.op_type == "GRU")
        keep = [a for a in node.attribute if a.name not in gru_attrs]
        del node.attribute[:]
        node.attribute.extend(keep + [helper.make_attribute(k, v) for k, v in gru_attrs.items()])
    if contract_edit is not None:
        prop = next(p for p in model.metadata_props if p.key == NAVIGATE_METADATA_KEY)
        data = json.loads(prop.value)
        contract_edit(data)
        prop.value = json.dumps(data)
    onnx.save(model, str(dst))
    return dst


@pytest.mark.parametrize("attrs, match", [
    ({"linear_before_reset": 0}, r"linear_before_reset=0; the C code generator implements ONNX's GRU with "
                                 r"linear_before_reset=1 only: export torch.nn.GRU"),
    ({"direction": "reverse"}, r"direction='reverse'.*direction='forward' only: export torch.nn.GRU"),
    ({"clip": 3.0}, r"sets clip=3.0.*without it: export torch.nn.GRU"),
    ({"activations": ["Sigmoid", "Relu"]}, r"activations \['Sigmoid', 'Relu'\].*default \['Sigmoid', 'Tanh'\]"),
])
def test_an_unsupported_gru_variant_is_refused_with_the_fix(level_path, repo_root, tmp_path, attrs, match):
    """The variants the C does not implement: onnxruntime runs them (they are valid graphs), the lowering and the
    --navigate generation refuse them, naming the attribute and the export that works."""
    bad = _edited(level_path, tmp_path / "variant.onnx", gru_attrs=attrs)
    session = ort.InferenceSession(str(bad), providers=["CPUExecutionProvider"])
    session.run(None, {"obs": np.zeros((1, 29), np.float32), "h_in": np.zeros((1, 1, HIDDEN), np.float32)})
    with pytest.raises(UnsupportedOperatorError, match=match):
        lower_onnx(bad, allow_state=True)
    with pytest.raises(UnsupportedOperatorError, match=match):
        generate_project(repo_root / GOTO, tmp_path / "cf", navigate=bad)


def test_a_graph_whose_state_does_not_match_its_contract_is_refused(level_path, repo_root, tmp_path):
    wider = _edited(level_path, tmp_path / "wider.onnx",
                    contract_edit=lambda d: d["recurrent"].update(hidden_size=2 * HIDDEN))
    with pytest.raises(CodegenError, match=rf"'h_in' -> 'h_out' of {HIDDEN}, its contract says 'h_in' -> 'h_out' of "
                                           rf"{2 * HIDDEN}.*export the level again"):
        generate_project(repo_root / GOTO, tmp_path / "cf", navigate=wider)
    hidden = _edited(level_path, tmp_path / "hidden.onnx", contract_edit=lambda d: d.update(recurrent=None))
    with pytest.raises(CodegenError, match="carries a state .*its contract has no recurrent section"):
        generate_project(repo_root / GOTO, tmp_path / "cf", navigate=hidden)


def test_a_state_the_c_does_not_keep_is_refused(level_path):
    """check_navigate_contract: a recurrent kind or reset rule other than the GRU reset at each new goal (a contract
    built around the schema's validation, as a future schema could allow) is refused with the fix."""
    from deploy.crazyflie.c_navigate import check_navigate_contract
    from robot_hrl.contract.navigate import NavigateContract
    from robot_hrl.robots import CRAZYFLIE_2X
    from robot_hrl.runtime import read_model_metadata
    from robot_hrl.sensing import robot_range_sensors

    contract = NavigateContract.from_json(read_model_metadata(level_path)[NAVIGATE_METADATA_KEY])
    lstm = contract.model_copy(update={"recurrent": contract.recurrent.model_copy(update={"kind": "lstm"})})
    with pytest.raises(CodegenError, match=r"'lstm' state.*keeps a 'gru' state reset at every 'new_goal'.*--memory-gru"):
        check_navigate_contract(lstm, robot_range_sensors(CRAZYFLIE_2X))

"""benchmarks/bench_paired_outcomes.py: the same episodes for both models (a model against itself ends every episode
the same way), every episode in one category, and a model observing the position error's integral flown with its own
contract's integral (the clip bounds what it reports)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from robot_hrl.contract import GOTO_ERROR_INTEGRAL, goto_contract
from robot_hrl.robots import CRAZYFLIE_2X

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_paired_outcomes", ROOT / "benchmarks" / "bench_paired_outcomes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_model_against_itself_and_one_with_the_integral(tmp_path, capsys):
    from deploy.crazyflie.example_model import build_mlp_onnx

    torch.set_num_threads(1)
    bench = _bench()
    shipped = ROOT / "models" / "crazyflie_goto.onnx"
    a = bench.outcomes(shipped, 12, seed=3, num_envs=6)
    b = bench.outcomes(shipped, 12, seed=3, num_envs=6)
    assert [r["episode"] for r in a] == list(range(12)) and a == b
    limit = GOTO_ERROR_INTEGRAL.limit_m_s  # the shipped model keeps the gated integral (issue 17, no sag)
    assert all(r["category"] in bench.CATEGORIES and 0.0 <= r["max_integral_m_s"] <= limit + 1e-6 for r in a)
    assert any(r["max_integral_m_s"] > 0.0 for r in a)  # within 0.1 m of the goal it integrates
    assert sum(r["category"] == "success" for r in a) >= 9  # the shipped model: 0.97 on the benchmark
    other = GOTO_ERROR_INTEGRAL.model_copy(update={"active_radius_m": None})  # not the simulator's default
    model = build_mlp_onnx(tmp_path / "integral.onnx", contract=goto_contract(CRAZYFLIE_2X, error_integral=other))
    rows = bench.outcomes(model, 4, seed=3, num_envs=4)
    assert all(0.0 < r["max_integral_m_s"] <= other.limit_m_s + 1e-6 for r in rows)  # ungated: integrated from tick 1
    assert bench.main(["--model", str(shipped), "--against", str(shipped), "--episodes", "4", "--seed", "3"]) == 0
    assert "0 episodes only crazyflie_goto.onnx fails" in capsys.readouterr().out

"""Both levels on the Crazyflie: the navigate level's C next to the goto controller's (issue #19).

    python benchmarks/bench_crazyflie_navigate_codegen.py [--goto models/crazyflie_goto.onnx]
        [--navigate models/crazyflie_navigate.onnx] [--navigate-weights float32|float16] [--samples 10000]
        [--sequences 50]

Generates both levels (``robot-hrl export-c GOTO --navigate LEVEL``) and prints:
- parity of the level's network (host gcc) with onnxruntime on random observations, and of its decisions (subgoal,
  observation) with robot_hrl's LearnedNavigator on random episodes, in the host build and in the Cortex-M4 build
  under QEMU (netduinoplus2, STM32F405; firmware flags, newlib's atan2f/expf);
- arm-none-eabi-gcc sections with the firmware's flags (-Os ...) for the goto controller, the level and both, and
  the linked probe image with both (libm included) against the goto's alone;
- the level's estimated time per decision at 168 MHz (the goto's cost model, cycles/MAC read from the compiled
  nav_dense, plus the memory's work), its share of the core at its decision rate, both levels' share together;
- an independent check of the time: instructions the Cortex-M4 build executes per worst-case decision under QEMU
  (one instruction per translation block, every execution logged), a floor of the cycles.
With ``--navigate-weights float16`` (the level's matrices stored as binary16) the parity rows are against the level
with its weights rounded to float16 (deploy/crazyflie/float16.py), and a row more says how far that moves the level
from its float32 network: max |C - onnxruntime on the float32 file| of the outputs (one step from random states, a
recurrent level, beside float16_deviation_bound's guaranteed bound; and over 8 steps, the state fed back) and of the
decisions' subgoals.
A recurrent level (its contract's ``recurrent``: a GRU beside the MLP) is checked over its state too: the network
over steps with the state fed back, the decisions over episodes of three goals each (the state from zeros at each).
Needs gcc, arm-none-eabi-gcc and (for the QEMU rows) qemu-system-arm.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from deploy.crazyflie import navigate_parity as nav_parity  # noqa: E402
from deploy.crazyflie.c_navigate import NAV_TASK_SOURCES  # noqa: E402
from deploy.crazyflie.codegen import generate_project  # noqa: E402
from deploy.crazyflie.cost import CPU_HZ, cycle_models_from_object, inference_cost, navigate_decision_cost  # noqa: E402
from deploy.crazyflie.graph import Gru  # noqa: E402
from deploy.crazyflie.example_model import random_observations  # noqa: E402
from deploy.crazyflie.float16 import WEIGHT_STORAGES, float16_deviation_bound  # noqa: E402
from deploy.crazyflie.host import HostController  # noqa: E402
from deploy.crazyflie.host_navigate import HostNavigator  # noqa: E402
from deploy.crazyflie.size import DEFAULT_FLASH_BUDGET_KB, DEFAULT_RAM_BUDGET_KB, arm_size_report, link_probe_image  # noqa: E402


def _kib(n: int) -> str:
    return f"{n} B ({n / 1024:.1f} KiB)"


def _print_float16_deviation(level, host: HostNavigator, x: np.ndarray, seq: np.ndarray, ref16: np.ndarray) -> None:
    """How far the float16 weights move the level from its float32 network: the C's outputs (one step from the same
    state, against float16_deviation_bound's bound; over 8 steps, each its own state fed back) and decisions."""
    float32 = nav_parity.onnxruntime_navigator(level, "float32")
    model = level.model
    if model.recurrent:
        h = np.random.default_rng(1).uniform(-1.0, 1.0, (1, len(x), model.state_size)).astype(np.float32)
        (out_c, h_c), (out_32, h_32) = host.forward(x, h), float32.act(x, h)
        bound_out, bound_h = float16_deviation_bound(model, x, h)
        step = max(float(np.abs(out_c - out_32).max()), float(np.abs(h_c - h_32).max()))
        bound = max(float(bound_out.max()), float(bound_h.max()))
        drift = f"; over 8 steps from zeros, the state fed back: {nav_parity.network_parity(host, float32.act, x):.3g}"
    else:
        step = float(np.abs(host.forward(x) - float32.act(x)).max())
        bound, drift = float(float16_deviation_bound(model, x).max()), ""
    sub, obs, disagree = nav_parity.compare(nav_parity.run_python(float32, seq), nav_parity.run_host(host, seq))
    print(f"float16 vs float32    network max |C float16 - onnxruntime float32| = {step:.3g} (one step; guaranteed "
          f"bound {bound:.3g}){drift}; decisions max |subgoal| = {sub:.3g} m, {disagree} accept/refuse differences")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--goto", default=str(REPO / "models" / "crazyflie_goto.onnx"))
    parser.add_argument("--navigate", default=str(REPO / "models" / "crazyflie_navigate.onnx"))
    parser.add_argument("--navigate-weights", choices=WEIGHT_STORAGES, default=None,
                        help="the level's weight storage in nav_model.c (default: export-c's)")
    parser.add_argument("--samples", type=int, default=10_000, help="random observations for the network parity")
    parser.add_argument("--sequences", type=int, default=50, help="random episodes (40 decisions each) for the decisions")
    args = parser.parse_args()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        def tqdm(x, **_):
            return x

    with tempfile.TemporaryDirectory(prefix="bench_cf_nav_") as tmp_name:
        tmp = Path(tmp_name)
        project = generate_project(args.goto, tmp / "cf", navigate=args.navigate, navigate_weights=args.navigate_weights)
        level = project.navigate
        layers = " -> ".join([str(level.model.input_size)] + [str(d.weight.shape[0]) for d in level.model.dense_layers])
        gru = [s for s in level.model.steps if isinstance(s, Gru)]
        if gru:
            layers = f"GRU {gru[0].w.shape[1]} -> {gru[0].hidden_size} beside the MLP {level.model.dense_layers[0].weight.shape[1]}" + layers[layers.index(" ->"):]
        goals = 3 if level.contract.recurrent is not None else 1
        print(f"== {Path(args.navigate).name} ({level.model_sha256[:12]}) over {Path(args.goto).name} "
              f"({project.model_sha256[:12]}): {layers}, {level.contract.decision_rate_hz:g} Hz, {level.weights} weights")

        host = HostNavigator(HostController.build(project, tmp / "host"))
        navigator = nav_parity.onnxruntime_navigator(level)
        x = random_observations(args.samples, level.model.input_size, seed=0)
        net = nav_parity.network_parity(host, navigator.act, x)
        rng = np.random.default_rng(0)
        seqs = [nav_parity.random_sequence(rng, level.sensors, goals=goals)
                for _ in tqdm(range(args.sequences), desc="sequences", leave=False)]
        seq = np.concatenate(seqs)
        ref = nav_parity.run_python(navigator, seq)
        sub, obs, disagree = nav_parity.compare(ref, nav_parity.run_host(host, seq))
        decisions = int(np.sum(seq[:, 0] == nav_parity.OP_DECIDE))
        steps = " (8 steps from zeros, the state fed back; actions and states)" if level.model.recurrent else ""
        rounded = " (weights rounded to float16 in both)" if level.weights == "float16" else ""
        print(f"parity (network)      max |C - onnxruntime| = {net:.3g} over {args.samples} random observations{steps}"
              f"{rounded}")
        print(f"parity (decisions)    max |subgoal C - LearnedNavigator.decide| = {sub:.3g} m, observation {obs:.3g}, "
              f"{disagree} accept/refuse differences, over {decisions} decisions ({args.sequences} random episodes of "
              f"{goals} goal{'s' if goals > 1 else ''}), host gcc")
        if level.weights == "float16":
            _print_float16_deviation(level, host, x, seq, ref)
        qemu = shutil.which("qemu-system-arm") is not None
        if qemu:
            from deploy.crazyflie.qemu_navigate import count_instructions, run_navigate_on_qemu, worst_case_sequence

            q_sub, q_obs, q_dis = nav_parity.compare(ref, run_navigate_on_qemu(project, seq, tmp / "qemu"))
            print(f"parity (Cortex-M4)    max |subgoal| = {q_sub:.3g} m, observation {q_obs:.3g}, {q_dis} accept/refuse "
                  "differences: ARM build under QEMU netduinoplus2 (STM32F405), newlib atan2f/expf")
        else:
            print("parity (Cortex-M4)    not run: qemu-system-arm is not installed")

        size = arm_size_report(project)
        nav_size = size.subset(NAV_TASK_SOURCES)
        goto_size = size.subset([s.name for s in project.sources if s.name not in NAV_TASK_SOURCES])
        probe_both = link_probe_image(project, tmp / "probe_both")
        goto_only = generate_project(args.goto, tmp / "cf_goto")
        probe_goto = link_probe_image(goto_only, tmp / "probe_goto")
        print(f"goto controller       flash {_kib(goto_size.flash)}, RAM {goto_size.ram} B")
        print(f"navigate level        flash {_kib(nav_size.flash)} (rodata {nav_size.rodata} B), RAM {nav_size.ram} B "
              f"(range memory {level.contract.memory.capacity} x 2 floats = {level.contract.memory.capacity * 8} B"
              + (f"; recurrent state {level.model.state_size} floats = {4 * level.model.state_size} B" if gru else "")
              + f"), stack <= {nav_size.stack_upper_bound} B")
        print(f"both levels           flash {_kib(size.flash)}, RAM {size.ram} B ({size.ram / 1024:.2f} KiB)  "
              f"[budget {DEFAULT_FLASH_BUDGET_KB:g} / {DEFAULT_RAM_BUDGET_KB:g} KiB: "
              f"{'fits' if size.flash <= DEFAULT_FLASH_BUDGET_KB * 1024 and size.ram <= DEFAULT_RAM_BUDGET_KB * 1024 else 'OVER'}]")
        print(f"linked probe images   both {_kib(probe_both.flash)} flash, {probe_both.ram} B RAM; goto alone "
              f"{_kib(probe_goto.flash)}, {probe_goto.ram} B (libm's expf, atan2f, floorf, sqrtf and the vectors included)")

        nominal, pessimistic, detail = cycle_models_from_object(tmp / "cf" / "build_size" / "nav_model.o", function="nav_dense")
        cost = navigate_decision_cost(level)
        nom, pes = cost.microseconds(nominal), cost.microseconds(pessimistic)
        print(f"work per decision     {cost.network.macs} MACs, {cost.network.transcendentals} expf, "
              f"{cost.io.spacing_checks} memory spacing checks, {cost.io.sector_points} points binned (atan2f)")
        print(f"cycles/MAC            {nominal.cycles_per_mac:g} nominal ({detail})")
        print(f"estimated time        {nom:.0f} us nominal, {pes:.0f} us pessimistic per decision at {CPU_HZ / 1e6:.0f} MHz "
              f"(network {cost.network_microseconds(nominal):.0f} us, memory and observation {cost.io.microseconds(nominal):.0f} us); "
              f"{100 * cost.cpu_share(nominal):.2f} % / {100 * cost.cpu_share(pessimistic):.2f} % of the core at "
              f"{cost.decision_rate_hz:g} Hz")
        g_nom, g_pes, _ = cycle_models_from_object(tmp / "cf" / "build_size" / "policy_model.o")
        g_cost = inference_cost(project.model)
        g_share = g_cost.microseconds(g_nom) * 1e-6 * project.contract.control_rate_hz
        print(f"both levels' load     goto {g_cost.microseconds(g_nom):.0f} us x {project.contract.control_rate_hz:g} Hz = "
              f"{100 * g_share:.1f} % + navigate {100 * cost.cpu_share(nominal):.2f} % = "
              f"{100 * (g_share + cost.cpu_share(nominal)):.1f} % of the core (nominal)")
        if qemu:
            k = 4
            base = count_instructions(project, worst_case_sequence(level, 0), tmp / "ic0")
            more = count_instructions(project, worst_case_sequence(level, k), tmp / "ic1")
            per = (more - base) / k
            print(f"instructions (QEMU)   {per:,.0f} per worst-case decision (navSense + navDecide, the ring full, every "
                  f"point binned): at least {per / CPU_HZ * 1e6:.0f} us at 1 cycle each; the model's {nom * CPU_HZ * 1e-6:,.0f} "
                  f"cycles are {nom * CPU_HZ * 1e-6 / per:.2f} cycles per instruction")
    return 0


if __name__ == "__main__":
    sys.exit(main())

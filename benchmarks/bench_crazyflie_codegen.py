"""Crazyflie C code generation: flash and RAM sizes, estimated on-MCU time, parity errors.

    python benchmarks/bench_crazyflie_codegen.py [--model models/crazyflie_goto.onnx] [--samples 10000]

For the shipped model (a stand-in of its architecture when it is missing) prints:
- parity of the generated C (host gcc -O2) with onnxruntime on random observations,
- parity of the onboard observation (firmware structures, gyro in deg/s) with
  robot_hrl.contract.compute_observation on random states,
- arm-none-eabi-gcc sections with the firmware's own flags (deploy/crazyflie/firmware.py:
  -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard ... -Os -Werror), the linked probe image
  with libm, stack frames,
- MACs, FLOPs and the estimated time at 168 MHz (cycles/MAC read from the compiled loop),
then the same size/time figures for other layer sizes, to show where the budget ends.
Needs gcc, arm-none-eabi-gcc and torch (for the other architectures).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from deploy.crazyflie.cli import host_parity  # noqa: E402
from deploy.crazyflie.codegen import generate_project  # noqa: E402
from deploy.crazyflie.cost import CPU_HZ, cycle_models_from_object, inference_cost  # noqa: E402
from deploy.crazyflie.example_model import build_mlp_onnx, random_observations  # noqa: E402
from deploy.crazyflie.host import HostController  # noqa: E402
from deploy.crazyflie.size import DEFAULT_FLASH_BUDGET_KB, DEFAULT_RAM_BUDGET_KB, arm_size_report, link_probe_image  # noqa: E402
from robot_hrl.contract import compute_observation  # noqa: E402
from robot_hrl.geometry import quat_normalize  # noqa: E402

ARCHITECTURES = [(32, 32), (64, 64), (128, 128), (64, 64, 64), (256, 256)]


def observation_parity(project, lib: HostController, n: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(n):
        q = quat_normalize(rng.standard_normal(4))
        s = {"position_w": rng.uniform(-3, 3, 3), "quat_wxyz": q, "linear_velocity_w": rng.uniform(-6, 6, 3),
             "angular_velocity_b": rng.uniform(-40, 40, 3), "last_action": rng.uniform(-1.2, 1.2, 4)}
        s["subgoal_w"] = s["position_w"] + rng.uniform(-3, 3, 3)
        s = {k: np.asarray(v, dtype=np.float32).astype(np.float64) for k, v in s.items()}
        row = np.concatenate([s["position_w"], s["quat_wxyz"], s["linear_velocity_w"],
                              s["angular_velocity_b"] * 180.0 / math.pi, s["subgoal_w"]])
        obs, ok = lib.observation(row, s["last_action"])
        assert ok
        worst = max(worst, float(np.max(np.abs(obs - compute_observation(project.contract.observations, s)))))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(REPO / "models" / "crazyflie_goto.onnx"))
    parser.add_argument("--samples", type=int, default=10_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_cf_") as tmp_name:
        tmp = Path(tmp_name)
        model = Path(args.model)
        label = model.name
        if not model.is_file():
            model = build_mlp_onnx(tmp / "standin.onnx", hidden=(64, 64))
            label = f"stand-in 64x64 Elu ({args.model} is missing)"
        project = generate_project(model, tmp / "cf")
        layers = " -> ".join([str(project.model.input_size)] + [str(d.weight.shape[0]) for d in project.model.dense_layers])
        print(f"== {label}: {layers}")
        err = host_parity(project, model, args.samples, build_dir=tmp / "host")
        lib = HostController.build(project, tmp / "host2")
        obs_err = observation_parity(project, lib, args.samples)
        size = arm_size_report(project)
        probe = link_probe_image(project, tmp / "probe")
        nominal, pessimistic, detail = cycle_models_from_object(tmp / "cf" / "build_size" / "policy_model.o")
        cost = inference_cost(project.model)
        print(f"parity (network)      max |C - onnxruntime| = {err:.3g} over {args.samples} random observations")
        print(f"parity (observation)  max |C - compute_observation| = {obs_err:.3g} over {args.samples} random states")
        if shutil.which("qemu-system-arm"):
            from deploy.crazyflie.qemu import run_on_qemu

            xq = random_observations(args.samples, project.model.input_size, seed=5)
            rows = np.zeros((1, 16), dtype=np.float32)
            rows[0, 3] = 1.0
            actions, _, _ = run_on_qemu(project, xq, rows, np.zeros((1, project.model.output_size)), tmp / "qemu")
            import onnxruntime as ort

            session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
            ref = session.run(None, {session.get_inputs()[0].name: xq})[0]
            print(f"parity (Cortex-M4)    max |ARM build under QEMU netduinoplus2 (STM32F405) - onnxruntime| = "
                  f"{float(np.max(np.abs(actions - ref))):.3g} over {args.samples} observations (newlib expf)")
        else:
            print("parity (Cortex-M4)    not run: qemu-system-arm is not installed")
        print(f"ARM sections          text {size.text} B, rodata {size.rodata} B, data {size.data} B, bss {size.bss} B")
        print(f"flash / RAM           {size.flash} B ({size.flash / 1024:.1f} KiB) / {size.ram} B ({size.ram / 1024:.2f} KiB)"
              f"  [budget {DEFAULT_FLASH_BUDGET_KB:g} / {DEFAULT_RAM_BUDGET_KB:g} KiB]")
        print(f"linked probe image    {probe.flash} B flash incl. libm expf/sqrtf and vectors, {probe.ram} B RAM")
        print(f"stack                 <= {size.stack_upper_bound} B (sum of frames; controllerOutOfTree "
              f"{size.stack_frames.get('controllerOutOfTree', 0)} B)")
        print(f"work                  {cost.macs} MACs, {cost.flops} FLOPs, {cost.transcendentals} expf per inference")
        print(f"cycles/MAC            {nominal.cycles_per_mac:g} nominal ({detail}), "
              f"{pessimistic.cycles_per_mac:g} pessimistic (+ flash wait states)")
        nom_us, pes_us = cost.microseconds(nominal), cost.microseconds(pessimistic)
        print(f"estimated time        {nom_us:.0f} us nominal, {pes_us:.0f} us pessimistic at {CPU_HZ / 1e6:.0f} MHz "
              f"({100 * nom_us / 2000:.0f}% / {100 * pes_us / 2000:.0f}% of the 2 ms of a 500 Hz loop; "
              f"{100 * nom_us / 1000:.0f}% / {100 * pes_us / 1000:.0f}% of one 1 kHz stabilizer tick)")

        print("\n== other layer sizes (Elu, stand-in weights)")
        print(f"{'hidden':>14} {'params':>7} {'flash KiB':>9} {'RAM KiB':>7} {'MACs':>7} {'us nom':>6} {'us pess':>7}  fits")
        try:
            from tqdm import tqdm
        except ImportError:  # pragma: no cover
            def tqdm(x, **_):
                return x
        rows = []
        for hidden in tqdm(ARCHITECTURES, desc="architectures", leave=False):
            path = build_mlp_onnx(tmp / f"m_{'x'.join(map(str, hidden))}.onnx", hidden=hidden, seed=1)
            p = generate_project(path, tmp / f"cf_{'x'.join(map(str, hidden))}")
            s = arm_size_report(p)
            c = inference_cost(p.model)
            nom, pes, _ = cycle_models_from_object(p.out_dir / "build_size" / "policy_model.o")
            fits = (s.flash <= DEFAULT_FLASH_BUDGET_KB * 1024 and s.ram <= DEFAULT_RAM_BUDGET_KB * 1024
                    and c.microseconds(nom) <= 1000)
            rows.append(f"{'x'.join(map(str, hidden)):>14} {c.parameters:>7} {s.flash / 1024:>9.1f} {s.ram / 1024:>7.2f} "
                        f"{c.macs:>7} {c.microseconds(nom):>6.0f} {c.microseconds(pes):>7.0f}  {'yes' if fits else 'NO'}")
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

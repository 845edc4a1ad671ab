"""Operation count and estimated time of one inference on the Crazyflie's STM32F405.

Not a measurement: a model of the Cortex-M4F at 168 MHz with stated assumptions.

- A multiply-accumulate of the dense layers costs ``cycles_per_mac``. It is read from the
  compiled ``policy_dense`` when arm-none-eabi-gcc is present (:func:`cycle_models_from_object`:
  the unrolled inner loop, cycle counts of the Cortex-M4 TRM). GCC 12.2 with the firmware's flags
  (``-Os``, :data:`deploy.crazyflie.firmware.FIRMWARE_CFLAGS`) gives 8 VLDR + 4 VFMA + 7
  integer/branch instructions for 4 MACs = 33 cycles, 8.25 cycles/MAC: VFMA.F32 takes 3 cycles
  on the M4's FPU. That is the nominal figure (and the default without the toolchain; ``-O2``
  gave 6.75); the pessimistic one adds 1.5 cycles/MAC of flash wait states (weights stream from
  flash at 5 wait states through the ART accelerator's small data cache).
- An element-wise op (normalization, clip, bias) costs ``cycles_per_elementwise`` (load, op, store).
- Elu and Sigmoid cost one ``expf``, Tanh one ``tanhf``: ``cycles_per_transcendental``. newlib
  links its single-precision fdlibm ``__ieee754_expf`` (476 B, about 40 float operations and a
  few branches, plus the errno wrapper) on a Cortex-M4F: 150 cycles nominal, 250 pessimistic.
  Elu needs it only for negative inputs; every element is counted.
- The observation (quaternion to rotation matrix, clips) and the action mapping: a fixed
  ``overhead_cycles`` (about 300: one VSQRT, one VDIV and ~100 float operations).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deploy.crazyflie.graph import TRANSCENDENTAL, Activation, Clamp, ConstOp, Dense, LoweredModel, VarOp

CPU_HZ = 168e6
"""STM32F405 core clock on the Crazyflie 2.x."""
STABILIZER_TICK_US = 1000.0
"""The stabilizer loop runs at 1 kHz: the policy tick must fit in one 1 ms step, with the rest of it."""


@dataclass(frozen=True)
class CycleModel:
    cycles_per_mac: float = 8.25
    cycles_per_elementwise: float = 3.0
    cycles_per_transcendental: float = 150.0
    overhead_cycles: float = 300.0


NOMINAL = CycleModel()
PESSIMISTIC = CycleModel(cycles_per_mac=9.75, cycles_per_elementwise=5.0, cycles_per_transcendental=250.0,
                         overhead_cycles=600.0)


@dataclass(frozen=True)
class InferenceCost:
    macs: int
    flops: int
    """2 per MAC, plus one per bias add and element-wise op (a transcendental counts as one)."""
    elementwise: int
    transcendentals: int
    parameters: int

    def cycles(self, model: CycleModel = NOMINAL) -> float:
        return (self.macs * model.cycles_per_mac + self.elementwise * model.cycles_per_elementwise
                + self.transcendentals * model.cycles_per_transcendental + model.overhead_cycles)

    def microseconds(self, model: CycleModel = NOMINAL, cpu_hz: float = CPU_HZ) -> float:
        return self.cycles(model) / cpu_hz * 1e6

    def summary(self, nominal: CycleModel = NOMINAL, pessimistic: CycleModel = PESSIMISTIC) -> str:
        nom, pes = self.microseconds(nominal), self.microseconds(pessimistic)
        return (f"{self.macs} MACs, {self.flops} FLOPs, {self.transcendentals} expf/tanhf per inference; "
                f"estimated {nom:.0f} us nominal ({nominal.cycles_per_mac:g} cycles/MAC), {pes:.0f} us pessimistic "
                f"({pessimistic.cycles_per_mac:g} cycles/MAC) at {CPU_HZ / 1e6:.0f} MHz; "
                f"{100 * nom / 2000:.0f}% of a 500 Hz period (2 ms), {100 * nom / STABILIZER_TICK_US:.0f}% of one "
                "1 kHz stabilizer tick")


def inference_cost(model: LoweredModel) -> InferenceCost:
    macs = flops = elementwise = transcendental = params = 0
    for s in model.steps:
        if isinstance(s, Dense):
            n_out, n_in = s.weight.shape
            macs += n_out * n_in
            flops += 2 * n_out * n_in
            params += n_out * n_in
            if s.bias is not None:
                flops += n_out
                params += n_out
                elementwise += n_out
        elif isinstance(s, (ConstOp, VarOp, Clamp)):
            n = model.sizes[s.dst]
            flops += n
            elementwise += n
        elif isinstance(s, Activation):
            n = model.sizes[s.dst]
            flops += n
            elementwise += n
            if s.kind in TRANSCENDENTAL:
                transcendental += n
    return InferenceCost(macs=macs, flops=flops, elementwise=elementwise, transcendentals=transcendental,
                         parameters=params)


# ---- grounding the MAC cost in the generated code -------------------------------------------------
# Cortex-M4 Technical Reference Manual (ARM DDI 0439), FPU instruction timings: VLDR.32 2 cycles,
# N back-to-back loads N+1; VFMA/VMLA.F32 3; VADD/VSUB/VMUL.F32 1; integer data processing 1;
# a taken branch 1 + pipeline refill (1-3, 2 assumed).
_FPU_CYCLES = {"vfma.f32": 3, "vfms.f32": 3, "vmla.f32": 3, "vmls.f32": 3, "vadd.f32": 1, "vsub.f32": 1,
               "vmul.f32": 1, "vmov.f32": 1}
FLASH_WAIT_CYCLES_PER_MAC = 1.5
"""Pessimistic extra: weights stream from flash (5 wait states at 168 MHz) through the ART
accelerator's 8 x 128-bit data cache: about one 6-cycle miss per four floats."""


def dense_loop_cycles_per_mac(disassembly: str, function: str = "policy_dense") -> tuple[float, str]:
    """Cycles per MAC of the unrolled inner loop of ``policy_dense`` in ``objdump -d`` output.

    Finds the backward branch whose loop body holds the most VFMA/VMLA instructions, sums the TRM
    cycle counts of its instructions and divides by the number of multiply-accumulates.
    """
    lines = disassembly.splitlines()
    body: list[tuple[int, str]] = []
    inside = False
    for line in lines:
        if line.rstrip().endswith(f"<{function}>:"):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)(.*)$", line)
            if not m:
                if body:
                    break
                continue
            body.append((int(m.group(1), 16), m.group(2) + m.group(3)))
    loops = []  # (start, end) of every backward branch
    for addr, text in body:
        op = text.split()[0]
        if op.startswith("b") and op not in ("bl", "blx", "bx") and "<" in text:
            target = int(text.split()[1], 16)
            if target < addr:
                loops.append((target, addr))
    best: tuple[int, list[str]] | None = None
    for start, end in loops:
        if any((s, e) != (start, end) and start <= s and e <= end for s, e in loops):
            continue  # not innermost
        loop = [t for a, t in body if start <= a <= end]
        n_fma = sum(1 for t in loop if t.split()[0] in ("vfma.f32", "vmla.f32"))
        if n_fma and (best is None or n_fma > best[0]):
            best = (n_fma, loop)
    if best is None:
        raise ValueError(f"no multiply-accumulate loop found in {function}")
    n_fma, loop = best
    cycles = 0
    prev_load = False
    for text in loop:
        op = text.split()[0]
        is_load = op in ("vldr", "vldmia")
        if is_load:
            cycles += 1 if prev_load else 2
        elif op in _FPU_CYCLES:
            cycles += _FPU_CYCLES[op]
        elif op.startswith("b"):
            cycles += 3
        else:
            cycles += 1
        prev_load = is_load
    detail = f"{len(loop)} instructions, {cycles} cycles for {n_fma} MACs in the inner loop of {function}"
    return cycles / n_fma, detail


def cycle_models_from_object(object_path, objdump: str = "arm-none-eabi-objdump") -> tuple[CycleModel, CycleModel, str]:
    """(nominal, pessimistic) cycle models with cycles/MAC read from the compiled policy_model.o."""
    import subprocess

    res = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(object_path)], capture_output=True, text=True)
    if res.returncode != 0:
        raise ValueError(f"objdump failed: {res.stderr.strip()}")
    cpm, detail = dense_loop_cycles_per_mac(res.stdout)
    nominal = CycleModel(cycles_per_mac=cpm)
    pessimistic = CycleModel(cycles_per_mac=cpm + FLASH_WAIT_CYCLES_PER_MAC,
                             cycles_per_elementwise=PESSIMISTIC.cycles_per_elementwise,
                             cycles_per_transcendental=PESSIMISTIC.cycles_per_transcendental,
                             overhead_cycles=PESSIMISTIC.overhead_cycles)
    return nominal, pessimistic, detail

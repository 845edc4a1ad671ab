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
- A GRU step (a recurrent navigate level, c_model.py's ``_gru``): its two matrix-vector products
  ``W x`` (3H x n_in) and ``R h`` (3H x H) are MACs through the same dense loop; per unit two
  sigmoids (one expf each) and one tanhf (3 transcendentals) and :data:`GRU_ELEMENTWISE_PER_UNIT`
  element-wise operations. A Concat copies each element once (one element-wise op).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deploy.crazyflie.graph import TRANSCENDENTAL, Activation, Clamp, Concat, ConstOp, Dense, Gru, LoweredModel, VarOp

CPU_HZ = 168e6
"""STM32F405 core clock on the Crazyflie 2.x."""
STABILIZER_TICK_US = 1000.0
"""The stabilizer loop runs at 1 kHz: the policy tick must fit in one 1 ms step, with the rest of it."""


GRU_ELEMENTWISE_PER_UNIT = 23
"""Element-wise operations per GRU unit, as c_model.py's ``_gru`` loop is written: the 6 biases of ``W x + Wb`` and
``R h + Rb``; z and r: add, negate, expf, add, divide (5 each); n: add, multiply, tanhf (3); the new state: subtract,
two multiplies, add (4). The 3 transcendentals are counted here too, as an Activation counts its elements."""
GRU_TRANSCENDENTALS_PER_UNIT = 3
"""Per GRU unit: the update and reset gates' sigmoids (one expf each) and the candidate's tanhf."""


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
        elif isinstance(s, Gru):
            n_h, n_in = s.hidden_size, s.w.shape[1]
            gru_macs = 3 * n_h * (n_in + n_h)
            macs += gru_macs
            flops += 2 * gru_macs + GRU_ELEMENTWISE_PER_UNIT * n_h
            elementwise += GRU_ELEMENTWISE_PER_UNIT * n_h
            transcendental += GRU_TRANSCENDENTALS_PER_UNIT * n_h
            params += s.w.size + s.r.size + s.wb.size + s.rb.size
        elif isinstance(s, Concat):
            elementwise += model.sizes[s.dst]  # a copy: no arithmetic
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


def cycle_models_from_object(object_path, objdump: str = "arm-none-eabi-objdump",
                             function: str = "policy_dense") -> tuple[CycleModel, CycleModel, str]:
    """(nominal, pessimistic) cycle models with cycles/MAC read from the compiled policy_model.o."""
    import subprocess

    res = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(object_path)], capture_output=True, text=True)
    if res.returncode != 0:
        raise ValueError(f"objdump failed: {res.stderr.strip()}")
    cpm, detail = dense_loop_cycles_per_mac(res.stdout, function)
    nominal = CycleModel(cycles_per_mac=cpm)
    pessimistic = CycleModel(cycles_per_mac=cpm + FLASH_WAIT_CYCLES_PER_MAC,
                             cycles_per_elementwise=PESSIMISTIC.cycles_per_elementwise,
                             cycles_per_transcendental=PESSIMISTIC.cycles_per_transcendental,
                             overhead_cycles=PESSIMISTIC.overhead_cycles)
    return nominal, pessimistic, detail


# ---- the navigate level's own work: the range memory and the observation (deploy/crazyflie/c_navigate.py) ------
# Cycle counts per loop iteration from the Cortex-M4 TRM timings above, as the generated loops are written:
# - a spacing check in navSense (one remembered point against one new hit): 2 VLDR (3), 2 VSUB, VMUL + VFMA (4),
#   VSQRT.F32 (14), VCMP + VMRS + a conditional select (3), loop increment and branch (4): 30 cycles;
# - a point binned in nav_sectors: 2 VLDR (3), 2 VSUB, the yaw rotation (2 VMUL + 2 VFMA, 8), the distance
#   (VMUL + VFMA + VSQRT, 18), a compare and branch (4), VDIV.F32 (14), VADD, newlib's floorf (a call and its
#   bit tests, ~20), VCVT, the modulo (SDIV 2-12, MLS, ~8), the sector compare and store (5), loop (4): 90
#   cycles plus one atan2f (newlib's fdlibm __ieee754_atan2f + atanf, a call, ~40 float operations and
#   branches: counted as one transcendental, 150 nominal / 250 pessimistic);
# - the observation's terms, clips and finiteness checks and the action mapping: two yaw extractions (VSQRT,
#   2 VDIV), ~60 compares for the clips and checks: 600 cycles (the goto's overhead_cycles for its observation).
SPACING_CHECK_CYCLES = 30.0
SECTOR_POINT_CYCLES = 90.0
NAVIGATE_IO_OVERHEAD_CYCLES = 600.0


@dataclass(frozen=True)
class NavigateIoCost:
    """The range memory and observation of one decision (one ``navSense`` + one ``navDecide``), network excluded."""

    spacing_checks: int
    """navSense: every memory sensor's hit against every slot of the ring (worst case: all hit); navDecide: the
    position against every slot of the trail."""
    sector_points: int
    """nav_sectors and nav_trail_sectors: every slot binned (worst case: all within range, one atan2f each)."""

    def cycles(self, model: CycleModel = NOMINAL) -> float:
        scale = model.cycles_per_elementwise / NOMINAL.cycles_per_elementwise  # the pessimistic model's margin
        return (self.spacing_checks * SPACING_CHECK_CYCLES * scale
                + self.sector_points * (SECTOR_POINT_CYCLES * scale + model.cycles_per_transcendental)
                + NAVIGATE_IO_OVERHEAD_CYCLES * model.overhead_cycles / NOMINAL.overhead_cycles)

    def microseconds(self, model: CycleModel = NOMINAL, cpu_hz: float = CPU_HZ) -> float:
        return self.cycles(model) / cpu_hz * 1e6


def navigate_io_cost(contract) -> NavigateIoCost:
    """Worst-case memory and observation work per decision of a navigate contract (robot_hrl.contract.navigate): the
    range memory's spacing checks and sector reads, and the trail's (one position against every slot, every slot
    binned; the same loops, c_navigate.py's ``_ring_write_c`` and ``_sectors_c``)."""
    mem, trail = contract.memory, contract.trail
    checks = len(mem.sensors) * mem.capacity if mem is not None else 0
    points = mem.capacity if mem is not None else 0
    if trail is not None:
        checks, points = checks + trail.capacity, points + trail.capacity
    return NavigateIoCost(spacing_checks=checks, sector_points=points)


@dataclass(frozen=True)
class NavigateDecisionCost:
    """One decision of the navigate level on the STM32F405: its network (the goto's cost model) and its io."""

    network: InferenceCost
    io: NavigateIoCost
    decision_rate_hz: float

    def network_microseconds(self, model: CycleModel = NOMINAL) -> float:
        """The network alone (the goto's model without its observation overhead: the level's io counts that)."""
        return (self.network.cycles(model) - model.overhead_cycles) / CPU_HZ * 1e6

    def microseconds(self, model: CycleModel = NOMINAL) -> float:
        return self.network_microseconds(model) + self.io.microseconds(model)

    def cpu_share(self, model: CycleModel = NOMINAL) -> float:
        """Fraction of the core the level takes at its decision rate."""
        return self.microseconds(model) * 1e-6 * self.decision_rate_hz

    def summary(self, nominal: CycleModel = NOMINAL, pessimistic: CycleModel = PESSIMISTIC) -> str:
        nom, pes = self.microseconds(nominal), self.microseconds(pessimistic)
        text = (f"{self.network.macs} MACs, {self.network.transcendentals} expf, {self.io.spacing_checks} memory spacing "
                f"checks, {self.io.sector_points} points binned (atan2f) per decision; estimated {nom:.0f} us nominal, "
                f"{pes:.0f} us pessimistic at {CPU_HZ / 1e6:.0f} MHz (network {self.network_microseconds(nominal):.0f} us, "
                f"memory and observation {self.io.microseconds(nominal):.0f} us); {100 * self.cpu_share(nominal):.2f} % of "
                f"the core at {self.decision_rate_hz:g} Hz")
        if nom > STABILIZER_TICK_US:
            text += f"; longer than one 1 kHz stabilizer tick ({STABILIZER_TICK_US:g} us): run it in a task of its own, not in the stabilizer loop"
        return text


def navigate_decision_cost(level) -> NavigateDecisionCost:
    """The cost of one decision of a generated navigate level (deploy/crazyflie/codegen_navigate.NavigateLevel)."""
    return NavigateDecisionCost(network=inference_cost(level.model), io=navigate_io_cost(level.contract),
                                decision_rate_hz=level.contract.decision_rate_hz)

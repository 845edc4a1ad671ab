"""Operation count and estimated time of one inference on the Crazyflie's STM32F405.

Not a measurement: a model of the Cortex-M4F at 168 MHz with stated assumptions.

- A multiply-accumulate of the dense layers costs ``cycles_per_mac`` cycles: VFMA.F32 (1 issue,
  3-cycle latency, hidden by the four partial sums of ``policy_dense``), two VLDR from flash/SRAM
  (weights stream from flash through the ART accelerator, 5 wait states at 168 MHz) and loop
  overhead. 4 cycles is the nominal figure, 7 the pessimistic one (flash cache misses).
- An element-wise op (normalization, clip, bias) costs ``cycles_per_elementwise`` (load, op, store).
- Elu and Sigmoid cost one ``expf``, Tanh one ``tanhf``: ``cycles_per_transcendental`` (newlib's
  single-precision expf is about 100-200 cycles on a Cortex-M4F; 150 nominal, 250 pessimistic).
- The observation (quaternion to rotation matrix, clips) and the action mapping: a fixed
  ``overhead_cycles`` (about 300, 1 sqrtf/VSQRT and ~100 float operations).
"""

from __future__ import annotations

from dataclasses import dataclass

from deploy.crazyflie.graph import TRANSCENDENTAL, Activation, Clamp, ConstOp, Dense, LoweredModel, VarOp

CPU_HZ = 168e6
"""STM32F405 core clock on the Crazyflie 2.x."""
STABILIZER_TICK_US = 1000.0
"""The stabilizer loop runs at 1 kHz: the policy tick must fit in one 1 ms step, with the rest of it."""


@dataclass(frozen=True)
class CycleModel:
    cycles_per_mac: float = 4.0
    cycles_per_elementwise: float = 3.0
    cycles_per_transcendental: float = 150.0
    overhead_cycles: float = 300.0


NOMINAL = CycleModel()
PESSIMISTIC = CycleModel(cycles_per_mac=7.0, cycles_per_elementwise=5.0, cycles_per_transcendental=250.0,
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

    def summary(self) -> str:
        nom, pes = self.microseconds(NOMINAL), self.microseconds(PESSIMISTIC)
        return (f"{self.macs} MACs, {self.flops} FLOPs, {self.transcendentals} expf/tanhf per inference; "
                f"estimated {nom:.0f} us nominal ({NOMINAL.cycles_per_mac:g} cycles/MAC), {pes:.0f} us pessimistic "
                f"({PESSIMISTIC.cycles_per_mac:g} cycles/MAC) at {CPU_HZ / 1e6:.0f} MHz; "
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

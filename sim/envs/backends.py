"""Step backends: the ways to run ``step_core.fused_control_step`` behind ``GotoEnv``.

- ``eager``: the function itself, op by op (any device, no build; the resets drawn for the finished
  environments only).
- ``compile``: one ``torch.compile``d graph per control step (GPUs; the first step compiles for about
  a minute).
- ``native``: its C twin (``sim/envs/native``), built with the system C compiler for the configuration
  (CPU; the fastest there).

All three draw from the same counter-based streams and give the same numbers to float rounding
(tests/test_sim_compiled.py, tests/test_sim_native.py). A backend's ``step`` takes the state tensors,
the per-step scalars and the two stream keys as numbers, and returns the buffer set it wrote (the
native backend's outputs live in two sets used in turn; None for the others) and
``fused_control_step``'s outputs.
"""

from __future__ import annotations

from typing import Protocol

import torch

from sim.envs.goto_env_cfg import PhysicsCfg
from sim.envs.step_constants import FusedConstants
from sim.envs.step_core import fused_control_step


class StepBackend(Protocol):
    name: str

    def step(self, actions: torch.Tensor, state: torch.Tensor, params: torch.Tensor, latency_steps: torch.Tensor,
             episode_length: torch.Tensor, scalars: tuple, keys: tuple) -> tuple[int | None, tuple]: ...


class _TorchStep:
    """The step as torch code, eager or compiled."""

    name = "eager"

    def __init__(self, f: FusedConstants, device: torch.device, fn, finished_only: bool):
        self.constants = f
        self.device = device
        self._fn = fn
        self._finished_only = finished_only

    def step(self, actions, state, params, latency_steps, episode_length, scalars: tuple, keys: tuple):
        s = torch.tensor(scalars, dtype=torch.float32, device=self.device)
        k = torch.tensor(keys, dtype=torch.int32, device=self.device)
        if self._finished_only:
            return None, self._fn(self.constants, actions, state, params, latency_steps, episode_length, s, k, finished_only=True)
        return None, self._fn(self.constants, actions, state, params, latency_steps, episode_length, s, k)


class EagerStep(_TorchStep):
    """``fused_control_step`` run op by op."""

    name = "eager"

    def __init__(self, f: FusedConstants, device: torch.device):
        super().__init__(f, device, fused_control_step, finished_only=True)


class CompiledStep(_TorchStep):
    """``fused_control_step`` as one ``torch.compile``d graph (compiled on the first step).

    ``compile=False`` runs the very function the graph is compiled from, uncompiled (the tests check the
    compiled path's computation this way without paying for the compilation)."""

    name = "compile"

    def __init__(self, f: FusedConstants, device: torch.device, compile: bool = True):
        fn = torch.compile(fused_control_step, dynamic=False, fullgraph=True) if compile else fused_control_step
        super().__init__(f, device, fn, finished_only=False)


class NativeStep:
    """The C step (``sim/envs/native``); builds it (about 1 s, cached) when made."""

    name = "native"

    def __init__(self, f: FusedConstants, num_envs: int, device: torch.device):
        from sim.envs.native import NativeControlStep

        self.kernel = NativeControlStep(f, num_envs, device)

    def step(self, actions, state, params, latency_steps, episode_length, scalars: tuple, keys: tuple):
        # (numbers, not tensors: at 1024 envs the per-step Python work is as long as the C)
        return self.kernel.step_numbers(actions, state, params, latency_steps, episode_length, scalars, keys)


BACKENDS = ("eager", "compile", "native")


def backend_name(physics: PhysicsCfg) -> str:
    """The backend a (validated: not both) ``PhysicsCfg`` asks for (``native``, ``compile``, else ``eager``)."""
    return "native" if physics.native else "compile" if physics.compile else "eager"


def make_step_backend(physics: PhysicsCfg, f: FusedConstants, num_envs: int, device: torch.device) -> StepBackend:
    """The step backend of a configuration."""
    name = backend_name(physics)
    if name == "native":
        return NativeStep(f, num_envs, device)
    if name == "compile":
        return CompiledStep(f, device)
    return EagerStep(f, device)

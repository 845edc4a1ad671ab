"""A faster ELU for training on the CPU: ``use_fast_elu(module)`` swaps the ``nn.ELU`` layers of the
actor and the critic for :class:`FastELU`, the same function run by a vectorized C loop
(``fast_elu.c``, built with the system C compiler like ``physics.native``).

torch's CPU ELU costs ~4 cycles per element on the reference 2-core machine: a fifth of a PPO
update and of the policy inference of a rollout (benchmarks/README.md). The swap changes no
parameter, buffer or state-dict key, so checkpoints load into the plain rsl_rl networks that
``sim/runs.load_run`` and the exporter build. Other devices, dtypes or layouts fall back to
``torch.nn.functional.elu``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from sim.envs.native.build import compile_library, load_cached, shared_headers

SOURCE = Path(__file__).with_name("fast_elu.c")
_lib: ctypes.CDLL | None = None


def _library() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        files = {"fast_elu.c": SOURCE.read_text(), **shared_headers()}
        lib, _ = load_cached(lambda: compile_library(files, "fast_elu.c", "torch's ELU"), "torch's ELU")
        for name, pointers in (("robot_hrl_elu_forward", 2), ("robot_hrl_elu_backward", 3)):
            fn = getattr(lib, name)
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p] * pointers + [ctypes.c_int64, ctypes.c_int]
        _lib = lib
    return _lib


def _fast(x: torch.Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype == torch.float32 and x.is_contiguous()


class _EluFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        _library().robot_hrl_elu_forward(x.data_ptr(), y.data_ptr(), x.numel(), torch.get_num_threads())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = torch.empty_like(grad)
        _library().robot_hrl_elu_backward(grad.data_ptr(), y.data_ptr(), grad_x.data_ptr(), grad.numel(), torch.get_num_threads())
        return grad_x


class FastELU(torch.nn.ELU):
    """``nn.ELU(alpha=1.0)`` computed by ``fast_elu.c`` for contiguous float32 CPU tensors."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.alpha != 1.0 or self.inplace or not _fast(x):
            return super().forward(x)
        return _EluFunction.apply(x)


def use_fast_elu(module: torch.nn.Module) -> int:
    """Replace every ``nn.ELU(alpha=1.0)`` inside ``module`` by a :class:`FastELU`; returns how many.

    Builds the C library first, so a machine without a C compiler raises ``NativeBuildError`` here
    (callers that want to go on without it catch that and keep torch's ELU).
    """
    _library()
    swapped = 0
    for parent in list(module.modules()):
        for name, child in list(parent._modules.items()):  # (named_children skips a layer shared under two names, as rsl_rl's MLP shares its activation)
            if type(child) is torch.nn.ELU and child.alpha == 1.0 and not child.inplace:
                setattr(parent, name, FastELU())
                swapped += 1
    return swapped

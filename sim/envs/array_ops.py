"""The torch array namespace of the actuator chain and the layout table (``robot_hrl.robots.actuator_chain``).

Columns are (N,) tensors (or Python floats, which fall back to ``MATH``). The functions are the
ones the structure-of-arrays step used before the chain was written once (``clamp`` for a number
bound, ``torch.maximum`` for two tensors), so the compiled graph and the eager step compute the
same operations in the same order.
"""

from __future__ import annotations

import torch

from robot_hrl.robots.actuator_chain import MATH, ArrayNamespace


def _tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


class _Torch:
    @staticmethod
    def sqrt(x):
        return torch.sqrt(x) if _tensor(x) else MATH.sqrt(x)

    @staticmethod
    def exp(x):
        return torch.exp(x) if _tensor(x) else MATH.exp(x)

    @staticmethod
    def log(x):
        return torch.log(x) if _tensor(x) else MATH.log(x)

    @staticmethod
    def sin(x):
        return torch.sin(x) if _tensor(x) else MATH.sin(x)

    @staticmethod
    def cos(x):
        return torch.cos(x) if _tensor(x) else MATH.cos(x)

    @staticmethod
    def floor(x):
        return torch.floor(x) if _tensor(x) else MATH.floor(x)

    @staticmethod
    def clip(x, lo, hi):
        return x.clamp(lo, hi) if _tensor(x) else MATH.clip(x, lo, hi)

    @staticmethod
    def maximum(a, b):
        if _tensor(a) and _tensor(b):
            return torch.maximum(a, b)
        if _tensor(a):
            return a.clamp(min=b)
        return b.clamp(min=a) if _tensor(b) else MATH.maximum(a, b)

    @staticmethod
    def minimum(a, b):
        if _tensor(a) and _tensor(b):
            return torch.minimum(a, b)
        if _tensor(a):
            return a.clamp(max=b)
        return b.clamp(max=a) if _tensor(b) else MATH.minimum(a, b)

    @staticmethod
    def where(condition, a, b):
        return torch.where(condition, a, b) if _tensor(condition) else MATH.where(condition, a, b)


TORCH: ArrayNamespace = _Torch()
"""The namespace of (N,) torch tensors."""

"""Keep freed host memory in the process for the compiled CPU step's per-step output buffers.

The compiled control step (``PhysicsCfg.compile``) returns fresh output tensors every step: about
50 MB at 65536 environments. glibc hands freed blocks of that size back to the kernel (large
blocks are mmap'ed; the top of the heap is trimmed), so every step faulted the same memory back in
and the kernel zeroed it: ~430 page faults and ~1 ms of kernel time per step on the 2-core
reference machine (benchmarks/README.md). PyTorch's CPU allocator has no cache of its own; the
usual fix is a caching allocator (jemalloc, tcmalloc via LD_PRELOAD). Without one, glibc's
``mallopt`` can keep freed blocks in the heap: blocks up to glibc's 32 MiB mmap limit come from
the heap, and the heap is trimmed only above 2 GiB of free space.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# glibc <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_GLIBC_MAX_MMAP_THRESHOLD = 32 * 1024 * 1024
"""glibc ignores larger mmap thresholds on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX)."""
_TRIM_THRESHOLD = 2**31 - 1
"""Free bytes at the top of the heap before glibc trims it: the largest value mallopt takes (2 GiB)."""
_TOP_PAD = 64 * 1024 * 1024
"""Extra heap grown at a time, so a step's buffers do not grow the heap in many small pieces."""

_applied: bool | None = None


def keep_freed_host_memory() -> bool:
    """Tell glibc to keep freed memory for reuse (process-wide, once). True if glibc accepted it.

    False on other C libraries and platforms (nothing changes there); the compiled step is only
    slower then. The cost: the process keeps its peak heap instead of returning it to the system.
    """
    global _applied
    if _applied is None:
        _applied = _apply()
    return _applied


def _apply() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, _GLIBC_MAX_MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1 and ok
    ok = mallopt(_M_TOP_PAD, _TOP_PAD) == 1 and ok
    return ok

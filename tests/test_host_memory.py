"""sim/envs/host_memory.py: freed step buffers stay in the process instead of faulting back in."""

from __future__ import annotations

import resource
import sys

import pytest
import torch

from sim.envs.host_memory import keep_freed_host_memory


def _median_faults_per_cycle(nbytes: int, cycles: int = 9) -> float:
    """Median page faults of allocating, touching and freeing a buffer (the median: the heap may grow once)."""
    faults = []
    for _ in range(cycles):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        buf = torch.empty(nbytes // 4)
        buf.fill_(1.0)  # touch every page
        del buf
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return sorted(faults)[cycles // 2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_freed_16_mib_buffer_is_reused_without_page_faults():
    assert keep_freed_host_memory() is True
    assert keep_freed_host_memory() is True  # once per process; later calls say what the first did
    pages = 16 * 1024 * 1024 // 4096
    # returned to the kernel, each cycle would fault all 4096 pages in again
    assert _median_faults_per_cycle(16 * 1024 * 1024) < pages / 20

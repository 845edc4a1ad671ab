"""Deadline monitoring of a fixed-rate loop (tick durations, lateness, missed deadlines) and the
loop's timing: absolute deadlines, the hybrid sleep-then-spin wait, the garbage collector around it."""

from __future__ import annotations

import gc
import math
import os
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from robot_hrl.errors import ConfigError


class DeadlineMonitor:
    """Counts ticks and missed deadlines, and keeps the last ``window`` tick durations.

    A tick misses its deadline when its work ends after the start of the next period
    (``late_s + duration_s > period_s``), or when whole periods were skipped (``skipped``).
    """

    def __init__(self, period_s: float, window: int = 10_000):
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0, got {period_s!r}")
        self.period_s = float(period_s)
        self.ticks = 0
        self.misses = 0
        self.skipped = 0
        self.max_duration_s = 0.0
        self._durations = np.zeros(int(window))
        self._late = np.zeros(int(window))
        self._n = 0
        self.last_misses: list[tuple[float, float, int]] = []
        """(late_s, duration_s, skipped) of the latest misses (at most 10)."""

    def record(self, duration_s: float, late_s: float = 0.0, skipped: int = 0) -> bool:
        """Record one tick; returns True when it missed its deadline."""
        i = self._n % len(self._durations)
        self._durations[i] = duration_s
        self._late[i] = late_s
        self._n += 1
        self.ticks += 1
        self.max_duration_s = max(self.max_duration_s, duration_s)
        missed = (late_s + duration_s) > self.period_s or skipped > 0
        self.skipped += max(0, int(skipped))
        if missed:
            self.misses += 1
            self.last_misses.append((late_s, duration_s, int(skipped)))
            del self.last_misses[:-10]
        return missed

    def _window(self, a: np.ndarray) -> np.ndarray:
        return a[: min(self._n, len(a))]

    def stats(self) -> dict[str, float]:
        d = self._window(self._durations)
        late = self._window(self._late)
        out = {
            "rate_hz": 1.0 / self.period_s, "ticks": self.ticks, "misses": self.misses, "skipped_periods": self.skipped,
            "misses_per_10k": (1e4 * self.misses / self.ticks) if self.ticks else 0.0,
            "max_ms": 1e3 * self.max_duration_s,
        }
        if len(d):
            p50, p99 = np.percentile(d, [50, 99])
            out.update(p50_ms=1e3 * float(p50), p99_ms=1e3 * float(p99),
                       late_p99_ms=1e3 * float(np.percentile(late, 99)))
        return out


# ---- the fixed-rate loop's timing ----------------------------------------------------------------
@dataclass(frozen=True)
class LoopTiming:
    """How a real-time loop waits for its deadlines and keeps its thread ready (node parameters)."""

    spin_margin_s: float = 300e-6
    """Sleep until this long before a deadline, then busy-wait (polling for messages) up to it; 0 = sleep
    only. A thread woken from sleep on an idle (virtual) CPU starts late and runs cold; spinning the
    last few hundred microseconds keeps it on the CPU and its caches warm."""
    gc_after_tick: bool = True
    """Disable the automatic cyclic GC during the loop and collect right after a tick instead (in the slack
    before the next deadline), with the collector's own thresholds: a collection never lands on a
    deadline. False = Python's automatic GC (start-up objects are frozen either way)."""
    cpu: int = -1
    """Pin the loop's thread to this CPU (``os.sched_setaffinity``); -1 = no pinning."""
    realtime_dds_threads: bool = True
    """With a SCHED_FIFO loop, give the process's DDS threads (:data:`DDS_THREAD_PREFIXES`) SCHED_FIFO
    one level below it: the loop takes samples from readers those threads fill while holding the
    readers' locks; left at normal priority, one preempted by another process mid-delivery stalls
    the loop for a scheduler time slice (priority inversion)."""

    def __post_init__(self) -> None:
        if isinstance(self.spin_margin_s, bool) or not isinstance(self.spin_margin_s, (int, float)) \
                or not math.isfinite(self.spin_margin_s) or not 0.0 <= self.spin_margin_s < 0.1:
            raise ConfigError(f"spin_margin_us={_us(self.spin_margin_s)}: give 0 (sleep only) up to 100000 us")
        if isinstance(self.cpu, bool) or not isinstance(self.cpu, int) or self.cpu < -1:
            raise ConfigError(f"cpu_affinity={self.cpu!r}: a CPU number (0, 1, ...) or -1 (no pinning)")
        if not isinstance(self.gc_after_tick, bool):
            raise ConfigError(f"gc_after_tick={self.gc_after_tick!r} must be true or false")
        if not isinstance(self.realtime_dds_threads, bool):
            raise ConfigError(f"realtime_dds_threads={self.realtime_dds_threads!r} must be true or false")

    @classmethod
    def from_params(cls, spin_margin_us: Any, gc_after_tick: Any, cpu_affinity: Any,
                    realtime_dds_threads: Any = True) -> "LoopTiming":
        """From the node parameters (``spin_margin_us`` in microseconds), with one clear error each."""
        if isinstance(spin_margin_us, bool) or not isinstance(spin_margin_us, (int, float)):
            raise ConfigError(f"spin_margin_us={spin_margin_us!r} must be a number of microseconds (0 = sleep only)")
        return cls(spin_margin_s=float(spin_margin_us) * 1e-6, gc_after_tick=gc_after_tick, cpu=cpu_affinity,
                   realtime_dds_threads=realtime_dds_threads)


CYCLONEDDS_THREAD_PREFIXES = ("recv", "dq.", "tev")
"""Names (``/proc/self/task/*/comm``) of Cyclone DDS's receive, delivery-queue and timed-event threads."""
FASTDDS_THREAD_PREFIXES = ("dds.udp.", "dds.shm.", "dds.ev.", "dds.asyn.")
"""Fast DDS's (rclpy's default RMW) receive (UDP, shared memory), event and asynchronous-writer threads,
as Fast DDS 2.14 names them (seen in /proc with the ROS 2 Jazzy wheels, ros-fastrtps 2.14.5; the
naming scheme is Fast DDS's "thread settings" documentation's)."""
DDS_THREAD_PREFIXES = CYCLONEDDS_THREAD_PREFIXES + FASTDDS_THREAD_PREFIXES
"""Every DDS thread the loop's priority is shared with, whichever transport the node is on."""


def threads_named(prefixes: tuple[str, ...], task_dir: str = "/proc/self/task") -> list[tuple[int, str]]:
    """(thread id, name) of this process's threads whose name starts with one of ``prefixes``
    (none where /proc is not there)."""
    found = []
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return found
    for tid in tids:
        try:
            with open(os.path.join(task_dir, tid, "comm")) as f:
                name = f.read().strip()
        except OSError:
            continue  # the thread ended meanwhile
        if name.startswith(prefixes):
            found.append((int(tid), name))
    return sorted(found)


def set_fifo(tid: int, priority: int) -> Callable[[], None]:
    """SCHED_FIFO ``priority`` for thread ``tid`` (0: the calling thread); returns what undoes it.
    Raises OSError without the permission (CAP_SYS_NICE)."""
    policy, param = os.sched_getscheduler(tid), os.sched_getparam(tid)
    os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))

    def restore() -> None:
        os.sched_setscheduler(tid, policy, param)

    return restore


def _us(seconds: Any) -> str:
    return f"{seconds * 1e6:g}" if isinstance(seconds, (int, float)) else repr(seconds)


class FixedRateSchedule:
    """Absolute deadlines ``start + k * period`` (no drift); a start later than a whole period skips the
    periods it missed and keeps the phase, as the executor's timers do."""

    def __init__(self, period_s: float, start_s: float):
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0, got {period_s!r}")
        self.period_s = float(period_s)
        self.next_s = float(start_s) + self.period_s
        """The next tick's deadline (when it is due)."""

    def start_tick(self, now_s: float) -> tuple[float, int]:
        """A tick starts at ``now_s`` (at or after :attr:`next_s`): returns its lateness against its
        deadline (at most one period) and the periods skipped; moves on to the next deadline."""
        late = max(0.0, now_s - self.next_s)
        skipped = int(math.floor(late / self.period_s))
        self.next_s += (skipped + 1) * self.period_s
        return min(late, self.period_s), skipped


POLL_COST_DECAY = 0.99
"""Per poll, the remembered cost of a poll decays by this factor before the new measurement is taken
in (a running maximum that forgets a rare slow poll after a few hundred polls)."""

_poll_cost_s: "weakref.WeakKeyDictionary[Callable[[], None], float]" = weakref.WeakKeyDictionary()


def poll_cost_s(poll: Callable[[], None]) -> float:
    """What one call of ``poll`` has been costing (decayed running maximum, seconds; 0 before the first)."""
    return _poll_cost_s.get(poll, 0.0)


def wait_until(deadline_s: float, spin_margin_s: float, sleep: Callable[[float], None],
               poll: Callable[[], None] | None = None, clock: Callable[[], float] = time.perf_counter,
               max_sleep_s: float = 0.05, stop: Callable[[], bool] | None = None) -> float:
    """Hybrid wait: ``sleep(s)`` (which may return early, e.g. when a message arrived and was handled)
    until ``spin_margin_s`` before ``deadline_s``, then busy-wait, calling ``poll()`` (take messages
    without blocking) until the deadline. Returns ``clock()`` at return: at or after ``deadline_s``,
    unless ``stop()`` turned true (checked at least every ``max_sleep_s``).

    A poll that costs more than the time left would overshoot the deadline by its cost (rclpy's
    ``spin_once(0)`` builds a wait set each call: a few hundred microseconds): the cost of each
    ``poll`` callable is remembered (:func:`poll_cost_s`), and when less than that is left the wait
    spins on the clock alone; a message arriving then is taken after the tick. It polls at least once
    per wait all the same (a margin as long as the period never sleeps: the polls are then the only
    way messages come in), and every poll measures the cost anew."""
    cost = _poll_cost_s.get(poll, 0.0) if poll is not None else 0.0
    polled = False
    still = 0  # spins in a row on a clock that did not move (a simulated clock moves only when polled)
    last = None
    while True:
        now = clock()
        remaining = deadline_s - now
        if remaining <= 0.0 or (stop is not None and stop()):
            if poll is not None:
                _poll_cost_s[poll] = cost
            return now
        still = still + 1 if now == last else 0
        last = now
        if remaining > spin_margin_s:
            sleep(min(remaining - spin_margin_s, max_sleep_s))
        elif poll is not None and (remaining > cost or not polled or still >= _STILL_SPINS):
            poll()
            polled = True
            cost = max(cost * POLL_COST_DECAY, clock() - now)


_STILL_SPINS = 1000
"""Spins on an unmoving clock after which the wait polls anyway (a clock that moves only when polled)."""


class LoopGc:
    """The garbage collector around a real-time loop.

    :meth:`start` collects and freezes what exists (model, shield, DDS entities live as long as the
    node: out of the collector's sight, so its collections stay short) and, with ``after_tick``,
    disables the automatic collection; :meth:`after_tick` then runs the collection Python would
    have run (the oldest generation past its threshold), at a moment the loop chooses. :meth:`close`
    puts the collector back as it found it.
    """

    def __init__(self, after_tick: bool = True):
        self.after_tick_enabled = bool(after_tick)
        self.collections = 0
        """Collections run by :meth:`after_tick`."""
        self._was_enabled: bool | None = None

    def start(self) -> None:
        if self._was_enabled is not None:
            return
        self._was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()
        if self.after_tick_enabled:
            gc.disable()

    def after_tick(self) -> int:
        """Collect the oldest generation whose count passed its threshold; -1 when none did."""
        if not self.after_tick_enabled or self._was_enabled is None:
            return -1
        counts, thresholds = gc.get_count(), gc.get_threshold()
        generation = -1
        for g in range(min(len(counts), len(thresholds))):
            if thresholds[g] and counts[g] > thresholds[g]:
                generation = g
        if generation >= 0:
            gc.collect(generation)
            self.collections += 1
        return generation

    def close(self) -> None:
        """Re-enable the automatic collection if it was on, and unfreeze (the node's objects may go now)."""
        if self._was_enabled is None:
            return
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()
        self._was_enabled = None

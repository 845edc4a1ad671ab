"""Deadline monitoring of a fixed-rate loop: tick durations, lateness and missed deadlines."""

from __future__ import annotations

import numpy as np


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

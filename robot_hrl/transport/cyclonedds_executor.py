"""The Cyclone DDS backend's single-threaded executor and its timers.

:meth:`CycloneExecutor.spin_once` waits on a WaitSet (one read condition per subscription, and a
guard condition that :meth:`~CycloneExecutor.wake` sets) until the next timer deadline, runs the
callbacks of the samples that arrived, and fires due timers. Timer deadlines are absolute
(``start + k * period`` on the timer clock: ``time.perf_counter``, or sim time), so a 100-500 Hz
loop does not drift; a late tick is run once and the missed ones are skipped (counted in
:attr:`CycloneTimer.overruns`), as rclpy does.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Protocol

from cyclonedds.core import DDSException, GuardCondition, ReadCondition, WaitSet
from cyclonedds.domain import DomainParticipant

from robot_hrl.transport.interface import Timer


class TimerClock(Protocol):
    """What a timer needs of its node: the clock its deadlines are on, and whether it runs yet."""

    use_sim_time: bool

    def _timer_clock(self) -> float: ...

    def _clock_started(self) -> bool: ...

    def _remove_timer(self, timer: "CycloneTimer") -> None: ...


class CycloneTimer(Timer):
    def __init__(self, node: TimerClock, period_s: float, callback: Callable[[], None]):
        self.period_s = float(period_s)
        self.callback = callback
        self.calls = 0
        self.overruns = 0
        """Ticks skipped because a previous one ran late."""
        self.last_deadline: float | None = None
        """When the running (or last) callback was due, on the timer clock (``time.perf_counter``, or
        sim time): ``time.perf_counter() - timer.last_deadline`` is its lateness."""
        self._node = node
        self._next: float | None = None
        self.cancelled = False
        self.reset()

    def cancel(self) -> None:
        self.cancelled = True
        self._node._remove_timer(self)

    def reset(self) -> None:
        """Restart the period from now (from the first /clock message under sim time)."""
        node = self._node
        self._next = node._timer_clock() + self.period_s if node._clock_started() else None

    def _due(self, now: float) -> bool:
        if self._next is None or self._next - now > 2 * self.period_s:  # first /clock, or sim time went back
            self._next = now + self.period_s
            return False
        return now >= self._next

    def _advance(self, now: float) -> None:
        self._next += self.period_s
        if self._next <= now:  # late by more than a period: skip the missed ticks, keep the phase
            missed = math.floor((now - self._next) / self.period_s) + 1
            self.overruns += missed
            self._next += missed * self.period_s


class Drainable(Protocol):
    """A subscription as the executor sees it: a read condition, and a drain that runs callbacks."""

    def _drain(self) -> None: ...


class CycloneExecutor:
    """Waits for samples, a wake-up or the next timer deadline; runs callbacks and due timers, in
    the calling thread."""

    def __init__(self, dp: DomainParticipant, clock: TimerClock):
        self._clock = clock
        self.waitset: WaitSet | None = WaitSet(dp)
        self.guard: GuardCondition | None = GuardCondition(dp)
        self.waitset.attach(self.guard)
        self.subscriptions: list = []
        self.timers: list[CycloneTimer] = []

    # ---- what it runs -----------------------------------------------------------------------------
    def add_subscription(self, sub, condition: ReadCondition) -> None:
        self.waitset.attach(condition)
        self.subscriptions.append(sub)

    def remove_subscription(self, sub, condition: ReadCondition | None) -> None:
        if condition is not None and self.waitset is not None:
            try:
                self.waitset.detach(condition)
            except DDSException:
                pass
        if sub in self.subscriptions:
            self.subscriptions.remove(sub)

    def add_timer(self, timer: CycloneTimer) -> None:
        self.timers.append(timer)

    def remove_timer(self, timer: CycloneTimer) -> None:
        if timer in self.timers:
            self.timers.remove(timer)

    # ---- running ----------------------------------------------------------------------------------
    def spin_once(self, timeout_s: float, stopped: Callable[[], bool]) -> None:
        """Wait up to ``timeout_s`` (less when a timer is due earlier), then run what is ready."""
        timeout = max(0.0, float(timeout_s))
        if self.timers and not self._clock.use_sim_time:
            now = time.perf_counter()
            nearest = min((t._next for t in self.timers if t._next is not None), default=now + timeout)
            timeout = min(timeout, max(0.0, nearest - now))
        if timeout > 0:
            self.waitset.wait(int(timeout * 1e9))
        if stopped():
            return
        for sub in list(self.subscriptions):
            sub._drain()
        self.fire_timers(stopped)

    def fire_timers(self, stopped: Callable[[], bool]) -> None:
        if not self.timers or not self._clock._clock_started():
            return  # under sim time, no /clock yet: time stands still, as in ROS 2
        now = self._clock._timer_clock()
        for timer in list(self.timers):
            if timer.cancelled or not timer._due(now):
                continue
            timer.last_deadline = timer._next
            timer._advance(now)
            timer.calls += 1
            timer.callback()
            if stopped():
                return

    def wake(self) -> None:
        """Make a waiting :meth:`spin_once` return now (from another thread, or a signal handler)."""
        try:
            if self.guard is not None:
                self.guard.set(True)
        except DDSException:
            pass

    def close(self) -> None:
        self.timers.clear()
        self.subscriptions.clear()
        self.waitset = None
        self.guard = None

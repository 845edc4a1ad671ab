"""The skill node's real-time loop: a fixed-rate tick on the node's executor, and the thread's scheduling.

Without ``use_sim_time``: absolute deadlines at the control rate (missed deadlines counted by the
deadline monitor); between them the executor sleeps (taking messages) until ``spin_margin_us``
before each deadline, then busy-waits to it; the cyclic garbage collector runs right after a tick,
not at a random allocation; ``realtime_priority`` and ``cpu_affinity`` optionally give the loop's
thread SCHED_FIFO (and the DDS threads it depends on one step below) and a core of its own, given
back when the loop ends. With ``use_sim_time`` the ticks come from ``/clock`` (the node's callback).

:class:`RealtimeLoop` is a mixin of :class:`robot_hrl.nodes.skill_node.SkillNode`; it uses the node's
``node``, ``p`` (parameters), ``timing``, ``use_sim_time``, ``period_s``, ``loop_gc``, ``_restore_thread``
and ``tick``.
"""

from __future__ import annotations

import os
import threading
import time

from robot_hrl.nodes.deadline import DDS_THREAD_PREFIXES, FixedRateSchedule, set_fifo, threads_named, wait_until


class RealtimeLoop:
    """The loop and the thread scheduling of a fixed-rate node (a mixin)."""

    def set_realtime_priority(self) -> bool:
        """SCHED_FIFO for the thread that runs the loop (real time only; needs CAP_SYS_NICE, e.g. root
        or `ulimit -r`); without the permission a warning, and the loop runs at normal priority."""
        prio = int(self.p["realtime_priority"])
        if prio <= 0 or self.use_sim_time:
            return False
        try:
            self._restore_thread.append(set_fifo(0, prio))
        except (OSError, AttributeError) as exc:
            self.node.get_logger().warning(f"realtime_priority={prio}: SCHED_FIFO refused ({exc}); "
                                           "running at normal priority")
            return False
        self.node.get_logger().info(f"control loop at SCHED_FIFO priority {prio}")
        if self.timing.realtime_dds_threads:
            self.raise_dds_threads(max(1, prio - 1))
        return True

    def raise_dds_threads(self, priority: int) -> list[str]:
        """SCHED_FIFO ``priority`` for this process's DDS threads (see ``LoopTiming.realtime_dds_threads``);
        restored when the loop ends. Returns the names of the threads raised."""
        raised = []
        for tid, name in threads_named(DDS_THREAD_PREFIXES):
            try:
                self._restore_thread.append(set_fifo(tid, priority))
            except OSError as exc:  # the thread ended, or no permission: the loop still runs
                self.node.get_logger().warning(f"DDS thread {name} ({tid}) stays at normal priority: {exc}")
                continue
            raised.append(f"{name}({tid})")
        if raised:
            self.node.get_logger().info(f"DDS threads at SCHED_FIFO priority {priority}: {', '.join(raised)}")
        return raised

    def set_cpu_affinity(self) -> bool:
        """Pin the calling (loop) thread to ``cpu_affinity``; an unknown CPU gives a warning and no
        pinning. Threads started before (DDS, onnxruntime) keep their own affinity."""
        cpu = self.timing.cpu
        if cpu < 0:
            return False
        try:
            previous = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {cpu})
        except (OSError, AttributeError, ValueError) as exc:
            self.node.get_logger().warning(f"cpu_affinity={cpu}: refused ({exc}); the loop is not pinned")
            return False
        self._restore_thread.append(lambda: os.sched_setaffinity(0, previous))
        self.node.get_logger().info(f"control loop pinned to CPU {cpu}")
        return True

    def restore_thread(self) -> None:
        """Give the loop's thread back its scheduling and affinity (the thread may go on, e.g. in a
        test or benchmark, after the loop)."""
        while self._restore_thread:
            try:
                self._restore_thread.pop()()
            except OSError as exc:
                self.node.get_logger().warning(f"could not restore the thread's scheduling: {exc}")

    def run(self, stop: threading.Event) -> None:
        self.loop_gc.start()
        try:
            self.set_realtime_priority()
            self.set_cpu_affinity()
            if self.use_sim_time:
                self.node.spin(until=stop.is_set)  # the ticks come from /clock
            else:
                self._run_realtime(stop)
        finally:
            self.restore_thread()
            self.loop_gc.close()

    def _stopped(self, stop: threading.Event) -> bool:
        return stop.is_set() or bool(getattr(self.node, "is_shutdown", False))

    def _run_realtime(self, stop: threading.Event) -> None:
        """The fixed-rate loop on the node's single-threaded executor (callbacks and ticks in one
        thread: no lock or GIL hand-over between them). Between deadlines the executor sleeps and runs
        the callbacks of arriving messages; ``spin_margin_us`` before a deadline it stops sleeping and
        polls, so the tick starts on time on a warm CPU."""
        node = self.node
        schedule = FixedRateSchedule(self.period_s, time.perf_counter())

        def stopped() -> bool:
            return self._stopped(stop)

        def poll() -> None:
            node.spin_once(0.0)

        while not stopped():
            wait_until(schedule.next_s, self.timing.spin_margin_s, node.spin_once, poll, stop=stopped)
            if stopped():
                return
            late, skipped = schedule.start_tick(time.perf_counter())
            self.tick(node.now(), late_s=late, skipped=skipped)

"""What every node executable shares: start-up from argv, diagnostics, stamped messages, shutdown."""

from __future__ import annotations

import faulthandler
import json
import logging
import math
import os
import signal
import sys
import threading
from typing import Any, Callable

from robot_hrl.errors import RobotHrlError
from robot_hrl.msgs import DiagnosticArray, DiagnosticStatus, KeyValue, PoseStamped, String, header
from robot_hrl.nodes.args import NodeArgs, parse_node_args

OK, WARN, ERROR, STALE = 0, 1, 2, 3

STACKS_SIGNAL = signal.SIGUSR1
"""Asks a node for every thread's stack on its log (:func:`run_main` registers it; the launcher sends it before it
escalates to SIGTERM, robot_hrl.launch.launcher.Launcher.stop_nodes)."""
LEVEL_NAMES = {OK: "OK", WARN: "WARN", ERROR: "ERROR", STALE: "STALE"}


DIAG_TEXT_CHARS = 2000
"""A diagnostic's message and each value are cut to this many characters."""


def safe_text(text: Any, limit: int | None = None) -> str:
    """Text that every ROS 2 string can carry: lone surrogates (from JSON ``\\udcff`` escapes) and
    NUL characters escaped (a CDR string cannot carry them), cut to ``limit`` characters."""
    text = text if isinstance(text, str) else str(text)
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}... ({len(text)} chars)"
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\0", "\\x00") if "\0" in text else text


def diag_status(name: str, level: int, message: str, values: dict[str, Any] | None = None,
                hardware_id: str = "") -> DiagnosticStatus:
    """A DiagnosticStatus; values are stringified (floats with 6 significant digits, containers as
    JSON with non-finite numbers as null), every text made safe to send (:func:`safe_text`)."""
    kv = []
    for key, value in (values or {}).items():
        if isinstance(value, float):
            text = f"{value:.6g}"
        elif isinstance(value, (dict, list, tuple)):
            text = json.dumps(finite_json(value)[0], default=str)
        else:
            text = str(value)
        kv.append(KeyValue(key=safe_text(key, 200), value=safe_text(text, DIAG_TEXT_CHARS)))
    return DiagnosticStatus(level=int(level), name=safe_text(name, 200), message=safe_text(message, DIAG_TEXT_CHARS),
                            hardware_id=safe_text(hardware_id, 200), values=kv)


def diag_array(stamp_s: float, statuses: list[DiagnosticStatus]) -> DiagnosticArray:
    return DiagnosticArray(header=header(stamp_s, ""), status=list(statuses))


def diag_values(status: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def json_string(payload: dict[str, Any]) -> String:
    """A status as std_msgs/String JSON that never fails on a number: a NaN or infinite number (a
    distance from an ``/odom`` of 1e308 overflows) becomes null, and the payload says which ones
    under ``"non_finite"`` (their paths). Valid JSON always (``allow_nan=False``), ASCII only."""
    clean, dropped = finite_json(payload)
    if dropped and isinstance(clean, dict):
        clean["non_finite"] = dropped[:20]
    return String(data=json.dumps(clean, allow_nan=False))


def finite_json(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """``value`` made JSON-safe: numpy arrays and scalars to Python, non-finite floats to None
    (their paths listed), other objects to ``str``. Returns (clean value, paths of dropped numbers)."""
    dropped: list[str] = []

    def clean(v, where: str, depth: int):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            if math.isfinite(v):
                return v
            dropped.append(where or "(value)")
            return None
        if depth > 32:
            return str(v)
        if isinstance(v, dict):
            return {str(k): clean(x, f"{where}.{k}" if where else str(k), depth + 1) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v)]
        try:
            import numpy as np

            if isinstance(v, np.ndarray):
                return clean(v.tolist(), where, depth)
            if isinstance(v, np.generic):
                return clean(v.item(), where, depth)
        except ImportError:  # pragma: no cover
            pass
        return str(v)

    return clean(value, path, 0), dropped


def finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def pose_stamped(position, stamp_s: float, frame_id: str = "map") -> PoseStamped:
    msg = PoseStamped(header=header(stamp_s, frame_id))
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in position)
    return msg


def position_of(msg: PoseStamped) -> list[float]:
    p = msg.pose.position
    return [float(p.x), float(p.y), float(p.z)]


def make_node(opts: NodeArgs):
    """Create the node on the backend the arguments ask for (F1's transport layer)."""
    from robot_hrl.transport import create_node

    return create_node(opts.name, namespace=opts.namespace, parameters=opts.parameters,
                       backend=opts.backend, domain_id=opts.domain_id)


def run_main(default_name: str, build: Callable[[Any], Any], argv: list[str] | None = None) -> int:
    """Parse argv, create the node, build the node's wiring with ``build(node)``, spin until
    SIGINT/SIGTERM. Errors in the configuration print one clear line and exit 2.

    ``build`` gets the node as a :class:`~robot_hrl.nodes.input_guard.GuardedNode`: every subscription
    and timer callback is guarded (an exception drops that input, is counted and logged, and the
    node goes on), and ``<node>: inputs`` on /diagnostics says what was dropped on which topic."""
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] [%(name)s] %(message)s")
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_node_args(argv, default_name)
        node = make_node(opts)
    except RobotHrlError as exc:
        print(f"{default_name}: error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _stop(signum, frame):  # noqa: ARG001
        if stop.is_set():
            # A second signal while stopping (the launcher's SIGTERM 5 s after its SIGINT, as ROS 2 launch does, or
            # Ctrl-C twice): the clean stop hangs, so exit now. It runs once Python runs again in this thread;
            # a hang inside a C call is left to SIGKILL.
            print(f"{opts.name}: {signal.Signals(signum).name} while stopping: exiting now, without a clean "
                  f"shutdown", file=sys.stderr, flush=True)
            os._exit(128 + signum)
        stop.set()  # the loop ends within one wait; the node is shut down below, in this thread

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    # every thread's stack on stderr (the node's log), from C, even while Python is blocked in a call
    faulthandler.register(STACKS_SIGNAL, all_threads=True)
    from robot_hrl.nodes.input_guard import GuardedNode

    guarded = GuardedNode(node)
    try:
        wiring = build(guarded)
        guarded.input_guard.start_reporting()
    except RobotHrlError as exc:
        print(f"{opts.name}: error: {exc}", file=sys.stderr)
        node.shutdown()
        return 2
    try:
        run = getattr(wiring, "run", None)
        if run is not None:
            run(stop)
        else:
            node.spin(until=stop.is_set)
    finally:
        close = getattr(wiring, "close", None)
        if close is not None:
            close()
        node.shutdown()
    return 0

"""What every node executable shares: start-up from argv, diagnostics, stamped messages, shutdown."""

from __future__ import annotations

import json
import logging
import math
import signal
import sys
import threading
from typing import Any, Callable

from robot_hrl.errors import RobotHrlError
from robot_hrl.msgs import DiagnosticArray, DiagnosticStatus, KeyValue, PoseStamped, String, header
from robot_hrl.nodes.args import NodeArgs, parse_node_args

OK, WARN, ERROR, STALE = 0, 1, 2, 3
LEVEL_NAMES = {OK: "OK", WARN: "WARN", ERROR: "ERROR", STALE: "STALE"}


def diag_status(name: str, level: int, message: str, values: dict[str, Any] | None = None,
                hardware_id: str = "") -> DiagnosticStatus:
    """A DiagnosticStatus; values are stringified (floats with 6 significant digits)."""
    kv = []
    for key, value in (values or {}).items():
        if isinstance(value, float):
            text = f"{value:.6g}"
        elif isinstance(value, (dict, list, tuple)):
            text = json.dumps(value, default=str)
        else:
            text = str(value)
        kv.append(KeyValue(key=str(key), value=text))
    return DiagnosticStatus(level=int(level), name=name, message=message, hardware_id=hardware_id, values=kv)


def diag_array(stamp_s: float, statuses: list[DiagnosticStatus]) -> DiagnosticArray:
    return DiagnosticArray(header=header(stamp_s, ""), status=list(statuses))


def diag_values(status: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def json_string(payload: dict[str, Any]) -> String:
    return String(data=json.dumps(payload, default=_json_default, allow_nan=False))


def _json_default(value):
    try:
        import numpy as np

        if isinstance(value, np.ndarray):
            return [float(v) for v in value.tolist()]
        if isinstance(value, np.generic):
            return value.item()
    except ImportError:  # pragma: no cover
        pass
    return str(value)


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
    SIGINT/SIGTERM. Errors in the configuration print one clear line and exit 2."""
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
        stop.set()  # the loop ends within one wait; the node is shut down below, in this thread

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        wiring = build(node)
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

"""Emergency stop from the command line: latch (motors off) or release the skill node's shield.

    estop                      # latch: the skill node cuts the motors until released
    estop --release            # release the latch (the robot stays on the ground until a new subgoal)
    estop --namespace cf1 --domain-id 7

Publishes std_msgs/Bool on ``/estop`` (reliable, latched so that a skill node that starts or
reconnects later still sees it): ``true`` latches, ``false`` releases. From ROS 2:
``ros2 topic pub --once /estop std_msgs/msg/Bool "{data: true}"``.
"""

from __future__ import annotations

import argparse
import sys
import time

from robot_hrl.msgs import Bool
from robot_hrl.transport.interface import LATCHED_QOS

ESTOP_TOPIC = "/estop"


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--namespace", default="", help="robot namespace, e.g. cf1")
    parser.add_argument("--domain-id", type=int, default=None, help="DDS domain id (default: $ROS_DOMAIN_ID or 0)")
    parser.add_argument("--backend", default="auto", choices=("auto", "cyclonedds", "rclpy"))
    parser.add_argument("--wait", type=float, default=2.0,
                        help="seconds to wait for a subscriber (the skill node) before giving up")
    return parser


def wait_for_subscriber(node, pub, wait_s: float) -> bool:
    """True once ``pub`` has a subscriber (or the backend cannot tell), else False after ``wait_s``."""
    count = getattr(pub, "get_subscription_count", None)
    if count is None:
        node.spin(until=_after(min(wait_s, 0.5)))
        return True
    end = time.monotonic() + wait_s
    node.spin(until=lambda: count() > 0 or time.monotonic() > end)
    return count() > 0


def _after(seconds: float):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end


def main(argv: list[str] | None = None) -> int:
    parser = build_parser("estop", __doc__.splitlines()[0])
    parser.add_argument("--release", action="store_true", help="release the latched emergency stop")
    args = parser.parse_args(argv)
    from robot_hrl.transport import create_node

    node = create_node("estop", namespace=args.namespace, backend=args.backend, domain_id=args.domain_id)
    try:
        pub = node.create_publisher(Bool, ESTOP_TOPIC, LATCHED_QOS)
        seen = wait_for_subscriber(node, pub, args.wait)
        pub.publish(Bool(data=not args.release))
        # Give the reliable, latched sample time to reach the subscribers before the writer goes.
        node.spin(until=_after(0.3))
        what = "released" if args.release else "LATCHED (motors off)"
        print(f"emergency stop {what} on {node.resolve_topic(ESTOP_TOPIC)}"
              + ("" if seen else f"; warning: no subscriber within {args.wait:g} s (is the skill node running?)"))
        return 0 if seen else 1
    finally:
        node.shutdown()


if __name__ == "__main__":
    sys.exit(main())

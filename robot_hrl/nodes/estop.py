"""Emergency stop from the command line: latch (motors off) or release the skill node's shield.

    estop                      # latch: the skill node cuts the motors until released
    estop --release            # release the latch (the robot stays on the ground until a new subgoal)
    estop --namespace cf1 --domain-id 7 --backend rclpy

Publishes std_msgs/Bool on ``/estop`` with ROS 2's default QoS (reliable, volatile, keep last 10),
the profile the skill node subscribes with: ``true`` latches, ``false`` releases. It waits until
the skill node's subscription is matched (as ``ros2 topic pub`` does), then sends the value and
re-sends it every ``--repeat-period`` seconds for ``--linger`` seconds: the latch is idempotent, and
a sample sent while the other side is still completing discovery is not lost. From ROS 2, with
its default settings: ``ros2 topic pub --once /estop std_msgs/msg/Bool "{data: true}"``.
"""

from __future__ import annotations

import argparse
import sys
import time

from robot_hrl.msgs import Bool
from robot_hrl.transport.interface import INPUT_QOS

ESTOP_TOPIC = "/estop"
REPEAT_PERIOD_S = 0.05
"""Re-send period of the value while the tool lingers."""


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--namespace", default="", help="robot namespace, e.g. cf1")
    parser.add_argument("--domain-id", type=int, default=None, help="DDS domain id (default: $ROS_DOMAIN_ID or 0)")
    parser.add_argument("--backend", default="auto", choices=("auto", "cyclonedds", "rclpy"),
                        help="transport: rclpy when importable (auto), else Cyclone DDS")
    parser.add_argument("--wait", type=float, default=2.0,
                        help="seconds to wait for a subscriber (the skill node) before giving up")
    return parser


def wait_for_subscriber(node, pub, wait_s: float) -> bool:
    """True once ``pub`` has a matched subscription, else False after ``wait_s`` (spinning meanwhile)."""
    end = time.monotonic() + wait_s
    node.spin(until=lambda: pub.get_subscription_count() > 0 or time.monotonic() > end)
    return pub.get_subscription_count() > 0


def publish_for(node, pub, msg, linger_s: float, period_s: float = REPEAT_PERIOD_S) -> int:
    """Publish ``msg`` now and every ``period_s`` until ``linger_s`` has passed; returns how often."""
    sent, end = 0, time.monotonic() + linger_s
    while True:
        pub.publish(msg)
        sent += 1
        if time.monotonic() + period_s > end:
            break
        node.spin(until=_after(period_s))
    node.spin(until=lambda: time.monotonic() >= end)
    return sent


def _after(seconds: float):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end


def main(argv: list[str] | None = None) -> int:
    parser = build_parser("estop", __doc__.splitlines()[0])
    parser.add_argument("--release", action="store_true", help="release the latched emergency stop")
    parser.add_argument("--linger", type=float, default=0.3,
                        help="seconds to keep re-sending the value (and the publisher alive) after the first send")
    args = parser.parse_args(argv)
    if not args.wait >= 0 or not args.linger >= 0:
        parser.error("--wait and --linger must be >= 0 seconds")
    from robot_hrl.transport import create_node

    node = create_node("estop", namespace=args.namespace, backend=args.backend, domain_id=args.domain_id)
    try:
        pub = node.create_publisher(Bool, ESTOP_TOPIC, INPUT_QOS)
        seen = wait_for_subscriber(node, pub, args.wait)
        publish_for(node, pub, Bool(data=not args.release), args.linger)
        what = "released" if args.release else "LATCHED (motors off)"
        print(f"emergency stop {what} on {node.resolve_topic(ESTOP_TOPIC)}"
              + ("" if seen else f"; warning: no subscriber within {args.wait:g} s (is the skill node running?)"))
        return 0 if seen else 1
    finally:
        node.shutdown()


if __name__ == "__main__":
    sys.exit(main())

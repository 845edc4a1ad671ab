"""Keyboard-free teleop: send one subgoal (or a task) to the graph from the command line.

    python -m robot_hrl.nodes.teleop goto 1.0 2.0 1.0      # publish /subgoal, re-sent at --rate for --duration
    python -m robot_hrl.nodes.teleop task "takeoff 1; goto red_box; land"   # publish /task (latched)

A subgoal goes through the skill node's subgoal shield like any other (fence, obstacles,
subgoal radius). While the planner runs it also publishes /subgoal; stop it (or give it no
task) to fly by hand. The skill node holds, then lands, when subgoals stop arriving.
"""

from __future__ import annotations

import math
import sys
import time

from robot_hrl.msgs import PoseStamped, String
from robot_hrl.nodes.common import pose_stamped
from robot_hrl.nodes.estop import build_parser, wait_for_subscriber
from robot_hrl.transport.interface import COMMAND_QOS, LATCHED_QOS


def main(argv: list[str] | None = None) -> int:
    parser = build_parser("teleop", __doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    g = sub.add_parser("goto", help="publish a subgoal x y z (world ENU, m)")
    g.add_argument("xyz", nargs=3, type=float, metavar=("X", "Y", "Z"))
    g.add_argument("--rate", type=float, default=5.0, help="re-send rate, Hz (a heartbeat for the skill node)")
    g.add_argument("--duration", type=float, default=0.0, help="seconds to keep sending; 0 = once")
    g.add_argument("--frame-id", default="map")
    t = sub.add_parser("task", help="publish a task for the planner")
    t.add_argument("text", help="task text or JSON")
    args = parser.parse_args(argv)
    if args.what == "goto":
        if not all(math.isfinite(v) for v in args.xyz):
            parser.error(f"the subgoal {args.xyz} must be finite numbers")
        if not args.rate > 0 or args.duration < 0:
            parser.error("--rate must be > 0 and --duration >= 0")
    from robot_hrl.transport import create_node

    node = create_node("teleop", namespace=args.namespace, backend=args.backend, domain_id=args.domain_id)
    try:
        if args.what == "task":
            pub = node.create_publisher(String, "/task", LATCHED_QOS)
            seen = wait_for_subscriber(node, pub, args.wait)
            pub.publish(String(data=args.text))
            time.sleep(0.3)
            print(f"task sent on {node.resolve_topic('/task')}" + ("" if seen else " (no subscriber yet; latched)"))
            return 0
        pub = node.create_publisher(PoseStamped, "/subgoal", COMMAND_QOS)
        seen = wait_for_subscriber(node, pub, args.wait)
        end = time.monotonic() + args.duration
        while True:
            pub.publish(pose_stamped(args.xyz, node.now(), args.frame_id))
            if time.monotonic() >= end:
                break
            time.sleep(1.0 / args.rate)
        time.sleep(0.2)
        print(f"subgoal {args.xyz} sent on {node.resolve_topic('/subgoal')}"
              + ("" if seen else "; warning: no subscriber (is the skill node running?)"))
        return 0 if seen else 1
    finally:
        node.shutdown()


if __name__ == "__main__":
    sys.exit(main())

"""A ROS 2 user, as a separate process: plain rclpy with its default settings, no robot_hrl import.

It is what `ros2 node list`, `ros2 topic list -t`, `ros2 topic info -v`, `ros2 topic pub` and
`ros2 topic echo` do (ros2cli has no wheel), written with rclpy's public API only and rclpy's
default QoS (reliable, volatile, keep last 10) wherever ros2cli uses it. The environment is the
caller's minus every DDS setting of ours (see :func:`stock_env`): only ``ROS_DOMAIN_ID``.

Commands, one per line on stdin; each answer is one line ``<WORD> <json>`` on stdout:

- ``graph NODE,NODE,...`` -> ``GRAPH {...}`` once every named node is seen: node names, topic
  types, and the QoS of each topic's publishers and subscriptions (as ``ros2 topic info -v``).
- ``pub_task N W TEXT`` -> ``SENT {...}``: a new /task publisher (default QoS), waits for W matched
  subscriptions (as ``ros2 topic pub -w W`` does; W = 1 is its default), publishes N times, 0.1 s apart (``--once``: N = 1;
  ``-t N -r 10``), stopping early once /planner/status shows the task (as a user watching
  ``ros2 topic echo /planner/status`` would).
- ``subgoals X Y Z`` -> ``STREAMING``: /subgoal (default QoS) at 5 Hz from now on, ``stop_subgoals`` ends it.
- ``estop N W`` -> ``ESTOP {...}``: a NEW /estop publisher (default QoS, volatile), waits for W matches,
  publishes ``true`` N times, 0.1 s apart, and reports how many /cmd_wrench messages with thrust arrived after it and
  the seconds until the first one with zero thrust.
- ``status`` -> ``STATUS {...}``: the latest /skill/status and /planner/status JSON.

    python tests/ros2_user.py        (reads commands; stops when stdin closes)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

STRIP = ("CYCLONEDDS_URI", "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOCALHOST_ONLY", "RMW_IMPLEMENTATION",
         "ROS_STATIC_PEERS", "FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
"""Every variable that would change ROS 2's discovery or middleware from its defaults."""


def stock_env(domain_id: int) -> dict[str, str]:
    """The environment of a stock ROS 2 process on ``domain_id``: the caller's without any DDS setting."""
    env = {k: v for k, v in os.environ.items() if k not in STRIP}
    env["ROS_DOMAIN_ID"] = str(domain_id)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _qos_text(profile) -> dict[str, object]:
    return {"reliability": profile.reliability.name.lower(), "durability": profile.durability.name.lower(),
            "depth": int(profile.depth)}


def main() -> None:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray  # noqa: F401 - the types ros2cli would load
    from geometry_msgs.msg import PoseStamped, WrenchStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, qos_profile_sensor_data
    from std_msgs.msg import Bool, String

    rclpy.init()
    node = rclpy.create_node("ros2_user")
    lock = threading.Lock()
    latest: dict[str, object] = {"skill": None, "planner": None}
    wrenches: list[tuple[float, float]] = []

    def on_skill(msg):
        with lock:
            latest["skill"] = json.loads(msg.data)

    def on_planner(msg):
        with lock:
            latest["planner"] = json.loads(msg.data)

    def on_wrench(msg):
        with lock:
            wrenches.append((time.monotonic(), float(msg.wrench.force.z)))
            del wrenches[:-2000]

    default = QoSProfile(depth=10)  # rclpy's default: reliable, volatile, keep last 10
    node.create_subscription(String, "/skill/status", on_skill, default)
    node.create_subscription(String, "/planner/status", on_planner, default)
    node.create_subscription(WrenchStamped, "/cmd_wrench", on_wrench, qos_profile_sensor_data)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    stop = threading.Event()
    graph_lock = threading.Lock()
    """Held by the spinner around each wait and by the main thread around creating or destroying a publisher or a
    timer: rclpy's wait set is not safe against the node's entities changing under it from another thread (a CI run
    lost every status after `stop_subgoals` destroyed the subgoal timer while the executor waited on it)."""

    def spin() -> None:
        while not stop.is_set():
            try:
                with graph_lock:
                    executor.spin_once(timeout_sec=0.02)
            except Exception as exc:  # noqa: BLE001 - the user keeps listening, and says what happened
                print(f"SPIN_ERROR {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                time.sleep(0.01)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    subgoal = {"pub": None, "xyz": None, "timer": None}

    def say(word: str, payload: object) -> None:
        print(f"{word} {json.dumps(payload)}", flush=True)

    def wait_matched(pub, want: int = 1, guard_s: float = 30.0) -> bool:
        """``ros2 topic pub -w want``: until ``want`` subscriptions matched. With fewer than every reader of the
        topic, a single sample may reach only those matched so far (the recorder's, not the planner's)."""
        end = time.monotonic() + guard_s
        while pub.get_subscription_count() < want and time.monotonic() < end:
            time.sleep(0.01)
        return pub.get_subscription_count() >= want

    def graph(names: list[str]) -> None:
        end = time.monotonic() + 30.0
        while time.monotonic() < end and not set(names) <= set(node.get_node_names()):
            time.sleep(0.1)
        time.sleep(1.0)  # the endpoints of the nodes just found
        topics = dict((name, types) for name, types in node.get_topic_names_and_types())
        info = {}
        for topic in topics:
            info[topic] = {
                "publishers": [dict(node=i.node_name, **_qos_text(i.qos_profile))
                               for i in node.get_publishers_info_by_topic(topic)],
                "subscriptions": [dict(node=i.node_name, **_qos_text(i.qos_profile))
                                  for i in node.get_subscriptions_info_by_topic(topic)],
            }
        say("GRAPH", {"nodes": sorted(node.get_node_names()), "topics": topics, "info": info})

    def pub_task(times: int, want: int, text: str) -> None:
        with graph_lock:
            pub = node.create_publisher(String, "/task", default)
        matched = wait_matched(pub, want)
        sent = 0
        for i in range(times):
            if i:
                time.sleep(0.1)
            with lock:
                if text in str((latest["planner"] or {}).get("task", "")):
                    break
            pub.publish(String(data=text))
            sent += 1
        time.sleep(0.5)
        with graph_lock:
            node.destroy_publisher(pub)
        say("SENT", {"matched": matched, "sent": sent})

    def send_subgoal() -> None:
        msg = PoseStamped()
        msg.header.frame_id = "map"
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = subgoal["xyz"]
        msg.pose.orientation.w = 1.0
        subgoal["pub"].publish(msg)

    def estop(times: int, want: int) -> None:
        with graph_lock:
            pub = node.create_publisher(Bool, "/estop", default)
        matched = wait_matched(pub, want)
        with lock:
            mark = len(wrenches)
        t0 = time.monotonic()
        pub.publish(Bool(data=True))
        sent = 1
        off_s, after = None, 0
        end = t0 + 10.0
        while off_s is None and time.monotonic() < end:
            time.sleep(0.002)
            if sent < times and time.monotonic() >= t0 + 0.1 * sent:
                pub.publish(Bool(data=True))
                sent += 1
            with lock:
                fresh = wrenches[mark:]
                mark = len(wrenches)
            for t, thrust in fresh:
                if thrust == 0.0:
                    off_s = t - t0
                    break
                after += 1
        time.sleep(0.3)
        with graph_lock:
            node.destroy_publisher(pub)
        say("ESTOP", {"matched": matched, "off_s": off_s, "commands_with_thrust_after": after, "sent": sent})

    for line in sys.stdin:
        word, _, rest = line.strip().partition(" ")
        if word == "graph":
            graph([n for n in rest.split(",") if n])
        elif word == "pub_task":
            times, want, text = rest.split(" ", 2)
            pub_task(int(times), int(want), text)
        elif word == "subgoals":
            subgoal["xyz"] = tuple(float(v) for v in rest.split())
            if subgoal["pub"] is None:
                with graph_lock:
                    subgoal["pub"] = node.create_publisher(PoseStamped, "/subgoal", default)
                    subgoal["timer"] = node.create_timer(0.2, send_subgoal)
            say("STREAMING", {"matched": wait_matched(subgoal["pub"])})
        elif word == "stop_subgoals":
            if subgoal["timer"] is not None:
                with graph_lock:
                    node.destroy_timer(subgoal["timer"])
                subgoal["timer"] = None
            say("STOPPED", {})
        elif word == "estop":
            times, _, want = rest.partition(" ")
            estop(int(times or 1), int(want or 1))
        elif word == "status":
            with lock:
                say("STATUS", {"skill": latest["skill"], "planner": latest["planner"]})
        elif word:
            say("ERROR", {"unknown": word})
    stop.set()
    spinner.join(5.0)
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()

"""The node interface on rclpy, for machines with a sourced ROS 2 install.

Nodes keep using :mod:`robot_hrl.msgs`; this backend converts to and from the generated ROS
classes (``nav_msgs.msg.Odometry`` ...) field by field (:mod:`robot_hrl.transport.ros_conversion`).
Parameters given to the constructor become rclpy parameter overrides (so ``use_sim_time``
works as in any ROS 2 node), the Python logger of the interface goes to the node's rcutils logger
(console and ``/rosout``, one line per record: it no longer propagates to Python's root handlers
while the node lives), and :meth:`RclpyNode.spin` runs the node's own single-threaded executor.

The context is initialised without rclpy's signal handlers: the node executables handle SIGINT
and SIGTERM themselves (:func:`robot_hrl.nodes.common.run_main`) and shut their nodes down in
order; the last node shut down in a process shuts the context down, so no rcl thread outlives
the interpreter.

Importing this module needs rclpy; :func:`robot_hrl.transport.create_node` only imports it when
rclpy is available.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any, Callable

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node as _RosNode
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions

from robot_hrl.msgs import MessageTypeError, ros_type_name
from robot_hrl.transport.interface import (
    COMMAND_QOS,
    Durability,
    EndpointInfo,
    Node,
    Publisher,
    QoS,
    Reliability,
    Subscription,
    Timer,
    TransportError,
)
from robot_hrl.transport.ros_conversion import from_ros, rclpy_message_class, to_ros

_MAX_WAIT_S = 0.05


def _unconvertible(exc: BaseException) -> bool:
    """A sample rclpy could not turn into Python: a string that is not UTF-8 (decoded in C before any callback),
    or pybind11's "Unable to convert call argument '0' to Python object" when the C conversion of a taken sample
    returns no object (Subscription.take_message's py::make_tuple; seen in CI in the launch monitor)."""
    return isinstance(exc, UnicodeDecodeError) or (
        isinstance(exc, RuntimeError) and "Unable to convert call argument" in str(exc))


class _DroppingExecutor(SingleThreadedExecutor):
    """rclpy's single-threaded executor that drops a sample it cannot convert and goes on.

    Catching the failure around ``spin_once`` is not enough: rclpy (Jazzy, ``Executor._make_handler``) takes the
    sample inside the handler before it clears the subscription's ``_executor_event`` and before the ``finally``
    that ends the callback group's execution, so an exception from the take leaves the subscription out of every
    later wait set and the node's default (mutually exclusive) callback group busy for good: every timer and
    subscription of the node stops, silently (the launch monitor went deaf after one such sample and the launch
    never printed its result). The take itself is where the sample is dropped: it returns no work, and the handler
    ends as for an empty take."""

    def __init__(self, on_drop: Callable[[Exception, Any], None]):
        super().__init__()
        if not hasattr(SingleThreadedExecutor, "_take_subscription"):
            raise TransportError("this rclpy has no Executor._take_subscription (robot_hrl is tested on ROS 2 Jazzy's); "
                                 "install the Jazzy wheels (.ci/ros)")
        self._on_drop = on_drop

    def _take_subscription(self, sub):
        try:
            return super()._take_subscription(sub)
        except (UnicodeDecodeError, RuntimeError) as exc:
            if not _unconvertible(exc):
                raise
            self._on_drop(exc, sub)
            return None


class _CtrlCAfterTheTake:
    """Ctrl-C while spinning, raised as KeyboardInterrupt after rclpy's take, not inside it.

    Python's default SIGINT handler raises KeyboardInterrupt in whatever Python code runs next; inside rclpy's take
    that is the message's constructor, called from the C conversion, which then returns no object: pybind11 turns it
    into "Unable to convert call argument '0'", the KeyboardInterrupt is gone (no __context__), and the program goes
    on as if Ctrl-C had not been pressed (seen in CI: the launcher, stopped with SIGINT, never stopped and was
    killed). While spinning on the main thread with Python's default handler in place, the signal only sets a flag
    here, and KeyboardInterrupt is raised when the spin returns. Another handler (the nodes' own) is left alone."""

    def __init__(self):
        self.pressed = False
        self._previous = None

    def _on_sigint(self, signum, frame):  # noqa: ARG002
        self.pressed = True

    def __enter__(self) -> "_CtrlCAfterTheTake":
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self.pressed and exc_type is None:
            raise KeyboardInterrupt
        return False


_CONTEXT_LOCK = threading.Lock()
_CONTEXT_USERS = 0
_WE_INITIALISED = False


def ros_qos(qos: QoS) -> QoSProfile:
    """The rclpy QoSProfile of one of our profiles."""
    if not isinstance(qos, QoS):
        raise TransportError(f"expected a robot_hrl.transport.QoS profile, got {qos!r}")
    if qos.depth < 1:
        raise TransportError(f"QoS depth must be at least 1, got {qos.depth}")
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=qos.depth,
        reliability=ReliabilityPolicy.RELIABLE if qos.reliability is Reliability.RELIABLE
        else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.durability is Durability.TRANSIENT_LOCAL
        else DurabilityPolicy.VOLATILE,
    )


def our_qos(profile: QoSProfile) -> QoS:
    return QoS(
        Reliability.BEST_EFFORT if profile.reliability == ReliabilityPolicy.BEST_EFFORT else Reliability.RELIABLE,
        Durability.TRANSIENT_LOCAL if profile.durability == DurabilityPolicy.TRANSIENT_LOCAL else Durability.VOLATILE,
        depth=max(1, int(profile.depth or 1)),
    )


def _acquire_context(domain_id: int | None) -> None:
    global _CONTEXT_USERS, _WE_INITIALISED
    with _CONTEXT_LOCK:
        if not rclpy.ok():
            rclpy.init(domain_id=domain_id, signal_handler_options=SignalHandlerOptions.NO)
            _WE_INITIALISED = True
        _CONTEXT_USERS += 1


def _release_context() -> None:
    global _CONTEXT_USERS, _WE_INITIALISED
    with _CONTEXT_LOCK:
        _CONTEXT_USERS -= 1
        if _CONTEXT_USERS <= 0 and _WE_INITIALISED:
            rclpy.try_shutdown()
            _WE_INITIALISED = False


class _RosoutHandler(logging.Handler):
    """Forwards the interface's Python log records to the node's rcutils logger (/rosout)."""

    def __init__(self, ros_logger):
        super().__init__()
        self._ros = ros_logger

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if record.levelno >= logging.ERROR:
                self._ros.error(text)
            elif record.levelno >= logging.WARNING:
                self._ros.warning(text)
            elif record.levelno >= logging.INFO:
                self._ros.info(text)
            else:
                self._ros.debug(text)
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


class RclpyPublisher(Publisher):
    def __init__(self, node: "RclpyNode", msg_type: type, topic: str, qos: QoS):
        self.msg_type = msg_type
        self.topic = topic
        self._node = node
        self._ros_type = ros_type_name(msg_type)
        self._pub = node._node.create_publisher(rclpy_message_class(self._ros_type), topic, ros_qos(qos))

    def publish(self, msg: Any) -> None:
        if type(msg) is not self.msg_type:
            raise MessageTypeError(f"publisher on {self.topic} carries {self._ros_type}, "
                                   f"got {type(msg).__module__}.{type(msg).__name__}")
        if self._pub is None:
            raise TransportError(f"publisher on {self.topic} was destroyed (its node was shut down)")
        self._pub.publish(to_ros(msg, "rclpy"))

    def publish_raw(self, cdr: bytes) -> None:
        """Publish serialized CDR bytes (rclpy accepts them in place of a message)."""
        if self._pub is None:
            raise TransportError(f"publisher on {self.topic} was destroyed (its node was shut down)")
        self._pub.publish(bytes(cdr))

    def get_subscription_count(self) -> int:
        return 0 if self._pub is None else self._pub.get_subscription_count()

    def destroy(self) -> None:
        """Remove the publisher from the graph (its node lives on)."""
        pub, self._pub = self._pub, None
        if pub is not None and not self._node._destroyed:
            self._node._node.destroy_publisher(pub)


def _endpoint_info(topic: str, info) -> EndpointInfo:
    """Our EndpointInfo of rclpy's TopicEndpointInfo: node name and namespace, and the first 16 bytes of the
    endpoint's GID (the DDS GUID under rmw_cyclonedds). Writer identity per sample is not available on this
    backend: Jazzy's rclpy MessageInfo carries only timestamps and sequence numbers, no publisher GID, so
    :attr:`Subscription.last_writer_gid` stays None (the sim node keeps the stamp rule here)."""
    return EndpointInfo(topic, info.topic_type, our_qos(info.qos_profile), node_name=info.node_name,
                        node_namespace=info.node_namespace, endpoint_gid=bytes(list(info.endpoint_gid)[:16]))


class RclpySubscription(Subscription):
    def __init__(self, node: "RclpyNode", msg_type: type, topic: str, callback: Callable[[Any], None], qos: QoS,
                 raw: bool):
        self.msg_type = msg_type
        self.topic = topic
        self.received = 0
        self.dropped = 0
        self._node = node
        self._callback = callback

        def deliver(ros_msg):
            if raw:
                self.received += 1
                callback(ros_msg)
                return
            try:
                msg = from_ros(ros_msg, msg_type)
            except Exception as exc:  # noqa: BLE001 - a message we cannot convert: drop, log, count
                self.dropped += 1
                node._on_dropped(self, exc)
                return
            self.received += 1
            callback(msg)

        self._sub = node._node.create_subscription(rclpy_message_class(ros_type_name(msg_type)), topic, deliver,
                                                   ros_qos(qos), raw=raw)
        node._ours[id(self._sub)] = self  # a sample dropped inside rclpy's take is counted here too

    def get_publisher_count(self) -> int:
        return self._node._node.count_publishers(self.topic)

    def destroy(self) -> None:
        if self._sub is not None:
            self._node._ours.pop(id(self._sub), None)
            self._node._node.destroy_subscription(self._sub)
            self._sub = None


class RclpyTimer(Timer):
    def __init__(self, node: "RclpyNode", period_s: float, callback: Callable[[], None]):
        self.period_s = period_s
        self.calls = 0
        self.overruns = 0
        """rcl skips missed periods silently; not counted here."""
        self.last_deadline: float | None = None
        """When the running callback was due, in ``time.perf_counter`` seconds (from rcl's time
        until the next call, which keeps the period's phase), as the Cyclone backend gives it."""
        self._node = node

        def tick():
            self.calls += 1
            until_next = self._timer.time_until_next_call() if self._timer is not None else None
            if until_next is not None:
                self.last_deadline = time.perf_counter() + until_next * 1e-9 - self.period_s
            callback()

        self._timer = node._node.create_timer(period_s, tick)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._node._node.destroy_timer(self._timer)
            self._timer = None


class RclpyNode(Node):
    """A node on rclpy with the interface of :class:`robot_hrl.transport.Node`."""

    def __init__(self, name: str, namespace: str = "", parameters: dict[str, Any] | None = None,
                 domain_id: int | None = None):
        super().__init__(name, namespace, parameters)
        _acquire_context(domain_id)
        try:
            overrides, self._local_only = [], set()
            for key, value in self._parameters.items():
                try:
                    overrides.append(Parameter(key, value=value))
                except Exception:  # noqa: BLE001 - dicts, mixed lists, ...: not a ROS parameter type
                    self._local_only.add(key)
            self._node = _RosNode(name, namespace=self.namespace or None, parameter_overrides=overrides,
                                  automatically_declare_parameters_from_overrides=True)
        except BaseException:
            _release_context()
            raise
        self._logger.addHandler(_RosoutHandler(self._node.get_logger()))
        self._propagated = self._logger.propagate
        self._logger.propagate = False  # rcutils prints it (and sends it to /rosout): one line per record
        self._executor = _DroppingExecutor(self._drop_undecodable)
        self._executor.add_node(self._node)
        self._shutdown = False
        self._spinning = False
        self._destroyed = False
        self._publishers: list[RclpyPublisher] = []
        self.dropped_samples = 0
        self._ours: dict[int, RclpySubscription] = {}

    # ---- topics -------------------------------------------------------------------------------
    def create_publisher(self, msg_type: type, topic: str, qos: QoS = COMMAND_QOS) -> RclpyPublisher:
        if self._shutdown:
            raise TransportError(f"node {self.name!r} was shut down")
        pub = RclpyPublisher(self, msg_type, self.resolve_topic(topic), qos)
        self._publishers.append(pub)
        return pub

    def create_subscription(self, msg_type: type, topic: str, callback: Callable[[Any], None],
                            qos: QoS = COMMAND_QOS, *, raw: bool = False) -> RclpySubscription:
        if not callable(callback):
            raise TransportError(f"subscription callback for {topic!r} is not callable: {callback!r}")
        return RclpySubscription(self, msg_type, self.resolve_topic(topic), callback, qos, raw)

    def _on_dropped(self, sub: RclpySubscription, exc: Exception) -> None:
        self.dropped_samples += 1
        if sub.dropped <= 3 or sub.dropped % 100 == 0:
            self._logger.warning("dropped a %s message on %s that could not be converted (%s: %s); %d so far",
                                 ros_type_name(sub.msg_type), sub.topic, type(exc).__name__, exc, sub.dropped)

    # ---- time ---------------------------------------------------------------------------------
    def create_timer(self, period_s: float, callback: Callable[[], None]) -> RclpyTimer:
        if isinstance(period_s, bool) or not isinstance(period_s, (int, float)) or not period_s > 0:
            raise TransportError(f"timer period must be a positive number of seconds, got {period_s!r}")
        return RclpyTimer(self, float(period_s), callback)

    def now(self) -> float:
        return self._node.get_clock().now().nanoseconds * 1e-9

    # ---- parameters ---------------------------------------------------------------------------
    def declare_parameter(self, name: str, default: Any) -> Any:
        if name in self._local_only:  # a value ROS parameters cannot hold: kept on our side
            return self._parameters[name]
        if self._node.has_parameter(name):
            value = self._node.get_parameter(name).value
        else:
            value = self._node.declare_parameter(name, default).value
        self._parameters[name] = value
        return value

    def get_parameter(self, name: str) -> Any:
        if name in self._local_only:
            return self._parameters[name]
        if not self._node.has_parameter(name):
            raise KeyError(f"parameter {name!r} was not declared by node {self.name!r}")
        return self._node.get_parameter(name).value

    # ---- graph --------------------------------------------------------------------------------
    def get_topic_names_and_types(self) -> list[tuple[str, list[str]]]:
        return sorted((name, sorted(types)) for name, types in self._node.get_topic_names_and_types())

    def get_publishers_info_by_topic(self, topic: str):
        return [_endpoint_info(topic, info) for info in self._node.get_publishers_info_by_topic(topic)]

    def get_subscriptions_info_by_topic(self, topic: str):
        return [_endpoint_info(topic, info) for info in self._node.get_subscriptions_info_by_topic(topic)]

    def get_node_names_and_namespaces(self) -> list[tuple[str, str]]:
        return self._node.get_node_names_and_namespaces()

    # ---- executor -----------------------------------------------------------------------------
    def spin_once(self, timeout_s: float = 0.0) -> None:
        self.spin(until=None, _once=timeout_s)

    def spin(self, until: Callable[[], bool] | None = None, _once: float | None = None) -> None:
        if self._shutdown:
            raise TransportError(f"node {self.name!r} was shut down")
        self._spinning = True
        try:
            with _CtrlCAfterTheTake() as ctrl_c:
                if _once is not None:
                    self._spin_once_guarded(_once)
                    return
                while not self._shutdown and rclpy.ok() and not ctrl_c.pressed:
                    if until is not None and until():
                        return
                    self._spin_once_guarded(_MAX_WAIT_S)
        finally:
            self._spinning = False
            if self._shutdown:
                self._destroy()

    def _spin_once_guarded(self, timeout_s: float) -> None:
        self._executor.spin_once(timeout_sec=timeout_s)  # a sample rclpy cannot convert: _DroppingExecutor

    def _drop_undecodable(self, exc: Exception, rclpy_sub: Any = None) -> None:
        """Count a sample rclpy could not convert to Python (on the node, and on our subscription, which the
        nodes' input reports read as ``<topic>.undecodable``), and say so (the first three, then every 100th), with
        the topic and the Python error under pybind11's (the conversion's own, where it left one)."""
        self.dropped_samples += 1
        ours = self._ours.get(id(rclpy_sub))
        if ours is not None:
            ours.dropped += 1
        topic = getattr(rclpy_sub, "topic_name", "?")
        if self.dropped_samples <= 3 or self.dropped_samples % 100 == 0:
            under = exc.__cause__ or exc.__context__
            why = f"; under it {type(under).__name__}: {under}" if under is not None else ""
            self._logger.warning("dropped an undecodable message on %s (%s: %s%s); %d dropped so far", topic,
                                 type(exc).__name__, exc, why, self.dropped_samples)

    def shutdown(self) -> None:
        """Stop spinning and destroy the node (after the running callback, when called from one)."""
        if self._shutdown:
            return
        self._shutdown = True
        if not self._spinning:
            self._destroy()

    def _destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        for handler in list(self._logger.handlers):
            if isinstance(handler, _RosoutHandler):
                self._logger.removeHandler(handler)
        self._logger.propagate = self._propagated
        for pub in self._publishers:
            pub._pub = None  # destroyed with the node below
        self._executor.remove_node(self._node)
        self._executor.shutdown()
        self._node.destroy_node()
        _release_context()

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown

    # rclpy's own node, for what the interface does not cover (tf2, services)
    @property
    def ros_node(self) -> _RosNode:
        return self._node

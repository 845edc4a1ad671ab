"""The ROS-free launcher: the navigation graph as separate processes, on one transport backend.

Every node, the launcher's own monitor and recorder, and the ``/task`` it sends run on the backend
of :attr:`LaunchOptions.backend`: Cyclone DDS (the default, no ROS 2 needed) or rclpy (a ROS 2
install, or the ROS 2 Jazzy wheels; Fast DDS, ROS 2's default RMW). By default nothing leaves the
machine: on Cyclone DDS the loopback profile of :mod:`robot_hrl.transport.dds_config` (which a stock
ROS 2 with Fast DDS on the same machine discovers with its default settings), on rclpy
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``. ``loopback=False`` (``--network``) uses every interface.

It starts the nodes of :mod:`robot_hrl.launch.graph` with the parameters of
``launch/params/navigation.yaml`` (the ROS 2 launch file reads the same two), watches the run
with a node of its own (live summary, goals, shield interventions, violations), records every
topic to MCAP (rosbag2), and stops by itself: task done and landed, a node died, or the timeout.
Then it writes the result (JSON), a PNG of the flown path and prints a summary.

The sim node is started as ``python -m sim.nodes.sim_node``: robot_hrl never imports sim.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robot_hrl.errors import ConfigError
from robot_hrl.launch import graph
from robot_hrl.launch.graph import DEFAULT_BACKEND, LAUNCH_BACKENDS
from robot_hrl.launch.monitor import RunMonitor
from robot_hrl.nodes.common import STACKS_SIGNAL
from robot_hrl.nodes.resources import SOURCE_ROOT, resolve_resource

SIGTERM_TIMEOUT_S = 5.0
"""A node still running this long after SIGINT gets SIGTERM (ROS 2 launch's ``sigterm_timeout``, default 5 s:
ros2/launch, ``launch/actions/execute_local.py``). Its threads' stacks are written to its log first."""
SIGKILL_TIMEOUT_S = 5.0
"""... and this long after SIGTERM, SIGKILL (launch's ``sigkill_timeout``, default 5 s); its exit code says so."""
TASK_MATCH_S = 30.0
"""How long the launcher waits for the planner's /task subscription before it gives up on sending."""


@dataclass
class LaunchOptions:
    arguments: dict[str, str]
    """Launch arguments (graph.LAUNCH_ARGUMENTS)."""
    out: Path | None = None
    """Run folder: logs, recording, plot, result."""
    result: Path | None = None
    timeout_s: float = 300.0
    """Wall-clock limit of the run."""
    domain_id: int | None = None
    loopback: bool = True
    """Loopback-only Cyclone DDS (nothing leaves the machine) unless CYCLONEDDS_URI is set."""
    record: bool = True
    live: bool = True
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra parameters per node name (on top of the parameters file and the arguments)."""
    params_file: str | None = None
    backend: str = DEFAULT_BACKEND
    """Transport of every node, the monitor and the /task sender: ``cyclonedds`` or ``rclpy``."""


@dataclass
class RunResult:
    success: bool
    reason: str
    goals_reached: int
    goals_total: int
    wall_time_s: float
    sim_time_s: float
    interventions: dict[str, int]
    violations: int
    violation_events: list[dict]
    collisions: int
    deadline: dict[str, str]
    errors: list[str]
    recording: str | None
    plot: str | None
    logs: str | None
    exit_codes: dict[str, int | None]
    stop_s: dict[str, float] = field(default_factory=dict)
    """Seconds from the launcher's SIGINT to each node's exit (SIGTERM after 5 s, SIGKILL after 10 s)."""
    planner: str | None = None
    """The planner that made the plan flown (symbolic, llm, vlm, learned), from /planner/status."""
    world: str | None = None
    """The world file flown (a generated room: the file written into the run folder)."""
    fallback_reason: str | None = None
    """Why the LLM/VLM planner fell back to the symbolic one, if it did."""
    backend: str = DEFAULT_BACKEND

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Launcher:
    def __init__(self, options: LaunchOptions):
        self.o = options
        try:
            self.args = graph.check_arguments(options.arguments)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if options.backend not in LAUNCH_BACKENDS:
            raise ConfigError(f"--backend {options.backend!r}: choose one of {', '.join(LAUNCH_BACKENDS)}")
        if options.backend == "rclpy":
            from robot_hrl.transport import rclpy_available

            if not rclpy_available():
                raise ConfigError("--backend rclpy: rclpy cannot be imported. Source a ROS 2 install "
                                  "(source /opt/ros/jazzy/setup.bash) or install the ROS 2 Jazzy wheels "
                                  "(see docs/nodes_launch.md), or use --backend cyclonedds")
        from robot_hrl.world import load_world

        out = options.out or Path(tempfile.mkdtemp(prefix="robot_hrl_run_"))
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.room = None
        """The generated room's task file (``--world room:<density>:<seed>``), else None."""
        if self.args["world"].startswith(ROOM_PREFIX):
            self.args["world"], self.room = write_room(self.args["world"], self.out / "world")
            if not self.args["task"].strip():
                self.args["task"] = self.room["task"]
        self.world = load_world(resolve_resource(self.args["world"], "world file"))
        resolve_resource(self.args["model"], "model file")  # fail early, with the places tried
        if self.args["planner"] == "learned":
            resolve_resource(self.args["navigate_model"], "navigate model")
        self.params_file = str(resolve_resource(options.params_file or graph.PARAMS_FILE, "parameters file"))
        (self.out / "logs").mkdir(exist_ok=True)
        self.domain_id = options.domain_id
        if self.domain_id is None:
            from robot_hrl.transport.dds_config import domain_id_from_env

            self.domain_id = domain_id_from_env()
        self.user_dds_config = bool(os.environ.get("CYCLONEDDS_URI"))
        """The user set CYCLONEDDS_URI (the launcher then leaves Cyclone DDS's configuration alone)."""
        self.env = self._environment()
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Any] = {}
        self.stop_s: dict[str, float] = {}
        """Seconds from the launcher's SIGINT to each node's exit (:meth:`stop_nodes`)."""
        self.monitor = RunMonitor(self.world)
        self.node = None
        self.recorder = None

    # ---- environment and processes ------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        from robot_hrl.transport.dds_config import LOCALHOST_RANGE, RANGE_VARIABLE, loopback_env

        if self.o.loopback and self.o.backend == "cyclonedds" and not self.user_dds_config:
            env.update(loopback_env(self.domain_id))
        if self.o.loopback and self.o.backend == "rclpy" and not os.environ.get(RANGE_VARIABLE):
            env[RANGE_VARIABLE] = LOCALHOST_RANGE  # Fast DDS: discovery on this machine only
        env["ROS_DOMAIN_ID"] = str(self.domain_id)
        # The node processes import robot_hrl and sim from the same place as this process.
        path = [str(SOURCE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
        return env

    def _apply_env(self) -> None:
        """This process joins the same domain, with the same DDS configuration, before its node starts."""
        from robot_hrl.transport.dds_config import RANGE_VARIABLE

        for key in ("CYCLONEDDS_URI", "ROS_DOMAIN_ID", RANGE_VARIABLE):
            if key in self.env:
                os.environ[key] = self.env[key]

    def command(self, spec: graph.NodeSpec) -> list[str]:
        overrides = graph.node_parameters(spec, self.args)
        overrides.pop("task", None)  # sent on /task instead (latched), so that the recording holds it
        overrides.update(self.o.params.get(spec.name, {}))
        override_file = self.out / "logs" / f"{spec.name}.params.yaml"
        override_file.write_text(yaml.safe_dump({spec.name: {"ros__parameters": overrides}}, sort_keys=False))
        cmd = [sys.executable, "-m", spec.module, "--backend", self.o.backend,
               "--ros-args", "-r", f"__node:={spec.name}"]
        if self.args["namespace"]:
            cmd += ["-r", f"__ns:=/{self.args['namespace'].strip('/')}"]
        return cmd + ["--params-file", self.params_file, "--params-file", str(override_file)]

    def start_nodes(self) -> None:
        for spec in graph.nodes_to_launch(self.args):
            log = open(self.out / "logs" / f"{spec.name}.log", "w")  # noqa: SIM115 - closed in stop()
            self.logs[spec.name] = log
            self.procs[spec.name] = subprocess.Popen(self.command(spec), env=self.env, stdout=log,
                                                     stderr=subprocess.STDOUT, cwd=os.getcwd(),
                                                     start_new_session=True)

    def stop_nodes(self) -> dict[str, int | None]:
        """Stop every node the way ROS 2 launch does: SIGINT, SIGTERM after :data:`SIGTERM_TIMEOUT_S`, SIGKILL after
        :data:`SIGKILL_TIMEOUT_S` more. Planner first (no new subgoals), then the skill node, then the sim. A node
        that needs SIGTERM first writes its threads' stacks to its log, so that the log says where it hung.
        :attr:`stop_s` holds each node's seconds from SIGINT to exit; the exit codes are returned."""
        t0 = time.monotonic()
        running = {name: proc for name, proc in self.procs.items() if proc.poll() is None}
        order = ("planner_node", "skill_node", "sim_node")
        for name in sorted(running, key=lambda n: order.index(n) if n in order else len(order)):
            running[name].send_signal(signal.SIGINT)
        for sig, after_s in ((signal.SIGTERM, SIGTERM_TIMEOUT_S), (signal.SIGKILL, SIGTERM_TIMEOUT_S + SIGKILL_TIMEOUT_S),
                             (None, SIGTERM_TIMEOUT_S + SIGKILL_TIMEOUT_S + 5.0)):
            while running and time.monotonic() - t0 < after_s:
                for name, proc in list(running.items()):
                    if proc.poll() is not None:
                        self.stop_s[name] = round(time.monotonic() - t0, 3)
                        del running[name]
                time.sleep(0.01)
            if not running or sig is None:
                break
            for name, proc in running.items():
                if sig == signal.SIGTERM:
                    proc.send_signal(STACKS_SIGNAL)
                print(f"launch: {name} still running {time.monotonic() - t0:.1f} s after SIGINT: sending "
                      f"{signal.Signals(sig).name} (its log: {self.out / 'logs' / (name + '.log')})",
                      file=sys.stderr, flush=True)
            if sig == signal.SIGTERM:
                time.sleep(0.2)  # the stacks written before SIGTERM
            for proc in running.values():
                proc.send_signal(sig)
        for log in self.logs.values():
            log.close()
        return {name: proc.returncode for name, proc in self.procs.items()}

    def dead_nodes(self) -> list[str]:
        return [name for name, p in self.procs.items() if p.poll() is not None]

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.out / "logs" / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ---- the launcher's own node --------------------------------------------------------------
    def start_monitor(self) -> None:
        from robot_hrl.msgs import DiagnosticArray, Odometry, Path as PathMsg, PoseStamped, String, seconds_from_time
        from robot_hrl.transport import LATCHED_QOS, SENSOR_QOS, create_node
        from robot_hrl.transport.interface import COMMAND_QOS

        self._apply_env()
        # Its own clock is not used (times come from the message stamps): no /clock subscription.
        node = create_node("launch_monitor", namespace=self.args["namespace"],
                           parameters={"use_sim_time": False}, backend=self.o.backend, domain_id=self.domain_id)
        self.node = node
        m = self.monitor

        def odom(msg):
            m.count("/odom")
            p = msg.pose.pose.position
            m.on_odom(seconds_from_time(msg.header.stamp), (p.x, p.y, p.z))

        def diag(msg):
            m.count("/diagnostics")
            t = seconds_from_time(msg.header.stamp)
            for st in msg.status:
                m.on_diagnostic(st.name, int(st.level), st.message, {kv.key: kv.value for kv in st.values}, t)

        def plan(msg):
            m.on_plan([(ps.pose.position.x, ps.pose.position.y, ps.pose.position.z) for ps in msg.poses])

        def subgoal(msg):
            p = msg.pose.position
            m.on_subgoal((p.x, p.y, p.z))

        node.create_subscription(Odometry, "/odom", odom, SENSOR_QOS)
        node.create_subscription(DiagnosticArray, "/diagnostics", diag, COMMAND_QOS)
        node.create_subscription(String, "/planner/status", lambda s: m.on_planner_status(s.data), LATCHED_QOS)
        node.create_subscription(String, "/skill/status", lambda s: m.on_skill_status(s.data), COMMAND_QOS)
        node.create_subscription(PathMsg, "/plan", plan, LATCHED_QOS)
        node.create_subscription(PoseStamped, "/subgoal", subgoal, COMMAND_QOS)
        # Latched for a late `ros2 topic echo --qos-durability transient_local`; the planner subscribes
        # with ROS 2's default profile (volatile), so the task is sent once its subscription matched.
        self.task_pub = node.create_publisher(String, "/task", LATCHED_QOS)

    def start_recorder(self) -> Path | None:
        if not self.o.record:
            return None
        from robot_hrl.launch.recording import start_recording

        path = self.out / "recording"
        if path.is_dir() and (path / "metadata.yaml").is_file():
            import shutil

            shutil.rmtree(path)  # the bag of an earlier run in this folder
        self.recorder = start_recording(self.node, path, graph.TOPICS, self.args["namespace"])
        return path

    # ---- run ----------------------------------------------------------------------------------
    def run(self) -> RunResult:
        from robot_hrl.msgs import String

        t0 = time.monotonic()
        reason, success = "timeout", False
        recording = None
        self.start_monitor()
        try:
            recording = self.start_recorder()
            self.start_nodes()
            # our own readers of /task (the recorder) match at once; the planner's once discovered
            local_readers = self.task_pub.get_subscription_count()
            print(self.discovery_note(task_readers=local_readers + 1), flush=True)
            task = self.args["task"].strip()
            live = _LiveSummary(self.monitor, enabled=self.o.live)
            with live:
                while True:
                    self.node.spin(until=_after(0.1))
                    if task and self.task_pub.get_subscription_count() > local_readers:
                        self.task_pub.publish(String(data=self.args["task"]))
                        task = ""
                    elif task and time.monotonic() - t0 > TASK_MATCH_S:
                        reason = (f"the planner's /task subscription was not matched within {TASK_MATCH_S:g} s "
                                  f"(backend {self.o.backend}); see {self.out / 'logs'}")
                        break
                    live.update(time.monotonic() - t0)
                    if self.monitor.finished():
                        reason, success = "task done, landed", True
                        break
                    dead = self.dead_nodes()
                    if dead:
                        reason = "node exited: " + ", ".join(
                            f"{n} (exit code {self.procs[n].returncode})" for n in dead)
                        break
                    if time.monotonic() - t0 > self.o.timeout_s:
                        reason = f"timeout after {self.o.timeout_s:g} s"
                        break
        except KeyboardInterrupt:
            reason = "interrupted"
        finally:
            wall = time.monotonic() - t0
            codes = self.stop_nodes() if self.procs else {}
            if self.recorder is not None:
                self.recorder.close()
            if self.node is not None:
                self.node.shutdown()
        snap = self.monitor.snapshot()
        reached, total = int(snap["planner"].get("goals_reached", 0)), int(snap["planner"].get("goals_total", 0))
        if success and reached < total:
            success = False
            reason += f", but only {reached} of {total} goals reached ({snap['planner'].get('goals_failed')})"
        if success and self.monitor.violations:
            success = False
            reason += f", but {len(self.monitor.violations)} safety violation(s)"
        plot = None
        try:
            from robot_hrl.launch.plot import plot_flight

            plot = str(plot_flight(self.world, self.monitor.path, self.out / "flight.png", self.monitor.plan,
                                   self.monitor.subgoals, title=f"{self.world.name}: {self.args['task'][:60]}"))
        except Exception as exc:  # noqa: BLE001 - a plot must not lose the result
            snap["errors"].append(f"plot failed: {exc}")
        if not success:
            for name in self.procs:
                tail = self.log_tail(name)
                if tail and (codes.get(name) not in (0, None, -2, -15) or "Traceback" in tail):
                    snap["errors"].append(f"{name} log tail:\n{tail}")
        result = RunResult(
            success=success, reason=reason,
            goals_reached=reached, goals_total=total,
            wall_time_s=round(wall, 3), sim_time_s=round(snap["elapsed_stamp_s"], 3),
            interventions=snap["interventions"], violations=len(self.monitor.violations),
            violation_events=[v.__dict__ for v in self.monitor.violations], collisions=snap["collisions"],
            deadline=snap["deadline"], errors=snap["errors"],
            recording=str(recording) if recording else None, plot=plot, logs=str(self.out / "logs"),
            exit_codes=codes, stop_s=dict(self.stop_s), planner=snap["planner"].get("planner"),
            fallback_reason=snap["planner"].get("fallback_reason"), backend=self.o.backend, world=self.args["world"],
        )
        text = json.dumps(result.to_dict(), indent=2, default=str)
        (self.out / "result.json").write_text(text)
        if self.o.result is not None:
            Path(self.o.result).parent.mkdir(parents=True, exist_ok=True)
            Path(self.o.result).write_text(text)
        return result


    def discovery_note(self, task_readers: int = 1) -> str:
        """One line for a ROS 2 user on this machine: how to see and drive this graph. ``task_readers``: the
        /task subscriptions of the graph (the planner's, and the recorder's when the run is recorded); a
        ``--once`` publisher waits for all of them (``-w``), or its one sample may go to the recorder alone."""
        ns = self.args["namespace"].strip("/")
        topic = f"/{ns}/task" if ns else "/task"
        head = f"graph on backend {self.o.backend}, ROS_DOMAIN_ID={self.domain_id}"
        if not self.o.loopback or (self.o.backend == "cyclonedds" and self.user_dds_config):
            return f"{head}: ROS 2 (same ROS_DOMAIN_ID) sees it, e.g. `ros2 topic echo {topic}`"
        if self.o.backend == "rclpy":
            return (f"{head}, discovery on this machine only ({self._range_note()}): a ROS 2 here sees it with "
                    f"its default settings, e.g. `ros2 topic pub --once -w {task_readers} {topic} std_msgs/msg/String "
                    f"\"{{data: 'land'}}\"` (-w: the {task_readers} /task reader(s), the planner"
                    f"{' and the recorder' if task_readers > 1 else ''})")
        profile = self.out / "logs" / "cyclonedds_loopback.xml"
        profile.write_text(self.env.get("CYCLONEDDS_URI", ""))
        return (f"{head}, loopback only: ROS 2 with Fast DDS (the default RMW) sees it with its default settings; "
                f"with rmw_cyclonedds_cpp set CYCLONEDDS_URI=file://{profile.resolve()} (or launch with --network)")

    def _range_note(self) -> str:
        from robot_hrl.transport.dds_config import RANGE_VARIABLE

        return f"{RANGE_VARIABLE}={self.env.get(RANGE_VARIABLE, '')}"


ROOM_PREFIX = "room:"
"""``--world room:<density>:<seed>``: a generated room (robot_hrl.world.rooms)."""


def write_room(spec: str, directory: Path) -> tuple[str, dict]:
    """``room:<density>:<seed>`` -> (the world file written into ``directory``, its task file's content)."""
    from robot_hrl.errors import WorldError
    from robot_hrl.world.rooms import DENSITIES, generate_room, load_room_task, save_room, split_of_seed

    parts = spec[len(ROOM_PREFIX):].split(":")
    if len(parts) != 2 or parts[0] not in DENSITIES or not parts[1].strip().isdigit():
        raise ConfigError(f"--world {spec!r}: write room:<density>:<seed>, density one of {list(DENSITIES)}, seed a "
                          "non-negative integer (>= 1000000000: a held-out evaluation room), e.g. room:dense:1000000003")
    seed = int(parts[1])
    try:
        path = save_room(generate_room(parts[0], seed, split_of_seed(seed)), directory)
    except WorldError as exc:
        raise ConfigError(f"--world {spec!r}: {exc}") from None
    return str(path.resolve()), load_room_task(path)


def _after(seconds: float):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end


class _LiveSummary:
    """A rich live table of the run (falls back to nothing when disabled)."""

    def __init__(self, monitor: RunMonitor, enabled: bool = True):
        self.m = monitor
        self.enabled = enabled
        self._live = None

    def __enter__(self):
        if self.enabled:
            from rich.live import Live

            self._live = Live(self._table(0.0), refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc):
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, wall_s: float) -> None:
        if self._live is not None:
            self._live.update(self._table(wall_s))

    def _table(self, wall_s: float):
        from rich.table import Table

        s = self.m.snapshot()
        p, k, sh = s["planner"], s["skill"], s["shield"]
        t = Table(title="robot-hrl launch navigation", show_header=False, expand=False)
        t.add_column("what", style="bold")
        t.add_column("value")
        t.add_row("time", f"wall {wall_s:6.1f} s   sim {s['sim_time_s']:6.1f} s")
        t.add_row("planner", f"{p.get('state', 'starting')}  goal {p.get('goals_reached', 0)}/{p.get('goals_total', 0)}"
                  f"  {p.get('current_goal', '')}")
        sg = k.get("subgoal")
        sg_text = "-" if not sg else "(" + ", ".join(f"{v:.2f}" for v in sg) + ")"
        dist = k.get("distance")
        t.add_row("skill", f"{k.get('state', 'starting')}  subgoal {sg_text}  distance "
                  f"{'-' if dist is None else f'{dist:.2f} m'}")
        t.add_row("shield", f"mode {sh.get('mode', '-')}  " + (", ".join(
            f"{u}: {n}" for u, n in sorted(s["interventions"].items()) if n) or "no interventions"))
        t.add_row("safety", f"violations {s['violations']}  collisions {s['collisions']}")
        for err in s["errors"][-2:]:
            t.add_row("error", f"[red]{err}[/red]")
        return t

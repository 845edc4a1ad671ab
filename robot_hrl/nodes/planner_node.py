"""The planner node: task in, subgoals out, one at a time, as the skill reaches them.

Topics (relative to the node's namespace):

- in  ``/task`` std_msgs/String (latched): the task language (``takeoff 1; goto red_box; land``)
  or its JSON form (``{"steps": [...]}``); a new task replaces the current one.
- in  ``/odom`` nav_msgs/Odometry: where the robot is (the start of each plan). Every sample is judged by the
  same validator as the skill node's (the robot's shield YAML's ``odometry`` unit,
  :meth:`robot_hrl.safety.units.odometry.OdometryUnit.for_robot`: frames, stamps, jumps, a frozen or replayed
  pose); a refused one is dropped (the last good position is kept), counted on ``/diagnostics``
  (``planner_node: inputs``) and named in ``/planner/status`` (``odom_refused``, ``odom_last_refusal``).
- in  ``/skill/status`` std_msgs/String JSON from the skill node: ``reached`` advances to the
  next subgoal, ``blocked`` (held off its subgoal) triggers a replan, ``landed`` ends a landing.
  It is validated (:mod:`robot_hrl.nodes.skill_status`); a malformed status is refused.
- out ``/plan`` nav_msgs/Path (latched): every subgoal of the current plan.
- out ``/subgoal`` geometry_msgs/PoseStamped (reliable): the current subgoal, re-sent at
  ``subgoal_rate_hz`` as a heartbeat (the skill node holds, then lands, when it stops). A
  landing is a subgoal on the floor (z at the world's floor): the skill node lands under it.
- out ``/planner/status`` std_msgs/String JSON (latched): state (idle, waiting_for_odom,
  planning, executing, hovering, landing, done, error), goals reached / total, current goal,
  the planner that made the plan and any fallback reason, error.
- out ``/diagnostics``: the plan, and a malformed or impossible task as an ERROR with the reason;
  ``planner_node: inputs``: what was dropped on which topic, and why.

Planning runs off the executor thread (one worker), within ``planning_timeout_s``: meanwhile
the heartbeat keeps flowing and the status says ``planning``. A newer task cancels the plan
being made. No input ends the node: every callback is guarded
(:mod:`robot_hrl.nodes.input_guard`), and every number that goes into a plan or a status is
checked finite.

A task that cannot be parsed or planned changes nothing the robot does: the current subgoal
(if any) keeps being sent, so the robot keeps hovering where it is safe.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from robot_hrl.errors import PlanningError, RobotHrlError
from robot_hrl.msgs import DiagnosticArray, Odometry, Path, String
from robot_hrl.nodes.common import ERROR, OK, WARN, diag_array, diag_status, json_string, pose_stamped, run_main
from robot_hrl.planning.deadline import PlanningDeadline
from robot_hrl.planning.task import MAX_TASK_CHARS
from robot_hrl.planning.untrusted import plain
from robot_hrl.transport.interface import COMMAND_QOS, INPUT_QOS, LATCHED_QOS, SENSOR_QOS

GOAL_ACTIONS = ("takeoff", "goto", "land")
PLANNER_KINDS = ("symbolic", "llm", "vlm", "learned")
"""``learned``: the map-free navigate level (robot_hrl.planning.learned) flies every goto step (robot_hrl.nodes.planner_learned)."""
SAME_SUBGOAL_M = 1e-3
SYMBOLIC_PLANNING_TIMEOUT_S = 10.0
"""The default planning deadline of the symbolic planner (tasks within the limits plan in well under
a second on the demo world; see benchmarks/README.md); an LLM/VLM planner adds its requests."""
RESULT_POLL_S = 0.05
"""How often the executor looks for a finished plan."""


@dataclass
class PlannerConfig:
    blocked_replan_s: float = 2.0
    """Replan after the skill has reported 'blocked' this long."""
    max_replans: int = 3
    """Replans per step; then the step is abandoned (reported) and the plan goes on."""
    pass_radius_m: float = 0.3
    """An intermediate subgoal on a straight stretch counts as passed within this distance (no
    need to stop there); the last one of a step must be 'reached' (within the skill's radius, slow)."""
    turn_pass_radius_m: float = 0.12
    """At a turning point (the path bends by more than ``straight_deg``) the robot must come this
    close before the next subgoal is sent, so that it does not cut the corner round an obstacle."""
    straight_deg: float = 20.0


@dataclass
class PlanJob:
    """One planning call (a task, or a replan), with its deadline."""

    kind: str
    """``task`` or ``replan``."""
    text: str | None
    """The task (``task`` jobs)."""
    deadline: PlanningDeadline
    run: Callable[[PlanningDeadline], Any]
    """Makes the plan (in the worker thread); raises PlanningError."""
    started_s: float
    """Node time when it was asked for."""
    state_before: str


def run_job(job: PlanJob) -> tuple[Any, Exception | None]:
    """(plan, None) or (None, the error). Any exception is an error: a planner bug must not stop the robot."""
    try:
        return job.run(job.deadline), None
    except PlanningError as exc:
        return None, exc
    except Exception as exc:  # noqa: BLE001
        return None, PlanningError(f"the planner failed on this task: {type(exc).__name__}: {plain(str(exc), 300)}")


@dataclass
class PlannerCore:
    """Plan execution, without I/O: feed it tasks, positions and skill statuses; read the subgoal.

    Planning goes through :attr:`runner`: None plans at once, in the caller's thread (tests, tools);
    the node's runner plans in a worker thread and hands the outcome back with :meth:`finish_job`,
    and meanwhile the state is ``planning``."""

    planner: Any
    """A planner with ``plan(task, start_position_w, deadline=...)`` and ``replan(plan, position_w, ...,
    deadline=...)`` (robot_hrl.planning)."""
    floor_z: float = 0.0
    config: PlannerConfig = field(default_factory=PlannerConfig)
    planning_timeout_s: float = SYMBOLIC_PLANNING_TIMEOUT_S
    """How long one plan or replan may take."""
    runner: Callable[[PlanJob], None] | None = None
    plan: Any = None
    step_index: int = 0
    sub_index: int = 0
    goals_reached: int = 0
    goals_total: int = 0
    goals_failed: list[str] = field(default_factory=list)
    state: str = "idle"
    error: str | None = None
    task_text: str | None = None
    position: np.ndarray | None = None
    pending_task: Any = None
    hover_until: float | None = None
    blocked_since: float | None = None
    replans: int = 0
    plan_version: int = 0
    job: PlanJob | None = None
    """The plan being made, if any."""
    events: list[str] = field(default_factory=list)
    odom_refused: int = 0
    """Odometry samples the validator refused (the node's; robot_hrl.safety.units.odometry)."""
    odom_last_refusal: str | None = None

    # ---- inputs -------------------------------------------------------------------------------
    def on_position(self, position) -> None:
        p = np.asarray(position, dtype=np.float64).reshape(3)
        if np.all(np.isfinite(p)):
            self.position = p

    def on_task(self, task: Any, now: float) -> str | None:
        """Plan ``task`` from the current position. Returns an error message (nothing changes) or None
        (planned, or planning in the worker: the outcome comes through :meth:`finish_job`)."""
        if isinstance(task, str):
            text = task.strip()
            if not text:
                return self._reject("the task is empty; e.g. `takeoff 1.0; goto red_box; land`")
        elif isinstance(task, dict):
            try:
                text = json.dumps(task, allow_nan=False)
            except (ValueError, TypeError, RecursionError) as exc:
                return self._reject(f"the task dict is not JSON: {plain(str(exc), 200)}")
        else:
            return self._reject(f"a task must be text or JSON, got {type(task).__name__}")
        if len(text) > MAX_TASK_CHARS:
            return self._reject(f"the task is {len(text)} characters; at most {MAX_TASK_CHARS} are accepted "
                                "(at most 64 steps); send a shorter task")
        if self.position is None:
            self.pending_task = text
            self.state = "waiting_for_odom"
            return None
        if self.job is not None:
            self.job.deadline.cancel("a newer task arrived")
            self.events.append(f"cancelled the {self.job.kind} being planned: a newer task arrived")
        start = self.position.copy()
        job = PlanJob("task", text, PlanningDeadline(self.planning_timeout_s),
                      lambda deadline: self.planner.plan(text, start, deadline=deadline), now,
                      self.state if self.job is None else self.job.state_before)
        return self._launch(job, now)

    def _launch(self, job: PlanJob, now: float) -> str | None:
        self.job = job
        if self.runner is None:
            plan, error = run_job(job)
            return self.finish_job(job, plan, error, now)[1]
        self.state = "planning"
        self.runner(job)
        return None

    def finish_job(self, job: PlanJob, plan, error: Exception | None, now: float) -> tuple[bool, str | None]:
        """Apply a finished job's outcome. Returns (applied, error message); a job that was superseded
        by a newer one is not applied."""
        if job is not self.job:
            return False, None
        self.job = None
        if job.kind == "task":
            if error is not None:
                return True, self._reject(str(error))
            self.task_text = job.text
            self.error = None
            self.goals_failed = []
            self.goals_reached = 0
            self.goals_total = len(plan.goals)
            self._set_plan(plan)
            self.events.append(f"planned {len(plan.steps)} steps, {len(plan.subgoals)} subgoals ({plan.planner})")
            self._enter_step(now)
            return True, None
        # a replan
        if error is not None:
            self.events.append(f"replan failed: {error}")
            self.replans += 1
            self.state = job.state_before
            return True, None
        replans = self.replans + 1
        self._set_plan(plan)
        self.replans = replans
        self.events.append(f"replanned ({replans}) from {np.round(self.position, 2).tolist()}")
        self._enter_step(now)
        return True, None

    def _reject(self, message: str) -> str:
        self.error = message
        self.state = "error"
        self.events.append(f"task rejected: {message}")
        return message

    def _set_plan(self, plan) -> None:
        self.plan = plan
        self.plan_version += 1
        self.step_index = 0
        self.sub_index = 0
        self.blocked_since = None
        self.replans = 0

    def poll_pending(self, now: float) -> str | None:
        if self.pending_task is not None and self.position is not None:
            task, self.pending_task = self.pending_task, None
            return self.on_task(task, now)
        return None

    def _same_subgoal(self, requested) -> bool:
        current = self.current_subgoal()
        if current is None or requested is None:
            return False
        try:
            r = np.asarray(requested, dtype=np.float64).reshape(3)
        except (ValueError, TypeError):
            return False
        d = np.abs(r - current)
        return bool(np.all(np.isfinite(d)) and float(np.max(d)) < SAME_SUBGOAL_M)

    def on_skill_status(self, status: dict, now: float) -> None:
        if self.plan is None or self.state == "error" or self.job is not None:
            return
        step = self.current_step
        if step is None:
            return
        same = self._same_subgoal(status.get("requested"))
        state = status.get("state")
        if step.action == "land":
            if state == "landed":
                self._complete_step(now)
            return
        if not same:
            return
        last = self.sub_index + 1 >= len(step.subgoals)
        distance = status.get("distance")
        passed = (not last and step.action != "hover" and state in ("tracking", "reached")
                  and isinstance(distance, (int, float)) and not isinstance(distance, bool)
                  and distance <= self._pass_radius(step))
        if state == "reached" or passed:
            self.blocked_since = None
            if step.action == "hover":
                return  # hover ends by time (update)
            if self.sub_index + 1 < len(step.subgoals):
                self.sub_index += 1
            else:
                self._complete_step(now)
        elif state == "blocked":
            if self.blocked_since is None:
                self.blocked_since = now
            elif now - self.blocked_since >= self.config.blocked_replan_s:
                self._replan(now)
        elif state in ("tracking", "idle"):
            self.blocked_since = None

    def _pass_radius(self, step) -> float:
        """How close the robot must come to the current (intermediate) subgoal: wide on a straight
        stretch, tight where the path turns (turns are where the path skirts obstacles)."""
        i = self.sub_index
        subs = step.subgoals
        if step.path is not None and len(step.path):
            before = np.asarray(step.path[0], dtype=np.float64) if i == 0 else np.asarray(subs[i - 1], float)
        else:
            before = np.asarray(subs[i - 1], float) if i > 0 else None
        if before is None:
            return self.config.turn_pass_radius_m
        a = np.asarray(subs[i], float) - before
        b = np.asarray(subs[i + 1], float) - np.asarray(subs[i], float)
        na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
        if na < 1e-6 or nb < 1e-6:
            return self.config.turn_pass_radius_m
        cos = float(np.dot(a, b)) / (na * nb)
        straight = cos >= np.cos(np.radians(self.config.straight_deg))
        return self.config.pass_radius_m if straight else self.config.turn_pass_radius_m

    def _replan(self, now: float) -> None:
        self.blocked_since = None
        step = self.current_step
        if self.replans >= self.config.max_replans:
            self.goals_failed.append(step.label)
            self.events.append(f"gave up on {step.action} {step.label} after {self.replans} replans")
            self._complete_step(now, reached=False)
            return
        if self.position is None:
            return
        index = sum(len(s.subgoals) for s in self.plan.steps[: self.step_index]) + self.sub_index
        plan, position = self.plan, self.position.copy()
        job = PlanJob("replan", None, PlanningDeadline(self.planning_timeout_s),
                      lambda deadline: self.planner.replan(plan, position, subgoal_index=index, deadline=deadline),
                      now, self.state)
        self._launch(job, now)

    def complete_step(self, now: float) -> None:
        """The current step is done (a planner that judges arrival itself: the learned level near its goal)."""
        if self.current_step is not None and self.job is None:
            self._complete_step(now)

    def _complete_step(self, now: float, reached: bool = True) -> None:
        step = self.current_step
        if reached and step.action in GOAL_ACTIONS:
            self.goals_reached += 1
        self.step_index += 1
        self.sub_index = 0
        self.replans = 0
        self._enter_step(now)

    def _enter_step(self, now: float) -> None:
        step = self.current_step
        self.hover_until = None
        if step is None:
            self.state = "done"
            return
        self.state = {"hover": "hovering", "land": "landing"}.get(step.action, "executing")
        if step.action == "hover":
            self.hover_until = now + float(step.duration_s or 0.0)

    def update(self, now: float) -> None:
        """Time-driven progress (hover steps)."""
        if self.state == "hovering" and self.hover_until is not None and now >= self.hover_until:
            self._complete_step(now)

    # ---- outputs ------------------------------------------------------------------------------
    @property
    def current_step(self):
        if self.plan is None or self.step_index >= len(self.plan.steps):
            return None
        return self.plan.steps[self.step_index]

    def current_subgoal(self) -> np.ndarray | None:
        """The subgoal to send now: None before any plan; the last one once done (the heartbeat goes on)."""
        if self.plan is None or not self.plan.steps:
            return None
        step = self.current_step
        if step is None:
            step = self.plan.steps[-1]
            return np.asarray(step.target if step.action == "land" else (step.subgoals or [step.target])[-1], float)
        if step.action == "land":
            target = np.asarray(step.target, dtype=np.float64).copy()
            target[2] = self.floor_z  # a landing request: the skill node lands under it
            return target
        if step.action == "hover" or not step.subgoals:
            return np.asarray(step.target, dtype=np.float64)
        return np.asarray(step.subgoals[min(self.sub_index, len(step.subgoals) - 1)], dtype=np.float64)

    def plan_points(self) -> list[np.ndarray]:
        return [] if self.plan is None else [np.asarray(s, float) for s in self.plan.subgoals]

    def status(self) -> dict[str, Any]:
        step = self.current_step
        sub = self.current_subgoal()
        ends_landed = bool(self.plan is not None and self.plan.steps and self.plan.steps[-1].action == "land")
        return {
            "state": self.state, "goals_reached": self.goals_reached, "goals_total": self.goals_total,
            "goals_failed": list(self.goals_failed),
            "current_goal": None if step is None else f"{step.action} {step.label}",
            "step": self.step_index, "steps": 0 if self.plan is None else len(self.plan.steps),
            "subgoal": None if sub is None else [round(float(v), 4) for v in sub],
            "planner": None if self.plan is None else self.plan.planner,
            "fallback_reason": None if self.plan is None else self.plan.fallback_reason,
            "ends_landed": ends_landed, "plan_version": self.plan_version, "error": self.error,
            "task": None if self.task_text is None else plain(self.task_text, 500),
            "planning": None if self.job is None else self.job.kind,
            "planning_timeout_s": self.planning_timeout_s,
            "odom_refused": self.odom_refused, "odom_last_refusal": self.odom_last_refusal,
        }


def subgoal_radius_from_model(model_path: str) -> float:
    """The subgoal radius written in the model's contract."""
    from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract
    from robot_hrl.nodes.resources import resolve_resource
    from robot_hrl.runtime import read_model_metadata

    meta = read_model_metadata(resolve_resource(model_path, "model file"))
    return PolicyContract.from_json(meta.get(CONTRACT_METADATA_KEY)).subgoal_radius_m


def make_planner(kind: str, world, subgoal_radius_m: float, llm_url: str, model: str, timeout_s: float,
                 safety_margin_m: float | None = None, robot_radius_m: float | None = None):
    """The node's planner; ``robot_radius_m`` is the robot's collision radius (the node asks its robot model)."""
    from robot_hrl.planning import PlannerConfig as GridConfig
    from robot_hrl.planning import make_planner as factory

    config = GridConfig(robot_radius_m=robot_radius_m)
    if safety_margin_m is not None:
        config = GridConfig(robot_radius_m=robot_radius_m, safety_margin_m=float(safety_margin_m))
    return factory(kind, world, subgoal_radius_m, llm_url=llm_url, model=model or None, timeout_s=timeout_s,
                   config=config)


class PlannerNode:
    """I/O wiring of :class:`PlannerCore`: guarded subscriptions, the planning worker, publishers."""

    def __init__(self, node, planner=None):
        self.node = node
        p = {name: node.declare_parameter(name, default) for name, default in (
            ("robot", "crazyflie_2x"), ("world", "models/worlds/demo.yaml"), ("planner", "symbolic"),
            ("model", "models/crazyflie_goto.onnx"), ("subgoal_radius_m", 0.0),
            ("llm_url", "http://localhost:11434/v1"), ("llm_model", ""), ("llm_timeout_s", 30.0), ("task", ""),
            ("subgoal_rate_hz", 5.0), ("blocked_replan_s", 2.0), ("max_replans", 3), ("frame_id", "map"),
            ("safety_margin_m", 0.2), ("robot_radius_m", 0.0), ("planning_timeout_s", 0.0), ("shield_config", ""),
            ("navigate_model", "models/crazyflie_navigate.onnx"), ("goal_tolerance_m", 0.3),
        )}
        self.p = p
        from robot_hrl.errors import ConfigError
        from robot_hrl.nodes.input_guard import input_guard_of
        from robot_hrl.nodes.resources import resolve_resource
        from robot_hrl.world import load_world

        if p["planner"] not in PLANNER_KINDS:
            raise ConfigError(f"planner_node: planner={p['planner']!r}; choose {', '.join(PLANNER_KINDS[:-1])} or "
                              f"{PLANNER_KINDS[-1]}")
        if not float(p["subgoal_rate_hz"]) > 0:
            raise ConfigError(f"planner_node: subgoal_rate_hz={p['subgoal_rate_hz']!r} must be > 0")
        timeout = float(p["planning_timeout_s"])
        if not (0 <= timeout < float("inf")):
            raise ConfigError(f"planner_node: planning_timeout_s={p['planning_timeout_s']!r} must be >= 0 "
                              "(0 = 10 s, plus the LLM's requests for llm/vlm)")
        self.world = load_world(resolve_resource(p["world"], "world file"))
        radius = float(p["subgoal_radius_m"]) or subgoal_radius_from_model(str(p["model"]))
        self.learned = None
        """The learned level's driver (planner kind ``learned``), else None."""
        if planner is None and p["planner"] == "learned":
            from robot_hrl.nodes.planner_learned import LearnedDriver

            planner = LearnedDriver.make_planner(p, self.world, radius, self._robot_radius_m(p))
        if planner is None:
            if float(p["safety_margin_m"]) < 0:
                raise ConfigError(f"planner_node: safety_margin_m={p['safety_margin_m']!r} must be >= 0")
            planner = make_planner(str(p["planner"]), self.world, radius, str(p["llm_url"]), str(p["llm_model"]),
                                   float(p["llm_timeout_s"]), float(p["safety_margin_m"]), self._robot_radius_m(p))
        if timeout == 0:
            timeout = default_planning_timeout_s(planner)
        import queue
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="planner_node-planning")
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self.core = PlannerCore(planner, floor_z=float(self.world.bounds.min[2]),
                                config=PlannerConfig(float(p["blocked_replan_s"]), int(p["max_replans"])),
                                planning_timeout_s=timeout, runner=self._submit)
        self.frame_id = str(p["frame_id"])
        self.odometry = self._odometry_validator(p)
        """The skill's odometry validator, built from the same shield YAML (one home: robot_hrl.safety.units.odometry)."""
        self.inputs = input_guard_of(node, "planner_node")
        self.plan_pub = node.create_publisher(Path, "/plan", LATCHED_QOS)
        from robot_hrl.msgs import PoseStamped

        self.subgoal_pub = node.create_publisher(PoseStamped, "/subgoal", COMMAND_QOS)
        self.status_pub = node.create_publisher(String, "/planner/status", LATCHED_QOS)
        self.diag_pub = node.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        self.inputs.subscribe(String, "/task", self._on_task, INPUT_QOS)  # accepts `ros2 topic pub` defaults
        self.inputs.subscribe(Odometry, "/odom", self._on_odom, SENSOR_QOS)
        self.inputs.subscribe(String, "/skill/status", self._on_skill_status, COMMAND_QOS)
        self.timer = self.inputs.timer(1.0 / float(p["subgoal_rate_hz"]), self._tick)
        self.result_timer = self.inputs.timer(RESULT_POLL_S, self._poll_results)
        self._quat = (1.0, 0.0, 0.0, 0.0)
        if hasattr(planner, "set_image"):
            from robot_hrl.msgs import Image

            self.inputs.subscribe(Image, "/camera/image_raw", self._on_image, SENSOR_QOS)
        if getattr(planner, "kind", None) == "learned":
            from robot_hrl.nodes.planner_learned import LearnedDriver

            self.learned = LearnedDriver(self, planner)
        self._published_version = -1
        self._last_status: str | None = None
        self.tasks_rejected = 0
        self.inputs.start_reporting()
        initial = p["task"]
        if isinstance(initial, dict) or (isinstance(initial, str) and initial.strip()):
            self._handle_task(initial)
        self._publish_status()

    def _odometry_validator(self, p: dict):
        from robot_hrl.errors import ConfigError
        from robot_hrl.nodes.resources import resolve_resource
        from robot_hrl.robots import get_robot
        from robot_hrl.safety.units.odometry import OdometryUnit

        try:
            robot = get_robot(str(p["robot"]))
        except KeyError as exc:
            raise ConfigError(f"planner_node: {str(exc).strip(chr(34))}") from None
        path = str(p["shield_config"]).strip()
        return OdometryUnit.for_robot(robot, self.world, resolve_resource(path, "shield config") if path else None)

    @staticmethod
    def _robot_radius_m(p: dict) -> float:
        """``robot_radius_m`` when set (> 0), else the collision radius of the ``robot`` model."""
        from robot_hrl.errors import ConfigError
        from robot_hrl.robots import get_robot

        given = float(p["robot_radius_m"])
        if not (given >= 0 and given < float("inf")):
            raise ConfigError(f"planner_node: robot_radius_m={p['robot_radius_m']!r} must be >= 0 (0 = the robot model's)")
        if given > 0:
            return given
        try:
            return float(get_robot(str(p["robot"])).collision_radius_m)
        except KeyError as exc:
            raise ConfigError(f"planner_node: {str(exc).strip(chr(34))}") from None

    # ---- planning in the worker ----------------------------------------------------------------
    def _submit(self, job: PlanJob) -> None:
        self._pool.submit(self._work, job)

    def _work(self, job: PlanJob) -> None:
        plan, error = run_job(job)
        self._done.put((job, plan, error))

    def _poll_results(self) -> None:
        import queue

        while True:
            try:
                job, plan, error = self._done.get_nowait()
            except queue.Empty:
                return
            applied, message = self.core.finish_job(job, plan, error, self._now())
            if not applied:
                continue
            if job.kind == "task":
                self._after_task(job.text, message)
            else:
                if self.core.plan_version != self._published_version:
                    self._publish_plan()
                self._send_subgoal()
                self._publish_status()

    def close(self) -> None:
        """Stop the worker (run_main calls this on shutdown)."""
        if self.core.job is not None:
            self.core.job.deadline.cancel("the node is shutting down")
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- callbacks ----------------------------------------------------------------------------
    def _now(self) -> float:
        return self.node.now()

    def _on_task(self, msg: String) -> None:
        self._handle_task(msg.data)

    def _handle_task(self, task) -> None:
        self.node.get_logger().info(f"task: {plain(task, 200)}")
        error = self.core.on_task(task, self._now())
        if error is not None or self.core.job is None:
            self._after_task(task, error)
        else:
            self._publish_status()  # planning

    def _after_task(self, task, error: str | None) -> None:
        if error is not None:
            self.tasks_rejected += 1
            self.node.get_logger().error(f"task rejected: {plain(error, 500)}")
            keep = self.core.current_subgoal()
            self._publish_diag(ERROR, f"task rejected: {error}", {
                "task": plain(task, 500), "action": "kept the current subgoal" if keep is not None else "no flight",
                "tasks_rejected": self.tasks_rejected})
        elif self.core.plan is not None and self.core.plan_version != self._published_version:
            self._publish_plan()
        self._publish_status()
        self._send_subgoal()

    def _on_odom(self, msg: Odometry) -> None:
        from robot_hrl.msgs import state_from_odometry

        now = self._now()
        try:
            state = state_from_odometry(msg)
        except RobotHrlError as exc:
            self._refuse_odom(self.odometry.refuse_malformed(now, str(exc)))
            return
        refusal = self.odometry.judge(state, now, msg.header.frame_id, msg.child_frame_id)
        if refusal:
            self._refuse_odom(refusal)
            return
        if refusal is not None:
            return  # not news (an exact repeat): the position it gives is already the latest
        self._quat = tuple(float(v) for v in state.quat_wxyz)
        self.core.on_position(state.position_w)
        if self.learned is not None:  # the learned level sees only the odometry the validator accepted
            self.learned.on_state(state)
        if self.core.pending_task is not None:
            task = self.core.pending_task
            error = self.core.poll_pending(self._now())
            if error is not None or self.core.job is None:
                self._after_task(task, error)
            else:
                self._publish_status()

    def _refuse_odom(self, refusal: str) -> None:
        self.core.odom_refused += 1
        self.core.odom_last_refusal = plain(refusal, 300)
        self.inputs.reject("/odom", f"odometry refused ({refusal}); the last good position is kept")

    def _on_image(self, msg) -> None:
        from robot_hrl.msgs import array_from_image

        try:
            rgb = array_from_image(msg)
            if msg.encoding != "rgb8":
                self.inputs.reject("/camera/image_raw", f"encoding {plain(msg.encoding, 40)!r}: the VLM takes rgb8")
                return
            self.core.planner.set_image(rgb, self._quat)
        except (ValueError, RobotHrlError) as exc:
            self.inputs.reject("/camera/image_raw", f"camera image ignored: {plain(str(exc), 200)}")

    def _on_skill_status(self, msg: String) -> None:
        from robot_hrl.nodes.skill_status import SkillStatusError, parse_skill_status

        try:
            status = parse_skill_status(msg.data)
        except SkillStatusError as exc:
            self.inputs.reject("/skill/status", str(exc))
            return
        before = (self.core.step_index, self.core.sub_index, self.core.plan_version)
        self.core.on_skill_status(status.as_dict(), self._now())
        if self.core.job is not None and self.core.job.kind == "replan":
            self._publish_status()  # planning
        if (self.core.step_index, self.core.sub_index, self.core.plan_version) != before:
            if self.core.plan_version != self._published_version:
                self._publish_plan()
            self._send_subgoal()
            self._publish_status()

    def _tick(self) -> None:
        self.core.update(self._now())
        self._send_subgoal()
        self._publish_status()

    # ---- outputs ------------------------------------------------------------------------------
    def _send_subgoal(self) -> None:
        if self.learned is not None and self.learned.active():
            sub = self.learned.subgoal
            if sub is not None:
                self.subgoal_pub.publish(pose_stamped(sub, self._now(), self.frame_id))
            return
        sub = self.core.current_subgoal()
        if sub is not None and np.all(np.isfinite(sub)):
            self.subgoal_pub.publish(pose_stamped(sub, self._now(), self.frame_id))

    def _publish_plan(self) -> None:
        now = self._now()
        from robot_hrl.msgs import header

        msg = Path(header=header(now, self.frame_id), poses=[pose_stamped(s, now, self.frame_id)
                                                             for s in self.core.plan_points()])
        self.plan_pub.publish(msg)
        self._published_version = self.core.plan_version
        plan = self.core.plan
        self._publish_diag(OK if plan.fallback_reason is None else WARN, f"plan: {len(plan.steps)} steps", {
            "planner": plan.planner, "goals": self.core.goals_total, "subgoals": len(plan.subgoals),
            "fallback_reason": plan.fallback_reason or "", "task": plain(self.core.task_text or "", 500)})

    def _publish_status(self) -> None:
        msg = json_string(self.core.status())
        if msg.data != self._last_status:
            self._last_status = msg.data
            self.status_pub.publish(msg)
            for event in self.core.events:
                self.node.get_logger().info(plain(event, 1000))
            self.core.events.clear()

    def _publish_diag(self, level: int, message: str, values: dict) -> None:
        self.diag_pub.publish(diag_array(self._now(), [diag_status("planner_node: task", level, message, values)]))


def default_planning_timeout_s(planner) -> float:
    """10 s for the symbolic planner; an LLM/VLM planner adds ``max_attempts x timeout_s`` for its requests."""
    client = getattr(planner, "client", None)
    if client is None:
        return SYMBOLIC_PLANNING_TIMEOUT_S
    return SYMBOLIC_PLANNING_TIMEOUT_S + int(getattr(planner, "max_attempts", 1)) * float(client.timeout_s)


def main(argv: list[str] | None = None) -> int:
    return run_main("planner_node", PlannerNode, argv)


if __name__ == "__main__":
    sys.exit(main())

"""Hostile inputs, end to end: the LLM endpoint and the wire. Every case is tried; crashes, hangs and
violations are counted (target 0, 0, 0) and printed.

    python benchmarks/bench_hostile_inputs.py [--wire-examples 300] [--seed 0] [--skip-llm] [--skip-wire]

**The LLM endpoint** (a real HTTP server process, tests/llm_server.py, and a second one as "another
origin"): the LLM planner (2 attempts, 2 s per request) asks a server that misbehaves in one way per
case: bodies that are not UTF-8, compressed, cut by a TCP reset, NaN/Infinity/1e400/400-digit
numbers, 50,000-deep nesting, duplicate keys, floods of 3 MB with and without Content-Length, one
byte per second (body, headers), redirects (301/302/307/308) to another origin carrying the API
key, an answer slower than the planning deadline, and hostile task answers (NaN hover, 1e999,
400 digits, deep nesting, duplicate keys, homoglyph landmark, 70 kB, a 60 kB property name). A
valid answer is the control.

- crash: anything but a plan came back (an exception, even a PlanningError: the symbolic fallback
  can plan this task);
- hang: no plan within attempts x timeout + 10 s, or the planner ran past its planning deadline;
- violation: a hostile answer was flown (``plan.planner == "llm"``), a fallback gave no reason, a
  subgoal was not finite or outside the fence, the other origin heard a request, or a retry's
  prompt grew by more than the echo caps.

**The wire** (tests/hostile_wire.py): the planner node (planner:=vlm, so it takes camera images) and
the skill node as processes over real Cyclone DDS. First each hostile task and each malformed
``/skill/status`` one by one, then ``--wire-examples`` batches drawn by hypothesis (seeded) on every
subscribed topic: extreme values and raw CDR bytes with random bytes overwritten.

- crash: a node process exited, or logged a traceback;
- hang: the planner did not answer a task within 30 s, or its subgoal heartbeat (5 Hz) fell
  silent for more than 2 s;
- violation: a hostile task was planned, a malformed status was not refused, or a subgoal sent
  was not finite or outside the fence.

Timings are wall-clock on a shared machine: the 1-minute load average is printed with them.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from robot_hrl.planning import LLMPlanner, PlannerConfig, PlanningDeadline, SymbolicPlanner  # noqa: E402
from robot_hrl.planning.llm import MAX_ECHO_CHARS, MAX_REASON_CHARS  # noqa: E402
from robot_hrl.robots import CRAZYFLIE_2X  # noqa: E402
from robot_hrl.world import load_world  # noqa: E402

SERVER = REPO / "tests" / "llm_server.py"
VALID = {"steps": [{"action": "takeoff", "altitude_m": 1.0}, {"action": "goto", "landmark": "red_box"},
                   {"action": "hover", "duration_s": 1.0}]}
TASK = "takeoff 1; goto blue_box; land"


@dataclass
class Tally:
    cases: int = 0
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def line(self, what: str) -> str:
        return (f"{what}: {self.cases} cases, {len(self.crashes)} crashes, {len(self.hangs)} hangs, "
                f"{len(self.violations)} violations")


def load() -> str:
    return open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"


# ---- the LLM endpoint ---------------------------------------------------------------------------------
class Server:
    def __init__(self, folder: Path):
        self.dir = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, str(SERVER), "--dir", str(folder)], stdout=subprocess.PIPE,
                                     text=True)
        self.port = int(self.proc.stdout.readline().split()[1])

    def scenario(self, name: str, replies: list[dict]) -> str:
        (self.dir / f"{name}.json").write_text(json.dumps(replies))
        return f"http://127.0.0.1:{self.port}/{name}/v1"

    def requests(self, name: str) -> list[dict]:
        path = self.dir / f"{name}.requests.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _env(content: str, **extra) -> str:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}], **extra})


def llm_cases(other_origin: str) -> list[tuple[str, list[dict], str, float]]:
    """(name, server replies, expected planner, request timeout s)."""
    good = _env(json.dumps(VALID))
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    cases = [
        ("control: a valid answer", [{"content": json.dumps(VALID)}], "llm", 2.0),
        ("body not UTF-8", [{"mode": "body", "body_b64": b64(b"\xff\xfe" + good.encode())}], "symbolic", 2.0),
        ("body in Latin-1", [{"mode": "body", "body_b64": b64('{"choices": [{"message": {"content": "caf\u00e9"}}]}'
                                                             .encode("latin-1"))}], "symbolic", 2.0),
        ("gzip body (identity asked)", [{"mode": "gzip", "content": json.dumps(VALID)}], "symbolic", 2.0),
        ("TCP reset mid-body", [{"mode": "reset", "content": json.dumps(VALID), "cut_at": 40}], "symbolic", 2.0),
        ("NaN in the envelope", [{"mode": "body", "body": good[:-1] + ', "usage": {"total_tokens": NaN}}'}],
         "symbolic", 2.0),
        ("-Infinity in the envelope", [{"mode": "body", "body": good[:-1] + ', "created": -Infinity}'}], "symbolic", 2.0),
        ("1e400 in the envelope", [{"mode": "body", "body": good[:-1] + ', "created": 1e400}'}], "symbolic", 2.0),
        ("400-digit integer in the envelope", [{"mode": "body", "body": good[:-1] + ', "created": ' + "9" * 400 + "}"}],
         "symbolic", 2.0),
        ("envelope nested 50,000 deep", [{"mode": "body", "body": '{"x": ' + "[" * 50000 + "]" * 50000 + ", " + good[1:]}],
         "symbolic", 2.0),
        ("duplicate keys in the envelope", [{"mode": "body", "body": good[:-1] + ', "choices": []}'}], "symbolic", 2.0),
        ("HTML instead of JSON", [{"mode": "body", "body": "<html>502</html>"}], "symbolic", 2.0),
        ("truncated, no Content-Length", [{"mode": "body", "body": '{"choices": [', "length": False}], "symbolic", 2.0),
        ("content is a number", [{"mode": "body", "body": json.dumps({"choices": [{"message": {"content": 5}}]})}],
         "symbolic", 2.0),
        ("no choices", [{"mode": "body", "body": "{}"}], "symbolic", 2.0),
        ("3 MB flood with Content-Length", [{"mode": "flood", "size": 3_000_000}], "symbolic", 2.0),
        ("3 MB flood, chunked", [{"mode": "flood", "size": 3_000_000, "chunked": True}], "symbolic", 2.0),
        ("HTTP 418 with 5 kB of garbage", [{"mode": "body", "status": 418, "body": "\xff" * 5000}], "symbolic", 2.0),
        ("HTTP 500", [{"status": 500, "content": "model crashed"}], "symbolic", 2.0),
        ("one byte per second (body)", [{"mode": "trickle", "content": json.dumps(VALID), "interval_s": 1.0}],
         "symbolic", 2.0),
        ("one byte per second (headers)", [{"mode": "trickle_headers", "interval_s": 1.0}], "symbolic", 2.0),
        ("answer after 30 s", [{"content": json.dumps(VALID), "delay_s": 30.0}], "symbolic", 2.0),
    ]
    for status in (301, 302, 307, 308):
        cases.append((f"HTTP {status} to another origin", [{"mode": "redirect", "status": status,
                                                             "location": other_origin}], "symbolic", 2.0))
    answers = [
        ("answer: hover NaN", '{"steps": [{"action": "takeoff"}, {"action": "hover", "duration_s": NaN}]}'),
        ("answer: hover 1e999", '{"steps": [{"action": "takeoff"}, {"action": "hover", "duration_s": 1e999}]}'),
        ("answer: 400-digit altitude", '{"steps": [{"action": "takeoff", "altitude_m": ' + "1" * 400 + "}]}"),
        ("answer: nested 5,000 deep", '{"steps": ' + "[" * 5000 + "]" * 5000 + "}"),
        ("answer: duplicate steps", '{"steps": [{"action": "land"}], "steps": [{"action": "takeoff", "altitude_m": 99}]}'),
        ("answer: homoglyph landmark", '{"steps": [{"action": "takeoff"}, {"action": "goto", "landmark": "red_b\u043ex"}]}'),
        ("answer: 70 kB", "x" * 70000),
        ("answer: 60 kB property name", json.dumps({"steps": [{"action": "land", "p" * 60000: 1}]})),
        ("answer: outside the fence", json.dumps({"steps": [{"action": "takeoff"}, {"action": "goto",
                                                                                     "position": [100, 100, 100]}]})),
        ("answer: inside a pillar", json.dumps({"steps": [{"action": "takeoff"}, {"action": "goto",
                                                                                  "position": [1.5, 1.5, 1.0]}]})),
    ]
    cases += [(name, [{"content": text}], "symbolic", 2.0) for name, text in answers]
    return cases


def run_llm(tally: Tally, workdir: Path) -> list[tuple[str, str, float]]:
    world = load_world(REPO / "models" / "worlds" / "demo.yaml")
    symbolic = SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=CRAZYFLIE_2X.collision_radius_m))
    main, other = Server(workdir / "llm"), Server(workdir / "other")
    os.environ["ROBOT_HRL_LLM_API_KEY"] = "sk-bench-secret"
    other_origin = other.scenario("stolen", [{"content": json.dumps(VALID)}]) + "/chat/completions"
    rows = []
    try:
        for i, (name, replies, expect, timeout_s) in enumerate(llm_cases(other_origin)):
            scenario = f"case{i}"
            url = main.scenario(scenario, replies)
            attempts = 2
            planner = LLMPlanner(world, 1.0, llm_url=url, model="bench", timeout_s=timeout_s,
                                 max_attempts=attempts, symbolic=symbolic)
            deadline = PlanningDeadline(attempts * timeout_s + 8.0)
            guard_s = attempts * timeout_s + 10.0
            out: dict = {}

            def work():
                try:
                    out["plan"] = planner.plan(TASK, world.start, deadline=deadline)
                except BaseException as exc:  # noqa: BLE001 - counted
                    out["error"] = exc

            t0 = time.monotonic()
            thread = threading.Thread(target=work, daemon=True)
            thread.start()
            thread.join(guard_s)
            elapsed = time.monotonic() - t0
            tally.cases += 1
            outcome = ""
            if thread.is_alive():
                tally.hangs.append(f"llm: {name}: no answer within {guard_s:g} s")
                outcome = "HANG"
            elif "error" in out:
                kind = type(out["error"]).__name__
                tally.crashes.append(f"llm: {name}: {kind}: {str(out['error'])[:200]}")
                outcome = f"CRASH ({kind})"
            else:
                plan = out["plan"]
                problems = []
                if elapsed > deadline.budget_s + 1.0:
                    tally.hangs.append(f"llm: {name}: {elapsed:.1f} s, past the {deadline.budget_s:g} s deadline")
                if plan.planner != expect:
                    problems.append(f"flown by {plan.planner}, expected {expect}")
                if plan.planner == "symbolic" and not plan.fallback_reason:
                    problems.append("a fallback without a reason")
                if not all(math.isfinite(v) for s in plan.subgoals for v in s) or not all(
                        world.bounds.contains(s) for s in plan.subgoals):
                    problems.append("a subgoal not finite or outside the fence")
                reqs = main.requests(scenario)
                sizes = [len(json.dumps(r["body"]["messages"])) for r in reqs]
                if any(b - a > MAX_ECHO_CHARS + MAX_REASON_CHARS + 500 for a, b in zip(sizes, sizes[1:])):
                    problems.append(f"the prompt grew {sizes}")
                for problem in problems:
                    tally.violations.append(f"llm: {name}: {problem}")
                reason = re.sub(r"(the )?(answer of the )?LLM endpoint http://\S+", "the endpoint",
                                (plan.fallback_reason or "").split("last problem: ")[-1])
                outcome = ("VIOLATION: " + "; ".join(problems)) if problems else (
                    f"{plan.planner}" + (f" <- {reason[:90]}" if reason else ""))
            rows.append((name, outcome, elapsed))
        stolen = other.requests("stolen")
        tally.cases += 1
        if stolen:
            tally.violations.append(f"llm: the other origin received {len(stolen)} request(s) (API key: "
                                    f"{stolen[0]['headers']['authorization']})")
        rows.append(("the other origin heard nothing", "ok" if not stolen else "VIOLATION", 0.0))
    finally:
        main.close()
        other.close()
    return rows


# ---- the wire -----------------------------------------------------------------------------------------
def run_wire(tally: Tally, workdir: Path, examples: int, seed: int) -> list[tuple[str, str, float]]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    from hostile_wire import (BIG_VISIT, HOSTILE_STATUSES, HOSTILE_TASKS, START_POSITION, WireRig, odometry,
                              quiet_domain_id, wire_inputs)
    from robot_hrl.msgs import String

    rows = []
    with WireRig(quiet_domain_id(3), workdir / "wire_logs") as rig:
        rig.ready()

        def check_alive(name: str) -> bool:
            dead = rig.dead()
            if dead:
                tally.crashes.append(f"wire: {name}: node(s) exited {dead}")
                return False
            return True

        # -- each hostile task, one by one: refused with a reason (the big visit: refused or planned), in time
        for text in (*HOSTILE_TASKS, BIG_VISIT):
            rig.send("/odom", odometry(START_POSITION))
            rig.spin(0.05)
            before = rig.diag_count("planner_node: task")
            rig.reset_gap()
            t0 = time.monotonic()
            rig.send("/task", String(data=text))
            end = t0 + 30.0
            while rig.diag_count("planner_node: task") == before and time.monotonic() < end and not rig.dead():
                rig.node.spin_once(0.02)
            elapsed = time.monotonic() - t0
            name = f"task {ascii(text[:50])}{'...' if len(text) > 50 else ''}"
            tally.cases += 1
            if not check_alive(name):
                rows.append((name, "CRASH", elapsed))
                break
            if rig.diag_count("planner_node: task") == before:
                tally.hangs.append(f"wire: {name}: no answer within 30 s")
                rows.append((name, "HANG", elapsed))
                continue
            level, message, _ = rig.diag("planner_node: task")
            if rig.heartbeat_gap_s() > 2.0:
                tally.hangs.append(f"wire: {name}: the heartbeat fell silent for {rig.heartbeat_gap_s():.1f} s")
            refused = message.startswith("task rejected")
            if not refused and text is not BIG_VISIT:
                tally.violations.append(f"wire: {name}: planned ({message})")
                rows.append((name, f"VIOLATION: planned ({message})", elapsed))
            else:
                rows.append((name, message[:110], elapsed))

        # -- each malformed /skill/status: refused, and said so
        for text in HOSTILE_STATUSES:
            diag = rig.diag("planner_node: inputs")
            before = int(diag[2].get("/skill/status.rejected", "0")) if diag else 0
            t0 = time.monotonic()
            rig.send("/skill/status", String(data=text))
            end = t0 + 10.0
            now_count = before
            while now_count == before and time.monotonic() < end and not rig.dead():
                rig.node.spin_once(0.05)
                diag = rig.diag("planner_node: inputs")
                now_count = int(diag[2].get("/skill/status.rejected", "0")) if diag else 0
            name = f"status {ascii(text[:40])}"
            tally.cases += 1
            if not check_alive(name):
                rows.append((name, "CRASH", time.monotonic() - t0))
                break
            if now_count == before:
                tally.violations.append(f"wire: {name}: not refused")
                rows.append((name, "VIOLATION: not refused", time.monotonic() - t0))
            else:
                rows.append((name, "refused: " + rig.diag("planner_node: inputs")[2].get("/skill/status.last_reason",
                                                                                          "")[:90],
                             time.monotonic() - t0))

        # -- random batches on every topic (seeded hypothesis)
        rig.send("/odom", odometry(START_POSITION))
        rig.send("/task", String(data="takeoff 1.0; hover 600"))
        rig.wait_for("a plan to hold", lambda: rig.last("planner").get("state") == "executing")
        rig.reset_gap()
        counts = {"batches": 0, "messages": 0, "gap_s": 0.0}

        @hypothesis_seed(seed)
        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(batch=st.lists(wire_inputs(), min_size=1, max_size=6))
        def feed(batch):
            if rig.dead():
                return
            for topic, msg, mutations in batch:
                rig.send(topic, msg, mutations)
                counts["messages"] += 1
            rig.spin(0.02)
            counts["batches"] += 1

        t0 = time.monotonic()
        feed()
        rig.spin(1.0)
        elapsed = time.monotonic() - t0
        tally.cases += counts["batches"]
        gap = rig.heartbeat_gap_s()
        if check_alive("random batches"):
            outcome = f"alive; heartbeat's longest silence {gap:.2f} s"
        else:
            outcome = "CRASH"
        if gap > 2.0:
            tally.hangs.append(f"wire: random batches: the heartbeat fell silent for {gap:.1f} s")
        rows.append((f"{counts['batches']} random batches ({counts['messages']} messages, "
                     f"{rig.refused_by_writer} raw samples refused by the DDS writer)", outcome, elapsed))
        if rig.seen.bad_subgoals:
            tally.violations.append(f"wire: {len(rig.seen.bad_subgoals)} subgoal(s) sent not finite or outside the "
                                    f"fence, e.g. {rig.seen.bad_subgoals[0]}")
        inputs = {n: rig.diag(f"{n}: inputs") for n in ("planner_node", "skill_node")}
        codes = rig.stop()
        for name in ("planner_node", "skill_node"):
            if "Traceback" in rig.log(name):
                tally.crashes.append(f"wire: {name} logged a traceback")
            report = inputs[name]
            rows.append((f"{name}: inputs report", "none" if report is None else report[1][:110], 0.0))
        rows.append(("exit codes after SIGTERM", json.dumps(codes), 0.0))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wire-examples", type=int, default=300, help="random batches on the wire (hypothesis)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed of the random batches")
    parser.add_argument("--skip-llm", action="store_true", help="only the wire")
    parser.add_argument("--skip-wire", action="store_true", help="only the LLM endpoint")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench_hostile_"))
    print(f"load average (1 min) at start: {load()}; work folder {workdir}")
    llm, wire = Tally(), Tally()
    t0 = time.monotonic()
    if not args.skip_llm:
        print("\n== the LLM endpoint ==")
        for name, outcome, elapsed in run_llm(llm, workdir):
            print(f"  {name:<40} {elapsed:6.2f} s  {outcome}")
    if not args.skip_wire:
        print("\n== the wire ==")
        for name, outcome, elapsed in run_wire(wire, workdir, args.wire_examples, args.seed):
            print(f"  {name:<60} {elapsed:6.2f} s  {outcome}")
    print()
    for what, tally in (("LLM endpoint", llm), ("wire", wire)):
        print(tally.line(what))
        for item in tally.crashes + tally.hangs + tally.violations:
            print(f"  - {item}")
    total = Tally(llm.cases + wire.cases, llm.crashes + wire.crashes, llm.hangs + wire.hangs,
                  llm.violations + wire.violations)
    print(total.line("total") + f" ({time.monotonic() - t0:.0f} s wall; load average now {load()})")
    return 0 if not (total.crashes or total.hangs or total.violations) else 1


if __name__ == "__main__":
    sys.exit(main())

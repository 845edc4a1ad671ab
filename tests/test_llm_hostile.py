"""The LLM client against a hostile endpoint (a real HTTP server process, tests/llm_server.py modes).

Every transport, decoding or parsing failure must end in the normal rejected-answer path: the
symbolic fallback, with a reason that says what the server did; never a traceback, never a hang
(one deadline per request), never the API key sent to another address, never a prompt grown by
what a model echoed.
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_hrl.errors import PlanningError
from robot_hrl.planning import LLMPlanner, PlannerConfig, PlanningDeadline, SymbolicPlanner
from robot_hrl.planning.chat_client import ChatClient, LLMRequestError
from robot_hrl.planning.llm import MAX_ECHO_CHARS, MAX_REASON_CHARS
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.world import load_world
from test_llm_planner import SERVER, VALID, llm_server  # noqa: F401 - the server fixture

GUARD_S = 60.0
"""How long a plan may take before the test calls it hung (a guard, not a measurement)."""
TASK = "takeoff 1; goto blue_box; land"


@pytest.fixture(scope="module")
def world(demo_world_path):
    return load_world(demo_world_path)


@pytest.fixture(scope="module")
def symbolic(world):
    return SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=CRAZYFLIE_2X.collision_radius_m))


@pytest.fixture(scope="module")
def other_server(tmp_path_factory):
    """A second server process: another origin (another port) to redirect to."""
    script_dir = tmp_path_factory.mktemp("other_origin")
    proc = subprocess.Popen([sys.executable, str(SERVER), "--dir", str(script_dir)], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline().split()[1])
    (script_dir / "stolen.json").write_text(json.dumps([{"content": json.dumps(VALID)}]))

    def requests() -> list[dict]:
        path = script_dir / "stolen.requests.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    yield f"http://127.0.0.1:{port}/stolen/v1/chat/completions", requests
    proc.terminate()
    proc.wait(timeout=10)


def plan_guarded(planner: LLMPlanner, task: str = TASK, **kw):
    """``planner.plan`` in a thread; a hang fails the test after GUARD_S instead of blocking the suite."""
    out: dict = {}

    def run():
        try:
            out["plan"] = planner.plan(task, planner.world.start, **kw)
        except BaseException as exc:  # noqa: BLE001 - reported below
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_S)
    assert not thread.is_alive(), f"the LLM planner hung (more than {GUARD_S} s)"
    if "error" in out:
        raise out["error"]
    return out["plan"]


def llm(world, symbolic, url, **kw) -> LLMPlanner:
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("max_attempts", 1)
    return LLMPlanner(world, 1.0, llm_url=url, model="scripted", symbolic=symbolic, **kw)


def _envelope(content: str, **extra) -> str:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}], **extra})


GOOD = _envelope(json.dumps(VALID))


@pytest.mark.parametrize("name, reply, needle", [
    ("non_utf8", {"mode": "body", "body_b64": base64.b64encode(b"\xff\xfe" + GOOD.encode()).decode()}, "not UTF-8"),
    ("latin1", {"mode": "body", "body_b64": base64.b64encode(
        '{"choices": [{"message": {"content": "caf\u00e9"}}]}'.encode("latin-1")).decode()},
     "not UTF-8"),
    ("gzip", {"mode": "gzip", "content": json.dumps(VALID)}, "gzip"),
    ("reset", {"mode": "reset", "content": json.dumps(VALID), "cut_at": 40}, "failed mid-answer"),
    ("nan_envelope", {"mode": "body", "body": GOOD[:-1] + ', "usage": {"total_tokens": NaN}}'}, "NaN"),
    ("infinity_envelope", {"mode": "body", "body": GOOD[:-1] + ', "created": -Infinity}'}, "-Infinity"),
    ("overflow_envelope", {"mode": "body", "body": GOOD[:-1] + ', "created": 1e400}'}, "overflows a double"),
    ("digits_envelope", {"mode": "body", "body": GOOD[:-1] + ', "created": ' + "9" * 400 + "}"}, "400 digits"),
    ("deep_envelope", {"mode": "body", "body": '{"x": ' + "[" * 50000 + "]" * 50000 + ', ' + GOOD[1:]}, "nests"),
    ("duplicate_keys", {"mode": "body", "body": GOOD[:-1] + ', "choices": []}'}, "appears twice"),
    ("not_json", {"mode": "body", "body": "<html>bad gateway</html>"}, "not valid JSON"),
    ("no_length_garbage", {"mode": "body", "body": "{\"choices\": [", "length": False}, "not valid JSON"),
    ("content_not_text", {"mode": "body", "body": json.dumps({"choices": [{"message": {"content": 5}}]})},
     "no text content"),
    ("no_choices", {"mode": "body", "body": json.dumps({"object": "chat.completion"})}, "chat-completions format"),
    ("flood_length", {"mode": "flood", "size": 3_000_000}, "announced"),
    ("flood_chunked", {"mode": "flood", "size": 3_000_000, "chunked": True}, "more than 1048576 bytes"),
    ("http_418", {"mode": "body", "status": 418, "body": "\xff" * 5000}, "HTTP 418"),
])
def test_a_broken_answer_falls_back_with_its_reason(llm_server, world, symbolic, name, reply, needle):  # noqa: F811
    url = llm_server(name, [reply])
    plan = plan_guarded(llm(world, symbolic, url))
    assert plan.planner == "symbolic", name
    assert needle in plan.fallback_reason, plan.fallback_reason
    assert len(plan.fallback_reason) < 1500


@pytest.mark.parametrize("mode", ["trickle", "trickle_headers"])
def test_a_server_sending_one_byte_a_second_cannot_hold_the_client(llm_server, world, symbolic, mode):  # noqa: F811
    url = llm_server(mode, [{"mode": mode, "content": json.dumps(VALID), "interval_s": 1.0}])
    plan = plan_guarded(llm(world, symbolic, url, timeout_s=1.5))
    assert plan.planner == "symbolic"
    assert "did not answer within 1.5 s (one deadline for the whole answer)" in plan.fallback_reason


def test_a_redirect_is_not_followed_and_the_key_stays_home(llm_server, world, symbolic, other_server,  # noqa: F811
                                                           monkeypatch):
    target, stolen = other_server
    monkeypatch.setenv("ROBOT_HRL_LLM_API_KEY", "sk-secret-456")
    for status in (301, 302, 307, 308):
        url = llm_server(f"redirect{status}", [{"mode": "redirect", "status": status, "location": target}])
        plan = plan_guarded(llm(world, symbolic, url))
        assert plan.planner == "symbolic"
        assert f"HTTP {status} (a redirect to '{target}')" in plan.fallback_reason
        assert "redirects are not followed" in plan.fallback_reason
        assert llm_server.requests(f"redirect{status}")[0]["headers"]["authorization"] == "Bearer sk-secret-456"
    assert stolen() == []  # the other origin never heard from the client, let alone the key


def test_the_client_asks_for_an_uncompressed_answer(llm_server, world, symbolic):  # noqa: F811
    url = llm_server("identity", [{"content": json.dumps(VALID)}])
    assert plan_guarded(llm(world, symbolic, url)).planner == "llm"
    assert llm_server.requests("identity")[0]["headers"]["accept-encoding"] == "identity"


@pytest.mark.parametrize("content, needle", [
    ('{"steps": [{"action": "takeoff"}, {"action": "hover", "duration_s": NaN}]}', "NaN is not a JSON number"),
    ('{"steps": [{"action": "takeoff"}, {"action": "hover", "duration_s": 1e999}]}', "overflows a double"),
    ('{"steps": [{"action": "takeoff", "altitude_m": ' + "1" * 400 + "}]}", "400 digits"),
    ('{"steps": ' + "[" * 5000 + "]" * 5000 + "}", "nests"),
    ('{"steps": [{"action": "land"}], "steps": [{"action": "takeoff", "altitude_m": 99}]}', "appears twice"),
    ('{"steps": [{"action": "goto", "landmark": "red_b\u043ex"}]}', "red_b\\u043ex"),
    ("x" * 70000, "at most 65536"),
])
def test_a_hostile_task_answer_is_rejected_and_retried(llm_server, world, symbolic, content, needle):  # noqa: F811
    name = f"answer{abs(hash(content)) % 10**8}"
    url = llm_server(name, [{"content": content}, {"content": json.dumps(VALID)}])
    plan = plan_guarded(llm(world, symbolic, url, max_attempts=2))
    assert plan.planner == "llm" and len(plan.rejected_answers) == 1
    assert needle in plan.rejected_answers[0], plan.rejected_answers[0]


def test_what_is_echoed_back_to_the_model_is_cut_short(llm_server, world, symbolic):  # noqa: F811
    huge_key = "p" * 60000  # a 60 kB property name: the schema error quotes it
    answer = json.dumps({"steps": [{"action": "land", huge_key: 1}]})
    url = llm_server("echo", [{"content": answer}])
    plan = plan_guarded(llm(world, symbolic, url, max_attempts=3))
    assert plan.planner == "symbolic" and len(plan.rejected_answers) == 3
    assert all(len(r) <= MAX_REASON_CHARS + 60 for r in plan.rejected_answers)
    first, second, third = (json.dumps(r["body"]["messages"]) for r in llm_server.requests("echo"))
    # Each round adds the cut answer and the cut reason, not 60 kB.
    assert len(second) - len(first) < MAX_ECHO_CHARS + MAX_REASON_CHARS + 500
    assert len(third) - len(second) < MAX_ECHO_CHARS + MAX_REASON_CHARS + 500
    assert "more characters cut" in second


def test_the_planning_deadline_bounds_the_requests_and_leaves_time_for_the_fallback(llm_server, world,  # noqa: F811
                                                                                     symbolic):
    url = llm_server("deadline", [{"content": json.dumps(VALID), "delay_s": 30.0}])
    deadline = PlanningDeadline(2.0)
    plan = plan_guarded(llm(world, symbolic, url, timeout_s=30.0, max_attempts=3), deadline=deadline)
    assert plan.planner == "symbolic" and not deadline.expired()
    assert "did not answer within" in plan.rejected_answers[0]
    assert "left no time to ask the model again" in plan.fallback_reason


def test_a_cancelled_plan_stops(llm_server, world, symbolic):  # noqa: F811
    url = llm_server("cancel", [{"content": json.dumps(VALID)}])
    deadline = PlanningDeadline(10.0)
    deadline.cancel("a newer task arrived")
    with pytest.raises(PlanningError, match="cancelled: a newer task arrived"):
        plan_guarded(llm(world, symbolic, url), deadline=deadline)


def test_an_oversized_task_is_not_sent_to_the_model(llm_server, world, symbolic):  # noqa: F811
    url = llm_server("big_task", [{"content": json.dumps(VALID)}])
    with pytest.raises(PlanningError, match="at most 65536"):
        plan_guarded(llm(world, symbolic, url), task="hover 1; " * 20000)
    assert llm_server.requests("big_task") == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(
    st.binary(max_size=300),
    st.binary(max_size=200).map(lambda b: GOOD.encode()[: len(b) % len(GOOD)] + b),
    st.binary(max_size=50).map(lambda b: gzip.compress(GOOD.encode()) + b),
), status=st.sampled_from([200, 200, 200, 204, 400, 500, 302]))
def test_random_bytes_from_the_server_are_a_request_error_never_a_crash(llm_server, body, status):  # noqa: F811
    url = llm_server("random_bytes", [{"mode": "body", "status": status, "body_b64": base64.b64encode(body).decode()}])
    client = ChatClient(url, "scripted", timeout_s=5.0)
    try:
        answer = client.complete([{"role": "user", "content": "hi"}])
    except LLMRequestError as exc:
        assert str(exc)
    else:
        assert isinstance(answer, str) and status == 200

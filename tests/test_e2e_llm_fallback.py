"""End to end: `robot-hrl launch navigation --planner llm` against a hostile endpoint (a real HTTP server
process that answers with a redirect). The planner falls back to the symbolic planner, the robot
flies and lands, and result.json records the planner used and the fallback reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hostile_wire import quiet_domain_id
from robot_hrl.transport.dds_config import loopback_env
from test_e2e_support import E2E_DOMAIN_BLOCK
from test_llm_planner import VALID, llm_server  # noqa: F401 - the server fixture

pytestmark = pytest.mark.slow


def test_a_redirecting_endpoint_falls_back_and_result_json_says_so(tmp_path, llm_server, monkeypatch):  # noqa: F811
    elsewhere = llm_server("elsewhere", [{"content": json.dumps(VALID)}])
    url = llm_server("moved", [{"mode": "redirect", "status": 301, "location": elsewhere + "/chat/completions"}])
    domain = quiet_domain_id(E2E_DOMAIN_BLOCK)
    env = {**os.environ, **loopback_env(domain), "ROBOT_HRL_LLM_API_KEY": "sk-never-elsewhere"}
    cmd = [sys.executable, "-c", "import sys; from robot_hrl.cli import main; sys.exit(main())", "launch", "navigation",
           "--no-live", "--no-record", "--domain-id", str(domain), "--planner", "llm",
           "--task", "takeoff 1.0; goto 1.0 1.0 1.0; land", "--out", str(tmp_path / "run"),
           "--result", str(tmp_path / "result.json"), "--timeout", "240",
           "-p", f"planner_node.llm_url={url}", "-p", "planner_node.llm_timeout_s=5.0"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert (tmp_path / "result.json").is_file(), proc.stdout + proc.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert proc.returncode == 0 and result["success"], proc.stdout + proc.stderr
    assert result["planner"] == "symbolic"
    assert "HTTP 301" in result["fallback_reason"] and "redirects are not followed" in result["fallback_reason"]
    assert "planner         symbolic (fallback: llm planner gave no valid plan" in proc.stdout
    assert result["violations"] == 0 and result["goals_reached"] == result["goals_total"] == 3
    assert len(llm_server.requests("moved")) == 3  # three attempts, each refused to follow
    assert llm_server.requests("elsewhere") == []  # the key never went where the redirect pointed

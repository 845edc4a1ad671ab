"""A scripted OpenAI-compatible chat-completions server for the planner tests (a real HTTP server).

    python tests/llm_server.py --dir SCRIPT_DIR

binds 127.0.0.1 on a free port (port 0) and prints ``PORT <n>`` on stdout. A request to
``/<scenario>/v1/chat/completions`` is answered from ``SCRIPT_DIR/<scenario>.json``: a list of
replies, used in turn (the last one repeats), each
``{"content": "...", "status": 200, "delay_s": 0.0}``. Every request body is appended to
``SCRIPT_DIR/<scenario>.requests.jsonl`` so tests can check what the planner sent.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_LOCK = threading.Lock()
_COUNTS: dict[str, int] = {}


def make_handler(script_dir: Path):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, payload: dict | str):
            body = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self):
            parts = self.path.strip("/").split("/")
            if len(parts) != 4 or parts[1:] != ["v1", "chat", "completions"]:
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            scenario = parts[0]
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            try:
                request = json.loads(raw)
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "request body is not JSON"}})
                return
            with _LOCK:
                with open(script_dir / f"{scenario}.requests.jsonl", "a") as f:
                    f.write(json.dumps({"headers": {"authorization": self.headers.get("Authorization")},
                                        "body": request}) + "\n")
                n = _COUNTS.get(scenario, 0)
                _COUNTS[scenario] = n + 1
            script_path = script_dir / f"{scenario}.json"
            if not script_path.is_file():
                self._send(404, {"error": {"message": f"no script for scenario {scenario}"}})
                return
            replies = json.loads(script_path.read_text())
            reply = replies[min(n, len(replies) - 1)]
            time.sleep(float(reply.get("delay_s", 0.0)))
            status = int(reply.get("status", 200))
            if status != 200:
                self._send(status, {"error": {"message": reply.get("content", "scripted failure")}})
                return
            self._send(200, {
                "id": f"chatcmpl-{scenario}-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": request.get("model", "scripted"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply["content"]}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            })

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="folder of <scenario>.json scripts")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(Path(args.dir)))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

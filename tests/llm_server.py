"""A scripted OpenAI-compatible chat-completions server for the planner tests (a real HTTP server),
with hostile modes.

    python tests/llm_server.py --dir SCRIPT_DIR

binds 127.0.0.1 on a free port (port 0) and prints ``PORT <n>`` on stdout. A request to
``/<scenario>/v1/chat/completions`` is answered from ``SCRIPT_DIR/<scenario>.json``: a list of
replies, used in turn (the last one repeats), each
``{"content": "...", "status": 200, "delay_s": 0.0}``. Every request body is appended to
``SCRIPT_DIR/<scenario>.requests.jsonl`` so tests can check what the planner sent (and whether
an ``Authorization`` header arrived).

A reply with a ``"mode"`` misbehaves the way broken or hostile servers do:

| mode | what the server does |
|---|---|
| ``body`` | sends ``body`` (text) or ``body_b64`` (bytes) as the whole response, with ``status`` and extra ``headers``; ``"length": false`` sends no Content-Length and closes the connection after the body |
| ``trickle`` | the normal answer for ``content``, one byte every ``interval_s`` (default 1 s) |
| ``trickle_headers`` | the status line and headers one byte every ``interval_s`` |
| ``reset`` | the headers (full Content-Length) and the first ``cut_at`` bytes of the body, then a TCP reset |
| ``redirect`` | ``status`` (301) with ``Location: location`` |
| ``gzip`` | the normal answer gzip-compressed, ``Content-Encoding: gzip`` (the client asked for identity) |
| ``flood`` | an answer whose content is ``size`` bytes; ``"chunked": true`` streams it with no Content-Length |
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_LOCK = threading.Lock()
_COUNTS: dict[str, int] = {}


def envelope(scenario: str, n: int, model: str, content) -> bytes:
    return json.dumps({
        "id": f"chatcmpl-{scenario}-{n}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }).encode()


def make_handler(script_dir: Path):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _write(self, data: bytes) -> bool:
            try:
                self.wfile.write(data)
                self.wfile.flush()
                return True
            except (BrokenPipeError, ConnectionResetError, OSError):
                return False

        def _send(self, status: int, payload: dict | str | bytes, headers: dict | None = None, length: bool = True):
            if isinstance(payload, bytes):
                body = payload
            else:
                body = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            for key, value in (headers or {}).items():
                self.send_header(key, str(value))
            if length:
                self.send_header("Content-Length", str(len(body)))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self._write(body)

        def _trickle(self, data: bytes, interval_s: float) -> None:
            for i in range(len(data)):
                if not self._write(data[i:i + 1]):
                    return
                time.sleep(interval_s)

        def _reset(self) -> None:
            """Close with a TCP RST (SO_LINGER on, zero timeout)."""
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass
            self.close_connection = True

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
                    f.write(json.dumps({"headers": {"authorization": self.headers.get("Authorization"),
                                                    "accept-encoding": self.headers.get("Accept-Encoding")},
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
            model = request.get("model", "scripted")
            mode = reply.get("mode")
            status = int(reply.get("status", 200))
            if mode is None:
                if status != 200:
                    self._send(status, {"error": {"message": reply.get("content", "scripted failure")}})
                    return
                self._send(200, envelope(scenario, n, model, reply["content"]))
            elif mode == "body":
                body = base64.b64decode(reply["body_b64"]) if "body_b64" in reply else reply["body"].encode()
                self._send(status, body, reply.get("headers"), length=reply.get("length", True))
            elif mode == "trickle":
                body = envelope(scenario, n, model, reply.get("content", ""))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self._trickle(body, float(reply.get("interval_s", 1.0)))
            elif mode == "trickle_headers":
                self.close_connection = True
                self._trickle(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Slow: " + b"a" * 4000,
                              float(reply.get("interval_s", 1.0)))
            elif mode == "reset":
                body = envelope(scenario, n, model, reply.get("content", ""))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self._write(body[: int(reply.get("cut_at", len(body) // 2))])
                time.sleep(0.05)
                self._reset()
            elif mode == "redirect":
                self._send(int(reply.get("status", 301)), {"error": {"message": "moved"}},
                           {"Location": reply["location"]})
            elif mode == "gzip":
                self._send(200, gzip.compress(envelope(scenario, n, model, reply.get("content", ""))),
                           {"Content-Encoding": "gzip"})
            elif mode == "flood":
                size = int(reply.get("size", 10_000_000))
                if not reply.get("chunked", False):
                    self._send(200, envelope(scenario, n, model, "x" * size))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                block = b"x" * 65536
                head = b'{"choices": [{"message": {"role": "assistant", "content": "'
                for piece in [head] + [block] * (size // len(block)) + [b'"}}]}']:
                    if not self._write(b"%x\r\n%s\r\n" % (len(piece), piece)):
                        return
                self._write(b"0\r\n\r\n")
            else:
                self._send(500, {"error": {"message": f"unknown mode {mode!r} in the script"}})

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client that hung up (the tests do, on purpose)
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="folder of <scenario>.json scripts")
    args = parser.parse_args()
    server = QuietServer(("127.0.0.1", 0), make_handler(Path(args.dir)))
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

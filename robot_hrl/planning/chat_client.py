"""A minimal OpenAI chat-completions client (stdlib ``http.client``, no SDK), hardened for a hostile endpoint.

The endpoint is outside the robot's control: a model server can be slow, broken, or an
attacker's. The client therefore

- bounds each request by ONE deadline (connect, send, status line, headers and body together):
  a server sending one byte per second cannot hold it past ``timeout_s`` (per-read socket
  timeouts alone would let it). A watchdog shuts the socket down at the deadline;
- caps the response at ``max_response_bytes`` (Content-Length checked first, then the bytes read);
- follows NO redirect: a 3xx is an error naming where it pointed (urllib follows a 301 to another
  origin and sends the ``Authorization`` header along; the API key must only go to ``base_url``);
- asks for an uncompressed body and refuses any other ``Content-Encoding``;
- reads the envelope with the strict JSON reader (UTF-8 only; no NaN/Infinity, overflowing or
  400-digit numbers, deep nesting, duplicate keys: :func:`robot_hrl.planning.untrusted.loads_strict`).

Every failure, whatever layer it comes from (socket, TLS, HTTP framing, decoding, parsing), is an
:class:`LLMRequestError` with a message that says what happened; the LLM planner counts it as a
rejected attempt and falls back to the symbolic planner with that reason.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

from robot_hrl.errors import PlanningError
from robot_hrl.planning.deadline import PlanningDeadline
from robot_hrl.planning.task import TASK_SCHEMA
from robot_hrl.planning.untrusted import loads_strict, plain, show

API_KEY_ENV_VARS = ("ROBOT_HRL_LLM_API_KEY", "OPENAI_API_KEY")
MAX_RESPONSE_BYTES = 1 << 20
"""The largest chat-completions response read (1 MiB): a task under the schema's limits is well
under 200 kB, even escaped inside the envelope."""
MAX_ENVELOPE_DEPTH = 32
"""Nesting of the chat-completions envelope (choices, message, content: 4 deep; logprobs a few more)."""
_CHUNK = 65536


class LLMRequestError(PlanningError):
    """The endpoint could not be reached, ran past the deadline, or answered with something that is
    not a chat completion (an HTTP error, a redirect, a body too large, compressed, not UTF-8, not JSON)."""


def chat_completions_url(base_url: str) -> str:
    """``http://host:port`` or ``http://host:port/v1`` -> ``.../v1/chat/completions``."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


class _Watchdog:
    """Shuts a connection's socket down at a deadline, so that a blocking read returns at once."""

    def __init__(self, conn: http.client.HTTPConnection, after_s: float):
        self.conn = conn
        self.fired = False
        self._timer = threading.Timer(max(after_s, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


@dataclass
class ChatClient:
    """POST ``/v1/chat/completions``; returns the first choice's message content."""

    base_url: str
    model: str
    timeout_s: float = 30.0
    """The deadline of one request, all of it (connect to the last byte), seconds."""
    api_key: str | None = None
    json_schema_format: bool = True
    """Ask for structured output (``response_format: json_schema``); servers that ignore it still work."""
    max_response_bytes: int = MAX_RESPONSE_BYTES

    def __post_init__(self):
        if not self.base_url.startswith(("http://", "https://")):
            raise PlanningError(f"LLM URL {show(self.base_url)} must start with http:// or https://")
        if not (self.timeout_s > 0):
            raise PlanningError(f"LLM timeout must be positive, got {self.timeout_s}")
        if not (isinstance(self.max_response_bytes, int) and self.max_response_bytes > 0):
            raise PlanningError(f"max_response_bytes must be a positive integer, got {self.max_response_bytes!r}")
        if self.api_key is None:
            self.api_key = next((os.environ[v] for v in API_KEY_ENV_VARS if os.environ.get(v)), None)
        self.url = chat_completions_url(self.base_url)
        parts = urllib.parse.urlsplit(self.url)
        if not parts.hostname:
            raise PlanningError(f"LLM URL {show(self.base_url)} has no host")
        self._parts = parts

    def complete(self, messages: list[dict], deadline: PlanningDeadline | None = None) -> str:
        """The model's answer text; :class:`LLMRequestError` on any failure. ``deadline`` (the planning
        deadline) shortens the request's own ``timeout_s`` when it is nearer."""
        try:
            return self._complete(messages, deadline)
        except LLMRequestError as exc:
            # Some servers reject ``response_format``; ask again once without it, and from now on.
            if self.json_schema_format and " HTTP 400" in str(exc):
                self.json_schema_format = False
                return self._complete(messages, deadline)
            raise

    # ---- one request --------------------------------------------------------------------------
    def _budget_s(self, deadline: PlanningDeadline | None) -> float:
        budget = float(self.timeout_s)
        if deadline is not None:
            budget = min(budget, deadline.remaining_s())
        return budget

    def _complete(self, messages: list[dict], deadline: PlanningDeadline | None) -> str:
        body = {"model": self.model, "messages": messages, "temperature": 0.0, "stream": False}
        if self.json_schema_format:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "robot_hrl_task", "schema": TASK_SCHEMA, "strict": True}}
        budget = self._budget_s(deadline)
        if budget <= 0:
            raise LLMRequestError(f"no time left to ask the LLM endpoint {self.url} (the planning deadline has passed)")
        raw = self._post(json.dumps(body).encode(), budget)
        try:
            data = loads_strict(raw, f"the answer of the LLM endpoint {self.url}", self.max_response_bytes,
                                MAX_ENVELOPE_DEPTH)
        except PlanningError as exc:
            raise LLMRequestError(str(exc)) from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMRequestError(f"the LLM endpoint {self.url} did not answer in the chat-completions format "
                                  f"(no choices[0].message.content): {show(raw[:200].decode('utf-8', 'replace'))}") from None
        if not isinstance(content, str):
            raise LLMRequestError(f"the LLM endpoint {self.url} answered with no text content "
                                  f"(content is {type(content).__name__})")
        return content

    def _connection(self, timeout_s: float) -> http.client.HTTPConnection:
        p = self._parts
        if p.scheme == "https":
            return http.client.HTTPSConnection(p.hostname, p.port, timeout=timeout_s,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(p.hostname, p.port, timeout=timeout_s)

    def _post(self, payload: bytes, budget_s: float) -> bytes:
        url = self.url
        headers = {"Content-Type": "application/json", "Accept": "application/json", "Accept-Encoding": "identity"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        path = self._parts.path or "/"
        if self._parts.query:
            path += "?" + self._parts.query
        end = time.monotonic() + budget_s
        conn = self._connection(budget_s)
        watchdog = _Watchdog(conn, budget_s)
        try:
            conn.request("POST", path, body=payload, headers=headers)
            resp = conn.getresponse()
            raw = self._read(resp, end, conn)
            if watchdog.fired:
                raise self._late(budget_s)
            return raw
        except LLMRequestError:
            if watchdog.fired:
                raise self._late(budget_s) from None
            raise
        except (socket.timeout, TimeoutError):
            raise self._late(budget_s) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if watchdog.fired:
                raise self._late(budget_s) from None
            if isinstance(exc, (ConnectionRefusedError, socket.gaierror)) or (
                    isinstance(exc, OSError) and conn.sock is None):
                raise LLMRequestError(f"cannot reach the LLM endpoint {url}: {exc}") from None
            raise LLMRequestError(f"the connection to the LLM endpoint {url} failed mid-answer "
                                  f"({type(exc).__name__}: {plain(str(exc), 120)})") from None
        finally:
            watchdog.cancel()
            conn.close()

    def _late(self, budget_s: float) -> LLMRequestError:
        return LLMRequestError(f"the LLM endpoint {self.url} did not answer within {budget_s:.3g} s "
                               "(one deadline for the whole answer)")

    def _read(self, resp: http.client.HTTPResponse, end: float, conn: http.client.HTTPConnection) -> bytes:
        url = self.url
        if 300 <= resp.status < 400:
            where = resp.getheader("Location", "")
            raise LLMRequestError(f"the LLM endpoint {url} answered HTTP {resp.status} (a redirect to {show(where)}); "
                                  "redirects are not followed, so the API key never goes to another address: "
                                  "set llm_url to the endpoint itself")
        encoding = (resp.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding != "identity":
            raise LLMRequestError(f"the LLM endpoint {url} sent a {show(encoding, 24)}-compressed body although "
                                  "the request asked for none (Accept-Encoding: identity)")
        length = resp.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_response_bytes:
            raise LLMRequestError(f"the LLM endpoint {url} announced {int(length)} bytes; at most "
                                  f"{self.max_response_bytes} are read")
        limit = self.max_response_bytes if resp.status == 200 else 200
        chunks, size = [], 0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError  # turned into the deadline message by _post
            if conn.sock is not None:
                conn.sock.settimeout(left)
            chunk = resp.read1(_CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                if resp.status != 200:
                    break
                raise LLMRequestError(f"the LLM endpoint {url} sent more than {self.max_response_bytes} bytes; "
                                      "the answer was cut off and refused")
        raw = b"".join(chunks)
        missing = getattr(resp, "length", None)
        if resp.status == 200 and missing:  # Content-Length said more than arrived before the end
            raise LLMRequestError(f"the connection to the LLM endpoint {url} failed mid-answer (closed after {size} "
                                  f"bytes, {missing} short of its Content-Length)")
        if resp.status != 200:
            detail = raw[:200].decode("utf-8", errors="replace")
            raise LLMRequestError(f"the LLM endpoint {url} answered HTTP {resp.status}: {plain(detail, 200)}")
        return raw

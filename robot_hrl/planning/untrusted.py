"""Untrusted text: strict JSON, and how names and answers are shown back in messages.

Everything a user, a tool or a language model sends the planner is untrusted: a task on
``/task``, a chat-completions answer, a status on ``/skill/status``. :func:`loads_strict` is the
one JSON reader for all of them. Python's ``json.loads`` accepts what the JSON standard (RFC 8259)
does not, and breaks on what an attacker can send:

- ``NaN``, ``Infinity``, ``-Infinity`` (not JSON; a ``NaN`` passes jsonschema's ``minimum``);
- numbers that overflow a double (``1e400`` becomes ``inf``) and integers of hundreds of digits
  (``float()`` of one raises ``OverflowError``; past 4300 digits ``int()`` refuses);
- nesting thousands deep (``RecursionError``);
- a key given twice (``{"steps": [...], "steps": [...]}``: which one did the sender mean?).

Each is refused with a :class:`~robot_hrl.errors.PlanningError` that says what and where. Sizes
and depth are checked before the parser runs.

:func:`show` quotes untrusted text in a message: ``ascii()`` (a Cyrillic ``о`` in ``red_bоx``
shows as ``\\u043e``, so a homoglyph never looks like the real name) and truncated (a 10 MB
property name is not copied into every error and prompt).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from robot_hrl.errors import PlanningError

SHOW_CHARS = 80
"""How much of an untrusted string a message quotes (then ``... (N chars)``)."""
MAX_INT_DIGITS = 16
"""An integer with more digits is refused (a double holds 15-17 significant digits; no goal,
altitude or duration needs more)."""
MAX_JSON_DEPTH = 32
"""Nesting deeper than this is refused before parsing (the task schema nests 6 deep)."""

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def show(text: Any, limit: int = SHOW_CHARS) -> str:
    """``ascii(text)``, cut to ``limit`` characters of the text (the cut is said)."""
    if not isinstance(text, str):
        text = str(text)
    if len(text) <= limit:
        return ascii(text)
    return f"{ascii(text[:limit])}... ({len(text)} chars)"


def plain(text: Any, limit: int = 300) -> str:
    """Text for a message, unquoted: non-ASCII escaped (homoglyphs visible), cut to ``limit`` characters."""
    if not isinstance(text, str):
        text = str(text)
    cut = len(text) > limit
    out = text[:limit].encode("ascii", "backslashreplace").decode("ascii")
    return f"{out}... ({len(text)} chars)" if cut else out


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut (for text sent back to a model)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} ... [{len(text) - limit} more characters cut]"


def json_depth(data: bytes) -> int:
    """How deep arrays and objects nest in JSON bytes (strings are skipped; C-speed: regex + numpy)."""
    stripped = _STRING.sub(b'""', data)
    b = np.frombuffer(stripped, dtype=np.uint8)
    steps = ((b == ord("[")) | (b == ord("{"))).astype(np.int32) - ((b == ord("]")) | (b == ord("}"))).astype(np.int32)
    if steps.size == 0:
        return 0
    return int(max(0, np.cumsum(steps).max()))


class _Refused(ValueError):
    pass


def _constant(name: str):
    raise _Refused(f"{name} is not a JSON number (RFC 8259); send finite numbers only")


def _int(text: str):
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {digits} digits ({show(text, 24)}) is out of range; "
                       f"at most {MAX_INT_DIGITS} digits")
    return int(text)


def _float(text: str):
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {show(text, 24)} overflows a double; send finite numbers only")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"the key {show(key)} appears twice in one object; give each key once")
        out[key] = value
    return out


def loads_strict(text: str | bytes, what: str, max_chars: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse untrusted JSON strictly (see the module docstring); errors name ``what`` was parsed.

    ``text`` may be bytes (must be UTF-8) or str. At most ``max_chars`` characters (bytes, for
    bytes) and ``max_depth`` levels of nesting.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        data = bytes(text)
        if len(data) > max_chars:
            raise PlanningError(f"{what} is {len(data)} bytes; at most {max_chars} are accepted")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PlanningError(f"{what} is not UTF-8 text (byte {data[exc.start]:#04x} at position {exc.start}); "
                                "send UTF-8 JSON") from None
    elif isinstance(text, str):
        if len(text) > max_chars:
            raise PlanningError(f"{what} is {len(text)} characters; at most {max_chars} are accepted")
        data = text.encode("utf-8", errors="surrogatepass")
    else:
        raise PlanningError(f"{what} must be JSON text, got {type(text).__name__}")
    depth = json_depth(data)
    if depth > max_depth:
        raise PlanningError(f"{what} nests {depth} levels deep; at most {max_depth} are accepted")
    try:
        return json.loads(text, parse_constant=_constant, parse_int=_int, parse_float=_float,
                          object_pairs_hook=_object)
    except _Refused as exc:
        raise PlanningError(f"{what} is refused: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PlanningError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # what the C scanner raises for anything else
        raise PlanningError(f"{what} is not valid JSON ({type(exc).__name__}: {show(str(exc))})") from None


def check_finite_numbers(data: Any, what: str, path: str = "") -> None:
    """Raise PlanningError at the first number in a parsed JSON value (dicts, lists, numbers) that is
    not finite (a Python dict given directly may hold ``float('nan')``; jsonschema lets it through
    ``minimum``/``maximum``)."""
    stack = [(data, path, 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise PlanningError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels at {show(where)}")
        if isinstance(value, bool):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise PlanningError(f"{what} has a non-finite number {value!r} at {where or '(top level)'}; "
                                    "every number must be finite")
        elif isinstance(value, int):
            if abs(value) >= 10 ** MAX_INT_DIGITS:
                raise PlanningError(f"{what} has an integer of {len(str(abs(value)))} digits at "
                                    f"{where or '(top level)'}; at most {MAX_INT_DIGITS} digits")
        elif isinstance(value, dict):
            stack.extend((v, f"{where}/{k}" if where else str(k), depth + 1) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{where}/{i}" if where else str(i), depth + 1) for i, v in enumerate(value))

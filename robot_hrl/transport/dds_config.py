"""Cyclone DDS configuration: a loopback-only profile for tests and single-machine runs.

Cyclone DDS reads its configuration from the ``CYCLONEDDS_URI`` environment variable (a file
URL or, as here, the XML itself) when a process first joins a domain. The loopback profile
binds to 127.0.0.1, turns multicast off and finds peers by unicast on localhost, so parallel
test runs on one machine never talk to each other when each uses its own domain id, and
nothing leaves the machine.

    env = loopback_env(domain_id=17)       # {"CYCLONEDDS_URI": "<CycloneDDS>...", "ROS_DOMAIN_ID": "17"}
    subprocess.run([...], env={**os.environ, **env})
"""

from __future__ import annotations

import itertools
import os

from robot_hrl.transport.interface import TransportError

MAX_DOMAIN_ID = 232
"""The largest domain id whose UDP ports (7400 + 250 * id + ...) fit below 65536."""


def check_domain_id(domain_id: int) -> int:
    if isinstance(domain_id, bool) or not isinstance(domain_id, int) or not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise TransportError(f"DDS domain id must be an integer in 0..{MAX_DOMAIN_ID}, got {domain_id!r} "
                         "(set ROS_DOMAIN_ID or pass domain_id=)")
    return domain_id


def domain_id_from_env(default: int = 0) -> int:
    """``ROS_DOMAIN_ID`` as ROS 2 reads it (0 when unset or empty)."""
    raw = os.environ.get("ROS_DOMAIN_ID", "").strip()
    if not raw:
        return check_domain_id(default)
    try:
        value = int(raw)
    except ValueError:
        raise TransportError(f"ROS_DOMAIN_ID={raw!r} is not an integer; set it to a domain id in 0..{MAX_DOMAIN_ID}") from None
    return check_domain_id(value)


def loopback_config(max_participants: int = 32) -> str:
    """Cyclone DDS XML for loopback-only, unicast discovery between up to ``max_participants``
    participants per domain on this machine."""
    if not 1 <= max_participants <= 120:
        raise TransportError(f"max_participants must be in 1..120, got {max_participants}")
    return (
        '<CycloneDDS><Domain Id="any">'
        "<General>"
        '<Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces>'
        "<AllowMulticast>false</AllowMulticast>"
        "</General>"
        "<Discovery>"
        "<ParticipantIndex>auto</ParticipantIndex>"
        f"<MaxAutoParticipantIndex>{max_participants - 1}</MaxAutoParticipantIndex>"
        '<Peers><Peer address="127.0.0.1"/></Peers>'
        "</Discovery>"
        "</Domain></CycloneDDS>"
    )


def loopback_env(domain_id: int, max_participants: int = 32) -> dict[str, str]:
    """Environment variables that put a process on ``domain_id`` with the loopback profile."""
    return {"CYCLONEDDS_URI": loopback_config(max_participants), "ROS_DOMAIN_ID": str(check_domain_id(domain_id))}


_counter = itertools.count()


def unique_domain_id(block: int = 0) -> int:
    """A domain id of this process's own for one test: the pytest-xdist worker picks a band
    (``gw0`` -> 1..38, ``gw1`` -> 39..76, ...), a counter walks through it. ``block`` shifts the
    band for callers that need a second, independent sequence."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    try:
        index = int(worker.removeprefix("gw"))
    except ValueError:
        index = 0
    band = 38
    n = next(_counter)
    return 1 + ((index + block) % 6) * band + n % band

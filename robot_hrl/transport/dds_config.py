"""Cyclone DDS configuration: a loopback-only profile for tests and single-machine runs.

A stock ROS 2 on the same machine (Fast DDS, default settings) discovers a participant with this
profile: it re-announces itself to the well-known unicast ports on 127.0.0.1 every
:data:`SPDP_INTERVAL_S`. A ROS 2 on rmw_cyclonedds_cpp needs the same profile
(``CYCLONEDDS_URI``), or the launcher's ``--network``.

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

from robot_hrl.msgs.rmw_dds_common import gid_size_for_distro
from robot_hrl.transport.interface import TransportError

RANGE_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
"""ROS 2 (Iron and later) reads discovery's reach from this variable: SUBNET (the default), LOCALHOST,
OFF or SYSTEM_DEFAULT."""
LOCALHOST_RANGE = "LOCALHOST"

SPDP_INTERVAL_S = 1.0
"""How often the loopback profile re-announces each participant to the unicast peers on 127.0.0.1
(Cyclone DDS's default, 30 s, is for multicast discovery). A stock ROS 2 with Fast DDS, started
later with its default settings, announces itself by multicast only, which a loopback participant
does not hear; it hears this announcement on its well-known unicast port, answers, and both sides
match within about this long."""

HEARTBEAT_INTERVAL_S = 0.02
"""How often a reliable writer of the loopback profile asks for acknowledgements while data is
unacknowledged (Cyclone DDS's default: 100 ms). A sample written by a NEW writer right after it
matched a remote reader may reach that reader before the reader has discovered the writer; it is
dropped there and repaired after the next heartbeat. At 100 ms (and up to 2 intervals) that put
the p99 of "/estop true from a new publisher -> motors off" at 170 ms; at 20 ms it is within the
100 ms target (benchmarks/bench_estop.py). The cost is a few more small packets on loopback."""

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


def ros_gid_size(ros_distro: str | None = None) -> int:
    """The size of the ROS 2 graph GIDs (``rmw_dds_common/msg/Gid``) to publish: 24 bytes for the
    Foxy/Galactic/Humble layout, 16 for Iron and later. ``ros_distro`` wins; else ``ROS_DISTRO``
    (set by a sourced ROS 2 install); unset means the current layout (16)."""
    distro = ros_distro if ros_distro is not None else os.environ.get("ROS_DISTRO", "")
    return gid_size_for_distro(distro)


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
        f"<SPDPInterval>{SPDP_INTERVAL_S:g}s</SPDPInterval>"
        '<Peers><Peer address="127.0.0.1"/></Peers>'
        "</Discovery>"
        f'<Internal><HeartbeatInterval minsched="{HEARTBEAT_INTERVAL_S * 1e3:g}ms">'
        f"{HEARTBEAT_INTERVAL_S * 1e3:g}ms</HeartbeatInterval></Internal>"
        "</Domain></CycloneDDS>"
    )


def loopback_env(domain_id: int, max_participants: int = 32) -> dict[str, str]:
    """Environment variables that put a process on ``domain_id`` with the loopback profile."""
    return {"CYCLONEDDS_URI": loopback_config(max_participants), "ROS_DOMAIN_ID": str(check_domain_id(domain_id))}


_counter = itertools.count()


DOMAIN_ID_BLOCKS = 4
"""Independent id sequences per process (``block`` 0..3): e.g. unit tests and end-to-end graphs."""


def unique_domain_id(block: int = 0) -> int:
    """A domain id of this process's own for one test.

    Ids 1..232 are split into one band per (pytest-xdist worker, block): worker ``gwN`` of
    ``PYTEST_XDIST_WORKER_COUNT`` and ``block`` in 0..3 own band ``N * 4 + block``, and a
    counter walks through it. Bands never overlap, so parallel workers never share a domain
    (tests within one worker run one after another, so reuse inside a band is safe)."""
    if not 0 <= block < DOMAIN_ID_BLOCKS:
        raise ValueError(f"block must be in 0..{DOMAIN_ID_BLOCKS - 1}, got {block}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    try:
        index = int(worker.removeprefix("gw"))
    except ValueError:
        index = 0
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1), index + 1)
    bands = workers * DOMAIN_ID_BLOCKS
    band_size = MAX_DOMAIN_ID // bands
    if band_size < 1:
        raise ValueError(f"{workers} workers x {DOMAIN_ID_BLOCKS} blocks do not fit in {MAX_DOMAIN_ID} domain ids")
    band = index * DOMAIN_ID_BLOCKS + block
    return 1 + band * band_size + next(_counter) % band_size
"""Pick a DDS domain on which nobody is talking (runs sharing a machine walk the same domain ids)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

LISTEN_S = 0.6
"""How long a probe listens on a domain before calling it quiet, s (loopback discovery completes well within it)."""


def first_quiet_domain(candidates: Iterable[int], listen_s: float = LISTEN_S) -> int:
    """The first domain id of ``candidates`` on which a probe participant (Cyclone DDS, loopback profile) hears no
    topic within ``listen_s``; the last one tried when all are busy. The caller's ``CYCLONEDDS_URI`` and
    ``ROS_DOMAIN_ID`` are left as they were."""
    from robot_hrl.transport import create_node
    from robot_hrl.transport.dds_config import loopback_env

    saved = {k: os.environ.get(k) for k in ("CYCLONEDDS_URI", "ROS_DOMAIN_ID")}
    domain = None
    try:
        for domain in candidates:
            os.environ.update(loopback_env(domain))
            probe = create_node("probe", backend="cyclonedds", domain_id=domain)
            try:
                end = time.monotonic() + listen_s
                while time.monotonic() < end:
                    probe.spin_once(0.05)
                busy = bool(probe.get_topic_names_and_types())
            finally:
                probe.shutdown()
            if not busy:
                return domain
        if domain is None:
            raise ValueError("first_quiet_domain: no candidate domain ids given")
        return domain
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

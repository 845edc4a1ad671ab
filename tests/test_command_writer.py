"""Writer identity on /cmd_wrench (issue #16): in lockstep the sim node applies only the skill node's commands.

Real parts: the sim node (PyBullet) in this process, the writers in separate processes over Cyclone DDS
(tests/dds_helpers.py Peer). Every command is stamped with the current lockstep period, so the stamp rule alone
cannot tell them apart; the writer's GUID (the sample's publication handle, resolved by the transport) against the
graph's discovery data (``ros_discovery_info``: which node owns which writer) does.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pybullet")

from dds_helpers import Peer, spin_until, use_domain  # noqa: E402

from robot_hrl.transport import create_node  # noqa: E402

PERIOD_T_S = 5.0
SKILL_THRUST_N = 0.21
ROGUE_THRUST_N = 0.6


@pytest.fixture
def dds_domain(monkeypatch) -> int:
    return use_domain(monkeypatch)


@pytest.fixture
def sim(dds_domain):
    from sim.nodes.sim_node import SimNode

    node = create_node("sim_node", backend="cyclonedds", parameters={"use_sim_time": True, "lockstep": True})
    s = SimNode(node)
    with s._lock:
        s._period_t = PERIOD_T_S  # the period whose command the lockstep waits for
    yield s
    node.shutdown()


def _send(sim, peer: Peer, stamp_s: float) -> None:
    seen = sim._commands + sim.foreign_commands
    peer.send(str(stamp_s))
    peer.expect("SENT")
    spin_until(sim.node, lambda: sim._commands + sim.foreign_commands > seen, what="the command to arrive")


def test_a_second_writer_stamped_for_the_period_is_not_applied(sim, dds_domain):
    # a lone writer, not the skill node and no discovery data naming the skill node: start-up keeps the old rule
    with Peer(dds_domain, "wrench_writer", "early_writer", 0.1) as early:
        early.expect("READY")
        spin_until(sim.node, lambda: sim.writer.subscription.get_publisher_count() == 1, what="the writer to match")
        _send(sim, early, PERIOD_T_S)
        assert sim._commands == 1 and sim.foreign_commands == 0
        assert sim.writer.accepted_unidentified == 1
        assert sim._wrench[0] == pytest.approx(0.1)

    with Peer(dds_domain, "wrench_writer", "skill_node", SKILL_THRUST_N) as skill, \
            Peer(dds_domain, "wrench_writer", "rogue_writer", ROGUE_THRUST_N) as rogue:
        skill.expect("READY")
        rogue.expect("READY")
        spin_until(sim.node, lambda: sim.writer.subscription.get_publisher_count() == 2, what="both writers to match")

        def skill_identified() -> bool:
            sim.writer.refresh()
            return len(sim.writer.known_gids) == 1
        spin_until(sim.node, skill_identified, what="the skill node's writer in the discovery data")

        _send(sim, skill, PERIOD_T_S)
        assert sim._commands == 2 and sim._wrench[0] == pytest.approx(SKILL_THRUST_N)
        for _ in range(3):  # the rogue, correctly stamped: counted as foreign, never applied, never steps
            _send(sim, rogue, PERIOD_T_S)
        assert sim._commands == 2 and sim.foreign_commands == 3
        assert sim._wrench[0] == pytest.approx(SKILL_THRUST_N)
        assert sim.writer.refused == 3 and len(sim.writer.foreign_gids) == 1
        _send(sim, skill, PERIOD_T_S)  # the skill node still drives
        assert sim._commands == 3
        _send(sim, skill, PERIOD_T_S + 0.01)  # a late (stale-stamped) skill command is not this period's
        assert sim._commands == 3 and sim.foreign_commands == 4
        values = sim.writer.diagnostic_values()
        assert values["foreign_writer_commands"] == 3 and "1 writer(s) identified" in values["command_writer"]


def test_endpoint_info_names_the_writer_node_and_its_gid(dds_domain):
    node = create_node("observer", backend="cyclonedds")
    try:
        with Peer(dds_domain, "wrench_writer", "skill_node", SKILL_THRUST_N) as skill:
            skill.expect("READY")

            def named():
                infos = node.get_publishers_info_by_topic("/cmd_wrench")
                return len(infos) == 1 and infos[0].node_name == "skill_node"
            spin_until(node, named, what="the writer's node name from ros_discovery_info")
            info = node.get_publishers_info_by_topic("/cmd_wrench")[0]
            assert info.node_namespace == "/" and len(info.endpoint_gid) == 16
    finally:
        node.shutdown()

"""rmw_dds_common/msg: Gid, NodeEntitiesInfo, ParticipantEntitiesInfo (the ROS 2 graph).

Every ROS 2 participant on a DDS-based RMW publishes a ``ParticipantEntitiesInfo`` on the DDS
topic ``ros_discovery_info``: its GID and, per node, the namespace, the name and the GIDs of
the node's readers and writers. ``ros2 node list`` / ``ros2 node info`` are built from it.

The ``Gid`` layout depends on the ROS 2 distribution (its ``RMW_GID_STORAGE_SIZE``):
``char[24] data`` up to Humble (Foxy, Galactic, Humble), ``char[16] data`` from Iron on
(Jazzy, Kilted, Rolling). The DDS type name is the same for both, so a reader of one layout
would misread the other: pick the layout of the ROS 2 machines you talk to
(:func:`gid_size_for_distro`, :func:`entities_info_classes`).

The classes here are not in the :func:`robot_hrl.msgs.message_class` registry: one ROS type
name has two layouts, and nodes never publish these themselves (the transport does).
``char`` is an octet on the wire, held here as ``uint8`` (same CDR bytes); ``Gid.data`` is
``bytes`` (what cyclonedds decodes a ``uint8`` array to).
"""

# No `from __future__ import annotations`: cyclonedds resolves the field types at runtime.

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

import cyclonedds.idl.types as t
from cyclonedds.idl import IdlStruct

from robot_hrl.msgs._base import MessageTypeError, dds_typename

GID_SIZE_JAZZY = 16
"""``RMW_GID_STORAGE_SIZE`` from Iron on (Iron, Jazzy, Kilted, Rolling)."""
GID_SIZE_HUMBLE = 24
"""``RMW_GID_STORAGE_SIZE`` up to Humble (Foxy, Galactic, Humble)."""

_DISTROS_WITH_24_BYTE_GIDS = frozenset({"foxy", "galactic", "humble"})

NAME_BOUND = 256
"""NodeEntitiesInfo.msg declares ``string<256>`` names. A bound does not change the CDR bytes;
the fields here are plain strings (our message introspection knows those) and the transport
checks the length before publishing."""


# ---- Iron / Jazzy and later: char[16] ---------------------------------------------------------
@dataclass
class Gid(IdlStruct, typename=dds_typename("rmw_dds_common/msg/Gid")):
    """A 16-byte GID (Iron, Jazzy and later)."""

    data: t.array[t.uint8, GID_SIZE_JAZZY] = bytes(GID_SIZE_JAZZY)


@dataclass
class NodeEntitiesInfo(IdlStruct, typename=dds_typename("rmw_dds_common/msg/NodeEntitiesInfo")):
    node_namespace: str = ""  # string<256> in ROS: same CDR bytes (see NAME_BOUND)
    node_name: str = ""
    reader_gid_seq: t.sequence[Gid] = field(default_factory=list)
    writer_gid_seq: t.sequence[Gid] = field(default_factory=list)


@dataclass
class ParticipantEntitiesInfo(IdlStruct, typename=dds_typename("rmw_dds_common/msg/ParticipantEntitiesInfo")):
    gid: Gid = field(default_factory=Gid)
    node_entities_info_seq: t.sequence[NodeEntitiesInfo] = field(default_factory=list)


# ---- Foxy / Galactic / Humble: char[24] -------------------------------------------------------
@dataclass
class GidHumble(IdlStruct, typename=dds_typename("rmw_dds_common/msg/Gid")):
    """A 24-byte GID (Foxy, Galactic, Humble): the 16-byte DDS GUID, then 8 zero bytes."""

    data: t.array[t.uint8, GID_SIZE_HUMBLE] = bytes(GID_SIZE_HUMBLE)


@dataclass
class NodeEntitiesInfoHumble(IdlStruct, typename=dds_typename("rmw_dds_common/msg/NodeEntitiesInfo")):
    node_namespace: str = ""  # string<256> in ROS: same CDR bytes (see NAME_BOUND)
    node_name: str = ""
    reader_gid_seq: t.sequence[GidHumble] = field(default_factory=list)
    writer_gid_seq: t.sequence[GidHumble] = field(default_factory=list)


@dataclass
class ParticipantEntitiesInfoHumble(IdlStruct,
                                    typename=dds_typename("rmw_dds_common/msg/ParticipantEntitiesInfo")):
    gid: GidHumble = field(default_factory=GidHumble)
    node_entities_info_seq: t.sequence[NodeEntitiesInfoHumble] = field(default_factory=list)


class EntitiesInfoClasses(NamedTuple):
    """The three classes of one GID layout."""

    gid: type
    node: type
    participant: type


_CLASSES = {
    GID_SIZE_JAZZY: EntitiesInfoClasses(Gid, NodeEntitiesInfo, ParticipantEntitiesInfo),
    GID_SIZE_HUMBLE: EntitiesInfoClasses(GidHumble, NodeEntitiesInfoHumble, ParticipantEntitiesInfoHumble),
}


def gid_size_for_distro(distro: str | None) -> int:
    """The GID size of a ROS 2 distribution name (``ROS_DISTRO``): 24 for foxy, galactic and
    humble, 16 otherwise (iron, jazzy, kilted, rolling, and unset: the current layout)."""
    return GID_SIZE_HUMBLE if (distro or "").strip().lower() in _DISTROS_WITH_24_BYTE_GIDS else GID_SIZE_JAZZY


def entities_info_classes(gid_size: int) -> EntitiesInfoClasses:
    """The Gid / NodeEntitiesInfo / ParticipantEntitiesInfo classes of a GID size (16 or 24)."""
    try:
        return _CLASSES[gid_size]
    except KeyError:
        raise MessageTypeError(f"rmw_dds_common/msg/Gid has {GID_SIZE_JAZZY} (Iron and later) or "
                               f"{GID_SIZE_HUMBLE} (up to Humble) bytes, not {gid_size!r}") from None


def gid_from_guid(guid: uuid.UUID | bytes, gid_size: int = GID_SIZE_JAZZY):
    """The Gid of a DDS entity, as rmw_cyclonedds makes it: the 16 bytes of the entity's GUID
    (prefix + entity id, network order), zero-padded to ``gid_size``."""
    raw = guid.bytes if isinstance(guid, uuid.UUID) else bytes(guid)
    if len(raw) != 16:
        raise MessageTypeError(f"a DDS GUID has 16 bytes, got {len(raw)}")
    cls = entities_info_classes(gid_size).gid
    return cls(data=raw.ljust(gid_size, b"\0"))


def guid_from_gid(gid) -> uuid.UUID:
    """The DDS GUID in a Gid (its first 16 bytes)."""
    return uuid.UUID(bytes=bytes(gid.data[:16]))


__all__ = [
    "GID_SIZE_HUMBLE", "GID_SIZE_JAZZY", "NAME_BOUND", "EntitiesInfoClasses", "Gid", "GidHumble", "NodeEntitiesInfo",
    "NodeEntitiesInfoHumble", "ParticipantEntitiesInfo", "ParticipantEntitiesInfoHumble", "entities_info_classes",
    "gid_from_guid", "gid_size_for_distro", "guid_from_gid",
]

"""Every message type: our CDR bytes are those of ROS 2 (rosbags' ROS 2 Humble serializer), both ways.

The ROS 2 graph types (rmw_dds_common) have a Humble layout (24-byte Gid) and a Jazzy one
(16-byte Gid): each is checked against the rosbags typestore of its distribution."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from robot_hrl.msgs import Odometry, all_message_classes, dds_typename, message_class, ros_type_name
from robot_hrl.msgs._introspect import message_fields
from robot_hrl.msgs.rmw_dds_common import (
    GID_SIZE_HUMBLE,
    GID_SIZE_JAZZY,
    entities_info_classes,
    gid_from_guid,
    gid_size_for_distro,
    guid_from_gid,
)

TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)
ALL_TYPES = sorted(all_message_classes())

_NP = {"float64": np.float64, "float32": np.float32, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
       "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
       "bool": np.bool_, "byte": np.uint8}


def _prim(prim: str, rng: np.random.Generator):
    if prim == "string":
        return "".join(rng.choice(list("abcxyz_/äß→"), size=int(rng.integers(0, 9))))
    if prim == "bool":
        return bool(rng.integers(0, 2))
    if prim.startswith("float"):
        return float(np.asarray(rng.normal() * 100, dtype=_NP[prim]))
    if prim == "byte":  # ROS `byte` (an octet); rosbags holds it as int8, rclpy as bytes: 0..127 suit all
        return int(rng.integers(0, 128))
    info = np.iinfo(_NP[prim])
    return int(rng.integers(info.min, info.max, endpoint=True))


def _fill(kind, rng):
    if kind.kind == "prim":
        return _prim(kind.prim, rng)
    if kind.kind == "bytes":
        return rng.integers(0, 256, size=int(rng.integers(0, 12)), dtype=np.uint8).tobytes()
    if kind.kind == "struct":
        return fill(kind.struct, rng)
    n = kind.length if kind.kind == "array" else int(rng.integers(0, 4))
    if _is_octet_array(kind):  # cyclonedds holds a uint8 array as bytes (rmw_dds_common Gid.data)
        return rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()
    return [_fill(kind.elem, rng) for _ in range(n)]


def _is_octet_array(kind) -> bool:
    return kind.kind == "array" and kind.elem.kind == "prim" and kind.elem.prim == "uint8"


def fill(cls, rng: np.random.Generator):
    """A message of ``cls`` with random non-default values in every field."""
    return cls(**{name: _fill(kind, rng) for name, kind in message_fields(cls)})


def to_rosbags(msg, typestore=TYPESTORE):
    cls = typestore.types[ros_type_name(msg)]
    return cls(**{name: _to_rb(kind, getattr(msg, name), typestore) for name, kind in message_fields(type(msg))})


def _to_rb(kind, value, typestore=TYPESTORE):
    if kind.kind == "prim":
        return value
    if kind.kind == "bytes" or (_is_octet_array(kind) and isinstance(value, bytes)):
        return np.frombuffer(value, dtype=np.uint8).copy()
    if kind.kind == "struct":
        return to_rosbags(value, typestore)
    if kind.elem.kind == "prim" and kind.elem.prim != "string":
        return np.array(value, dtype=_NP[kind.elem.prim])
    return [_to_rb(kind.elem, v, typestore) for v in value]


def from_rosbags(rb, cls):
    return cls(**{name: _from_rb(kind, getattr(rb, name)) for name, kind in message_fields(cls)})


def _from_rb(kind, value):
    if kind.kind == "prim":
        return value.item() if isinstance(value, np.generic) else value
    if kind.kind == "bytes" or _is_octet_array(kind):
        return bytes(np.asarray(value, dtype=np.uint8))
    if kind.kind == "struct":
        return from_rosbags(value, kind.struct)
    return [_from_rb(kind.elem, v) for v in value]


def test_every_type_of_the_design_is_there():
    needed = ["builtin_interfaces/msg/Time", "std_msgs/msg/Header", "std_msgs/msg/String", "geometry_msgs/msg/Point",
              "geometry_msgs/msg/Quaternion", "geometry_msgs/msg/Vector3", "geometry_msgs/msg/Pose",
              "geometry_msgs/msg/PoseStamped", "geometry_msgs/msg/PoseWithCovariance", "geometry_msgs/msg/Twist",
              "geometry_msgs/msg/TwistWithCovariance", "geometry_msgs/msg/Wrench", "geometry_msgs/msg/WrenchStamped",
              "nav_msgs/msg/Odometry", "nav_msgs/msg/Path", "sensor_msgs/msg/Image", "diagnostic_msgs/msg/KeyValue",
              "diagnostic_msgs/msg/DiagnosticStatus", "diagnostic_msgs/msg/DiagnosticArray",
              "rosgraph_msgs/msg/Clock", "sensor_msgs/msg/BatteryState"]
    assert set(needed) <= set(ALL_TYPES)


@pytest.mark.parametrize("ros_type", ALL_TYPES)
def test_field_names_and_order_match_ros2(ros_type):
    ours = [name for name, _ in message_fields(message_class(ros_type))]
    theirs = [name for name, _ in TYPESTORE.fielddefs[ros_type][1]]
    assert ours == theirs
    assert message_class(ros_type).__idl_typename__ == dds_typename(ros_type)


@pytest.mark.parametrize("ros_type", ALL_TYPES)
def test_default_message_is_the_ros2_default(ros_type):
    cls = message_class(ros_type)
    ours = cls().serialize()
    assert ours == bytes(TYPESTORE.serialize_cdr(from_default_rosbags(ros_type), ros_type))


def from_default_rosbags(ros_type):
    # rosbags has no defaults: build a ROS 2 default message field by field (Quaternion w = 1).
    cls = TYPESTORE.types[ros_type]
    values = {}
    for name, (nodetype, desc) in TYPESTORE.fielddefs[ros_type][1]:
        values[name] = _rb_default(nodetype, desc, ros_type, name)
    return cls(**values)


def _rb_default(nodetype, desc, ros_type, name):
    nt = int(nodetype)
    if nt == 1:  # BASE
        base = desc[0]
        if ros_type == "geometry_msgs/msg/Quaternion" and name == "w":
            return 1.0
        return {"string": "", "bool": False}.get(base, 0.0 if base.startswith("float") else 0)
    if nt == 2:  # NAME
        return from_default_rosbags(desc)
    sub_nt, sub_desc = desc[0]
    n = desc[1] if nt == 3 else 0  # ARRAY has a length
    if int(sub_nt) == 1 and sub_desc[0] != "string":
        return np.zeros(n, dtype=_NP[sub_desc[0]])
    return [_rb_default(sub_nt, sub_desc, ros_type, name) for _ in range(n)]


@pytest.mark.parametrize("ros_type", ALL_TYPES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cdr_bytes_identical_to_ros2_both_ways(ros_type, seed):
    cls = message_class(ros_type)
    msg = fill(cls, np.random.default_rng(seed))
    ours = msg.serialize()
    theirs = bytes(TYPESTORE.serialize_cdr(to_rosbags(msg), ros_type))
    assert ours[:4] == b"\x00\x01\x00\x00", "CDR little-endian encapsulation header, as ROS 2 sends"
    assert ours == theirs
    # ours -> rosbags
    assert from_rosbags(TYPESTORE.deserialize_cdr(ours, ros_type), cls) == msg
    # rosbags -> ours
    assert cls.deserialize(theirs) == msg


def test_writer_padding_still_decodes_in_rosbags():
    # A DDS writer pads a sample to a multiple of 4 bytes; ROS 2 readers accept that.
    msg = fill(Odometry, np.random.default_rng(5))
    padded = msg.serialize()
    padded = padded.ljust((len(padded) + 3) & ~3, b"\0")
    assert from_rosbags(TYPESTORE.deserialize_cdr(padded, "nav_msgs/msg/Odometry"), Odometry) == msg
    assert Odometry.deserialize(padded) == msg


# ---- rmw_dds_common (ros_discovery_info): one layout per distribution -------------------------------
GRAPH_TYPES = ["rmw_dds_common/msg/Gid", "rmw_dds_common/msg/NodeEntitiesInfo",
               "rmw_dds_common/msg/ParticipantEntitiesInfo"]
GRAPH_STORES = [pytest.param(GID_SIZE_HUMBLE, Stores.ROS2_HUMBLE, id="humble"),
                pytest.param(GID_SIZE_JAZZY, Stores.ROS2_JAZZY, id="jazzy")]


def _graph_class(gid_size: int, ros_type: str) -> type:
    classes = entities_info_classes(gid_size)
    return {GRAPH_TYPES[0]: classes.gid, GRAPH_TYPES[1]: classes.node, GRAPH_TYPES[2]: classes.participant}[ros_type]


def test_gid_size_follows_the_distribution():
    assert [gid_size_for_distro(d) for d in ("foxy", "galactic", "humble", "Humble ")] == [24] * 4
    assert [gid_size_for_distro(d) for d in ("iron", "jazzy", "kilted", "rolling", "", None)] == [16] * 6
    humble, jazzy = get_typestore(Stores.ROS2_HUMBLE), get_typestore(Stores.ROS2_JAZZY)
    assert humble.fielddefs["rmw_dds_common/msg/Gid"][1][0][1][1][1] == GID_SIZE_HUMBLE
    assert jazzy.fielddefs["rmw_dds_common/msg/Gid"][1][0][1][1][1] == GID_SIZE_JAZZY


@pytest.mark.parametrize("gid_size,store", GRAPH_STORES)
@pytest.mark.parametrize("ros_type", GRAPH_TYPES)
def test_graph_type_fields_and_default_match_ros2(gid_size, store, ros_type):
    typestore = get_typestore(store)
    cls = _graph_class(gid_size, ros_type)
    assert [name for name, _ in message_fields(cls)] == [name for name, _ in typestore.fielddefs[ros_type][1]]
    assert ros_type_name(cls) == ros_type and cls.__idl_typename__ == dds_typename(ros_type)
    default = from_rosbags(typestore.deserialize_cdr(cls().serialize(), ros_type), cls)
    assert default == cls()


@pytest.mark.parametrize("gid_size,store", GRAPH_STORES)
@pytest.mark.parametrize("ros_type", GRAPH_TYPES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graph_type_cdr_identical_to_ros2_both_ways(gid_size, store, ros_type, seed):
    typestore = get_typestore(store)
    cls = _graph_class(gid_size, ros_type)
    msg = fill(cls, np.random.default_rng(seed))
    ours = msg.serialize()
    theirs = bytes(typestore.serialize_cdr(to_rosbags(msg, typestore), ros_type))
    assert ours == theirs
    assert from_rosbags(typestore.deserialize_cdr(ours, ros_type), cls) == msg
    assert cls.deserialize(theirs) == msg


@pytest.mark.parametrize("gid_size,store", GRAPH_STORES)
def test_gid_is_the_guid_zero_padded(gid_size, store):
    import uuid

    guid = uuid.UUID("0110f2c6-9405-4d8e-a710-27ea000001c1")  # a participant: entity id 0x000001c1
    gid = gid_from_guid(guid, gid_size)
    assert gid.data == guid.bytes + bytes(gid_size - 16) and guid_from_gid(gid) == guid
    rb = get_typestore(store).deserialize_cdr(gid.serialize(), "rmw_dds_common/msg/Gid")
    assert bytes(rb.data) == gid.data

"""Writing rosbag2 (MCAP) without ROS: a rosbags typestore with rt_fusion_msgs registered from
their .msg files, and messages built from plain keyword fields (the rest default to zero)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rt_fusion.core.errors import RtFusionError

_NUMPY = {
    'bool': np.bool_,
    'byte': np.uint8,
    'char': np.uint8,
    'int8': np.int8,
    'uint8': np.uint8,
    'int16': np.int16,
    'uint16': np.uint16,
    'int32': np.int32,
    'uint32': np.uint32,
    'int64': np.int64,
    'uint64': np.uint64,
    'float32': np.float32,
    'float64': np.float64,
}


def msg_dir() -> Path:
    """The rt_fusion_msgs .msg files: in the repository, installed beside rt_fusion, or in a
    prefix of ``AMENT_PREFIX_PATH`` (a colcon workspace installs each package in its own)."""
    here = Path(__file__).resolve()
    prefixes = [Path(p) for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    for root in [*here.parents, *prefixes]:
        cand = root / 'packages' / 'rt_fusion_msgs' / 'msg'
        if cand.is_dir():
            return cand
        cand = root / 'share' / 'rt_fusion_msgs' / 'msg'
        if cand.is_dir():
            return cand
    raise RtFusionError('rt_fusion_msgs .msg files not found (repository or install share/)')


#: Interface packages rt_fusion publishes that rosbags' store lacks: registered from their
#: installed definitions where found (the venv, a ROS prefix), so a recorder can write them.
EXTRA_INTERFACES = ('vision_msgs', 'radar_msgs')


def _installed_msgs(package: str) -> list[Path]:
    prefixes = [Path(p) for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    for root in [*prefixes, Path(sys.prefix)]:
        cand = root / 'share' / package / 'msg'
        if cand.is_dir():
            return sorted(cand.glob('*.msg'))
    return []


def typestore() -> Any:
    """ROS 2 Kilted types plus rt_fusion_msgs, and the installed EXTRA_INTERFACES."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore  # noqa: PLC0415

    ts = get_typestore(Stores.ROS2_KILTED)
    types: dict[str, Any] = {}
    for path in sorted(msg_dir().glob('*.msg')):
        types.update(get_types_from_msg(path.read_text(), f'rt_fusion_msgs/msg/{path.stem}'))
    for package in EXTRA_INTERFACES:
        for path in _installed_msgs(package):
            types.update(get_types_from_msg(path.read_text(), f'{package}/msg/{path.stem}'))
    ts.register(types)
    return ts


def _default(ts: Any, node: tuple[Any, Any]) -> Any:
    kind, arg = node
    name = kind.name
    if name == 'BASE':
        base = arg[0]
        if base == 'string':
            return ''
        if base == 'bool':
            return False
        return 0.0 if base.startswith('float') else 0
    if name == 'NAME':
        return make(ts, arg)
    if name == 'ARRAY':
        (sub, n) = arg
        if sub[0].name == 'BASE' and sub[1][0] in _NUMPY:
            return np.zeros(n, _NUMPY[sub[1][0]])
        return [_default(ts, sub) for _ in range(n)]
    # SEQUENCE
    sub = arg[0]
    if sub[0].name == 'BASE' and sub[1][0] in _NUMPY:
        return np.zeros(0, _NUMPY[sub[1][0]])
    return []


def make(ts: Any, typename: str, **fields: Any) -> Any:
    """A message of ``typename`` with ``fields`` set and every other field zero / empty."""
    _consts, defs = ts.fielddefs[typename]
    kwargs = {name: fields[name] if name in fields else _default(ts, node) for name, node in defs}
    unknown = set(fields) - set(kwargs)
    if unknown:
        raise RtFusionError(f'{typename} has no field {sorted(unknown)}')
    return ts.types[typename](**kwargs)


def stamp(ts: Any, ns: int) -> Any:
    """builtin_interfaces/Time of nanoseconds."""
    return make(ts, 'builtin_interfaces/msg/Time', sec=ns // 10**9, nanosec=ns % 10**9)


def header(ts: Any, ns: int, frame_id: str) -> Any:
    """std_msgs/Header."""
    return make(ts, 'std_msgs/msg/Header', stamp=stamp(ts, ns), frame_id=frame_id)


# Which ``ros2 bag`` reads a bag of each rosbag2 metadata version this writer can write. Version 9
# (Jazzy's rosbag2 0.26 and later) stores each topic's offered QoS profiles as a YAML list, which
# Humble's rosbag2 0.15 fails to parse ("yaml-cpp: ... bad conversion"); version 8 stores them as
# the YAML string Humble reads, and Humble ignores the keys it does not know (custom_data,
# ros_distro, type_description_hash). The reader is written into the bag's custom_data too.
READERS = {
    8: 'ros2 bag of Humble (rosbag2 0.15) and later',
    9: 'ros2 bag of Jazzy (rosbag2 0.26) and later; Humble cannot (write version 8 for it)',
}
BAG_VERSION = 9


def offered_qos() -> Any:
    """The QoS profile written as every topic's offer: reliable, volatile, keep-last 10, the rest
    at the middleware's defaults. Written rather than left empty, because Humble's ``ros2 bag
    play`` parses the offers as a YAML list and an empty string is no list."""
    from rosbags.interfaces import (  # noqa: PLC0415
        Qos,
        QosDurability,
        QosHistory,
        QosLiveliness,
        QosReliability,
        QosTime,
    )

    zero = QosTime(0, 0)
    return Qos(
        QosHistory.KEEP_LAST,
        10,
        QosReliability.RELIABLE,
        QosDurability.VOLATILE,
        zero,
        zero,
        QosLiveliness.AUTOMATIC,
        zero,
        False,
    )


class BagWriter:
    """A rosbag2 bag (MCAP or sqlite3): ``write(topic, typename, log_ns, msg)``; close() finishes
    it. ``version``: rosbag2's metadata version, 9 (default) or 8 for Humble (:data:`READERS`)."""

    def __init__(
        self, path: Path, ts: Any, storage: str = 'mcap', version: int = BAG_VERSION
    ) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: PLC0415

        if path.exists():
            raise RtFusionError(f'{path} exists: the bag writer does not overwrite')
        plugins = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
        if storage not in plugins:
            raise RtFusionError(f'storage {storage!r} is not one of {sorted(plugins)}')
        if version not in READERS:
            raise RtFusionError(f'bag version {version} is not one of {sorted(READERS)}')
        self.ts = ts
        self.path = path
        self.version = version
        self.readers = READERS[version]
        literal: Literal[8, 9] = 8 if version == 8 else 9
        self.writer = Writer(path, version=literal, storage_plugin=plugins[storage])
        self.writer.set_custom_data('rt_fusion.readable_by', self.readers)
        self.qos = (offered_qos(),)
        self.writer.open()
        self.conns: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def write(self, topic: str, typename: str, log_ns: int, msg: Any) -> None:
        """Serialises (CDR) and writes one message."""
        self.write_raw(topic, typename, log_ns, bytes(self.ts.serialize_cdr(msg, typename)))

    def write_raw(self, topic: str, typename: str, log_ns: int, data: bytes) -> None:
        """Writes one message already serialized (CDR with its encapsulation header).

        Raises:
            RtFusionError: the type is unknown to the typestore (its definition is needed).
        """
        conn = self.conns.get(topic)
        if conn is None:
            if typename not in self.ts.fielddefs:
                raise RtFusionError(f'{topic}: type {typename} unknown to the bag writer')
            conn = self.conns[topic] = self.writer.add_connection(
                topic, typename, typestore=self.ts, offered_qos_profiles=self.qos
            )
        self.writer.write(conn, log_ns, data)
        self.counts[topic] = self.counts.get(topic, 0) + 1

    def close(self) -> None:
        """Writes the index and metadata.yaml, then the chunk CRCs (rosbags leaves them 0)."""
        from rt_fusion.core.bag_integrity import add_crcs  # noqa: PLC0415

        self.writer.close()
        for mcap in sorted(self.path.glob('*.mcap')):
            add_crcs(mcap)

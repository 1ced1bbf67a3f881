"""rosbag2 (MCAP or sqlite3) reading without ROS, through the pure-Python ``rosbags`` library.

Messages come back as rosbags' own dataclasses (field names as in the .msg files); nodes convert
them to rclpy messages with ``rclpy.serialization`` where they must publish them.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy.typing as npt

from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.frame import DescriptorError, decode_compressed, image_array


class BagError(RtFusionError):
    """A bag cannot be read, or lacks what was asked of it."""


@dataclasses.dataclass(frozen=True, slots=True)
class BagMessage:
    """One message of a bag."""

    topic: str
    msgtype: str
    log_time_ns: int
    msg: Any  # rosbags dataclass
    raw: bytes  # the CDR bytes as stored


def open_reader(path: Path | str) -> Any:
    """A rosbags AnyReader over a bag directory (or a single .mcap / .db3 file's folder)."""
    from rosbags.highlevel import AnyReader  # noqa: PLC0415 - keeps `import core` light

    path = Path(path)
    if path.is_file():
        path = path.parent
    if not path.exists():
        raise BagError(f'bag {path} not found')
    return AnyReader([path])


def iter_messages(
    path: Path | str,
    topics: Sequence[str] | None = None,
    *,
    decode: bool = True,
    skip: Collection[tuple[str, int]] = (),
) -> Iterator[BagMessage]:
    """Messages of ``topics`` (all when None) in log-time order; ``decode=False`` leaves
    ``msg`` None (replay publishes the stored bytes). ``skip``: MCAP chunks left out, as
    (file name, byte offset) — the corrupt ones :func:`rt_fusion.core.bag_integrity.verify`
    found (:attr:`~rt_fusion.core.bag_integrity.Integrity.skip_chunks`)."""
    with open_reader(path) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        if topics is not None:
            missing = set(topics) - {c.topic for c in conns}
            if missing:
                have = sorted({c.topic for c in reader.connections})
                raise BagError(f'bag {path} has no topic {sorted(missing)} (it has {have})')
        if skip:
            wanted = {c.topic for c in conns}
            for topic, msgtype, t, raw in _mcap_messages(Path(path), wanted, set(skip)):
                msg = reader.deserialize(raw, msgtype) if decode else None
                yield BagMessage(topic, msgtype, t, msg, raw)
            return
        for conn, t, raw in reader.messages(connections=conns):
            msg = reader.deserialize(raw, conn.msgtype) if decode else None
            yield BagMessage(conn.topic, conn.msgtype, int(t), msg, bytes(raw))


def _mcap_messages(
    folder: Path, topics: set[str], skip: set[tuple[str, int]]
) -> Iterator[tuple[str, str, int, bytes]]:
    """(topic, type, log time, raw) of a bag's MCAP files in log-time order, read by rosbags'
    MCAP reader with the ``skip`` chunks taken out of its chunk index (exactly those chunks'
    messages are left out, whatever their time ranges)."""
    from rosbags.rosbag2.storage_mcap import McapReader  # noqa: PLC0415

    if folder.is_file():
        folder = folder.parent
    readers = []
    try:
        sources = []
        for file in sorted(folder.glob('*.mcap')):
            r = McapReader(file)
            r.open()
            readers.append(r)
            kept = [c for c in r.chunks if (file.name, c.chunk_start_offset) not in skip]
            if r.chunks and not kept:
                # Every chunk left out: rosbags' reader, given no chunk index, would scan the
                # whole file instead, and stop at the first corrupt chunk (a replay hung so).
                continue
            r.chunks = kept
            conns = [c for c in r.connections if c.topic in topics]
            sources.append(
                (int(t), c.topic, c.msgtype, bytes(raw)) for c, t, raw in r.messages(conns)
            )
        for t, topic, msgtype, raw in heapq.merge(*sources, key=lambda m: m[0]):
            yield topic, msgtype, t, raw
    finally:
        for r in readers:
            r.close()


def image_to_array(msg: Any, msgtype: str) -> tuple[npt.NDArray[Any], str]:
    """(array, encoding) of a sensor_msgs/Image or CompressedImage (compressed -> bgr8), from
    rosbags or rclpy messages alike (:func:`rt_fusion.core.frame.image_array`).

    Raises:
        BagError: an undecodable image or an unsupported encoding.
    """
    try:
        if msgtype.endswith('CompressedImage'):
            return decode_compressed(bytes(msg.data), msg.format), 'bgr8'
        arr = image_array(
            msg.encoding, msg.height, msg.width, msg.step, bool(msg.is_bigendian), bytes(msg.data)
        )
    except DescriptorError as err:
        raise BagError(err.reason) from err
    return arr, msg.encoding


def imu_samples(bag: Path, topic: str, limit: int = 0) -> dict[str, npt.NDArray[Any]]:
    """Stamps [ns], rates of turn [rad/s] and accelerations [m/s²] of a bag's
    ``sensor_msgs/Imu`` topic (``limit``: at most this many; 0: all).

    Raises:
        BagError: the bag has no such topic.
    """
    import numpy as np  # noqa: PLC0415
    from rosbags.highlevel import AnyReader  # noqa: PLC0415

    stamps, gyro, accel = [], [], []
    with AnyReader([bag]) as reader:
        conns = [c for c in reader.connections if c.topic == topic]
        if not conns:
            raise BagError(f'no topic {topic} in {bag}')
        for conn, _t, raw in reader.messages(connections=conns):
            m: Any = reader.deserialize(raw, conn.msgtype)
            stamps.append(int(m.header.stamp.sec) * 10**9 + int(m.header.stamp.nanosec))
            gyro.append((m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z))
            accel.append(
                (m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z)
            )
            if limit and len(stamps) >= limit:
                break
    return {'stamp': np.array(stamps, np.int64), 'gyro': np.array(gyro), 'accel': np.array(accel)}

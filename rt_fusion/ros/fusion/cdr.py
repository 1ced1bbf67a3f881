"""``rt_fusion_msgs/ObjectArray`` as CDR bytes, written from the fused frame's columns by numpy
(no message object per object), for ``Publisher.publish(bytes)``.

A ROS 2 message on the wire is its XCDR1 little-endian encoding after a 4-byte encapsulation
header: each primitive aligned to its own size from the start of the stream. ``Object`` has no
string or sequence, so the objects of an array are fixed records; only the first one's padding
depends on where it starts (after the header's frame id): a record starting 4 bytes past an
8-byte boundary is 148 bytes, one on a boundary 152, so after the first every record is 152.
:func:`layout` walks the fields to get these offsets (no hand-written table), and
``tests/ros/test_cdr.py`` holds the bytes equal to rclpy's own serialization.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

ENCAPSULATION = b'\x00\x01\x00\x00'  # CDR, little endian
#: Object.msg's fields in order, as CDR primitives: (name, numpy type, count).
OBJECT_FIELDS: tuple[tuple[str, str, int], ...] = (
    ('id', '<u4', 1),
    ('object_class', 'u1', 1),
    ('class_probability', '<f4', 1),
    ('position', '<f8', 3),
    ('yaw', '<f4', 1),
    ('size', '<f8', 3),
    ('velocity', '<f8', 3),
    ('yaw_rate', '<f4', 1),
    ('position_std', '<f4', 1),
    ('velocity_std', '<f4', 1),
    ('position_covariance', '<f4', 4),
    ('velocity_covariance', '<f4', 4),
    ('sources', 'u1', 1),
    ('existence_probability', '<f4', 1),
    ('age_s', '<f4', 1),
)
LINEAGE_FIELDS = (
    'capture_ns', 'committed_ns', 'received_ns', 'inputs_complete_ns', 'inference_done_ns',
    'published_ns', 'planner_received_ns', 'planner_solved_ns', 'planner_published_ns',
)  # fmt: skip


def _align(offset: int, size: int) -> int:
    return (offset + size - 1) // size * size


def layout(start: int) -> tuple[np.dtype[Any], int]:
    """The record of one Object starting at stream offset ``start`` (a multiple of 4): a numpy
    structured type with each field at its CDR offset from the record's start, and where the
    next record starts."""
    names, formats, offsets = [], [], []
    at = start
    for name, kind, count in OBJECT_FIELDS:
        size = np.dtype(kind).itemsize
        at = _align(at, size)
        names.append(name)
        formats.append((kind, (count,)) if count > 1 else kind)
        offsets.append(at - start)
        at += size * count
    end = _align(at, 4)  # the next record starts with a uint32
    itemsize = end - start
    return np.dtype({'names': names, 'formats': formats, 'offsets': offsets,
                     'itemsize': itemsize}), end  # fmt: skip


class ObjectArrayWriter:
    """Writes ObjectArray messages of one frame id as CDR bytes; see the module docstring.

    Call :meth:`write` with the columns (each of length n), then :meth:`set_published` and
    publish :attr:`buffer`'s bytes (:meth:`payload`)."""

    def __init__(self, frame_id: str) -> None:
        name = frame_id.encode() + b'\x00'
        head = struct.pack('<iI', 0, 0) + struct.pack('<I', len(name)) + name
        self._head = bytearray(head)
        self._seq_at = _align(len(head), 4)  # the objects' count (uint32)
        self._first_at = self._seq_at + 4
        self._first, after_first = layout(self._first_at)
        self._rest, _ = layout(after_first)
        # From the second record on, every one starts on the same 8-byte phase.
        if self._rest.itemsize % 8 or after_first % 8:
            raise AssertionError('Object records of changing layout')
        self._stride = self._rest.itemsize
        self._buf = bytearray()
        self._published_at = 0

    def write(self, stamp_ns: int, columns: Mapping[str, npt.ArrayLike], n: int,
              inputs_complete_ns: int, lineage: dict[str, int]) -> None:  # fmt: skip
        """The message: header stamp, ``n`` objects from ``columns`` (per field, shape (n,) or
        (n, count)), the node's times and the lineage (``published_ns`` filled in later)."""
        end = self._first_at + (self._first.itemsize + self._stride * (n - 1) if n else 0)
        tail_at = _align(end, 8)
        size = tail_at + 8 * (2 + len(LINEAGE_FIELDS))
        buf = bytearray(4 + size)
        buf[:4] = ENCAPSULATION
        body = memoryview(buf)[4:]
        body[: len(self._head)] = self._head
        struct.pack_into('<iI', body, 0, stamp_ns // 10**9, stamp_ns % 10**9)
        struct.pack_into('<I', body, self._seq_at, n)
        if n:
            first = np.frombuffer(body, self._first, 1, self._first_at)
            rest = np.frombuffer(body, self._rest, n - 1, self._first_at + self._first.itemsize)
            for name, _kind, _count in OBJECT_FIELDS:
                column = np.asarray(columns[name])
                first[name] = column[:1]
                if n > 1:
                    rest[name] = column[1:]
        values = [inputs_complete_ns, 0] + [lineage.get(k, 0) for k in LINEAGE_FIELDS]
        struct.pack_into(f'<{len(values)}q', body, tail_at, *values)
        self._buf = buf
        self._published_at = 4 + tail_at + 8  # published_ns, and again in the lineage
        self._lineage_published_at = 4 + tail_at + 16 + 8 * LINEAGE_FIELDS.index('published_ns')

    def set_published(self, published_ns: int) -> None:
        """The publication time, into ``published_ns`` and the lineage's."""
        struct.pack_into('<q', self._buf, self._published_at, published_ns)
        struct.pack_into('<q', self._buf, self._lineage_published_at, published_ns)

    def payload(self) -> bytes:
        """The serialized message, for ``publish``."""
        return bytes(self._buf)


#: A stamp no real message carries: where rclpy writes it is where the stamp lives.
_PROBE_STAMP = (0x2BADF00D, 0x1CEB00DA)


def _step(obj: Any, part: str) -> Any:
    if part.endswith(']'):
        name, index = part[:-1].split('[')
        return getattr(obj, name)[int(index)]
    return getattr(obj, part)


def _get(msg: Any, path: str) -> Any:
    """The field at ``path`` ('a.b', 'a[0].b')."""
    for part in path.split('.'):
        msg = _step(msg, part)
    return msg


def _set(msg: Any, path: str, value: float) -> None:
    """Sets the field at ``path`` ('a.b.c', 'a.cov[7]', 'list[0].b')."""
    parent, _, last = path.rpartition('.')
    holder = _get(msg, parent) if parent else msg
    if last.endswith(']'):
        name, index = last[:-1].split('[')
        getattr(holder, name)[int(index)] = value
    else:
        setattr(holder, last, value)


class FixedMessage:
    """A message whose strings and sequence lengths never change (a pose with fixed frame ids),
    as CDR bytes for ``Publisher.publish(bytes)``: rclpy serializes the template once, then each
    message overwrites the stamp and the float64 fields named in ``fields`` in place, instead of
    filling a message object for rclpy to convert and serialize every frame.

    Where the stamp and each field lie is read from rclpy's own serialization of the template,
    each probed with a value of its own: no hand-written layout to fall out of step with the
    message definition. ``tests/ros/test_cdr.py`` holds the bytes equal to rclpy's."""

    def __init__(self, template: Any, stamp_path: str, fields: tuple[str, ...]) -> None:
        from rclpy.serialization import serialize_message  # noqa: PLC0415

        stamp = _get(template, stamp_path)
        stamp.sec, stamp.nanosec = _PROBE_STAMP
        probes = [12345.0 + k / 8 for k in range(len(fields))]
        for path, value in zip(fields, probes, strict=True):
            _set(template, path, value)
        raw = serialize_message(template)

        def where(packed: bytes, what: str) -> int:
            at = raw.find(packed)
            if at < 0 or raw.find(packed, at + 1) >= 0:
                raise AssertionError(f'{what}: not once in the serialized template')
            return at

        self._stamp_at = where(struct.pack('<iI', *_PROBE_STAMP), stamp_path)
        self._at = [where(struct.pack('<d', v), p) for p, v in zip(fields, probes, strict=True)]
        self._buf = bytearray(raw)
        for at in self._at:
            struct.pack_into('<d', self._buf, at, 0.0)
        self.fields = fields

    def write(self, stamp_ns: int, values: tuple[float, ...]) -> None:
        """The stamp and ``values`` (in the order of ``fields``)."""
        struct.pack_into('<iI', self._buf, self._stamp_at, stamp_ns // 10**9, stamp_ns % 10**9)
        for at, value in zip(self._at, values, strict=True):
            struct.pack_into('<d', self._buf, at, value)

    def payload(self) -> bytes:
        """The serialized message, for ``publish``."""
        return bytes(self._buf)

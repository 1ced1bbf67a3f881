"""Messages <-> core types. The only place that knows both sides."""

from __future__ import annotations

from builtin_interfaces.msg import Time
from rt_fusion_msgs.msg import ShmFrame

from rt_fusion.core.frame import FrameDescriptor

_NS = 1_000_000_000


def ns_to_time(stamp_ns: int) -> Time:
    """Integer nanoseconds -> ``builtin_interfaces/Time`` (floor division: negative stamps too)."""
    sec, nanosec = divmod(int(stamp_ns), _NS)
    return Time(sec=sec, nanosec=nanosec)


def time_to_ns(stamp: Time) -> int:
    """``builtin_interfaces/Time`` -> integer nanoseconds."""
    return int(stamp.sec) * _NS + int(stamp.nanosec)


def descriptor_to_msg(desc: FrameDescriptor, msg: ShmFrame | None = None) -> ShmFrame:
    """Fills ``msg`` (or a new ShmFrame) from a core descriptor."""
    out = ShmFrame() if msg is None else msg
    out.header.stamp = ns_to_time(desc.stamp_ns)
    out.header.frame_id = desc.frame_id
    out.segment = desc.segment
    out.segment_epoch_ns = desc.segment_epoch_ns
    out.boot_id = desc.boot_id
    out.slot = desc.slot
    out.sequence = desc.sequence
    out.generation = desc.generation
    out.encoding = desc.encoding
    out.dtype = desc.dtype
    out.shape = list(desc.shape)
    out.size_bytes = desc.size_bytes
    out.hw_stamp_ns = desc.hw_stamp_ns
    out.available_stamp = ns_to_time(desc.available_ns)
    return out


def msg_to_descriptor(msg: ShmFrame) -> FrameDescriptor:
    """ShmFrame -> core descriptor (not validated: the reader checks it against the segment)."""
    return FrameDescriptor(
        segment=msg.segment,
        segment_epoch_ns=msg.segment_epoch_ns,
        boot_id=msg.boot_id,
        slot=msg.slot,
        sequence=msg.sequence,
        generation=msg.generation,
        encoding=msg.encoding,
        dtype=msg.dtype,
        shape=tuple(int(d) for d in msg.shape),
        size_bytes=msg.size_bytes,
        stamp_ns=time_to_ns(msg.header.stamp),
        hw_stamp_ns=msg.hw_stamp_ns,
        available_ns=time_to_ns(msg.available_stamp),
        frame_id=msg.header.frame_id,
    )

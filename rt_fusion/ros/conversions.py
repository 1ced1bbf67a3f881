"""Messages <-> core types. The only place that knows both sides."""

from __future__ import annotations

from typing import Any

from builtin_interfaces.msg import Time
from rt_fusion_msgs.msg import ShmFrame

from rt_fusion.core import rotation
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


def msg_to_dict(msg: Any) -> Any:
    """A ROS message as plain Python (dicts, lists, numbers, strings), recursively."""
    if hasattr(msg, 'get_fields_and_field_types'):
        out = {}
        for name, kind in msg.get_fields_and_field_types().items():
            value = getattr(msg, name)
            # A single 'octet'/'byte' field is a one-byte bytes object: give its number.
            out[name] = value[0] if kind in ('octet', 'byte') else msg_to_dict(value)
        return out
    if isinstance(msg, (list, tuple)):
        return [msg_to_dict(v) for v in msg]
    if isinstance(msg, (bytes, bytearray)):
        return list(msg)
    if hasattr(msg, 'tolist'):  # numpy arrays and array.array
        return msg.tolist()
    return msg


def message_class(type_name: str) -> type:
    """``pkg/msg/Name`` (or ``pkg/Name``) -> the generated message class."""
    import importlib  # noqa: PLC0415

    parts = type_name.split('/')
    if len(parts) == 2:
        parts = [parts[0], 'msg', parts[1]]
    if len(parts) != 3:
        raise ValueError(f'not a message type: {type_name!r}')
    module = importlib.import_module(f'{parts[0]}.{parts[1]}')
    return getattr(module, parts[2])  # type: ignore[no-any-return]


def quaternion_yaw(q: Any) -> float:
    """Heading [rad] of a ``geometry_msgs/Quaternion``."""
    return rotation.yaw(q.w, q.x, q.y, q.z)

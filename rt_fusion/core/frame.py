"""The ROS-free twin of ``rt_fusion_msgs/ShmFrame``: where a payload lies in shared memory.

Times are integer nanoseconds everywhere in the core; nodes convert to and from
``builtin_interfaces/Time`` at the edge.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from rt_fusion.core.errors import RtFusionError

# sensor_msgs/Image encodings <-> (numpy dtype, channels)
IMAGE_ENCODINGS: dict[str, tuple[str, int]] = {
    'rgb8': ('|u1', 3),
    'bgr8': ('|u1', 3),
    'rgba8': ('|u1', 4),
    'bgra8': ('|u1', 4),
    'mono8': ('|u1', 1),
    'mono16': ('<u2', 1),
    '8UC1': ('|u1', 1),
    '8UC3': ('|u1', 3),
    '16UC1': ('<u2', 1),
    '32FC1': ('<f4', 1),
    '32FC3': ('<f4', 3),
}


class DescriptorError(RtFusionError):
    """A frame descriptor is inconsistent in itself or with the segment it names."""

    def __init__(self, segment: str, reason: str) -> None:
        self.segment = segment
        self.reason = reason
        super().__init__(f'bad frame descriptor for segment {segment!r}: {reason}')


class FrameDescriptor(NamedTuple):
    """One payload in a slot of a shared-memory ring (immutable).

    A NamedTuple rather than a frozen dataclass: it is made for every frame on the fast path,
    where a frozen dataclass's ``__init__`` costs three times as much.

    Attributes:
        segment: POSIX shared-memory name (``/dev/shm/<segment>``).
        segment_epoch_ns: creation time of this instance of the segment [ns since the epoch].
        boot_id: boot id of the writer's host.
        slot: slot index in the ring.
        sequence: writer sequence number (0, 1, 2, ... per ring).
        generation: seqlock generation of the slot at commit (even).
        encoding: image encoding, ``'pcm'`` or ``'tensor'``.
        dtype: numpy dtype string with byte order (``'|u1'``).
        shape: array shape in elements.
        size_bytes: payload size [bytes]; must equal product(shape) * itemsize.
        stamp_ns: hardware time of the sample on the host timeline [ns].
        hw_stamp_ns: raw device stamp before mapping [ns of device time]; 0 when unknown.
        available_ns: host time of the commit [ns].
        frame_id: sensor frame.
    """

    segment: str
    segment_epoch_ns: int
    boot_id: str
    slot: int
    sequence: int
    generation: int
    encoding: str
    dtype: str
    shape: tuple[int, ...]
    size_bytes: int
    stamp_ns: int
    hw_stamp_ns: int = 0
    available_ns: int = 0
    frame_id: str = ''

    def check(self) -> None:
        """Checks the descriptor's own consistency (not against a segment).

        Raises:
            DescriptorError: naming the first inconsistency found.
        """
        if not self.segment or '/' in self.segment:
            raise DescriptorError(self.segment, 'segment name is empty or contains "/"')
        if self.slot < 0:
            raise DescriptorError(self.segment, f'negative slot {self.slot}')
        if self.generation % 2:
            raise DescriptorError(self.segment, f'odd generation {self.generation} (mid-write)')
        try:
            np.dtype(self.dtype)
        except TypeError as err:
            raise DescriptorError(self.segment, f'unknown dtype {self.dtype!r}') from err
        if any(dim < 0 for dim in self.shape):
            raise DescriptorError(self.segment, f'negative dimension in shape {self.shape}')
        expected = math.prod(self.shape) * np.dtype(self.dtype).itemsize
        if self.size_bytes != expected:
            raise DescriptorError(
                self.segment,
                f'size_bytes {self.size_bytes} != {expected} '
                f'for shape {self.shape} of {self.dtype}',
            )


def image_array(
    encoding: str, height: int, width: int, step: int, is_bigendian: bool, data: object
) -> np.ndarray:
    """The pixels of a sensor_msgs/Image (its fields), as a read-only array (H, W[, C]).

    The one raw-image decoder of the project: the bag reader, the replay and the rclpy codec
    all go through it.

    Raises:
        DescriptorError: an unsupported encoding, or a step or data too small for the size.
    """
    if encoding not in IMAGE_ENCODINGS:
        raise DescriptorError('', f'image encoding {encoding!r} not supported')
    dtype, channels = IMAGE_ENCODINGS[encoding]
    dt = np.dtype(dtype)
    if dt.itemsize > 1:
        dt = dt.newbyteorder('>' if is_bigendian else '<')
    shape = (height, width) if channels == 1 else (height, width, channels)
    flat = np.frombuffer(data, np.uint8)  # type: ignore[call-overload]
    row = width * channels * dt.itemsize
    if step < row or flat.size < step * height:
        raise DescriptorError('', f'image step {step} / size {flat.size} too small')
    rows = flat[: step * height].reshape(height, step)[:, :row]
    array = np.ascontiguousarray(rows).view(dt).reshape(shape)
    array.flags.writeable = False
    return array


def decode_compressed(data: object, fmt: str) -> np.ndarray:
    """A sensor_msgs/CompressedImage's pixels (JPEG, PNG, ...) as BGR (H, W, 3).

    Raises:
        DescriptorError: the bytes do not decode.
    """
    import cv2  # noqa: PLC0415 - only where compressed images are read

    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)  # type: ignore[call-overload]
    if image is None:
        raise DescriptorError('', f'cannot decode a {fmt!r} CompressedImage')
    return np.asarray(image)

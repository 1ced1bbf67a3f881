"""frame_probe: publishes or receives frames through the shared-memory transport and measures it.

A diagnostic for any ShmPublisher stream (like ``ros2 topic delay``, with percentiles and
checksums):

- ``role: listener`` subscribes to a stream with :class:`ShmSubscription` (any path: descriptors
  over rclpy, the same-host fast path, or the full message) and reports the latency from commit
  to a usable view, per path, with a CRC-32 of every frame when ``echo`` is on;
- ``role: talker`` publishes deterministic test frames through :class:`ShmPublisher`, which tests
  and the demo use to check the transport end to end.

Topics: ``~/out/frames`` (talker; ``/shm`` descriptors beside it), ``~/in/frames`` (listener).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import zlib
from typing import Any

import numpy as np
import numpy.typing as npt
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from rt_fusion.core.frame import FrameDescriptor
from rt_fusion.core.latency import LatencyRecorder
from rt_fusion.core.params import param
from rt_fusion.ros import parameters, running
from rt_fusion.ros.shm_transport import Received, ShmPublisher, ShmSubscription, scoped_segment

#: How long the talker waits after it first sees a listener [ns].
SETTLE_NS = 500_000_000
#: The talker's synthetic device clock: starts 5 ms before the Unix epoch, ticks 1 ns per ns.
DEVICE_CLOCK_OFFSET_NS = -5_000_000


@dataclasses.dataclass(frozen=True)
class FrameProbeParams:
    """Parameters of frame_probe."""

    role: str = param('talker publishes, listener receives', choices=('talker', 'listener'))
    count: int = param(
        'frames to send, or to wait for (delivered or counted as overwritten)', default=300, low=1
    )
    rate_hz: float = param('talker frame rate', unit='Hz', default=100.0, low=0.1, high=10_000.0)
    width: int = param('talker frame width', unit='px', default=640, low=1)
    height: int = param('talker frame height', unit='px', default=480, low=1)
    encoding: str = param(
        'talker frame encoding', default='rgb8', choices=('rgb8', 'bgr8', 'mono8', 'mono16')
    )
    segment: str = param(
        'talker ring name in /dev/shm, scoped as rt_fusion_d<domain>_<name> (empty: '
        'rt_fusion_d<domain>_<namespace>_<node>)',
        default='',
    )
    slots: int = param('talker ring slots', default=8, low=2, high=4096)
    transport: str = param(
        'talker: shm|ros; listener: auto|shm|ros', default='auto', choices=('auto', 'shm', 'ros')
    )
    fast_path: bool = param('listener: wait on the ring futex (same host)', default=False)
    echo: bool = param('print every frame sent or received as a JSON line', default=False)
    timeout_s: float = param(
        'give up after this long without the peer or the frames', unit='s', default=30.0, low=0.1
    )
    shm_owner_uid: int = param(
        'listener: user that must own the segments (-1: this user)', default=-1, low=-1
    )
    samples_file: str = param('listener: write the latency samples [ns] here (.npy)', default='')

    def check(self) -> None:
        """Cross-field rules."""
        from rt_fusion.core.errors import ParameterError  # noqa: PLC0415

        if self.role == 'talker' and self.transport == 'auto':
            raise ParameterError('transport', self.transport, 'a talker uses shm or ros')


_CHANNELS = {'rgb8': 3, 'bgr8': 3, 'mono8': 1, 'mono16': 1}
_DTYPES = {'rgb8': np.uint8, 'bgr8': np.uint8, 'mono8': np.uint8, 'mono16': np.uint16}


def frame_shape(params: FrameProbeParams) -> tuple[int, ...]:
    """Shape of the talker's frames."""
    channels = _CHANNELS[params.encoding]
    return (
        (params.height, params.width) if channels == 1 else (params.height, params.width, channels)
    )


def fill_probe_frame(out: npt.NDArray[Any], base: npt.NDArray[Any], index: int) -> None:
    """Frame ``index``: a fixed random image with the index in its first 8 bytes."""
    np.copyto(out, base)
    out.reshape(-1).view(np.uint8)[:8] = np.frombuffer(np.uint64(index).tobytes(), np.uint8)


def crc32(array: npt.NDArray[Any]) -> int:
    """CRC-32 of an array's bytes (C order)."""
    return zlib.crc32(np.ascontiguousarray(array).data)


def frame_json(desc: FrameDescriptor, crc: int, path: str | None = None) -> str:
    """One JSON line of a frame: its descriptor, checksum and (listener) delivery path."""
    record: dict[str, Any] = desc._asdict()
    record['crc32'] = crc
    if path is not None:
        record['path'] = path
    return json.dumps(record, sort_keys=True)


class FrameProbeNode(Node):
    """Talker or listener of a shared-memory frame stream."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('frame_probe', **kwargs)
        try:
            self.params = parameters.declare_params(self, FrameProbeParams)
        finally:  # a misspelt one is named first (``rol`` for ``role``), exit 2
            parameters.reject_unknown_params(self)
        self.finished: Future = Future()  # of dict[str, object]
        self._start_ns = self._now_ns()
        self._sent = 0
        self._matched_ns: int | None = None
        self._latency: dict[str, LatencyRecorder] = {}
        self._received = 0
        p = self.params
        if p.role == 'talker':
            shape = frame_shape(p)
            dtype = np.dtype(_DTYPES[p.encoding])
            rng = np.random.default_rng(7)
            top = 255 if dtype.itemsize == 1 else 65535
            self._base = rng.integers(0, top, shape).astype(dtype)
            reliable = QoSProfile(depth=p.slots, reliability=ReliabilityPolicy.RELIABLE)
            self.pub = ShmPublisher(
                self,
                '~/out/frames',
                scoped_segment(self, p.segment),
                self._base.nbytes,
                p.slots,
                frame_id='probe',
                transport=p.transport,
                full_qos=reliable,
            )
            self._timer = self.create_timer(1.0 / p.rate_hz, self._on_timer)
        else:
            reliable = QoSProfile(depth=64, reliability=ReliabilityPolicy.RELIABLE)
            self.sub = ShmSubscription(
                self,
                '~/in/frames',
                self._on_frame,
                transport=p.transport,
                fast_path=p.fast_path,
                depth=64,
                full_qos=reliable,
                owner_uid=None if p.shm_owner_uid < 0 else p.shm_owner_uid,
            )
            self._watchdog = self.create_timer(0.5, self._on_watchdog)

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _on_timer(self) -> None:
        if self._matched_ns is None or self._now_ns() - self._matched_ns < SETTLE_NS:
            # Frames sent before the listener has matched us too would be lost: wait until
            # it is seen, then a little longer (discovery is not symmetric), within the deadline.
            if self._matched_ns is None and self.pub.subscriber_count() > 0:
                self._matched_ns = self._now_ns()
            if self._now_ns() - self._start_ns > self.params.timeout_s * 1e9:
                self.get_logger().error('no listener appeared before timeout_s')
                self._finish()
            return
        ws = self.pub.acquire(self._base.shape, self._base.dtype, self.params.encoding)
        fill_probe_frame(ws.array, self._base, self._sent)
        crc = crc32(ws.array) if self.params.echo else 0
        now = self._now_ns()
        desc = self.pub.commit(ws, stamp_ns=now, hw_stamp_ns=now + DEVICE_CLOCK_OFFSET_NS)
        if self.params.echo:
            print(frame_json(desc, crc), flush=True)
        self._sent += 1
        if self._sent == self.params.count:
            self._finish()

    def _on_frame(self, frame: Received, path: str) -> None:
        now = self._now_ns()
        desc = frame.desc
        rec = self._latency.get(path)
        if rec is None:
            rec = self._latency[path] = LatencyRecorder(self.params.count)
        rec.record(now - (desc.available_ns or desc.stamp_ns))
        crc = crc32(frame.array) if self.params.echo else 0
        if not frame.valid():  # overwritten before it was checked: counted torn by the
            return  # subscription (the watchdog finishes)
        if self.params.echo:
            print(frame_json(desc, crc, path), flush=True)
        self._received += 1
        if self._accounted():
            self._finish()

    def _accounted(self) -> bool:
        """Every frame of ``count`` was delivered, or counted as overwritten before or while
        it was read."""
        stats = self.sub.stats
        return self._received + stats.overruns + stats.torn >= self.params.count

    def _on_watchdog(self) -> None:
        if self._accounted():
            self._finish()
        elif self._now_ns() - self._start_ns > self.params.timeout_s * 1e9:
            self.get_logger().error(
                f'timeout: {self._received} of {self.params.count} frames received'
            )
            self._finish()

    def _finish(self) -> None:
        if self.finished.done():
            return
        summary: dict[str, object] = {
            'role': self.params.role,
            'sent': self._sent,
            'received': self._received,
        }
        if self.params.role == 'talker':
            self._timer.cancel()
            self.pub.wait_for_all_acked(5.0)  # reliable: leave once the listener has it all
        else:
            summary['latency_us'] = {k: r.summary().as_dict() for k, r in self._latency.items()}
            summary['stats'] = dataclasses.asdict(self.sub.stats)
            if self.params.samples_file:
                np.save(
                    self.params.samples_file,
                    np.concatenate(
                        [r.samples_ns for r in self._latency.values()] or [np.zeros(0, np.int64)]
                    ),
                )
        print('SUMMARY ' + json.dumps(summary), flush=True)
        self.finished.set_result(summary)

    def destroy_node(self) -> None:
        """Releases the ring (unlinks it) or the subscription's mappings."""
        if self.params.role == 'talker':
            self.pub.close()
        else:
            self.sub.destroy()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Entry point of ``frame_probe``."""
    return running.run(FrameProbeNode, args)


if __name__ == '__main__':
    sys.exit(main())

"""frame_probe: publishes or listens to ShmFrame descriptors and measures their one-way latency.

A diagnostic for descriptor topics (like ``ros2 topic delay``, with percentiles): as a listener
on any ShmFrame topic it reports the delay from ``available_stamp`` (commit) to reception; as a
talker it publishes a deterministic sequence of descriptors, which tests and the demo use to
check the transport of every field.

Topics: ``~/out/frames`` (talker), ``~/in/frames`` (listener), both ``rt_fusion_msgs/ShmFrame``.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from rt_fusion_msgs.msg import ShmFrame

from rt_fusion.core.frame import FrameDescriptor
from rt_fusion.core.latency import LatencyRecorder
from rt_fusion.core.params import param
from rt_fusion.nodes import node_utils
from rt_fusion.nodes.conversions import descriptor_to_msg, msg_to_descriptor

_BASE_STAMP_NS = 1_700_000_000 * 10**9


@dataclasses.dataclass(frozen=True)
class FrameProbeParams:
    """Parameters of frame_probe."""

    role: str = param('talker publishes, listener receives', choices=('talker', 'listener'))
    count: int = param('descriptors to send or to wait for', default=300, low=1)
    rate_hz: float = param(
        'talker publication rate', unit='Hz', default=100.0, low=0.1, high=10_000.0
    )
    echo: bool = param('print every descriptor sent or received as a JSON line', default=False)
    timeout_s: float = param(
        'give up after this long without the peer or the frames', unit='s', default=20.0, low=0.1
    )
    depth: int = param('QoS history depth (reliable, keep last)', default=100, low=1)
    samples_file: str = param('listener: write the latency samples [ns] here (.npy)', default='')


def probe_descriptor(index: int, available_ns: int) -> FrameDescriptor:
    """The talker's ``index``-th descriptor: every field differs from its default and varies."""
    return FrameDescriptor(
        segment=f'rt_fusion_probe_{index % 3}',
        segment_epoch_ns=1_699_999_999_000_000_007 + index // 100,
        boot_id='0b7c4f2e-6b1d-4c1b-9d8e-5a3a9f0e1c2d',
        slot=index % 8,
        sequence=index,
        generation=2 * (index // 8 + 1),
        encoding=('rgb8', 'bgr8', 'mono16')[index % 3],
        dtype=('|u1', '|u1', '<u2')[index % 3],
        shape=(1080, 1920, 3) if index % 3 < 2 else (1080, 1920),
        size_bytes=1080 * 1920 * 3 if index % 3 < 2 else 1080 * 1920 * 2,
        stamp_ns=_BASE_STAMP_NS + index * 33_333_333,
        hw_stamp_ns=-5_000_000 + index * 33_333_331,
        available_ns=available_ns,
        frame_id=f'camera_{index % 2}',
    )


def descriptor_json(desc: FrameDescriptor) -> str:
    """One JSON line of a descriptor (tuples become lists)."""
    return json.dumps(dataclasses.asdict(desc), sort_keys=True)


class FrameProbeNode(Node):
    """Talker or listener of ShmFrame descriptors."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__('frame_probe', **kwargs)  # type: ignore[arg-type]
        self.params = node_utils.declare_params(self, FrameProbeParams)
        qos = QoSProfile(depth=self.params.depth, reliability=ReliabilityPolicy.RELIABLE)
        self._sent = 0
        self._latency = LatencyRecorder(self.params.count)
        self._start_ns = self.get_clock().now().nanoseconds
        self.finished: Future[dict[str, object]] = Future()
        if self.params.role == 'talker':
            self._pub = self.create_publisher(ShmFrame, '~/out/frames', qos)
            self._msg = ShmFrame()
            self._timer = self.create_timer(1.0 / self.params.rate_hz, self._on_timer)
        else:
            self._sub = self.create_subscription(ShmFrame, '~/in/frames', self._on_frame, qos)
            self._watchdog = self.create_timer(0.5, self._on_watchdog)

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _on_timer(self) -> None:
        if self._pub.get_subscription_count() == 0:
            # Nothing listens yet: sending now would lose frames. Wait, within the deadline.
            if self._now_ns() - self._start_ns > self.params.timeout_s * 1e9:
                self.get_logger().error('no listener appeared before timeout_s')
                self._finish()
            return
        desc = probe_descriptor(self._sent, self._now_ns())
        self._pub.publish(descriptor_to_msg(desc, self._msg))
        if self.params.echo:
            print(descriptor_json(desc), flush=True)
        self._sent += 1
        if self._sent == self.params.count:
            self._finish()

    def _on_frame(self, msg: ShmFrame) -> None:
        now_ns = self._now_ns()
        desc = msg_to_descriptor(msg)
        self._latency.record(now_ns - desc.available_ns)
        if self.params.echo:
            print(descriptor_json(desc), flush=True)
        if len(self._latency) == self.params.count:
            self._finish()

    def _on_watchdog(self) -> None:
        if self._now_ns() - self._start_ns > self.params.timeout_s * 1e9:
            self.get_logger().error(
                f'timeout: {len(self._latency)} of {self.params.count} descriptors received'
            )
            self._finish()

    def _finish(self) -> None:
        if self.finished.done():
            return
        if self.params.role == 'talker':
            self._timer.cancel()
            # Reliable QoS: leave only once the listener has everything.
            self._pub.wait_for_all_acked(Duration(seconds=5.0))
        summary: dict[str, object] = {
            'role': self.params.role,
            'sent': self._sent,
            'received': len(self._latency),
        }
        if self.params.role == 'listener':
            summary['latency_us'] = self._latency.summary().as_dict()
            if self.params.samples_file:
                np.save(self.params.samples_file, self._latency.samples_ns)
        print('SUMMARY ' + json.dumps(summary), flush=True)
        self.finished.set_result(summary)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``frame_probe``."""
    return node_utils.run(FrameProbeNode, args)


if __name__ == '__main__':
    sys.exit(main())

"""The fusion node's ears: microphone blocks in, audio events out (rclpy glue of
:mod:`rt_fusion.core.perception.hearing`).

Input ``~/in/audio`` (rt_fusion_msgs/AudioChunk from microphone_node or a replay): the samples are
read in place from the microphone's shared-memory ring through the chunk's descriptor (copied out:
a block is 2 KB), or taken from the message where it carries them inline (recordings, another
host). Blocks are checked at the boundary and refused with a counted reason: an empty or
inconsistent block, a sample rate other than the first one's, a stamp that goes back, a ring on
another host (and no inline samples), a ring that cannot be read. A block the ring overwrote
before it was read is counted as lost.

A thread of its own runs the detector every hop (100 ms), off the executor and off the camera
worker, and publishes ``~/out/audio_events`` (rt_fusion_msgs/AudioEvent: class, probability,
onset stamp on the host clock, on and off). ``active`` is what the fusion engine reads.
The events are few and each is a change of state, so the topic is latched (reliable,
transient-local, the last 50): a planner or logger that joins late, or whose discovery of this
node finishes after the siren began, still gets the onset (subscribe transient-local for the
history; a volatile subscriber gets what comes after it matched).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rt_fusion_msgs.msg import AudioChunk, AudioEvent

from rt_fusion.core import linux
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.frame import DescriptorError
from rt_fusion.core.latency import DIAG_WINDOW, LatencyRecorder
from rt_fusion.core.perception import hearing as hr
from rt_fusion.core.shm import Overrun, ShmError, ShmRingReader
from rt_fusion.inference.hearing import HearingModel, onnx_classifier
from rt_fusion.ros.conversions import msg_to_descriptor, ns_to_time, time_to_ns
from rt_fusion.ros.qos import OVERRIDABLE

EVENTS_QOS = QoSProfile(
    depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
QUEUE_BLOCKS = 256  # ~5 s of 1024-sample blocks at 48 kHz; older ones are dropped and counted


class HearingInput:
    """See the module docstring.

    Args:
        node: the owning node.
        model: the hearing model (``load_hearing_model``).
        params: hop and hysteresis.
        frame_id: frame of the events ('' : the chunks').
        ack: called once per chunk taken in or refused (lock-step replays).
        topic: the AudioChunk input; events_topic: the AudioEvent output.
    """

    def __init__(
        self,
        node: Node,
        model: HearingModel,
        params: hr.HearingParams,
        frame_id: str = '',
        ack: Callable[[], None] | None = None,
        topic: str = '~/in/audio',
        events_topic: str = '~/out/audio_events',
    ) -> None:
        self.node = node
        self._ack = ack or (lambda: None)
        self.model = model
        self.params = params
        self.frame_id = frame_id
        self.classify = onnx_classifier(model, threads=1)

        self.detector: hr.AudioEventDetector | None = None
        self.rate_hz = 0
        self.blocks = self.hops = self.events = self.lost = 0
        self.rejected: dict[str, int] = {}
        self.hop_cost = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.last_probabilities: tuple[float, ...] = ()
        self.active: dict[str, hr.AudioEvent] = {}
        self._last_stamp = -1
        self._boot_id = linux.boot_id()
        self._readers: dict[str, ShmRingReader] = {}
        self._queue: collections.deque[tuple[int, np.ndarray, str]] = collections.deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self.pub = node.create_publisher(
            AudioEvent,
            '~/out/audio_events',
            EVENTS_QOS,
        )
        self.sub = node.create_subscription(
            AudioChunk,
            topic,
            self._on_chunk,
            # Reliable, live too: every block counts for the hearing (best effort lost 4 of a
            # test's blocks on a loaded machine); a best-effort microphone driver takes a QoS
            # override (qos_overrides.<topic>.subscription.reliability: best_effort).
            QoSProfile(depth=64, reliability=ReliabilityPolicy.RELIABLE),
            qos_overriding_options=OVERRIDABLE,
        )
        self._thread = threading.Thread(target=self._work, name='hearing', daemon=True)
        self._thread.start()

    # -- executor thread: check, copy out, queue -----------------------------------------------

    def _reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def _on_chunk(self, msg: AudioChunk) -> None:
        try:
            self._take(msg)
        finally:
            self._ack()

    def _take(self, msg: AudioChunk) -> None:
        stamp = time_to_ns(msg.header.stamp)
        if msg.sample_rate <= 0 or msg.channels <= 0 or msg.frames <= 0:
            self._reject('audio_empty')
            return
        if self.rate_hz and msg.sample_rate != self.rate_hz:
            self._reject('audio_rate_changed')
            return
        if stamp <= self._last_stamp:
            self._reject('audio_out_of_order')
            return
        samples = self._samples(msg)
        if samples is None:
            return
        self._last_stamp = stamp
        self.rate_hz = msg.sample_rate
        with self._cond:
            if len(self._queue) >= QUEUE_BLOCKS:
                self._queue.popleft()
                self.lost += 1
            self._queue.append((stamp, samples, msg.header.frame_id))
            self._cond.notify()

    def _samples(self, msg: AudioChunk) -> np.ndarray | None:
        expected = msg.frames * msg.channels
        if len(msg.samples):
            if len(msg.samples) != expected:
                self._reject('audio_size_mismatch')
                return None
            return np.asarray(msg.samples, np.int16).reshape(msg.frames, msg.channels)
        if msg.frame.boot_id != self._boot_id:  # another host or boot: its ring is not ours
            self._reject('audio_ring_elsewhere')
            return None
        try:
            desc = msg_to_descriptor(msg.frame)
            reader = self._readers.get(desc.segment)
            if reader is not None and reader.epoch_ns != desc.segment_epoch_ns:
                reader.close()
                reader = None
            if reader is None:
                reader = self._readers[desc.segment] = ShmRingReader.attach(desc.segment)
            got = reader.read(desc)
        except (ShmError, DescriptorError):
            self._reject('audio_ring_unreadable')
            return None
        if isinstance(got, Overrun):
            self.lost += 1
            return None
        block = np.array(got.array, np.int16, copy=True)
        if not got.release():  # overwritten while it was copied
            self.lost += 1
            return None
        if block.size != expected:
            self._reject('audio_size_mismatch')
            return None
        return block.reshape(msg.frames, msg.channels)

    def set_params(self, new: hr.HearingParams) -> None:
        """New thresholds and hops from the next hop on (``ros2 param set``); the hop length
        stays (the detector's buffers are sized by it).

        Raises:
            ParameterError: ``hop_s`` changed.
        """
        if new.hop_s != self.params.hop_s:
            raise ParameterError('hop_s', new.hop_s, 'read-only while running (restart the node)')
        with self._cond:
            self.params = new
            if self.detector is not None:
                self.detector.params = new

    # -- hearing thread ------------------------------------------------------------------------

    def _work(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait(0.5)
                if self._stop.is_set():
                    return
                stamp, samples, frame_id = self._queue.popleft()
            if self.detector is None:
                self.detector = hr.AudioEventDetector(
                    self.classify, self.rate_hz, self.model.mel, self.params, self.model.classes
                )
            t0 = time.perf_counter_ns()
            results = self.detector.push(stamp, samples)
            if results:
                self.hop_cost.record((time.perf_counter_ns() - t0) // len(results))
            self.blocks += 1
            for res in results:
                self.hops += 1
                self.last_probabilities = res.probabilities
                for ev in res.events:
                    self._publish(ev, frame_id)
            self.active = dict(self.detector.active)

    def _publish(self, ev: hr.AudioEvent, frame_id: str) -> None:
        msg = AudioEvent(event_class=ev.cls, probability=float(ev.probability), active=ev.active)
        msg.header.stamp = ns_to_time(ev.onset_ns)
        msg.header.frame_id = self.frame_id or frame_id
        msg.decided = ns_to_time(ev.stamp_ns)
        self.pub.publish(msg)
        self.events += 1

    def diagnostics(self) -> dict[str, Any]:
        """Values for the node's /diagnostics status."""
        cost = self.hop_cost.summary()
        probs = dict(zip(self.model.classes, self.last_probabilities, strict=False))
        return {
            'audio_blocks': self.blocks,
            'audio_hops': self.hops,
            'audio_lost_blocks': self.lost,
            'audio_events': self.events,
            'audio_active': ', '.join(sorted(self.active)),
            'audio_probabilities': ', '.join(f'{k} {v:.2f}' for k, v in probs.items()),
            'audio_hop_p99_us': round(cost.p99_us, 1) if cost.count else '',
            'audio_rejected': ', '.join(f'{k} {v}' for k, v in sorted(self.rejected.items())),
        }

    def destroy(self) -> None:
        """Stops the thread, unmaps the rings."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=5.0)
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()

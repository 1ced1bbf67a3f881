"""replay_node: a rosbag2 (MCAP or sqlite3, read with ``rosbags``) published into the live graph.

Every selected topic is published under its recorded name, relative to the node's namespace
(``relative``; or its ``remap`` target) with the
stored CDR bytes, so stamps and values arrive exactly as recorded; ``/clock`` carries the recorded
time for nodes with ``use_sim_time``. Pacing (:mod:`rt_fusion.core.replay`): ``realtime`` (with
``rate``), ``lockstep`` (the next message waits for an acknowledgement on ``ack_topic``, a
``std_msgs/UInt64``; ``tools/topic_echo.py --ack`` gives one) or ``fast``. The node ends by itself
when the bag is done (exit status 0) and logs what it sent.

Image topics named in ``shm`` (``sensor_msgs/Image`` or JPEG/PNG ``CompressedImage``) go
into a shared-memory ring exactly as ``camera_node`` does it: decoded into the next slot, the
``ShmFrame`` descriptor on ``<livebase>/shm`` with the recorded stamp, so ``fusion_node`` reads
them in place. Microphone topics named there (``rt_fusion_msgs/AudioChunk`` with inline
samples, as recorded) go into a ring as ``microphone_node`` does it: the samples into the next
slot, the AudioChunk on ``<livebase>`` with the slot's descriptor and no inline samples.
``stamp_from`` replaces the header stamps of a topic with the latest stamp of a
trigger topic (the TI radar of the ``imu_radar_rio`` bag: scans stamped by their hardware
trigger).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty, Full, Queue
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from std_msgs.msg import UInt64

from rt_fusion.core.bag import BagError, image_to_array, iter_messages, open_reader
from rt_fusion.core.bag_integrity import IntegrityError, metadata_mismatches, verify
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.replay import (
    Pacer,
    ReplayParams,
    Restamper,
    live_name,
    parse_pairs,
    parse_remaps,
)
from rt_fusion.core.shm import ShmRingWriter
from rt_fusion.ros import compat, graph, lifecycle, parameters, radar_tracks, running, waiting
from rt_fusion.ros.conversions import descriptor_to_msg, message_class, ns_to_time, time_to_ns
from rt_fusion.ros.shm_transport import ShmPublisher, segment_name

IMAGE_TYPES = ('sensor_msgs/msg/Image', 'sensor_msgs/msg/CompressedImage')
AUDIO_TYPE = 'rt_fusion_msgs/msg/AudioChunk'
# Messages read (and frames decoded) ahead of the one due: ~0.1 s of a camera + IMU + radar +
# microphone scenario, up to three decoded 1080p frames.
MESSAGES_AHEAD = 32
T = TypeVar('T')
R = TypeVar('R')
# ~5.5 s of 1024-sample blocks at 48 kHz, as many as the hearing queues: a fusion executor held
# up at start (its imports, its first frames) reads them late instead of finding them overwritten.
AUDIO_SLOTS = 256


class BagImage(NamedTuple):
    """An image message of a bag, decoded."""

    array: npt.NDArray[Any]
    encoding: str
    stamp_ns: int
    frame_id: str


class ReplayNode(lifecycle.DeviceNode):
    """A bag into the graph; see the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = ((ReplayParams, ''),)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('replay', **kwargs)
        self.params: ReplayParams | None = None
        self.finished: Future = Future()  # of int (exit status)
        self.pubs: dict[str, Any] = {}
        self.sent = 0
        self.passes = 0
        self.ack_timeouts = 0
        self._acked = threading.Event()
        self._start = threading.Event()  # start_topic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.shm_pubs: dict[str, ShmPublisher] = {}
        self.audio_rings: dict[str, tuple[ShmRingWriter, Any]] = {}

    def configure(self) -> None:
        """Opens the bag, checks the topics, creates a publisher per topic."""
        p = self.params = parameters.declare_params(self, ReplayParams)
        remaps = parse_remaps(p.remap)
        try:
            with open_reader(p.bag) as reader:
                types = {c.topic: c.msgtype for c in reader.connections}
        except BagError as err:
            raise ParameterError('bag', p.bag, str(err)) from err
        except Exception as err:
            raise ParameterError('bag', p.bag, f'not a readable rosbag2: {err}') from err
        try:
            self.integrity = verify(p.bag)
        except IntegrityError as err:
            raise ParameterError('bag', p.bag, f'unreadable MCAP: {err}') from err
        for bad in self.integrity.corrupt:
            self.get_logger().error(f'corrupt: {bad.describe()}')
            print(f'CORRUPT {bad.describe()}', flush=True)
        if self.integrity.corrupt and p.strict:
            raise ParameterError('bag', p.bag, f'corrupt (strict): {self.integrity.summary()}')
        if self.integrity.all_corrupt:
            raise ParameterError(
                'bag',
                p.bag,
                f'every chunk is corrupt, nothing to replay: {self.integrity.summary()}',
            )
        self.get_logger().info(f'bag integrity: {self.integrity.summary()}')
        for line in metadata_mismatches(p.bag, self.integrity):  # replayed: what the files hold
            self.get_logger().warning(f'metadata: {line}')
            print(f'METADATA {line}', flush=True)
            if p.strict:
                raise ParameterError(
                    'bag', p.bag, f'metadata differs from the data (strict): {line}'
                )
        topics = list(p.topics) or sorted(types)
        self.shm_map = parse_remaps(p.shm, 'shm')
        self.stamp_map = parse_pairs(p.stamp_from)
        wanted = {*topics, *self.shm_map, *self.stamp_map.values()}
        unknown = sorted(t for t in wanted if t not in types)
        if unknown:
            raise ParameterError(
                'topics', p.topics, f'not in the bag: {unknown} (it has {sorted(types)})'
            )
        for topic in self.shm_map:
            if types[topic] not in (*IMAGE_TYPES, AUDIO_TYPE):
                raise ParameterError(
                    'shm', p.shm, f'{topic} is {types[topic]}, not an image or audio'
                )
        self.types = types
        self.read_topics = sorted(wanted)
        qos = QoSProfile(depth=p.qos_depth, reliability=ReliabilityPolicy.RELIABLE)
        self.classes: dict[str, type] = {}
        for topic in sorted(wanted):
            try:
                self.classes[topic] = message_class(types[topic])
            except (ImportError, AttributeError, ValueError) as err:
                raise ParameterError(
                    'topics', topic, f'message type {types[topic]} is not installed: {err}'
                ) from err
        # Messages without a stamp (std_msgs/Float64: the vehicle speed) go out as recorded.
        self.unstamped = {
            t
            for t, cls in self.classes.items()
            if 'header' not in cls.get_fields_and_field_types()  # type: ignore[attr-defined]
            and 'stamp' not in cls.get_fields_and_field_types()  # type: ignore[attr-defined]
        }
        for topic, base in self.shm_map.items():
            if types[topic] == AUDIO_TYPE:
                self._audio_ring(p, topic, base, qos)
                continue
            first_msg = next(
                iter_messages(Path(p.bag), [topic], decode=False, skip=self.integrity.skip_chunks)
            )
            first = self._image(topic, first_msg.raw)
            # Domain, namespace, node and topic in the name: two graphs never share a ring.
            name = segment_name(self, base)
            self.shm_pubs[topic] = ShmPublisher(
                self, base, name, first.array.nbytes, p.shm_slots, frame_id=first.frame_id
            )
        self.last_trigger: dict[str, int] = {}
        self.as_tracks = {
            t for t in topics if p.radar_tracks and types[t] == 'rt_fusion_msgs/msg/RadarObjects'
        }
        for topic in topics:
            if topic not in self.shm_map:
                cls = radar_tracks.RadarTracks if topic in self.as_tracks else self.classes[topic]
                self.pubs[topic] = self.create_publisher(
                    cls, remaps.get(topic, live_name(topic, p.relative)), qos
                )
        self.topics = [t for t in topics if t not in self.shm_map] + list(self.shm_map)
        self.clock_pub = (
            self.create_publisher(Clock, graph.CLOCK_TOPIC, 10) if p.publish_clock else None
        )
        self.ack_sub = (
            self.create_subscription(UInt64, p.ack_topic, lambda _m: self._acked.set(), qos)
            if p.mode == 'lockstep'
            else None
        )
        if p.start_topic:
            latched = QoSProfile(
                depth=1,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
            )
            self.create_subscription(UInt64, p.start_topic, lambda _m: self._start.set(), latched)

    def _audio_ring(self, p: ReplayParams, topic: str, base: str, qos: QoSProfile) -> None:
        """The ring and publisher of a microphone topic, sized by its largest block."""
        largest = 0
        for m in iter_messages(
            Path(p.bag), [topic], decode=False, skip=self.integrity.skip_chunks
        ):
            msg: Any = deserialize_message(m.raw, self.classes[topic])
            if not msg.samples.size if hasattr(msg.samples, 'size') else not msg.samples:
                raise ParameterError('shm', topic, 'its blocks carry no inline samples to replay')
            largest = max(largest, len(msg.samples) * 2)
        ring = ShmRingWriter.create(segment_name(self, base), largest, AUDIO_SLOTS)
        self.audio_rings[topic] = (ring, self.create_publisher(self.classes[topic], base, qos))

    def activate(self) -> None:
        """Starts the publishing thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._play, name='replay', daemon=True)
        self._thread.start()

    def deactivate(self) -> None:
        """Stops the publishing thread."""
        self._stop.set()
        self._acked.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None

    def destroy_node(self) -> None:
        """Stops playing, removes the replay rings, destroys the node."""
        self.deactivate()
        for pub in self.shm_pubs.values():
            pub.close()
        self.shm_pubs.clear()
        for ring, _pub in self.audio_rings.values():
            ring.close()
        self.audio_rings.clear()
        super().destroy_node()

    def _play(self) -> None:
        try:
            self._play_all()
        except Exception as err:  # noqa: BLE001 - a bag that fails mid-read: one line, status 2
            why = (f'{type(err).__name__}: {err}'.splitlines() or [''])[0][:300]
            self.get_logger().error(f'replay failed: {why}')
            if not self.finished.done():
                bag = self.params.bag if self.params is not None else '?'
                self.finished.set_exception(BagError(f'bag {bag}: replay failed: {why}'))

    def _play_all(self) -> None:
        p = self.params
        assert p is not None
        counts = {pub.topic_name: pub.get_subscription_count for pub in self.pubs.values()}
        counts |= {sp.topic: sp.subscriber_count for sp in self.shm_pubs.values()}
        counts |= {
            pub.topic_name: pub.get_subscription_count for _r, pub in self.audio_rings.values()
        }
        if self.ack_sub is not None:  # an acknowledgement sent before this matches is lost
            name = f'{self.ack_sub.topic_name} (its publisher)'
            counts[name] = compat.publisher_counter(self, self.ack_sub)
        if not waiting.wait_to_start(
            self,
            counts,
            p.wait_subscribers_s,
            p.start_topic,
            self._start,
            p.start_timeout_s,
            self._stop,
            required=p.require_subscribers,
        ):
            return
        # Every shared-memory subscriber matched by now acknowledges a handshake before the
        # first frame: a subscriber the replay has matched may not have matched the replay yet,
        # and the frames it misses meanwhile are lost (78 of 300 on the H200 before this).
        for pub in self.shm_pubs.values():
            if not pub.wait_ready(max(p.wait_subscribers_s, 10.0), self._stop):
                if self._stop.is_set():
                    return
                self.get_logger().warning(f'{pub.topic}: no reader acknowledged: starting anyway')
        if self._stop.wait(p.start_delay_s):
            return
        started = time.monotonic()
        floor_ns = 0  # a looped pass's restamped stamps come after the previous pass's
        while p.loops == 0 or self.passes < p.loops:
            restamp = Restamper(p.rate if p.mode == 'realtime' else 1.0)
            if not self._play_once(p, restamp, floor_ns):
                return
            floor_ns = restamp.next_floor_ns()
            self.passes += 1
        lost = self.integrity.skipped_of(set(self.topics))  # of the replayed topics only
        skipped = sum(lost.values())
        self.get_logger().info(
            f'replayed {self.sent} messages of {len(self.topics)} topics in '
            f'{time.monotonic() - started:.1f} s ({p.mode}; {self.ack_timeouts} ack timeouts; '
            f'{skipped} messages in corrupt chunks skipped'
            + (f': {", ".join(f"{t} {n}" for t, n in sorted(lost.items()))})' if lost else ')')
        )
        line = f'REPLAYED {self.sent} ack_timeouts={self.ack_timeouts}'
        print(line + (f' skipped_corrupt={skipped}' if skipped else ''), flush=True)
        if not self.finished.done():
            self.finished.set_result(self.sent)

    def _play_once(self, p: ReplayParams, restamp: Restamper, floor_ns: int) -> bool:
        """One pass over the bag, its restamped stamps anchored no earlier than ``floor_ns``;
        False when stopped."""
        pacer = Pacer(p.rate)
        triggers = set(self.stamp_map.values())
        published = set(self.topics)
        skip = self.integrity.skip_chunks
        messages = iter_messages(Path(p.bag), self.read_topics, decode=False, skip=skip)
        # Frames are decoded (JPEG in the bag) ahead, on a thread of their own (the decoder
        # releases the GIL), as a camera's frame is ready when its driver hands it over: the
        # decode is neither part of the modelled delivery nor a delay to the other sensors.
        # A decoding thread per ring (a camera rig: one per camera), at most one per CPU.
        decoders = max(1, min(len(self.shm_pubs), os.cpu_count() or 1))
        for m, image in _ahead(messages, self._decode, MESSAGES_AHEAD, self._stop, decoders):
            if self._stop.is_set():
                return False
            if m.topic in triggers:
                trig: Any = deserialize_message(m.raw, self.classes[m.topic])
                trig_stamp = trig.stamp if hasattr(trig, 'stamp') else trig.header.stamp
                self.last_trigger[m.topic] = time_to_ns(trig_stamp)
                if m.topic not in published:
                    continue
            if p.mode == 'realtime':
                delay = (
                    pacer.due_ns(m.log_time_ns, time.monotonic_ns()) - time.monotonic_ns()
                ) / 1e9
                if delay > 0 and self._stop.wait(delay):  # paced: the recorded timeline
                    return False
            if self.clock_pub is not None:
                self.clock_pub.publish(Clock(clock=ns_to_time(m.log_time_ns)))
            self._acked.clear()
            restamp.anchor(m.log_time_ns, max(time.time_ns(), floor_ns))
            raw = m.raw
            trigger = (
                self.last_trigger.get(self.stamp_map[m.topic])
                if m.topic in self.stamp_map
                else None
            )
            if m.topic in self.audio_rings:
                self._publish_audio(m.topic, raw, restamp if p.restamp else None)
                self.sent += 1
                if p.mode == 'lockstep' and not self._acked.wait(p.ack_timeout_s):
                    self.ack_timeouts += 1
                continue
            if (
                (trigger is not None or p.restamp)
                and m.topic not in self.shm_pubs
                and m.topic not in self.unstamped
            ):
                msg: Any = deserialize_message(raw, self.classes[m.topic])
                header = msg if not hasattr(msg, 'header') else msg.header
                stamp = trigger if trigger is not None else time_to_ns(header.stamp)
                header.stamp = ns_to_time(restamp(stamp) if p.restamp else stamp)
                raw = serialize_message(msg)
            if image is not None:
                self._publish_shm(m.topic, image, restamp if p.restamp else None)
            elif m.topic in self.as_tracks:
                objects: Any = deserialize_message(raw, self.classes[m.topic])
                self.pubs[m.topic].publish(radar_tracks.objects_to_tracks(objects))
            else:
                self.pubs[m.topic].publish(raw)
            self.sent += 1
            if p.mode == 'lockstep' and not self._acked.wait(p.ack_timeout_s):
                self.ack_timeouts += 1
                self.get_logger().warning(
                    f'no acknowledgement on {p.ack_topic} within {p.ack_timeout_s} s',
                    throttle_duration_sec=5.0,
                )
        return True

    def _decode(self, m: Any) -> BagImage | None:
        """A message's frame decoded, where it goes into a ring."""
        return self._image(m.topic, m.raw) if m.topic in self.shm_pubs else None

    def _image(self, topic: str, raw: bytes) -> BagImage:
        """A bag image message decoded: BGR/RGB/mono array, encoding, stamp and frame id."""
        msg: Any = deserialize_message(raw, self.classes[topic])
        stamp, frame_id = time_to_ns(msg.header.stamp), msg.header.frame_id
        try:
            array, encoding = image_to_array(msg, self.types[topic])
        except BagError as err:
            raise ParameterError('shm', topic, str(err)) from err
        return BagImage(array, encoding, stamp, frame_id)

    def _publish_audio(self, topic: str, raw: bytes, restamp: Restamper | None) -> None:
        """A recorded block into the ring, its chunk out with the slot's descriptor."""
        ring, pub = self.audio_rings[topic]
        msg: Any = deserialize_message(raw, self.classes[topic])
        samples = np.asarray(msg.samples, dtype=np.int16)
        frames = samples.size // max(int(msg.channels), 1)
        stamp = time_to_ns(msg.header.stamp)
        if restamp is not None:
            stamp = restamp(stamp)
            msg.header.stamp = ns_to_time(stamp)
        ws = ring.acquire((frames, max(int(msg.channels), 1)), np.int16, 'pcm')
        np.copyto(ws.array, samples.reshape(ws.array.shape))
        desc = ring.commit(ws, stamp_ns=stamp, available_ns=time.time_ns())
        descriptor_to_msg(desc, msg.frame)
        msg.samples = []
        pub.publish(msg)

    def _publish_shm(self, topic: str, img: BagImage, restamp: Restamper | None) -> None:
        pub = self.shm_pubs[topic]
        ws = pub.acquire(tuple(img.array.shape), img.array.dtype, img.encoding)
        np.copyto(ws.array, img.array)
        pub.commit(ws, restamp(img.stamp_ns) if restamp is not None else img.stamp_ns)


def _ahead(
    items: Iterator[T],
    work: Callable[[T], R],
    depth: int,
    stop: threading.Event,
    workers: int = 1,
) -> Iterator[tuple[T, R]]:
    """``(item, work(item))`` in order, ``work`` running up to ``depth`` items ahead on a
    thread (on ``workers`` threads when more than one: JPEG decoding releases the GIL, and a
    rig of 1080p cameras needs more than a core for it); an exception in either is raised here,
    at its place in the order."""
    queue: Queue[tuple[T, Any] | BaseException | None] = Queue(maxsize=depth)
    pool = concurrent.futures.ThreadPoolExecutor(workers) if workers > 1 else None

    def put(entry: tuple[T, Any] | BaseException | None) -> bool:
        while not stop.is_set():
            try:
                queue.put(entry, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                done = pool.submit(work, item) if pool is not None else work(item)
                if not put((item, done)):
                    return
        except BaseException as err:  # noqa: BLE001  # handed to the consumer, raised there
            put(err)
            return
        put(None)

    worker = threading.Thread(target=produce, name='replay-ahead', daemon=True)
    worker.start()
    while not stop.is_set():
        try:
            entry = queue.get(timeout=0.1)
        except Empty:
            continue
        if entry is None:
            return
        if isinstance(entry, BaseException):
            raise entry
        item, done = entry
        yield item, done.result() if pool is not None else done
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``replay_node``."""
    return running.run(ReplayNode, args)


if __name__ == '__main__':
    sys.exit(main())

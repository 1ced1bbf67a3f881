"""rclpy side of the shared-memory transport: ShmPublisher and ShmSubscription.

Topic layout for a stream published at ``<topic>`` (e.g. ``~/out/image``), after remapping
(the base name is resolved first, then suffixed, as image_transport does, so one remap rule
``~/out/image:=/camera/image`` moves both topics):

- ``<topic>/shm``: ``rt_fusion_msgs/ShmFrame`` descriptors, one per committed frame;
- ``<topic>``: the full standard message (``sensor_msgs/Image`` for images), published only
  while something subscribes to it (rviz, a recorder, a reader on another host) or when the
  publisher's ``transport`` is ``ros``. Its ``publish()`` costs ~4 ms for a 1080p frame here,
  which is why it is not sent unasked.

A :class:`ShmSubscription` takes frames from whichever path works:

- ``shm``: descriptors over rclpy, payload mapped from /dev/shm (zero copy);
- ``fast``: same host, waiting on the ring's futex in a thread (no rclpy hop): enabled with
  ``fast_path=True``; it starts after the first descriptor (which names the segment) and then
  delivers every following frame itself, in sequence order;
- ``ros``: the full message, when ``transport='ros'`` or when the segment cannot be mapped
  (another host or boot, another user, not found) with ``transport='auto'``.

Descriptor QoS: reliable, keep-last = the ring's slot count. A descriptor is ~200 bytes, so
reliability costs nothing here, and a deeper queue would only hold frames the ring has already
overwritten.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.subscription import Subscription
from rt_fusion_msgs.msg import ShmFrame
from sensor_msgs.msg import Image
from std_msgs.msg import Empty

from rt_fusion.core import linux
from rt_fusion.core.frame import DescriptorError, FrameDescriptor, image_array
from rt_fusion.core.shm import (
    FrameView,
    Overrun,
    SegmentLayoutError,
    SegmentNotFoundError,
    SegmentOwnerError,
    ShmError,
    ShmRingReader,
    ShmRingWriter,
    StaleSegmentError,
    WriteSlot,
)
from rt_fusion.ros.conversions import (
    descriptor_to_msg,
    msg_to_descriptor,
    ns_to_time,
    time_to_ns,
)

TRANSPORTS = ('shm', 'ros', 'auto')
HELLO = 'hello'  # encoding of a writer's handshake descriptor (no payload; readers skip it)


class PayloadCodec(Protocol):
    """Converts a payload to and from the full standard message of the fallback path."""

    msg_type: type

    def to_msg(self, array: npt.NDArray[Any], desc: FrameDescriptor, msg: Any) -> Any:
        """Fills ``msg`` with the payload and its stamps."""

    def from_msg(self, msg: Any) -> tuple[npt.NDArray[Any], FrameDescriptor]:
        """Payload view and a descriptor (no segment) of a full message."""


class ImageCodec:
    """``sensor_msgs/Image`` for image payloads (height, width[, channels])."""

    msg_type = Image

    def to_msg(self, array: npt.NDArray[Any], desc: FrameDescriptor, msg: Image) -> Image:
        """Copies the frame into ``msg.data`` (the ~4 ms that the shm path avoids)."""
        msg.header.stamp = ns_to_time(desc.stamp_ns)
        msg.header.frame_id = desc.frame_id
        msg.height, msg.width = int(array.shape[0]), int(array.shape[1])
        msg.encoding = desc.encoding
        msg.is_bigendian = 0
        msg.step = (
            int(array.strides[0])
            if array.flags.c_contiguous
            else msg.width * int(np.prod(array.shape[2:], dtype=np.int64)) * array.itemsize
        )
        msg.data = np.ascontiguousarray(array).tobytes()
        return msg

    def from_msg(self, msg: Image) -> tuple[npt.NDArray[Any], FrameDescriptor]:
        """A read-only view of ``msg.data`` shaped as the image."""
        array = image_array(
            msg.encoding, msg.height, msg.width, msg.step, bool(msg.is_bigendian), msg.data
        )
        dt, shape = array.dtype, array.shape
        desc = FrameDescriptor(
            segment='',
            segment_epoch_ns=0,
            boot_id='',
            slot=0,
            sequence=0,
            generation=0,
            encoding=msg.encoding,
            dtype=dt.str,
            shape=shape,
            size_bytes=array.nbytes,
            stamp_ns=time_to_ns(msg.header.stamp),
            frame_id=msg.header.frame_id,
        )
        return array, desc


def segment_name(node: Node, suffix: str = '') -> str:
    """A shared-memory segment name that two graphs on one host cannot share.

    ``rt_fusion_d<ROS domain>_<namespace>_<node>[_<suffix>]``: a camera in domain 64 and one in
    domain 65 (two demos, a test beside a running graph) write different rings, and the
    descriptors name the segment, so readers follow without configuration.
    """
    domain = node.context.get_domain_id()
    parts = [p for p in node.get_namespace().split('/') if p] + [node.get_name()]
    if suffix:
        parts += [p for p in suffix.split('/') if p]
    return f'rt_fusion_d{domain}_' + '_'.join(parts)


def scoped_segment(node: Node, name: str) -> str:
    """An explicit segment name (a node's ``segment`` parameter) scoped by ROS domain as
    :func:`segment_name`'s are: ``rt_fusion_d<domain>_<name>``, so that one configuration run
    in two domains on one host (two demos, a test beside a running graph) writes two rings; a
    name that already carries this domain's prefix is kept; empty: :func:`segment_name`."""
    if not name:
        return segment_name(node)
    prefix = f'rt_fusion_d{node.context.get_domain_id()}_'
    return name if name.startswith(prefix) else prefix + name


class ShmPublisher:
    """A ring in /dev/shm plus the descriptor publisher (and the full message when asked for).

    Args:
        node: owning node.
        topic: base topic; descriptors go to ``<topic>/shm``, full messages to ``<topic>``.
        segment: ring name in /dev/shm.
        slot_size: payload capacity of a slot [bytes].
        slot_count: slots in the ring.
        transport: ``shm`` (ring + descriptors, full message on demand) or ``ros`` (full
            messages only, no ring).
        codec: full-message converter (default: images).
        full_qos: QoS of the full message (default: sensor data, best effort).
        full_decimation: with shm, publish the full message for every n-th frame only.
        full_always: with shm, publish the full message even when nobody subscribes.
    """

    def __init__(
        self,
        node: Node,
        topic: str,
        segment: str,
        slot_size: int,
        slot_count: int,
        *,
        frame_id: str = '',
        transport: str = 'shm',
        codec: PayloadCodec | None = None,
        full_qos: QoSProfile | None = None,
        full_decimation: int = 1,
        full_always: bool = False,
    ) -> None:
        if transport not in ('shm', 'ros'):
            raise ShmError(segment, f'publisher transport {transport!r} not in (shm, ros)')
        self.node = node
        self.topic = node.resolve_topic_name(topic)
        self.transport = transport
        self.codec: PayloadCodec = codec or ImageCodec()
        self.frame_id = frame_id
        self.ring: ShmRingWriter | None = None
        self._desc_pub = None
        self._readers_pub = None
        if transport == 'shm':
            self.ring = ShmRingWriter.create(segment, slot_size, slot_count, frame_id=frame_id)
            if self.ring.replaced_stale:
                node.get_logger().warning(
                    f'replaced a stale segment {segment!r} left by a writer that is gone'
                )
            qos = QoSProfile(depth=slot_count, reliability=ReliabilityPolicy.RELIABLE)
            self._desc_pub = node.create_publisher(ShmFrame, f'{self.topic}/shm', qos)
            # Readers on the fast path drop the descriptors (they read the ring) but stay
            # subscribed here, where nothing is ever published: a restarted writer counts them.
            self._readers_pub = node.create_publisher(Empty, f'{self.topic}/shm/readers', 1)
        self._full_pub = node.create_publisher(
            self.codec.msg_type, self.topic, full_qos or qos_profile_sensor_data
        )
        self._desc_msg = ShmFrame()
        self._full_msg = self.codec.msg_type()
        self.published = 0
        self.full_published = 0
        self.full_decimation = max(1, full_decimation)
        self.full_always = full_always
        self._sequence = 0
        self._scratch: npt.NDArray[Any] | None = None

    def acquire(self, shape: tuple[int, ...], dtype: npt.DTypeLike, encoding: str) -> WriteSlot:
        """A writable array to produce the next frame into (a ring slot, or a private buffer)."""
        if self.ring is not None:
            return self.ring.acquire(shape, dtype, encoding)
        dt = np.dtype(dtype)
        if self._scratch is None or self._scratch.shape != shape or self._scratch.dtype != dt:
            self._scratch = np.empty(shape, dt)
        return WriteSlot(0, self._sequence, self._scratch, encoding)

    def commit(self, ws: WriteSlot, stamp_ns: int, hw_stamp_ns: int = 0) -> FrameDescriptor:
        """Commits the frame and publishes its descriptor (and the full message when wanted).

        The availability stamp is host wall-clock time (never sim time): it measures transport
        latency between processes on one host.
        """
        now = time.time_ns()
        if self.ring is not None:
            desc = self.ring.commit(ws, stamp_ns, now, hw_stamp_ns, self.frame_id)
            assert self._desc_pub is not None
            self._desc_pub.publish(descriptor_to_msg(desc, self._desc_msg))
        else:
            desc = FrameDescriptor(
                segment='',
                segment_epoch_ns=0,
                boot_id='',
                slot=0,
                sequence=ws.sequence,
                generation=0,
                encoding=ws.encoding,
                dtype=ws.array.dtype.str,
                shape=tuple(ws.array.shape),
                size_bytes=ws.array.nbytes,
                stamp_ns=stamp_ns,
                hw_stamp_ns=hw_stamp_ns,
                available_ns=now,
                frame_id=self.frame_id,
            )
            self._sequence += 1
        wanted = (
            self.transport == 'ros'
            or self.full_always
            or self._full_pub.get_subscription_count() > 0
        )
        if wanted and (self.transport == 'ros' or self.published % self.full_decimation == 0):
            self._full_pub.publish(self.codec.to_msg(ws.array, desc, self._full_msg))
            self.full_published += 1
        self.published += 1
        return desc

    def publish(
        self, array: npt.NDArray[Any], encoding: str, stamp_ns: int, hw_stamp_ns: int = 0
    ) -> FrameDescriptor:
        """Copies ``array`` into the next slot and publishes it."""
        ws = self.acquire(array.shape, array.dtype, encoding)
        np.copyto(ws.array, array)
        return self.commit(ws, stamp_ns, hw_stamp_ns)

    def subscriber_count(self) -> int:
        """Subscribers of the descriptors and of the full message together."""
        desc = self._desc_pub.get_subscription_count() if self._desc_pub is not None else 0
        if self._readers_pub is not None:
            desc += self._readers_pub.get_subscription_count()
        return desc + self._full_pub.get_subscription_count()

    def wait_ready(
        self, timeout_s: float, stop: threading.Event | None = None, subscribers: int = 1
    ) -> bool:
        """Before the first frame: waits (bounded) until ``subscribers`` subscribers are there
        (descriptors and full messages together) and can receive.

        A subscriber the writer has matched may not have matched the writer yet (discovery runs
        both ways, and a loaded host takes its time): frames published in between are retried
        only while they are in the keep-last history, so a fast start loses the first ones. The
        writer therefore publishes a handshake descriptor (encoding ``hello``, no payload; readers
        skip it) and waits until every reliable subscriber has acknowledged it.

        Returns:
            True when the subscribers are there and have the handshake; False at the timeout or
            stop.
        """
        end = time.monotonic() + timeout_s
        stop = stop or threading.Event()
        while self.subscriber_count() < max(1, subscribers):
            if time.monotonic() >= end or stop.wait(0.05):  # paced: discovery
                return False
        if self._desc_pub is None or self._desc_pub.get_subscription_count() == 0:
            return True  # full messages only (best effort): nothing to acknowledge
        hello = ShmFrame(segment=self.ring.name if self.ring else '', encoding=HELLO)
        hello.header.stamp = ns_to_time(time.time_ns())
        self._desc_pub.publish(hello)
        while not self._desc_pub.wait_for_all_acked(Duration(nanoseconds=100_000_000)):
            if time.monotonic() >= end or stop.is_set():
                return False
        return True

    def wait_for_all_acked(self, timeout_s: float) -> bool:
        """Reliable subscribers have everything published so far (or the timeout passed)."""
        ok = True
        for pub in (self._desc_pub, self._full_pub):
            if pub is not None:
                ok &= pub.wait_for_all_acked(Duration(nanoseconds=int(timeout_s * 1e9)))
        return ok

    def close(self) -> None:
        """Closes and unlinks the ring (idempotent)."""
        if self.ring is not None:
            self.ring.close()
            self.ring = None


@dataclasses.dataclass(slots=True)
class FullFrame:
    """A frame that came as a full message: owns its data, always valid."""

    desc: FrameDescriptor
    array: npt.NDArray[Any]

    def valid(self) -> bool:
        """Always True: the message's memory is the subscriber's own."""
        return True

    def release(self) -> bool:
        """Always True."""
        return True


Received = FrameView | FullFrame


@dataclasses.dataclass
class SubscriptionStats:
    """Counters of a ShmSubscription (for diagnostics)."""

    delivered: int = 0
    delivered_fast: int = 0
    delivered_full: int = 0
    overruns: int = 0
    stale: int = 0
    torn: int = 0
    bad_descriptors: int = 0
    reattached: int = 0
    #: Frames whose descriptor never arrived, read from the ring itself (part of ``delivered``).
    recovered: int = 0
    last_error: str = ''


class ShmSubscription:
    """Delivers frames of a ShmPublisher stream to ``callback(frame, path)``.

    ``frame`` has ``array`` (read-only numpy), ``desc`` and ``valid()``; ``path`` is ``'shm'``,
    ``'fast'`` or ``'ros'``. Frames older than the last delivered one and overwritten frames
    are dropped and counted; a frame overwritten before the callback confirmed it intact
    (``valid()`` True, or its ``release()``/``copy()``) is counted as torn, once: a frame is
    either used or torn, never both (callbacks that keep results must check it).

    Args:
        node: owning node.
        topic: base topic of the stream (see module docstring).
        callback: called for every delivered frame.
        transport: ``auto`` (shm if the segment can be mapped, else the full message), ``shm``
            (never the full message), ``ros`` (only the full message).
        fast_path: deliver from the ring's futex in a thread instead of the rclpy callback.
        depth: descriptor queue depth (default 8).
    """

    def __init__(
        self,
        node: Node,
        topic: str,
        callback: Callable[[Received, str], None],
        *,
        transport: str = 'auto',
        fast_path: bool = False,
        depth: int = 8,
        codec: PayloadCodec | None = None,
        full_qos: QoSProfile | None = None,
        owner_uid: int | None = None,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ShmError(topic, f'transport {transport!r} not in {TRANSPORTS}')
        self.node = node
        self.topic = node.resolve_topic_name(topic)
        self.callback = callback
        self.transport = transport
        self.fast_path = fast_path and transport != 'ros'
        self.codec: PayloadCodec = codec or ImageCodec()
        self.full_qos = full_qos or qos_profile_sensor_data
        self.owner_uid = owner_uid
        self.stats = SubscriptionStats()
        self.active_path = 'ros' if transport == 'ros' else 'shm'
        self._boot_id = linux.boot_id()
        self._readers: dict[str, ShmRingReader] = {}
        self._last_seq: dict[str, int] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._desc_sub: Subscription | None = None
        self._full_sub: Subscription | None = None
        self._presence: Subscription | None = None
        if transport == 'ros':
            self._subscribe_full()
        else:
            qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
            self._desc_sub = node.create_subscription(
                ShmFrame, f'{self.topic}/shm', self._on_desc, qos
            )

    # -- rclpy path ----------------------------------------------------------------------------

    def _subscribe_full(self) -> None:
        if self._full_sub is None:
            self._full_sub = self.node.create_subscription(
                self.codec.msg_type, self.topic, self._on_full, self.full_qos
            )

    def _fall_back(self, reason: str) -> None:
        self.node.get_logger().warning(
            f'{self.topic}: shared memory unusable ({reason}); using the full message'
        )
        self.stats.last_error = reason
        self.active_path = 'ros'
        self._subscribe_full()

    def reader_of(self, segment: str) -> ShmRingReader | None:
        """The mapping of ``segment`` this subscription reads through (for page-locking)."""
        return self._readers.get(segment)

    def _reader_for(self, desc: FrameDescriptor) -> ShmRingReader:
        reader = self._readers.get(desc.segment)
        if reader is not None and reader.epoch_ns != desc.segment_epoch_ns:
            reader.close()
            reader = None
            self.stats.reattached += 1
        if reader is None:
            reader = ShmRingReader.attach(desc.segment, owner_uid=self.owner_uid)
            self._readers[desc.segment] = reader
            self._last_seq[desc.segment] = -1  # a restarted writer counts from 0 again
        return reader

    def _on_desc(self, msg: ShmFrame) -> None:
        if self.active_path != 'shm':
            return  # the fast path or the full message delivers
        if msg.encoding == HELLO and msg.size_bytes == 0:
            return  # the writer's handshake before its first frame (ShmPublisher.wait_ready)
        desc = msg_to_descriptor(msg)
        if desc.boot_id != self._boot_id:
            if self.transport == 'auto':
                self._fall_back(f'segment {desc.segment!r} is on another host or boot')
            else:
                self.stats.last_error = f'segment {desc.segment!r} on another host or boot'
            return
        try:
            reader = self._reader_for(desc)
            got = reader.read(desc)
        except (SegmentNotFoundError, SegmentOwnerError, SegmentLayoutError) as err:
            # auto: a ring never reached is on another computer (or another user's): the full
            # message from now on. A ring read before that is gone now is a writer restarting
            # (a camera respawned after a crash): counted, and read again once it is back.
            if self.transport == 'auto' and self.stats.delivered == 0:
                self._fall_back(str(err))
            else:
                self.stats.bad_descriptors += 1
                self.stats.last_error = str(err)
            return
        except StaleSegmentError as err:
            self.stats.stale += 1
            self.stats.last_error = str(err)
            return
        except DescriptorError as err:
            self.stats.bad_descriptors += 1
            self.stats.last_error = str(err)
            self.node.get_logger().error(str(err), throttle_duration_sec=5.0)
            return
        self._catch_up(reader, desc.sequence)
        self._deliver(got, 'shm', desc.segment)
        if self.fast_path and self._thread is None:
            self.active_path = 'fast'
            self._thread = threading.Thread(
                target=self._fast_loop,
                args=(reader, desc.sequence + 1),
                name=f'shm-fast:{desc.segment}',
                daemon=True,
            )
            self._thread.start()
            # The ring delivers from now on. Leaving the descriptors subscribed would wake this
            # process's executor for every frame, and it would hold the GIL just when the fast
            # thread needs it.
            if self._desc_sub is not None:
                self.node.destroy_subscription(self._desc_sub)
                self._desc_sub = None
                self._presence = self.node.create_subscription(
                    Empty, f'{self.topic}/shm/readers', lambda _msg: None, 1
                )

    def _catch_up(self, reader: ShmRingReader, sequence: int) -> None:
        """Delivers, from the ring itself, the frames before ``sequence`` whose descriptors never
        came: a starved executor lets the descriptor history (keep-last ``depth``) overflow, and
        DDS then drops the oldest without a word. The ring is the record of what was committed;
        a frame it no longer holds is an overrun."""
        last = self._last_seq.get(reader.name, -1)
        if last < 0 or sequence <= last + 1:
            return  # the first frame of this ring, or no gap
        first = max(last + 1, sequence - reader.layout.slot_count + 1)
        if first > last + 1:
            with self._lock:
                self.stats.overruns += first - (last + 1)
        for missed in range(first, sequence):
            got = reader.read_sequence(missed)
            if got is None:
                return  # cannot be (``sequence`` is committed): leave it to the accounting
            if not isinstance(got, Overrun):
                self.stats.recovered += 1
            self._deliver(got, 'shm', reader.name)

    def _on_full(self, msg: Any) -> None:
        try:
            array, desc = self.codec.from_msg(msg)
        except DescriptorError as err:
            self.stats.bad_descriptors += 1
            self.stats.last_error = str(err)
            return
        self._deliver(FullFrame(desc, array), 'ros')

    # -- delivery ------------------------------------------------------------------------------

    def _deliver(self, got: FrameView | FullFrame | Overrun, path: str, segment: str = '') -> None:
        with self._lock:
            if isinstance(got, Overrun):
                self.stats.overruns += 1
                if segment:  # counted once: the next descriptor's catch-up starts after it
                    last = self._last_seq.get(segment, -1)
                    self._last_seq[segment] = max(last, got.sequence)
                return
            if path != 'ros':
                last = self._last_seq.get(got.desc.segment, -1)
                if got.desc.sequence <= last:
                    self.stats.stale += 1
                    return
                self._last_seq[got.desc.segment] = got.desc.sequence
            self.stats.delivered += 1
            if path == 'fast':
                self.stats.delivered_fast += 1
            elif path == 'ros':
                self.stats.delivered_full += 1
            self.callback(got, path)
            # Torn: overwritten before the callback could confirm it. A callback that checked
            # the frame intact (``valid()``, ``release()``, ``copy()``) has its result, and a
            # later overwrite loses nothing: counting it torn too would count one frame twice.
            if isinstance(got, FrameView) and not got.vouched and not got.valid():
                self.stats.torn += 1

    # -- same-host fast path -------------------------------------------------------------------

    def _fast_loop(self, reader: ShmRingReader, sequence: int) -> None:
        while not self._stop.is_set():
            got = reader.wait_next(sequence, 100_000_000)
            if got is None:
                if reader.closed_by_writer:
                    self._stop.wait(0.02)  # the writer left: poll for its successor
                if reader.replaced() and not self._stop.is_set():
                    reader, sequence = self._reattach(reader, sequence)
                continue
            if isinstance(got, Overrun):  # every frame skipped to the oldest still held counts
                skip_to = max(sequence + 1, reader.oldest_available())
                with self._lock:
                    self.stats.overruns += skip_to - sequence
                sequence = skip_to
                continue
            self._deliver(got, 'fast')
            sequence += 1

    def _reattach(self, old: ShmRingReader, sequence: int) -> tuple[ShmRingReader, int]:
        try:
            new = ShmRingReader.attach(old.name, owner_uid=self.owner_uid)
        except ShmError:
            return old, sequence  # the writer is not back yet: try again after the next wait
        with self._lock:
            self._readers[old.name] = new
            self._last_seq[old.name] = -1
            self.stats.reattached += 1
        old.close()
        return new, new.oldest_available()

    def destroy(self) -> None:
        """Stops the fast-path thread, unmaps the rings (never unlinks), drops subscriptions."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        for sub in (self._desc_sub, self._full_sub, self._presence):
            if sub is not None:
                self.node.destroy_subscription(sub)

"""microphone_node: a sounddevice (PortAudio) input stream -> audio blocks in shared memory +
rt_fusion_msgs/AudioChunk descriptors.

The audio callback does no allocation and no rclpy work: it copies the block into a lock-free
queue (:class:`rt_fusion.core.audio.BlockQueue`) with its backend times and flags. A publisher
thread takes the blocks, stamps them (the block's ADC time mapped onto the host timeline; the
``currentTime - frames/rate - latency`` fallback where the backend reports no ADC time, said in
the message and in diagnostics), writes them into a shared-memory ring and publishes
``~/out/audio`` (AudioChunk: the ring descriptor, and the samples inline with
``inline_samples: true``, for recording). Overflows are counted.

A device that disappears (the stream ends, or no block arrives for ``stall_s``) is reported in
diagnostics and reopened with an exponential backoff.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from typing import Any, ClassVar

import numpy as np
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rt_fusion_msgs.msg import AudioChunk

from rt_fusion.core.audio import FLAG_OVERFLOW, FLAG_UNDERFLOW, BlockQueue, block_stamp_ns
from rt_fusion.core.clock import ClockMapper, ClockParams
from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.latency import DIAG_WINDOW, LatencyRecorder
from rt_fusion.core.params import param
from rt_fusion.core.shm import ShmRingWriter
from rt_fusion.ros import lifecycle, parameters, running
from rt_fusion.ros.conversions import descriptor_to_msg, ns_to_time
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics
from rt_fusion.ros.shm_transport import scoped_segment


class AudioDeviceError(RtFusionError):
    """The audio device cannot be opened."""


@dataclasses.dataclass(frozen=True)
class MicrophoneParams:
    """Parameters of microphone_node."""

    device: str = param(
        'input device: a name (or part of one) or an index; empty: default', default=''
    )
    sample_rate: int = param('sample rate', unit='Hz', default=48_000, low=8000, high=192_000)
    channels: int = param('channels', default=1, low=1, high=32)
    block_size: int = param('frames per block', default=1024, low=16, high=65536)
    dtype: str = param('sample format', default='int16', choices=('int16', 'float32'))
    latency: str = param('PortAudio latency hint', default='low', choices=('low', 'high'))
    frame_id: str = param('frame of the microphone', default='microphone')
    ring_slots: int = param('blocks in the shared-memory ring', default=64, low=2)
    segment: str = param(
        'shared-memory segment, scoped as rt_fusion_d<domain>_<name> (empty: '
        'rt_fusion_d<domain>_<namespace>_<node>)',
        default='',
    )
    queue_blocks: int = param('blocks between callback and publisher', default=256, low=4)
    inline_samples: bool = param(
        'also send the samples inside AudioChunk (int16 only)', default=False
    )
    start_delay_s: float = param(
        'wait before starting the stream (let subscribers connect)', unit='s', default=0.0, low=0.0
    )
    wait_subscribers_s: float = param(
        'before the stream starts, wait up to this long for a subscriber (0: do not wait)',
        unit='s',
        default=0.0,
        low=0.0,
    )
    stall_s: float = param(
        'no block for this long: report and reopen the device', unit='s', default=1.0, low=0.1
    )
    reconnect_initial_s: float = param('first reopen delay', unit='s', default=0.2, low=0.01)
    reconnect_max_s: float = param('longest reopen delay', unit='s', default=5.0, low=0.1)
    diagnostics_period_s: float = param('diagnostics period', unit='s', default=1.0, low=0.1)


class MicrophoneNode(lifecycle.DeviceNode):
    """A microphone into shared memory; see the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = ((MicrophoneParams, ''),)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('microphone', **kwargs)
        self.params: MicrophoneParams | None = None
        self.stream: Any = None
        self.ring: ShmRingWriter | None = None
        self.queue: BlockQueue | None = None
        self.clock = ClockMapper(ClockParams(window_s=30.0, bin_s=0.25, lock_span_s=2.0))
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.callback_ns = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.publish_ns = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.blocks = self.samples = self.overflows = self.underflows = 0
        self.fallback_stamps = 0
        self.reconnects = 0
        self.last_error = ''
        self._last_callback_ns = 0
        self._stream_ended = False

    # -- lifecycle -----------------------------------------------------------------------------

    PARAMS = (MicrophoneParams,)

    def configure(self) -> None:
        """Reads parameters, allocates queue and ring, opens the input stream."""
        import sounddevice  # noqa: PLC0415 - needs PortAudio at import

        self.sd = sounddevice
        p = self.params = parameters.declare_params(self, MicrophoneParams)
        # The audio callback needs the GIL as soon as PortAudio calls it; by default a running
        # Python thread keeps it for up to 5 ms. Hand it over every 0.2 ms instead.
        sys.setswitchinterval(2e-4)
        self.queue = BlockQueue(p.queue_blocks, p.block_size, p.channels, p.dtype)
        nbytes = p.block_size * p.channels * np.dtype(p.dtype).itemsize
        self.ring = ShmRingWriter.create(
            scoped_segment(self, p.segment), nbytes, p.ring_slots, frame_id=p.frame_id
        )
        self.pub = self.create_lifecycle_publisher(
            AudioChunk, '~/out/audio', QoSProfile(depth=64, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.diag = NodeDiagnostics(self, 'microphone')
        self.diag_timer = self.create_timer(p.diagnostics_period_s, self._publish_diagnostics)
        self._msg = AudioChunk()
        self._msg.header.frame_id = p.frame_id
        self._msg.sample_rate, self._msg.channels = p.sample_rate, p.channels
        self._open_stream()

    def _device(self) -> int | str | None:
        p = self.params
        assert p is not None
        if not p.device:
            return None
        return int(p.device) if p.device.isdigit() else p.device

    def _open_stream(self) -> None:
        p = self.params
        assert p is not None
        try:
            self.stream = self.sd.InputStream(
                device=self._device(),
                samplerate=p.sample_rate,
                channels=p.channels,
                dtype=p.dtype,
                blocksize=p.block_size,
                latency=p.latency,
                callback=self._callback,
                finished_callback=self._on_finished,
            )
        except (self.sd.PortAudioError, ValueError) as err:
            names = [d['name'] for d in self.sd.query_devices() if d['max_input_channels'] > 0]
            raise AudioDeviceError(
                f'cannot open audio input {p.device or "(default)"!r} at '
                f'{p.sample_rate} Hz, {p.channels} ch: {err}; input devices: '
                f'{names}'
            ) from err
        self._stream_ended = False

    def activate(self) -> None:
        """Starts the stream and the publisher thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._publish_loop, name='mic-pub', daemon=True)
        self._thread.start()

    def deactivate(self) -> None:
        """Stops the stream and the publisher thread."""
        self._stop.set()
        self._wake.set()
        if self.stream is not None:
            self._close_stream()
        if self._thread is not None:
            self._thread.join(timeout=3.0)
            self._thread = None

    def cleanup(self) -> None:
        """Releases the ring (unlinks it)."""
        if self.ring is not None:
            self.ring.close()
            self.ring = None

    def _close_stream(self) -> None:
        stream, self.stream = self.stream, None
        if stream is None:
            return
        # abort() returns once PortAudio's callback thread is gone; a device stuck inside the
        # driver could hold it, so it runs in a helper thread we do not wait on for ever.
        closer = threading.Thread(
            target=lambda: (stream.abort(ignore_errors=True), stream.close(ignore_errors=True)),
            daemon=True,
        )
        closer.start()
        closer.join(timeout=2.0)

    # -- audio thread (PortAudio) --------------------------------------------------------------

    def _callback(self, indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        # As little as possible here: one copy, one metadata store, a wake-up; the publisher
        # thread does the rest. The wake-up is the last statement: once it has run, the woken
        # thread asks for the GIL, and any further Python here would wait for it.
        t0 = time.perf_counter_ns()
        host_ns = time.time_ns()
        flags = (FLAG_OVERFLOW if status.input_overflow else 0) | (
            FLAG_UNDERFLOW if status.input_underflow else 0
        )
        self.queue.push(  # type: ignore[union-attr]  # allocated in configure, before the stream
            indata,
            time_info.inputBufferAdcTime,
            time_info.currentTime,
            host_ns,
            flags,
        )
        self._last_callback_ns = host_ns
        self.callback_ns.record(time.perf_counter_ns() - t0)
        self._wake.set()

    def _on_finished(self) -> None:
        self._stream_ended = True
        self._wake.set()

    # -- publisher thread ----------------------------------------------------------------------

    def _publish_loop(self) -> None:
        p = self.params
        assert p is not None
        if self._stop.wait(p.start_delay_s):
            return
        # A device holds what it captured before its stream starts (a FIFO, a driver buffer):
        # waiting for the first subscriber loses nothing of it (bounded).
        end = time.monotonic() + p.wait_subscribers_s
        while self.pub.get_subscription_count() == 0 and time.monotonic() < end:
            if self._stop.wait(0.05):  # paced: discovery
                return
        self._last_callback_ns = time.time_ns()
        self.stream.start()
        delay = p.reconnect_initial_s
        while not self._stop.is_set():
            self._wake.wait(0.05)
            self._wake.clear()
            self._drain()
            if self._stop.is_set():
                break
            silent = (time.time_ns() - self._last_callback_ns) / 1e9
            if self._stream_ended or silent > p.stall_s:
                why = (
                    'the input stream ended'
                    if self._stream_ended
                    else f'no audio block for {silent:.1f} s'
                )
                self.last_error = f'{why}: reopening the device'
                self.get_logger().error(self.last_error, throttle_duration_sec=5.0)
                self._close_stream()
                if self._stop.wait(delay):
                    break
                self.reconnects += 1
                try:
                    self._open_stream()
                    self.stream.start()
                    self._last_callback_ns = time.time_ns()
                    delay = p.reconnect_initial_s
                except (AudioDeviceError, self.sd.PortAudioError) as err:
                    self.last_error = str(err)
                    delay = min(2.0 * delay, p.reconnect_max_s)
                    self._last_callback_ns = time.time_ns()

    def _drain(self) -> None:
        q, ring, p = self.queue, self.ring, self.params
        assert q is not None
        assert ring is not None
        assert p is not None
        msg = self._msg
        while q.pending():
            i = q.peek()
            n, adc, cur, callback_ns, flags = q.meta[i]
            stamp, source = block_stamp_ns(
                self.clock,
                adc,
                cur,
                callback_ns,
                frames=n,
                rate_hz=p.sample_rate,
                input_latency_s=self._input_latency(),
            )
            self.overflows += bool(flags & FLAG_OVERFLOW)
            self.underflows += bool(flags & FLAG_UNDERFLOW)
            self.fallback_stamps += source == 'fallback'
            ws = ring.acquire((n, p.channels), q.data.dtype, 'pcm')
            np.copyto(ws.array, q.data[i, :n])
            desc = ring.commit(
                ws, stamp_ns=stamp, available_ns=time.time_ns(), hw_stamp_ns=round(adc * 1e9)
            )
            msg.header.stamp = ns_to_time(stamp)
            descriptor_to_msg(desc, msg.frame)
            msg.frames = n
            msg.first_sample_index = self.samples
            msg.stamp_source = source
            msg.overflows = self.overflows
            if p.inline_samples and p.dtype == 'int16':
                msg.samples = q.data[i, :n].reshape(-1).tolist()
            q.pop()
            self.pub.publish(msg)
            self.publish_ns.record(time.time_ns() - callback_ns)
            self.blocks += 1
            self.samples += n

    def _input_latency(self) -> float:
        stream = self.stream
        return float(stream.latency) if stream is not None else 0.0

    def _publish_diagnostics(self) -> None:
        q = self.queue
        lost = q.dropped if q is not None else 0
        if self.last_error and (
            self.stream is None
            or self._stream_ended
            or time.time_ns() - self._last_callback_ns > 500_000_000
        ):
            level, message = Level.ERROR, self.last_error
        elif lost or self.overflows:
            level, message = Level.WARN, 'audio lost (overflows or a full queue)'
        elif self.fallback_stamps:
            level, message = (
                Level.WARN,
                'the backend reports no ADC time: stamps are estimated (fallback)',
            )
        else:
            level, message = Level.OK, 'streaming'
        cb, pub = self.callback_ns.summary(), self.publish_ns.summary()
        values = {
            'blocks': self.blocks,
            'samples': self.samples,
            'overflows': self.overflows,
            'underflows': self.underflows,
            'queue_dropped': lost,
            'fallback_stamps': self.fallback_stamps,
            'reconnects': self.reconnects,
            'callback_p99_us': round(cb.p99_us, 1) if cb.count else '',
            'block_to_publish_p99_us': round(pub.p99_us, 1) if pub.count else '',
            'last_error': self.last_error,
        }
        self.diag.publish(level, message, values, self.params.device if self.params else '')


def main(args: list[str] | None = None) -> int:
    """Entry point of ``microphone_node``."""
    return running.run(MicrophoneNode, args)


if __name__ == '__main__':
    sys.exit(main())

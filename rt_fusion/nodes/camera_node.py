"""camera_node: V4L2 / GStreamer / video file -> frames in shared memory + ShmFrame descriptors.

Each frame is decoded straight into the next slot of the node's shared-memory ring
(``VideoCapture.read(image=slot)``: no extra copy) and its ``rt_fusion_msgs/ShmFrame`` descriptor
is published on ``~/out/image/shm``. The full ``sensor_msgs/Image`` goes to ``~/out/image`` only
while something subscribes to it (or with ``publish_image: true``), every ``image_decimation``-th
frame; ``~/out/camera_info`` comes from a calibration YAML in the standard camera_info format.

Stamps: V4L2 buffer timestamps (CLOCK_MONOTONIC at start of frame) and GStreamer buffer times are
mapped onto the host timeline by a ClockMapper; a file's container timestamps are laid on the
host timeline from its first frame (so paced or as fast as possible, frames stay 1/fps apart).
Sequence gaps (dropped frames) are counted from the stamp steps and reported in diagnostics.

A device that is missing or a pipeline that does not open fails configure with the reason, or,
with ``retry_s > 0``, is retried every ``retry_s`` while diagnostics say so.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from typing import Any, ClassVar

from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from sensor_msgs.msg import CameraInfo

from rt_fusion.core.camera import CameraError, CameraSource, load_camera_info
from rt_fusion.core.clock import ClockMapper, ClockParams
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.latency import DIAG_WINDOW, LatencyRecorder
from rt_fusion.core.params import param
from rt_fusion.ros import lifecycle, parameters, running, share
from rt_fusion.ros.conversions import ns_to_time
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics
from rt_fusion.ros.shm_transport import ShmPublisher, scoped_segment


@dataclasses.dataclass(frozen=True)
class CameraParams:
    """Parameters of camera_node."""

    source: str = param(
        'where frames come from', default='v4l2', choices=('v4l2', 'gstreamer', 'file')
    )
    device: str = param('V4L2 device path or index', default='/dev/video0')
    pipeline: str = param('GStreamer pipeline ending in appsink (source: gstreamer)', default='')
    file: str = param('video file (source: file)', default='')
    width: int = param('V4L2 width to ask for (0: device default)', unit='px', default=0, low=0)
    height: int = param('V4L2 height to ask for (0: device default)', unit='px', default=0, low=0)
    fps: float = param(
        'V4L2 frame rate to ask for (0: device default)',
        unit='Hz',
        default=0.0,
        low=0.0,
        high=1000.0,
    )
    pixel_format: str = param('V4L2 FOURCC to ask for (MJPG, YUYV; empty: default)', default='')
    frame_id: str = param('frame of the camera', default='camera')
    calibration_file: str = param(
        "camera_info YAML (relative: to the package's share or the repository; empty: no "
        'camera_info)',
        default='',
    )
    ring_slots: int = param('slots of the shared-memory ring', default=8, low=2, high=256)
    segment: str = param(
        'shared-memory segment name, scoped as rt_fusion_d<domain>_<name> (empty: '
        'rt_fusion_d<domain>_<namespace>_<node>)',
        default='',
    )
    transport: str = param(
        'shm: ring + descriptors; ros: full images only', default='shm', choices=('shm', 'ros')
    )
    pace: bool = param('files: deliver at the container timestamps', default=True)
    loop: bool = param('files: start again at the end', default=False)
    count: int = param('stop after this many frames (0: never)', default=0, low=0)
    publish_image: bool = param(
        'publish sensor_msgs/Image even without subscribers', default=False
    )
    image_decimation: int = param('publish every n-th full Image', default=1, low=1)
    retry_s: float = param(
        'retry a source that does not open every retry_s (0: fail start-up)',
        unit='s',
        default=0.0,
        low=0.0,
    )
    wait_subscribers: int = param(
        'how many subscribers (the fusion, a recorder, ...) to wait for (wait_subscribers_s)',
        default=1,
        low=1,
    )
    wait_subscribers_s: float = param(
        'before the first frame, wait up to this long for a subscriber that has acknowledged'
        ' the stream handshake (0: do not wait)',
        unit='s',
        default=0.0,
        low=0.0,
    )
    start_delay_s: float = param(
        'wait before the first frame (let subscribers connect)', unit='s', default=0.0, low=0.0
    )
    diagnostics_period_s: float = param('diagnostics period', unit='s', default=1.0, low=0.1)

    def check(self) -> None:
        """Cross-field rules."""
        if self.source == 'file' and not self.file:
            raise ParameterError('file', self.file, 'source file needs a video file')
        if self.source == 'gstreamer' and not self.pipeline:
            raise ParameterError('pipeline', self.pipeline, 'source gstreamer needs a pipeline')

    @property
    def target(self) -> str:
        """What the source opens."""
        return {'v4l2': self.device, 'gstreamer': self.pipeline, 'file': self.file}[self.source]


class CameraNode(lifecycle.DeviceNode):
    """A camera into shared memory; see the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = ((CameraParams, ''),)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('camera', **kwargs)
        self.params: CameraParams | None = None
        self.cam: CameraSource | None = None
        self.pub: ShmPublisher | None = None
        self.clock = ClockMapper(ClockParams(window_s=30.0, bin_s=0.5, lock_span_s=3.0))
        self.finished: Future = Future()  # of int (exit status)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.cost = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.frames = 0
        self.last_error = ''
        self._file_origin: tuple[int, int] | None = None

    PARAMS = (CameraParams,)

    def configure(self) -> None:
        """Reads parameters, opens the source (or schedules retries), creates the ring."""
        p = self.params = parameters.declare_params(self, CameraParams)
        self.info = None
        if p.calibration_file:
            try:
                self.info = load_camera_info(str(share.resolve_share(p.calibration_file)))
            except CameraError as err:
                raise ParameterError('calibration_file', p.calibration_file, str(err)) from err
        self.diag = NodeDiagnostics(self, 'camera')
        self.diag_timer = self.create_timer(p.diagnostics_period_s, self._publish_diagnostics)
        self.info_pub = self.create_lifecycle_publisher(
            CameraInfo, '~/out/camera_info', QoSProfile(depth=10)
        )
        try:
            self._open()
        except CameraError as err:
            if p.retry_s <= 0:
                raise
            self.last_error = str(err)
            self.get_logger().error(f'{err}; retrying every {p.retry_s} s')

    def _open(self) -> None:
        p = self.params
        assert p is not None
        self.cam = CameraSource(
            p.source,
            p.target,
            width=p.width,
            height=p.height,
            fps=p.fps,
            fourcc=p.pixel_format,
            pace=p.pace,
            loop=p.loop,
        )
        if self.pub is None:
            segment = scoped_segment(self, p.segment)
            h, w, c = self.cam.shape
            self.pub = ShmPublisher(
                self,
                '~/out/image',
                segment,
                h * w * c,
                p.ring_slots,
                frame_id=p.frame_id,
                transport=p.transport,
                full_decimation=p.image_decimation,
                full_always=p.publish_image,
                full_qos=QoSProfile(depth=2, reliability=ReliabilityPolicy.BEST_EFFORT),
            )
        self.last_error = ''

    def activate(self) -> None:
        """Starts the capture thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._capture_loop, name='camera', daemon=True)
        self._thread.start()

    def deactivate(self) -> None:
        """Stops the capture thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=3.0)
            self._thread = None

    def cleanup(self) -> None:
        """Releases the source and the ring (which unlinks it)."""
        if self.cam is not None:
            self.cam.close()
            self.cam = None
        if self.pub is not None:
            self.pub.close()
            self.pub = None

    def _stamp(self, hw_ns: int, host_ns: int) -> int:
        p = self.params
        assert p is not None
        if p.source == 'file':  # container time laid on the host timeline from frame 0
            if self._file_origin is None:
                self._file_origin = (hw_ns, host_ns)
            return self._file_origin[1] + hw_ns - self._file_origin[0]
        return self.clock.map(hw_ns, host_ns)

    def _capture_loop(self) -> None:
        p = self.params
        assert p is not None
        if p.start_delay_s:
            self._stop.wait(p.start_delay_s)
        waiting = p.wait_subscribers_s > 0
        while not self._stop.is_set():
            if self.cam is None or self.pub is None:
                try:
                    self._open()
                except CameraError as err:
                    self.last_error = str(err)
                    self._stop.wait(p.retry_s or 1.0)
                    continue
            assert self.cam is not None
            assert self.pub is not None
            if waiting:  # once, before the first frame: until someone listens (bounded)
                if not self.pub.wait_ready(p.wait_subscribers_s, self._stop, p.wait_subscribers):
                    self.get_logger().warning(
                        f'{self.pub.subscriber_count()} of wait_subscribers={p.wait_subscribers}'
                        f' ready after wait_subscribers_s={p.wait_subscribers_s}: streaming anyway'
                    )
                waiting = False
            ws = self.pub.acquire(self.cam.shape, 'uint8', 'bgr8')
            try:
                read = self.cam.read_into(ws.array)
            except CameraError as err:
                self._abort(ws)
                self.last_error = str(err)
                self.get_logger().error(str(err), throttle_duration_sec=5.0)
                self.cam.close()
                self.cam = None
                continue
            if read is None:  # end of the file
                self._abort(ws)
                break
            t_decoded = time.perf_counter_ns()
            stamp = self._stamp(read.hw_stamp_ns, read.host_ns)
            self.pub.commit(ws, stamp_ns=stamp, hw_stamp_ns=read.hw_stamp_ns)
            if self.info is not None:
                self._publish_info(stamp)
            self.cost.record(time.perf_counter_ns() - t_decoded)
            self.frames += 1
            if p.count and self.frames >= p.count:
                break
        if not self.finished.done():
            self.finished.set_result(self.frames)

    def _abort(self, ws: Any) -> None:
        assert self.pub is not None
        if self.pub.ring is not None:
            self.pub.ring.abort(ws)

    def _publish_info(self, stamp: int) -> None:
        info, msg = self.info, CameraInfo()
        assert info is not None
        assert self.params is not None
        msg.header.stamp = ns_to_time(stamp)
        msg.header.frame_id = self.params.frame_id
        msg.width, msg.height = info['width'], info['height']
        msg.distortion_model = info['distortion_model']
        msg.d, msg.k, msg.r, msg.p = info['d'], info['k'], info['r'], info['p']
        self.info_pub.publish(msg)

    def _publish_diagnostics(self) -> None:
        cost = self.cost.summary()
        skipped = self.cam.skipped if self.cam is not None else 0
        if self.last_error:
            level, message = Level.ERROR, self.last_error
        elif skipped:
            level, message = Level.WARN, f'{skipped} frames dropped by the source'
        else:
            level, message = Level.OK, 'streaming'
        values = {
            'frames': self.frames,
            'dropped_frames': skipped,
            'full_images_published': self.pub.full_published if self.pub else 0,
            'publish_cost_p50_us': round(cost.p50_us, 1) if cost.count else '',
            'publish_cost_p99_us': round(cost.p99_us, 1) if cost.count else '',
            'clock.locked': self.clock.locked,
        }
        self.diag.publish(level, message, values, self.params.target if self.params else '')


def main(args: list[str] | None = None) -> int:
    """Entry point of ``camera_node``."""
    return running.run(CameraNode, args)


if __name__ == '__main__':
    sys.exit(main())

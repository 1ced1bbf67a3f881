"""viewer_node: the graph live in Foxglove (or Lichtblick), over the Foxglove WebSocket protocol.

It serves a Foxglove WebSocket (foxglove-sdk; ``ws://<host>:<port>``, by default
``ws://127.0.0.1:8765``, what the Foxglove app's "Open connection" offers) with these channels,
built from the graph's topics (:mod:`rt_fusion.ros.viewer.scene`):

- ``/camera/out/image`` (``foxglove.CompressedImage``): the front camera, sampled from its
  shared-memory ring (never through the fusion; its descriptors taken only until the first
  frame names the ring), downscaled to ``camera_width`` and JPEG-encoded
  at most ``camera_rate_hz`` times a second (named as its ROS topic, as in a recording);
  ``/camera/out/image/annotations`` (``foxglove.ImageAnnotations``, same stamp): the fused
  tracks of that frame drawn on it, their boxes projected through the camera's ``CameraInfo``
  and its ``/tf_static`` mounting;
- ``/tracks`` (``foxglove.SceneUpdate``): the fused objects as boxes with id, class and a
  velocity arrow; ``/radar``: the radar returns; ``/plan``: the planned trajectory;
- ``/tf`` (``foxglove.FrameTransforms``): ``/tf`` and ``/tf_static``;
- ``/audio_events`` (``foxglove.Log``); ``/health`` (JSON): each node's diagnostics status.

It never slows the graph: its subscriptions are best effort (a slow viewer loses messages, the
publishers do not wait for it), the camera is sampled, not taken frame by frame, and each client
has a bounded queue (``client_backlog`` messages; the server drops beyond it). A port already
in use fails the start naming it; without foxglove-sdk the node fails its start saying so, and a
launch that lists it as optional runs on without it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
import time
from typing import Any, ClassVar

import cv2
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rt_fusion_msgs.msg import AudioEvent, ObjectArray, RadarObjects, Trajectory
from sensor_msgs.msg import CameraInfo
from tf2_msgs.msg import TFMessage

from rt_fusion.core import camera as camera_model
from rt_fusion.core import linux, rotation
from rt_fusion.core.errors import ParameterError, RtFusionError
from rt_fusion.core.params import param
from rt_fusion.core.shm import FrameView, ShmError, ShmRingReader
from rt_fusion.ros import graph, lifecycle, parameters, running
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics
from rt_fusion.ros.shm_transport import Received, ShmSubscription

CHANNELS = graph.VIEWER_CHANNELS
OUTBOX_LOGGER = 'foxglove.websocket.connected_client.send_lossy'  # foxglove-sdk 0.30's
BOX_KEYS = ('u0', 'v0', 'u1', 'v1')  # a box on the page's camera thumbnail [px]


class SlowClients(logging.Handler):
    """foxglove-sdk's word that a client's outbox filled: from then on the server drops that
    client's oldest messages (``client_backlog`` bound its memory). The SDK says so once per
    client and counts no drops itself, so the viewer counts the clients, by address."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.clients: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith('outbox for client') and text.endswith('full'):
            client = text.removeprefix('outbox for client').removesuffix('full')
            self.clients.append(client.strip())


class ViewerUnavailableError(RtFusionError):
    """foxglove-sdk is not installed: the viewer cannot run (the graph can)."""


@dataclasses.dataclass(frozen=True)
class ViewerParams:
    """Parameters of viewer_node."""

    host: str = param(
        'address the WebSocket listens on (0.0.0.0: every interface, for a laptop on the car)',
        default='127.0.0.1',
    )
    port: int = param('WebSocket port (0: any free one, printed)', default=8765, low=0, high=65535)
    camera_rate_hz: float = param(
        'camera images sent at most this often (0: no camera)', unit='Hz', default=5.0, low=0.0
    )
    camera_width: int = param('camera images downscaled to this width', unit='px', default=640,
                              low=32)  # fmt: skip
    jpeg_quality: int = param('JPEG quality of the camera images', default=70, low=10, high=100)
    page_port: int = param(
        'the operator page (HTTP) on this port (0: any free one, printed; -1: no page)',
        default=8080,
        low=-1,
        high=65535,
    )
    scene_rate_hz: float = param(
        'tracks, radar and plan converted for the clients at most this often per channel',
        unit='Hz',
        default=10.0,
        low=0.5,
    )
    nice: int = param(
        'CPU niceness of the viewer process (0..19): it yields the cores to the graph',
        default=19,
        low=0,
        high=19,
    )
    idle_priority: bool = param(
        'run under SCHED_IDLE: only on CPU time the graph leaves (a loaded machine shows the '
        'view late rather than the graph run late); false: nice alone',
        default=True,
    )
    client_backlog: int = param(
        'messages queued per client before the server drops (a client that does not read)',
        default=256,
        low=8,
    )


class ViewerNode(lifecycle.DeviceNode):
    """See the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = ((ViewerParams, ''),)
    PARAMS = (ViewerParams,)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('viewer', **kwargs)
        self.server: Any = None
        self.page: Any = None
        self.state: Any = None
        self.ego: tuple[float, float, float] | None = None  # odom -> base_link (x, y, yaw)
        self.channels: dict[str, Any] = {}
        self.sent: dict[str, int] = dict.fromkeys(CHANNELS, 0)
        self._due: dict[str, float] = dict.fromkeys(CHANNELS, 0.0)  # next conversion per channel
        self._next_camera = 0.0
        self.camera_errors = 0
        # Where the tracks fall in the camera: its intrinsics (K, D, width, height) and its
        # mounting per frame (parent, translation, rotation), from camera_info and /tf_static.
        self.intrinsics: tuple[Any, Any, int, int] | None = None
        self.mounts: dict[str, tuple[str, Any, Any]] = {}
        # Thumbnails waiting for their frame's tracks: stamp -> (jpeg, frame, width, height).
        self._pending: dict[int, tuple[bytes, str, int, int]] = {}
        self._page_camera_at = 0.0
        self.slow = SlowClients()
        self.camera: ShmSubscription | None = None  # (set at configure; cleanup may come first)
        self.ring: ShmRingReader | None = None
        self._ring_timer: Any = None

    def configure(self) -> None:
        """Starts the WebSocket server and its channels; subscribes to the graph."""
        p = self.p = parameters.declare_params(self, ViewerParams)
        try:
            import foxglove  # noqa: PLC0415
            from foxglove import channels as fc  # noqa: PLC0415

            from rt_fusion.ros.viewer import scene  # noqa: PLC0415
        except ImportError as err:
            raise ViewerUnavailableError(
                f'foxglove-sdk is not installed ({err}): the viewer is off, the graph runs '
                'without it (pip install foxglove-sdk, or make setup)'
            ) from err
        self.scene = scene
        outbox = logging.getLogger(OUTBOX_LOGGER)
        outbox.setLevel(logging.INFO)
        outbox.addHandler(self.slow)
        foxglove.set_log_level(logging.INFO)  # the SDK's outbox reports reach Python logging
        self.fox = foxglove.Context()
        try:
            self.server = foxglove.start_server(
                name='rt_fusion', host=p.host, port=p.port, context=self.fox,
                message_backlog_size=p.client_backlog,
            )  # fmt: skip
        except Exception as err:
            raise ParameterError('port', p.port, f'cannot listen on {p.host}: {err}') from err
        ctx = self.fox
        self.channels = {
            graph.VIEWER_CAMERA: fc.CompressedImageChannel(graph.VIEWER_CAMERA, context=ctx),
            graph.VIEWER_CAMERA_BOXES: fc.ImageAnnotationsChannel(
                graph.VIEWER_CAMERA_BOXES, context=ctx
            ),
            graph.VIEWER_TRACKS: fc.SceneUpdateChannel(graph.VIEWER_TRACKS, context=ctx),
            graph.VIEWER_RADAR: fc.SceneUpdateChannel(graph.VIEWER_RADAR, context=ctx),
            graph.VIEWER_PLAN: fc.SceneUpdateChannel(graph.VIEWER_PLAN, context=ctx),
            graph.VIEWER_TF: fc.FrameTransformsChannel(graph.VIEWER_TF, context=ctx),
            graph.VIEWER_AUDIO: fc.LogChannel(graph.VIEWER_AUDIO, context=ctx),
            graph.VIEWER_HEALTH: foxglove.Channel(
                graph.VIEWER_HEALTH,
                message_encoding='json',
                schema=foxglove.Schema(
                    name='rt_fusion.Health',
                    encoding='jsonschema',
                    data=json.dumps(scene.HEALTH_SCHEMA).encode(),
                ),
                context=ctx,
            ),
        }
        url = f'ws://{p.host}:{self.server.port}'
        self.get_logger().info(f'Foxglove WebSocket on {url} (channels: {", ".join(CHANNELS)})')
        print(f'VIEWER {url}', flush=True)
        from rt_fusion.ros.viewer import page  # noqa: PLC0415

        self.state = page.OperatorState()
        if p.page_port >= 0:
            try:
                self.page = page.OperatorPage(self.state, p.host, p.page_port)
            except OSError as err:
                raise ParameterError('page_port', p.page_port, f'cannot listen: {err}') from err
            self.get_logger().info(f'operator page on http://{p.host}:{self.page.port}/')
            print(f'PAGE http://{p.host}:{self.page.port}/', flush=True)
        st = self.state
        quiet = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        subs: list[tuple[Any, str, str, Any, QoSProfile, Any]] = [
            (ObjectArray, graph.OBJECTS_TOPIC, graph.VIEWER_TRACKS, scene.tracks, quiet,
             self._on_objects),
            (RadarObjects, graph.RADAR_TOPIC, graph.VIEWER_RADAR, scene.radar, quiet, None),
            (Trajectory, graph.TRAJECTORY_TOPIC, graph.VIEWER_PLAN, scene.plan, quiet,
             lambda m: st.set_plan(m, self.ego)),
            (TFMessage, graph.TF_TOPIC, graph.VIEWER_TF, scene.transforms, quiet, self._on_tf),
            (TFMessage, graph.TF_STATIC_TOPIC, graph.VIEWER_TF, scene.transforms, latched,
             self._on_tf_static),
            (AudioEvent, graph.AUDIO_EVENTS_TOPIC, graph.VIEWER_AUDIO, scene.audio_event, quiet,
             st.set_event),
            (DiagnosticArray, graph.DIAGNOSTICS_TOPIC, graph.VIEWER_HEALTH, scene.health, quiet,
             st.set_diagnostics),
        ]  # fmt: skip
        for kind, topic, channel, convert, qos, also in subs:
            self.create_subscription(kind, topic, self._forward(channel, convert, also), qos)
        self.create_subscription(CameraInfo, graph.CAMERA_INFO_TOPIC, self._on_camera_info, quiet)
        self._sampled = -1
        if p.camera_rate_hz > 0:  # its first frame names the ring; then sampled from the ring
            self.camera = ShmSubscription(self, graph.CAMERA_TOPIC, self._on_first, depth=1)
        self.diag = NodeDiagnostics(self, 'viewer')
        self.create_timer(1.0, self._publish_diagnostics)
        # Last: every thread there is now (DDS, the servers) yields to the graph's processes;
        # OpenCV resizes and encodes on this one thread, not in bursts over every core.
        cv2.setNumThreads(1)
        linux.nice_process(p.nice, idle=p.idle_priority)

    def _publish_diagnostics(self) -> None:
        """What went out on each channel, and the camera frames that could not be shown."""
        slow = self.slow.clients
        level = Level.WARN if self.camera_errors or slow else Level.OK
        values: dict[str, Any] = {f'sent {k}': v for k, v in self.sent.items()}
        values['camera_errors'] = self.camera_errors
        values['slow_clients'] = len(slow)  # their oldest messages dropped beyond the backlog
        if slow:
            values['slow_client_last'] = slow[-1]
        if self.page is not None:
            values['page'] = f'http://{self.p.host}:{self.page.port}/'
        port = self.server.port if self.server is not None else ''
        said = f'serving ws://{self.p.host}:{port}'
        if slow:
            said += f'; {len(slow)} client(s) fell behind: their oldest messages dropped'
        self.diag.publish(level, said, values)

    def _forward(self, channel: str, convert: Any, also: Any = None) -> Any:
        out = self.channels[channel]
        paced = channel in (graph.VIEWER_TRACKS, graph.VIEWER_RADAR, graph.VIEWER_PLAN)
        period = 1.0 / self.p.scene_rate_hz

        def callback(msg: Any) -> None:
            # Converted only while a client (or a recording) takes it, the scene at most
            # scene_rate_hz (the fusion's 30 Hz in Python would cost the graph a core's share).
            now = time.monotonic()
            if out.has_sinks() and (not paced or now >= self._due[channel]):
                self._due[channel] = now + period
                out.log(convert(msg))
                self.sent[channel] += 1
            if also is not None:  # the operator page's state
                also(msg)

        return callback

    def _on_tf(self, msg: Any) -> None:
        """The ego pose (odom -> base_link), for the page's plan drawn in base_link."""
        for t in msg.transforms:
            if t.child_frame_id.endswith('base_link') and t.header.frame_id.endswith('odom'):
                r = t.transform.rotation
                yaw = math.atan2(
                    2.0 * (r.w * r.z + r.x * r.y), 1.0 - 2.0 * (r.y * r.y + r.z * r.z)
                )
                self.ego = (t.transform.translation.x, t.transform.translation.y, yaw)

    def _on_tf_static(self, msg: Any) -> None:
        """Each sensor's mounting (the camera's places the tracks on its image)."""
        for t in msg.transforms:
            tr, r = t.transform.translation, t.transform.rotation
            q = rotation.normalize((r.w, r.x, r.y, r.z))
            self.mounts[t.child_frame_id] = (
                t.header.frame_id,
                (tr.x, tr.y, tr.z),
                rotation.matrix(q),
            )

    def _on_camera_info(self, msg: Any) -> None:
        """The camera's intrinsics (the newest)."""
        if msg.width and msg.k[0] > 0:
            self.intrinsics = (list(msg.k), list(msg.d), int(msg.width), int(msg.height))

    def _on_objects(self, msg: Any) -> None:
        """The fused objects: the page's tracks, and the boxes on the thumbnail of their frame
        (taken by :meth:`_on_frame`, waiting for them by stamp)."""
        if self.state is not None:
            self.state.set_tracks(msg)
        stamp = int(msg.header.stamp.sec) * 10**9 + int(msg.header.stamp.nanosec)
        waiting = self._pending.pop(stamp, None)
        mount = self.mounts.get(waiting[1]) if waiting is not None else None
        if waiting is None or mount is None or self.intrinsics is None:
            return
        if mount[0] != msg.header.frame_id:  # the tracks' frame must be the camera's parent
            return
        jpeg, _frame, width, height = waiting
        k, d, full_w, full_h = self.intrinsics
        rects, shown = camera_model.image_boxes(
            self.scene.object_boxes(msg), mount[1:], k, d, (full_w, full_h)
        )
        rects *= (width / full_w, height / full_h, width / full_w, height / full_h)
        out = self.channels[graph.VIEWER_CAMERA_BOXES]
        if out.has_sinks():
            out.log(self.scene.camera_boxes(msg, rects, shown, stamp))
            self.sent[graph.VIEWER_CAMERA_BOXES] += 1
        if self.state is not None:
            boxes = [
                {'id': int(o.id), 'class': int(o.object_class),
                 **{k: round(float(v), 1) for k, v in zip(BOX_KEYS, r, strict=True)}}
                for o, r, show in zip(msg.objects, rects, shown, strict=True)
                if show
            ]  # fmt: skip
            self.state.set_camera(stamp, jpeg, (width, height), boxes)
            self._page_camera_at = time.monotonic()

    def _on_first(self, frame: Received, path: str) -> None:
        """The camera's first frame: its ring is sampled from now on (:meth:`_sample`), and the
        descriptors are no longer taken (the camera's publisher then sends them to the fusion
        alone, and this node wakes at its own rate, not the camera's). A camera on another
        host (full images, no ring) stays on the subscription."""
        if path == 'ros' or not frame.desc.segment or self._ring_timer is not None:
            self._on_frame(frame, path)
            return
        try:
            self.ring = ShmRingReader.attach(frame.desc.segment)
        except ShmError as err:
            self.get_logger().warning(f'camera ring not sampled ({err}): frame by frame')
            self._on_frame(frame, path)
            return
        self._ring_timer = self.create_timer(1.0 / self.p.camera_rate_hz, self._sample)

    def _sample(self) -> None:
        """The ring's newest frame, at ``camera_rate_hz``."""
        if self.camera is not None:  # not in its own callback: the subscription goes here
            self.camera.destroy()
            self.camera = None
        ring = self.ring
        if ring is None:
            return
        if ring.replaced():  # the camera restarted: its new ring of the same name
            try:
                self.ring = ring = ShmRingReader.attach(ring.name)
                self._sampled = -1
            except ShmError:
                return  # not back yet
        newest = ring.commits - 1
        if newest < 0 or newest == self._sampled:
            return
        self._sampled = newest
        got = ring.read_sequence(newest)
        if isinstance(got, FrameView):
            self._on_frame(got, 'ring')

    def _on_frame(self, frame: Received, _path: str) -> None:
        """A camera frame: sampled at ``camera_rate_hz``, downscaled, JPEG, on its channel."""
        now = time.monotonic()
        if now < self._next_camera:
            return
        out = self.channels[graph.VIEWER_CAMERA]
        if self.page is None and not out.has_sinks():
            return  # nobody to show it to: not encoded
        p = self.p
        self._next_camera = now + 1.0 / p.camera_rate_hz
        desc = frame.desc
        try:
            data, scale = self.scene.camera_jpeg(
                frame.array, desc.encoding, p.camera_width, p.jpeg_quality
            )
        except Exception as err:  # noqa: BLE001 - an encoding OpenCV cannot take
            self.camera_errors += 1
            self.get_logger().warning(f'camera frame not shown: {err}', throttle_duration_sec=5.0)
            return
        if not frame.valid():  # overwritten while it was encoded: not shown
            return
        if out.has_sinks():
            out.log(self.scene.camera_image(data, desc.stamp_ns))
            self.sent[graph.VIEWER_CAMERA] += 1
        h, w = frame.array.shape[:2]
        width, height = round(w * scale), round(h * scale)  # as camera_jpeg resized it
        # Held for its frame's tracks (:meth:`_on_objects`); the page shows it without them
        # when they do not come (no fusion, no calibration yet) rather than freeze.
        self._pending[desc.stamp_ns] = (data, desc.frame_id, width, height)
        while len(self._pending) > 4:
            self._pending.pop(next(iter(self._pending)))
        if self.state is not None and now - self._page_camera_at > 1.0:
            self.state.set_camera(desc.stamp_ns, data, (width, height), [])
            self._page_camera_at = now

    def cleanup(self) -> None:
        """Stops the server and closes the channels."""
        if self._ring_timer is not None:
            self.destroy_timer(self._ring_timer)
            self._ring_timer = None
        if self.ring is not None:
            self.ring.close()
            self.ring = None
        if self.camera is not None:
            self.camera.destroy()
            self.camera = None
        for channel in self.channels.values():
            channel.close()
        self.channels = {}
        if self.server is not None:
            self.server.stop()
            self.server = None
        logging.getLogger(OUTBOX_LOGGER).removeHandler(self.slow)
        if self.page is not None:
            self.page.close()
            self.page = None


def main(args: list[str] | None = None) -> int:
    """Entry point of ``viewer_node``."""
    return running.run(ViewerNode, args)


if __name__ == '__main__':
    sys.exit(main())

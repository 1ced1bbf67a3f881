"""fusion_node: camera frames through shared memory, IMU and radar aligned to them, the network,
fused objects and ego odometry out.

Inputs: ``~/in/camera`` (a ShmPublisher stream: ``~/in/camera/shm`` descriptors, frames read in
place from the ring; ``camera_fast_path`` takes them from the ring's futex instead of the rclpy
callback), ``~/in/imu`` (sensor_msgs/Imu), ``~/in/radar`` (rt_fusion_msgs/RadarObjects) and
``~/in/speed`` (std_msgs/Float64, the vehicle speed from its CAN bus; else
``fusion.ego_speed_mps``) and ``~/in/audio`` (rt_fusion_msgs/AudioChunk: the hearing model,
``hearing_model``, runs on it every ``hearing.hop_s`` in a thread of its own and publishes
``~/out/audio_events``; :mod:`rt_fusion.ros.hearing_input`).

Per camera frame (:class:`rt_fusion.core.sync.Aligner`: it waits at most ``sync.max_wait_s`` for
the modalities in ``sync.wait_for``, then goes on without them and says which were missing) the
network runs on the frame (``backend``: onnxruntime, torch or tensorrt; ``none`` skips it) and
:class:`rt_fusion.core.fusion.FusionEngine` builds the objects. Outputs: ``~/out/objects``
(rt_fusion_msgs/ObjectArray in ``base_link``, stamped with the frame's time;
``inputs_complete_ns`` is when the aligner released the frame and ``published_ns`` when the
list went out: the difference is this node's latency) and ``~/out/odometry`` (nav_msgs/Odometry,
dead-reckoned ``odom`` → ``base_link``). A torn frame (the ring overwrote it while the network
read it) is counted and skipped; missing modalities degrade the output, never stall it: with
no camera frame for ``sync.camera_timeout_s`` each radar scan is fused on its own (radar and IMU
only, ``frames_without_camera`` in the diagnostics) until the camera is back.
``/diagnostics``: frames, missing modalities, torn frames, latency P50/P99.

All the work happens in one worker thread (the executor only queues inputs), which runs with the
``rt.*`` real-time set-up.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import math
import re
import sys
import threading
import time
import traceback
from typing import Any, ClassVar

from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rt_fusion_msgs.msg import AudioChunk, Lineage, Object, ObjectArray, RadarObjects
from sensor_msgs.msg import Imu
from std_msgs.msg import Float64, UInt64

from rt_fusion.core import realtime
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.fusion import FusedFrame, FusionEngine, FusionParams, RadarObjectIn
from rt_fusion.core.latency import DIAG_WINDOW, LatencyRecorder
from rt_fusion.core.params import param
from rt_fusion.core.perception import tracker
from rt_fusion.core.perception.decoders import CameraDetection, CameraGeometry
from rt_fusion.core.perception.hearing import HearingParams
from rt_fusion.core.perception.tracker import TrackerParams
from rt_fusion.core.perception.zoom import decode_views
from rt_fusion.core.sync import AlignedFrame, Aligner, SyncParams
from rt_fusion.inference.hearing import load_hearing_model
from rt_fusion.inference.runner import DEFAULT_INPUT_HW, FrameRunner
from rt_fusion.inference.spec import ModelError
from rt_fusion.ros import node_utils
from rt_fusion.ros.conversions import ns_to_time, time_to_ns
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics
from rt_fusion.ros.hearing_input import HearingInput
from rt_fusion.ros.shm_transport import ShmSubscription


@dataclasses.dataclass(frozen=True)
class FusionNodeParams:
    """Parameters of fusion_node (sync.*, fusion.*, rt.* come separately)."""

    model: str = param(
        "model spec YAML (relative: to the package's share or the repository)",
        default='models/rtf_centernet.yaml',
    )
    backend: str = param(
        'inference backend',
        default='onnxruntime',
        choices=('onnxruntime', 'torch', 'tensorrt', 'none'),
    )
    device: str = param('cpu, cuda or cuda:N', default='cpu')
    threads: int = param(
        'CPU threads of the backend (0: its default; always 1 on the CPU with rt.rt_priority > 0)',
        default=0,
        low=0,
    )
    device_decode: bool = param(
        'on CUDA (torch backend), reduce a centernet head to its peaks inside the CUDA graph: '
        'a few KB to the host instead of the whole head (false: the whole head, decoded by numpy)',
        default=True,
    )
    zoom: float = param(
        'also run the network on the centre of each frame zoomed this many times over the full '
        'view (far objects at more pixels; 1: off). Costs a second inference per frame; a frame '
        'too small for it (the crop would be upsampled) runs without, and the log says so',
        default=1.0,
        low=1.0,
        high=4.0,
    )
    mirror: bool = param(
        'also run the network on each view mirrored left to right and average the two depths '
        'of each object (rt_fusion.core.perception.mirror; a second inference per view; off: '
        'no gain measured on the scenarios)',
        default=False,
    )
    infer_period_s: float = param(
        'run the network at most this often, by frame stamps (0: every frame); the frames '
        'between are fused without camera detections (a detector slower than the camera then '
        'degrades the camera rate instead of the latency)',
        unit='s',
        default=0.0,
        low=0.0,
    )
    infer_when_behind: bool = param(
        'false: a frame with newer frames already released behind it is fused without the '
        "network (the node is behind: the backlog goes through at the fusion's own cost, the "
        'newest frame gets the network). A detector too slow for the machine then lowers the '
        'detection rate instead of queueing frames until the queue bound drops them; counted '
        '(inference_skipped_behind)',
        default=False,
    )
    camera_transport: str = param(
        'auto: the shared-memory ring (zero copy) where it is reachable, else the full '
        'sensor_msgs/Image by itself (a camera on another computer: detected, logged); shm: the '
        'ring only; ros: the full message only (the conventional path, for comparison)',
        default='auto',
        choices=('auto', 'shm', 'ros'),
    )
    camera_fast_path: bool = param(
        'take frames from the ring futex, not the rclpy callback', default=True
    )
    base_frame: str = param('frame of the objects', default='base_link')
    odom_frame: str = param('frame of the dead-reckoned odometry', default='odom')
    poll_period_s: float = param(
        'how often waiting frames are re-checked', unit='s', default=0.005, low=0.0005, high=0.1
    )
    diagnostics_period_s: float = param('diagnostics period', unit='s', default=1.0, low=0.1)
    radar_input: bool = param(
        'fuse the radar (false: its scans are received and ignored, the camera-only ablation; '
        'leave radar out of sync.wait_for then)',
        default=True,
    )
    hearing_model: str = param(
        "hearing model spec YAML for ~/in/audio ('': no hearing; relative: as model)",
        default='models/rtf_hearing.yaml',
    )
    cameras: tuple[str, ...] = param(
        'extra cameras beside ~/in/camera (the anchor of the alignment): the frames of each on '
        '~/in/camera_<name> (a ShmPublisher stream), mounted as fusion.extra_camera_* say (in '
        'this order); each anchor frame takes the frame of the same time (camera_match_s) of '
        'every extra camera, waiting at most sync.max_wait_s for it, and runs the network on it',
        default=(),
    )
    camera_match_s: float = param(
        "an extra camera's frame belongs to the anchor frame within this of its stamp (the "
        'cameras of a rig are triggered together)',
        unit='s',
        default=0.01,
        low=0.0,
        high=0.1,
    )
    ack_topic: str = param(
        'lock-step replays: after each input is taken in (a frame: once its objects are out, '
        "or it was dropped) publish std_msgs/UInt64 here, for replay_node's ack_topic ('': off)",
        default='',
    )


#: [s] the worker pre-faults its memory after its first frame, or this long without one.
PREFAULT_IDLE_S = 1.0
#: Frames of an extra camera kept waiting for their anchor frame, as a multiple of the anchor
#: frames the aligner queues (sync.camera_queue): those and the ones it released to the worker
#: at once. A frame older than the anchor frame being fused is dropped as unmatched first.
EXTRA_QUEUE_FACTOR = 3


@dataclasses.dataclass
class ExtraCamera:
    """An extra camera of the rig: its subscription, waiting frames and where its frames went
    (each counted once: used, skipped by infer_period_s, torn, late, unmatched, or still
    queued)."""

    name: str
    geometry: CameraGeometry
    sub: ShmSubscription | None = None
    queue: collections.deque[Any] = dataclasses.field(default_factory=collections.deque)
    used: int = 0
    skipped: int = 0
    torn: int = 0
    failed: int = 0  # the network failed on it
    unmatched: int = 0  # never matched an anchor frame (its anchor dropped, beyond the queue)
    late: int = 0  # came after its anchor frame had given up on it (sync.max_wait_s)
    missing: int = 0  # anchor frames that found no frame of this camera in time
    #: stamps of the latest anchor frames that went on without this camera
    gave_up: collections.deque[int] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=16)
    )

    def drop(self, stamp_ns: int, tol_ns: int) -> None:
        """A frame that will not be used: late when its anchor frame gave up on it."""
        if any(abs(stamp_ns - g) <= tol_ns for g in self.gave_up):
            self.late += 1
        else:
            self.unmatched += 1

    def ledger(self) -> dict[str, int]:
        """Its frames, stage by stage (``lost``: delivered and neither used nor explained)."""
        delivered = self.sub.stats.delivered if self.sub is not None else 0
        done = self.used + self.skipped + self.torn + self.failed + self.unmatched + self.late
        return {
            'delivered': delivered,
            'used': self.used,
            'skipped': self.skipped,
            'torn': self.torn,
            'failed': self.failed,
            'unmatched': self.unmatched,
            'late': self.late,
            'queued': len(self.queue),
            'in_flight': max(0, delivered - done - len(self.queue)),
            'overrun': self.sub.stats.overruns if self.sub is not None else 0,
            'missing': self.missing,
        }


class FusionNode(node_utils.DeviceNode):
    """See the module docstring."""

    PARAM_GROUPS: ClassVar[node_utils.ParamGroups] = (
        (FusionNodeParams, ''),
        (SyncParams, 'sync.'),
        (FusionParams, 'fusion.'),
        (TrackerParams, 'tracker.'),
        (realtime.RealtimeParams, 'rt.'),
        (HearingParams, 'hearing.'),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('fusion', **kwargs)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self.latency = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.infer_ns = LatencyRecorder(DIAG_WINDOW, wrap=True)
        # Where a frame's time goes after inference: fusion, message building, the two publishes.
        self.stage_ns = {
            name: LatencyRecorder(DIAG_WINDOW, wrap=True)
            for name in ('decode', 'cameras', 'fuse', 'messages', 'odometry', 'objects')
        }
        self.extra: list[ExtraCamera] = []
        self.frames = self.torn = self.inference_errors = self.infer_skipped = 0
        self.infer_skipped_behind = 0  # of infer_skipped: newer frames were waiting
        self.camera_less = 0  # frames fused without their camera frame (gone, or torn)
        self._last_infer_ns = -(2**62)
        self.missing: dict[str, int] = {}
        self.worker_errors = 0
        # Inputs refused at the boundary, per stream and reason (never fused).
        self.rejected: dict[str, int] = {}
        self._last_stamp: dict[str, int] = {}
        self._odom = Odometry()
        self.camera: ShmSubscription | None = None
        self.hearing: HearingInput | None = None
        self.runner: FrameRunner | None = None
        self._zoom_note = ''  # the last frame size's reason for no zoomed view
        self.rt_report: realtime.RealtimeReport | None = None
        self.rt_params: realtime.RealtimeParams | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    PARAMS = (
        FusionNodeParams,
        SyncParams,
        FusionParams,
        TrackerParams,
        realtime.RealtimeParams,
        HearingParams,
    )

    @classmethod
    def preload(cls) -> None:
        """Also ONNX Runtime, which the backend imports when chosen (0.1 s of a start)."""
        super().preload()
        with contextlib.suppress(ImportError):
            import onnxruntime  # noqa: F401, PLC0415

            import rt_fusion.inference.onnxruntime_backend  # noqa: F401, PLC0415

    def configure(self) -> None:
        """Parameters, model, subscriptions, publishers; the real-time set-up last."""
        p = self.params = node_utils.declare_params(self, FusionNodeParams)
        self.sync_params = node_utils.declare_params(self, SyncParams, 'sync.')
        fusion_params = node_utils.declare_params(self, FusionParams, 'fusion.')
        tracker_params = node_utils.declare_params(self, TrackerParams, 'tracker.')
        rt = node_utils.declare_params(self, realtime.RealtimeParams, 'rt.')
        hearing = node_utils.declare_params(self, HearingParams, 'hearing.')
        if len(self.sync_params.radars) != 1:
            raise ParameterError(
                'sync.radars',
                self.sync_params.radars,
                'fusion_node takes one radar stream (~/in/radar)',
            )
        self.radar_name = self.sync_params.radars[0]
        self.aligner = Aligner(self.sync_params)
        tracker.defer_compiled()  # numba is loaded once the node is active (see activate)
        self.engine = FusionEngine(fusion_params, tracker=tracker_params)
        for name in p.cameras:
            if not re.fullmatch(r'[a-z][a-z0-9_]*', name) or p.cameras.count(name) > 1:
                raise ParameterError(
                    'cameras', p.cameras, f'{name!r}: distinct names of [a-z][a-z0-9_]*'
                )
        if len(p.cameras) != len(fusion_params.extra_camera_x):
            raise ParameterError(
                'cameras',
                p.cameras,
                f'{len(p.cameras)} extra cameras, but fusion.extra_camera_x has '
                f'{len(fusion_params.extra_camera_x)} mountings',
            )
        self.extra = [
            ExtraCamera(name, geo)
            for name, geo in zip(p.cameras, fusion_params.extra_geometries(), strict=True)
        ]
        self.runner = None
        self.input_hw = DEFAULT_INPUT_HW
        if p.backend != 'none':
            spec_path = node_utils.resolve_share(p.model)
            threads = p.threads
            if rt.rt_priority > 0 and p.device == 'cpu' and threads != 1:
                # The worker is SCHED_FIFO; the backend's pool threads are not (ONNX Runtime
                # pins them to cores), and the caller busy-waits for them at the end of each
                # parallel section. A pool thread on the worker's core then runs only when the
                # kernel's RT throttling stops the spinning worker: chaos runs on 2 cores saw
                # 0.85-0.99 s inferences after a restart (30 ms otherwise). One thread: the
                # worker runs the network itself.
                self.get_logger().warning(
                    f'threads {threads} -> 1: a SCHED_FIFO worker (rt.rt_priority '
                    f'{rt.rt_priority}) must not wait on CPU inference threads of normal priority'
                )
                threads = 1
            try:
                self.runner = FrameRunner(
                    spec_path,
                    p.backend,
                    p.device,
                    threads,
                    device_decode=p.device_decode,
                    warm=False,
                    zoom=p.zoom,
                    mirror=p.mirror,
                )
                if self.runner.cuda:
                    self.runner.warm_up()
                else:  # its 0.2 s overlap the rest of configure (done at its end)
                    self.runner.start_warm_up()
            except ModelError as err:
                raise ParameterError('model', str(spec_path), str(err)) from err
            self.input_hw = self.runner.input_hw
            self.engine.set_decoder(self.runner.spec.decoder)
        # Lock-step replays (ack_topic set) must lose nothing downstream even when the planner
        # lags the fusion by many frames: a deep history then; live, the newest matters.
        reliable = QoSProfile(
            depth=1000 if p.ack_topic else 10, reliability=ReliabilityPolicy.RELIABLE
        )
        self.obj_pub = self.create_lifecycle_publisher(ObjectArray, '~/out/objects', reliable)
        self.odom_pub = self.create_lifecycle_publisher(
            Odometry, '~/out/odometry', reliable if p.ack_topic else qos_profile_sensor_data
        )
        self.diag = NodeDiagnostics(self, 'fusion')
        self.acks = 0
        self.ack_pub = (
            self.create_publisher(
                UInt64, p.ack_topic, QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
            )
            if p.ack_topic
            else None
        )
        self.create_subscription(
            Imu,
            '~/in/imu',
            self._on_imu,
            QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE),
        )
        self.create_subscription(
            RadarObjects, '~/in/radar', self._on_radar, qos_profile_sensor_data
        )
        # Lock-step replays must lose no speed message: a lost one is never acknowledged and the
        # replay stalls for its ack timeout (and the outputs depend on the timing).
        self.create_subscription(
            Float64,
            '~/in/speed',
            self._on_speed,
            QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
            if p.ack_topic
            else qos_profile_sensor_data,
        )
        if p.hearing_model:
            spec_path = node_utils.resolve_share(p.hearing_model)
            try:
                model = load_hearing_model(spec_path)
            except ModelError as err:
                raise ParameterError('hearing_model', str(spec_path), str(err)) from err
            self.hearing = HearingInput(
                self,
                model,
                hearing,
                ack=self._ack,
                topic='~/in/audio',
                events_topic='~/out/audio_events',
            )
        elif p.ack_topic:
            # No hearing: the blocks are taken in unused and acknowledged (a lock-step replay of
            # a bag with a microphone waits for every message it sends).
            self.create_subscription(
                AudioChunk,
                '~/in/audio',
                lambda _msg: self._ack(),
                QoSProfile(depth=64, reliability=ReliabilityPolicy.RELIABLE),
            )
        self.diag_timer = self.create_timer(p.diagnostics_period_s, self._publish_diagnostics)
        self.rt_params = rt
        with node_utils.param_prefix('rt.'):
            # The heap and stack are touched by the worker, the thread that runs the loop.
            self.rt_report = realtime.apply(rt, prefault_here=False)
        for warning in self.rt_report.warnings:
            self.get_logger().warning(f'real time: {warning}')
        # The camera last, once the slow parts (the models, the real-time set-up) are done: a
        # camera waiting for its subscribers (wait_subscribers_s) starts streaming only when this
        # node is about to spin, so no descriptor waits unread in the keep-last history (depth:
        # the ring's slots) while a model loads.
        self.camera = ShmSubscription(
            self,
            '~/in/camera',
            self._on_frame,
            transport=p.camera_transport,
            fast_path=p.camera_fast_path,
        )
        for cam in self.extra:
            cam.sub = ShmSubscription(
                self,
                f'~/in/camera_{cam.name}',
                functools.partial(self._on_extra_frame, cam),
                transport=p.camera_transport,
                fast_path=p.camera_fast_path,
            )
        if self.runner is not None:
            try:
                self.runner.wait_warm()
            except ModelError as err:
                raise ParameterError('model', str(p.model), str(err)) from err

    def activate(self) -> None:
        """Starts the worker (and the camera fast path)."""
        self._stop.clear()
        self._worker = threading.Thread(target=self._work, name='fusion', daemon=True)
        self._worker.start()
        # The tracker's numba kernels load (or compile, after an install) on a thread of their
        # own, at SCHED_OTHER, once the node is up: it is active ~0.4 s sooner, tracking on the
        # numpy kernels (the same numbers) until the compiled ones are warm.
        tracker.warm_up_in_background(
            lambda work: realtime.start_in_background('numba-kernels', work)
        )

    def deactivate(self) -> None:
        """Stops the worker."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._worker is not None:
            # Until it has left the frame it is on: cleanup frees the model and unmaps the ring
            # it reads (a 2 s limit freed the model under a running inference on a loaded
            # machine: heap corruption at exit). It stops before the next frame.
            self._worker.join()
            self._worker = None

    def cleanup(self) -> None:
        """Releases the camera subscription (its fast-path thread, its ring mappings) and the
        model (idempotent): configure builds them anew."""
        if self.camera is not None:
            self.camera.destroy()
            self.camera = None
        for cam in self.extra:
            while cam.queue:
                cam.queue.popleft()[1].release()
            if cam.sub is not None:
                cam.sub.destroy()
                cam.sub = None
        if self.runner is not None:
            self.runner.release()
            self.runner = None
        if self.hearing is not None:
            self.hearing.destroy()
            self.hearing = None

    def destroy_node(self) -> None:
        """Stops the worker and the camera's fast-path thread, then destroys the node."""
        self.deactivate()
        self.cleanup()
        super().destroy_node()

    # -- inputs (executor / fast-path threads): queue and wake the worker -----------------------

    def _ack(self) -> None:
        if self.ack_pub is not None:
            self.acks += 1
            self.ack_pub.publish(UInt64(data=self.acks))

    def _on_frame(self, frame: Any, path: str) -> None:
        del path
        with self._cond:
            self.aligner.push_camera(frame.desc.stamp_ns, frame, time.time_ns())
            self._cond.notify()

    def _on_extra_frame(self, cam: ExtraCamera, frame: Any, path: str) -> None:
        del path
        with self._cond:
            cam.queue.append((frame.desc.stamp_ns, frame))
            if len(cam.queue) > EXTRA_QUEUE_FACTOR * self.sync_params.camera_queue:
                # its anchor frame never came, or the aligner dropped it: not used
                stamp, old = cam.queue.popleft()
                old.release()
                cam.drop(stamp, round(self.params.camera_match_s * 1e9))
            self._cond.notify()
        self._ack()  # taken in (a lock-step replay sends the rig's front frame after it)

    def _extra_frames(self, stamp_ns: int) -> list[tuple[ExtraCamera, Any]]:
        """The frame of each extra camera that belongs to the anchor frame at ``stamp_ns``,
        waiting at most ``sync.max_wait_s`` for those not there yet (missing: counted, and the
        frame fused without them). Older frames are dropped: late when their anchor frame
        went on without them, else unmatched."""
        tol = round(self.params.camera_match_s * 1e9)
        deadline = time.monotonic() + self.sync_params.max_wait_s
        found: dict[str, Any] = {}
        with self._cond:
            while True:
                for cam in self.extra:
                    if cam.name in found:
                        continue
                    q = cam.queue
                    while q and q[0][0] < stamp_ns - tol:
                        stamp, old = q.popleft()
                        old.release()
                        cam.drop(stamp, tol)
                    if q and q[0][0] <= stamp_ns + tol:
                        found[cam.name] = q.popleft()[1]
                left = deadline - time.monotonic()
                if len(found) == len(self.extra) or left <= 0 or self._stop.is_set():
                    break
                self._cond.wait(min(left, self.params.poll_period_s))
        out = []
        for cam in self.extra:
            if cam.name in found:
                out.append((cam, found[cam.name]))
            else:
                cam.missing += 1
                cam.gave_up.append(stamp_ns)
        return out

    def _reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        self._ack()

    def _in_order(self, stream: str, stamp_ns: int) -> bool:
        """False (and counted) when a stream's stamp goes back."""
        if stamp_ns < self._last_stamp.get(stream, -1):
            self._reject(f'{stream}_out_of_order')
            return False
        self._last_stamp[stream] = stamp_ns
        return True

    def _on_imu(self, msg: Imu) -> None:
        g, a = msg.angular_velocity, msg.linear_acceleration
        if not all(math.isfinite(v) for v in (g.x, g.y, g.z, a.x, a.y, a.z)):
            self._reject('imu_non_finite')  # one NaN would poison the pose for good
            return
        if not self._in_order('imu', time_to_ns(msg.header.stamp)):
            return
        with self._cond:
            self.aligner.push_imu(
                time_to_ns(msg.header.stamp), (g.x, g.y, g.z), (a.x, a.y, a.z), time.time_ns()
            )
            self._cond.notify()
        self._ack()

    def _on_radar(self, msg: RadarObjects) -> None:
        if not self.params.radar_input:  # camera-only ablation: taken in, not used
            self._ack()
            return
        if not msg.complete:  # the next cycle began before this one ended: made up or cut
            self._reject('radar_incomplete')
            return
        if not self._in_order('radar', time_to_ns(msg.header.stamp)):
            return
        finite = [
            o
            for o in msg.objects
            if all(
                math.isfinite(v) for v in (o.position.x, o.position.y, o.velocity.x, o.velocity.y)
            )
        ]
        if len(finite) < len(msg.objects):
            self.rejected['radar_object_non_finite'] = (
                self.rejected.get('radar_object_non_finite', 0) + len(msg.objects) - len(finite)
            )
        objs = [
            RadarObjectIn(
                o.id,
                o.position.x,
                o.position.y,
                o.velocity.x,
                o.velocity.y,
                o.object_class,
                o.length,
                o.width,
                o.orientation,
                o.existence_probability,
                o.position_rms_x,
                o.position_rms_y,
            )
            for o in finite
        ]
        stamp = time_to_ns(msg.header.stamp)
        with self._cond:
            points = self.engine.add_scan(stamp, objs)
            self.aligner.push_radar(self.radar_name, stamp, points, time.time_ns())
            self._cond.notify()
        self._ack()

    def _on_speed(self, msg: Float64) -> None:
        if not math.isfinite(msg.data) or msg.data < -1.0:
            self._reject('speed_invalid')
            return
        with self._cond:
            self.engine.set_speed(msg.data)
        self._ack()

    # -- the worker ------------------------------------------------------------------------------

    def _work(self) -> None:
        # Its arena and stack are pre-faulted (0.06-0.13 s on a 2-core VM) once its first frame
        # is out, or after a second without one: a node just restarted publishes that much
        # sooner, and the steady loop runs on touched memory either way.
        prefault_at = math.inf if self.rt_params is None else time.monotonic() + PREFAULT_IDLE_S
        period = self.params.poll_period_s
        while not self._stop.is_set():
            if time.monotonic() >= prefault_at:
                assert self.rt_params is not None
                realtime.prefault(self.rt_params)
                prefault_at = math.inf
            with self._cond:
                ready = self.aligner.poll(time.time_ns())
                if not ready:
                    self._cond.wait(period)
                    ready = self.aligner.poll(time.time_ns())
            if self._process_ready(ready) and prefault_at < math.inf:
                prefault_at = 0.0  # not done yet: after the first frame

    def _process_ready(self, ready: list[AlignedFrame]) -> int:
        """Fuse the frames the aligner released, oldest first; how many were. Each but the
        last has newer frames waiting behind it (``behind``: the network may skip it)."""
        done = 0
        for i, aligned in enumerate(ready):
            if self._stop.is_set():  # stopping: the rest are released, not processed
                release = getattr(aligned.frame, 'release', None)
                if release is not None:
                    release()
                continue
            try:
                self._process(aligned, time.time_ns(), behind=i < len(ready) - 1)
            except Exception:  # noqa: BLE001  (a bug: report it, keep the other frames going)
                self.worker_errors += 1
                self.get_logger().error(
                    f'frame {aligned.stamp_ns} failed:\n{traceback.format_exc()}',
                    throttle_duration_sec=5.0,
                )
            self._ack()
            done += 1
        return done

    def _infer(self, frame: Any, sub: ShmSubscription | None = None) -> Any:
        if self.runner is None:
            return None
        desc = frame.desc
        sub = sub or self.camera
        if self.runner.cuda and desc.segment and sub is not None:
            reader = sub.reader_of(desc.segment)
            if reader is not None:
                failed = self.runner.pin((desc.segment, desc.segment_epoch_ns), reader.slot_range)
                if failed:
                    self.get_logger().warning(f'camera ring not page-locked: {failed}')
        out = self.runner.run(frame.array, desc.encoding, frame.valid)
        if self.runner.zoom_note != self._zoom_note:  # a frame size without the zoomed view
            self._zoom_note = self.runner.zoom_note
            if self._zoom_note:
                self.get_logger().warning(f'zoom {self.params.zoom:g}: {self._zoom_note}')
        return out

    def _process(self, aligned: AlignedFrame, released_ns: int, behind: bool = False) -> None:
        """Fuse one released frame; ``behind``: newer frames wait behind it."""
        t0 = time.perf_counter_ns()
        period_ns = round(self.params.infer_period_s * 1e9)
        camera = 'camera' not in aligned.missing
        skip = not camera or (period_ns > 0 and aligned.stamp_ns - self._last_infer_ns < period_ns)
        if camera and not skip and behind and not self.params.infer_when_behind:
            skip = True
            self.infer_skipped_behind += 1
        try:
            if not camera:  # the camera is gone: radar and IMU carry the tracks meanwhile
                self.camera_less += 1
                out = None
            elif skip:
                self.infer_skipped += 1
                out = None
            else:
                self._last_infer_ns = aligned.stamp_ns
                out = self._infer(aligned.frame)
        except (ModelError, RuntimeError) as err:
            self.inference_errors += 1
            self.get_logger().error(f'inference failed: {err}', throttle_duration_sec=5.0)
            out = None
        finally:
            release = getattr(aligned.frame, 'release', None)
            if release is not None:
                release()
        torn = out is False
        if torn:  # the ring overwrote the camera frame while it was read: never fused, but the
            # frame's radar scan and IMU samples still are, as when the camera is gone
            self.torn += 1
            self.camera_less += 1
            out = None
        t1 = time.perf_counter_ns()
        inferred = not (skip or torn or self.runner is None)
        inferred_ns = time.time_ns() if inferred else 0
        if inferred:
            self.infer_ns.record(t1 - t0)
        if self.hearing is not None:
            siren = self.hearing.active.get('siren')
            self.engine.set_siren(siren.probability if siren is not None else None)
        detections = None
        if out is not None and self.engine.decoder is not None:
            detections = decode_views(out, self.engine.decoder, self.input_hw)
            out = None
            t2 = time.perf_counter_ns()
            self.stage_ns['decode'].record(t2 - t1)
            t1 = t2
        extra = self._extra_detections(aligned, camera, skip) if self.extra else []
        if self.extra:
            t2 = time.perf_counter_ns()
            self.stage_ns['cameras'].record(t2 - t1)
            t1 = t2
        fused = self.engine.fuse(aligned, out, self.input_hw, detections=detections, extra=extra)
        for m in fused.missing:
            self.missing[m] = self.missing.get(m, 0) + 1
        self.stage_ns['fuse'].record(time.perf_counter_ns() - t1)
        lineage = Lineage(
            capture_ns=aligned.stamp_ns,
            committed_ns=int(getattr(getattr(aligned.frame, 'desc', None), 'available_ns', 0)),
            received_ns=released_ns - aligned.waited_ns,
            inputs_complete_ns=released_ns,
            inference_done_ns=inferred_ns,
        )
        self._publish(fused, released_ns, lineage)

    def _extra_detections(
        self, aligned: AlignedFrame, camera: bool, skip: bool
    ) -> list[tuple[CameraGeometry, list[CameraDetection]]]:
        """The extra cameras' frames of this frame's time through the network (when the anchor
        frame's ran), each one's detections with its camera."""
        if not camera:
            return []
        out: list[tuple[CameraGeometry, list[CameraDetection]]] = []
        for cam, frame in self._extra_frames(aligned.stamp_ns):
            try:
                if skip or self.runner is None:
                    result = None
                    if skip:
                        cam.skipped += 1
                else:
                    result = self._infer(frame, cam.sub)
            except (ModelError, RuntimeError) as err:
                cam.failed += 1
                self.inference_errors += 1
                self.get_logger().error(
                    f'inference failed (camera {cam.name}): {err}', throttle_duration_sec=5.0
                )
                continue
            finally:
                frame.release()
            if result is False:
                cam.torn += 1
                continue
            if not skip:
                cam.used += 1
            if result is not None and self.engine.decoder is not None:
                out.append(
                    (cam.geometry, decode_views(result, self.engine.decoder, self.input_hw))
                )
        return out

    def _publish(self, fused: FusedFrame, released_ns: int, lineage: Lineage) -> None:
        t0 = time.perf_counter_ns()
        p = self.params
        arr = ObjectArray()
        arr.header.stamp = ns_to_time(fused.stamp_ns)
        arr.header.frame_id = p.base_frame
        tracked = len(fused.velocity_std) == len(fused.objects)
        for k, o in enumerate(fused.objects):
            m = Object(
                id=o.id,
                object_class=o.object_class,
                class_probability=float(o.class_probability),
                yaw=float(o.yaw),
                yaw_rate=0.0,
                position_std=float(o.position_std),
                velocity_std=float(fused.velocity_std[k]) if tracked else 0.0,
                sources=o.sources,
                existence_probability=float(fused.existence[k]) if tracked else 1.0,
                age_s=float(fused.age_s[k]) if tracked else 0.0,
            )
            m.position.x, m.position.y = o.x, o.y
            m.size.x, m.size.y, m.size.z = o.length, o.width, 1.5
            m.velocity.x, m.velocity.y = o.vx, o.vy
            arr.objects.append(m)
        arr.inputs_complete_ns = released_ns
        odom = self._odom  # reused: its covariance arrays are not rebuilt every frame
        odom.header.stamp = arr.header.stamp
        odom.header.frame_id, odom.child_frame_id = p.odom_frame, p.base_frame
        e = fused.ego
        odom.pose.pose.position.x, odom.pose.pose.position.y = e.x, e.y
        odom.pose.pose.orientation.z = math.sin(e.yaw / 2)
        odom.pose.pose.orientation.w = math.cos(e.yaw / 2)
        odom.twist.twist.linear.x, odom.twist.twist.angular.z = e.v, e.yaw_rate
        # Covariances (row-major 6x6: x y z roll pitch yaw): dead reckoning's drift, speed's std.
        odom.pose.covariance[0] = odom.pose.covariance[7] = e.xy_std**2
        odom.twist.covariance[0] = e.v_std**2
        t1 = time.perf_counter_ns()
        self.odom_pub.publish(odom)  # first: the planner transforms the objects with it
        t2 = time.perf_counter_ns()
        arr.published_ns = lineage.published_ns = time.time_ns()
        arr.lineage = lineage
        self.obj_pub.publish(arr)
        t3 = time.perf_counter_ns()
        self.latency.record(arr.published_ns - released_ns)
        self.frames += 1
        for name, ns in (('messages', t1 - t0), ('odometry', t2 - t1), ('objects', t3 - t2)):
            self.stage_ns[name].record(ns)

    def frame_ledger(self) -> dict[str, int]:
        """Where the camera frames went, each counted once: delivered by the transport (or
        overrun in the ring before that), then dropped by the aligner's queue bound, too late or
        out of order, torn under the network, failed in the worker, fused; ``in_flight`` is what
        is queued or being processed now (delivered minus the rest)."""
        cam = self.camera.stats if self.camera is not None else None
        st = self.aligner.stats['camera']
        out = {
            'frames_delivered': cam.delivered if cam else st.received,
            'frames_overrun': cam.overruns if cam else 0,
            # delivered from the ring after DDS dropped their descriptors (part of delivered)
            'frames_recovered': cam.recovered if cam else 0,
            # descriptors whose slot was rewritten before they were read (the reader behind)
            'frames_stale': cam.stale if cam else 0,
            'frames_bad_descriptor': cam.bad_descriptors if cam else 0,
            'frames_queue_dropped': st.dropped,
            'frames_late': st.late,
            'frames_out_of_order': st.out_of_order,
            'frames_torn': self.torn,
            'frames_failed': self.worker_errors,
            'frames_fused': self.frames - self.camera_less,
        }
        undelivered = (
            'frames_delivered',
            'frames_recovered',
            'frames_overrun',
            'frames_stale',
            'frames_bad_descriptor',
        )
        done = sum(v for k, v in out.items() if k not in undelivered)
        out['frames_in_flight'] = out['frames_delivered'] - done
        return out

    def _publish_diagnostics(self) -> None:
        lat, inf = self.latency.summary(), self.infer_ns.summary()
        # each stage summarised once (a summary sorts up to 100,000 samples)
        stages = {n: sm for n, r in self.stage_ns.items() if (sm := r.summary()).count}
        cam = self.camera.stats if self.camera is not None else None
        values = {
            'frames': self.frames,
            'frames_without_camera': self.camera_less,
            'torn': self.torn,
            'inference_errors': self.inference_errors,
            'inference_skipped': self.infer_skipped,
            'inference_skipped_behind': self.infer_skipped_behind,
            'worker_errors': self.worker_errors,
            'missing': ', '.join(f'{k} {v}' for k, v in sorted(self.missing.items())),
            'latency_p50_us': round(lat.p50_us, 1) if lat.count else '',
            'latency_p99_us': round(lat.p99_us, 1) if lat.count else '',
            'inference_p99_us': round(inf.p99_us, 1) if inf.count else '',
            'stages_p50_us': ', '.join(f'{n} {sm.p50_us:.0f}' for n, sm in stages.items()),
            'stages_p99_us': ', '.join(f'{n} {sm.p99_us:.0f}' for n, sm in stages.items()),
            'camera_overruns': cam.overruns if cam else '',
            'rejected': ', '.join(f'{k} {v}' for k, v in sorted(self.rejected.items())),
            'ego_speed_mps': round(self.engine.ego.v, 3),
            'ego_speed_std_mps': round(self.engine.ego.v_std, 3),
            'ego_speed_source': self.engine.ego.speed_source,
            'tracks_confirmed': int(self.engine.tracker.is_confirmed.sum()),
            'tracker_kernels': self.engine.tracker.k.name,
            'camera_detections': len(self.engine.camera_detections),
            'tracks_all': len(self.engine.tracker),
            'camera_births_vetoed': self.engine.tracker.vetoed,
            'camera_tracks_reanchored': self.engine.tracker.reanchored,
            'camera_tracks_confirmed_early': self.engine.tracker.confirmed_early,
            'emergency_track': ''
            if self.engine.emergency_id is None
            else self.engine.emergency_id,
            'policy': self.rt_report.policy if self.rt_report else '',
            'input_publishers': self.input_publishers(),
        }
        for name, st in self.aligner.stats.items():
            values[f'{name}_late_dropped'] = f'{st.late}/{st.dropped}'
        if self.aligner.params.imu_mode == 'extrapolate':
            ex = self.aligner.extrapolation
            gyro_rms, accel_rms = ex.rms()
            values['imu_extrapolated_frames'] = ex.frames
            values['imu_extrapolation_rms'] = (
                f'gyro {gyro_rms:.4f} rad/s, accel {accel_rms:.3f} m/s² ({ex.checked} checked)'
            )
        values.update(self.frame_ledger())
        for extra in self.extra:
            values[f'camera_{extra.name}'] = ', '.join(
                f'{k} {v}' for k, v in extra.ledger().items()
            )
        if self.hearing is not None:
            values.update(self.hearing.diagnostics())
        level = (
            Level.WARN
            if self.torn or self.inference_errors or self.worker_errors or self.rejected
            else Level.OK
        )
        self.diag.publish(level, f'{self.frames} frames fused', values)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``fusion_node``."""
    return node_utils.run(FusionNode, args)


if __name__ == '__main__':
    sys.exit(main())

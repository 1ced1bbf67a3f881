"""fusion_node: camera frames through shared memory, IMU and radar aligned to them, the network,
fused objects and ego odometry out.

Inputs: ``~/in/camera`` (a ShmPublisher stream, frames read in place from the ring; with
``camera_fast_path`` from its futex), ``~/in/imu`` (sensor_msgs/Imu), ``~/in/radar``
(rt_fusion_msgs/RadarObjects, or radar_msgs/RadarTracks: ``radar_type``), ``~/in/speed``
(geometry_msgs/TwistStamped, the vehicle speed; ``speed_type``) and ``~/in/audio`` (AudioChunk:
the hearing model runs on it in a thread of its own, :mod:`rt_fusion.ros.hearing_input`, out on
``~/out/audio_events``). Their QoS: :mod:`rt_fusion.ros.fusion.inputs`.

Per camera frame (:class:`rt_fusion.core.sync.Aligner` waits at most ``sync.max_wait_s`` for the
modalities in ``sync.wait_for``, then goes on and says which were missing) the network runs on
the frame (``backend``; ``none`` skips it; ``inference: beside``, the default, on a thread of its
own, its detections into the tracks at their frame's time when ready:
:mod:`rt_fusion.ros.fusion.lane`) and :class:`rt_fusion.core.fusion.FusionEngine` builds
the objects. Outputs: ``~/out/objects`` (ObjectArray in ``base_link`` at the frame's time;
``published_ns - inputs_complete_ns`` is this node's latency), ``~/out/odometry``
(dead-reckoned ``odom`` → ``base_link``, also on ``/tf`` with ``publish_tf``), and for RViz and
Foxglove ``~/out/detections`` (vision_msgs/Detection3DArray) and ``~/out/markers``. A torn frame
is counted and fused without the camera; missing modalities degrade the output, never stall it
(no camera for ``sync.camera_timeout_s``: each radar scan is fused on its own).
``/diagnostics``: frames, missing modalities, torn frames, latency P50/P99, the frame ledger.

One worker thread does the work (the executor only queues inputs), with the ``rt.*`` real-time
set-up. Here: declare, configure, convert, publish; the rest in :mod:`rt_fusion.ros.fusion`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
import threading
import time
from typing import Any, ClassVar

from geometry_msgs.msg import TwistStamped
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rt_fusion_msgs.msg import RadarObjects
from sensor_msgs.msg import Imu
from std_msgs.msg import Float64, UInt64

from rt_fusion.core import realtime
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.fusion import FusionEngine
from rt_fusion.core.perception import tracker
from rt_fusion.core.perception.hearing import HearingParams
from rt_fusion.core.sync import AlignedFrame, Aligner
from rt_fusion.inference.runner import FrameRunner
from rt_fusion.inference.spec import ModelError
from rt_fusion.ros import lifecycle, parameters, radar_tracks, running
from rt_fusion.ros.conversions import time_to_ns
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics
from rt_fusion.ros.fusion import inputs, messages
from rt_fusion.ros.fusion.params import (
    LIVE,
    PARAM_GROUPS,
    DetectorParams,
    FusionNodeParams,
    with_calibration,
)
from rt_fusion.ros.fusion.rig import CameraRig, ExtraCamera, extra_cameras
from rt_fusion.ros.fusion.worker import PREFAULT_IDLE_S, FrameWorker, Processed, make_runner
from rt_fusion.ros.hearing_input import HearingInput
from rt_fusion.ros.shm_transport import ShmSubscription


class FusionNode(lifecycle.DeviceNode):
    """See the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = PARAM_GROUPS
    PARAMS = tuple(cls for cls, _prefix in PARAM_GROUPS)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('fusion', **kwargs)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self.work: FrameWorker | None = None
        self.rig = CameraRig([], self._cond, 0.0, 1)
        # Inputs refused at the boundary, per stream and reason (never fused).
        self.rejected: dict[str, int] = {}
        self._last_stamp: dict[str, int] = {}
        self.camera: ShmSubscription | None = None
        self.hearing: HearingInput | None = None
        self.camera_info: inputs.CameraInfoInput | None = None
        self.runner: FrameRunner | None = None
        self.rt_report: realtime.RealtimeReport | None = None
        self.rt_params: realtime.RealtimeParams | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @classmethod
    def preload(cls) -> None:
        """Also ONNX Runtime, which the backend imports when chosen (0.1 s of a start)."""
        super().preload()
        with contextlib.suppress(ImportError):
            import onnxruntime  # noqa: F401, PLC0415

            import rt_fusion.inference.onnxruntime_backend  # noqa: F401, PLC0415

    def configure(self) -> None:
        """Parameters, model, subscriptions, publishers; the real-time set-up last."""
        groups: dict[str, Any] = {
            prefix: parameters.declare_params(self, c, prefix, prefix in LIVE, prefix != 'fusion.')
            for c, prefix in PARAM_GROUPS
        }
        p: FusionNodeParams = groups['']
        self.params, self.sync_params = p, groups['sync.']
        fusion_params, rt, hearing = groups['fusion.'], groups['rt.'], groups['hearing.']
        fusion_params = with_calibration(self, fusion_params, p)  # the mountings
        self.imu_rot = fusion_params.imu_matrix()
        if len(self.sync_params.radars) != 1:
            raise ParameterError(
                'sync.radars', self.sync_params.radars, 'fusion_node takes one radar stream'
            )
        self.radar_name = self.sync_params.radars[0]
        self.aligner = Aligner(self.sync_params)
        tracker.defer_compiled()  # numba is loaded once the node is active (see activate)
        self.engine = FusionEngine(fusion_params, tracker=groups['tracker.'])
        self.detector_params: DetectorParams = groups['detector.']
        live: dict[str, Any] = {'tracker.': (tracker.TrackerParams, self._set_tracker),
                                'detector.': (DetectorParams, self._set_detector),
                                'hearing.': (HearingParams, self._set_hearing)}  # fmt: skip
        parameters.apply_live(self, live)
        rig = extra_cameras(p.cameras, fusion_params)
        self.rig = CameraRig(rig, self._cond, p.camera_match_s, self.sync_params.camera_queue)
        self.runner = make_runner(p, rt, self.get_logger()) if p.backend != 'none' else None
        if self.runner is not None:
            self._set_detector(self.detector_params)
        # Lock-step replays (ack_topic set) must lose nothing downstream even when the planner
        # lags the fusion by many frames: a deep history then; live, the newest matters.
        reliable = QoSProfile(
            depth=1000 if p.ack_topic else 10, reliability=ReliabilityPolicy.RELIABLE
        )
        self.objects_out = messages.ObjectsOut(self, reliable, p.base_frame, p.serialized_objects)
        odom_qos = reliable if p.ack_topic else qos_profile_sensor_data
        self.pose = messages.PoseOut(self, odom_qos, p.odom_frame, p.base_frame, p.publish_tf)
        self.views = messages.ViewsOut(self, reliable, p.base_frame)  # RViz, Foxglove
        self.diag = NodeDiagnostics(self, 'fusion')
        self.acks = 0
        ack_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.ack_pub = self.create_publisher(UInt64, p.ack_topic, ack_qos) if p.ack_topic else None
        self.hearing = inputs.subscribe(self, p, hearing)
        self.diag_timer = self.create_timer(p.diagnostics_period_s, self._publish_diagnostics)
        self.rt_params = rt
        with parameters.param_prefix('rt.'):
            # The heap and stack are touched by the worker, the thread that runs the loop.
            self.rt_report = realtime.apply(rt, prefault_here=False)
        for warning in self.rt_report.warnings:
            self.get_logger().warning(f'real time: {warning}')
        hearing_input = self.hearing

        def siren() -> float | None:  # the hearing's latest (its ``active`` is replaced)
            assert hearing_input is not None
            heard = hearing_input.active.get('siren')
            return heard.probability if heard is not None else None

        self.work = FrameWorker(
            p, self.engine, self.aligner, self.runner, self.rig, self.get_logger(), self._stop,
            siren if hearing_input is not None else None,
        )  # fmt: skip
        # The camera last, once the slow parts (the models, the real-time set-up) are done: a
        # camera waiting for its subscribers (wait_subscribers_s) starts streaming only when this
        # node is about to spin, so no descriptor waits unread in the keep-last history (depth:
        # the ring's slots) while a model loads.
        shm: dict[str, Any] = {'transport': p.camera_transport, 'fast_path': p.camera_fast_path}
        self.camera = self.work.camera = ShmSubscription(
            self, '~/in/camera', self._on_frame, **shm
        )
        for cam in self.rig.cameras:
            cb = functools.partial(self._on_extra_frame, cam)
            cam.sub = ShmSubscription(self, f'~/in/camera_{cam.name}', cb, **shm)
        if self.runner is not None:
            try:
                self.runner.wait_warm()
            except ModelError as err:
                raise ParameterError('model', str(p.model), str(err)) from err

    def _set_tracker(self, new: tracker.TrackerParams) -> None:
        with self._cond:  # between two frames
            self.engine.tracker.set_params(new)

    def _set_detector(self, new: DetectorParams) -> None:
        """The model's decoder with the live score threshold (the model's own at -1)."""
        self.detector_params = new
        decoder = self.runner.spec.decoder if self.runner is not None else None
        if decoder is not None and new.score_threshold >= 0.0:
            decoder = dataclasses.replace(decoder, score_threshold=new.score_threshold)
        with self._cond:  # between two frames
            self.engine.set_decoder(decoder)

    def _set_hearing(self, new: HearingParams) -> None:
        if self.hearing is not None:
            self.hearing.set_params(new)

    def activate(self) -> None:
        """Starts the worker (and the camera fast path)."""
        self._stop.clear()
        if self.work is not None:  # inference: beside, the network's own thread
            self.work.start_lane(self._cond)
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
        if self.work is not None:
            self.work.stop_lane()  # after the frame it is on, before cleanup frees the model

    def cleanup(self) -> None:
        """Releases the camera subscriptions (their fast-path threads, their ring mappings) and
        the models (idempotent): configure builds them anew."""
        if self.camera is not None:
            self.camera.destroy()
            self.camera = None
        self.rig.release()
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

    # -- inputs (executor / fast-path threads): checked, queued, the worker woken ---------------

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
        self.rig.push(cam, frame)
        self._ack()  # taken in (a lock-step replay sends the rig's front frame after it)

    def _reject(self, reason: str, count: int = 1, ack: bool = True) -> None:
        """Counts input refused at the boundary; ``ack``: a whole message (taken in)."""
        self.rejected[reason] = self.rejected.get(reason, 0) + count
        if ack:
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
        stamp = time_to_ns(msg.header.stamp)
        if not self._in_order('imu', stamp):
            return
        gyro, accel = (g.x, g.y, g.z), (a.x, a.y, a.z)
        if self.imu_rot is not None:  # a turned IMU: its axes into base_link's
            gyro, accel = tuple(self.imu_rot @ gyro), tuple(self.imu_rot @ accel)
        with self._cond:
            self.aligner.push_imu(stamp, gyro, accel, time.time_ns())
            self._cond.notify()
        self._ack()

    def _on_radar(self, msg: Any) -> None:  # RadarObjects or RadarTracks
        stamp = time_to_ns(msg.header.stamp)
        if not self.params.radar_input:  # camera-only ablation: taken in, not used
            self._ack()
            return
        if not getattr(msg, 'complete', True):  # the next cycle began before this one ended
            self._reject('radar_incomplete')
            return
        if not self._in_order('radar', stamp):
            return
        tracks = not isinstance(msg, RadarObjects)
        objs, non_finite = (radar_tracks.tracks_in if tracks else messages.radar_objects_in)(
            msg if tracks else msg.objects
        )
        if non_finite:
            self._reject('radar_object_non_finite', non_finite, ack=False)
        with self._cond:
            points = self.engine.add_scan(stamp, objs)
            self.aligner.push_radar(self.radar_name, stamp, points, time.time_ns())
            self._cond.notify()
        self._ack()

    def _on_speed(self, msg: TwistStamped | Float64) -> None:
        stamped = isinstance(msg, TwistStamped)
        v = msg.twist.linear.x if stamped else msg.data
        if not math.isfinite(v) or v < -1.0:
            self._reject('speed_invalid')
            return
        stamp = time_to_ns(msg.header.stamp) if stamped else None
        if stamp is not None and not self._in_order('speed', stamp):
            return
        with self._cond:
            self.engine.set_speed(v, stamp)
        self._ack()

    # -- the worker ------------------------------------------------------------------------------

    def _work(self) -> None:
        # Its arena and stack are pre-faulted (0.06-0.13 s on a 2-core VM) once its first frame
        # is out, or after a second without one: a node just restarted publishes that much
        # sooner, and the steady loop runs on touched memory either way.
        prefault_at = math.inf if self.rt_params is None else time.monotonic() + PREFAULT_IDLE_S
        period = self.params.poll_period_s
        assert self.work is not None
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
        return self.work.process_ready(ready, self._stop, self._publish, self._ack)  # type: ignore[union-attr]

    def _publish(self, aligned: AlignedFrame, released_ns: int, done: Processed) -> None:
        t0 = time.perf_counter_ns()
        fused = done.fused
        self.objects_out.build(fused, released_ns, {
            'capture_ns': aligned.stamp_ns,
            'committed_ns': int(getattr(getattr(aligned.frame, 'desc', None), 'available_ns', 0)),
            'received_ns': released_ns - aligned.waited_ns,
            'inputs_complete_ns': released_ns,
            'inference_done_ns': done.inference_done_ns,
        })  # fmt: skip
        self.pose.fill(fused.ego, fused.stamp_ns)
        t1 = time.perf_counter_ns()
        self.pose.publish()  # first: the planner transforms the objects with the odometry
        t2 = time.perf_counter_ns()
        published_ns = self.objects_out.publish()
        t3 = time.perf_counter_ns()
        self.views.publish(fused)  # built only while subscribed
        assert self.work is not None
        self.work.published(released_ns, published_ns, (t1 - t0, t2 - t1, t3 - t2))

    def _publish_diagnostics(self) -> None:
        if self.work is None:
            return
        values = self.work.diagnostics()
        values['rejected'] = ', '.join(f'{k} {v}' for k, v in sorted(self.rejected.items()))
        values['policy'] = self.rt_report.policy if self.rt_report else ''
        values['input_publishers'] = self.input_publishers()
        if self.hearing is not None:
            values.update(self.hearing.diagnostics())
        values['intrinsics'] = self.camera_info.source if self.camera_info else 'parameters'
        w = self.work
        bad = w.torn or w.inference_errors or w.worker_errors or self.rejected
        self.diag.publish(Level.WARN if bad else Level.OK, f'{w.frames} frames fused', values)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``fusion_node``."""
    return running.run(FusionNode, args)


if __name__ == '__main__':
    sys.exit(main())

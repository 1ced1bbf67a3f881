"""What fusion_node's worker thread does with each frame the aligner releases: whether the
network runs on it (``infer_period_s``, ``infer_when_behind``, a camera gone or torn), the
network on the frame and on the rig's other cameras, the decoding of their views, and
:meth:`rt_fusion.core.fusion.FusionEngine.fuse`; and what it counts: the frame ledger, the
stage times, the diagnostics values."""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from rt_fusion.core import realtime
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.fusion import FusedFrame, FusionEngine
from rt_fusion.core.latency import DIAG_WINDOW, LatencyRecorder
from rt_fusion.core.perception import track_kernels
from rt_fusion.core.perception.decoders import CameraDetection, CameraGeometry
from rt_fusion.core.perception.zoom import decode_views
from rt_fusion.core.sync import AlignedFrame, Aligner
from rt_fusion.inference.runner import DEFAULT_INPUT_HW, FrameRunner
from rt_fusion.inference.spec import ModelError
from rt_fusion.ros import share
from rt_fusion.ros.fusion.lane import InferenceLane, LaneResult
from rt_fusion.ros.fusion.params import FusionNodeParams
from rt_fusion.ros.fusion.rig import CameraRig
from rt_fusion.ros.shm_transport import ShmSubscription

STAGES = ('decode', 'cameras', 'fuse', 'messages', 'odometry', 'objects')
#: [s] the worker pre-faults its memory after its first frame, or this long without one.
PREFAULT_IDLE_S = 1.0
#: [s] the longest a lock-step replay's frame waits for the network's frame before it
#: (``inference: beside``; a stuck network: the frame then goes on without its detections).
LOCKSTEP_WAIT_S = 60.0


def _release(item: Any) -> None:
    """Frees a frame's ring slot (an aligned frame's, or a frame's), where it has one."""
    frame = getattr(item, 'frame', item)
    release = getattr(frame, 'release', None)
    if release is not None:
        release()


@dataclasses.dataclass(frozen=True)
class Processed:
    """A fused frame, and when its inference ended (0: no inference)."""

    fused: FusedFrame
    inference_done_ns: int


class FrameWorker:
    """Turns released frames into fused frames; see the module docstring.

    ``siren``: the hearing's current siren probability (None: none heard); None: no hearing."""

    def __init__(
        self,
        params: FusionNodeParams,
        engine: FusionEngine,
        aligner: Aligner,
        runner: FrameRunner | None,
        rig: CameraRig,
        logger: Any,
        stop: threading.Event,
        siren: Callable[[], float | None] | None = None,
    ) -> None:
        self.params, self.engine, self.aligner = params, engine, aligner
        self.runner, self.rig, self.log, self.siren = runner, rig, logger, siren
        self._stop = stop  # the node's: a wait for the rig's frames ends with it
        self.camera: ShmSubscription | None = None  # the front camera's (stats, pinning)
        self.input_hw = runner.input_hw if runner is not None else DEFAULT_INPUT_HW
        self.latency = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.infer_ns = LatencyRecorder(DIAG_WINDOW, wrap=True)
        # The worker thread's own CPU time per frame, released -> published (the rest of the
        # wall time is waiting for a core: a busy machine's share, not this code's).
        self.cpu_ns = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self._cpu0 = 0
        # Where a frame's time goes after inference: fusion, message building, the two publishes.
        self.stage_ns = {name: LatencyRecorder(DIAG_WINDOW, wrap=True) for name in STAGES}
        self.frames = self.torn = self.inference_errors = self.infer_skipped = 0
        self.infer_skipped_behind = 0  # of infer_skipped: newer frames were waiting
        self.camera_less = 0  # frames fused without their camera frame (gone, or torn)
        self.worker_errors = 0
        self.missing: dict[str, int] = {}
        self._last_infer_ns = -(2**62)
        self._zoom_note = ''  # the last frame size's reason for no zoomed view
        # inference: beside (start_lane): the network's thread, the frames it was busy for,
        # and the age of its detections when they went into the tracker (capture -> in)
        self.lane: InferenceLane | None = None
        self.infer_skipped_busy = 0
        self.late_age_ns = LatencyRecorder(DIAG_WINDOW, wrap=True)

    def start_lane(self, cond: threading.Condition) -> None:
        """``inference: beside``: the network's thread (no-op without a network, or inline),
        which wakes the worker through ``cond`` (the node's) at each result."""

        def wake() -> None:
            with cond:
                cond.notify()

        if self.runner is not None and self.params.inference == 'beside' and self.lane is None:
            self.lane = InferenceLane(self._lane_run, wake, _release)

    def stop_lane(self) -> None:
        """Stops the network's thread after its frame (its result is dropped)."""
        if self.lane is not None:
            self.lane.close()
            self.lane = None

    def process_ready(
        self,
        ready: list[AlignedFrame],
        stop: threading.Event,
        out: Callable[[AlignedFrame, int, Processed], None],
        done: Callable[[], None],
    ) -> int:
        """Fuses the frames the aligner released, oldest first, each handed to ``out`` with its
        release time, then ``done()`` (its acknowledgement); how many were. Each but the last has
        newer frames waiting behind it (``behind``: the network may skip it). A frame that fails
        is logged and counted, and the others go on."""
        count = 0
        if self.lane is not None:
            self.take_late()
        for i, aligned in enumerate(ready):
            if stop.is_set():  # stopping: the rest are released, not processed
                _release(aligned)
                continue
            released_ns = time.time_ns()
            try:
                out(aligned, released_ns, self.process(aligned, behind=i < len(ready) - 1))
            except Exception:  # noqa: BLE001  (a bug: report it, keep the other frames going)
                self.worker_errors += 1
                self.log.error(
                    f'frame {aligned.stamp_ns} failed:\n{traceback.format_exc()}',
                    throttle_duration_sec=5.0,
                )
            done()
            count += 1
        return count

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
                    self.log.warning(f'camera ring not page-locked: {failed}')
        out = self.runner.run(frame.array, desc.encoding, frame.valid)
        if self.runner.zoom_note != self._zoom_note:  # a frame size without the zoomed view
            self._zoom_note = self.runner.zoom_note
            if self._zoom_note:
                self.log.warning(f'zoom {self.params.zoom:g}: {self._zoom_note}')
        return out

    def _infer_counted(self, frame: Any) -> Any:
        """:meth:`_infer`, a failure counted and logged (None: no output)."""
        try:
            return self._infer(frame)
        except (ModelError, RuntimeError) as err:
            self.inference_errors += 1
            self.log.error(f'inference failed: {err}', throttle_duration_sec=5.0)
            return None

    def _skip(self, aligned: AlignedFrame, camera: bool, behind: bool) -> bool:
        """Whether the network skips this frame (no camera, its period, or newer waiting)."""
        period_ns = round(self.params.infer_period_s * 1e9)
        skip = not camera or (period_ns > 0 and aligned.stamp_ns - self._last_infer_ns < period_ns)
        if camera and not skip and behind and not self.params.infer_when_behind:
            skip = True
            self.infer_skipped_behind += 1
        return skip

    def take_late(self) -> None:
        """The network's results that are ready (``inference: beside``) into the tracker, each
        at its frame's time."""
        assert self.lane is not None
        for r in self.lane.take():
            self.infer_ns.record(r.took_ns)
            if r.torn:  # the frame went out without its camera after all (counted as such)
                self.torn += 1
                self.camera_less += 1
            width = self.input_hw[1]
            if self.engine.camera_late(r.stamp_ns, r.detections, width, r.extra):
                self.late_age_ns.record(time.time_ns() - r.stamp_ns)

    def _lane_run(self, aligned: AlignedFrame) -> LaneResult:
        """On the lane's thread: the network on a frame (freed after) and on the rig's other
        cameras' frames of its time, the views decoded."""
        t0 = time.perf_counter_ns()
        try:
            out = self._infer_counted(aligned.frame)
        finally:
            _release(aligned)
        decoder = self.engine.decoder
        dets = None
        if out is not None and out is not False and decoder is not None:
            dets = decode_views(out, decoder, self.input_hw)
        extra = self._extra_detections(aligned, True, False) if self.rig.cameras else []
        return LaneResult(
            aligned.stamp_ns, dets, extra, out is False, time.time_ns(),
            time.perf_counter_ns() - t0,
        )  # fmt: skip

    def _process_beside(self, aligned: AlignedFrame, behind: bool) -> Processed:
        """``inference: beside``: the frame goes to the network's thread when it is idle and
        due, and is fused now, without its detections (they come later, at its time); the
        others are fused without the network. A lock-step replay waits for the network's
        frame first (one frame of lag, every run the same)."""
        assert self.lane is not None
        self._cpu0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        if self.params.ack_topic and self.lane.busy:
            self.lane.wait_idle(LOCKSTEP_WAIT_S, self._stop)
        self.take_late()
        camera = 'camera' not in aligned.missing
        skip = self._skip(aligned, camera, behind)
        later = False
        if not camera:
            self.camera_less += 1
        elif skip or self.lane.busy:
            self.infer_skipped += 1
            if not skip:
                self.infer_skipped_busy += 1
        else:
            self._last_infer_ns = aligned.stamp_ns
            self.lane.submit(aligned)  # the lane frees the frame
            later = True
        if not later:
            _release(aligned)
            if camera and self.rig.cameras:
                self.rig.skip(aligned.stamp_ns)
        if self.siren is not None:
            self.engine.set_siren(self.siren())
        t1 = self._stage('cameras', t0) if self.rig.cameras else t0
        fused = self.engine.fuse(aligned, None, self.input_hw, camera_later=later)
        for m in fused.missing:
            self.missing[m] = self.missing.get(m, 0) + 1
        self._stage('fuse', t1)
        return Processed(fused, 0)

    def process(self, aligned: AlignedFrame, behind: bool = False) -> Processed:
        """Fuses one released frame; ``behind``: newer frames wait behind it."""
        if self.lane is not None:
            return self._process_beside(aligned, behind)
        self._cpu0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        camera = 'camera' not in aligned.missing
        skip = self._skip(aligned, camera, behind)
        try:
            if not camera:  # the camera is gone: radar and IMU carry the tracks meanwhile
                self.camera_less += 1
                out = None
            elif skip:
                self.infer_skipped += 1
                out = None
            else:
                self._last_infer_ns = aligned.stamp_ns
                out = self._infer_counted(aligned.frame)
        finally:
            _release(aligned)
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
        if self.siren is not None:
            self.engine.set_siren(self.siren())
        detections = None
        if out is not None and self.engine.decoder is not None:
            detections = decode_views(out, self.engine.decoder, self.input_hw)
            out = None
            t1 = self._stage('decode', t1)
        extra = self._extra_detections(aligned, camera, skip) if self.rig.cameras else []
        if self.rig.cameras:
            t1 = self._stage('cameras', t1)
        fused = self.engine.fuse(aligned, out, self.input_hw, detections=detections, extra=extra)
        for m in fused.missing:
            self.missing[m] = self.missing.get(m, 0) + 1
        self._stage('fuse', t1)
        return Processed(fused, inferred_ns)

    def _stage(self, name: str, since: int) -> int:
        now = time.perf_counter_ns()
        self.stage_ns[name].record(now - since)
        return now

    def _extra_detections(
        self, aligned: AlignedFrame, camera: bool, skip: bool
    ) -> list[tuple[CameraGeometry, list[CameraDetection]]]:
        """The extra cameras' frames of this frame's time through the network (when the anchor
        frame's ran), each one's detections with its camera."""
        if not camera:
            return []
        out: list[tuple[CameraGeometry, list[CameraDetection]]] = []
        frames = self.rig.frames_for(
            aligned.stamp_ns,
            self.aligner.params.max_wait_s,
            self.params.poll_period_s,
            self._stop,
        )
        for cam, frame in frames:
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
                self.log.error(
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

    def published(self, released_ns: int, published_ns: int, stages_ns: tuple[int, ...]) -> None:
        """A fused frame went out: its latency, and its message building and publishing
        times (messages, odometry, objects)."""
        self.latency.record(published_ns - released_ns)
        self.cpu_ns.record(time.thread_time_ns() - self._cpu0)  # the worker's thread: same
        self.frames += 1
        for name, ns in zip(('messages', 'odometry', 'objects'), stages_ns, strict=True):
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

    def diagnostics(self) -> dict[str, Any]:
        """The worker's and the fusion core's values for ``/diagnostics``."""
        lat, inf, cpu = self.latency.summary(), self.infer_ns.summary(), self.cpu_ns.summary()
        # each stage summarised once (a summary sorts up to 100,000 samples)
        stages = {n: sm for n, r in self.stage_ns.items() if (sm := r.summary()).count}
        cam = self.camera.stats if self.camera is not None else None
        engine, tracks = self.engine, self.engine.tracker
        values: dict[str, Any] = {
            'frames': self.frames,
            'frames_without_camera': self.camera_less,
            'torn': self.torn,
            'inference_errors': self.inference_errors,
            'inference_skipped': self.infer_skipped,
            'inference_skipped_behind': self.infer_skipped_behind,
            'inference_skipped_busy': self.infer_skipped_busy,
            'inference': self.params.inference if self.runner is not None else 'none',
            'detections_age_us': _p50_p99(self.late_age_ns),
            'worker_errors': self.worker_errors,
            'missing': ', '.join(f'{k} {v}' for k, v in sorted(self.missing.items())),
            'latency_p50_us': round(lat.p50_us, 1) if lat.count else '',
            'latency_p99_us': round(lat.p99_us, 1) if lat.count else '',
            'inference_p99_us': round(inf.p99_us, 1) if inf.count else '',
            'latency_max_us': round(lat.max_us, 1) if lat.count else '',
            'cpu_us': f'{cpu.p50_us:.0f} {cpu.p99_us:.0f} {cpu.max_us:.0f}' if cpu.count else '',
            'stages_p50_us': ', '.join(f'{n} {sm.p50_us:.0f}' for n, sm in stages.items()),
            'stages_p99_us': ', '.join(f'{n} {sm.p99_us:.0f}' for n, sm in stages.items()),
            'stages_max_us': ', '.join(f'{n} {sm.max_us:.0f}' for n, sm in stages.items()),
            'camera_overruns': cam.overruns if cam else '',
            'ego_speed_mps': round(engine.ego.v, 3),
            'ego_speed_std_mps': round(engine.ego.v_std, 3),
            'ego_speed_source': engine.ego.speed_source,
            'tracks_confirmed': int(tracks.is_confirmed.sum()),
            # 'loading': numba's kernels still being loaded (frames meanwhile run numpy's)
            'tracker_kernels': 'loading' if track_kernels.pending() else tracks.k.name,
            'camera_detections': len(engine.camera_detections),
            'tracks_all': len(tracks),
            'camera_births_vetoed': tracks.vetoed,
            'camera_tracks_reanchored': tracks.reanchored,
            'camera_tracks_confirmed_early': tracks.confirmed_early,
            'emergency_track': '' if engine.emergency_id is None else engine.emergency_id,
            # NaN/inf refused by the core itself (the node's own checks come first)
            'core_non_finite': ', '.join(
                f'{k} {v}'
                for k, v in {
                    **{f'{n}': st.non_finite for n, st in self.aligner.stats.items()},
                    **engine.non_finite,
                    'detections': tracks.non_finite,
                }.items()
                if v
            ),
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
        values.update(self.rig.diagnostics())
        missed = getattr(self.runner.model, 'missed', None) if self.runner is not None else None
        if missed is not None:  # the recorded backend: views it had no output for
            values['recorded_missed'] = missed
        return values


def make_runner(p: FusionNodeParams, rt: realtime.RealtimeParams, logger: Any) -> FrameRunner:
    """The network of ``p.model`` on its backend and device, warming up (configure waits for it
    at its end: :meth:`FrameRunner.wait_warm`).

    Raises:
        ParameterError: the model cannot be loaded.
    """
    spec_path = share.resolve_share(p.model)
    if p.backend == 'recorded' and not p.recorded_outputs:
        raise ParameterError('recorded_outputs', '', 'backend recorded replays this file: none')
    threads = p.threads
    if rt.rt_priority > 0 and p.device == 'cpu' and threads != 1:
        # The worker is SCHED_FIFO; the backend's pool threads are not (ONNX Runtime pins
        # them to cores), and the caller busy-waits for them at the end of each parallel
        # section. A pool thread on the worker's core then runs only when the kernel's RT
        # throttling stops the spinning worker: chaos runs on 2 cores saw 0.85-0.99 s
        # inferences after a restart (30 ms otherwise). One thread: the worker runs the
        # network itself.
        logger.warning(
            f'threads {threads} -> 1: a SCHED_FIFO worker (rt.rt_priority '
            f'{rt.rt_priority}) must not wait on CPU inference threads of normal priority'
        )
        threads = 1
    try:
        runner = FrameRunner(
            spec_path, p.backend, p.device, threads, device_decode=p.device_decode,
            warm=False, zoom=p.zoom, mirror=p.mirror, recording=p.recorded_outputs,
        )  # fmt: skip
        if runner.spec.decoder is None:
            runner.release()
            raise ParameterError(
                'model', str(spec_path), 'no decoder section: fusion_node fuses the detections '
                'of a detector (models/rtf_centernet.yaml)',
            )  # fmt: skip
        if runner.cuda:
            runner.warm_up()
        else:  # its 0.2 s overlap the rest of configure (done at its end)
            runner.start_warm_up()
    except ModelError as err:
        raise ParameterError('model', str(spec_path), str(err)) from err
    return runner


def _p50_p99(rec: LatencyRecorder) -> str:
    sm = rec.summary()
    return f'{sm.p50_us:.0f} {sm.p99_us:.0f}' if sm.count else ''

"""The demo's live runs: the shipped launch files on the host clock, recorded as they go.

- :func:`run_scenario`: ``launch/replay.launch.py``, ``replay_node`` playing a generated
  scenario into ``fusion_node`` and ``trajectory_node`` (camera frames into a shared-memory ring
  as ``camera_node`` does, stamps moved onto the host clock), with the fusion and planner sections
  of ``config/replay.yaml``;
- :func:`run_recordings`: ``launch/vehicle.launch.py emulate:=true``, the vehicle's graph and
  ``config/vehicle.yaml``, each sensor node on the next real thing fed with real recordings.

``conventional`` runs the same graph with the fusion node taking the frames as
``sensor_msgs/Image`` over rclpy, the comparison the demo measures. A process that dies is
reported at once, with its last error line (:class:`LiveRunError`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from rt_fusion.core import domains
from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.evaluation import ledger
from rt_fusion.core.scenario.sensors import RIG
from rt_fusion.ros import graph
from rt_fusion.ros.harness import launching
from rt_fusion.ros.harness.recorder import Recorder
from rt_fusion.ros.harness.scenarios import graph_params

START_TOPIC = graph.start_topic('demo')
# How often the fusion node runs the detector on a CPU: rtf_centernet takes ~30 ms per frame on
# one core of a 2-core machine, longer than the camera's 33 ms (the other frames are fused
# without detections). Every frame on a GPU.
CPU_INFER_PERIOD_S = 0.1
# The recordings ``run_recordings`` plays, in the shared data folder (its README says whence).
RECORDINGS = (
    'camera/solidWhiteRight.mp4',
    'radar_ars408/candump-2026-06-24_154259.log',
    'imu_radar_rio/ti_mmwave_rospkg_demo_ros2',
)


class LiveRunError(RtFusionError):
    """A live run's graph did not come up: which process died and its last error line, or what
    was still missing at the deadline."""


def graph_env() -> dict[str, str]:
    """The environment of a tool's graph: this one, with its ROS domain (``ROS_DOMAIN_ID`` if
    set, else one leased machine-wide: :mod:`rt_fusion.core.domains`), localhost discovery and
    unbuffered output; this process's own domain and discovery set to the same."""
    env = dict(
        os.environ,
        ROS_DOMAIN_ID=domains.from_env_or_lease(),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )
    os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE')})
    return env


@dataclasses.dataclass
class LiveOptions:
    """What a live run is: where its logs go, its length, and the fusion node's inference."""

    out: Path
    frames: int  # camera frames of the run (the recordings' camera node stops after them)
    seconds: float = 10.0  # a scenario's length
    settle_s: float = 3.0  # after the last frame
    backend: str = 'onnxruntime'
    device: str = 'cpu'
    infer_period_s: float | None = None  # None: every frame on a GPU, CPU_INFER_PERIOD_S on a CPU
    cameras: int = 1  # a scenario's rig: 1 (front) or 4 (front, left, right, rear)
    viewer_port: int = 0  # the Foxglove live view of our run on this port (0: none)
    page_port: int = -1  # its operator page on this port (-1: none)
    # More fusion parameters of a scenario run (a benchmark's: the recorded backend's file).
    fusion: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Start the replay only once the fusion's compiled tracker kernels are loaded (a benchmark:
    # its first frames would otherwise time the numpy kernels).
    wait_kernels: bool = False

    def infer_period(self) -> float:
        """How often the fusion node runs the detector [s] (0: every frame)."""
        if self.infer_period_s is not None:
            return float(self.infer_period_s)
        return CPU_INFER_PERIOD_S if self.device == 'cpu' and self.backend != 'none' else 0.0

    def rig(self) -> tuple[str, ...]:
        """The cameras of the run, the front one first."""
        return ('front', *RIG[1 : self.cameras])


@dataclasses.dataclass
class LiveRun:
    """What a run recorded, the processes that failed, and where its logs are."""

    recorder: Recorder
    failed: list[str]
    logs: Path

    def frame_ledger(self) -> dict[str, Any]:
        """Where the run's camera frames went (:func:`ledger.frame_ledger`)."""
        rec = self.recorder
        extra = {c: (rec.committed_by(c), rec.extra_ledger.get(c, {})) for c in rec.cameras[1:]}
        return ledger.frame_ledger(rec.committed_by(), rec.seen, rec.ledger, extra)


def check_recordings(data: Path) -> None:
    """Fails with where to find them when the recordings are missing."""
    missing = [str(data / p) for p in RECORDINGS if not (data / p).exists()]
    if missing:
        raise LiveRunError(
            'the recordings are missing: ' + ', '.join(missing) + '. They live in the shared '
            'data folder beside the project (../shared/data, see its README); pass --data DIR '
            'if it is elsewhere.'
        )


def _bring_up(
    recorder: Recorder, launched: launching.LaunchedGraph, deadline_s: float, log: Path
) -> None:
    """Waits until the fusion and planner publish and the fusion node spins (its diagnostics
    arrive): configured, model loaded, active. A process that dies ends the wait at once."""
    if recorder.wait(recorder.graph_ready, deadline_s, launched.died):
        return
    dead = launched.died()
    if dead:
        raise LiveRunError(f'the graph failed to start: {"; ".join(dead)} (log: {log})')
    waiting = [
        t
        for t in (graph.OBJECTS_TOPIC, graph.TRAJECTORY_TOPIC)
        if not recorder.node.get_publishers_info_by_topic(t)
    ] + ([] if recorder.ledger else [f'{graph.DIAGNOSTICS_TOPIC} (fusion)'])
    raise LiveRunError(f'no publisher on {waiting} after {deadline_s:.0f} s (log: {log})')


def follow(
    recorder: Recorder,
    launched: launching.LaunchedGraph,
    source_done: Callable[[], bool],
    opts: LiveOptions,
    label: str,
    seconds: float,
) -> list[str]:
    """Spins the recorder with a progress bar until ``source_done()`` (the process feeding the
    graph ended), then ``settle_s`` more and until the fusion's ledger accounts for every frame;
    returns the processes that failed."""
    from rich.progress import Progress  # noqa: PLC0415

    from rt_fusion.report import console  # noqa: PLC0415

    with Progress(transient=False, console=console) as progress:
        task = progress.add_task(f'{label}, {opts.frames} frames', total=opts.frames)
        start = time.monotonic()
        while not source_done() and time.monotonic() - start < seconds + opts.settle_s + 60:
            recorder.spin(0.2)
            progress.update(task, completed=len(recorder.objects))
            if launched.died():
                break
        recorder.spin(opts.settle_s)  # the last frames through fusion and planner
        end = time.monotonic() + 30.0  # and the fusion's ledger (diagnostics) caught up
        while not recorder.accounted() and time.monotonic() < end and not launched.died():
            recorder.spin(0.2)
        progress.update(task, completed=len(recorder.objects))
    return launched.died()


def _label(conventional: bool) -> str:
    return 'conventional: Image over rclpy' if conventional else 'rt_fusion: shm'


def run_scenario(
    opts: LiveOptions, bag: Path, config: Path, env: Mapping[str, str], conventional: bool
) -> LiveRun:
    """``replay.launch.py`` on ``bag`` in real time, the fusion and planner sections of
    ``config`` with the run's settings (:func:`graph_params`). The replay starts once this
    process's recorder listens (``start_topic``)."""
    logs = opts.out / 'logs' / ('conventional' if conventional else 'rt_fusion')
    params = graph_params(
        config,
        logs / 'params.yaml',
        conventional=conventional,
        backend=opts.backend,
        device=opts.device,
        infer_period_s=opts.infer_period(),
        cameras=opts.cameras,
        more=opts.fusion,
    )
    recorder = Recorder('demo_recorder', cameras=opts.rig())
    launched = launching.LaunchedGraph(
        'replay.launch.py',
        {
            'bag': str(bag),
            'config': str(params),
            'mode': 'realtime',
            'restamp': 'true',
            'start_topic': START_TOPIC,
            # The microphone too, through shared memory as the camera: the fusion hears.
            'audio': 'true',
            **(
                {
                    'viewer': 'true',
                    'viewer_port': str(opts.viewer_port),
                    'viewer_page_port': str(opts.page_port),
                }
                if opts.viewer_port and not conventional
                else {}
            ),
        },
        env=env,
        log=logs / 'launch.log',
    )
    try:
        _bring_up(recorder, launched, 120.0, logs / 'launch.log')
        if opts.wait_kernels:
            recorder.wait(
                lambda: recorder.fusion_status.get('tracker_kernels', 'loading') != 'loading',
                120.0,
                launched.died,
            )
        recorder.send_start(START_TOPIC)
        failed = follow(
            recorder,
            launched,
            lambda: launched.finished('replay_node'),
            opts,
            _label(conventional),
            opts.seconds + 2.0,
        )
    finally:
        launched.stop(timeout_s=30.0)
        recorder.close()
    return LiveRun(recorder, failed, logs)


def recordings_overrides(opts: LiveOptions, conventional: bool, path: Path) -> Path:
    """The run's settings over ``config/vehicle.yaml``, written to ``path``: the inference
    backend, the camera's frame count, and the transport under test. The camera starts once the
    recorder and the fusion node are both subscribed (``wait_subscribers``): the fusion creates
    its camera subscription last in its configure, so no frame is sent before it can take it."""
    fusion: dict[str, Any] = {
        'backend': opts.backend,
        'device': opts.device,
        'infer_period_s': opts.infer_period(),
    }
    if opts.device == 'cpu':
        # The vehicle's real-time plan gives the fusion CPUs of its own; on a small machine a
        # SCHED_FIFO detector with the backend's default threads (one per CPU) starved the
        # sensor nodes (a 2-core CI: 26 of 60 frames fused, the rest dropped behind it). One
        # thread at normal priority, as config/replay.yaml runs it.
        fusion.update(threads=1, rt={'rt_priority': 0})
    if opts.infer_period() > 0.0:  # paced on a CPU: no mirrored pass (graph_params says why)
        fusion['mirror'] = False
    if conventional:
        fusion.update(camera_transport='ros', camera_fast_path=False)
    sections: dict[str, dict[str, Any]] = {
        'camera': {
            'count': opts.frames,
            'publish_image': conventional,
            'wait_subscribers': 2,  # the recorder and the fusion node
            'wait_subscribers_s': 180.0,
        },
        'fusion': fusion,
    }
    if opts.device == 'cpu':
        sections['planner'] = {'rt': {'rt_priority': 0}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump({k: {'ros__parameters': v} for k, v in sections.items()}, sort_keys=False)
    )
    return path


def run_recordings(
    opts: LiveOptions, data: Path, env: Mapping[str, str], conventional: bool
) -> LiveRun:
    """``vehicle.launch.py emulate:=true`` (Xsens MTi on a pseudo-terminal, ARS408 candump on a
    CAN bus, the dash-cam video as the camera, all from ``data``) with the run's overrides,
    until the camera has sent ``opts.frames`` frames."""
    logs = opts.out / 'logs' / ('conventional' if conventional else 'rt_fusion')
    overrides = recordings_overrides(opts, conventional, logs / 'overrides.yaml')
    # subscribed before the camera starts: it counts every committed frame, and knows how many
    recorder = Recorder('demo_recorder', cameras=('front',), expected_frames=opts.frames)
    launched = launching.LaunchedGraph(
        'vehicle.launch.py',
        {
            'emulate': 'true',
            'data': str(data),
            'overrides': str(overrides),
            'microphone': 'false',  # the fusion's vehicle configuration has no hearing
        },
        env=env,
        log=logs / 'launch.log',
    )
    try:
        _bring_up(recorder, launched, 180.0, logs / 'launch.log')
        failed = follow(
            recorder,
            launched,
            lambda: launched.finished('camera_node'),
            opts,
            _label(conventional),
            opts.frames / 25.0 + 180.0,  # and the camera's wait for its subscribers
        )
    finally:
        launched.stop(timeout_s=30.0)
        recorder.close()
    return LiveRun(recorder, failed, logs)

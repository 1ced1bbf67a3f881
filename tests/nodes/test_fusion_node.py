"""fusion_node as a real process behind camera_node (the real dash-cam video through shm),
with the real ONNX test model on ONNX Runtime. The IMU and radar are absent: every frame must still
come out (degraded, the missing inputs counted), none stalled."""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
import pytest

from tests.conftest import ROOT, ProcGroup, shared_file

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration

VIDEO = 'camera/solidWhiteRight.mp4'
FRAMES = 40


def _fusion(procs: ProcGroup, *params: str) -> object:
    return procs.node(
        'fusion_node',
        '-r',
        '__node:=fusion',
        '-r',
        '~/in/camera:=/camera/out/image',
        '-p',
        f'model:={ROOT / "models" / "rtf_centernet.yaml"}',  # the vehicle's detector and decoder
        '-p',
        'backend:=onnxruntime',
        '-p',
        'threads:=1',
        *params,
        name='fusion',
    )


def test_frames_without_imu_and_radar_come_out_degraded_and_in_order(procs: ProcGroup) -> None:
    video = str(shared_file(VIDEO))
    objects = procs.echo(
        '/fusion/out/objects',
        'rt_fusion_msgs/msg/ObjectArray',
        '--count',
        str(FRAMES),
        '--timeout',
        '90',
        '--matched',
        '1',
    )
    _fusion(
        procs,
        '-p',
        'sync.wait_for:=[imu, radar]',
        '-p',
        'sync.max_wait_s:=0.05',
        '-p',
        'diagnostics_period_s:=0.2',
    )
    # Frames start once the fusion node's output reaches the echo and its camera subscription
    # is up: conditions, not a fixed delay (a loaded machine starts nodes in tens of seconds).
    objects.read_until('MATCHED', 120)
    procs.node(
        'camera_node',
        '-r',
        '__node:=camera',
        '-p',
        'source:=file',
        '-p',
        f'file:={video}',
        '-p',
        f'count:={FRAMES}',
        '-p',
        'wait_subscribers_s:=120.0',  # the fusion node subscribes before the first frame
        name='camera',
    )
    msgs, summary = objects.messages(120)
    assert summary['received'] == FRAMES
    stamps = [m['header']['stamp']['sec'] * 10**9 + m['header']['stamp']['nanosec'] for m in msgs]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert all(abs(g - 40_000_000) < 1_000_000 for g in gaps), gaps  # 25 fps container stamps
    # no radar: what is out the detector saw on the dash-cam video, the camera alone
    assert all(o['sources'] == 2 for m in msgs for o in m['objects'])
    assert all(m['published_ns'] >= m['inputs_complete_ns'] > 0 for m in msgs)
    # Every frame is out: the fusion node's next diagnostics count them all.
    diag = procs.echo(
        '/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray', '--count', '10', '--timeout', '30'
    )
    statuses = [
        {kv['key']: kv['value'] for kv in s['values']}
        for m in diag.messages(60)[0]
        for s in m['status']
        if s['name'] == '/fusion: fusion'
    ]
    last = statuses[-1]
    assert int(last['frames']) == FRAMES
    assert f'imu {FRAMES}' in last['missing'] and f'radar {FRAMES}' in last['missing']


@pytest.mark.parametrize(
    ('param', 'name'),
    [
        ('sync.radar_mode:=sideways', 'sync.radar_mode'),  # not one of the choices
        ('sync.max_wiat_s:=0.1', 'sync.max_wiat_s'),  # misspelt: rclpy alone would ignore it
        ('cameras:=[left]', 'cameras'),  # an extra camera without its mounting
        ('tracker.confirm_hits:=0', 'tracker.confirm_hits'),  # the tracker's, below its range
    ],
)
def test_a_bad_parameter_fails_at_start_with_its_name(
    procs: ProcGroup, param: str, name: str
) -> None:
    fusion = _fusion(procs, '-p', param)
    assert fusion.wait(60) == 2
    assert any(repr(name) in line for line in fusion.stderr), fusion.stderr[-5:]


def test_a_sched_fifo_worker_runs_cpu_inference_on_one_thread(procs: ProcGroup) -> None:
    # A FIFO worker busy-waiting for ONNX Runtime's pool threads (normal priority) stalled
    # inferences for ~1 s (the kernel's RT throttling) in chaos runs: the node takes one thread.
    fusion = _fusion(procs, '-p', 'threads:=2', '-p', 'rt.rt_priority:=10')
    assert fusion.wait_stderr('threads 2 -> 1', 120), fusion.stderr[-5:]


def test_a_missing_model_fails_at_start_with_its_path(procs: ProcGroup) -> None:
    fusion = _fusion(procs, '-p', 'model:=/nonexistent/net.yaml')
    assert fusion.wait(60) == 2
    assert any('/nonexistent/net.yaml' in line for line in fusion.stderr), fusion.stderr[-5:]


def test_a_model_without_a_decoder_is_refused_at_start(procs: ProcGroup) -> None:
    # The random-weight test network has no decoder section: nothing to fuse its output as.
    fusion = _fusion(procs, '-p', f'model:={ROOT / "models" / "rtf_testnet.yaml"}')
    assert fusion.wait(60) == 2
    assert any('no decoder section' in line for line in fusion.stderr), fusion.stderr[-5:]


def test_non_finite_incomplete_and_backward_inputs_are_counted_and_never_fused(
    procs: ProcGroup,
) -> None:
    import math  # noqa: PLC0415

    import rclpy  # noqa: PLC0415
    from diagnostic_msgs.msg import DiagnosticArray  # noqa: PLC0415
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
    from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: PLC0415
    from rt_fusion_msgs.msg import RadarObject, RadarObjects  # noqa: PLC0415
    from sensor_msgs.msg import Imu  # noqa: PLC0415

    _fusion(procs, '-p', 'sync.wait_for:=[imu]', '-p', 'diagnostics_period_s:=0.2')
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(procs.env['ROS_DOMAIN_ID']))
    node = rclpy.create_node('feeder', context=context)
    try:
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        imu_pub = node.create_publisher(Imu, '/fusion/in/imu', reliable)
        radar_pub = node.create_publisher(RadarObjects, '/fusion/in/radar', reliable)
        end = time.monotonic() + 90
        while imu_pub.get_subscription_count() == 0 or radar_pub.get_subscription_count() == 0:
            assert time.monotonic() < end, 'the fusion node never subscribed'
            time.sleep(0.05)  # paced: discovery

        def imu(stamp_s: int, gyro_z: float) -> Imu:
            msg = Imu()
            msg.header.stamp.sec = stamp_s
            msg.angular_velocity.z = gyro_z
            msg.linear_acceleration.z = 9.81
            return msg

        # The IMU and radar inputs are best effort (sensor streams, any driver matches): a sample
        # sent as the reader is still matching can be lost, so the bad samples and scans repeat
        # (new stamps) until the counters show them.
        latest: dict[str, str] = {}

        def on_diag(msg: DiagnosticArray) -> None:
            for st in msg.status:
                if st.name == '/fusion: fusion':
                    latest.update({kv.key: kv.value for kv in st.values})

        node.create_subscription(DiagnosticArray, '/diagnostics', on_diag, reliable)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        end = time.monotonic() + 90
        k = 0
        # ... and until a clean scan came after sync.camera_timeout_s (0.5 s without a camera
        # frame, on the wall clock too) and was fused on its own: a CI run whose first scans
        # were already counted stopped sending before that and saw none.
        while any(
            r not in latest.get('rejected', '')
            for r in ('radar_object_non_finite', 'imu_non_finite', 'imu_out_of_order')
        ) or not int(latest.get('frames_without_camera') or 0):
            assert time.monotonic() < end, f'diagnostics: {latest}'
            imu_pub.publish(imu(100 + 10 * k, math.nan))  # a corrupt frame's NaN gyro
            imu_pub.publish(imu(105 + 10 * k, 0.0))
            imu_pub.publish(imu(102 + 10 * k, 0.0))  # back in time
            cut = RadarObjects(complete=False)
            cut.header.stamp.sec = 110 + 2 * k
            radar_pub.publish(cut)
            half = RadarObjects(complete=True)
            half.header.stamp.sec = 111 + 2 * k
            bad = RadarObject(id=3)
            bad.position.x = math.inf
            half.objects = [bad, RadarObject(id=4)]
            radar_pub.publish(half)
            k += 1
            executor.spin_once(timeout_sec=0.3)
        for _ in range(10):  # a few more diagnostics: the final counts
            executor.spin_once(timeout_sec=0.3)
        rejected = [latest['rejected']]
        final = dict(latest)
    finally:
        node.destroy_node()
        context.try_shutdown()
    assert rejected, 'no fusion diagnostics'
    counts = dict(item.rsplit(' ', 1) for item in rejected[-1].split(', '))
    assert int(counts['imu_non_finite']) >= 1 and int(counts['imu_out_of_order']) >= 1
    # Every scan sent was refused or cleaned: as many incomplete as half-bad ones arrived.
    assert int(counts['radar_incomplete']) >= 1 and int(counts['radar_object_non_finite']) >= 1
    assert set(counts) == {
        'imu_non_finite',
        'imu_out_of_order',
        'radar_incomplete',
        'radar_object_non_finite',
    }
    # No camera at all: after sync.camera_timeout_s the clean scans are fused on their own.
    assert int(final['frames_without_camera']) >= 1, final
    assert int(final['frames_fused']) == 0 and 'camera' in final['missing'], final


def test_a_siren_in_the_microphone_ring_becomes_an_audio_event_and_bad_blocks_are_counted(
    procs: ProcGroup,
) -> None:
    """Blocks through a real shared-memory ring (as microphone_node writes them), a hand-made yelp
    siren 2 s into the stream: one siren event, decided within 300 ms past its confirmation
    (hearing.siren_confirm_hops) of the onset; bad blocks
    are refused with their reasons."""
    import rclpy  # noqa: PLC0415
    from diagnostic_msgs.msg import DiagnosticArray  # noqa: PLC0415
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: PLC0415
    from rt_fusion_msgs.msg import AudioChunk, AudioEvent  # noqa: PLC0415

    from rt_fusion.core.perception.hearing import HearingParams  # noqa: PLC0415
    from rt_fusion.core.shm import ShmRingWriter  # noqa: PLC0415
    from rt_fusion.ros.conversions import descriptor_to_msg, ns_to_time, time_to_ns  # noqa: PLC0415

    rate, block, onset_s = 48_000, 1024, 2.0
    t = np.arange(round(5.0 * rate)) / rate
    u = (t % 0.3) / 0.3
    yelp = 0.2 * np.sin(2 * np.pi * np.cumsum(700 + 800 * (1 - np.abs(2 * u - 1))) / rate)
    noise = np.random.default_rng(0).normal(0, 0.005, len(t))
    pcm = np.round((noise + np.where(t >= onset_s, yelp, 0.0)) * 32767).astype(np.int16)
    _fusion(procs, '-p', 'backend:=none', '-p', 'diagnostics_period_s:=0.2')
    segment = f'rt_fusion_test_audio_{procs.env["ROS_DOMAIN_ID"]}'
    ring = ShmRingWriter.create(segment, block * 2, 64, frame_id='mic')
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(procs.env['ROS_DOMAIN_ID']))
    node = rclpy.create_node('feeder', context=context)
    events: list[AudioEvent] = []
    latest: dict[str, str] = {}
    try:
        reliable = QoSProfile(depth=64, reliability=ReliabilityPolicy.RELIABLE)
        pub = node.create_publisher(AudioChunk, '/fusion/in/audio', reliable)
        node.create_subscription(AudioEvent, '/fusion/out/audio_events', events.append, reliable)

        def on_diag(msg: DiagnosticArray) -> None:
            for st in msg.status:
                if st.name == '/fusion: fusion':
                    latest.update({kv.key: kv.value for kv in st.values})

        node.create_subscription(DiagnosticArray, '/diagnostics', on_diag, reliable)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        end = time.monotonic() + 90
        while pub.get_subscription_count() == 0 or not latest:
            assert time.monotonic() < end, 'the fusion node never subscribed'
            executor.spin_once(timeout_sec=0.05)  # paced: discovery
        t0 = 1_000_000_000_000
        for k in range(0, len(pcm) - block + 1, block):
            ws = ring.acquire((block, 1), np.int16, 'pcm')
            ws.array[:, 0] = pcm[k : k + block]
            stamp = t0 + round(k * 1e9 / rate)
            desc = ring.commit(ws, stamp_ns=stamp, available_ns=time.time_ns())
            msg = AudioChunk(sample_rate=rate, channels=1, frames=block, first_sample_index=k)
            msg.header.stamp = ns_to_time(stamp)
            descriptor_to_msg(desc, msg.frame)
            pub.publish(msg)
            if k % (16 * block) == 0:  # the ring holds 64 blocks: keep within it
                assert pub.wait_for_all_acked(rclpy.duration.Duration(seconds=30))
                executor.spin_once(timeout_sec=0.01)
        bad = [  # (chunk, its stamp [s after t0])
            (AudioChunk(sample_rate=rate, channels=1, frames=0), 10),  # empty
            (AudioChunk(sample_rate=rate, channels=1, frames=4, samples=[1, 2, 3]), 10),  # size
            (AudioChunk(sample_rate=16_000, channels=1, frames=2, samples=[1, 2]), 10),  # rate
            (AudioChunk(sample_rate=rate, channels=1, frames=2, samples=[1, 2]), 1),  # back
            (AudioChunk(sample_rate=rate, channels=1, frames=2), 12),  # a ring elsewhere
        ]
        bad[-1][0].frame.boot_id = 'another-host'
        for msg, at_s in bad:
            msg.header.stamp = ns_to_time(t0 + at_s * 10**9)
            pub.publish(msg)
        end = time.monotonic() + 90
        while not (latest.get('audio_rejected', '').count(',') == 4 and events):
            assert time.monotonic() < end, f'events {events}, diagnostics {latest}'
            executor.spin_once(timeout_sec=0.2)
        late: list[AudioEvent] = []  # the topic is latched: a subscriber that joins now gets it
        latched = QoSProfile(
            depth=50,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        node.create_subscription(AudioEvent, '/fusion/out/audio_events', late.append, latched)
        end = time.monotonic() + 90
        while len(late) < len(events):
            assert time.monotonic() < end, f'a late subscriber got {late} of {events}'
            executor.spin_once(timeout_sec=0.2)
        assert [(e.event_class, e.active, time_to_ns(e.decided)) for e in late] == [
            (e.event_class, e.active, time_to_ns(e.decided)) for e in events
        ]
    finally:
        node.destroy_node()
        context.try_shutdown()
        ring.close()
    sirens = [e for e in events if e.event_class == 'siren' and e.active]
    assert len(sirens) == 1, events
    assert not [e for e in events if e.event_class == 'horn']
    delay_s = (time_to_ns(sirens[0].decided) - (t0 + round(onset_s * 1e9))) / 1e9
    hp = HearingParams()
    assert 0 <= delay_s <= 0.3 + (hp.siren_confirm_hops - hp.confirm_hops) * hp.hop_s, delay_s
    counts = dict(item.rsplit(' ', 1) for item in latest['audio_rejected'].split(', '))
    assert counts == {
        'audio_empty': '1',
        'audio_size_mismatch': '1',
        'audio_rate_changed': '1',
        'audio_out_of_order': '1',
        'audio_ring_elsewhere': '1',
    }
    assert latest['audio_lost_blocks'] == '0'


def _configured_with_runner(context: Any, runner: object, **params: Any) -> Any:
    """An in-process fusion node (no backend, not started), configured, with ``runner`` in
    place of its network: the tests' stand-in for what ``FrameRunner.run`` returns."""
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from rt_fusion.nodes.fusion_node import FusionNode  # noqa: PLC0415

    overrides = {'backend': 'none', 'autostart': False, **params}
    node = FusionNode(
        context=context,
        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
    )
    node.trigger_configure()
    node.runner = node.work.runner = runner
    return node


def _frame(array: np.ndarray, valid: bool = True, stamp_ns: int = 0) -> Any:
    """A stand-in for a received camera frame (a ring view): its pixels, descriptor and
    seqlock check."""
    from types import SimpleNamespace  # noqa: PLC0415

    return SimpleNamespace(
        array=array,
        desc=SimpleNamespace(encoding='bgr8', segment='', available_ns=0, stamp_ns=stamp_ns),
        valid=lambda: valid,
        release=lambda: True,
    )


def test_a_torn_camera_frame_still_fuses_its_radar_and_imu_and_is_counted_once() -> None:
    """The ring overwrote the camera frame while the detector read it: the frame's network
    output is garbage and never fused, but its radar scan and IMU samples still are (as when
    the camera is gone): the planner keeps getting objects. Before, the whole frame was
    dropped. In-process: the runner says the frame was torn."""
    pytest.importorskip('rclpy')

    from rt_fusion.core.sync import AlignedFrame  # noqa: PLC0415
    from tests.conftest import ros_context  # noqa: PLC0415

    class TornRunner:
        cuda = False
        zoom_note = ''

        def run(self, image: object, encoding: str, still_valid: object) -> bool:
            return False  # what FrameRunner.run says of a frame overwritten while read

        def release(self) -> None:
            pass

    with ros_context() as context:
        node = _configured_with_runner(context, TornRunner())
        frame = _frame(np.zeros((4, 4, 3), np.uint8), valid=False)
        stamp = time.time_ns()
        aligned = AlignedFrame(stamp, frame, None, {'front': None}, None, ('imu',), 0)
        node._publish(aligned, stamp, node.work.process(aligned))
        assert node.work.torn == 1
        assert node.work.frames == 1  # fused on what else the frame had
        ledger = node.work.frame_ledger()
        assert ledger['frames_torn'] == 1 and ledger['frames_fused'] == 0  # counted once
        node.trigger_cleanup()
        node.destroy_node()


@pytest.mark.parametrize('when_behind', [False, True])
def test_frames_released_together_run_the_network_on_the_newest_only(when_behind: bool) -> None:
    """A detector slower than the camera (ONNX Runtime on 2 CPU cores, 60-180 ms a frame): the
    frames that came in meanwhile are released together. Before, the network ran on each in
    turn, the queue grew until its bound dropped frames (a 30 Hz soak lost 45 % of them, P50
    460 ms). Now the older ones are fused without it (counted) and the newest gets it;
    ``infer_when_behind`` restores the old way. In-process: the runner records its frames."""
    pytest.importorskip('rclpy')

    from rt_fusion.core.sync import AlignedFrame  # noqa: PLC0415
    from tests.conftest import ros_context  # noqa: PLC0415

    seen: list[int] = []

    class RecordingRunner:
        cuda = False
        zoom_note = ''

        def run(self, image: np.ndarray, encoding: str, still_valid: object) -> None:
            seen.append(int(image[0, 0, 0]))  # no network output: fused on radar and IMU

        def release(self) -> None:
            pass

    with ros_context() as context:
        node = _configured_with_runner(context, RecordingRunner(), infer_when_behind=when_behind)
        t0 = time.time_ns()

        def released(k: int) -> AlignedFrame:
            frame = _frame(np.full((4, 4, 3), k, np.uint8))
            return AlignedFrame(t0 + k * 33_000_000, frame, None, {}, None, (), 0)

        assert node._process_ready([released(1), released(2), released(3)]) == 3
        assert node._process_ready([released(4)]) == 1  # caught up: one frame, inferred
        assert node.work.frames == 4
        assert seen == ([1, 2, 3, 4] if when_behind else [3, 4])
        assert node.work.infer_skipped_behind == (0 if when_behind else 2)
        assert node.work.infer_skipped == node.work.infer_skipped_behind
        node.trigger_cleanup()
        node.destroy_node()


def test_a_detector_stalled_for_half_a_second_loses_no_frame() -> None:
    """A CPU detector on a busy 2-core machine sometimes holds the worker 0.3-0.45 s (one
    frame). The aligner's queue bound was 8 frames (0.27 s at 30 Hz): a soak lost ~0.5 % of
    its frames to it. Now 16 (0.53 s): the worker blocked in the network while 14 frames
    arrive, then all of them fused. In-process, the real worker thread and aligner."""
    pytest.importorskip('rclpy')
    import threading  # noqa: PLC0415

    from tests.conftest import ros_context, wait_for  # noqa: PLC0415

    entered, go = threading.Event(), threading.Event()

    class StalledRunner:
        cuda = False
        zoom_note = ''

        def run(self, image: object, encoding: str, still_valid: object) -> None:
            entered.set()
            go.wait(60.0)  # the slow frame: held until the test has sent the rest

        def release(self) -> None:
            pass

    def frame(stamp: int) -> Any:
        return _frame(np.zeros((4, 4, 3), np.uint8), stamp_ns=stamp)

    with ros_context() as context:
        node = _configured_with_runner(context, StalledRunner(), infer_period_s=0.0)
        node.activate()
        try:
            t0 = time.time_ns()
            node._on_frame(frame(t0), '')
            assert entered.wait(60.0), 'the worker never ran the network'
            for k in range(1, 15):  # 14 more frames, 33 ms apart: 0.47 s of camera
                node._on_frame(frame(t0 + k * 33_000_000), '')
            go.set()
            dropped = node.aligner.stats['camera']
            wait_for(lambda: node.work.frames + dropped.dropped >= 15, 60.0)
            ledger = node.work.frame_ledger()
            assert ledger['frames_queue_dropped'] == 0, ledger
            assert node.work.frames == 15, ledger
        finally:
            go.set()
            node.deactivate()
            node.trigger_cleanup()
            node.destroy_node()


def test_frames_that_come_while_the_network_runs_beside_go_out_at_once() -> None:
    """``inference: beside`` (the default): the network has a thread of its own. A frame given
    to it is fused at once without its detections; the frames that come while it runs are fused
    at once without the network (counted: inference_skipped_busy), none waits behind it. Its
    result goes into the tracker when ready, at its frame's time; a frame it finds torn is
    counted once, as torn. In-process, the real worker and network threads and aligner."""
    pytest.importorskip('rclpy')
    import threading  # noqa: PLC0415

    from tests.conftest import ros_context, wait_for  # noqa: PLC0415

    entered, go = threading.Event(), threading.Event()
    freed: list[int] = []

    class StalledRunner:
        cuda = False
        zoom_note = ''

        def run(self, image: object, encoding: str, still_valid: object) -> bool:
            entered.set()
            go.wait(60.0)
            return False  # the ring overwrote the frame meanwhile: torn

        def release(self) -> None:
            pass

    def frame(stamp: int) -> Any:
        f = _frame(np.zeros((4, 4, 3), np.uint8), stamp_ns=stamp)
        f.release = lambda: freed.append(stamp)
        return f

    with ros_context() as context:
        node = _configured_with_runner(context, StalledRunner(), infer_period_s=0.0)
        assert node.params.inference == 'beside'
        node.activate()
        try:
            t0 = time.time_ns()
            node._on_frame(frame(t0), '')
            assert entered.wait(60.0), 'the network never ran'
            for k in range(1, 6):  # 5 more frames while the network holds the first
                node._on_frame(frame(t0 + k * 33_000_000), '')
            wait_for(lambda: node.work.frames >= 6, 60.0)  # all out, the network still busy
            assert node.work.lane.busy and not node.work.late_age_ns.summary().count
            # without the network: busy (or, released together, behind the newest)
            assert node.work.infer_skipped == 5 and node.work.infer_skipped_busy >= 1
            assert t0 not in freed and len(freed) == 5  # the network's frame is still read
            go.set()
            wait_for(lambda: node.work.late_age_ns.summary().count == 1, 60.0)
            assert t0 in freed
            ledger = node.work.frame_ledger()
            assert ledger['frames_torn'] == 1 and ledger['frames_fused'] == 5, ledger
        finally:
            go.set()
            node.deactivate()
            node.trigger_cleanup()
            node.destroy_node()

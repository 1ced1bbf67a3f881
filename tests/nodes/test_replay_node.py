"""replay_node as a real process on the real imu_radar_rio bag (MCAP), into real subscriber
processes: every message once, in order, with its recorded stamp — in lock-step and paced."""

from __future__ import annotations

import time

import pytest

from rt_fusion.core.bag import iter_messages
from rt_fusion.core.scenario.sensors import CameraModel
from tests.conftest import ProcGroup, shared_file

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration

SMALL = CameraModel()  # 640x360: the replay's behaviour does not depend on the frame size

BAG = 'imu_radar_rio/ti_mmwave_rospkg_demo_ros2/ti_mmwave_rospkg_demo_ros2.mcap'
TRIGGER = '/sensor_platform/radar_right/trigger'
IMU = '/sensor_platform/imu'


def _stamps(topic: str) -> list[int]:
    bag = shared_file(BAG).parent
    out = []
    for m in iter_messages(bag, [topic]):
        header = m.msg if topic == TRIGGER else m.msg.header
        out.append(header.stamp.sec * 10**9 + header.stamp.nanosec)
    return out


def _ns(msg: dict) -> int:  # type: ignore[type-arg]
    header = msg if 'stamp' in msg else msg['header']
    return header['stamp']['sec'] * 10**9 + header['stamp']['nanosec']


def _replay(procs: ProcGroup, *params: str) -> object:
    bag = shared_file(BAG).parent
    return procs.node('replay_node', '-r', '__node:=replay', '-p', f'bag:={bag}', *params)


def test_lockstep_delivers_every_message_once_in_order_with_its_stamp(procs: ProcGroup) -> None:
    want = _stamps(TRIGGER)
    assert len(want) == 413
    echo = procs.echo(
        '/radar/trigger',
        'std_msgs/msg/Header',
        '--count',
        str(len(want)),
        '--ack',
        '/replay/ack',
        '--timeout',
        '120',
    )
    replay = _replay(
        procs,
        '-p',
        f'topics:=[{TRIGGER}]',
        '-p',
        f'remap:=[{TRIGGER}->/radar/trigger]',
        '-p',
        'mode:=lockstep',
        '-p',
        'ack_timeout_s:=30.0',  # a busy machine may starve the echo for seconds
        '-p',
        'wait_subscribers_s:=120.0',
    )
    msgs, summary = echo.messages(150)
    assert summary['received'] == len(want)
    assert [_ns(m) for m in msgs] == want
    assert replay.read_until('REPLAYED ', 60)[1] == f'REPLAYED {len(want)} ack_timeouts=0'
    assert replay.wait(30) == 0


def test_realtime_at_rate_4_delivers_the_imu_as_recorded(procs: ProcGroup) -> None:
    want = _stamps(IMU)
    # Queues that hold the whole stream: a loaded machine may starve the echo for a while.
    echo = procs.echo(
        IMU,
        'sensor_msgs/msg/Imu',
        '--count',
        str(len(want)),
        '--timeout',
        '120',
        '--depth',
        '10000',
    )
    clock = procs.echo('/clock', 'rosgraph_msgs/msg/Clock', '--count', '50', '--timeout', '60')
    replay = _replay(
        procs,
        '-p',
        f'topics:=[{IMU}]',
        '-p',
        'rate:=4.0',
        '-p',
        'qos_depth:=10000',
        '-p',
        'wait_subscribers_s:=120.0',
    )
    msgs, summary = echo.messages(150)
    assert summary['received'] == len(want)
    assert [_ns(m) for m in msgs] == want
    ticks = [_ns(m['clock'] | {'stamp': m['clock']}) for m in clock.messages(60)[0]]
    assert len(ticks) == 50 and ticks == sorted(ticks)
    assert replay.wait(60) == 0


@pytest.mark.parametrize(
    ('param', 'name'),
    [
        ('topics:=[/nope]', 'topics'),
        ('mode:=backwards', 'mode'),
        ('remap:=[/a]', 'remap'),
    ],
)
def test_bad_parameters_fail_at_start_with_their_name(
    procs: ProcGroup, param: str, name: str
) -> None:
    replay = _replay(procs, '-p', param)
    assert replay.wait(60) == 2
    assert any(repr(name) in line for line in replay.stderr), replay.stderr[-5:]


def test_a_missing_bag_fails_at_start(procs: ProcGroup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    replay = procs.node('replay_node', '-p', f'bag:={tmp_path / "nope"}')
    assert replay.wait(60) == 2
    assert any("'bag'" in line and 'not found' in line for line in replay.stderr)


def test_a_generated_scenario_replays_in_lockstep_with_its_stamps(
    procs: ProcGroup, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    import yaml  # noqa: PLC0415

    from rt_fusion.core.scenario.generate import generate  # noqa: PLC0415
    from tests.conftest import ROOT  # noqa: PLC0415

    scenario = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'cut_in.yaml').read_text())
    generate(scenario, 10.0, 1, tmp_path, camera=SMALL)
    bag = tmp_path / 'bag'
    radar = [
        m.msg.header.stamp.sec * 10**9 + m.msg.header.stamp.nanosec
        for m in iter_messages(bag, ['/radar/out/objects'])
    ]
    assert len(radar) == 136
    echo = procs.echo(
        '/radar/out/objects',
        'rt_fusion_msgs/msg/RadarObjects',
        '--count',
        str(len(radar)),
        '--ack',
        '/replay/ack',
        '--timeout',
        '120',
    )
    replay = procs.node(
        'replay_node',
        '-r',
        '__node:=replay',
        '-p',
        f'bag:={bag}',
        '-p',
        'topics:=[/radar/out/objects]',
        '-p',
        'mode:=lockstep',
        '-p',
        'wait_subscribers_s:=120.0',
    )
    msgs, summary = echo.messages(150)
    assert summary['received'] == len(radar)
    assert [_ns(m) for m in msgs] == radar
    assert [m['measurement_counter'] for m in msgs] == list(range(len(radar)))
    assert any(m['objects'] for m in msgs)
    assert replay.read_until('REPLAYED ', 60)[1] == f'REPLAYED {len(radar)} ack_timeouts=0'


def test_radar_scans_take_their_stamps_from_the_trigger_topic(procs: ProcGroup) -> None:
    bag = shared_file(BAG).parent
    scans = '/ti_mmwave/radar_scan_pcl'
    want, last = [], None
    for m in iter_messages(bag, [scans, TRIGGER]):  # log order: the latest trigger per scan
        if m.topic == TRIGGER:
            last = m.msg.stamp.sec * 10**9 + m.msg.stamp.nanosec
        else:
            stamp = m.msg.header.stamp.sec * 10**9 + m.msg.header.stamp.nanosec
            want.append(last if last is not None else stamp)
    assert len(want) == 412
    echo = procs.echo(
        scans,
        'sensor_msgs/msg/PointCloud2',
        '--count',
        str(len(want)),
        '--ack',
        '/replay/ack',
        '--timeout',
        '120',
    )
    _replay(
        procs,
        '-p',
        f'topics:=[{scans}]',
        '-p',
        f'stamp_from:=[{scans}<-{TRIGGER}]',
        '-p',
        'mode:=lockstep',
        '-p',
        'wait_subscribers_s:=120.0',
    )
    msgs, summary = echo.messages(150)
    assert summary['received'] == len(want)
    assert [_ns(m) for m in msgs] == want
    assert msgs[10]['width'] > 0  # the points themselves are untouched


def test_generated_camera_frames_go_through_shared_memory(procs: ProcGroup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json  # noqa: PLC0415
    import zlib  # noqa: PLC0415

    import cv2  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    from rt_fusion.core.scenario.generate import generate  # noqa: PLC0415
    from tests.conftest import ROOT  # noqa: PLC0415

    scenario = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'stopped_car.yaml').read_text())
    generate(scenario, 1.0, 0, tmp_path, camera=SMALL)
    bag = tmp_path / 'bag'
    topic = '/camera/out/image/compressed'
    src = list(iter_messages(bag, [topic]))
    ref = [
        zlib.crc32(cv2.imdecode(np.frombuffer(m.msg.data, np.uint8), cv2.IMREAD_COLOR).data)
        for m in src
    ]
    listener = procs.node(
        'frame_probe_node',
        '-p',
        'role:=listener',
        '-p',
        f'count:={len(src)}',
        '-p',
        'echo:=true',
        '-p',
        'transport:=shm',
        '-p',
        'timeout_s:=60.0',
        '-r',
        '__node:=listener',
        '-r',
        '~/in/frames:=/camera/out/image',
        name='listener',
    )
    _replay_generated = procs.node(
        'replay_node',
        '-r',
        '__node:=replay',
        '-p',
        f'bag:={bag}',
        '-p',
        f'topics:=[{topic}]',
        '-p',
        f'shm:=[{topic}->/camera/out/image]',
        '-p',
        'wait_subscribers_s:=120.0',
    )
    lines, summary = listener.summary(90)
    frames = [json.loads(line) for line in lines]
    assert summary['received'] == len(src) == 30
    assert [f['crc32'] for f in frames] == ref  # decoded into the slots, bit-exact
    stamps = [m.msg.header.stamp.sec * 10**9 + m.msg.header.stamp.nanosec for m in src]
    assert [f['stamp_ns'] for f in frames] == stamps
    assert frames[0]['shape'] == [360, 640, 3] and frames[0]['encoding'] == 'bgr8'
    assert _replay_generated.wait(30) == 0


def test_a_corrupt_chunk_is_reported_and_skipped_or_refused_with_strict(
    procs: ProcGroup, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """8 KB of random bytes in the middle of a generated bag (it carries chunk CRCs): the
    replay names the chunk (topics, time range, messages) and sends every other message; with
    strict:=true it refuses the bag at start-up. Before, all of it replayed as valid data."""
    import numpy as np  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    from rt_fusion.core.bag_integrity import verify  # noqa: PLC0415
    from rt_fusion.core.scenario.generate import generate  # noqa: PLC0415
    from tests.conftest import ROOT  # noqa: PLC0415

    scenario = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'cut_in.yaml').read_text())
    generate(scenario, 6.0, 1, tmp_path, camera=SMALL)
    bag = tmp_path / 'bag'
    total = sum(1 for _ in iter_messages(bag, decode=False))
    mcap = next(bag.glob('*.mcap'))
    with mcap.open('r+b') as f:
        f.seek(mcap.stat().st_size // 2)
        f.write(np.random.default_rng(3).integers(0, 256, 8192, dtype=np.uint8).tobytes())
    report = verify(bag)
    assert len(report.corrupt) == 1 and report.skipped > 0

    strict = procs.node('replay_node', '-p', f'bag:={bag}', '-p', 'strict:=true', name='strict')
    assert strict.wait(60) == 2
    assert any("'bag'" in line and 'corrupt' in line for line in strict.stderr), strict.stderr

    replay = procs.node('replay_node', '-p', f'bag:={bag}', '-p', 'mode:=fast')
    before, line = replay.read_until('REPLAYED ', 120)
    sent = total - report.skipped
    assert line == f'REPLAYED {sent} ack_timeouts=0 skipped_corrupt={report.skipped}'
    corrupt = [x for x in before if x.startswith('CORRUPT ')]
    assert len(corrupt) == 1 and 'CRC mismatch' in corrupt[0] and '/imu/out/imu' in corrupt[0]
    assert replay.wait(60) == 0


def test_loops_replay_the_bag_again_with_increasing_stamps(procs: ProcGroup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """loops:=3 sends every message three times; restamped stamps keep increasing across the
    passes (a soak test replays a scenario for 30 minutes this way)."""
    import yaml  # noqa: PLC0415

    from rt_fusion.core.scenario.generate import generate  # noqa: PLC0415
    from tests.conftest import ROOT  # noqa: PLC0415

    scenario = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'cut_in.yaml').read_text())
    generate(scenario, 2.0, 1, tmp_path, camera=SMALL)
    bag = tmp_path / 'bag'
    n = sum(1 for _ in iter_messages(bag, ['/radar/out/objects']))
    echo = procs.echo(
        '/radar/out/objects',
        'rt_fusion_msgs/msg/RadarObjects',
        '--count',
        str(3 * n),
        '--ack',
        '/replay/ack',
        '--timeout',
        '120',
    )
    replay = _replay_bag(
        procs,
        bag,
        '-p',
        'topics:=[/radar/out/objects]',
        '-p',
        'mode:=lockstep',
        '-p',
        'ack_topic:=/replay/ack',
        '-p',
        'restamp:=true',
        '-p',
        'loops:=3',
        '-p',
        'wait_subscribers_s:=120.0',
        '-p',
        'ack_timeout_s:=30.0',  # a busy machine may starve the echo for seconds
    )
    msgs, summary = echo.messages(180)
    assert summary['received'] == 3 * n
    stamps = [_ns(m) for m in msgs]
    passes = [stamps[k * n : (k + 1) * n] for k in range(3)]
    # Each pass later than the one before; within a pass the recorded offsets (several radars
    # share the topic, so the stamps need not be monotonic within a pass).
    assert min(passes[1]) > max(passes[0]) and min(passes[2]) > max(passes[1])
    offsets = [[t - p[0] for t in p] for p in passes]
    assert offsets[0] == offsets[1] == offsets[2]
    assert replay.read_until('REPLAYED ', 60)[1] == f'REPLAYED {3 * n} ack_timeouts=0'


def _replay_bag(procs: ProcGroup, bag: object, *params: str) -> object:
    return procs.node('replay_node', '-r', '__node:=replay', '-p', f'bag:={bag}', *params)


def test_generated_microphone_blocks_go_through_shared_memory(procs: ProcGroup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The replay carries the microphone as microphone_node does: each block into its ring, the
    AudioChunk with the slot's descriptor and no inline samples; read in place, the samples are
    the recorded ones (lock-step: each block is read before it is acknowledged)."""
    import threading  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415
    import rclpy  # noqa: PLC0415
    import yaml  # noqa: PLC0415
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
    from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: PLC0415
    from rt_fusion_msgs.msg import AudioChunk  # noqa: PLC0415
    from std_msgs.msg import UInt64  # noqa: PLC0415

    from rt_fusion.core.scenario.generate import generate  # noqa: PLC0415
    from rt_fusion.core.shm import ShmRingReader  # noqa: PLC0415
    from rt_fusion.ros import compat  # noqa: PLC0415
    from rt_fusion.ros.conversions import msg_to_descriptor  # noqa: PLC0415
    from tests.conftest import ROOT  # noqa: PLC0415

    scenario = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'stopped_car.yaml').read_text())
    generate(scenario, 1.0, 0, tmp_path, camera=SMALL)
    bag = tmp_path / 'bag'
    topic = '/microphone/out/audio'
    recorded = [np.asarray(m.msg.samples, np.int16) for m in iter_messages(bag, [topic])]
    assert len(recorded) == 46
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(procs.env['ROS_DOMAIN_ID']))
    got: list[tuple[str, int, np.ndarray]] = []
    done = threading.Event()
    try:
        node = rclpy.create_node('audio_listener', context=context)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        ack = node.create_publisher(UInt64, '/replay/ack', reliable)
        readers: dict[str, ShmRingReader] = {}

        def on_chunk(msg: AudioChunk) -> None:
            desc = msg_to_descriptor(msg.frame)
            reader = readers.get(desc.segment) or ShmRingReader.attach(desc.segment)
            readers[desc.segment] = reader
            view = reader.read(desc)
            got.append((desc.segment, len(msg.samples), np.array(view.array).reshape(-1)))
            ack.publish(UInt64(data=len(got)))
            if len(got) == len(recorded):
                done.set()

        node.create_subscription(AudioChunk, topic, on_chunk, reliable)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        replay = procs.node(
            'replay_node',
            '-r',
            '__node:=replay',
            '-p',
            f'bag:={bag}',
            '-p',
            f'topics:=[{topic}]',
            '-p',
            f'shm:=[{topic}->{topic}]',
            '-p',
            'mode:=lockstep',
            '-p',
            'wait_subscribers_s:=120.0',
        )
        end = time.monotonic() + 120.0
        while not done.is_set() and time.monotonic() < end and replay.popen.poll() is None:
            executor.spin_once(timeout_sec=0.1)
        assert replay.read_until('REPLAYED ', 60)[1] == f'REPLAYED {len(recorded)} ack_timeouts=0'
        for reader in readers.values():
            reader.close()
        executor.shutdown()
        node.destroy_node()
    finally:
        compat.try_shutdown(context=context)
    assert len(got) == len(recorded)
    assert {segment for segment, _n, _a in got} == {got[0][0]} and got[0][0]  # one ring
    assert all(n == 0 for _s, n, _a in got)  # no inline samples: the ring carries them
    for (_s, _n, samples), ref in zip(got, recorded, strict=True):
        np.testing.assert_array_equal(samples, ref)


def test_work_ahead_keeps_the_order_and_raises_an_error_at_its_place() -> None:
    import threading  # noqa: PLC0415

    from rt_fusion.nodes.replay_node import _ahead  # noqa: PLC0415

    stop = threading.Event()
    assert list(_ahead(iter(range(50)), lambda k: k * k, 4, stop)) == [
        (k, k * k) for k in range(50)
    ]

    def work(k: int) -> int:
        if k == 3:
            raise ValueError('frame 3 does not decode')
        return k

    got: list[int] = []
    ahead = _ahead(iter(range(10)), work, 4, stop)
    got += [next(ahead)[0] for _ in range(3)]
    with pytest.raises(ValueError, match='frame 3'):
        next(ahead)
    assert got == [0, 1, 2]
    stop.set()  # a stopped replay ends the worker and the loop
    assert list(_ahead(iter(range(10)), work, 4, stop)) == []


def _small_bag(tmp_path, n: int):  # type: ignore[no-untyped-def]
    from tests.core.test_bag_integrity import _write  # noqa: PLC0415

    bag = tmp_path / 'bag'
    _write(bag, n)
    return bag, next(bag.glob('*.mcap'))


def _damage(mcap, at: int, nbytes: int = 1024) -> None:  # type: ignore[no-untyped-def]
    import numpy as np  # noqa: PLC0415

    with mcap.open('r+b') as f:
        f.seek(at)
        f.write(np.random.default_rng(4).integers(0, 256, nbytes, dtype=np.uint8).tobytes())


@pytest.mark.parametrize('shape', ['every_chunk', 'index'])
def test_a_bag_with_nothing_readable_is_refused_at_start_with_one_line(
    procs: ProcGroup, tmp_path, shape: str
) -> None:  # type: ignore[no-untyped-def]
    """Every chunk corrupt (one chunk, 1 KB damaged) or the chunk index damaged: the replay
    refuses the bag at start-up, naming it, with status 2 (before, the first hung the replay)."""
    bag, mcap = _small_bag(tmp_path, 10 if shape == 'every_chunk' else 120)
    at = mcap.stat().st_size // 3 if shape == 'every_chunk' else mcap.stat().st_size - 300
    _damage(mcap, at, 1024 if shape == 'every_chunk' else 64)
    replay = procs.node('replay_node', '-p', f'bag:={bag}', '-p', 'mode:=fast')
    assert replay.wait(120) == 2, replay.tail()
    fatal = [x for x in replay.stderr if x.startswith('rt_fusion: ParameterError')]
    assert len(fatal) == 1 and "'bag'" in fatal[0], replay.tail()
    why = 'every chunk is corrupt' if shape == 'every_chunk' else 'not a readable rosbag2'
    assert why in fatal[0], fatal


def test_a_corrupt_first_chunk_replays_the_rest_counted_per_replayed_topic(
    procs: ProcGroup, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from rt_fusion.core.bag_integrity import verify  # noqa: PLC0415

    bag, mcap = _small_bag(tmp_path, 120)
    _damage(mcap, 2000)
    report = verify(bag)
    lost = report.skipped_of({'/speed'})['/speed']
    assert report.skipped > lost  # the chunk held camera frames too, which are not replayed
    replay = procs.node(
        'replay_node', '-p', f'bag:={bag}', '-p', 'mode:=fast', '-p', 'topics:=[/speed]'
    )
    _, line = replay.read_until('REPLAYED ', 120)
    assert line == f'REPLAYED {120 - lost} ack_timeouts=0 skipped_corrupt={lost}'
    assert replay.wait(60) == 0


def test_a_bag_that_fails_while_it_plays_ends_the_replay_with_status_2(
    procs: ProcGroup, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """A chunk damaged after the start-up check (a disk failing under a running replay): one
    error line and status 2, not a traceback in a thread and a process that stays up."""
    bag, mcap = _small_bag(tmp_path, 120)
    replay = procs.node(
        'replay_node', '-p', f'bag:={bag}', '-p', 'mode:=fast', '-p', 'topics:=[/speed]',
        '-p', 'wait_subscribers_s:=600.0',
    )  # fmt: skip
    assert replay.wait_stderr('bag integrity: 5/5 chunks checked, 0 corrupt', 120), replay.tail()
    _damage(mcap, mcap.stat().st_size // 2)  # while it waits for a subscriber
    procs.echo('/speed', 'std_msgs/msg/Float64', '--timeout', '120')
    assert replay.wait(120) == 2, replay.tail()
    assert any('replay failed: ' in x and 'checksum' in x.lower() for x in replay.stderr), (
        replay.tail()
    )
    assert not any('Traceback' in x for x in replay.stderr), replay.tail()


def test_a_replay_to_an_absent_graph_fails_naming_the_topics_nobody_took(
    procs: ProcGroup, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """require_subscribers:=true (as the launch files set it): nobody subscribes within the
    wait, so the replay ends with status 2 naming the topics, instead of playing to nobody."""
    bag, _mcap = _small_bag(tmp_path, 10)
    replay = procs.node(
        'replay_node', '-p', f'bag:={bag}', '-p', 'topics:=[/speed]',
        '-p', 'wait_subscribers_s:=2.0', '-p', 'require_subscribers:=true',
    )  # fmt: skip
    assert replay.wait(120) == 2, replay.tail()
    named = [x for x in replay.stderr if 'no subscriber after 2 s: /speed' in x]
    assert named, replay.tail()

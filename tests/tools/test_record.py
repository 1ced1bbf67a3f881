"""tools/record.py as a real process: a generated scenario replayed by replay_node and recorded
again gives the same bytes; SIGINT mid-run leaves a valid bag; a shared-memory camera stream is
recorded as full images."""

from __future__ import annotations

import signal
import sys
import time
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from rt_fusion.core.bag import image_to_array, iter_messages
from rt_fusion.core.scenario.bagout import typestore
from rt_fusion.core.scenario.generate import generate
from rt_fusion.core.scenario.sensors import CameraModel
from tests.conftest import ROOT, ProcGroup, shared_file

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration

TOPICS = {
    '/imu/out/imu': 'sensor_msgs/msg/Imu',
    '/radar/out/objects': 'rt_fusion_msgs/msg/RadarObjects',
    '/microphone/out/audio': 'rt_fusion_msgs/msg/AudioChunk',
    '/camera/out/image/compressed': 'sensor_msgs/msg/CompressedImage',
}


def _scenario(tmp: Path, seconds: float, bag_version: int = 9) -> Path:
    sc = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'cut_in.yaml').read_text())
    generate(sc, seconds, 2, tmp / 'scenario', camera=CameraModel(), bag_version=bag_version)
    return tmp / 'scenario' / 'bag'


def _record(procs: ProcGroup, out: Path, *topics: str) -> object:
    rec = procs.tool('record.py', '--out', str(out), *topics, name='record')
    rec.read_until('READY', 60)
    return rec


def _replay(procs: ProcGroup, bag: Path, topics: list[str], *params: str) -> object:
    return procs.node(
        'replay_node',
        '-r',
        '__node:=replay',
        '-p',
        f'bag:={bag}',
        '-p',
        f'topics:=[{", ".join(topics)}]',
        '-p',
        'qos_depth:=5000',
        '-p',
        'wait_subscribers_s:=120.0',
        *params,
    )


def test_replay_then_record_gives_back_the_same_messages(procs: ProcGroup, tmp_path: Path) -> None:
    """Through bags of the metadata version Humble's ros2 bag reads (8), both ways."""
    bag = _scenario(tmp_path, 3.0, bag_version=8)
    out = tmp_path / 'recorded'
    total = sum(1 for _ in iter_messages(bag, list(TOPICS), decode=False))
    rec = _record(
        procs,
        out,
        '--bag-version',
        '8',
        '--depth',
        '5000',
        '--count',
        str(total),  # ends by itself once everything replayed has been written
        *(f'{t}:{ty}' for t, ty in TOPICS.items()),
    )
    replay = _replay(procs, bag, list(TOPICS))
    assert replay.read_until('REPLAYED ', 60)[1].startswith('REPLAYED ')
    assert replay.wait(30) == 0
    assert rec.wait(30) == 0
    ts = typestore()
    for topic, typename in TOPICS.items():
        # Decoded and serialized again the same way, every field compares (DDS may add CDR
        # padding after the last byte, so the stored bytes themselves can differ at the end).
        original = [ts.serialize_cdr(m.msg, typename) for m in iter_messages(bag, [topic])]
        recorded = [ts.serialize_cdr(m.msg, typename) for m in iter_messages(out, [topic])]
        assert len(recorded) == len(original), topic
        assert recorded == original, topic  # stamps and values identical, in order
    meta = yaml.safe_load((out / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    assert meta['version'] == 8 and 'Humble' in meta['custom_data']['rt_fusion.readable_by']


def test_sigint_mid_run_leaves_a_valid_bag(procs: ProcGroup, tmp_path: Path) -> None:
    bag = _scenario(tmp_path, 10.0)
    out = tmp_path / 'cut'
    rec = _record(procs, out, '/imu/out/imu:sensor_msgs/msg/Imu')
    _replay(procs, bag, ['/imu/out/imu'])  # real time: 10 s
    time.sleep(5.0)  # paced: the recorder is stopped mid-replay on purpose
    rec.popen.send_signal(signal.SIGINT)
    assert rec.wait(30) == 0
    result = rec.read_until('RESULT ', 10)[1]
    got = [m.msg for m in iter_messages(out, ['/imu/out/imu'])]
    assert f'messages={len(got)} ' in result
    assert 50 < len(got) < 2000  # stopped mid-run, with what had arrived
    want = [m.msg for m in iter_messages(bag, ['/imu/out/imu'])][: len(got)]
    assert [m.header.stamp.nanosec for m in got] == [m.header.stamp.nanosec for m in want]


def test_a_shared_memory_camera_stream_is_recorded_as_images(
    procs: ProcGroup, tmp_path: Path
) -> None:
    video = str(shared_file('camera/solidWhiteRight.mp4'))
    out = tmp_path / 'camera'
    rec = _record(procs, out, '--count', '20', '/camera/out/image:rt_fusion_msgs/msg/ShmFrame')
    camera = procs.node(
        'camera_node',
        '-r',
        '__node:=camera',
        '-p',
        'source:=file',
        '-p',
        f'file:={video}',
        '-p',
        'count:=20',
        '-p',
        'ring_slots:=32',
        '-p',
        'wait_subscribers_s:=120.0',
        name='camera',
    )
    assert camera.wait(180) == 0
    assert rec.wait(60) == 0  # --count: all 20 frames written
    cap = cv2.VideoCapture(video)
    ref = [zlib.crc32(cap.read()[1].data) for _ in range(20)]
    msgs = list(iter_messages(out, ['/camera/out/image']))
    assert [m.msgtype for m in msgs] == ['sensor_msgs/msg/Image'] * 20
    got = [
        zlib.crc32(np.ascontiguousarray(image_to_array(m.msg, m.msgtype)[0]).data) for m in msgs
    ]
    assert got == ref


def test_a_generated_scenario_replays_in_lockstep_message_for_message(
    procs: ProcGroup, tmp_path: Path
) -> None:
    """Every message of a 10 s scenario (all topics), in lock-step with the recorder: each one
    arrives once, in the bag's order, with its original stamp and values."""
    bag = _scenario(tmp_path, 10.0)
    ts = typestore()
    original = list(iter_messages(bag))
    types = {m.topic: m.msgtype for m in original}
    out = tmp_path / 'lockstep'
    rec = _record(procs, out, '--ack', '/replay/ack', *(f'{t}:{ty}' for t, ty in types.items()))
    replay = _replay(
        procs, bag, sorted(types), '-p', 'mode:=lockstep', '-p', 'publish_clock:=false'
    )
    assert replay.read_until('REPLAYED ', 240)[1] == f'REPLAYED {len(original)} ack_timeouts=0'
    rec.popen.send_signal(signal.SIGINT)
    assert rec.wait(30) == 0
    recorded = list(iter_messages(out))
    assert [m.topic for m in recorded] == [m.topic for m in original]  # once each, in order
    for a, b in zip(original, recorded, strict=True):
        assert ts.serialize_cdr(a.msg, a.msgtype) == ts.serialize_cdr(b.msg, b.msgtype), a.topic


def _talker(procs: ProcGroup, topic: str, *args: str) -> object:
    proc = procs.spawn(
        [sys.executable, '-m', 'tests.tools.qos_talker', topic, *args], f'talker {topic}'
    )
    proc.read_until('READY', 60)
    return proc


def test_best_effort_publishers_are_recorded_with_the_qos_they_offer(
    procs: ProcGroup, tmp_path: Path
) -> None:
    """A reliable-only recorder matched no best-effort publisher and recorded nothing (exit 0).
    Now: one best-effort topic found in the graph, one typed on the command line whose
    best-effort publisher starts after the recorder, one reliable: all three are recorded.
    The recording ends once each topic has announced its first message (no message count: on a
    busy machine the fast topics could reach it before the late one is even discovered)."""
    _talker(procs, '/rec/found', '--best-effort', '--rate', '5')
    out = tmp_path / 'qos'
    rec = procs.tool(
        'record.py',
        '--out',
        str(out),
        '/rec/found',
        '/rec/later:std_msgs/msg/UInt64',
        '/rec/reliable:std_msgs/msg/UInt64',
        name='record',
    )
    ready = rec.read_until('READY', 60)[1]
    assert '/rec/found=best_effort' in ready
    _talker(procs, '/rec/later', '--best-effort')
    _talker(procs, '/rec/reliable')
    seen: list[str] = []
    waiting = {'FIRST /rec/found', 'FIRST /rec/later', 'FIRST /rec/reliable'}
    while waiting:  # in any order
        before, line = rec.read_until('FIRST ', 120)
        seen += [*before, line]
        waiting.discard(line)
    assert 'QOS /rec/later=best_effort' in seen
    rec.popen.send_signal(signal.SIGINT)
    assert rec.wait(60) == 0
    counts = {
        t: sum(1 for _ in iter_messages(out, [t]))
        for t in ('/rec/found', '/rec/later', '/rec/reliable')
    }
    assert all(n > 0 for n in counts.values()), counts


def test_a_topic_that_records_nothing_fails_with_its_name(
    procs: ProcGroup, tmp_path: Path
) -> None:
    _talker(procs, '/rec/alive', '--best-effort')
    rec = procs.tool(
        'record.py',
        '--out',
        str(tmp_path / 'silent'),
        '--count',
        '20',
        '/rec/alive',
        '/rec/nobody:std_msgs/msg/UInt64',
        name='record',
    )
    assert rec.wait(120) == 1
    assert 'silent=1' in rec.read_until('RESULT ', 10)[1]
    assert rec.wait_stderr("no message recorded on ['/rec/nobody']")


def test_bad_qos_arguments_fail_with_the_option_named(procs: ProcGroup, tmp_path: Path) -> None:
    out = str(tmp_path / 'x')
    rec = procs.tool('record.py', '--out', out, '--qos', '/a=sometimes', '/a:std_msgs/msg/UInt64')
    assert rec.wait(60) == 2
    assert rec.wait_stderr("--qos '/a=sometimes'")


def test_a_recording_of_the_graph_decodes_from_its_own_schemas_for_the_layout_s_panels(
    procs: ProcGroup, tmp_path: Path
) -> None:
    """What Foxglove does with an MCAP, without Foxglove: each message decoded by Foxglove's
    Python MCAP reader and ROS 2 decoder (mcap, mcap-ros2-support) from the schemas the file
    embeds (custom types included), equal to what rosbags reads; and every topic the committed
    layout's panels name for a recording is there, with a type that panel draws."""
    pytest.importorskip('mcap_ros2')
    import json  # noqa: PLC0415

    from mcap.reader import make_reader  # noqa: PLC0415
    from mcap_ros2.decoder import DecoderFactory  # noqa: PLC0415

    from rt_fusion.ros import graph  # noqa: PLC0415
    from rt_fusion.ros.harness import launching  # noqa: PLC0415
    from tests.conftest import VENV, make_scenario  # noqa: PLC0415

    if not launching.available() or not (VENV / 'lib' / 'rt_fusion' / 'replay_node').exists():
        pytest.skip('launch/launch_ros or the ament layout missing: run make setup')
    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 4, 13)
    procs.spawn(
        [str(VENV / 'bin' / 'ros2'), 'launch', 'rt_fusion', 'replay.launch.py', f'bag:={bag}',
         'loops:=0'],
        'ros2 launch', {'AMENT_PREFIX_PATH': str(VENV)},
    )  # fmt: skip
    layout = json.loads((ROOT / 'config' / 'foxglove_layout.json').read_text())
    panels = _panels(layout['content'])
    image_topic = panels['Image']['imageMode']['imageTopic']
    scene_topics = [t for t in panels['ThreeDee']['topics'] if t in graph.RECORDED_SCENE]
    custom = ['/' + graph.OBJECTS_TOPIC, '/' + graph.TRAJECTORY_TOPIC, '/' + graph.RADAR_TOPIC]
    topics = [image_topic, *scene_topics, graph.TF_TOPIC, graph.TF_STATIC_TOPIC, *custom]
    out = tmp_path / 'recorded'
    rec = procs.tool(
        'record.py', '--out', str(out), '--duration', '6', '--discover-s', '180', *topics,
        name='record',
    )  # fmt: skip
    assert rec.wait(400) == 0, rec.tail()
    decoded: dict[str, list[object]] = {}
    schemas: dict[str, str] = {}
    with next(out.glob('*.mcap')).open('rb') as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        for schema, channel, _message, msg in reader.iter_decoded_messages():
            decoded.setdefault(channel.topic, []).append(msg)
            schemas[channel.topic] = schema.name if schema is not None else ''
    assert set(decoded) == set(topics), (sorted(decoded), topics)
    for topic in topics:  # as many as rosbags reads, and the same values where compared
        assert len(decoded[topic]) == sum(1 for _ in iter_messages(out, [topic], decode=False))
    # The layout's panels take these types: Image (sensor_msgs/Image), 3D (MarkerArray, /tf).
    assert schemas[image_topic] == 'sensor_msgs/msg/Image'
    assert all(schemas[t] == 'visualization_msgs/msg/MarkerArray' for t in scene_topics)
    follow = panels['ThreeDee']['followTf']
    frames = {t.child_frame_id for m in decoded[graph.TF_TOPIC] for t in m.transforms}
    assert follow in frames, frames
    image = decoded[image_topic][0]
    assert image.width * image.height > 0 and len(image.data) >= image.width * image.height
    # Custom types decode field by field as rosbags (the installed definitions) reads them.
    objects = [m.msg for m in iter_messages(out, ['/' + graph.OBJECTS_TOPIC])]
    first = decoded['/' + graph.OBJECTS_TOPIC]
    assert [len(m.objects) for m in first] == [len(m.objects) for m in objects]
    assert any(m.objects for m in first)
    a, b = next((x, y) for x, y in zip(first, objects, strict=True) if x.objects)
    assert (a.objects[0].id, a.objects[0].position.x) == (b.objects[0].id, b.objects[0].position.x)


def _panels(node: dict[str, object]) -> dict[str, dict[str, object]]:
    """A layout's panels by type: their configurations."""
    if node.get('type') == 'panel':
        return {str(node['panelType']): dict(node['config'])}  # type: ignore[call-overload]
    out: dict[str, dict[str, object]] = {}
    for item in node.get('items', []):  # type: ignore[attr-defined]
        out |= _panels(item['content'])
    return out

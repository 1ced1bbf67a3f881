"""viewer_node during a replay: a Foxglove WebSocket client (``websockets``, the protocol
``foxglove.sdk.v1`` the Foxglove app speaks) connects, subscribes to every channel the node
advertises, and receives messages on each that decode with the schema advertised for it."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rt_fusion.ros.harness import launching
from tests.conftest import VENV, ProcGroup, make_scenario, ros_context, wait_for

pytestmark = pytest.mark.integration

PROTOCOL = 'foxglove.sdk.v1'


def _decoder(channel: dict[str, Any]) -> Any:
    """A function that decodes a channel's payload with the schema the server advertised."""
    if channel['encoding'] == 'json':
        return json.loads
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: PLC0415

    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel['schema']))
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(channel['schemaName']))
    return cls.FromString


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


async def _listen(url: str, until: Any, deadline_s: float) -> dict[str, Any]:
    """Subscribes to every advertised channel; per topic, the channel and what arrived."""
    import websockets  # noqa: PLC0415

    got: dict[str, Any] = {}
    subs: dict[int, dict[str, Any]] = {}
    async with websockets.connect(url, subprotocols=[PROTOCOL], max_size=None) as ws:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end and not until(got):
            try:
                raw = await asyncio.wait_for(ws.recv(), 0.5)
            except TimeoutError:
                continue
            if isinstance(raw, str):
                op = json.loads(raw)
                if op['op'] == 'advertise':
                    new = [{'id': 1000 + c['id'], 'channelId': c['id']} for c in op['channels']]
                    for c in op['channels']:
                        subs[1000 + c['id']] = c
                        got[c['topic']] = {'channel': c, 'messages': [], 'decode': _decoder(c)}
                    await ws.send(json.dumps({'op': 'subscribe', 'subscriptions': new}))
                continue
            if raw[0] == 0x01:  # messageData: opcode, subscription id, log time, payload
                (sub,) = struct.unpack_from('<I', raw, 1)
                entry = got[subs[sub]['topic']]
                if len(entry['messages']) < 5:
                    entry['messages'].append(entry['decode'](bytes(raw[13:])))
    return got


def test_a_foxglove_client_gets_every_channel_during_a_replay(
    tmp_path: Path, procs: ProcGroup
) -> None:
    pytest.importorskip('foxglove')
    pytest.importorskip('websockets')
    if not launching.available() or not (VENV / 'lib' / 'rt_fusion' / 'replay_node').exists():
        pytest.skip('launch/launch_ros or the ament layout missing: run make setup')
    from rt_fusion_msgs.msg import AudioEvent  # noqa: PLC0415

    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 4, 11)
    port, page = _free_port(), _free_port()
    launch = procs.spawn(
        [str(VENV / 'bin' / 'ros2'), 'launch', 'rt_fusion', 'replay.launch.py', f'bag:={bag}',
         'loops:=0', 'viewer:=true', f'viewer_port:={port}', f'viewer_page_port:={page}'],
        'ros2 launch', {'AMENT_PREFIX_PATH': str(VENV)},
    )  # fmt: skip
    url = f'ws://127.0.0.1:{port}'
    said = f'Foxglove WebSocket on {url}'  # the viewer's line (launch: stdout or stderr)
    assert wait_for(
        lambda: any(said in x for x in [*launch.stderr, *list(launch.lines.queue)]), 240
    ), launch.tail()
    # No siren in this scenario: an audio event published here, as the fusion would.
    stop = threading.Event()

    def siren() -> None:
        import rclpy  # noqa: PLC0415

        with ros_context(int(procs.env['ROS_DOMAIN_ID'])) as context:
            node = rclpy.create_node('siren', context=context)
            pub = node.create_publisher(AudioEvent, '/fusion/out/audio_events', 10)
            msg = AudioEvent(event_class='siren', probability=0.9, active=True)
            while not stop.wait(0.2):  # paced: a stream of events until the viewer has one
                msg.header.stamp = node.get_clock().now().to_msg()
                pub.publish(msg)
            node.destroy_node()

    thread = threading.Thread(target=siren, daemon=True)
    thread.start()
    try:
        got = asyncio.run(
            _listen(url, lambda g: len(g) == 7 and all(e['messages'] for e in g.values()), 240)
        )
    finally:
        stop.set()
        thread.join(10)
    schemas = {topic: e['channel']['schemaName'] for topic, e in got.items()}
    assert schemas == {
        '/camera/image': 'foxglove.CompressedImage',
        '/tracks': 'foxglove.SceneUpdate',
        '/radar': 'foxglove.SceneUpdate',
        '/plan': 'foxglove.SceneUpdate',
        '/tf': 'foxglove.FrameTransforms',
        '/audio_events': 'foxglove.Log',
        '/health': 'rt_fusion.Health',
    }, schemas
    missing = [t for t, e in got.items() if not e['messages']]
    assert not missing, (missing, launch.tail())
    image = got['/camera/image']['messages'][0]
    assert image.format == 'jpeg' and image.data[:2] == b'\xff\xd8'  # a JPEG
    tracks = [m for m in got['/tracks']['messages'] if m.entities]
    assert tracks and tracks[0].entities[0].cubes and tracks[0].entities[0].texts
    frames = {t.child_frame_id for m in got['/tf']['messages'] for t in m.transforms}
    assert frames, got['/tf']['messages']
    assert got['/audio_events']['messages'][0].message.startswith('siren active')
    assert got['/health']['messages'][0]['status']

    # The operator page, in a real browser (headless Chromium runs its JavaScript): the graph
    # is alive, tracks drawn, latency figures, the nodes' states, the camera thumbnail.
    browser = shutil.which('chromium-headless-shell') or shutil.which('chromium')
    if browser is None:
        pytest.skip('no headless Chromium (make setup installs chromium-headless-shell)')
    dom = subprocess.run(
        [browser, '--no-sandbox', '--disable-gpu', '--virtual-time-budget=4000', '--dump-dom',
         f'http://127.0.0.1:{page}/'],
        capture_output=True, text=True, timeout=120, check=False,
    ).stdout  # fmt: skip
    assert 'class="ok">perception alive' in dom, dom[-2000:]
    tracks = re.search(r'id="track-count">(\d+)<', dom)
    assert tracks is not None and int(tracks.group(1)) > 0, dom[-2000:]
    assert re.search(r'id="p99">[0-9.]+<', dom), dom[-2000:]
    assert re.search(r'<td>[^<]*fusion[^<]*</td>', dom), dom[-2000:]
    assert re.search(r'<img id="camera"[^>]*src="/camera.jpg', dom), dom[-2000:]

"""viewer_node during a replay: a Foxglove WebSocket client (``websockets``, the protocol
``foxglove.sdk.v1`` the Foxglove app speaks) connects, subscribes to every channel the node
advertises, and receives messages on each that decode with the schema advertised for it."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from rt_fusion.ros.harness import launching
from rt_fusion.ros.harness.live import free_port
from rt_fusion.ros.viewer.client import listen
from tests.conftest import VENV, ProcGroup, make_scenario, ros_context, wait_for

pytestmark = pytest.mark.integration

PROTOCOL = 'foxglove.sdk.v1'


def test_a_foxglove_client_gets_every_channel_during_a_replay(
    tmp_path: Path, procs: ProcGroup
) -> None:
    pytest.importorskip('foxglove')
    pytest.importorskip('websockets')
    if not launching.available() or not (VENV / 'lib' / 'rt_fusion' / 'replay_node').exists():
        pytest.skip('launch/launch_ros or the ament layout missing: run make setup')
    from rt_fusion_msgs.msg import AudioEvent  # noqa: PLC0415

    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 4, 11)
    port, page = free_port(), free_port()
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
            listen(url, lambda g: len(g) == 7 and all(e['messages'] for e in g.values()), 240)
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
    shot = tmp_path / 'operator_view.png'
    subprocess.run(
        [browser, '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--window-size=1280,760',
         '--virtual-time-budget=4000', f'--screenshot={shot}', f'http://127.0.0.1:{page}/'],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert shot.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and shot.stat().st_size > 10_000

"""viewer_node during a replay: a Foxglove WebSocket client (``websockets``, the protocol
``foxglove.sdk.v1`` the Foxglove app speaks) connects, subscribes to every channel the node
advertises, and receives messages on each that decode with the schema advertised for it."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rt_fusion.core.linux import free_port
from rt_fusion.ros.harness import launching
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

        def enough(g: dict[str, Any]) -> bool:  # every channel, and tracks boxed on an image
            boxes = g.get('/camera/out/image/annotations', {}).get('messages', [])
            return (
                len(g) == 8
                and all(e['messages'] for e in g.values())
                and any(m.points for m in boxes)
            )

        got = asyncio.run(listen(url, enough, 240, keep=40))
    finally:
        stop.set()
        thread.join(10)
    schemas = {topic: e['channel']['schemaName'] for topic, e in got.items()}
    assert schemas == {
        '/camera/out/image': 'foxglove.CompressedImage',
        '/camera/out/image/annotations': 'foxglove.ImageAnnotations',
        '/tracks': 'foxglove.SceneUpdate',
        '/radar': 'foxglove.SceneUpdate',
        '/plan': 'foxglove.SceneUpdate',
        '/tf': 'foxglove.FrameTransforms',
        '/audio_events': 'foxglove.Log',
        '/health': 'rt_fusion.Health',
    }, schemas
    missing = [t for t, e in got.items() if not e['messages']]
    assert not missing, (missing, launch.tail())
    image = got['/camera/out/image']['messages'][0]
    assert image.format == 'jpeg' and image.data[:2] == b'\xff\xd8'  # a JPEG
    # The boxes of a frame carry its image's stamp (the Image panel pairs them by it), and lie
    # on the image (its 640-px thumbnail).
    boxed = [m for m in got['/camera/out/image/annotations']['messages'] if m.points]
    stamps = {
        (m.timestamp.seconds, m.timestamp.nanos) for m in got['/camera/out/image']['messages']
    }
    assert any((m.timestamp.seconds, m.timestamp.nanos) in stamps for m in boxed), boxed[:1]
    corners = [(p.x, p.y) for m in boxed for a in m.points for p in a.points]
    assert all(0 <= u <= 640 and 0 <= v <= 360 for u, v in corners), corners
    assert all(len(m.texts) == len(m.points) for m in boxed)
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

    def boxed(dom: str) -> bool:  # the camera thumbnail shown has its tracks drawn
        drawn = re.search(r'id="camera-boxes"[^>]*data-boxes="(\d+)"', dom)
        return drawn is not None and int(drawn.group(1)) > 0

    # A thumbnail whose frame's tracks came late shows without boxes for a while (the viewer
    # runs on CPU time the graph leaves): on a busy machine, load the page again until one has.
    end = time.monotonic() + 240
    while True:
        dom = subprocess.run(
            [browser, '--no-sandbox', '--disable-gpu', '--virtual-time-budget=4000',
             '--dump-dom', f'http://127.0.0.1:{page}/'],
            capture_output=True, text=True, timeout=120, check=False,
        ).stdout  # fmt: skip
        if boxed(dom) or time.monotonic() > end:
            break
    assert 'class="ok">perception alive' in dom, dom[-2000:]
    tracks = re.search(r'id="track-count">(\d+)<', dom)
    assert tracks is not None and int(tracks.group(1)) > 0, dom[-2000:]
    assert re.search(r'id="p99">[0-9.]+<', dom), dom[-2000:]
    assert re.search(r'<td>[^<]*fusion[^<]*</td>', dom), dom[-2000:]
    assert re.search(r'<img id="camera"[^>]*src="/camera.jpg\?stamp=\d+', dom), dom[-2000:]
    assert boxed(dom), dom[-2000:]  # boxes on the camera
    shot = tmp_path / 'operator_view.png'
    subprocess.run(
        [browser, '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--window-size=1280,760',
         '--virtual-time-budget=4000', f'--screenshot={shot}', f'http://127.0.0.1:{page}/'],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert shot.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and shot.stat().st_size > 10_000


def test_a_client_that_never_reads_is_reported_grows_nothing_and_slows_no_one(
    tmp_path: Path, procs: ProcGroup
) -> None:
    pytest.importorskip('foxglove')
    pytest.importorskip('websockets')
    if not launching.available() or not (VENV / 'lib' / 'rt_fusion' / 'replay_node').exists():
        pytest.skip('launch/launch_ros or the ament layout missing: run make setup')
    from rt_fusion.ros.harness import processes  # noqa: PLC0415
    from rt_fusion.ros.viewer.client import StalledClient  # noqa: PLC0415

    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 4, 12)
    # A heavy camera channel (1280 px at 30 Hz: ~3 MB/s) and a small backlog, so that an
    # unbounded queue would show in memory within seconds, and a bound is reached at once.
    config = tmp_path / 'replay.yaml'
    config.write_text(
        (Path('config') / 'replay.yaml').read_text()
        + 'viewer:\n  ros__parameters:\n    camera_rate_hz: 30.0\n    camera_width: 1280\n'
        '    jpeg_quality: 95\n    client_backlog: 16\n'
    )
    port, page = free_port(), free_port()
    launch = procs.spawn(
        [str(VENV / 'bin' / 'ros2'), 'launch', 'rt_fusion', 'replay.launch.py', f'bag:={bag}',
         'loops:=0', f'config:={config}', 'viewer:=true', f'viewer_port:={port}',
         f'viewer_page_port:={page}'],
        'ros2 launch', {'AMENT_PREFIX_PATH': str(VENV)},
    )  # fmt: skip
    url = f'ws://127.0.0.1:{port}'
    said = f'Foxglove WebSocket on {url}'
    assert wait_for(
        lambda: any(said in x for x in [*launch.stderr, *list(launch.lines.queue)]), 240
    ), launch.tail()
    stalled = StalledClient(url)
    try:
        assert len(stalled.channels) == 8

        def viewer_says(g: dict[str, Any], words: str) -> bool:
            return any(
                words in s['message'] and s['name'].endswith('viewer')
                for m in g.get('/health', {}).get('messages', [])
                for s in m['status']
            )

        # The viewer names the client that fell behind, on its own health (read by a second
        # client, which keeps getting everything meanwhile).
        got = asyncio.run(listen(url, lambda g: viewer_says(g, 'fell behind'), 180, keep=400))
        assert viewer_says(got, 'fell behind'), launch.tail()
        pid = launching.domain_process(procs.env['ROS_DOMAIN_ID'], 'viewer_node')
        assert pid is not None
        before = processes.process_stats(pid, reads=1)[0]
        later = asyncio.run(listen(url, lambda g: False, 20, keep=1))
        after = processes.process_stats(pid, reads=1)[0]
    finally:
        stalled.close()
    # 20 s more at ~3 MB/s for the stalled client: an unbounded outbox would hold ~60 MB more.
    assert after - before < 24.0, (before, after)
    # The reading client kept getting the camera (a server blocked on the stalled client would
    # send it nothing; the niced viewer encodes what the 2 cores leave it, ~5 of the 30 Hz).
    assert later['/camera/out/image']['count'] >= 20, later['/camera/out/image']['count']
    # The graph lost no frame to it (the fusion's own counters, on /health).
    fusion = [
        s['values']
        for m in later['/health']['messages']
        for s in m['status']
        if s['name'].endswith('fusion')
    ]
    assert fusion and all(int(v.get('frames_overrun', '0')) == 0 for v in fusion), fusion


def test_a_taken_port_is_named_and_without_foxglove_sdk_the_graph_runs_on(
    tmp_path: Path, procs: ProcGroup
) -> None:
    pytest.importorskip('foxglove')
    import socket  # noqa: PLC0415

    if not launching.available() or not (VENV / 'lib' / 'rt_fusion' / 'replay_node').exists():
        pytest.skip('launch/launch_ros or the ament layout missing: run make setup')
    # A port another program holds: the node ends at once, naming the parameter (status 2).
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = procs.node('viewer_node', '-p', f'port:={port}', '-p', 'page_port:=-1')
        assert node.wait(60) == 2, node.tail()
    said = [x for x in node.tail(60).splitlines() if "parameter 'port'" in x]
    assert said and f'= {port}' in said[-1] and 'in use' in said[-1], node.tail()
    # foxglove-sdk missing (hidden by a module that fails to import, first on the path): with
    # viewer:=true the bring-up leaves the viewer out, says why, and the graph fuses on.
    hidden = tmp_path / 'nofox'
    hidden.mkdir()
    (hidden / 'foxglove.py').write_text("raise ImportError('No module named foxglove')\n")
    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 4, 14)
    launch = procs.spawn(
        [str(VENV / 'bin' / 'ros2'), 'launch', 'rt_fusion', 'replay.launch.py', f'bag:={bag}',
         'loops:=0', 'viewer:=true', f'viewer_port:={free_port()}', 'viewer_page_port:=-1'],
        'ros2 launch',
        {'AMENT_PREFIX_PATH': str(VENV),
         'PYTHONPATH': os.pathsep.join(filter(None, [str(hidden), procs.env.get('PYTHONPATH')]))},
    )  # fmt: skip
    echo = procs.echo(
        '/fusion/out/objects', 'rt_fusion_msgs/msg/ObjectArray', '--count', '5', '--timeout',
        '240',
    )  # fmt: skip
    _msgs, summary = echo.messages(300)
    assert summary['received'] >= 5, launch.tail()
    lines = [*launch.stderr, *list(launch.lines.queue)]
    assert any('foxglove-sdk is not installed' in x for x in lines), launch.tail()

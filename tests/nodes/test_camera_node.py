"""camera_node as a real process on the real dash-cam video: every frame through shared memory."""

from __future__ import annotations

import json
import zlib

import cv2
import numpy as np
import pytest

from rt_fusion.core.shm import SHM_DIR
from tests.conftest import ProcGroup, shared_file

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration

VIDEO = 'camera/solidWhiteRight.mp4'


def _reference_crcs(path: str) -> list[int]:
    cap = cv2.VideoCapture(path)
    crcs = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        crcs.append(zlib.crc32(frame.data))
    cap.release()
    return crcs


@pytest.mark.parametrize('pace', [True, False], ids=['paced', 'fast'])
def test_frames_arrive_through_shm_in_order_and_bit_exact_and_none_lost_uncounted(
    procs: ProcGroup, pace: bool
) -> None:
    video = str(shared_file(VIDEO))
    ref = _reference_crcs(video)
    assert len(ref) == 221
    listener = procs.node(
        'frame_probe_node',
        '-p',
        'role:=listener',
        '-p',
        'count:=221',
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
    camera = procs.node(
        'camera_node',
        '-r',
        '__node:=camera',
        '-p',
        'source:=file',
        '-p',
        f'file:={video}',
        '-p',
        f'pace:={str(pace).lower()}',
        '-p',
        'wait_subscribers_s:=120.0',
        '-p',
        'ring_slots:=16',
        '-p',
        'segment:=rt_fusion_test_camera',
        name='camera',
    )
    lines, summary = listener.summary(90)
    frames = [json.loads(line) for line in lines]
    sequences = [f['sequence'] for f in frames]
    # Bit-exact against a direct OpenCV decode, in order, stamped with the container times.
    assert [f['crc32'] for f in frames] == [ref[q] for q in sequences]
    assert sequences == sorted(set(sequences))
    stamps = np.array([f['stamp_ns'] for f in frames])
    assert np.all(np.diff(stamps) == 40_000_000 * np.diff(sequences))  # 25 fps
    if pace:  # a camera's rate: every frame, the first included (the start handshake)
        assert summary['received'] == 221
        assert sequences == list(range(221))
    else:
        # As fast as the decoder goes, no back-pressure: a reader that falls a ring behind on a
        # loaded machine loses frames, and each one is counted, never delivered late or shown
        # as good when it was overwritten while read (torn: counted, checked above by CRC).
        stats = summary['stats']
        assert summary['received'] + stats['overruns'] + stats['torn'] == 221, stats
        assert stats['stale'] == 0, stats
        # The start handshake: the reader is attached before frame 0, so the frames before the
        # first it got were seen and counted (overrun), not missed. (A loaded reader can be a
        # ring behind from the first frame: under load it got frame 4 first, 0-3 overrun.)
        assert stats['overruns'] + stats['torn'] >= sequences[0], stats
    assert frames[0]['shape'] == [540, 960, 3] and frames[0]['encoding'] == 'bgr8'
    assert camera.wait(30) == 0  # the file ended: the node finished on its own
    ring = f'rt_fusion_d{procs.env["ROS_DOMAIN_ID"]}_rt_fusion_test_camera'  # domain-scoped
    assert not (SHM_DIR / ring).exists()


def test_missing_device_fails_start_up_with_a_clear_error(procs: ProcGroup) -> None:
    camera = procs.node('camera_node', '-p', 'source:=v4l2', '-p', 'device:=/dev/video99')
    assert camera.wait(30) == 2
    assert any("cannot open v4l2 camera '/dev/video99'" in line for line in camera.stderr)


def test_bad_pipeline_is_retried_when_asked_and_reported(procs: ProcGroup) -> None:
    diag = procs.echo(
        '/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray', '--count', '2', '--timeout', '20'
    )
    camera = procs.node(
        'camera_node',
        '-p',
        'source:=gstreamer',
        '-p',
        'pipeline:=videotestsrc ! nosuchelement ! appsink',
        '-p',
        'retry_s:=0.5',
        '-p',
        'diagnostics_period_s:=0.3',
    )
    msgs, _ = diag.messages(30)
    status = msgs[-1]['status'][0]
    assert status['level'] == 2
    assert 'cannot open gstreamer camera' in status['message']
    assert camera.popen.poll() is None  # still up, retrying

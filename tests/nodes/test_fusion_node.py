"""fusion_node as a real process behind camera_node (the real dash-cam video through shm),
with the real ONNX test model on ONNX Runtime. The IMU and radar are absent: every frame must still
come out (degraded, the missing inputs counted), none stalled."""

from __future__ import annotations

import itertools

import pytest

from tests.conftest import ROOT, ProcGroup, shared_file

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
        f'model:={ROOT / "models" / "rtf_testnet.yaml"}',
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
        'start_delay_s:=4.0',  # the fusion node subscribes before the first frame
        name='camera',
    )
    msgs, summary = objects.messages(120)
    assert summary['received'] == FRAMES
    stamps = [m['header']['stamp']['sec'] * 10**9 + m['header']['stamp']['nanosec'] for m in msgs]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert all(abs(g - 40_000_000) < 1_000_000 for g in gaps), gaps  # 25 fps container stamps
    assert all(m['objects'] == [] for m in msgs)  # no radar: nothing to fuse
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
    ],
)
def test_a_bad_parameter_fails_at_start_with_its_name(
    procs: ProcGroup, param: str, name: str
) -> None:
    fusion = _fusion(procs, '-p', param)
    assert fusion.wait(60) == 2
    assert any(repr(name) in line for line in fusion.stderr), fusion.stderr[-5:]


def test_a_missing_model_fails_at_start_with_its_path(procs: ProcGroup) -> None:
    fusion = _fusion(procs, '-p', 'model:=/nonexistent/net.yaml')
    assert fusion.wait(60) == 2
    assert any('/nonexistent/net.yaml' in line for line in fusion.stderr), fusion.stderr[-5:]

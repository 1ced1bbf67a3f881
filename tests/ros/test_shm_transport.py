"""ShmPublisher -> ShmSubscription between two real rclpy processes, on every path.

The talker and listener are frame_probe nodes; each prints one JSON line per frame (descriptor
and CRC-32 of the payload) so the test compares what was sent with what arrived.
"""

from __future__ import annotations

import json
import uuid

import pytest

from rt_fusion.core.shm import SHM_DIR
from tests.conftest import Proc, ProcGroup

COUNT = 300


def _start(procs: ProcGroup, *, talker: list[str], listener: list[str]) -> tuple[Proc, Proc, str]:
    segment = f'rtf_test_{uuid.uuid4().hex[:10]}'
    lis = procs.node(
        'frame_probe_node',
        '-p',
        'role:=listener',
        '-p',
        'echo:=true',
        '-r',
        '__node:=listener',
        '-r',
        '~/in/frames:=/probe/frames',
        *listener,
        name='listener',
    )
    tal = procs.node(
        'frame_probe_node',
        '-p',
        'role:=talker',
        '-p',
        'echo:=true',
        '-p',
        f'segment:={segment}',
        '-r',
        '__node:=talker',
        '-r',
        '~/out/frames:=/probe/frames',
        *talker,
        name='talker',
    )
    return tal, lis, segment


def _finish(tal: Proc, lis: Proc, segment: str) -> tuple[list[dict], list[dict], dict]:  # type: ignore[type-arg]
    sent_lines, _ = tal.summary(deadline_s=90)
    got_lines, got = lis.summary(deadline_s=90)
    assert tal.wait() == 0
    assert lis.wait() == 0
    assert not (SHM_DIR / segment).exists(), 'the talker left its segment behind'
    return [json.loads(x) for x in sent_lines], [json.loads(x) for x in got_lines], got


@pytest.mark.parametrize('fast_path', [False, True], ids=['rclpy-descriptors', 'fast-path'])
def test_300_frames_arrive_in_order_and_bit_exact(procs: ProcGroup, fast_path: bool) -> None:
    tal, lis, seg = _start(
        procs,
        talker=['-p', f'count:={COUNT}', '-p', 'rate_hz:=150.0', '-p', 'transport:=shm'],
        listener=['-p', f'count:={COUNT}', '-p', f'fast_path:={str(fast_path).lower()}'],
    )
    sent, received, summary = _finish(tal, lis, seg)
    assert len(sent) == len(received) == COUNT
    paths = [r.pop('path') for r in received]
    # Every descriptor field and every payload byte (CRC-32), in order: what was sent arrived.
    assert received == sent
    assert [r['sequence'] for r in received] == list(range(COUNT))
    if fast_path:
        assert paths[0] == 'shm'  # the first descriptor names the segment ...
        assert set(paths[1:]) == {'fast'}  # ... then the ring's futex delivers the rest
        assert summary['stats']['delivered_fast'] == COUNT - 1
    else:
        assert set(paths) == {'shm'}
    assert summary['stats']['overruns'] == summary['stats']['torn'] == 0
    assert any(r['hw_stamp_ns'] != r['stamp_ns'] for r in received)


def test_transport_ros_sends_full_images_bit_exact(procs: ProcGroup) -> None:
    tal, lis, seg = _start(
        procs,
        talker=[
            '-p',
            f'count:={COUNT}',
            '-p',
            'rate_hz:=60.0',
            '-p',
            'transport:=ros',
            '-p',
            'slots:=512',
            '-p',
            'width:=320',
            '-p',
            'height:=240',
        ],
        listener=['-p', f'count:={COUNT}', '-p', 'transport:=ros'],
    )
    sent, received, summary = _finish(tal, lis, seg)
    assert {r.pop('path') for r in received} == {'ros'}
    # The full message has no sequence or segment: compare stamps, frame and payload.
    keys = ('stamp_ns', 'frame_id', 'crc32', 'shape', 'encoding')
    assert [[r[k] for k in keys] for r in received] == [[s[k] for k in keys] for s in sent]
    assert summary['stats']['delivered_full'] == COUNT


def test_auto_falls_back_to_the_full_message_when_the_segment_cannot_be_mapped(
    procs: ProcGroup,
) -> None:
    # The listener demands another owner for segments, as a reader of another user would:
    # mapping fails, so it switches to the full message. Frames sent before the switch are
    # only on the shm path; the rest arrive in order and bit-exact.
    tal, lis, seg = _start(
        procs,
        talker=[
            '-p',
            'count:=400',
            '-p',
            'rate_hz:=60.0',
            '-p',
            'transport:=shm',
            '-p',
            'slots:=64',
            '-p',
            'width:=320',
            '-p',
            'height:=240',
        ],
        listener=['-p', 'count:=200', '-p', 'transport:=auto', '-p', 'shm_owner_uid:=54321'],
    )
    got_lines, got = lis.summary(deadline_s=90)
    sent_lines, _sent = tal.summary(deadline_s=90)
    received = [json.loads(x) for x in got_lines]
    sent = {json.loads(x)['stamp_ns']: json.loads(x) for x in sent_lines}
    assert {r['path'] for r in received} == {'ros'}
    assert len(received) == 200
    assert 'owned by uid' in got['stats']['last_error']
    stamps = [r['stamp_ns'] for r in received]
    assert stamps == sorted(stamps)
    for r in received:
        assert r['crc32'] == sent[r['stamp_ns']]['crc32']
    assert tal.wait() == 0
    assert not (SHM_DIR / seg).exists()

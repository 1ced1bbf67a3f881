"""ShmFrame descriptors between two real rclpy processes (Fast DDS, an isolated domain)."""

from __future__ import annotations

import json

from rt_fusion.nodes.frame_probe_node import descriptor_json, probe_descriptor
from tests.conftest import ProcGroup

COUNT = 120


def test_every_shm_frame_field_arrives_intact_between_two_processes(procs: ProcGroup) -> None:
    listener = procs.node(
        'frame_probe_node',
        '-p',
        'role:=listener',
        '-p',
        f'count:={COUNT}',
        '-p',
        'echo:=true',
        '-r',
        '__node:=listener',
        '-r',
        '~/in/frames:=/probe/frames',
        name='listener',
    )
    talker = procs.node(
        'frame_probe_node',
        '-p',
        'role:=talker',
        '-p',
        f'count:={COUNT}',
        '-p',
        'echo:=true',
        '-p',
        'rate_hz:=200.0',
        '-r',
        '__node:=talker',
        '-r',
        '~/out/frames:=/probe/frames',
        name='talker',
    )
    sent_lines, sent_summary = talker.summary(deadline_s=60)
    received_lines, received_summary = listener.summary(deadline_s=60)
    assert sent_summary['sent'] == COUNT
    assert received_summary['received'] == COUNT
    sent = [json.loads(line) for line in sent_lines]
    received = [json.loads(line) for line in received_lines]
    # Every field of every descriptor, in order (reliable QoS, keep-last 100 > burst).
    assert received == sent
    # The talker's sequence is the designed one, so no field silently stayed at its default.
    for index, desc in enumerate(sent):
        assert desc == json.loads(descriptor_json(probe_descriptor(index, desc['available_ns'])))
    assert any(d['hw_stamp_ns'] < 0 for d in sent)  # signed field crosses intact
    assert talker.wait() == 0
    assert listener.wait() == 0

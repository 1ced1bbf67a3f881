"""tools/two_hosts.py: the graph split over two network namespaces (two "computers" on a veth
link, each with its own /dev/shm): the camera falls back to the full Image by itself, and with
the shipped Fast DDS profile (4 MiB socket buffers) the link no longer loses most frames (176 of
298 were lost with Fast DDS's defaults on the 2-core VM)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ProcGroup

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration


def _netns_usable() -> bool:
    if os.geteuid() != 0 or not shutil.which('ip') or not shutil.which('unshare'):
        return False
    name = f'rtf_probe_{os.getpid()}'
    add = subprocess.run(['ip', 'netns', 'add', name], check=False, capture_output=True)
    subprocess.run(['ip', 'netns', 'del', name], check=False, capture_output=True)
    return add.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _netns_usable(), reason='needs root and network namespaces')
def test_the_camera_crosses_the_link_by_itself_and_loses_few_frames(
    procs: ProcGroup, tmp_path: Path
) -> None:
    # No detector: the link is under test. A CPU detector at 10 Hz costs 0.15-0.2 s a frame on
    # a slow 2-core VM, and 75 of 180 frames were then lost to the compute on one host alone.
    run = procs.tool(
        'two_hosts.py',
        *('--seconds', '6', '--backend', 'none', '--out', str(tmp_path)),
        name='two_hosts',
    )
    result = dict(re.findall(r'(\w+)=(\S+)', run.read_until('RESULT ', 400)[1]))
    assert run.wait(60) == 0, run.stderr[-20:]
    assert result['fallback_detected'] == '1'  # shm on one host, the full Image across
    one, two = json.loads((tmp_path / 'two_hosts.json').read_text())
    assert one['camera_path'] == 'shm' and two['frames'] > 150
    # Generous for a loaded 2-core machine: a starved receiver may still overflow 4 MiB (and
    # the last frames of a run may still be on their way: 2 of 180 once on one host). With
    # Fast DDS's defaults ('--dds-profile ""') this run lost 92 of 178 across the link.
    assert one['lost'] <= 0.05 * one['frames'], one
    assert two['lost'] <= 0.1 * two['frames'], two

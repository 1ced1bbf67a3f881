"""tools/make_scenario.py as a newcomer runs it: bag + ground truth + preview, byte-identical
for the same seed, and a clear error for an unknown scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rt_fusion.core.bag import iter_messages
from tests.conftest import ROOT

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / 'tools' / 'make_scenario.py'), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cut_in_twice_gives_the_same_bag(tmp_path: Path) -> None:
    outs = [tmp_path / 'a', tmp_path / 'b']
    for out in outs:
        proc = _run(
            '--scenario', 'cut_in', '--seconds', '10', '--camera', '640x360', '--out', str(out)
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.splitlines()[-1].startswith('RESULT scenario=cut_in messages=6504 ')
    a, b = outs
    for rel in ('bag/bag.mcap', 'bag/metadata.yaml', 'ground_truth.json'):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert (a / 'preview.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    truth = json.loads((a / 'ground_truth.json').read_text())
    assert len(truth['frames']) == 300 and truth['scenario'] == 'cut_in'
    topics = {m.topic for m in iter_messages(a / 'bag', decode=False)}
    assert topics == {
        '/camera/out/image/compressed',
        '/camera/out/camera_info',
        '/radar/out/objects',
        '/imu/out/imu',
        '/microphone/out/audio',
        '/scenario/truth/objects',
        '/scenario/truth/odometry',
        '/scenario/imu/device_time',
        '/vehicle/speed',
    }


def test_unknown_scenario_and_list(tmp_path: Path) -> None:
    proc = _run('--scenario', 'moon_landing', '--out', str(tmp_path))
    assert proc.returncode != 0
    assert "no scenario 'moon_landing'" in proc.stderr and 'cut_in' in proc.stderr
    listing = _run('--list')
    assert listing.returncode == 0
    assert {line.split()[0] for line in listing.stdout.splitlines()} == {
        'cut_in',
        'emergency_vehicle',
        'pedestrian_crossing',
        'stopped_car',
    }

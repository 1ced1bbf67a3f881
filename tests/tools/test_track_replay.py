"""tools/track_replay.py: camera-only tracking off the graph on cached detections."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration


def _replay(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / 'tools' / 'track_replay.py'),
            '--scenario', 'stopped_car', '--seeds', '11', '--seconds', '1',
            '--cache', str(cache), *args,
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _result(out: str) -> dict[str, float]:
    last = out.strip().splitlines()[-1]
    assert last.startswith('RESULT '), out[-2000:]
    return {k: float(v) for k, v in re.findall(r'(\w+)=([-\d.e]+|nan)', last)}


def test_a_setting_is_scored_on_cached_detections_and_a_bad_name_is_refused(
    tmp_path: Path,
) -> None:
    first = _replay(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    shipped = _result(first.stdout)
    assert 'detector cached' not in first.stdout
    assert shipped['runs'] == 1
    # The near car and posts of the first second are seen by the camera alone.
    assert 0.5 < shipped['recall'] <= 1.0 and 0.5 < shipped['precision'] <= 1.0
    assert list(tmp_path.glob('stopped_car-s11-*.pkl'))
    # A track whose position std passes 0.5 m is dropped: beyond ~10 m every camera-only
    # track is (a detection's depth std alone is 0.46 m at 10 m). The setting takes effect on
    # the cached detections.
    tight = _replay(tmp_path, '--set', 'tracker.max_position_std=0.5')
    assert tight.returncode == 0, tight.stderr[-3000:]
    assert 'detector cached' in tight.stdout
    assert _result(tight.stdout)['recall'] < shipped['recall'] - 0.2
    bad = _replay(tmp_path, '--set', 'fusion.no_such_parameter=1')
    assert bad.returncode != 0 and 'no_such_parameter' in bad.stderr
    worse = _replay(tmp_path, '--set', 'fusion.camera_bearing_std=-1')
    assert worse.returncode != 0 and 'camera_bearing_std' in worse.stderr

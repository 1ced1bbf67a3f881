"""tools/bench_e2e.py end to end: both graphs as real processes on a short generated scenario
with the four-camera rig, the RESULT line with every key, every camera's frames accounted for,
and the plot beside the demo's results."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, ros_env

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration

KEYS = {
    'e2e_p99_ms',
    'conventional_e2e_p99_ms',
    'ratio_p99',
    'lost',
    'conventional_lost',
    'lost_by_cause',
    'unexplained',
    'fusion_p99_ms',
    'committed_e2e_p99_ms',
    'ontime',
    'conventional_ontime',
    'overhead_p99_ms',
    'conventional_overhead_p99_ms',
    'cameras',
    'resolution',
}


def test_both_graphs_run_four_cameras_and_the_result_line_has_every_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / 'e2e'
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / 'tools' / 'bench_e2e.py'),
            '--seconds',
            '3',
            '--resolution',
            '640x360',
            '--cameras',
            '4',
            '--backend',
            'none',
            '--out',
            str(out),
        ],
        env=ros_env(),
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = [line for line in proc.stdout.splitlines() if line.startswith('RESULT ')][-1]
    fields = dict(kv.split('=') for kv in result.split()[1:])
    assert set(fields) == KEYS
    assert fields['resolution'] == '640x360' and fields['cameras'] == '4'
    assert int(fields['unexplained']) == 0  # every rt_fusion frame accounted for
    assert int(fields['lost']) < 4 * 90 and float(fields['e2e_p99_ms']) > 0
    assert (
        0.0 <= float(fields['ontime']) <= 1.0
        and 0.0 <= float(fields['conventional_ontime']) <= 1.0
    )
    assert 0.0 < float(fields['overhead_p99_ms']) <= float(fields['e2e_p99_ms'])
    assert (out / 'e2e.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    truth = json.loads((out / 'scenario' / 'ground_truth.json').read_text())
    assert truth['camera_size'] == [640, 360] and truth['cameras'] == 4
    # Each of the rig's other cameras: its frames committed, taken with their front frames.
    ledger = json.loads((out / 'results.json').read_text())['frame_ledger']['rt_fusion']
    assert sorted(ledger['extra_cameras']) == ['left', 'rear', 'right']
    for name, cam in ledger['extra_cameras'].items():
        assert cam['committed'] == 90 and cam['lost'] == 0, (name, cam)
        assert cam['used'] > 0, (name, cam)

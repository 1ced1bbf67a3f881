"""tools/bench_fusion_node.py: the fusion node on recorded detector outputs, both transports in
one run: the RESULT line has every key, every view found its recorded output, the node tracked
objects from them (the recorded detections reached the tracker), and its ledger lost nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, ros_env

pytestmark = pytest.mark.integration

KEYS = {
    'node_p50_us', 'node_p99_us', 'node_max_us', 'cameras', 'objects', 'tracks',
    'rclpy_node_p99_us', 'ratio_p99', 'lost', 'node_cpu_p50_us', 'node_cpu_p99_us',
}  # fmt: skip


def test_the_node_is_timed_on_recorded_detections_beside_the_plain_rclpy_path(
    tmp_path: Path,
) -> None:
    out = tmp_path / 'bench'
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools' / 'bench_fusion_node.py'), '--seconds', '3',
         '--objects', '8', '--resolution', '640x360', '--warmup-frames', '10',
         '--out', str(out)],
        env=ros_env(), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = [x for x in proc.stdout.splitlines() if x.startswith('RESULT ')][-1]
    fields = dict(kv.split('=', 1) for kv in result.split()[1:])
    assert set(fields) == KEYS, result
    assert fields['lost'] == 'none', result
    assert float(fields['node_p99_us']) > 0 and float(fields['ratio_p99']) > 0, result
    assert int(fields['tracks']) > 0, result
    data = json.loads((out / 'results.json').read_text())
    for run in ('rt_fusion', 'plain rclpy'):
        stages = data[run]['stages']
        assert stages['recorded_missed'] == '0', (run, stages)
        assert stages['inference_errors'] == '0', (run, stages)
        assert 'fuse' in stages['stages_max_us']
        # rt_fusion decodes beside the fusion (the network's thread), the conventional inline
        beside = stages['inference'] == 'beside'
        assert beside == (run == 'rt_fusion'), (run, stages)
        assert ('decode' in stages['stages_p50_us']) != beside, (run, stages)
    # A second run finds the outputs recorded for the same bag and does not record them again.
    again = subprocess.run(
        [sys.executable, str(ROOT / 'tools' / 'bench_fusion_node.py'), '--seconds', '3',
         '--objects', '8', '--resolution', '640x360', '--no-compare', '--out', str(out)],
        env=ros_env(), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert again.returncode == 0 and '(kept)' in again.stdout, again.stdout[-3000:]

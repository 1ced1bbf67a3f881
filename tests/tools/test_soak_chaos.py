"""tools/soak.py and tools/chaos.py, short: the tools run, measure and report as documented.

The acceptance runs (30 minutes of soak, every node killed) are in the README; these keep the
tools working and check what must hold on any machine: nothing leaks, nothing dies, every killed
node comes back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import ProcGroup, shared_file

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration


def _result(line: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)=(\S+)', line))


@pytest.mark.slow
def test_a_short_soak_reports_every_sample_and_no_growth_in_files_or_segments(
    procs: ProcGroup, tmp_path: Path
) -> None:
    soak = procs.tool(
        'soak.py',
        *('--minutes', '0.75', '--sample-s', '15', '--warmup-min', '0.2', '--seconds', '4'),
        *('--out', str(tmp_path / 'soak')),
        name='soak',
    )
    result = _result(soak.read_until('RESULT ', 400)[1])
    assert soak.wait(60) == 0
    assert result['died'] == '0'
    # No growth: a leak adds files or segments; one closed after the warm-up sample (-1) is not
    # one (a 2-core Kilted CI run saw an fd closed late in start-up).
    data = json.loads((tmp_path / 'soak' / 'soak.json').read_text())
    changed = data['fds_grown'], data['fds_changed']  # which node opened what: names the leak
    assert int(result['fds_growth']) <= 0 and int(result['shm_growth']) <= 0, (result, changed)
    assert int(result['frames']) > 0
    assert len(data['samples']) == 3
    assert {'fusion_node', 'replay_node', 'trajectory_node'} <= set(data['samples'][0]['rss_mb'])
    assert (tmp_path / 'soak' / 'soak.png').stat().st_size > 10_000


@pytest.mark.slow
def test_killed_nodes_come_back_and_leave_no_segment(procs: ProcGroup, tmp_path: Path) -> None:
    shared_file('camera/solidWhiteRight.mp4')  # skips where the recordings are absent
    chaos = procs.tool(
        *('chaos.py', '--nodes', 'camera,radar', '--respawn-delay-s', '2.0'),
        *('--out', str(tmp_path / 'chaos')),
        name='chaos',
    )
    result = _result(chaos.read_until('RESULT ', 500)[1])
    assert chaos.wait(60) == 0, chaos.stderr[-20:]
    assert result['nodes'] == '2' and result['kills'] == '2' and result['failed'] == '0'
    assert result['restart'] == 'standby'  # respawn:=true's default: a standby takes over
    assert (tmp_path / 'chaos' / 'chaos.png').is_file()
    assert result['leaked'] == '0' and result['rest_stalled'] == '0'
    # The camera down for 2 s at least, longer than sync.camera_timeout_s (0.5 s): the fusion
    # fused the radar scans on their own meanwhile instead of stalling.
    assert int(result['camera_less']) > 0, result
    rows = json.loads((tmp_path / 'chaos' / 'chaos.json').read_text())['rows']
    assert all(r['new_pid'] not in (None, r['pid']) for r in rows)
    # The standby took over after the respawn delay: 2 s after the kill or later
    assert all(r['active_s'] is not None and r['active_s'] >= 1.9 for r in rows), rows

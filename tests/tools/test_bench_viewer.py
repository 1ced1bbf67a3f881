"""tools/bench_viewer.py: the graph without a viewer and with the viewer and a Foxglove client
reading every channel, in one run: the RESULT line has every key and the client got messages
on every channel that had data (no siren in this scenario: no audio event)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, ros_env

pytestmark = pytest.mark.integration

KEYS = {
    'e2e_p99_ms', 'viewer_e2e_p99_ms', 'ratio_p99', 'lost', 'viewer_lost', 'viewer_cpu_pct',
    'client_messages', 'client_channels',
}  # fmt: skip


def test_the_viewer_s_cost_is_measured_against_no_viewer_in_one_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip('foxglove')
    pytest.importorskip('websockets')
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools' / 'bench_viewer.py'), '--seconds', '3',
         '--resolution', '640x360', '--out', str(tmp_path / 'viewer')],
        env=ros_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = [x for x in proc.stdout.splitlines() if x.startswith('RESULT ')][-1]
    fields = dict(kv.split('=', 1) for kv in result.split()[1:])
    assert set(fields) == KEYS, result
    assert int(fields['client_channels']) >= 6 and int(fields['client_messages']) > 0, result
    assert float(fields['ratio_p99']) > 0 and float(fields['viewer_cpu_pct']) > 0, result
    assert 'P50' in proc.stdout and 'P99' in proc.stdout and 'max' in proc.stdout

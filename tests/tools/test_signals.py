"""The emulators end cleanly on SIGINT even when started with SIGINT ignored.

A shell without job control (a background ``&``, CI runners) starts its children with SIGINT
ignored, and Python then installs no KeyboardInterrupt handler: ``ros2 launch`` stopped the
vehicle graph, every node ended, and the xsens and ALSA emulators stayed (blocked in a select and
a FIFO write) until they were killed a minute later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, shared_file


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint,  # noqa: PLW1509 (the inherited disposition under test)
    )


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM], ids=['sigint', 'sigterm'])
def test_the_alsa_feeder_blocked_in_a_full_fifo_ends_on_a_signal(
    tmp_path: Path, sig: signal.Signals
) -> None:
    fifo, raw = tmp_path / 'mic.fifo', tmp_path / 'mic.raw'
    os.mkfifo(fifo)
    raw.write_bytes(bytes(1 << 20))  # more than the pipe holds: nobody reads, the write blocks
    proc = _start([sys.executable, str(ROOT / 'tools' / 'alsa_feeder.py'), str(fifo), str(raw)])
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == 'OPEN'
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ''
    finally:
        proc.kill()
        proc.wait()


def test_the_xsens_emulator_waiting_in_select_ends_on_sigint(tmp_path: Path) -> None:
    bag = shared_file('imu_radar_rio/ti_mmwave_rospkg_demo_ros2/metadata.yaml').parent
    proc = _start(
        [
            *(sys.executable, str(ROOT / 'tools' / 'xsens_emulator.py')),
            *('--bag', str(bag), '--link', str(tmp_path / 'tty'), '--linger', '3600'),
        ]
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith('READY')  # waiting for a client in select
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout.read().startswith('STOPPED')
    finally:
        proc.kill()
        proc.wait()

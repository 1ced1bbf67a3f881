"""Fast DDS's shared-memory files of dead processes (rt_fusion.core.dds_shm): a real
participant killed with SIGKILL leaves them, the sweep removes those and nothing live."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rt_fusion.core import dds_shm
from tests.conftest import Proc, ros_env

# Holds an exclusive flock on each lock file named on the command line, as a participant does.
HOLDER = """
import fcntl, os, signal, sys
fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:]]
for fd in fds:
    fcntl.flock(fd, fcntl.LOCK_EX)
print('LOCKED', flush=True)
signal.pause()
"""


def _segment(root: Path, name: str, size: int = 4096, age_s: float = 10.0) -> None:
    for path, data in ((root / name, b'\0' * size), (root / f'{name}_el', b'')):
        path.write_bytes(data)
        old = time.time() - age_s
        os.utime(path, (old, old))


def test_the_segments_of_a_killed_holder_go_and_a_live_ones_stay(tmp_path: Path) -> None:
    _segment(tmp_path, 'fastrtps_00aa11bb22cc33dd')
    _segment(tmp_path, 'fastdds_port7411')
    (tmp_path / 'sem.fastdds_port7411_mutex').write_bytes(b'\0' * 32)
    _segment(tmp_path, 'fastrtps_44ee55ff66aa77bb')  # the live one
    _segment(tmp_path, 'fastrtps_8899aabbccddeeff', age_s=0.0)  # being created
    (tmp_path / 'rt_fusion_d7_camera').write_bytes(b'ours')  # not Fast DDS's
    held = [tmp_path / f'{n}_el' for n in ('fastrtps_00aa11bb22cc33dd', 'fastdds_port7411')]
    live = tmp_path / 'fastrtps_44ee55ff66aa77bb_el'
    killed = Proc([sys.executable, '-c', HOLDER, *map(str, held)], ros_env(), 'killed')
    alive = Proc([sys.executable, '-c', HOLDER, str(live)], ros_env(), 'alive')
    try:
        assert killed.read_line(60) == 'LOCKED' and alive.read_line(60) == 'LOCKED'
        assert dds_shm.dead(tmp_path) == []  # every old one is held
        killed.popen.kill()
        killed.wait(30)
        assert dds_shm.dead(tmp_path) == ['fastdds_port7411', 'fastrtps_00aa11bb22cc33dd']
        swept = dds_shm.sweep(tmp_path)
        assert swept.segments == ['fastdds_port7411', 'fastrtps_00aa11bb22cc33dd']
        assert swept.files == 5 and swept.bytes == 2 * 4096 + 32
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            'fastrtps_44ee55ff66aa77bb',
            'fastrtps_44ee55ff66aa77bb_el',
            'fastrtps_8899aabbccddeeff',
            'fastrtps_8899aabbccddeeff_el',
            'rt_fusion_d7_camera',
        ]
        assert dds_shm.sweep(tmp_path, min_age_s=0.0).segments == ['fastrtps_8899aabbccddeeff']
    finally:
        killed.stop()
        alive.stop()


def test_a_killed_ros_process_leaves_its_participant_segment_and_the_sweep_removes_it() -> None:
    before = set(dds_shm.names())
    code = (
        'import rclpy; rclpy.init(); n = rclpy.create_node("leaver"); '
        'print("UP", flush=True); import signal; signal.pause()'
    )
    proc = subprocess.Popen(
        [sys.executable, '-c', code], env=ros_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == 'UP'
        mine = set(dds_shm.names()) - before
        assert mine, 'the participant made no shared-memory segment'
        assert not set(dds_shm.dead(min_age_s=0.0)) & mine  # held while it lives
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert mine <= set(dds_shm.names())  # left behind
        # The sweep leaves files younger than 1 s (a participant being created): wait for that.
        newest = max((dds_shm.SHM / f'{n}_el').stat().st_mtime for n in mine)
        while time.time() - newest < 1.1:
            time.sleep(0.05)  # paced: the files' age
        swept = dds_shm.sweep()
        assert mine <= set(swept.segments)
        assert not mine & set(dds_shm.names())
        assert not any(
            (dds_shm.SHM / n).exists() or (dds_shm.SHM / f'sem.{n}_mutex').exists() for n in mine
        )
    finally:
        proc.kill()
        proc.wait(30)

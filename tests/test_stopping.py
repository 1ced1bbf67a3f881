"""A launched graph stops whole (rt_fusion.ros.stopping): SIGTERM to the launch process alone (as
systemd's ``KillMode=mixed`` and ``docker stop`` send it) stops every node as Ctrl-C does, and a
launch killed outright leaves no node behind; neither leaves a ring or a DDS segment."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from rt_fusion.core import dds_shm
from rt_fusion.ros.harness import launching
from tests.conftest import VENV, log_excerpt, make_scenario, ros_env, wait_for

pytestmark = pytest.mark.integration

UNIT = Path(__file__).resolve().parents[1] / 'config' / 'systemd' / 'rt_fusion.service'


def _alive(pid: int) -> bool:
    try:
        state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != 'Z'


def _rings(domain: str) -> list[str]:
    return sorted(p.name for p in Path('/dev/shm').glob(f'rt_fusion_d{domain}_*'))


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGKILL], ids=['sigterm', 'sigkill'])
def test_a_terminated_launch_leaves_no_node_ring_or_segment(
    tmp_path: Path, signum: signal.Signals
) -> None:
    if not launching.available() or not (VENV / 'lib' / 'rt_fusion' / 'replay_node').exists():
        pytest.skip('launch/launch_ros or the ament layout missing: run make setup')
    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 3, 7)
    env = {**ros_env(), 'AMENT_PREFIX_PATH': str(VENV)}
    domain = env['ROS_DOMAIN_ID']
    log = tmp_path / 'launch.log'
    launched = launching.LaunchedGraph(
        'replay.launch.py', {'bag': str(bag), 'loops': '0'}, env=env, log=log
    )
    try:
        line = launched.wait_for_line('nodes active in', 240)
        assert line is not None, log_excerpt(log.read_text())
        assert wait_for(lambda: bool(_rings(domain)), 120), log_excerpt(log.read_text())
        nodes = launching.node_processes(launched.popen.pid)
        pids = {pid for pair in nodes.values() for pid in pair}
        assert {'replay', 'fusion', 'planner', 'calibration'} <= set(nodes), nodes
        segments = {s for pid in pids for s in dds_shm.held_by(pid)}
        assert segments, 'the nodes hold no Fast DDS segment: nothing to check'
        # The launch process alone, as systemd (KillMode=mixed) and docker stop signal it.
        os.kill(launched.popen.pid, signum)
        status = launched.popen.wait(timeout=120)
        assert wait_for(lambda: not any(_alive(p) for p in pids), 60), {
            n: pair for n, pair in nodes.items() if any(_alive(p) for p in pair)
        }
        assert wait_for(lambda: not _rings(domain), 30), _rings(domain)
        # Every participant segment they held went with them (port segments are shared by
        # name and removed by the last participant that leaves).
        left = sorted(segments & set(dds_shm.names()))
        assert not left or wait_for(lambda: not segments & set(dds_shm.names()), 30), left
    finally:
        launched.stop(timeout_s=60)
    text = log.read_text()
    if signum == signal.SIGTERM:
        assert status == 0, log_excerpt(text)
        assert 'SIGTERM: stopping every node as on Ctrl-C' in text, log_excerpt(text)
        assert 'process has died' not in text, log_excerpt(text)
        assert 'orphaned processes' not in text, log_excerpt(text)
        lines = text.splitlines()
        for name in ('fusion', 'trajectory', 'replay', 'calibration', 'bringup'):
            assert any(f'[{name}_node-' in x and 'finished cleanly' in x for x in lines), name
    else:
        assert status == -signal.SIGKILL


def test_the_systemd_unit_stops_the_launch_with_sigterm_and_restarts_a_failure() -> None:
    """The unit shipped for the vehicle: SIGTERM to the launch alone, a bounded stop, a restart
    on failure, real-time limits for the nodes that ask for them."""
    text = UNIT.read_text()
    keys = dict(
        line.split('=', 1) for line in text.splitlines() if '=' in line and line[:1].isalpha()
    )
    assert keys['KillSignal'] == 'SIGTERM' and keys['KillMode'] == 'mixed'
    assert keys['Restart'] == 'on-failure' and float(keys['TimeoutStopSec']) >= 20
    assert keys['LimitRTPRIO'] == '99' and keys['LimitMEMLOCK'] == 'infinity'
    assert 'ros2 launch rt_fusion vehicle.launch.py' in keys['ExecStart']
    analyze = shutil.which('systemd-analyze')
    if analyze is not None:  # systemd's own reading of it: no unknown key, no bad value
        done = subprocess.run(
            [analyze, 'verify', str(UNIT)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and not done.stderr.strip(), done.stderr


@pytest.mark.parametrize('node', ['fusion', 'planner'])
def test_a_misspelt_parameter_in_one_node_ends_the_launch_naming_it(
    tmp_path: Path, node: str
) -> None:
    """``infer_perod_s`` in the fusion's section (or a typo in the planner's): the node refuses
    it and exits 2, and the whole launch ends non-zero naming it, with nothing left running
    (before, the replay waited 60 s, then played 881 messages to nobody, and never ended)."""
    if not launching.available() or not (VENV / 'lib' / 'rt_fusion' / 'replay_node').exists():
        pytest.skip('launch/launch_ros or the ament layout missing: run make setup')
    import time  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    root = Path(__file__).resolve().parents[1]
    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 3, 8)
    config = yaml.safe_load((root / 'config' / 'replay.yaml').read_text())
    typo = 'infer_perod_s' if node == 'fusion' else 'replan_perod_s'
    config[node]['ros__parameters'][typo] = 0.2
    path = tmp_path / 'replay.yaml'
    path.write_text(yaml.safe_dump(config))
    env = {**ros_env(), 'AMENT_PREFIX_PATH': str(VENV)}
    log = tmp_path / 'launch.log'
    started = time.monotonic()
    launched = launching.LaunchedGraph(
        'replay.launch.py', {'bag': str(bag), 'config': str(path)}, env=env, log=log
    )
    try:
        status = launched.popen.wait(timeout=240)
        took = time.monotonic() - started
    finally:
        launched.stop(timeout_s=60)
    text = log.read_text()
    assert status != 0, log_excerpt(text)
    assert typo in text and 'unknown parameter' in text, log_excerpt(text)
    assert 'stopping the graph' in text, log_excerpt(text)
    assert not launching.group_argv(launched.popen.pid), 'a process outlived the launch'
    print(f'{node}: the launch ended {took:.1f} s after it started (status {status})')

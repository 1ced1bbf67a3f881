"""The vehicle's path, run here: the repository cloned into a colcon workspace, built on a ROS
prefix that stands for /opt/ros/<distro> (tools/ros_underlay.sh: the distribution's wheels, the
system Python, not the project's venv), sourced as on the vehicle, launched from install/.

These are the README's "On the vehicle" commands, in the order it gives them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT, ProcGroup, make_scenario

pytestmark = pytest.mark.integration

DISTRO = os.environ.get('ROS_DISTRO', 'jazzy')
UNDERLAY = ROOT / 'build' / f'underlay-{DISTRO}'
# A shell that has sourced nothing: no venv, no ROS, no pyenv shims.
PLAIN = {'HOME': os.environ.get('HOME', '/root'), 'PATH': '/usr/local/bin:/usr/bin:/bin'}


def _clone(dest: Path) -> None:
    """The repository as `git clone` gives it, plus the working tree's uncommitted edits (on CI
    the tree is clean, so exactly a clone): every tracked or new, not ignored, file."""
    files = subprocess.run(
        ['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b'\0')
    for raw in filter(None, files):
        rel = raw.decode()
        src = ROOT / rel
        if not os.path.lexists(src):  # deleted in the working tree
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, target)


def _sourced(*scripts: Path) -> dict[str, str]:
    """The environment after `source` of each script in a plain shell, as a user's terminal."""
    line = ' && '.join(f'source {s}' for s in scripts) + ' && env -0'
    out = subprocess.run(
        ['bash', '-c', line], env=PLAIN, capture_output=True, check=True, timeout=60
    ).stdout
    return dict(item.split('=', 1) for item in out.decode().split('\0') if '=' in item)


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 900) -> str:
    out = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert out.returncode == 0, f'{argv}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}'
    return out.stdout


@pytest.fixture(scope='module')
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ws/src/rt_fusion, built with `colcon build --symlink-install` on the wheel underlay."""
    made = subprocess.run(
        [str(ROOT / 'tools' / 'ros_underlay.sh')],
        env={**os.environ, 'ROS_DISTRO': DISTRO},
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if made.returncode != 0 and 'no launch wheels' in made.stderr:
        pytest.skip(made.stderr.strip())
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-3000:]
    ws = tmp_path_factory.mktemp('ws')
    _clone(ws / 'src' / 'rt_fusion')
    env = _sourced(UNDERLAY / 'setup.bash')
    listed = _run(['colcon', 'list', '--names-only'], env, ws)
    assert listed.split() == ['rt_fusion', 'rt_fusion_msgs'], listed
    _run(['colcon', 'build', '--symlink-install', '--event-handlers', 'console_direct-'], env, ws)
    return ws


def test_colcon_builds_both_packages_and_ros2_finds_them_in_install(workspace: Path) -> None:
    env = _sourced(UNDERLAY / 'setup.bash', workspace / 'install' / 'setup.bash')
    assert (
        'build/underlay' in env['AMENT_PREFIX_PATH'] or str(UNDERLAY) in env['AMENT_PREFIX_PATH']
    )
    prefix = _run(['ros2', 'pkg', 'prefix', 'rt_fusion'], env, workspace).strip()
    assert prefix == str(workspace / 'install' / 'rt_fusion')
    executables = _run(['ros2', 'pkg', 'executables', 'rt_fusion'], env, workspace).split()
    for node in ('fusion_node', 'replay_node', 'trajectory_node', 'camera_node', 'radar_node'):
        assert node in executables, executables
    share = workspace / 'install' / 'rt_fusion' / 'share' / 'rt_fusion'
    for rel in ('launch/vehicle.launch.py', 'launch/replay.launch.py', 'config/vehicle.yaml'):
        assert (share / rel).is_file(), rel
    assert list((share / 'models').glob('*.onnx'))
    # The interfaces from the workspace's own rt_fusion_msgs, not from the project's venv.
    where = _run(
        [
            'python3',
            '-c',
            'import rt_fusion_msgs.msg as m, rclpy; print(m.__file__, rclpy.__file__)',
        ],
        env,
        workspace,
    )
    assert str(workspace / 'install' / 'rt_fusion_msgs') in where
    assert str(UNDERLAY) in where
    assert '.venv' not in where


def test_ros2_launch_from_the_install_space_replays_a_bag_into_fused_objects(
    workspace: Path, tmp_path: Path
) -> None:
    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 3, 3)
    procs = ProcGroup()
    try:
        env = {
            **_sourced(UNDERLAY / 'setup.bash', workspace / 'install' / 'setup.bash'),
            'ROS_DOMAIN_ID': procs.env['ROS_DOMAIN_ID'],
            'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST',
            'PYTHONUNBUFFERED': '1',
        }
        procs.env = env
        echo = procs.spawn(
            [
                'ros2',
                'run',
                'rt_fusion',
                'rt_fusion_topic_echo',
                '/fusion/out/objects',
                'rt_fusion_msgs/msg/ObjectArray',
                '--count',
                '10',
                '--quiet',
                '--timeout',
                '240',
            ],
            'echo',
        )
        echo.read_until('READY', 60)
        launch = procs.spawn(
            ['ros2', 'launch', 'rt_fusion', 'replay.launch.py', f'bag:={bag}'],
            'ros2 launch',
        )
        _, summary = echo.messages(deadline_s=300)
        assert summary['received'] >= 10, '\n'.join(launch.stderr[-30:])
        # The nodes that produced them are the workspace's install space executables.
        children = psutil.Process(launch.popen.pid).children(recursive=True)
        started = {
            Path(c.cmdline()[1]).name: c.cmdline()[1] for c in children if len(c.cmdline()) > 1
        }
        lib = workspace / 'install' / 'rt_fusion' / 'lib' / 'rt_fusion'
        for node in ('fusion_node', 'replay_node', 'trajectory_node'):
            assert started.get(node) == str(lib / node), started
        launch.stop(timeout_s=60.0)
        assert launch.popen.returncode == 0, '\n'.join(launch.stderr[-30:])
    finally:
        procs.stop_all()


def test_a_shell_that_sourced_nothing_is_told_what_to_source(workspace: Path) -> None:
    """The nodes' package, imported by a Python without ROS 2: one line naming what to source."""
    out = subprocess.run(
        ['python3', '-c', 'import rt_fusion.nodes.fusion_node'],
        env={**PLAIN, 'PYTHONPATH': str(workspace / 'src' / 'rt_fusion')},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert 'source /opt/ros/<distro>/setup.bash' in last, out.stderr
    assert 'install/setup.bash' in last
    # The installed executables too (setuptools' wrappers died on a package-metadata traceback).
    for name in ('fusion_node', 'rt_fusion_record'):
        run = subprocess.run(
            [str(workspace / 'install' / 'rt_fusion' / 'lib' / 'rt_fusion' / name)],
            env=PLAIN,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert run.returncode == 1, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f'{name}: rt_fusion'), run.stderr
        assert 'source /opt/ros/<distro>/setup.bash' in lines[0]

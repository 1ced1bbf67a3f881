"""LaunchedGraph, what every tool starts its graph with: a launch that fails, or a node that dies
at start, is reported within seconds with its last error line, not after a tool's long wait;
and a tool run from a plain shell finds the package without AMENT_PREFIX_PATH."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from rt_fusion.ros.harness import launching


def test_a_plain_shell_gets_the_venv_prefix() -> None:
    marker = Path(sys.prefix) / 'share/ament_index/resource_index/packages/rt_fusion'
    if not marker.is_file():
        pytest.skip(f'rt_fusion is not laid out under {sys.prefix} (make setup does it)')
    env = launching.ament_env({'PATH': '/usr/bin:/bin'})
    assert env['AMENT_PREFIX_PATH'].split(':')[0] == sys.prefix
    # Kept as it is where it already names the prefix; others' prefixes stay behind ours.
    same = launching.ament_env({'AMENT_PREFIX_PATH': sys.prefix})
    assert same['AMENT_PREFIX_PATH'] == sys.prefix
    other = launching.ament_env({'AMENT_PREFIX_PATH': '/opt/ros/jazzy'})
    assert other['AMENT_PREFIX_PATH'] == f'{sys.prefix}:/opt/ros/jazzy'


def _died_of(launch_file: Path, deadline_s: float = 60.0) -> list[str]:
    """What LaunchedGraph reports dead once ``launch_file`` runs (empty at the deadline)."""
    if not launching.available():
        pytest.skip('launch/launch_ros not installed (make setup installs them)')
    graph = launching.LaunchedGraph(str(launch_file), {}, log=launch_file.with_suffix('.log'))
    try:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            dead = graph.died()
            if dead:
                return dead
            time.sleep(0.05)  # paced: polling a child
        return []
    finally:
        graph.stop(timeout_s=10.0)


@pytest.mark.integration
def test_a_launch_file_that_fails_to_load_is_reported_with_its_error(tmp_path: Path) -> None:
    bad = tmp_path / 'broken.launch.py'
    bad.write_text(
        'def generate_launch_description():\n'
        "    raise OSError('cannot open /dev/nonexistent: the device is missing')\n"
    )
    dead = _died_of(bad)
    assert dead, 'a launch that died was not reported'
    assert dead[0].startswith('launch (exit '), dead
    assert 'the device is missing' in dead[0], dead


@pytest.mark.integration
def test_a_node_that_dies_at_start_is_named_with_its_last_error_line(tmp_path: Path) -> None:
    script = (
        'import sys, time; print("starting", flush=True); '
        'print("[ERROR] [fusion]: parameter \'infer_perod_s\' is not a parameter of this node", '
        'file=sys.stderr, flush=True); sys.exit(2)'
    )
    keeper = 'import signal; signal.pause()'  # the rest of the graph: up until stopped
    launch_file = tmp_path / 'two.launch.py'
    launch_file.write_text(
        'import sys\n'
        'from launch import LaunchDescription\n'
        'from launch.actions import ExecuteProcess\n'
        'def generate_launch_description():\n'
        '    return LaunchDescription([\n'
        f'        ExecuteProcess(cmd=[sys.executable, "-c", {script!r}], name="fusion_node",'
        ' output="screen"),\n'
        f'        ExecuteProcess(cmd=[sys.executable, "-c", {keeper!r}], name="planner",'
        ' output="screen"),\n'
        '    ])\n'
    )
    dead = _died_of(launch_file)
    assert dead, 'a node that died was not reported'
    assert dead[0].startswith('fusion_node-'), dead
    assert 'infer_perod_s' in dead[0], dead

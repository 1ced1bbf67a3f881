"""A node process says once, in its ``active`` line, where its start went."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from rt_fusion.core import keeper, linux
from rt_fusion.ros import node_utils
from tests.conftest import ProcGroup

REPORT = re.compile(
    r' \((\d+\.\d+) s after the process started: interpreter and imports (\d+\.\d+), '
    r'ROS (\d+\.\d+), configure (\d+\.\d+), activate (\d+\.\d+)\)'
)


def test_the_start_up_is_reported_once_with_its_steps_adding_up() -> None:
    times = node_utils.StartupTimes()
    assert times.report() == ''  # a node not started through run() (a test, a component)
    times.begin()
    for step in ('ROS', 'configure', 'activate'):
        times.mark(step)
    times.mark('configure')  # a second configure (a lifecycle cycle) is not the start
    match = REPORT.fullmatch(times.report())
    assert match, times.marks
    total, *steps = map(float, match.groups())
    assert steps[0] > 0.0  # this process (pytest) started a while ago
    assert sum(steps) == pytest.approx(total, abs=0.03)  # rounded to 0.01 each
    assert times.report() == ''  # once


def test_a_forked_restart_reports_the_fork_instead_of_the_imports() -> None:
    times = node_utils.StartupTimes()
    times.begin()
    times.forked(0)  # the first node carries on the keeper's start, imports included
    assert 'interpreter and imports' in times.marks
    times.forked(2)
    for step in ('ROS', 'configure', 'activate'):
        times.mark(step)
    assert re.fullmatch(
        r' \(\d+\.\d+ s after the process started: fork 0\.00, ROS \d+\.\d+, '
        r'configure \d+\.\d+, activate \d+\.\d+\)',
        times.report(),
    )


def _children(pid: int) -> list[int]:
    text = Path(f'/proc/{pid}/task/{pid}/children').read_text()
    return [int(x) for x in text.split()]


def test_a_killed_node_is_forked_again_by_its_keeper_and_comes_back_active(
    procs: ProcGroup,
) -> None:
    """respawn:=true's warm restart, on a real node process: kill -9 of the node, and the
    keeper's fork of it configures and activates again without importing anything."""
    env = {keeper.ENV: '0'}
    node = procs.node('trajectory_node', '-r', '__node:=planner', name='planner', env=env)
    assert node.wait_stderr(']: active (', 120), node.tail()
    first = re.search(
        r'after the process started: interpreter and imports', '\n'.join(node.stderr)
    )
    assert first, node.tail()
    (child,) = _children(node.popen.pid)  # the keeper forked the node
    # Its DDS files older than the sweep's 1-s guard (files of a participant being created).
    while (linux.process_age_s(child) or 0.0) < 1.5:
        time.sleep(0.05)  # paced: the node's age
    os.kill(child, signal.SIGKILL)
    assert node.wait_stderr('warm restart 1', 60), node.tail()
    assert node.wait_stderr('started: fork 0.00, ROS', 120), node.tail()
    # The participant the killed node left in /dev/shm was removed.
    assert node.wait_stderr('Fast DDS shared-memory segments of dead processes', 60), node.tail()
    (again,) = _children(node.popen.pid)
    assert again != child
    node.popen.send_signal(signal.SIGINT)  # ros2 launch's stop reaches the node
    assert node.wait(60) == 0, node.tail()

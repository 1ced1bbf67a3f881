"""A node process says once, in its ``active`` line, where its start went."""

from __future__ import annotations

import os
import re
import signal
import sys

import pytest

from rt_fusion.core import keeper, linux
from rt_fusion.ros import lifecycle, running
from tests.conftest import ProcGroup, child_pids, wait_for

REPORT = re.compile(
    r' \((\d+\.\d+) s after the process started: interpreter and imports (\d+\.\d+), '
    r'ROS (\d+\.\d+), configure (\d+\.\d+), activate (\d+\.\d+)\)'
)


def test_the_start_up_is_reported_once_with_its_steps_adding_up() -> None:
    times = lifecycle.StartupTimes()
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


def test_a_restart_reports_its_start_from_its_turn_instead_of_the_imports() -> None:
    times = lifecycle.StartupTimes()
    times.begin()
    times.took_over(0)  # the first node carries on the keeper's start, imports included
    assert 'interpreter and imports' in times.marks
    times.took_over(2)
    for step in ('ROS', 'configure', 'activate'):
        times.mark(step)
    assert re.fullmatch(
        r' \(\d+\.\d+ s after it took over: ROS \d+\.\d+, '
        r'configure \d+\.\d+, activate \d+\.\d+\)',
        times.report(),
    )


# Prints FOUND once the ROS graph has a node of the given name (hidden ones included).
GRAPH_NODES = """
import sys, time, rclpy
rclpy.init()
node = rclpy.create_node('_graph_nodes')
end = time.monotonic() + 120
while time.monotonic() < end:
    if sys.argv[1] in [name for name, _ in node.get_node_names_and_namespaces()]:
        print('FOUND', flush=True)
        break
    time.sleep(0.1)  # paced: polling the graph
"""


def test_a_killed_node_is_replaced_by_its_standby_which_comes_back_active(
    procs: ProcGroup,
) -> None:
    """respawn:=true's warm restart, on a real node process: kill -9 of the node, and the
    standby the keeper forked in advance (rclpy up, nothing else) configures and activates."""
    env = {keeper.ENV: '0'}
    node = procs.node('trajectory_node', '-r', '__node:=planner', name='planner', env=env)
    assert node.wait_stderr(']: active (', 120), node.tail()
    first = re.search(
        r'after the process started: interpreter and imports', '\n'.join(node.stderr)
    )
    assert first, node.tail()
    keeper_pid = node.popen.pid
    assert wait_for(lambda: len(child_pids(keeper_pid)) == 2), node.tail()
    (standby,) = [p for p in child_pids(keeper_pid) if keeper.process_name(p) == 'standby-planner']
    (child,) = set(child_pids(keeper_pid)) - {standby}
    # The standby holds a DDS participant while it waits (a hidden node without endpoints):
    # the others have long discovered it when it takes over.
    lister = procs.spawn([sys.executable, '-c', GRAPH_NODES, running.STANDBY_NODE], 'graph')
    lister.read_until('FOUND', 120)
    # Its DDS files older than the sweep's 1-s guard (files of a participant being created).
    assert wait_for(lambda: (linux.process_age_s(child) or 0.0) >= 1.5)
    os.kill(child, signal.SIGKILL)
    assert node.wait_stderr(f'warm restart 1 (standby {standby} takes over)', 60), node.tail()
    assert node.wait_stderr('after it took over: ROS', 120), node.tail()
    # The participant the killed node left in /dev/shm was removed.
    assert node.wait_stderr('Fast DDS shared-memory segments of dead processes', 60), node.tail()
    assert keeper.process_name(standby) != 'standby-planner'  # it is the node now
    assert wait_for(lambda: len(child_pids(keeper_pid)) == 2), node.tail()  # the next standby
    node.popen.send_signal(signal.SIGINT)  # ros2 launch's stop reaches the node and standby
    assert node.wait(60) == 0, node.tail()


# A planner configured and activated after its class's preload (what a warm keeper runs before
# it forks): which ROS type supports were still loaded then.
PRELOADED = """
import sys
import rclpy
from rt_fusion.nodes.trajectory_node import TrajectoryNode
from rt_fusion.ros import lifecycle, running
TrajectoryNode.preload()
before = set(sys.modules)
rclpy.init()
node = TrajectoryNode()
lifecycle.autostart(node)
print('LATE', *sorted(m for m in set(sys.modules) - before if 'rosidl_typesupport' in m))
node.destroy_node()
rclpy.shutdown()
"""


def test_a_node_s_preload_leaves_no_type_support_to_load_in_its_start(procs: ProcGroup) -> None:
    """A restarted node loaded 50-odd type-support modules in its start (0.1-0.9 s on a loaded
    2-core VM); preloaded by the keeper, none is left."""
    proc = procs.spawn([sys.executable, '-c', PRELOADED], 'preloaded')
    _, line = proc.read_until('LATE', 120)
    assert line == 'LATE', line
    assert proc.wait(60) == 0, proc.tail()

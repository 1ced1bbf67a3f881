"""A node process says once, in its ``active`` line, where its start went."""

from __future__ import annotations

import re

import pytest

from rt_fusion.ros import node_utils

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

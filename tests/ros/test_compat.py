"""rt_fusion.ros.compat: the only code that knows which ROS 2 distribution runs."""

from __future__ import annotations

import os
import re

import pytest
import rclpy

from rt_fusion.ros import compat
from tests.conftest import ROOT


def test_the_running_distribution_is_recognised_and_matches_the_make_variable() -> None:
    version = compat.rclpy_version()
    assert version and version[0] in compat.DISTROS
    assert compat.distro() in ('jazzy', 'kilted')
    if os.environ.get('ROS_DISTRO') in ('jazzy', 'kilted'):  # set by the Makefile
        assert compat.distro() == os.environ['ROS_DISTRO']


def test_events_executor_exists_on_every_tested_distribution() -> None:
    executor = compat.events_executor()
    assert executor is not None  # None only on Humble, which has no rclpy.experimental
    assert callable(executor.spin_once) and callable(executor.add_node)


def test_ok_and_try_shutdown_work_around_a_context() -> None:
    context = rclpy.Context()
    assert not compat.ok(context=context)
    rclpy.init(context=context)
    assert compat.ok(context=context)
    compat.try_shutdown(context=context)
    assert not compat.ok(context=context)
    compat.try_shutdown(context=context)  # twice: no error


def test_discovery_env_keeps_graphs_on_this_host_in_their_own_domain() -> None:
    env = compat.discovery_env(42)
    assert env['ROS_DOMAIN_ID'] == '42'
    assert env.get('ROS_AUTOMATIC_DISCOVERY_RANGE') == 'LOCALHOST'


@pytest.mark.parametrize(
    'pattern',
    [
        r'rclpy\.ok\(',
        r'rclpy\.try_shutdown\(',
        r'rclpy\.experimental',
        r'rclpy\.event_handler',
        r'rclpy\.qos_event',
        r'TimerInfo\b(?!.*#)',
    ],
)
def test_no_code_outside_the_compat_layer_uses_a_distribution_specific_api(pattern: str) -> None:
    offenders = []
    for folder in ('rt_fusion', 'tools', 'tests'):
        for path in (ROOT / folder).rglob('*.py'):
            if path.name in (
                'compat.py',
                'test_compat.py',
                'rclpy_since_humble.py',
                'test_humble_api.py',
            ):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split('#', 1)[0]
                if re.search(pattern, code):
                    offenders.append(f'{path.relative_to(ROOT)}:{number}: {line.strip()}')
    assert not offenders, '\n'.join(offenders)

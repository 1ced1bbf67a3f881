"""No rclpy API that Humble's rclpy (3.3, JetPack 6.2's apt) lacks, outside ros/compat.py.

The list of what came after Humble, with the rclpy version and pull request of each entry, is in
tests/ros/rclpy_since_humble.py (from ros2/rclpy's CHANGELOG.rst). The checker is shown to fire
on each kind of use, and every listed member is checked to exist in the rclpy running here, so a
misspelt entry (a check that could never fire) fails too.
"""

from __future__ import annotations

import importlib

import pytest
import rclpy.executors
import rclpy.node
import rclpy.publisher
import rclpy.subscription

from rt_fusion.ros import compat
from tests.conftest import ROOT
from tests.ros import rclpy_since_humble as humble


def test_no_module_uses_an_rclpy_api_that_humble_lacks() -> None:
    found = humble.check_tree(ROOT, ('rt_fusion', 'tools', 'launch'), skip=('compat.py',))
    assert not found, 'Humble lacks:\n' + '\n'.join(map(str, found))


@pytest.mark.parametrize(
    ('source', 'expected'),
    [
        ('n = sub.get_publisher_count()', 'get_publisher_count'),
        ('from rclpy.event_handler import PublisherEventCallbacks', 'rclpy.event_handler'),
        ('import rclpy.experimental.events_executor', 'rclpy.experimental'),
        ('from rclpy import parameter_client', 'rclpy.parameter_client'),
        ('x = rclpy.wait_for_message.wait_for_message', 'rclpy.wait_for_message'),
        ('cb = PublisherEventCallbacks(matched=f)', 'matched'),
        ('cb = compat.SubscriptionEventCallbacks(matched=f)', 'matched'),
        ('t = node.create_timer(0.1, f, autostart=False)', 'autostart'),
        ('q = ReliabilityPolicy.BEST_AVAILABLE', 'BEST_AVAILABLE'),
    ],
)
def test_the_checker_finds_each_kind_of_use(source: str, expected: str) -> None:
    found = humble.check_source(source, 'snippet.py')
    assert len(found) == 1 and expected in str(found[0]), found


def test_an_import_guarded_by_import_error_is_allowed() -> None:
    source = (
        'try:\n'
        '    from rclpy.event_handler import PublisherEventCallbacks\n'
        'except ImportError:\n'
        '    from rclpy.qos_event import PublisherEventCallbacks\n'
    )
    assert humble.check_source(source, 'snippet.py') == []


def test_every_listed_addition_exists_in_the_rclpy_running_here() -> None:
    """Jazzy's and Kilted's rclpy have every entry: an entry that matches nothing is a typo."""
    for module in humble.MODULES:
        importlib.import_module(module)
    classes = [
        rclpy.node.Node,
        rclpy.subscription.Subscription,
        rclpy.publisher.Publisher,
        rclpy.executors.Executor,
        importlib.import_module('rclpy.client').Client,
        importlib.import_module('rclpy.service').Service,
        importlib.import_module('rclpy.qos').ReliabilityPolicy,
        importlib.import_module('rclpy.topic_endpoint_info').TopicEndpointInfo,
    ]
    missing = [m for m in humble.MEMBERS if not any(hasattr(c, m) for c in classes)]
    assert not missing, missing


def test_compat_routes_the_humble_gaps() -> None:
    """What replaces the missing APIs exists and is callable on this distribution."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=0)
    try:
        node = rclpy.node.Node('humble_compat_probe', context=context)
        from std_msgs.msg import Empty  # noqa: PLC0415

        sub = node.create_subscription(Empty, 'probe', lambda _m: None, 1)
        pub = node.create_publisher(
            Empty, 'probe', 1, event_callbacks=compat.publisher_events(matched=lambda _i: None)
        )
        assert compat.publisher_counter(node, sub)() >= 0
        assert pub.get_subscription_count() >= 0
        events = compat.subscription_events(matched=lambda _i: None)
        assert (events.matched is not None) == compat.MATCHED_EVENTS
        node.destroy_node()
    finally:
        compat.try_shutdown(context=context)

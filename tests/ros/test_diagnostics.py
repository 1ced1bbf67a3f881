"""rt_fusion.ros.diagnostics: every node's health on /diagnostics through one writer and one
reader (the six nodes each built DiagnosticStatus messages by hand before)."""

from __future__ import annotations

import ast
import time

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy

from rt_fusion.ros import compat, diagnostics
from tests.conftest import ROOT, ros_env


def test_a_node_status_arrives_named_levelled_and_readable() -> None:
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(ros_env()['ROS_DOMAIN_ID']))
    try:
        node = rclpy.create_node('cam', namespace='/car2', context=context)
        reader = rclpy.create_node('reader', context=context)
        got: list[DiagnosticArray] = []
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        reader.create_subscription(DiagnosticArray, diagnostics.TOPIC, got.append, qos)
        diag = diagnostics.NodeDiagnostics(node, 'camera')
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(reader)
        end = time.monotonic() + 60.0
        while not got and time.monotonic() < end:  # until matched: publish again
            diag.publish(
                diagnostics.Level.WARN, '2 frames dropped', {'frames': 7, 'locked': True}, 'v0'
            )
            executor.spin_once(timeout_sec=0.2)
        assert got, 'no diagnostics within 60 s'
        (status,) = got[0].status
        assert status.name == '/car2/cam: camera'
        assert status.level == DiagnosticStatus.WARN
        assert (status.message, status.hardware_id) == ('2 frames dropped', 'v0')
        assert diagnostics.values(status) == {'frames': '7', 'locked': 'True'}
        assert [v for _s, v in diagnostics.statuses(got[0], 'camera')] == [
            {'frames': '7', 'locked': 'True'}
        ]
        assert list(diagnostics.statuses(got[0], 'fusion')) == []
        assert got[0].header.stamp.sec > 0
        executor.shutdown()
        node.destroy_node()
        reader.destroy_node()
    finally:
        compat.try_shutdown(context=context)


def test_levels_are_the_message_constants() -> None:
    for level in diagnostics.Level:
        assert bytes([level]) == getattr(DiagnosticStatus, level.name)


def test_nodes_publish_diagnostics_only_through_the_helper() -> None:
    """No node builds DiagnosticStatus/DiagnosticArray itself: one format for the tools (a
    node may read them: the viewer subscribes to /diagnostics)."""
    built = {'DiagnosticArray', 'DiagnosticStatus', 'KeyValue'}
    offenders = []
    for path in sorted((ROOT / 'rt_fusion' / 'nodes').glob('*.py')):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in built
            ):
                offenders.append(path.name)
    assert not offenders, offenders

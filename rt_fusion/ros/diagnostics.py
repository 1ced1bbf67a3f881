"""Node health on ``/diagnostics`` (diagnostic_msgs), written and read in one place.

Every rt_fusion node publishes one ``DiagnosticStatus`` per period, named
``<fully qualified node name>: <component>`` (``/fusion: fusion``), with its counters as
key/value strings: ``rqt_runtime_monitor`` and ``ros2 topic echo /diagnostics`` show them, and
the tools read them back with :func:`statuses`.

    diag = NodeDiagnostics(node, 'camera')
    diag.publish(Level.WARN, '3 frames dropped', {'frames': 120, 'dropped': 3}, '/dev/video0')
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

from rt_fusion.ros import graph

TOPIC = graph.DIAGNOSTICS_TOPIC


class Level(enum.IntEnum):
    """DiagnosticStatus levels."""

    OK = int.from_bytes(DiagnosticStatus.OK, 'little')
    WARN = int.from_bytes(DiagnosticStatus.WARN, 'little')
    ERROR = int.from_bytes(DiagnosticStatus.ERROR, 'little')
    STALE = int.from_bytes(DiagnosticStatus.STALE, 'little')


def status(
    name: str, level: Level, message: str, values: Mapping[str, object], hardware_id: str = ''
) -> DiagnosticStatus:
    """One DiagnosticStatus; its values as ``str(value)``."""
    return DiagnosticStatus(
        level=bytes([int(level)]),
        name=name,
        message=message,
        hardware_id=hardware_id,
        values=[KeyValue(key=k, value=str(v)) for k, v in values.items()],
    )


class NodeDiagnostics:
    """A node's diagnostics publisher: ``publish(level, message, values)``."""

    def __init__(self, node: Node, component: str) -> None:
        self.node, self.component = node, component
        # Created by the node: a DeviceNode releases it at cleanup with what configure made.
        self.pub = node.create_publisher(DiagnosticArray, TOPIC, 10)

    @property
    def name(self) -> str:
        """``<fully qualified node name>: <component>``: what readers select on."""
        return f'{self.node.get_fully_qualified_name()}: {self.component}'

    def publish(
        self, level: Level, message: str, values: Mapping[str, object], hardware_id: str = ''
    ) -> DiagnosticArray:
        """Publishes one status; returns the message."""
        out = DiagnosticArray(status=[status(self.name, level, message, values, hardware_id)])
        out.header.stamp = self.node.get_clock().now().to_msg()
        self.pub.publish(out)
        return out


def values(st: Any) -> dict[str, str]:
    """A DiagnosticStatus's key/value pairs as a dict."""
    return {kv.key: kv.value for kv in st.values}


def statuses(msg: Any, component: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """The statuses of a DiagnosticArray from nodes' ``component`` (``fusion``), with their
    values."""
    for st in msg.status:
        if st.name.endswith(f': {component}'):
            yield st, values(st)

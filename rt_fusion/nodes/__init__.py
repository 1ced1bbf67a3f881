"""Thin rclpy adapters: messages <-> core types, one file per node (``<name>_node.py``).

Imported without ROS 2 on the path (a shell that has sourced nothing), the nodes stop with one
line that says what to source, not a ``ModuleNotFoundError`` deep in their imports.
"""

import importlib.util

NOT_SOURCED = (
    'rt_fusion: ROS 2 (rclpy) is not on this Python path: source /opt/ros/<distro>/setup.bash '
    "and your workspace's install/setup.bash first (or use make setup's .venv/bin/python)"
)

if importlib.util.find_spec('rclpy') is None:  # pragma: no cover - depends on the environment
    raise ImportError(NOT_SOURCED)

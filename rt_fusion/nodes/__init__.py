"""Thin rclpy adapters: messages <-> core types, one file per node (``<name>_node.py``)."""

"""rt_fusion: real-time multi-sensor perception and planning for rclpy.

``rt_fusion.core`` and ``rt_fusion.inference`` are ROS-free (numpy + stdlib); ``rt_fusion.nodes``
holds the thin rclpy adapters.
"""

from __future__ import annotations

from rt_fusion.core.errors import RtFusionError

__version__ = '0.1.0'
__all__ = ['RtFusionError', '__version__']

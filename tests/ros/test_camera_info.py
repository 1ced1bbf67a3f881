"""The fusion's intrinsics come from the camera's CameraInfo: a real publisher on the fusion's
``~/in/camera_info``, scaled to the model input; a CameraInfo that is not a camera is counted and
dropped, the intrinsics unchanged."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ros_context


def _wait(what: Callable[[], Any], executor: Any, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < end, 'not within the deadline'
        executor.spin_once(timeout_sec=0.05)


def test_camera_info_sets_the_intrinsics_and_a_bad_one_is_counted() -> None:
    import rclpy  # noqa: PLC0415
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415
    from rclpy.qos import qos_profile_sensor_data  # noqa: PLC0415
    from sensor_msgs.msg import CameraInfo  # noqa: PLC0415

    from rt_fusion.nodes.fusion_node import FusionNode  # noqa: PLC0415

    overrides = {'backend': 'none', 'autostart': False, 'hearing_model': ''}
    with ros_context() as context:
        node = FusionNode(
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
        )
        node.trigger_configure()
        camera = rclpy.create_node('camera_driver', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(camera)
        try:
            before = node.engine.geometry
            pub = camera.create_publisher(
                CameraInfo, '/fusion/in/camera_info', qos_profile_sensor_data
            )
            _wait(pub.get_subscription_count, executor)
            info = CameraInfo(width=1280, height=720)
            info.k = [1000.0, 0.0, 650.0, 0.0, 1000.0, 350.0, 0.0, 0.0, 1.0]
            info.d = [-0.1, 0.02, 0.0, 0.0, 0.0]

            def took() -> bool:
                pub.publish(info)  # best effort: again until it is in
                return node.engine.geometry.fx != before.fx

            _wait(took, executor)
            g = node.engine.geometry
            assert (g.fx, g.fy, g.cx, g.cy) == pytest.approx(
                (1000 * 640 / 1280, 1000 * 384 / 720, 650 * 640 / 1280, 350 * 384 / 720)
            )
            assert g.d == pytest.approx((-0.1, 0.02, 0.0, 0.0, 0.0))
            assert (g.x, g.height) == (before.x, before.height)  # the mounting stays
            assert node.camera_info is not None and '1280x720' in node.camera_info.source
            bad = CameraInfo(width=1280, height=720)
            bad.k = [-5.0, 0.0, 650.0, 0.0, 1000.0, 350.0, 0.0, 0.0, 1.0]

            def counted() -> bool:
                pub.publish(bad)
                return node.rejected.get('camera_info_invalid', 0) > 0

            _wait(counted, executor)
            assert node.engine.geometry == g
        finally:
            camera.destroy_node()
            node.trigger_cleanup()
            node.destroy_node()

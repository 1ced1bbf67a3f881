"""QoS as a vehicle stack sets it: sensor inputs match best-effort drivers, and a parameter file's
``qos_overrides`` change the fusion's publishers and subscriptions (seen by another node through
the ROS graph, not read back from the node's own objects)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ros_context


def _wait(what: Callable[[], Any], executor: Any, deadline_s: float = 60.0) -> Any:
    end = time.monotonic() + deadline_s
    while not (got := what()):
        assert time.monotonic() < end, 'not within the deadline'
        executor.spin_once(timeout_sec=0.05)
    return got


def _fusion(context: Any, **overrides: Any) -> Any:
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from rt_fusion.nodes.fusion_node import FusionNode  # noqa: PLC0415

    base = {'backend': 'none', 'autostart': False, 'hearing_model': ''}
    node = FusionNode(
        context=context,
        parameter_overrides=[Parameter(k, value=v) for k, v in (base | overrides).items()],
    )
    node.trigger_configure()
    return node


def test_a_best_effort_imu_and_wheel_speed_are_taken_in() -> None:
    """An IMU driver and a CAN gateway publishing best effort (sensor-data QoS) reach the
    fusion: their samples pass its boundary checks and go into the aligner and the ego filter."""
    import rclpy  # noqa: PLC0415
    from geometry_msgs.msg import TwistStamped  # noqa: PLC0415
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
    from rclpy.qos import qos_profile_sensor_data  # noqa: PLC0415
    from sensor_msgs.msg import Imu  # noqa: PLC0415

    with ros_context() as context:
        node = _fusion(context)
        feeder = rclpy.create_node('imu_driver', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(feeder)
        try:
            imu_pub = feeder.create_publisher(Imu, '/fusion/in/imu', qos_profile_sensor_data)
            speed_pub = feeder.create_publisher(
                TwistStamped, '/fusion/in/speed', qos_profile_sensor_data
            )
            _wait(lambda: imu_pub.get_subscription_count() and speed_pub.get_subscription_count(),
                  executor)  # fmt: skip
            k = 0

            def fed() -> bool:
                nonlocal k
                k += 1
                msg = Imu()
                msg.header.stamp.sec = 100 + k
                msg.linear_acceleration.z = 9.81
                imu_pub.publish(msg)
                speed = TwistStamped()
                speed.header.stamp.sec = 100 + k
                speed.twist.linear.x = 12.5
                speed_pub.publish(speed)
                return 'imu' in node._last_stamp and 'speed' in node._last_stamp

            _wait(fed, executor)
            assert not node.rejected
            assert node.engine._speeds and node.engine._speeds[-1][1] == 12.5
        finally:
            feeder.destroy_node()
            node.trigger_cleanup()
            node.destroy_node()


def test_qos_overrides_in_the_parameters_change_what_the_graph_sees() -> None:
    import rclpy  # noqa: PLC0415
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
    from rclpy.qos import ReliabilityPolicy  # noqa: PLC0415

    with ros_context() as context:
        plain = _fusion(context)
        probe = rclpy.create_node('probe', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe)
        try:
            (imu,) = _wait(lambda: probe.get_subscriptions_info_by_topic('/fusion/in/imu'),
                           executor)  # fmt: skip
            assert imu.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT  # the default
            (out,) = _wait(lambda: probe.get_publishers_info_by_topic('/fusion/out/objects'),
                           executor)  # fmt: skip
            assert out.qos_profile.reliability == ReliabilityPolicy.RELIABLE
            # Read-only, listed as parameters (``ros2 param describe``).
            name = 'qos_overrides./fusion/in/imu.subscription.reliability'
            assert plain.describe_parameter(name).read_only
        finally:
            plain.trigger_cleanup()
            plain.destroy_node()
        over = _fusion(
            context,
            **{
                'qos_overrides./fusion/in/imu.subscription.reliability': 'reliable',
                'qos_overrides./fusion/out/objects.publisher.reliability': 'best_effort',
            },
        )
        try:

            def only(infos: list[Any], policy: Any) -> bool:  # the first node's are gone
                return len(infos) == 1 and infos[0].qos_profile.reliability == policy

            _wait(lambda: only(probe.get_subscriptions_info_by_topic('/fusion/in/imu'),
                               ReliabilityPolicy.RELIABLE), executor)  # fmt: skip
            _wait(lambda: only(probe.get_publishers_info_by_topic('/fusion/out/objects'),
                               ReliabilityPolicy.BEST_EFFORT), executor)  # fmt: skip
        finally:
            over.trigger_cleanup()
            over.destroy_node()
            probe.destroy_node()


@pytest.mark.parametrize(
    ('name', 'value', 'reason'),
    [
        ('qos_overrides./fusion/in/imu.subscription.reliability', 'sometimes', 'one of'),
        ('qos_overrides./fusion/in/imu.subscription.depth', -3, 'integer >= 0'),
        ('qos_overrides./fusion/in/imu.subscription.reliabilty', 'reliable', 'no QoS policy'),
        ('qos_overrides./fusion/in/imu.subscriber.reliability', 'reliable', '<publisher|'),
    ],
)
def test_a_bad_qos_override_fails_the_start_with_its_name(
    name: str, value: Any, reason: str
) -> None:
    with ros_context() as context:
        node = _fusion(context, **{name: value})
        try:
            assert node.failure is not None, 'configured with a bad QoS override'
            said = str(node.failure)
            assert name in said and reason in said, said
        finally:
            node.destroy_node()

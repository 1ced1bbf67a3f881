"""fusion_node's messages: fused frames out as ``ObjectArray``, the ego as ``Odometry`` and as
the ``odom → base_link`` transform on ``/tf``, radar objects in as the fusion core takes them."""

from __future__ import annotations

import math
from typing import Any

from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rt_fusion_msgs.msg import Object, ObjectArray
from tf2_msgs.msg import TFMessage

from rt_fusion.core.fusion import EgoState, FusedFrame, RadarObjectIn
from rt_fusion.ros import graph
from rt_fusion.ros.conversions import ns_to_time


def objects_msg(fused: FusedFrame, frame_id: str, inputs_complete_ns: int) -> ObjectArray:
    """A fused frame as an ``ObjectArray`` in ``frame_id``, stamped with the frame's time."""
    arr = ObjectArray()
    arr.header.stamp = ns_to_time(fused.stamp_ns)
    arr.header.frame_id = frame_id
    tracked = len(fused.velocity_std) == len(fused.objects)
    for k, o in enumerate(fused.objects):
        m = Object(
            id=o.id,
            object_class=o.object_class,
            class_probability=float(o.class_probability),
            yaw=float(o.yaw),
            yaw_rate=0.0,
            position_std=float(o.position_std),
            velocity_std=float(fused.velocity_std[k]) if tracked else 0.0,
            sources=o.sources,
            existence_probability=float(fused.existence[k]) if tracked else 1.0,
            age_s=float(fused.age_s[k]) if tracked else 0.0,
        )
        m.position.x, m.position.y = o.x, o.y
        m.size.x, m.size.y, m.size.z = o.length, o.width, 1.5
        m.velocity.x, m.velocity.y = o.vx, o.vy
        arr.objects.append(m)
    arr.inputs_complete_ns = inputs_complete_ns
    return arr


def fill_odometry(odom: Any, ego: EgoState, stamp: Time, odom_frame: str, base_frame: str) -> None:
    """The ego's dead-reckoned pose and twist into a ``nav_msgs/Odometry`` (reused: its
    covariance arrays are not rebuilt every frame)."""
    odom.header.stamp = stamp
    odom.header.frame_id, odom.child_frame_id = odom_frame, base_frame
    odom.pose.pose.position.x, odom.pose.pose.position.y = ego.x, ego.y
    odom.pose.pose.orientation.z = math.sin(ego.yaw / 2)
    odom.pose.pose.orientation.w = math.cos(ego.yaw / 2)
    odom.twist.twist.linear.x, odom.twist.twist.angular.z = ego.v, ego.yaw_rate
    # Covariances (row-major 6x6: x y z roll pitch yaw): dead reckoning's drift, speed's std.
    odom.pose.covariance[0] = odom.pose.covariance[7] = ego.xy_std**2
    odom.twist.covariance[0] = ego.v_std**2


def radar_objects_in(objects: Any) -> tuple[list[RadarObjectIn], int]:
    """``rt_fusion_msgs/RadarObject`` entries as the fusion core takes them, and how many were
    dropped for a non-finite position or velocity."""
    finite = [
        o
        for o in objects
        if all(math.isfinite(v) for v in (o.position.x, o.position.y, o.velocity.x, o.velocity.y))
    ]
    return [
        RadarObjectIn(
            o.id,
            o.position.x,
            o.position.y,
            o.velocity.x,
            o.velocity.y,
            o.object_class,
            o.length,
            o.width,
            o.orientation,
            o.existence_probability,
            o.position_rms_x,
            o.position_rms_y,
        )
        for o in finite
    ], len(objects) - len(finite)


class PoseOut:
    """The ego's pose out: ``~/out/odometry`` (``odom_qos``) and, with ``tf``, the same pose as
    ``odom → base_link`` on ``/tf`` (REP-105; tf2's QoS: reliable, depth 100). The messages are
    made once and refilled every frame."""

    def __init__(
        self, node: Any, odom_qos: Any, odom_frame: str, base_frame: str, tf: bool
    ) -> None:
        self.odom = Odometry()
        self.frames = (odom_frame, base_frame)
        self.odom_pub = node.create_lifecycle_publisher(Odometry, '~/out/odometry', odom_qos)
        self.tf = TFMessage(transforms=[TransformStamped()])
        tf_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.tf_pub = (
            node.create_lifecycle_publisher(TFMessage, graph.TF_TOPIC, tf_qos) if tf else None
        )

    def fill(self, ego: EgoState, stamp: Time) -> None:
        """The ego at ``stamp`` into both messages."""
        fill_odometry(self.odom, ego, stamp, *self.frames)
        if self.tf_pub is not None:
            t = self.tf.transforms[0]
            t.header.stamp = stamp
            t.header.frame_id, t.child_frame_id = self.frames
            pose = self.odom.pose.pose
            t.transform.translation.x, t.transform.translation.y = pose.position.x, pose.position.y
            t.transform.rotation = pose.orientation

    def publish(self) -> None:
        """Odometry first (the planner transforms the objects with it), then /tf."""
        self.odom_pub.publish(self.odom)
        if self.tf_pub is not None:
            self.tf_pub.publish(self.tf)

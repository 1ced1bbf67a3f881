"""fusion_node's messages: fused frames out as ``ObjectArray``, the ego as ``Odometry`` and as
the ``odom → base_link`` transform on ``/tf``, radar objects in as the fusion core takes them."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import numpy.typing as npt
from geometry_msgs.msg import TransformStamped
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rt_fusion_msgs.msg import Lineage, Object, ObjectArray
from tf2_msgs.msg import TFMessage

from rt_fusion.core.fusion import EgoState, FusedFrame, RadarObjectIn
from rt_fusion.ros import graph
from rt_fusion.ros.conversions import ns_to_time
from rt_fusion.ros.fusion import cdr
from rt_fusion.ros.qos import OVERRIDABLE


def objects_msg(fused: FusedFrame, frame_id: str, inputs_complete_ns: int) -> ObjectArray:
    """A fused frame as an ``ObjectArray`` in ``frame_id``, stamped with the frame's time."""
    arr = ObjectArray()
    arr.header.stamp = ns_to_time(fused.stamp_ns)
    arr.header.frame_id = frame_id
    tracked = len(fused.velocity_std) == len(fused.objects)
    covs = len(fused.position_cov) == len(fused.objects)
    for k, o in enumerate(fused.objects):
        c = _cls(o.object_class)
        m = Object(
            id=o.id,
            object_class=o.object_class,
            class_probability=float(o.class_probability),
            yaw=float(o.yaw),
            yaw_rate=float(fused.yaw_rate[k]) if covs else 0.0,
            position_std=float(o.position_std),
            velocity_std=float(fused.velocity_std[k]) if tracked else 0.0,
            sources=o.sources,
            existence_probability=float(fused.existence[k]) if tracked else 1.0,
            age_s=float(fused.age_s[k]) if tracked else 0.0,
        )
        if covs:  # tracks: the filter's; untracked objects: isotropic from position_std
            xx, xy, yy = fused.position_cov[k]
            vxx, vxy, vyy = fused.velocity_cov[k]
        else:
            xx = yy = float(o.position_std) ** 2
            vxx = vyy = float(fused.velocity_std[k]) ** 2 if tracked else 0.0
            xy = vxy = 0.0
        m.position_covariance = [xx, xy, xy, yy]
        m.velocity_covariance = [vxx, vxy, vxy, vyy]
        m.position.x, m.position.y = o.x, o.y
        m.size.x, m.size.y, m.size.z = o.length, o.width, CLASS_HEIGHT[c]
        m.velocity.x, m.velocity.y = o.vx, o.vy
        arr.objects.append(m)
    arr.inputs_complete_ns = inputs_complete_ns
    return arr


def object_columns(fused: FusedFrame) -> dict[str, npt.NDArray[Any]]:
    """The fields of :func:`objects_msg`'s objects as columns (:mod:`.cdr`'s names), the same
    values, without a message object per object."""
    objs = fused.objects
    n = len(objs)
    tracked = len(fused.velocity_std) == n
    covs = len(fused.position_cov) == n

    def col(attr: str, kind: Any = np.float64) -> npt.NDArray[Any]:
        return np.fromiter((getattr(o, attr) for o in objs), kind, n)

    cls = col('object_class', np.int64)
    known = (cls >= 0) & (cls < len(CLASS_NAMES))
    std = col('position_std')
    vel_std = np.asarray(fused.velocity_std, np.float64) if tracked else np.zeros(n)
    if covs:  # tracks: the filter's; untracked objects: isotropic from position_std
        pc = np.asarray(fused.position_cov, np.float64).reshape(n, 3)
        vc = np.asarray(fused.velocity_cov, np.float64).reshape(n, 3)
    else:
        pc = np.column_stack([std**2, np.zeros(n), std**2])
        vc = np.column_stack([vel_std**2, np.zeros(n), vel_std**2])
    return {
        'id': col('id', np.int64),
        'object_class': cls,
        'class_probability': col('class_probability'),
        'position': np.column_stack([col('x'), col('y'), np.zeros(n)]),
        'yaw': col('yaw'),
        'size': np.column_stack(
            [col('length'), col('width'), np.asarray(CLASS_HEIGHT)[np.where(known, cls, 0)]]
        ),
        'velocity': np.column_stack([col('vx'), col('vy'), np.zeros(n)]),
        'yaw_rate': np.asarray(fused.yaw_rate, np.float64) if covs else np.zeros(n),
        'position_std': std,
        'velocity_std': vel_std,
        'position_covariance': pc[:, [0, 1, 1, 2]],
        'velocity_covariance': vc[:, [0, 1, 1, 2]],
        'sources': col('sources', np.int64),
        'existence_probability': (
            np.asarray(fused.existence, np.float64) if tracked else np.ones(n)
        ),
        'age_s': np.asarray(fused.age_s, np.float64) if tracked else np.zeros(n),
    }


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


class ObjectsOut:
    """``~/out/objects``: each fused frame's ``ObjectArray``, written as CDR bytes from columns
    (:mod:`.cdr`; ``serialized``) or built as a message object by object (:func:`objects_msg`),
    with the node's times and the frame's lineage; ``published_ns`` set as it goes out."""

    def __init__(self, node: Any, qos: Any, frame_id: str, serialized: bool) -> None:
        from rt_fusion.ros.fusion.cdr import ObjectArrayWriter  # noqa: PLC0415

        self.pub = node.create_lifecycle_publisher(
            ObjectArray, '~/out/objects', qos, qos_overriding_options=OVERRIDABLE
        )
        self.frame_id = frame_id
        self.writer = ObjectArrayWriter(frame_id) if serialized else None
        self.msg: ObjectArray | None = None

    def build(self, fused: FusedFrame, inputs_complete_ns: int, lineage: dict[str, int]) -> None:
        """The message of ``fused`` (``lineage``: Lineage's fields but ``published_ns``)."""
        if self.writer is not None:
            n = len(fused.objects)
            self.writer.write(
                fused.stamp_ns, object_columns(fused), n, inputs_complete_ns, lineage
            )
            return
        self.msg = objects_msg(fused, self.frame_id, inputs_complete_ns)
        self.msg.lineage = Lineage(**lineage)

    def publish(self) -> int:
        """Out, stamped with the time now; returns that time."""
        published_ns = time.time_ns()
        if self.writer is not None:
            self.writer.set_published(published_ns)
            self.pub.publish(self.writer.payload())
        else:
            assert self.msg is not None
            self.msg.published_ns = self.msg.lineage.published_ns = published_ns
            self.pub.publish(self.msg)
        return published_ns


#: The float64 fields of the fusion's Odometry that change from frame to frame, and of its /tf.
ODOMETRY_FIELDS = (
    'pose.pose.position.x', 'pose.pose.position.y', 'pose.pose.orientation.z',
    'pose.pose.orientation.w', 'twist.twist.linear.x', 'twist.twist.angular.z',
    'pose.covariance[0]', 'pose.covariance[7]', 'twist.covariance[0]',
)  # fmt: skip
TF_FIELDS = (
    'transforms[0].transform.translation.x', 'transforms[0].transform.translation.y',
    'transforms[0].transform.rotation.z', 'transforms[0].transform.rotation.w',
)  # fmt: skip


def odometry_values(ego: EgoState) -> tuple[float, ...]:
    """The values of :data:`ODOMETRY_FIELDS` for ``ego``: its dead-reckoned pose (a pure
    heading) and speed, and the covariances (row-major 6x6: x y z roll pitch yaw) of dead
    reckoning's drift and of the speed."""
    z, w = math.sin(ego.yaw / 2), math.cos(ego.yaw / 2)
    xy_var = ego.xy_std**2
    return (ego.x, ego.y, z, w, ego.v, ego.yaw_rate, xy_var, xy_var, ego.v_std**2)


class PoseOut:
    """The ego's pose out: ``~/out/odometry`` (``odom_qos``) and, with ``tf``, the same pose as
    ``odom → base_link`` on ``/tf`` (REP-105; tf2's QoS: reliable, depth 100). Both are written
    as CDR bytes (:class:`cdr.FixedMessage`: the frame ids never change, only the stamp and a
    few float64s), not refilled message objects for rclpy to convert every frame."""

    def __init__(
        self, node: Any, odom_qos: Any, odom_frame: str, base_frame: str, tf: bool
    ) -> None:
        odom = Odometry()
        odom.header.frame_id, odom.child_frame_id = odom_frame, base_frame
        self.odom = cdr.FixedMessage(odom, 'header.stamp', ODOMETRY_FIELDS)
        self.odom_pub = node.create_lifecycle_publisher(
            Odometry, '~/out/odometry', odom_qos, qos_overriding_options=OVERRIDABLE
        )
        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = odom_frame, base_frame
        self.tf = cdr.FixedMessage(
            TFMessage(transforms=[t]), 'transforms[0].header.stamp', TF_FIELDS
        )
        tf_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.tf_pub = (
            node.create_lifecycle_publisher(TFMessage, graph.TF_TOPIC, tf_qos) if tf else None
        )

    def fill(self, ego: EgoState, stamp_ns: int) -> None:
        """The ego at ``stamp_ns`` into both messages."""
        values = odometry_values(ego)
        self.odom.write(stamp_ns, values)
        if self.tf_pub is not None:
            self.tf.write(stamp_ns, values[:4])

    def publish(self) -> None:
        """Odometry first (the planner transforms the objects with it), then /tf."""
        self.odom_pub.publish(self.odom.payload())
        if self.tf_pub is not None:
            self.tf_pub.publish(self.tf.payload())


#: Class names of rt_fusion_msgs/Object's classes, as vision_msgs class ids.
CLASS_NAMES = ('unknown', 'car', 'truck', 'pedestrian', 'bicycle', 'motorcycle', 'static',
               'emergency_vehicle')  # fmt: skip
#: A prior height per class [m] (heights are not measured: a class prior, not one constant).
CLASS_HEIGHT = (1.5, 1.5, 3.2, 1.75, 1.7, 1.5, 1.0, 2.6)
#: Marker colours per class (r, g, b).
CLASS_COLOUR = ((0.6, 0.6, 0.6), (0.2, 0.6, 1.0), (0.1, 0.3, 0.9), (1.0, 0.5, 0.0),
                (0.9, 0.9, 0.1), (0.7, 0.3, 0.9), (0.5, 0.5, 0.5), (1.0, 0.1, 0.1))  # fmt: skip


def _heading(orientation: Any, yaw: float) -> None:
    """A pure heading ``yaw`` [rad] into a ``geometry_msgs/Quaternion``."""
    orientation.z, orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)


def _cls(k: int) -> int:
    return k if 0 <= k < len(CLASS_NAMES) else 0


def detections3d_msg(fused: FusedFrame, frame_id: str) -> Any:
    """The fused objects as a ``vision_msgs/Detection3DArray``: track id, class hypothesis with
    its probability, the pose with its covariance (position from the track, heading from its
    velocity), the box (length, width, the class's prior height)."""
    from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose  # noqa: PLC0415

    out = Detection3DArray()
    out.header.stamp = ns_to_time(fused.stamp_ns)
    out.header.frame_id = frame_id
    tracked = len(fused.velocity_std) == len(fused.objects)
    for k, o in enumerate(fused.objects):
        d = Detection3D(id=str(o.id))
        d.header = out.header
        c = _cls(o.object_class)
        h = ObjectHypothesisWithPose()
        h.hypothesis.class_id, h.hypothesis.score = CLASS_NAMES[c], float(o.class_probability)
        pose = h.pose.pose
        pose.position.x, pose.position.y, pose.position.z = o.x, o.y, CLASS_HEIGHT[c] / 2
        _heading(pose.orientation, o.yaw)
        cov = [0.0] * 36  # x y z roll pitch yaw, row-major; unknown axes: a large variance
        if len(fused.position_cov) == len(fused.objects):  # a track's own (x, y) covariance
            cov[0], cov[1], cov[7] = fused.position_cov[k]
            cov[6] = cov[1]
        else:
            cov[0] = cov[7] = float(o.position_std) ** 2
        cov[14] = cov[21] = cov[28] = 1e6
        # heading from the velocity: its spread over the speed (a slow object's is unknown)
        speed = math.hypot(o.vx, o.vy)
        vstd = float(fused.velocity_std[k]) if tracked else math.nan
        cov[35] = (vstd / speed) ** 2 if speed > 1.0 and math.isfinite(vstd) else 1e6
        h.pose.covariance = cov
        d.results.append(h)
        d.bbox.center = pose
        d.bbox.size.x, d.bbox.size.y, d.bbox.size.z = o.length, o.width, CLASS_HEIGHT[c]
        out.detections.append(d)
    return out


def markers_msg(fused: FusedFrame, frame_id: str, lifetime_s: float = 0.3) -> Any:
    """The fused objects for RViz (``visualization_msgs/MarkerArray``): a box per object
    coloured by class, its id and class as text, its velocity over ground as an arrow."""
    from visualization_msgs.msg import Marker, MarkerArray  # noqa: PLC0415

    out = MarkerArray()
    stamp = ns_to_time(fused.stamp_ns)
    life_ns = round(lifetime_s * 1e9)
    for o in fused.objects:
        c = _cls(o.object_class)
        r, g, b = CLASS_COLOUR[c]
        for ns, kind in (('box', Marker.CUBE), ('label', Marker.TEXT_VIEW_FACING),
                         ('velocity', Marker.ARROW)):  # fmt: skip
            m = Marker(ns=ns, id=int(o.id), type=kind, action=Marker.ADD)
            m.header.stamp, m.header.frame_id = stamp, frame_id
            m.lifetime.sec, m.lifetime.nanosec = divmod(life_ns, 1_000_000_000)
            m.color.r, m.color.g, m.color.b, m.color.a = r, g, b, 0.8
            m.pose.position.x, m.pose.position.y = o.x, o.y
            m.pose.orientation.w = 1.0
            if kind == Marker.CUBE:
                m.pose.position.z = CLASS_HEIGHT[c] / 2
                _heading(m.pose.orientation, o.yaw)
                m.scale.x, m.scale.y, m.scale.z = o.length, o.width, CLASS_HEIGHT[c]
            elif kind == Marker.TEXT_VIEW_FACING:
                m.pose.position.z = CLASS_HEIGHT[c] + 0.5
                m.scale.z = 0.8
                m.color.r = m.color.g = m.color.b = 1.0
                m.text = f'{o.id} {CLASS_NAMES[c]}'
            else:
                m.pose.position.z = CLASS_HEIGHT[c] / 2
                _heading(m.pose.orientation, math.atan2(o.vy, o.vx))
                m.scale.x = max(math.hypot(o.vx, o.vy), 0.01)  # 1 m per m/s
                m.scale.y = m.scale.z = 0.2
            out.markers.append(m)
    return out


class ViewsOut:
    """``~/out/detections`` (``vision_msgs/Detection3DArray``) and ``~/out/markers``
    (``visualization_msgs/MarkerArray``) of every fused frame, each built only while someone
    subscribes (the fusion's own latency pays nothing otherwise)."""

    def __init__(self, node: Any, qos: Any, frame_id: str) -> None:
        from vision_msgs.msg import Detection3DArray  # noqa: PLC0415
        from visualization_msgs.msg import MarkerArray  # noqa: PLC0415

        self.frame_id = frame_id
        self.det_pub = node.create_lifecycle_publisher(Detection3DArray, '~/out/detections', qos)
        self.marker_pub = node.create_lifecycle_publisher(MarkerArray, '~/out/markers', qos)

    def publish(self, fused: FusedFrame) -> None:
        """Both views of ``fused``, where they have subscribers."""
        if self.det_pub.get_subscription_count():
            self.det_pub.publish(detections3d_msg(fused, self.frame_id))
        if self.marker_pub.get_subscription_count():
            self.marker_pub.publish(markers_msg(fused, self.frame_id))

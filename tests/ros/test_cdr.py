"""ObjectArray written as CDR bytes from columns is what rclpy serializes from the message built
object by object, for any count and frame id: as long, and every field equal once deserialized
(rclpy's serializer leaves its padding bytes unset, so the bytes themselves differ there)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip('rt_fusion_msgs')

from rclpy.serialization import deserialize_message, serialize_message
from rt_fusion_msgs.msg import Lineage, ObjectArray

from rt_fusion.ros.fusion import cdr


def _columns(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    cols: dict[str, np.ndarray] = {}
    for name, kind, count in cdr.OBJECT_FIELDS:
        shape = (n, count) if count > 1 else (n,)
        if kind in ('u1', '<u4'):
            cols[name] = rng.integers(0, 200 if kind == 'u1' else 2**31, shape).astype(kind)
        else:
            cols[name] = rng.normal(0, 50, shape).astype(kind)
    return cols


def _message(cols: dict[str, np.ndarray], n: int, frame_id: str, stamp_ns: int) -> ObjectArray:
    from rt_fusion_msgs.msg import Object  # noqa: PLC0415

    arr = ObjectArray()
    arr.header.frame_id = frame_id
    arr.header.stamp.sec, arr.header.stamp.nanosec = stamp_ns // 10**9, stamp_ns % 10**9
    for i in range(n):
        o = Object()
        for name, _kind, count in cdr.OBJECT_FIELDS:
            value = cols[name][i]
            if name in ('position', 'size', 'velocity'):
                part = getattr(o, name)
                part.x, part.y, part.z = (float(v) for v in value)
            elif count > 1:
                setattr(o, name, [float(v) for v in value])
            else:
                setattr(o, name, value.item())
        arr.objects.append(o)
    return arr


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 70),
    frame_id=st.text(alphabet='abcdefgh_/0123456789', min_size=0, max_size=19),
    seed=st.integers(0, 2**16),
)
def test_the_bytes_deserialize_to_the_message_rclpy_serializes(
    n: int, frame_id: str, seed: int
) -> None:
    cols = _columns(n, seed)
    stamp_ns = 1_700_000_000_123_456_789 + seed
    lineage = {'capture_ns': stamp_ns, 'received_ns': stamp_ns + 5, 'inference_done_ns': 7}
    writer = cdr.ObjectArrayWriter(frame_id)
    writer.write(stamp_ns, cols, n, stamp_ns + 11, lineage)
    writer.set_published(stamp_ns + 99)
    want = _message(cols, n, frame_id, stamp_ns)
    want.inputs_complete_ns, want.published_ns = stamp_ns + 11, stamp_ns + 99
    want.lineage = Lineage(**lineage, published_ns=stamp_ns + 99)
    payload = writer.payload()
    assert len(payload) == len(serialize_message(want))
    back = deserialize_message(payload, ObjectArray)
    assert back == want  # every field, the objects' included
    assert len(back.objects) == n and back.header.frame_id == frame_id


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 40), tracked=st.booleans(), seed=st.integers(0, 2**16))
def test_a_fused_frame_s_columns_give_the_message_objects_msg_builds(
    n: int, tracked: bool, seed: int
) -> None:
    from rt_fusion.core.fusion import EgoState, FusedFrame, FusedObject  # noqa: PLC0415
    from rt_fusion.ros.fusion import messages  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    objects = [
        FusedObject(
            int(rng.integers(0, 10**6)), int(rng.integers(0, 9)), float(rng.random()),
            *(float(v) for v in rng.normal(0, 30, 3)), *(float(v) for v in rng.random(2) * 5),
            *(float(v) for v in rng.normal(0, 10, 2)), float(rng.random()), float('nan'),
            int(rng.integers(0, 8)),
        )
        for _ in range(n)
    ]  # fmt: skip
    per = [float(v) for v in rng.random(n)]
    cov = [tuple(float(v) for v in rng.random(3)) for _ in range(n)]
    fused = FusedFrame(
        1_700_000_000_000_000_123, objects, EgoState(), float('nan'), (), 0,
        per if tracked else [], per if tracked else [], per if tracked else [],
        cov if tracked else [], cov if tracked else [], per if tracked else [],
    )  # fmt: skip
    writer = cdr.ObjectArrayWriter('base_link')
    writer.write(fused.stamp_ns, messages.object_columns(fused), n, 5, {'capture_ns': 3})
    writer.set_published(9)
    want = messages.objects_msg(fused, 'base_link', 5)
    want.published_ns = 9
    want.lineage = Lineage(capture_ns=3, published_ns=9)
    wire = deserialize_message(serialize_message(want), ObjectArray)  # its float32 fields rounded
    assert deserialize_message(writer.payload(), ObjectArray) == wire


@settings(max_examples=60, deadline=None)
@given(
    st.floats(-1e4, 1e4), st.floats(-1e4, 1e4), st.floats(-7, 7), st.floats(0, 60),
    st.floats(-2, 2), st.floats(0, 5), st.floats(0, 3), st.integers(0, (2**31 - 1) * 10**9),
    st.sampled_from([('odom', 'base_link'), ('car1/odom', 'car1/base_link'), ('o', 'b' * 33)]),
)  # fmt: skip
def test_the_pose_as_cdr_bytes_is_what_rclpy_serializes_from_the_filled_messages(
    x: float, y: float, yaw: float, v: float, w: float, xy_std: float, v_std: float,
    stamp_ns: int, frames: tuple[str, str],
) -> None:  # fmt: skip
    """Odometry and the /tf message written in place (the fusion's PoseOut) deserialize to the
    messages filled field by field, for any frame ids."""
    from geometry_msgs.msg import TransformStamped  # noqa: PLC0415
    from nav_msgs.msg import Odometry  # noqa: PLC0415
    from tf2_msgs.msg import TFMessage  # noqa: PLC0415

    from rt_fusion.core.fusion import EgoState  # noqa: PLC0415
    from rt_fusion.ros.conversions import ns_to_time  # noqa: PLC0415
    from rt_fusion.ros.fusion import messages  # noqa: PLC0415

    ego = EgoState(stamp_ns, x, y, yaw, v, w, v_std=v_std, xy_std=xy_std)
    odom_frame, base_frame = frames
    expected = Odometry()  # filled field by field, as a driver would
    expected.header.stamp = ns_to_time(stamp_ns)
    expected.header.frame_id, expected.child_frame_id = odom_frame, base_frame
    expected.pose.pose.position.x, expected.pose.pose.position.y = x, y
    expected.pose.pose.orientation.z = math.sin(yaw / 2)
    expected.pose.pose.orientation.w = math.cos(yaw / 2)
    expected.twist.twist.linear.x, expected.twist.twist.angular.z = v, w
    expected.pose.covariance[0] = expected.pose.covariance[7] = xy_std**2
    expected.twist.covariance[0] = v_std**2
    template = Odometry()
    template.header.frame_id, template.child_frame_id = odom_frame, base_frame
    writer = cdr.FixedMessage(template, 'header.stamp', messages.ODOMETRY_FIELDS)
    values = messages.odometry_values(ego)
    writer.write(stamp_ns, values)
    assert deserialize_message(writer.payload(), Odometry) == expected
    assert len(writer.payload()) == len(serialize_message(expected))

    t = TransformStamped()
    t.header.stamp = ns_to_time(stamp_ns)
    t.header.frame_id, t.child_frame_id = odom_frame, base_frame
    t.transform.translation.x, t.transform.translation.y = x, y
    t.transform.rotation = expected.pose.pose.orientation
    t2 = TransformStamped()
    t2.header.frame_id, t2.child_frame_id = odom_frame, base_frame
    tf_writer = cdr.FixedMessage(
        TFMessage(transforms=[t2]), 'transforms[0].header.stamp', messages.TF_FIELDS
    )
    tf_writer.write(stamp_ns, values[:4])
    assert deserialize_message(tf_writer.payload(), TFMessage) == TFMessage(transforms=[t])

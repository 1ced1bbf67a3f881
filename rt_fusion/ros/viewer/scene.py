"""The graph's messages as Foxglove messages (foxglove-sdk's built-in schemas), for the viewer.

Each function takes the ROS message (rclpy) and returns what the viewer logs on its channel:
tracked objects as 3D boxes with a label and a velocity arrow, radar returns as small spheres,
the planned trajectory as a line, transforms as ``FrameTransforms``, audio events as log
lines, and a camera frame as a downscaled JPEG. Foxglove and Lichtblick draw these with their
default panels (3D, Image, Log, Raw Messages).
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
from foxglove import messages as fm

#: rt_fusion_msgs/Object classes (Object.msg CLASS_*) as the viewer labels them.
CLASS_NAMES = (
    'unknown',
    'car',
    'truck',
    'pedestrian',
    'bicycle',
    'motorcycle',
    'static',
    'emergency',
)
#: Their colours (r, g, b): vehicles blue, people orange, two-wheelers green, static grey,
#: an emergency vehicle red.
CLASS_COLOURS = (
    (0.7, 0.7, 0.7),
    (0.2, 0.5, 1.0),
    (0.1, 0.3, 0.8),
    (1.0, 0.6, 0.1),
    (0.2, 0.8, 0.3),
    (0.1, 0.6, 0.2),
    (0.5, 0.5, 0.5),
    (1.0, 0.1, 0.1),
)


def timestamp(stamp: Any) -> fm.Timestamp:
    """A ``builtin_interfaces/Time`` as a Foxglove timestamp."""
    return fm.Timestamp(int(stamp.sec), int(stamp.nanosec))


def _yaw_quaternion(yaw: float) -> fm.Quaternion:
    return fm.Quaternion(x=0.0, y=0.0, z=math.sin(0.5 * yaw), w=math.cos(0.5 * yaw))


def _colour(cls: int, alpha: float) -> fm.Color:
    r, g, b = CLASS_COLOURS[cls] if 0 <= cls < len(CLASS_COLOURS) else CLASS_COLOURS[0]
    return fm.Color(r=r, g=g, b=b, a=alpha)


def tracks(msg: Any) -> fm.SceneUpdate:
    """An ``ObjectArray`` as one entity per object: a box of its size at its pose, a label
    (id, class, probability), and an arrow along its velocity over ground (length: 1 s of it).
    Entities live 0.5 s unless replaced, so an object that is gone disappears."""
    ts, frame = timestamp(msg.header.stamp), msg.header.frame_id
    entities = []
    for o in msg.objects:
        x, y, z = float(o.position.x), float(o.position.y), float(o.position.z)
        sx, sy, sz = float(o.size.x), float(o.size.y), float(o.size.z)
        yaw = float(o.yaw) if math.isfinite(o.yaw) else 0.0
        cls = int(o.object_class)
        name = CLASS_NAMES[cls] if cls < len(CLASS_NAMES) else str(cls)
        pose = fm.Pose(
            position=fm.Vector3(x=x, y=y, z=z + 0.5 * sz), orientation=_yaw_quaternion(yaw)
        )
        vx, vy = float(o.velocity.x), float(o.velocity.y)
        speed = math.hypot(vx, vy)
        arrows = []
        if speed > 0.2:
            arrows.append(
                fm.ArrowPrimitive(
                    pose=fm.Pose(
                        position=fm.Vector3(x=x, y=y, z=z + sz + 0.2),
                        orientation=_yaw_quaternion(math.atan2(vy, vx)),
                    ),
                    shaft_length=speed,
                    shaft_diameter=0.15,
                    head_length=0.5,
                    head_diameter=0.4,
                    color=_colour(cls, 0.9),
                )
            )
        entities.append(
            fm.SceneEntity(
                timestamp=ts,
                frame_id=frame,
                id=f'track {int(o.id)}',
                lifetime=fm.Duration(0, 500_000_000),
                cubes=[
                    fm.CubePrimitive(
                        pose=pose,
                        size=fm.Vector3(x=max(sx, 0.3), y=max(sy, 0.3), z=max(sz, 0.3)),
                        color=_colour(cls, 0.45),
                    )
                ],
                arrows=arrows,
                texts=[
                    fm.TextPrimitive(
                        pose=fm.Pose(position=fm.Vector3(x=x, y=y, z=z + sz + 0.8)),
                        billboard=True,
                        font_size=14.0,
                        scale_invariant=True,
                        color=fm.Color(r=1.0, g=1.0, b=1.0, a=1.0),
                        text=f'{int(o.id)} {name} {float(o.class_probability):.2f} '
                        f'{speed:.1f} m/s',
                    )
                ],
            )
        )
    return fm.SceneUpdate(entities=entities)


def radar(msg: Any) -> fm.SceneUpdate:
    """A ``RadarObjects`` scan as small spheres in the radar's frame (one entity)."""
    spheres = [
        fm.SpherePrimitive(
            pose=fm.Pose(position=fm.Vector3(x=float(o.position.x), y=float(o.position.y), z=0.5)),
            size=fm.Vector3(x=0.5, y=0.5, z=0.5),
            color=fm.Color(r=1.0, g=0.9, b=0.2, a=0.9),
        )
        for o in msg.objects
        if math.isfinite(o.position.x) and math.isfinite(o.position.y)
    ]
    return fm.SceneUpdate(
        entities=[
            fm.SceneEntity(
                timestamp=timestamp(msg.header.stamp),
                frame_id=msg.header.frame_id or 'radar',
                id='radar',
                lifetime=fm.Duration(0, 300_000_000),
                spheres=spheres,
            )
        ]
    )


def plan(msg: Any) -> fm.SceneUpdate:
    """A ``Trajectory`` as a line through its points (green: ok, amber: a comfort stop, red: an
    emergency stop), in its header's frame."""
    colour = {0: (0.1, 0.9, 0.3), 1: (1.0, 0.7, 0.1), 2: (1.0, 0.1, 0.1)}.get(
        int(msg.status), (0.6, 0.6, 0.6)
    )
    points = [fm.Point3(x=float(p.x), y=float(p.y), z=0.05) for p in msg.points]
    return fm.SceneUpdate(
        entities=[
            fm.SceneEntity(
                timestamp=timestamp(msg.header.stamp),
                frame_id=msg.header.frame_id or 'odom',
                id='plan',
                lifetime=fm.Duration(1, 0),
                lines=[
                    fm.LinePrimitive(
                        thickness=0.3,
                        points=points,
                        color=fm.Color(r=colour[0], g=colour[1], b=colour[2], a=0.9),
                    )
                ]
                if len(points) > 1
                else [],
            )
        ]
    )


def transforms(msg: Any) -> fm.FrameTransforms:
    """A ``tf2_msgs/TFMessage`` as Foxglove frame transforms."""
    out = []
    for t in msg.transforms:
        tr, r = t.transform.translation, t.transform.rotation
        out.append(
            fm.FrameTransform(
                timestamp=timestamp(t.header.stamp),
                parent_frame_id=t.header.frame_id,
                child_frame_id=t.child_frame_id,
                translation=fm.Vector3(x=float(tr.x), y=float(tr.y), z=float(tr.z)),
                rotation=fm.Quaternion(x=float(r.x), y=float(r.y), z=float(r.z), w=float(r.w)),
            )
        )
    return fm.FrameTransforms(transforms=out)


def audio_event(msg: Any) -> fm.Log:
    """An ``AudioEvent`` as a log line (warning while active)."""
    state = 'active' if msg.active else 'ended'
    return fm.Log(
        timestamp=timestamp(msg.header.stamp),
        level=fm.LogLevel.Warning if msg.active else fm.LogLevel.Info,
        message=f'{msg.event_class} {state} (p={float(msg.probability):.2f})',
        name='hearing',
    )


def camera_jpeg(
    image: npt.NDArray[Any], encoding: str, width: int, quality: int
) -> tuple[bytes, float]:
    """A camera frame downscaled to ``width`` pixels (keeping its aspect) as JPEG bytes, and the
    scale applied (for annotations drawn in the original pixels)."""
    h, w = image.shape[:2]
    scale = min(1.0, width / float(w))
    # Bilinear: a third of the area filter's time on a 1080p frame, and a thumbnail's quality.
    small = cv2.resize(image, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_LINEAR)
    if encoding == 'rgb8':
        small = cv2.cvtColor(small, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(
        '.jpg', np.ascontiguousarray(small), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise ValueError('JPEG encoding failed')
    return buf.tobytes(), scale


def camera_boxes(
    msg: Any,
    rects: npt.NDArray[np.float64],
    shown: npt.NDArray[np.bool_],
    stamp_ns: int,
) -> fm.ImageAnnotations:
    """The tracks of an ``ObjectArray`` as rectangles on the camera image stamped ``stamp_ns``
    (``rects``: u0, v0, u1, v1 in the image's pixels, :func:`rt_fusion.core.camera.image_boxes`;
    only the ``shown`` ones), each with its id and class, coloured by class."""
    stamp = fm.Timestamp(stamp_ns // 10**9, stamp_ns % 10**9)
    points, texts = [], []
    for o, (u0, v0, u1, v1), show in zip(msg.objects, rects, shown, strict=True):
        if not show:
            continue
        cls = int(o.object_class)
        colour = _colour(cls, 1.0)
        corners = ((u0, v0), (u1, v0), (u1, v1), (u0, v1))
        points.append(
            fm.PointsAnnotation(
                timestamp=stamp,
                type=fm.PointsAnnotationType.LineLoop,
                points=[fm.Point2(x=float(u), y=float(v)) for u, v in corners],
                outline_color=colour,
                thickness=2.0,
            )
        )
        name = CLASS_NAMES[cls] if 0 <= cls < len(CLASS_NAMES) else str(cls)
        texts.append(
            fm.TextAnnotation(
                timestamp=stamp,
                position=fm.Point2(x=float(u0), y=float(max(v0 - 2.0, 12.0))),
                text=f'{int(o.id)} {name}',
                font_size=12.0,
                text_color=fm.Color(r=1.0, g=1.0, b=1.0, a=1.0),
                background_color=_colour(cls, 0.7),
            )
        )
    return fm.ImageAnnotations(timestamp=stamp, points=points, texts=texts)


def object_boxes(msg: Any) -> npt.NDArray[np.float64]:
    """An ``ObjectArray``'s objects as boxes (N, 7: x, y, z of the bottom, length, width,
    height, yaw), :func:`rt_fusion.core.camera.box_corners`' layout."""
    return np.array(
        [
            (o.position.x, o.position.y, o.position.z, o.size.x, o.size.y, o.size.z,
             o.yaw if math.isfinite(o.yaw) else 0.0)
            for o in msg.objects
        ],
        np.float64,
    ).reshape(-1, 7)  # fmt: skip


def camera_image(jpeg: bytes, stamp_ns: int) -> fm.CompressedImage:
    """A JPEG (:func:`camera_jpeg`) of a frame stamped ``stamp_ns`` as a Foxglove image."""
    stamp = fm.Timestamp(stamp_ns // 10**9, stamp_ns % 10**9)
    return fm.CompressedImage(timestamp=stamp, frame_id='camera', data=jpeg, format='jpeg')


def health(msg: Any) -> dict[str, Any]:
    """A ``DiagnosticArray`` as the health channel's JSON: per status its level, message and
    the latency and loss values the operator looks at."""
    keep = ('latency_p50_us', 'latency_p99_us', 'frames', 'frames_overrun', 'torn', 'published')
    out = []
    for s in msg.status:
        values = {kv.key: kv.value for kv in s.values if kv.key in keep}
        level = s.level if isinstance(s.level, int) else int.from_bytes(s.level, 'little')
        out.append({'name': s.name, 'level': level, 'message': s.message, 'values': values})
    stamp_ns = int(msg.header.stamp.sec) * 10**9 + int(msg.header.stamp.nanosec)
    return {'stamp_ns': stamp_ns, 'status': out}


#: The health channel's JSON schema.
HEALTH_SCHEMA = {
    'type': 'object',
    'properties': {
        'stamp_ns': {'type': 'integer'},
        'status': {
            'type': 'array',
            'items': {
                'type': 'object',
                'properties': {
                    'name': {'type': 'string'},
                    'level': {'type': 'integer'},
                    'message': {'type': 'string'},
                    'values': {'type': 'object'},
                },
            },
        },
    },
}

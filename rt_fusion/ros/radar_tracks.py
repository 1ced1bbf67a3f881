"""``radar_msgs/RadarTracks``, the type third-party ARS408 drivers publish, to and from ours.

radar_node publishes each cycle as ``rt_fusion_msgs/RadarObjects`` and as ``RadarTracks``
(``~/out/tracks``); fusion_node takes either on ``~/in/radar`` (``radar_type``). A track is in
the sensor's frame with its velocity relative to the sensor, as the ARS408 measures it.

The ARS408 object class goes into ``classification`` above the standard values
(``CLASS_BASE + class``; 0-2 keep their radar_msgs meaning: NO_CLASSIFICATION, STATIC, DYNAMIC).
The existence probability and the orientation have no field: they are lost, and a fusion fed
tracks takes every track as existing. The object id goes into the UUID (beside the sensor id),
so a track keeps its UUID while the sensor keeps its id.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

from radar_msgs.msg import RadarTrack, RadarTracks

__all__ = ['CLASS_BASE', 'RadarTracks', 'objects_to_tracks', 'tracks_in']

from rt_fusion.core.fusion import RadarObjectIn

#: ``classification`` of an ARS408 class c: CLASS_BASE + c (0-2 are radar_msgs' own).
CLASS_BASE = 100


def _uuid(sensor_id: int, object_id: int) -> list[int]:
    return [0x52, 0x54, 0x46, sensor_id & 0xFF, object_id & 0xFF, (object_id >> 8) & 0xFF] + [
        0
    ] * 10


def objects_to_tracks(msg: Any, sensor_id: int = 0) -> RadarTracks:
    """A ``RadarObjects`` cycle as ``RadarTracks`` (same header)."""
    out = RadarTracks()
    out.header = msg.header
    for o in msg.objects:
        t = RadarTrack()
        t.uuid.uuid = _uuid(sensor_id, int(o.id))
        t.position.x, t.position.y = o.position.x, o.position.y
        t.velocity.x, t.velocity.y = o.velocity.x, o.velocity.y
        t.acceleration.x, t.acceleration.y = o.acceleration.x, o.acceleration.y
        t.size.x, t.size.y = _finite(o.length), _finite(o.width)
        t.classification = (
            CLASS_BASE + int(o.object_class)
            if o.object_class < 255
            else RadarTrack.NO_CLASSIFICATION
        )
        # upper triangles (xx, xy, xz, yy, yz, zz); NaN: not measured
        t.position_covariance = [o.position_rms_x**2, 0.0, 0.0, o.position_rms_y**2, 0.0, 0.0]
        t.velocity_covariance = [o.velocity_rms_x**2, 0.0, 0.0, o.velocity_rms_y**2, 0.0, 0.0]
        out.tracks.append(t)
    return out


def _finite(v: float) -> float:
    return float(v) if math.isfinite(v) else 0.0


def tracks_in(msg: Any) -> tuple[list[RadarObjectIn], int]:
    """A ``RadarTracks`` message as the fusion core takes radar objects, and how many tracks
    were dropped for a non-finite position or velocity. An id is the UUID's object bytes where
    radar_node made it, else the CRC-32 of the UUID (another driver's)."""
    objs, dropped = [], 0
    for t in msg.tracks:
        if not all(
            math.isfinite(v) for v in (t.position.x, t.position.y, t.velocity.x, t.velocity.y)
        ):
            dropped += 1
            continue
        u = bytes(t.uuid.uuid)
        oid = u[4] | (u[5] << 8) if u[:3] == b'RTF' else zlib.crc32(u) & 0x7FFFFFFF
        cls = t.classification - CLASS_BASE if t.classification >= CLASS_BASE else -1
        pc = t.position_covariance
        objs.append(
            RadarObjectIn(
                oid,
                t.position.x,
                t.position.y,
                t.velocity.x,
                t.velocity.y,
                cls,
                t.size.x if t.size.x > 0 else math.nan,
                t.size.y if t.size.y > 0 else math.nan,
                rms_x=math.sqrt(pc[0]) if pc[0] >= 0 else math.nan,
                rms_y=math.sqrt(pc[3]) if pc[3] >= 0 else math.nan,
            )
        )
    return objs, dropped

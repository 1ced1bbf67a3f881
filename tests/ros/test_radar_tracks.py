"""radar_msgs/RadarTracks to and from rt_fusion_msgs/RadarObjects: what the fusion takes from a
track is what it takes from the object, but for what RadarTrack has no field for."""

from __future__ import annotations

import math

import pytest

pytest.importorskip('radar_msgs')

from rt_fusion_msgs.msg import RadarObject, RadarObjects

from rt_fusion.ros import radar_tracks
from rt_fusion.ros.fusion.messages import radar_objects_in


def _objects() -> RadarObjects:
    msg = RadarObjects()
    msg.header.frame_id = 'radar'
    msg.header.stamp.sec = 12
    for k, (x, y, cls) in enumerate(((30.0, 1.5, 1), (12.0, -3.0, 3), (55.0, 0.2, 255))):
        o = RadarObject(id=300 + k, object_class=cls)
        o.position.x, o.position.y = x, y
        o.velocity.x, o.velocity.y = -4.0 + k, 0.5 * k
        o.length, o.width = (4.6, 1.8) if cls == 1 else (math.nan, math.nan)
        o.position_rms_x, o.position_rms_y = 0.3 + 0.1 * k, 0.4
        o.existence_probability, o.orientation = 0.99, 0.1
        msg.objects.append(o)
    return msg


def test_a_cycle_goes_through_radar_tracks_and_back_as_the_fusion_takes_it() -> None:
    msg = _objects()
    tracks = radar_tracks.objects_to_tracks(msg, sensor_id=2)
    assert tracks.header == msg.header and len(tracks.tracks) == 3
    back, dropped = radar_tracks.tracks_in(tracks)
    want, _ = radar_objects_in(msg.objects)
    assert dropped == 0
    for got, exp in zip(back, want, strict=True):
        assert (got.id, got.ars_class) == (exp.id, exp.ars_class if exp.ars_class < 255 else -1)
        assert (got.x, got.y, got.vx, got.vy) == pytest.approx((exp.x, exp.y, exp.vx, exp.vy))
        for a, b in ((got.length, exp.length), (got.width, exp.width)):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)
        assert (got.rms_x, got.rms_y) == pytest.approx((exp.rms_x, exp.rms_y))
        # no field for them in RadarTrack
        assert math.isnan(got.prob_exist) and math.isnan(got.orientation)


def test_another_driver_s_tracks_get_stable_ids_and_bad_ones_are_dropped() -> None:
    from radar_msgs.msg import RadarTrack, RadarTracks  # noqa: PLC0415

    msg = RadarTracks()
    for k in range(3):
        t = RadarTrack()
        t.uuid.uuid = [k + 1] * 16
        t.position.x = math.nan if k == 2 else 20.0 + k
        t.classification = RadarTrack.DYNAMIC
        msg.tracks.append(t)
    first, dropped = radar_tracks.tracks_in(msg)
    again, _ = radar_tracks.tracks_in(msg)
    assert dropped == 1 and len(first) == 2
    assert [o.id for o in first] == [o.id for o in again] and first[0].id != first[1].id
    assert all(o.ars_class == -1 for o in first)  # a class the fusion does not know

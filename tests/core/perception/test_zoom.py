"""The zoomed view of the frame's centre: its crop, its mapping back to the full view (a pinhole
zoomed z times sees depth / z) and the merge of both views' detections."""

from __future__ import annotations

import numpy as np
import pytest

from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec, decode
from rt_fusion.core.perception.zoom import Views, Zoom, ZoomError, decode_views, merge

HW = (384, 640)
FRAME = (1080, 1920)
F = 1380.0  # the scenario camera's focal length at 1080p [px]


def _project(x: float, y: float, z: float) -> tuple[float, float]:
    """A point (right, down, ahead) [m] in 1080p frame pixels (pinhole, centred)."""
    return 960.0 + F * x / z, 540.0 + F * y / z


def test_the_crop_is_the_frame_centre_at_the_zoom() -> None:
    zoom = Zoom.of(1.5, FRAME, HW)
    assert zoom is not None
    assert zoom.crop == (320, 180, 1600, 900) and zoom.factor == 1.5
    assert (zoom.x0, zoom.y0) == pytest.approx((320 * 640 / 1920, 180 * 384 / 1080))
    assert Zoom.of(1.0, FRAME, HW) is None and Zoom.of(float('nan'), FRAME, HW) is None
    with pytest.raises(ZoomError, match='640x384 network input'):
        Zoom.of(1.5, (360, 640), HW)  # the crop would be upsampled


@pytest.mark.parametrize('factor', [1.5, 3.0])
def test_a_zoomed_detection_lands_where_the_full_view_sees_its_object(factor: float) -> None:
    """The zoomed view of a point at depth Z looks like the full view of it at Z / factor: a
    network regressing Z / factor there gives back Z and the full view's pixels."""
    zoom = Zoom.of(factor, FRAME, HW)
    assert zoom is not None
    x0, y0 = zoom.crop[:2]
    sx, sy = HW[1] / FRAME[1], HW[0] / FRAME[0]
    point = (-3.0, 0.6, 64.0)  # 3 m left, on the road ahead
    u, v = _project(*point)
    # What the network sees in each view (its input pixels), for a 2 m wide, 1.5 m tall box.
    half_w, half_h = 0.5 * F * 2.0 / point[2], 0.5 * F * 1.5 / point[2]
    zx, zy = sx * factor, sy * factor  # zoomed input px per frame px
    seen = CameraDetection(
        0,
        0.9,
        ((u - half_w - x0) * zx, (v - half_h - y0) * zy, (u + half_w - x0) * zx, (v - y0) * zy),
        ((u - x0) * zx, (v - y0) * zy),
        point[2] / factor,
    )
    full = zoom.to_full(seen)
    assert full.keypoint == pytest.approx((u * sx, v * sy))
    assert full.box == pytest.approx(
        ((u - half_w) * sx, (v - half_h) * sy, (u + half_w) * sx, v * sy)
    )
    assert full.depth == pytest.approx(point[2])
    assert zoom.inside(seen, HW, 3.0)


def _det(u: float, v: float, w: float, depth: float, score: float = 0.9) -> CameraDetection:
    return CameraDetection(0, score, (u - w / 2, v - w / 2, u + w / 2, v + w / 2), (u, v), depth)


def test_the_merge_keeps_each_object_once_from_the_view_that_sees_it_best() -> None:
    zoom = Zoom.of(1.5, FRAME, HW)
    assert zoom is not None

    def zoomed(d: CameraDetection) -> CameraDetection:  # a full-view detection as zoomed sees it
        z, x0, y0 = zoom.factor, zoom.x0, zoom.y0
        b = d.box
        return CameraDetection(
            d.cls,
            d.score,
            ((b[0] - x0) * z, (b[1] - y0) * z, (b[2] - x0) * z, (b[3] - y0) * z),
            ((d.keypoint[0] - x0) * z, (d.keypoint[1] - y0) * z),
            d.depth / z,
        )

    far_full = _det(330.0, 196.0, 4.0, 71.0)  # seen by both, its box shifted a pixel in one
    far_zoom = zoomed(_det(331.5, 196.5, 5.0, 66.0))
    near = _det(300.0, 230.0, 40.0, 12.0)  # near: the full view's (the zoomed one's dropped)
    near_zoom = zoomed(_det(300.0, 230.0, 41.0, 12.5))
    edge = _det(40.0, 200.0, 8.0, 45.0)  # outside the crop: only the full view has it
    cut = CameraDetection(0, 0.8, (0.0, 150.0, 30.0, 200.0), (15.0, 175.0), 20.0)  # at the border
    far_only = zoomed(_det(360.0, 195.0, 3.0, 80.0))  # too small for the full view
    merged = merge([far_full, near, edge], [far_zoom, near_zoom, cut, far_only], zoom, HW)
    assert len(merged) == 4
    assert near in merged and edge in merged and far_full not in merged
    depths = sorted(round(d.depth) for d in merged)
    assert depths == [12, 45, 66, 80]
    nothing = merge([near], [], zoom, HW)
    assert nothing == [near]


def test_views_decode_to_the_merged_detections_and_one_output_as_before() -> None:
    spec = DecoderSpec.from_dict(
        {'type': 'centernet', 'classes': ['car'], 'depth': 'log', 'score_threshold': 0.5}, 't'
    )
    heads = np.full((1, 1 + 4 + 2 + 1, 96, 160), -20.0, np.float32)
    heads[0, 1:5] = np.log(2.0)  # 2-cell boxes
    heads[0, 5:7] = 0.0
    heads[0, 7] = np.log(40.0)
    heads[0, 0, 50, 80] = 5.0  # one object in the middle of the view
    zoom = Zoom.of(1.5, FRAME, HW)
    assert zoom is not None
    plain = decode(heads, spec, HW)
    (again,) = decode_views(heads, spec, HW)
    assert (again.box, again.keypoint) == (plain[0].box, plain[0].keypoint)
    assert again.depth == plain[0].depth == pytest.approx(40.0)
    (one,) = decode_views(Views(heads, heads, zoom), spec, HW)  # the same object in both
    assert one.depth == pytest.approx(60.0)  # the zoomed view's (its depth unzoomed) is kept

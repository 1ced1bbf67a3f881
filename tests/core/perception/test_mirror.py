"""The mirrored second look: detections mapped back from the mirrored input, paired with the
plain ones by class and keypoint, their depths averaged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec
from rt_fusion.core.perception.mirror import Mirrored, average, unmirror
from rt_fusion.core.perception.zoom import decode_views

HW = (384, 640)


def _det(
    u: float, depth: float, cls: int = 0, score: float = 0.8, w: float = 10.0
) -> CameraDetection:
    return CameraDetection(
        cls, score, (u - w / 2, 150.0, u + w / 2, 170.0), (u, 160.0), depth, 0.3
    )


def test_unmirror_maps_pixels_and_heading_back() -> None:
    (d,) = unmirror(
        [CameraDetection(1, 0.7, (10.0, 20.0, 30.0, 40.0), (18.0, 33.0), 9.0, 0.5)], 640
    )
    assert d.box == (610.0, 20.0, 630.0, 40.0) and d.keypoint == (622.0, 33.0)
    assert (d.cls, d.score, d.depth, d.heading) == (1, 0.7, 9.0, -0.5)
    assert unmirror([d], 640) == [  # its own inverse
        CameraDetection(1, 0.7, (10.0, 20.0, 30.0, 40.0), (18.0, 33.0), 9.0, 0.5)
    ]


def test_partners_average_their_depths_and_strangers_are_left_alone() -> None:
    plain = [_det(100.0, 70.0), _det(300.0, 40.0, cls=1), _det(500.0, 20.0, score=0.4)]
    mirrored = [
        _det(102.0, 76.0, score=0.9),  # the first, 2 px off: a partner
        _det(300.0, 30.0, cls=0),  # beside the second but another class: no partner
        _det(520.0, 30.0),  # 20 px from the third (box 10 px wide): no partner
        _det(50.0, 10.0),  # an object the plain look missed: dropped
    ]
    out = average(plain, mirrored)
    assert [d.depth for d in out] == [73.0, 40.0, 20.0]
    assert out[0].score == 0.9 and out[0].keypoint == plain[0].keypoint  # the plain pixels
    assert out[1:] == plain[1:]


def test_each_mirrored_detection_is_a_partner_once_and_the_nearest_wins() -> None:
    plain = [_det(100.0, 50.0), _det(103.0, 60.0)]
    mirrored = [_det(104.0, 62.0), _det(101.0, 52.0)]
    assert [d.depth for d in average(plain, mirrored)] == [51.0, 61.0]
    lone = average(plain, [_det(101.0, 52.0)])
    assert [d.depth for d in lone] == [51.0, 60.0]


def test_a_head_without_depth_keeps_its_nan() -> None:
    (d,) = average([_det(100.0, math.nan)], [_det(100.0, 30.0)])
    assert math.isnan(d.depth)


def test_decode_views_of_a_mirrored_output_averages_the_two_looks() -> None:
    """A hand-made head with one object at cell column 80 of 160 (u = 320 px), and the
    mirrored look's head with it at column 79 (u = 316 px: 324 px mapped back, within half
    its 16-px box): one detection, at the plain pixels and the mean of the two depths; an
    object elsewhere in the mirrored look is no partner (and is dropped)."""
    spec = DecoderSpec.from_dict(
        {'type': 'centernet', 'classes': ['car'], 'depth': 'log', 'score_threshold': 0.5}, 't'
    )

    def head(col: int, depth: float) -> np.ndarray:
        h = np.full((1, 1 + 4 + 2 + 1, 96, 160), -20.0, np.float32)
        h[0, 1:5] = np.log(2.0)
        h[0, 5:7] = 0.0
        h[0, 7] = np.log(depth)
        h[0, 0, 50, col] = 5.0
        return h

    plain = decode_views(head(80, 40.0), spec, HW)
    (one,) = decode_views(Mirrored(head(80, 40.0), head(79, 50.0)), spec, HW)
    assert one.keypoint == plain[0].keypoint and one.depth == pytest.approx(45.0)
    far_apart = decode_views(Mirrored(head(80, 40.0), head(20, 50.0)), spec, HW)
    assert [round(d.depth) for d in far_apart] == [40]

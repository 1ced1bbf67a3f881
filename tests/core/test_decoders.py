"""Detector heads decoded from hand-made output tensors: expected values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_fusion.core.perception.decoders import (
    CameraDetection,
    CameraGeometry,
    DecoderError,
    DecoderSpec,
    camera_to_vehicle,
    decode,
    decode_centernet,
    decode_yolov8,
    decode_yolox,
)

CLASSES = ['car', 'truck', 'pedestrian']
LOW = -20.0  # heatmap logit of "nothing here"


def _centernet(**kw):  # type: ignore[no-untyped-def]
    spec = DecoderSpec.from_dict(
        {'type': 'centernet', 'classes': CLASSES, 'stride': 8, 'depth': 'log', 'heading': True}
        | kw,
        'test',
    )
    heads = np.zeros((1, spec.channels, 6, 10), np.float32)
    heads[0, :3] = LOW
    return spec, heads


def test_centernet_peak_box_offset_depth_heading() -> None:
    spec, heads = _centernet()
    # A truck at cell (x=4, y=2): logit 2 -> score 0.881; its 3x3 neighbours lower.
    heads[0, 1, 2, 4] = 2.0
    heads[0, 1, 1:4, 3:6] = np.maximum(heads[0, 1, 1:4, 3:6], 1.0)
    heads[0, 1, 2, 4] = 2.0
    heads[0, 3:7, 2, 4] = np.log([2.0, 1.0, 3.0, 0.5])  # l, t, r, b in stride units
    heads[0, 7:9, 2, 4] = [0.25, 0.5]  # sub-pixel offset (cells)
    heads[0, 9, 2, 4] = math.log(30.0)  # depth 30 m
    heads[0, 10:12, 2, 4] = [1.0, 0.0]  # sin, cos: heading +90°
    (det,) = decode_centernet(heads, spec)
    assert det.cls == 1
    assert det.score == pytest.approx(1 / (1 + math.exp(-2.0)), rel=1e-6)
    u, v = (4 + 0.25) * 8, (2 + 0.5) * 8
    assert det.keypoint == pytest.approx((u, v))
    assert det.box == pytest.approx((u - 16, v - 8, u + 24, v + 4), rel=1e-5)
    assert det.depth == pytest.approx(30.0, rel=1e-5)
    assert det.heading == pytest.approx(math.pi / 2)


def test_centernet_keeps_local_maxima_per_class_over_the_threshold_best_first() -> None:
    spec, heads = _centernet(score_threshold=0.5, top_k=2)
    heads[0, 0, 1, 1] = 3.0  # car, the best
    heads[0, 0, 1, 2] = 2.5  # its neighbour: not a peak
    heads[0, 2, 1, 2] = 1.0  # a pedestrian in the same place (another class): a peak
    heads[0, 0, 4, 8] = -1.0  # below the threshold (0.27)
    heads[0, 1, 5, 9] = 0.5  # a truck at 0.62, beyond top_k
    dets = decode_centernet(heads, spec)
    assert [(d.cls, d.keypoint) for d in dets] == [(0, (8.0, 8.0)), (2, (16.0, 8.0))]


def test_centernet_wh_box_is_centred_on_the_keypoint() -> None:
    spec = DecoderSpec.from_dict({'type': 'centernet', 'classes': ['car'], 'box': 'wh'}, 'test')
    assert spec.channels == 5
    heads = np.zeros((1, 5, 4, 4), np.float32)
    heads[0, 0] = LOW
    heads[0, 0, 2, 1] = 4.0
    heads[0, 1:3, 2, 1] = [10.0, 6.0]  # w, h in output cells (stride 4)
    (det,) = decode_centernet(heads, spec)
    assert det.box == pytest.approx((4 - 20, 8 - 12, 4 + 20, 8 + 12))
    assert math.isnan(det.depth) and math.isnan(det.heading)


def test_yolov8_decodes_cxcywh_and_suppresses_overlaps_per_class() -> None:
    spec = DecoderSpec.from_dict({'type': 'yolov8', 'classes': CLASSES}, 'test')
    n = 5
    out = np.zeros((1, 4 + 3, n), np.float32)
    # Two overlapping cars (IoU 0.82), a pedestrian on top of them, a low-score truck, a NaN row.
    out[0, :4, 0] = [100, 100, 40, 20]
    out[0, 4, 0] = 0.9
    out[0, :4, 1] = [102, 100, 40, 20]
    out[0, 4, 1] = 0.8
    out[0, :4, 2] = [100, 100, 40, 20]
    out[0, 6, 2] = 0.7
    out[0, :4, 3] = [300, 50, 10, 10]
    out[0, 5, 3] = 0.1
    out[0, :4, 4] = [np.nan, 0, 1, 1]
    out[0, 4, 4] = 0.99
    dets = decode_yolov8(out, spec)
    assert [(d.cls, round(d.score, 3)) for d in dets] == [(0, 0.9), (2, 0.7)]
    assert dets[0].box == pytest.approx((80, 90, 120, 110))
    assert dets[0].keypoint == pytest.approx((100, 100))


def test_yolox_decoded_scores_are_objectness_times_class() -> None:
    spec = DecoderSpec.from_dict({'type': 'yolox', 'classes': CLASSES}, 'test')
    out = np.zeros((1, 3, 8), np.float32)
    out[0, 0] = [50, 60, 20, 30, 0.9, 0.1, 0.8, 0.1]  # truck 0.72
    out[0, 1] = [50, 60, 20, 30, 0.2, 0.9, 0.0, 0.0]  # car 0.18: below 0.3
    out[0, 2] = [200, 60, 20, 30, 0.5, 0.0, 0.0, 1.0]  # pedestrian 0.5
    dets = decode_yolox(out, spec, (128, 256))
    assert [(d.cls, round(d.score, 3)) for d in dets] == [(1, 0.72), (2, 0.5)]
    assert dets[0].box == pytest.approx((40, 45, 60, 75))


def test_yolox_raw_head_is_decoded_on_its_grids() -> None:
    spec = DecoderSpec.from_dict(
        {'type': 'yolox', 'classes': ['car'], 'decoded': False, 'strides': [8, 16]}, 'test'
    )
    h, w = 32, 64  # stride 8: 4x8 = 32 anchors; stride 16: 2x4 = 8 anchors
    out = np.full((1, 40, 6), -20.0, np.float32)
    # Anchor 32 + 1*4 + 2 = the stride-16 cell (x=2, y=1): centre ((2+0.5)*16, (1+0.25)*16).
    out[0, 38] = [0.5, 0.25, math.log(2.0), 0.0, 20.0, 20.0]
    (det,) = decode_yolox(out, spec, (h, w))
    assert det.keypoint == pytest.approx((40.0, 20.0))
    assert det.box == pytest.approx((40 - 16, 20 - 8, 40 + 16, 20 + 8))
    assert det.score == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(DecoderError, match='40 anchors'):
        decode_yolox(out, spec, (64, 64))


@pytest.mark.parametrize(
    ('raw', 'match'),
    [
        ({'type': 'ssd', 'classes': ['car']}, 'decoder.type'),
        ({'type': 'yolov8', 'classes': []}, 'decoder.classes'),
        ({'type': 'yolov8', 'classes': ['car'], 'nms': 0.5}, "unknown key.*'nms'"),
        ({'type': 'centernet', 'classes': ['car'], 'box': 'xyxy'}, 'decoder.box'),
        ({'type': 'yolox', 'classes': ['car'], 'iou_threshold': 2.0}, 'thresholds'),
    ],
)
def test_a_bad_decoder_section_names_what_is_wrong(raw: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(DecoderError, match=match):
        DecoderSpec.from_dict(raw, 'net.yaml')


def test_an_output_of_the_wrong_shape_is_refused_with_both_shapes() -> None:
    spec = DecoderSpec.from_dict({'type': 'yolov8', 'classes': CLASSES}, 'test')
    with pytest.raises(DecoderError, match=r'\[1, 7, N\]'):
        decode([np.zeros((1, 84, 100), np.float32)], spec, (640, 640))
    cn = DecoderSpec.from_dict({'type': 'centernet', 'classes': CLASSES}, 'test')
    with pytest.raises(DecoderError, match='9 channels'):
        decode(np.zeros((1, 8, 4, 4), np.float32), cn, (16, 16))


def test_camera_to_vehicle_by_depth_and_by_the_flat_road() -> None:
    geo = CameraGeometry(fx=500.0, fy=500.0, cx=320.0, cy=180.0, x=1.8, height=1.4)
    # Depth 20 m, keypoint 50 px right of the centre: 2 m to the right.
    det = CameraDetection(0, 0.9, (0, 0, 1, 1), (370.0, 180.0), depth=20.0)
    x, y, rng = camera_to_vehicle(det, geo)  # type: ignore[misc]
    assert (x, y) == pytest.approx((21.8, -2.0))
    assert rng == pytest.approx(math.hypot(20.0, 2.0))
    # No depth: bottom edge 35 px below the horizon -> 500 * 1.4 / 35 = 20 m, + half a car.
    flat = CameraDetection(0, 0.9, (300.0, 150.0, 340.0, 215.0), (320.0, 182.0))
    x, y, _ = camera_to_vehicle(flat, geo, half_length=2.25)  # type: ignore[misc]
    assert (x, y) == pytest.approx((1.8 + 22.25, 0.0))
    above = CameraDetection(0, 0.9, (300.0, 100.0, 340.0, 180.0), (320.0, 140.0))
    assert camera_to_vehicle(above, geo) is None


def test_camera_to_vehicle_undoes_the_lens_before_it_places_a_detection() -> None:
    from rt_fusion.core.fusion import FusionEngine, FusionParams  # noqa: PLC0415
    from rt_fusion.core.scenario import sensors as sm  # noqa: PLC0415

    cam = sm.CameraModel()  # the scenario lens at 640x360 (model input 640x360 here)
    k = (cam.fx, cam.fy, cam.cx, cam.cy)
    lens = CameraGeometry(*k, x=sm.CAMERA_POS[0], height=sm.CAMERA_POS[2], d=cam.d)
    pinhole = CameraGeometry(*k, x=sm.CAMERA_POS[0], height=sm.CAMERA_POS[2])
    # A car centre 25 m ahead and 14 m to the left (near the image edge), its bottom on the road.
    centre, bottom = np.array([[26.8, 14.0, 0.75]]), np.array([[24.55, 14.0, 0.0]])
    (ku, kv), depth = cam.project(centre)[0][0], 25.0
    bu, bv = cam.project(bottom)[0][0]
    by_depth = CameraDetection(0, 0.9, (bu - 5, kv - 20, bu + 5, bv), (ku, kv), depth=depth)
    x, y, _ = camera_to_vehicle(by_depth, lens)  # type: ignore[misc]
    assert (x, y) == pytest.approx((26.8, 14.0), abs=1e-3)
    _, y_pinhole, _ = camera_to_vehicle(by_depth, pinhole)  # type: ignore[misc]
    assert abs(y_pinhole - 14.0) > 0.2  # the lens matters there (1.8 % of the offset)
    flat = CameraDetection(0, 0.9, (bu - 5, kv - 20, bu + 5, bv), (ku, kv))
    x, y, _ = camera_to_vehicle(flat, lens)  # type: ignore[misc]
    assert (x, y) == pytest.approx((24.55, 14.0), abs=1e-2)
    # The fusion's vectorised path does the same from its distortion parameter.
    engine = FusionEngine(
        FusionParams(
            ego_speed_mps=0.0,
            fx=cam.fx,
            fy=cam.fy,
            cx=cam.cx,
            cy=cam.cy,
            distortion=cam.d,
            camera_max_range_m=80.0,
        )
    )
    engine.set_decoder(DecoderSpec.from_dict({'type': 'centernet', 'classes': ['car']}, 'test'))
    block = engine.camera_block([by_depth], (0.0, 0.0, 0.0)).block
    assert block[0, 0:2] == pytest.approx([26.8, 14.0], abs=1e-3)


def test_centernet_peaks_are_the_3x3_maxima_a_maximum_filter_finds() -> None:
    """Against scipy's maximum filter on random heads, edges and plateaus included: every cell
    over the threshold equal to the largest of its 3x3 neighbourhood (per class) is a peak."""
    from scipy.ndimage import maximum_filter  # noqa: PLC0415

    from rt_fusion.core.perception.decoders import centernet_peaks  # noqa: PLC0415

    spec, heads = _centernet(score_threshold=0.3, top_k=10_000)
    rng = np.random.default_rng(11)
    for trial in range(30):
        heat = rng.normal(-1.0, 1.5, (3, 6, 10)).astype(np.float32)
        if trial % 3 == 0:
            heat = np.round(heat)  # plateaus: equal neighbours are peaks together
        heads[0, :3] = heat
        rows = centernet_peaks(heads, spec)
        logit = math.log(0.3 / 0.7)
        top = maximum_filter(heat, size=(1, 3, 3), mode='constant', cval=-np.inf)
        want = {
            (int(c), int(y), int(x))
            for c, y, x in zip(*np.nonzero((heat >= logit) & (heat == top)), strict=True)
        }
        got = {(int(r[0]), int(r[1]), int(r[2])) for r in rows}
        assert got == want, trial

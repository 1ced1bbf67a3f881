"""The centernet head reduced to its peaks by PyTorch (what the CUDA graph runs on the GPU; the
same operations on the CPU here) gives the numpy decoder's detections, and the rows that cross to
the host are decoded alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_fusion.core.perception.decoders import (
    CenternetPeaks,
    DecoderError,
    DecoderSpec,
    centernet_peaks,
    decode,
    decode_centernet,
)

torch = pytest.importorskip('torch')
from rt_fusion.inference import device_decode  # noqa: E402

CLASSES = ['car', 'truck', 'pedestrian', 'bicycle', 'static']


def _spec(**kw: object) -> DecoderSpec:
    raw = {'type': 'centernet', 'classes': CLASSES, 'depth': 'log', 'heading': True}
    return DecoderSpec.from_dict(raw | kw, 'test')


def _heads(seed: int, spec: DecoderSpec, hw: tuple[int, int] = (96, 160)) -> np.ndarray:
    """A head like the model's: low background logits with noise, peaks of varied strength
    (some touching, some tied, some under the threshold), random regressions."""
    rng = np.random.default_rng(seed)
    h, w = hw
    heads = rng.normal(0.0, 0.5, (1, spec.channels, h, w)).astype(np.float32)
    heads[0, : len(CLASSES)] += -6.0
    for _ in range(120):
        c, y, x = rng.integers(len(CLASSES)), rng.integers(h), rng.integers(w)
        heads[0, c, y, x] = rng.uniform(-3.0, 6.0)
        if rng.random() < 0.2 and x + 1 < w:  # a tie with its neighbour: both kept
            heads[0, c, y, x + 1] = heads[0, c, y, x]
    return heads


def _as_tuples(dets: list) -> list:  # type: ignore[type-arg]
    return sorted(
        (
            d.cls,
            round(d.score, 5),
            *np.round(d.box, 3),
            *np.round(d.keypoint, 3),
            round(d.depth, 3),
            round(d.heading, 4),
        )
        for d in dets
    )


@pytest.mark.parametrize('seed', range(5))
@pytest.mark.parametrize('dtype', ['float32', 'float16'])
def test_torch_peaks_decode_to_the_numpy_decoder_s_detections(seed: int, dtype: str) -> None:
    # top_k above the peaks over the threshold: which of two tied peaks a cut at K keeps is
    # either's right (the strengths are compared at K = 32 below).
    spec = _spec(score_threshold=0.35, top_k=256)
    heads = _heads(seed, spec)
    if dtype == 'float16':  # the GPU's head is FP16: both decoders see the same values
        heads = heads.astype(np.float16).astype(np.float32)
    rows = device_decode.centernet_peaks(
        torch.from_numpy(heads).to(getattr(torch, dtype)), len(CLASSES), spec.top_k
    ).numpy()
    assert rows.shape == (spec.top_k, 4 + spec.channels - len(CLASSES))
    want = decode_centernet(heads, spec)
    assert len(want) > 10  # the scene has peaks over the threshold
    got = decode(CenternetPeaks(rows), spec, (384, 640))
    assert _as_tuples(got) == _as_tuples(want)
    # The rows are the numpy decoder's own peak rows (the same columns, in the same order of
    # strength), up to those under the threshold that the device keeps for the host to drop.
    ref = centernet_peaks(heads, spec)
    kept = rows[rows[:, 3] >= math.log(0.35 / 0.65)]
    assert np.array_equal(np.sort(kept[:, 3])[::-1], ref[:, 3])
    cut = device_decode.centernet_peaks(torch.from_numpy(heads), len(CLASSES), 32).numpy()
    assert np.array_equal(cut[:, 3], centernet_peaks(heads, _spec(top_k=32))[:32, 3])


def test_fewer_peaks_than_top_k_leave_rows_that_decode_to_nothing() -> None:
    spec = _spec(score_threshold=0.0, top_k=8)  # a zero threshold keeps every real peak
    heads = np.full((1, spec.channels, 6, 10), -np.inf, np.float32)
    heads[0, len(CLASSES) :] = 0.0
    heads[0, 1, 2, 4] = 2.0
    heads[0, 3, 4, 8] = -1.0
    rows = device_decode.centernet_peaks(torch.from_numpy(heads), len(CLASSES), 8).numpy()
    assert rows.shape == (8, 4 + spec.channels - len(CLASSES))
    dets = decode(CenternetPeaks(rows), spec, (24, 40))
    assert [(d.cls, d.keypoint) for d in dets] == [(1, (16.0, 8.0)), (3, (32.0, 16.0))]


def test_peaks_of_another_layout_or_decoder_are_refused() -> None:
    spec = _spec()
    with pytest.raises(DecoderError, match='expected'):
        decode(CenternetPeaks(np.zeros((4, 3), np.float32)), spec, (384, 640))
    yolo = DecoderSpec.from_dict({'type': 'yolov8', 'classes': CLASSES}, 'test')
    with pytest.raises(DecoderError, match='yolov8'):
        decode(CenternetPeaks(np.zeros((4, 13), np.float32)), yolo, (384, 640))

"""The recorded backend: real network outputs kept once (onnxruntime) and replayed by the view
they were made for, so a benchmark times the node's own path on real detector outputs."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from rt_fusion.core.perception.zoom import Views
from rt_fusion.inference.recorded_backend import Recorder
from rt_fusion.inference.runner import FrameRunner
from rt_fusion.inference.spec import ModelError
from tests.conftest import ROOT

SPEC = ROOT / 'models' / 'rtf_centernet.yaml'


def test_each_view_gets_the_output_recorded_for_it_in_any_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    frames = [
        cv2.GaussianBlur(rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8), (9, 9), 3)
        for _ in range(3)
    ]
    real = FrameRunner(SPEC, 'onnxruntime', 'cpu', threads=1, zoom=1.5)
    recorder = Recorder(real.model)
    try:
        want = []
        for f in frames:  # copied at once: the next run writes the same output buffer
            w = real.run(f, 'bgr8', lambda: True)
            want.append(Views(np.array(w.full), np.array(w.zoomed), w.zoom))
    finally:
        real.release()
    path = tmp_path / 'outputs.npz'
    assert recorder.save(path) == 6  # two views per frame
    replay = FrameRunner(SPEC, 'recorded', 'cpu', zoom=1.5, recording=str(path))
    try:
        for i in (2, 0, 1, 1):  # out of the recorded order, one twice
            got = replay.run(frames[i], 'bgr8', lambda: True)
            assert isinstance(got, Views)
            np.testing.assert_array_equal(got.full, want[i].full)
            np.testing.assert_array_equal(got.zoomed, want[i].zoomed)
        assert replay.model.missed == 0
        replay.run(np.ascontiguousarray(frames[0][::-1]), 'bgr8', lambda: True)  # never recorded
        assert replay.model.missed == 2  # both its views: counted, given the next in order
        assert replay.run(frames[0], 'bgr8', lambda: False) is False  # torn, as a real one
    finally:
        replay.release()


def test_a_missing_or_unreadable_recording_fails_to_load(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match='no recording'):
        FrameRunner(SPEC, 'recorded', 'cpu')
    (tmp_path / 'bad.npz').write_bytes(b'not a zip')
    with pytest.raises(ModelError, match=r'bad\.npz'):
        FrameRunner(SPEC, 'recorded', 'cpu', recording=str(tmp_path / 'bad.npz'))

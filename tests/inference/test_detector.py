"""The shipped detector (models/rtf_centernet): its spec, its decoder, and that it finds what a
rendered frame holds (held-out scene seeds, never trained on), through the fusion node's runner;
the training tool end to end on a few frames."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rt_fusion.core.perception.decoders import (
    CameraDetection,
    CameraGeometry,
    camera_to_vehicle,
    decode,
)
from rt_fusion.core.perception.zoom import Zoom
from rt_fusion.core.scenario import detector_data as dd
from rt_fusion.core.scenario import sensors as sm
from rt_fusion.inference.runner import FrameRunner
from rt_fusion.inference.spec import ModelLoadError, load_spec
from tests.conftest import ROOT

SPEC = ROOT / 'models' / 'rtf_centernet.yaml'


def test_the_spec_names_a_decoder_that_fits_the_output() -> None:
    spec = load_spec(SPEC)
    assert spec.decoder is not None and spec.decoder.type == 'centernet'
    assert spec.outputs[0].shape[1] == spec.decoder.channels
    assert list(spec.decoder.classes) == list(dd.DETECTOR_CLASSES)
    assert (ROOT / 'models' / 'rtf_centernet.md').is_file()  # the model card
    size = sum(a.path.stat().st_size for a in spec.artifacts.values())
    assert size <= 10 * 2**20


def test_a_bad_decoder_section_fails_the_spec_with_its_key(tmp_path: Path) -> None:
    text = SPEC.read_text().replace('type: centernet', 'type: centrenet')
    (tmp_path / 'net.yaml').write_text(text)
    with pytest.raises(ModelLoadError, match=r'decoder\.type'):
        load_spec(tmp_path / 'net.yaml')


def test_it_finds_the_objects_of_held_out_frames() -> None:
    cam = sm.VEHICLE  # the scenarios' camera: 1080p through the lens
    runner = FrameRunner(SPEC, 'onnxruntime', 'cpu', threads=1)
    spec = runner.spec
    assert spec.decoder is not None
    sx, sy = runner.input_hw[1] / cam.width, runner.input_hw[0] / cam.height
    geo = CameraGeometry(
        cam.fx * sx, cam.fy * sy, cam.cx * sx, cam.cy * sy, sm.CAMERA_POS[0], 1.4, d=cam.d
    )
    found = total = 0
    try:
        for k in range(6):
            for img, labels in dd.scene_frames((dd.HELDOUT_SEED_BASE, 1000 + k), 1, cam):
                dets = decode(runner.run(img, 'bgr8', lambda: True), spec.decoder, runner.input_hw)
                placed = [camera_to_vehicle(d, geo) for d in dets]
                for lab in labels:
                    if lab.depth > 40.0:
                        continue  # near objects: a weak model would still find far fewer
                    total += 1
                    found += any(
                        p is not None and math.hypot(p[0] - lab.x, p[1] - lab.y) < 2.0
                        for p in placed
                    )
    finally:
        runner.release()
    assert total >= 10
    assert found / total >= 0.8, (found, total)


def test_the_depth_error_table_pairs_each_object_with_the_detection_on_its_bearing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--heldout --depth-errors: a detection on an object's bearing but 10 m off in depth is
    found there and outside the gate, with its signed error; an object with nothing on its
    bearing is not found; the table prints per range and per class."""
    from rt_fusion.training import detector_check as td  # noqa: PLC0415

    def label(cls: int, x: float, y: float) -> dd.CameraLabel:
        return dd.CameraLabel(cls, (0, 0, 1, 1), (0, 0), x - 1.8, 0.0, 1, x, y)

    truth = [label(0, 41.8, 0.0), label(2, 61.8, 5.0), label(0, 11.8, -2.0)]
    det = type('Det', (), {'depth': 50.0})()
    near = type('Det', (), {'depth': 10.1})()
    pos = [(51.8, 0.0, det), (11.9, -2.0, near)]  # on the first's bearing, 10 m farther
    pairs = td._bearing_pairs(truth, pos, 1.8)
    assert pairs[0][1:3] == (0, pytest.approx(10.0)) and pairs[0][3] == pytest.approx(10.0)
    assert math.isnan(pairs[1][2])  # nothing on the pedestrian's bearing
    assert pairs[2][2] == pytest.approx(0.1) and pairs[2][3] < 2.0
    td._print_depth_errors(pairs, 2.0)
    out = capsys.readouterr().out
    assert '| 0-30 m | 1 | 1.00 | 1.00 | +0.10 / 0.10 |' in out
    assert '| 30-50 m | 1 | 1.00 | 0.00 | +10.00 / 10.00 |' in out
    assert '| pedestrian 30-80 m | 1 | 0.00 | 0.00 | - |' in out


@pytest.mark.integration
def test_training_runs_end_to_end_and_exports_a_loadable_model(tmp_path: Path) -> None:
    tool = str(ROOT / 'tools' / 'train_detector.py')
    run = [sys.executable, tool]
    small = ['--frames', '16', '--epochs', '1', '--batch', '4', '--workers', '2']
    data = tmp_path / 'data'  # rendered once (e.g. while another run trains), read back
    rendered = subprocess.run(
        [*run, *small, '--data', str(data), '--data-only'],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    assert (data / 'images.npy').is_file() and 'written to' in rendered.stdout
    train = subprocess.run(
        [*run, '--out', str(tmp_path), *small, '--data', str(data)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr[-2000:]
    assert f'data: read from {data}' in train.stdout
    assert train.stdout.splitlines()[-1].startswith('RESULT frames=')
    assert (tmp_path / 'loss.png').stat().st_size > 0
    exported = subprocess.run(
        [*run, '--export', str(tmp_path / 'weights.pt'), '--models', str(tmp_path / 'm'),
         '--name', 'tiny'],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr[-2000:]
    spec = load_spec(tmp_path / 'm' / 'tiny.yaml')
    assert spec.decoder is not None and spec.artifact('onnx').is_file()
    runner = FrameRunner(tmp_path / 'm' / 'tiny.yaml', 'onnxruntime', 'cpu', threads=1)
    runner.release()


def test_fine_tuning_starts_from_the_shipped_model_s_weights() -> None:
    """--init models/rtf_centernet.ts: the traced model's parameters load into the training
    network by name, every one of them, unchanged."""
    import torch  # noqa: PLC0415

    from rt_fusion.training import detector as td  # noqa: PLC0415

    shipped = ROOT / 'models' / 'rtf_centernet.ts'
    state = td._init_state(shipped)
    model = td.build_model()
    model.load_state_dict(state)  # strict: no key missing, none left over
    traced = torch.jit.load(str(shipped), map_location='cpu').state_dict()
    for name, value in model.state_dict().items():
        assert torch.equal(value, traced[name]), name


def test_a_grown_network_starts_as_the_trained_one() -> None:
    """--extra-blocks: the shipped weights load into a network grown by a residual block per
    named stage (only the new blocks' parameters missing), and it computes what the shipped
    one computes until training moves the new blocks; an unknown stage is refused by name."""
    import torch  # noqa: PLC0415

    from rt_fusion.training import detector as td  # noqa: PLC0415

    state = td._init_state(ROOT / 'models' / 'rtf_centernet.ts')
    plain = td.build_model()
    plain.load_state_dict(state)
    grown = td.build_model(('s16', 's32'))
    missing, unexpected = grown.load_state_dict(state, strict=False)
    assert not unexpected and missing and all(k.startswith('extra.s') for k in missing)
    x = torch.randn(1, 3, 96, 160, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(plain.eval()(x), grown.eval()(x))
    with pytest.raises(ValueError, match='s64'):
        td.build_model(('s64',))


def test_a_zoomed_training_view_is_labelled_as_the_runtime_maps_it_back() -> None:
    """``--views``: an object labelled in a zoomed view's crop (keypoint resized to the input,
    depth divided by the factor), decoded there and mapped back by the fusion node's
    ``Zoom.to_full``, lands on its full-view label; objects outside the crop are not labelled."""
    from rt_fusion.training import detector as td  # noqa: PLC0415

    cam, input_hw = sm.VEHICLE, (384, 640)
    checked = 0
    for k in range(20):
        rng = np.random.default_rng([dd.TRAIN_SEED_BASE, k])
        world = dd.build_world(dd.random_scenario(rng), 4.0)
        labels = dd.camera_labels(world, 1.0, cam)
        for factor in (1.5, 3.0):
            view = Zoom.of(factor, (cam.height, cam.width), input_hw)
            assert view is not None
            x0, y0, x1, y1 = view.crop
            zoomed = td.zoomed_labels(labels, view)
            inside = [
                lab for lab in labels
                if x0 <= lab.keypoint[0] < x1 and y0 <= lab.keypoint[1] < y1
            ]  # fmt: skip
            assert [z.actor_id for z in zoomed] == [lab.actor_id for lab in inside]
            zx, zy = input_hw[1] / (x1 - x0), input_hw[0] / (y1 - y0)
            fx, fy = input_hw[1] / cam.width, input_hw[0] / cam.height
            for z, lab in zip(zoomed, inside, strict=True):
                u, v = z.keypoint[0] * zx, z.keypoint[1] * zy
                det = CameraDetection(lab.cls, 1.0, (u, v, u, v), (u, v), z.depth)
                back = view.to_full(det)
                assert back.keypoint == pytest.approx((lab.keypoint[0] * fx, lab.keypoint[1] * fy))
                assert back.depth == pytest.approx(lab.depth)
                assert 0 <= z.box[0] <= z.box[2] <= x1 - x0
                assert 0 <= z.box[1] <= z.box[3] <= y1 - y0
                checked += 1
    assert checked >= 20


def test_far_weight_weighs_an_object_by_its_true_depth_in_every_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--far-weight D``: an object's regression weight is its true depth / D, between 1 and 3,
    in the full view and in a zoomed one (whose labels' depths are divided by the zoom); off (0),
    every object weighs 1."""
    from rt_fusion.training import detector as td  # noqa: PLC0415

    def label(depth: float) -> dd.CameraLabel:
        return dd.CameraLabel(0, (100.0, 100.0, 140.0, 130.0), (120.0, 115.0), depth, 0.0, 1, 0, 0)

    def weights(depths: list[float], factor: float) -> list[float]:
        t = td._targets([label(d) for d in depths], 1 / 3, 1 / 3, factor)
        return sorted(float(w) for w in t['mask'][t['mask'] > 0])

    monkeypatch.setattr(td, 'FAR_WEIGHT_M', 0.0)
    assert weights([10.0, 70.0], 1.0) == [1.0, 1.0]
    monkeypatch.setattr(td, 'FAR_WEIGHT_M', 30.0)
    assert weights([10.0, 45.0, 150.0], 1.0) == pytest.approx([1.0, 1.5, 3.0])
    assert weights([15.0], 3.0) == pytest.approx([1.5])  # 45 m, seen in the zoomed view

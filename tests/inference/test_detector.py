"""The shipped detector (models/rtf_centernet): its spec, its decoder, and that it finds what a
rendered frame holds (held-out scene seeds, never trained on), through the fusion node's runner;
the training tool end to end on a few frames."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from rt_fusion.core.perception.decoders import CameraGeometry, camera_to_vehicle, decode
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


def test_training_runs_end_to_end_and_exports_a_loadable_model(tmp_path: Path) -> None:
    tool = str(ROOT / 'tools' / 'train_detector.py')
    run = [sys.executable, tool]
    train = subprocess.run(
        [*run, '--out', str(tmp_path), '--frames', '16', '--epochs', '1', '--batch', '4',
         '--workers', '2'],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr[-2000:]
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

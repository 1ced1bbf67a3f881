"""The CPU detector's INT8 twin (models/rtf_centernet_int8, ``tools/quantize_detector.py``): its
spec and artifact, its output layer kept fp32, that it finds what the fp32 model finds on
held-out frames (never trained or calibrated on), and the quantizer end to end on a small model.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rt_fusion.core.perception.zoom import decode_views
from rt_fusion.core.scenario import detector_data as dd
from rt_fusion.core.scenario import sensors as sm
from rt_fusion.inference.runner import FrameRunner
from rt_fusion.inference.spec import load_spec
from rt_fusion.training import quantize as qz
from tests.conftest import ROOT

FP32 = ROOT / 'models' / 'rtf_centernet.yaml'
INT8 = ROOT / 'models' / 'rtf_centernet_int8.yaml'


def test_the_twin_has_the_fp32_model_s_interface_and_keeps_its_output_layer_fp32() -> None:
    import onnx  # noqa: PLC0415

    fp32, int8 = load_spec(FP32), load_spec(INT8)
    assert int8.precision == 'int8' and 'calibrated' in int8.provenance
    assert (int8.inputs, int8.outputs) == (fp32.inputs, fp32.outputs)
    assert (int8.preprocessing, int8.decoder) == (fp32.preprocessing, fp32.decoder)
    path = int8.artifact('onnx')  # its SHA-256 checked
    assert path.stat().st_size <= 2 * 2**20
    model = onnx.load(str(path))
    assert model.ir_version <= 13  # what the GPU machine's onnxruntime reads
    ops = {n.op_type for n in model.graph.node}
    assert {'QuantizeLinear', 'DequantizeLinear'} <= ops
    (last,) = qz.output_layers(path)
    node = next(n for n in model.graph.node if n.name == last)
    weights = {i.name: i for i in model.graph.initializer}
    assert node.op_type == 'Conv' and weights[node.input[1]].data_type == onnx.TensorProto.FLOAT


def test_int8_finds_what_fp32_finds_on_held_out_frames() -> None:
    """Each model's detections of 12 held-out frames through the fusion node's runner (full view
    and zoomed centre, merged): the INT8 twin finds >= 95 % of the fp32 model's (same class,
    keypoint within 3 px, depth within 5 %) and adds <= 10 % of its own (measured: 98.5 % and
    1.5 % of 67). A twin quantized whole (its output layer in 8 bits too) fails both: 87 %, 18 %.
    """
    cam = sm.VEHICLE
    runners = [FrameRunner(s, 'onnxruntime', 'cpu', threads=1, zoom=3.0) for s in (FP32, INT8)]
    ref = same = own = 0
    try:
        for k in range(6):
            for img, _labels in dd.scene_frames((dd.HELDOUT_SEED_BASE, 2000 + k), 2, cam):
                a, b = (
                    decode_views(r.run(img, 'bgr8', lambda: True), r.spec.decoder, r.input_hw)
                    for r in runners
                    if r.spec.decoder is not None
                )
                used: set[int] = set()
                for d in a:
                    for j, e in enumerate(b):
                        near = math.dist(d.keypoint, e.keypoint) <= 3.0
                        deep = abs(e.depth - d.depth) <= 0.05 * d.depth
                        if j not in used and d.cls == e.cls and near and deep:
                            used.add(j)
                            same += 1
                            break
                ref += len(a)
                own += len(b) - len(used)
    finally:
        for r in runners:
            r.release()
    assert ref >= 40, ref
    assert same / ref >= 0.95, (same, ref)
    assert own / ref <= 0.1, (own, ref)


@pytest.mark.slow
def test_the_quantizer_writes_a_twin_that_loads_and_tracks_its_model(tmp_path: Path) -> None:
    """rtf_testnet (random weights) quantized on 2 rendered scenes: spec and hash, the interface
    kept, outputs near the fp32 ones; the cost of both measured per view."""
    src = ROOT / 'models' / 'rtf_testnet.yaml'
    inputs = qz.calibration_inputs(src, 2, 3.0, 1)
    assert len(inputs) >= 4 and inputs[0].shape == (1, 3, 384, 640)
    twin = qz.quantize(src, tmp_path, 'tiny_int8', inputs)
    spec = load_spec(twin)
    assert spec.precision == 'int8' and spec.outputs == load_spec(src).outputs
    cost = qz.view_cost([src, twin], inputs[:2], 1, 1)
    assert set(cost) == {'rtf_testnet', 'tiny_int8'} and all(len(t) == 2 for t in cost.values())
    import onnxruntime as ort  # noqa: PLC0415

    paths = [str(load_spec(p).artifact('onnx')) for p in (src, twin)]
    sessions = [ort.InferenceSession(p, providers=['CPUExecutionProvider']) for p in paths]
    ya, yb = (s.run(None, {'images': inputs[0]})[0] for s in sessions)
    assert np.abs(ya - yb).mean() <= 0.1 * np.abs(ya).mean() + 1e-3

"""graph_params: the per-run parameter file of a replay graph (config/replay.yaml's sections)."""

from __future__ import annotations

from pathlib import Path

import yaml

from rt_fusion.ros.harness.scenarios import graph_params
from tests.conftest import ROOT


def _fusion(tmp_path: Path, source: dict, infer_period_s: float) -> dict:
    config = tmp_path / 'in.yaml'
    config.write_text(yaml.safe_dump(source))
    out = graph_params(
        config,
        tmp_path / 'out.yaml',
        conventional=False,
        backend='onnxruntime',
        device='cpu',
        infer_period_s=infer_period_s,
    )
    return yaml.safe_load(out.read_text())['fusion']['ros__parameters']


def test_a_paced_detector_runs_without_the_mirrored_pass(tmp_path: Path) -> None:
    source = yaml.safe_load((ROOT / 'config' / 'replay.yaml').read_text())
    source['fusion']['ros__parameters']['mirror'] = True
    paced = _fusion(tmp_path, source, 0.1)
    assert paced['mirror'] is False and paced['infer_period_s'] == 0.1
    every = _fusion(tmp_path, source, 0.0)
    assert every['mirror'] is True and every['backend'] == 'onnxruntime'

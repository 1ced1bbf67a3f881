#!/usr/bin/env python3
"""Builds the test network of models/: a few conv layers with random but fixed weights.

One set of weights (numpy, seeded) is written as
  - ``rtf_testnet.onnx``: built with onnx.helper, IR version 8 / opset 17 (ONNX Runtime 1.30
    reads IR <= 13), input ``images`` [1, 3, 384, 640] float32, output ``heads`` [1, 8, 24, 40];
  - ``rtf_testnet.ts``: the same network as TorchScript (when torch is installed), for the PyTorch
    backend where onnx2torch is not available;
  - ``rtf_testnet.yaml``: the model spec with both files' SHA-256.
The network: 4 × (3×3 conv stride 2 + ReLU), 3→16→32→64→64 channels, then a 1×1 conv to 8
"heads" — the shape of a small detection head at stride 16.

  python tools/make_test_model.py --out models
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper, numpy_helper

from rt_fusion.inference.spec import sha256_file

ROOT = Path(__file__).resolve().parents[1]
NAME = 'rtf_testnet'
INPUT = (1, 3, 384, 640)
CHANNELS = (3, 16, 32, 64, 64)
HEADS = 8


def weights(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(kernel, bias) per conv layer, He-initialised from ``seed``."""
    rng = np.random.default_rng(seed)
    layers = []
    for cin, cout in itertools.pairwise(CHANNELS):
        w = rng.normal(0.0, np.sqrt(2.0 / (cin * 9)), (cout, cin, 3, 3)).astype(np.float32)
        layers.append((w, rng.normal(0.0, 0.05, cout).astype(np.float32)))
    head = rng.normal(0.0, np.sqrt(1.0 / CHANNELS[-1]), (HEADS, CHANNELS[-1], 1, 1))
    layers.append((head.astype(np.float32), np.zeros(HEADS, np.float32)))
    return layers


def build_onnx(layers: list[tuple[np.ndarray, np.ndarray]]) -> onnx.ModelProto:
    """The network as an ONNX graph."""
    nodes, inits = [], []
    x = 'images'
    for i, (w, b) in enumerate(layers):
        last = i == len(layers) - 1
        inits += [numpy_helper.from_array(w, f'w{i}'), numpy_helper.from_array(b, f'b{i}')]
        k = w.shape[2]
        conv_out = 'heads' if last else f'c{i}'
        nodes.append(
            helper.make_node(
                'Conv',
                [x, f'w{i}', f'b{i}'],
                [conv_out],
                kernel_shape=[k, k],
                strides=[1, 1] if last else [2, 2],
                pads=[0, 0, 0, 0] if last else [1, 1, 1, 1],
            )
        )
        if not last:
            nodes.append(helper.make_node('Relu', [conv_out], [f'r{i}']))
            x = f'r{i}'
    out_shape = [1, HEADS, INPUT[2] // 16, INPUT[3] // 16]
    graph = helper.make_graph(
        nodes,
        NAME,
        [helper.make_tensor_value_info('images', TensorProto.FLOAT, list(INPUT))],
        [helper.make_tensor_value_info('heads', TensorProto.FLOAT, out_shape)],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid('', 17)],
        producer_name='rt_fusion make_test_model',
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_torchscript(layers: list[tuple[np.ndarray, np.ndarray]], path: Path) -> bool:
    """The same network as TorchScript; False when torch is not installed."""
    try:
        import torch  # noqa: PLC0415 - optional
    except ImportError:
        return False
    mods: list[torch.nn.Module] = []
    for i, (w, b) in enumerate(layers):
        last = i == len(layers) - 1
        conv = torch.nn.Conv2d(
            w.shape[1], w.shape[0], w.shape[2], stride=1 if last else 2, padding=0 if last else 1
        )
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(w))
            assert conv.bias is not None
            conv.bias.copy_(torch.from_numpy(b))
        mods.append(conv)
        if not last:
            mods.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*mods).eval()
    traced = torch.jit.trace(net, torch.zeros(INPUT))
    traced.save(str(path))
    return True


def main(argv: list[str] | None = None) -> int:
    """Writes the model files and their spec."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--out', type=Path, default=ROOT / 'models')
    parser.add_argument('--seed', type=int, default=7)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    layers = weights(args.seed)
    onnx_path = args.out / f'{NAME}.onnx'
    onnx.save(build_onnx(layers), str(onnx_path))
    artifacts = {'onnx': {'file': onnx_path.name, 'sha256': sha256_file(onnx_path)}}
    ts_path = args.out / f'{NAME}.ts'
    if build_torchscript(layers, ts_path):
        artifacts['torchscript'] = {'file': ts_path.name, 'sha256': sha256_file(ts_path)}
    spec = {
        'name': NAME,
        'provenance': f'tools/make_test_model.py --seed {args.seed}: random fixed weights, for '
        'tests and benchmarks (not a trained detector)',
        'precision': 'fp32',
        'artifacts': artifacts,
        'inputs': [{'name': 'images', 'shape': list(INPUT), 'dtype': 'float32', 'layout': 'NCHW'}],
        'outputs': [
            {
                'name': 'heads',
                'shape': [1, HEADS, INPUT[2] // 16, INPUT[3] // 16],
                'dtype': 'float32',
                'layout': 'NCHW',
            }
        ],
        'preprocessing': {
            'resize': [INPUT[2], INPUT[3]],
            'channel_order': 'rgb',
            'scale': 1.0 / 255.0,
            'mean': [0.485, 0.456, 0.406],
            'std': [0.229, 0.224, 0.225],
        },
    }
    (args.out / f'{NAME}.yaml').write_text(yaml.safe_dump(spec, sort_keys=False))
    print(
        f'wrote {", ".join(a["file"] for a in artifacts.values())} and {NAME}.yaml to {args.out}'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())

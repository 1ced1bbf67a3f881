#!/usr/bin/env python3
"""The CPU detector in INT8: quantize the fp32 model, measure its cost and its quality beside it.

    python tools/quantize_detector.py                    # models/rtf_centernet_int8.{onnx,yaml}
    python tools/quantize_detector.py --cost-only        # the shipped pair's cost per view
    python tools/quantize_detector.py --cost-only --heldout 150   # and quality on held-out scenes

ONNX Runtime's static quantization (rt_fusion/training/quantize.py): QDQ, weights int8 per
channel, activations uint8 calibrated on ``--scenes`` random rendered scenes (their own seeds,
2 frames each, the full view and the zoomed centre as the fusion node runs them); the output
layer stays fp32. The cost is per network view (one ``session.run``) on ``--threads`` CPU
threads, the two models taking turns on the same inputs. ``--heldout N`` decodes N held-out
scenes (the detector's check, ``tools/train_detector.py --heldout``) with each model: precision,
recall per range bin, depth error. Last line:
``RESULT fp32_p50_ms=… fp32_p99_ms=… int8_p50_ms=… int8_p99_ms=… int8_max_ms=… speedup_p50=…``
(with ``--heldout``, ``fp32_precision=… fp32_recall=… int8_precision=… int8_recall=…`` too).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
from pathlib import Path

import numpy as np

from rt_fusion.training import detector_check as check
from rt_fusion.training import quantize as qz

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--model', type=Path, default=ROOT / 'models' / 'rtf_centernet.yaml')
    parser.add_argument('--out', type=Path, default=ROOT / 'models', help='folder of the twin')
    parser.add_argument('--name', default='rtf_centernet_int8')
    parser.add_argument('--scenes', type=int, default=40, help='calibration scenes (2 frames)')
    parser.add_argument('--zoom', type=float, default=3.0, help="the fusion node's zoom")
    parser.add_argument('--threads', type=int, default=1, help='ONNX Runtime threads (cost)')
    parser.add_argument('--rounds', type=int, default=2, help='timed passes over the inputs')
    parser.add_argument('--cost-only', action='store_true', help='measure the shipped twin')
    parser.add_argument('--heldout', type=int, default=0, help='held-out scenes to score on')
    parser.add_argument('--workers', type=int, default=mp.cpu_count())
    args = parser.parse_args(argv)

    inputs = qz.calibration_inputs(args.model, args.scenes, args.zoom, args.workers)
    twin = args.out / f'{args.name}.yaml'
    if not args.cost_only:
        twin = qz.quantize(args.model, args.out, args.name, inputs)
        print(f'wrote {twin} and {twin.with_suffix(".onnx")} ({len(inputs)} calibration views)')
    cost = qz.view_cost([args.model, twin], inputs, args.threads, args.rounds)
    result: dict[str, float] = {}
    print(f'cost per view, {args.threads} thread(s), {len(inputs)} views x {args.rounds}:')
    for key, (name, t) in zip(('fp32', 'int8'), cost.items(), strict=True):
        p50, p99 = np.percentile(t, [50, 99]) * 1e3
        print(f'  {name:24s} P50 {p50:7.2f} ms  P99 {p99:7.2f} ms  max {t.max() * 1e3:7.2f} ms')
        result.update({f'{key}_p50_ms': p50, f'{key}_p99_ms': p99, f'{key}_max_ms': t.max() * 1e3})
    result['speedup_p50'] = result['fp32_p50_ms'] / result['int8_p50_ms']
    for key, spec in (('fp32', args.model), ('int8', twin)):
        if args.heldout:
            print(f'{key}: held-out scenes')
            got = check.heldout(spec, args.heldout, args.workers, zoom=args.zoom)
            result.update({f'{key}_{k}': got[k] for k in ('precision', 'recall')})
    keys = ' '.join(f'{k}={v:.3f}' for k, v in result.items())
    print(f'RESULT {keys} views={len(inputs)}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

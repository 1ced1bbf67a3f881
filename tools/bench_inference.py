#!/usr/bin/env python3
"""Benchmark: the camera path's preprocessing + inference, per backend and device.

For the default detector (models/rtf_centernet, 384x640 input; ``--model`` another spec) at
batch 1: each iteration takes a 1920x1080 uint8 frame, preprocesses it into the network input
(resize, normalise, NCHW) and runs the model; P50/P99/max over --runs iterations of both
stages, then the whole camera path with the output copied to the host and decoded into objects.

  python tools/bench_inference.py --backend onnxruntime              # CPU
  python tools/bench_inference.py --backend torch --device cuda      # FP16 + CUDA graph
  python tools/bench_inference.py --backend torch --device cuda --matrix  # eager/graph, 32/16
  python tools/bench_inference.py --backend torch --device cuda --h2d  # + pinned vs pageable copy
  python tools/bench_inference.py --backend torch --device cuda --zoom 1.5  # + the zoomed view
  python tools/bench_inference.py --backend torch --device cuda --zoom 3 --mirror  # + mirrored

On CUDA the frame lives in a shared-memory ring slot page-locked with cudaHostRegister (as
the fusion node's camera ring), preprocessing is one CUDA graph replay, and the times are measured
from host, synchronised after each stage.

Rows: each stage waited for on its own, their sum, and the two enqueued back to back on one
stream with one wait (how the camera path runs); with a decoder, the whole path to objects: the
head copied to the host and decoded by numpy, and on CUDA also the fusion node's way (the head
reduced to its peaks inside the CUDA graph, ``rt_fusion.inference.device_decode``: a few KB
copied, the rows decoded).

Final line: RESULT backend=... device=... pre_p99_ms=... infer_p50_ms=... infer_p99_ms=...
total_p99_ms=... [decode_p99_ms=... with_decode_p99_ms=... device_decode_p99_ms=...] (total:
preprocessing + inference with one wait; with_decode: + copy + numpy decode; device_decode: +
peaks in the graph + copy + decode) [runner_p99_ms=... zoom=... zoom_p99_ms=...: with --zoom,
the fusion node's camera path (FrameRunner + decoding) without and with the zoomed view]
[mirror_p99_ms=...: with --mirror, that path with both views also run mirrored].
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import rt_fusion.bench.inference as bi
from rt_fusion.inference.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]


DEFAULT_MODEL = ROOT / 'models' / 'rtf_centernet.yaml'


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--backend', choices=('onnxruntime', 'torch'), default='onnxruntime')
    parser.add_argument('--device', default='cpu', help='cpu or cuda')
    parser.add_argument(
        '--precision',
        choices=('fp32', 'fp16'),
        default=None,
        help='default: fp16 on CUDA, fp32 on CPU',
    )
    parser.add_argument('--no-cuda-graph', action='store_true')
    parser.add_argument('--model', type=Path, default=DEFAULT_MODEL, help='model spec YAML')
    parser.add_argument('--runs', type=int, default=1000)
    parser.add_argument('--threads', type=int, default=0, help='CPU threads (0: default)')
    parser.add_argument(
        '--matrix', action='store_true', help='torch on CUDA: eager and CUDA graph, FP32 and FP16'
    )
    parser.add_argument('--h2d', action='store_true', help='also time 1080p host->device copies')
    parser.add_argument(
        '--frame',
        default='1080x1920',
        help="the camera frame, HxW (default 1080x1920; 'input': the model's input size, "
        "#14's latency target's condition)",
    )
    parser.add_argument(
        '--no-optimize',
        action='store_true',
        help='torch on CUDA: the model as loaded (no channels-last, freezing, cuDNN autotuning)',
    )
    parser.add_argument('--quick', action='store_true', help='200 runs')
    parser.add_argument(
        '--zoom',
        type=float,
        help="also the fusion node's path (FrameRunner + decode) without and with this zoom",
    )
    parser.add_argument(
        '--mirror',
        action='store_true',
        help='with --zoom: also that path with every view mirrored as well (the fusion '
        "node's mirror parameter)",
    )
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench')
    args = parser.parse_args(argv)
    if args.mirror and not args.zoom:
        parser.error('--mirror measures the fusion node path: it needs --zoom (1 for none)')
    runs = 200 if args.quick else args.runs
    # bi.FRAME: the frame every stage of this run reads
    if args.frame == 'input':
        h, w = load_spec(args.model).inputs[0].shape[2:]
        bi.FRAME = (h, w, 3)
    else:
        h, w = (int(v) for v in args.frame.split('x'))
        bi.FRAME = (h, w, 3)
    frame_name = f'{bi.FRAME[1]}x{bi.FRAME[0]}'
    cuda = args.device.startswith('cuda')
    precision = args.precision or ('fp16' if cuda and args.backend == 'torch' else 'fp32')

    from rt_fusion import report  # noqa: PLC0415

    configs = [(precision, not args.no_cuda_graph)]
    if args.matrix and cuda:
        configs = [('fp32', False), ('fp32', True), ('fp16', False), ('fp16', True)]
    results = [
        bi.run_config(
            args.backend,
            args.device,
            precision=p,
            cuda_graph=g,
            runs=runs,
            threads=args.threads,
            model=args.model,
            optimize=not args.no_optimize,
        )
        for p, g in configs
    ]
    rows, extra = {}, {}
    for r in results:
        label = f'{r["backend"]} {r["device"]} {r["precision"]}' + (
            ' graph' if r['cuda_graph'] else (' eager' if cuda else '')
        )
        rows[f'{label}: preprocess'] = r['pre']
        rows[f'{label}: inference'] = r['infer']
        rows[f'{label}: total (2 waits)'] = r['total']
        rows[f'{label}: pre + infer, one wait'] = r['fused']
        if r['decoded'] is not None:
            rows[f'{label}: decode (numpy)'] = r['decode']
            rows[f'{label}: pre + infer + copy + decode'] = r['decoded']
        if r['peaks'] is not None:
            rows[f'{label}: decode peak rows (numpy)'] = r['peaks_decode']
            rows[f'{label}: pre + infer + peaks in graph + copy + decode'] = r['peaks']
        if r['note']:
            extra[f'{label}: pre + infer, one wait'] = {'note': r['note']}
    if args.h2d and cuda:
        for name, s in bi.bench_h2d(runs).items():
            rows[f'{frame_name} H2D copy, {name}'] = s
    zoomed: dict[str, Any] = {}
    if args.zoom:
        zoomed = bi.bench_runner(
            args.backend, args.device, runs, args.threads, args.model, args.zoom, args.mirror
        )
        for name, s in zoomed.items():
            rows[f"fusion node's camera path to objects, {name}"] = s
    report.console.print(
        report.latency_table(
            f'{args.model.stem}, batch 1, from a {frame_name} uint8 frame ({runs} runs)',
            rows,
            extra=extra,
        )
    )
    report.write_json(
        args.out / f'inference_{args.backend}_{"cuda" if cuda else "cpu"}.json',
        {'runs': runs, 'rows': rows},
    )
    main_r = results[-1]
    report.result_line(
        backend=main_r['backend'],
        device=main_r['device'],
        frame=frame_name,
        optimized=int(cuda and args.backend == 'torch' and not args.no_optimize),
        pre_p99_ms=main_r['pre'].p99_us / 1e3,
        infer_p50_ms=main_r['infer'].p50_us / 1e3,
        infer_p99_ms=main_r['infer'].p99_us / 1e3,
        total_p99_ms=main_r['fused'].p99_us / 1e3,
        **(
            {
                'decode_p99_ms': main_r['decode'].p99_us / 1e3,
                'with_decode_p99_ms': main_r['decoded'].p99_us / 1e3,
            }
            if main_r['decoded'] is not None
            else {}
        ),
        **(
            {'device_decode_p99_ms': main_r['peaks'].p99_us / 1e3}
            if main_r['peaks'] is not None
            else {}
        ),
        **(
            {
                'runner_p99_ms': zoomed['zoom 1'].p99_us / 1e3,
                'zoom': args.zoom,
                'zoom_p99_ms': zoomed[f'zoom {args.zoom:g}'].p99_us / 1e3,
            }
            if zoomed
            else {}
        ),
        **(
            {'mirror_p99_ms': zoomed[f'zoom {args.zoom:g}, mirrored'].p99_us / 1e3}
            if zoomed and args.mirror
            else {}
        ),
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())

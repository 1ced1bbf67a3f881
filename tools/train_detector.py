#!/usr/bin/env python3
"""Train the default camera detector (CenterNet-style) on random rendered scenes, export it.

    python tools/train_detector.py --out /tmp/det --frames 24000 --epochs 12     # on the H200
    python tools/train_detector.py --export /tmp/det/weights.pt --models models  # ONNX + TS + spec
    python tools/train_detector.py --heldout models/rtf_centernet.yaml --scenes 150
    python tools/train_detector.py --heldout models/rtf_centernet.yaml \
        --picture docs/detector.png --video ../shared/data/camera/solidWhiteRight.mp4

Data: ``rt_fusion.core.scenario.detector_data`` draws random scenes (seeds ``[1_000_000 + k]``,
held-out ``[2_000_000 + k]``: disjoint from every evaluation seed) and renders them in worker
processes with the scenario camera (``--camera``, default 1920x1080: the vehicle camera of the
scenarios, the evaluation and the demo), resized to the network input (``--input``,
default 384x640) as the runtime does. Each visible object becomes a heatmap peak (class), a log
left/top/right/bottom box around the keypoint, a sub-pixel offset, a log depth and a (sin, cos)
heading at stride 4. Losses: CenterNet's penalty-reduced focal loss on the heatmaps, L1 on the
rest. Reproducible from ``--seed`` (the data is a pure function of the scene seeds; cuDNN picks
its own kernels, so the last digits of the weights vary between GPUs).

Outputs (``--out``): ``weights.pt`` (state dict + config), ``loss.png``, ``train.json``. The
export writes ``<name>.onnx`` (opset 13, IR 7), ``<name>.ts`` (TorchScript) and ``<name>.yaml``
(the model spec with the decoder section) into ``--models``. The held-out check decodes with the
shipped decoder and reports precision, recall (also per range bin), class accuracy and the median
depth error, on frames rendered at ``--camera`` and resized by the runtime's preprocessing.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
from pathlib import Path

from rt_fusion.training import detector as td
from rt_fusion.training import detector_check as check

ROOT = Path(__file__).resolve().parents[1]


def _views(text: str) -> tuple[float, ...]:
    views = tuple(float(v) for v in text.split(','))
    if not views or any(not v >= 1.0 for v in views):
        raise argparse.ArgumentTypeError(f'--views {text}: factors >= 1, comma-separated')
    return views


def _stages(text: str) -> tuple[str, ...]:
    stages = tuple(v for v in text.split(',') if v)
    unknown = sorted(set(stages) - set(td.STAGES))
    if unknown:
        raise argparse.ArgumentTypeError(f'no stage {unknown} (stages: {",".join(td.STAGES)})')
    return stages


def _size(text: str, sep: str = 'x') -> tuple[int, int]:
    a, b = text.lower().split(sep)
    return int(a), int(b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default='/tmp/rtf_detector', help='training output folder')
    parser.add_argument('--frames', type=int, default=24000)
    parser.add_argument('--epochs', type=int, default=12)
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--lr', type=float, default=2e-3)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument(
        '--first-scene',
        type=int,
        default=0,
        help='training scenes are [1000000, first-scene + k] (fine-tuning on new scenes)',
    )
    parser.add_argument(
        '--init', type=Path, help='start from these weights (a weights.pt or a model .ts)'
    )
    parser.add_argument(
        '--far-weight',
        type=float,
        default=0.0,
        help='weigh the regressions of objects farther than this [m] by depth / this (at most '
        '3): far objects, where a pixel is metres (0: all 1)',
    )
    parser.add_argument(
        '--data',
        type=Path,
        help='keep the rendered training data in this folder (read back when it holds the '
        'same scenes)',
    )
    parser.add_argument(
        '--data-only', action='store_true', help='render the data into --data and stop'
    )
    parser.add_argument(
        '--occluders',
        type=float,
        default=0.0,
        help='the chance that a scene (training and held-out) gets 1-3 standing objects in '
        'line with a far roadside post (detector_data.add_occluders; 0: the plain generator)',
    )
    parser.add_argument('--max-train-s', type=float, default=0.0, help='stop training after')
    parser.add_argument('--workers', type=int, default=mp.cpu_count())
    parser.add_argument('--export', type=Path, help='weights.pt to export instead of training')
    parser.add_argument('--models', type=Path, default=ROOT / 'models')
    parser.add_argument('--name', default='rtf_centernet')
    parser.add_argument('--heldout', type=Path, help='a model spec to check on held-out scenes')
    parser.add_argument('--scenes', type=int, default=150, help='held-out scenes (2 frames each)')
    parser.add_argument(
        '--zoom',
        type=float,
        default=1.0,
        help="--heldout, --picture: add the zoomed view (the fusion node's zoom)",
    )
    parser.add_argument('--picture', type=Path, help='PNG of detections (with --heldout SPEC)')
    parser.add_argument(
        '--depth-errors',
        action='store_true',
        help='--heldout: also the table of depth errors, each object paired by bearing',
    )
    parser.add_argument('--video', type=Path, help='--picture: also a frame of this video')
    parser.add_argument(
        '--input', type=_size, default=td.INPUT_HW, help='network input HxW (default 384x640)'
    )
    parser.add_argument(
        '--camera',
        type=_size,
        default=td.CAMERA_WH,
        help="render the scenes at WxH (16:9; default 1920x1080, the scenarios' vehicle "
        'camera), resized to the model input',
    )
    parser.add_argument(
        '--views',
        type=_views,
        default=td.VIEWS,
        help='each rendered frame in these views: 1 the whole frame, z > 1 its centre zoomed z '
        'times as the fusion node cuts it (e.g. 1,1.5,3; default 1); --frames counts them all',
    )
    parser.add_argument(
        '--extra-blocks',
        type=_stages,
        default=(),
        help=f'stages ({",".join(td.STAGES)}) grown by one residual block each, starting as the '
        'identity (with --init: the trained network grown, then fine-tuned)',
    )
    args = parser.parse_args(argv)
    if args.data_only and args.data is None:
        parser.error('--data-only needs --data')
    td.set_input(args.input, args.camera)
    td.set_views(args.views)
    td.FAR_WEIGHT_M = args.far_weight
    if not 0.0 <= args.occluders <= 1.0:
        parser.error(f'--occluders {args.occluders}: a chance in [0, 1]')
    td.OCCLUDERS = args.occluders
    if args.export:
        td.export(args.export, args.models, args.name)
        return 0
    if args.heldout and args.picture:
        check.picture(args.heldout, args.video, args.picture, args.zoom)
        return 0
    if args.heldout:
        check.heldout(
            args.heldout,
            args.scenes,
            args.workers,
            camera=args.camera,
            zoom=args.zoom,
            depth_errors=args.depth_errors,
        )
        return 0
    td.train(args)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

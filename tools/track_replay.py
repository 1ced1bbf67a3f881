#!/usr/bin/env python3
"""Camera-only tracking replayed off the graph: a tracker or placement setting scored in seconds.

    python tools/track_replay.py --scenario stopped_car --seeds 2301,2302
    python tools/track_replay.py --scenario stopped_car --seeds 2301 \
        --set tracker.max_position_std=8 --set fusion.camera_bearing_std=0.002
    python tools/track_replay.py --scenario cut_in --seeds 7 --model OTHER/rtf_centernet.yaml

Each run's camera frames are rendered as the scenario generator renders them (its look, its
sensor noise model, JPEG at the bag's quality 90) and run once through the detector as the fusion
node runs it (the model spec with ONNX Runtime on the CPU, the zoomed view, the mirrored pass
where the parameter file's ``mirror`` is on, the decoder); the detections are kept in a cache
(``--cache``, keyed by the model's ONNX and spec files, the scenario code's digest, the
scenario, the seed, the length, the zoom and the mirror). Then the fusion core
(:class:`FusionEngine`, built from the same parameter file as the fusion node, ``--set``
overriding any ``fusion.`` or ``tracker.`` parameter) takes every frame's detections with the
true ego motion as a perfect IMU and wheel speed, and its tracks are scored against the truth
as ``tools/evaluate.py`` scores a ``camera_only`` run
(:func:`rt_fusion.core.evaluation.score_perception`).

Once cached, a setting costs a second or two a run instead of a graph run per setting. It is
not the graph: the ego motion is exact, there is no DDS or timing, and the sensor noise draws
are not the bag's. On ``stopped_car`` seeds 2401–2404 it gave camera-only recall 0.915, 0.846,
0.878, 0.881 where the graph (``tools/evaluate.py --ablate camera_only``) gave 0.915, 0.848,
0.882, 0.881, and precision 0.920 against 0.921 on average. Rank settings with it, then confirm
the chosen one through the graph on seeds it was not tuned on.

A table per run, and a last line ``RESULT precision=… recall=… runs=…`` (means over the runs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rt_fusion.core import evaluation as ev  # noqa: E402
from rt_fusion.core import params as pm  # noqa: E402
from rt_fusion.core import rotation  # noqa: E402
from rt_fusion.core.errors import RtFusionError  # noqa: E402
from rt_fusion.core.fusion import FusionEngine, FusionParams  # noqa: E402
from rt_fusion.core.perception.tracker import TrackerParams  # noqa: E402
from rt_fusion.core.scenario import library  # noqa: E402
from rt_fusion.core.scenario import sensors as sm  # noqa: E402
from rt_fusion.core.scenario.generate import CAMERA_HZ, code_digest, truth_series  # noqa: E402
from rt_fusion.core.scenario.world import build_world  # noqa: E402
from rt_fusion.core.sync import AlignedFrame, ImuAtFrame  # noqa: E402

JPEG_QUALITY = 90  # as the generator writes the bag's frames
DEFAULT_CACHE = Path.home() / '.cache' / 'rt_fusion' / 'track_replay'


def detections(
    scenario: dict[str, Any],
    seed: int,
    seconds: float,
    model: Path,
    zoom: float,
    cache: Path | None,
    threads: int = 1,
    mirror: bool = False,
) -> tuple[list[list[Any]], Any, tuple[int, int], float]:
    """Every frame's decoded detections, the decoder spec, the network's input size (the
    pixels the detections are in) and the seconds it took (0: cached)."""
    import cv2  # noqa: PLC0415

    from rt_fusion.core.perception.zoom import decode_views  # noqa: PLC0415
    from rt_fusion.core.scenario.render import Look, render  # noqa: PLC0415
    from rt_fusion.inference.runner import FrameRunner  # noqa: PLC0415
    from rt_fusion.inference.spec import load_spec  # noqa: PLC0415

    spec = load_spec(model)
    if spec.decoder is None:
        raise RtFusionError(f'{model}: the model spec has no decoder section')
    key = hashlib.sha256(
        json.dumps(
            {
                'onnx': hashlib.sha256(spec.artifact('onnx').read_bytes()).hexdigest(),
                'spec': hashlib.sha256(Path(model).read_bytes()).hexdigest(),  # the decoder
                'renderer': code_digest(),  # the scenario, sensor and rendering code
                'scenario': scenario,
                'seed': seed,
                'seconds': seconds,
                'zoom': zoom,
                'jpeg': JPEG_QUALITY,
                'format': 2,  # (detections, decoder, input size)
                # Only when on: the caches made before the option stay valid.
                **({'mirror': True} if mirror else {}),
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()[:24]
    path = cache / f'{scenario.get("name", "scenario")}-s{seed}-{key}.pkl' if cache else None
    if path is not None and path.exists():
        dets, decoder, input_hw = pickle.loads(path.read_bytes())
        return dets, decoder, input_hw, 0.0
    t0 = time.monotonic()
    world = build_world(scenario, seconds)
    runner = FrameRunner(model, 'onnxruntime', 'cpu', threads=threads, zoom=zoom, mirror=mirror)
    rng = np.random.default_rng([seed, 1])
    look = Look(scenery_seed=seed)
    dets = []
    try:
        for k in range(int(seconds * CAMERA_HZ)):
            img = render(sm.VEHICLE, world, k / CAMERA_HZ, rng, look)
            ok, jpg = cv2.imencode('.jpg', img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
            if not ok:
                raise RuntimeError(f'frame {k}: JPEG encoding failed')
            seen = cv2.imdecode(jpg, cv2.IMREAD_COLOR)  # what the bag's reader gets back
            if seen is None:
                raise RuntimeError(f'frame {k}: JPEG decoding failed')
            out = runner.run(seen, 'bgr8', lambda: True)
            dets.append(decode_views(out, spec.decoder, runner.input_hw))
        decoder, input_hw = spec.decoder, runner.input_hw
    finally:
        runner.release()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps((dets, decoder, input_hw)))
    return dets, decoder, input_hw, time.monotonic() - t0


def engine_params(raw: dict[str, Any], sets: list[str]) -> tuple[FusionParams, TrackerParams]:
    """The fusion node's ``fusion.`` and ``tracker.`` parameters from its ``ros__parameters``
    (``raw``), with ``--set`` overrides (``fusion.NAME=VALUE``, the value read as YAML).

    Raises:
        ParameterError: an unknown name or a bad value (named).
        SystemExit: a ``--set`` that is not ``fusion.NAME=VALUE`` or ``tracker.NAME=VALUE``.
    """
    groups = {
        'fusion': dict(raw.get('fusion') or {}),
        'tracker': dict(raw.get('tracker') or {}),
    }
    for item in sets:
        name, sep, value = item.partition('=')
        group, dot, field = name.partition('.')
        if not sep or not dot or group not in groups or not field:
            raise SystemExit(f'--set {item!r}: expected fusion.NAME=VALUE or tracker.NAME=VALUE')
        groups[group][field] = yaml.safe_load(value)
    return pm.build(FusionParams, groups['fusion']), pm.build(TrackerParams, groups['tracker'])


def replay(
    truth: list[dict[str, Any]],
    dets: list[list[Any]],
    decoder: Any,
    fusion: FusionParams,
    tracker: TrackerParams,
    input_hw: tuple[int, int],
) -> dict[str, Any]:
    """Camera-only tracking of a run (``truth``: per frame, as :func:`truth_series` gives it,
    each with its ``stamp_ns``) and its perception metrics."""
    eng = FusionEngine(fusion, tracker=tracker)
    eng.set_decoder(decoder)
    tf = ev.truth_frames({'frames': truth}, ('camera',))
    frames = []
    prev: dict[str, Any] | None = None
    for fr, cams in zip(truth, dets, strict=True):
        stamp, ego = int(fr['stamp_ns']), fr['ego']
        v = math.hypot(ego['vx'], ego['vy'])
        if prev is None:
            dyaw, rate, accel = 0.0, 0.0, 0.0
        else:
            dt = (stamp - prev['stamp_ns']) / 1e9
            dyaw = math.remainder(ego['yaw'] - prev['ego']['yaw'], math.tau)
            rate = dyaw / dt
            accel = (v - math.hypot(prev['ego']['vx'], prev['ego']['vy'])) / dt
        eng.set_speed(v)
        imu = ImuAtFrame(
            (0.0, 0.0, rate), (accel, 0.0, 0.0), rotation.from_rotvec(0.0, 0.0, dyaw), 1
        )
        aligned = AlignedFrame(stamp, None, imu, {}, None, ('radar',), 0)
        fused = eng.fuse(aligned, input_hw=input_hw, detections=cams)
        outs = [ev.OutputObject(o.id, o.x, o.y, o.vx, o.vy, o.object_class) for o in fused.objects]
        frames.append(ev.Frame(stamp, tf[stamp], outs))
        prev = fr
    return ev.score_perception(frames)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--scenario', required=True, help='a built-in scenario or a YAML path')
    parser.add_argument('--seeds', default='1', help='comma-separated scenario seeds')
    parser.add_argument('--seconds', type=float, default=4.0)
    parser.add_argument('--model', type=Path, default=ROOT / 'models' / 'rtf_centernet.yaml')
    parser.add_argument('--config', type=Path, default=ROOT / 'config' / 'replay.yaml')
    parser.add_argument('--node', default='fusion', help="the parameter file's fusion node")
    parser.add_argument(
        '--set',
        action='append',
        default=[],
        metavar='GROUP.NAME=VALUE',
        help='override a fusion. or tracker. parameter (repeatable)',
    )
    parser.add_argument('--cache', type=Path, default=DEFAULT_CACHE, help='detections cache')
    parser.add_argument('--no-cache', action='store_true', help='detect again, keep nothing')
    parser.add_argument('--threads', type=int, default=1, help='ONNX Runtime CPU threads')
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(',') if s]
    except ValueError:
        parser.error(f'--seeds {args.seeds!r}: comma-separated integers')
    if not seeds or args.seconds <= 0:
        parser.error('--seeds needs a seed and --seconds a positive length')
    raw = yaml.safe_load(args.config.read_text()).get(args.node, {}).get('ros__parameters', {})
    zoom = float(raw.get('zoom', 1.0))
    mirror = bool(raw.get('mirror', False))
    try:
        fusion, tracker = engine_params(raw, args.set)
        scenario = library.load(args.scenario, ROOT / 'config' / 'scenarios')
        build_world(scenario, args.seconds)
    except RtFusionError as exc:
        print(f'track_replay: error: {exc}', file=sys.stderr)
        return 2
    cam = sm.VEHICLE
    rows = []
    for seed in seeds:
        cache = None if args.no_cache else args.cache
        dets, decoder, input_hw, took = detections(
            scenario, seed, args.seconds, args.model, zoom, cache, args.threads, mirror
        )
        truth = truth_series(build_world(scenario, args.seconds), seed, cam)
        for fr in truth:
            fr['stamp_ns'] = round(fr['t'] * 1e9)
        t0 = time.monotonic()
        m = replay(truth, dets, decoder, fusion, tracker, input_hw)
        rbr = m.get('recall_by_range') or {}
        rows.append(m)
        print(
            f'{scenario.get("name", args.scenario)} seed {seed}: precision {m["precision"]:.3f} '
            f'recall {m["recall"]:.3f} id switches {m["id_switches"]} '
            f'recall by range {json.dumps({k: round(v, 3) for k, v in rbr.items()})} '
            f'(detector {"cached" if took == 0 else f"{took:.0f} s"}, '
            f'tracking {time.monotonic() - t0:.1f} s)',
            flush=True,
        )
    mean = {k: float(np.mean([r[k] for r in rows])) for k in ('precision', 'recall')}
    print(f'RESULT precision={mean["precision"]:.4f} recall={mean["recall"]:.4f} runs={len(rows)}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

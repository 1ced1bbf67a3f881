"""The detector checked on held-out scenes (seeds disjoint from training and evaluation),
decoded with the shipped decoder: precision, recall (per range bin), class accuracy, depth
errors; and a picture of its detections. ``tools/train_detector.py --heldout`` runs it.
"""

from __future__ import annotations

import math
import multiprocessing as mp
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.core.scenario import detector_data as dd
from rt_fusion.core.scenario import sensors as sm
from rt_fusion.training import detector as td

RANGE_BINS_M = ((0.0, 30.0), (30.0, 50.0), (50.0, 80.0))


def heldout(
    spec_path: Path,
    scenes: int,
    workers: int,
    gate_m: float = 2.0,
    camera: tuple[int, int] = td.CAMERA_WH,
    zoom: float = 1.0,
    depth_errors: bool = False,
) -> dict[str, float]:
    """Precision, recall, class accuracy and median depth error on held-out scenes (ONNX Runtime,
    the shipped decoder and camera geometry), objects up to 80 m; recall per range bin too.

    ``depth_errors`` also prints where the misses come from: each true object paired with the
    detection nearest its bearing (within ``BEARING_PAIR_RAD``, whatever its depth), per range
    bin and per class: found on its bearing, within the gate, signed median and mean absolute
    depth error. A detection on the bearing that misses the gate is a depth error, not a miss
    of the detector.

    The frames are rendered by the scenario camera at ``camera`` (width, height; default
    1920×1080, the scenarios' vehicle camera) and resized to the model's input by the
    runtime's own preprocessing (``CpuPreprocessor``), as the fusion node sees them. ``zoom`` >
    1 adds the zoomed view of the frame's centre (:mod:`rt_fusion.core.perception.zoom`), as
    the fusion node's ``zoom`` parameter does."""
    import onnxruntime as ort  # noqa: PLC0415

    from rt_fusion.core.perception import zoom as zm  # noqa: PLC0415
    from rt_fusion.core.perception.decoders import (  # noqa: PLC0415
        CameraGeometry,
        camera_to_vehicle,
        decode,
    )
    from rt_fusion.inference.preprocess import CpuPreprocessor  # noqa: PLC0415
    from rt_fusion.inference.spec import load_spec  # noqa: PLC0415

    spec = load_spec(spec_path)
    assert spec.decoder is not None
    assert spec.preprocessing is not None
    sess = ort.InferenceSession(str(spec.artifact('onnx')), providers=['CPUExecutionProvider'])
    input_hw = (int(spec.preprocessing.resize[0]), int(spec.preprocessing.resize[1]))
    td.set_input(td.INPUT_HW, camera)  # the forked workers render by td.render_camera()
    cam = td.render_camera()
    sx, sy = input_hw[1] / cam.width, input_hw[0] / cam.height
    geo = CameraGeometry(
        cam.fx * sx,
        cam.fy * sy,
        cam.cx * sx,
        cam.cy * sy,
        sm.CAMERA_POS[0],
        sm.CAMERA_POS[2],
        d=cam.d,
    )
    pre = CpuPreprocessor(spec.preprocessing, (cam.height, cam.width, 3), 'bgr')
    x = np.empty((1, 3, *input_hw), np.float32)
    view = zm.Zoom.of(zoom, (cam.height, cam.width), input_hw)
    zoomed_pre = None
    if view is not None:
        x0, y0, x1, y1 = view.crop
        zoomed_pre = CpuPreprocessor(spec.preprocessing, (y1 - y0, x1 - x0, 3), 'bgr')
    tp = fp = fn = cls_ok = 0
    bins = {r: [0, 0] for r in RANGE_BINS_M}  # found, total
    depth_err: list[float] = []
    paired: list[tuple[float, int, float, float]] = []  # depth, class, signed error, distance
    with mp.get_context('fork').Pool(workers) as pool:
        all_frames = pool.map(
            td.heldout_scene, [(dd.HELDOUT_SEED_BASE, k) for k in range(scenes)], chunksize=2
        )
    for frames in all_frames:
        for img, labels in frames:
            pre(img, x)
            dets = decode(sess.run(None, {'images': x}), spec.decoder, input_hw)
            if view is not None and zoomed_pre is not None:
                x0, y0, x1, y1 = view.crop
                zoomed_pre(img[y0:y1, x0:x1], x)
                near = decode(sess.run(None, {'images': x}), spec.decoder, input_hw)
                dets = zm.merge(dets, near, view, input_hw)
            pos = []
            for d in dets:
                p = camera_to_vehicle(d, geo)
                if p is not None:
                    pos.append((p[0], p[1], d))
            truth = [lab for lab in labels if lab.depth <= 80.0]
            if depth_errors:
                paired.extend(_bearing_pairs(truth, pos, geo.x))
            used: set[int] = set()
            for lab in truth:
                best, bd = -1, gate_m
                for j, (x_, y_, _d) in enumerate(pos):
                    dist = math.hypot(x_ - lab.x, y_ - lab.y)
                    if j not in used and dist <= bd:
                        best, bd = j, dist
                rng = next(r for r in RANGE_BINS_M if lab.depth <= r[1])
                bins[rng][1] += 1
                if best < 0:
                    fn += 1
                    continue
                bins[rng][0] += 1
                used.add(best)
                tp += 1
                det = pos[best][2]
                cls_ok += int(det.cls == lab.cls)
                depth_err.append(abs(det.depth - lab.depth) / lab.depth)
            fp += sum(1 for j, (x_, _y, _d) in enumerate(pos) if j not in used and x_ <= 85.0)
    res: dict[str, Any] = {
        'frames': sum(len(f) for f in all_frames),
        'camera': f'{cam.width}x{cam.height}',
        'input': f'{input_hw[0]}x{input_hw[1]}',
        'zoom': view.factor if view is not None else 1.0,
        'precision': tp / max(tp + fp, 1),
        'recall': tp / max(tp + fn, 1),
        'class_accuracy': cls_ok / max(tp, 1),
        'median_depth_error': float(np.median(depth_err)) if depth_err else math.nan,
    }
    for (lo, hi), (found, total) in bins.items():
        res[f'recall_{lo:.0f}_{hi:.0f}m'] = found / max(total, 1)
        res[f'objects_{lo:.0f}_{hi:.0f}m'] = total
    if depth_errors:
        _print_depth_errors(paired, gate_m)
    print(
        'RESULT '
        + ' '.join(f'{k}={v:.3f}' if isinstance(v, float) else f'{k}={v}' for k, v in res.items())
    )
    return res


#: A true object and a detection are paired by bearing within this much (0.57°), whatever
#: their depths: at 80 m, 0.8 m across.
BEARING_PAIR_RAD = 0.01
DEPTH_ERROR_BINS_M = ((0.0, 30.0), (30.0, 50.0), (50.0, 65.0), (65.0, 80.0))


def _bearing_pairs(
    truth: list[dd.CameraLabel], pos: list[tuple[float, float, Any]], camera_x: float
) -> list[tuple[float, int, float, float]]:
    """Per true object: (depth, class, detection depth - true depth, distance on the road
    plane) of the detection nearest its bearing from the camera, NaNs where none is within
    BEARING_PAIR_RAD."""
    out = []
    bearings = [math.atan2(y, x - camera_x) for x, y, _ in pos]
    for lab in truth:
        az = math.atan2(lab.y, lab.x - camera_x)
        best, best_d = -1, BEARING_PAIR_RAD
        for j, b in enumerate(bearings):
            if abs(b - az) < best_d:
                best, best_d = j, abs(b - az)
        if best < 0:
            out.append((lab.depth, lab.cls, math.nan, math.nan))
            continue
        x, y, det = pos[best]
        out.append((lab.depth, lab.cls, det.depth - lab.depth, math.hypot(x - lab.x, y - lab.y)))
    return out


def _print_depth_errors(paired: list[tuple[float, int, float, float]], gate_m: float) -> None:
    """The table of :func:`heldout`'s ``depth_errors``: per range bin, then per class beyond
    30 m."""
    if not paired:
        print('depth errors: no objects')
        return
    a = np.asarray(paired, dtype=np.float64)
    rows = [
        (f'{lo:g}-{hi:g} m', (a[:, 0] > lo) & (a[:, 0] <= hi)) for lo, hi in DEPTH_ERROR_BINS_M
    ]
    rows += [
        (f'{name} 30-80 m', (a[:, 1] == k) & (a[:, 0] > 30.0))
        for k, name in enumerate(dd.DETECTOR_CLASSES)
    ]
    print('| objects | n | on its bearing | within the gate | depth error median / MAE [m] |')
    print('|---|---|---|---|---|')
    for label, sel in rows:
        part = a[sel]
        if not len(part):
            continue
        found = ~np.isnan(part[:, 2])
        errs = part[found, 2]
        within = float(np.mean(np.nan_to_num(part[:, 3], nan=np.inf) <= gate_m))
        err = f'{np.median(errs):+.2f} / {np.mean(np.abs(errs)):.2f}' if len(errs) else '-'
        print(f'| {label} | {len(part)} | {found.mean():.2f} | {within:.2f} | {err} |')


def picture(spec_path: Path, video: Path | None, out: Path, zoom: float = 1.0) -> None:
    """Detections drawn on a held-out rendered frame and, when given, a frame of a real video,
    through the fusion node's runner with its ``zoom`` (the zoomed view's crop outlined);
    tiles of 1280×720."""
    import cv2  # noqa: PLC0415

    from rt_fusion.core.perception.zoom import decode_views  # noqa: PLC0415
    from rt_fusion.inference.runner import FrameRunner  # noqa: PLC0415

    runner = FrameRunner(spec_path, 'onnxruntime', 'cpu', threads=2, zoom=zoom)
    assert runner.spec.decoder is not None
    scenes = [dd.scene_frames((dd.HELDOUT_SEED_BASE, k), 1, sm.VEHICLE) for k in range(40)]
    busiest = max((f for f in scenes if f), key=lambda f: len(f[0][1]))  # the most labels
    frames: list[Any] = [busiest[0][0]]
    if video is not None:
        cap = cv2.VideoCapture(str(video))
        cap.set(cv2.CAP_PROP_POS_FRAMES, 100)
        ok, frame = cap.read()
        if ok:
            frames.append(cv2.resize(frame, (sm.VEHICLE.width, sm.VEHICLE.height)))
    tiles = []
    for img in frames:
        out_ = runner.run(img, 'bgr8', lambda: True)
        dets = decode_views(out_, runner.spec.decoder, runner.input_hw)
        sx, sy = img.shape[1] / runner.input_hw[1], img.shape[0] / runner.input_hw[0]
        tile = img.copy()
        view = getattr(out_, 'zoom', None)
        if view is not None:
            x0, y0, x1, y1 = view.crop
            cv2.rectangle(tile, (x0, y0), (x1, y1), (255, 255, 0), 2)
        for d in dets:
            u0, v0, u1, v1 = d.box
            p0, p1 = (int(u0 * sx), int(v0 * sy)), (int(u1 * sx), int(v1 * sy))
            cv2.rectangle(tile, p0, p1, (0, 255, 0), 2)
            label = f'{dd.DETECTOR_CLASSES[d.cls]} {d.score:.2f} {d.depth:.0f}m'
            cv2.putText(tile, label, (p0[0], p0[1] - 4), 0, 0.55, (255, 255, 255), 2)
        tiles.append(cv2.resize(tile, (1280, 720), interpolation=cv2.INTER_AREA))
    runner.release()
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), np.vstack(tiles), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    print(f'wrote {out}')

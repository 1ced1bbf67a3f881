"""Detector heads -> 2D detections (and 3D where the head says so), ROS-free.

A model spec's ``decoder:`` section (see :class:`DecoderSpec`) names the head; one function per
format turns the raw output tensor into :class:`CameraDetection` in *model input* pixels:

- ``centernet`` (the default model, ``models/rtf_centernet``): per-class heatmap logits at output
  stride ``stride``; each peak (3×3 local maximum, ties kept, top-K, score threshold) is an object
  whose keypoint is the projection of its 3D centre. Channels, in order: ``nc`` heatmaps, then the
  box as log distances from the keypoint to its left/top/right/bottom edges in stride units (``box:
  ltrb_log``) or the box size in output pixels around the keypoint (``box: wh``, the original
  CenterNet), two sub-pixel offsets, then optionally ``log_depth`` (camera-axis depth of the
  object's centre [m], log) and ``heading`` (sin, cos of its yaw in the vehicle frame).
- ``yolov8`` (also YOLO11; Ultralytics ONNX export): ``[1, 4 + nc, N]``, rows cx, cy, w, h in
  input pixels, then per-class scores (sigmoid already applied); class-wise NMS.
- ``yolox``: ``[1, N, 5 + nc]``, cx, cy, w, h, objectness, class scores; ``decoded: true`` when
  the export already applied the grids and strides (the default of the YOLOX exporter), else the
  raw head is decoded here from ``strides``. Score = objectness × class score; class-wise NMS.

NMS is OpenCV's (``cv2.dnn.NMSBoxesBatched``): a well-kept implementation, not a hand-written one.

:func:`camera_to_vehicle` places a detection on the vehicle frame: with a regressed depth along
the ray of its keypoint, else on the flat road below the box's bottom edge (plus half the class's
length, since the camera sees the near face). The spec's classes map to the fusion's class ids by
name.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from rt_fusion.core.camera import undistort_points
from rt_fusion.core.errors import RtFusionError

DECODER_TYPES = ('centernet', 'yolov8', 'yolox')
F32 = npt.NDArray[np.float32]


class DecoderError(RtFusionError):
    """A decoder section or an output tensor that does not fit the head it names."""


@dataclasses.dataclass(frozen=True, slots=True)
class DecoderSpec:
    """The ``decoder:`` section of a model spec.

    Attributes:
        type: one of DECODER_TYPES.
        classes: class names in output order (``car``, ``truck``, ``bus``, ``pedestrian``, ...).
        score_threshold: detections below this score are dropped.
        iou_threshold: NMS overlap (yolov8, yolox).
        top_k: at most this many detections per frame.
        stride: output stride of a centernet head [input px per output cell].
        box: centernet box encoding, ``ltrb_log`` or ``wh``.
        depth: centernet depth channel, ``log`` or ``none``.
        heading: centernet has a (sin, cos) heading pair.
        decoded: yolox output already in input pixels.
        strides: yolox head strides (when not decoded).
        output: index of the output tensor the head is in.
    """

    type: str
    classes: tuple[str, ...]
    score_threshold: float = 0.3
    iou_threshold: float = 0.5
    top_k: int = 100
    stride: int = 4
    box: str = 'ltrb_log'
    depth: str = 'none'
    heading: bool = False
    decoded: bool = True
    strides: tuple[int, ...] = (8, 16, 32)
    output: int = 0

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str) -> DecoderSpec:
        """Reads a spec section; unknown keys and bad values fail with their name."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise DecoderError(
                f'{where}: decoder: unknown key(s) {unknown}; known: {sorted(names)}'
            )
        kind = raw.get('type')
        if kind not in DECODER_TYPES:
            raise DecoderError(f'{where}: decoder.type {kind!r} is not one of {DECODER_TYPES}')
        classes = raw.get('classes')
        if (
            not isinstance(classes, list)
            or not classes
            or not all(isinstance(c, str) for c in classes)
        ):
            raise DecoderError(f'{where}: decoder.classes must be a non-empty list of names')
        kw: dict[str, Any] = dict(raw)
        kw['classes'] = tuple(classes)
        if 'strides' in kw:
            kw['strides'] = tuple(int(s) for s in kw['strides'])
        spec = cls(**kw)
        if spec.box not in ('ltrb_log', 'wh'):
            raise DecoderError(f'{where}: decoder.box {spec.box!r} is not ltrb_log or wh')
        if spec.depth not in ('log', 'none'):
            raise DecoderError(f'{where}: decoder.depth {spec.depth!r} is not log or none')
        if not 0.0 <= spec.score_threshold <= 1.0 or not 0.0 < spec.iou_threshold <= 1.0:
            raise DecoderError(f'{where}: decoder thresholds must lie in [0, 1]')
        if spec.top_k < 1 or spec.stride < 1:
            raise DecoderError(f'{where}: decoder.top_k and decoder.stride must be >= 1')
        return spec

    @property
    def channels(self) -> int:
        """Channels of a centernet head with this layout."""
        return (
            len(self.classes)
            + (4 if self.box == 'ltrb_log' else 2)
            + 2
            + (1 if self.depth == 'log' else 0)
            + (2 if self.heading else 0)
        )


@dataclasses.dataclass(frozen=True, slots=True)
class CameraDetection:
    """One object in the model input image.

    Attributes:
        cls: index into the decoder's classes.
        score: confidence [0, 1].
        box: (u0, v0, u1, v1) [input px].
        keypoint: (u, v) of the object's centre [input px] (the box centre for YOLO heads).
        depth: camera-axis depth of the object's centre [m] (NaN: not regressed).
        heading: yaw in the vehicle frame [rad] (NaN: not regressed).
    """

    cls: int
    score: float
    box: tuple[float, float, float, float]
    keypoint: tuple[float, float]
    depth: float = math.nan
    heading: float = math.nan


def _sigmoid(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    out: npt.NDArray[Any] = 1.0 / (1.0 + np.exp(-np.clip(x, -60.0, 60.0)))
    return out


def _output(outputs: Sequence[npt.NDArray[Any]] | npt.NDArray[Any], spec: DecoderSpec) -> F32:
    if isinstance(outputs, np.ndarray):
        return np.asarray(outputs, np.float32)
    if spec.output >= len(outputs):
        raise DecoderError(f'decoder.output {spec.output}: the model has {len(outputs)} outputs')
    return np.asarray(outputs[spec.output], np.float32)


@dataclasses.dataclass(frozen=True, slots=True)
class CenternetPeaks:
    """A centernet head already reduced to its peaks where the model ran (on the GPU: see
    ``rt_fusion.inference.device_decode``), so that a few hundred bytes cross to the host instead
    of the whole head.

    ``rows`` is float32 ``[K, 4 + R]``: class index, row, column (output cells), heatmap logit,
    then the head's R regression channels (everything after the heatmaps) at that cell; the K
    strongest 3x3 maxima over all classes, strongest first, including any below the threshold
    (the threshold is applied here, by :func:`decode`).
    """

    rows: F32


def centernet_peaks(heads: npt.NDArray[Any], spec: DecoderSpec) -> F32:
    """``[1, C, H, W]`` centernet heads -> the ``CenternetPeaks.rows`` of its peaks at or above
    the score threshold (3x3 local maxima, ties kept, top-K by score; numpy)."""
    out = np.asarray(heads, np.float32)
    if out.ndim == 4:
        if out.shape[0] != 1:
            raise DecoderError(f'centernet: batch of {out.shape[0]}, expected 1')
        out = out[0]
    nc = len(spec.classes)
    if out.ndim != 3 or out.shape[0] != spec.channels:
        raise DecoderError(
            f'centernet: output {list(heads.shape)} does not have the {spec.channels} channels '
            f'of {nc} classes, box {spec.box}, depth {spec.depth}, heading {spec.heading}'
        )
    # Peaks on the logits (the sigmoid is monotonic): candidates over the threshold, then each
    # compared with its 8 neighbours only (cheaper than a full 3x3 maximum filter).
    logit = _logit(spec.score_threshold)
    heat = out[:nc]
    # Flat indices (a 3-D nonzero costs ~5x as much on a 5x96x160 head), split by hand.
    h, w = heat.shape[1:]
    flat = np.flatnonzero(np.ascontiguousarray(heat).reshape(-1) >= logit)
    if flat.size == 0:
        return np.zeros((0, 4 + spec.channels - nc), np.float32)
    cls_i, rest = np.divmod(flat, h * w)
    ys, xs = np.divmod(rest, w)
    # Each candidate against its neighbours inside the map (no padded copy of the whole head:
    # an edge neighbour clamps onto the candidate itself, which it always equals).
    value = heat[cls_i, ys, xs]
    peak = np.ones(len(value), bool)
    rows_ = (np.maximum(ys - 1, 0), ys, np.minimum(ys + 1, h - 1))
    cols_ = (np.maximum(xs - 1, 0), xs, np.minimum(xs + 1, w - 1))
    for dy, yy in enumerate(rows_):
        for dx, xx in enumerate(cols_):
            if dy != 1 or dx != 1:
                peak &= value >= heat[cls_i, yy, xx]
    cls_i, ys, xs, value = cls_i[peak], ys[peak], xs[peak], value[peak]
    order = np.argsort(-value, kind='stable')[: spec.top_k]
    cls_i, ys, xs, value = cls_i[order], ys[order], xs[order], value[order]
    rows = np.empty((len(xs), 4 + spec.channels - nc), np.float32)
    rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = cls_i, ys, xs, value
    rows[:, 4:] = out[nc:, ys, xs].T
    return rows


def _logit(thr: float) -> float:
    if 0.0 < thr < 1.0:
        return math.log(thr / (1.0 - thr))
    return -math.inf if thr <= 0 else math.inf


def decode_centernet_peaks(rows: npt.NDArray[Any], spec: DecoderSpec) -> list[CameraDetection]:
    """``CenternetPeaks.rows`` -> detections: the threshold and top-K applied, boxes, sub-pixel
    keypoints, depth and heading from the regression columns."""
    rows = np.asarray(rows, np.float32)
    if rows.ndim != 2 or rows.shape[1] != 4 + spec.channels - len(spec.classes):
        raise DecoderError(
            f'centernet peaks: shape {list(rows.shape)}, expected [K, '
            f'{4 + spec.channels - len(spec.classes)}] for this decoder'
        )
    logit = rows[:, 3]
    rows = rows[np.isfinite(logit) & (logit >= _logit(spec.score_threshold))][: spec.top_k]
    if not len(rows):
        return []
    cls_i = rows[:, 0].astype(np.int64)
    ys, xs = rows[:, 1], rows[:, 2]
    scores = _sigmoid(rows[:, 3])
    reg = rows[:, 4:].T  # (R, n)
    k = 0
    s = float(spec.stride)
    if spec.box == 'ltrb_log':
        ltrb = np.exp(np.clip(reg[k : k + 4], -10.0, 10.0)) * s  # (4, n) input px
        k += 4
    else:
        wh = reg[k : k + 2] * s
        ltrb = np.concatenate([wh / 2, wh / 2])
        k += 2
    off = reg[k : k + 2]
    k += 2
    u = (xs + off[0]) * s
    v = (ys + off[1]) * s
    depth = np.full(len(xs), np.nan, np.float32)
    if spec.depth == 'log':
        depth = np.exp(np.clip(reg[k], -5.0, 8.0))
        k += 1
    heading = np.full(len(xs), np.nan, np.float32)
    if spec.heading:
        heading = np.arctan2(reg[k], reg[k + 1])
    return [
        CameraDetection(
            int(cls_i[i]),
            float(scores[i]),
            (
                float(u[i] - ltrb[0, i]),
                float(v[i] - ltrb[1, i]),
                float(u[i] + ltrb[2, i]),
                float(v[i] + ltrb[3, i]),
            ),
            (float(u[i]), float(v[i])),
            float(depth[i]),
            float(heading[i]),
        )
        for i in range(len(xs))
    ]


def decode_centernet(heads: npt.NDArray[Any], spec: DecoderSpec) -> list[CameraDetection]:
    """``[1, C, H, W]`` centernet heads -> detections (see the module docstring)."""
    return decode_centernet_peaks(centernet_peaks(heads, spec), spec)


def nms(
    boxes: npt.NDArray[Any], scores: npt.NDArray[Any], classes: npt.NDArray[Any], spec: DecoderSpec
) -> npt.NDArray[np.int64]:
    """Indices kept by class-wise NMS (xyxy boxes), best first, at most ``top_k``."""
    if len(boxes) == 0:
        return np.zeros(0, np.int64)
    xywh = np.column_stack([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]]).astype(np.float64)
    kept = cv2.dnn.NMSBoxesBatched(
        xywh.tolist(),
        scores.astype(np.float64).tolist(),
        classes.astype(np.int64).tolist(),
        spec.score_threshold,
        spec.iou_threshold,
        top_k=spec.top_k,
    )
    keep: npt.NDArray[np.int64] = np.asarray(kept, np.int64).reshape(-1)
    best: npt.NDArray[np.int64] = keep[np.argsort(-scores[keep], kind='stable')][: spec.top_k]
    return best


def _boxes_out(
    cxcywh: npt.NDArray[Any], scores: npt.NDArray[Any], cls: npt.NDArray[Any], spec: DecoderSpec
) -> list[CameraDetection]:
    good = np.isfinite(cxcywh).all(axis=1) & np.isfinite(scores) & (scores >= spec.score_threshold)
    cxcywh, scores, cls = cxcywh[good], scores[good], cls[good]
    xyxy = np.column_stack([cxcywh[:, :2] - cxcywh[:, 2:] / 2, cxcywh[:, :2] + cxcywh[:, 2:] / 2])
    keep = nms(xyxy, scores, cls, spec)
    return [
        CameraDetection(
            int(cls[i]),
            float(scores[i]),
            (float(xyxy[i, 0]), float(xyxy[i, 1]), float(xyxy[i, 2]), float(xyxy[i, 3])),
            (float(cxcywh[i, 0]), float(cxcywh[i, 1])),
        )
        for i in keep
    ]


def decode_yolov8(output: npt.NDArray[Any], spec: DecoderSpec) -> list[CameraDetection]:
    """``[1, 4 + nc, N]`` (Ultralytics YOLOv8 / YOLO11 export) -> detections after NMS."""
    out = np.asarray(output, np.float32)
    nc = len(spec.classes)
    if out.ndim == 3:
        out = out[0]
    if out.ndim != 2 or out.shape[0] != 4 + nc:
        raise DecoderError(f'yolov8: output {list(output.shape)} is not [1, {4 + nc}, N]')
    cls = np.argmax(out[4:], axis=0)
    scores = out[4:][cls, np.arange(out.shape[1])]
    return _boxes_out(out[:4].T, scores, cls, spec)


def _yolox_grid(spec: DecoderSpec, n: int, input_hw: tuple[int, int]) -> tuple[F32, F32]:
    grids, strides = [], []
    h, w = input_hw
    for s in spec.strides:
        gy, gx = np.meshgrid(np.arange(h // s), np.arange(w // s), indexing='ij')
        grids.append(np.stack([gx.ravel(), gy.ravel()], axis=1))
        strides.append(np.full((gx.size, 1), s))
    grid = np.concatenate(grids).astype(np.float32)
    stride = np.concatenate(strides).astype(np.float32)
    if len(grid) != n:
        raise DecoderError(
            f'yolox: {n} anchors, but strides {list(spec.strides)} on a {w}x{h} input give '
            f'{len(grid)}'
        )
    return grid, stride


def decode_yolox(
    output: npt.NDArray[Any], spec: DecoderSpec, input_hw: tuple[int, int]
) -> list[CameraDetection]:
    """``[1, N, 5 + nc]`` YOLOX output (decoded or raw) -> detections after NMS."""
    out = np.asarray(output, np.float32)
    nc = len(spec.classes)
    if out.ndim == 3:
        out = out[0]
    if out.ndim != 2 or out.shape[1] != 5 + nc:
        raise DecoderError(f'yolox: output {list(output.shape)} is not [1, N, {5 + nc}]')
    box = out[:, :4].copy()
    obj, cls_scores = out[:, 4], out[:, 5:]
    if not spec.decoded:
        grid, stride = _yolox_grid(spec, len(out), input_hw)
        box[:, :2] = (box[:, :2] + grid) * stride
        box[:, 2:] = np.exp(np.clip(box[:, 2:], -10.0, 10.0)) * stride
        obj, cls_scores = _sigmoid(obj), _sigmoid(cls_scores)
    cls = np.argmax(cls_scores, axis=1)
    scores = obj * cls_scores[np.arange(len(out)), cls]
    return _boxes_out(box, scores, cls, spec)


def decode(
    outputs: Sequence[npt.NDArray[Any]] | npt.NDArray[Any] | CenternetPeaks,
    spec: DecoderSpec,
    input_hw: tuple[int, int],
) -> list[CameraDetection]:
    """The model's outputs -> detections, by the head the spec names (a centernet head may come
    already reduced to its peaks: :class:`CenternetPeaks`)."""
    if isinstance(outputs, CenternetPeaks):
        if spec.type != 'centernet':
            raise DecoderError(f'centernet peaks given to a {spec.type} decoder')
        return decode_centernet_peaks(outputs.rows, spec)
    out = _output(outputs, spec)
    if spec.type == 'centernet':
        return decode_centernet(out, spec)
    if spec.type == 'yolov8':
        return decode_yolov8(out, spec)
    return decode_yolox(out, spec, input_hw)


@dataclasses.dataclass(frozen=True, slots=True)
class CameraGeometry:
    """Pinhole intrinsics in model-input pixels and the camera's mounting on base_link."""

    fx: float
    fy: float
    cx: float
    cy: float
    x: float  # camera position ahead of base_link [m]
    height: float  # above the road [m]
    y: float = 0.0  # left of base_link [m]
    d: tuple[float, ...] = ()  # plumb_bob k1 k2 p1 p2 k3 (camera_info D); empty or 0: pinhole
    yaw: float = 0.0  # relative to base_link [rad] (0: looking ahead; camera_block places it)
    pitch: float = 0.0  # about its y axis after the yaw [rad]: > 0 looks down


def camera_to_vehicle(
    det: CameraDetection, geo: CameraGeometry, half_length: float = 0.0
) -> tuple[float, float, float] | None:
    """(x, y, range) of the detection's centre in base_link [m]; None when not on the road ahead.

    With a regressed depth: along the ray of the keypoint. Without: the bottom edge of the box
    meets a flat road (``depth = fy * height / (v1 - cy)`` for a level camera; a pitched one's
    rays leave it tilted), then ``half_length`` further (the camera sees the near face of the
    object). The camera's yaw turns the result into base_link. A lens (``geo.d``) is undone
    first.
    """
    if any(geo.d):
        k = (geo.fx, geo.fy, geo.cx, geo.cy)
        (ku, kv), (bu, bv) = undistort_points(
            [det.keypoint, (0.5 * (det.box[0] + det.box[2]), det.box[3])], k, geo.d
        )
        det = dataclasses.replace(det, keypoint=(ku, kv), box=(bu, det.box[1], bu, bv))
    cp, sp = math.cos(geo.pitch), math.sin(geo.pitch)
    if math.isfinite(det.depth) and det.depth > 0.0:
        run = cp - sp * (det.keypoint[1] - geo.cy) / geo.fy  # level run per unit of the axis
        depth = det.depth * run  # level distance ahead of the camera
        u = det.keypoint[0]
    else:
        below = det.box[3] - geo.cy
        if sp * geo.fy + cp * below <= cp:
            return None  # at or above the horizon: no ground contact
        run = cp - sp * below / geo.fy
        depth = geo.height / (sp + cp * below / geo.fy) * run + half_length
        u = 0.5 * (det.box[0] + det.box[2])
    ahead, left = depth, -(u - geo.cx) * depth / (geo.fx * run)
    c, s = math.cos(geo.yaw), math.sin(geo.yaw)
    x, y = geo.x + c * ahead - s * left, geo.y + s * ahead + c * left
    return x, y, math.hypot(ahead, left)

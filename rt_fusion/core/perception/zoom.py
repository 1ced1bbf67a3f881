"""A second, zoomed look at the centre of the frame for far objects (two-scale inference).

A 1920×1080 frame resized to a 640-px network input loses two pixels of every three: a car at
70 m is 10 px wide there, and a one-pixel error of its box is metres of depth. The zoomed view
is the centre of the *frame* (around the horizon, where far objects are) at ``factor`` times the
scale of the full view, resized to the same input: at ``factor`` 1.5 a 1080p frame's central
1280×720 pixels, at 3 its central 640×360 at their native resolution.

The same network reads it without retraining, as far as geometry goes. A pinhole camera
zoomed by ``z`` images a point (X, Y, Z) where the unzoomed one images (X, Y, Z / z): the zoomed
view *is* a plausible frame of the same road with every depth divided by ``z`` (heights,
widths, lane widths and the horizon unchanged). So a detection in it is mapped back to the
full input's pixels and its regressed depth multiplied by ``z``; the lens (plumb_bob) then
applies as for any full-view detection, because the crop's pixels are the distorted frame's
pixels. Its pixels are another matter: the shipped detector was trained on 1280×720 renders
resized to its input (a 2× reduction), and a view at another reduction is new to it. Measured
on 80 held-out 1080p frames (per frame, 2 m gate, ``tools/train_detector.py --heldout …
--zoom Z``): zoom 1.5 (a 2× reduction, as in training) raised recall 0.68 -> 0.73 (50–80 m:
0.38 -> 0.51) for precision 0.63 -> 0.62; zoom 2 and 3 lowered precision (3: 0.63 -> 0.42–0.58)
and gained no recall. A zoom beyond 1.5 wants a detector trained on such views.

:func:`merge` keeps the zoomed detections lying wholly inside the crop (one touching its border
is a cut-off object, better seen by the full view) and drops the full view's detections of the
same objects; everything else the full view found stays.

ROS-free; the fusion node and the detector's held-out check use it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec, decode
from rt_fusion.core.perception.mirror import Mirrored, average, unmirror


class ZoomError(RtFusionError):
    """A zoom that the frame cannot give (``factor`` beyond the frame's native resolution)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Zoom:
    """The zoomed view of one frame size.

    Attributes:
        factor: scale of the zoomed view over the full one (input pixels per input pixel).
        crop: (x0, y0, x1, y1) of the frame's pixels the zoomed view is cut from.
        x0, y0: the crop's origin in the full view's input pixels.
    """

    factor: float
    crop: tuple[int, int, int, int]
    x0: float
    y0: float

    @classmethod
    def of(
        cls, factor: float, frame_hw: tuple[int, int], input_hw: tuple[int, int]
    ) -> Zoom | None:
        """The centre crop of a ``frame_hw`` frame zoomed ``factor`` times over the full view
        of an ``input_hw`` network; None for ``factor`` ≤ 1 (no zoomed view).

        Raises:
            ZoomError: the crop would be smaller than the input (upsampled: it adds no pixel).
        """
        if not math.isfinite(factor) or factor <= 1.0:
            return None
        fh, fw = frame_hw
        w, h = round(fw / factor), round(fh / factor)
        if w < input_hw[1] * 0.95 or h < input_hw[0] * 0.85:
            raise ZoomError(
                f'zoom {factor:g} of a {fw}x{fh} frame is a {w}x{h} crop, smaller than the '
                f'{input_hw[1]}x{input_hw[0]} network input (at most {fw / input_hw[1]:.2f})'
            )
        cx0, cy0 = (fw - w) // 2, (fh - h) // 2
        sx, sy = input_hw[1] / fw, input_hw[0] / fh
        # The factor actually cut (a whole number of pixels), in both axes alike.
        return cls(fw / w, (cx0, cy0, cx0 + w, cy0 + h), cx0 * sx, cy0 * sy)

    def to_full(self, d: CameraDetection) -> CameraDetection:
        """A zoomed view's detection in the full view's input pixels, its depth unzoomed."""
        z, x0, y0 = self.factor, self.x0, self.y0
        u0, v0, u1, v1 = d.box
        return dataclasses.replace(
            d,
            box=(u0 / z + x0, v0 / z + y0, u1 / z + x0, v1 / z + y0),
            keypoint=(d.keypoint[0] / z + x0, d.keypoint[1] / z + y0),
            depth=d.depth * z,
        )

    def inside(self, d: CameraDetection, input_hw: tuple[int, int], margin: float) -> bool:
        """Whether a zoomed view's detection (its own pixels) stays ``margin`` px off the
        crop's border."""
        u0, v0, u1, v1 = d.box
        h, w = input_hw
        return u0 >= margin and v0 >= margin and u1 <= w - margin and v1 <= h - margin


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0.0 or h <= 0.0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0.0 else 0.0


def merge(
    full: list[CameraDetection],
    zoomed: list[CameraDetection],
    zoom: Zoom,
    input_hw: tuple[int, int],
    *,
    margin_px: float = 3.0,
    same_iou: float = 0.3,
    min_depth_m: float = 30.0,
) -> list[CameraDetection]:
    """One frame's detections from its full and its zoomed view (``zoomed`` in the zoomed
    view's own input pixels, as decoded), in the full view's input pixels.

    A zoomed detection is kept when its box stays ``margin_px`` inside the crop and it is at
    least ``min_depth_m`` away (nearer objects are large in the full view already, and cut
    off or out of the network's experience in the zoomed one: on held-out 1080p renders at zoom
    1.5 keeping them lost 0–30 m recall, 0.95 -> 0.91); a full-view detection is dropped when a
    kept zoomed one covers the same object (box IoU ≥ ``same_iou``, or keypoints close:
    :func:`_same`). A detection without a regressed depth (a YOLO head) is kept."""
    kept = [
        z
        for z in (zoom.to_full(d) for d in zoomed if zoom.inside(d, input_hw, margin_px))
        if not z.depth < min_depth_m
    ]
    if not kept:
        return list(full)
    out = [d for d in full if not any(_same(d, k, same_iou) for k in kept)]
    return out + kept


def _same(a: CameraDetection, b: CameraDetection, same_iou: float) -> bool:
    """Whether two detections (full-view pixels) are one object: boxes overlapping by
    ``same_iou``, or keypoints within half the narrower box (far objects are a few pixels wide:
    their boxes from two scales rarely overlap by much) plus 2 px."""
    if _iou(a.box, b.box) >= same_iou:
        return True
    half_w = 0.5 * min(a.box[2] - a.box[0], b.box[2] - b.box[0]) + 2.0
    half_h = 0.5 * min(a.box[3] - a.box[1], b.box[3] - b.box[1]) + 2.0
    du, dv = abs(a.keypoint[0] - b.keypoint[0]), abs(a.keypoint[1] - b.keypoint[1])
    return du <= half_w and dv <= half_h


@dataclasses.dataclass(frozen=True, slots=True)
class Views:
    """A network's outputs for one frame's full view and its zoomed view."""

    full: Any
    zoomed: Any
    zoom: Zoom


def decode_views(out: Any, spec: DecoderSpec, input_hw: tuple[int, int]) -> list[CameraDetection]:
    """:func:`decode` of a network output, or of both :class:`Views` merged (:func:`merge`);
    of a :class:`~.mirror.Mirrored` output, its plain and its mirrored frame's detections so
    decoded, their depths averaged (:func:`.mirror.average`)."""
    if isinstance(out, Mirrored):
        plain = decode_views(out.plain, spec, input_hw)
        mirrored = unmirror(decode_views(out.mirrored, spec, input_hw), input_hw[1])
        return average(plain, mirrored)
    if isinstance(out, Views):
        full = decode(out.full, spec, input_hw)
        return merge(full, decode(out.zoomed, spec, input_hw), out.zoom, input_hw)
    return decode(out, spec, input_hw)

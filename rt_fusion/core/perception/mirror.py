"""A second look at each view through its mirror image (test-time flip), its depths averaged.

A monocular network's depth of a far object is a guess from a few pixels, and its error is not
all noise that the tracker averages over frames: it depends on the object's pixels and what
stands around it, so it persists from frame to frame (a post at 77 m read 70-73 m in four
frames running). The same frame mirrored left to right is another, equally plausible road to
the network (it was trained on both: ``tools/train_detector.py`` flips half its samples), and
its error on the mirrored object is partly independent of the first. Each detection is paired
with the mirrored view's detection of the same class nearest its keypoint (within half its box
width, at least ``min_match_px``); the pair's depth is the mean of the two, its score the
higher. A detection without a partner keeps its own values, and a mirrored detection without
one is dropped: adding them as objects of their own measured worse (more false positives than
objects found).

Off by default (the fusion node's ``mirror`` parameter): the gain did not hold. Camera-only,
2 m gate, recall: on the 7 development runs it was chosen on (``tools/track_replay.py``)
``stopped_car`` +0.025 and ``pedestrian_crossing`` -0.007; on 12 runs it was not chosen on,
off the graph, +0.007 and +0.014; through the graph on the fresh seeds 2601-2604
(``tools/evaluate.py --ablate camera_only``) -0.021 and +0.005, all four scenarios -0.001
(README, detector section). A run's recall moves by a few hundredths either way with it, the
mean by about nothing; it costs a second network pass per view (H200, zoom 3: camera path P99
1.00 -> 1.88 ms).

The runner mirrors each view's network input about its centre column
(:class:`rt_fusion.inference.runner.FrameRunner` ``mirror``): for the full view and for the
zoomed view (a crop centred on the frame) alike, the mirrored frame's view. :func:`unmirror`
maps the detections back (``u -> width - u``, heading negated). A principal point off the
image centre makes the mirrored view a slightly different camera; the network, trained on
centred ones, reads depth from what an object looks like, not from its column. ROS-free.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rt_fusion.core.perception.decoders import CameraDetection


@dataclasses.dataclass(frozen=True, slots=True)
class Mirrored:
    """A network's outputs for one frame (a head, or :class:`~.zoom.Views`) and for the same
    frame mirrored left to right."""

    plain: Any
    mirrored: Any


def unmirror(detections: list[CameraDetection], width: float) -> list[CameraDetection]:
    """Detections decoded from a mirrored input of ``width`` pixels, in the plain input's
    pixels (and heading)."""
    return [
        dataclasses.replace(
            d,
            box=(width - d.box[2], d.box[1], width - d.box[0], d.box[3]),
            keypoint=(width - d.keypoint[0], d.keypoint[1]),
            heading=-d.heading,
        )
        for d in detections
    ]


def average(
    plain: list[CameraDetection],
    mirrored: list[CameraDetection],
    *,
    min_match_px: float = 2.0,
    box_fraction: float = 0.5,
) -> list[CameraDetection]:
    """``plain`` with each detection's depth averaged with its mirrored partner's (``mirrored``
    already mapped back by :func:`unmirror`; see the module docstring). Partners are taken
    greedily in ``plain``'s order, each used once; depths that are not finite (a head
    without depth) are left as they are."""
    out: list[CameraDetection] = []
    used: set[int] = set()
    for d in plain:
        reach = max(min_match_px, box_fraction * (d.box[2] - d.box[0]))
        best, best_dist = -1, math.inf
        for j, m in enumerate(mirrored):
            if j in used or m.cls != d.cls:
                continue
            dist = math.hypot(m.keypoint[0] - d.keypoint[0], m.keypoint[1] - d.keypoint[1])
            if dist < reach and dist < best_dist:
                best, best_dist = j, dist
        if best < 0:
            out.append(d)
            continue
        used.add(best)
        m = mirrored[best]
        depth = 0.5 * (d.depth + m.depth) if math.isfinite(d.depth + m.depth) else d.depth
        out.append(dataclasses.replace(d, depth=depth, score=max(d.score, m.score)))
    return out

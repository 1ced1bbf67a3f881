"""Scoring the hearing hop by hop as the fusion node runs it: the streaming detector over a whole
signal (:class:`Streamer`) and the hops' labels (:func:`hop_labels`, :func:`score`). Used by the
held-out check of :mod:`rt_fusion.training.hearing` and by
:mod:`rt_fusion.training.hearing_real`.
"""

from __future__ import annotations

import time

import numpy as np

from rt_fusion.core.perception import hearing as hr
from rt_fusion.core.scenario import audio_data as ad
from rt_fusion.inference import hearing as hi

MEL = hr.MelConfig()
WIN_SAMPLES = (MEL.context_frames - 1) * round(MEL.hop_s * ad.RATE) + round(MEL.win_s * ad.RATE)
TAIL_S = 0.15  # a hop is labelled by the last 0.15 s before it


def hop_labels(
    n: int, hop: int, events: list[tuple[int, int, int]], ctx: int
) -> list[tuple[int, int]]:
    """(sample index of the hop end, label) for hops with a clear label (tools/train_hearing.py).

    ``events``: (first sample, end sample, class index) of each event sound.
    """
    tail = round(TAIL_S * ad.RATE)
    out = []
    for end in range(hop, n + 1, hop):
        label = 0
        clear = True
        for a, b, cls in events:
            if a <= end - tail and b >= end:
                label = cls
            elif a < end and b > end - ctx:
                clear = False
        if label or clear:
            out.append((end, label))
    return out


class Streamer:
    """The detector over a whole signal, hop by hop, timing each hop."""

    def __init__(
        self, model: hi.HearingModel, threads: int = 1, params: hr.HearingParams | None = None
    ) -> None:
        self.model = model
        self.params = params or hr.HearingParams()
        self.classify = hi.onnx_classifier(model, threads)
        self.costs_ns: list[int] = []

    def run(self, x: np.ndarray) -> list[hr.HopResult]:
        det = hr.AudioEventDetector(self.classify, ad.RATE, self.model.mel, self.params)
        block = det.hop_samples
        pcm = np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)
        out = []
        for k in range(0, len(pcm) - block + 1, block):
            t = time.perf_counter_ns()
            res = det.push(round(k * 1e9 / ad.RATE), pcm[k : k + block])
            self.costs_ns.append(time.perf_counter_ns() - t)
            out.extend(res)
        return out


def score(results: list[hr.HopResult], labels: list[tuple[int, int]]) -> tuple[int, int]:
    """(correct, total) of hops with a clear label."""
    by_end = {round(r.stamp_ns * ad.RATE / 1e9) + 1: r for r in results}
    ok = total = 0
    for end, label in labels:
        r = by_end.get(end)
        if r is None:
            continue
        total += 1
        ok += int(np.argmax(r.probabilities)) == label
    return ok, total

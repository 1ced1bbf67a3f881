"""The field's tracking metrics on a run's frames (``tools/evaluate.py``: ``field`` in each
run's metrics.json), computed by TrackEval (the HOTA authors'
reference code, ``trackeval`` on PyPI): HOTA with DetA, AssA and LocA, CLEAR MOT (MOTA, MOTP,
ID switches, mostly tracked/lost) and IDF1; an AMOTA-style recall sweep over the outputs'
existence probability; and the same per distance bin and per class.

Objects are points on the ground (base_link x, y), so the similarity of a truth object and an
output is their centre distance ``d`` turned into [0, 1]: ``max(0, 1 - d / (2 gate))``. CLEAR
MOT's and IDF1's match threshold of 0.5 is then ``d ≤ gate`` (2 m: the same pairs as
:func:`rt_fusion.core.evaluation.metrics.score_perception`), and HOTA's sweep of α from 0.05 to
0.95 spans 3.8 m down to 0.2 m.

What is scored is what :func:`score_perception` scores: truth objects in the region (range,
lateral band) and, ``visible_only``, seen by a sensor of the run. An output matched (within the
gate) to a truth object left out, or lying outside the region, is removed before TrackEval sees
it: it is neither a true nor a false positive (the "don't care" of the benchmarks).

AMOTA (nuScenes): for recall levels r = 0.1 … 1.0, the outputs above the highest existence
threshold whose recall reaches r give MOTAR = 1 − (IDSW + FP + FN − (1 − r) P) / (r P) in [0, 1]
(P: truth objects scored); a level no threshold reaches scores 0; AMOTA is the mean. Thresholds:
the outputs' own existence values (at most :data:`SWEEP_POINTS` of their quantiles).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rt_fusion.core.evaluation.metrics import (
    CLASS_CODES,
    EvalParams,
    Frame,
    OutputObject,
    TruthObject,
    _in_region,
    match,
)
from rt_fusion.core.evaluation.runs import every_sensor, rounded

SWEEP_POINTS = 25  # existence thresholds tried by the AMOTA sweep
RECALL_LEVELS = tuple(round(0.1 * k, 1) for k in range(1, 11))
# the classes scored one by one (those the scenarios and the detector know)
CLASSES = ('car', 'truck', 'pedestrian', 'bicycle', 'motorcycle')


def _trackeval() -> Any:
    """``trackeval.metrics``, imported quietly (the package prints a line about optional
    dataset dependencies it does not find; rt_fusion uses none of its datasets)."""
    with contextlib.redirect_stdout(io.StringIO()):
        import trackeval.metrics  # noqa: PLC0415

    return trackeval.metrics


def similarity(d: np.ndarray, gate_m: float) -> np.ndarray:
    """Centre distances [m] as TrackEval similarities: 1 at 0 m, 0.5 at the gate, 0 at 2×."""
    out: np.ndarray = np.clip(1.0 - np.asarray(d, np.float64) / (2.0 * gate_m), 0.0, 1.0)
    return out


def scored(
    frames: Sequence[Frame],
    params: EvalParams,
    visible_only: bool = True,
    keep_truth: Any = None,
    keep_output: Any = None,
    strict: bool = False,
) -> list[tuple[list[TruthObject], list[OutputObject]]]:
    """Per frame, the truth objects scored and the outputs that count (see the module
    docstring); ``keep_truth(obj)``, ``keep_output(out)``: narrower selections (a class, a
    distance bin): an output matched to truth they leave out is removed too, and an unmatched
    output counts where ``keep_output`` says (``strict``: a matched one too: a class)."""
    out: list[tuple[list[TruthObject], list[OutputObject]]] = []
    for frame in frames:
        outputs = list(frame.outputs or [])
        truth = list(frame.truth)
        pairs = match(truth, outputs, params.gate_m)
        matched = {j: i for i, j, _ in pairs}
        kept_t = [
            o
            for o in truth
            if _in_region(o.x, o.y, params)
            and (o.visible or not visible_only)
            and (keep_truth is None or keep_truth(o))
        ]
        ids = {id(o) for o in kept_t}
        kept_o = []
        for j, o in enumerate(outputs):
            i = matched.get(j)
            if i is not None:
                if id(truth[i]) in ids and (not strict or keep_output is None or keep_output(o)):
                    kept_o.append(o)  # a candidate true positive: TrackEval decides
                continue  # matched to truth not scored here: don't care
            if _in_region(o.x, o.y, params) and (keep_output is None or keep_output(o)):
                kept_o.append(o)
        out.append((kept_t, kept_o))
    return out


def sequence(
    frames: list[tuple[list[TruthObject], list[OutputObject]]], gate_m: float
) -> dict[str, Any]:
    """The frames as one TrackEval sequence (ids renumbered from 0, similarity per frame)."""
    gt_index: dict[int, int] = {}
    tr_index: dict[int, int] = {}
    gt_ids, tr_ids, sims = [], [], []
    for truth, outputs in frames:
        g = np.array([gt_index.setdefault(o.id, len(gt_index)) for o in truth], np.int64)
        t = np.array([tr_index.setdefault(o.id, len(tr_index)) for o in outputs], np.int64)
        if len(truth) and len(outputs):
            txy = np.array([(o.x, o.y) for o in truth])
            oxy = np.array([(o.x, o.y) for o in outputs])
            d = np.linalg.norm(txy[:, None, :] - oxy[None, :, :], axis=2)
        else:
            d = np.zeros((len(truth), len(outputs)))
        gt_ids.append(g)
        tr_ids.append(t)
        sims.append(similarity(d, gate_m))
    return {
        'num_timesteps': len(frames),
        'num_gt_ids': len(gt_index),
        'num_tracker_ids': len(tr_index),
        'num_gt_dets': sum(len(g) for g in gt_ids),
        'num_tracker_dets': sum(len(t) for t in tr_ids),
        'gt_ids': gt_ids,
        'tracker_ids': tr_ids,
        'similarity_scores': sims,
        'seq': 'run',
    }


def _mean(values: Any) -> float:
    return float(np.mean(values))


def clear_hota(
    frames: list[tuple[list[TruthObject], list[OutputObject]]], gate_m: float
) -> dict[str, Any]:
    """HOTA (averaged over α), DetA, AssA, LocA, HOTA at α 0.5 (``d ≤ gate``), CLEAR MOT and
    IDF1 of the frames, with the counts behind them."""
    tm = _trackeval()
    data = sequence(frames, gate_m)
    quiet = {'PRINT_CONFIG': False}
    with contextlib.redirect_stdout(io.StringIO()):
        hota = tm.HOTA().eval_sequence(data)
        clear = tm.CLEAR(quiet).eval_sequence(data)
        ident = tm.Identity(quiet).eval_sequence(data)
    gt = int(data['num_gt_dets'])
    half = int(np.argmin(np.abs(np.asarray(tm.HOTA().array_labels) - 0.5)))
    nan = math.nan
    return {
        'hota': _mean(hota['HOTA']) if gt else nan,
        'deta': _mean(hota['DetA']) if gt else nan,
        'assa': _mean(hota['AssA']) if gt else nan,
        'loca': _mean(hota['LocA']) if gt else nan,
        'hota_at_gate': float(hota['HOTA'][half]) if gt else nan,
        'mota': float(clear['MOTA']) if gt else nan,
        'motp': float(clear['MOTP']) if gt else nan,
        'idf1': float(ident['IDF1']) if gt else nan,
        'tp': int(clear['CLR_TP']),
        'fp': int(clear['CLR_FP']),
        'fn': int(clear['CLR_FN']),
        'id_switches': int(clear['IDSW']),
        'mostly_tracked': int(clear['MT']),
        'mostly_lost': int(clear['ML']),
        'gt': gt,
        'truth_objects': int(data['num_gt_ids']),
    }


def amota(
    frames: list[tuple[list[TruthObject], list[OutputObject]]], gate_m: float
) -> dict[str, Any]:
    """The AMOTA-style sweep (module docstring): AMOTA, and per recall level the MOTAR and the
    existence threshold that gave it (None: not reached)."""
    scores = np.array([o.score for _, outs in frames for o in outs], np.float64)
    gt = sum(len(t) for t, _ in frames)
    if not gt:
        return {'amota': math.nan, 'levels': {}}
    quantiles = np.linspace(0.0, 1.0, SWEEP_POINTS)
    thresholds = np.unique(np.quantile(scores, quantiles)) if scores.size else np.zeros(1)
    points = []  # (threshold, recall, idsw + fp + fn)
    for th in thresholds[::-1]:  # highest first
        kept = [(t, [o for o in outs if o.score >= th]) for t, outs in frames]
        c = _clear_counts(kept, gate_m)
        points.append((float(th), c['tp'] / gt, c['id_switches'] + c['fp'] + c['fn']))
    levels: dict[str, Any] = {}
    total = 0.0
    for r in RECALL_LEVELS:
        reached = [p for p in points if p[1] >= r]
        if not reached:
            levels[f'{r:.1f}'] = None
            continue
        th, _, errors = reached[0]  # the highest threshold that reaches r
        motar = min(1.0, max(0.0, 1.0 - (errors - (1.0 - r) * gt) / (r * gt)))
        levels[f'{r:.1f}'] = {'motar': motar, 'threshold': th}
        total += motar
    return {'amota': total / len(RECALL_LEVELS), 'levels': levels}


def _clear_counts(
    frames: list[tuple[list[TruthObject], list[OutputObject]]], gate_m: float
) -> dict[str, int]:
    tm = _trackeval()
    with contextlib.redirect_stdout(io.StringIO()):
        clear = tm.CLEAR({'PRINT_CONFIG': False}).eval_sequence(sequence(frames, gate_m))
    return {
        'tp': int(clear['CLR_TP']),
        'fp': int(clear['CLR_FP']),
        'fn': int(clear['CLR_FN']),
        'id_switches': int(clear['IDSW']),
    }


def field_metrics(
    frames: Sequence[Frame], params: EvalParams | None = None, visible_only: bool = True
) -> dict[str, Any]:
    """The run's HOTA, CLEAR MOT, IDF1 and AMOTA, then the same by distance bin (``by_range``,
    the truth's range; an output left unmatched counts in the bin of its own range) and by
    class (``by_class``: the classes some truth object has; outputs of that class only)."""
    p = params or EvalParams()
    p.validate()
    run = scored(frames, p, visible_only)
    out = clear_hota(run, p.gate_m)
    out.update(amota(run, p.gate_m))
    edges = p.range_bins_m
    by_range: dict[str, Any] = {}
    for lo, hi in itertools.pairwise(edges):

        def inside(o: Any, lo: float = lo, hi: float = hi) -> bool:
            return lo <= math.hypot(o.x, o.y) < hi

        sub = clear_hota(scored(frames, p, visible_only, inside, inside), p.gate_m)
        tp, fp, gt = sub['tp'], sub['fp'], sub['gt']
        by_range[f'{lo:g}-{hi:g}'] = {
            'hota': sub['hota'],
            'precision': tp / (tp + fp) if tp + fp else math.nan,
            'recall': tp / gt if gt else math.nan,
            'gt': gt,
        }
    out['by_range'] = by_range
    present = {o.cls for f in frames for o in f.truth}
    by_class: dict[str, Any] = {}
    for name in CLASSES:
        code = CLASS_CODES[name]
        if code not in present:
            continue

        def same(o: Any, code: int = code) -> bool:
            return bool(o.cls == code)

        sub = clear_hota(scored(frames, p, visible_only, same, same, strict=True), p.gate_m)
        by_class[name] = {k: sub[k] for k in ('hota', 'deta', 'assa', 'mota', 'gt')}
    out['by_class'] = by_class
    return out


def add_to(
    metrics: dict[str, Any],
    frames: Sequence[Frame],
    truth: dict[str, Any] | None,
    variant: str,
    params: EvalParams,
) -> None:
    """A scored run's ``field`` (:func:`field_metrics` on its frames, the objects its variant's
    sensors see) and, for an ablation, ``field_any`` (on the objects every sensor sees: the
    fused run's, so that the two compare); nothing without frames."""
    if not frames:
        return
    metrics['field'] = rounded(field_metrics(frames, params))
    if variant != 'fused' and truth is not None:
        any_view = every_sensor(truth, list(frames))
        metrics['field_any'] = rounded(field_metrics(any_view, params))

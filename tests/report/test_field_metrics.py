"""rt_fusion.report.field_metrics: HOTA, CLEAR MOT, IDF1 and AMOTA by TrackEval on hand-made
runs whose values are worked out by hand (the adapter, not TrackEval, is under test: the
similarity, what is scored, the ids, the sweep)."""

from __future__ import annotations

import math

import pytest

from rt_fusion.core.evaluation import EvalParams, Frame, OutputObject, TruthObject
from rt_fusion.report import field_metrics as field

pytest.importorskip('trackeval', reason='make setup installs it (requirements-nodeps.txt)')

CAR, PEDESTRIAN = 1, 3


def _run(outputs: list[list[OutputObject]], truth: list[list[TruthObject]] | None = None):  # type: ignore[no-untyped-def]
    truth = truth or [[TruthObject(1, 20.0 + t, 0.0, cls=CAR)] for t in range(len(outputs))]
    frames = [Frame(t, tr, out) for t, (tr, out) in enumerate(zip(truth, outputs, strict=True))]
    return field.field_metrics(frames, EvalParams())


def test_an_id_switch_halves_association_and_costs_one_in_mota() -> None:
    """One car, four frames, found exactly, by output 7 then output 8: every detection is right
    (DetA 1), each output id holds half of the car's frames (AssA 1/2), HOTA √(1 · 1/2); CLEAR
    MOT counts one switch in four (MOTA 3/4); IDF1: the best id covers 2 of 4 (1/2)."""
    outs = [[OutputObject(7 if t < 2 else 8, 20.0 + t, 0.0, cls=CAR)] for t in range(4)]
    m = _run(outs)
    assert m['deta'] == pytest.approx(1.0)
    assert m['assa'] == pytest.approx(0.5)
    assert m['hota'] == pytest.approx(math.sqrt(0.5))
    assert m['mota'] == pytest.approx(0.75) and m['id_switches'] == 1
    assert m['idf1'] == pytest.approx(0.5)
    assert (m['tp'], m['fp'], m['fn'], m['gt']) == (4, 0, 0, 4)


def test_a_false_alarm_beside_each_detection_halves_detection_accuracy() -> None:
    """One car tracked exactly for two frames and a false object 10 m away in each: DetA
    2 / (2 + 2), AssA 1, HOTA √(1/2); MOTA 1 − 2/2 = 0."""
    outs = [
        [OutputObject(1, 20.0 + t, 0.0, cls=CAR), OutputObject(2, 30.0 + t, 5.0, cls=CAR)]
        for t in range(2)
    ]
    m = _run(outs)
    assert m['deta'] == pytest.approx(0.5) and m['assa'] == pytest.approx(1.0)
    assert m['hota'] == pytest.approx(math.sqrt(0.5))
    assert m['mota'] == pytest.approx(0.0) and m['fp'] == 2


def test_distance_becomes_similarity_through_the_gate() -> None:
    """1 m off with a 2 m gate: similarity 0.75. HOTA's α from 0.05 to 0.95 (19 steps) match it
    up to 0.75 (15 of them, HOTA 1 each) and miss it above (HOTA 0): HOTA 15/19; CLEAR MOT's
    threshold 0.5 is the gate: a match (MOTA 1); 4.5 m off: nothing matches (MOTA −1: a miss
    and a false alarm)."""
    assert field.similarity([0.0, 2.0, 4.0, 9.0], 2.0).tolist() == [1.0, 0.5, 0.0, 0.0]
    m = _run([[OutputObject(1, 21.0, 0.0, cls=CAR)]])
    assert m['hota'] == pytest.approx(15 / 19)
    assert m['mota'] == pytest.approx(1.0) and m['hota_at_gate'] == pytest.approx(1.0)
    far = _run([[OutputObject(1, 24.5, 0.0, cls=CAR)]])
    assert far['mota'] == pytest.approx(-1.0) and far['hota'] == pytest.approx(0.0)


def test_outputs_on_objects_not_scored_are_neither_right_nor_wrong() -> None:
    """A car no sensor sees (visible false) and its output, and an output beyond the scored
    region (120 m): neither counts; the scored car alone decides."""
    hidden = TruthObject(2, 40.0, 3.0, cls=CAR, visible=False)
    truth = [[TruthObject(1, 20.0, 0.0, cls=CAR), hidden]]
    outs = [
        [
            OutputObject(1, 20.0, 0.0, cls=CAR),
            OutputObject(2, 40.0, 3.0, cls=CAR),
            OutputObject(3, 120.0, 0.0, cls=CAR),
        ]
    ]
    m = _run(outs, truth)
    assert (m['tp'], m['fp'], m['fn']) == (1, 0, 0) and m['hota'] == pytest.approx(1.0)


def test_a_confident_false_alarm_sinks_amota_and_a_doubtful_one_does_not() -> None:
    """Ten frames of one car, found with existence 0.9, and a false object in each. At 0.2 the
    sweep's highest threshold reaching every recall level leaves it out (AMOTA 1); at 0.95 no
    threshold keeps the car without it: at each level MOTAR 1 − (10 − (1 − r)·10)/(r·10) = 0."""

    def run(fa_score: float) -> dict:  # type: ignore[type-arg]
        outs = [
            [
                OutputObject(1, 20.0 + t, 0.0, cls=CAR, score=0.9),
                OutputObject(2, 40.0, -6.0, cls=CAR, score=fa_score),
            ]
            for t in range(10)
        ]
        return _run(outs)

    assert run(0.2)['amota'] == pytest.approx(1.0)
    assert run(0.95)['amota'] == pytest.approx(0.0)
    assert run(0.95)['levels']['1.0'] == {'motar': 0.0, 'threshold': pytest.approx(0.9)}


def test_bins_and_classes_score_their_own_objects() -> None:
    """A car at 20 m found, a pedestrian at 45 m missed, a false car at 70 m: 0–30 m all right,
    30–60 m recall 0, 60–100 m precision 0; the car class DetA 1/2 (one right, one false),
    the pedestrian class HOTA 0."""
    truth = [[TruthObject(1, 20.0, 0.0, cls=CAR), TruthObject(2, 45.0, 2.0, cls=PEDESTRIAN)]]
    outs = [[OutputObject(1, 20.0, 0.0, cls=CAR), OutputObject(3, 70.0, 0.0, cls=CAR)]]
    m = _run(outs, truth)
    near, mid, far = (m['by_range'][k] for k in ('0-30', '30-60', '60-100'))
    assert (near['precision'], near['recall'], near['hota']) == (1.0, 1.0, pytest.approx(1.0))
    assert mid['recall'] == 0.0 and mid['gt'] == 1
    assert far['precision'] == 0.0 and far['gt'] == 0
    assert m['by_class']['car']['deta'] == pytest.approx(0.5)
    assert m['by_class']['pedestrian']['hota'] == pytest.approx(0.0)
    assert set(m['by_class']) == {'car', 'pedestrian'}


def test_trackeval_s_clear_mot_agrees_with_ours_on_a_random_sequence() -> None:
    """The adapter's CLEAR MOT (TrackEval, similarity 0.5 at the gate) counts the same matches,
    misses, false alarms and switches as score_perception on a random run with id changes."""
    import numpy as np  # noqa: PLC0415

    from rt_fusion.core.evaluation import score_perception  # noqa: PLC0415

    rng = np.random.default_rng(11)
    pos = rng.uniform(10, 60, (6, 2)) * [1, 0.2]
    frames = []
    for t in range(60):
        pos += rng.normal(0, 0.2, pos.shape)
        truth = [
            TruthObject(i, float(p[0]), float(p[1]), cls=CAR)
            for i, p in enumerate(pos)
            if rng.random() > 0.1
        ]
        outs = [
            OutputObject(
                o.id + 10 + (100 if (t // 15) % 2 and o.id == 2 else 0),
                o.x + float(rng.normal(0, 0.5)),
                o.y + float(rng.normal(0, 0.5)),
                cls=CAR,
            )
            for o in truth
            if rng.random() < 0.85
        ]
        outs += [OutputObject(50 + k, float(rng.uniform(10, 60)), 0.0) for k in range(2)]
        frames.append(Frame(t, truth, outs))
    p = EvalParams(max_abs_y_m=1e3)
    ours = score_perception(frames, p)
    theirs = field.field_metrics(frames, p)
    assert (theirs['tp'], theirs['fp'], theirs['fn']) == (ours['tp'], ours['fp'], ours['fn'])
    assert theirs['id_switches'] == ours['id_switches'] > 0
    assert theirs['mota'] == pytest.approx(ours['mota'])


def test_an_ablation_is_also_scored_on_every_sensor_s_objects() -> None:
    """``add_to``: a camera-only run's ``field`` on the objects the camera sees, its
    ``field_any`` on every sensor's (the fused run's): a car only the radar sees, missed,
    lowers the second only; the fused run gets no ``field_any``."""

    def obj(oid: int, x: float, camera: bool) -> dict:  # type: ignore[type-arg]
        return {
            'id': oid, 'ego_x': x, 'ego_y': 0.0, 'vx': 0.0, 'vy': 0.0, 'class': 'car',
            'visible': {'camera': camera, 'radar': True},
        }  # fmt: skip

    truth = {
        'frames': [
            {
                'stamp_ns': t,
                'ego': {'yaw': 0.0},
                'objects': [obj(1, 20.0, True), obj(2, 40.0, False)],
            }
            for t in (1, 2)
        ]
    }
    from rt_fusion.core.evaluation import truth_frames  # noqa: PLC0415

    seen = truth_frames(truth, ('camera',))
    frames = [Frame(t, seen[t], [OutputObject(1, 20.0, 0.0, cls=CAR)]) for t in (1, 2)]
    metrics: dict = {}  # type: ignore[type-arg]
    field.add_to(metrics, frames, truth, 'camera_only', EvalParams())
    assert metrics['field']['deta'] == pytest.approx(1.0)
    assert metrics['field_any']['deta'] == pytest.approx(0.5)  # the radar's car, missed
    fused: dict = {}  # type: ignore[type-arg]
    field.add_to(fused, frames, truth, 'fused', EvalParams())
    assert 'field_any' not in fused

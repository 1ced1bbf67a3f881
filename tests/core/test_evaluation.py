"""rt_fusion.core.evaluation: every metric on hand-made outputs with hand-computed values."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.evaluation import (
    ActorTrack,
    EgoSample,
    EvalParams,
    Frame,
    OutputObject,
    Plan,
    TruthObject,
    box_corners,
    box_gap,
    latency_stages,
    match,
    score_driving,
    score_perception,
    score_planning,
    score_yield,
)

CAR = 1


def _truth(t: int) -> list[TruthObject]:
    """Car 1 from 20 m ahead, 1 m further each frame (vx 3 m/s); car 2 at 50 m, 3.5 m left."""
    return [
        TruthObject(1, 20.0 + t, 0.0, vx=3.0, cls=CAR),
        TruthObject(2, 50.0, 3.5, vx=0.0, cls=CAR),
    ]


def test_perfect_outputs_score_perfectly() -> None:
    frames = [
        Frame(
            t,
            _truth(t),
            [OutputObject(o.id + 100, o.x, o.y, o.vx, o.vy, o.cls) for o in _truth(t)],
        )
        for t in range(5)
    ]
    m = score_perception(frames)
    assert (m['tp'], m['fp'], m['fn'], m['id_switches'], m['fragmentations']) == (10, 0, 0, 0, 0)
    assert m['precision'] == m['recall'] == m['f1'] == m['mota'] == 1.0
    assert m['motp_m'] == m['pos_err_m'] == m['vel_err_mps'] == 0.0
    assert m['class_accuracy'] == 1.0
    assert m['recall_by_range']['0-30'] == m['recall_by_range']['30-60'] == 1.0
    assert math.isnan(m['recall_by_range']['60-100'])  # no truth there


def test_shifted_outputs_give_their_offsets_as_errors() -> None:
    # Every output 0.3 m forward and 0.4 m left of its truth (0.5 m), velocity 1 m/s too fast.
    frames = [
        Frame(
            t,
            _truth(t),
            [OutputObject(o.id, o.x + 0.3, o.y + 0.4, o.vx + 1.0, 0.0, o.cls) for o in _truth(t)],
        )
        for t in range(4)
    ]
    m = score_perception(frames)
    assert m['tp'] == 8 and m['fp'] == 0
    assert m['pos_err_m'] == pytest.approx(0.5)
    assert m['pos_err_p95_m'] == pytest.approx(0.5)
    assert m['motp_m'] == pytest.approx(0.5)
    assert m['vel_err_mps'] == pytest.approx(1.0)


def test_outputs_beyond_the_gate_are_a_miss_and_a_false_alarm() -> None:
    frames = [Frame(0, [TruthObject(1, 20.0, 0.0)], [OutputObject(7, 22.5, 0.0)])]
    m = score_perception(frames, EvalParams(gate_m=2.0))
    assert (m['tp'], m['fp'], m['fn']) == (0, 1, 1)
    assert m['precision'] == 0.0 and m['recall'] == 0.0
    assert m['mota'] == pytest.approx(1 - 2 / 1)  # (1 FN + 1 FP) / 1 GT
    m = score_perception(frames, EvalParams(gate_m=3.0))
    assert (m['tp'], m['fp'], m['fn']) == (1, 0, 0)


def test_a_dropped_object_counts_one_miss_and_one_fragmentation() -> None:
    # Truth 1 tracked in frames 0, 1, missed in 2, tracked again in 3: one fragmentation.
    frames = []
    for t in range(4):
        outs = [OutputObject(o.id, o.x, o.y, o.vx, o.vy, o.cls) for o in _truth(t)]
        if t == 2:
            outs = outs[1:]
        frames.append(Frame(t, _truth(t), outs))
    m = score_perception(frames)
    assert (m['tp'], m['fn'], m['fp'], m['id_switches'], m['fragmentations']) == (7, 1, 0, 0, 1)
    assert m['recall'] == pytest.approx(7 / 8)
    assert m['mota'] == pytest.approx(1 - 1 / 8)


def test_a_swapped_id_is_one_id_switch_and_not_a_miss() -> None:
    # Truth 1 is output id 10 in frames 0-1, then id 11 in frames 2-3: one switch.
    frames = []
    for t in range(4):
        a, b = _truth(t)
        out_id = 10 if t < 2 else 11
        frames.append(
            Frame(t, [a, b], [OutputObject(out_id, a.x, a.y, a.vx), OutputObject(20, b.x, b.y)])
        )
    m = score_perception(frames)
    assert (m['tp'], m['fn'], m['fp'], m['id_switches']) == (8, 0, 0, 1)
    assert m['mota'] == pytest.approx(1 - 1 / 8)


def test_a_false_alarm_inside_the_region_counts_and_one_outside_does_not() -> None:
    truth = [TruthObject(1, 20.0, 0.0)]
    outs = [OutputObject(1, 20.0, 0.0), OutputObject(2, 40.0, -2.0), OutputObject(3, 150.0, 0.0)]
    m = score_perception([Frame(0, truth, outs), Frame(1, truth, outs[:1])])
    assert (m['tp'], m['fp'], m['fn']) == (2, 1, 0)
    assert m['fp_per_frame'] == pytest.approx(0.5)
    assert m['precision'] == pytest.approx(2 / 3)


def test_hidden_and_far_truth_is_not_scored_in_the_visible_view() -> None:
    truth = [
        TruthObject(1, 20.0, 0.0),
        TruthObject(2, 35.0, 0.0, visible=False),  # behind truth 1
        TruthObject(3, 95.0, 0.0),  # beyond max_range_m
    ]
    outs = [OutputObject(1, 20.0, 0.0), OutputObject(3, 95.0, 0.0)]  # matched to far: ignored
    visible = score_perception([Frame(0, truth, outs)])
    assert (visible['gt'], visible['tp'], visible['fn'], visible['fp']) == (1, 1, 0, 0)
    everything = score_perception([Frame(0, truth, outs)], visible_only=False)
    assert (everything['gt'], everything['tp'], everything['fn']) == (2, 1, 1)


def test_class_accuracy_and_recall_by_range() -> None:
    truth = [
        TruthObject(1, 10.0, 0.0, cls=1),
        TruthObject(2, 45.0, 0.0, cls=3),
        TruthObject(3, 70.0, 0.0, cls=2),
    ]
    outs = [
        OutputObject(1, 10.0, 0.0, cls=1),
        OutputObject(2, 45.0, 0.0, cls=1),
        OutputObject(4, 70.0, 0.0, cls=0),
    ]
    m = score_perception([Frame(0, truth, outs)])
    assert m['class_accuracy'] == pytest.approx(1 / 2)  # class 0 (unknown) is not judged
    m = score_perception([Frame(0, truth, outs[:2])])
    assert m['recall_by_range'] == {'0-30': 1.0, '30-60': 1.0, '60-100': 0.0}


def test_a_frame_without_output_counts_its_truth_as_missed() -> None:
    m = score_perception([Frame(0, _truth(0), None), Frame(1, _truth(1), [])])
    assert (m['frames'], m['frames_with_output'], m['fn']) == (2, 1, 4)


def test_matching_keeps_the_previous_correspondence_within_the_gate() -> None:
    truth = [TruthObject(1, 10.0, 0.0)]
    outs = [OutputObject(5, 10.9, 0.0), OutputObject(6, 10.1, 0.0)]
    assert match(truth, outs, 2.0) == [(0, 1, pytest.approx(0.1))]
    assert match(truth, outs, 2.0, keep={1: 5}) == [(0, 0, pytest.approx(0.9))]


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ParameterError, match='max_range_m'):
        score_perception([], EvalParams(min_range_m=50.0, max_range_m=10.0))
    with pytest.raises(ParameterError, match='range_bins_m'):
        score_perception([], EvalParams(range_bins_m=(0.0, 50.0, 40.0)))


def test_clear_mot_agrees_with_motmetrics_on_a_random_sequence() -> None:
    mm = pytest.importorskip('motmetrics')
    rng = np.random.default_rng(3)
    acc = mm.MOTAccumulator(auto_id=True)
    frames = []
    ids = np.arange(6)
    pos = rng.uniform(10, 60, (6, 2)) * [1, 0.2]
    for t in range(60):
        pos += rng.normal(0, 0.2, pos.shape)
        truth = [
            TruthObject(int(i), float(p[0]), float(p[1]))
            for i, p in zip(ids, pos, strict=True)
            if rng.random() > 0.1
        ]
        outs = []
        for obj in truth:
            if rng.random() < 0.85:
                swap = (
                    100 if (t // 15) % 2 and obj.id == 2 else 0
                )  # id 2 changes id every 15 frames
                outs.append(
                    OutputObject(
                        obj.id + 10 + swap, obj.x + rng.normal(0, 0.5), obj.y + rng.normal(0, 0.5)
                    )
                )
        outs += [
            OutputObject(50 + k, float(rng.uniform(10, 60)), 0.0)
            for k in range(int(rng.poisson(0.3)))
        ]
        frames.append(Frame(t, truth, outs))
        t_xy = np.array([[o.x, o.y] for o in truth]).reshape(-1, 2)
        o_xy = np.array([[o.x, o.y] for o in outs]).reshape(-1, 2)
        dist = mm.distances.norm2squared_matrix(t_xy, o_xy, max_d2=2.0**2)
        acc.update([o.id for o in truth], [o.id for o in outs], np.sqrt(dist))
    ours = score_perception(frames, EvalParams(min_range_m=0.0, max_range_m=1e3, max_abs_y_m=1e3))
    theirs = (
        mm.metrics.create()
        .compute(
            acc,
            metrics=[
                'num_false_positives',
                'num_misses',
                'num_switches',
                'num_fragmentations',
                'mota',
                'motp',
            ],
            name='run',
        )
        .iloc[0]
    )
    assert ours['fp'] == theirs['num_false_positives']
    assert ours['fn'] == theirs['num_misses']
    assert ours['id_switches'] == theirs['num_switches'] > 0
    assert ours['fragmentations'] == theirs['num_fragmentations'] > 0
    assert ours['mota'] == pytest.approx(theirs['mota'])
    assert ours['motp_m'] == pytest.approx(theirs['motp'])


def test_latency_stages_are_consecutive_differences() -> None:
    # Three outputs; stamps in ns. A zero stamp means "not recorded" and is left out.
    stages = latency_stages(
        {
            'capture': [1, 1, 1, 1],
            'inputs': [2e6 + 1, 4e6 + 1, 6e6 + 1, 0],
            'published': [3e6 + 1, 5e6 + 1, 9e6 + 1, 7e6],
        }
    )
    assert stages['capture->inputs']['p50_ms'] == pytest.approx(4.0)
    assert stages['capture->inputs']['n'] == 3
    assert stages['inputs->published']['max_ms'] == pytest.approx(3.0)
    assert stages['total']['max_ms'] == pytest.approx(9.0)
    assert stages['total']['n'] == 4


def test_box_gap_between_oriented_rectangles() -> None:
    a = box_corners(0.0, 0.0, 0.0, 4.0, 2.0)  # x in [-2, 2], y in [-1, 1]
    assert box_gap(a, box_corners(7.0, 0.0, 0.0, 4.0, 2.0)) == pytest.approx(3.0)
    assert box_gap(a, box_corners(3.0, 0.0, 0.0, 4.0, 2.0)) == 0.0  # overlap
    # A square turned 45° whose corner points at a: its corner is at x = 5 - sqrt(2).
    b = box_corners(5.0, 0.0, math.pi / 4, 2.0, 2.0)
    assert box_gap(a, b) == pytest.approx(5.0 - math.sqrt(2) - 2.0)


def test_planning_gap_collision_and_comfort() -> None:
    t = np.linspace(0.0, 3.0, 31)
    actor = ActorTrack(
        1,
        np.array([0.0, 10.0]),
        np.array([30.0, 30.0]),
        np.array([0.0, 0.0]),
        np.zeros(2),
        4.0,
        2.0,
    )
    # Ego plan at 10 m/s from x=0: the front (x + 2) meets the actor's rear (28) at t = 2.6 s.
    crash = Plan(0.0, t, 10.0 * t, 0 * t, 0 * t, np.zeros_like(t))
    # Braking plan: v = 10 - 4 t until stopped at 2.5 s (12.5 m): gap 28 - 14.5 = 13.5 m.
    s = np.where(t < 2.5, 10 * t - 2 * t**2, 12.5)
    acc = np.where(t < 2.5, -4.0, 0.0)
    brake = Plan(0.0, t, s, 0 * t, 0 * t, acc, emergency=True)
    m = score_planning([crash], [actor], ego_size=(4.0, 2.0))
    assert m['collisions'] == 1 and m['min_gap_m'] == 0.0
    assert m['min_ttc_s'] == pytest.approx(2.6, abs=0.11)
    m = score_planning([brake], [actor], ego_size=(4.0, 2.0))
    assert m['collisions'] == 0 and m['min_gap_m'] == pytest.approx(13.5)
    assert m['max_abs_accel_mps2'] == 4.0
    assert m['max_abs_jerk_mps3'] == pytest.approx(40.0)  # -4 -> 0 within one 0.1 s step
    assert m['emergency_stops'] == 1


def test_a_collision_counts_as_seen_only_when_a_sensor_had_seen_the_actor_at_the_plan() -> None:
    """The same crash planned at t0 = 0 and t0 = 1 against an actor first seen at 0.5 s: the
    first plan's collision is the sensors' blind spot, the second one the planner's share."""
    t = np.linspace(0.0, 3.0, 31)
    actor = ActorTrack(
        7,
        np.array([0.0, 10.0]),
        np.array([30.0, 40.0]),  # 1 m/s ahead
        np.zeros(2),
        np.zeros(2),
        4.0,
        2.0,
        kind='pedestrian',
        first_seen=0.5,
    )
    early = Plan(0.0, t, 10.0 * t, 0 * t, 0 * t, np.zeros_like(t))
    late = Plan(1.0, t, 1.0 + 11.0 * t, 0 * t, 0 * t, np.zeros_like(t))
    m = score_planning([early, late], [actor], ego_size=(4.0, 2.0))
    assert m['collisions'] == 2
    assert m['collisions_seen'] == 1 and m['collisions_unseen'] == 1
    assert m['collision_actors'] == {
        '7': {'kind': 'pedestrian', 'plans': 2, 'seen': 1, 'first_plan_s': 0.0}
    }
    never = dataclasses.replace(actor, first_seen=math.inf)
    m = score_planning([early, late], [never], ego_size=(4.0, 2.0))
    assert (m['collisions'], m['collisions_seen']) == (2, 0)


def test_driving_gap_collisions_and_stop_of_the_driven_ego() -> None:
    """The closed-loop score: an ego at 10 m/s braking at 4 m/s² from t = 0 towards an actor
    whose rear is at 28 m stops after 12.5 m (gap 28 - 14.5 = 13.5 m); one that does not brake
    overlaps it from t = 2.6 s (front at 2 + 10 t)."""
    actor = ActorTrack(
        1, np.array([0.0, 10.0]), np.array([30.0, 30.0]), np.zeros(2), np.zeros(2), 4.0, 2.0
    )
    ts = np.linspace(0.0, 4.0, 401)
    brake = [
        EgoSample(t, 10 * t - 2 * t * t if t < 2.5 else 12.5, 0.0, 0.0, max(0.0, 10 - 4 * t))
        for t in ts
    ]
    m = score_driving(brake, [actor], ego_size=(4.0, 2.0))
    assert m['collision_samples'] == 0 and math.isnan(m['first_collision_s'])
    assert m['min_gap_m'] == pytest.approx(13.5)
    assert m['max_decel_mps2'] == pytest.approx(4.0, abs=0.1)
    assert m['stopped'] and m['final_speed_mps'] == 0.0
    crash = [EgoSample(t, 10 * t, 0.0, 0.0, 10.0) for t in ts]
    m = score_driving(crash, [actor], ego_size=(4.0, 2.0))
    assert m['min_gap_m'] == 0.0 and m['first_collision_s'] == pytest.approx(2.6, abs=0.011)
    # Overlapping while the front is between 26 and 34 m: 2.6 s to 3.4 s, 81 samples.
    assert m['collision_samples'] == 81
    assert not m['stopped'] and m['max_decel_mps2'] == pytest.approx(0.0, abs=1e-9)


def test_yield_is_the_egos_speed_and_offset_while_a_siren_is_near() -> None:
    ego = [
        EgoSample(t / 10, t, 0.0, 0.0, 10.0 if t < 20 else 6.0, 0.0 if t < 20 else -0.8, t >= 20)
        for t in range(40)
    ]
    y = score_yield(ego)
    assert y['samples'] == 20 and y['from_s'] == 2.0
    assert y['mean_speed_mps'] == 6.0 and y['min_speed_mps'] == 6.0
    assert y['mean_offset_m'] == pytest.approx(-0.8)
    assert y['speed_before_mps'] == 10.0
    assert score_yield(ego[:20]) == {'samples': 0}

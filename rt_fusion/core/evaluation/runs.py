"""One evaluation run scored, its headline numbers, means over runs, and the regression gate.

A run's records (:class:`rt_fusion.ros.harness.recorder.Recorder`'s): ``objects`` (dicts with
``stamp_ns``, ``inputs_complete_ns``, ``published_ns`` and ``objects`` as (id, x, y, vx, vy,
class) tuples), ``plans`` (``stamp_ns``, ``status``, ``points`` as (t, x, y, yaw, v, a)),
``odometry`` (stamp → x, y, yaw), and the graph's own counts (``replayed``, ``ack_timeouts``;
closed loop: ``plan_timeouts``, ``plans_applied``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.core.evaluation import metrics as ev
from rt_fusion.core.evaluation.truth import actor_tracks, ego_samples, plans_in_world
from rt_fusion.core.scenario.sensors import RIG

VARIANTS = ('fused', 'radar_only', 'camera_only', 'radar_tracks')
#: A surround rig's per-camera ablations (``--cameras 4``): the fused graph without that camera
#: (neither replayed nor fused), scored on what the whole rig sees: its share of the recall.
RIG_ABLATIONS = ('no_left', 'no_right', 'no_rear')
#: The sensors whose sight makes a truth object count as ``visible`` in each variant: a
#: single-modality ablation is scored on what its one sensor can see (an object only the radar
#: sees is not a camera-only miss); ``visible_any`` in metrics.json keeps every sensor's view.
SENSORS = {
    'fused': ('camera', 'radar'),
    'radar_only': ('radar',),
    'camera_only': ('camera',),
    'radar_tracks': ('camera', 'radar'),  # fused, the radar as radar_msgs/RadarTracks
}
HIGHER_IS_BETTER = (
    'precision',
    'recall',
    'f1',
    'mota',
    'hota',
    'assa',
    'amota',
    'idf1',
    'class_accuracy',
    'emergency_recognised',
    'min_gap_m',
    'ego_min_gap_m',
)
LOWER_IS_BETTER = (
    'pos_err_m',
    'vel_err_mps',
    'id_switches',
    'fp_per_frame',
    'collisions',
    'collisions_seen',
    'emergency_stops',
    'ego_collisions',
)
RESULT_KEYS = (
    'precision',
    'recall',
    'mota',
    'hota',
    'amota',
    'pos_err_m',
    'vel_err_mps',
    'id_switches',
    'fp_per_frame',
    'collisions',
    'collisions_seen',
    'min_gap_m',
)
# Closed loop: the ego as the planner drove it (samples where its box overlapped an actor's,
# the smallest gap over the run, and whether it ended stopped).
CLOSED_LOOP_KEYS = ('ego_collisions', 'ego_min_gap_m', 'ego_final_speed_mps')
COUNTS = (
    'id_switches',
    'collisions',
    'collisions_seen',
    'emergency_stops',
    'ego_collisions',
    'frames',
    'frames_fused',
)
DEFAULT_TOLERANCES = {
    'precision': 0.02,
    'recall': 0.02,
    'mota': 0.03,
    'hota': 0.03,
    'amota': 0.05,
    'pos_err_m': 0.05,
    'vel_err_mps': 0.1,
    'id_switches': 1,
    'fp_per_frame': 0.02,
    'collisions': 0,
    'collisions_seen': 0,
    'min_gap_m': 0.3,
    'ego_collisions': 0,
    'ego_min_gap_m': 0.3,
}


def rounded(obj: Any) -> Any:
    """Floats to 6 decimals (NaN as None), through dicts and lists: stable JSON."""
    if isinstance(obj, float):
        return None if math.isnan(obj) else (obj if math.isinf(obj) else round(obj, 6))
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v) for v in obj]
    return obj


def run_name(scenario: str, seed: int, seconds: float) -> str:
    """``cut_in-s5-6s``: the name of a run's folder and its baseline key."""
    return f'{scenario}-s{seed}-{seconds:g}s'


def score(
    rec: dict[str, Any],
    truth: dict[str, Any] | None,
    frames_in: int,
    params: ev.EvalParams,
    sensors: tuple[str, ...] = SENSORS['fused'],
) -> tuple[dict[str, Any], dict[str, Any], list[ev.Frame]]:
    """(metrics, timing, frames) of one run of ``frames_in`` camera frames; ``visible`` counts
    the objects that one of ``sensors`` sees (the variant's; a surround rig's other cameras
    with ``camera``), ``visible_any`` those that any sensor sees; ``by_camera``: the recall on
    the objects each camera sees (``front``, then the rig's others)."""
    rig = RIG[1 : int(truth.get('cameras', 1))] if truth is not None else ()
    if 'camera' in sensors:
        sensors = (*sensors, *rig_sensors(truth))
    fused_stamps = [o['stamp_ns'] for o in rec['objects']]
    metrics: dict[str, Any] = {
        'frames': frames_in,
        'frames_fused': len(set(fused_stamps)),
        'duplicates': len(fused_stamps) - len(set(fused_stamps)),
        'replayed': rec['replayed'],
        'ack_timeouts': rec['ack_timeouts'],
        'has_truth': truth is not None,
    }
    timing = {
        'fusion_node': ev.latency_stages(
            {
                'inputs_complete': [o['inputs_complete_ns'] for o in rec['objects']],
                'published': [o['published_ns'] for o in rec['objects']],
            }
        ),
        'note': 'lock-step replay: each input waits for the previous acknowledgement; these are '
        'per-stage costs, not live latencies (tools/demo.py, tools/bench_*.py measure those)',
    }
    frames: list[ev.Frame] = []
    if truth is None:
        metrics['note'] = 'no ground truth beside this bag: consistency only'
        return metrics, timing, frames
    by_stamp = {o['stamp_ns']: o for o in rec['objects']}
    ablation = tuple(sensors) != SENSORS['fused']
    any_sensor: list[ev.Frame] = []
    everything = ev.truth_frames(truth, SENSORS['fused'] + rig_sensors(truth))
    everything = everything if ablation else {}
    for stamp, objs in sorted(ev.truth_frames(truth, sensors).items()):
        got = by_stamp.get(stamp)
        outputs = [ev.OutputObject(*o) for o in got['objects']] if got is not None else None
        frames.append(ev.Frame(stamp, objs, outputs))
        if ablation:
            any_sensor.append(ev.Frame(stamp, everything[stamp], outputs))
    metrics['frames_missing'] = [k for k, f in enumerate(frames) if f.outputs is None]
    metrics['visible_to'] = list(sensors)
    metrics['visible'] = ev.score_perception(frames, params, visible_only=True)
    if ablation:
        metrics['visible_any'] = ev.score_perception(any_sensor, params, visible_only=True)
    metrics['all'] = ev.score_perception(frames, params, visible_only=False)
    if rig and 'camera' in sensors:
        metrics['by_camera'] = {}
        for name in ('front', *rig):
            seen = ev.truth_frames(truth, ('camera' if name == 'front' else f'camera_{name}',))
            each = [ev.Frame(f.stamp_ns, seen[f.stamp_ns], f.outputs) for f in frames]
            sc = ev.score_perception(each, params, visible_only=True)
            metrics['by_camera'][name] = {'recall': sc['recall'], 'gt': sc['gt']}
    plans = plans_in_world(rec['plans'], rec['odometry'], truth)
    metrics['planning'] = ev.score_planning(plans, actor_tracks(truth))
    metrics['planning']['trajectories'] = len(rec['plans'])
    if 'plan_timeouts' in rec:  # closed loop: the ego as the plans drove it
        ego = ego_samples(truth)
        metrics['driving'] = ev.score_driving(ego, actor_tracks(truth))
        metrics['driving']['yield'] = ev.score_yield(ego)
        metrics['driving']['plan_timeouts'] = rec['plan_timeouts']
        metrics['driving']['plans_applied'] = rec['plans_applied']
    return rounded(metrics), timing, frames


def rig_sensors(truth: dict[str, Any] | None) -> tuple[str, ...]:
    """The truth's names of a surround rig's other cameras (``camera_<name>``; none: one)."""
    if truth is None:
        return ()
    return tuple(f'camera_{n}' for n in RIG[1 : int(truth.get('cameras', 1))])


def every_sensor(truth: dict[str, Any], frames: list[ev.Frame]) -> list[ev.Frame]:
    """``frames`` (a run's, scored on its variant's sensors) with the truth every sensor sees
    (a surround rig's cameras too): an ablation judged on the fused run's objects."""
    seen = ev.truth_frames(truth, SENSORS['fused'] + rig_sensors(truth))
    return [ev.Frame(f.stamp_ns, seen[f.stamp_ns], f.outputs) for f in frames]


def score_restamped(
    truth: dict[str, Any], fused: list[dict[str, Any]], params: ev.EvalParams | None = None
) -> dict[str, Any] | None:
    """A live run's fused objects scored on the objects a sensor sees, over the frames it fused.

    A live replay moves the stamps onto the host clock, so an output's stamp is its frame's in
    the truth plus one offset: the one that puts the most output stamps on truth stamps. None
    when nothing was fused or the stamps do not line up (no score rather than a wrong one)."""
    if not fused:
        return None
    by_truth = ev.truth_frames(truth)
    stamps = set(by_truth)
    got = sorted({m['stamp_ns'] for m in fused})
    candidates = {g - t for g in got[:5] for t in stamps}
    offset = max(candidates, key=lambda off: sum(g - off in stamps for g in got))
    by_stamp = {m['stamp_ns'] - offset: m for m in fused}
    frames = [
        ev.Frame(t, objs, [ev.OutputObject(*o) for o in by_stamp[t]['objects']])
        for t, objs in sorted(by_truth.items())
        if t in by_stamp
    ]
    if len(frames) < 0.9 * len(by_stamp):
        return None
    metrics = ev.score_perception(frames, params, visible_only=True)
    metrics['frames_scored'] = len(frames)
    return metrics


def flat(metrics: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of one run (the RESULT line's and the baseline's keys)."""
    vis = metrics.get('visible', {})
    fld = metrics.get('field', {})  # TrackEval's (report/field_metrics.py)
    plan = metrics.get('planning', {})
    drive = metrics.get('driving', {})
    return {
        'precision': vis.get('precision'),
        'recall': vis.get('recall'),
        'f1': vis.get('f1'),
        'mota': vis.get('mota'),
        'hota': fld.get('hota'),
        'assa': fld.get('assa'),
        'amota': fld.get('amota'),
        'idf1': fld.get('idf1'),
        'pos_err_m': vis.get('pos_err_m'),
        'vel_err_mps': vis.get('vel_err_mps'),
        'id_switches': vis.get('id_switches'),
        'fp_per_frame': vis.get('fp_per_frame'),
        'class_accuracy': vis.get('class_accuracy'),
        'emergency_recognised': vis.get('emergency_recognised'),
        'collisions': plan.get('collisions'),
        'collisions_seen': plan.get('collisions_seen'),
        'min_gap_m': plan.get('min_gap_m'),
        'emergency_stops': plan.get('emergency_stops'),
        'ego_collisions': drive.get('collision_samples'),
        'ego_min_gap_m': drive.get('min_gap_m'),
        'ego_final_speed_mps': drive.get('final_speed_mps'),
        'frames': metrics.get('frames'),
        'frames_fused': metrics.get('frames_fused'),
    }


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over runs (sums for counts, minima for gaps)."""
    out: dict[str, Any] = {}
    for key in flat({}):
        values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        if key == 'emergency_recognised':  # only runs with an emergency vehicle in view count
            values = [v for v in values if not math.isnan(v)]
        if not values:
            out[key] = None
        elif key in COUNTS:
            out[key] = int(sum(values))
        elif key in ('min_gap_m', 'ego_min_gap_m'):
            out[key] = round(float(min(values)), 3)
        else:
            out[key] = round(float(np.mean(values)), 4)
    return out


def compare(rows: dict[str, dict[str, Any]], baseline: dict[str, Any]) -> list[str]:
    """Every metric that regressed against the baseline beyond its tolerance, and every run
    without a baseline entry (a run nobody checks is a gate that cannot fail)."""
    tol = baseline.get('tolerances', {})
    regressions = [
        f'{key}: no baseline entry (store one with --write-baseline)'
        for key in sorted(set(rows) - set(baseline.get('runs', {})))
    ]
    for key, base in baseline.get('runs', {}).items():
        got = rows.get(key)
        if got is None:
            continue
        for metric, want in base.items():
            have = got.get(metric)
            if want is None or have is None:
                if want is not None:
                    regressions.append(f'{key}: {metric} missing (baseline {want})')
                continue
            t = float(tol.get(metric, 0.0))
            if metric in HIGHER_IS_BETTER and have < want - t:
                regressions.append(f'{key}: {metric} {have} < baseline {want} - {t}')
            elif metric in LOWER_IS_BETTER and have > want + t:
                regressions.append(f'{key}: {metric} {have} > baseline {want} + {t}')
    return regressions


def updated_baseline(
    old: dict[str, Any] | None, rows: dict[str, dict[str, Any]], closed_loop: bool
) -> dict[str, Any]:
    """``old`` with these runs' entries replaced (its tolerances kept, else the defaults)."""
    keep = RESULT_KEYS + (CLOSED_LOOP_KEYS[:2] if closed_loop else ())
    runs = dict((old or {}).get('runs', {}))
    runs.update({k: {m: r[m] for m in keep} for k, r in rows.items()})
    return {'tolerances': (old or {}).get('tolerances') or DEFAULT_TOLERANCES, 'runs': runs}


def result_fields(fused: dict[str, Any], closed_loop: bool) -> dict[str, str]:
    """The RESULT line's fields of the fused runs' aggregate."""

    def fmt(v: Any) -> str:
        return 'nan' if v is None else (f'{v:.4g}' if isinstance(v, float) else str(v))

    keys = (*RESULT_KEYS, *(CLOSED_LOOP_KEYS if closed_loop else ()), 'frames', 'frames_fused')
    return {k: fmt(fused.get(k)) for k in keys}


def write_run(out: Path, rec: dict[str, Any], metrics: dict[str, Any], timing: Any) -> None:
    """metrics.json, timing.json and the raw records (objects.json, plans.json) of one run."""

    def dump(name: str, data: Any, indent: int | None = None) -> None:
        (out / name).write_text(
            json.dumps(data, indent=indent, sort_keys=indent is not None) + '\n'
        )

    dump('metrics.json', metrics, 1)
    dump('timing.json', timing, 1)
    dump(
        'objects.json',
        [{'stamp_ns': o['stamp_ns'], 'objects': o['objects']} for o in rec['objects']],
    )
    plans = [{k: p[k] for k in ('stamp_ns', 'status', 'points')} for p in rec['plans']]
    dump('plans.json', {'odometry': sorted(rec['odometry'].items()), 'plans': plans})

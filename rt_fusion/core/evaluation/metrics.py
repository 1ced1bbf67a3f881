"""Scoring perception and planning outputs against ground truth (ROS-free).

Perception, per frame (the fused objects at a camera frame's time against the truth at that time,
both in the vehicle frame ``base_link``):

- **matching**: outputs and truth objects are paired by centre distance in metres with
  :func:`scipy.optimize.linear_sum_assignment`, pairs farther apart than ``gate_m`` rejected. As in
  CLEAR MOT (Bernardin & Stiefelhagen 2008), a truth object that was matched to an output id in
  the previous frame keeps that pairing first when it is still within the gate; only the rest go
  through the assignment.
- **what counts**: the *evaluated* truth objects are those inside the region (``min_range_m`` <
  range ≤ ``max_range_m``, |y| ≤ ``max_abs_y_m``) and, in the ``visible`` view, seen by at least
  one sensor (the generator's visibility flags). An output matched to a truth object that is not
  evaluated (out of the region, or hidden) is neither a true nor a false positive; an unmatched
  output outside the region is ignored; an unmatched output inside it is a false positive.
- **metrics**: precision, recall, F1; CLEAR MOT (MOTA = 1 − (FN + FP + IDSW) / GT, MOTP = mean
  distance of matches [m], ID switches, fragmentations = interruptions of a truth object's
  tracked span that tracking later resumes); position and velocity error (mean, P95) over matches;
  class accuracy over matches whose output has a class; recall per range bin.

Latency: per stage, P50/P99/max of the differences of stamps carried by the outputs.

Planning, per published trajectory (points in the world frame, times from the plan's start):
minimum gap between the ego's box along the plan and the true actors' boxes at the same times
(oriented rectangles; 0 when they overlap), the first time of overlap (time to collision along the
plan), collisions (plans that overlap a true actor within their horizon), comfort (peak |a| and
|jerk| along the plans) and emergency stops. Collisions are split by what the car could know when
it planned: ``collisions_seen`` overlap an actor that some sensor had seen by the plan's start
(the planner's and perception's share), ``collisions_unseen`` only actors that no sensor had
seen yet (a pedestrian still behind a parked car, a vehicle overtaking from behind the
front-facing sensors: the sensor set's coverage); ``collision_actors`` says who, per actor.

Time is passed in; nothing here reads a clock.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param

# Object classes of rt_fusion_msgs/Object, by the names the scenario truth uses.
CLASS_CODES = {
    'unknown': 0,
    'car': 1,
    'truck': 2,
    'pedestrian': 3,
    'bicycle': 4,
    'motorcycle': 5,
    'static': 6,
    'emergency_vehicle': 7,
}
UNKNOWN = 0
MAX_SWITCH_EVENTS = 100  # ID switches listed one by one in the metrics
EMERGENCY = CLASS_CODES['emergency_vehicle']


@dataclasses.dataclass(frozen=True)
class EvalParams:
    """What counts as a match and which truth objects are scored."""

    gate_m: float = param('largest centre distance of a match', unit='m', default=2.0, low=0.01)
    min_range_m: float = param('nearer truth objects are not scored', unit='m', default=1.0, low=0)
    max_range_m: float = param('farther truth objects are not scored', unit='m', default=80.0)
    max_abs_y_m: float = param('truth further to the side is not scored', unit='m', default=20.0)
    range_bins_m: tuple[float, ...] = param(
        'edges of the recall-per-range bins', unit='m', default=(0.0, 30.0, 60.0, 100.0)
    )

    def validate(self) -> None:
        """Raises ParameterError for an inconsistent set."""
        if not 0 <= self.min_range_m < self.max_range_m:
            raise ParameterError('max_range_m', self.max_range_m, 'must exceed min_range_m ≥ 0')
        edges = self.range_bins_m
        if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
            raise ParameterError('range_bins_m', edges, 'needs ≥ 2 increasing edges')


@dataclasses.dataclass(frozen=True)
class TruthObject:
    """One true object at one frame, in the vehicle frame; velocity over ground [m/s]."""

    id: int
    x: float
    y: float
    vx: float = 0.0
    vy: float = 0.0
    cls: int = UNKNOWN
    visible: bool = True  # seen by at least one sensor (in its field of view, not occluded)


@dataclasses.dataclass(frozen=True)
class OutputObject:
    """One output object (a track or a detection) at one frame, in the vehicle frame."""

    id: int
    x: float
    y: float
    vx: float = 0.0
    vy: float = 0.0
    cls: int = UNKNOWN
    score: float = 1.0  # its existence probability (the AMOTA sweep's confidence)


@dataclasses.dataclass(frozen=True)
class Frame:
    """Truth and outputs at one time. ``outputs`` is None when the system published nothing."""

    stamp_ns: int
    truth: Sequence[TruthObject]
    outputs: Sequence[OutputObject] | None


def match(
    truth: Sequence[TruthObject],
    outputs: Sequence[OutputObject],
    gate_m: float,
    keep: dict[int, int] | None = None,
) -> list[tuple[int, int, float]]:
    """Pairs (truth index, output index, distance) with distance ≤ gate_m.

    ``keep`` maps truth ids to the output id they were matched to before; such a pair is kept
    first when both are present and within the gate (CLEAR MOT's correspondence rule).
    """
    if not truth or not outputs:
        return []
    t_xy = np.array([[o.x, o.y] for o in truth], dtype=np.float64)
    o_xy = np.array([[o.x, o.y] for o in outputs], dtype=np.float64)
    dist = np.linalg.norm(t_xy[:, None, :] - o_xy[None, :, :], axis=2)
    pairs: list[tuple[int, int, float]] = []
    used_t: set[int] = set()
    used_o: set[int] = set()
    if keep:
        out_index = {o.id: j for j, o in enumerate(outputs)}
        for i, obj in enumerate(truth):
            j = out_index.get(keep.get(obj.id, -1), -1)
            if j >= 0 and j not in used_o and dist[i, j] <= gate_m:
                pairs.append((i, j, float(dist[i, j])))
                used_t.add(i)
                used_o.add(j)
    rows = [i for i in range(len(truth)) if i not in used_t]
    cols = [j for j in range(len(outputs)) if j not in used_o]
    if rows and cols:
        sub = dist[np.ix_(rows, cols)]
        big = gate_m * 1e3 + float(sub.max())
        r, c = linear_sum_assignment(np.where(sub <= gate_m, sub, big))
        for a, b in zip(r, c, strict=True):
            if sub[a, b] <= gate_m:
                pairs.append((rows[a], cols[b], float(sub[a, b])))
    return sorted(pairs)


def _in_region(x: float, y: float, p: EvalParams) -> bool:
    rng = math.hypot(x, y)
    return p.min_range_m < rng <= p.max_range_m and abs(y) <= p.max_abs_y_m


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {'mean': math.nan, 'p95': math.nan}
    arr = np.asarray(values, dtype=np.float64)
    return {'mean': float(arr.mean()), 'p95': float(np.percentile(arr, 95))}


def score_perception(
    frames: Sequence[Frame], params: EvalParams | None = None, visible_only: bool = True
) -> dict[str, Any]:
    """Detection, tracking and state-error metrics over a run (see the module docstring)."""
    p = params or EvalParams()
    p.validate()
    tp = fp = fn = idsw = 0
    gt_total = 0
    dists: list[float] = []
    pos_err: list[float] = []
    vel_err: list[float] = []
    cls_ok = cls_n = 0
    emg_ok = emg_n = 0
    edges = p.range_bins_m
    bin_tp = [0] * (len(edges) - 1)
    bin_gt = [0] * (len(edges) - 1)
    last_match: dict[int, int] = {}  # truth id -> output id it was last matched to
    switches: list[list[Any]] = []
    tracked_seq: dict[int, list[bool]] = {}
    frames_with_output = 0
    for frame in frames:
        outputs = frame.outputs or []
        frames_with_output += frame.outputs is not None
        pairs = match(frame.truth, outputs, p.gate_m, last_match)
        matched_t = {i: (j, d) for i, j, d in pairs}
        matched_o = {j for _, j, _ in pairs}
        for i, obj in enumerate(frame.truth):
            evaluated = _in_region(obj.x, obj.y, p) and (obj.visible or not visible_only)
            if not evaluated:
                continue
            gt_total += 1
            rng = math.hypot(obj.x, obj.y)
            k = int(np.searchsorted(edges, rng, side='right')) - 1
            in_bin = 0 <= k < len(bin_gt)
            if in_bin:
                bin_gt[k] += 1
            hit = matched_t.get(i)
            tracked_seq.setdefault(obj.id, []).append(hit is not None)
            if hit is None:
                fn += 1
                continue
            j, d = hit
            out = outputs[j]
            tp += 1
            if in_bin:
                bin_tp[k] += 1
            dists.append(d)
            pos_err.append(d)
            vel_err.append(math.hypot(out.vx - obj.vx, out.vy - obj.vy))
            if out.cls != UNKNOWN:
                cls_n += 1
                cls_ok += out.cls == obj.cls
            if obj.cls == EMERGENCY:  # heard, not seen: the class only the siren can give
                emg_n += 1
                emg_ok += out.cls == EMERGENCY
            before = last_match.get(obj.id)
            if before is not None and before != out.id:
                idsw += 1
                if len(switches) < MAX_SWITCH_EVENTS:
                    alive = any(o.id == before for o in outputs)
                    switches.append([frame.stamp_ns, obj.id, before, out.id, alive])
        for i, j, _ in pairs:
            last_match[frame.truth[i].id] = outputs[j].id
        for j, out in enumerate(outputs):
            if j not in matched_o and _in_region(out.x, out.y, p):
                fp += 1
    frag = 0
    for seq in tracked_seq.values():
        arr = np.asarray(seq, dtype=bool)
        hits = np.flatnonzero(arr)
        if hits.size:
            span = arr[hits[0] : hits[-1] + 1]
            frag += int(np.count_nonzero(span[:-1] & ~span[1:]))
    precision = tp / (tp + fp) if tp + fp else math.nan
    recall = tp / gt_total if gt_total else math.nan
    f1 = (
        2 * precision * recall / (precision + recall)
        if tp and not math.isnan(precision) and not math.isnan(recall)
        else (0.0 if gt_total else math.nan)
    )
    n_frames = len(frames)
    pos, vel = _stats(pos_err), _stats(vel_err)
    bins = {
        f'{edges[k]:g}-{edges[k + 1]:g}': (bin_tp[k] / bin_gt[k] if bin_gt[k] else math.nan)
        for k in range(len(bin_gt))
    }
    return {
        'frames': n_frames,
        'frames_with_output': frames_with_output,
        'gt': gt_total,
        'tp': tp,
        'fp': fp,
        'fn': fn,
        'precision': precision,
        'recall': recall,
        'f1': f1,
        'mota': 1.0 - (fn + fp + idsw) / gt_total if gt_total else math.nan,
        'motp_m': float(np.mean(dists)) if dists else math.nan,
        'id_switches': idsw,
        # Each switch (the first MAX_SWITCH_EVENTS): stamp [ns], truth id, output id before,
        # after, and whether the one before was still published (two tracks on one object)
        # or gone (the track was lost and a new one took over).
        'id_switch_events': switches,
        'fragmentations': frag,
        'truth_objects': len(tracked_seq),
        'pos_err_m': pos['mean'],
        'pos_err_p95_m': pos['p95'],
        'vel_err_mps': vel['mean'],
        'vel_err_p95_mps': vel['p95'],
        'class_accuracy': cls_ok / cls_n if cls_n else math.nan,
        # matched frames of emergency vehicles (truth) output as emergency vehicles
        'emergency_recognised': emg_ok / emg_n if emg_n else math.nan,
        'fp_per_frame': fp / n_frames if n_frames else math.nan,
        'recall_by_range': bins,
    }


def latency_stages(stamps: dict[str, npt.ArrayLike]) -> dict[str, dict[str, float]]:
    """P50/P99/max [ms] of consecutive stage differences.

    ``stamps`` maps stage names, in pipeline order, to per-output stamps [ns] (equal lengths);
    each stage's latency is its stamp minus the previous stage's, plus ``total`` (last − first).
    """
    names = list(stamps)
    arrays = [np.asarray(stamps[n], dtype=np.int64) for n in names]
    out: dict[str, dict[str, float]] = {}
    pairs = [
        (f'{a}->{b}', arrays[k], arrays[k + 1])
        for k, (a, b) in enumerate(itertools.pairwise(names))
    ]
    if len(names) > 2:
        pairs.append(('total', arrays[0], arrays[-1]))
    for label, start, end in pairs:
        ok = (start > 0) & (end > 0)
        d = (end[ok] - start[ok]) / 1e6
        if d.size == 0:
            continue
        out[label] = {
            'p50_ms': float(np.percentile(d, 50)),
            'p99_ms': float(np.percentile(d, 99)),
            'max_ms': float(d.max()),
            'n': int(d.size),
        }
    return out


# --- planning ------------------------------------------------------------------------------------


def box_corners(
    x: float, y: float, yaw: float, length: float, width: float
) -> npt.NDArray[np.float64]:
    """The 4 corners (counter-clockwise) of an oriented rectangle centred at (x, y)."""
    c, s = math.cos(yaw), math.sin(yaw)
    hl, hw = length / 2, width / 2
    local = np.array([[hl, hw], [-hl, hw], [-hl, -hw], [hl, -hw]], dtype=np.float64)
    rot = np.array([[c, -s], [s, c]], dtype=np.float64)
    corners: npt.NDArray[np.float64] = local @ rot.T + np.array([x, y], dtype=np.float64)
    return corners


def _overlap(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> bool:
    for poly in (a, b):
        edges = np.roll(poly, -1, axis=0) - poly
        for e in edges:
            axis = np.array([-e[1], e[0]])
            pa, pb = a @ axis, b @ axis
            if pa.max() < pb.min() or pb.max() < pa.min():
                return False
    return True


def _point_segment(
    p: npt.NDArray[np.float64], a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
) -> float:
    ab = b - a
    t = float(np.clip(np.dot(p - a, ab) / max(float(np.dot(ab, ab)), 1e-12), 0.0, 1.0))
    return float(np.linalg.norm(p - (a + t * ab)))


def box_gap(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """Distance between two convex polygons [m]; 0 when they overlap (separating axis test)."""
    if _overlap(a, b):
        return 0.0
    best = math.inf
    for p, q in ((a, b), (b, a)):
        for k in range(len(q)):
            seg_a, seg_b = q[k], q[(k + 1) % len(q)]
            for pt in p:
                best = min(best, _point_segment(pt, seg_a, seg_b))
    return best


@dataclasses.dataclass(frozen=True)
class ActorTrack:
    """A true actor's motion: times [s] and world poses, with its footprint [m]."""

    id: int
    t: npt.NDArray[np.float64]
    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    yaw: npt.NDArray[np.float64]
    length: float
    width: float
    kind: str = ''
    first_seen: float = -math.inf  # when a sensor first saw it [s]; inf: never

    def at(self, t: float) -> tuple[float, float, float] | None:
        """Pose at t (linear interpolation), None outside the recorded span."""
        if t < self.t[0] - 1e-9 or t > self.t[-1] + 1e-9:
            return None
        yaw = np.unwrap(self.yaw)
        return (
            float(np.interp(t, self.t, self.x)),
            float(np.interp(t, self.t, self.y)),
            float(np.interp(t, self.t, yaw)),
        )


@dataclasses.dataclass(frozen=True)
class Plan:
    """One published trajectory in the world frame: start time [s], points, status."""

    t0: float
    t: npt.NDArray[np.float64]  # from t0 [s]
    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    yaw: npt.NDArray[np.float64]
    a: npt.NDArray[np.float64]
    emergency: bool = False


def score_planning(
    plans: Sequence[Plan],
    actors: Sequence[ActorTrack],
    ego_size: tuple[float, float] = (4.5, 1.9),
    horizon_s: float = 3.0,
) -> dict[str, Any]:
    """Gaps, time to collision, collisions and comfort of the plans against the true actors.

    Only the first ``horizon_s`` of each plan is checked: beyond it the actors' true motion is
    what the script made them do, which no planner could know.
    """
    min_gap = math.inf
    min_ttc = math.inf
    collisions = seen_collisions = 0
    by_actor: dict[int, dict[str, Any]] = {}
    max_acc = 0.0
    max_jerk = 0.0
    r_ego = math.hypot(*ego_size) / 2
    tracks = [(a, np.unwrap(a.yaw), math.hypot(a.length, a.width) / 2) for a in actors if len(a.t)]
    for plan in plans:
        hit: set[int] = set()
        keep = np.flatnonzero(np.asarray(plan.t) <= horizon_s)
        ts = plan.t0 + np.asarray(plan.t, dtype=np.float64)[keep]
        px = np.asarray(plan.x, dtype=np.float64)[keep]
        py = np.asarray(plan.y, dtype=np.float64)[keep]
        for actor, yaw, r_actor in tracks:
            inside = (ts >= actor.t[0] - 1e-9) & (ts <= actor.t[-1] + 1e-9)
            ax = np.interp(ts, actor.t, actor.x)
            ay = np.interp(ts, actor.t, actor.y)
            # Bounding circles give a lower bound of the gap: only points that could beat the
            # smallest gap so far (or touch) get the exact oriented-box test.
            lower = np.hypot(ax - px, ay - py) - r_ego - r_actor
            for i in np.flatnonzero(inside & (lower < max(min_gap, 0.0) + 1e-9)):
                k = int(keep[i])
                ego = box_corners(plan.x[k], plan.y[k], plan.yaw[k], *ego_size)
                other = box_corners(
                    float(ax[i]),
                    float(ay[i]),
                    float(np.interp(ts[i], actor.t, yaw)),
                    actor.length,
                    actor.width,
                )
                gap = box_gap(ego, other)
                min_gap = min(min_gap, gap)
                if gap <= 0.0:
                    min_ttc = min(min_ttc, float(plan.t[k]))
                    hit.add(actor.id)
        if hit:
            collisions += 1
            seen = False
            for actor, _, _ in tracks:
                if actor.id in hit:
                    known = actor.first_seen <= plan.t0 + 1e-9  # a sensor had seen it
                    seen |= known
                    row = by_actor.setdefault(
                        actor.id,
                        {'kind': actor.kind, 'plans': 0, 'seen': 0, 'first_plan_s': plan.t0},
                    )
                    row['plans'] += 1
                    row['seen'] += known
            seen_collisions += seen
        if len(plan.a):
            max_acc = max(max_acc, float(np.abs(plan.a).max()))
        if len(plan.a) > 1:
            dt = np.diff(plan.t)
            ok = dt > 1e-6
            if ok.any():
                max_jerk = max(max_jerk, float(np.abs(np.diff(plan.a)[ok] / dt[ok]).max()))
    return {
        'plans': len(plans),
        'collisions': collisions,
        'collisions_seen': seen_collisions,
        'collisions_unseen': collisions - seen_collisions,
        'collision_actors': {str(k): v for k, v in sorted(by_actor.items())},
        'min_gap_m': min_gap if plans else math.nan,
        'min_ttc_s': min_ttc,
        'max_abs_accel_mps2': max_acc,
        'max_abs_jerk_mps3': max_jerk,
        'emergency_stops': sum(p.emergency for p in plans),
    }


# --- closed loop: the ego as it was driven -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EgoSample:
    """The true ego at one time [s]: world pose [m, rad] and speed [m/s]."""

    t: float
    x: float
    y: float
    yaw: float
    speed: float
    d: float = 0.0  # offset from the lane's centre [m], positive left
    emergency_near: bool = False  # an emergency vehicle within reach (see score_yield)


def score_yield(ego: Sequence[EgoSample]) -> dict[str, Any]:
    """The ego's response while an emergency vehicle was near (``emergency_near``): how long,
    its mean and lowest speed and its mean offset from the lane's centre (negative: keeping
    right), against the same before it came near."""
    near = [e for e in ego if e.emergency_near]
    if not near:
        return {'samples': 0}
    before = [e for e in ego if e.t < near[0].t]
    return {
        'samples': len(near),
        'from_s': near[0].t,
        'mean_speed_mps': float(np.mean([e.speed for e in near])),
        'min_speed_mps': float(min(e.speed for e in near)),
        'mean_offset_m': float(np.mean([e.d for e in near])),
        'speed_before_mps': float(np.mean([e.speed for e in before])) if before else math.nan,
    }


def score_driving(
    ego: Sequence[EgoSample],
    actors: Sequence[ActorTrack],
    ego_size: tuple[float, float] = (4.5, 1.9),
    stopped_mps: float = 0.2,
) -> dict[str, Any]:
    """How the driven ego fared against the true actors (closed loop): the smallest gap between
    the boxes over the run, the samples where they overlapped (collisions) and the first time,
    the ego's acceleration and jerk, its final speed and whether it ended stopped."""
    if not ego:
        return {'samples': 0}
    ts = np.array([e.t for e in ego])
    speed = np.array([e.speed for e in ego])
    r_ego = math.hypot(*ego_size) / 2
    min_gap, first_collision, collisions = math.inf, math.nan, 0
    for e in ego:
        box = box_corners(e.x, e.y, e.yaw, *ego_size)
        hit = False
        for actor in actors:
            pose = actor.at(e.t)
            if pose is None:
                continue
            r_actor = math.hypot(actor.length, actor.width) / 2
            if math.hypot(pose[0] - e.x, pose[1] - e.y) - r_ego - r_actor > min_gap:
                continue  # bounding circles: cannot beat the smallest gap so far
            gap = box_gap(box, box_corners(*pose, actor.length, actor.width))
            min_gap = min(min_gap, gap)
            hit |= gap <= 0.0
        if hit:
            collisions += 1
            if math.isnan(first_collision):
                first_collision = e.t
    acc = np.gradient(speed, ts) if len(ts) > 2 else np.zeros_like(speed)
    jerk = np.gradient(acc, ts) if len(ts) > 2 else np.zeros_like(speed)
    return {
        'samples': len(ego),
        'collision_samples': collisions,
        'first_collision_s': first_collision,
        'min_gap_m': min_gap,
        'max_decel_mps2': float(max(0.0, -acc.min())),
        'max_abs_jerk_mps3': float(np.abs(jerk).max()),
        'final_speed_mps': float(speed[-1]),
        'stopped': bool(speed[-1] <= stopped_mps),
    }


def truth_frames(
    truth: dict[str, Any], sensors: tuple[str, ...] = ('camera', 'radar')
) -> dict[int, list[TruthObject]]:
    """Truth per camera stamp, in base_link, velocities over ground rotated into it; an object
    is ``visible`` when one of ``sensors`` sees it (``truth``: a generated scenario's
    ``ground_truth.json``)."""
    out: dict[int, list[TruthObject]] = {}
    for frame in truth['frames']:
        yaw = frame['ego']['yaw']
        c, s = math.cos(yaw), math.sin(yaw)
        objs = []
        for o in frame['objects']:
            vis = o.get('visible', {'camera': True, 'radar': True})
            objs.append(
                TruthObject(
                    int(o['id']),
                    float(o['ego_x']),
                    float(o['ego_y']),
                    c * o['vx'] + s * o['vy'],
                    -s * o['vx'] + c * o['vy'],
                    # a vehicle with its siren on is an emergency vehicle (the truth bag's class)
                    EMERGENCY if o.get('siren') else CLASS_CODES.get(o['class'], UNKNOWN),
                    any(bool(vis.get(name, False)) for name in sensors),
                )
            )
        out[int(frame['stamp_ns'])] = objs
    return out

"""A generated scenario's ground truth (``ground_truth.json``) as the metrics take it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.core.evaluation.metrics import ActorTrack, EgoSample, Plan

# A siren from this far behind to this far ahead of the ego: when a driver makes way [m].
SIREN_NEAR_M = (-60.0, 10.0)


def load_truth(folder: Path) -> dict[str, Any] | None:
    """``ground_truth.json`` in ``folder`` (a generated scenario), else None."""
    path = folder / 'ground_truth.json'
    return json.loads(path.read_text()) if path.is_file() else None


def siren_near(frame: dict[str, Any]) -> bool:
    """Whether an emergency vehicle with its siren on is near the ego in a truth frame."""
    lo, hi = SIREN_NEAR_M
    return any(o['siren'] and lo <= o['ego_x'] <= hi for o in frame['objects'])


def actor_tracks(truth: dict[str, Any]) -> list[ActorTrack]:
    """The true actors' world motion for the planning metrics."""
    series: dict[int, dict[str, Any]] = {}
    for frame in truth['frames']:
        for o in frame['objects']:
            s = series.setdefault(
                o['id'],
                {
                    't': [],
                    'x': [],
                    'y': [],
                    'yaw': [],
                    'size': o['size'],
                    'kind': o.get('class', ''),
                    'seen': math.inf,
                },
            )
            if any(o.get('visible', {}).values()):  # any sensor: what the car could know
                s['seen'] = min(s['seen'], frame['t'])
            s['t'].append(frame['t'])
            s['x'].append(o['x'])
            s['y'].append(o['y'])
            s['yaw'].append(o['yaw'])
    return [
        ActorTrack(
            aid,
            np.asarray(s['t']),
            np.asarray(s['x']),
            np.asarray(s['y']),
            np.asarray(s['yaw']),
            float(s['size'][0]),
            float(s['size'][1]),
            kind=s['kind'],
            first_seen=s['seen'],
        )
        for aid, s in sorted(series.items())
    ]


def ego_samples(truth: dict[str, Any]) -> list[EgoSample]:
    """The ego as the truth has it (closed loop: as the plans drove it)."""
    return [
        EgoSample(
            f['t'],
            f['ego']['x'],
            f['ego']['y'],
            f['ego']['yaw'],
            math.hypot(f['ego']['vx'], f['ego']['vy']),
            f['ego']['d'],
            siren_near(f),
        )
        for f in truth['frames']
    ]


def plans_in_world(
    recorded: list[dict[str, Any]],
    odometry: dict[int, tuple[float, float, float]],
    truth: dict[str, Any],
) -> list[Plan]:
    """Trajectories (planner frame = fusion odometry frame) moved into the truth's world frame
    with the true ego pose at their stamp, so the plan is judged where the car really was.

    ``recorded``: dicts with ``stamp_ns``, ``status`` and ``points`` (t, x, y, yaw, v, a);
    ``odometry``: the fused pose (x, y, yaw) per stamp."""
    ego_at = {int(f['stamp_ns']): (f['t'], f['ego']) for f in truth['frames']}
    out = []
    for rec in recorded:
        if not rec['points'] or rec['stamp_ns'] not in ego_at or rec['stamp_ns'] not in odometry:
            continue
        t0, ego = ego_at[rec['stamp_ns']]
        ox, oy, oyaw = odometry[rec['stamp_ns']]
        # world <- base (truth) composed with base <- odom (inverse of the fused odometry)
        dyaw = ego['yaw'] - oyaw
        c, s = math.cos(dyaw), math.sin(dyaw)
        pts = np.asarray(rec['points'], dtype=np.float64)
        px, py = pts[:, 1] - ox, pts[:, 2] - oy
        out.append(
            Plan(
                float(t0),
                pts[:, 0],
                ego['x'] + c * px - s * py,
                ego['y'] + s * px + c * py,
                pts[:, 3] + dyaw,
                pts[:, 5],
                emergency=rec['status'] == 2,
            )
        )
    return out

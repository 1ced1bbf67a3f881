#!/usr/bin/env python3
"""Cost of association + tracking per radar scan (rt_fusion.core.perception), one CPU core.

    python tools/bench_fusion.py            # 64 objects, 2,000 scans
    python tools/bench_fusion.py --quick    # 300 scans
    python tools/bench_fusion.py --numpy    # the numpy kernels (where numba is missing)

A synthetic scene of ``--objects`` objects moving at constant velocity, seen by a radar at 13.6 Hz
with 0.25 m position noise, 5 % misses and Poisson false alarms, goes through the tracker (predict,
gated assignment, update, life cycle, births) and the ego-speed vote, as ``FusionEngine`` runs
them per scan, on the scan's detections as arrays (``Detections``; building them from objects is
timed on its own row). The tracker's kernels are numba's where it is installed
(``track_kernels``). Prints P50/P99/max per scan and the same work done naively (a Python loop
per track-detection pair, no gating matrix) as the comparison in the same run, then
``RESULT track_p50_us=… track_p99_us=… track_max_us=… objects=… ratio_p99=… kernels=…``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from rt_fusion.core.perception.ego import EgoMotion
from rt_fusion.core.perception.tracker import Detection, Detections, Tracker, warm_up


def scene(objects: int, scans: int, seed: int) -> list[list[Detection]]:
    """Detections per scan of a synthetic traffic scene."""
    rng = np.random.default_rng(seed)
    pos = np.column_stack((rng.uniform(5, 150, objects), rng.uniform(-15, 15, objects)))
    vel = np.column_stack((rng.uniform(-5, 30, objects), rng.normal(0, 0.5, objects)))
    dt = 1 / 13.6
    out = []
    for _ in range(scans):
        pos += vel * dt
        dets = [
            Detection(
                float(p[0] + rng.normal(0, 0.25)),
                float(p[1] + rng.normal(0, 0.25)),
                float(v[0] + rng.normal(0, 0.1)),
                float(v[1] + rng.normal(0, 0.1)),
                pos_std=0.25,
                vel_std=0.3,
                cls=1,
            )
            for p, v in zip(pos, vel, strict=True)
            if rng.random() > 0.05
        ]
        dets += [
            Detection(float(rng.uniform(5, 150)), float(rng.uniform(-15, 15)), 0.0, 0.0)
            for _ in range(int(rng.poisson(0.5)))
        ]
        out.append(dets)
    return out


def naive_associate(tracker: Tracker, dets: list[Detection]) -> int:
    """The comparison: a Python double loop computing each Mahalanobis distance alone."""
    n = 0
    for x, cov in zip(tracker.x, tracker.P, strict=True):
        for d in dets:
            diff = np.array([d.x - x[0], d.y - x[1]])
            s = cov[:2, :2] + d.pos_std**2 * np.eye(2)
            n += float(diff @ np.linalg.inv(s) @ diff) < 13.8
    return n


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--objects', type=int, default=64)
    parser.add_argument('--scans', type=int, default=2000)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument(
        '--numpy', action='store_true', help='the numpy kernels even where numba is installed'
    )
    parser.add_argument('--seed', type=int, default=3)
    args = parser.parse_args(argv)
    scans = 300 if args.quick else args.scans
    data = scene(args.objects, scans, args.seed)
    tracker, ego = Tracker(jit=not args.numpy), EgoMotion()
    cost, naive, convert = [], [], []
    step = round(1e9 / 13.6)
    warm_up(jit=not args.numpy)  # compiles (or loads the cached) numba kernels before timing
    for k, dets in enumerate(data):
        t0 = time.perf_counter_ns()
        arrays = Detections.of(dets)
        t1 = time.perf_counter_ns()
        ego.radar_speed(-arrays.v[:, 0])
        tracker.step(k * step, arrays)
        cost.append(time.perf_counter_ns() - t1)
        convert.append(t1 - t0)
        t0 = time.perf_counter_ns()
        naive_associate(tracker, dets)
        naive.append(time.perf_counter_ns() - t0)
    warm = slice(20, None)  # start-up: tracks being born
    c, n = np.asarray(cost[warm]) / 1e3, np.asarray(naive[warm]) / 1e3
    confirmed = len(tracker.confirmed())
    print(
        f'{len(c)} scans, {args.objects} objects, {confirmed} confirmed tracks at the end; '
        f'kernels: {tracker.k.name}'
    )
    print(f'{"":34s} {"P50":>9s} {"P99":>9s} {"max":>9s}')
    rows = (
        ('associate + track + ego vote', c),
        ('(objects -> arrays, not in RESULT)', np.asarray(convert[warm]) / 1e3),
        ('naive association alone', n),
    )
    for name, arr in rows:
        p50, p99 = np.percentile(arr, 50), np.percentile(arr, 99)
        print(f'{name:34s} {p50:8.1f}µs {p99:8.1f}µs {arr.max():8.1f}µs')
    ratio = float(np.percentile(n, 99) / np.percentile(c, 99)) if len(c) else math.nan
    print(
        f'RESULT track_p50_us={np.percentile(c, 50):.1f} track_p99_us={np.percentile(c, 99):.1f} '
        f'track_max_us={c.max():.1f} objects={args.objects} ratio_p99={ratio:.2f} '
        f'kernels={tracker.k.name}'
    )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

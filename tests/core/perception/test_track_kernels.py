"""The tracker's kernels: numba loops and numpy arrays give the same tracks, step by step."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from rt_fusion.core.perception import track_kernels
from rt_fusion.core.perception.tracker import Detection, Tracker, along_ray_cov

S = 1_000_000_000  # ns per second


def _scene(seed: int, scans: int) -> list[tuple[int, list[Detection], bool]]:
    """Radar scans (position + velocity) and camera frames (position only, along-ray
    covariance, far ones unable to start tracks) of crossing, merging and vanishing objects,
    with misses and false alarms: every branch of every kernel."""
    rng = np.random.default_rng(seed)
    n = 24
    pos = np.column_stack((rng.uniform(5, 120, n), rng.uniform(-12, 12, n)))
    vel = np.column_stack((rng.uniform(-8, 25, n), rng.normal(0, 1.5, n)))
    pos[1] = pos[0] + (0.6, 0.3)  # two on one object: a merge
    vel[1] = vel[0]
    out = []
    t = 0
    for k in range(scans):
        t += round(S / (13.6 if k % 2 == 0 else 30.0))
        pos += vel * (1 / 20)
        radar = k % 2 == 0
        dets = []
        for i, (p, v) in enumerate(zip(pos, vel, strict=True)):
            if rng.random() < 0.1 or (i % 7 == 0 and 40 < k < 60):  # misses, a gap
                continue
            if radar:
                dets.append(
                    Detection(
                        float(p[0] + rng.normal(0, 0.3)),
                        float(p[1] + rng.normal(0, 0.3)),
                        float(v[0] + rng.normal(0, 0.2)),
                        float(v[1] + rng.normal(0, 0.2)),
                        pos_std=0.3,
                        vel_std=0.4,
                        cls=int(rng.integers(0, 4)),
                        exist_prob=float(rng.uniform(0.5, 1.0)),
                        length=float(rng.choice([math.nan, 4.5])),
                        width=1.8,
                    )
                )
            else:
                rng_m = float(np.hypot(*p))
                along, across = 0.5 + 0.08 * rng_m, 0.5 + 0.005 * rng_m
                bearing = math.atan2(p[1], p[0])
                dets.append(
                    Detection(
                        float(p[0] + rng.normal(0, along / 2)),
                        float(p[1] + rng.normal(0, across / 2)),
                        pos_std=along,
                        cov_xy=along_ray_cov(bearing, along, across),
                        cls=int(rng.integers(0, 4)),
                        cls_prob=float(rng.uniform(0.3, 1.0)),
                        exist_prob=float(rng.uniform(0.3, 1.0)),
                        source=2,
                        can_birth=rng_m < 60,
                    )
                )
        for _ in range(int(rng.poisson(1.0))):  # false alarms
            dets.append(Detection(float(rng.uniform(5, 120)), float(rng.uniform(-12, 12)), 0, 0))
        out.append((t, dets, radar))
    return out


def _camera_covers(xy: np.ndarray) -> np.ndarray:
    covered: np.ndarray = (xy[:, 0] > 1.0) & (np.abs(xy[:, 1]) < 0.5 * xy[:, 0])
    return covered


@pytest.mark.parametrize('seed', [1, 2])
def test_numba_and_numpy_kernels_give_the_same_tracks_step_by_step(seed: int) -> None:
    if track_kernels.kernels(jit=True).name != 'numba':
        pytest.skip('numba is not installed')
    jit, ref = Tracker(jit=True), Tracker(jit=False)
    assert (jit.k.name, ref.k.name) == ('numba', 'numpy')
    merged = confirmed = 0
    for stamp, dets, radar in _scene(seed, 160):
        covers = None if radar else _camera_covers
        for tr in (jit, ref):
            tr.step(stamp, dets, birth=True, covers=covers)
        assert np.array_equal(jit.ids, ref.ids) and jit.revivals == ref.revivals
        for name in Tracker._COLUMNS:
            a, b = getattr(jit, name), getattr(ref, name)
            if a.dtype == np.float64:
                np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9, err_msg=name)
            else:
                assert np.array_equal(a, b), name
        confirmed = max(confirmed, int(ref.is_confirmed.sum()))
        merged = ref.deaths
    # The scene did exercise them: the gap of steps 40-60 loses tracks that are found again.
    assert confirmed > 10 and merged > 0 and ref.births > 30 and ref.revivals > 0


def test_numba_and_numpy_ego_votes_agree() -> None:
    if track_kernels.kernels(jit=True).name != 'numba':
        pytest.skip('numba is not installed')
    jit, ref = track_kernels.kernels(jit=True), track_kernels.NUMPY
    rng = np.random.default_rng(4)
    for _ in range(200):
        m = int(rng.integers(0, 30))
        vx = np.where(rng.random(m) < 0.6, -15.0, rng.uniform(-30, 10, m)) + rng.normal(0, 0.3, m)
        vx[rng.random(m) < 0.1] = np.nan
        z, n = jit.consensus(vx, 1.0)
        z_ref, n_ref = ref.consensus(vx, 1.0)
        assert n == n_ref
        assert z == pytest.approx(z_ref, nan_ok=True)
    # Hand-made: five returns of a car at 15 m/s with one moving object and one reversing one.
    votes = np.array([-15.1, -14.9, -15.0, 3.0, 0.0, -15.05, 2.0])
    for k in (jit, ref):
        z, n = k.consensus(votes, 0.5)
        assert (z, n) == (pytest.approx(15.025), 4)  # 14.9 15.0 15.05 15.1: median 15.025


def test_without_numba_the_tracker_uses_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('RT_FUSION_JIT', '0')
    assert Tracker().k.name == 'numpy'
    assert track_kernels.kernels(jit=False) is track_kernels.NUMPY


LOAD_LATER = """
import threading, numpy as np
from rt_fusion.core.perception import track_kernels as tk
from rt_fusion.core.perception.tracker import Detection, Tracker, warm_up_in_background
go, threads = threading.Event(), []
tk.defer()  # as a node does before building its trackers
early = Tracker()
assert early.k.name == 'numpy' and 'numba' not in __import__('sys').modules
def start(work):
    threads.append(threading.Thread(target=lambda: (go.wait(), work()), daemon=True))
    threads[0].start()
assert warm_up_in_background(start)
assert not warm_up_in_background(start)  # once: loading already
assert tk.loading() and tk.kernels().name == 'numpy'
tracker = Tracker()
a = Detection(10.0, 0.0, 5.0, 0.0)
tracker.step(0, [a])
held = tracker.k.name
go.set()
threads[0].join(120)
assert not tk.loading()
tracker.step(10_000_000, [a])
early.step(0, [a])
print(held, tracker.k.name, early.k.name, tk.kernels().name, len(tracker))
"""


def test_kernels_loaded_in_the_background_replace_numpy_at_the_next_step() -> None:
    if track_kernels.kernels(jit=True).name != 'numba':
        pytest.skip('numba is not installed')
    env = {k: v for k, v in os.environ.items() if k != 'RT_FUSION_JIT'}
    out = subprocess.run(
        [sys.executable, '-c', LOAD_LATER],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ['numpy', 'numba', 'numba', 'numba', '1']

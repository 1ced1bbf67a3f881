"""The core refuses NaN and infinity itself, at every entry (issue #54): tools and tests call it
directly, without the nodes' own checks. Each bad input is counted where it enters and dropped;
nothing non-finite comes out, and the good inputs around it are used as before.

A property test drives the fusion (aligner, ego motion, tracker) on a car ahead with NaN, +inf
and -inf put into chosen IMU samples, radar objects, wheel speeds and camera detections; the
planner's inputs (poses, obstacles) and the tracker's detections are fed the same way.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rt_fusion.core.fusion import FusionEngine, FusionParams, RadarObjectIn
from rt_fusion.core.perception.decoders import CameraDetection
from rt_fusion.core.perception.tracker import Detection, Detections, Tracker
from rt_fusion.core.planning import frenet
from rt_fusion.core.planning.ego import EgoPose, PoseHistory
from rt_fusion.core.planning.reference import ReferencePath
from rt_fusion.core.sync import Aligner, SyncParams

MS = 1_000_000
T0 = 1_000_000_000_000
BAD = st.sampled_from([math.nan, math.inf, -math.inf])
FRAMES = 45  # 1.5 s at 30 Hz


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def _run(bad: dict[str, dict[int, tuple[int, float]]]) -> tuple[FusionEngine, Aligner, list[Any]]:
    """1.5 s: IMU at 200 Hz, radar at 20 Hz (a car 30 m ahead), wheel speed at 10 Hz, camera
    frames at 30 Hz with one detection each; ``bad[stream][i] = (field, value)`` replaces a
    field of that stream's ``i``-th input with ``value``."""
    engine = FusionEngine(FusionParams())
    al = Aligner(SyncParams(max_wait_s=0.05, radar_mode='latest', wait_for=('imu',)))
    out = []
    imu_i = radar_i = speed_i = 0
    imu_t = radar_t = speed_t = T0
    for k in range(FRAMES):
        t = T0 + k * 33_333_333
        while imu_t <= t + 10 * MS:
            sample = [0.0, 0.0, 0.01, 0.1, 0.0, 9.81]
            if imu_i in bad['imu']:
                field, value = bad['imu'][imu_i]
                sample[field % 6] = value
            al.push_imu(imu_t, sample[:3], sample[3:], imu_t)
            imu_t, imu_i = imu_t + 5 * MS, imu_i + 1
        while radar_t <= t:
            car = [30.0 - 0.5 * (radar_t - T0) / 1e9, 0.2, -0.5, 0.0]
            if radar_i in bad['radar']:
                field, value = bad['radar'][radar_i]
                car[field % 4] = value
            objects = [RadarObjectIn(1, *car, ars_class=1, prob_exist=0.99)]
            al.push_radar('radar', radar_t, engine.add_scan(radar_t, objects), radar_t)
            radar_t, radar_i = radar_t + 50 * MS, radar_i + 1
        while speed_t <= t:
            speed = bad['speed'][speed_i][1] if speed_i in bad['speed'] else 10.0
            engine.set_speed(speed, speed_t)
            speed_t, speed_i = speed_t + 100 * MS, speed_i + 1
        box = [300.0, 180.0, 340.0, 210.0, 320.0, 195.0, 28.0]  # box, keypoint, depth
        if k in bad['camera']:
            field, value = bad['camera'][k]
            box[field % 7] = value
        det = CameraDetection(0, 0.9, tuple(box[:4]), tuple(box[4:6]), box[6])  # type: ignore[arg-type]
        al.push_camera(t, k, t)
        for frame in al.poll(t):
            out.append(engine.fuse(frame, detections=[det]))
    return engine, al, out


def _bad(n: int) -> st.SearchStrategy[dict[int, tuple[int, float]]]:
    return st.dictionaries(st.integers(0, n - 1), st.tuples(st.integers(0, 6), BAD), max_size=4)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(imu=_bad(300), radar=_bad(30), speed=_bad(15), camera=_bad(FRAMES))
def test_nan_and_inf_at_every_fusion_entry_are_counted_and_never_fused(
    imu: dict[int, tuple[int, float]],
    radar: dict[int, tuple[int, float]],
    speed: dict[int, tuple[int, float]],
    camera: dict[int, tuple[int, float]],
) -> None:
    engine, al, frames = _run({'imu': imu, 'radar': radar, 'speed': speed, 'camera': camera})
    assert len(frames) >= FRAMES - 3
    for f in frames:
        e = f.ego
        assert _finite(e.x, e.y, e.yaw, e.v, e.yaw_rate), e
        for o in f.objects:
            assert _finite(o.x, o.y, o.vx, o.vy, o.yaw, o.length, o.width, o.position_std), o
        for cov in (*f.position_cov, *f.velocity_cov):
            assert _finite(*cov)
        assert _finite(*f.yaw_rate, *f.velocity_std, *f.existence)
    # Each bad input counted where it entered.
    assert al.stats['imu'].non_finite == sum(1 for i in imu if i < al.stats['imu'].received)
    assert engine.non_finite['radar_objects'] == len(radar)
    assert engine.non_finite['speed'] == len(speed)
    # A camera detection with a bad box, keypoint or depth: NaN depth means "not regressed"
    # (placed by its box), so only some of them are refused, by the tracker.
    assert engine.tracker.non_finite <= len(camera)
    # The car is tracked all the same (the good inputs around the bad ones are used).
    assert frames[-1].objects, 'the car ahead was lost'


def test_the_aligner_refuses_bad_radar_points_and_float_audio() -> None:
    al = Aligner(SyncParams(max_wait_s=0.05, radar_mode='latest', audio_window_s=0.1))
    points = np.array([[30.0, 0.0, 0.0, -1.0], [math.nan, 1.0, 0.0, 0.0], [5.0, math.inf, 0, 0]])
    al.push_radar('radar', T0, points, T0)
    block = np.zeros((480, 1), np.float32)
    block[7, 0] = math.nan
    al.push_audio(T0, block, T0)
    assert al.stats['radar'].non_finite == 2 and al.stats['audio'].non_finite == 1
    al.push_camera(T0 + 10 * MS, None, T0 + 10 * MS)
    (frame,) = al.poll(T0 + 200 * MS)
    scan = frame.radar['radar']
    assert scan is not None and scan.points.shape == (1, 4) and np.isfinite(scan.points).all()


@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf])
def test_the_tracker_drops_a_detection_without_a_finite_position(value: float) -> None:
    tracker = Tracker()
    for k in range(10):
        good = Detection(20.0 + 0.1 * k, 1.0, 1.0, 0.0)
        bad = Detection(value, 3.0) if k % 2 else Detection(10.0, 3.0, value, 0.0)
        tracker.step(T0 + k * 50 * MS, [good, bad])
    # A NaN velocity means "not measured" and is kept; infinity never.
    refused = 10 if not math.isnan(value) else 5
    assert tracker.non_finite == refused
    assert np.isfinite(tracker.x).all() and np.isfinite(tracker.P).all()
    rows = Detections.of([Detection(1.0, 2.0), Detection(1.0, 2.0, length=math.nan)])
    assert rows.usable().all()


@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf])
def test_the_planner_refuses_bad_poses_and_obstacles_and_plans_finite(value: float) -> None:
    poses = PoseHistory()
    poses.add(T0, EgoPose(0.0, 0.0, 0.0, 10.0))
    poses.add(T0 + 10 * MS, EgoPose(value, 0.0, 0.0, 10.0))
    poses.add(T0 + 20 * MS, EgoPose(0.2, 0.0, 0.0, value))
    assert poses.non_finite == 2 and len(poses) == 1
    path = ReferencePath([(0.0, 0.0), (100.0, 0.0), (200.0, 0.0)])
    planner = frenet.FrenetPlanner(path)
    obstacles = [
        frenet.Obstacle(40.0, 0.0, 0.0, 4.5, 1.9),
        frenet.Obstacle(60.0, value, 0.0, 4.5, 1.9),
        frenet.Obstacle(80.0, 0.0, 0.0, 4.5, 1.9, vx=value),
    ]
    traj = planner.plan(frenet.FrenetState(0.0, 10.0, 0.0, 0.0, 0.0, 0.0), obstacles)
    assert planner.non_finite == 2
    assert all(np.isfinite(a).all() for a in (traj.x, traj.y, traj.v, traj.s, traj.d))
    with pytest.raises(ValueError, match='not finite'):
        planner.plan(frenet.FrenetState(0.0, value, 0.0, 0.0, 0.0, 0.0), obstacles)

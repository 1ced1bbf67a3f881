"""Camera-anchored alignment, on hand-made timelines (ms unless noted)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from rt_fusion.core import params, rotation
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.sync import Aligner, SyncParams, propagate

MS = 1_000_000


def _params(**kw: object) -> SyncParams:
    base: dict[str, object] = {
        'max_wait_s': 0.02,
        'audio_rate_hz': 1000,
        'audio_window_s': 0.01,
        'audio_capacity_s': 1.0,
        'radars': ('front',),
    }
    base.update(kw)
    return SyncParams(**base)  # type: ignore[arg-type]


def _imu(al: Aligner, t_ms: float, gz: float, ax: float) -> None:
    al.push_imu(int(t_ms * MS), (0.0, 0.0, gz), (ax, 0.0, 0.0), int(t_ms * MS))


def test_imu_is_interpolated_and_rotation_integrated_between_frames() -> None:
    # IMU at 0, 10, 20 ms with gyro z 0, 1, 2 rad/s and accel x 0, 10, 20 m/s².
    # Frames at 5 and 15 ms. Midpoint integration about z (angles add):
    #   q(5)  = 5 ms at mean(0, 0.5)   = 0.00125 rad
    #   q(15) = 10 ms at mean(0, 1)    = 0.005 rad, then 5 ms at mean(1, 1.5) = 0.00625 rad
    #   rotation between the frames   = 0.01125 - 0.00125 = 0.01 rad
    al = Aligner(_params(radars=(), audio_window_s=0.001))
    for t, g in ((0, 0.0), (10, 1.0), (20, 2.0)):
        _imu(al, t, g, 10.0 * g)
    al.push_audio(0, np.zeros((100, 1), np.float32), 0)
    al.push_camera(5 * MS, 'f0', 5 * MS)
    al.push_camera(15 * MS, 'f1', 15 * MS)
    f0, f1 = al.poll(20 * MS)
    assert f1.imu is not None
    assert f1.imu.gyro[2] == pytest.approx(1.5)
    assert f1.imu.accel[0] == pytest.approx(15.0)
    assert rotation.to_rotvec(f1.imu.rotation)[2] == pytest.approx(0.01, rel=1e-9)
    assert f1.imu.samples == 1  # the sample at 10 ms lies between the frames
    assert f0.missing == f1.missing == ()


def test_nearest_radar_is_taken_without_waiting_when_the_next_cannot_be_nearer() -> None:
    # Scans at 0 and 100 ms (period 100). A frame at 130 ms: the next scan is due at 200,
    # 70 ms away, the last is 30 ms away -> take the 100 ms scan now.
    al = Aligner(_params(audio_window_s=0.001))
    al.push_radar('front', 0, np.zeros((0, 4)), 0)
    al.push_radar('front', 100 * MS, np.array([[10.0, 0.0, 0.0, -5.0]]), 100 * MS)
    for t in range(0, 150, 10):
        _imu(al, t, 0.0, 0.0)
    al.push_audio(0, np.zeros((200, 1), np.float32), 0)
    al.push_camera(130 * MS, 'f', 131 * MS)
    (out,) = al.poll(131 * MS)
    radar = out.radar['front']
    assert radar is not None
    assert radar.scan_stamp_ns == 100 * MS
    assert radar.dt_ns == 30 * MS
    # v_r = -5 m/s for 30 ms along the line of sight: 10 m -> 9.85 m.
    assert radar.points[0, 0] == pytest.approx(9.85)
    assert out.waited_ns == 0  # emitted as soon as it arrived


def test_frame_waits_for_a_radar_scan_that_will_be_nearer() -> None:
    # Scans at 0 and 100 ms; a frame at 170 ms: the scan due at 200 ms (30 ms away) beats the
    # one at 100 ms (70 ms away), so the frame waits for it (within max_wait).
    al = Aligner(_params(max_wait_s=0.1, audio_window_s=0.001))
    al.push_radar('front', 0, np.zeros((0, 4)), 0)
    al.push_radar('front', 100 * MS, np.zeros((0, 4)), 100 * MS)
    for t in range(0, 250, 10):
        _imu(al, t, 0.0, 0.0)
    al.push_audio(0, np.zeros((300, 1), np.float32), 0)
    al.push_camera(170 * MS, 'f', 171 * MS)
    assert al.poll(180 * MS) == []
    al.push_radar('front', 200 * MS, np.zeros((0, 4)), 201 * MS)
    (out,) = al.poll(201 * MS)
    assert out.radar['front'] is not None
    assert out.radar['front'].scan_stamp_ns == 200 * MS


def test_missing_modality_is_flagged_after_max_wait() -> None:
    # IMU and radar present, no audio at all: the frame waits max_wait (20 ms) and goes out.
    al = Aligner(_params())
    for t in range(0, 60, 10):
        _imu(al, t, 0.0, 0.0)
    al.push_radar('front', 0, np.zeros((0, 4)), 0)
    al.push_radar('front', 40 * MS, np.zeros((0, 4)), 40 * MS)
    al.push_camera(30 * MS, 'f', 31 * MS)
    assert al.poll(50 * MS) == []  # 19 ms after arrival: still waiting for audio
    (out,) = al.poll(51 * MS)  # 20 ms: emitted without it
    assert out.missing == ('audio',)
    assert out.audio is None
    assert out.waited_ns == 20 * MS


def test_a_sensor_that_stops_degrades_the_output_instead_of_stalling_it() -> None:
    al = Aligner(_params(radars=()))
    al.push_audio(0, np.zeros((1000, 1), np.float32), 0)
    for t in range(0, 100, 10):
        _imu(al, t, 0.0, 0.0)
    outs = []
    for k, t in enumerate(range(20, 400, 33)):  # the IMU went silent at 90 ms
        al.push_camera(t * MS, k, t * MS)
        outs += al.poll(t * MS + 25 * MS)
    assert len(outs) == len(range(20, 400, 33))
    assert outs[0].missing == ()
    assert outs[-1].missing == ('imu',)


def test_without_the_camera_each_radar_scan_anchors_a_frame_until_the_camera_is_back() -> None:
    # Camera every 30 ms but none from 210 to 990 ms; radar every 50 ms; IMU at 100 Hz.
    # camera_timeout 300 ms: the scans from 500 ms (the last frame at 180 ms + 300, in stamps)
    # to 1000 ms anchor frames; the camera is back at 1020 ms.
    al = Aligner(_params(camera_timeout_s=0.3, wait_for=('imu',)))
    outs = []
    for t in range(0, 1300, 10):
        _imu(al, t, 0.0, 0.0)
        if t % 50 == 0:
            al.push_radar('front', t * MS, np.array([[20.0, 0.0, 0.0, 0.0]]), t * MS)
        if t % 30 == 0 and not 200 < t < 1000:
            al.push_camera(t * MS, f'f{t}', t * MS)
        outs += al.poll(t * MS)
    camera_less = [o.stamp_ns // MS for o in outs if 'camera' in o.missing]
    assert camera_less == list(range(500, 1001, 50))
    assert al.camera_less == len(camera_less)
    assert all(o.frame is None and o.radar['front'] is not None for o in outs if o.frame is None)
    assert all(o.imu is not None for o in outs)  # the IMU still carries the ego motion
    cam = [o.stamp_ns // MS for o in outs if o.frame is not None]
    assert cam == [t for t in range(0, 1300, 30) if not 200 < t < 1000]
    stamps = [o.stamp_ns for o in outs]
    assert stamps == sorted(stamps)  # in time order, the camera's and the radar's frames


def test_a_slow_replay_or_a_late_camera_does_not_count_as_a_camera_gone() -> None:
    # Lock-step replay on a slow machine: 1 s of wall clock between messages, stamps 33 ms
    # apart: never 300 ms without a camera frame in stamps.
    al = Aligner(_params(camera_timeout_s=0.3, wait_for=()))
    outs = []
    for k in range(20):
        t, wall = k * 33 * MS, k * 1000 * MS
        al.push_radar('front', t + MS, np.zeros((0, 4)), wall)
        al.push_camera(t, k, wall + 1)
        outs += al.poll(wall + 2)
    assert not any('camera' in o.missing for o in outs) and al.camera_less == 0
    # Live, the camera 400 ms behind on the wall clock: no radar anchor before 300 ms of wall
    # clock without a frame either.
    al = Aligner(_params(camera_timeout_s=0.3, wait_for=()))
    al.push_camera(0, 'a', 0)
    al.push_radar('front', 500 * MS, np.zeros((0, 4)), 250 * MS)
    assert [o.frame for o in al.poll(250 * MS)] == ['a']
    assert al.poll(299 * MS) == []
    (out,) = al.poll(300 * MS)
    assert out.frame is None and out.missing == ('imu', 'audio', 'camera')


def test_camera_timeout_zero_waits_for_the_camera() -> None:
    al = Aligner(_params(camera_timeout_s=0.0))
    for t in range(0, 2000, 50):
        al.push_radar('front', t * MS, np.zeros((0, 4)), t * MS)
        assert al.poll(t * MS) == []


def test_audio_window_ends_at_the_frame_time() -> None:
    # 1 kHz audio, block stamped 0: sample i is at i ms. A frame at 50 ms with a 10-sample
    # window gets samples 40..49.
    al = Aligner(_params(radars=()))
    for t in range(0, 70, 10):
        _imu(al, t, 0.0, 0.0)
    al.push_audio(0, np.arange(100, dtype=np.float32).reshape(-1, 1), 0)
    al.push_camera(50 * MS, 'f', 50 * MS)
    (out,) = al.poll(50 * MS)
    assert out.audio is not None
    assert out.audio[:, 0].tolist() == list(range(40, 50))


def test_late_and_out_of_order_inputs_are_counted() -> None:
    al = Aligner(_params(radars=()))
    for t in (0, 10, 20, 30):
        _imu(al, t, 0.0, 0.0)
    _imu(al, 25, 0.0, 0.0)  # older than the last IMU sample: out of order
    al.push_audio(0, np.zeros((100, 1), np.float32), 0)
    al.push_camera(15 * MS, 'a', 15 * MS)
    assert len(al.poll(16 * MS)) == 1
    al.push_camera(12 * MS, 'b', 17 * MS)  # older than an emitted frame: late, not emitted
    _imu(al, 5, 0.0, 0.0)  # late and out of order
    assert al.poll(40 * MS) == []
    assert al.stats['imu'].out_of_order == 2
    assert al.stats['imu'].late == 1
    assert al.stats['camera'].late == 1


def test_camera_queue_is_bounded() -> None:
    al = Aligner(_params(camera_queue=2, max_wait_s=1.0))
    for k in range(3):
        al.push_camera(k * 10 * MS, k, k * 10 * MS)
    assert al.stats['camera'].dropped == 1
    outs = al.poll(10**10)
    assert [o.frame for o in outs] == [1, 2]


def test_propagation_moves_points_along_their_line_of_sight() -> None:
    pts = np.array([[3.0, 4.0, 0.0, 10.0], [0.0, 0.0, 0.0, 1.0]])
    out = propagate(pts, 100 * MS)  # 1 m further along (0.6, 0.8, 0); the origin stays
    assert out[0, :3] == pytest.approx([3.6, 4.8, 0.0])
    assert out[1, :3].tolist() == [0.0, 0.0, 0.0]
    assert math.isclose(out[0, 3], 10.0)


def _random_session(seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    al = Aligner(SyncParams(radars=('r0', 'r1')))
    events = []
    for k in range(600):  # 3 s: IMU 200 Hz, camera 30 Hz, radars ~13.6 Hz, audio 20 ms blocks
        events.append((k * 5 * MS, 'imu'))
    events += [(int(k * 33.3 * MS), 'cam') for k in range(90)]
    events += [(int(k * 73.5 * MS) + 3 * MS, 'r0') for k in range(40)]
    events += [(int(k * 73.5 * MS) + 40 * MS, 'r1') for k in range(40)]
    events += [(k * 20 * MS, 'audio') for k in range(150)]
    events.sort()
    out = []
    for t, kind in events:
        arrival = t + int(rng.exponential(0.5 * MS))
        if kind == 'imu':
            al.push_imu(t, rng.normal(size=3), rng.normal(size=3), arrival)
        elif kind == 'cam':
            al.push_camera(t, t, arrival)
        elif kind == 'audio':
            al.push_audio(t, rng.normal(size=(960, 1)).astype(np.float32), arrival)
        else:
            al.push_radar(kind, t, rng.normal(size=(20, 4)) * 10, arrival)
        for f in al.poll(arrival):
            out.append(pickle.dumps((f.stamp_ns, f.missing, f.imu, f.radar, f.audio)))
    return out


def test_same_input_gives_bitwise_identical_output() -> None:
    first, second = _random_session(7), _random_session(7)
    assert len(first) > 80
    assert first == second


def test_frames_do_not_wait_for_modalities_left_out_of_wait_for() -> None:
    al = Aligner(SyncParams(wait_for=('imu',), max_wait_s=1.0))
    al.push_imu(0, (0, 0, 0), (0, 0, 9.8), 0)
    al.push_camera(10_000_000, 'f', 10_000_000)
    assert al.poll(10_000_001) == []  # waits for the IMU
    al.push_imu(20_000_000, (0, 0, 0), (0, 0, 9.8), 20_000_000)
    out = al.poll(20_000_001)  # no radar, no audio: not waited for, reported missing
    assert [f.frame for f in out] == ['f']
    assert set(out[0].missing) == {'radar', 'audio'}
    with pytest.raises(ParameterError, match='wait_for'):
        params.build(SyncParams, {'wait_for': ['lidar']})


def test_latest_radar_mode_does_not_wait_for_the_next_scan() -> None:
    pts = np.array([[10.0, 0.0, 0.0, -5.0]])
    for mode, emitted in (('nearest', False), ('latest', True)):
        al = Aligner(SyncParams(radar_mode=mode, wait_for=('radar',), max_wait_s=1.0))
        al.push_radar('radar', 0, pts, 0)
        al.push_radar('radar', 70_000_000, pts, 70_000_000)
        al.push_camera(120_000_000, 'f', 120_000_000)  # the next scan (140 ms) may be nearer
        out = al.poll(120_000_001)
        assert bool(out) is emitted, mode
        if out:
            r = out[0].radar['radar']
            assert r is not None and r.scan_stamp_ns == 70_000_000
            assert r.points[0, 0] == pytest.approx(10.0 - 5.0 * 0.05)  # moved to the frame


def test_extrapolate_mode_does_not_wait_for_the_imu_and_measures_what_that_costs() -> None:
    # IMU at 0 and 10 ms (gyro z 0, 1 rad/s; accel x 0, 10 m/s²); a frame at 15 ms.
    # interpolate waits for the 20 ms sample; extrapolate holds the 10 ms one at once:
    # gyro 1, accel 10, turned 5 ms at 1 rad/s past the sample. The 20 ms sample then says
    # gyro 1.5, accel 15: errors 0.5 rad/s and 5 m/s².
    for mode, emitted in (('interpolate', False), ('extrapolate', True)):
        al = Aligner(SyncParams(imu_mode=mode, wait_for=('imu',), max_wait_s=1.0))
        for t, g in ((0, 0.0), (10, 1.0)):
            _imu(al, t, g, 10.0 * g)
        al.push_camera(15 * MS, 'f', 15 * MS)
        out = al.poll(15 * MS + 1)
        assert bool(out) is emitted, mode
        if not out:
            continue
        imu = out[0].imu
        assert imu is not None and imu.extrapolated
        assert imu.gyro[2] == 1.0 and imu.accel[0] == 10.0
        assert al.extrapolation.frames == 1 and al.extrapolation.checked == 0
        _imu(al, 20, 2.0, 20.0)
        ex = al.extrapolation
        assert ex.checked == 1
        assert ex.rms() == pytest.approx((0.5, 5.0))
        assert (ex.gyro_max, ex.accel_max) == pytest.approx((0.5, 5.0))
    # A frame further past the latest sample than imu_max_gap_s still waits (then is missing).
    al = Aligner(SyncParams(imu_mode='extrapolate', wait_for=('imu',), max_wait_s=0.5))
    _imu(al, 0, 0.0, 0.0)
    al.push_camera(200 * MS, 'g', 200 * MS)
    assert al.poll(200 * MS + 1) == []
    (late,) = al.poll(800 * MS)
    assert late.imu is None and 'imu' in late.missing

"""Tracker and ego motion: hand-computed filter steps, gating decisions and track life cycles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_fusion.core.perception.ego import EgoMotion, EgoParams
from rt_fusion.core.perception.tracker import Detection, Tracker, TrackerParams, along_ray_cov

S = 1_000_000_000  # ns per second


def test_prediction_is_constant_velocity_with_white_acceleration_noise() -> None:
    tr = Tracker(TrackerParams(accel_std=2.0))
    tr.step(0, [Detection(10.0, 0.0, 5.0, 1.0, pos_std=0.5, vel_std=0.5)])
    (t,) = tr.tracks
    x, cov = t.predicted(S // 2, 2.0)  # 0.5 s later
    assert x == pytest.approx([12.5, 0.5, 5.0, 1.0])
    # P' = F P F' + Q, per axis: [[p + dt² v + q11, dt v + q12], [dt v + q12, v + q22]]
    # p = v = 0.25; q = 4 [[dt⁴/4, dt³/2], [dt³/2, dt²]] = [[0.0625, 0.25], [0.25, 1.0]]
    assert cov[0, 0] == pytest.approx(0.25 + 0.25 * 0.25 + 0.0625)
    assert cov[0, 2] == pytest.approx(0.5 * 0.25 + 0.25)
    assert cov[2, 2] == pytest.approx(0.25 + 1.0)
    assert cov[0, 1] == 0.0


def test_an_update_is_the_kalman_weighted_mean() -> None:
    tr = Tracker(TrackerParams(accel_std=0.0))
    tr.step(0, [Detection(10.0, 0.0, 0.0, 0.0, pos_std=1.0, vel_std=1.0)])
    tr.step(0, [Detection(11.0, 0.0, 0.0, 0.0, pos_std=1.0, vel_std=1.0)])
    (t,) = tr.tracks
    # Equal variances (1 m²): the mean, with half the variance.
    assert t.x[0] == pytest.approx(10.5)
    assert t.P[0, 0] == pytest.approx(0.5)


def test_gating_rejects_a_detection_beyond_the_mahalanobis_gate() -> None:
    tr = Tracker(TrackerParams(gate_chi2=9.0))
    tr.step(0, [Detection(10.0, 0.0, pos_std=0.5)])
    t = tr.tracks[0]
    # Innovation covariance: P (0.25) + R (0.25) = 0.5 m² per axis.
    # 2.0 m away: d² = 4 / 0.5 = 8 <= 9 (taken); 2.2 m: 4.84 / 0.5 = 9.68 > 9 (new track).
    near = tr.associate([Detection(12.0, 0.0, pos_std=0.5)])
    far = tr.associate([Detection(12.2, 0.0, pos_std=0.5)])
    assert near == [(0, 0)] and far == []
    assert t.id == 1


def test_a_camera_detection_is_uncertain_along_its_ray_and_gated_so() -> None:
    # Along 45°: σ_along 3 m, σ_across 0.4 m. Rotating diag(9, 0.16) by 45°:
    # xx = yy = (9 + 0.16) / 2 = 4.58, xy = (9 - 0.16) / 2 = 4.42.
    xx, xy, yy = along_ray_cov(math.pi / 4, 3.0, 0.4)
    assert (xx, xy, yy) == pytest.approx((4.58, 4.42, 4.58))
    assert along_ray_cov(0.0, 3.0, 0.4) == pytest.approx((9.0, 0.0, 0.16))
    tr = Tracker(TrackerParams(gate_chi2=9.0))
    tr.step(0, [Detection(50.0, 0.0, pos_std=0.5)])  # a radar track, P = 0.25 m² per axis
    ray = along_ray_cov(0.0, 3.0, 0.4)  # a camera looking along x
    # 6 m short along the ray: d² = 36 / (0.25 + 9) = 3.9 <= 9 (the same object, its depth
    # wrong); 1.5 m across it: d² = 2.25 / (0.25 + 0.16) = 5.5, 2 m: 4 / 0.41 = 9.8 > 9.
    assert tr.associate([Detection(44.0, 0.0, cov_xy=ray)]) == [(0, 0)]
    assert tr.associate([Detection(50.0, 1.5, cov_xy=ray)]) == [(0, 0)]
    assert tr.associate([Detection(50.0, 2.0, cov_xy=ray)]) == []
    # A round 3 m std would have taken the 2 m lateral offset too (4 / 9.25 = 0.43).
    assert tr.associate([Detection(50.0, 2.0, pos_std=3.0)]) == [(0, 0)]
    # The update keeps the radar's range and takes most of the camera's bearing.
    tr.step(0, [Detection(44.0, 1.0, 0.0, 0.0, vel_std=1e3, cov_xy=ray)])
    (t,) = tr.tracks
    assert t.x[0] == pytest.approx(50.0 - 6.0 * 0.25 / 9.25)  # K = 0.25 / (0.25 + 9)
    assert t.x[1] == pytest.approx(1.0 * 0.25 / 0.41)  # K = 0.25 / (0.25 + 0.16)


def test_assignment_takes_the_least_total_distance() -> None:
    tr = Tracker()
    tr.step(0, [Detection(10.0, 0.0, pos_std=1.0), Detection(10.0, 3.0, pos_std=1.0)])
    pairs = tr.associate([Detection(10.0, 2.6, pos_std=1.0), Detection(10.0, 0.4, pos_std=1.0)])
    assert sorted(pairs) == [(0, 1), (1, 0)]


def _scans(tr: Tracker, hits: list[bool], x: float = 20.0) -> None:
    for k, hit in enumerate(hits):
        tr.step(k * S // 10, [Detection(x, 0.0, 0.0, 0.0)] if hit else [])


def test_three_hits_in_five_scans_confirm_a_track() -> None:
    tr = Tracker(TrackerParams(confirm_hits=3, confirm_window_s=0.4))
    _scans(tr, [True, True])
    assert tr.tracks and not tr.confirmed()  # tentative: not published
    _scans(tr, [True])
    assert [t.id for t in tr.confirmed()] == [1]


def test_parameters_set_while_it_runs_take_effect_at_the_next_scan() -> None:
    """`ros2 param set /fusion tracker.confirm_hits 2` on a running tracker: the tracks it has
    are kept, and the next scan confirms by the new rule."""
    tr, same = (Tracker(TrackerParams(confirm_hits=3, confirm_window_s=0.4)) for _ in range(2))
    for t in (tr, same):
        _scans(t, [True])
        assert t.tracks and not t.confirmed()
    tr.set_params(TrackerParams(confirm_hits=2, confirm_window_s=0.4))
    for t in (tr, same):
        t.step(S // 10, [Detection(20.0, 0.0, 0.0, 0.0)])
    assert [t.id for t in tr.confirmed()] == [1]  # two hits now confirm
    assert not same.confirmed()  # where nothing was set, two are not enough


def test_a_one_scan_false_alarm_never_becomes_a_track() -> None:
    tr = Tracker(TrackerParams(confirm_hits=3, confirm_window_s=0.25))
    _scans(tr, [True, False, False, False])
    assert tr.tracks == [] and tr.births == tr.deaths == 1


def test_a_confirmed_track_coasts_through_misses_then_is_deleted() -> None:
    tr = Tracker(TrackerParams(max_coast_s=0.35))
    _scans(tr, [True, True, True])
    (t,) = tr.confirmed()
    p0 = t.P[0, 0]
    for k in range(3):  # three misses: still there, less certain each time
        tr.step((3 + k) * S // 10, [])
        assert tr.confirmed() and tr.tracks[0].P[0, 0] > p0
        p0 = tr.tracks[0].P[0, 0]
    tr.step(6 * S // 10, [Detection(20.0, 0.0, 0.0, 0.0)])  # found again: same id
    assert [t.id for t in tr.confirmed()] == [1]
    for k in range(4):
        tr.step((7 + k) * S // 10, [])
    assert tr.confirmed() == []


def test_ids_are_the_trackers_own_and_class_is_a_vote() -> None:
    tr = Tracker()
    for k in range(5):
        cls = 2 if k == 2 else 1  # one scan says truck, four say car
        tr.step(k * S // 10, [Detection(30.0, 0.0, 0.0, 0.0, cls=cls, sensor_id=42 + k)])
    (t,) = tr.confirmed()
    assert t.id == 1 and t.cls == 1 and t.cls_prob == pytest.approx(4 / 5)


def test_ego_speed_from_the_radars_stationary_returns() -> None:
    ego = EgoMotion(EgoParams(consensus_mps=0.6, min_votes=2))
    # Ego at 15 m/s: three stationary returns (-15 relative), a car ahead at 18 m/s (+3), and
    # one moving with us (0): the stationary group wins.
    z = ego.radar_speed(np.array([-15.1, -14.9, -15.0, 3.0, 0.0]))
    assert z == pytest.approx(15.0)
    assert ego.pose.v == pytest.approx(15.0, abs=0.01)  # prior: 0 ± 30 m/s
    # A vote far from the filter's speed afterwards is rejected (3-sigma gate).
    ego.radar_speed(np.array([-3.0, -3.1]))
    assert ego.radar_rejected == 1 and ego.pose.v == pytest.approx(15.0, abs=0.01)


def test_ego_coasts_on_the_imu_and_its_uncertainty_grows() -> None:
    ego = EgoMotion(EgoParams(accel_std=0.3))
    ego.vehicle_speed(10.0)
    ego.advance(0, 0.0, 0.0, 0.0)
    var0 = ego.pose.v_var
    for k in range(1, 11):  # 1 s at 1 m/s² forward
        ego.advance(k * S // 10, 0.0, 0.0, 1.0)
    assert ego.pose.v == pytest.approx(11.0, abs=1e-3)
    assert ego.pose.x == pytest.approx(10.5, abs=1e-3)  # v0 t + a t² / 2
    assert ego.pose.v_var > var0
    # pose_at interpolates the history (radar scans are older than frames).
    x, y, yaw = ego.pose_at(S // 20)
    assert x == pytest.approx(0.5 * (ego._history[0][1] + ego._history[1][1]))
    assert (y, yaw) == (0.0, 0.0)
    assert math.isfinite(ego.pose.xy_var)


def test_a_second_return_of_a_tracked_object_starts_no_track() -> None:
    tr = Tracker()
    _scans(tr, [True, True, True])
    # The truck's rear and its cab, 1 m apart: one is assigned, the other is inside the gate.
    tr.step(3 * S // 10, [Detection(20.0, 0.0, 0.0, 0.0), Detection(21.0, 0.0, 0.0, 0.0)])
    assert [t.id for t in tr.tracks] == [1]


def test_two_confirmed_tracks_on_one_object_merge_into_the_older() -> None:
    tr = Tracker(TrackerParams(merge_distance_m=1.5))
    for k in range(3):  # two tracks 3 m apart, both confirmed
        tr.step(k * S // 10, [Detection(20.0, 0.0, 0.0, 0.0), Detection(20.0, 3.0, 0.0, 0.0)])
    assert [t.id for t in tr.confirmed()] == [1, 2]
    tr.x[1, :2] = (20.0, 1.0)  # drifted onto the first
    tr.step(3 * S // 10, [Detection(20.0, 0.0, 0.0, 0.0)])
    assert [t.id for t in tr.confirmed()] == [1]


def test_a_sensor_that_cannot_see_a_track_does_not_wear_it_down() -> None:
    tr = Tracker(TrackerParams(max_coast_s=0.25))
    for k in range(3):  # radar at 0.1 s: confirmed
        tr.step(k * S // 10, [Detection(60.0, 0.0, 0.0, 0.0)])
    (t,) = tr.confirmed()

    def nowhere(xy: np.ndarray) -> np.ndarray:
        return np.zeros(len(xy), bool)

    def everywhere(xy: np.ndarray) -> np.ndarray:
        return np.ones(len(xy), bool)

    # Camera frames at 30 Hz that do not cover the track (beyond its range): no misses.
    for k in range(1, 6):
        tr.step(S // 5 + k * S // 30, [], covers=nowhere)
    assert tr.track(0).misses == 0 and [c.id for c in tr.confirmed()] == [t.id]
    # Covered frames count misses; the time without any detection deletes it.
    tr.step(S // 5 + 7 * S // 30, [], covers=everywhere)
    assert tr.track(0).misses == 1 and [c.id for c in tr.confirmed()] == [t.id]
    tr.step(S // 2, [], covers=everywhere)  # 0.3 s since the last hit
    assert tr.confirmed() == []


def test_a_detection_that_may_not_start_a_track_only_updates_one() -> None:
    tr = Tracker()
    tr.step(0, [Detection(10.0, 0.0, pos_std=0.5, can_birth=False)])
    assert tr.tracks == []
    tr.step(0, [Detection(10.0, 0.0, 0.0, 0.0, pos_std=0.5)])  # a radar one starts it
    tr.step(S // 30, [Detection(10.1, 0.0, pos_std=0.5, can_birth=False, source=2)])
    (t,) = tr.tracks
    # Updated by it (a hit, sources, scores), but not placed by it: it cannot place it.
    assert t.hits == 2 and t.sources == 3 and t.scores == {1: 1.0, 2: 1.0}
    assert t.last_hit_ns == S // 30 and t.last_placed_ns == 0


def test_detections_that_may_not_start_a_track_do_not_keep_one_alive() -> None:
    # A radar track at 70 m; then only far camera detections (can_birth false: their depth
    # cannot place an object) hit it: they update it, but 0.25 s after the radar's last hit it
    # is deleted, instead of drifting on camera bearings alone.
    tr = Tracker(TrackerParams(max_coast_s=0.25))
    for k in range(3):
        tr.step(k * S // 10, [Detection(70.0, 0.0, 0.0, 0.0)])
    (t,) = tr.confirmed()
    cam = Detection(70.5, 0.0, pos_std=2.0, can_birth=False, source=2)
    tr.step(S // 5 + S // 30, [cam])
    assert tr.track(0).last_hit_ns == S // 5 + S // 30 and tr.track(0).last_placed_ns == S // 5
    tr.step(S // 5 + 7 * S // 30, [cam])  # 0.233 s after the radar: still there
    assert [c.id for c in tr.confirmed()] == [t.id]
    tr.step(S // 5 + 8 * S // 30, [cam])  # 0.267 s: deleted despite the camera's hit
    assert tr.confirmed() == []
    # A radar hit (or a near camera detection, which may start tracks) does keep it alive.
    tr = Tracker(TrackerParams(max_coast_s=0.25))
    for k in range(3):
        tr.step(k * S // 10, [Detection(30.0, 0.0, 0.0, 0.0)])
    for k in range(1, 10):
        tr.step(S // 5 + k * S // 30, [Detection(30.0, 0.0, pos_std=1.0, source=2)])
    assert len(tr.confirmed()) == 1


def test_reanchor_moves_a_track_to_a_detection_and_keeps_the_rest() -> None:
    # A track at 30 m closing at 2 m/s; reanchored to a camera detection at 24 m: its position
    # and position covariance become the detection's, its velocity, id and votes stay, and the
    # detection counts as a hit (a placing one: it may start tracks).
    from rt_fusion.core.perception.tracker import Detections  # noqa: PLC0415

    tr = Tracker()
    for k in range(3):
        tr.step(k * S // 10, [Detection(30.0 - 0.2 * k, 0.0, -2.0, 0.0, cls=6)])
    (t,) = tr.confirmed()
    d = Detections.of([Detection(24.0, 1.0, pos_std=1.5, cls=6, source=2)])
    tr.predict(S // 5 + S // 30)  # as after a step of that time
    vel_var = tr.P[0, 2, 2]
    tr.reanchor(np.array([0]), d, np.array([0]), S // 5 + S // 30)
    (u,) = tr.tracks
    assert (u.id, u.hits, u.sources, u.cls) == (t.id, t.hits + 1, 3, 6)
    assert u.x[:2] == pytest.approx([24.0, 1.0])
    assert u.x[2:] == pytest.approx(t.x[2:])
    assert u.P[:2, :2] == pytest.approx(np.diag([2.25, 2.25]))
    assert np.all(u.P[:2, 2:] == 0.0) and u.P[2, 2] == pytest.approx(vel_var)
    assert u.last_placed_ns == S // 5 + S // 30 and tr.reanchored == 1


def test_floor_along_widens_a_track_only_along_the_line_of_sight() -> None:
    # A track at (30, 40), 50 m from the origin, known to 0.5 m each way: floored to 2 m along
    # the line from the origin, it is 2 m uncertain along it and still 0.5 m across; a floor
    # below what it has changes nothing.
    tr = Tracker()
    tr.step(0, [Detection(30.0, 40.0, 0.0, 0.0, pos_std=0.5)])
    tr.floor_along(np.array([0]), (0.0, 0.0), np.array([2.0]))
    u, n = np.array([0.6, 0.8]), np.array([-0.8, 0.6])
    pxy = tr.P[0, :2, :2]
    assert u @ pxy @ u == pytest.approx(4.0) and n @ pxy @ n == pytest.approx(0.25)
    assert u @ pxy @ n == pytest.approx(0.0, abs=1e-12)
    before = tr.P.copy()
    tr.floor_along(np.array([0]), (0.0, 0.0), np.array([1.0]))
    assert np.array_equal(tr.P, before)


def test_a_radar_return_at_clearly_the_wrong_speed_is_outside_the_gate() -> None:
    # A truck at 13 m/s, velocity known to ~0.3 m/s after a few scans.
    tr = Tracker(TrackerParams(gate_speed_mps=3.0))
    for k in range(5):
        tr.step(k * S // 10, [Detection(60.0 + 1.3 * k, 0.0, 13.0, 0.0, vel_std=0.3)])
    at = 60.0 + 1.3 * 5
    # Same place: 2.5 m/s off is inside (an ego speed lagging a braking); 9 m/s off is not.
    assert tr.associate([Detection(at, 0.0, 10.5, 0.0, vel_std=0.3)]) == [(0, 0)]
    assert tr.associate([Detection(at, 0.0, 4.0, 0.0, vel_std=0.3)]) == []
    # The clutter return is inside the position gate, so it starts no track either.
    tr.step(5 * S // 10, [Detection(at, 0.0, 4.0, 0.0, vel_std=0.3)])
    assert [t.id for t in tr.tracks] == [1] and tr.tracks[0].x[2] == pytest.approx(13.0, abs=0.1)
    # Off, the clutter is taken and drags the track's velocity.
    off = Tracker(TrackerParams(gate_speed_mps=0.0))
    for k in range(5):
        off.step(k * S // 10, [Detection(60.0 + 1.3 * k, 0.0, 13.0, 0.0, vel_std=0.3)])
    off.step(5 * S // 10, [Detection(at, 0.0, 4.0, 0.0, vel_std=0.3)])
    assert off.tracks[0].x[2] < 10.0
    # A camera detection (no velocity) is gated on position alone.
    assert tr.associate([Detection(at + 0.5, 0.0, source=2)]) == [(0, 0)]


def _lose_and_find(tr: Tracker, gap_s: float, dy: float = 0.0) -> list[int]:
    """A car at 10 m/s confirmed in three scans, lost, then seen again ``gap_s`` after its last
    return at its predicted place (+ ``dy`` across) for three scans: the confirmed ids."""
    for k in range(3):
        tr.step(k * S // 10, [Detection(20.0 + k, 0.0, 10.0, 0.0)])
    last = 2 * S // 10
    k = 3
    while (t := k * S // 10) - last < gap_s * S:  # nothing seen: coasts, then is deleted
        tr.step(t, [])
        k += 1
    for _ in range(3):
        x = 22.0 + 10.0 * ((k * S // 10) - last) / S
        tr.step(k * S // 10, [Detection(x, dy, 10.0, 0.0)])
        k += 1
    return [t.id for t in tr.confirmed()]


def test_an_object_lost_for_a_moment_and_found_again_keeps_its_id() -> None:
    tr = Tracker(TrackerParams(max_coast_s=0.25, revive_s=1.0))
    assert _lose_and_find(tr, 0.8) == [1]  # deleted after 0.25 s, found 0.8 s after
    assert tr.deaths == 1 and tr.revivals == 1
    # Found too late, elsewhere, or with reviving off: a new id.
    assert _lose_and_find(Tracker(TrackerParams(max_coast_s=0.25, revive_s=1.0)), 1.5) == [2]
    assert _lose_and_find(Tracker(TrackerParams(max_coast_s=0.25, revive_s=1.0)), 0.8, 8.0) == [2]
    assert _lose_and_find(Tracker(TrackerParams(max_coast_s=0.25, revive_s=0.0)), 0.8) == [2]


def test_a_lost_id_held_by_a_false_alarm_is_freed_when_it_dies() -> None:
    tr = Tracker(TrackerParams(max_coast_s=0.25, revive_s=2.0, confirm_window_s=0.25))
    for k in range(3):  # a parked car at 20 m, confirmed, then not seen
        tr.step(k * S // 10, [Detection(20.0, 0.0, 0.0, 0.0)])
    for k in range(3, 7):
        tr.step(k * S // 10, [])
    assert tr.tracks == []
    tr.step(7 * S // 10, [Detection(20.5, 0.0, 0.0, 0.0)])  # one return: takes id 1, tentative
    assert [t.id for t in tr.tracks] == [1] and not tr.confirmed()
    for k in range(8, 12):  # never confirmed: dies, and id 1 is free again
        tr.step(k * S // 10, [])
    for k in range(12, 15):
        tr.step(k * S // 10, [Detection(20.0, 0.2, 0.0, 0.0)])
    assert [t.id for t in tr.confirmed()] == [1] and tr.revivals == 2

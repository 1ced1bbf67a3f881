"""Frenet planner: hand-made traffic scenes in closed loop, a 1,000-scene sweep, the pieces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import build
from rt_fusion.core.planning import frenet as fr
from rt_fusion.core.planning.reference import PathError, ReferencePath
from tests.core.planning.sim import closed_loop, trajectory_collides

CAR = (4.5, 1.9)


def _planner(**kw: object) -> fr.FrenetPlanner:
    return fr.FrenetPlanner(ReferencePath.straight(600), fr.PlannerParams(**kw))  # type: ignore[arg-type]


def _car(x: float, y: float, vx: float = 0.0, **kw: float) -> fr.Obstacle:
    return fr.Obstacle(x, y, 0.0, *CAR, vx=vx, **kw)


def test_quintic_and_quartic_meet_their_boundary_conditions() -> None:
    t = np.array([2.0, 4.0])
    lat = fr._quintic(0.5, 0.2, -0.1, np.array([3.5, -1.0]), t)
    pos, vel, acc, _ = fr._evaluate(lat, t, np.array([0.0, 2.0, 4.0, 5.0]))
    assert pos[:, 0] == pytest.approx([0.5, 0.5]) and vel[:, 0] == pytest.approx([0.2, 0.2])
    assert pos[0, 1] == pytest.approx(3.5) and vel[0, 1] == pytest.approx(0.0, abs=1e-9)
    assert acc[0, 1] == pytest.approx(0.0, abs=1e-9)
    assert pos[1, 2] == pytest.approx(-1.0) and pos[0, 3] == pytest.approx(3.5)  # holds after T
    lon = fr._quartic(0.0, 10.0, 1.0, np.array([15.0]), np.array([3.0]))
    _, vel, acc, _ = fr._evaluate(lon, np.array([3.0]), np.array([0.0, 3.0, 4.0]))
    assert vel[0].tolist() == pytest.approx([10.0, 15.0, 15.0])
    assert acc[0, 1] == pytest.approx(0.0, abs=1e-9)


def test_jerk_integral_matches_numeric_integration() -> None:
    t = np.array([3.0])
    c = fr._quintic(0.0, 1.0, 0.5, np.array([2.0]), t)
    grid = np.linspace(0, 3, 30001)
    jerk = 6 * c[0, 3] + 24 * c[0, 4] * grid + 60 * c[0, 5] * grid**2
    assert fr._jerk_integral(c, t)[0] == pytest.approx(np.trapezoid(jerk**2, grid), rel=1e-6)


def test_stopped_car_in_lane_is_passed_when_the_next_lane_is_free() -> None:
    planner = _planner()
    run = closed_loop(planner, fr.FrenetState(0, 12, 0, 0, 0, 0), [_car(40, 0)], 8.0)
    assert not run.collided
    assert max(abs(y) for y in run.ys) > 2.5  # it changed lanes
    assert run.xs[-1] > 60  # and drove past
    assert set(run.statuses) == {fr.STATUS_OK}


def test_stopped_car_in_lane_with_both_neighbours_blocked_means_stopping_before_it() -> None:
    planner = _planner()
    wall = [_car(40, 0), _car(38, 3.5), _car(42, -3.5)]
    run = closed_loop(planner, fr.FrenetState(0, 12, 0, 0, 0, 0), wall, 12.0)
    assert not run.collided
    assert run.speeds[-1] < 0.2
    assert run.xs[-1] + CAR[0] / 2 < 40 - CAR[0] / 2  # stopped behind it
    assert min(run.accels) >= -planner.p.max_decel - 1e-6


def test_slow_lead_is_followed_at_a_safe_gap() -> None:
    planner = _planner(offsets=(0.0,))  # one lane: no overtaking
    run = closed_loop(planner, fr.FrenetState(0, 14, 0, 0, 0, 0), [_car(30, 0, vx=6.0)], 20.0)
    assert not run.collided
    assert run.speeds[-1] == pytest.approx(6.0, abs=1.0)
    assert run.min_gap >= CAR[0] + planner.p.safety_margin  # centre distance: never bumper
    assert min(run.accels) >= -planner.p.max_accel - 1e-6  # followed without braking hard


def test_cut_in_makes_the_ego_brake_within_its_limits() -> None:
    planner = _planner(offsets=(0.0,))
    # A car 15 m ahead in the left lane, slower, steering into the ego's lane.
    cutter = fr.Obstacle(
        15.0, 3.5, -0.12, *CAR, vx=8.0 * math.cos(-0.12), vy=8.0 * math.sin(-0.12)
    )
    run = closed_loop(planner, fr.FrenetState(0, 14, 0, 0, 0, 0), [cutter], 6.0)
    assert not run.collided
    assert min(run.accels) < -0.5  # it braked
    assert min(run.accels) >= -planner.p.max_decel - 1e-6


def test_pedestrian_crossing_makes_the_ego_stop_before_the_crossing() -> None:
    planner = _planner()
    # A pedestrian on a crossing: the vehicle yields, keeping the path ahead of them free.
    walker = fr.Obstacle(25.0, -6.0, math.pi / 2, 0.6, 0.6, vx=0.0, vy=1.2, yield_to=True)
    run = closed_loop(planner, fr.FrenetState(0, 10, 0, 0, 0, 0), [walker], 8.0)
    assert not run.collided
    # The pedestrian crosses the ego's lane between t = 2.8 and 7.3 s and is still on the road
    # at the end of the run: the ego stops and stays before the crossing all along.
    assert max(run.xs) + CAR[0] / 2 < 25.0 - 0.3
    assert min(run.speeds) < 0.2


def test_no_feasible_path_gives_a_flagged_stop() -> None:
    planner = _planner()
    wall = [_car(12, y) for y in (-3.5, 0.0, 3.5)]
    traj = planner.plan(fr.FrenetState(0, 15, 0, 0, 0, 0), wall)
    assert traj.status in (fr.STATUS_COMFORT_STOP, fr.STATUS_EMERGENCY_STOP)
    assert np.all(np.diff(traj.v) <= 1e-6) and traj.v[-1] == pytest.approx(0.0, abs=1e-6)
    assert np.diff(traj.s_d).min() >= -planner.p.max_decel * planner.p.dt - 1e-6


def test_replanning_continues_from_the_previous_trajectory_without_jumps() -> None:
    planner = _planner()
    first = planner.plan(fr.FrenetState(0, 12, 0, 0.5, 0, 0), [_car(40, 0)])
    state = planner.start_state(0.3, float(first.x[3]), float(first.y[3]), float(first.v[3]))
    assert state == first.state_at(0.3)  # on the previous plan: no jump
    far = planner.start_state(0.3, float(first.x[3]) + 5.0, float(first.y[3]), 3.0)
    assert far.s_d == 3.0  # the vehicle left the plan: start from what was measured


def test_1000_random_scenes_no_collision_and_within_limits() -> None:
    rng = np.random.default_rng(2024)
    planner = _planner()
    p = planner.p
    statuses = np.zeros(3, int)
    for _ in range(1000):
        v0 = float(rng.uniform(0, 18))
        obstacles = []
        for _ in range(int(rng.integers(1, 21))):
            lane = float(rng.choice([-3.5, 0.0, 3.5]))
            x = float(rng.uniform(-30, 120))
            if abs(x) < 8 and abs(lane) < 1:
                continue  # not on top of the ego
            heading = float(rng.normal(0, 0.05))
            speed = float(rng.uniform(0, 16))
            obstacles.append(
                fr.Obstacle(
                    x,
                    lane + float(rng.normal(0, 0.3)),
                    heading,
                    *CAR,
                    vx=speed * math.cos(heading),
                    vy=speed * math.sin(heading),
                    yaw_rate=float(rng.normal(0, 0.02)),
                )
            )
        planner.previous = None
        traj = planner.plan(fr.FrenetState(0, v0, 0, float(rng.uniform(-1, 1)), 0, 0), obstacles)
        statuses[traj.status] += 1
        moving = traj.v > 1.0
        assert traj.v.max() <= p.max_speed + 1e-3
        assert np.abs(traj.kappa[moving]).max(initial=0.0) <= p.max_curvature + 1e-3
        if traj.status == fr.STATUS_OK:
            assert np.abs(traj.s_dd).max() <= p.max_accel + 1e-6
            assert not trajectory_collides(traj, obstacles, p.vehicle_length, p.vehicle_width)
        else:
            assert np.abs(traj.s_dd).max() <= p.max_decel + 1e-6
    print(
        f'1000 scenes: {statuses[0]} ok, {statuses[1]} comfort stops, '
        f'{statuses[2]} emergency stops, 0 collisions'
    )
    assert statuses[0] > 500


def test_bad_parameters_fail_with_their_name() -> None:
    with pytest.raises(ParameterError, match='road_right'):
        build(fr.PlannerParams, {'road_right': 5.0, 'road_left': 4.0})
    with pytest.raises(ParameterError, match='horizons'):
        build(fr.PlannerParams, {'horizons': [6.0]})
    with pytest.raises(PathError, match='waypoints'):
        ReferencePath([[0, 0]])


def test_curved_reference_path_geometry() -> None:
    angles = np.linspace(0, math.pi / 2, 20)
    path = ReferencePath(np.column_stack((50 * np.sin(angles), 50 * (1 - np.cos(angles)))))
    assert path.length == pytest.approx(50 * math.pi / 2, rel=1e-3)
    mid = path.s.size // 2
    assert path.kappa[mid] == pytest.approx(1 / 50, rel=0.02)
    s, d = path.project(np.array([0.0]), np.array([1.0]))  # 1 m left of the start
    assert s[0] == pytest.approx(0.0, abs=0.05) and d[0] == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize('end', [(500.0, 0.0), (30.0, -40.0), (-7.0, 3.0)])
def test_a_straight_path_in_closed_form_equals_the_spline_through_its_points(
    end: tuple[float, float],
) -> None:
    a, b = np.array([1.0, 2.0]), np.array([1.0, 2.0]) + end
    line = ReferencePath([a, b])  # closed form, no scipy
    spline = ReferencePath([a, (a + b) / 2, b])  # natural spline through collinear points
    assert line._tree is None and spline._tree is not None
    assert line.length == pytest.approx(spline.length, rel=1e-9)
    n = min(line.s.size, spline.s.size)
    for name in ('s', 'x', 'y', 'yaw', 'kappa'):
        np.testing.assert_allclose(
            getattr(line, name)[:n], getattr(spline, name)[:n], atol=1e-6, err_msg=name
        )
    rng = np.random.default_rng(3)
    # Points beside the path, and beyond both of its ends.
    t = rng.uniform(-0.2, 1.2, 200)
    px = a[0] + t * end[0] + rng.normal(0, 5, 200)
    py = a[1] + t * end[1] + rng.normal(0, 5, 200)
    for got, want in zip(line.project(px, py), spline.project(px, py), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_a_straight_path_does_not_import_scipy() -> None:
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = (
        'import sys; from rt_fusion.core.planning.reference import ReferencePath; '
        'p = ReferencePath.straight(100.0); p.project([1.0], [2.0]); '
        "print(sorted(m for m in sys.modules if m.startswith(('scipy.interp', 'scipy.spatial'))))"
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '[]'


def test_state_at_interpolates_as_np_interp_at_and_between_the_grid_points() -> None:
    # The start state is read from the previous plan every cycle: one interval search for the
    # six columns must give exactly what np.interp gives (clamped at both ends).
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.05, 0.2, 40)) - 0.05
    cols = [rng.normal(size=t.size) for _ in range(12)]
    traj = fr.Trajectory(t, *cols, status=0, cost=0.0, target_offset=0.0, target_speed=0.0)
    for when in [*rng.uniform(-1.0, t[-1] + 1.0, 500), *t, t[0] - 1e-12, t[-1] + 1e-12]:
        got = traj.state_at(float(when))
        clamped = float(np.clip(when, t[0], t[-1]))
        expected = [float(np.interp(clamped, t, c)) for c in cols[:6]]
        assert [got.s, got.s_d, got.s_dd, got.d, got.d_d, got.d_dd] == pytest.approx(
            expected, abs=1e-12
        )

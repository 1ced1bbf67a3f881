"""rt_fusion.core.scenario.closed_loop: the ego driven by plans (the closed-loop simulator's
core), and the road's Frenet inverse it relies on."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from rt_fusion.core.scenario.closed_loop import DriveParams, Plan, drive
from rt_fusion.core.scenario.world import Road, build_world
from tests.conftest import ROOT


def _world(name: str = 'stopped_car', seconds: float = 8.0):  # type: ignore[no-untyped-def]
    scenario = yaml.safe_load((ROOT / 'config' / 'scenarios' / f'{name}.yaml').read_text())
    return build_world(scenario, seconds)


def _plan(stamp: float, v0: float, decel: float, turn: float, origin: tuple[float, float]) -> Plan:
    """Braking straight ahead in an odom frame turned by ``turn`` and shifted to ``origin``."""
    t = np.linspace(0.0, 4.0, 41)
    v = np.maximum(v0 - decel * t, 0.0)
    s = np.concatenate(([0.0], np.cumsum((v[1:] + v[:-1]) / 2 * np.diff(t))))
    pts = [
        SimpleNamespace(
            t=ti,
            v=vi,
            x=origin[0] + si * math.cos(turn),
            y=origin[1] + si * math.sin(turn),
            yaw=turn,
        )
        for ti, vi, si in zip(t, v, s, strict=True)
    ]
    return Plan.from_points(stamp, pts)


@pytest.mark.parametrize('curvature', [0.0, 0.002, -0.0015])
def test_frenet_inverse_of_the_road(curvature: float) -> None:
    road = Road(curvature)
    s = np.array([-30.0, 0.0, 10.0, 90.0, 300.0])
    d = np.array([0.0, 1.5, -3.6, 7.0, -2.0])
    x, y, _yaw = road.to_world(s, d)
    s2, d2 = road.to_frenet(x, y)
    np.testing.assert_allclose(s2, s, atol=1e-9)
    np.testing.assert_allclose(d2, d, atol=1e-9)


def test_without_a_plan_the_ego_drives_its_script() -> None:
    world = _world()
    script = world.ego
    ego = drive(world, DriveParams(), lambda _t: None)
    for t in (0.5, 2.0, 7.5):
        a, b = ego.at(t), script.at(t)
        assert a['s'] == pytest.approx(b['s'], abs=0.02)
        assert a['d'] == pytest.approx(b['d'], abs=1e-6)
        assert math.hypot(a['vx'], a['vy']) == pytest.approx(math.hypot(b['vx'], b['vy']), 1e-3)


def test_a_braking_plan_stops_the_ego_after_the_actuation_delay_wherever_odom_is() -> None:
    """The same plan in two odom frames (the fusion's estimate starts anywhere) drives the same
    motion: the path is anchored on the ego's true pose at the plan's stamp."""
    runs = []
    for turn, origin in ((0.0, (0.0, 0.0)), (0.7, (120.0, -40.0))):
        world = _world()
        needed: list[float] = []
        ego = drive(world, DriveParams(actuation_delay_s=0.2, max_decel=9.0), needed.append)
        before = ego.at(1.0)
        ego.add_plan(_plan(1.0, 14.0, 4.0, turn, origin))
        runs.append([ego.at(t) for t in (1.19, 1.5, 2.0, 5.0, 7.9)])
        assert needed == sorted(needed)  # asked in time order, before each step
        assert needed[-1] >= 7.9 - 0.002
        assert math.hypot(before['vx'], before['vy']) == pytest.approx(14.0, 1e-3)
    for a, b in zip(*runs, strict=True):
        for key in ('s', 'd', 'vx', 'vy', 'yaw'):
            assert a[key] == pytest.approx(b[key], abs=1e-6)
    at_delay, braking, caught_up, stopped, end = runs[0]
    assert math.hypot(at_delay['vx'], at_delay['vy']) == pytest.approx(14.0, 1e-3)  # not yet
    # From 1.2 s the plan asks 14 - 4 tau (tau from the stamp: 12.8 m/s at 1.2 s, 12.0 at 1.5,
    # 10.0 at 2.0); the brakes build up at most max_jerk (20 m/s³), so the ego lags, then joins.
    assert 12.0 < math.hypot(braking['vx'], braking['vy']) < 13.9
    assert math.hypot(caught_up['vx'], caught_up['vy']) == pytest.approx(10.0, abs=0.3)
    assert math.hypot(stopped['vx'], stopped['vy']) < 0.01
    assert end['s'] == pytest.approx(stopped['s'], abs=1e-6)  # stays stopped
    # The plan's path is straight: on the curved road it leaves the lane's centre to the right.
    assert end['d'] < -0.1


def test_plans_for_older_frames_are_ignored() -> None:
    ego = drive(_world(), DriveParams(), lambda _t: None)
    ego.add_plan(_plan(2.0, 14.0, 4.0, 0.0, (0.0, 0.0)))
    ego.add_plan(_plan(1.0, 14.0, 0.0, 0.0, (0.0, 0.0)))  # answers an older frame
    assert len(ego.plans) == 1

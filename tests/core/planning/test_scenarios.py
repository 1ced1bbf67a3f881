"""The planner in closed loop on the scenario library (config/scenarios/*.yaml): the ego follows
its own plans while the other actors do what their scenario says — cut-ins, braking, a
pedestrian crossing, an emergency vehicle — which the planner only sees as their current state
(it predicts constant velocity). No collision with the true motion, limits kept."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from rt_fusion.core.planning.frenet import (
    STATUS_EMERGENCY_STOP,
    FrenetPlanner,
    FrenetState,
    Obstacle,
)
from rt_fusion.core.planning.reference import ReferencePath
from rt_fusion.core.scenario.world import build_world
from tests.conftest import ROOT
from tests.core.planning.sim import corners, overlap

SCENARIOS = sorted(p.stem for p in (ROOT / 'config' / 'scenarios').glob('*.yaml'))


@pytest.mark.parametrize('name', SCENARIOS)
def test_closed_loop_on_the_scenario_library(name: str) -> None:
    seconds, step = 10.0, 0.1
    sc = yaml.safe_load((ROOT / 'config' / 'scenarios' / f'{name}.yaml').read_text())
    world = build_world(sc, seconds + 1.0)
    s = np.arange(-50.0, 450.0, 2.0)
    x, y, _ = world.road.to_world(s, np.zeros_like(s))  # lane 0's centre line
    planner = FrenetPlanner(ReferencePath(np.column_stack([x, y])))
    p = planner.p
    e0 = world.ego.at(0.0)
    s0, _d0 = planner.path.project(np.array([e0['x']]), np.array([e0['y']]))
    state = FrenetState(float(s0[0]), math.hypot(e0['vx'], e0['vy']), 0.0, 0.0, 0.0, 0.0)
    min_gap = math.inf
    for k in range(round(seconds / step)):
        now = k * step
        seen = [(a, a.at(now)) for a in world.actors]
        obstacles = [
            Obstacle(
                st['x'],
                st['y'],
                st['yaw'],
                a.size[0],
                a.size[1],
                st['vx'],
                st['vy'],
                yield_to=a.cls == 'pedestrian',
            )
            for a, st in seen
        ]
        traj = planner.plan(state, obstacles)
        assert traj.status != STATUS_EMERGENCY_STOP, (name, now)
        assert float(traj.v.max()) <= p.max_speed + 1e-6
        assert float(traj.s_dd.min()) >= -p.max_decel - 1e-6
        assert float(traj.s_dd.max()) <= p.max_accel + 1e-6
        ego = corners(traj.x[:1], traj.y[:1], traj.yaw[:1], p.vehicle_length, p.vehicle_width)
        for a, st in seen:
            box = corners(
                np.array([st['x']]), np.array([st['y']]), np.array([st['yaw']]), *a.size[:2]
            )
            assert not overlap(ego, box).any(), (name, now, a.id)
            min_gap = min(min_gap, math.hypot(st['x'] - traj.x[0], st['y'] - traj.y[0]))
        state = traj.state_at(step)
    assert min_gap > 2.0  # centre to centre: never alongside closer than a lane's clearance
    assert state.s - float(s0[0]) > 40.0  # and it got somewhere

"""Yielding to an emergency vehicle, in closed loop on the emergency_vehicle scenario: the ego
follows its own plans while the siren truck comes up from behind in the left lane and passes;
the fusion's report (the truck, class emergency vehicle) arrives once the truck is within 120 m.
With yielding on, the ego slows to the yielding speed and moves right of its lane's centre while
the truck is near; with it off (the same run), it does neither. No collision either way."""

from __future__ import annotations

import math

import numpy as np
import yaml

from rt_fusion.core.planning.emergency import EmergencyParams, EmergencyYield
from rt_fusion.core.planning.frenet import FrenetPlanner, FrenetState, Obstacle, PlannerParams
from rt_fusion.core.planning.reference import ReferencePath
from rt_fusion.core.scenario.world import build_world
from tests.conftest import ROOT
from tests.core.planning.sim import corners, overlap


def _run(react: bool) -> dict[str, float]:
    seconds, step = 12.0, 0.1
    sc = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'emergency_vehicle.yaml').read_text())
    world = build_world(sc, seconds + 1.0)
    s = np.arange(-50.0, 450.0, 2.0)
    x, y, _ = world.road.to_world(s, np.zeros_like(s))
    base = PlannerParams(desired_speed=13.0)
    planner = FrenetPlanner(ReferencePath(np.column_stack([x, y])), base)
    ev = EmergencyYield(EmergencyParams(react=react))
    e0 = world.ego.at(0.0)
    s0, _ = planner.path.project(np.array([e0['x']]), np.array([e0['y']]))
    state = FrenetState(float(s0[0]), 13.0, 0.0, 0.0, 0.0, 0.0)
    truck = next(a for a in world.actors if a.siren)
    speeds, offsets = [], []
    ego_xy = (e0['x'], e0['y'])
    for k in range(round(seconds / step)):
        now = k * step
        now_ns = round(now * 1e9)
        seen = [(a, a.at(now)) for a in world.actors]
        st = truck.at(now)
        if math.hypot(st['x'] - ego_xy[0], st['y'] - ego_xy[1]) <= 120.0:
            ev.report(now_ns, [0.95])  # the fusion's emergency vehicle
        planner.p = ev.goal(base, now_ns)
        traj = planner.plan(
            state,
            [
                Obstacle(o['x'], o['y'], o['yaw'], a.size[0], a.size[1], o['vx'], o['vy'])
                for a, o in seen
            ],
        )
        ego = corners(traj.x[:1], traj.y[:1], traj.yaw[:1], base.vehicle_length, 1.9)
        for a, o in seen:
            box = corners(
                np.array([o['x']]), np.array([o['y']]), np.array([o['yaw']]), *a.size[:2]
            )
            assert not overlap(ego, box).any(), (react, now, a.id)
        state = traj.state_at(step)
        ego_xy = (float(np.interp(step, traj.t, traj.x)), float(np.interp(step, traj.t, traj.y)))
        if 4.0 <= now <= 8.0:  # the truck is near (it passes the ego at about 6 s)
            speeds.append(state.s_d)
            offsets.append(state.d)
    return {
        'speed': float(np.mean(speeds)),
        'offset': float(np.mean(offsets)),
        'episodes': ev.episodes,
    }


def test_the_ego_slows_and_keeps_right_for_the_emergency_vehicle_and_not_without_yielding() -> (
    None
):
    yielding, ignoring = _run(react=True), _run(react=False)
    p = EmergencyParams()
    assert yielding['episodes'] == 1 and ignoring['episodes'] == 0
    assert yielding['speed'] <= p.speed_mps + 1.5, yielding
    assert yielding['offset'] <= p.offset_m / 2, yielding  # right of the lane centre
    assert ignoring['speed'] >= 11.0 and abs(ignoring['offset']) < 0.3, ignoring


def test_reports_below_the_probability_floor_and_old_ones_do_not_yield() -> None:
    ev = EmergencyYield(EmergencyParams(hold_s=2.0, min_probability=0.5, confirm_s=0.0))
    base = PlannerParams(desired_speed=15.0)
    ev.report(0, [0.3])
    assert ev.goal(base, 10**8) is base
    ev.report(10**9, [0.3, 0.8])
    goal = ev.goal(base, 2 * 10**9)
    assert (goal.desired_speed, goal.preferred_offset) == (8.0, -0.875)
    assert ev.goal(base, 3 * 10**9 + 1) is base  # 2 s after the last report
    assert ev.episodes == 1


def _reports(ev: EmergencyYield, base: PlannerParams, t0: float, t1: float) -> list[bool]:
    """Reports at 20 Hz from t0 to t1 [s]; whether the planner yielded after each."""
    out = []
    for k in range(round((t1 - t0) * 20)):
        now = round((t0 + k / 20) * 1e9)
        ev.report(now, [0.9])
        out.append(ev.goal(base, now) is not base)
    return out


def test_a_single_false_siren_does_not_make_the_ego_yield_a_lasting_one_does() -> None:
    """A false siren next to a fast car: the fusion reports an emergency vehicle for as long as
    the hearing's event lasts (a few hops). Below confirm_s the planner does not yield; a report
    that goes on does, confirm_s after it began; a gap longer than confirm_s starts again."""
    p = EmergencyParams(confirm_s=1.0, hold_s=3.0)
    base = PlannerParams(desired_speed=15.0)
    ev = EmergencyYield(p)
    assert not any(_reports(ev, base, 0.0, 0.6))  # a false siren: 0.6 s of reports
    assert ev.goal(base, round(1.0e9)) is base and ev.episodes == 0
    assert not any(_reports(ev, base, 2.0, 2.9))  # another, 1.4 s later: a new run
    assert ev.unconfirmed == 1
    yielded = _reports(ev, base, 5.0, 8.0)  # a real siren: 3 s of reports
    first = yielded.index(True)
    assert first == 20 and all(yielded[first:]), first  # from 1.0 s after the run began
    assert ev.episodes == 1 and ev.unconfirmed == 2
    assert ev.goal(base, round(10.9e9)) is not base  # held 3 s after the last report
    assert ev.goal(base, round(11.1e9)) is base

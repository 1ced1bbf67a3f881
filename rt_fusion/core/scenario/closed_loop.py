"""Closed loop: the scenario's ego driven by the planner's trajectories instead of its script.

The world is the scenario's (road, actors, their events); only the ego changes. Its motion is
integrated on demand, step by step (``world.DT``), as the sensor models ask for its state: a
sensor sample at time t renders from where the planned motion has brought the ego by t. So a
simulator (``sim_node``) can stream the sensors in time order, take the planner's answers as they
come, and the sensors see the consequences of the plans.

How a plan drives the ego (simplifications a real vehicle's controllers do not share):

- a plan made from the frame at ``stamp`` takes effect at ``stamp + actuation_delay_s`` (the
  planner's and the actuators' delay) and replaces the previous one there;
- longitudinal: the ego's speed follows the plan's speed profile (its acceleration plus a
  proportional correction of the speed error), the acceleration limited to ``max_accel`` /
  ``max_decel`` and changing at most ``max_jerk`` (actuators are not instantaneous);
- lateral: the plan's path is anchored where the ego truly was at the plan's stamp (its first
  point there, its first heading along the ego's true heading: the fusion's ``odom`` estimate
  does not move the world); the ego steers towards the path's offset ``lookahead_s`` ahead by
  pure pursuit (the arc through that point: heading rate 2 v sin α / L, α the angle to it, L its
  distance), the heading rate limited to ``max_yaw_rate`` and changing at most
  ``max_yaw_accel`` (the steering's own rate), and otherwise follows the lane's curvature by
  itself (lane keeping). A heading that jumped towards each new aim point at the limit rate
  instead chattered at ±0.5 rad/s every 0.3 s, a yaw no car makes and which the radar's
  ego-motion compensation turns into metres per second at 80 m;
- before the first plan takes effect the ego drives its script.

Every plan is applied at a fixed simulated time whatever the machine's speed: with the waits of
``need_plans`` (the simulator blocks until the plans due by then have arrived) a run is
deterministic.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.scenario.world import DT, Road, Track, World


@dataclasses.dataclass(frozen=True)
class Plan:
    """A planner's answer: its stamp [s, scenario time] and its points in the planner's frame
    (``odom``): time from the stamp [s], speed [m/s], position [m]."""

    stamp_s: float
    t: npt.NDArray[np.float64]
    v: npt.NDArray[np.float64]
    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    yaw0: float  # heading of the first point [rad]

    @staticmethod
    def from_points(stamp_s: float, points: Sequence[Any]) -> Plan:
        """From TrajectoryPoint-like objects (``t``, ``v``, ``x``, ``y``, ``yaw``)."""
        return Plan(
            stamp_s,
            np.array([p.t for p in points], np.float64),
            np.array([max(0.0, p.v) for p in points], np.float64),
            np.array([p.x for p in points], np.float64),
            np.array([p.y for p in points], np.float64),
            float(points[0].yaw),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class DriveParams:
    """Limits of the simulated ego's response to a plan."""

    actuation_delay_s: float = 0.2
    max_accel: float = 4.0  # [m/s²]
    max_decel: float = 9.0  # [m/s²]
    max_jerk: float = 20.0  # [m/s³] how fast the powertrain and brakes change the acceleration
    speed_time_constant_s: float = 0.3  # the speed controller's: accel = error / this
    max_yaw_rate: float = 0.5  # [rad/s] of the heading relative to the lane
    max_yaw_accel: float = 1.0  # [rad/s²] how fast the steering changes the heading rate
    lookahead_s: float = 1.0  # the steering aims at the plan's offset this far ahead


class DrivenEgo(Track):
    """The ego of a closed-loop run: a Track whose samples are integrated when first asked for.

    ``need_plans(t)`` is called before a sample at time t is integrated: a simulator waits there
    until the plans that take effect by t have arrived (and adds them with :meth:`add_plan`).
    """

    def __init__(
        self,
        road: Road,
        script: Track,
        params: DriveParams,
        need_plans: Callable[[float], None] | None = None,
    ) -> None:
        n = len(script.t)
        zeros = np.zeros(n)
        super().__init__(
            script.id,
            script.cls,
            script.size,
            script.t.copy(),
            zeros.copy(),
            zeros.copy(),
            zeros.copy(),
            zeros.copy(),
            zeros.copy(),
            zeros.copy(),
            zeros.copy(),
            script.siren,
        )
        self.road, self.script, self.params = road, script, params
        self.need_plans = need_plans
        self.plans: list[tuple[Plan, npt.NDArray[np.float64]]] = []  # with its offsets d
        self._effective: list[float] = []  # when each plan takes effect, ascending
        self.speed = np.zeros(n)
        self.psi = np.zeros(n)  # heading relative to the lane [rad]
        self.accel = np.zeros(n)  # [m/s²]
        self.turn = np.zeros(n)  # heading rate relative to the lane [rad/s]
        self.s[0], self.d[0] = script.s[0], script.d[0]
        self.speed[0] = math.hypot(script.vx[0], script.vy[0])
        self.filled = 0  # samples 0..filled are integrated
        self._pose(0, 1)

    def add_plan(self, plan: Plan) -> None:
        """A plan that takes effect at its stamp plus the actuation delay (a later stamp than
        every plan before: the planner answers frames in order)."""
        at = plan.stamp_s + self.params.actuation_delay_s
        if self._effective and at < self._effective[-1]:
            return  # an answer to an older frame than one already applied: ignored
        # The path moved onto the world: its first point onto the ego's true pose at the stamp.
        true = self.at(plan.stamp_s)
        turn = true['yaw'] - plan.yaw0
        c, s = math.cos(turn), math.sin(turn)
        dx, dy = plan.x - plan.x[0], plan.y - plan.y[0]
        wx = true['x'] + c * dx - s * dy
        wy = true['y'] + s * dx + c * dy
        _s, d = self.road.to_frenet(wx, wy)
        self.plans.append((plan, np.asarray(d, np.float64)))
        self._effective.append(at)

    def command(self, t: float) -> tuple[float, float, float]:
        """(speed and its rate at t, offset d ``lookahead_s`` later) that the newest plan in
        effect at t asks for; the script's before the first."""
        k = bisect.bisect_right(self._effective, t + 1e-12) - 1
        ahead, h = t + self.params.lookahead_s, 0.05
        if k < 0:

            def speed(at: float) -> float:
                st = self.script.at(at)
                return math.hypot(st['vx'], st['vy'])

            rate = (speed(t + h) - speed(max(t - h, 0.0))) / (t + h - max(t - h, 0.0))
            return speed(t), rate, self.script.at(ahead)['d']
        plan, d = self.plans[k]
        tau = t - plan.stamp_s
        v = np.interp([tau - h, tau, tau + h], plan.t, plan.v)
        return (
            float(v[1]),
            float(v[2] - v[0]) / (2 * h),
            float(np.interp(ahead - plan.stamp_s, plan.t, d)),
        )

    def ensure(self, index: int) -> None:
        """Integrates the samples up to ``index`` (included)."""
        index = min(index, len(self.t) - 1)
        if index <= self.filled:
            return
        first = self.filled + 1
        p = self.params
        for i in range(first, index + 1):
            t_prev = float(self.t[i - 1])
            if self.need_plans is not None:
                self.need_plans(t_prev)
            v_cmd, a_cmd, d_aim = self.command(t_prev)
            v0, psi0, a0 = self.speed[i - 1], self.psi[i - 1], self.accel[i - 1]
            # The plan's acceleration, and a correction of the speed error.
            want_a = a_cmd + (v_cmd - v0) / p.speed_time_constant_s
            want_a = min(max(want_a, -p.max_decel), p.max_accel)
            a = min(max(want_a, a0 - p.max_jerk * DT), a0 + p.max_jerk * DT)
            v = v0 + a * DT
            if v <= 0.0:
                v, a = 0.0, max(a, 0.0)  # stopped: the brakes hold it
            # Pure pursuit on the offset: aim at the plan's offset a look-ahead distance away.
            reach = max(v0 * p.lookahead_s, 2.0)
            alpha = math.atan2(d_aim - self.d[i - 1], reach) - psi0
            rate = 2.0 * v0 * math.sin(alpha) / math.hypot(reach, d_aim - self.d[i - 1])
            r0, dr = self.turn[i - 1], p.max_yaw_accel * DT
            rate = min(max(rate, r0 - dr, -p.max_yaw_rate), r0 + dr, p.max_yaw_rate)
            psi = psi0 + rate * DT
            self.turn[i] = rate
            self.speed[i] = v
            self.accel[i] = a
            self.psi[i] = psi
            self.s[i] = self.s[i - 1] + v0 * math.cos(psi0) * DT
            self.d[i] = self.d[i - 1] + v0 * math.sin(psi0) * DT
            self.filled = i
        self._pose(first, index + 1)

    def _pose(self, lo: int, hi: int) -> None:
        """World pose and velocity of samples lo..hi-1 from s, d, the speed and the heading."""
        x, y, road_yaw = self.road.to_world(self.s[lo:hi], self.d[lo:hi])
        yaw = road_yaw + self.psi[lo:hi]
        self.x[lo:hi], self.y[lo:hi], self.yaw[lo:hi] = x, y, yaw
        self.vx[lo:hi] = self.speed[lo:hi] * np.cos(yaw)
        self.vy[lo:hi] = self.speed[lo:hi] * np.sin(yaw)

    def at(self, t: float) -> dict[str, float]:
        """The state at time t, integrating up to there first."""
        self.ensure(math.floor(max(t, 0.0) / DT) + 1)
        return super().at(t)


def drive(world: World, params: DriveParams, need_plans: Callable[[float], None]) -> DrivenEgo:
    """Replaces the world's scripted ego by one driven by plans; returns it."""
    ego = DrivenEgo(world.road, world.ego, params, need_plans)
    world.ego = ego
    return ego

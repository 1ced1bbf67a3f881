"""Obstacles for the planner from what perception reports: vehicle frame to map, prediction.

The trajectory node hands over plain numbers (a fused object, a radar object) and the ego pose at
their stamp; everything that decides what an obstacle is lives here, ROS-free and tested.
"""

from __future__ import annotations

import math
from typing import Protocol

from rt_fusion.core.planning import frenet

MIN_SIZE_M = 0.3  # a reported extent below this is taken as this (a point is not a size)


class Pose(Protocol):
    """A planar pose in the map (odom) frame with the speed along its heading."""

    @property
    def x(self) -> float: ...
    @property
    def y(self) -> float: ...
    @property
    def yaw(self) -> float: ...
    @property
    def v(self) -> float: ...


def to_map(
    x: float, y: float, yaw: float, vx: float, vy: float, ego: Pose
) -> tuple[float, float, float, float, float]:
    """Position, heading and velocity over ground from the vehicle frame to the map."""
    c, s = math.cos(ego.yaw), math.sin(ego.yaw)
    return (
        ego.x + c * x - s * y,
        ego.y + s * x + c * y,
        ego.yaw + yaw,
        c * vx - s * vy,
        s * vx + c * vy,
    )


def from_track(
    x: float,
    y: float,
    yaw: float,
    vx: float,
    vy: float,
    length: float,
    width: float,
    yaw_rate: float,
    position_std: float,
    ego: Pose,
    *,
    pedestrian: bool = False,
    pedestrian_growth: float | None = None,
    yield_to_pedestrians: bool = False,
) -> frenet.Obstacle:
    """A fused object (vehicle frame, velocity over ground) as a map-frame obstacle."""
    mx, my, myaw, mvx, mvy = to_map(x, y, yaw, vx, vy, ego)
    return frenet.Obstacle(
        mx,
        my,
        myaw,
        max(length, MIN_SIZE_M),
        max(width, MIN_SIZE_M),
        mvx,
        mvy,
        yaw_rate,
        position_std,
        growth=pedestrian_growth if pedestrian else None,
        yield_to=pedestrian and yield_to_pedestrians,
    )


def from_radar(
    x: float,
    y: float,
    orientation: float,
    vx_rel: float,
    vy_rel: float,
    length: float,
    width: float,
    ego: Pose,
) -> frenet.Obstacle:
    """A radar object (velocity relative to the moving sensor; extent and orientation may be
    missing, as NaN or 0) as a map-frame obstacle."""
    length = length if math.isfinite(length) and length > 0 else 1.0
    width = width if math.isfinite(width) and width > 0 else 1.0
    yaw = orientation if math.isfinite(orientation) else 0.0
    # Radar velocities are relative to the sensor: add the ego's own motion.
    mx, my, myaw, mvx, mvy = to_map(x, y, yaw, vx_rel + ego.v, vy_rel, ego)
    return frenet.Obstacle(mx, my, myaw, length, width, mvx, mvy)


def advance(o: frenet.Obstacle, dt: float) -> frenet.Obstacle:
    """The obstacle moved on by ``dt`` seconds (its stamp was older than now), CTRV: the same
    motion as :func:`frenet.predict` for one obstacle, in scalar arithmetic (the planner node
    advances every obstacle on every cycle; numpy on one-element arrays cost it ~40 µs each)."""
    if dt <= 0:
        return o
    w, vx, vy = o.yaw_rate, o.vx, o.vy
    if abs(w) > 1e-4:
        sin_wt, cos_wt = math.sin(w * dt), math.cos(w * dt)
        dx = (vx * sin_wt - vy * (1 - cos_wt)) / w
        dy = (vy * sin_wt + vx * (1 - cos_wt)) / w
        yaw = o.yaw + w * dt
    else:
        dx, dy, yaw = vx * dt, vy * dt, o.yaw
    return frenet.Obstacle(
        o.x + dx, o.y + dy, yaw, o.length, o.width, vx, vy, w, o.std, o.growth, o.yield_to
    )

"""Closed-loop test harness for the planner: the ego follows its plans exactly, obstacles move as
their ground truth says, and true rectangles are checked for overlap (separating axes)."""

from __future__ import annotations

import dataclasses

import numpy as np

from rt_fusion.core.planning.frenet import FrenetPlanner, FrenetState, Obstacle, Trajectory


def corners(
    x: np.ndarray, y: np.ndarray, yaw: np.ndarray, length: float, width: float
) -> np.ndarray:
    """(K, 4, 2) corners of rectangles."""
    c, s = np.cos(yaw), np.sin(yaw)
    local = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1]]) * [length / 2, width / 2]
    return np.stack(
        [np.stack((x + lx * c - ly * s, y + lx * s + ly * c), axis=-1) for lx, ly in local], axis=1
    )


def overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per step, do the convex quads a (K, 4, 2) and b (K, 4, 2) overlap? (separating axes)"""
    hit = np.ones(a.shape[0], bool)
    for poly in (a, b):
        for i in range(4):
            edge = poly[:, (i + 1) % 4] - poly[:, i]
            axis = np.stack((-edge[:, 1], edge[:, 0]), axis=-1)
            pa = np.einsum('kij,kj->ki', a, axis)
            pb = np.einsum('kij,kj->ki', b, axis)
            hit &= (pa.max(1) >= pb.min(1)) & (pb.max(1) >= pa.min(1))
    return hit


def truth(o: Obstacle, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ground-truth motion of an obstacle (constant turn rate and velocity, as predicted)."""
    from rt_fusion.core.planning.frenet import predict  # noqa: PLC0415

    x, y, yaw = predict([o], t)
    return x[0], y[0], yaw[0]


def trajectory_collides(
    traj: Trajectory, obstacles: list[Obstacle], length: float, width: float, t0: float = 0.0
) -> bool:
    """Does the ego's rectangle along ``traj`` overlap any obstacle's true rectangle?"""
    ego = corners(traj.x, traj.y, traj.yaw, length, width)
    for o in obstacles:
        ox, oy, oyaw = truth(o, traj.t + t0)
        if overlap(ego, corners(ox, oy, oyaw, o.length, o.width)).any():
            return True
    return False


@dataclasses.dataclass
class Run:
    """What a closed-loop run did."""

    xs: list[float]
    ys: list[float]
    speeds: list[float]
    accels: list[float]
    statuses: list[int]
    collided: bool
    min_gap: float


def closed_loop(
    planner: FrenetPlanner,
    start: FrenetState,
    obstacles: list[Obstacle],
    seconds: float,
    step: float = 0.1,
) -> Run:
    """Replans every ``step`` from the previous plan's state; the ego follows the plan."""
    p = planner.p
    run = Run([], [], [], [], [], False, np.inf)
    state = start
    for k in range(round(seconds / step)):
        now = k * step
        moved = [
            dataclasses.replace(
                o,
                x=float(truth(o, np.array([now]))[0][0]),
                y=float(truth(o, np.array([now]))[1][0]),
                yaw=float(truth(o, np.array([now]))[2][0]),
                vx=o.vx * np.cos(o.yaw_rate * now) - o.vy * np.sin(o.yaw_rate * now),
                vy=o.vx * np.sin(o.yaw_rate * now) + o.vy * np.cos(o.yaw_rate * now),
            )
            for o in obstacles
        ]
        traj = planner.plan(state, moved)
        run.statuses.append(traj.status)
        run.xs.append(float(traj.x[0]))
        run.ys.append(float(traj.y[0]))
        run.speeds.append(float(traj.v[0]))
        run.accels.append(float(traj.s_dd[0]))
        seg = dataclasses.replace(traj, t=traj.t[:2], x=traj.x[:2], y=traj.y[:2], yaw=traj.yaw[:2])
        if trajectory_collides(seg, obstacles, p.vehicle_length, p.vehicle_width, t0=now):
            run.collided = True
        for o in obstacles:
            ox, oy, _ = truth(o, np.array([now]))
            run.min_gap = min(run.min_gap, float(np.hypot(ox[0] - traj.x[0], oy[0] - traj.y[0])))
        state = traj.state_at(step)
    return run

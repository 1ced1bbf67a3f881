"""The ego's recent poses, looked up at a message's stamp.

Detections arrive in the vehicle frame at the time they were measured. Turning them into the
planning frame with whatever odometry came last is wrong by the ego's motion in between: during
a lane change the heading moves 0.1 rad/s, and an object 30 m ahead lands a metre to the side
for every 0.3 s of mismatch. :class:`PoseHistory` keeps the last few seconds of poses and
interpolates the one at the detection's stamp (what tf2 does with a buffer).
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple


class EgoPose(NamedTuple):
    """Pose in the planning frame [m, m, rad] and the speed along the heading [m/s]."""

    x: float
    y: float
    yaw: float
    v: float


class PoseHistory:
    """Poses by stamp (ns), oldest dropped beyond ``span_ns``; stamps must not go back."""

    def __init__(
        self, span_ns: int = 2_000_000_000, max_extrapolate_ns: int = 100_000_000
    ) -> None:
        self.span_ns = span_ns
        self.max_extrapolate_ns = max_extrapolate_ns
        self._stamps: list[int] = []
        self._poses: list[EgoPose] = []
        self.out_of_order = 0
        self.non_finite = 0  # poses with NaN/inf, dropped
        self.outside = 0  # lookups beyond the history (answered with the nearest pose)

    def __len__(self) -> int:
        return len(self._stamps)

    def add(self, stamp_ns: int, pose: EgoPose) -> None:
        """Appends a pose; one older than the newest, or with a non-finite value, is counted
        and dropped."""
        if not math.isfinite(pose.x + pose.y + pose.yaw + pose.v):
            self.non_finite += 1
            return
        if self._stamps and stamp_ns < self._stamps[-1]:
            self.out_of_order += 1
            return
        self._stamps.append(stamp_ns)
        self._poses.append(pose)
        cut = bisect.bisect_left(self._stamps, stamp_ns - self.span_ns)
        if cut > 64:  # trim in chunks: list deletion at the front is O(n)
            del self._stamps[:cut]
            del self._poses[:cut]

    def latest(self) -> tuple[int, EgoPose] | None:
        """The newest (stamp, pose), or None."""
        return (self._stamps[-1], self._poses[-1]) if self._stamps else None

    def at(self, stamp_ns: int) -> EgoPose | None:
        """The pose at ``stamp_ns``: interpolated between neighbours, extrapolated at the
        newest pose's speed and heading up to ``max_extrapolate_ns`` ahead, else the nearest
        (counted in ``outside``). None when empty."""
        stamps = self._stamps
        if not stamps:
            return None
        i = bisect.bisect_left(stamps, stamp_ns)
        if i == len(stamps):
            t0, p = stamps[-1], self._poses[-1]
            dt = stamp_ns - t0
            if dt > self.max_extrapolate_ns:
                self.outside += 1
                dt = self.max_extrapolate_ns
            s = p.v * dt / 1e9
            return EgoPose(p.x + s * math.cos(p.yaw), p.y + s * math.sin(p.yaw), p.yaw, p.v)
        if stamps[i] == stamp_ns or i == 0:
            if i == 0 and stamps[0] != stamp_ns:
                self.outside += 1
            return self._poses[i]
        t0, t1 = stamps[i - 1], stamps[i]
        a, b = self._poses[i - 1], self._poses[i]
        w = (stamp_ns - t0) / (t1 - t0)
        dyaw = math.remainder(b.yaw - a.yaw, math.tau)
        return EgoPose(
            a.x + w * (b.x - a.x), a.y + w * (b.y - a.y), a.yaw + w * dyaw, a.v + w * (b.v - a.v)
        )

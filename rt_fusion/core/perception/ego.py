"""Ego motion from the sensors: speed from the vehicle or the radar's stationary returns, fused
with the IMU's forward acceleration; heading from the IMU's yaw rate.

Speed is a scalar Kalman filter. Prediction integrates the IMU's forward acceleration (its bias
makes the variance grow by ``accel_std``² per second). Measurements:

- the **vehicle speed** (wheel odometry from the vehicle CAN, ``~/in/speed``) when it arrives;
- otherwise the **radar**: a stationary object seen from a vehicle moving at ``v`` has a relative
  velocity of ``-v`` along the vehicle's x axis, whatever its bearing. Each return with a finite
  relative velocity votes ``-vx_rel``; the largest group of votes within ``consensus_mps`` of each
  other, if it holds at least ``min_votes`` returns and is consistent with the prediction (a
  3-sigma gate once the filter is initialised), is the measurement (its median). Traffic moving
  with the ego votes ~0 and oncoming traffic votes above the true speed; the stationary world
  (guard rails, parked cars, signs, clutter) is what agrees most. With too few stationary returns
  in view the filter coasts on the IMU and its variance grows, which the odometry covariance
  reports.

The pose is dead-reckoned in the local ``odom`` frame (x, y, yaw) with the speed and the IMU's
rotation between frames; ``pose_at`` interpolates the recent history (radar scans are older than
the frame they are fused into). Time is passed in.
"""

from __future__ import annotations

import bisect
import dataclasses
import math

import numpy as np

from rt_fusion.core.params import param
from rt_fusion.core.perception.track_kernels import NUMPY, kernels, pending


@dataclasses.dataclass(frozen=True)
class EgoParams:
    """Noise and voting parameters of the ego-motion estimator."""

    accel_std: float = param(
        'forward acceleration noise + bias (speed random walk)', unit='m/s²', default=0.3, low=0.0
    )
    radar_speed_std: float = param(
        'std of a radar stationary-consensus speed', unit='m/s', default=0.3, low=0.01
    )
    vehicle_speed_std: float = param(
        'std of the vehicle speed input', unit='m/s', default=0.05, low=0.001
    )
    consensus_mps: float = param(
        'width of the stationary-return consensus window', unit='m/s', default=0.6, low=0.05
    )
    min_votes: int = param('returns needed for a radar speed measurement', default=2, low=1)
    initial_speed_std: float = param(
        'speed std before any measurement', unit='m/s', default=30.0, low=0.1
    )


@dataclasses.dataclass(slots=True)
class EgoPose:
    """Pose in ``odom`` [m, m, rad], speed [m/s], yaw rate [rad/s], and their uncertainty."""

    stamp_ns: int = 0
    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0
    v: float = 0.0
    yaw_rate: float = 0.0
    v_var: float = 900.0  # [m²/s²]
    xy_var: float = 0.0  # [m²], grows with the speed's variance
    speed_source: str = 'none'  # the last speed measurement's: vehicle, radar, none


class EgoMotion:
    """See the module docstring."""

    def __init__(self, params: EgoParams | None = None, jit: bool | None = None) -> None:
        self.p = params or EgoParams()
        self._jit = jit
        k = kernels(jit)  # numba or numpy (track_kernels.kernels)
        self._consensus = k.consensus
        self._upgrade = k is NUMPY and pending()  # numpy only until numba is warm
        self.pose = EgoPose(v_var=self.p.initial_speed_std**2)
        self._history: list[tuple[int, float, float, float]] = []  # (stamp, x, y, yaw)
        self._initialised = False
        self.radar_updates = 0
        self.radar_rejected = 0
        self.vehicle_updates = 0

    # -- measurements --------------------------------------------------------------------------

    def _update(self, z: float, var: float) -> None:
        pose = self.pose
        k = pose.v_var / (pose.v_var + var)
        pose.v += k * (z - pose.v)
        pose.v_var *= 1.0 - k
        self._initialised = True

    def vehicle_speed(self, speed_mps: float) -> None:
        """A wheel-odometry speed [m/s] (finite: the node drops the rest)."""
        self._update(float(speed_mps), self.p.vehicle_speed_std**2)
        self.vehicle_updates += 1
        self.pose.speed_source = 'vehicle'

    def radar_speed(self, vx_rel: np.ndarray) -> float | None:
        """Speed from one scan's relative forward velocities (vehicle axes) [m/s], or None.

        Applied to the filter when consistent with it; returns the consensus (or None)."""
        if self._upgrade and not pending():  # numba once it is warm (track_kernels.pending)
            self._consensus, self._upgrade = kernels(self._jit).consensus, False
        z, count = self._consensus(
            np.ascontiguousarray(vx_rel, dtype=np.float64), float(self.p.consensus_mps)
        )
        if count < self.p.min_votes:
            return None
        var = self.p.radar_speed_std**2
        pose = self.pose
        if self._initialised and (z - pose.v) ** 2 > 9.0 * (pose.v_var + var):
            self.radar_rejected += 1
            return z
        self._update(z, var)
        self.radar_updates += 1
        pose.speed_source = 'radar'
        return z

    # -- prediction ----------------------------------------------------------------------------

    def advance(
        self, stamp_ns: int, dyaw: float | None, yaw_rate: float | None, accel_x: float | None
    ) -> EgoPose:
        """Moves the pose to ``stamp_ns``: rotation ``dyaw`` since the last call (the IMU's,
        integrated) or ``yaw_rate`` × dt, forward acceleration from the IMU (None: coasting at
        constant speed). Returns the pose (a live object: copy it to keep it)."""
        pose = self.pose
        dt = (stamp_ns - pose.stamp_ns) / 1e9 if self._history else 0.0
        if yaw_rate is not None:
            pose.yaw_rate = yaw_rate
        if dyaw is None:
            dyaw = pose.yaw_rate * dt
        if 0.0 < dt < 1.0:
            v0 = pose.v
            if accel_x is not None and self._initialised:
                pose.v = max(0.0, pose.v + accel_x * dt)
            pose.v_var += (self.p.accel_std * dt) ** 2 + (0.0 if accel_x is not None else dt * 0.5)
            v = 0.5 * (v0 + pose.v)
            mid = pose.yaw + dyaw / 2
            pose.x += v * dt * math.cos(mid)
            pose.y += v * dt * math.sin(mid)
            pose.yaw = math.remainder(pose.yaw + dyaw, math.tau)
            pose.xy_var += pose.v_var * dt * dt
        pose.stamp_ns = stamp_ns
        self._history.append((stamp_ns, pose.x, pose.y, pose.yaw))
        if len(self._history) > 256:
            del self._history[:128]
        return pose

    def pose_at(self, stamp_ns: int) -> tuple[float, float, float]:
        """(x, y, yaw) in odom at ``stamp_ns``: interpolated in the history, else extrapolated
        from the nearest end at the current speed and yaw rate."""
        hist = self._history
        if not hist:
            return (self.pose.x, self.pose.y, self.pose.yaw)
        stamps = [h[0] for h in hist]
        i = bisect.bisect_left(stamps, stamp_ns)
        if 0 < i < len(hist):
            t0, x0, y0, a0 = hist[i - 1]
            t1, x1, y1, a1 = hist[i]
            f = (stamp_ns - t0) / (t1 - t0) if t1 > t0 else 0.0
            return (
                x0 + f * (x1 - x0),
                y0 + f * (y1 - y0),
                a0 + f * math.remainder(a1 - a0, math.tau),
            )
        t, x, y, a = hist[0] if i == 0 else hist[-1]
        dt = (stamp_ns - t) / 1e9
        v, w = self.pose.v, self.pose.yaw_rate
        return (x + v * dt * math.cos(a), y + v * dt * math.sin(a), a + w * dt)

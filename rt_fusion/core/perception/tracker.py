"""Multi-object tracking in the ``odom`` frame: constant-velocity Kalman filters, gated
assignment, M-of-N confirmation, coasting, deletion, class vote and existence.

Why constant velocity in plain numpy: the inputs are radar objects at 13.6 Hz with good Doppler
velocity; over the 70 ms between scans a CV model's error is below the radar's own noise for
vehicles and pedestrians, and a 4-state linear filter in numpy is a few µs per track. CTRV would
need an unscented or extended filter for a yaw rate the radar does not measure. filterpy wraps
the same equations (and is unmaintained since 2018); the update here is batched over all tracks.

Per scan (:meth:`Tracker.step`): every track is predicted to the scan time (process noise
``accel_std`` as a white-acceleration model, so coasting tracks' covariances grow); detections
(positions and over-ground velocities in ``odom`` with their covariances) are gated by the squared
Mahalanobis distance of the position innovation (``gate_chi2``, 2 degrees of freedom) and
assigned with :func:`scipy.optimize.linear_sum_assignment`; matched tracks are updated with
position and velocity (or position only: a camera detection). A detection nobody takes starts a
tentative track; a tentative track is confirmed after ``confirm_hits`` hits within
``confirm_window_s`` of its birth and deleted otherwise; a confirmed track is deleted when no
sensor has detected it for ``max_coast_s`` or when its position std exceeds ``max_position_std``.
Life cycles count time, not scans, because sensors at different rates feed one tracker (radar at
13.6 Hz, camera at 30 Hz): a step only counts as a miss for the tracks the stepping sensor covers
(``covers``: its field of view and range), so an object beyond the camera's reach is not worn
down by camera frames. Track ids count up from 1 and never come from a
sensor. Class: the sum of each detection's class probability per class (a vote); existence: a
running estimate from hits and misses, weighted by the detections' own existence probabilities.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from rt_fusion.core.params import param

F64 = npt.NDArray[np.float64]


@dataclasses.dataclass(frozen=True)
class TrackerParams:
    """Life-cycle and noise parameters of the tracker."""

    accel_std: float = param('process noise (white acceleration)', unit='m/s²', default=2.0)
    gate_chi2: float = param(
        'association gate: squared Mahalanobis distance of the position (2 dof; 13.8: 99.9 %)',
        default=13.8,
        low=1.0,
    )
    confirm_hits: int = param('hits that confirm a tentative track', default=3, low=1)
    confirm_window_s: float = param(
        "time from a track's birth within which those hits must come (4 radar cycles)",
        unit='s',
        default=0.3,
        low=0.0,
    )
    max_coast_s: float = param(
        'a confirmed track that no sensor detected for longer than this is deleted (3 radar '
        'cycles survive, 4 do not)',
        unit='s',
        default=0.25,
        low=0.0,
    )
    max_position_std: float = param(
        'a track less certain than this is deleted', unit='m', default=4.0, low=0.1
    )
    initial_velocity_std: float = param(
        'velocity std of a new track without a velocity measurement', unit='m/s', default=10.0
    )
    merge_distance_m: float = param(
        'two confirmed tracks closer than this with similar velocity are one object: the younger '
        'is dropped',
        unit='m',
        default=1.5,
        low=0.0,
    )


@dataclasses.dataclass(slots=True)
class Detection:
    """One measured object in ``odom``: position [m], over-ground velocity [m/s] (NaN: none)
    and their stds, class, class probability and existence probability [0, 1]."""

    x: float
    y: float
    vx: float = math.nan
    vy: float = math.nan
    pos_std: float = 0.5
    vel_std: float = 0.5
    cls: int = 0
    cls_prob: float = 1.0
    exist_prob: float = 1.0
    length: float = math.nan
    width: float = math.nan
    sensor_id: int = -1  # the sensor's own id, for diagnostics only (never the track's id)
    source: int = 1  # the sensor kind (rt_fusion_msgs/Object SOURCE_*: 1 radar, 2 camera)
    can_birth: bool = True  # may start a track when no track takes it
    # Full position covariance (xx, xy, yy) [m²] when the error is not round (a camera's depth
    # error lies along its line of sight); None: pos_std² in both axes.
    cov_xy: tuple[float, float, float] | None = None

    def position_cov(self) -> tuple[float, float, float]:
        """(xx, xy, yy) of the position covariance [m²]."""
        if self.cov_xy is not None:
            return self.cov_xy
        var = self.pos_std**2
        return var, 0.0, var


def along_ray_cov(
    bearing: float, along_std: float, across_std: float
) -> tuple[float, float, float]:
    """(xx, xy, yy) of a position known to ``along_std`` along the direction ``bearing`` [rad]
    (a monocular camera's depth) and to ``across_std`` across it (its bearing × range) [m²]."""
    c, s = math.cos(bearing), math.sin(bearing)
    a2, c2 = along_std**2, across_std**2
    return a2 * c * c + c2 * s * s, (a2 - c2) * c * s, a2 * s * s + c2 * c * c


@dataclasses.dataclass(slots=True)
class Track:
    """A tracked object: state (x, y, vx, vy) in odom and its covariance."""

    id: int
    x: F64  # (4,)
    P: F64  # (4, 4)
    stamp_ns: int
    hits: int = 1
    scans: int = 1
    misses: int = 0
    confirmed: bool = False
    existence: float = 0.5
    votes: dict[int, float] = dataclasses.field(default_factory=dict)
    length: float = math.nan
    width: float = math.nan
    born_ns: int = 0
    last_hit_ns: int = 0
    sources: int = 0  # sensor kinds that have detected it (bits of Detection.source)
    scores: dict[int, float] = dataclasses.field(default_factory=dict)  # source -> last score

    @property
    def cls(self) -> int:
        """The class with the most votes (0 without any)."""
        return max(self.votes, key=self.votes.__getitem__) if self.votes else 0

    @property
    def cls_prob(self) -> float:
        """The winning class's share of the votes."""
        total = sum(self.votes.values())
        return self.votes[self.cls] / total if total > 0 else 0.0

    def predicted(self, stamp_ns: int, accel_std: float) -> tuple[F64, F64]:
        """State and covariance at ``stamp_ns`` without changing the track."""
        dt = (stamp_ns - self.stamp_ns) / 1e9
        f, q = _fq(dt, accel_std)
        return f @ self.x, f @ self.P @ f.T + q


@functools.lru_cache(maxsize=64)
def _fq(dt: float, accel_std: float) -> tuple[F64, F64]:
    f = np.eye(4)
    f[0, 2] = f[1, 3] = dt
    q1 = accel_std**2 * np.array([[dt**4 / 4, dt**3 / 2], [dt**3 / 2, dt**2]])
    q = np.zeros((4, 4))
    q[np.ix_([0, 2], [0, 2])] = q1
    q[np.ix_([1, 3], [1, 3])] = q1
    return f, q


class Tracker:
    """See the module docstring."""

    def __init__(self, params: TrackerParams | None = None) -> None:
        self.p = params or TrackerParams()
        self.tracks: list[Track] = []
        self._next_id = 1
        self.stamp_ns = 0
        self.births = 0
        self.deaths = 0

    def predict(self, stamp_ns: int) -> None:
        """Moves every track to ``stamp_ns`` (batched per common time step)."""
        groups: dict[int, list[Track]] = {}
        for t in self.tracks:
            if stamp_ns > t.stamp_ns:
                groups.setdefault(stamp_ns - t.stamp_ns, []).append(t)
        for dt_ns, tracks in groups.items():
            f, q = _fq(dt_ns / 1e9, self.p.accel_std)
            xs = np.array([t.x for t in tracks]) @ f.T
            ps = f @ np.array([t.P for t in tracks]) @ f.T + q
            for t, x, cov in zip(tracks, xs, ps, strict=True):
                t.x, t.P, t.stamp_ns = x, cov, stamp_ns
        self.stamp_ns = max(self.stamp_ns, stamp_ns)

    def mahalanobis2(self, tracks: Sequence[Track], detections: Sequence[Detection]) -> F64:
        """(tracks, detections) squared Mahalanobis distances of the position innovations,
        S = P_xy + R_xy, with the 2×2 inverse in closed form over the whole matrix."""
        if not tracks or not detections:
            return np.zeros((len(tracks), len(detections)))
        tx = np.array([t.x[:2] for t in tracks])
        pa = np.array([t.P[0, 0] for t in tracks])[:, None]
        pb = np.array([t.P[0, 1] for t in tracks])[:, None]
        pc = np.array([t.P[1, 1] for t in tracks])[:, None]
        dx = np.array([d.x for d in detections])[None, :] - tx[:, :1]
        dy = np.array([d.y for d in detections])[None, :] - tx[:, 1:]
        r = np.array([d.position_cov() for d in detections]).T[:, None, :]
        a, b, c = pa + r[0], pb + r[1], pc + r[2]
        det = a * c - b * b
        d2: F64 = (c * dx * dx - 2.0 * b * dx * dy + a * dy * dy) / det
        return d2

    def associate(self, detections: Sequence[Detection]) -> list[tuple[int, int]]:
        """(track index, detection index) pairs within the gate, by least total distance."""
        if not self.tracks or not detections:
            return []
        cost = self.mahalanobis2(self.tracks, detections)
        gated = np.where(cost <= self.p.gate_chi2, cost, 1e9)
        rows, cols = linear_sum_assignment(gated)
        return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if gated[r, c] < 1e9]

    def _update(self, t: Track, d: Detection) -> None:
        has_v = math.isfinite(d.vx) and math.isfinite(d.vy)
        h = np.eye(4) if has_v else np.eye(4)[:2]
        z = np.array([d.x, d.y, d.vx, d.vy]) if has_v else np.array([d.x, d.y])
        r = np.diag([0.0, 0.0] + ([d.vel_std**2] * 2 if has_v else []))
        xx, xy, yy = d.position_cov()
        r[:2, :2] = [[xx, xy], [xy, yy]]
        s = h @ t.P @ h.T + r
        k = np.linalg.solve(s, h @ t.P).T
        t.x = t.x + k @ (z - h @ t.x)
        t.P = (np.eye(4) - k @ h) @ t.P
        t.P = 0.5 * (t.P + t.P.T)
        self._bookkeep(t, d)

    def _update_batch(self, tracks: list[Track], dets: list[Detection]) -> None:
        """Position + velocity updates of many tracks at once (H = I): K = P (P + R)⁻¹."""
        if not tracks:
            return
        ps = np.array([t.P for t in tracks])
        xs = np.array([t.x for t in tracks])
        z = np.array([[d.x, d.y, d.vx, d.vy] for d in dets])
        r = np.zeros_like(ps)
        pos = np.array([d.position_cov() for d in dets])
        vel = np.array([d.vel_std**2 for d in dets])
        r[:, 0, 0], r[:, 0, 1], r[:, 1, 1] = pos[:, 0], pos[:, 1], pos[:, 2]
        r[:, 1, 0] = pos[:, 1]
        r[:, 2, 2] = r[:, 3, 3] = vel
        k = np.swapaxes(np.linalg.solve(ps + r, ps), 1, 2)  # (S⁻¹ P)ᵀ = P S⁻¹ (both symmetric)
        xs = xs + np.einsum('nij,nj->ni', k, z - xs)
        ps = ps - k @ ps
        ps = 0.5 * (ps + np.swapaxes(ps, 1, 2))
        for t, d, x, cov in zip(tracks, dets, xs, ps, strict=True):
            t.x, t.P = x, cov
            self._bookkeep(t, d)

    def _bookkeep(self, t: Track, d: Detection) -> None:
        t.hits += 1
        t.misses = 0
        t.sources |= d.source
        t.scores[d.source] = d.exist_prob
        t.votes[d.cls] = t.votes.get(d.cls, 0.0) + d.cls_prob
        t.existence = 0.7 * t.existence + 0.3 * (0.5 + 0.5 * d.exist_prob)
        if math.isfinite(d.length) and d.length > 0:
            t.length = d.length
        if math.isfinite(d.width) and d.width > 0:
            t.width = d.width

    def _birth(self, d: Detection, stamp_ns: int) -> Track:
        has_v = math.isfinite(d.vx) and math.isfinite(d.vy)
        x = np.array([d.x, d.y, d.vx if has_v else 0.0, d.vy if has_v else 0.0])
        vstd = d.vel_std if has_v else self.p.initial_velocity_std
        cov = np.diag([0.0, 0.0, vstd**2, vstd**2])
        xx, xy, yy = d.position_cov()
        cov[:2, :2] = [[xx, xy], [xy, yy]]
        t = Track(
            self._next_id,
            x,
            cov,
            stamp_ns,
            born_ns=stamp_ns,
            last_hit_ns=stamp_ns,
            length=d.length,
            width=d.width,
        )
        t.votes[d.cls] = d.cls_prob
        t.sources = d.source
        t.scores[d.source] = d.exist_prob
        t.existence = 0.5 * d.exist_prob
        self._next_id += 1
        self.births += 1
        return t

    def step(
        self,
        stamp_ns: int,
        detections: Sequence[Detection],
        birth: bool = True,
        covers: Callable[[Track], bool] | None = None,
    ) -> None:
        """One scan: predict, associate, update, confirm, delete, merge, birth (``birth``:
        whether unassigned detections may start tracks; not while the ego speed is unknown;
        ``covers``: whether the sensor could have seen a track, None: all of them)."""
        self.predict(stamp_ns)
        pairs = self.associate(detections)
        taken_t = {i for i, _ in pairs}
        taken_d = {j for _, j in pairs}
        full = [(i, j) for i, j in pairs if math.isfinite(detections[j].vx + detections[j].vy)]
        self._update_batch([self.tracks[i] for i, _ in full], [detections[j] for _, j in full])
        for i, j in pairs:
            if (i, j) not in full:
                self._update(self.tracks[i], detections[j])
        p = self.p
        keep = []
        window_ns = round(p.confirm_window_s * 1e9)
        coast_ns = round(p.max_coast_s * 1e9)
        for i, t in enumerate(self.tracks):
            if i in taken_t:
                t.scans += 1
                t.last_hit_ns = stamp_ns
            elif covers is None or covers(t):
                t.scans += 1
                t.misses += 1
                t.existence *= 0.8
            young = stamp_ns - t.born_ns <= window_ns
            if not t.confirmed and t.hits >= p.confirm_hits and young:
                t.confirmed = True
            pos_std = math.sqrt(max(t.P[0, 0], t.P[1, 1]))
            dead = (
                (not t.confirmed and not young)
                or (t.confirmed and stamp_ns - t.last_hit_ns > coast_ns)
                or pos_std > p.max_position_std
            )
            if dead:
                self.deaths += 1
            else:
                keep.append(t)
        self.tracks = self._merge(keep)
        if not birth:
            return
        existing = list(self.tracks)
        free = [d for j, d in enumerate(detections) if j not in taken_d and d.can_birth]
        if not free:
            return
        # A free detection inside an existing track's gate is a second return of a tracked
        # object (a truck's cab and rear), not a new one.
        near: list[bool] = (
            np.any(self.mahalanobis2(existing, free) <= self.p.gate_chi2, axis=0).tolist()
            if existing
            else [False] * len(free)
        )
        for d, inside in zip(free, near, strict=True):
            if not inside:
                self.tracks.append(self._birth(d, stamp_ns))

    def _merge(self, tracks: list[Track]) -> list[Track]:
        """Drops the younger of two confirmed tracks on one object."""
        conf = sorted((t for t in tracks if t.confirmed), key=lambda t: t.born_ns)
        if len(conf) < 2:
            return tracks
        x = np.array([t.x for t in conf])
        pos = np.linalg.norm(x[:, None, :2] - x[None, :, :2], axis=2)
        vel = np.linalg.norm(x[:, None, 2:] - x[None, :, 2:], axis=2)
        same = np.triu((pos < self.p.merge_distance_m) & (vel < 2.0), k=1)
        dropped: set[int] = set()
        for i, j in zip(*np.nonzero(same), strict=True):
            if conf[i].id not in dropped and conf[j].id not in dropped:
                dropped.add(conf[j].id)  # the younger (sorted by birth)
                self.deaths += 1
        return [t for t in tracks if t.id not in dropped]

    def coast(self) -> None:
        """A scan that could not be used (the radar is missing): every track misses."""
        for t in self.tracks:
            t.misses += 1
            t.scans += 1

    def confirmed(self) -> list[Track]:
        """The tracks a planner should see."""
        return [t for t in self.tracks if t.confirmed]

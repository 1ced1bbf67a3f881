"""Multi-object tracking in the ``odom`` frame: constant-velocity Kalman filters, gated
assignment, M-of-N confirmation, coasting, deletion, class vote and existence.

Why constant velocity in plain numpy: the inputs are radar objects at 13.6 Hz with good Doppler
velocity; over the 70 ms between scans a CV model's error is below the radar's own noise for
vehicles and pedestrians, and a 4-state linear filter in numpy is a few µs per track. CTRV would
need an unscented or extended filter for a yaw rate the radar does not measure. filterpy wraps
the same equations per filter object (and is unmaintained since 2018); here the tracks are rows of
arrays (state, covariance, life cycle, votes), so one scan is a fixed number of array operations
whatever the number of tracks: prediction, gating, the Kalman updates and the life cycle are
batched, and only the assignment (``linear_sum_assignment``) and rare merges are not.

Per scan (:meth:`Tracker.step`): every track is predicted to the scan time (process noise
``accel_std`` as a white-acceleration model, so coasting tracks' covariances grow); detections
(positions and over-ground velocities in ``odom`` with their covariances) are gated by the squared
Mahalanobis distance of the position innovation (``gate_chi2``, 2 degrees of freedom) and
assigned with :func:`scipy.optimize.linear_sum_assignment`; matched tracks are updated with
position and velocity (or position only: a camera detection). A detection nobody takes starts a
tentative track; a tentative track is confirmed after ``confirm_hits`` hits within
``confirm_window_s`` of its birth and deleted otherwise; a confirmed track is deleted when no
detection able to start a track has hit it for ``max_coast_s`` or when its position std exceeds
``max_position_std``. Detections that may not start tracks (``can_birth`` false: a camera's far or
weak detections, whose depth cannot place an object) update a track but do not keep it alive: a
track the radar lost at 70 m is not carried on by camera bearings alone, drifting in depth.
Life cycles count time, not scans, because sensors at different rates feed one tracker (radar at
13.6 Hz, camera at 30 Hz): a step only counts as a miss for the tracks the stepping sensor covers
(``covers``: its field of view and range), so an object beyond the camera's reach is not worn
down by camera frames. Track ids count up from 1 and never come from a
sensor. Class: the sum of each detection's class probability per class (a vote); existence: a
running estimate from hits and misses, weighted by the detections' own existence probabilities.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from rt_fusion.core.params import param

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]
MAX_CLASSES = 16  # class ids a detection may carry (votes are a column per class)
MAX_SOURCES = 8  # sensor kinds (Detection.source values below this)


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
        'a confirmed track that no detection able to start a track hit for longer than this is '
        'deleted (3 radar cycles survive, 4 do not; far camera detections do not count)',
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


@dataclasses.dataclass(frozen=True)
class Detections:
    """A scan's detections as arrays (what :meth:`Tracker.step` works on); :meth:`of` builds
    them from :class:`Detection` objects."""

    xy: F64  # (m, 2) position [m]
    v: F64  # (m, 2) over-ground velocity [m/s], NaN: not measured
    pos_cov: F64  # (m, 3) position covariance xx, xy, yy [m²]
    vel_var: F64  # (m,) velocity variance per axis [m²/s²]
    cls: I64  # (m,)
    cls_prob: F64  # (m,)
    exist_prob: F64  # (m,)
    size: F64  # (m, 2) length, width [m] (NaN: unknown)
    source: I64  # (m,)
    can_birth: BOOL  # (m,)

    @classmethod
    def of(cls, detections: Sequence[Detection]) -> Detections:
        """Arrays of a list of detections."""
        rows = np.array(
            [
                (
                    d.x,
                    d.y,
                    d.vx,
                    d.vy,
                    *d.position_cov(),
                    d.vel_std**2,
                    d.cls,
                    d.cls_prob,
                    d.exist_prob,
                    d.length,
                    d.width,
                    d.source,
                    d.can_birth,
                )
                for d in detections
            ],
            dtype=np.float64,
        ).reshape(-1, 15)
        kinds = rows[:, 13].astype(np.int64)
        classes = rows[:, 8].astype(np.int64)
        if np.any((classes < 0) | (classes >= MAX_CLASSES)):
            raise ValueError(f'detection classes must lie in [0, {MAX_CLASSES})')
        if np.any((kinds < 0) | (kinds >= MAX_SOURCES)):
            raise ValueError(f'detection sources must lie in [0, {MAX_SOURCES})')
        return cls(
            rows[:, 0:2],
            rows[:, 2:4],
            rows[:, 4:7],
            rows[:, 7],
            classes,
            rows[:, 9],
            rows[:, 10],
            rows[:, 11:13],
            kinds,
            rows[:, 14] != 0.0,
        )

    def __len__(self) -> int:
        return len(self.xy)

    def take(self, idx: I64) -> Detections:
        """The detections ``idx``."""
        return Detections(*(getattr(self, f.name)[idx] for f in dataclasses.fields(self)))


@dataclasses.dataclass
class Track:
    """One tracked object as read from the tracker (a copy: changing it changes no track)."""

    id: int
    x: F64  # (4,) x, y [m], vx, vy [m/s] in odom
    P: F64  # (4, 4)
    stamp_ns: int
    hits: int
    scans: int
    misses: int
    confirmed: bool
    existence: float
    votes: dict[int, float]
    length: float
    width: float
    born_ns: int
    last_hit_ns: int
    last_placed_ns: int  # the last hit by a detection that may start tracks (see Tracker.step)
    sources: int  # sensor kinds that have detected it (bits of Detection.source)
    scores: dict[int, float]  # source -> its last detection's existence probability

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
        """State and covariance at ``stamp_ns``."""
        dt = np.array([max(stamp_ns - self.stamp_ns, 0) / 1e9])
        x, cov = _predict(self.x[None], self.P[None], dt, accel_std)
        return x[0], cov[0]


@dataclasses.dataclass(frozen=True)
class TrackArrays:
    """The confirmed tracks at one time, as arrays (what the fusion publishes)."""

    id: I64  # (n,)
    x: F64  # (n, 4) predicted to the time asked for
    P: F64  # (n, 4, 4)
    cls: I64  # (n,) the vote's winner
    cls_prob: F64  # (n,) its share of the votes
    existence: F64  # (n,)
    size: F64  # (n, 2) length, width (NaN: unknown)
    born_ns: I64  # (n,)
    sources: I64  # (n,)
    scores: F64  # (n, MAX_SOURCES) last existence probability per source (NaN: none)


def _cov2(pc: F64) -> F64:
    """(n, 2, 2) covariances from (n, 3) rows of xx, xy, yy."""
    return pc[:, [0, 1, 1, 2]].reshape(-1, 2, 2)


def _predict(x: F64, cov: F64, dt: F64, accel_std: float) -> tuple[F64, F64]:
    """Constant-velocity prediction of many tracks, each by its own ``dt`` [s]."""
    dt = dt[:, None]
    x = x.copy()
    x[:, :2] += dt * x[:, 2:]
    # F P Fᵀ with F = [[I, dt I], [0, I]], by blocks (A pos, B cross, C vel).
    a, b, c = cov[:, :2, :2], cov[:, :2, 2:], cov[:, 2:, 2:]
    d3 = dt[:, :, None]
    b2 = b + d3 * c
    a2 = a + d3 * (b + np.swapaxes(b, 1, 2)) + d3 * d3 * c
    q = accel_std**2
    eye = np.eye(2)
    out = np.empty_like(cov)
    out[:, :2, :2] = a2 + q * (d3**4 / 4) * eye
    out[:, :2, 2:] = b2 + q * (d3**3 / 2) * eye
    out[:, 2:, :2] = np.swapaxes(out[:, :2, 2:], 1, 2)
    out[:, 2:, 2:] = c + q * (d3**2) * eye
    return x, out


class Tracker:
    """See the module docstring. Tracks are rows of the arrays below, in birth order."""

    def __init__(self, params: TrackerParams | None = None) -> None:
        self.p = params or TrackerParams()
        self._next_id = 1
        self.stamp_ns = 0
        self.births = 0
        self.deaths = 0
        for name, (tail, dtype) in self._COLUMNS.items():
            setattr(self, name, np.zeros((0, *tail), dtype))

    # One row per track: name -> (shape after the row, dtype). _birth supplies every column.
    _COLUMNS: ClassVar[dict[str, tuple[tuple[int, ...], type]]] = {
        'ids': ((), np.int64),
        'x': ((4,), np.float64),  # x, y [m], vx, vy [m/s] in odom
        'P': ((4, 4), np.float64),
        'stamps': ((), np.int64),  # the time x and P are at [ns]
        'hits': ((), np.int64),
        'scans': ((), np.int64),
        'misses': ((), np.int64),
        'is_confirmed': ((), np.bool_),
        'existence': ((), np.float64),
        'votes': ((MAX_CLASSES,), np.float64),  # summed class probabilities per class
        'size': ((2,), np.float64),  # length, width [m] (NaN: unknown)
        'born': ((), np.int64),
        'last_hit': ((), np.int64),
        'last_placed': ((), np.int64),  # the last hit by a detection that may start tracks
        'sources': ((), np.int64),  # bits of the sensor kinds that have detected it
        'scores': ((MAX_SOURCES,), np.float64),  # last existence probability per source
    }
    ids: I64
    x: F64
    P: F64
    stamps: I64
    hits: I64
    scans: I64
    misses: I64
    is_confirmed: BOOL
    existence: F64
    votes: F64
    size: F64
    born: I64
    last_hit: I64
    last_placed: I64
    sources: I64
    scores: F64

    def __len__(self) -> int:
        return len(self.ids)

    def _keep(self, keep: BOOL) -> None:
        for name in self._COLUMNS:
            setattr(self, name, getattr(self, name)[keep])

    def track(self, i: int) -> Track:
        """Row ``i`` as a :class:`Track`."""
        votes = {int(k): float(self.votes[i, k]) for k in np.flatnonzero(self.votes[i])}
        scores = {
            int(k): float(self.scores[i, k]) for k in np.flatnonzero(np.isfinite(self.scores[i]))
        }
        return Track(
            int(self.ids[i]),
            self.x[i].copy(),
            self.P[i].copy(),
            int(self.stamps[i]),
            int(self.hits[i]),
            int(self.scans[i]),
            int(self.misses[i]),
            bool(self.is_confirmed[i]),
            float(self.existence[i]),
            votes,
            float(self.size[i, 0]),
            float(self.size[i, 1]),
            int(self.born[i]),
            int(self.last_hit[i]),
            int(self.last_placed[i]),
            int(self.sources[i]),
            scores,
        )

    @property
    def tracks(self) -> list[Track]:
        """Every track, tentative ones included (copies)."""
        return [self.track(i) for i in range(len(self))]

    def confirmed(self) -> list[Track]:
        """The tracks a planner should see (copies)."""
        return [self.track(int(i)) for i in np.flatnonzero(self.is_confirmed)]

    def confirmed_at(self, stamp_ns: int) -> TrackArrays:
        """The confirmed tracks predicted to ``stamp_ns``, as arrays."""
        rows = np.flatnonzero(self.is_confirmed)
        dt = np.maximum(stamp_ns - self.stamps[rows], 0) / 1e9
        x, cov = _predict(self.x[rows], self.P[rows], dt, self.p.accel_std)
        votes = self.votes[rows]
        cls = np.argmax(votes, axis=1)
        total = votes.sum(axis=1)
        share = np.divide(
            votes[np.arange(len(rows)), cls], total, out=np.zeros(len(rows)), where=total > 0
        )
        return TrackArrays(
            self.ids[rows],
            x,
            cov,
            cls,
            share,
            self.existence[rows],
            self.size[rows],
            self.born[rows],
            self.sources[rows],
            self.scores[rows],
        )

    def predict(self, stamp_ns: int) -> None:
        """Moves every track older than ``stamp_ns`` to it."""
        if len(self):
            dt = np.maximum(stamp_ns - self.stamps, 0) / 1e9
            self.x, self.P = _predict(self.x, self.P, dt, self.p.accel_std)
            self.stamps = np.maximum(self.stamps, stamp_ns)
        self.stamp_ns = max(self.stamp_ns, stamp_ns)

    def _mahalanobis2(self, rows: I64 | slice, d: Detections) -> F64:
        """(tracks, detections) squared Mahalanobis distances of the position innovations,
        S = P_xy + R_xy, with the 2×2 inverse in closed form over the whole matrix."""
        tx, cov = self.x[rows], self.P[rows]
        dx = d.xy[None, :, 0] - tx[:, 0:1]
        dy = d.xy[None, :, 1] - tx[:, 1:2]
        a = cov[:, 0, 0:1] + d.pos_cov[None, :, 0]
        b = cov[:, 0, 1:2] + d.pos_cov[None, :, 1]
        c = cov[:, 1, 1:2] + d.pos_cov[None, :, 2]
        d2: F64 = (c * dx * dx - 2.0 * b * dx * dy + a * dy * dy) / (a * c - b * b)
        return d2

    def mahalanobis2(self, detections: Sequence[Detection] | Detections) -> F64:
        """(tracks, detections) squared Mahalanobis distances of the position innovations."""
        d = detections if isinstance(detections, Detections) else Detections.of(detections)
        if not len(self) or not len(d):
            return np.zeros((len(self), len(d)))
        return self._mahalanobis2(slice(None), d)

    def _associate(self, d: Detections) -> tuple[I64, I64]:
        if not len(self) or not len(d):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        cost = self._mahalanobis2(slice(None), d)
        gated = np.where(cost <= self.p.gate_chi2, cost, 1e9)
        rows, cols = linear_sum_assignment(gated)
        ok = gated[rows, cols] < 1e9
        return rows[ok].astype(np.int64), cols[ok].astype(np.int64)

    def associate(self, detections: Sequence[Detection] | Detections) -> list[tuple[int, int]]:
        """(track index, detection index) pairs within the gate, by least total distance."""
        d = detections if isinstance(detections, Detections) else Detections.of(detections)
        rows, cols = self._associate(d)
        return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True)]

    def _update(self, rows: I64, cols: I64, d: Detections) -> None:
        """Kalman updates of the tracks ``rows`` with the detections ``cols``: position and
        velocity (H = I) where the detection has a velocity, position only (H = [I 0]) where
        not, both batched."""
        full = np.isfinite(d.v[cols]).all(axis=1)
        r2 = _cov2(d.pos_cov[cols])
        if full.any():
            tr, dc = rows[full], cols[full]
            ps, xs = self.P[tr], self.x[tr]
            r = np.zeros_like(ps)
            r[:, :2, :2] = r2[full]
            r[:, 2, 2] = r[:, 3, 3] = d.vel_var[dc]
            z = np.concatenate((d.xy[dc], d.v[dc]), axis=1)
            k = np.swapaxes(np.linalg.solve(ps + r, ps), 1, 2)  # (S⁻¹ P)ᵀ = P S⁻¹
            self.x[tr] = xs + np.einsum('nij,nj->ni', k, z - xs)
            ps = ps - k @ ps
            self.P[tr] = 0.5 * (ps + np.swapaxes(ps, 1, 2))
        part = ~full
        if part.any():
            tr, dc = rows[part], cols[part]
            ps, xs = self.P[tr], self.x[tr]
            s = ps[:, :2, :2] + r2[part]
            k = np.swapaxes(np.linalg.solve(s, ps[:, :2, :]), 1, 2)  # (4, 2): P Hᵀ S⁻¹
            self.x[tr] = xs + np.einsum('nij,nj->ni', k, d.xy[dc] - xs[:, :2])
            ps = ps - k @ ps[:, :2, :]
            self.P[tr] = 0.5 * (ps + np.swapaxes(ps, 1, 2))
        # Bookkeeping (each track takes at most one detection: the indices are unique).
        self.hits[rows] += 1
        self.misses[rows] = 0
        self.sources[rows] |= d.source[cols]
        self.scores[rows, d.source[cols]] = d.exist_prob[cols]
        self.votes[rows, d.cls[cols]] += d.cls_prob[cols]
        self.existence[rows] = 0.7 * self.existence[rows] + 0.3 * (0.5 + 0.5 * d.exist_prob[cols])
        size = d.size[cols]
        known = np.isfinite(size) & (size > 0)
        self.size[rows] = np.where(known, size, self.size[rows])

    def step(
        self,
        stamp_ns: int,
        detections: Sequence[Detection] | Detections,
        birth: bool = True,
        covers: Callable[[F64], BOOL] | None = None,
    ) -> None:
        """One scan: predict, associate, update, confirm, delete, merge, birth (``birth``:
        whether unassigned detections may start tracks; not while the ego speed is unknown;
        ``covers``: which tracks the sensor could have seen, given their (n, 2) positions in
        odom; None: all of them)."""
        d = detections if isinstance(detections, Detections) else Detections.of(detections)
        self.predict(stamp_ns)
        rows, cols = self._associate(d)
        if len(rows):
            self._update(rows, cols, d)
        p = self.p
        n = len(self)
        if n:
            hit = np.zeros(n, bool)
            hit[rows] = True
            covered = np.ones(n, bool) if covers is None else np.asarray(covers(self.x[:, :2]))
            missed = covered & ~hit
            self.scans += hit | covered
            self.misses += missed
            self.existence[missed] *= 0.8
            self.last_hit[hit] = stamp_ns
            self.last_placed[rows[d.can_birth[cols]]] = stamp_ns
            young = stamp_ns - self.born <= round(p.confirm_window_s * 1e9)
            self.is_confirmed |= (self.hits >= p.confirm_hits) & young
            pos_var = np.maximum(self.P[:, 0, 0], self.P[:, 1, 1])
            dead = (
                (~self.is_confirmed & ~young)
                | (self.is_confirmed & (stamp_ns - self.last_placed > round(p.max_coast_s * 1e9)))
                | (pos_var > p.max_position_std**2)
            )
            if dead.any():
                self.deaths += int(dead.sum())
                self._keep(~dead)
            self._merge()
        if not birth or not len(d):
            return
        free = np.ones(len(d), bool)
        free[cols] = False
        free &= d.can_birth
        if not free.any():
            return
        idx = np.flatnonzero(free)
        if len(self):
            # A free detection inside an existing track's gate is a second return of a tracked
            # object (a truck's cab and rear), not a new one.
            inside = self._mahalanobis2(slice(None), d.take(idx)) <= p.gate_chi2
            idx = idx[~np.any(inside, axis=0)]
        if len(idx):
            self._birth(d, idx, stamp_ns)

    def _birth(self, d: Detections, idx: I64, stamp_ns: int) -> None:
        m = len(idx)
        v = d.v[idx]
        has_v = np.all(np.isfinite(v), axis=1, keepdims=True)
        x = np.concatenate((d.xy[idx], np.where(has_v, v, 0.0)), axis=1)
        cov = np.zeros((m, 4, 4))
        cov[:, :2, :2] = _cov2(d.pos_cov[idx])
        vvar = np.where(has_v[:, 0], d.vel_var[idx], self.p.initial_velocity_std**2)
        cov[:, 2, 2] = cov[:, 3, 3] = vvar
        votes = np.zeros((m, MAX_CLASSES))
        votes[np.arange(m), d.cls[idx]] = d.cls_prob[idx]
        scores = np.full((m, MAX_SOURCES), np.nan)
        scores[np.arange(m), d.source[idx]] = d.exist_prob[idx]
        stamp = np.full(m, stamp_ns, np.int64)
        new = {
            'ids': np.arange(self._next_id, self._next_id + m, dtype=np.int64),
            'x': x,
            'P': cov,
            'stamps': stamp,
            'hits': np.ones(m, np.int64),
            'scans': np.ones(m, np.int64),
            'misses': np.zeros(m, np.int64),
            'is_confirmed': np.zeros(m, bool),
            'existence': 0.5 * d.exist_prob[idx],
            'votes': votes,
            'size': d.size[idx],
            'born': stamp,
            'last_hit': stamp.copy(),
            'last_placed': stamp.copy(),
            'sources': d.source[idx].copy(),
            'scores': scores,
        }
        assert new.keys() == self._COLUMNS.keys()
        for name, rows in new.items():
            setattr(self, name, np.concatenate((getattr(self, name), rows)))
        self._next_id += m
        self.births += m

    def _merge(self) -> None:
        """Drops the younger of two confirmed tracks on one object."""
        conf = np.flatnonzero(self.is_confirmed)  # rows are in birth order
        if len(conf) < 2:
            return
        x = self.x[conf].T
        d2 = (x[0, :, None] - x[0]) ** 2 + (x[1, :, None] - x[1]) ** 2
        close = d2 < self.p.merge_distance_m**2
        if np.count_nonzero(close) == len(conf):  # only the diagonal
            return
        v2 = (x[2, :, None] - x[2]) ** 2 + (x[3, :, None] - x[3]) ** 2
        same = np.triu(close & (v2 < 4.0), k=1)
        if not same.any():
            return
        dropped: set[int] = set()
        for i, j in zip(*np.nonzero(same), strict=True):
            if i not in dropped and j not in dropped:
                dropped.add(int(j))  # the younger (later row)
        keep = np.ones(len(self), bool)
        keep[conf[sorted(dropped)]] = False
        self.deaths += len(dropped)
        self._keep(keep)

    def coast(self) -> None:
        """A scan that could not be used (the radar is missing): every track misses."""
        self.misses += 1
        self.scans += 1

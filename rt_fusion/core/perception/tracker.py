"""Multi-object tracking in the ``odom`` frame: constant-velocity Kalman filters, gated
assignment, M-of-N confirmation, coasting, deletion, class vote and existence.

Why constant velocity, without filterpy: the inputs are radar objects at 13.6 Hz with good
Doppler velocity; over the 70 ms between scans a CV model's error is below the radar's own noise
for vehicles and pedestrians. CTRV would need an unscented or extended filter for a yaw rate the
radar does not measure. filterpy wraps the same equations per filter object (and is unmaintained
since 2018); here the tracks are rows of three blocks (state, covariance, life cycle, votes), and
a scan is a few kernel calls over all of them (:mod:`.track_kernels`: compiled by numba where it
is installed, numpy otherwise, the same numbers either way), plus
``scipy.optimize.linear_sum_assignment`` for the contested part of the assignment only.

Per scan (:meth:`Tracker.step`): every track is predicted to the scan time (process noise
``accel_std`` as a white-acceleration model, so coasting tracks' covariances grow); detections
(positions and over-ground velocities in ``odom`` with their covariances) are gated by the squared
Mahalanobis distance of the position innovation (``gate_chi2``, 2 degrees of freedom) and assigned
with :func:`scipy.optimize.linear_sum_assignment` (a detection with a velocity, a radar return, is
also kept out of a track whose velocity it misses by more than ``gate_speed_mps``: a veto, not a
cost, so that an ego speed lagging a hard braking still passes); matched tracks are updated with
position and velocity (or position only: a camera detection). A detection nobody takes starts a
tentative track; a tentative track is confirmed after ``confirm_hits`` hits within
``confirm_window_s`` of its birth and deleted otherwise; a confirmed track is deleted when no
detection able to start a track has hit it for ``max_coast_s`` or when its position std exceeds
``max_position_std``. Detections that may not start tracks (``can_birth`` false: a camera's far or
weak detections, whose depth cannot place an object) update a track but do not keep it alive: a
track the radar lost at 70 m is not carried on by camera bearings alone, drifting in depth. Life
cycles count time, not scans, because sensors at different rates feed one tracker (radar at 13.6
Hz, camera at 30 Hz): a step only counts as a miss for the tracks the stepping sensor covers
(``covers``: its field of view and range), so an object beyond the camera's reach is not worn down
by camera frames. Track ids count up from 1 and never come from a sensor; a new track that starts
within ``revive_s`` in the predicted gate of a confirmed track that was lost (deleted for want of
placing hits, not merged) takes that track's id instead (the same object found again, as ByteTrack
keeps lost tracks), and is confirmed like any new track. Class: the sum of each detection's class
probability per class (a vote); existence: a running estimate from hits and misses, weighted by the
detections' own existence probabilities.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from rt_fusion.core.params import param
from rt_fusion.core.perception import track_kernels as tk
from rt_fusion.core.perception import track_layout as tl
from rt_fusion.core.perception.assignment import linear_sum_assignment
from rt_fusion.core.perception.ego import EgoMotion
from rt_fusion.core.perception.track_kernels import Kernels, kernels
from rt_fusion.core.perception.track_layout import (
    BOOL,
    F64,
    I64,
    MAX_CLASSES,
    MAX_SOURCES,
    LifeCycle,
)


@dataclasses.dataclass(frozen=True)
class TrackerParams:
    """Life-cycle and noise parameters of the tracker."""

    accel_std: float = param('process noise (white acceleration)', unit='m/s²', default=2.0)
    gate_chi2: float = param(
        'association gate: squared Mahalanobis distance of the position (2 dof; 13.8: 99.9 %)',
        default=13.8,
        low=1.0,
    )
    gate_speed_mps: float = param(
        'a detection with a velocity (radar) is outside the gate of a track whose velocity '
        'differs from it by more than this, or by more than the gate in velocity stds if that '
        'is larger (0: off). A veto, not a cost: a clutter return beside a truck at a third of '
        'its speed no longer drags the track off the truck',
        unit='m/s',
        default=3.0,
        low=0.0,
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
        'a track less certain than this is deleted (a camera detection is 3.9 m uncertain in '
        'depth at 70 m and 4.9 m at 80 m: at 4 m, a track the camera alone started beyond ~70 m '
        'died at the first frame without its detection)',
        unit='m',
        default=6.0,
        low=0.1,
    )
    revive_s: float = param(
        'a confirmed track lost less than this long ago gives its id to a new track that starts '
        'in its predicted gate (the same object found again keeps its id; 0: off)',
        unit='s',
        default=1.0,
        low=0.0,
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


# The detection block's columns that must be finite (NaN means "not measured" in the others:
# the velocity and the size); :meth:`Detections.usable`.
_REQUIRED = np.ones(tl.DET_WIDTH, bool)
_REQUIRED[tl.DV : tl.DV + 2] = _REQUIRED[tl.DSIZE : tl.DSIZE + 2] = False


@dataclasses.dataclass(frozen=True)
class Detections:
    """A scan's detections as one C-contiguous (m, 15) block (``track_kernels.D*`` columns:
    what :meth:`Tracker.step` works on); :meth:`of` builds it from :class:`Detection` objects."""

    block: F64

    @classmethod
    def of(cls, detections: Sequence[Detection]) -> Detections:
        """The block of a list of detections."""
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
        ).reshape(-1, tl.DET_WIDTH)
        classes, kinds = rows[:, tl.DCLS], rows[:, tl.DSOURCE]
        if np.any((classes < 0) | (classes >= MAX_CLASSES) | (classes % 1 != 0)):
            raise ValueError(f'detection classes must be integers in [0, {MAX_CLASSES})')
        if np.any((kinds < 0) | (kinds >= MAX_SOURCES) | (kinds % 1 != 0)):
            raise ValueError(f'detection sources must be integers in [0, {MAX_SOURCES})')
        return cls(rows)

    def __len__(self) -> int:
        return len(self.block)

    def usable(self) -> npt.NDArray[np.bool_]:
        """Which rows the tracker may take: no infinity anywhere, and NaN only where it means
        "not measured" (the velocity, the size)."""
        b = self.block
        finite = np.isfinite(b[:, _REQUIRED]).all(axis=1)
        ok = np.logical_and(~np.isinf(b).any(axis=1), finite)
        return np.asarray(ok, dtype=bool)

    @property
    def v(self) -> F64:
        """(m, 2) over-ground velocity [m/s], NaN: not measured."""
        return self.block[:, tl.DV : tl.DV + 2]


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


def _predict(x: F64, cov: F64, dt: F64, accel_std: float) -> tuple[F64, F64]:
    """Constant-velocity prediction of copies of many tracks, each by its own ``dt`` [s]."""
    x, cov = x.copy(), cov.copy()
    tk.predict_xp(x, cov, dt, accel_std**2)
    return x, cov


class Tracker:
    """See the module docstring. Tracks are rows, in birth order, of three blocks
    (``track_kernels``: floats, integers, the confirmed flags); the attributes named in
    ``_COLUMNS`` are views of their columns (writing into them writes the track)."""

    def __init__(self, params: TrackerParams | None = None, jit: bool | None = None) -> None:
        self.p = params or TrackerParams()
        self.k: Kernels = kernels(jit)  # numba loops or numpy (track_kernels.kernels)
        self._jit = jit
        # numpy only until the numba set, deferred or loading in the background, is warm
        self._upgrade = self.k is tk.NUMPY and tk.pending()
        self.set_params(self.p)
        self._next_id = 1
        self.stamp_ns = 0
        self.births = 0
        self.vetoed = 0  # unassigned detections a step's veto kept from starting a track
        self.deaths = 0
        self.non_finite = 0  # detections with NaN/inf where a value is required, dropped
        self.revivals = 0  # new tracks that took a lost track's id (see _revive)
        self.reanchored = 0  # tracks moved to a detection on their line of sight (reanchor)
        self.confirmed_early = 0  # tracks confirmed at their first hit (confirm)
        # The lost confirmed tracks (rows of the float and integer blocks, as they were when
        # deleted) and when they were deleted [ns]: see _bury and _revive.
        self._lost_f = np.empty((0, tl.FLOAT_WIDTH))
        self._lost_i = np.empty((0, tl.INT_WIDTH), np.int64)
        self._lost_at = np.empty(0, np.int64)
        self._bind(
            np.empty((0, tl.FLOAT_WIDTH)), np.empty((0, tl.INT_WIDTH), np.int64), np.empty(0, bool)
        )

    # The named views: name -> (block, first column, shape after the row; () a single column).
    _COLUMNS: ClassVar[dict[str, tuple[str, int, tuple[int, ...]]]] = {
        'ids': ('i', tl.ID, ()),
        'x': ('f', tl.X, (4,)),  # x, y [m], vx, vy [m/s] in odom
        'P': ('f', tl.P, (4, 4)),
        'stamps': ('i', tl.STAMP, ()),  # the time x and P are at [ns]
        'hits': ('i', tl.HITS, ()),
        'scans': ('i', tl.SCANS, ()),
        'misses': ('i', tl.MISSES, ()),
        'is_confirmed': ('c', 0, ()),
        'existence': ('f', tl.EXIST, ()),
        'votes': ('f', tl.VOTES, (MAX_CLASSES,)),  # summed class probabilities per class
        'size': ('f', tl.SIZE, (2,)),  # length, width [m] (NaN: unknown)
        'born': ('i', tl.BORN, ()),
        'last_hit': ('i', tl.LAST_HIT, ()),
        'last_placed': ('i', tl.LAST_PLACED, ()),  # the last hit by one that may start tracks
        'sources': ('i', tl.SOURCES, ()),  # bits of the sensor kinds that have detected it
        'scores': ('f', tl.SCORES, (MAX_SOURCES,)),  # last existence probability per source
    }
    _f: F64
    _i: I64
    _c: BOOL
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

    def set_params(self, params: TrackerParams) -> None:
        """The tracker's parameters, now or while it runs (``ros2 param set``): the next scan
        is tracked with them, and the tracks so far are kept."""
        self.p = p = params
        # Typed exactly (a YAML integer would otherwise compile a second numba signature).
        self.life = LifeCycle(
            int(p.confirm_hits),
            round(p.confirm_window_s * 1e9),
            round(p.max_coast_s * 1e9),
            float(p.max_position_std) ** 2,
            float(p.merge_distance_m) ** 2,
            2.0**2,  # velocities within 2 m/s
            float(p.gate_chi2),
        )
        self._q = float(p.accel_std) ** 2
        self._speed_gate2 = float(p.gate_speed_mps) ** 2 if p.gate_speed_mps > 0 else math.inf
        self._revive_ns = round(p.revive_s * 1e9)

    def __len__(self) -> int:
        return len(self._c)

    def _bind(self, f: F64, i: I64, c: BOOL) -> None:
        """Makes the blocks the tracker's rows (the named columns are views of them, made when
        read: see :func:`_column`)."""
        self._f, self._i, self._c = f, i, c

    def _keep(self, keep: BOOL) -> None:
        self._bind(self._f[keep], self._i[keep], self._c[keep])

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
        if self._upgrade and not tk.pending():  # the hot path: one flag once settled
            self.k, self._upgrade = kernels(self._jit), False
        if len(self):
            self.k.predict(self._f, self._i, int(stamp_ns), self._q)
        self.stamp_ns = max(self.stamp_ns, stamp_ns)

    def mahalanobis2(self, detections: Sequence[Detection] | Detections) -> F64:
        """(tracks, detections) squared Mahalanobis distances of the position innovations,
        S = P_xy + R_xy (gated at infinity: every pair's distance)."""
        d = detections if isinstance(detections, Detections) else Detections.of(detections)
        return tk.gated_cost_np(self._f, d.block, math.inf, math.inf)

    def _associate(self, d: Detections) -> tuple[I64, I64]:
        if not len(self) or not len(d):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        gated = self.k.gated_cost(self._f, d.block, self.life.gate, self._speed_gate2)
        rows, cols, rival_rows, rival_cols, sub = self.k.split(gated)
        if len(rival_rows):  # the contested part: least total distance
            r, c = linear_sum_assignment(sub)
            rows, cols = self.k.join(rows, cols, rival_rows, rival_cols, r, c, sub)
        return rows, cols

    def associate(self, detections: Sequence[Detection] | Detections) -> list[tuple[int, int]]:
        """(track index, detection index) pairs within the gate, by least total distance."""
        d = detections if isinstance(detections, Detections) else Detections.of(detections)
        rows, cols = self._associate(d)
        return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True)]

    def step(
        self,
        stamp_ns: int,
        detections: Sequence[Detection] | Detections,
        birth: bool = True,
        covers: Callable[[F64], BOOL] | None = None,
        veto: Callable[[Detections, I64], BOOL] | None = None,
    ) -> None:
        """One scan: predict, associate, update, confirm, delete, merge, birth (``birth``:
        whether unassigned detections may start tracks; not while the ego speed is unknown;
        ``covers``: which tracks the sensor could have seen, given their (n, 2) predicted
        positions in odom; None: all of them; ``veto``: given the detections and the indices of
        those nobody took that may start a track, which of them must not (counted in
        ``vetoed``))."""
        given = d = detections if isinstance(detections, Detections) else Detections.of(detections)
        ok = d.usable()
        keep = None
        if not ok.all():  # NaN/inf where a value is required: counted, dropped, never fused
            self.non_finite += int((~ok).sum())
            keep = np.flatnonzero(ok)
            d = Detections(np.ascontiguousarray(d.block[keep]))
        self.predict(stamp_ns)
        rows, cols = self._associate(d)
        n = len(self)
        if covers is None:
            covered = np.ones(n, bool)
        else:
            covered = np.ascontiguousarray(covers(self.x[:, :2]), dtype=bool)
        remove, free = self.k.update_life(
            self._f,
            self._i,
            self._c,
            rows,
            cols,
            d.block,
            covered,
            int(stamp_ns),
            self.life,
            bool(birth),
        )
        if remove.any():
            self.deaths += int(remove.sum())
            if self._revive_ns > 0:
                self._bury(remove, stamp_ns)
            self._keep(~remove)
        idx = np.flatnonzero(free)
        if len(idx) and veto is not None:  # given the caller's detections and indices
            no = np.asarray(veto(given, idx if keep is None else keep[idx]), dtype=bool)
            self.vetoed += int(no.sum())
            idx = idx[~no]
        if len(idx):
            self._birth(d, idx, stamp_ns)

    def reanchor(self, rows: I64, d: Detections, cols: I64, stamp_ns: int) -> None:
        """Tracks ``rows`` (confirmed, at ``stamp_ns``: after a :meth:`step` of that time) moved
        to the detections ``cols`` (one each): the track's position and its covariance become
        the detection's, its velocity and class votes stay, and the detection counts as a hit.
        For a monocular camera whose depth of an object jumped (a post coming out from behind
        a car, placed metres too far while half hidden, then right): the detections on the
        track's line of sight that its gate no longer takes would otherwise keep a stale track
        alive beside the truth until it coasts out, while vetoed from starting the right one."""
        if not len(rows):
            return
        x, cov = tk.state(self._f)
        b = d.block[cols]
        x[rows, :2] = b[:, tl.DXY : tl.DXY + 2]
        cov[rows, :2, 2:] = 0.0
        cov[rows, 2:, :2] = 0.0
        cov[rows, 0, 0] = b[:, tl.DCOV]
        cov[rows, 0, 1] = cov[rows, 1, 0] = b[:, tl.DCOV + 1]
        cov[rows, 1, 1] = b[:, tl.DCOV + 2]
        i, f = self._i, self._f
        i[rows, tl.HITS] += 1
        i[rows, tl.MISSES] = 0
        i[rows, tl.LAST_HIT] = stamp_ns
        placed = rows[b[:, tl.DBIRTH] != 0]
        i[placed, tl.LAST_PLACED] = stamp_ns
        source = b[:, tl.DSOURCE].astype(np.int64)
        i[rows, tl.SOURCES] |= source
        f[rows, tl.VOTES + b[:, tl.DCLS].astype(np.int64)] += b[:, tl.DCLS_PROB]
        self.reanchored += len(rows)

    def confirm(self, rows: I64) -> None:
        """Tracks ``rows`` confirmed now, whatever their hits (a sensor sure of what it saw:
        the fusion's ``camera_confirm_score``); counted in ``confirmed_early``."""
        self._c[rows] = True
        self.confirmed_early += len(rows)

    def floor_along(self, rows: I64, eye: tuple[float, float], min_std: F64) -> None:
        """Widens the position covariance of the tracks ``rows`` along the line from ``eye``
        (odom) to each of them so that its std along that line is at least ``min_std`` [m] (per
        row): P += (min_std² − uᵀPu) u uᵀ where short of it (u the unit direction). A sensor
        whose errors persist from frame to frame (a monocular camera's depth) is not averaged
        down as independent measurements are; the floor keeps the track following it."""
        if not len(rows):
            return
        x, cov = tk.state(self._f)
        rel = x[rows, :2] - np.asarray(eye, np.float64)
        u = rel / np.maximum(np.hypot(rel[:, 0], rel[:, 1]), 1e-9)[:, None]
        pxy = cov[rows, :2, :2]
        var = np.einsum('ni,nij,nj->n', u, pxy, u)
        add = np.maximum(np.asarray(min_std, np.float64) ** 2 - var, 0.0)
        cov[rows, :2, :2] = pxy + add[:, None, None] * u[:, :, None] * u[:, None, :]

    def _bury(self, remove: BOOL, stamp_ns: int) -> None:
        """Keeps the confirmed tracks among ``remove`` that were lost (no placing hit for too
        long, or too uncertain; not merged into another) for :meth:`_revive`, and forgets
        those lost longer than ``revive_s`` ago."""
        rows = np.flatnonzero(remove & self._c)  # most deaths are tentative false alarms
        if not len(rows):
            return
        i, f, life = self._i[rows], self._f[rows], self.life
        lost = rows[
            (stamp_ns - i[:, tl.LAST_PLACED] > life.coast_ns)
            | (np.maximum(f[:, tl.P], f[:, tl.P + 5]) > life.max_var)
        ]
        if not len(lost):
            return
        ids = self._i[lost, tl.ID]
        # (a broadcast compare: np.isin costs ~40 µs of set-up on these few ids)
        again = (self._lost_i[:, tl.ID, None] == ids[None, :]).any(axis=1)
        keep = (stamp_ns - self._lost_at <= self._revive_ns) & ~again
        self._lost_f = np.concatenate((self._lost_f[keep], self._f[lost]))
        self._lost_i = np.concatenate((self._lost_i[keep], self._i[lost]))
        self._lost_at = np.concatenate(
            (self._lost_at[keep], np.full(len(lost), stamp_ns, np.int64))
        )

    def _revive(self, d: Detections, idx: I64, stamp_ns: int, first: int) -> None:
        """New tracks (rows from ``first``, started by the detections ``idx``) that fall in the
        gate of a lost track, predicted to now, take its id and class votes (one each, nearest
        first; ``track_kernels.revive_np``): an object the tracker lost for a moment and found
        again keeps its id instead of switching to a new one. They stay tentative (confirmed as
        any new track), so nothing is published that would not have been. A lost track whose id
        is in use again cannot be claimed; if that track dies before it is confirmed, the lost
        one can be claimed again."""
        if stamp_ns - int(self._lost_at.max()) > self._revive_ns:  # all too old: forgotten
            self._lost_f, self._lost_i = self._lost_f[:0], self._lost_i[:0]
            self._lost_at = self._lost_at[:0]
            return
        self.revivals += self.k.revive(
            self._lost_f,
            self._lost_i,
            self._lost_at,
            self._f,
            self._i,
            first,
            d.block,
            idx,
            int(stamp_ns),
            self._revive_ns,
            self._q,
            self.life.gate,
            self._speed_gate2,
        )

    def _birth(self, d: Detections, idx: I64, stamp_ns: int) -> None:
        first = len(self)
        blocks = self.k.birth(
            self._f,
            self._i,
            self._c,
            d.block,
            idx,
            int(stamp_ns),
            self._next_id,
            float(self.p.initial_velocity_std) ** 2,
        )
        self._bind(*blocks)
        self._next_id += len(idx)
        self.births += len(idx)
        if len(self._lost_at):
            self._revive(d, idx, stamp_ns, first)

    #: What :meth:`snapshot` keeps besides the blocks: the counters and the id to come.
    _SCALARS = ('_next_id', 'stamp_ns', 'births', 'vetoed', 'deaths', 'non_finite', 'revivals',
                'reanchored', 'confirmed_early')  # fmt: skip

    def snapshot(self) -> dict[str, Any]:
        """The tracker's state (copies of its blocks, its lost tracks, counters, next id):
        :meth:`restore` brings it back. For a measurement that comes late (a camera frame's
        detections after the network ran beside the fusion): back to its time, the step, then
        the later steps again, as if it had come in order."""
        snap: dict[str, Any] = {name: getattr(self, name) for name in self._SCALARS}
        snap['blocks'] = (self._f.copy(), self._i.copy(), self._c.copy())
        snap['lost'] = (self._lost_f.copy(), self._lost_i.copy(), self._lost_at.copy())
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        """The state of :meth:`snapshot`, which it takes over (restore a snapshot once)."""
        for name in self._SCALARS:
            setattr(self, name, snap[name])
        self._bind(*snap['blocks'])
        self._lost_f, self._lost_i, self._lost_at = snap['lost']

    def coast(self) -> None:
        """A scan that could not be used (the radar is missing): every track misses."""
        self.misses += 1
        self.scans += 1


def warm_up(jit: bool | None = None, k: Kernels | None = None) -> str:
    """Compiles (or loads from numba's cache) every kernel the tracker and the ego vote use,
    with the argument types they are called with, so that no callback pays it; returns the
    set's name (``numba`` or ``numpy``). ``k``: the set to warm (None: :func:`kernels`)."""
    tracker = Tracker(jit=jit)
    ego = EgoMotion(jit=jit)
    if k is not None:
        tracker.k, tracker._upgrade = k, False
        ego._consensus, ego._upgrade = k.consensus, False
    a = Detection(10.0, 0.0, 5.0, 0.0)
    b = Detection(10.6, 0.0, pos_std=0.5, source=2, cov_xy=along_ray_cov(0.0, 2.0, 0.1))
    tracker.step(0, [a])
    tracker.step(10_000_000, [a, b], covers=lambda xy: np.ones(len(xy), bool))  # rivals
    tracker.step(20_000_000, [a])  # confirmed
    tracker.step(1_000_000_000, [])  # deletions (a lost track)
    tracker.step(1_100_000_000, [a])  # a new track, checked against the lost one
    ego.radar_speed(np.array([-15.0, -15.1]))
    return tracker.k.name


def defer_compiled() -> None:
    """Trackers made from now on hold the numpy set until :func:`warm_up_in_background` has
    loaded the compiled one (``track_kernels.defer``): a node calls it before building them."""
    tk.defer()


def warm_up_in_background(start: Callable[[Callable[[], None]], object]) -> bool:
    """:func:`warm_up` of the numba set off the caller's thread (``track_kernels``'s
    ``load_in_background``; ``start``: how to run it on a thread): a node is up ~0.4 s sooner,
    its trackers on the numpy set (the same numbers) until the compiled one is warm. False when
    nothing was started (numba missing, turned off, loaded or loading already)."""
    return tk.load_in_background(lambda k: warm_up(k=k), start)


def _column(name: str, block: str, start: int, tail: tuple[int, ...]) -> property:
    """A view of one named column of the tracker's blocks, as a property (made when read, so
    adding or dropping rows costs nothing per column); assigning writes into it."""

    def get(self: Tracker) -> npt.NDArray[Any]:
        if block == 'c':
            return self._c
        b = self._f if block == 'f' else self._i
        if not tail:
            return b[:, start]
        view = b[:, start : start + math.prod(tail)]
        return view.reshape(len(b), *tail) if len(tail) > 1 else view

    def put(self: Tracker, value: npt.ArrayLike) -> None:
        get(self)[...] = value  # after an in-place operator this is the view itself

    return property(get, put, doc=f'``{name}`` of every track (a view)')


for _name, (_block, _start, _tail) in Tracker._COLUMNS.items():
    setattr(Tracker, _name, _column(_name, _block, _start, _tail))

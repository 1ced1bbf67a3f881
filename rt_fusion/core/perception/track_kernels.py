"""The tracker's per-scan work (and the ego speed's radar vote) as kernels, compiled with numba
when it is installed.

A scan of 64 objects is a few thousand floating-point operations: what costs is the number of
calls, not the arithmetic. In numpy one scan is about a hundred array operations of a few µs
each; compiled with numba (LLVM) it is three calls (:func:`predict_np`, :func:`gated_cost_np`
with :func:`split_np`, :func:`update_life_np`), each a loop over the tracks. Both forms are kept
and give the same numbers (``tests/core/perception/test_track_kernels.py`` runs a scene through
both and compares every column after every step): numpy is the readable reference and runs where
numba is not installed (the GPU machine, whose carry limit has no room for llvmlite); numba is
what the tracker uses when it can (:func:`kernels`; ``RT_FUSION_JIT=0`` turns it off). The
compiled code is cached beside the module, so only the first process after an install pays the
compilation (about 10 s on two cores). Loading it from that cache still takes ~0.4 s (numba's
import and LLVM linking), which a restarting node need not wait for: :func:`load_in_background`
loads and warms the compiled set on a thread of its own while the numpy set serves, and each
tracker swaps to it at its next step (:func:`pending`): the same numbers either way.

The rows live in three C-contiguous blocks, one per dtype, a fixed range of columns per field
(the constants below; :class:`~rt_fusion.core.perception.tracker.Tracker` exposes them as named
views): dropping or adding tracks is one operation per block, and a kernel call passes three
arrays (numba checks the type of each argument on every call, quickly only for contiguous
arrays). A scan's detections are one block too (``D*`` columns).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from rt_fusion.core.compiled import CompiledSet
from rt_fusion.core.perception.track_layout import (
    BOOL,
    BORN,
    DBIRTH,
    DCLS,
    DCLS_PROB,
    DCOV,
    DEXIST,
    DSIZE,
    DSOURCE,
    DV,
    DVEL_VAR,
    DXY,
    EXIST,
    F64,
    HITS,
    I64,
    ID,
    LAST_HIT,
    LAST_PLACED,
    MAX_CLASSES,
    MAX_SOURCES,
    MISSES,
    OUT_OF_GATE,
    SCANS,
    SCORES,
    SIZE,
    SOURCES,
    STAMP,
    VOTES,
    LifeCycle,
    P,
    X,
)

# -- numpy: the reference --------------------------------------------------------------------


def predict_xp(x: F64, cov: F64, dt: F64, q: float) -> None:
    """Constant-velocity prediction of states ``x`` (n, 4) and covariances ``cov`` (n, 4, 4),
    each by its own ``dt`` [s], in place; ``q``: the white-acceleration variance [m²/s⁴]."""
    d1 = dt[:, None]
    x[:, :2] += d1 * x[:, 2:]
    # F P Fᵀ with F = [[I, dt I], [0, I]], by blocks (A pos, B cross, C vel).
    a, b, c = cov[:, :2, :2], cov[:, :2, 2:], cov[:, 2:, 2:]
    d3 = d1[:, :, None]
    b2 = b + d3 * c
    a2 = a + d3 * (b + np.swapaxes(b, 1, 2)) + d3 * d3 * c
    eye = np.eye(2)
    cov[:, :2, :2] = a2 + q * (d3**4 / 4) * eye
    cov[:, :2, 2:] = b2 + q * (d3**3 / 2) * eye
    cov[:, 2:, :2] = np.swapaxes(cov[:, :2, 2:], 1, 2)
    cov[:, 2:, 2:] = c + q * (d3**2) * eye


def state(f: F64) -> tuple[F64, F64]:
    """Views of the states (n, 4) and covariances (n, 4, 4) in a float block."""
    return f[:, X : X + 4], f[:, P : P + 16].reshape(len(f), 4, 4)


def predict_np(f: F64, i: I64, stamp_ns: int, q: float) -> None:
    """Every track older than ``stamp_ns`` moved to it, in place."""
    dt = np.maximum(stamp_ns - i[:, STAMP], 0) / 1e9
    x, cov = state(f)
    predict_xp(x, cov, dt, q)
    np.maximum(i[:, STAMP], stamp_ns, out=i[:, STAMP])


def gated_cost_np(f: F64, d: F64, gate: float, speed_gate2: float) -> F64:
    """(tracks, detections) squared Mahalanobis distances of the position innovations
    (S = P_xy + R_xy, the 2×2 inverse in closed form), ``OUT_OF_GATE`` beyond ``gate``; a
    detection that measures velocity (radar) is also out where its velocity differs from the
    track's by more than the larger of ``speed_gate2`` [m²/s²] and ``gate`` times the mean
    velocity variance (the track's plus the detection's): a veto, not a cost, so that only
    returns at clearly the wrong speed are kept off (a clutter return beside a truck at a third
    of its speed), not those of an ego speed estimate lagging a hard braking."""
    dx = d[None, :, DXY] - f[:, X, None]
    dy = d[None, :, DXY + 1] - f[:, X + 1, None]
    a = f[:, P, None] + d[None, :, DCOV]
    b = f[:, P + 1, None] + d[None, :, DCOV + 1]
    c = f[:, P + 5, None] + d[None, :, DCOV + 2]
    d2 = (c * dx * dx - 2.0 * b * dx * dy + a * dy * dy) / (a * c - b * b)
    inside = d2 <= gate
    if speed_gate2 < math.inf:
        dv2 = (d[None, :, DV] - f[:, X + 2, None]) ** 2 + (
            d[None, :, DV + 1] - f[:, X + 3, None]
        ) ** 2
        s_v = 0.5 * (f[:, P + 10, None] + f[:, P + 15, None]) + d[None, :, DVEL_VAR]
        inside &= ~(dv2 > np.maximum(speed_gate2, gate * s_v))  # NaN (no velocity): kept
    out: F64 = np.where(inside, d2, OUT_OF_GATE)
    return out


def split_np(gated: F64) -> tuple[I64, I64, I64, I64, F64]:
    """The pairs of a gated cost matrix that need no assignment (a track with one detection in
    its gate that is in no other track's gate), and the rows and columns left that do (each
    in some gate with a rival) with their costs: what ``linear_sum_assignment`` then solves, a
    smaller problem with the same answer, and none at all when objects are well separated."""
    inside = gated < OUT_OF_GATE
    per_row, per_col = inside.sum(axis=1), inside.sum(axis=0)
    alone = inside & (per_row[:, None] == 1) & (per_col[None, :] == 1)
    rows, cols = np.nonzero(alone)
    rival_rows = np.flatnonzero((per_row > 0) & ~alone.any(axis=1))
    rival_cols = np.flatnonzero((per_col > 0) & ~alone.any(axis=0))
    return rows, cols, rival_rows, rival_cols, gated[np.ix_(rival_rows, rival_cols)]


def join_np(
    rows: I64, cols: I64, rival_rows: I64, rival_cols: I64, r: I64, c: I64, sub: F64
) -> tuple[I64, I64]:
    """The pairs of :func:`split_np` and those the assignment (``r``, ``c`` into ``sub``) made
    within the gate, by track row."""
    ok = sub[r, c] < OUT_OF_GATE
    rows = np.concatenate((rows, rival_rows[r[ok]]))
    cols = np.concatenate((cols, rival_cols[c[ok]]))
    order = np.argsort(rows, kind='stable')
    return rows[order], cols[order]


def _update_np(f: F64, i: I64, rows: I64, cols: I64, d: F64) -> None:
    """Kalman updates of the tracks ``rows`` with the detections ``cols`` (each track at most
    once): position and velocity (H = I) where the detection has a velocity, position only
    (H = [I 0]) where not; then their hit counts, sources, class votes, existence and size."""
    x, cov = state(f)
    full = np.isfinite(d[cols, DV : DV + 2]).all(axis=1)
    r2 = d[cols][:, [DCOV, DCOV + 1, DCOV + 1, DCOV + 2]].reshape(-1, 2, 2)
    if full.any():
        tr, dc = rows[full], cols[full]
        ps, xs = cov[tr], x[tr]
        r = np.zeros_like(ps)
        r[:, :2, :2] = r2[full]
        r[:, 2, 2] = r[:, 3, 3] = d[dc, DVEL_VAR]
        k = np.swapaxes(np.linalg.solve(ps + r, ps), 1, 2)  # (S⁻¹ P)ᵀ = P S⁻¹
        x[tr] = xs + np.einsum('nij,nj->ni', k, d[dc, DXY : DXY + 4] - xs)
        ps = ps - k @ ps
        cov[tr] = 0.5 * (ps + np.swapaxes(ps, 1, 2))
    part = ~full
    if part.any():
        tr, dc = rows[part], cols[part]
        ps, xs = cov[tr], x[tr]
        s = ps[:, :2, :2] + r2[part]
        k = np.swapaxes(np.linalg.solve(s, ps[:, :2, :]), 1, 2)  # (4, 2): P Hᵀ S⁻¹
        x[tr] = xs + np.einsum('nij,nj->ni', k, d[dc, DXY : DXY + 2] - xs[:, :2])
        ps = ps - k @ ps[:, :2, :]
        cov[tr] = 0.5 * (ps + np.swapaxes(ps, 1, 2))
    source = d[cols, DSOURCE].astype(np.int64)
    exist = d[cols, DEXIST]
    i[rows, HITS] += 1
    i[rows, MISSES] = 0
    i[rows, SOURCES] |= source
    f[rows, SCORES + source] = exist
    f[rows, VOTES + d[cols, DCLS].astype(np.int64)] += d[cols, DCLS_PROB]
    f[rows, EXIST] = 0.7 * f[rows, EXIST] + 0.3 * (0.5 + 0.5 * exist)
    new = d[cols, DSIZE : DSIZE + 2]
    known = np.isfinite(new) & (new > 0)
    f[rows, SIZE : SIZE + 2] = np.where(known, new, f[rows, SIZE : SIZE + 2])


def _merge_np(f: F64, eligible: BOOL, merge_d2: float, merge_v2: float) -> BOOL:
    """Rows to drop: the younger (later row) of two ``eligible`` tracks closer than
    ``merge_d2`` whose velocities differ by less than ``merge_v2``."""
    drop = np.zeros(len(f), bool)
    conf = np.flatnonzero(eligible)  # rows are in birth order
    if len(conf) < 2:
        return drop
    xc = f[conf, X : X + 4].T
    d2 = (xc[0, :, None] - xc[0]) ** 2 + (xc[1, :, None] - xc[1]) ** 2
    close = d2 < merge_d2
    if np.count_nonzero(close) == len(conf):  # only the diagonal
        return drop
    v2 = (xc[2, :, None] - xc[2]) ** 2 + (xc[3, :, None] - xc[3]) ** 2
    same = np.triu(close & (v2 < merge_v2), k=1)
    for a, b in zip(*np.nonzero(same), strict=True):
        if not drop[conf[a]] and not drop[conf[b]]:
            drop[conf[b]] = True
    return drop


def update_life_np(
    f: F64,
    i: I64,
    confirmed: BOOL,
    rows: I64,
    cols: I64,
    d: F64,
    covered: BOOL,
    stamp_ns: int,
    life: LifeCycle,
    birth: bool,
) -> tuple[BOOL, BOOL]:
    """The rest of a step at ``stamp_ns``, in place: the updates of the assigned pairs
    (``rows``, ``cols``); misses of the tracks the sensor ``covered`` that no detection hit;
    confirmation; deletion (unconfirmed past the window, no placing hit for ``coast_ns``, too
    uncertain) and merging. Returns the rows to remove and (when ``birth``) the detections that
    start tracks: unassigned, allowed to, and in no remaining track's gate (a second return of
    a tracked object, such as a truck's cab and rear, is not a new one)."""
    _update_np(f, i, rows, cols, d)
    n = len(f)
    hit = np.zeros(n, bool)
    hit[rows] = True
    placed = np.zeros(n, bool)
    placed[rows[d[cols, DBIRTH] != 0]] = True
    missed = covered & ~hit
    i[:, SCANS] += hit | covered
    i[:, MISSES] += missed
    f[missed, EXIST] *= 0.8
    i[hit, LAST_HIT] = stamp_ns
    i[placed, LAST_PLACED] = stamp_ns
    young = stamp_ns - i[:, BORN] <= life.window_ns
    confirmed |= (i[:, HITS] >= life.confirm_hits) & young
    pos_var = np.maximum(f[:, P], f[:, P + 5])
    dead = (
        (~confirmed & ~young)
        | (confirmed & (stamp_ns - i[:, LAST_PLACED] > life.coast_ns))
        | (pos_var > life.max_var)
    )
    remove = dead | _merge_np(f, confirmed & ~dead, life.merge_d2, life.merge_v2)
    free = np.zeros(len(d), bool)
    if birth:
        free[:] = d[:, DBIRTH] != 0
        free[cols] = False
        if free.any() and not remove.all():
            inside = gated_cost_np(f[~remove], d[free], life.gate, math.inf) <= life.gate
            free[np.flatnonzero(free)[inside.any(axis=0)]] = False
    return remove, free


def birth_np(
    f: F64,
    i: I64,
    c: BOOL,
    d: F64,
    idx: I64,
    stamp_ns: int,
    next_id: int,
    velocity_var: float,
) -> tuple[F64, I64, BOOL]:
    """The blocks with a new tentative track per detection ``idx`` appended: state and
    covariance from the detection (velocity variance ``velocity_var`` [m²/s²] where it has
    no velocity), one hit, its class vote and score, ids from ``next_id``."""
    m = len(idx)
    rows = d[idx]
    nf = np.zeros((m, f.shape[1]))
    ni = np.zeros((m, i.shape[1]), np.int64)
    v = rows[:, DV : DV + 2]
    has_v = np.all(np.isfinite(v), axis=1)
    nf[:, X : X + 2] = rows[:, DXY : DXY + 2]
    nf[:, X + 2 : X + 4] = np.where(has_v[:, None], v, 0.0)
    nf[:, [P, P + 1, P + 4, P + 5]] = rows[:, [DCOV, DCOV + 1, DCOV + 1, DCOV + 2]]
    nf[:, P + 10] = nf[:, P + 15] = np.where(has_v, rows[:, DVEL_VAR], velocity_var)
    nf[:, EXIST] = 0.5 * rows[:, DEXIST]
    new = np.arange(m)
    source = rows[:, DSOURCE].astype(np.int64)
    nf[new, VOTES + rows[:, DCLS].astype(np.int64)] = rows[:, DCLS_PROB]
    nf[:, SIZE : SIZE + 2] = rows[:, DSIZE : DSIZE + 2]
    nf[:, SCORES : SCORES + MAX_SOURCES] = np.nan
    nf[new, SCORES + source] = rows[:, DEXIST]
    ni[:, ID] = new + next_id
    ni[:, [STAMP, BORN, LAST_HIT, LAST_PLACED]] = stamp_ns
    ni[:, [HITS, SCANS]] = 1
    ni[:, SOURCES] = source
    return (
        np.concatenate((f, nf)),
        np.concatenate((i, ni)),
        np.concatenate((c, np.zeros(m, bool))),
    )


def revive_np(
    lost_f: F64,
    lost_i: I64,
    lost_at: I64,
    f: F64,
    i: I64,
    first: int,
    d: F64,
    idx: I64,
    stamp_ns: int,
    revive_ns: int,
    q: float,
    gate: float,
    speed_gate2: float,
) -> int:
    """Lost tracks (``lost_f``, ``lost_i``: their rows when deleted, at ``lost_at`` [ns]) hand
    their ids and class votes to the new tracks (rows from ``first`` of ``f``, ``i``, started by
    the detections ``idx`` of ``d``) in their gate: each lost track, predicted to ``stamp_ns``,
    at most one, nearest pair first. Only those lost within ``revive_ns`` and whose id no track
    of rows before ``first`` has. Returns how many ids were handed on."""
    fresh = (stamp_ns - lost_at <= revive_ns) & ~np.isin(lost_i[:, ID], i[:first, ID])
    if not fresh.any() or not len(idx):
        return 0
    gf, gi = lost_f[fresh], lost_i[fresh]  # copies: predicted afresh each time
    predict_np(gf, gi, stamp_ns, q)
    cost = gated_cost_np(gf, d[idx], gate, speed_gate2)
    handed = 0
    while True:
        a, b = np.unravel_index(int(np.argmin(cost)), cost.shape)
        if not cost[a, b] < OUT_OF_GATE:
            return handed
        i[first + b, ID] = gi[a, ID]
        f[first + b, VOTES : VOTES + MAX_CLASSES] += gf[a, VOTES : VOTES + MAX_CLASSES]
        cost[a, :] = cost[:, b] = OUT_OF_GATE
        handed += 1


def consensus_np(vx_rel: F64, width: float) -> tuple[float, int]:
    """The ego speed's radar vote: of the relative forward velocities ``vx_rel`` [m/s] (their
    negatives are the speeds stationary returns vote for; below -1 m/s and non-finite ones are
    left out: the car does not reverse here) the largest group within ``width`` of each other;
    returns its median and size (NaN, 0 without votes)."""
    votes = -vx_rel
    votes = np.sort(votes[np.isfinite(votes) & (votes > -1.0)])
    if not votes.size:
        return math.nan, 0
    hi = np.searchsorted(votes, votes + width, side='right')
    counts = hi - np.arange(votes.size)
    best = int(np.argmax(counts))
    n = int(counts[best])  # the group, sorted: its median by index
    return 0.5 * float(votes[best + (n - 1) // 2] + votes[best + n // 2]), n


# -- the sets ----------------------------------------------------------------------------------


class Kernels(NamedTuple):
    """One implementation of each kernel."""

    name: str
    predict: Callable[[F64, I64, int, float], None]
    gated_cost: Callable[[F64, F64, float, float], F64]
    split: Callable[[F64], tuple[I64, I64, I64, I64, F64]]
    join: Callable[[I64, I64, I64, I64, I64, I64, F64], tuple[I64, I64]]
    update_life: Callable[
        [F64, I64, BOOL, I64, I64, F64, BOOL, int, LifeCycle, bool], tuple[BOOL, BOOL]
    ]
    birth: Callable[[F64, I64, BOOL, F64, I64, int, int, float], tuple[F64, I64, BOOL]]
    revive: Callable[[F64, I64, I64, F64, I64, int, F64, I64, int, int, float, float, float], int]
    consensus: Callable[[F64, float], tuple[float, int]]


NUMPY = Kernels(
    'numpy',
    predict_np,
    gated_cost_np,
    split_np,
    join_np,
    update_life_np,
    birth_np,
    revive_np,
    consensus_np,
)


def _load() -> Kernels:
    """The loops of :mod:`track_jit` (numba); ImportError where numba is not installed."""
    from rt_fusion.core.perception import track_jit as j  # noqa: PLC0415 (optional, slow)

    return Kernels(
        'numba',
        j.predict_loop,
        j.gated_cost_loop,
        j.split_loop,
        j.join_loop,
        j.update_life_loop,
        j.birth_loop,
        j.revive_loop,
        j.consensus_loop,
    )


#: The compiled set, loaded on first use, or in the background (:mod:`rt_fusion.core.compiled`).
COMPILED: CompiledSet[Kernels] = CompiledSet(_load)


def kernels(jit: bool | None = None) -> Kernels:
    """The numba set when ``jit`` (None: unless ``RT_FUSION_JIT=0``) and numba is installed,
    else the numpy set (also while the numba set loads in the background, or if that failed)."""
    return COMPILED.get(jit) or NUMPY


def defer() -> None:
    """Until :func:`load_in_background` has run, :func:`kernels` gives the numpy set
    (:meth:`CompiledSet.defer`)."""
    COMPILED.defer()


def loading() -> bool:
    """True while :func:`load_in_background` is at work."""
    return COMPILED.loading()


def pending() -> bool:
    """True while :func:`kernels` gives the numpy set only for now (deferred or loading): a
    tracker made meanwhile asks again at its next step, and stops asking once this is False."""
    return COMPILED.pending()


def load_in_background(
    warm: Callable[[Kernels], object],
    start: Callable[[Callable[[], None]], object],
) -> bool:
    """Loads the compiled set and calls ``warm`` with it, off the caller's thread
    (:meth:`CompiledSet.load_in_background`)."""
    return COMPILED.load_in_background(warm, start)

"""The tracker's kernels (:mod:`.track_kernels`) as loops compiled by numba.

Imported only where numba is installed (``track_kernels.kernels``). Each function is its numpy
twin in ``track_kernels`` written as one loop over the tracks, on the same blocks and columns;
the arithmetic is the same (Gaussian elimination with partial pivoting, as LAPACK's gesv, for
the Kalman gain). Compiled on first use and cached beside this file.
"""

from __future__ import annotations

import math

import numpy as np

from rt_fusion.core.compiled import njit
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


@njit
def predict_loop(f: F64, i: I64, stamp_ns: int, q: float) -> None:
    """:func:`.track_kernels.predict_np` as a loop (P' = F P Fᵀ + Q by 2×2 blocks)."""
    o = np.empty((4, 4))
    for n in range(f.shape[0]):
        t = max(stamp_ns - i[n, STAMP], 0) / 1e9
        i[n, STAMP] = max(i[n, STAMP], stamp_ns)
        f[n, X] += t * f[n, X + 2]
        f[n, X + 1] += t * f[n, X + 3]
        for r in range(4):
            for c in range(4):
                o[r, c] = f[n, P + 4 * r + c]
        for r in range(2):
            for c in range(2):
                a = o[r, c] + t * (o[r, 2 + c] + o[c, 2 + r]) + t * t * o[2 + r, 2 + c]
                b = o[r, 2 + c] + t * o[2 + r, 2 + c]
                if r == c:
                    a += q * (t**4 / 4)
                    b += q * (t**3 / 2)
                f[n, P + 4 * r + c] = a
                f[n, P + 4 * r + 2 + c] = b
                f[n, P + 4 * (2 + c) + r] = b
                f[n, P + 4 * (2 + r) + 2 + c] = o[2 + r, 2 + c] + (q * (t**2) if r == c else 0.0)


@njit
def gated_cost_loop(f: F64, d: F64, gate: float, speed_gate2: float) -> F64:
    """:func:`.track_kernels.gated_cost_np` as a loop."""
    n, m = f.shape[0], d.shape[0]
    out = np.empty((n, m))
    for i in range(n):
        for j in range(m):
            dx = d[j, DXY] - f[i, X]
            dy = d[j, DXY + 1] - f[i, X + 1]
            a = f[i, P] + d[j, DCOV]
            c = f[i, P + 5] + d[j, DCOV + 2]
            # d² ≥ |Δ|² / λmax(S) ≥ |Δ|² / trace(S): most pairs are out without the division.
            if dx * dx + dy * dy > gate * (a + c):
                out[i, j] = OUT_OF_GATE
                continue
            b = f[i, P + 1] + d[j, DCOV + 1]
            d2 = (c * dx * dx - 2.0 * b * dx * dy + a * dy * dy) / (a * c - b * b)
            if d2 > gate:
                out[i, j] = OUT_OF_GATE
                continue
            dvx = d[j, DV] - f[i, X + 2]
            dvy = d[j, DV + 1] - f[i, X + 3]
            s_v = 0.5 * (f[i, P + 10] + f[i, P + 15]) + d[j, DVEL_VAR]
            if dvx * dvx + dvy * dvy > max(speed_gate2, gate * s_v):  # NaN: False
                out[i, j] = OUT_OF_GATE
                continue
            out[i, j] = d2
    return out


@njit
def split_loop(gated: F64) -> tuple[I64, I64, I64, I64, F64]:
    """:func:`.track_kernels.split_np` as a loop."""
    n, m = gated.shape
    per_row = np.zeros(n, np.int64)
    per_col = np.zeros(m, np.int64)
    for i in range(n):
        for j in range(m):
            if gated[i, j] < OUT_OF_GATE:
                per_row[i] += 1
                per_col[j] += 1
    rows = np.empty(min(n, m), np.int64)
    cols = np.empty(min(n, m), np.int64)
    row_alone = np.zeros(n, np.bool_)
    col_alone = np.zeros(m, np.bool_)
    k = 0
    for i in range(n):
        if per_row[i] == 1:
            for j in range(m):
                if gated[i, j] < OUT_OF_GATE:
                    if per_col[j] == 1:
                        rows[k], cols[k] = i, j
                        row_alone[i] = col_alone[j] = True
                        k += 1
                    break
    rival_rows = np.flatnonzero((per_row > 0) & ~row_alone)
    rival_cols = np.flatnonzero((per_col > 0) & ~col_alone)
    sub = np.empty((rival_rows.shape[0], rival_cols.shape[0]))
    for a in range(rival_rows.shape[0]):
        for b in range(rival_cols.shape[0]):
            sub[a, b] = gated[rival_rows[a], rival_cols[b]]
    return rows[:k], cols[:k], rival_rows, rival_cols, sub


@njit
def join_loop(
    rows: I64, cols: I64, rival_rows: I64, rival_cols: I64, r: I64, c: I64, sub: F64
) -> tuple[I64, I64]:
    """:func:`.track_kernels.join_np` as a loop."""
    k = rows.shape[0]
    all_rows = np.empty(k + r.shape[0], np.int64)
    all_cols = np.empty(k + r.shape[0], np.int64)
    all_rows[:k] = rows
    all_cols[:k] = cols
    for a in range(r.shape[0]):
        if sub[r[a], c[a]] < OUT_OF_GATE:
            all_rows[k] = rival_rows[r[a]]
            all_cols[k] = rival_cols[c[a]]
            k += 1
    order = np.argsort(all_rows[:k], kind='mergesort')
    return all_rows[:k][order], all_cols[:k][order]


@njit
def _solve(a: F64, out: F64, k: int) -> None:
    """Solves A X = B in place for the leading k×k of ``a`` and k×4 of ``out`` (B in, X out):
    Gaussian elimination with partial pivoting, as LAPACK's gesv. ``a`` is destroyed."""
    for col in range(k):
        piv = col
        for r in range(col + 1, k):
            if abs(a[r, col]) > abs(a[piv, col]):
                piv = r
        if piv != col:
            for c in range(k):
                a[col, c], a[piv, c] = a[piv, c], a[col, c]
            for c in range(4):
                out[col, c], out[piv, c] = out[piv, c], out[col, c]
        for r in range(col + 1, k):
            g = a[r, col] / a[col, col]
            for c in range(col, k):
                a[r, c] -= g * a[col, c]
            for c in range(4):
                out[r, c] -= g * out[col, c]
    for col in range(k - 1, -1, -1):
        for r in range(col + 1, k):
            for c in range(4):
                out[col, c] -= a[col, r] * out[r, c]
        for c in range(4):
            out[col, c] /= a[col, col]


@njit
def _update(f: F64, i: I64, rows: I64, cols: I64, d: F64) -> None:
    """:func:`.track_kernels._update_np` as a loop (H = I or [I 0]; S = H P Hᵀ + R; the
    gain's transpose Kᵀ = S⁻¹ H P solved in place; x += K (z - H x); P -= K H P,
    symmetrised)."""
    s = np.empty((4, 4))
    kt = np.empty((4, 4))  # Kᵀ: k rows
    innov = np.empty(4)
    p = np.empty((4, 4))
    for n in range(rows.shape[0]):
        t, j = rows[n], cols[n]
        for r in range(4):
            for c in range(4):
                p[r, c] = f[t, P + 4 * r + c]
        full = math.isfinite(d[j, DV]) and math.isfinite(d[j, DV + 1])
        k = 4 if full else 2
        for r in range(k):
            for c in range(k):
                s[r, c] = p[r, c]
            for c in range(4):
                kt[r, c] = p[r, c]
        s[0, 0] += d[j, DCOV]
        s[0, 1] += d[j, DCOV + 1]
        s[1, 0] += d[j, DCOV + 1]
        s[1, 1] += d[j, DCOV + 2]
        innov[0] = d[j, DXY] - f[t, X]
        innov[1] = d[j, DXY + 1] - f[t, X + 1]
        if full:
            s[2, 2] += d[j, DVEL_VAR]
            s[3, 3] += d[j, DVEL_VAR]
            innov[2] = d[j, DV] - f[t, X + 2]
            innov[3] = d[j, DV + 1] - f[t, X + 3]
        _solve(s, kt, k)
        for r in range(4):
            acc = 0.0
            for c in range(k):
                acc += kt[c, r] * innov[c]
            f[t, X + r] += acc
        for r in range(4):
            for c in range(r, 4):
                a = p[r, c]
                b = p[c, r]
                for m in range(k):
                    a -= kt[m, r] * p[m, c]
                    b -= kt[m, c] * p[m, r]
                f[t, P + 4 * r + c] = f[t, P + 4 * c + r] = 0.5 * (a + b)
        source = int(d[j, DSOURCE])
        exist = d[j, DEXIST]
        i[t, HITS] += 1
        i[t, MISSES] = 0
        i[t, SOURCES] |= source
        f[t, SCORES + source] = exist
        f[t, VOTES + int(d[j, DCLS])] += d[j, DCLS_PROB]
        f[t, EXIST] = 0.7 * f[t, EXIST] + 0.3 * (0.5 + 0.5 * exist)
        for c in range(2):
            v = d[j, DSIZE + c]
            if math.isfinite(v) and v > 0:
                f[t, SIZE + c] = v


@njit
def update_life_loop(
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
    """:func:`.track_kernels.update_life_np` as loops."""
    _update(f, i, rows, cols, d)
    n = f.shape[0]
    hit = np.zeros(n, np.bool_)
    placed = np.zeros(n, np.bool_)
    for k in range(rows.shape[0]):
        hit[rows[k]] = True
        placed[rows[k]] = d[cols[k], DBIRTH] != 0
    remove = np.zeros(n, np.bool_)
    for t in range(n):
        missed = covered[t] and not hit[t]
        if hit[t] or covered[t]:
            i[t, SCANS] += 1
        if missed:
            i[t, MISSES] += 1
            f[t, EXIST] *= 0.8
        if hit[t]:
            i[t, LAST_HIT] = stamp_ns
        if placed[t]:
            i[t, LAST_PLACED] = stamp_ns
        young = stamp_ns - i[t, BORN] <= life.window_ns
        if i[t, HITS] >= life.confirm_hits and young:
            confirmed[t] = True
        pos_var = max(f[t, P], f[t, P + 5])
        remove[t] = (
            (not confirmed[t] and not young)
            or (confirmed[t] and stamp_ns - i[t, LAST_PLACED] > life.coast_ns)
            or pos_var > life.max_var
        )
    # Merging: the younger (later row) of two confirmed tracks on one object goes.
    for a in range(n):
        if not confirmed[a] or remove[a]:
            continue
        for b in range(a + 1, n):
            if not confirmed[b] or remove[b]:
                continue
            d2 = (f[a, X] - f[b, X]) ** 2 + (f[a, X + 1] - f[b, X + 1]) ** 2
            v2 = (f[a, X + 2] - f[b, X + 2]) ** 2 + (f[a, X + 3] - f[b, X + 3]) ** 2
            if d2 < life.merge_d2 and v2 < life.merge_v2:
                remove[b] = True
    free = np.zeros(d.shape[0], np.bool_)
    if birth:
        for j in range(d.shape[0]):
            free[j] = d[j, DBIRTH] != 0
        for k in range(cols.shape[0]):
            free[cols[k]] = False
        for j in range(d.shape[0]):
            if not free[j]:
                continue
            for t in range(n):
                if remove[t]:
                    continue
                dx = d[j, DXY] - f[t, X]
                dy = d[j, DXY + 1] - f[t, X + 1]
                a_ = f[t, P] + d[j, DCOV]
                b_ = f[t, P + 1] + d[j, DCOV + 1]
                c_ = f[t, P + 5] + d[j, DCOV + 2]
                d2 = (c_ * dx * dx - 2.0 * b_ * dx * dy + a_ * dy * dy) / (a_ * c_ - b_ * b_)
                if d2 <= life.gate:
                    free[j] = False
                    break
    return remove, free


@njit
def birth_loop(
    f: F64, i: I64, c: BOOL, d: F64, idx: I64, stamp_ns: int, next_id: int, velocity_var: float
) -> tuple[F64, I64, BOOL]:
    """:func:`.track_kernels.birth_np` as a loop."""
    n, m = f.shape[0], idx.shape[0]
    nf = np.empty((n + m, f.shape[1]))
    ni = np.empty((n + m, i.shape[1]), np.int64)
    nc = np.zeros(n + m, np.bool_)
    nf[:n] = f
    ni[:n] = i
    nc[:n] = c
    for k in range(m):
        t, j = n + k, idx[k]
        nf[t, :] = 0.0
        has_v = math.isfinite(d[j, DV]) and math.isfinite(d[j, DV + 1])
        nf[t, X] = d[j, DXY]
        nf[t, X + 1] = d[j, DXY + 1]
        nf[t, X + 2] = d[j, DV] if has_v else 0.0
        nf[t, X + 3] = d[j, DV + 1] if has_v else 0.0
        nf[t, P] = d[j, DCOV]
        nf[t, P + 1] = nf[t, P + 4] = d[j, DCOV + 1]
        nf[t, P + 5] = d[j, DCOV + 2]
        nf[t, P + 10] = nf[t, P + 15] = d[j, DVEL_VAR] if has_v else velocity_var
        nf[t, EXIST] = 0.5 * d[j, DEXIST]
        nf[t, VOTES + int(d[j, DCLS])] = d[j, DCLS_PROB]
        nf[t, SIZE] = d[j, DSIZE]
        nf[t, SIZE + 1] = d[j, DSIZE + 1]
        for s in range(SCORES, SCORES + MAX_SOURCES):
            nf[t, s] = np.nan
        nf[t, SCORES + int(d[j, DSOURCE])] = d[j, DEXIST]
        ni[t, ID] = next_id + k
        ni[t, STAMP] = ni[t, BORN] = ni[t, LAST_HIT] = ni[t, LAST_PLACED] = stamp_ns
        ni[t, HITS] = ni[t, SCANS] = 1
        ni[t, MISSES] = 0
        ni[t, SOURCES] = int(d[j, DSOURCE])
    return nf, ni, nc


@njit
def revive_loop(
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
    """:func:`.track_kernels.revive_np` as loops (each lost track predicted into a scratch row,
    then its gated costs; the same greedy order: least cost first, ties to the lower index)."""
    g, m = lost_f.shape[0], idx.shape[0]
    rows = np.empty(g, np.int64)
    n = 0
    for a in range(g):
        if stamp_ns - lost_at[a] > revive_ns:
            continue
        alive = False
        for t in range(first):
            if i[t, ID] == lost_i[a, ID]:
                alive = True
                break
        if not alive:
            rows[n] = a
            n += 1
    if n == 0 or m == 0:
        return 0
    gf = np.empty((n, lost_f.shape[1]))
    gi = np.empty((n, lost_i.shape[1]), np.int64)
    for a in range(n):
        gf[a] = lost_f[rows[a]]
        gi[a] = lost_i[rows[a]]
    predict_loop(gf, gi, stamp_ns, q)
    dets = np.empty((m, d.shape[1]))
    for k in range(m):
        dets[k] = d[idx[k]]
    cost = gated_cost_loop(gf, dets, gate, speed_gate2)
    handed = 0
    while True:
        best, ba, bb = OUT_OF_GATE, -1, -1
        for a in range(n):
            for b in range(m):
                if cost[a, b] < best:
                    best, ba, bb = cost[a, b], a, b
        if ba < 0:
            return handed
        i[first + bb, ID] = gi[ba, ID]
        for c in range(VOTES, VOTES + MAX_CLASSES):
            f[first + bb, c] += gf[ba, c]
        for b in range(m):
            cost[ba, b] = OUT_OF_GATE
        for a in range(n):
            cost[a, bb] = OUT_OF_GATE
        handed += 1


@njit
def consensus_loop(vx_rel: F64, width: float) -> tuple[float, int]:
    """:func:`.track_kernels.consensus_np` as a loop (two pointers over the sorted votes)."""
    votes = np.empty(vx_rel.shape[0])
    m = 0
    for v in vx_rel:
        if math.isfinite(v) and -v > -1.0:
            votes[m] = -v
            m += 1
    if m == 0:
        return math.nan, 0
    votes = np.sort(votes[:m])
    best, n, hi = 0, 0, 0
    for lo in range(m):
        while hi < m and votes[hi] <= votes[lo] + width:
            hi += 1
        if hi - lo > n:
            best, n = lo, hi - lo
    return 0.5 * (votes[best + (n - 1) // 2] + votes[best + n // 2]), n

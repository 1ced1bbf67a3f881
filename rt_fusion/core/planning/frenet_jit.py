"""The planner's :meth:`.frenet.FrenetPlanner.plan` as one loop compiled by numba.

Imported only where numba is installed (``frenet.COMPILED``). :func:`plan_loop` is the numpy
planner written as loops, step for step: the profiles and their hard checks, the base cost, the
obstacles predicted and placed in Frenet coordinates, the broad phase, branch and bound with the
proximity cost, the exact circle check, the fallback stops. In numpy one plan is some 300 array
operations of a few µs each, and that, not the arithmetic, is its time; here it is one call.
Where the numpy form works on every candidate at once, the loop works lazily in base-cost order
(a profile's broad-phase cells are computed when a candidate first needs them): the same winner,
since the order of the survivors of a filter is the same either way.
``tests/core/planning/test_frenet_jit.py`` plans the same scenes both ways and compares.
"""

from __future__ import annotations

import math

import numpy as np

from rt_fusion.core.compiled import njit
from rt_fusion.core.planning.frenet_layout import (
    F64,
    NEAR_M,
    O_GROWTH,
    O_LENGTH,
    O_STD,
    O_VX,
    O_VY,
    O_WIDTH,
    O_X,
    O_Y,
    O_YAW,
    O_YAW_RATE,
    P_COMFORT_DECEL,
    P_DESIRED_SPEED,
    P_EGO_R,
    P_MAX_ACCEL,
    P_MAX_CURVATURE,
    P_MAX_DECEL,
    P_MAX_JERK,
    P_MAX_LAT_ACCEL,
    P_MAX_SPEED,
    P_PREFERRED,
    P_PROXIMITY_RANGE,
    P_ROAD_LEFT,
    P_ROAD_RIGHT,
    P_SAFETY_MARGIN,
    P_TIME_GAP,
    P_VEHICLE_LENGTH,
    P_VEHICLE_WIDTH,
    P_W_CONSISTENCY,
    P_W_JERK_LAT,
    P_W_JERK_LON,
    P_W_OFFSET,
    P_W_PROXIMITY,
    P_W_SPEED,
    P_W_TIME,
    STATUS_COMFORT_STOP,
    STATUS_EMERGENCY_STOP,
    STATUS_OK,
    T_A,
    T_D,
    T_D_D,
    T_D_DD,
    T_KAPPA,
    T_S,
    T_S_D,
    T_S_DD,
    T_V,
    T_X,
    T_Y,
    T_YAW,
)


@njit
def _profiles(
    target: F64, horizons: F64, x0: float, v0: float, a0: float, quintic: bool, t: F64
) -> tuple[F64, F64]:
    """Position, speed, acceleration, jerk of each profile on the grid (N, 4, K), and the jerk
    integrals (N,): ``frenet._quintic`` (to (target, 0, 0)) or ``_quartic`` (to speed
    ``target``, acceleration 0), extended at the end speed after T as ``frenet._basis``."""
    n, k = target.size, t.size
    out = np.empty((n, 4, k))
    jerk2 = np.empty(n)
    for r in range(n):
        tt_end = horizons[r]
        c0, c1, c2 = x0, v0, a0 / 2.0
        da = -(2 * c2)
        if quintic:
            h = target[r] - (c0 + c1 * tt_end + c2 * tt_end**2)
            dv = -(c1 + 2 * c2 * tt_end)
            c3 = (10 * h - 4 * dv * tt_end + 0.5 * da * tt_end**2) / tt_end**3
            c4 = (-15 * h + 7 * dv * tt_end - da * tt_end**2) / tt_end**4
            c5 = (6 * h - 3 * dv * tt_end + 0.5 * da * tt_end**2) / tt_end**5
        else:
            dv = target[r] - (c1 + 2 * c2 * tt_end)
            c3 = (3 * dv - da * tt_end) / (3 * tt_end**2)
            c4 = (-2 * dv + da * tt_end) / (4 * tt_end**3)
            c5 = 0.0
        ja, jb, je = 6 * c3, 24 * c4, 60 * c5
        jerk2[r] = (
            ja * ja * tt_end
            + ja * jb * tt_end**2
            + (jb * jb + 2 * ja * je) * tt_end**3 / 3
            + jb * je * tt_end**4 / 2
            + je * je * tt_end**5 / 5
        )
        for j in range(k):
            tt = min(t[j], tt_end)
            after = t[j] - tt
            p1, p2, p3, p4, p5 = tt, tt * tt, tt**3, tt**4, tt**5
            vel = c1 + 2 * c2 * p1 + 3 * c3 * p2 + 4 * c4 * p3 + 5 * c5 * p4
            out[r, 0, j] = c0 + c1 * p1 + c2 * p2 + c3 * p3 + c4 * p4 + c5 * p5 + after * vel
            out[r, 1, j] = vel
            if after > 0:
                out[r, 2, j] = 0.0
                out[r, 3, j] = 0.0
            else:
                out[r, 2, j] = 2 * c2 + 6 * c3 * p1 + 12 * c4 * p2 + 20 * c5 * p3
                out[r, 3, j] = 6 * c3 + 24 * c4 * p1 + 60 * c5 * p2
    return out, jerk2


@njit
def _interp(x: float, xs: F64, f: F64) -> float:
    """``np.interp(x, xs, f)`` for the uniform grids of a ReferencePath table (``np.arange``):
    the interval found by division instead of a search, the value by numpy's formula."""
    n = xs.size
    if x <= xs[0]:
        return float(f[0])
    if x >= xs[n - 1]:
        return float(f[n - 1])
    j = min(int((x - xs[0]) / (xs[1] - xs[0])), n - 2)
    if x < xs[j]:  # the division rounded up across a grid point
        j -= 1
    elif x >= xs[j + 1]:
        j += 1
    return float((f[j + 1] - f[j]) / (xs[j + 1] - xs[j]) * (x - xs[j]) + f[j])


@njit
def _deriv(f: F64, step: float, out: F64) -> None:
    """``frenet._deriv`` into ``out``."""
    n = f.size
    for j in range(1, n - 1):
        out[j] = (f[j + 1] - f[j - 1]) / (2 * step)
    out[0] = (f[1] - f[0]) / step
    out[n - 1] = (f[n - 1] - f[n - 2]) / step


@njit
def _cartesian(
    s: F64, d: F64, step: float, ps: F64, px: F64, py: F64, pyaw: F64, tr: F64, tmp: F64
) -> None:
    """``frenet.FrenetPlanner._cartesian``: rows T_X .. T_A and T_KAPPA of ``tr`` from the
    Frenet rows (``tmp``: scratch (4, K))."""
    k = s.size
    x, y, yaw, v = tr[T_X], tr[T_Y], tr[T_YAW], tr[T_V]
    ryaw, dx, dy, dyaw = tmp[0], tmp[1], tmp[2], tmp[3]
    for j in range(k):
        ry = _interp(s[j], ps, pyaw)
        x[j] = _interp(s[j], ps, px) - d[j] * math.sin(ry)
        y[j] = _interp(s[j], ps, py) + d[j] * math.cos(ry)
        ryaw[j] = ry
    _deriv(x, step, dx)
    _deriv(y, step, dy)
    two_pi = 2 * math.pi
    correction = 0.0
    for j in range(k):
        v[j] = math.hypot(dx[j], dy[j])
        raw = math.atan2(dy[j], dx[j]) if v[j] > 0.05 else ryaw[j]
        if j > 0:  # np.unwrap: the jump to the previous raw angle, taken into (-pi, pi]
            dd = raw - tmp[0, j - 1]
            ddmod = np.fmod(dd + math.pi, two_pi)
            if ddmod != 0 and ddmod < 0:
                ddmod += two_pi
            ddmod -= math.pi
            if ddmod == -math.pi and dd > 0:
                ddmod = math.pi
            if abs(dd) >= math.pi:
                correction += ddmod - dd
        tmp[0, j] = raw  # ryaw[j] is not needed after this step
        yaw[j] = raw + correction if j > 0 else raw
    _deriv(yaw, step, dyaw)
    for j in range(k):
        tr[T_KAPPA, j] = dyaw[j] / max(v[j], 0.05) if v[j] > 0.05 else 0.0
    _deriv(v, step, tr[T_A])


@njit
def _curvature_ok(tr: F64, max_curvature: float, max_lat_accel: float) -> bool:
    for j in range(tr.shape[1]):
        v = tr[T_V, j]
        if v > 1.0:
            kappa = abs(tr[T_KAPPA, j])
            if kappa > max_curvature or v * v * kappa > max_lat_accel:
                return False
    return True


@njit
def _collides(
    tr: F64, ego_off: F64, owner: np.ndarray, cx: F64, cy: F64, limit2: F64, near: np.ndarray
) -> bool:
    """``frenet.FrenetPlanner._collides``: ego circles against the circles of the obstacles in
    ``near``."""
    for j in range(tr.shape[1]):
        c, s = math.cos(tr[T_YAW, j]), math.sin(tr[T_YAW, j])
        for e in range(ego_off.size):
            ex = tr[T_X, j] + ego_off[e] * c
            ey = tr[T_Y, j] + ego_off[e] * s
            for q in range(owner.size):
                if near[owner[q]]:
                    dx, dy = ex - cx[q, j], ey - cy[q, j]
                    if dx * dx + dy * dy < limit2[q, j]:
                        return True
    return False


@njit
def _circles(
    obs: F64, ox: F64, oy: F64, cos_y: F64, sin_y: F64, t: F64, ego_r: float, margin: float
) -> tuple[np.ndarray, F64, F64, F64]:
    """``frenet.FrenetPlanner._circles``: owner, centres and squared touching distance of the
    circles covering each obstacle over the horizon."""
    n_obs, k = ox.shape
    counts = np.empty(n_obs, np.int64)
    for o in range(n_obs):
        counts[o] = max(1, math.ceil(2 * obs[o, O_LENGTH] / max(obs[o, O_WIDTH], 0.1)))
    owner = np.empty(counts.sum(), np.int64)
    cx, cy = np.empty((owner.size, k)), np.empty((owner.size, k))
    limit2 = np.empty((owner.size, k))
    q = 0
    for o in range(n_obs):
        m = counts[o]
        length, width = obs[o, O_LENGTH], max(obs[o, O_WIDTH], 0.1)
        radius = math.hypot(length / (2 * m), width / 2.0) + obs[o, O_STD]
        for c in range(m):
            owner[q] = o
            along = (c - (m - 1) / 2.0) * (length / m)
            for j in range(k):
                cx[q, j] = ox[o, j] + along * cos_y[o, j]
                cy[q, j] = oy[o, j] + along * sin_y[o, j]
                lim = (ego_r + radius) + margin + obs[o, O_GROWTH] * t[j]
                limit2[q, j] = lim * lim
            q += 1
    return owner, cx, cy, limit2


@njit
def plan_loop(
    start: F64,
    prev_offset: float,
    pv: F64,
    t: F64,
    lat_d: F64,
    lat_t: F64,
    lon_v: F64,
    lon_t: F64,
    li: np.ndarray,
    mi: np.ndarray,
    cand_d: F64,
    cand_v: F64,
    cand_t: F64,
    ego_off: F64,
    obs: F64,
    line: F64,
    key: np.ndarray,
    ks: F64,
    kd: F64,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    key_frac: F64,
    ps: F64,
    px: F64,
    py: F64,
    pyaw: F64,
    tr: F64,
) -> tuple[int, int, float, int]:
    """One plan (``FrenetPlanner.plan`` with the arrays it keeps): fills ``tr`` (T_* rows) and
    returns (status, candidate index or -1, cost, exact checks). ``start``: s, s', s'', d, d',
    d''; ``prev_offset``: the previous plan's target offset (NaN: no consistency cost);
    ``obs``: O_* columns; ``line``: a straight path's x0, y0, cos, sin (empty: a curved path,
    whose obstacles ``ks``, ``kd`` are projected at the ``key`` steps already)."""
    s0, sd0, sdd0, d0, dd0, ddd0 = start[0], start[1], start[2], start[3], start[4], start[5]
    k = t.size
    step = t[1] - t[0]
    lat, jl = _profiles(lat_d, lat_t, d0, dd0, ddd0, True, t)
    lon, jm = _profiles(lon_v, lon_t, s0, sd0, sdd0, False, t)
    max_jerk = pv[P_MAX_JERK]
    lat_ok = np.empty(lat_d.size, np.bool_)
    for r in range(lat_d.size):
        ok = True
        for j in range(k):
            dj = lat[r, 0, j]
            if (
                abs(lat[r, 3, j]) > max_jerk
                or dj > pv[P_ROAD_LEFT] + 1e-6
                or dj < pv[P_ROAD_RIGHT] - 1e-6
            ):
                ok = False
                break
        lat_ok[r] = ok
    lon_ok = np.empty(lon_v.size, np.bool_)
    for r in range(lon_v.size):
        ok = True
        for j in range(k):
            v = lon[r, 1, j]
            if (
                v > pv[P_MAX_SPEED] + 1e-6
                or v < -1e-6
                or abs(lon[r, 2, j]) > pv[P_MAX_ACCEL] + 1e-6
                or abs(lon[r, 3, j]) > max_jerk
            ):
                ok = False
                break
        lon_ok[r] = ok
    n = li.size
    base = np.empty(n)
    speed_goal = min(pv[P_DESIRED_SPEED], pv[P_MAX_SPEED])
    consistency = not math.isnan(prev_offset) and pv[P_W_CONSISTENCY] != 0
    for i in range(n):
        base[i] = (
            pv[P_W_JERK_LAT] * jl[li[i]]
            + pv[P_W_JERK_LON] * jm[mi[i]]
            + pv[P_W_OFFSET] * (cand_d[i] - pv[P_PREFERRED]) ** 2
            + pv[P_W_SPEED] * (cand_v[i] - speed_goal) ** 2
            + pv[P_W_TIME] / cand_t[i]
        )
        if consistency:
            base[i] = base[i] + pv[P_W_CONSISTENCY] * (cand_d[i] - prev_offset) ** 2
    # The obstacles: predicted (CTRV), in Frenet coordinates, with their half extents.
    n_obs = obs.shape[0]
    ox, oy, oyaw = np.empty((n_obs, k)), np.empty((n_obs, k)), np.empty((n_obs, k))
    turning_any = False
    for o in range(n_obs):
        if abs(obs[o, O_YAW_RATE]) > 1e-4:
            turning_any = True
    for o in range(n_obs):
        w, vx, vy = obs[o, O_YAW_RATE], obs[o, O_VX], obs[o, O_VY]
        turning = abs(w) > 1e-4
        for j in range(k):
            tj = t[j]
            if turning:
                sin_wt, cos_wt = math.sin(w * tj), math.cos(w * tj)
                ox[o, j] = obs[o, O_X] + (vx * sin_wt - vy * (1 - cos_wt)) / w
                oy[o, j] = obs[o, O_Y] + (vy * sin_wt + vx * (1 - cos_wt)) / w
            else:
                ox[o, j] = obs[o, O_X] + vx * tj
                oy[o, j] = obs[o, O_Y] + vy * tj
            oyaw[o, j] = obs[o, O_YAW] + w * tj if turning_any else obs[o, O_YAW]
    cos_y, sin_y = np.cos(oyaw), np.sin(oyaw)
    if line.size:  # ReferencePath.project of a straight path, at the key steps
        ks, kd = np.empty((n_obs, key.size)), np.empty((n_obs, key.size))
        for o in range(n_obs):
            for q, j in enumerate(key):
                ex, ey = ox[o, j] - line[0], oy[o, j] - line[1]
                ks[o, q] = ex * line[2] + ey * line[3]
                kd[o, q] = -ex * line[3] + ey * line[2]
    s_o, d_o = np.empty((n_obs, k)), np.empty((n_obs, k))
    half_s, half_d = np.empty((n_obs, k)), np.empty((n_obs, k))
    margin, vlen, vwid = pv[P_SAFETY_MARGIN], pv[P_VEHICLE_LENGTH], pv[P_VEHICLE_WIDTH]
    for o in range(n_obs):
        length, width = obs[o, O_LENGTH], obs[o, O_WIDTH]
        for j in range(k):
            lo, hi, fr = key_lo[j], key_hi[j], key_frac[j]
            s_o[o, j] = ks[o, lo] + fr * (ks[o, hi] - ks[o, lo])
            d_o[o, j] = kd[o, lo] + fr * (kd[o, hi] - kd[o, lo])
            rel = oyaw[o, j] - _interp(s_o[o, j], ps, pyaw)
            c, sn = abs(math.cos(rel)), abs(math.sin(rel))
            grow = obs[o, O_STD] + obs[o, O_GROWTH] * t[j]
            half_s[o, j] = 0.5 * (c * length + sn * width) + 0.5 * vlen + margin + grow
            half_d[o, j] = 0.5 * (sn * length + c * width) + 0.5 * vwid + margin + grow
    # Branch and bound over the kinematically feasible candidates in base-cost order.
    feasible = np.empty(n, np.bool_)
    for i in range(n):
        feasible[i] = lat_ok[li[i]] and lon_ok[mi[i]]
    cand = np.flatnonzero(feasible)
    order = cand[np.argsort(base[cand], kind='mergesort')]
    cells = n_obs * k
    along_cells = np.zeros((lon_v.size, cells), np.bool_)
    across_cells = np.zeros((lat_d.size, cells), np.bool_)
    along_done = np.zeros(lon_v.size, np.bool_)
    across_done = np.zeros(lat_d.size, np.bool_)
    time_gap, rng = pv[P_TIME_GAP], pv[P_PROXIMITY_RANGE]
    owner = np.empty(0, np.int64)
    cx, cy, limit2 = np.empty((0, k)), np.empty((0, k)), np.empty((0, k))
    circles = False  # built when an exact check first needs them
    near = np.zeros(max(n_obs, 1), np.bool_)
    all_near = np.ones(max(n_obs, 1), np.bool_)
    trial = np.empty_like(tr)
    tmp = np.empty((4, k))
    best_cost, best, checks = math.inf, -1, 0
    for i in order:
        if base[i] >= best_cost:
            break  # branch and bound: proximity only adds, no later candidate is cheaper
        a, b = li[i], mi[i]
        s, sd, d = lon[b, 0], lon[b, 1], lat[a, 0]
        if n_obs:
            if not along_done[b]:
                for o in range(n_obs):
                    for j in range(k):
                        gap = time_gap * sd[j]
                        along_cells[b, o * k + j] = (s[j] - gap < s_o[o, j] + half_s[o, j]) and (
                            s[j] + gap > s_o[o, j] - half_s[o, j]
                        )
                along_done[b] = True
            if not across_done[a]:
                for o in range(n_obs):
                    for j in range(k):
                        across_cells[a, o * k + j] = (d[j] < d_o[o, j] + half_d[o, j]) and (
                            d[j] > d_o[o, j] - half_d[o, j]
                        )
                across_done[a] = True
            hit = False
            for c in range(cells):
                if along_cells[b, c] and across_cells[a, c]:
                    hit = True
                    break
            if hit:
                continue
        # Proximity (frenet.FrenetPlanner._proximity).
        prox, any_near = 0.0, False
        if n_obs:
            clearance = math.inf
            for o in range(n_obs):
                clear = math.inf
                for j in range(k):
                    gap_s = abs(s[j] - s_o[o, j]) - half_s[o, j] - time_gap * sd[j]
                    gap_d = abs(d[j] - d_o[o, j]) - half_d[o, j]
                    clear = min(clear, max(gap_s, gap_d))
                near[o] = clear < NEAR_M
                any_near = any_near or near[o]
                clearance = min(clearance, clear)
            if not (clearance >= rng or rng <= 0):
                prox = ((rng - max(clearance, 0.0)) / rng) ** 2
        cost = base[i] + pv[P_W_PROXIMITY] * prox
        if cost >= best_cost:
            continue
        checks += 1
        trial[T_S], trial[T_S_D], trial[T_S_DD] = s, sd, lon[b, 2]
        trial[T_D], trial[T_D_D], trial[T_D_DD] = d, lat[a, 1], lat[a, 2]
        _cartesian(s, d, step, ps, px, py, pyaw, trial, tmp)
        if not _curvature_ok(trial, pv[P_MAX_CURVATURE], pv[P_MAX_LAT_ACCEL]):
            continue
        if any_near:
            if not circles:
                owner, cx, cy, limit2 = _circles(obs, ox, oy, cos_y, sin_y, t, pv[P_EGO_R], margin)
                circles = True
            if _collides(trial, ego_off, owner, cx, cy, limit2, near):
                continue
        best_cost, best = cost, i
        tr[:] = trial
    if best >= 0:
        return STATUS_OK, best, best_cost, checks
    # Nothing feasible: a comfortable stop, or an emergency stop if that one collides too.
    for decel, status in (
        (pv[P_COMFORT_DECEL], STATUS_COMFORT_STOP),
        (pv[P_MAX_DECEL], STATUS_EMERGENCY_STOP),
    ):
        v0 = max(sd0, 0.0)
        t_stop = v0 / decel
        for j in range(k):
            tt = min(t[j], t_stop)
            tr[T_S, j] = s0 + v0 * tt - 0.5 * decel * tt**2
            tr[T_S_D, j] = max(v0 - decel * t[j], 0.0)
            tr[T_S_DD, j] = -decel if t[j] < t_stop else 0.0
            tr[T_D, j] = d0
            tr[T_D_D, j] = 0.0
            tr[T_D_DD, j] = 0.0
        _cartesian(tr[T_S], tr[T_D], step, ps, px, py, pyaw, tr, tmp)
        if n_obs and not circles:
            owner, cx, cy, limit2 = _circles(obs, ox, oy, cos_y, sin_y, t, pv[P_EGO_R], margin)
            circles = True
        if status == STATUS_EMERGENCY_STOP or not (
            n_obs and _collides(tr, ego_off, owner, cx, cy, limit2, all_near)
        ):
            return status, -1, math.inf, checks
    return STATUS_EMERGENCY_STOP, -1, math.inf, checks  # unreachable

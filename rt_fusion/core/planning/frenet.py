"""Frenet-frame sampling planner (Werling, Ziegler, Kammel, Thrun, ICRA 2010), vectorised.

Around a reference path, candidates combine a **lateral** quintic d(t) from the current lateral
state to a target offset (zero lateral speed and acceleration) with a **longitudinal** quartic
s(t) from the current longitudinal state to a target speed (velocity keeping), for every
horizon T. All candidates are evaluated at once with numpy on a common time grid; after T a
candidate holds its target offset and speed.

The search is ordered so that the expensive part runs on few candidates:

1. for all candidates at once: closed-form jerk integrals, offset and speed errors (the *base
   cost*) and the kinematic hard checks (speed, acceleration, jerk, curvature, lateral
   acceleration, road edges);
2. feasible candidates in base-cost order, in batches: a Frenet broad phase against every
   predicted obstacle (boxes in s and d, grown with time for uncertainty) that rejects colliding
   candidates and prices proximity; branch and bound stops as soon as the next base cost cannot
   beat the best total cost found;
3. the winner is checked exactly in Cartesian space (vehicle and obstacles as circles), and
   replaced by the next one if that check fails.

The numpy form below is the reference. Where numba is installed the planner runs the same steps
as one compiled loop (:mod:`.frenet_jit`, :data:`COMPILED`): the same trajectories, without the
~300 array operations of a few µs each that are most of a numpy plan's time.

When nothing is feasible: a comfortable stop (``comfort_decel``), and an emergency stop
(``max_decel``) as the last resort; the result says which. Planning always starts from the
state of the previous trajectory at the current time when the vehicle follows it, so the plan
never jumps.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from rt_fusion.core.compiled import CompiledSet
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param
from rt_fusion.core.planning.frenet_layout import (
    ALL,
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
from rt_fusion.core.planning.reference import ReferencePath


@dataclasses.dataclass(frozen=True)
class PlannerParams:
    """Parameters of the planner (sampling, limits, weights, vehicle)."""

    offsets: tuple[float, ...] = param(
        'lateral target offsets from the reference',
        unit='m',
        default=(-3.5, -2.625, -1.75, -0.875, 0.0, 0.875, 1.75, 2.625, 3.5, 4.375),
    )
    speeds: tuple[float, ...] = param(
        'target speeds',
        unit='m/s',
        default=(0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0),
        low=0.0,
    )
    horizons: tuple[float, ...] = param(
        'manoeuvre durations T', unit='s', default=(2.0, 2.75, 3.5, 4.25, 5.0), low=0.5
    )
    dt: float = param('time step of the trajectory', unit='s', default=0.1, low=0.01, high=0.5)
    horizon: float = param('length of every trajectory', unit='s', default=5.0, low=1.0)
    desired_speed: float = param('cruise speed', unit='m/s', default=15.0, low=0.0)
    max_speed: float = param('speed limit', unit='m/s', default=20.0, low=0.1)
    max_accel: float = param('longitudinal acceleration limit', unit='m/s²', default=3.0, low=0.1)
    max_decel: float = param('braking limit (emergency stop)', unit='m/s²', default=8.0, low=0.1)
    comfort_decel: float = param('comfortable braking', unit='m/s²', default=3.0, low=0.1)
    max_jerk: float = param('jerk limit (both axes)', unit='m/s³', default=15.0, low=0.1)
    max_curvature: float = param('curvature limit', unit='1/m', default=0.2, low=0.001)
    max_lateral_accel: float = param(
        'lateral acceleration limit', unit='m/s²', default=4.0, low=0.1
    )
    road_left: float = param(
        'left road edge (largest d of the vehicle centre)', unit='m', default=4.375
    )
    road_right: float = param('right road edge (smallest d)', unit='m', default=-3.5)
    preferred_offset: float = param('lane the vehicle keeps when free', unit='m', default=0.0)
    vehicle_length: float = param('ego length', unit='m', default=4.5, low=0.5)
    vehicle_width: float = param('ego width', unit='m', default=1.9, low=0.5)
    safety_margin: float = param(
        'clearance kept to every obstacle', unit='m', default=0.5, low=0.0
    )
    uncertainty_growth: float = param(
        'obstacle position uncertainty growth', unit='m/s', default=0.1, low=0.0
    )
    time_gap: float = param(
        'extra longitudinal gap per m/s of ego speed', unit='s', default=0.4, low=0.0
    )
    w_jerk_lat: float = param('weight of lateral jerk', default=0.5, low=0.0)
    w_jerk_lon: float = param('weight of longitudinal jerk', default=0.1, low=0.0)
    w_offset: float = param('weight of the offset from the preferred lane', default=2.0, low=0.0)
    w_speed: float = param('weight of the speed error', default=1.0, low=0.0)
    w_time: float = param('weight of slow manoeuvres (1/T)', default=2.0, low=0.0)
    w_proximity: float = param('weight of obstacle proximity', default=20.0, low=0.0)
    w_consistency: float = param(
        'weight of changing the target offset from the previous plan (against dithering '
        'between near-equal manoeuvres)',
        default=1.0,
        low=0.0,
    )
    proximity_range: float = param(
        'distance below which proximity costs', unit='m', default=3.0, low=0.0
    )
    batch: int = param('candidates per collision batch', default=32, low=1)

    def check(self) -> None:
        """Cross-field rules."""
        if self.road_right >= self.road_left:
            raise ParameterError('road_right', self.road_right, 'must be < road_left')
        if max(self.horizons) > self.horizon:
            raise ParameterError('horizons', self.horizons, f'must be <= horizon {self.horizon}')
        if self.comfort_decel > self.max_decel:
            raise ParameterError('comfort_decel', self.comfort_decel, 'must be <= max_decel')


@dataclasses.dataclass(frozen=True, slots=True)
class Obstacle:
    """An obstacle at planning time: centre, heading, size, velocity and yaw rate (CTRV)."""

    x: float
    y: float
    yaw: float
    length: float
    width: float
    vx: float = 0.0
    vy: float = 0.0
    yaw_rate: float = 0.0
    std: float = 0.0  # position uncertainty now [m]
    growth: float | None = None  # its growth [m/s]; None: the planner's uncertainty_growth
    yield_to: bool = False  # e.g. a crossing pedestrian: its whole path ahead is kept free


def _finite(o: Obstacle) -> bool:
    """Every value of an obstacle is finite (its growth, when given, too)."""
    total = o.x + o.y + o.yaw + o.length + o.width + o.vx + o.vy + o.yaw_rate + o.std
    return math.isfinite(total + (o.growth or 0.0))


def corridor(o: Obstacle, horizon: float) -> Obstacle:
    """A static obstacle covering where ``o`` will go within ``horizon``: for road users the
    vehicle yields to (a pedestrian on a crossing), the path ahead of them is kept free for the
    whole horizon instead of only where the prediction puts them at each instant."""
    x, y, _ = predict([dataclasses.replace(o, yield_to=False)], np.array([horizon]))
    dx, dy = float(x[0, 0]) - o.x, float(y[0, 0]) - o.y
    travel = math.hypot(dx, dy)
    yaw = math.atan2(dy, dx) if travel > 1e-3 else o.yaw
    return Obstacle(
        (o.x + float(x[0, 0])) / 2,
        (o.y + float(y[0, 0])) / 2,
        yaw,
        travel + o.length,
        o.width,
        std=o.std,
        growth=0.0,
    )


def columns(obstacles: Sequence[Obstacle], growth: float = 0.0) -> F64:
    """The obstacles as one (O, 10) array of O_* columns; ``growth``: the uncertainty growth of
    those that have none of their own."""
    return np.array(
        [
            (
                o.x,
                o.y,
                o.yaw,
                o.length,
                o.width,
                o.vx,
                o.vy,
                o.yaw_rate,
                o.std,
                growth if o.growth is None else o.growth,
            )
            for o in obstacles
        ],
        np.float64,
    ).reshape(-1, 10)


def predict(obstacles: Sequence[Obstacle] | F64, t: F64) -> tuple[F64, F64, F64]:
    """(x, y, yaw) of each obstacle (or rows of :func:`columns`) at times ``t``: constant turn
    rate and velocity, (O, K)."""
    obs = obstacles if isinstance(obstacles, np.ndarray) else columns(obstacles)
    if not obs.shape[0]:
        z = np.zeros((0, t.size))
        return z, z, z
    x0, y0, yaw0 = obs[:, O_X, None], obs[:, O_Y, None], obs[:, O_YAW, None]
    vx, vy, w = obs[:, O_VX, None], obs[:, O_VY, None], obs[:, O_YAW_RATE, None]
    tt = t[None, :]
    if not np.any(np.abs(w) > 1e-4):  # constant velocity: the common case, and cheap
        return x0 + vx * tt, y0 + vy * tt, np.broadcast_to(yaw0, (obs.shape[0], t.size))
    turning = np.abs(w) > 1e-4
    wsafe = np.where(turning, w, 1.0)
    # Rotate the velocity vector at rate w: integral of R(w t) v.
    sin_wt, cos_wt = np.sin(wsafe * tt), np.cos(wsafe * tt)
    dx = np.where(turning, (vx * sin_wt - vy * (1 - cos_wt)) / wsafe, vx * tt)
    dy = np.where(turning, (vy * sin_wt + vx * (1 - cos_wt)) / wsafe, vy * tt)
    return x0 + dx, y0 + dy, yaw0 + w * tt


@dataclasses.dataclass(frozen=True, slots=True)
class FrenetState:
    """Longitudinal (s, s', s'') and lateral (d, d', d'') state, time derivatives."""

    s: float
    s_d: float
    s_dd: float
    d: float
    d_d: float
    d_dd: float


@dataclasses.dataclass(slots=True)
class Trajectory:
    """A planned trajectory (Frenet and Cartesian, on the time grid)."""

    t: F64
    s: F64
    s_d: F64
    s_dd: F64
    d: F64
    d_d: F64
    d_dd: F64
    x: F64
    y: F64
    yaw: F64
    v: F64
    a: F64
    kappa: F64
    status: int
    cost: float
    target_offset: float
    target_speed: float
    candidates: int = 0
    collision_checks: int = 0

    def state_at(self, t: float) -> FrenetState:
        """Frenet state interpolated at time ``t`` from the trajectory's start."""
        # np.interp's arithmetic, with the interval found once for the six columns (six
        # np.interp calls on a scalar were most of the planner node's start-state time).
        ts = self.t
        columns = (self.s, self.s_d, self.s_dd, self.d, self.d_d, self.d_dd)
        if t >= ts[-1] or ts.size < 2:
            return FrenetState(*(float(a[-1]) for a in columns))
        if t <= ts[0]:
            return FrenetState(*(float(a[0]) for a in columns))
        j = int(np.searchsorted(ts, t, side='right')) - 1
        t0, dt = float(ts[j]), float(ts[j + 1] - ts[j])
        return FrenetState(*(float((a[j + 1] - a[j]) / dt * (t - t0) + a[j]) for a in columns))


def _quintic(d0: float, v0: float, a0: float, d_t: F64, horizons: F64) -> F64:
    """Coefficients (c0..c5) of quintics d(t) from (d0, v0, a0) to (d_t, 0, 0) at T, (N, 6)."""
    t = horizons
    c0 = np.full_like(t, d0)
    c1 = np.full_like(t, v0)
    c2 = np.full_like(t, a0 / 2.0)
    h = d_t - (c0 + c1 * t + c2 * t**2)
    dv = -(c1 + 2 * c2 * t)
    da = -(2 * c2)
    c3 = (10 * h - 4 * dv * t + 0.5 * da * t**2) / t**3
    c4 = (-15 * h + 7 * dv * t - da * t**2) / t**4
    c5 = (6 * h - 3 * dv * t + 0.5 * da * t**2) / t**5
    return np.stack((c0, c1, c2, c3, c4, c5), axis=1)


def _quartic(s0: float, v0: float, a0: float, v_t: F64, horizons: F64) -> F64:
    """Coefficients (c0..c4) of quartics s(t) from (s0, v0, a0) to speed v_t, accel 0 at T."""
    t = horizons
    c0 = np.full_like(t, s0)
    c1 = np.full_like(t, v0)
    c2 = np.full_like(t, a0 / 2.0)
    dv = v_t - (c1 + 2 * c2 * t)
    da = -(2 * c2)
    c3 = (3 * dv - da * t) / (3 * t**2)
    c4 = (-2 * dv + da * t) / (4 * t**3)
    return np.stack((c0, c1, c2, c3, c4, np.zeros_like(t)), axis=1)


def _jerk_integral(c: F64, horizons: F64) -> F64:
    """Closed form of the integral of jerk² over [0, T] of quintics c (N, 6)."""
    a, b, e = 6 * c[:, 3], 24 * c[:, 4], 60 * c[:, 5]  # jerk = a + b t + e t²
    t = horizons
    return (
        a * a * t
        + a * b * t**2
        + (b * b + 2 * a * e) * t**3 / 3
        + b * e * t**4 / 2
        + e * e * t**5 / 5
    )


def _deriv(f: F64, step: float) -> F64:
    """First derivative on a uniform grid: central inside, one-sided at the ends."""
    out = np.empty_like(f)
    out[1:-1] = (f[2:] - f[:-2]) / (2 * step)
    out[0] = (f[1] - f[0]) / step
    out[-1] = (f[-1] - f[-2]) / step
    return out


def _pack(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint64]:
    """(R, O, K) booleans -> (R, W) 64-bit words, one bit per (O, K) cell."""
    packed = np.packbits(mask.reshape(mask.shape[0], -1), axis=1)  # bits padded to bytes
    pad = (-packed.shape[1]) % 8
    if pad:  # bytes padded to words (a small array, unlike padding the booleans)
        packed = np.concatenate((packed, np.zeros((packed.shape[0], pad), np.uint8)), axis=1)
    return packed.view(np.uint64)


def _basis(horizons: F64, t: F64) -> F64:
    """Per-row bases (N, 4, 6, K): position, speed, acceleration and jerk of a polynomial with
    coefficients c are ``einsum('nc,nck->nk', c, basis[:, i])``; after T the motion goes on at
    the end speed (the extension is linear in c too)."""
    tt = np.minimum(t[None, :], horizons[:, None])  # (N, K)
    after = t[None, :] - tt
    powers = np.stack([tt**k for k in range(6)], axis=1)  # (N, 6, K)
    k = np.arange(6)[None, :, None]
    vel = np.where(
        k >= 1, k * np.concatenate((np.zeros_like(powers[:, :1]), powers[:, :5]), axis=1), 0.0
    )
    acc = np.where(
        k >= 2,
        k * (k - 1) * np.concatenate((np.zeros_like(powers[:, :2]), powers[:, :4]), axis=1),
        0.0,
    )
    jerk = np.where(
        k >= 3,
        k
        * (k - 1)
        * (k - 2)
        * np.concatenate((np.zeros_like(powers[:, :3]), powers[:, :3]), axis=1),
        0.0,
    )
    moving = (after > 0)[:, None, :]
    pos = powers + after[:, None, :] * vel
    return np.stack((pos, vel, np.where(moving, 0.0, acc), np.where(moving, 0.0, jerk)), axis=1)


def _evaluate_basis(c: F64, basis: F64) -> tuple[F64, F64, F64, F64]:
    """Position, speed, acceleration, jerk (each (N, K)) of coefficients c (N, 6)."""
    out = np.einsum('nc,nick->nik', c, basis)
    return out[:, 0], out[:, 1], out[:, 2], out[:, 3]


def _evaluate(c: F64, horizons: F64, t: F64) -> tuple[F64, F64, F64, F64]:
    """Position, speed, acceleration and jerk of polynomials c (N, 6) on grid t (K,); after T the
    motion continues at the end speed with zero acceleration. Each (N, K)."""
    tt = np.minimum(t[None, :], horizons[:, None])
    pos = c[:, 0:1] + tt * (
        c[:, 1:2] + tt * (c[:, 2:3] + tt * (c[:, 3:4] + tt * (c[:, 4:5] + tt * c[:, 5:6])))
    )
    vel = c[:, 1:2] + tt * (
        2 * c[:, 2:3] + tt * (3 * c[:, 3:4] + tt * (4 * c[:, 4:5] + tt * 5 * c[:, 5:6]))
    )
    acc = 2 * c[:, 2:3] + tt * (6 * c[:, 3:4] + tt * (12 * c[:, 4:5] + tt * 20 * c[:, 5:6]))
    jerk = 6 * c[:, 3:4] + tt * (24 * c[:, 4:5] + tt * 60 * c[:, 5:6])
    after = t[None, :] > horizons[:, None]
    pos = pos + np.where(after, (t[None, :] - tt) * vel, 0.0)
    return pos, vel, np.where(after, 0.0, acc), np.where(after, 0.0, jerk)


PlanLoop = Callable[..., tuple[int, int, float, int]]


def _load() -> PlanLoop:
    """frenet_jit.plan_loop; ImportError where numba is not installed."""
    from rt_fusion.core.planning import frenet_jit  # noqa: PLC0415 (optional, slow)

    return frenet_jit.plan_loop


#: The compiled planner, loaded on first use, or in the background (:mod:`..compiled`).
COMPILED: CompiledSet[PlanLoop] = CompiledSet(_load)


def warm_up(loop: PlanLoop | None = None) -> str:
    """Plans an empty road, a road with no way through and one with turning traffic on the
    compiled loop (``loop``; None: :data:`COMPILED` loaded here), so that every path of it is
    compiled or loaded from numba's cache; returns the planner's kind ('numba' or 'numpy')."""
    loop = loop or COMPILED.compiled()
    if loop is None:
        return 'numpy'
    planner = FrenetPlanner(ReferencePath.straight(200.0), jit=True)
    planner._plan_compiled(loop, FrenetState(0.0, 10.0, 0.0, 0.0, 0.0, 0.0), [])
    wall = [Obstacle(12.0, d, 0.0, 1.0, 1.0) for d in (-3.5, 0.0, 3.5)]
    planner._plan_compiled(loop, FrenetState(0.0, 10.0, 0.0, 0.0, 0.0, 0.0), wall)
    turning = [Obstacle(40.0, 0.2, 0.0, 4.5, 1.9, vx=5.0, yaw_rate=0.1)]
    planner._plan_compiled(loop, FrenetState(0.0, 10.0, 0.0, 0.0, 0.0, 0.0), turning)
    return 'numba'


class FrenetPlanner:
    """The planner (see the module docstring). Build once; call :meth:`plan` every cycle.

    The candidate set is a product: offsets × speeds × horizons. A lateral profile depends on
    (offset, T) only and a longitudinal one on (speed, T) only, so the planner evaluates the
    |offsets|·|T| lateral and |speeds|·|T| longitudinal profiles once each (100 rows instead of
    500) and combines them by index. Collision tests are separable too: for each longitudinal
    profile, a bit mask of the (obstacle, time) cells where it overlaps an obstacle along s;
    for each lateral profile, the same along d; a candidate collides where both masks share a
    bit, an AND of a few 64-bit words per candidate.
    """

    def __init__(
        self, path: ReferencePath, params: PlannerParams | None = None, jit: bool | None = None
    ) -> None:
        self.path = path
        self.p = p = params or PlannerParams()
        self.non_finite = 0  # obstacles with NaN/inf, left out of the plans
        self._jit = jit  # compiled (frenet_jit) when True, numpy when False; None: COMPILED.get
        self.t = np.arange(0.0, p.horizon + 1e-9, p.dt)
        offs, hors, spds = np.array(p.offsets), np.array(p.horizons), np.array(p.speeds)
        n_t = hors.size
        # Unique profiles: lateral (offset, T), longitudinal (speed, T).
        self.lat_d = np.repeat(offs, n_t)
        self.lat_t = np.tile(hors, offs.size)
        self.lon_v = np.repeat(spds, n_t)
        self.lon_t = np.tile(hors, spds.size)
        # Candidates: every (offset, speed, T); their lateral and longitudinal profile rows.
        oi, si, ti = np.meshgrid(
            np.arange(offs.size), np.arange(spds.size), np.arange(n_t), indexing='ij'
        )
        self.li = (oi * n_t + ti).ravel()
        self.mi = (si * n_t + ti).ravel()
        self.cand_d = self.lat_d[self.li]
        self.cand_v = self.lon_v[self.mi]
        self.cand_t = self.lat_t[self.li]
        self.n = self.li.size
        # Ego as circles along its length, each covering its share of the footprint.
        n_ego = max(1, math.ceil(2 * p.vehicle_length / p.vehicle_width))
        self.ego_r = math.hypot(p.vehicle_length / (2 * n_ego), p.vehicle_width / 2.0)
        self.ego_circle_offsets = (np.arange(n_ego) - (n_ego - 1) / 2.0) * (
            p.vehicle_length / n_ego
        )
        self.previous: Trajectory | None = None
        self._circle_cache: tuple[int, tuple[F64, ...]] | None = None
        # Obstacles are projected onto the path every 10th step and interpolated in between.
        key = np.unique(np.concatenate((np.arange(0, self.t.size, 10), [self.t.size - 1])))
        pos = np.interp(np.arange(self.t.size), key, np.arange(key.size))
        lo = np.minimum(np.floor(pos).astype(int), key.size - 2)
        self._key_steps = (key, lo, lo + 1, (pos - lo)[None, :])
        self._lat_basis = _basis(self.lat_t, self.t)
        self._lon_basis = _basis(self.lon_t, self.t)
        self._no_line, self._no_keys = np.zeros(0), np.zeros((0, self._key_steps[0].size))
        self._pv = (self.p, self._param_vector())  # for the p it was made of (p may be replaced)

    @property
    def kind(self) -> str:
        """How plans run now: 'numba' (compiled, frenet_jit) or 'numpy'."""
        return 'numpy' if COMPILED.get(self._jit) is None else 'numba'

    def _param_vector(self) -> F64:
        """The parameters frenet_jit.plan_loop reads, at their P_* indices."""
        p = self.p
        values = {
            P_W_JERK_LAT: p.w_jerk_lat,
            P_W_JERK_LON: p.w_jerk_lon,
            P_W_OFFSET: p.w_offset,
            P_W_SPEED: p.w_speed,
            P_W_TIME: p.w_time,
            P_W_PROXIMITY: p.w_proximity,
            P_W_CONSISTENCY: p.w_consistency,
            P_PREFERRED: p.preferred_offset,
            P_DESIRED_SPEED: p.desired_speed,
            P_MAX_SPEED: p.max_speed,
            P_MAX_ACCEL: p.max_accel,
            P_MAX_JERK: p.max_jerk,
            P_MAX_CURVATURE: p.max_curvature,
            P_MAX_LAT_ACCEL: p.max_lateral_accel,
            P_ROAD_LEFT: p.road_left,
            P_ROAD_RIGHT: p.road_right,
            P_TIME_GAP: p.time_gap,
            P_PROXIMITY_RANGE: p.proximity_range,
            P_COMFORT_DECEL: p.comfort_decel,
            P_MAX_DECEL: p.max_decel,
            P_SAFETY_MARGIN: p.safety_margin,
            P_VEHICLE_LENGTH: p.vehicle_length,
            P_VEHICLE_WIDTH: p.vehicle_width,
            P_EGO_R: self.ego_r,
        }
        pv = np.empty(len(values))
        for index, value in values.items():
            pv[index] = value
        return pv

    # -- start state -----------------------------------------------------------------------------

    def start_state(
        self,
        t_now: float,
        ego_x: float,
        ego_y: float,
        ego_v: float,
        ego_a: float = 0.0,
        tolerance: float = 1.0,
    ) -> FrenetState:
        """The state to plan from: on the previous trajectory at ``t_now`` (seconds since it
        started) when the vehicle is within ``tolerance`` metres of it, else the measured one."""
        prev = self.previous
        if prev is not None and t_now <= prev.t[-1]:
            st = prev.state_at(t_now)
            px, py, _ = self.path.to_cartesian(np.array(st.s), np.array(st.d))
            if math.hypot(float(px) - ego_x, float(py) - ego_y) <= tolerance:
                return st
        s, d = self.path.project(np.array([ego_x]), np.array([ego_y]))
        return FrenetState(float(s[0]), ego_v, ego_a, float(d[0]), 0.0, 0.0)

    # -- planning --------------------------------------------------------------------------------

    def candidate_paths(self, start: FrenetState) -> tuple[F64, F64, npt.NDArray[np.bool_]]:
        """Every candidate from ``start`` in the map frame, for plots and rviz markers: x and y
        (candidates × steps) and whether it passes the kinematic checks (obstacles ignored)."""
        p = self.p
        lat = _quintic(start.d, start.d_d, start.d_dd, self.lat_d, self.lat_t)
        lon = _quartic(start.s, start.s_d, start.s_dd, self.lon_v, self.lon_t)
        d, _, _, d_j = _evaluate_basis(lat, self._lat_basis)
        s, s_d, s_dd, s_j = _evaluate_basis(lon, self._lon_basis)
        lat_ok = (
            (np.abs(d_j).max(axis=1) <= p.max_jerk)
            & (d.max(axis=1) <= p.road_left + 1e-6)
            & (d.min(axis=1) >= p.road_right - 1e-6)
        )
        lon_ok = (
            (s_d.max(axis=1) <= p.max_speed + 1e-6)
            & (s_d.min(axis=1) >= -1e-6)
            & (np.abs(s_dd).max(axis=1) <= p.max_accel + 1e-6)
            & (np.abs(s_j).max(axis=1) <= p.max_jerk)
        )
        x, y, _ = self.path.to_cartesian(s[self.mi], d[self.li])
        return x, y, lat_ok[self.li] & lon_ok[self.mi]

    def plan(self, start: FrenetState, obstacles: Sequence[Obstacle]) -> Trajectory:
        """Plans from ``start`` among ``obstacles`` (given at the start time). An obstacle with
        a non-finite value is counted (``non_finite``) and left out; a non-finite start is
        refused (ValueError): a plan from it would be NaN throughout."""
        if not math.isfinite(start.s + start.s_d + start.s_dd + start.d + start.d_d + start.d_dd):
            raise ValueError(f'start state not finite: {start}')
        finite = [o for o in obstacles if _finite(o)]
        if len(finite) != len(obstacles):
            self.non_finite += len(obstacles) - len(finite)
            obstacles = finite
        p, t = self.p, self.t
        if any(o.yield_to for o in obstacles):
            obstacles = [corridor(o, p.horizon) if o.yield_to else o for o in obstacles]
        obstacles = list(obstacles)  # one object per plan: the circle cache is keyed on it
        loop = COMPILED.get(self._jit)
        if loop is not None:
            return self._plan_compiled(loop, start, obstacles)
        self._circle_cache = None
        lat = _quintic(start.d, start.d_d, start.d_dd, self.lat_d, self.lat_t)
        lon = _quartic(start.s, start.s_d, start.s_dd, self.lon_v, self.lon_t)
        d, d_d, d_dd, d_j = _evaluate_basis(lat, self._lat_basis)
        s, s_d, s_dd, s_j = _evaluate_basis(lon, self._lon_basis)
        lat_ok = (
            (np.abs(d_j).max(axis=1) <= p.max_jerk)
            & (d.max(axis=1) <= p.road_left + 1e-6)
            & (d.min(axis=1) >= p.road_right - 1e-6)
        )
        lon_ok = (
            (s_d.max(axis=1) <= p.max_speed + 1e-6)
            & (s_d.min(axis=1) >= -1e-6)
            & (np.abs(s_dd).max(axis=1) <= p.max_accel + 1e-6)
            & (np.abs(s_j).max(axis=1) <= p.max_jerk)
        )
        li, mi = self.li, self.mi
        base = (
            p.w_jerk_lat * _jerk_integral(lat, self.lat_t)[li]
            + p.w_jerk_lon * _jerk_integral(lon, self.lon_t)[mi]
            + p.w_offset * (self.cand_d - p.preferred_offset) ** 2
            + p.w_speed * (self.cand_v - min(p.desired_speed, p.max_speed)) ** 2
            + p.w_time / self.cand_t
        )
        prev = self.previous
        if prev is not None and prev.status == STATUS_OK and p.w_consistency:
            base = base + p.w_consistency * (self.cand_d - prev.target_offset) ** 2
        feasible = lat_ok[li] & lon_ok[mi]
        obs = self._obstacles_frenet(obstacles)
        if obs[0].shape[0]:
            s_o, d_o, half_s, half_d = obs
            # |s - s_o| < half_s + gap  <=>  s - gap < s_o + half_s  and  s + gap > s_o - half_s:
            # two comparisons of small arrays instead of arithmetic on (M, O, K) ones.
            gap = p.time_gap * s_d
            along = ((s - gap)[:, None, :] < (s_o + half_s)[None]) & (
                (s + gap)[:, None, :] > (s_o - half_s)[None]
            )
            across = (d[:, None, :] < (d_o + half_d)[None]) & (
                d[:, None, :] > (d_o - half_d)[None]
            )
            s_bits, d_bits = _pack(along), _pack(across)
            feasible &= ~(s_bits[mi] & d_bits[li]).any(axis=1)
        order = np.flatnonzero(feasible)
        order = order[np.argsort(base[order], kind='stable')]
        best_cost, best_traj, checks = math.inf, None, 0
        for i in order.tolist():
            if base[i] >= best_cost:
                break  # branch and bound: proximity only adds, no later candidate is cheaper
            a, b = int(li[i]), int(mi[i])
            prox, near = self._proximity(s[b], s_d[b], d[a], obs)
            cost = float(base[i]) + p.w_proximity * prox
            if cost >= best_cost:
                continue
            checks += 1
            traj = self._cartesian(
                t,
                s[b],
                s_d[b],
                s_dd[b],
                d[a],
                d_d[a],
                d_dd[a],
                STATUS_OK,
                cost,
                float(self.cand_d[i]),
                float(self.cand_v[i]),
            )
            if not self._curvature_ok(traj) or self._collides(traj, obstacles, near):
                continue
            best_cost, best_traj = cost, traj
        if best_traj is None:
            best_traj = self._fallback(start, obstacles)
        best_traj.candidates, best_traj.collision_checks = self.n, checks
        self.previous = best_traj
        return best_traj

    def _plan_compiled(
        self, loop: PlanLoop, start: FrenetState, obstacles: list[Obstacle]
    ) -> Trajectory:
        """:meth:`plan` by the compiled loop (``frenet_jit.plan_loop``): the same trajectory."""
        p, t, path = self.p, self.t, self.path
        key, lo, hi, frac = self._key_steps
        obs = columns(obstacles, p.uncertainty_growth)
        line = path.line
        if line is None or not obs.shape[0]:  # a curved path: its KD-tree, here
            kx, ky, _ = predict(obs, t[key])
            ks, kd = path.project(kx.ravel(), ky.ravel())
            ks, kd = ks.reshape(obs.shape[0], key.size), kd.reshape(obs.shape[0], key.size)
            line_array = self._no_line
        else:  # a straight one: in the loop
            ks = kd = self._no_keys
            line_array = np.array(line)
        if self._pv[0] is not p:  # the node sets planner.p (emergency.goal): its weights and goals
            self._pv = (p, self._param_vector())
        prev = self.previous
        prev_offset = (
            prev.target_offset if prev is not None and prev.status == STATUS_OK else math.nan
        )
        tr = np.empty((12, t.size))
        status, best, cost, checks = loop(
            np.array([start.s, start.s_d, start.s_dd, start.d, start.d_d, start.d_dd]),
            prev_offset,
            self._pv[1],
            t,
            self.lat_d,
            self.lat_t,
            self.lon_v,
            self.lon_t,
            self.li,
            self.mi,
            self.cand_d,
            self.cand_v,
            self.cand_t,
            self.ego_circle_offsets,
            obs,
            line_array,
            key,
            ks,
            kd,
            lo,
            hi,
            frac[0],
            path.s,
            path.x,
            path.y,
            path.yaw,
            tr,
        )
        offset, speed = (
            (float(self.cand_d[best]), float(self.cand_v[best])) if best >= 0 else (start.d, 0.0)
        )
        traj = Trajectory(
            t.copy(),
            tr[T_S],
            tr[T_S_D],
            tr[T_S_DD],
            tr[T_D],
            tr[T_D_D],
            tr[T_D_DD],
            tr[T_X],
            tr[T_Y],
            tr[T_YAW],
            tr[T_V],
            tr[T_A],
            tr[T_KAPPA],
            status,
            cost,
            offset,
            speed,
            self.n,
            checks,
        )
        self.previous = traj
        return traj

    def _proximity(
        self, s: F64, s_d: F64, d: F64, obs: tuple[F64, ...]
    ) -> tuple[float, npt.NDArray[np.bool_] | None]:
        """Proximity cost of one trajectory (squared shortfall of its clearance, 0..1), and the
        obstacles that come close enough to need the exact check (None: none does)."""
        s_o, d_o, half_s, half_d = obs
        if s_o.shape[0] == 0:
            return 0.0, None
        gap_s = np.abs(s[None] - s_o) - half_s - self.p.time_gap * s_d[None]
        gap_d = np.abs(d[None] - d_o) - half_d
        clear = np.maximum(gap_s, gap_d).min(axis=1)  # per obstacle
        # The boxes are exact in (s, d); the circles of the exact check reach up to the box
        # diagonal beyond them, so only obstacles within that much need it.
        near = clear < NEAR_M
        rng = self.p.proximity_range
        clearance = float(clear.min())
        cost = 0.0 if clearance >= rng or rng <= 0 else ((rng - max(clearance, 0.0)) / rng) ** 2
        return cost, (near if near.any() else None)

    def _curvature_ok(self, traj: Trajectory) -> bool:
        p = self.p
        moving = traj.v > 1.0
        kappa = np.abs(traj.kappa[moving])
        return bool(
            (kappa <= p.max_curvature).all()
            and (traj.v[moving] ** 2 * kappa <= p.max_lateral_accel).all()
        )

    def _obstacles_frenet(self, obstacles: Sequence[Obstacle]) -> tuple[F64, ...]:
        """Predicted obstacles in Frenet coordinates with their half extents, (O, K) each."""
        p, t = self.p, self.t
        if not obstacles:
            z = np.zeros((0, t.size))
            return z, z, z, z
        obs = columns(obstacles, p.uncertainty_growth)
        ox, oy, oyaw = predict(obs, t)
        # Project every 10th step and interpolate between: the predicted motion is smooth, and
        # a projection is a tree query per point.
        key, lo, hi, frac = self._key_steps
        ks, kd = self.path.project(ox[:, key].ravel(), oy[:, key].ravel())
        ks, kd = ks.reshape(ox.shape[0], -1), kd.reshape(ox.shape[0], -1)
        s_o = ks[:, lo] + frac * (ks[:, hi] - ks[:, lo])
        d_o = kd[:, lo] + frac * (kd[:, hi] - kd[:, lo])
        ryaw = self.path.yaw_at(s_o)
        rel = oyaw - ryaw
        length, width = obs[:, O_LENGTH, None], obs[:, O_WIDTH, None]
        grow = obs[:, O_STD, None] + obs[:, O_GROWTH, None] * t[None, :]
        # Half extents of the obstacle's footprint along s and d, plus the ego's and margins.
        half_s = (
            0.5 * (np.abs(np.cos(rel)) * length + np.abs(np.sin(rel)) * width)
            + 0.5 * p.vehicle_length
            + p.safety_margin
            + grow
        )
        half_d = (
            0.5 * (np.abs(np.sin(rel)) * length + np.abs(np.cos(rel)) * width)
            + 0.5 * p.vehicle_width
            + p.safety_margin
            + grow
        )
        return s_o, d_o, half_s, half_d

    def _cartesian(
        self,
        t: F64,
        s: F64,
        s_d: F64,
        s_dd: F64,
        d: F64,
        d_d: F64,
        d_dd: F64,
        status: int,
        cost: float,
        offset: float,
        speed: float,
    ) -> Trajectory:
        x, y, ryaw = self.path.to_cartesian(s, d)
        step = float(t[1] - t[0])
        dx, dy = _deriv(x, step), _deriv(y, step)
        v = np.hypot(dx, dy)
        moving = v > 0.05
        yaw = np.unwrap(np.where(moving, np.arctan2(dy, dx), ryaw))
        kappa = np.where(moving, _deriv(yaw, step) / np.maximum(v, 0.05), 0.0)
        a = _deriv(v, step)
        return Trajectory(
            t.copy(),
            s.copy(),
            s_d.copy(),
            s_dd.copy(),
            d.copy(),
            d_d.copy(),
            d_dd.copy(),
            x,
            y,
            yaw,
            v,
            a,
            kappa,
            status,
            cost,
            offset,
            speed,
        )

    def _circles(self, obstacles: Sequence[Obstacle]) -> tuple[F64, ...]:
        """Circles covering every obstacle over the horizon, built once per plan: owner
        (obstacle index per circle), centres x and y (C, K) and the distance below which an
        ego circle touches them (C, K): radii, margin and uncertainty growth."""
        key = id(obstacles)
        if self._circle_cache is not None and self._circle_cache[0] == key:
            return self._circle_cache[1]
        p, t = self.p, self.t
        obs = columns(obstacles, p.uncertainty_growth)
        ox, oy, oyaw = predict(obs, t)  # (O, K)
        lengths, widths = obs[:, O_LENGTH], np.maximum(obs[:, O_WIDTH], 0.1)
        n = np.maximum(1, np.ceil(2 * lengths / widths).astype(int))
        owner = np.repeat(np.arange(len(obstacles)), n)  # circle -> obstacle
        first = np.repeat(np.cumsum(n) - n, n)
        k = np.arange(owner.size) - first
        along = (k - (n[owner] - 1) / 2.0) * (lengths[owner] / n[owner])
        radius = np.hypot(lengths[owner] / (2 * n[owner]), widths[owner] / 2.0) + obs[owner, O_STD]
        ocx = ox[owner] + along[:, None] * np.cos(oyaw[owner])  # (C, K)
        ocy = oy[owner] + along[:, None] * np.sin(oyaw[owner])
        limit = (
            (self.ego_r + radius)[:, None]
            + p.safety_margin
            + obs[owner, O_GROWTH, None] * t[None, :]
        )
        circles = (owner.astype(np.float64), ocx, ocy, limit * limit)
        self._circle_cache = (key, circles)
        return circles

    def _collides(
        self, traj: Trajectory, obstacles: Sequence[Obstacle], near: npt.NDArray[np.bool_] | None
    ) -> bool:
        """Exact check: ego circles along the trajectory against the obstacles' circles, those
        in the mask ``near`` (None: none is near; ALL: every obstacle)."""
        if not obstacles or near is None:
            return False
        owner, ocx, ocy, limit2 = self._circles(obstacles)
        if near is not ALL:
            keep = near[owner.astype(np.intp)]
            ocx, ocy, limit2 = ocx[keep], ocy[keep], limit2[keep]
        cos_y, sin_y = np.cos(traj.yaw), np.sin(traj.yaw)
        ecx = traj.x[None, :] + self.ego_circle_offsets[:, None] * cos_y[None, :]  # (E, K)
        ecy = traj.y[None, :] + self.ego_circle_offsets[:, None] * sin_y[None, :]
        dx = ecx[:, None, :] - ocx[None]
        dy = ecy[:, None, :] - ocy[None]
        return bool((dx * dx + dy * dy < limit2[None]).any())

    def _fallback(self, start: FrenetState, obstacles: Sequence[Obstacle]) -> Trajectory:
        """Comfortable stop, or an emergency stop if that one collides too."""
        p, t = self.p, self.t
        for decel, status in (
            (p.comfort_decel, STATUS_COMFORT_STOP),
            (p.max_decel, STATUS_EMERGENCY_STOP),
        ):
            v0 = max(start.s_d, 0.0)
            t_stop = v0 / decel
            tt = np.minimum(t, t_stop)
            s = start.s + v0 * tt - 0.5 * decel * tt**2
            s_d = np.maximum(v0 - decel * t, 0.0)
            s_dd = np.where(t < t_stop, -decel, 0.0)
            d = np.full_like(t, start.d)
            z = np.zeros_like(t)
            traj = self._cartesian(t, s, s_d, s_dd, d, z, z, status, math.inf, start.d, 0.0)
            if status == STATUS_EMERGENCY_STOP or not self._collides(traj, obstacles, ALL):
                return traj
        raise AssertionError('unreachable')  # pragma: no cover

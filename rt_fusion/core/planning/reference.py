"""Reference path: a cubic spline through waypoints, parametrised by arc length, kept as a dense
table so that evaluation is a vectorised linear interpolation (fast for thousands of points).

Two waypoints make a straight line, built and projected on in closed form: no scipy, whose
``interpolate`` and ``spatial`` packages cost a starting planner ~0.3 s of imports (they are
imported when the first curved path is built; the planner node imports them in the background
once it is up, so a route that arrives later does not wait for them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.errors import RtFusionError

F64 = npt.NDArray[np.float64]


class PathError(RtFusionError):
    """A reference path cannot be built from the waypoints given."""


class ReferencePath:
    """A smooth path through ``waypoints`` ((N, 2) [m]), sampled every ``ds`` metres of arc.

    Attributes:
        s, x, y, yaw, kappa: the table (arc length [m], position [m], heading [rad],
            curvature [1/m]).
    """

    def __init__(self, waypoints: npt.ArrayLike, ds: float = 0.25) -> None:
        pts = np.asarray(waypoints, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] != 2 or pts.shape[0] < 2:
            raise PathError(f'waypoints must be (N >= 2, 2), got {pts.shape}')
        keep = np.concatenate(([True], np.hypot(*np.diff(pts, axis=0).T) > 1e-6))
        pts = pts[keep]
        if pts.shape[0] < 2:
            raise PathError('waypoints collapse to a single point')
        self.ds = ds
        self._tree: Any = None  # a KD-tree of the table; None: a straight line (closed form)
        if pts.shape[0] == 2:
            self._line(pts[0], pts[1], ds)
            return
        from scipy.interpolate import CubicSpline  # noqa: PLC0415 (curved paths only: 0.3 s)
        from scipy.spatial import cKDTree  # noqa: PLC0415

        chord = np.concatenate(([0.0], np.cumsum(np.hypot(*np.diff(pts, axis=0).T))))
        bc = 'natural'
        sx, sy = (
            CubicSpline(chord, pts[:, 0], bc_type=bc),
            CubicSpline(chord, pts[:, 1], bc_type=bc),
        )
        u = np.linspace(0.0, chord[-1], max(2, int(chord[-1] / (ds / 4)) + 1))
        dx, dy = sx(u, 1), sy(u, 1)
        seg = np.hypot(np.diff(sx(u)), np.diff(sy(u)))
        s_u = np.concatenate(([0.0], np.cumsum(seg)))
        self.length = float(s_u[-1])
        self.s = np.arange(0.0, self.length + 1e-9, ds)
        uu = np.interp(self.s, s_u, u)
        self.x, self.y = sx(uu), sy(uu)
        dx, dy = sx(uu, 1), sy(uu, 1)
        ddx, ddy = sx(uu, 2), sy(uu, 2)
        self.yaw = np.unwrap(np.arctan2(dy, dx))
        self.kappa = (dx * ddy - dy * ddx) / np.maximum(np.hypot(dx, dy) ** 3, 1e-9)
        self._tree = cKDTree(np.column_stack((self.x, self.y)))

    def _line(self, a: F64, b: F64, ds: float) -> None:
        """The table of the segment a -> b (what a cubic spline through two points is)."""
        self.length = float(np.hypot(*(b - a)))
        self.s = np.arange(0.0, self.length + 1e-9, ds)
        heading = float(np.arctan2(b[1] - a[1], b[0] - a[0]))
        self.x = a[0] + np.cos(heading) * self.s
        self.y = a[1] + np.sin(heading) * self.s
        self.yaw = np.full_like(self.s, heading)
        self.kappa = np.zeros_like(self.s)

    @classmethod
    def straight(
        cls,
        length: float,
        heading: float = 0.0,
        origin: tuple[float, float] = (0, 0),
        ds: float = 0.25,
    ) -> ReferencePath:
        """A straight path of ``length`` metres."""
        c, s = np.cos(heading), np.sin(heading)
        return cls([[origin[0], origin[1]], [origin[0] + c * length, origin[1] + s * length]], ds)

    def at(self, s: F64) -> tuple[F64, F64, F64, F64]:
        """(x, y, yaw, kappa) at arc lengths ``s`` (clamped to the path), any shape."""
        return (
            np.interp(s, self.s, self.x),
            np.interp(s, self.s, self.y),
            np.interp(s, self.s, self.yaw),
            np.interp(s, self.s, self.kappa),
        )

    def yaw_at(self, s: F64) -> F64:
        """Heading of the path at arc lengths ``s``."""
        return np.asarray(np.interp(s, self.s, self.yaw), dtype=np.float64)

    def to_cartesian(self, s: F64, d: F64) -> tuple[F64, F64, F64]:
        """Frenet (s, d) -> (x, y, path yaw) (d to the left of the path)."""
        x, y, yaw, _ = self.at(s)
        return x - d * np.sin(yaw), y + d * np.cos(yaw), yaw

    @property
    def line(self) -> tuple[float, float, float, float] | None:
        """A straight path's start and direction (x0, y0, cos, sin): :meth:`project` is then
        closed-form, (x - x0, y - y0) along and across it; None for a curved path."""
        if self._tree is not None:
            return None
        return (float(self.x[0]), float(self.y[0]), math.cos(self.yaw[0]), math.sin(self.yaw[0]))

    def project(self, x: F64, y: F64) -> tuple[F64, F64]:
        """Cartesian points -> Frenet (s, d), by the nearest table point refined on its tangent."""
        px, py = np.atleast_1d(np.asarray(x, np.float64)), np.atleast_1d(np.asarray(y, np.float64))
        line = self.line
        if line is not None:  # a straight line: along and across it from its start
            x0, y0, c, s = line
            ex, ey = px - x0, py - y0
            return ex * c + ey * s, -ex * s + ey * c
        _, i = self._tree.query(np.column_stack((px, py)))
        c, s = np.cos(self.yaw[i]), np.sin(self.yaw[i])
        ex, ey = px - self.x[i], py - self.y[i]
        along = ex * c + ey * s
        return self.s[i] + along, -ex * s + ey * c

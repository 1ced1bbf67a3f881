"""Reference path: a cubic spline through waypoints, parametrised by arc length, kept as a dense
table so that evaluation is a vectorised linear interpolation (fast for thousands of points)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.interpolate import CubicSpline
from scipy.spatial import cKDTree

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
        chord = np.concatenate(([0.0], np.cumsum(np.hypot(*np.diff(pts, axis=0).T))))
        bc = 'natural' if pts.shape[0] > 2 else 'not-a-knot'
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
        self.ds = ds
        self._tree = cKDTree(np.column_stack((self.x, self.y)))

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

    def project(self, x: F64, y: F64) -> tuple[F64, F64]:
        """Cartesian points -> Frenet (s, d), by the nearest table point refined on its tangent."""
        px, py = np.atleast_1d(np.asarray(x, np.float64)), np.atleast_1d(np.asarray(y, np.float64))
        _, i = self._tree.query(np.column_stack((px, py)))
        c, s = np.cos(self.yaw[i]), np.sin(self.yaw[i])
        ex, ey = px - self.x[i], py - self.y[i]
        along = ex * c + ey * s
        return self.s[i] + along, -ex * s + ey * c

"""PoseHistory: interpolation at a stamp, extrapolation limits, order and trimming."""

from __future__ import annotations

import math

import pytest

from rt_fusion.core.planning.ego import EgoPose, PoseHistory

MS = 1_000_000


def test_interpolates_between_poses_and_wraps_the_heading() -> None:
    h = PoseHistory()
    h.add(0, EgoPose(0.0, 0.0, math.pi - 0.1, 10.0))
    h.add(100 * MS, EgoPose(1.0, 2.0, -math.pi + 0.1, 12.0))
    p = h.at(50 * MS)
    assert p is not None
    assert (p.x, p.y, p.v) == pytest.approx((0.5, 1.0, 11.0))
    assert abs(math.remainder(p.yaw - math.pi, math.tau)) < 1e-9  # through pi, not through 0


def test_extrapolates_a_little_then_holds_and_counts() -> None:
    h = PoseHistory(max_extrapolate_ns=100 * MS)
    h.add(0, EgoPose(0.0, 0.0, 0.0, 10.0))
    assert h.at(50 * MS) == pytest.approx(EgoPose(0.5, 0.0, 0.0, 10.0))
    assert h.outside == 0
    assert h.at(500 * MS) == pytest.approx(EgoPose(1.0, 0.0, 0.0, 10.0))
    assert h.at(-MS) == EgoPose(0.0, 0.0, 0.0, 10.0)
    assert h.outside == 2


def test_drops_out_of_order_poses_and_trims_old_ones() -> None:
    h = PoseHistory(span_ns=1000 * MS)
    for k in range(500):
        h.add(k * 20 * MS, EgoPose(float(k), 0.0, 0.0, 1.0))
    h.add(0, EgoPose(-1.0, 0.0, 0.0, 0.0))
    assert h.out_of_order == 1
    assert len(h) < 50 + 66
    latest = h.latest()
    assert latest is not None and latest[0] == 499 * 20 * MS
    assert PoseHistory().at(0) is None

"""Obstacles from perception output: frame change, radar's relative velocity, prediction."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rt_fusion.core.planning import frenet, obstacles


@dataclasses.dataclass
class Ego:
    x: float = 10.0
    y: float = 5.0
    yaw: float = math.pi / 2  # facing +y in the map
    v: float = 4.0


def test_a_fused_object_ahead_lands_ahead_in_the_map() -> None:
    o = obstacles.from_track(20.0, 1.0, 0.0, 3.0, 0.0, 4.5, 1.8, 0.0, 0.5, Ego())
    # 20 m ahead of an ego at (10, 5) facing +y, 1 m to its left (-x): (9, 25).
    assert (o.x, o.y, o.yaw) == pytest.approx((9.0, 25.0, math.pi / 2))
    assert (o.vx, o.vy) == pytest.approx((0.0, 3.0))  # over ground, turned with the ego
    assert (o.length, o.width, o.std) == (4.5, 1.8, 0.5)


def test_points_get_a_size_and_pedestrians_their_growth() -> None:
    o = obstacles.from_track(
        5.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, Ego(),
        pedestrian=True, pedestrian_growth=0.8, yield_to_pedestrians=True,
    )  # fmt: skip
    assert (o.length, o.width) == (obstacles.MIN_SIZE_M, obstacles.MIN_SIZE_M)
    assert o.growth == 0.8 and o.yield_to
    car = obstacles.from_track(5.0, 0.0, 0.0, 0.0, 0.0, 4.0, 2.0, 0.0, 0.0, Ego(),
                               pedestrian_growth=0.8, yield_to_pedestrians=True)  # fmt: skip
    assert car.growth is None and not car.yield_to


def test_radar_velocity_is_relative_and_missing_extent_is_one_metre() -> None:
    # Closing at -4 m/s relative to an ego at 4 m/s: a stationary object.
    o = obstacles.from_radar(30.0, 0.0, math.nan, -4.0, 0.0, math.nan, 0.0, Ego())
    assert (o.vx, o.vy) == pytest.approx((0.0, 0.0), abs=1e-12)
    assert (o.length, o.width, o.yaw) == pytest.approx((1.0, 1.0, math.pi / 2))
    assert (o.x, o.y) == pytest.approx((10.0, 35.0))


def test_advance_moves_an_old_obstacle_to_now() -> None:
    o = obstacles.from_track(0.0, 0.0, 0.0, 2.0, 0.0, 4.0, 2.0, 0.0, 0.0, Ego(yaw=0.0, x=0, y=0))
    later = obstacles.advance(o, 1.5)
    assert (later.x, later.y) == pytest.approx((3.0, 0.0))
    assert obstacles.advance(o, -1.0) is o


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-50, 50), st.floats(-50, 50), st.floats(-3.2, 3.2), st.floats(-20, 20),
    st.floats(-20, 20), st.sampled_from([0.0, 1e-5, -1e-5, 0.3, -0.8, 2e-4]), st.floats(0.0, 2.0),
)  # fmt: skip
def test_advance_is_frenet_predict_for_one_obstacle(
    x: float, y: float, yaw: float, vx: float, vy: float, w: float, dt: float
) -> None:
    # The scalar form the node runs every cycle moves an obstacle as the planner predicts it.
    o = frenet.Obstacle(x, y, yaw, 4.0, 2.0, vx, vy, w, 0.3, growth=0.5, yield_to=True)
    px, py, pyaw = frenet.predict([o], np.array([dt]))
    moved = obstacles.advance(o, dt)
    if dt > 0:
        assert (moved.x, moved.y, moved.yaw) == pytest.approx(
            (px[0, 0], py[0, 0], pyaw[0, 0]), abs=1e-9
        )
        assert (moved.length, moved.width, moved.vx, moved.vy, moved.yaw_rate) == (4, 2, vx, vy, w)
        assert (moved.std, moved.growth, moved.yield_to) == (0.3, 0.5, True)
    else:
        assert moved is o

"""Boxes in base_link drawn into a camera's image: the viewer's camera annotations, checked
against the scenario camera that renders the frames (its own projection code)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rt_fusion.core import rotation
from rt_fusion.core.camera import box_corners, image_boxes
from rt_fusion.core.scenario.sensors import VEHICLE, CameraModel


def _mount(cam: CameraModel) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(cam.pos), rotation.matrix(rotation.from_euler(0.0, cam.pitch, cam.yaw))


def _k(cam: CameraModel) -> np.ndarray:
    return np.array([[cam.fx, 0, cam.cx], [0, cam.fy, cam.cy], [0, 0, 1.0]])


@pytest.mark.parametrize(
    'cam',
    [
        VEHICLE,
        dataclasses.replace(VEHICLE, yaw=math.radians(2.0), pos=(1.8, 0.3, 1.4)),
        dataclasses.replace(VEHICLE, pitch=math.radians(3.0)),
        dataclasses.replace(VEHICLE.mounted('left')),
    ],
    ids=['straight', 'turned', 'pitched', 'left'],
)
def test_a_box_s_rectangle_is_where_the_scenario_camera_draws_its_corners(
    cam: CameraModel,
) -> None:
    ahead = np.array([[np.cos(cam.yaw), np.sin(cam.yaw)]])
    boxes = []
    for dist, side in ((12.0, 0.0), (25.0, 2.5), (40.0, -3.0)):
        x, y = cam.pos[:2] + dist * ahead[0] + side * np.array([-ahead[0, 1], ahead[0, 0]])
        boxes.append([x, y, 0.0, 4.5, 1.9, 1.5, 0.3])
    rect, shown = image_boxes(boxes, _mount(cam), _k(cam), cam.d, (cam.width, cam.height))
    assert shown.all()
    for box, r in zip(boxes, rect, strict=True):
        uv, depth = cam.project(box_corners([box])[0])
        assert (depth > 0).all()
        lo = np.clip(uv.min(axis=0), 0, (cam.width, cam.height))
        hi = np.clip(uv.max(axis=0), 0, (cam.width, cam.height))
        np.testing.assert_allclose(r, [*lo, *hi], atol=0.5)


def test_boxes_behind_or_outside_the_image_are_hidden_and_one_on_its_edge_is_clipped() -> None:
    cam = VEHICLE
    boxes = [
        [-10.0, 0.0, 0.0, 4.5, 1.9, 1.5, 0.0],  # behind
        [10.0, 30.0, 0.0, 4.5, 1.9, 1.5, 0.0],  # far to the left, outside the field of view
        [8.0, 4.0, 0.0, 6.0, 1.9, 1.5, 0.0],  # across the left edge
        [1.9, 0.0, 0.0, 0.2, 0.2, 0.2, 0.0],  # at the lens, nearer than NEAR_M
    ]
    rect, shown = image_boxes(boxes, _mount(cam), _k(cam), cam.d, (cam.width, cam.height))
    assert shown.tolist() == [False, False, True, False]
    assert rect[2][0] == 0.0 and 0.0 < rect[2][2] < cam.width
    empty, none = image_boxes(np.zeros((0, 7)), _mount(cam), _k(cam), cam.d, (10, 10))
    assert empty.shape == (0, 4) and none.shape == (0,)

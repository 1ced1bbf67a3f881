"""The scenario camera's renderer and lens: bodies, light bar, shadows, scenery, distortion."""

from __future__ import annotations

import dataclasses
import math

import cv2
import numpy as np
import pytest
import yaml

from rt_fusion.core.camera import undistort_points
from rt_fusion.core.scenario import render as rd
from rt_fusion.core.scenario import sensors as sm
from rt_fusion.core.scenario.generate import truth_at
from rt_fusion.core.scenario.world import BODIES, ScenarioError, build_world
from tests.conftest import ROOT

CAM = sm.CameraModel()  # 640x360: the same lens as the 1080p vehicle camera, fast


def _world(actors: list[dict], density: float = 0.0, seconds: float = 2.0):  # type: ignore[no-untyped-def,type-arg]
    return build_world(
        {
            'name': 'render',
            'road': {'curvature': 0.0, 'lanes': 2, 'lane_width': 3.5},
            'ego': {'class': 'car', 'speed': 0.0, 'lane': 0},
            'roadside': {'spacing': 0},
            'scenery': {'density': density},
            'actors': actors,
        },
        seconds,
    )


def _frame(world, t: float = 0.5, look: rd.Look | None = None):  # type: ignore[no-untyped-def]
    look = look or rd.Look(noise=0.0)
    return rd.render(CAM, world, t, np.random.default_rng(0), look).astype(np.float64)


def test_the_lens_projects_and_undistorts_back_and_says_so_in_camera_info() -> None:
    pts = np.array([[20.0, 6.0, 0.2], [60.0, -20.0, 3.0], [8.0, 3.0, 0.0]])
    uv, _ = sm.VEHICLE.project(pts)
    pinhole, _ = sm.VEHICLE.project_pinhole(pts)
    np.testing.assert_allclose(sm.VEHICLE.undistort(uv), pinhole, atol=1e-6)
    # Barrel: points off the axis come in towards the centre; the field of view grows.
    centre = np.array([sm.VEHICLE.cx, sm.VEHICLE.cy])
    assert (np.linalg.norm(uv - centre, axis=1) < np.linalg.norm(pinhole - centre, axis=1)).all()
    assert sm.VEHICLE.half_fov() > math.atan2(sm.VEHICLE.cx, sm.VEHICLE.fx)
    info = sm.VEHICLE.camera_info()
    assert info['distortion_model'] == 'plumb_bob'
    assert info['distortion_coefficients']['data'] == list(sm.LENS_D)
    assert undistort_points(uv, (1.0, 1.0, 0.0, 0.0), (0.0,) * 5).tolist() == uv.tolist()


def test_every_body_is_drawn_where_its_actor_stands() -> None:
    empty = _frame(_world([]))
    for cls, bodies in BODIES.items():
        for body in bodies:
            world = _world([{'class': cls, 'body': body, 'lane': 0, 's': 15.0}])
            a = world.actors[0]
            corners = sm.box_corners(a.at(0.5), a.size, world.ego.at(0.5))
            uv, _ = CAM.project(corners)
            u0, v0 = np.floor(uv.min(axis=0)).astype(int)
            u1, v1 = np.ceil(uv.max(axis=0)).astype(int)
            changed = np.abs(_frame(world) - empty)[v0:v1, u0:u1].max(axis=2) > 10
            assert changed.mean() > 0.3, (cls, body, changed.mean())
    with pytest.raises(ScenarioError, match="body 'bus' of a car"):
        _world([{'class': 'car', 'body': 'bus', 's': 15.0}])


def test_the_siren_light_bar_flashes_red_and_blue_in_turn() -> None:
    world = _world([{'class': 'car', 'body': 'sedan', 'lane': 0, 's': 12.0, 'siren': True}])
    a = world.actors[0]
    bar = np.array([[a.at(0.0)['x'], 0.2, a.size[2] * 1.035], [a.at(0.0)['x'], -0.2, 1.55]])
    (left, right), _ = CAM.project(bar)
    reds, blues = [], []
    for t in (0.05, 0.4, 0.75, 1.05):
        img = _frame(world, t)
        blues.append(img[int(left[1]), int(left[0]), 0])  # B of the left lamp
        reds.append(img[int(right[1]), int(right[0]), 2])  # R of the right lamp
    assert max(reds) > 2 * min(reds) and max(blues) > 2 * min(blues)
    # In turn: when red is bright, blue is dim.
    on_red = int(np.argmax(reds))
    assert blues[on_red] < max(blues)


def test_an_actor_casts_its_shadow_on_the_road_away_from_the_sun() -> None:
    world = _world([{'class': 'truck', 'body': 'box_truck', 'lane': 1, 's': 20.0}])
    sun_right = rd.Look(noise=0.0, sun=(0.0, -1.0, 1.0))  # the sun on the right: shadow left
    lit, shaded = (
        _frame(world, look=sun_right),
        _frame(world, look=rd.Look(noise=0.0, sun=(0.0, -1.0, 1.0), shadow=1.0)),
    )
    # A road point just left of the truck's left side (lane 1 is left of the ego).
    truck = world.actors[0].at(0.5)
    ((u, v),), _ = CAM.project(np.array([[truck['x'] - 1.0, truck['y'] + 2.4, 0.0]]))
    assert lit[int(v), int(u)].mean() < 0.75 * shaded[int(v), int(u)].mean()


def test_the_scenery_is_the_seeds_own_and_turns_off() -> None:
    world = _world([], density=1.0, seconds=2.0)
    items = rd.scenery(world, 0.0, rd.Look(scenery_seed=4))
    again = rd.scenery(world, 0.0, rd.Look(scenery_seed=4))
    other = rd.scenery(world, 0.0, rd.Look(scenery_seed=5))
    assert len(items) > 10
    assert [i[0].at if i[0] else i[1][0].at for i in items] == [
        i[0].at if i[0] else i[1][0].at for i in again
    ]
    assert len(other) != len(items) or any(
        (a[0] is None) != (b[0] is None) for a, b in zip(items, other, strict=True)
    )
    assert rd.scenery(_world([], density=0.0), 0.0, rd.Look(scenery_seed=4)) == []
    # Nothing of it stands on the road.
    right, left = world.road.edges()
    for solid, tree in items:
        corners = (solid if solid is not None else tree[0]).corners.reshape(-1, 3)
        ys = corners[:, 1]
        assert ys.min() > left - 0.1 or ys.max() < right + 0.1
    with pytest.raises(ScenarioError, match=r'scenery\.density'):
        _world([], density=-1.0)


def test_a_frame_is_deterministic_and_the_sensor_noise_is_there() -> None:
    world = _world([{'class': 'car', 'lane': 0, 's': 20.0}], density=1.0)
    look = rd.Look(noise=4.0, scenery_seed=2)
    a = rd.render(sm.VEHICLE, world, 0.3, np.random.default_rng(1), look)
    b = rd.render(sm.VEHICLE, world, 0.3, np.random.default_rng(1), look)
    assert a.shape == (1080, 1920, 3) and np.array_equal(a, b)
    flat = rd.render(
        sm.VEHICLE, world, 0.3, np.random.default_rng(1), rd.Look(noise=0.0, scenery_seed=2)
    )
    diff = a.astype(np.float64) - flat
    assert 2.5 < diff[100:300, 800:1100].std() < 6.0  # the sky: noise only, in every channel
    assert all(2.5 < diff[100:300, 800:1100, c].std() < 6.0 for c in range(3))


def test_each_camera_of_the_rig_sees_the_car_on_its_side() -> None:
    """The surround rig (front, left, right, rear at their mountings): a car beside the ego on
    the left is drawn by the left camera where it projects, one behind by the rear camera; the
    front camera does not see either."""
    look = rd.Look(noise=0.0)
    empty = _world([])
    for name, actor in (
        ('left', {'class': 'car', 'body': 'sedan', 'lane': 1, 's': 2.0}),
        ('rear', {'class': 'car', 'body': 'van', 'lane': 0, 's': -15.0}),
    ):
        world = _world([actor])
        cam = CAM.mounted(name)
        a = world.actors[0]
        corners = sm.box_corners(a.at(0.5), a.size, world.ego.at(0.5))
        uv, depth = cam.project(corners)
        assert (depth > 0).all(), name
        u0, v0 = np.clip(np.floor(uv.min(axis=0)).astype(int), 0, None)
        u1, v1 = np.ceil(uv.max(axis=0)).astype(int)
        rng = np.random.default_rng(0)
        seen = rd.render(cam, world, 0.5, rng, look).astype(np.float64)
        bare = rd.render(cam, empty, 0.5, np.random.default_rng(0), look).astype(np.float64)
        changed = np.abs(seen - bare)[v0:v1, u0:u1].max(axis=2) > 10
        assert changed.mean() > 0.3, (name, changed.mean())
        front = np.abs(_frame(world) - _frame(empty)).max()
        assert front == 0, name
    with pytest.raises(ValueError, match='camera mount'):
        CAM.mounted('roof')


def test_the_frame_sits_where_camera_info_says_to_a_fiftieth_of_a_pixel() -> None:
    # The lens remap (pinhole canvas -> distorted frame) against the exact undistortion of every
    # 7th pixel. A frame drawn off its camera_info teaches the detector the offset, and then it
    # puts a real camera's far objects metres off in range: cv2.resize's 1.5 px (the renderer
    # before 2026-12) is 3.5 % of the depth at 45 m.
    canvas, map1, map2, _ = rd._canvas(sm.VEHICLE)
    mapx, mapy = cv2.convertMaps(map1, map2, cv2.CV_32FC1)
    vv, uu = np.mgrid[0 : sm.VEHICLE.height : 7, 0 : sm.VEHICLE.width : 7]
    exact = sm.VEHICLE.undistort(np.column_stack([uu.ravel(), vv.ravel()]))
    exact += (canvas.cx - sm.VEHICLE.cx, canvas.cy - sm.VEHICLE.cy)
    err = np.column_stack([mapx[vv, uu].ravel(), mapy[vv, uu].ravel()]) - exact
    assert np.abs(err).max() < 0.02, np.abs(err).max(axis=0)


def test_what_the_frame_shows_of_an_actor_is_its_camera_visibility() -> None:
    lead = {'class': 'car', 'body': 'van', 'lane': 0, 's': 15.0}
    behind = {'class': 'car', 'body': 'sedan', 'lane': 0, 's': 40.0}
    beside = {'class': 'pedestrian', 'lane': 1, 's': 30.0}
    world = _world([lead, behind, beside])
    near, far, person = (a.id for a in world.actors)
    look = rd.Look(noise=0.0)
    shown = rd.shown_fractions(CAM, world, 0.5, look)
    assert shown[near] == 1.0 and shown[person] == 1.0
    assert shown[far] < 1.0 - sm.OCCLUDED_FRACTION  # behind the van: hidden
    # What the frame itself shows of the hidden car: the pixels that change when it is there.
    changed = np.abs(_frame(world) - _frame(_world([lead, beside]))).max(axis=2) > 10
    a = world.actors[1]
    uv, _ = CAM.project(sm.box_corners(a.at(0.5), a.size, world.ego.at(0.5)))
    u0, v0 = np.floor(uv.min(axis=0)).astype(int)
    u1, v1 = np.ceil(uv.max(axis=0)).astype(int)
    assert changed[v0:v1, u0:u1].mean() < 1.0 - sm.OCCLUDED_FRACTION
    truth = truth_at(world, 0.5, CAM, look=look)
    visible = {o['id']: o['visible']['camera'] for o in truth['objects']}
    assert visible == {near: True, far: False, person: True}


def test_roadside_scenery_hides_what_stands_behind_it() -> None:
    # stopped_car, seed 2101, t = 1 s: a guard rail on the inside of the curve covers the lower
    # part of a post 70 m ahead (id 23); without the scenery the whole post shows.
    world = build_world(
        yaml.safe_load((ROOT / 'config' / 'scenarios' / 'stopped_car.yaml').read_text()), 4.0
    )
    look = rd.Look(scenery_seed=2101)
    with_rail = rd.shown_fractions(sm.VEHICLE, world, 1.0, look)[23]
    bare = dataclasses.replace(world, scenery=0.0)
    assert rd.shown_fractions(sm.VEHICLE, bare, 1.0, look)[23] == 1.0
    assert 0.2 < with_rail < 0.8, with_rail

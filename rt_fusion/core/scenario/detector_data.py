"""Random scenes and their camera labels: what the default detector is trained and checked on.

:func:`random_scenario` draws a scenario description (road, ego, a random mix of actors, roadside
posts) that :func:`~rt_fusion.core.scenario.world.build_world` builds like any shipped scenario;
:func:`camera_labels` gives, per actor the camera sees, what a CenterNet-style detector learns:
the 2D box (the projected 3D box clipped to the image), the keypoint (projection of the 3D centre,
clipped into the image), the camera-axis depth of the centre, the heading in the vehicle frame
and the class. :func:`scene_frames` renders a scene's frames with a random look.

The seeds of training and of held-out checks are disjoint from the evaluation seeds by
construction: the trainer draws scene seeds as ``[TRAIN_SEED_BASE + k]`` and
``[HELDOUT_SEED_BASE + k]`` (a two-element seed sequence: the evaluation's single integer seeds
never produce the same streams).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.scenario import render as rd
from rt_fusion.core.scenario import sensors as sm
from rt_fusion.core.scenario.world import CLASSES, SIZES, Road, World, build_world

TRAIN_SEED_BASE = 1_000_000
HELDOUT_SEED_BASE = 2_000_000
DETECTOR_CLASSES = CLASSES  # car, truck, pedestrian, bicycle, static
MAX_LABEL_RANGE_M = 100.0
MIN_BOX_PX = 2.0


@dataclasses.dataclass(frozen=True, slots=True)
class CameraLabel:
    """One object as the camera sees it (image pixels of the rendering camera)."""

    cls: int  # index into DETECTOR_CLASSES
    box: tuple[float, float, float, float]  # u0, v0, u1, v1, clipped to the image
    keypoint: tuple[float, float]  # projected 3D centre, clipped into the image
    depth: float  # camera-axis depth of the centre [m]
    heading: float  # yaw in the vehicle frame [rad]
    actor_id: int
    x: float  # centre in base_link [m]
    y: float


def random_scenario(rng: np.random.Generator) -> dict[str, Any]:
    """A scenario description with 2-14 actors of every class around a moving or standing ego."""
    lanes = int(rng.integers(1, 5))
    lane_width = float(rng.uniform(3.0, 3.9))
    ego_lane = int(rng.integers(0, lanes))
    ego_speed = float(rng.choice([0.0, rng.uniform(3, 30)], p=[0.15, 0.85]))
    actors: list[dict[str, Any]] = []
    taken: list[tuple[float, float]] = [(float(ego_lane), 0.0)]  # (lane, s) of vehicles
    for _ in range(int(rng.integers(2, 15))):
        cls = str(rng.choice(['car', 'truck', 'pedestrian', 'bicycle'], p=[0.5, 0.2, 0.18, 0.12]))
        s = float(rng.uniform(-5.0, 110.0))
        spec: dict[str, Any] = {'class': cls, 's': s}
        if cls == 'pedestrian':
            side = float(rng.choice([-0.5, lanes - 0.5, rng.uniform(-0.5, lanes - 0.5)]))
            spec['lane'] = side + float(rng.uniform(-0.6, 0.6))
            spec['speed'] = float(rng.uniform(-1.5, 1.5)) if rng.random() < 0.5 else 0.0
            if rng.random() < 0.4:
                goal = float(rng.uniform(-2.0, lanes * lane_width + 2.0) - lane_width / 2)
                spec['events'] = [{'at': 0.0, 'cross': goal, 'walk': float(rng.uniform(0.8, 2))}]
        elif cls == 'bicycle':
            spec['lane'] = float(rng.choice([-0.35, lanes - 0.65, float(rng.integers(0, lanes))]))
            spec['speed'] = float(rng.uniform(0.0, 8.0))
        else:
            spec['lane'] = int(rng.integers(0, lanes))
            if any(lane == spec['lane'] and abs(s - s0) < 14.0 for lane, s0 in taken):
                continue  # not on top of another vehicle (or the ego)
            taken.append((float(spec['lane']), s))
            spec['speed'] = float(rng.choice([0.0, rng.uniform(2.0, 32.0)], p=[0.15, 0.85]))
            if rng.random() < 0.2 and lanes > 1:
                spec['events'] = [
                    {
                        'at': float(rng.uniform(0.0, 2.0)),
                        'lane_change': int(rng.integers(0, lanes)),
                        'duration': float(rng.uniform(1.5, 4.0)),
                    }
                ]
        if rng.random() < 0.3:  # size variety within the class
            size = np.array(SIZES[cls]) * rng.uniform(0.85, 1.2, 3)
            spec['size'] = [float(v) for v in size]
        actors.append(spec)
    # Static obstacles of any size on the road or its shoulders (lost cargo, cones, blocks):
    # a detector that learnt depth from one post size misplaces the others.
    for _ in range(int(rng.integers(0, 4))):
        actors.append(
            {
                'class': 'static',
                's': float(rng.uniform(5.0, 110.0)),
                'lane': float(rng.uniform(-1.0, lanes)),
                'speed': 0.0,
                'size': [float(v) for v in rng.uniform([0.2, 0.2, 0.4], [1.2, 1.2, 1.6])],
            }
        )
    post = rng.uniform([0.15, 0.15, 0.6], [0.7, 0.7, 1.6])
    return {
        'name': 'random',
        'road': {
            'curvature': float(rng.choice([0.0, rng.uniform(-0.006, 0.006)], p=[0.4, 0.6])),
            'lanes': lanes,
            'lane_width': lane_width,
        },
        'ego': {'class': 'car', 'speed': ego_speed, 'lane': ego_lane},
        'actors': actors,
        'roadside': {
            'spacing': float(rng.choice([0.0, rng.uniform(12.0, 50.0)], p=[0.25, 0.75])),
            'offset': float(rng.uniform(0.3, 2.5)),
            'size': [float(v) for v in post],
        },
    }


def camera_labels(
    world: World,
    t: float,
    cam: sm.CameraModel,
    max_range_m: float = MAX_LABEL_RANGE_M,
    look: rd.Look | None = None,
) -> list[CameraLabel]:
    """The actors the camera sees at ``t`` (in view, not occluded, within ``max_range_m``).

    With the frame's ``look`` the occlusion is the rendered frame's
    (:func:`~rt_fusion.core.scenario.render.shown_fractions`: nearer actors and roadside scenery,
    heights included), as the scenarios' ground truth has it; without, the actors' footprints."""
    ego = world.ego.at(t)
    shown = rd.shown_fractions(cam, world, t, look) if look is not None else None
    seen = sm.visibility(world, t, cam, sm.RadarModel(), shown)
    out = []
    for a in world.actors:
        if not seen.get(a.id, {}).get('camera', False):
            continue
        st = a.at(t)
        corners = sm.box_corners(st, a.size, ego)
        if (corners[:, 0] - sm.CAMERA_POS[0]).min() <= 0.8:
            continue
        centre = corners.mean(axis=0)
        depth = float(centre[0] - sm.CAMERA_POS[0])
        if depth > max_range_m:
            continue
        uv, _ = cam.project(np.vstack([corners, centre]))
        u0, v0 = np.clip(uv[:8].min(axis=0), 0, [cam.width - 1, cam.height - 1])
        u1, v1 = np.clip(uv[:8].max(axis=0), 0, [cam.width - 1, cam.height - 1])
        if u1 - u0 < MIN_BOX_PX or v1 - v0 < MIN_BOX_PX:
            continue
        ku = float(np.clip(uv[8, 0], u0, u1))
        kv = float(np.clip(uv[8, 1], v0, v1))
        heading = math.atan2(math.sin(st['yaw'] - ego['yaw']), math.cos(st['yaw'] - ego['yaw']))
        out.append(
            CameraLabel(
                DETECTOR_CLASSES.index(a.cls),
                (float(u0), float(v0), float(u1), float(v1)),
                (ku, kv),
                depth,
                heading,
                a.id,
                float(centre[0]),
                float(centre[1]),
            )
        )
    return out


def add_occluders(scenario: dict[str, Any], rng: np.random.Generator, seconds: float) -> None:
    """Adds 1-3 standing objects (a block or cone, or a parked car) to a random scenario, each
    on the line of sight from the ego's camera to a roadside post 40-100 m ahead at a random
    time of the scene, 55-90 % of the way there: the post behind peeks out over or beside it.
    What the shipped scenarios have (``stopped_car``: post 9 behind the obstacle on the
    shoulder; ``pedestrian_crossing``: posts behind parked cars) and plain random scenes rarely
    do. Nothing when the scene has no posts."""
    side = scenario['roadside']
    spacing = float(side['spacing'])
    if spacing <= 0:
        return
    r = scenario['road']
    road = Road(float(r['curvature']), int(r['lanes']), float(r['lane_width']))
    right, left = road.edges()
    lines = (right - float(side['offset']), left + float(side['offset']))
    ego = scenario['ego']
    d_ego = float(ego['lane']) * road.lane_width
    for _ in range(int(rng.integers(1, 4))):
        s_ego = float(ego['speed']) * float(rng.uniform(0.0, seconds))
        ahead = float(rng.uniform(40.0, 100.0))
        s_post = -40.0 + spacing * math.ceil((s_ego + ahead + 40.0) / spacing)
        ex, ey, _ = road.to_world(s_ego, d_ego)
        px, py, _ = road.to_world(s_post, lines[int(rng.integers(0, 2))])
        f = float(rng.uniform(0.55, 0.9))
        s, d = road.to_frenet(ex + f * (px - ex), ey + f * (py - ey))
        spec: dict[str, Any] = {'s': float(s), 'd': float(d) + float(rng.normal(0.0, 0.3))}
        if rng.random() < 0.7:
            size = rng.uniform([0.3, 0.3, 0.5], [1.2, 1.2, 1.4])
            spec.update({'class': 'static', 'speed': 0.0, 'size': [float(v) for v in size]})
        else:
            spec.update({'class': 'car', 'speed': 0.0})
        scenario['actors'].append(spec)


def scene_frames(
    seed: tuple[int, int],
    frames: int,
    cam: sm.CameraModel,
    seconds: float = 4.0,
    occluders: float = 0.0,
) -> list[tuple[npt.NDArray[np.uint8], list[CameraLabel]]]:
    """One random scene, ``frames`` renderings at random times with one random look;
    ``occluders``: the chance that it gets :func:`add_occluders` (drawn from a generator of its
    own, so the rest of the scene is the same with or without)."""
    rng = np.random.default_rng(list(seed))
    scenario = random_scenario(rng)
    orng = np.random.default_rng([*seed, 9])
    if occluders > 0 and orng.random() < occluders:
        add_occluders(scenario, orng, seconds)
    world = build_world(scenario, seconds)
    look = rd.random_look(rng)
    out = []
    for t in np.sort(rng.uniform(0.0, seconds - 0.1, frames)):
        if _crashed(world, float(t)):
            continue  # an actor drove into the ego: no such scene on a real road
        out.append(
            (
                rd.render(cam, world, float(t), rng, look),
                camera_labels(world, float(t), cam, look=look),
            )
        )
    return out


def _crashed(world: World, t: float) -> bool:
    ego = world.ego.at(t)
    for a in world.actors:
        corners = sm.box_corners(a.at(t), a.size, ego)
        if (
            corners[:, 0].max() > -2.5
            and corners[:, 0].min() < 4.5
            and corners[:, 1].max() > -1.2
            and corners[:, 1].min() < 1.2
        ):
            return True
    return False

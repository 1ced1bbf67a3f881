"""The scenario camera's renderer: what the default detector is trained on and tested against.

:func:`render` draws one BGR frame of a :class:`~rt_fusion.core.scenario.world.World` as the
scenario camera (:class:`~rt_fusion.core.scenario.sensors.CameraModel`) sees it:

- **sky and ground** graded by the :class:`Look` (day, dusk, overcast; :func:`random_look`);
- **the road**: asphalt between the edges, dashed lane lines, solid edge lines;
- **actors** as perspective-correct solids built of boxes per body (:data:`BODY_PARTS`): sedan,
  hatchback, SUV and van (class ``car``), box truck and bus (``truck``), bicycle and motorcycle
  with a rider (``bicycle``), a person with legs, torso and head, a post with a reflector band;
  glass, wheels and lights in their own colours, a flashing red/blue light bar on an actor with a
  siren (the emergency vehicle), every face shaded by the sun;
- **shadows** cast on the road by every actor away from the sun (the look's strength: hard at
  noon, faint when overcast);
- **roadside scenery** from the road and the scenario seed (:func:`scenery`): guard rails, lamp
  poles, buildings with rows of windows, trees; the camera sees it, the radar does not;
- **occlusion** by the painter's algorithm: items far to near, faces far to near within an item;
- **the lens and the sensor**: plumb_bob distortion of the camera model (rendered on a pinhole
  canvas with a margin, then remapped), vignetting, exposure, sensor noise.

:func:`shown_fractions` draws the same items as labels: the share of each actor's silhouette that
the frame shows, the camera's visibility in the scenarios' ground truth.

Speed: the static parts (graded background, distortion maps, vignetting, noise bank) are cached
per camera and look; a 1920×1080 frame is drawn in about 0.1 s on one core (README, scenarios).
Known defect: the frame is drawn 1.5 px right of and below where the camera's K puts it
(:func:`_canvas`); the shipped detector learned it, so it stays until one is retrained. Limits
(plainly): flat-shaded boxes (no curved bodies, no textures beyond colour bands), a flat
road, one sun without sky light or reflections, no motion blur, rolling shutter or rain.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from rt_fusion.core.scenario.sensors import CameraModel
from rt_fusion.core.scenario.world import Track, World, body_of

# Body colours (BGR) per class: an object's colour is drawn from its class's palette by its id,
# so it keeps it from frame to frame and the colour alone does not give the class away.
PALETTES: dict[str, tuple[tuple[int, int, int], ...]] = {
    'car': (
        (235, 235, 235),
        (30, 30, 30),
        (170, 170, 175),
        (110, 110, 115),
        (40, 40, 180),
        (150, 60, 30),
        (50, 90, 40),
        (140, 170, 190),
        (30, 100, 200),
        (90, 40, 40),
    ),
    'truck': ((230, 230, 230), (40, 40, 170), (140, 70, 30), (40, 170, 220), (100, 100, 100)),
    'pedestrian': (
        (40, 40, 40),
        (160, 80, 30),
        (60, 60, 160),
        (200, 200, 200),
        (60, 120, 60),
        (30, 150, 220),
        (120, 90, 70),
    ),
    'bicycle': ((60, 180, 60), (40, 40, 40), (40, 40, 200), (200, 120, 40), (170, 170, 170)),
    'static': ((200, 200, 200), (30, 200, 230), (90, 90, 90)),
}
CARGO_BGR = ((225, 225, 225), (200, 205, 210), (150, 150, 150), (60, 60, 150), (170, 120, 60))
SKIN_BGR = ((150, 180, 225), (110, 140, 190), (70, 95, 140), (45, 65, 100))
GLASS = (75, 55, 45)
WHEEL = (28, 28, 30)
DARK = (45, 45, 50)
LIGHT_OFF = 0.25  # a flashing lamp's brightness when off


@dataclasses.dataclass(frozen=True)
class Look:
    """Lighting, exposure and scenery of a rendered scene (the scenarios use the default; the
    detector's training draws them at random, :func:`random_look`)."""

    sky_bgr: tuple[float, float, float] = (235.0, 200.0, 150.0)
    ground_bgr: tuple[float, float, float] = (95.0, 100.0, 100.0)
    road_bgr: tuple[float, float, float] = (80.0, 82.0, 84.0)
    sun: tuple[float, float, float] = (0.3, 0.5, 0.8)  # light direction (x fwd, y left, z up)
    ambient: float = 0.45  # share of a face's brightness that does not depend on the sun
    gain: float = 1.0  # exposure
    noise: float = 3.0  # sensor noise std [grey levels]
    palette_seed: int = 0  # shifts every object's colour choice
    shadow: float = 0.55  # brightness of the road in an actor's shadow (1: no shadow)
    scenery_seed: int = 0  # the roadside scenery's draw (:func:`scenery`)


def random_look(rng: np.random.Generator) -> Look:
    """Day, dusk or overcast: sky, ground, sun, shadows, exposure, noise and scenery at random."""
    kind = rng.choice(['day', 'dusk', 'overcast'], p=[0.5, 0.25, 0.25])
    if kind == 'day':
        sky, gain, ambient, shadow = (235.0, 200.0, 150.0), rng.uniform(0.85, 1.15), 0.45, 0.55
    elif kind == 'dusk':
        sky, gain, ambient, shadow = (150.0, 140.0, 200.0), rng.uniform(0.5, 0.8), 0.55, 0.75
    else:
        sky, gain, ambient, shadow = (200.0, 200.0, 195.0), rng.uniform(0.75, 1.0), 0.7, 0.88
    jitter = rng.uniform(0.85, 1.15, 3)
    ground = np.array([(60, 110, 80), (80, 100, 110), (110, 120, 120), (70, 130, 150)])
    return Look(
        sky_bgr=_bgr(np.array(sky) * jitter),
        ground_bgr=_bgr(ground[rng.integers(0, 4)] * rng.uniform(0.7, 1.2)),
        road_bgr=_bgr(np.full(3, rng.uniform(55, 115)) + rng.uniform(-5, 5, 3)),
        sun=(float(rng.uniform(-1, 1)), float(rng.uniform(-1, 1)), float(rng.uniform(0.3, 1.0))),
        ambient=ambient,
        gain=float(gain),
        noise=float(rng.uniform(1.0, 6.0)),
        palette_seed=int(rng.integers(0, 1000)),
        shadow=float(np.clip(shadow + rng.uniform(-0.08, 0.08), 0.4, 0.95)),
        scenery_seed=int(rng.integers(0, 2**31)),
    )


def _bgr(v: Any) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))


def actor_bgr(cls: str, actor_id: int, look: Look) -> npt.NDArray[np.float32]:
    """The body colour of an actor (its class's palette, chosen by its id)."""
    palette = PALETTES[cls]
    return np.array(palette[(actor_id * 7 + look.palette_seed) % len(palette)], np.float32)


# --- Bodies: boxes in fractions of the actor's size --------------------------------------------
# (x0, x1, y0, y1, z0, z1, role): x along the actor's length (-0.5 rear ... 0.5 front), y across
# its width (-0.5 right ... 0.5 left), z over its height (0 road ... 1 top). Roles: body (the
# palette colour), cargo, glass, wheel, dark, skin, tail (red lamp), head (white lamp), reflector.
# A part that sits on another's face stands out of it by 0.005 so that it is drawn after it.
Part = tuple[float, float, float, float, float, float, str]


def _wheels(xs: tuple[float, ...], r: float, y: float = 0.5) -> list[Part]:
    out: list[Part] = []
    for x in xs:
        out += [(x - r, x + r, -y - 0.005, -y + 0.14, 0.0, 2 * r, 'wheel')]
        out += [(x - r, x + r, y - 0.14, y + 0.005, 0.0, 2 * r, 'wheel')]
    return out


def _lamps(z0: float, z1: float) -> list[Part]:
    return [
        (-0.505, -0.49, -0.46, -0.3, z0, z1, 'tail'),
        (-0.505, -0.49, 0.3, 0.46, z0, z1, 'tail'),
        (0.49, 0.505, -0.44, -0.3, z0, z1, 'head'),
        (0.49, 0.505, 0.3, 0.44, z0, z1, 'head'),
    ]


_CAR_WHEELS = _wheels((-0.32, 0.32), 0.11)
BODY_PARTS: dict[str, list[Part]] = {
    'sedan': [
        (-0.5, 0.5, -0.5, 0.5, 0.13, 0.5, 'body'),
        (-0.3, 0.2, -0.44, 0.44, 0.5, 0.88, 'glass'),
        (-0.26, 0.14, -0.42, 0.42, 0.88, 1.0, 'body'),
        *_lamps(0.34, 0.44),
        *_CAR_WHEELS,
    ],
    'hatchback': [
        (-0.5, 0.5, -0.5, 0.5, 0.13, 0.52, 'body'),
        (-0.47, 0.16, -0.44, 0.44, 0.52, 0.9, 'glass'),
        (-0.46, 0.1, -0.42, 0.42, 0.9, 1.0, 'body'),
        *_lamps(0.36, 0.46),
        *_CAR_WHEELS,
    ],
    'suv': [
        (-0.5, 0.5, -0.5, 0.5, 0.16, 0.6, 'body'),
        (-0.46, 0.22, -0.45, 0.45, 0.6, 0.9, 'glass'),
        (-0.45, 0.17, -0.43, 0.43, 0.9, 1.0, 'body'),
        *_lamps(0.42, 0.52),
        *_wheels((-0.32, 0.32), 0.13),
    ],
    'van': [
        (-0.5, 0.3, -0.5, 0.5, 0.12, 1.0, 'body'),
        (0.3, 0.5, -0.5, 0.5, 0.12, 0.5, 'body'),
        (0.3, 0.44, -0.46, 0.46, 0.5, 0.9, 'glass'),
        (-0.1, 0.3, -0.505, 0.505, 0.58, 0.86, 'glass'),
        *_lamps(0.3, 0.42),
        *_CAR_WHEELS,
    ],
    'box_truck': [
        (-0.5, 0.22, -0.5, 0.5, 0.13, 1.0, 'cargo'),
        (0.24, 0.5, -0.48, 0.48, 0.13, 0.5, 'body'),
        (0.26, 0.5, -0.46, 0.46, 0.5, 0.72, 'glass'),
        (0.27, 0.49, -0.45, 0.45, 0.72, 0.78, 'body'),
        (-0.505, -0.49, -0.46, -0.34, 0.16, 0.22, 'tail'),
        (-0.505, -0.49, 0.34, 0.46, 0.16, 0.22, 'tail'),
        *_wheels((-0.36, -0.22, 0.36), 0.085),
    ],
    'bus': [
        (-0.5, 0.5, -0.5, 0.5, 0.1, 1.0, 'body'),
        (-0.45, 0.505, -0.505, 0.505, 0.5, 0.85, 'glass'),
        (0.48, 0.505, -0.44, 0.44, 0.2, 0.5, 'glass'),
        (-0.505, -0.49, -0.46, -0.34, 0.15, 0.22, 'tail'),
        (-0.505, -0.49, 0.34, 0.46, 0.15, 0.22, 'tail'),
        *_wheels((-0.3, 0.33), 0.08),
    ],
    'bicycle': [
        (0.25, 0.5, -0.05, 0.05, 0.0, 0.42, 'wheel'),
        (-0.5, -0.25, -0.05, 0.05, 0.0, 0.42, 'wheel'),
        (-0.25, 0.25, -0.05, 0.05, 0.3, 0.45, 'dark'),
        (-0.12, 0.06, -0.3, 0.3, 0.28, 0.58, 'dark'),
        (-0.14, 0.08, -0.45, 0.45, 0.58, 0.86, 'body'),
        (-0.08, 0.06, -0.2, 0.2, 0.87, 1.0, 'skin'),
    ],
    'motorcycle': [
        (0.22, 0.5, -0.08, 0.08, 0.0, 0.4, 'wheel'),
        (-0.5, -0.22, -0.08, 0.08, 0.0, 0.4, 'wheel'),
        (-0.3, 0.32, -0.25, 0.25, 0.24, 0.55, 'body'),
        (-0.505, -0.45, -0.1, 0.1, 0.4, 0.48, 'tail'),
        (-0.2, 0.05, -0.35, 0.35, 0.55, 0.84, 'dark'),
        (-0.13, 0.07, -0.22, 0.22, 0.84, 1.0, 'dark'),
    ],
    'person': [
        (-0.22, 0.22, -0.38, -0.06, 0.0, 0.47, 'dark'),
        (-0.22, 0.22, 0.06, 0.38, 0.0, 0.47, 'dark'),
        (-0.3, 0.3, -0.5, 0.5, 0.47, 0.84, 'body'),
        (-0.2, 0.2, -0.22, 0.22, 0.86, 1.0, 'skin'),
    ],
    'post': [
        (-0.5, 0.5, -0.5, 0.5, 0.0, 1.0, 'body'),
        (-0.505, 0.505, -0.505, 0.505, 0.74, 0.86, 'reflector'),
    ],
}
# A siren's light bar on the roof: red on the right, blue on the left, flashing in turn.
LIGHT_BAR: list[Part] = [
    (-0.08, 0.06, -0.38, -0.02, 1.0, 1.07, 'flash_red'),
    (-0.08, 0.06, 0.02, 0.38, 1.0, 1.07, 'flash_blue'),
]
_UNIT = np.array(  # the unit cube's corners: bottom 0-3, top 4-7, counter-clockwise
    [(1, 1, 0), (0, 1, 0), (0, 0, 0), (1, 0, 0), (1, 1, 1), (0, 1, 1), (0, 0, 1), (1, 0, 1)],
    np.float64,
)
_FACES = ((0, 1, 2, 3), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7))
_FACE_IDX = np.array(_FACES)
_NORMALS = np.array([(0, 0, -1), (0, 0, 1), (0, 1, 0), (-1, 0, 0), (0, -1, 0), (1, 0, 0)], float)


@dataclasses.dataclass
class Solid:
    """Boxes of one item in the ego frame: corners (n, 8, 3), colours (n, 3), emissive (n,)."""

    corners: npt.NDArray[np.float64]
    bgr: npt.NDArray[np.float32]
    emissive: npt.NDArray[np.bool_]
    at: tuple[float, float]  # the item's ground point (x, y), for culling and the painter's order

    def distance(self, cam: CameraModel) -> float:
        """From the camera, in the ground plane."""
        return math.hypot(self.at[0] - cam.pos[0], self.at[1] - cam.pos[1])


def _role_bgr(role: str, base: npt.NDArray[np.float32], key: int, t: float) -> tuple[Any, bool]:
    if role == 'body':
        return base, False
    if role == 'cargo':
        return np.array(CARGO_BGR[key % len(CARGO_BGR)], np.float32), False
    if role == 'glass':
        return np.array(GLASS, np.float32), False
    if role == 'wheel':
        return np.array(WHEEL, np.float32), False
    if role == 'dark':
        return np.array(DARK, np.float32) + 10 * (key % 3), False
    if role == 'skin':
        return np.array(SKIN_BGR[key % len(SKIN_BGR)], np.float32), False
    if role == 'tail':
        return np.array((30, 30, 170), np.float32), True
    if role == 'head':
        return np.array((210, 225, 230), np.float32), True
    if role == 'reflector':
        return np.array((235, 240, 240), np.float32), True
    phase = int(t * 3.0 + key * 0.37) % 2  # 1.5 flashes per second, red and blue in turn
    on = (phase == 0) == (role == 'flash_red')
    colour = (40, 40, 255) if role == 'flash_red' else (255, 90, 40)
    return np.array(colour, np.float32) * (1.0 if on else LIGHT_OFF), True


def _boxes(
    parts: list[Part], size: tuple[float, float, float], pose: tuple[float, float, float]
) -> npt.NDArray[np.float64]:
    """Corners (n, 8, 3) in the ego frame of parts of an item of ``size`` at ``pose`` (ego x, y,
    yaw)."""
    p = np.array([q[:6] for q in parts], np.float64)
    lo = p[:, [0, 2, 4]] * np.array(size)
    hi = p[:, [1, 3, 5]] * np.array(size)
    local = lo[:, None, :] + _UNIT[None, :, :] * (hi - lo)[:, None, :]
    x, y, yaw = pose
    c, s = math.cos(yaw), math.sin(yaw)
    out = local.copy()
    out[..., 0] = x + c * local[..., 0] - s * local[..., 1]
    out[..., 1] = y + s * local[..., 0] + c * local[..., 1]
    return np.asarray(out, np.float64)


def actor_solid(a: Track, t: float, ego: dict[str, float], look: Look) -> Solid:
    """An actor's body (and light bar) at ``t`` in the ego frame."""
    st = a.at(t)
    c, s = math.cos(ego['yaw']), math.sin(ego['yaw'])
    dx, dy = st['x'] - ego['x'], st['y'] - ego['y']
    pose = (c * dx + s * dy, -s * dx + c * dy, st['yaw'] - ego['yaw'])
    parts = BODY_PARTS[body_of(a)] + (LIGHT_BAR if a.siren else [])
    corners = _boxes(parts, a.size, pose)
    base = actor_bgr(a.cls, a.id, look)
    cols, emit = zip(*(_role_bgr(q[6], base, a.id, t) for q in parts), strict=True)
    return Solid(
        corners,
        np.array(cols, np.float32),
        np.array(emit, bool),
        (pose[0], pose[1]),
    )


# --- Scenery -----------------------------------------------------------------------------------
SCENERY_STEP_M = 10.0
SCENERY_AHEAD_M = 160.0
SCENERY_BEHIND_M = 60.0  # the rear camera's
FACADE_BGR = ((90, 110, 150), (150, 160, 170), (70, 80, 120), (190, 190, 185), (120, 130, 110))
TREE_BGR = ((50, 110, 60), (40, 90, 70), (60, 130, 90))


@functools.lru_cache(maxsize=4096)
def _segment(seed: int, k: int, side: int, density: float, edge: float) -> tuple[Any, ...]:
    """The scenery of 10-m segment ``k`` on one side (+1 left, -1 right): ``(kind, s, d, size,
    colour)`` tuples, drawn from (seed, k, side) alone so that a frame anywhere sees the same."""
    rng = np.random.default_rng([seed, k + 2**20, side + 2])
    out: list[tuple[Any, ...]] = []
    s0 = k * SCENERY_STEP_M
    rail_run = np.random.default_rng([seed, (k // 6) + 2**20, side + 5]).random() < 0.45 * density
    if rail_run:
        out.append(('rail', s0 + 5.0, edge + side * 0.7, (10.0, 0.12, 1.0), (150, 150, 155)))
        out.append(('rail_post', s0, edge + side * 0.75, (0.15, 0.15, 0.75), (110, 110, 115)))
    if rng.random() < 0.18 * density:
        d = edge + side * rng.uniform(1.2, 2.5)
        out.append(('pole', s0 + rng.uniform(0, 10), d, (0.22, 0.22, 8.0), (120, 120, 125)))
    if rng.random() < 0.3 * density:
        setback = rng.uniform(10.0, 30.0)
        size = (rng.uniform(8.0, 24.0), rng.uniform(8.0, 16.0), rng.uniform(5.0, 24.0))
        d = edge + side * (setback + size[1] / 2)
        colour = FACADE_BGR[int(rng.integers(0, len(FACADE_BGR)))]
        out.append(('building', s0 + rng.uniform(0, 10), d, size, colour))
    for _ in range(int(rng.poisson(0.5 * density))):
        d = edge + side * rng.uniform(4.0, 10.0)
        trunk = rng.uniform(1.8, 3.0)
        crown = rng.uniform(2.0, 4.5)
        colour = TREE_BGR[int(rng.integers(0, len(TREE_BGR)))]
        out.append(('tree', s0 + rng.uniform(0, 10), d, (crown, trunk, 0.0), colour))
    return tuple(out)


def scenery(world: World, t: float, look: Look) -> list[tuple[Solid | None, Any]]:
    """The roadside items within sight at ``t``: (solid, None) for boxes, (None, tree) for trees
    (trunk solid and crown drawn as an ellipse: ``(trunk Solid, centre ego xyz, radius, bgr)``)."""
    if world.scenery <= 0:
        return []
    ego = world.ego.at(t)
    road = world.road
    right, left = road.edges()
    c, s = math.cos(ego['yaw']), math.sin(ego['yaw'])
    k0 = math.floor((ego['s'] - SCENERY_BEHIND_M) / SCENERY_STEP_M)
    k1 = math.ceil((ego['s'] + SCENERY_AHEAD_M) / SCENERY_STEP_M)
    out: list[tuple[Solid | None, Any]] = []
    for k in range(k0, k1 + 1):
        for side, edge in ((-1, right), (1, left)):
            for kind, s_at, d, size, colour in _segment(
                look.scenery_seed, k, side, float(world.scenery), float(edge)
            ):
                x, y, yaw = road.to_world(s_at, d)
                dx, dy = float(x) - ego['x'], float(y) - ego['y']
                ex, ey = c * dx + s * dy, -s * dx + c * dy
                pose = (ex, ey, float(yaw) - ego['yaw'])
                bgr = np.array(colour, np.float32)
                if kind == 'tree':
                    crown, trunk, _ = size
                    solid = Solid(
                        _boxes(
                            [(-0.5, 0.5, -0.5, 0.5, 0.0, 1.0, 'body')], (0.35, 0.35, trunk), pose
                        ),
                        np.array([(40, 60, 80)], np.float32),
                        np.zeros(1, bool),
                        (ex, ey),
                    )
                    out.append((None, (solid, (ex, ey, trunk + crown * 0.4), crown * 0.6, bgr)))
                    continue
                parts: list[Part] = [(-0.5, 0.5, -0.5, 0.5, 0.0, 1.0, 'body')]
                if kind == 'rail':
                    parts = [(-0.5, 0.5, -0.5, 0.5, 0.5, 0.8, 'body')]  # the beam
                if kind == 'building':
                    floors = max(1, int(size[2] // 3.2))
                    for f in range(floors):
                        z0 = (f * 3.2 + 1.0) / size[2]
                        parts.append((-0.45, 0.45, -0.505, 0.505, z0, z0 + 1.3 / size[2], 'glass'))
                n = len(parts)
                out.append(
                    (
                        Solid(
                            _boxes(parts, size, pose),
                            np.array([bgr] + [GLASS] * (n - 1), np.float32),
                            np.zeros(n, bool),
                            (ex, ey),
                        ),
                        None,
                    )
                )
    return out


# --- Cached per camera and look ---------------------------------------------------------------
MARGIN = 0.06  # the pinhole canvas's margin on each side, as a share of the image size


@functools.lru_cache(maxsize=8)
def _canvas(cam: CameraModel) -> tuple[CameraModel, Any, Any, npt.NDArray[np.float32]]:
    """The pinhole canvas (a camera with the lens's K on a larger image, no distortion), the remap
    maps from it to the distorted image, and the vignetting gain."""
    mx, my = round(cam.width * MARGIN), round(cam.height * MARGIN)
    canvas = dataclasses.replace(
        cam,
        width=cam.width + 2 * mx,
        height=cam.height + 2 * my,
        cx=cam.cx + mx,
        cy=cam.cy + my,
        d=(0.0, 0.0, 0.0, 0.0, 0.0),
    )
    # Where each output pixel comes from: undistorted on a grid of every 4th pixel, resized.
    step = 4
    gu, gv = np.meshgrid(
        np.arange(0, cam.width + step, step, dtype=np.float64),
        np.arange(0, cam.height + step, step, dtype=np.float64),
    )
    src = cam.undistort(np.stack([gu.ravel(), gv.ravel()], axis=1)) + np.array([mx, my])
    # Output pixel u sits at grid position u / step: sample the grid there (bilinear). A
    # cv2.resize would align pixel centres instead and draw the frame 1.5 px off its camera_info.
    to_grid = np.array([[1.0 / step, 0.0, 0.0], [0.0, 1.0 / step, 0.0]])
    mapx, mapy = (
        cv2.warpAffine(
            src[:, k].reshape(gu.shape).astype(np.float32),
            to_grid,
            (cam.width, cam.height),
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_REPLICATE,
        )
        for k in (0, 1)
    )
    m1, m2 = cv2.convertMaps(np.ascontiguousarray(mapx), np.ascontiguousarray(mapy), cv2.CV_16SC2)
    yy, xx = np.mgrid[0 : cam.height, 0 : cam.width]
    r2 = ((xx - cam.cx) / cam.fx) ** 2 + ((yy - cam.cy) / cam.fy) ** 2
    vignette = (1.0 / (1.0 + 0.35 * r2) ** 2).astype(np.float32)
    return canvas, m1, m2, cv2.merge([vignette] * 3)


@functools.lru_cache(maxsize=16)
def _background(canvas: CameraModel, look: Look) -> npt.NDArray[np.float32]:
    h, w = canvas.height, canvas.width
    horizon = min(max(int(canvas.horizon_v()), 1), h - 1)
    img = np.empty((h, w, 3), np.float32)
    img[:horizon] = np.linspace(1.0, 0.6, horizon)[:, None, None] * np.array(
        look.sky_bgr, np.float32
    )
    img[horizon:] = np.linspace(0.55, 1.0, h - horizon)[:, None, None] * np.array(
        look.ground_bgr, np.float32
    )
    return img


@functools.lru_cache(maxsize=2)
def _noise_bank(height: int, width: int) -> npt.NDArray[np.int16]:
    """Unit-ish Gaussian noise (std 16, int16) a little larger than the image: a frame takes a
    window of it at a random offset, scaled to the look's noise."""
    rng = np.random.default_rng([height, width])  # the same bank on every machine
    noise = rng.standard_normal((height + 64, width + 64, 3), np.float32) * 16.0
    return np.round(noise).astype(np.int16)


SCENERY_LABEL = 1  # the label of roadside items (:func:`shown_fractions`); an actor's: its id + 2


def _items(
    cam: CameraModel, world: World, t: float, look: Look
) -> list[tuple[float, int, Solid | None, Any]]:
    """The frame's items not behind the camera: ``(distance, label, solid, tree)``, actors first,
    then the roadside scenery (``solid`` None for a tree, see :func:`scenery`)."""
    ego = world.ego.at(t)
    items: list[tuple[float, int, Solid | None, Any]] = []
    for a in world.actors:
        solid = actor_solid(a, t, ego, look)
        if cam.to_camera(solid.corners.reshape(-1, 3))[:, 0].max() <= 0.8:
            continue  # behind the camera
        items.append((solid.distance(cam), a.id + 2, solid, None))
    roadside = scenery(world, t, look)
    wholes = [part if part is not None else tree[0] for part, tree in roadside]
    if wholes:  # each item's ground point in the camera's frame, at once
        at = cam.to_camera(np.array([(*w.at, 0.0) for w in wholes]))
        for (part, tree), whole, (ahead, aside, _) in zip(roadside, wholes, at, strict=True):
            if ahead < 1.0 and abs(aside) < 40.0:
                continue  # behind the camera
            items.append((whole.distance(cam), SCENERY_LABEL, part, tree))
    return items


def render(
    cam: CameraModel,
    world: World,
    t: float,
    rng: np.random.Generator,
    look: Look | None = None,
) -> npt.NDArray[np.uint8]:
    """One BGR frame of ``world`` at ``t`` as ``cam`` sees it (see the module docstring)."""
    look = look or Look()
    canvas, map1, map2, vignette = _canvas(cam)
    img = _background(canvas, look).copy()
    ego = world.ego.at(t)
    _road(img, canvas, world, ego, look)
    light = np.array(look.sun, np.float64) / np.linalg.norm(look.sun)
    items = _items(cam, world, t, look)
    near = [i[2] for i in items if i[2] is not None and i[0] < 90]
    _shadows(img, canvas, near, look)
    for _dist, _label, item, tree in sorted(items, key=lambda i: -i[0]):
        if item is not None:
            _draw_solid(img, canvas, item, light, look)
        else:
            _draw_tree(img, canvas, tree, light, look)
    exposure = look.gain * (1.0 + 0.08 * math.sin(0.7 * t))
    src = cv2.convertScaleAbs(img, alpha=exposure)
    out = cv2.remap(src, map1, map2, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    out = cv2.multiply(out, vignette, dtype=cv2.CV_8U)
    bank = _noise_bank(cam.height, cam.width)
    oy, ox = (int(v) for v in rng.integers(0, 64, 2))
    noise = bank[oy : oy + cam.height, ox : ox + cam.width]
    k = look.noise / 16.0
    scaled = cv2.multiply(noise, (k, k, k, 0.0), dtype=cv2.CV_16S)  # type: ignore[call-overload]
    return np.asarray(cv2.add(out, scaled, dtype=cv2.CV_8U), np.uint8)


def _road(
    img: npt.NDArray[np.float32],
    cam: CameraModel,
    world: World,
    ego: dict[str, float],
    look: Look,
) -> None:
    """Asphalt between the road edges, lane lines: dashed between lanes, solid at the edges."""
    road = world.road
    ahead = math.cos(cam.yaw)  # 1: the front camera, -1: the rear one, 0: a side one
    lo, hi = (-2.0 if ahead > 0.7 else -120.0), (120.0 if ahead > -0.7 else 2.0)
    s_ahead = ego['s'] + np.linspace(lo, hi, 200)
    right, left = road.edges()
    c, sn = math.cos(ego['yaw']), math.sin(ego['yaw'])

    def ground_pts(d: float, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        x, y, _ = road.to_world(s, np.full_like(s, d))
        dx, dy = x - ego['x'], y - ego['y']
        return np.column_stack([c * dx + sn * dy, -sn * dx + c * dy, np.zeros(len(s))])

    if abs(ahead) > 0.7:  # looking along the road: one polygon, edge to edge
        edge_r, edge_l = ground_pts(right, s_ahead), ground_pts(left, s_ahead)
        poly = np.concatenate([edge_r, edge_l[::-1]])
        uv, depth = cam.project(poly)
        keep = depth > 0.5
        if keep.sum() >= 3:
            cv2.fillPoly(
                img, [np.round(uv[keep] * 4).astype(np.int32)], look.road_bgr, cv2.LINE_8, 2
            )
    else:  # across it: a lane's strip of quads each, those wholly in front of the camera
        for d0, d1 in itertools.pairwise(np.linspace(right, left, road.lanes + 2)):
            uv0, dep0 = cam.project(ground_pts(d0, s_ahead))
            uv1, dep1 = cam.project(ground_pts(d1, s_ahead))
            ok = (dep0[:-1] > 0.5) & (dep0[1:] > 0.5) & (dep1[:-1] > 0.5) & (dep1[1:] > 0.5)
            quads = np.stack([uv0[:-1], uv0[1:], uv1[1:], uv1[:-1]], axis=1)[ok]
            if len(quads):
                cv2.fillPoly(
                    img, list(np.round(quads * 4).astype(np.int32)), look.road_bgr, cv2.LINE_8, 2
                )
    thick = max(1, round(cam.width / 640 * 2))
    for k in range(road.lanes + 2):  # lane boundaries from the right edge to the left edge
        d = right + k * road.lane_width
        pts = ground_pts(d, s_ahead)
        uv, depth = cam.project(pts)
        solid = k in (0, road.lanes + 1)
        ok = (depth[:-1] > 0.5) & (depth[1:] > 0.5)
        if not solid:
            ok &= (s_ahead[:-1] // 3.0).astype(np.int64) % 3 == 0  # dashes: 3 m paint every 9 m
        p0 = np.round(uv[:-1][ok] * 4).astype(np.int32)
        p1 = np.round(uv[1:][ok] * 4).astype(np.int32)
        lines = np.stack([p0, p1], axis=1)
        cv2.polylines(img, list(lines), False, (230, 230, 230), thick, cv2.LINE_AA, 2)


def _shadows(
    img: npt.NDArray[np.float32], cam: CameraModel, solids: list[Solid], look: Look
) -> None:
    """Each item's shadow on the road: its footprint swept away from the sun."""
    sun = np.array(look.sun, np.float64)
    if sun[2] <= 0.05 or look.shadow >= 0.99:
        return
    sweep = -sun[:2] / sun[2]
    length = float(np.hypot(*sweep))
    if length > 4.0:
        sweep *= 4.0 / length
    for solid in solids:
        c = solid.corners.reshape(-1, 3)
        top = float(c[:, 2].max())
        ground = np.concatenate([c[:, :2], c[:, :2] + sweep * top])
        hull = cv2.convexHull(ground.astype(np.float32)).reshape(-1, 2).astype(np.float64)
        pts = np.column_stack([hull, np.zeros(len(hull))])
        uv, depth = cam.project(pts)
        if (depth <= 0.5).any():
            continue
        box = cv2.boundingRect(np.round(uv).astype(np.int32))
        x0, y0 = max(box[0], 0), max(box[1], 0)
        x1, y1 = min(box[0] + box[2] + 1, cam.width), min(box[1] + box[3] + 1, cam.height)
        if x1 <= x0 or y1 <= y0:
            continue
        mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
        cv2.fillConvexPoly(mask, np.round(uv - (x0, y0)).astype(np.int32), 1)
        roi = img[y0:y1, x0:x1]
        roi[mask.astype(bool)] *= look.shadow


def _draw_solid(
    img: npt.NDArray[np.float32],
    cam: CameraModel,
    solid: Solid,
    light: npt.NDArray[np.float64],
    look: Look,
) -> None:
    """The visible faces of an item's boxes, far to near, shaded by the sun."""
    corners = solid.corners
    n = len(corners)
    uv, depth = cam.project(corners.reshape(-1, 3))
    uv = uv.reshape(n, 8, 2)
    depth = depth.reshape(n, 8)
    # Face normals in the ego frame from the boxes' edges (any yaw).
    ex = corners[:, 3] - corners[:, 2]  # along x (+)
    ey = corners[:, 1] - corners[:, 2]  # along y (+)
    ex /= np.linalg.norm(ex, axis=1, keepdims=True) + 1e-12
    ey /= np.linalg.norm(ey, axis=1, keepdims=True) + 1e-12
    ez = np.broadcast_to(np.array([0.0, 0.0, 1.0]), ex.shape)
    normals = np.stack([-ez, ez, ey, -ex, -ey, ex], axis=1)
    centres = corners[:, _FACE_IDX].mean(axis=2)  # (n, 6, 3)
    to_cam = np.array(cam.pos) - centres
    facing = (normals * to_cam).sum(axis=2) > 0
    dist = np.linalg.norm(to_cam, axis=2)
    bright = look.ambient + (1.0 - look.ambient) * np.clip(normals @ light, 0.0, None)
    order = np.argsort(-dist, axis=None)
    for flat in order:
        i, f = divmod(int(flat), 6)
        if not facing[i, f]:
            continue
        idx = _FACES[f]
        if (depth[i, list(idx)] <= 0.3).any():
            continue
        colour = solid.bgr[i] if solid.emissive[i] else solid.bgr[i] * bright[i, f]
        poly = np.round(uv[i, list(idx)] * 4).astype(np.int32)
        cv2.fillConvexPoly(img, poly, _bgr(colour), cv2.LINE_8, 2)


def _draw_tree(
    img: npt.NDArray[np.float32],
    cam: CameraModel,
    tree: Any,
    light: npt.NDArray[np.float64],
    look: Look,
) -> None:
    """A trunk and a crown (two shaded ellipses: the lit side toward the sun)."""
    trunk, bgr = tree[0], tree[3]
    _draw_solid(img, cam, trunk, light, look)
    crown = _crown(cam, tree)
    if crown is None:
        return
    centre_px, axes, r = crown
    cv2.ellipse(img, centre_px, axes, 0, 0, 360, _bgr(bgr * look.ambient), -1, cv2.LINE_8, 2)
    shift = (int(-light[1] * r * 0.3 * 4), int(-light[2] * r * 0.3 * 4))
    lit = (centre_px[0] + shift[0], centre_px[1] + shift[1])
    small = (max(1, int(axes[0] * 0.7)), max(1, int(axes[1] * 0.7)))
    cv2.ellipse(img, lit, small, 0, 0, 360, _bgr(bgr), -1, cv2.LINE_8, 2)


# --- What the frame shows of each actor (the ground truth's camera visibility) -----------------


def _hulls(cam: CameraModel, corners: npt.NDArray[np.float64]) -> list[npt.NDArray[np.int32]]:
    """The silhouette of each box wholly in front of the camera (the hull of its projected
    corners), in the drawing's fixed point (4 sub-pixels per pixel)."""
    n = len(corners)
    uv, depth = cam.project(corners.reshape(-1, 3))
    uv, depth = uv.reshape(n, 8, 2), depth.reshape(n, 8)
    return [
        cv2.convexHull(np.round(uv[i] * 4).astype(np.int32))
        for i in range(n)
        if (depth[i] > 0.3).all()
    ]


def _crown(cam: CameraModel, tree: Any) -> tuple[tuple[int, int], tuple[int, int], float] | None:
    """A tree crown's outer ellipse (centre, axes) in fixed point and its radius in pixels, or
    None where none is drawn (behind the camera, under a pixel, off the canvas)."""
    centre, radius = tree[1], tree[2]
    uv, depth = cam.project(np.array([centre], np.float64))
    if depth[0] <= 1.0:
        return None
    r = radius * cam.fx / depth[0]
    if r < 0.7 or not (-r < uv[0, 0] < cam.width + r and -r < uv[0, 1] < cam.height + r):
        return None
    centre_px = (round(float(uv[0, 0]) * 4), round(float(uv[0, 1]) * 4))
    return centre_px, (max(1, int(r * 4)), max(1, int(r * 1.15 * 4))), r


def shown_fractions(
    cam: CameraModel, world: World, t: float, look: Look | None = None
) -> dict[int, float]:
    """Per actor id: the share of its silhouette that :func:`render`'s frame shows, the rest
    hidden behind nearer actors and roadside scenery (guard rails, poles, buildings, trees).

    The frame's items are drawn as labels in the renderer's painter's order on its pinhole canvas
    (the lens only moves pixels); an actor's shown pixels are counted against its silhouette drawn
    alone; 0.0 for one off the canvas, none for one behind the camera."""
    look = look or Look()
    canvas = _canvas(cam)[0]
    items = _items(cam, world, t, look)
    labels = np.zeros((canvas.height, canvas.width), np.int32)
    alone: dict[int, int] = {}
    for _dist, label, item, tree in sorted(items, key=lambda i: -i[0]):
        if tree is not None:
            for hull in _hulls(canvas, tree[0].corners):
                cv2.fillConvexPoly(labels, hull, label, cv2.LINE_8, 2)
            crown = _crown(canvas, tree)
            if crown is not None:
                cv2.ellipse(labels, crown[0], crown[1], 0, 0, 360, label, -1, cv2.LINE_8, 2)
            continue
        assert item is not None
        hulls = _hulls(canvas, item.corners)
        for hull in hulls:
            cv2.fillConvexPoly(labels, hull, label, cv2.LINE_8, 2)
        if label != SCENERY_LABEL:
            alone[label - 2] = _area(hulls, canvas.width, canvas.height)
    shown = np.bincount(labels.ravel(), minlength=max([*alone, 0]) + 3)
    return {aid: float(shown[aid + 2]) / area if area else 0.0 for aid, area in alone.items()}


def _area(hulls: list[npt.NDArray[np.int32]], width: int, height: int) -> int:
    """Pixels of the union of ``hulls`` (fixed point) on a ``width`` × ``height`` canvas."""
    if not hulls:
        return 0
    pts = np.concatenate(hulls).reshape(-1, 2)
    x0, y0 = (max(0, int(v) // 4 - 1) for v in pts.min(axis=0))
    x1, y1 = (int(v) // 4 + 2 for v in pts.max(axis=0))
    x1, y1 = min(x1, width), min(y1, height)
    if x1 <= x0 or y1 <= y0:
        return 0
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    for hull in hulls:
        cv2.fillConvexPoly(mask, hull - np.array([x0 * 4, y0 * 4], np.int32), 1, cv2.LINE_8, 2)
    return int(mask.sum())

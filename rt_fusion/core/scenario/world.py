"""A deterministic driving scene: a road with lanes, an ego vehicle and other actors over time.

Everything is in a world frame (x east, y north, metres; yaw counter-clockwise from x). The road's
centre line starts at the origin heading +x and has constant curvature (0: straight); positions on
it are Frenet coordinates (s along the centre line of lane 0, d to the left). Lane i's centre is at
``d = i * lane_width``: lane 0 is the ego's, 1 the one to its left, -1 to its right.

Actors move in (s, d) by their events, integrated at 1 kHz once when the world is built (so every
query is an interpolation and the result is the same on every machine):

- ``speed``: change speed to ``to`` [m/s] with ``accel`` [m/s², positive number];
- ``lane_change``: move to lane ``to`` over ``duration`` seconds (quintic, zero lateral speed at
  both ends);
- ``cross``: (pedestrians) walk across the road to ``d`` at ``speed``.

A scenario is a plain mapping (from YAML, see :mod:`rt_fusion.core.scenario.library`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.errors import RtFusionError

DT = 0.001  # integration step [s]
CLASSES = ('car', 'truck', 'pedestrian', 'bicycle', 'static')
SIZES = {  # length, width, height [m]
    'car': (4.5, 1.9, 1.5),
    'truck': (9.0, 2.5, 3.2),
    'pedestrian': (0.5, 0.6, 1.75),
    'bicycle': (1.8, 0.6, 1.7),
    'static': (1.0, 1.0, 1.0),
}
# What an actor of a class looks like to the camera (the renderer's shapes,
# :mod:`rt_fusion.core.scenario.render`): a scenario's ``body`` picks one, else the actor's id
# does. Classes stay those the radar and the tracker know: a bus is a ``truck``, a motorcycle a
# ``bicycle`` (a two-wheeler); an actor with ``siren: true`` carries a light bar on any body.
BODIES = {
    'car': ('sedan', 'hatchback', 'suv', 'van'),
    'truck': ('box_truck', 'bus'),
    'pedestrian': ('person',),
    'bicycle': ('bicycle', 'motorcycle'),
    'static': ('post',),
}


class ScenarioError(RtFusionError):
    """A scenario description is invalid; the message names the field."""


@dataclasses.dataclass(frozen=True)
class Road:
    """Constant-curvature road with ``lanes`` lanes to the left of lane 0 and one to the right."""

    curvature: float = 0.0  # [1/m], positive: turning left
    lanes: int = 3
    lane_width: float = 3.5

    def centre(self, s: npt.ArrayLike) -> tuple[Any, Any, Any]:
        """World x, y, yaw of the centre line (lane 0) at arc length s."""
        s = np.asarray(s, dtype=np.float64)
        k = self.curvature
        if abs(k) < 1e-9:
            return s, np.zeros_like(s), np.zeros_like(s)
        return np.sin(k * s) / k, (1 - np.cos(k * s)) / k, k * s

    def to_world(self, s: npt.ArrayLike, d: npt.ArrayLike) -> tuple[Any, Any, Any]:
        """World x, y, road heading at Frenet (s, d)."""
        x, y, yaw = self.centre(s)
        d = np.asarray(d, dtype=np.float64)
        return x - d * np.sin(yaw), y + d * np.cos(yaw), yaw

    def to_frenet(self, x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[Any, Any]:
        """Frenet (s, d) of world points (the inverse of :meth:`to_world`)."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        k = self.curvature
        if abs(k) < 1e-9:
            return x, y
        # The centre line is a circle about (0, 1/k): a point at offset d lies at distance
        # |1/k - d| from it, at the angle k s.
        cx, cy = x, y - 1.0 / k
        d = 1.0 / k - np.sign(k) * np.hypot(cx, cy)
        r = 1.0 / k - d
        return np.arctan2(cx / r, -cy / r) / k, d

    def lane_d(self, lane: float) -> float:
        """Lateral offset of a lane's centre."""
        return float(lane) * self.lane_width

    def edges(self) -> tuple[float, float]:
        """d of the right and left road edges."""
        return -1.5 * self.lane_width, (self.lanes - 0.5) * self.lane_width


@dataclasses.dataclass
class Track:
    """An actor's motion, sampled every DT: Frenet s, d, their rates, world pose and velocity."""

    id: int
    cls: str
    size: tuple[float, float, float]
    t: npt.NDArray[np.float64]
    s: npt.NDArray[np.float64]
    d: npt.NDArray[np.float64]
    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    yaw: npt.NDArray[np.float64]
    vx: npt.NDArray[np.float64]
    vy: npt.NDArray[np.float64]
    siren: bool = False
    body: str = ''  # one of BODIES[cls]; empty: chosen by the id (:func:`body_of`)

    def at(self, t: float) -> dict[str, float]:
        """The state at time t (linear interpolation between samples)."""
        i = min(max(t / DT, 0.0), len(self.t) - 1.000001)
        k, f = int(i), i - int(i)

        def lerp(a: npt.NDArray[np.float64]) -> float:
            return float(a[k] * (1 - f) + a[k + 1] * f)

        yaw0, yaw1 = self.yaw[k], self.yaw[k + 1]
        yaw = yaw0 + f * math.remainder(yaw1 - yaw0, math.tau)
        return {
            's': lerp(self.s),
            'd': lerp(self.d),
            'x': lerp(self.x),
            'y': lerp(self.y),
            'yaw': float(yaw),
            'vx': lerp(self.vx),
            'vy': lerp(self.vy),
        }


def _quintic(u: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    u = np.clip(u, 0.0, 1.0)
    return u**3 * (10 - 15 * u + 6 * u * u)


def _field(spec: dict[str, Any], key: str, where: str, default: Any = None) -> Any:
    if key in spec:
        return spec[key]
    if default is None:
        raise ScenarioError(f'{where}: {key!r} is required')
    return default


def build_track(
    road: Road, spec: dict[str, Any], actor_id: int, seconds: float, where: str
) -> Track:
    """Integrates one actor's events over ``seconds``."""
    cls = _field(spec, 'class', where, 'car')
    if cls not in CLASSES:
        raise ScenarioError(f'{where}: class {cls!r} is not one of {CLASSES}')
    size = tuple(float(v) for v in spec.get('size', SIZES[cls]))
    body = str(spec.get('body', ''))
    if body and body not in BODIES[cls]:
        raise ScenarioError(f'{where}: body {body!r} of a {cls} is not one of {BODIES[cls]}')
    n = round(seconds / DT) + 2
    t: npt.NDArray[np.float64] = np.arange(n, dtype=np.float64) * DT
    v = np.full(n, float(_field(spec, 'speed', where, 0.0)))
    d = np.full(n, road.lane_d(float(_field(spec, 'lane', where, 0.0))))
    if 'd' in spec:
        d[:] = float(spec['d'])
    for k, ev in enumerate(spec.get('events', [])):
        ew = f'{where}.events[{k}]'
        at = float(_field(ev, 'at', ew))
        i0 = round(at / DT)
        if i0 >= n:
            continue
        if 'speed' in ev:
            target, accel = float(ev['speed']), float(ev.get('accel', 2.0))
            if accel <= 0:
                raise ScenarioError(f'{ew}: accel must be > 0')
            start = v[i0]
            dur = abs(target - start) / accel
            u = np.clip((t[i0:] - at) / max(dur, 1e-9), 0.0, 1.0)
            v[i0:] = start + (target - start) * u
        elif 'lane_change' in ev:
            dur = float(ev.get('duration', 3.0))
            start, goal = d[i0], road.lane_d(float(ev['lane_change']))
            d[i0:] = start + (goal - start) * _quintic((t[i0:] - at) / dur)
        elif 'cross' in ev:
            goal, speed = float(ev['cross']), float(ev.get('walk', 1.4))
            start = d[i0]
            dur = abs(goal - start) / speed
            d[i0:] = start + (goal - start) * np.clip((t[i0:] - at) / dur, 0.0, 1.0)
        else:
            raise ScenarioError(f'{ew}: expected one of speed, lane_change, cross')
    s = float(_field(spec, 's', where, 0.0)) + np.concatenate(([0.0], np.cumsum(v[:-1]) * DT))
    x, y, road_yaw = road.to_world(s, d)
    ds, dd = np.gradient(s, DT), np.gradient(d, DT)
    # World velocity from the Frenet rates (the scale of s at offset d is 1 - k d).
    scale = 1 - road.curvature * d
    vx = ds * scale * np.cos(road_yaw) - dd * np.sin(road_yaw)
    vy = ds * scale * np.sin(road_yaw) + dd * np.cos(road_yaw)
    moving = np.hypot(vx, vy) > 0.05
    heading = np.where(moving, np.arctan2(vy, vx), road_yaw)
    if cls == 'pedestrian':  # faces where it walks, or along the road when standing
        heading = np.where(np.abs(dd) > 0.05, np.arctan2(vy, vx), road_yaw)
    return Track(
        actor_id,
        cls,
        (size[0], size[1], size[2]),
        t,
        s,
        d,
        x,
        y,
        heading,
        vx,
        vy,
        bool(spec.get('siren', False)),
        body,
    )


def body_of(track: Track) -> str:
    """The actor's body: its scenario's ``body``, else one of its class's by its id."""
    bodies = BODIES[track.cls]
    return track.body or bodies[(track.id * 5 + 1) % len(bodies)]


@dataclasses.dataclass
class World:
    """Road, ego track and actor tracks of one scenario."""

    name: str
    road: Road
    ego: Track
    actors: list[Track]
    seconds: float
    audio_events: list[dict[str, Any]]
    # Roadside scenery the camera sees and no other sensor does (guard rails, lamp poles,
    # buildings, trees; the renderer draws it from the road and the seed): items per 10 m and
    # side relative to the default, 0 for none (a scenario's ``scenery: {density: ...}``).
    scenery: float = 1.0


ROADSIDE = {'spacing': 25.0, 'offset': 1.0, 'size': (0.3, 0.3, 1.2)}


def roadside_posts(road: Road, spec: dict[str, Any], ego: Any, first: int) -> list[dict[str, Any]]:
    """Static posts (guard-rail posts, delineators) along both road edges, every ``spacing``
    metres from 40 m behind the ego's start to 250 m beyond its end (``roadside: {spacing: 0}``
    turns them off). The stationary world a radar sees: the ego-speed estimate votes with them.
    They are actors like any other (class ``static``), so they are in the ground truth."""
    p = {**ROADSIDE, **(spec or {})}
    spacing = float(p['spacing'])
    if spacing <= 0:
        return []
    right, left = road.edges()
    right, left = right - float(p['offset']), left + float(p['offset'])
    s_end = float(np.max(ego.s)) + 250.0
    out = []
    for d in (right, left):
        s = -40.0
        while s < s_end:
            out.append({'class': 'static', 's': s, 'd': d, 'speed': 0.0, 'size': list(p['size'])})
            s += spacing
    del first
    return out


def build_world(scenario: dict[str, Any], seconds: float) -> World:
    """Builds the tracks of a scenario description.

    Raises:
        ScenarioError: a field is missing or invalid (named in the message).
    """
    if seconds <= 0:
        raise ScenarioError('seconds must be > 0')
    r = scenario.get('road', {})
    road = Road(
        float(r.get('curvature', 0.0)), int(r.get('lanes', 3)), float(r.get('lane_width', 3.5))
    )
    ego = build_track(road, _field(scenario, 'ego', 'scenario'), 0, seconds, 'ego')
    specs = list(scenario.get('actors', []))
    specs += roadside_posts(road, scenario.get('roadside', {}), ego, len(specs))
    actors = [
        build_track(road, spec, i + 1, seconds, f'actors[{i}]') for i, spec in enumerate(specs)
    ]
    events = list(scenario.get('audio_events', []))
    for k, ev in enumerate(events):
        if ev.get('kind') not in ('horn', 'siren', 'clip'):
            raise ScenarioError(f'audio_events[{k}]: kind must be horn, siren or clip')
        if ev['kind'] == 'clip' and 'file' not in ev:
            raise ScenarioError(f"audio_events[{k}]: a clip needs 'file' (a WAV name)")
    for a in actors:
        if a.siren:
            events.append({'kind': 'siren', 'at': 0.0, 'duration': seconds, 'source': a.id})
    density = float((scenario.get('scenery') or {}).get('density', 1.0))
    if not math.isfinite(density) or density < 0:
        raise ScenarioError(f'scenery.density: {density} is not a number >= 0')
    return World(
        str(scenario.get('name', 'scenario')), road, ego, actors, seconds, events, density
    )


def ego_frame(ego: dict[str, float], x: float, y: float) -> tuple[float, float]:
    """World point -> ego (base_link) frame."""
    c, s = math.cos(ego['yaw']), math.sin(ego['yaw'])
    dx, dy = x - ego['x'], y - ego['y']
    return c * dx + s * dy, -s * dx + c * dy

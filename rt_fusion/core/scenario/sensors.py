"""Sensor models of the scenario generator: camera, radar, IMU and microphone.

Each model is a pure function of the world, the time and a seeded ``numpy.random.Generator`` (the
radar's id bookkeeping, :class:`RadarIds`, is state carried from scan to scan), so a seed gives the
same recording on every machine. Mounting (base_link = the ego reference point on the road, x
forward, y left, z up): camera at ``CAMERA_POS`` looking forward, radar at ``RADAR_POS``.

Visibility (:func:`visibility`, written into the ground truth per frame and object): an object is
seen by a sensor when its centre is inside the sensor's field of view and range and at most
``OCCLUDED_FRACTION`` of it is covered by nearer things. For the radar, "of it" is the azimuth
interval of its footprint and the things are the other objects; for the camera of a generated
scenario, its silhouette's pixels in the rendered frame, covered by nearer objects and roadside
scenery, heights included (:func:`rt_fusion.core.scenario.render.shown_fractions`). The radar only
reports what it sees.

Where the models are simpler than the real sensors (the ARS408 recording in ``../shared/data``
is the reference for the radar's figures):

- radar: one return per object at its centre (the real sensor's object point wanders over the
  body, and it splits or merges close objects); range/azimuth/doppler noise Gaussian and
  independent of range; detection probability fixed per class; no multipath, no guard-rail
  ghosts; false alarms uniform over the field of view, independent from scan to scan (Poisson,
  0.5 per scan), with existence probabilities in the same coded steps as real ones (25 … 100 %,
  overlapping those of young real objects); object ids are the sensor's own (:class:`RadarIds`:
  the lowest free id, a new one when an object is lost for two scans, freed ids reused at once by
  unrelated objects, as the recording shows: 42 ids for 58 births in 515 cycles);
- radar occlusion: 2D, by azimuth intervals of footprints only (a truck behind a car is hidden
  like a car; heights are ignored; the roadside scenery hides nothing), all or nothing at
  ``OCCLUDED_FRACTION``;
- camera: :mod:`rt_fusion.core.scenario.render` (bodies of shaded boxes, scenery, a plumb_bob
  lens; its docstring says what it lacks);
- IMU: white noise and constant bias, no temperature or scale-factor errors;
- microphone: synthetic sirens and horns over road noise plus the real clips, spherical spreading.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.camera import undistort_points
from rt_fusion.core.scenario.world import ScenarioError, Track, World, ego_frame

CAMERA_POS = (1.8, 0.0, 1.4)
RADAR_POS = (3.6, 0.0, 0.5)
CAMERA_MAX_RANGE_M = 150.0  # beyond it an object is a few pixels: not "seen"
OCCLUDED_FRACTION = 0.7  # of an object's azimuth extent covered by nearer objects
# ARS408 Obj_ProbOfExist steps; a young track's and a false alarm's (weights) overlap.
PROB_STEPS = (0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0)
PROB_YOUNG = (0.1, 0.2, 0.4, 0.2, 0.1, 0.0, 0.0)
PROB_MATURE = (0.0, 0.0, 0.02, 0.03, 0.05, 0.05, 0.85)  # the recording: 83 % at 100 %
PROB_FALSE_ALARM = (0.3, 0.3, 0.25, 0.1, 0.05, 0.0, 0.0)
GRAVITY = 9.80665

# Colours (BGR) of the classes, for plots and previews.
CLASS_BGR = {
    'car': (60, 60, 200),
    'truck': (40, 140, 230),
    'pedestrian': (200, 90, 40),
    'bicycle': (60, 180, 60),
    'static': (30, 200, 230),
}
# ARS408 Obj_Class and a radar cross-section [dBsm] per class.
ARS408_CLASS = {'car': 1, 'truck': 2, 'pedestrian': 3, 'bicycle': 5, 'static': 0}
RCS_DBSM = {'car': 10.0, 'truck': 20.0, 'pedestrian': -5.0, 'bicycle': 0.0, 'static': 5.0}


# The scenario lens's plumb_bob distortion (k1, k2, p1, p2, k3): a mild barrel, as of an
# automotive camera of about 70 degrees: 3 % shorter radius in the image corners.
LENS_D = (-0.06, 0.012, 0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class CameraModel:
    """A scenario camera: K and plumb_bob ``d`` (the ROS camera_info model; :meth:`project`
    distorts, :meth:`undistort` inverts it), mounted at ``pos`` on base_link and turned ``yaw``
    about its z axis (0: the front camera at CAMERA_POS, looking along base_link x; see
    :data:`MOUNTS` for a surround rig)."""

    width: int = 640
    height: int = 360
    fx: float = 460.0
    fy: float = 460.0
    cx: float = 320.0
    cy: float = 180.0
    d: tuple[float, float, float, float, float] = LENS_D
    pos: tuple[float, float, float] = CAMERA_POS
    yaw: float = 0.0
    pitch: float = 0.0  # about its y axis after the yaw (REP-103): > 0 looks down

    def mounted(self, name: str) -> CameraModel:
        """This camera (size, lens) at one of :data:`MOUNTS`.

        Raises:
            ValueError: no such mount.
        """
        if name not in MOUNTS:
            raise ValueError(f'camera mount {name!r}: one of {sorted(MOUNTS)}')
        x, y, z, yaw = MOUNTS[name]
        return dataclasses.replace(self, pos=(x, y, z), yaw=yaw)

    def to_camera(self, pts: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """base_link points (N, 3) -> (forward, left, up) from the camera (N, 3)."""
        d = pts - np.asarray(self.pos, np.float64)
        if self.yaw != 0.0:
            c, s = math.cos(self.yaw), math.sin(self.yaw)
            d = np.column_stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1], d[:, 2]])
        if self.pitch != 0.0:  # looking down by pitch: the axis is (cos, 0, -sin) on the level
            c, s = math.cos(self.pitch), math.sin(self.pitch)
            d = np.column_stack([c * d[:, 0] - s * d[:, 2], d[:, 1], s * d[:, 0] + c * d[:, 2]])
        return d

    def horizon_v(self) -> float:
        """The image row of the horizon (pinhole): cy, moved up as the camera looks down."""
        return self.cy - self.fy * math.tan(self.pitch)

    @classmethod
    def sized(cls, width: int, height: int) -> CameraModel:
        """The same lens at another 16:9 resolution (1920×1080: the vehicle camera, see
        :data:`VEHICLE`): the field of view, and so the detector's input after its resize, stay
        those of 640×360.

        Raises:
            ValueError: not 16:9 (the default detector is trained at that aspect) or too small.
        """
        if width < 64 or width * 9 != height * 16:
            raise ValueError(
                f'camera resolution {width}x{height}: need 16:9 and at least 64x36 (the '
                'default detector is trained at that aspect)'
            )
        base = cls()
        k = width / base.width
        return cls(width, height, base.fx * k, base.fy * k, base.cx * k, base.cy * k)

    def project_pinhole(
        self, pts: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """base_link points (N, 3) -> pixel (N, 2) without the distortion, and depth (N,)
        (depth <= 0: behind)."""
        q = self.to_camera(np.asarray(pts, np.float64).reshape(-1, 3))
        depth = q[:, 0]
        safe = np.where(depth > 1e-6, depth, 1e-6)
        u = self.cx - self.fx * q[:, 1] / safe
        v = self.cy - self.fy * q[:, 2] / safe
        return np.stack([u, v], axis=1), depth

    def project(self, pts: npt.NDArray[np.float64]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """base_link points (N, 3) -> pixel (N, 2) through the lens, and depth (N,) (depth <= 0:
        behind)."""
        uv, depth = self.project_pinhole(pts)
        if not any(self.d):
            return uv, depth
        k1, k2, p1, p2, k3 = self.d
        x = (uv[:, 0] - self.cx) / self.fx
        y = (uv[:, 1] - self.cy) / self.fy
        r2 = np.minimum(x * x + y * y, 4.0)  # beyond the lens's field: no fold-back
        radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
        xd = x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
        yd = y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
        return np.stack([self.cx + self.fx * xd, self.cy + self.fy * yd], axis=1), depth

    def undistort(self, uv: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Image pixels (N, 2) -> where the pinhole camera would see them (N, 2)."""
        return undistort_points(uv, (self.fx, self.fy, self.cx, self.cy), self.d)

    def half_fov(self) -> float:
        """Half the horizontal field of view [rad], through the lens."""
        edge = self.undistort(np.array([[self.width - 0.5, self.cy]]))[0, 0]
        return math.atan2(edge - self.cx, self.fx)

    def camera_info(self) -> dict[str, Any]:
        """The calibration in the ROS camera_info YAML layout."""
        k = [self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0]
        return {
            'image_width': self.width,
            'image_height': self.height,
            'camera_name': 'scenario',
            'camera_matrix': {'rows': 3, 'cols': 3, 'data': k},
            'distortion_model': 'plumb_bob',
            'distortion_coefficients': {'rows': 1, 'cols': 5, 'data': list(self.d)},
            'rectification_matrix': {'rows': 3, 'cols': 3, 'data': [1, 0, 0, 0, 1, 0, 0, 0, 1]},
            'projection_matrix': {
                'rows': 3,
                'cols': 4,
                'data': [self.fx, 0, self.cx, 0, 0, self.fy, self.cy, 0, 0, 0, 1, 0],
            },
        }


# The scenarios' camera: a vehicle camera, 1920×1080 at 30 Hz, the lens of CameraModel().
VEHICLE = CameraModel.sized(1920, 1080)
# A surround rig of four such cameras on base_link: x, y, z [m], yaw [rad]. The side cameras sit
# in the mirrors, the rear one above the plate; ~70 degrees each, so the four see most around.
MOUNTS: dict[str, tuple[float, float, float, float]] = {
    'front': (*CAMERA_POS, 0.0),
    'left': (2.0, 0.95, 1.1, math.pi / 2),
    'right': (2.0, -0.95, 1.1, -math.pi / 2),
    'rear': (-1.0, 0.0, 1.2, math.pi),
}
#: the cameras of ``--cameras N``, in order (the first anchors the fusion's alignment).
RIG = ('front', 'left', 'right', 'rear')


def mount_params(names: tuple[str, ...]) -> dict[str, list[float]]:
    """The fusion's ``extra_camera_*`` parameters for the rig cameras ``names``."""
    cols = zip(*(MOUNTS[n] for n in names), strict=True) if names else ((), (), (), ())
    keys = ('extra_camera_x', 'extra_camera_y', 'extra_camera_height', 'extra_camera_yaw')
    return {k: list(v) for k, v in zip(keys, cols, strict=True)}


def box_corners(state: dict[str, float], size: tuple[float, float, float], ego: dict[str, float]):  # type: ignore[no-untyped-def]
    """The 8 corners (base_link) of an actor's box: bottom 0-3, top 4-7, counter-clockwise."""
    length, width, height = size
    c, s = math.cos(state['yaw']), math.sin(state['yaw'])
    out = np.zeros((8, 3))
    for i, (a, b) in enumerate(((1, 1), (-1, 1), (-1, -1), (1, -1))):
        wx = state['x'] + c * a * length / 2 - s * b * width / 2
        wy = state['y'] + s * a * length / 2 + c * b * width / 2
        ex, ey = ego_frame(ego, wx, wy)
        out[i] = (ex, ey, 0.0)
        out[i + 4] = (ex, ey, height)
    return out


_FACES = ((0, 1, 2, 3), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7))


def _azimuth_intervals(
    world: World, t: float, origin: tuple[float, float]
) -> dict[int, tuple[float, float, float, float]]:
    """Per actor seen from ``origin`` (base_link): (range, azimuth, lo, hi) [m, rad]."""
    ego = world.ego.at(t)
    out = {}
    for a in world.actors:
        st = a.at(t)
        corners = box_corners(st, a.size, ego)[:4, :2] - np.asarray(origin)
        az = np.arctan2(corners[:, 1], corners[:, 0])
        ex, ey = ego_frame(ego, st['x'], st['y'])
        cx, cy = ex - origin[0], ey - origin[1]
        centre = math.atan2(cy, cx)
        # Unwrapped around the centre so an object straddling ±pi behind does not span the circle.
        rel = np.remainder(az - centre + math.pi, math.tau) - math.pi
        out[a.id] = (
            math.hypot(cx, cy),
            centre,
            centre + float(rel.min()),
            centre + float(rel.max()),
        )
    return out


def _covered(lo: float, hi: float, others: list[tuple[float, float]]) -> float:
    """Fraction of [lo, hi] covered by the union of the ``others`` intervals."""
    width = hi - lo
    if width <= 1e-9:
        return 0.0
    spans = sorted((max(a, lo), min(b, hi)) for a, b in others if b > lo and a < hi)
    covered, end = 0.0, lo
    for a, b in spans:
        if b > end:
            covered += b - max(a, end)
            end = b
    return covered / width


def _seen(
    intervals: dict[int, tuple[float, float, float, float]], in_fov: dict[int, bool]
) -> dict[int, bool]:
    seen = {}
    for aid, (rng_m, _, lo, hi) in intervals.items():
        if not in_fov[aid]:
            seen[aid] = False
            continue
        nearer = [
            (a_lo, a_hi) for o, (r, _, a_lo, a_hi) in intervals.items() if o != aid and r < rng_m
        ]
        seen[aid] = _covered(lo, hi, nearer) < OCCLUDED_FRACTION
    return seen


def radar_visibility(world: World, t: float, radar: RadarModel) -> dict[int, dict[str, bool]]:
    """Per actor id: ``{'radar': bool}`` (field of view, range, occlusion)."""
    iv = _azimuth_intervals(world, t, RADAR_POS[:2])
    fov = {
        aid: 1.0 < r < radar.max_range and abs(math.degrees(az)) < radar.fov_deg
        for aid, (r, az, _, _) in iv.items()
    }
    return {aid: {'radar': v} for aid, v in _seen(iv, fov).items()}


def visibility(
    world: World,
    t: float,
    cam: CameraModel,
    radar: RadarModel,
    shown: dict[int, float] | None = None,
) -> dict[int, dict[str, bool]]:
    """Per actor id: ``{'camera': bool, 'radar': bool}`` (field of view, range, occlusion).

    ``shown`` (actor id -> the share of its silhouette the rendered frame shows,
    :func:`rt_fusion.core.scenario.render.shown_fractions`) replaces the camera's footprint
    occlusion: hidden when more than ``OCCLUDED_FRACTION`` of it is covered by anything nearer,
    roadside scenery and heights included."""
    iv = _azimuth_intervals(world, t, cam.pos[:2])  # seen from the camera, as mounted
    half_fov = cam.half_fov()
    off = {aid: math.remainder(az - cam.yaw, math.tau) for aid, (_, az, _, _) in iv.items()}
    fov = {
        aid: abs(off[aid]) < half_fov and r * math.cos(off[aid]) > 1.0 and r < CAMERA_MAX_RANGE_M
        for aid, (r, _az, _, _) in iv.items()
    }
    if shown is None:
        cam_seen = _seen(iv, fov)
    else:
        cam_seen = {
            aid: ok and 1.0 - shown.get(aid, 0.0) < OCCLUDED_FRACTION for aid, ok in fov.items()
        }
    rad = radar_visibility(world, t, radar)
    return {aid: {'camera': cam_seen[aid], 'radar': rad[aid]['radar']} for aid in iv}


class RadarIds:
    """The sensor's own object ids: lowest free id, lost after two missed scans, reused at once."""

    def __init__(self, max_ids: int = 100, lost_after: int = 2) -> None:
        self.max_ids = max_ids
        self.lost_after = lost_after
        self.ids: dict[int, int] = {}  # actor id -> sensor id
        self.age: dict[int, int] = {}  # actor id -> scans since its id was given
        self.missed: dict[int, int] = {}

    def scan(self, detected: list[int], false_alarms: int) -> tuple[dict[int, int], list[int]]:
        """Ids for the actors detected in this scan, and ids for its false alarms."""
        for aid in list(self.ids):
            if aid in detected:
                self.missed[aid] = 0
                continue
            self.missed[aid] = self.missed.get(aid, 0) + 1
            if self.missed[aid] >= self.lost_after:
                del self.ids[aid], self.age[aid], self.missed[aid]
        used = set(self.ids.values())
        free = (i for i in range(self.max_ids) if i not in used)
        for aid in detected:
            if aid not in self.ids:
                self.ids[aid] = next(free)
                self.age[aid] = 0
                self.missed[aid] = 0
            else:
                self.age[aid] += 1
        fa_ids = [next(free) for _ in range(false_alarms)]
        return {aid: self.ids[aid] for aid in detected}, fa_ids


@dataclasses.dataclass(frozen=True)
class RadarModel:
    """ARS408-like object list: noisy range/azimuth, doppler, RCS, false alarms, misses."""

    period_s: float = 1 / 13.6
    max_range: float = 200.0
    fov_deg: float = 60.0
    range_std: float = 0.25
    azimuth_std_deg: float = 0.5
    velocity_std: float = 0.1
    rcs_std: float = 1.5
    detect_prob: float = 0.95
    detect_prob_pedestrian: float = 0.8
    false_alarms: float = 0.5  # per scan (Poisson mean)


def radar_scan(
    model: RadarModel,
    world: World,
    t: float,
    rng: np.random.Generator,
    ids: RadarIds | None = None,
    seen: dict[int, bool] | None = None,
) -> list[dict[str, Any]]:
    """Objects of one scan in the radar frame (x forward, y left), velocities relative.

    With ``ids`` the objects carry the sensor's own ids and existence probabilities (young tracks
    lower, overlapping the false alarms'); without, the actors' ids (model tests). ``seen``
    (actor id -> visible to the radar) leaves occluded actors out.
    """
    ego = world.ego.at(t)
    c, s = math.cos(ego['yaw']), math.sin(ego['yaw'])
    ego_v = (c * ego['vx'] + s * ego['vy'], -s * ego['vx'] + c * ego['vy'])
    t0, t1 = max(t - 0.005, 0.0), t + 0.005
    e0, e1 = world.ego.at(t0), world.ego.at(t1)
    yaw_rate = math.remainder(e1['yaw'] - e0['yaw'], math.tau) / (t1 - t0)
    out: list[dict[str, Any]] = []
    for a in world.actors:
        if seen is not None and not seen.get(a.id, False):
            continue
        st = a.at(t)
        ex, ey = ego_frame(ego, st['x'], st['y'])
        rx, ry = ex - RADAR_POS[0], ey - RADAR_POS[1]
        rng_m, az = math.hypot(rx, ry), math.atan2(ry, rx)
        if not (1.0 < rng_m < model.max_range and abs(math.degrees(az)) < model.fov_deg):
            continue
        p = model.detect_prob_pedestrian if a.cls == 'pedestrian' else model.detect_prob
        if rng.random() > p:
            continue
        r_m = rng_m + rng.normal(0, model.range_std)
        az_m = az + math.radians(rng.normal(0, model.azimuth_std_deg))
        vx_w, vy_w = st['vx'], st['vy']
        # Relative velocity as the sensor sees it: the rate of change of the object's position
        # in the turning sensor frame, so the ego's rotation (ω × r about base_link) is in it.
        vrel = (
            c * vx_w + s * vy_w - ego_v[0] + yaw_rate * ey,
            -s * vx_w + c * vy_w - ego_v[1] - yaw_rate * ex,
        )
        out.append(
            {
                'id': a.id,
                'x': r_m * math.cos(az_m),
                'y': r_m * math.sin(az_m),
                'vx': vrel[0] + rng.normal(0, model.velocity_std),
                'vy': vrel[1] + rng.normal(0, model.velocity_std),
                'rcs': RCS_DBSM[a.cls] + rng.normal(0, model.rcs_std),
                'class': ARS408_CLASS[a.cls],
                'length': a.size[0],
                'width': a.size[1],
                'orientation': math.remainder(st['yaw'] - ego['yaw'], math.tau),
                'prob': 0.99,
                'true': (rx, ry),
            }
        )
    for k in range(int(rng.poisson(model.false_alarms))):
        r_m = rng.uniform(5.0, model.max_range)
        az_m = math.radians(rng.uniform(-model.fov_deg, model.fov_deg))
        out.append(
            {
                'id': 200 + k,
                'x': r_m * math.cos(az_m),
                'y': r_m * math.sin(az_m),
                'vx': -ego_v[0] + yaw_rate * r_m * math.sin(az_m) + rng.normal(0, 0.5),
                'vy': -yaw_rate * (RADAR_POS[0] + r_m * math.cos(az_m)) + rng.normal(0, 0.5),
                'rcs': rng.normal(-10.0, 3.0),
                'class': 0,
                'length': 0.5,
                'width': 0.5,
                'orientation': 0.0,
                'prob': 0.5,
                'true': None,
            }
        )
    if ids is not None:
        real = [o for o in out if o['true'] is not None]
        fake = [o for o in out if o['true'] is None]
        given, fa_ids = ids.scan([o['id'] for o in real], len(fake))
        for o in real:
            o['actor'] = o['id']
            young = ids.age[o['id']] < 3
            o['prob'] = float(rng.choice(PROB_STEPS, p=PROB_YOUNG if young else PROB_MATURE))
            o['id'] = given[o['id']]
        for o, fid in zip(fake, fa_ids, strict=True):
            o['id'] = fid
            o['prob'] = float(rng.choice(PROB_STEPS, p=PROB_FALSE_ALARM))
    return out


@dataclasses.dataclass(frozen=True)
class ImuModel:
    """IMU at base_link: gyro and accelerometer with bias and white noise."""

    rate_hz: float = 200.0
    gyro_std: float = 0.003  # [rad/s]
    accel_std: float = 0.05  # [m/s²]
    gyro_bias: tuple[float, float, float] = (0.001, -0.0015, 0.002)
    accel_bias: tuple[float, float, float] = (0.03, -0.02, 0.05)


def imu_sample(
    model: ImuModel, track: Track, t: float, rng: np.random.Generator
) -> dict[str, Any]:
    """One sample: angular rate, specific force (body frame), orientation (truth)."""
    dt = 0.005
    a0, a1 = track.at(max(t - dt, 0.0)), track.at(t + dt)
    yaw_rate = math.remainder(a1['yaw'] - a0['yaw'], math.tau) / (2 * dt)
    st = track.at(t)
    c, s = math.cos(st['yaw']), math.sin(st['yaw'])
    ax_w, ay_w = (a1['vx'] - a0['vx']) / (2 * dt), (a1['vy'] - a0['vy']) / (2 * dt)
    ax, ay = c * ax_w + s * ay_w, -s * ax_w + c * ay_w
    gb, ab = model.gyro_bias, model.accel_bias
    return {
        'gyro': (
            gb[0] + rng.normal(0, model.gyro_std),
            gb[1] + rng.normal(0, model.gyro_std),
            yaw_rate + gb[2] + rng.normal(0, model.gyro_std),
        ),
        'accel': (
            ax + ab[0] + rng.normal(0, model.accel_std),
            ay + ab[1] + rng.normal(0, model.accel_std),
            GRAVITY + ab[2] + rng.normal(0, model.accel_std),
        ),
        'quat': (math.cos(st['yaw'] / 2), 0.0, 0.0, math.sin(st['yaw'] / 2)),  # w, x, y, z
    }


@dataclasses.dataclass(frozen=True)
class AudioModel:
    """48 kHz mono: road noise plus horn and siren events, attenuated with distance."""

    rate_hz: int = 48_000
    block: int = 1024
    noise_dbfs: float = -38.0
    source_dbfs_at_10m: float = -12.0


def load_clip(clips_dir: Path | None, name: str, rate_hz: int) -> npt.NDArray[np.float64]:
    """A WAV clip as mono float samples at ``rate_hz`` (resampled, channels averaged).

    Raises:
        ScenarioError: the clip is not there (clips come from ../shared/data/audio: not in the
            repository).
    """
    import wave  # noqa: PLC0415
    from math import gcd  # noqa: PLC0415

    from scipy.signal import resample_poly  # noqa: PLC0415

    path = (clips_dir / name) if clips_dir is not None else None
    if path is None or not path.is_file():
        raise ScenarioError(f'audio clip {name!r} not found in {clips_dir} (pass its folder)')
    with wave.open(str(path)) as w:
        if w.getsampwidth() != 2:
            raise ScenarioError(f'audio clip {name!r}: only 16-bit PCM WAV is read')
        rate, channels = w.getframerate(), w.getnchannels()
        pcm = np.frombuffer(w.readframes(w.getnframes()), '<i2').reshape(-1, channels)
    mono = pcm.astype(np.float64).mean(axis=1) / 32768
    g = gcd(rate_hz, rate)
    out: npt.NDArray[np.float64] = resample_poly(mono, rate_hz // g, rate // g)
    return out


class AudioSynth:
    """Blocks of int16 samples in order (the road noise filter keeps its state across blocks)."""

    def __init__(
        self,
        model: AudioModel,
        world: World,
        rng: np.random.Generator,
        clips_dir: Path | None = None,
    ) -> None:
        self.model, self.world, self.rng = model, world, rng
        self._zi = np.zeros(1)
        self.next_sample = 0
        self.clips = {
            str(ev['file']): load_clip(clips_dir, str(ev['file']), model.rate_hz)
            for ev in world.audio_events
            if ev['kind'] == 'clip'
        }

    def block(self) -> npt.NDArray[np.int16]:
        """The next ``model.block`` samples."""
        from scipy.signal import lfilter  # noqa: PLC0415

        model, n = self.model, self.model.block
        t = (self.next_sample + np.arange(n)) / model.rate_hz
        self.next_sample += n
        # Road noise: white noise through a one-pole low-pass (rumble), at noise_dbfs RMS.
        alpha = 0.03
        lp, self._zi = lfilter(
            [alpha], [1, -(1 - alpha)], self.rng.normal(0.0, 1.0, n), zi=self._zi
        )
        out = lp * 10 ** (model.noise_dbfs / 20) / math.sqrt(alpha / (2 - alpha))
        world = self.world
        ego = world.ego.at(float(t[0]))
        for ev in world.audio_events:
            start, dur = float(ev['at']), float(ev.get('duration', 1.0))
            active = (t >= start) & (t < start + dur)
            if not active.any():
                continue
            src = int(ev.get('source', 0))
            dist = 2.0
            if src != 0:
                a = next(a for a in world.actors if a.id == src).at(float(t[0]))
                dist = max(2.0, math.hypot(a['x'] - ego['x'], a['y'] - ego['y']))
            amp = 10 ** (model.source_dbfs_at_10m / 20) * min(10.0 / dist, 5.0)
            tt = t - start
            sig: Any
            if ev['kind'] == 'clip':  # a real recording, from its start, looped
                clip = self.clips[str(ev['file'])]
                idx = np.round(tt * model.rate_hz).astype(np.int64) % len(clip)
                sig = clip[idx] / max(float(np.sqrt(np.mean(clip**2))), 1e-9) * 0.5
            elif ev['kind'] == 'horn':  # two-tone horn with harmonics
                sig = (
                    sum(
                        np.sin(2 * np.pi * f * h * tt) / h
                        for f in (420.0, 500.0)
                        for h in (1, 2, 3)
                    )
                    / 4
                )
            else:  # siren: 600-1200 Hz sweep, 1 s period
                phase = 2 * np.pi * (900.0 * tt - 300.0 / (2 * np.pi) * np.cos(2 * np.pi * tt))
                sig = np.sin(phase)
            out = out + np.where(active, amp * sig, 0.0)
        samples: npt.NDArray[np.int16] = np.clip(np.round(out * 32767), -32768, 32767).astype(
            np.int16
        )
        return samples

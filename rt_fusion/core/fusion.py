"""Fusion of one aligned camera frame: radar objects, camera detections, ego motion, audio.

Per camera frame the :class:`~rt_fusion.core.sync.Aligner` hands over the IMU at the frame time,
the nearest radar scan moved to the frame time and the audio window. :class:`FusionEngine`:

1. **ego motion** (:mod:`rt_fusion.core.perception.ego`): speed from the vehicle speed input
   (``set_speed``), else from the radar's stationary returns, fused with the IMU's forward
   acceleration; heading from the IMU's rotation between frames; dead reckoning in ``odom``;
2. **objects**: each new radar scan's objects, moved from the radar frame into the vehicle frame
   (mounting position and yaw) and into ``odom`` with the ego pose at the scan time, velocities
   made over-ground (radar velocities are relative), ARS408 classes mapped to ours, feed the
   multi-object tracker (:mod:`rt_fusion.core.perception.tracker`); its confirmed tracks,
   predicted to the frame time, are the output (``output: detections`` gives the scan's objects
   untracked instead);
3. **camera detections**: the detector's output decoded (the model spec's decoder section:
   :mod:`rt_fusion.core.perception.decoders`) into boxes with class, depth and heading, placed
   on the ground with the camera's mounting and intrinsics, feed the same tracker (births,
   updates, class votes; a track's camera score is its latest camera confidence). A model
   without a decoder section (``models/rtf_testnet``, random weights for the inference tests)
   is refused by the node;
4. **audio**: while the hearing (:mod:`rt_fusion.core.perception.hearing`, run by the node)
   hears a siren (``set_siren``), the vehicle track moving fastest relative to the ego
   (approaching, or overtaking as an emergency vehicle does; ``emergency_*`` parameters) is
   output as an emergency vehicle with the siren's probability and ``SOURCE_AUDIO``; the RMS
   level of the aligned audio window (dBFS) is kept as a scalar.

The result is plain data (:class:`FusedFrame`); the node turns it into messages.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core import rotation
from rt_fusion.core.camera import undistort_points
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param
from rt_fusion.core.perception import track_layout as tl
from rt_fusion.core.perception.decoders import (
    CameraDetection,
    CameraGeometry,
    DecoderSpec,
    decode,
)
from rt_fusion.core.perception.ego import EgoMotion, EgoParams
from rt_fusion.core.perception.tracker import (
    Detection,
    Detections,
    Tracker,
    TrackerParams,
    along_ray_cov,
)
from rt_fusion.core.sync import AlignedFrame

# Our Object classes (rt_fusion_msgs/Object) and ARS408 Obj_Class (0 point, 1 car, 2 truck,
# 3 pedestrian, 4 motorcycle, 5 bicycle, 6 wide, 7 reserved).
CLASS_UNKNOWN, CLASS_CAR, CLASS_TRUCK, CLASS_PEDESTRIAN = 0, 1, 2, 3
CLASS_BICYCLE, CLASS_MOTORCYCLE, CLASS_STATIC, CLASS_EMERGENCY = 4, 5, 6, 7
SOURCE_RADAR, SOURCE_CAMERA, SOURCE_AUDIO = 1, 2, 4
VEHICLE_CLASSES = (CLASS_UNKNOWN, CLASS_CAR, CLASS_TRUCK, CLASS_MOTORCYCLE, CLASS_EMERGENCY)
# A detector's class names -> our classes (COCO's names included, for YOLO heads).
CLASS_BY_NAME = {
    'car': CLASS_CAR,
    'truck': CLASS_TRUCK,
    'bus': CLASS_TRUCK,
    'pedestrian': CLASS_PEDESTRIAN,
    'person': CLASS_PEDESTRIAN,
    'bicycle': CLASS_BICYCLE,
    'motorcycle': CLASS_MOTORCYCLE,
    'static': CLASS_STATIC,
}
ARS408_CLASSES = {
    0: CLASS_UNKNOWN,
    1: CLASS_CAR,
    2: CLASS_TRUCK,
    3: CLASS_PEDESTRIAN,
    4: CLASS_MOTORCYCLE,
    5: CLASS_BICYCLE,
    6: CLASS_STATIC,
    7: CLASS_UNKNOWN,
}
DEFAULT_SIZE = {
    CLASS_UNKNOWN: (1.0, 1.0),
    CLASS_CAR: (4.5, 1.9),
    CLASS_TRUCK: (10.0, 2.5),
    CLASS_PEDESTRIAN: (0.6, 0.6),
    CLASS_BICYCLE: (1.8, 0.6),
    CLASS_MOTORCYCLE: (2.2, 0.8),
    CLASS_STATIC: (2.0, 2.0),
}
#: Radar steps kept to replay after a camera frame whose detections are late (at 13.6 Hz,
#: 4.7 s): beyond them its detections are given up (camera_late says False).
MAX_LATE_STEPS = 64
# length, width per class id (rows: our classes; the default where DEFAULT_SIZE has none)
_SIZES = np.array([DEFAULT_SIZE.get(k, (1.0, 1.0)) for k in range(CLASS_EMERGENCY + 1)])


@dataclasses.dataclass(frozen=True)
class FusionParams:
    """Mounting, camera model and ego-motion parameters of the fusion."""

    radar_x: float = param(
        'radar position ahead of base_link', unit='m', default=3.6, calibration=True
    )
    radar_y: float = param(
        'radar position left of base_link', unit='m', default=0.0, calibration=True
    )
    radar_yaw: float = param(
        'radar yaw relative to base_link', unit='rad', default=0.0, calibration=True
    )
    camera_x: float = param(
        'camera position ahead of base_link', unit='m', default=1.8, calibration=True
    )
    camera_height: float = param(
        'camera height above the road', unit='m', default=1.4, low=0.1, calibration=True
    )
    camera_y: float = param(
        'camera position left of base_link', unit='m', default=0.0, calibration=True
    )
    imu_roll: float = param(
        'IMU roll on base_link (its turn rates and accelerations are turned into base_link)',
        unit='rad', default=0.0, low=-math.pi, high=math.pi, calibration=True,
    )  # fmt: skip
    imu_pitch: float = param(
        'IMU pitch on base_link', unit='rad', default=0.0, low=-math.pi, high=math.pi,
        calibration=True,
    )  # fmt: skip
    imu_yaw: float = param(
        'IMU yaw on base_link', unit='rad', default=0.0, low=-math.pi, high=math.pi,
        calibration=True,
    )  # fmt: skip
    camera_pitch: float = param(
        'camera pitch relative to base_link, about its y axis after the yaw (> 0: looking down)',
        unit='rad', default=0.0, low=-0.5, high=0.5, calibration=True,
    )  # fmt: skip
    camera_yaw: float = param(
        "camera yaw relative to base_link (0: looking along base_link's x)",
        unit='rad',
        default=0.0,
        low=-math.pi,
        high=math.pi,
        calibration=True,
    )
    fx: float = param(
        'focal length x (pixels of the model input)',
        unit='px',
        default=480.0,
        low=1.0,
        calibration=True,
    )
    fy: float = param(
        'focal length y (pixels of the model input)',
        unit='px',
        default=480.0,
        low=1.0,
        calibration=True,
    )
    cx: float = param(
        'principal point x (model input)', unit='px', default=320.0, calibration=True
    )
    cy: float = param(
        'principal point y (model input)', unit='px', default=192.0, calibration=True
    )
    distortion: tuple[float, ...] = param(
        'plumb_bob k1 k2 p1 p2 k3 of the camera (camera_info D; all 0: a pinhole)',
        default=(0.0, 0.0, 0.0, 0.0, 0.0),
        calibration=True,
    )
    extra_camera_x: tuple[float, ...] = param(
        "positions ahead of base_link of the extra cameras (fusion_node's cameras, in its "
        "order; each a camera of the front one's intrinsics and lens)",
        unit='m',
        default=(),
    )
    extra_camera_y: tuple[float, ...] = param(
        'positions left of base_link of the extra cameras', unit='m', default=()
    )
    extra_camera_height: tuple[float, ...] = param(
        'heights above the road of the extra cameras', unit='m', default=()
    )
    extra_camera_yaw: tuple[float, ...] = param(
        'yaws of the extra cameras relative to base_link (left pi/2, right -pi/2, rear pi)',
        unit='rad',
        default=(),
    )
    camera_max_range_m: float = param(
        'camera detections beyond this range are dropped, and a track beyond it is not expected '
        'to be seen by the camera (its frames do not count as misses)',
        unit='m',
        default=80.0,
        low=1.0,
    )
    camera_position_std_m: float = param(
        'position std of a camera detection at zero range', unit='m', default=0.3, low=0.01
    )
    camera_birth_range_m: float = param(
        'a camera detection farther than this updates tracks but does not start one (its depth '
        'is too uncertain to place a new object: the radar starts far tracks)',
        unit='m',
        default=50.0,
        low=0.0,
    )
    radar_fov_deg: float = param(
        "half the radar's horizontal field of view, off its axis: a camera detection outside it "
        "(a rear or side camera's) starts tracks out to camera_max_range_m, as with no radar "
        '(no radar there starts far ones)',
        unit='deg',
        default=60.0,
        low=0.0,
        high=180.0,
    )
    camera_birth_radar_timeout_s: float = param(
        'without a radar scan for this long (no radar configured, or the radar lost), camera '
        'detections start tracks out to camera_max_range_m: nothing else would start far ones',
        unit='s',
        default=1.0,
        low=0.0,
    )
    camera_ray_ratio: float = param(
        'a camera detection that no track takes does not start one when it lies on the line '
        "of sight of a confirmed track of its class (within 3 bearing stds and half the class's "
        "width) at a range within this factor of that track's: the same object with its "
        'monocular depth off (a post partly hidden by what stands before it, its box cut short, '
        'placed metres too far), not a second one beside it (1: off)',
        default=1.35,
        low=1.0,
    )
    camera_reanchor_misses: int = param(
        'a confirmed track that camera frames have missed this many times in a row moves to a '
        'detection of its class that no track took and that lies on its line of sight, nearer '
        'than it within camera_ray_ratio, and keeps its id: an object coming out from behind '
        'a car reads metres too far while half hidden and right once in view; the right '
        'detections, vetoed by the line-of-sight rule, would leave the stale track beside the '
        'truth until it coasted out. Only nearer: a farther detection on the ray is as often '
        "another object behind (lined-up posts), which must not take the nearer one's track "
        '(0: off)',
        default=1,
        low=0,
    )
    camera_static_floor: float = param(
        'a confirmed track of the static class that only cameras have seen, beyond '
        'camera_static_floor_range_m, keeps a position std along the line of sight of at least '
        "this fraction of one detection's there: a far post's depth error persists from frame "
        'to frame, so frames do not average it away as a Kalman filter assumes; without the '
        'floor a track started on a few short detections trusted its own average and sat 3-7 m '
        'short for a second while the detections said otherwise (0: off)',
        default=0.3,
        low=0.0,
    )
    camera_static_floor_range_m: float = param(
        'nearer static tracks get no floor (camera_static_floor): their depth errors are small',
        unit='m',
        default=50.0,
        low=0.0,
    )
    camera_confirm_score: float = param(
        'a track that a camera detection scoring at least this starts, within '
        'camera_confirm_range_m, is confirmed at once instead of after tracker.confirm_hits '
        'hits: a near object the detector is sure of (the first frame, a person stepping out '
        'from behind a car) is reported in the frame it is first seen (0: off)',
        default=0.75,
        low=0.0,
        high=1.0,
    )
    camera_confirm_range_m: float = param(
        'farther births wait for tracker.confirm_hits (camera_confirm_score)',
        unit='m',
        default=60.0,
        low=0.0,
    )
    camera_birth_score: float = param(
        'a camera detection below this score updates tracks but does not start one',
        default=0.5,
        low=0.0,
        high=1.0,
    )
    emergency_min_relative_mps: float = param(
        'while a siren is heard, the vehicle track moving fastest relative to the ego (at least '
        'this fast: approaching, or overtaking as an emergency vehicle does) is the emergency '
        'vehicle',
        unit='m/s',
        default=3.0,
        low=0.0,
    )
    emergency_min_speed_mps: float = param(
        'slower tracks (over ground) are never the emergency vehicle',
        unit='m/s',
        default=3.0,
        low=0.0,
    )
    emergency_max_range_m: float = param(
        'farther tracks are never the emergency vehicle', unit='m', default=120.0, low=1.0
    )
    camera_range_std: float = param(
        "growth of a camera detection's depth std (along its line of sight) with range "
        '(monocular depth)',
        unit='m/m',
        default=0.01,
        low=0.0,
    )
    regressed_depth_max_pitch: float = param(
        'a camera pitched more than this places its detections by the road below their boxes, '
        "not by the detector's regressed depth: the shipped detector learned depths from a "
        'level camera, and from a camera looking 2° down they come out 25-50 % short',
        unit='rad',
        default=0.005,
        low=0.0,
    )
    regressed_depth_height_m: float = param(
        "the camera height the detector's regressed depths were learned at (the shipped one: "
        'the scenario front camera, 1.4 m); a camera mounted more than '
        'regressed_depth_height_tolerance_m higher or lower places its detections by the road '
        'below their boxes instead (the depths come out too long from a lower camera: a rig '
        'camera at 1.1 m read 20 % far, every camera scored, 2026-12-07)',
        unit='m',
        default=1.4,
        low=0.1,
    )
    regressed_depth_height_tolerance_m: float = param(
        'see regressed_depth_height_m (0: every camera of another height on the road)',
        unit='m',
        default=0.1,
        low=0.0,
    )
    static_depth: str = param(
        'depth of a camera detection of the static class (a post or an obstacle standing on the '
        "road): 'regressed', the network's depth, as for every other class; 'ground', where its "
        'box meets the flat road, plus half its width. The shipped detector (trained on exact '
        'frames) places a post better by its own depth: a post half behind a rail has no box '
        'bottom on the road (README, detector section)',
        default='regressed',
        choices=('ground', 'regressed'),
    )
    camera_range_std_sq: float = param(
        "growth of a camera detection's depth std with the square of its range (added to "
        'camera_range_std × range): a pixel of error where an object meets the road, or in its '
        'apparent size, moves it by about range² / (focal length × camera height): centimetres '
        'near, metres at 70 m',
        unit='1/m',
        default=0.0006,
        low=0.0,
    )
    camera_bearing_std: float = param(
        "a camera detection's bearing std: its position std across the line of sight grows "
        'with range by this much',
        unit='rad',
        default=0.005,
        low=0.0,
    )
    yaw_rate_smoothing: float = param(
        "how much of each frame's heading change a track's yaw rate takes (exponential "
        'smoothing: 1 the raw frame-to-frame rate, lower steadier)',
        default=0.3,
        low=0.01,
        high=1.0,
    )
    yaw_rate_min_speed_mps: float = param(
        'slower tracks report yaw rate 0 (their heading over ground is noise)',
        unit='m/s',
        default=1.0,
        low=0.0,
    )
    ego_speed_mps: float = param(
        'a fixed ego speed instead of the estimate (negative: estimated from the vehicle speed '
        'input, the radar and the IMU — the default)',
        unit='m/s',
        default=-1.0,
    )
    output: str = param(
        'tracks: confirmed tracks of the multi-object tracker; detections: the latest radar '
        'scan moved to the frame time, untracked (the behaviour before tracking, for comparison)',
        default='tracks',
        choices=('tracks', 'detections'),
    )
    min_probability: float = param(
        'radar objects below this existence probability are dropped',
        default=0.0,
        low=0.0,
        high=1.0,
    )
    position_std_m: float = param(
        'position std of a radar object without rms values', unit='m', default=0.5, low=0.0
    )
    radar_azimuth_std_deg: float = param(
        "a radar object's azimuth std: its position std across the line of sight is at least "
        'range × this (the object list reports one rms per axis, which at 70 m is well below '
        'what a 0.5° azimuth error makes of it)',
        unit='deg',
        default=0.5,
        low=0.0,
    )

    def check(self) -> None:
        """Cross-field rules."""
        if self.radar_x < self.camera_x - 10.0:
            raise ParameterError('radar_x', self.radar_x, 'more than 10 m behind the camera')
        d = self.distortion
        if len(d) not in (4, 5) or not all(math.isfinite(v) and abs(v) < 10 for v in d):
            raise ParameterError('distortion', d, 'want 4 or 5 finite plumb_bob coefficients')
        n = len(self.extra_camera_x)
        for name in (
            'extra_camera_x',
            'extra_camera_y',
            'extra_camera_height',
            'extra_camera_yaw',
        ):
            v = getattr(self, name)
            if len(v) != n:
                raise ParameterError(name, v, f'one per extra camera: extra_camera_x has {n}')
            if not all(math.isfinite(x) for x in v):
                raise ParameterError(name, v, 'not finite')
        if not all(h > 0.1 for h in self.extra_camera_height):
            raise ParameterError('extra_camera_height', self.extra_camera_height, 'want > 0.1 m')

    def camera_along_std(self, rng: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """A camera detection's position std along its line of sight at range ``rng`` [m]
        (monocular depth: ``camera_range_std`` and ``camera_range_std_sq``)."""
        out: npt.NDArray[np.float64] = (
            self.camera_position_std_m
            + (self.camera_range_std + self.camera_range_std_sq * rng) * rng
        )
        return out

    def imu_matrix(self) -> npt.NDArray[np.float64] | None:
        """R = Rz(yaw) Ry(pitch) Rx(roll) taking the IMU's axes into base_link's (None: the IMU
        is mounted along base_link's axes)."""
        if not (self.imu_roll or self.imu_pitch or self.imu_yaw):
            return None
        return rotation.matrix(rotation.from_euler(self.imu_roll, self.imu_pitch, self.imu_yaw))

    def extra_geometries(self) -> list[CameraGeometry]:
        """The extra cameras' geometries, in order (the front camera's intrinsics and lens)."""
        return [
            CameraGeometry(
                self.fx, self.fy, self.cx, self.cy, x, h, y, tuple(self.distortion), yaw
            )
            for x, y, h, yaw in zip(
                self.extra_camera_x,
                self.extra_camera_y,
                self.extra_camera_height,
                self.extra_camera_yaw,
                strict=True,
            )
        ]


@dataclasses.dataclass(slots=True)
class RadarObjectIn:
    """One radar object as received (radar frame, velocity relative to the sensor)."""

    id: int
    x: float
    y: float
    vx: float
    vy: float
    ars_class: int
    length: float = math.nan
    width: float = math.nan
    orientation: float = math.nan
    prob_exist: float = math.nan
    rms_x: float = math.nan
    rms_y: float = math.nan


@dataclasses.dataclass(slots=True)
class FusedObject:
    """One fused object in the vehicle frame (base_link), velocity over ground."""

    id: int
    object_class: int
    class_probability: float
    x: float
    y: float
    yaw: float
    length: float
    width: float
    vx: float
    vy: float
    position_std: float
    camera_score: float  # NaN: outside the image or no network output
    sources: int  # 1 radar, 2 camera, 4 audio (rt_fusion_msgs/Object SOURCE_*)


@dataclasses.dataclass(slots=True)
class EgoState:
    """Dead-reckoned ego pose in the local map frame and its speed and yaw rate."""

    stamp_ns: int = 0
    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0
    v: float = 0.0
    yaw_rate: float = 0.0
    v_std: float = 0.0  # [m/s]
    xy_std: float = 0.0  # [m]
    speed_source: str = ''


@dataclasses.dataclass(slots=True)
class FusedFrame:
    """The fusion's output for one camera frame."""

    stamp_ns: int
    objects: list[FusedObject]
    ego: EgoState
    audio_dbfs: float  # NaN without audio
    missing: tuple[str, ...]
    radar_dt_ns: int  # frame time - radar scan time (0 without radar)
    velocity_std: list[float] = dataclasses.field(default_factory=list)  # per object [m/s]
    existence: list[float] = dataclasses.field(default_factory=list)  # per object [0, 1]
    age_s: list[float] = dataclasses.field(default_factory=list)  # per object [s]
    # Per object, in base_link: the covariance of (x, y) [m²] and of (vx, vy) [m²/s²], each
    # (xx, xy, yy); and the yaw rate of its heading over ground [rad/s] (tracks only).
    position_cov: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)
    velocity_cov: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)
    yaw_rate: list[float] = dataclasses.field(default_factory=list)


def model_intrinsics(
    k: Sequence[float], d: Sequence[float], size: tuple[int, int], input_hw: tuple[int, int]
) -> tuple[float, float, float, float, tuple[float, ...]]:
    """A camera's K (3x3 row-major, image pixels) and plumb_bob D at ``size`` (width, height)
    as the network sees them after the preprocessing's resize to ``input_hw`` (height, width):
    (fx, fy, cx, cy, D). D is in normalised coordinates: a resize leaves it as it is.

    Raises:
        ValueError: a non-finite or non-positive focal length, a size of 0, or a skew.
    """
    width, height = size
    fx, skew, cx, _, fy, cy = (float(v) for v in k[:6])
    values = (fx, fy, cx, cy, *map(float, d))
    if width <= 0 or height <= 0 or not all(math.isfinite(v) for v in values):
        raise ValueError(f'camera_info {width}x{height}, K {list(k)}, D {list(d)}: not a camera')
    if fx <= 0.0 or fy <= 0.0 or skew != 0.0:
        raise ValueError(f'camera_info K {list(k)}: focal lengths > 0 and no skew')
    sx, sy = input_hw[1] / width, input_hw[0] / height
    return fx * sx, fy * sy, cx * sx, cy * sy, tuple(float(v) for v in d)


def _rotated_cov(
    cov: npt.NDArray[np.float64], c: float, s: float
) -> list[tuple[float, float, float]]:
    """2x2 covariances (N, 2, 2) of the odom frame in base_link (rotated by -yaw: ``c``, ``s``
    its cosine and sine), each as (xx, xy, yy)."""
    xx, xy, yy = cov[:, 0, 0], cov[:, 0, 1], cov[:, 1, 1]
    rxx = c * c * xx + 2 * c * s * xy + s * s * yy
    ryy = s * s * xx - 2 * c * s * xy + c * c * yy
    rxy = (c * c - s * s) * xy + c * s * (yy - xx)
    return list(zip(rxx.tolist(), rxy.tolist(), ryy.tolist(), strict=True))


def objects_to_points(objects: list[RadarObjectIn]) -> npt.NDArray[np.float64]:
    """Radar objects as aligner points (N, 4): x, y, z, radial velocity (for moving them)."""
    pts = np.zeros((len(objects), 4))
    for i, o in enumerate(objects):
        r = math.hypot(o.x, o.y)
        pts[i] = (o.x, o.y, 0.0, (o.x * o.vx + o.y * o.vy) / r if r > 1e-6 else 0.0)
    return pts


@dataclasses.dataclass
class _PendingCamera:
    """A camera frame fused before its detections: its time, the tracker as it was then (after
    the frame's radar step), the last radar scan tracked by then, and the radar steps since
    (scan time, detections, whether they could start tracks)."""

    stamp_ns: int
    tracker: dict[str, Any]
    tracked_scan_ns: int | None
    steps: list[tuple[int, list[Detection], bool]] = dataclasses.field(default_factory=list)


class FusionEngine:
    """Turns aligned frames (+ the network output) into :class:`FusedFrame` s; see module doc."""

    def __init__(
        self,
        params: FusionParams | None = None,
        ego: EgoParams | None = None,
        tracker: TrackerParams | None = None,
    ) -> None:
        self.p = params or FusionParams()
        self.ego = EgoState()
        self.motion = EgoMotion(ego)
        self.tracker = Tracker(tracker)
        self._last_scan_ns = -1
        # Inputs with NaN/inf, dropped where they enter (speeds, radar objects; the aligner and
        # the tracker count their own).
        self.non_finite = {'speed': 0, 'radar_objects': 0}
        self._tracked_scan_ns: int | None = None  # the last radar scan that went into a step
        self._scans: dict[int, list[RadarObjectIn]] = {}  # radar scan stamp -> its objects
        c, s = math.cos(self.p.radar_yaw), math.sin(self.p.radar_yaw)
        self._radar_rot = (c, s)
        self.radar_speed: float | None = None  # the last scan's stationary consensus [m/s]
        # Per track: (stamp, heading over ground, its smoothed rate) for the yaw rate out.
        self._headings: dict[int, tuple[int, float, float]] = {}
        # Stamped vehicle speeds not yet due: each is applied at the first frame at or after it.
        self._speeds: collections.deque[tuple[int, float]] = collections.deque(maxlen=256)
        self.decoder: DecoderSpec | None = None
        # A camera frame fused before its detections (the network beside the fusion): the
        # tracker as it was at that frame, and the radar steps since (see camera_later).
        self._pending: _PendingCamera | None = None
        self.late_applied = 0  # camera frames whose detections came after the frame was fused
        self.late_replayed = 0  # radar steps tracked again after those
        self._camera_fresh = False  # detections went in since the last output (its scores)
        self._class_ids: list[int] = []
        self._class_lut = np.array([CLASS_UNKNOWN], np.int64)  # _class_ids as an index
        self.camera_detections: list[CameraDetection] = []  # the last frame's, for diagnostics
        self.siren: float | None = None  # the hearing's siren probability while one is heard
        self.emergency_id: int | None = None  # the track marked as the emergency vehicle
        p = self.p
        self.geometry = CameraGeometry(
            p.fx, p.fy, p.cx, p.cy, p.camera_x, p.camera_height, p.camera_y,
            tuple(p.distortion), p.camera_yaw, p.camera_pitch,
        )  # fmt: skip

    def set_intrinsics(
        self, fx: float, fy: float, cx: float, cy: float, d: Sequence[float]
    ) -> None:
        """The front camera's intrinsics (model-input pixels) and lens (plumb_bob D), from its
        CameraInfo (:func:`model_intrinsics`), replacing those of the parameters."""
        self.geometry = dataclasses.replace(
            self.geometry, fx=fx, fy=fy, cx=cx, cy=cy, d=tuple(float(v) for v in d)
        )

    def set_decoder(self, decoder: DecoderSpec | None) -> None:
        """The model's head (from its spec): its detections feed the tracker at frame times.
        Classes the fusion does not know are dropped (``CLASS_UNKNOWN``) unless named like ours."""
        self.decoder = decoder
        self._class_ids = (
            [CLASS_BY_NAME.get(name, CLASS_UNKNOWN) for name in decoder.classes] if decoder else []
        )
        # the same as an index (one past the end: a class index the model should not give)
        self._class_lut = np.array([*self._class_ids, CLASS_UNKNOWN], np.int64)

    def set_siren(self, probability: float | None) -> None:
        """The hearing's state: a siren heard with ``probability``, or None (none heard)."""
        self.siren = probability
        if probability is None:
            self.emergency_id = None

    def _mark_emergency(self, objects: list[FusedObject]) -> None:
        """While a siren is heard: the vehicle track moving fastest relative to the ego becomes
        the emergency vehicle (class, siren probability, SOURCE_AUDIO), if it moves over ground
        at emergency_min_speed_mps at least and is not a slower vehicle going the ego's way (a
        car the ego catches up with: it is the ego that approaches); once chosen, a track
        keeps the mark while the siren lasts (and it stays confirmed)."""
        if self.siren is None:
            return
        p, v = self.p, self.ego.v
        by_id = {o.id: o for o in objects}
        chosen = by_id.get(self.emergency_id) if self.emergency_id is not None else None
        if chosen is None:
            best = p.emergency_min_relative_mps
            for o in objects:
                if o.object_class not in VEHICLE_CLASSES:
                    continue
                if math.hypot(o.x, o.y) > p.emergency_max_range_m:
                    continue
                if math.hypot(o.vx, o.vy) < p.emergency_min_speed_mps:
                    continue  # parked cars pass the ego at its speed too
                if 0.0 < o.vx < v:
                    continue  # slower the same way: the ego closes on it, not it on the ego
                rel = math.hypot(o.vx - v, o.vy)
                if rel >= best:
                    best, chosen = rel, o
        if chosen is not None:
            self.emergency_id = chosen.id
            chosen.object_class = CLASS_EMERGENCY
            chosen.class_probability = self.siren
            chosen.sources |= SOURCE_AUDIO

    def set_speed(self, speed_mps: float, stamp_ns: int | None = None) -> None:
        """The vehicle's measured speed (wheel odometry): the ego speed's best source. With its
        measurement time ``stamp_ns`` it is aligned as the other streams are: applied when the
        ego is advanced to a frame at or after that time, never to an earlier one; without a
        stamp (an unstamped message) at once. A non-finite speed is counted and dropped."""
        if not math.isfinite(speed_mps):
            self.non_finite['speed'] += 1
            return
        if stamp_ns is None:
            self.motion.vehicle_speed(float(speed_mps))
        else:
            self._speeds.append((int(stamp_ns), float(speed_mps)))

    def _heading_rates(
        self, stamp_ns: int, ids: npt.NDArray[Any], vx: npt.NDArray[Any], vy: npt.NDArray[Any]
    ) -> list[float]:
        """Each track's yaw rate [rad/s]: the rate of its heading over ground (odom frame) from
        frame to frame, smoothed (``yaw_rate_smoothing``); 0 while it moves slower than
        ``yaw_rate_min_speed_mps`` (no heading to speak of) and for a new track."""
        p = self.p
        heading = np.arctan2(vy, vx)
        moving = np.hypot(vx, vy) >= p.yaw_rate_min_speed_mps
        out: list[float] = []
        seen: dict[int, tuple[int, float, float]] = {}
        for tid, h, ok in zip(ids.tolist(), heading.tolist(), moving.tolist(), strict=True):
            rate = 0.0
            last = self._headings.get(tid)
            if ok and last is not None and stamp_ns > last[0]:
                dt = (stamp_ns - last[0]) / 1e9
                raw = math.remainder(h - last[1], math.tau) / dt
                rate = last[2] + p.yaw_rate_smoothing * (raw - last[2])
            if ok:
                seen[tid] = (stamp_ns, h, rate)
            out.append(rate)
        self._headings = seen
        return out

    def _due_speeds(self, stamp_ns: int) -> None:
        """The stamped speeds measured up to ``stamp_ns``, in their order, into the ego filter."""
        while self._speeds and self._speeds[0][0] <= stamp_ns:
            self.motion.vehicle_speed(self._speeds.popleft()[1])

    def add_scan(self, stamp_ns: int, objects: list[RadarObjectIn]) -> npt.NDArray[np.float64]:
        """Keeps a scan's objects by stamp; returns its points for the aligner. An object whose
        position or velocity is not finite is counted and dropped."""
        kept = [o for o in objects if math.isfinite(o.x + o.y + o.vx + o.vy)]
        if len(kept) != len(objects):
            self.non_finite['radar_objects'] += len(objects) - len(kept)
            objects = kept
        self._scans[stamp_ns] = objects
        if len(self._scans) > 64:
            for old in sorted(self._scans)[:-32]:
                del self._scans[old]
        return objects_to_points(objects)

    def _advance_ego(self, frame: AlignedFrame) -> None:
        self._due_speeds(frame.stamp_ns)
        dyaw = yaw_rate = accel_x = None
        if frame.imu is not None:
            dyaw = rotation.yaw(*frame.imu.rotation)
            yaw_rate, accel_x = frame.imu.gyro[2], frame.imu.accel[0]
        if self.p.ego_speed_mps >= 0.0:  # a fixed speed (tests, a parked recording)
            self.motion.pose.v, self.motion.pose.v_var = self.p.ego_speed_mps, 0.0
            accel_x = None
        pose = self.motion.advance(frame.stamp_ns, dyaw, yaw_rate, accel_x)
        if self.p.ego_speed_mps >= 0.0:
            pose.v, pose.v_var = self.p.ego_speed_mps, 0.0
        e = self.ego
        e.stamp_ns, e.x, e.y, e.yaw, e.v, e.yaw_rate = (
            pose.stamp_ns,
            pose.x,
            pose.y,
            pose.yaw,
            pose.v,
            pose.yaw_rate,
        )
        e.v_std, e.xy_std = math.sqrt(max(pose.v_var, 0.0)), math.sqrt(max(pose.xy_var, 0.0))
        e.speed_source = pose.speed_source if self.p.ego_speed_mps < 0.0 else 'fixed'

    def _radar_vehicle(self, o: RadarObjectIn) -> tuple[float, float, float, float]:
        """A radar object's position and relative velocity in vehicle axes."""
        c, s = self._radar_rot
        p = self.p
        return (
            p.radar_x + c * o.x - s * o.y,
            p.radar_y + s * o.x + c * o.y,
            c * o.vx - s * o.vy,
            s * o.vx + c * o.vy,
        )

    def _track(self, scan_ns: int, scan: list[RadarObjectIn]) -> None:
        """A new radar scan: the ego speed's radar measurement, then one tracker step."""
        p = self.p
        rel = [self._radar_vehicle(o) for o in scan]
        if self.p.ego_speed_mps < 0.0 and rel:
            # A stationary return's relative forward velocity is -v + ω y (the ego's turn).
            w0 = self.motion.pose.yaw_rate
            self.radar_speed = self.motion.radar_speed(np.array([r[2] - w0 * r[1] for r in rel]))
        ox, oy, oyaw = self.motion.pose_at(scan_ns)
        c, s = math.cos(oyaw), math.sin(oyaw)
        v, w = self.motion.pose.v, self.motion.pose.yaw_rate
        azimuth_std = math.radians(p.radar_azimuth_std_deg)
        dets = []
        for o, (x, y, vx, vy) in zip(scan, rel, strict=True):
            if not math.isnan(o.prob_exist) and o.prob_exist < p.min_probability:
                continue
            # Over ground in vehicle axes: relative + the ego's own (translation and rotation).
            gx, gy = vx + v - w * y, vy + w * x
            std = max(
                max(o.rms_x, o.rms_y)
                if math.isfinite(o.rms_x) and math.isfinite(o.rms_y)
                else p.position_std_m,
                0.2,
            )
            # Range is measured well, the azimuth less so: across the line of sight the error
            # grows with range.
            across = max(std, math.hypot(o.x, o.y) * azimuth_std)
            bearing = oyaw + math.atan2(y - p.radar_y, x - p.radar_x)
            dets.append(
                Detection(
                    ox + c * x - s * y,
                    oy + s * x + c * y,
                    c * gx - s * gy,
                    s * gx + c * gy,
                    pos_std=std,
                    cov_xy=along_ray_cov(bearing, std, across),
                    vel_std=0.5 + 0.5 * math.sqrt(self.motion.pose.v_var),
                    cls=ARS408_CLASSES.get(o.ars_class, CLASS_UNKNOWN),
                    cls_prob=1.0,
                    exist_prob=o.prob_exist if math.isfinite(o.prob_exist) else 1.0,
                    length=o.length,
                    width=o.width,
                    sensor_id=o.id,
                )
            )
        # New tracks only once the ego speed is known: a relative velocity made over-ground
        # with a wrong speed starts tracks that then miss their own object.
        known = self.p.ego_speed_mps >= 0.0 or self.motion.pose.v_var <= 1.5**2
        self.tracker.step(scan_ns, dets, birth=known)
        self._tracked_scan_ns = scan_ns
        if self._pending is not None:  # a camera frame's detections to come: kept to replay
            self._pending.steps.append((scan_ns, dets, known))
            if len(self._pending.steps) > MAX_LATE_STEPS:  # they never came: given up
                self._pending = None

    def camera_birth_range(self, stamp_ns: int) -> float:
        """How far a camera detection at ``stamp_ns`` may start a track: ``camera_birth_range_m``
        while the radar (which starts far tracks) is there, ``camera_max_range_m`` when it has
        given no scan for ``camera_birth_radar_timeout_s`` (or none yet)."""
        p, last = self.p, self._tracked_scan_ns
        if last is not None and stamp_ns - last <= p.camera_birth_radar_timeout_s * 1e9:
            return p.camera_birth_range_m
        return max(p.camera_birth_range_m, p.camera_max_range_m)

    def camera_block(
        self,
        cams: Sequence[CameraDetection],
        pose: tuple[float, float, float],
        geo: CameraGeometry | None = None,
        birth_range_m: float | None = None,
    ) -> Detections:
        """A camera frame's detections as the tracker's block, in ``odom`` at ``pose`` (x, y,
        yaw), vectorised: each placed on the vehicle frame as :func:`camera_to_vehicle` does
        (along its keypoint's ray with a regressed depth, else on the flat road below its box
        plus half its class's length), dropped when its class is unknown, it is not on the road
        ahead or beyond ``camera_max_range_m``; position only (a post: known to stand still),
        its error along the line of sight growing with range (monocular depth). ``geo``: the
        camera that saw them (default the front one; an extra camera's is turned by its yaw).
        ``birth_range_m``: the farthest that starts a track (default ``camera_birth_range_m``;
        see :meth:`camera_birth_range`)."""
        p, geo = self.p, geo or self.geometry
        if not cams:
            return Detections(np.zeros((0, tl.DET_WIDTH)))
        a = np.array(
            [(d.cls, d.score, *d.box, *d.keypoint, d.depth) for d in cams], dtype=np.float64
        )
        cls = self._class_lut[np.minimum(a[:, 0].astype(np.int64), len(self._class_ids))]
        regressed = np.isfinite(a[:, 8]) & (a[:, 8] > 0.0)
        if (
            abs(geo.pitch) > p.regressed_depth_max_pitch
            or abs(geo.height - p.regressed_depth_height_m) > p.regressed_depth_height_tolerance_m
        ):
            regressed[:] = False  # depths learned from another camera's view: on the ground
        width_px = a[:, 4] - a[:, 2]
        if any(geo.d):  # keypoints and box bottoms back through the lens, as camera_to_vehicle
            k = (geo.fx, geo.fy, geo.cx, geo.cy)
            a[:, 6:8] = undistort_points(a[:, 6:8], k, geo.d)
            bottom = np.column_stack([0.5 * (a[:, 2] + a[:, 4]), a[:, 5]])
            bottom = undistort_points(bottom, k, geo.d)
            a[:, 2], a[:, 4], a[:, 5] = bottom[:, 0], bottom[:, 0], bottom[:, 1]
        below = a[:, 5] - geo.cy
        if geo.pitch:  # looking down: a row's ray leaves the camera below the level
            cp, sp = math.cos(geo.pitch), math.sin(geo.pitch)
            ground = sp * geo.fy + cp * below > cp  # more than ~1 px below the horizon
            # the box bottom's ray to the road, and its level run there per unit of ray
            run = cp - sp * below / geo.fy
            down = np.where(ground, sp + cp * below / geo.fy, 1.0)
            flat = geo.height / down * run
            run_k = cp - sp * (a[:, 7] - geo.cy) / geo.fy  # the keypoint's ray
        else:
            ground = below > 1.0
            flat = geo.fy * geo.height / np.where(ground, below, 1.0)  # where it meets the road
            run = run_k = np.ones(len(below))
        on_road = regressed | ground
        road_depth = flat + _SIZES[cls, 0] / 2
        if p.static_depth == 'ground':
            # Plus half its depth: a post or block is about as deep as it is wide (its class's
            # default length, 2 m, would put a post 1 m too far).
            grounded = (cls == CLASS_STATIC) & ground
            road_depth = np.where(grounded, flat * (1.0 + 0.5 * width_px / geo.fx), road_depth)
        else:
            grounded = np.zeros(len(cls), bool)
        along_ray = regressed & ~grounded
        # level distance ahead of the camera (a regressed depth is along the optical axis)
        depth = np.where(along_ray, a[:, 8] * run_k, road_depth)
        u = np.where(along_ray, a[:, 6], 0.5 * (a[:, 2] + a[:, 4]))
        lateral = -(u - geo.cx) * depth / (geo.fx * np.where(along_ray, run_k, run))  # left
        if geo.yaw:
            cy_, sy_ = math.cos(geo.yaw), math.sin(geo.yaw)
            x = geo.x + cy_ * depth - sy_ * lateral
            y = geo.y + sy_ * depth + cy_ * lateral
        else:
            x, y = geo.x + depth, geo.y + lateral
        rng = np.hypot(depth, lateral)
        keep = (cls != CLASS_UNKNOWN) & on_road & (rng <= p.camera_max_range_m)
        cls, x, y, rng, score = cls[keep], x[keep], y[keep], rng[keep], a[keep, 1]
        ox, oy, oyaw = pose
        c, s = math.cos(oyaw), math.sin(oyaw)
        along = p.camera_along_std(rng)
        across = p.camera_position_std_m + p.camera_bearing_std * rng
        bearing = oyaw + np.arctan2(y - geo.y, x - geo.x)
        bc, bs = np.cos(bearing), np.sin(bearing)
        a2, c2 = along**2, across**2
        still = np.where(cls == CLASS_STATIC, 0.0, np.nan)
        block = np.empty((len(cls), tl.DET_WIDTH))
        block[:, tl.DXY] = ox + c * x - s * y
        block[:, tl.DXY + 1] = oy + s * x + c * y
        block[:, tl.DV] = block[:, tl.DV + 1] = still
        block[:, tl.DCOV] = a2 * bc * bc + c2 * bs * bs  # along_ray_cov, vectorised
        block[:, tl.DCOV + 1] = (a2 - c2) * bc * bs
        block[:, tl.DCOV + 2] = a2 * bs * bs + c2 * bc * bc
        block[:, tl.DVEL_VAR] = 0.5**2
        block[:, tl.DCLS] = cls
        block[:, tl.DCLS_PROB] = block[:, tl.DEXIST] = score
        block[:, tl.DSIZE : tl.DSIZE + 2] = _SIZES[cls]
        block[:, tl.DSOURCE] = SOURCE_CAMERA
        births = p.camera_birth_range_m if birth_range_m is None else birth_range_m
        off_axis = np.arctan2(y - p.radar_y, x - p.radar_x) - p.radar_yaw
        unseen = np.abs((off_axis + math.pi) % math.tau - math.pi) > math.radians(p.radar_fov_deg)
        reach = np.where(unseen, max(births, p.camera_max_range_m), births)  # no radar there
        block[:, tl.DBIRTH] = (score >= p.camera_birth_score) & (rng <= reach)
        return Detections(block)

    def _track_camera(
        self,
        stamp_ns: int,
        cams: list[CameraDetection],
        width: int,
        extra: Sequence[tuple[CameraGeometry, list[CameraDetection]]] = (),
    ) -> None:
        """A camera frame's detections (and those of the extra cameras' frames of the same
        time, each placed by its own mounting): one tracker step at the frame time, position
        only. A track counts as seen (a miss when unmatched) inside any of the cameras' views."""
        p = self.p
        ox, oy, oyaw = self.motion.pose_at(stamp_ns)
        c, s = math.cos(oyaw), math.sin(oyaw)
        births = self.camera_birth_range(stamp_ns)
        dets = self.camera_block(cams, (ox, oy, oyaw), birth_range_m=births)
        views = [self.geometry] + [geo for geo, _ in extra]
        blocks = [dets.block]
        if extra:
            blocks += [
                self.camera_block(more, (ox, oy, oyaw), geo, births).block for geo, more in extra
            ]
            dets = Detections(np.concatenate(blocks))
        # Each detection's camera in odom: the line of sight it was seen along.
        eyes = np.concatenate(
            [
                np.tile((ox + c * geo.x - s * geo.y, oy + s * geo.x + c * geo.y), (len(b), 1))
                for geo, b in zip(views, blocks, strict=True)
            ]
        )

        moves: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []

        def veto(d: Detections, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
            ray, nearer = self.ray_tracks(d.block[idx], eyes[idx])
            moves.append((nearer[nearer >= 0], idx[nearer >= 0]))
            out: npt.NDArray[np.bool_] = ray >= 0
            return out

        def covers(xy: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
            dx, dy = xy[:, 0] - ox, xy[:, 1] - oy
            x, y = c * dx + s * dy, -s * dx + c * dy
            near = np.hypot(x, y) <= p.camera_max_range_m
            ok: npt.NDArray[np.bool_] = np.zeros(len(x), bool)
            for geo in views:
                cg, sg = math.cos(geo.yaw), math.sin(geo.yaw)
                ahead = cg * (x - geo.x) + sg * (y - geo.y)
                left = -sg * (x - geo.x) + cg * (y - geo.y)
                inside = near & (ahead > 1.0)
                if geo.pitch:  # along the optical axis of a camera looking down, at the road
                    ahead = math.cos(geo.pitch) * ahead + math.sin(geo.pitch) * geo.height
                u = geo.cx - geo.fx * left / np.where(inside, ahead, 1.0)
                ok |= inside & (u >= 0.0) & (u < width)
            return ok

        # Position-only detections need no ego speed to start a track (radar ones do).
        self.tracker.step(stamp_ns, dets, birth=True, covers=covers, veto=veto)
        g = self.geometry
        eye = (ox + c * g.x - s * g.y, oy + s * g.x + c * g.y)  # the front camera in odom
        if p.camera_confirm_score > 0.0:
            self._confirm_sure_births(stamp_ns, eye)
        if p.camera_static_floor > 0.0:  # along the front camera's lines of sight
            self._floor_static_tracks(*eye)
        if moves and p.camera_reanchor_misses > 0:
            rows, cols = moves[0]  # (the rows of the tracks as they are after the step)
            tr = self.tracker
            due = tr.misses[rows] >= p.camera_reanchor_misses
            rows, first = np.unique(rows[due], return_index=True)  # one detection a track
            tr.reanchor(rows, dets, cols[due][first], stamp_ns)

    def camera_late(
        self,
        stamp_ns: int,
        cams: list[CameraDetection] | None,
        width: int,
        extra: Sequence[tuple[CameraGeometry, list[CameraDetection]]] = (),
    ) -> bool:
        """The detections of the camera frame at ``stamp_ns``, fused earlier with
        ``camera_later`` (None: it has none, torn or failed), taken at their frame's time: the
        tracker goes back to that frame, takes them, and tracks the radar scans since again (an
        out-of-sequence measurement handled exactly: the same tracks as had they come in time;
        only the outputs published meanwhile lacked them). False when no frame of that time is
        waiting (one fused later replaced it, or the output is not ``tracks``)."""
        pending = self._pending
        if pending is None or pending.stamp_ns != stamp_ns:
            return False
        self._pending = None
        if cams is None:
            return True
        latest = self._tracked_scan_ns
        self.tracker.restore(pending.tracker)
        self._tracked_scan_ns = pending.tracked_scan_ns
        self.camera_detections = cams
        self._track_camera(stamp_ns, cams, width, extra)
        for scan_ns, dets, birth in pending.steps:
            self.tracker.step(scan_ns, dets, birth=birth)
        self._tracked_scan_ns = latest
        self.late_applied += 1
        self.late_replayed += len(pending.steps)
        self._camera_fresh = True
        return True

    def _confirm_sure_births(self, stamp_ns: int, eye: tuple[float, float]) -> None:
        """``camera_confirm_score``: the tracks a camera detection started at ``stamp_ns``
        with at least that score, within ``camera_confirm_range_m`` of the camera at ``eye``
        (odom), confirmed."""
        p, tr = self.p, self.tracker
        rows = np.flatnonzero(
            ~tr.is_confirmed
            & (tr.born == stamp_ns)
            & (tr.hits == 1)
            & (tr.sources == SOURCE_CAMERA)
            & (tr.scores[:, SOURCE_CAMERA] >= p.camera_confirm_score)
        )
        near = np.hypot(tr.x[rows, 0] - eye[0], tr.x[rows, 1] - eye[1])
        tr.confirm(rows[near <= p.camera_confirm_range_m])

    def _floor_static_tracks(self, ex: float, ey: float) -> None:
        """``camera_static_floor`` on the confirmed static tracks only cameras have seen,
        along the line of sight from the camera at (``ex``, ``ey``) in odom."""
        p, tr = self.p, self.tracker
        rows = np.flatnonzero(
            tr.is_confirmed
            & (np.argmax(tr.votes, axis=1) == CLASS_STATIC)
            & (tr.sources == SOURCE_CAMERA)
        )
        if not len(rows):
            return
        rng = np.hypot(tr.x[rows, 0] - ex, tr.x[rows, 1] - ey)
        far = rng > p.camera_static_floor_range_m
        rows, rng = rows[far], rng[far]
        tr.floor_along(rows, (ex, ey), p.camera_static_floor * p.camera_along_std(rng))

    def on_a_track_s_ray(
        self, block: npt.NDArray[np.float64], eyes: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.bool_]:
        """Which camera detections (rows of a detections block, each seen from its camera at
        ``eyes``, odom) lie on the line of sight of a confirmed track of their class, at a range
        within ``camera_ray_ratio`` of its range (see that parameter)."""
        out: npt.NDArray[np.bool_] = self.ray_tracks(block, eyes)[0] >= 0
        return out

    def ray_tracks(
        self, block: npt.NDArray[np.float64], eyes: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Per camera detection (as :meth:`on_a_track_s_ray`), the tracker row of the confirmed
        track of its class on whose line of sight it lies within ``camera_ray_ratio`` (the
        nearest in range ratio), and of such a track farther than the detection (the one a
        ``camera_reanchor_misses`` move may take); -1: none."""
        p, tr = self.p, self.tracker
        conf = np.flatnonzero(tr.is_confirmed)
        if p.camera_ray_ratio <= 1.0 or not len(conf) or not len(block):
            none = np.full(len(block), -1, np.int64)
            return none, none.copy()
        cls = np.argmax(tr.votes[conf], axis=1)
        dv = block[:, tl.DXY : tl.DXY + 2] - eyes  # (n, 2)
        tv = tr.x[conf, None, :2] - eyes[None, :, :]  # (m, n, 2)
        d_rng = np.hypot(dv[:, 0], dv[:, 1])
        t_rng = np.maximum(np.hypot(tv[..., 0], tv[..., 1]), 0.1)
        turn = np.arctan2(dv[:, 1], dv[:, 0]) - np.arctan2(tv[..., 1], tv[..., 0])
        turn = (turn + math.pi) % (2.0 * math.pi) - math.pi
        width = _SIZES[np.minimum(cls, len(_SIZES) - 1), 1]  # (class ids past the table: its last)
        tol = 3.0 * p.camera_bearing_std + 0.5 * width[:, None] / t_rng
        q = d_rng / t_rng
        hit = (
            (np.abs(turn) <= tol)
            & (q <= p.camera_ray_ratio)
            & (q * p.camera_ray_ratio >= 1.0)
            & (block[:, tl.DCLS] == cls[:, None])
        )
        off = np.abs(np.log(np.maximum(q, 1e-9)))
        rows = []
        for ok in (hit, hit & (q < 1.0)):
            near = np.where(ok, off, np.inf).argmin(axis=0)
            rows.append(np.where(ok.any(axis=0), conf[near], -1))
        return rows[0], rows[1]

    def fuse(
        self,
        frame: AlignedFrame,
        network_output: Any = None,
        input_hw: tuple[int, int] = (384, 640),
        *,
        detections: list[CameraDetection] | None = None,
        extra: Sequence[tuple[CameraGeometry, list[CameraDetection]]] = (),
        camera_later: bool = False,
    ) -> FusedFrame:
        """One frame; ``network_output`` is the model's output for the decoder (or None), or
        ``detections`` its decoded detections (a caller timing the decoder on its own);
        ``extra``: the detections of the extra cameras' frames of the same time, each with its
        camera (:meth:`FusionParams.extra_geometries`). ``camera_later``: the frame's detections
        come after it is fused (the network runs beside the fusion): the frame is fused without
        them, and :meth:`camera_late` takes them at the frame's time."""
        if network_output is not None and self.decoder is None:
            raise ValueError("a network output needs the model's decoder (set_decoder)")
        self._advance_ego(frame)
        cams: list[CameraDetection] | None = None
        if detections is not None:
            cams = self.camera_detections = detections
        elif network_output is not None and self.decoder is not None:
            cams = decode(network_output, self.decoder, input_hw)
            self.camera_detections = cams
        objects: list[FusedObject] = []
        radar_dt = 0
        radar = next((r for r in frame.radar.values() if r is not None), None)
        pos_cov: list[tuple[float, float, float]] = []
        vel_cov: list[tuple[float, float, float]] = []
        yaw_rates: list[float] = []
        vel_std: list[float] = []
        existence: list[float] = []
        ages: list[float] = []
        if radar is not None and radar.scan_stamp_ns != self._last_scan_ns:
            self._last_scan_ns = radar.scan_stamp_ns
            if self.p.output == 'tracks':
                self._track(radar.scan_stamp_ns, self._scans.get(radar.scan_stamp_ns, []))
        if self.p.output == 'tracks' and cams is not None:
            self._pending = None  # (detections in time: a late frame's would come out of order)
            self._track_camera(frame.stamp_ns, cams, input_hw[1], extra)
            self._camera_fresh = True
        if camera_later and self.p.output == 'tracks':
            self._pending = _PendingCamera(
                frame.stamp_ns, self.tracker.snapshot(), self._tracked_scan_ns
            )
        fresh, self._camera_fresh = self._camera_fresh, False
        if self.p.output == 'tracks':
            radar_dt = radar.dt_ns if radar is not None else 0
            e = self.ego
            c, s = math.cos(e.yaw), math.sin(e.yaw)
            tracks = self.tracker.confirmed_at(frame.stamp_ns)
            st = tracks.x
            dx, dy = st[:, 0] - e.x, st[:, 1] - e.y
            xs, ys = c * dx + s * dy, -s * dx + c * dy
            vxs, vys = c * st[:, 2] + s * st[:, 3], -s * st[:, 2] + c * st[:, 3]
            pos_std = np.sqrt(np.maximum(tracks.P[:, 0, 0], tracks.P[:, 1, 1]))
            vel_std = np.sqrt(np.maximum(tracks.P[:, 2, 2], tracks.P[:, 3, 3])).tolist()
            pos_cov = _rotated_cov(tracks.P[:, 0:2, 0:2], c, s)
            vel_cov = _rotated_cov(tracks.P[:, 2:4, 2:4], c, s)
            yaw_rates = self._heading_rates(frame.stamp_ns, tracks.id, st[:, 2], st[:, 3])
            existence = tracks.existence.tolist()
            ages = ((frame.stamp_ns - tracks.born_ns) / 1e9).tolist()
            cam_scores = tracks.scores[:, SOURCE_CAMERA]
            for i, tid in enumerate(tracks.id.tolist()):
                x, y, vx, vy = float(xs[i]), float(ys[i]), float(vxs[i]), float(vys[i])
                cls = int(tracks.cls[i])
                length, width = DEFAULT_SIZE.get(cls, (1.0, 1.0))
                tl, tw = float(tracks.size[i, 0]), float(tracks.size[i, 1])
                if math.isfinite(tl) and tl > 0:
                    length = tl
                if math.isfinite(tw) and tw > 0:
                    width = tw
                yaw = math.atan2(vy, vx) if math.hypot(vx, vy) > 1.0 else 0.0
                score = float(cam_scores[i]) if fresh else math.nan
                sources = int(tracks.sources[i])
                objects.append(
                    FusedObject(
                        tid,
                        cls,
                        float(tracks.cls_prob[i]),
                        x,
                        y,
                        yaw,
                        length,
                        width,
                        vx,
                        vy,
                        float(pos_std[i]),
                        score,
                        sources,
                    )
                )
        elif radar is not None:
            radar_dt = radar.dt_ns
            scan = self._scans.get(radar.scan_stamp_ns, [])
            c, s = self._radar_rot
            p = self.p
            for o, moved in zip(scan, radar.points, strict=False):
                if not math.isnan(o.prob_exist) and o.prob_exist < p.min_probability:
                    continue
                rx, ry = float(moved[0]), float(moved[1])  # moved to the frame time
                x, y = p.radar_x + c * rx - s * ry, p.radar_y + s * rx + c * ry
                vx = c * o.vx - s * o.vy + self.ego.v  # over ground, in base_link axes
                vy = s * o.vx + c * o.vy
                cls = ARS408_CLASSES.get(o.ars_class, CLASS_UNKNOWN)
                length, width = DEFAULT_SIZE[cls]
                if math.isfinite(o.length) and o.length > 0:
                    length = o.length
                if math.isfinite(o.width) and o.width > 0:
                    width = o.width
                yaw = o.orientation + p.radar_yaw if math.isfinite(o.orientation) else 0.0
                std = (
                    max(o.rms_x, o.rms_y)
                    if math.isfinite(o.rms_x) and math.isfinite(o.rms_y)
                    else p.position_std_m
                )
                score, sources = math.nan, 1  # untracked radar objects: the radar's alone
                prob = o.prob_exist if math.isfinite(o.prob_exist) else 1.0
                objects.append(
                    FusedObject(
                        o.id, cls, prob, x, y, yaw, length, width, vx, vy, std, score, sources
                    )
                )
        self._mark_emergency(objects)
        audio_dbfs = math.nan
        if frame.audio is not None and frame.audio.size:
            a = np.asarray(frame.audio, dtype=np.float32)
            rms = float(np.sqrt(np.mean(a * a)))
            audio_dbfs = 20 * math.log10(rms) if rms > 1e-9 else -180.0
        tracked = self.p.output == 'tracks'
        return FusedFrame(
            frame.stamp_ns,
            objects,
            dataclasses.replace(self.ego),
            audio_dbfs,
            frame.missing,
            radar_dt,
            vel_std,
            existence,
            ages,
            pos_cov if tracked else [],
            vel_cov if tracked else [],
            yaw_rates if tracked else [],
        )

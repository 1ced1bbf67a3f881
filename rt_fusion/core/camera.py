"""Camera capture without ROS: V4L2, GStreamer pipelines and video files through OpenCV, decoding
each frame straight into a caller-provided buffer (a shared-memory slot).

Stamps: a V4L2 buffer's timestamp (``CAP_PROP_POS_MSEC``) is CLOCK_MONOTONIC at the start of the
frame; a file's is the container time of the frame. Each read returns that raw stamp and the
host receive time, and the camera node maps the raw stamps onto the host timeline with a
ClockMapper. Files can be paced by their container timestamps (as a camera would deliver them) or
read as fast as possible.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from rt_fusion.core.errors import RtFusionError

SOURCES = ('v4l2', 'gstreamer', 'file')
UNDISTORT_CRITERIA = (cv2.TERM_CRITERIA_COUNT, 20, 0.0)  # undistort_points: 20 iterations


class CameraError(RtFusionError):
    """A camera source cannot be opened or stopped delivering frames."""


@dataclasses.dataclass(frozen=True, slots=True)
class FrameRead:
    """What one read gave."""

    index: int  # frames delivered by this source so far, from 0
    hw_stamp_ns: int  # the source's own stamp (V4L2 monotonic time, container time)
    host_ns: int  # host time when the frame was read
    gap: int  # frames the source skipped since the previous read (sequence gap), >= 0


class CameraSource:
    """One camera behind OpenCV; see the module docstring.

    Args:
        source: ``v4l2``, ``gstreamer`` or ``file``.
        target: device (path like /dev/video0 or an index) / pipeline string / file path.
        width, height, fps: what to ask of a V4L2 device (0: its default).
        fourcc: pixel format to ask of a V4L2 device ('MJPG', 'YUYV'; '' default).
        pace: for files, deliver at the container timestamps (True) or as fast as possible.
        loop: for files, start again at the end.
        clock: host clock [ns] (injectable for tests); default time.time_ns.
        sleep: sleeps [s]; default time.sleep.
    """

    def __init__(
        self,
        source: str,
        target: str,
        *,
        width: int = 0,
        height: int = 0,
        fps: float = 0.0,
        fourcc: str = '',
        pace: bool = True,
        loop: bool = False,
        clock: Callable[[], int] = time.time_ns,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if source not in SOURCES:
            raise CameraError(f'camera source {source!r} not in {SOURCES}')
        self.source, self.target = source, target
        self.pace, self.loop = pace, loop
        self._clock, self._sleep = clock, sleep
        self.cap = self._open(width, height, fps, fourcc)
        self.width = int(self.cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(self.cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        self.fps = float(self.cap.get(cv2.CAP_PROP_FPS)) or fps or 30.0
        self.frames = 0
        self._first: tuple[int, int] | None = None  # (hw stamp, host time) of frame 0 (pacing)
        self._last_hw: int | None = None
        self._loop_offset_ns = 0
        self.skipped = 0

    def _open(self, width: int, height: int, fps: float, fourcc: str) -> Any:
        if self.source == 'file':
            cap = cv2.VideoCapture(self.target)
        elif self.source == 'gstreamer':
            cap = cv2.VideoCapture(self.target, cv2.CAP_GSTREAMER)
        else:
            index: int | str = int(self.target) if self.target.isdigit() else self.target
            cap = cv2.VideoCapture(index, cv2.CAP_V4L2)
            if fourcc:
                cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*fourcc[:4].ljust(4)))
            if width:
                cap.set(cv2.CAP_PROP_FRAME_WIDTH, width)
            if height:
                cap.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
            if fps:
                cap.set(cv2.CAP_PROP_FPS, fps)
        if not cap.isOpened():
            hint = {
                'v4l2': 'is the device there (ls /dev/video*) and not in use?',
                'gstreamer': 'is OpenCV built with GStreamer, and does the pipeline end in '
                'appsink?',
                'file': 'does the file exist and can FFmpeg read it?',
            }[self.source]
            raise CameraError(f'cannot open {self.source} camera {self.target!r}: {hint}')
        return cap

    @property
    def shape(self) -> tuple[int, int, int]:
        """(height, width, 3) of the frames (BGR, as OpenCV delivers them)."""
        return (self.height, self.width, 3)

    def read_into(self, out: npt.NDArray[np.uint8]) -> FrameRead | None:
        """Decodes the next frame into ``out``; None at the end of a file (without loop).

        Raises:
            CameraError: the device stopped delivering frames.
        """
        ok, img = self.cap.read(image=out)
        if not ok and self.source == 'file' and self.loop:
            self._loop_offset_ns = (self._last_hw or 0) + round(1e9 / self.fps)
            self.cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, img = self.cap.read(image=out)
        if not ok:
            if self.source == 'file':
                return None
            raise CameraError(f'{self.source} camera {self.target!r} stopped delivering frames')
        if img is not out:  # OpenCV had to allocate (size changed): keep the contract
            if img.shape != out.shape:
                raise CameraError(f'camera delivers {img.shape}, the buffer is {out.shape}')
            np.copyto(out, img)
        hw = round(self.cap.get(cv2.CAP_PROP_POS_MSEC) * 1e6) + self._loop_offset_ns
        gap = 0
        if self._last_hw is not None and self.fps > 0:
            # A sequence gap shows as a stamp step well over one frame period.
            gap = max(0, round((hw - self._last_hw) * self.fps / 1e9) - 1)
            self.skipped += gap
        self._last_hw = hw
        if self.source == 'file' and self.pace:
            if self._first is None:
                self._first = (hw, self._clock())
            due = self._first[1] + (hw - self._first[0])
            delay = (due - self._clock()) / 1e9
            if delay > 0:
                self._sleep(delay)
        read = FrameRead(self.frames, hw, self._clock(), gap)
        self.frames += 1
        return read

    def close(self) -> None:
        """Releases the device (idempotent)."""
        if self.cap is not None:
            self.cap.release()
            self.cap = None


def undistort_points(
    uv: npt.ArrayLike,
    k: tuple[float, float, float, float],
    d: tuple[float, ...],
) -> npt.NDArray[np.float64]:
    """Image pixels (N, 2) of a plumb_bob camera (``k`` = fx, fy, cx, cy; ``d`` = k1, k2, p1, p2,
    k3, the camera_info D) -> where a pinhole camera with the same K sees them (N, 2). OpenCV's
    ``undistortPoints`` with 20 iterations (its own loop in C++: ~12 µs for a frame's
    detections, against ~300 µs for the same iteration in numpy); a zero ``d`` returns the
    input."""
    uv = np.asarray(uv, np.float64).reshape(-1, 2)
    if not any(d) or not len(uv):
        return uv.copy()
    fx, fy, cx, cy = k
    kk = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
    dd = np.array((tuple(d) + (0.0,) * 5)[:5], np.float64)
    out = cv2.undistortPoints(
        uv.reshape(-1, 1, 2), kk, dd, R=None, P=kk, criteria=UNDISTORT_CRITERIA
    )
    return np.asarray(out, np.float64).reshape(-1, 2)


def load_camera_info(path: str) -> dict[str, Any]:
    """A calibration YAML in the standard camera_info format (camera_calibration's output).

    Returns a dict with width, height, distortion_model, d, k, r, p.

    Raises:
        CameraError: missing file or field, or matrices of the wrong size.
    """
    import yaml  # noqa: PLC0415

    try:
        with open(path) as fh:
            raw = yaml.safe_load(fh)
    except OSError as err:
        raise CameraError(f'calibration file {path!r}: {err}') from err
    try:
        info = {
            'width': int(raw['image_width']),
            'height': int(raw['image_height']),
            'distortion_model': str(raw.get('distortion_model', 'plumb_bob')),
            'd': [float(v) for v in raw['distortion_coefficients']['data']],
            'k': [float(v) for v in raw['camera_matrix']['data']],
            'r': [
                float(v)
                for v in raw.get('rectification_matrix', {'data': [1, 0, 0, 0, 1, 0, 0, 0, 1]})[
                    'data'
                ]
            ],
            'p': [float(v) for v in raw['projection_matrix']['data']],
        }
    except (KeyError, TypeError, ValueError) as err:
        raise CameraError(f'calibration file {path!r}: missing or bad field ({err})') from err
    for key, n in (('k', 9), ('r', 9), ('p', 12)):
        values = info[key]
        assert isinstance(values, list)
        if len(values) != n:
            raise CameraError(
                f'calibration file {path!r}: {key} has {len(values)} values, needs {n}'
            )
    return info


#: base_link-style camera axes (x forward, y left, z up; REP-103, the calibration's ``camera``
#: frame) -> the optical axes a lens model takes (x right, y down, z forward; REP-103's
#: ``_optical`` frames).
BODY_TO_OPTICAL = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])
NEAR_M = 0.5  # corners nearer the camera than this along its axis are clipped off a box


def box_corners(boxes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The 8 corners (N, 8, 3) of boxes (N, 7: x, y, z of the bottom centre, length, width,
    height, yaw) standing on their bottom face."""
    b = np.asarray(boxes, np.float64).reshape(-1, 7)
    sx = np.array([1, -1, -1, 1, 1, -1, -1, 1]) * 0.5
    sy = np.array([1, 1, -1, -1, 1, 1, -1, -1]) * 0.5
    sz = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float64)
    lx, ly = b[:, 3:4] * sx, b[:, 4:5] * sy
    c, s = np.cos(b[:, 6:7]), np.sin(b[:, 6:7])
    x = b[:, 0:1] + c * lx - s * ly
    y = b[:, 1:2] + s * lx + c * ly
    z = b[:, 2:3] + b[:, 5:6] * sz
    return np.stack([x, y, z], axis=2)


def image_boxes(
    boxes: npt.ArrayLike,
    mount: tuple[npt.ArrayLike, npt.ArrayLike],
    k: npt.ArrayLike,
    d: npt.ArrayLike,
    size: tuple[int, int],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Where 3D boxes (:func:`box_corners`' layout, in the base frame) fall in a camera's image:
    the rectangle around each box's projected corners (N, 4: u0, v0, u1, v1, clipped to the
    ``size`` = (width, height) image) and which boxes show (in front of the camera and inside
    the image). ``mount`` is the camera frame in the base frame (translation, rotation matrix
    3x3: its columns the camera's body axes), ``k`` the 3x3 camera matrix, ``d`` the plumb_bob
    distortion (camera_info D). Corners behind or nearer than :data:`NEAR_M` are left out."""
    corners = box_corners(boxes)
    n = corners.shape[0]
    out, shown = np.zeros((n, 4)), np.zeros(n, bool)
    if not n:
        return out, shown
    t, r = np.asarray(mount[0], np.float64), np.asarray(mount[1], np.float64).reshape(3, 3)
    optical = (corners.reshape(-1, 3) - t) @ r @ BODY_TO_OPTICAL.T  # base -> camera -> optical
    depth = optical[:, 2]
    ray = optical[:, :2] / np.where(depth > 1e-6, depth, 1e-6)[:, None]
    # Beyond the lens's field (|ray| > 2: ~63 deg off axis) the distortion polynomial folds
    # back: such corners are drawn at that edge of the field instead.
    ray *= np.minimum(1.0, 2.0 / np.maximum(np.linalg.norm(ray, axis=1), 1e-9))[:, None]
    uv, _ = cv2.projectPoints(
        np.column_stack([ray, np.ones(len(ray))]).reshape(-1, 1, 3),
        np.zeros(3),
        np.zeros(3),
        np.asarray(k, np.float64).reshape(3, 3),
        np.asarray(d, np.float64).ravel(),
    )
    uv = uv.reshape(n, 8, 2)
    front = depth.reshape(n, 8) > NEAR_M
    w, h = size
    for i in range(n):
        if not front[i].any():
            continue
        p = uv[i][front[i]]
        u0, v0 = np.clip(p.min(axis=0), 0, (w, h))
        u1, v1 = np.clip(p.max(axis=0), 0, (w, h))
        if u1 - u0 >= 1.0 and v1 - v0 >= 1.0:
            out[i], shown[i] = (u0, v0, u1, v1), True
    return out, shown

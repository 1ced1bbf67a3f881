"""A vehicle's calibration file: where each sensor is mounted on the vehicle (ROS-free).

One YAML per vehicle (``config/calibration/``), 6-DoF mountings from ``base_frame`` (REP-103:
x forward, y left, z up; roll, pitch, yaw about x, y, z, applied yaw first) to each sensor frame::

    base_frame: base_link
    sensors:
      camera: {x: 1.8, y: 0.0, z: 1.4, roll: 0.0, pitch: 0.0, yaw: 0.0}  # [m], [rad]
      radar:  {x: 3.6, y: 0.0, z: 0.5, yaw: 0.0}   # an angle left out is 0

The graph publishes it on ``/tf_static`` (``calibration_node``); :func:`fusion_mounting` gives the
part of it the fusion core uses (the radar's x, y, yaw; the camera's x, y, height, pitch and
yaw; the IMU's roll, pitch and yaw), and refuses a mounting the fusion cannot use (a camera
rolled about its axis), naming it, rather than fuse with it ignored.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import yaml

from rt_fusion.core import rotation
from rt_fusion.core.errors import RtFusionError

AXES = ('x', 'y', 'z', 'roll', 'pitch', 'yaw')
FRAME = re.compile(r'[a-z][a-z0-9_]*')


class CalibrationError(RtFusionError):
    """A calibration file that cannot be used: the file and what is wrong, by name."""


@dataclasses.dataclass(frozen=True)
class Mounting:
    """A sensor frame relative to the base frame: position [m] and roll, pitch, yaw [rad]."""

    frame: str
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0
    roll: float = 0.0
    pitch: float = 0.0
    yaw: float = 0.0

    def quaternion(self) -> rotation.Quat:
        """(w, x, y, z) of the rotation R = Rz(yaw) Ry(pitch) Rx(roll)."""
        return rotation.from_euler(self.roll, self.pitch, self.yaw)


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A vehicle's sensor mountings, from its base frame."""

    base_frame: str
    sensors: tuple[Mounting, ...]
    path: str = ''

    def mounting(self, frame: str) -> Mounting:
        """The mounting of ``frame``.

        Raises:
            CalibrationError: the file has no such sensor.
        """
        for m in self.sensors:
            if m.frame == frame:
                return m
        raise CalibrationError(f'{self.path}: no sensor {frame!r} (it has {self.frames()})')

    def frames(self) -> list[str]:
        """The sensor frames, in the file's order."""
        return [m.frame for m in self.sensors]


def parse(doc: Any, path: str = '<calibration>') -> Calibration:
    """A calibration from its YAML document.

    Raises:
        CalibrationError: a missing or unknown key, a bad frame name, a value that is not a
            finite number; the message names it.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get('sensors'), dict):
        raise CalibrationError(f'{path}: want a mapping with base_frame and sensors')
    unknown = sorted(set(doc) - {'base_frame', 'sensors'})
    if unknown:
        raise CalibrationError(f'{path}: unknown keys {unknown} (base_frame, sensors)')
    base = doc.get('base_frame', 'base_link')
    if not isinstance(base, str) or not FRAME.fullmatch(base):
        raise CalibrationError(f'{path}: base_frame {base!r}: a frame name of [a-z][a-z0-9_]*')
    sensors = []
    for frame, values in doc['sensors'].items():
        where = f'{path}: sensors.{frame}'
        if not isinstance(frame, str) or not FRAME.fullmatch(frame) or frame == base:
            raise CalibrationError(f'{where}: a frame name of [a-z][a-z0-9_]*, not the base')
        if not isinstance(values, dict):
            raise CalibrationError(f'{where}: want a mapping of {", ".join(AXES)}')
        bad = sorted(set(values) - set(AXES))
        if bad:
            raise CalibrationError(f'{where}: unknown keys {bad} ({", ".join(AXES)})')
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CalibrationError(f'{where}.{key}: {value!r} is not a number')
            if not math.isfinite(value):
                raise CalibrationError(f'{where}.{key}: {value} is not finite')
        sensors.append(Mounting(frame, **{k: float(v) for k, v in values.items()}))
    if not sensors:
        raise CalibrationError(f'{path}: no sensors')
    return Calibration(base, tuple(sensors), path)


def load(path: str | Path) -> Calibration:
    """A calibration file.

    Raises:
        CalibrationError: it cannot be read, or :func:`parse` refuses it.
    """
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise CalibrationError(f'{path}: {err}') from err
    return parse(doc, str(path))


#: What the fusion core takes of each sensor's mounting; any other axis must be 0, but for the
#: radar's height (its objects are on the road plane: a height changes none of them), the IMU's
#: position (its turn rates are the body's anywhere on it; its forward acceleration, which the
#: speed filter takes, changes by the lever arm's centripetal part only) and the microphone's
#: (the hearing has no direction). A camera rolled about its axis is refused.
FUSION_AXES = {'radar': {'x': 'radar_x', 'y': 'radar_y', 'yaw': 'radar_yaw'},
               'camera': {'x': 'camera_x', 'y': 'camera_y', 'z': 'camera_height',
                          'pitch': 'camera_pitch', 'yaw': 'camera_yaw'},
               'imu': {'roll': 'imu_roll', 'pitch': 'imu_pitch', 'yaw': 'imu_yaw'}}  # fmt: skip
FUSION_FREE = {'radar': {'z'}, 'imu': {'x', 'y', 'z'}, 'microphone': {'x', 'y', 'z'}}


def fusion_mounting(cal: Calibration) -> dict[str, float]:
    """The fusion parameters (``fusion.radar_x``, ...) the calibration sets.

    Raises:
        CalibrationError: a radar or camera mounting on an axis the fusion does not use yet.
    """
    out: dict[str, float] = {}
    for frame, used in {**FUSION_AXES, 'microphone': {}}.items():
        if frame not in cal.frames():
            continue
        m = cal.mounting(frame)
        for axis in AXES:
            value = getattr(m, axis)
            if axis in used:
                out[used[axis]] = value
            elif value != 0.0 and axis not in FUSION_FREE.get(frame, ()):
                raise CalibrationError(
                    f'{cal.path}: sensors.{frame}.{axis} = {value}: the fusion uses the '
                    f'{frame} mounting on {", ".join(used) or "none of its axes"} only'
                )
    return out

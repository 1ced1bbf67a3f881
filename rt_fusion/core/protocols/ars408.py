"""Continental ARS408-21 radar on CAN: decoding of object and cluster cycles, and configuration.

Frames are decoded with cantools from ``ars408.dbc`` (beside this file), which the project wrote
from the sensor's public message layout for sensor id 0; a sensor with id *k* sends and receives
every message at ``ID + 0x10 * k``.

A measurement **cycle** starts with a status frame (0x60A objects / 0x600 clusters) that gives
the number of targets and the measurement counter, followed by one general frame per target
(0x60B / 0x701), then, when the sensor is configured to send them, one quality frame per
target (0x60C / 0x702) and one extended frame per object (0x60D). :class:`Ars408Decoder` emits
a cycle as soon as every frame it announced has arrived, or flags it ``complete=False`` when the
next cycle starts first. Malformed frames (wrong length) are counted and skipped; frames of other
sensors or other devices on the bus are counted as foreign and ignored.

The decoder is a pure function of the frames and their times: it never reads a clock.
"""

from __future__ import annotations

import dataclasses
import math
from functools import cache
from pathlib import Path
from typing import Any, cast

import cantools

from rt_fusion.core.errors import ParameterError, RtFusionError

DBC_PATH = Path(__file__).with_name('ars408.dbc')
ID_STEP = 0x10

RADAR_CFG = 0x200
RADAR_STATE = 0x201
SPEED_INFO = 0x300
YAW_RATE_INFO = 0x301
CLUSTER_STATUS = 0x600
OBJ_STATUS = 0x60A
OBJ_GENERAL = 0x60B
OBJ_QUALITY = 0x60C
OBJ_EXTENDED = 0x60D
VERSION_ID = 0x700
CLUSTER_GENERAL = 0x701
CLUSTER_QUALITY = 0x702

OUTPUT_TYPES = {'none': 0, 'objects': 1, 'clusters': 2}
DYN_PROP = (
    'moving',
    'stationary',
    'oncoming',
    'stationary_candidate',
    'unknown',
    'crossing_stationary',
    'crossing_moving',
    'stopped',
)
OBJ_CLASS = ('point', 'car', 'truck', 'pedestrian', 'motorcycle', 'bicycle', 'wide', 'reserved')
# Obj_ProbOfExist code -> upper bound of the probability of existence.
PROB_OF_EXIST = (0.0, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0)


class Ars408Error(RtFusionError):
    """The radar refused or misreported its configuration."""


def rms_bound(code: int, lowest: float, highest: float) -> float:
    """Upper bound of an rms value from its 5-bit code (0..30 log-spaced, 31 invalid -> NaN).

    The sensor's tables run from ``lowest`` (code 0) to ``highest`` (code 30) in equal ratios:
    distances and velocities 0.005 to 10 (m, m/s, m/s²), orientation 0.005 to 180 deg.
    """
    if code >= 31:
        return math.nan
    return float(lowest * (highest / lowest) ** (code / 30.0))


@cache
def load_database(sensor_id: int = 0) -> cantools.database.can.Database:
    """The ARS408 database with every frame ID shifted for ``sensor_id`` (0..7)."""
    if not 0 <= sensor_id <= 7:
        raise ParameterError('sensor_id', sensor_id, 'ARS408 sensor ids are 0..7')
    db = cantools.database.load_file(str(DBC_PATH))
    if not isinstance(db, cantools.database.can.Database):
        raise TypeError(f'{DBC_PATH} is not a CAN database')
    for message in db.messages:
        message.frame_id += ID_STEP * sensor_id
    db.refresh()
    return db


@dataclasses.dataclass(slots=True)
class RadarTarget:
    """One object (object mode) or cluster (cluster mode) of a cycle, in SI units.

    Position and velocity are relative to the sensor (x forward, y left); rms values are the
    sensor's upper bounds (NaN when invalid or not sent); NaN also marks fields of frames the
    sensor did not send (quality or extended information switched off).
    """

    id: int
    x: float  # [m]
    y: float  # [m]
    vx: float  # [m/s]
    vy: float  # [m/s]
    rcs: float  # [dBm²]
    dyn_prop: int
    x_rms: float = math.nan
    y_rms: float = math.nan
    vx_rms: float = math.nan
    vy_rms: float = math.nan
    ax_rms: float = math.nan
    ay_rms: float = math.nan
    orientation_rms: float = math.nan  # [rad]
    prob_exist: float = math.nan  # [0, 1], upper bound of the class
    meas_state: int = -1
    ax: float = math.nan  # [m/s²]
    ay: float = math.nan  # [m/s²]
    obj_class: int = -1
    orientation: float = math.nan  # [rad]
    length: float = math.nan  # [m]
    width: float = math.nan  # [m]
    # Cluster mode only
    pdh0: int = -1
    ambig_state: int = -1
    invalid_state: int = -1
    has_quality: bool = False
    has_extended: bool = False


@dataclasses.dataclass(slots=True)
class RadarCycle:
    """One measurement cycle.

    Attributes:
        kind: ``'objects'`` or ``'clusters'``.
        meas_counter: the sensor's measurement counter (16 bits, wraps).
        stamp_ns: time of the cycle's first frame (as given to :meth:`Ars408Decoder.feed`).
        last_ns: time of the frame that completed (or ended) the cycle.
        expected: targets announced by the status frame.
        targets: targets in the order of their general frames.
        complete: every announced frame arrived before the next cycle started.
    """

    kind: str
    meas_counter: int
    stamp_ns: int
    last_ns: int
    expected: int
    targets: list[RadarTarget]
    complete: bool = False
    interface_version: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class RadarState:
    """Decoded 0x201 RadarState (the sensor's echo of its configuration and its errors)."""

    max_distance_m: float
    sensor_id: int
    output_type: int
    radar_power: int
    send_quality: bool
    send_ext_info: bool
    sort_index: int
    rcs_threshold: int
    ctrl_relay: bool
    motion_rx_state: int
    nvm_read_ok: bool
    nvm_write_ok: bool
    errors: tuple[str, ...]  # names of the active error flags

    @classmethod
    def from_signals(cls, s: dict[str, Any]) -> RadarState:
        """From the decoded signals of a RadarState frame."""
        flags = (
            'Persistent_Error',
            'Temporary_Error',
            'Temperature_Error',
            'Voltage_Error',
            'Interference',
        )
        return cls(
            max_distance_m=float(s['RadarState_MaxDistanceCfg']),
            sensor_id=int(s['RadarState_SensorID']),
            output_type=int(s['RadarState_OutputTypeCfg']),
            radar_power=int(s['RadarState_RadarPowerCfg']),
            send_quality=bool(s['RadarState_SendQualityCfg']),
            send_ext_info=bool(s['RadarState_SendExtInfoCfg']),
            sort_index=int(s['RadarState_SortIndex']),
            rcs_threshold=int(s['RadarState_RCS_Threshold']),
            ctrl_relay=bool(s['RadarState_CtrlRelayCfg']),
            motion_rx_state=int(s['RadarState_MotionRxState']),
            nvm_read_ok=bool(s['RadarState_NVMReadStatus']),
            nvm_write_ok=bool(s['RadarState_NVMwriteStatus']),
            errors=tuple(f for f in flags if s[f'RadarState_{f}']),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class RadarVersion:
    """Decoded 0x700 VersionID."""

    major: int
    minor: int
    patch: int
    extended_range: bool
    country_code: int


@dataclasses.dataclass(frozen=True)
class RadarConfig:
    """What the node asks of the sensor at start (0x200 RadarConfiguration)."""

    output_type: str = 'objects'
    max_distance_m: float = 196.0
    rcs_threshold: str = 'standard'  # or 'high_sensitivity'
    send_quality: bool = True
    send_ext_info: bool = True
    sensor_id: int = 0
    radar_power: int = 0  # 0 standard .. 3 -9 dB Tx gain
    sort_index: int = 1  # 0 none, 1 by range, 2 by RCS

    def mismatches(self, state: RadarState) -> list[str]:
        """Fields where the sensor's echo differs from this configuration."""
        want = {
            'output_type': OUTPUT_TYPES[self.output_type],
            'max_distance_m': float(round(self.max_distance_m / 2) * 2),
            'rcs_threshold': 1 if self.rcs_threshold == 'high_sensitivity' else 0,
            'send_quality': self.send_quality,
            'send_ext_info': self.send_ext_info,
            'sensor_id': self.sensor_id,
            'radar_power': self.radar_power,
            'sort_index': self.sort_index,
        }
        return [
            f'{k}: asked {v}, sensor reports {getattr(state, k)}'
            for k, v in want.items()
            if getattr(state, k) != v
        ]


@dataclasses.dataclass
class DecoderStats:
    """Counters of a decoder."""

    frames: int = 0
    cycles: int = 0
    incomplete: int = 0
    decode_errors: int = 0
    foreign: int = 0
    orphans: int = 0  # quality/extended frames of targets absent from the cycle
    stray: int = 0  # target frames outside a cycle, or beyond the announced count
    last_error: str = ''


Event = RadarCycle | RadarState | RadarVersion


class Ars408Decoder:
    """Turns a stream of CAN frames of one ARS408 into cycles, states and versions.

    Args:
        sensor_id: the sensor's id (frame IDs are shifted by 0x10 per id).
        expect_quality: quality frames (0x60C / 0x702) follow the general frames.
        expect_extended: extended frames (0x60D) follow in object mode.

    A RadarState frame updates the expectations to what the sensor reports.
    """

    def __init__(
        self, sensor_id: int = 0, *, expect_quality: bool = True, expect_extended: bool = True
    ) -> None:
        self.sensor_id = sensor_id
        self.db = load_database(sensor_id)
        self.base = ID_STEP * sensor_id
        self._messages = {m.frame_id - self.base: m for m in self.db.messages}
        self.expect_quality = expect_quality
        self.expect_extended = expect_extended
        self.stats = DecoderStats()
        self._cycle: RadarCycle | None = None
        self._by_id: dict[int, RadarTarget] = {}
        self._quality = 0
        self._extended = 0
        self.state: RadarState | None = None
        self.version: RadarVersion | None = None

    # -- input ---------------------------------------------------------------------------------

    def feed(self, frame_id: int, data: bytes, stamp_ns: int) -> list[Event]:
        """Decodes one frame; returns what it completed (often nothing)."""
        self.stats.frames += 1
        base_id = frame_id - self.base
        message = self._messages.get(base_id)
        if message is None:
            self.stats.foreign += 1
            return []
        if len(data) < message.length:
            self.stats.decode_errors += 1
            self.stats.last_error = (
                f'frame 0x{frame_id:03X} has {len(data)} bytes, '
                f'{message.name} needs {message.length}'
            )
            return []
        try:
            signals = cast('dict[str, Any]', message.decode(data, decode_choices=False))
        except (cantools.database.DecodeError, ValueError) as err:
            self.stats.decode_errors += 1
            self.stats.last_error = f'frame 0x{frame_id:03X}: {err}'
            return []
        return self._dispatch(base_id, signals, stamp_ns)

    def _dispatch(self, base_id: int, s: dict[str, Any], stamp_ns: int) -> list[Event]:
        if base_id in (OBJ_STATUS, CLUSTER_STATUS):
            out: list[Event] = []
            if self._cycle is not None:
                out.append(self._close(complete=False))
            if base_id == OBJ_STATUS:
                n, counter, kind = int(s['Obj_NofObjects']), int(s['Obj_MeasCounter']), 'objects'
                version = int(s['Obj_InterfaceVersion'])
            else:
                n = int(s['Cluster_NofClustersNear']) + int(s['Cluster_NofClustersFar'])
                counter, kind = int(s['Cluster_MeasCounter']), 'clusters'
                version = int(s['Cluster_InterfaceVersion'])
            self._cycle = RadarCycle(
                kind, counter, stamp_ns, stamp_ns, n, [], interface_version=version
            )
            self._by_id = {}
            self._quality = self._extended = 0
            if self._is_complete():
                out.append(self._close(complete=True))
            return out
        if base_id == RADAR_STATE:
            self.state = RadarState.from_signals(s)
            self.expect_quality = self.state.send_quality
            self.expect_extended = self.state.send_ext_info
            return [self.state]
        if base_id == VERSION_ID:
            self.version = RadarVersion(
                int(s['Version_MajorRelease']),
                int(s['Version_MinorRelease']),
                int(s['Version_PatchLevel']),
                bool(s['Version_ExtendedRange']),
                int(s['Version_CountryCode']),
            )
            return [self.version]
        cycle = self._cycle
        if cycle is None or not self._belongs(base_id, cycle.kind):
            self.stats.stray += 1
            return []
        cycle.last_ns = stamp_ns
        if base_id in (OBJ_GENERAL, CLUSTER_GENERAL):
            self._general(base_id, s, cycle)
        elif base_id in (OBJ_QUALITY, CLUSTER_QUALITY):
            self._quality_frame(base_id, s)
        elif base_id == OBJ_EXTENDED:
            self._extended_frame(s)
        else:  # config and ego-motion frames are ours (sent, or echoed by a loopback bus)
            self.stats.foreign += 1
            return []
        return [self._close(complete=True)] if self._is_complete() else []

    @staticmethod
    def _belongs(base_id: int, kind: str) -> bool:
        if kind == 'objects':
            return base_id in (OBJ_GENERAL, OBJ_QUALITY, OBJ_EXTENDED)
        return base_id in (CLUSTER_GENERAL, CLUSTER_QUALITY)

    def _general(self, base_id: int, s: dict[str, Any], cycle: RadarCycle) -> None:
        if len(cycle.targets) >= cycle.expected:
            self.stats.stray += 1
            return
        p = 'Obj' if base_id == OBJ_GENERAL else 'Cluster'
        target = RadarTarget(
            id=int(s[f'{p}_ID']),
            x=float(s[f'{p}_DistLong']),
            y=float(s[f'{p}_DistLat']),
            vx=float(s[f'{p}_VrelLong']),
            vy=float(s[f'{p}_VrelLat']),
            rcs=float(s[f'{p}_RCS']),
            dyn_prop=int(s[f'{p}_DynProp']),
        )
        cycle.targets.append(target)
        self._by_id[target.id] = target

    def _quality_frame(self, base_id: int, s: dict[str, Any]) -> None:
        p = 'Obj' if base_id == OBJ_QUALITY else 'Cluster'
        target = self._by_id.get(int(s[f'{p}_ID']))
        if target is None or target.has_quality:
            self.stats.orphans += 1
            return
        target.x_rms = rms_bound(int(s[f'{p}_DistLong_rms']), 0.005, 10.0)
        target.y_rms = rms_bound(int(s[f'{p}_DistLat_rms']), 0.005, 10.0)
        target.vx_rms = rms_bound(int(s[f'{p}_VrelLong_rms']), 0.005, 10.0)
        target.vy_rms = rms_bound(int(s[f'{p}_VrelLat_rms']), 0.005, 10.0)
        if p == 'Obj':
            target.ax_rms = rms_bound(int(s['Obj_ArelLong_rms']), 0.005, 10.0)
            target.ay_rms = rms_bound(int(s['Obj_ArelLat_rms']), 0.005, 10.0)
            target.orientation_rms = math.radians(
                rms_bound(int(s['Obj_Orientation_rms']), 0.005, 180.0)
            )
            target.prob_exist = PROB_OF_EXIST[int(s['Obj_ProbOfExist'])]
            target.meas_state = int(s['Obj_MeasState'])
        else:
            target.pdh0 = int(s['Cluster_PdH0'])
            target.ambig_state = int(s['Cluster_AmbigState'])
            target.invalid_state = int(s['Cluster_InvalidState'])
        target.has_quality = True
        self._quality += 1

    def _extended_frame(self, s: dict[str, Any]) -> None:
        target = self._by_id.get(int(s['Obj_ID']))
        if target is None or target.has_extended:
            self.stats.orphans += 1
            return
        target.ax = float(s['Obj_ArelLong'])
        target.ay = float(s['Obj_ArelLat'])
        target.obj_class = int(s['Obj_Class'])
        target.orientation = math.radians(float(s['Obj_OrientationAngle']))
        target.length = float(s['Obj_Length'])
        target.width = float(s['Obj_Width'])
        target.has_extended = True
        self._extended += 1

    def _is_complete(self) -> bool:
        cycle = self._cycle
        assert cycle is not None
        n = cycle.expected
        if len(cycle.targets) < n:
            return False
        if self.expect_quality and self._quality < n:
            return False
        return not (cycle.kind == 'objects' and self.expect_extended and self._extended < n)

    def _close(self, complete: bool) -> RadarCycle:
        cycle = self._cycle
        assert cycle is not None
        cycle.complete = complete
        self._cycle = None
        self.stats.cycles += 1
        if not complete:
            self.stats.incomplete += 1
        return cycle

    def flush(self) -> list[Event]:
        """Ends the cycle in progress (end of a log): it is incomplete unless it was done."""
        return [self._close(complete=False)] if self._cycle is not None else []

    # -- output to the sensor --------------------------------------------------------------

    def encode_config(self, cfg: RadarConfig) -> tuple[int, bytes]:
        """(frame ID, data) of the RadarConfiguration frame for ``cfg``, every field valid."""
        if cfg.output_type not in OUTPUT_TYPES:
            raise ParameterError('output_type', cfg.output_type, f'one of {list(OUTPUT_TYPES)}')
        if not 90.0 <= cfg.max_distance_m <= 1000.0:
            raise ParameterError('max_distance', cfg.max_distance_m, 'ARS408 accepts 90..1000 m')
        msg = self.db.get_message_by_frame_id(self.base + RADAR_CFG)
        data = msg.encode(
            {
                'RadarCfg_MaxDistance_valid': 1,
                'RadarCfg_MaxDistance': cfg.max_distance_m,
                'RadarCfg_SensorID_valid': 1,
                'RadarCfg_SensorID': cfg.sensor_id,
                'RadarCfg_RadarPower_valid': 1,
                'RadarCfg_RadarPower': cfg.radar_power,
                'RadarCfg_OutputType_valid': 1,
                'RadarCfg_OutputType': OUTPUT_TYPES[cfg.output_type],
                'RadarCfg_SendQuality_valid': 1,
                'RadarCfg_SendQuality': int(cfg.send_quality),
                'RadarCfg_SendExtInfo_valid': 1,
                'RadarCfg_SendExtInfo': int(cfg.send_ext_info),
                'RadarCfg_SortIndex_valid': 1,
                'RadarCfg_SortIndex': cfg.sort_index,
                'RadarCfg_StoreInNVM_valid': 0,
                'RadarCfg_StoreInNVM': 0,
                'RadarCfg_CtrlRelay_valid': 0,
                'RadarCfg_CtrlRelay': 0,
                'RadarCfg_RCS_Threshold_Valid': 1,
                'RadarCfg_RCS_Threshold': 1 if cfg.rcs_threshold == 'high_sensitivity' else 0,
            }
        )
        return msg.frame_id, bytes(data)

    def encode_speed(self, speed_mps: float) -> tuple[int, bytes]:
        """(frame ID, data) of SpeedInformation (0x300): |speed| and its direction."""
        msg = self.db.get_message_by_frame_id(self.base + SPEED_INFO)
        direction = 0 if abs(speed_mps) < 0.02 else (1 if speed_mps > 0 else 2)
        data = msg.encode(
            {
                'RadarDevice_Speed': min(abs(speed_mps), 163.8),
                'RadarDevice_SpeedDirection': direction,
            }
        )
        return msg.frame_id, bytes(data)

    def encode_yaw_rate(self, yaw_rate_rad_s: float) -> tuple[int, bytes]:
        """(frame ID, data) of YawRateInformation (0x301) [deg/s on the wire]."""
        msg = self.db.get_message_by_frame_id(self.base + YAW_RATE_INFO)
        deg = max(-327.68, min(327.67, math.degrees(yaw_rate_rad_s)))
        return msg.frame_id, bytes(msg.encode({'RadarDevice_YawRate': deg}))

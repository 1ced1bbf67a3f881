"""Camera-anchored alignment of IMU, radar and audio to each camera frame, with bounded waits.

For every camera frame at host time ``t_f`` (stamps already on the host timeline, see
:mod:`rt_fusion.core.clock`) the :class:`Aligner` emits one :class:`AlignedFrame` with

- **IMU**: angular rate and acceleration interpolated to ``t_f`` between the two samples that
  bracket it, and the rotation integrated since the previous frame (from a cumulative orientation
  kept per IMU sample, so the cost per frame does not grow with the IMU rate);
- **radar** (any number of sensors): the scan nearest in time to ``t_f``, its points moved to
  ``t_f`` along their line of sight by their doppler velocity (``p + v_r·dt·p/|p|``);
- **audio**: the window of samples that ends at ``t_f``.

It waits for a modality at most ``max_wait_s`` after the frame arrived, then emits what it has and
names the missing modalities. The camera itself may go missing: once no frame has come for
``camera_timeout_s`` (both in stamps, so a replay that is merely slow does not trigger it, and on
the wall clock, so a live camera merely late does not), each radar scan anchors a frame of its own
(``frame`` None, ``camera`` among the missing) until the camera is back. It never waits for a
radar scan that could not be nearer than the one it has (the next scan is expected a radar
period after the last). Queues are bounded; late
(older than a frame already emitted), dropped (queue overflow) and out-of-order inputs are
counted per stream. Time is passed in (``arrival_ns``, ``poll(now_ns)``): replaying the same
input sequence gives bit-identical output.

**How this differs from message_filters' ApproximateTime.** ApproximateTime waits until it can
prove that a set of messages (one per topic) is optimal, which can take until the *next* message
of every topic has arrived, and it drops messages it cannot match without telling anyone. A
perception loop needs the opposite trade-off: the camera frame is the anchor and must come out
within a deadline even when a sensor is slow or gone (a degraded output beats a stalled one); a
30 Hz camera and a 200 Hz IMU are not matched one-to-one but interpolated; a radar scan 40 ms
away is moved to the frame time rather than paired as is; and every drop is counted for
diagnostics.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import deque
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core import rotation
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param

_NS = 1_000_000_000


@dataclasses.dataclass(frozen=True)
class SyncParams:
    """Parameters of the aligner."""

    max_wait_s: float = param(
        'longest wait for a late modality after a frame arrives',
        unit='s',
        default=0.05,
        low=0.0,
        high=1.0,
    )
    imu_capacity: int = param('IMU samples kept', default=2048, low=8)
    radar_capacity: int = param('radar scans kept per sensor', default=16, low=2)
    # 16: 0.53 s at 30 Hz, longer than a CPU detector's slowest frame on a busy 2-core machine
    # (8, 0.27 s, lost ~0.5 % of a soak's frames). Frames waiting behind a newer one are fused
    # without reading their pixels (infer_when_behind false), so a ring of fewer slots is safe.
    camera_queue: int = param('camera frames waiting at most', default=16, low=1)
    audio_capacity_s: float = param('audio kept', unit='s', default=4.0, low=0.1)
    audio_window_s: float = param(
        'audio window ending at each frame', unit='s', default=0.5, low=0.001
    )
    audio_rate_hz: int = param('audio sample rate', unit='Hz', default=48_000, low=1000)
    audio_channels: int = param('audio channels', default=1, low=1, high=64)
    radars: tuple[str, ...] = param('names of the radar streams', default=('radar',))
    imu_max_gap_s: float = param(
        'an IMU gap longer than this around a frame is missing data',
        unit='s',
        default=0.05,
        low=0.001,
    )
    radar_max_age_s: float = param(
        'a radar scan further than this from a frame is not used', unit='s', default=0.2, low=0.001
    )
    radar_mode: str = param(
        'nearest: the scan nearest to the frame (may wait up to half a radar period for the '
        'next one); latest: the newest scan at or before the frame, moved forward (no wait)',
        default='nearest',
        choices=('nearest', 'latest'),
    )
    imu_mode: str = param(
        'interpolate: a frame waits for the IMU sample after it (exact, up to an IMU period of '
        'wait); extrapolate: the latest sample held up to the frame time (no wait; the error '
        'that costs is measured once the next samples arrive)',
        default='interpolate',
        choices=('interpolate', 'extrapolate'),
    )
    wait_for: tuple[str, ...] = param(
        'modalities a frame waits for (imu, audio, radar names; empty: all); the others are '
        'used when they are there',
        default=(),
    )
    camera_timeout_s: float = param(
        'no camera frame for this long, in stamps and on the wall clock: frames are anchored '
        'on the radar scans instead, without the camera (0: wait for the camera)',
        unit='s',
        default=0.5,
        low=0.0,
        high=10.0,
    )

    def check(self) -> None:
        """Cross-field rules."""
        if self.audio_window_s > self.audio_capacity_s:
            raise ParameterError(
                'audio_window_s', self.audio_window_s, 'longer than audio_capacity_s'
            )
        if len(set(self.radars)) != len(self.radars):
            raise ParameterError('radars', self.radars, 'names must be unique')
        unknown = set(self.wait_for) - {'imu', 'audio', *self.radars}
        if unknown:
            raise ParameterError(
                'wait_for', self.wait_for, f'unknown modalities {sorted(unknown)}'
            )

    def waits_for(self, modality: str) -> bool:
        """Does a frame wait for ``modality``?"""
        return not self.wait_for or modality in self.wait_for


@dataclasses.dataclass
class StreamStats:
    """Counters of one input stream."""

    received: int = 0
    late: int = 0
    dropped: int = 0
    out_of_order: int = 0
    non_finite: int = 0  # samples (IMU), points (radar) or blocks (audio) with NaN/inf, dropped


@dataclasses.dataclass
class ImuExtrapolation:
    """What ``imu_mode: extrapolate`` costs: each extrapolated frame compared with the
    interpolation its bracketing samples give once they arrive."""

    frames: int = 0  # frames given an extrapolated IMU
    checked: int = 0  # of those, compared with the interpolation since
    gyro_sq: float = 0.0  # sum of squared gyro errors [(rad/s)²]
    accel_sq: float = 0.0  # sum of squared acceleration errors [(m/s²)²]
    gyro_max: float = 0.0  # [rad/s]
    accel_max: float = 0.0  # [m/s²]

    def rms(self) -> tuple[float, float]:
        """(gyro [rad/s], accel [m/s²]) RMS error over the checked frames."""
        n = max(self.checked, 1)
        return (self.gyro_sq / n) ** 0.5, (self.accel_sq / n) ** 0.5


@dataclasses.dataclass(frozen=True, slots=True)
class ImuAtFrame:
    """IMU data at a frame time."""

    gyro: tuple[float, float, float]  # [rad/s], interpolated
    accel: tuple[float, float, float]  # [m/s²], interpolated
    rotation: rotation.Quat  # body rotation since the previous frame (w, x, y, z)
    samples: int  # IMU samples between the previous frame and this one
    extrapolated: bool = False  # held from the latest sample before the frame (imu_mode)


@dataclasses.dataclass(frozen=True, slots=True)
class RadarAtFrame:
    """The radar scan nearest to a frame, moved to the frame time."""

    scan_stamp_ns: int
    dt_ns: int  # frame time - scan time
    points: npt.NDArray[np.float64]  # (N, 4): x, y, z [m] at the frame time, v_r [m/s]


@dataclasses.dataclass(frozen=True, slots=True)
class AlignedFrame:
    """One camera frame with everything aligned to it (with the camera gone: a radar scan's
    time, ``frame`` None and ``camera`` among the missing)."""

    stamp_ns: int
    frame: Any
    imu: ImuAtFrame | None
    radar: dict[str, RadarAtFrame | None]
    audio: npt.NDArray[Any] | None  # (samples, channels) ending at stamp_ns
    missing: tuple[str, ...]
    waited_ns: int  # emit time - frame arrival


Vec3 = tuple[float, float, float]


class ImuBuffer:
    """IMU samples with a cumulative orientation per sample, in plain lists.

    Per-frame work touches two samples; numpy's per-call overhead on 3-vectors would cost more
    than the arithmetic, so samples are float tuples and lookups use bisect. The lists keep at
    least ``capacity`` samples and are trimmed in chunks (amortised O(1) per push).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.t: list[int] = []
        self.gyro: list[Vec3] = []
        self.accel: list[Vec3] = []
        self.q: list[rotation.Quat] = []
        self.count = 0  # samples ever pushed

    def __len__(self) -> int:
        return len(self.t)

    def last_t(self) -> int | None:
        """Stamp of the newest sample."""
        return self.t[-1] if self.t else None

    def push(self, t: int, gyro: npt.ArrayLike, accel: npt.ArrayLike) -> None:
        """Appends a sample (the caller rejects out-of-order ones)."""
        gx, gy, gz = (float(v) for v in np.asarray(gyro, dtype=np.float64).reshape(3))
        ax, ay, az = (float(v) for v in np.asarray(accel, dtype=np.float64).reshape(3))
        if self.t:
            dt = (t - self.t[-1]) * 1e-9
            px, py, pz = self.gyro[-1]
            # Midpoint rule: the mean rate over the interval.
            q = rotation.normalize(
                rotation.mul(
                    self.q[-1],
                    rotation.from_rotvec(
                        (px + gx) * 0.5 * dt, (py + gy) * 0.5 * dt, (pz + gz) * 0.5 * dt
                    ),
                )
            )
        else:
            q = rotation.IDENTITY
        self.t.append(t)
        self.gyro.append((gx, gy, gz))
        self.accel.append((ax, ay, az))
        self.q.append(q)
        self.count += 1
        if len(self.t) >= 2 * self.capacity:
            cut = len(self.t) - self.capacity
            del self.t[:cut], self.gyro[:cut], self.accel[:cut], self.q[:cut]

    def at(
        self, t: int, max_gap_ns: int, extrapolate: bool = False
    ) -> tuple[Vec3, Vec3, rotation.Quat] | None:
        """(gyro, accel, cumulative orientation) at t, or None if t is not bracketed closely;
        ``extrapolate``: past the latest sample (by at most ``max_gap_ns``) that sample held,
        the orientation turned on at its rate."""
        k = bisect.bisect_right(self.t, t) - 1
        if k < 0:
            return None
        if k + 1 >= len(self.t):
            if t == self.t[k]:  # on the newest sample: ready for the wait, so served
                return self.gyro[k], self.accel[k], self.q[k]
            if not extrapolate or t - self.t[k] > max_gap_ns:
                return None
            g = self.gyro[k]
            h = (t - self.t[k]) * 1e-9
            q = rotation.mul(self.q[k], rotation.from_rotvec(g[0] * h, g[1] * h, g[2] * h))
            return g, self.accel[k], q
        ta, tb = self.t[k], self.t[k + 1]
        if tb - ta > max_gap_ns:
            return None
        f = (t - ta) / (tb - ta)
        (a0, a1, a2), (b0, b1, b2) = self.gyro[k], self.gyro[k + 1]
        gyro = (a0 + f * (b0 - a0), a1 + f * (b1 - a1), a2 + f * (b2 - a2))
        (c0, c1, c2), (d0, d1, d2) = self.accel[k], self.accel[k + 1]
        accel = (c0 + f * (d0 - c0), c1 + f * (d1 - c1), c2 + f * (d2 - c2))
        # Orientation: from sample k, rotate at the mean rate over (ta, t).
        h = (t - ta) * 0.5e-9
        q = rotation.mul(
            self.q[k],
            rotation.from_rotvec((a0 + gyro[0]) * h, (a1 + gyro[1]) * h, (a2 + gyro[2]) * h),
        )
        return gyro, accel, q

    def count_between(self, t0: int, t1: int) -> int:
        """Samples with t0 < stamp <= t1."""
        return bisect.bisect_right(self.t, t1) - bisect.bisect_right(self.t, t0)


class AudioBuffer:
    """Ring of audio samples with the host time of each sample index."""

    def __init__(self, capacity: int, channels: int, rate_hz: int) -> None:
        self.data = np.zeros((capacity, channels), np.float32)
        self.capacity = capacity
        self.rate_hz = rate_hz
        self.total = 0  # samples ever pushed
        self.anchor_index = 0  # sample index whose host time is anchor_ns
        self.anchor_ns = 0

    def push(self, stamp_ns: int, samples: npt.NDArray[Any]) -> None:
        """Appends a block whose first sample was taken at ``stamp_ns``."""
        n = samples.shape[0]
        if n > self.capacity:
            samples = samples[-self.capacity :]
            stamp_ns += (n - self.capacity) * _NS // self.rate_hz
            n = self.capacity
        self.anchor_index, self.anchor_ns = self.total, stamp_ns
        i = self.total % self.capacity
        first = min(n, self.capacity - i)
        self.data[i : i + first] = samples[:first]
        if first < n:
            self.data[: n - first] = samples[first:]
        self.total += n

    def end_ns(self) -> int:
        """Host time just after the newest sample."""
        return self.anchor_ns + (self.total - self.anchor_index) * _NS // self.rate_hz

    def window(self, end_ns: int, length: int) -> npt.NDArray[np.float32] | None:
        """A copy of the ``length`` samples ending at ``end_ns``; None if not all are kept."""
        end_index = self.anchor_index + (end_ns - self.anchor_ns) * self.rate_hz // _NS
        start_index = end_index - length
        if end_index > self.total or start_index < max(0, self.total - self.capacity):
            return None
        i = start_index % self.capacity
        if i + length <= self.capacity:
            return self.data[i : i + length].copy()
        return np.concatenate((self.data[i:], self.data[: length - (self.capacity - i)]))


@dataclasses.dataclass(slots=True)
class _Scan:
    stamp_ns: int
    arrival_ns: int
    points: npt.NDArray[np.float64]
    motion: npt.NDArray[np.float64]  # (N, 3): displacement per second along the line of sight


@dataclasses.dataclass(slots=True)
class _PendingFrame:
    stamp_ns: int
    frame: Any
    arrival_ns: int
    camera: bool = True  # False: anchored on a radar scan, the camera missing


class Aligner:
    """Aligns IMU, radar and audio streams to camera frames; see the module docstring."""

    def __init__(self, params: SyncParams | None = None) -> None:
        self.params = p = params or SyncParams()
        self.imu = ImuBuffer(p.imu_capacity)
        self.radar: dict[str, deque[_Scan]] = {n: deque(maxlen=p.radar_capacity) for n in p.radars}
        self.radar_period_ns: dict[str, int] = dict.fromkeys(p.radars, 0)
        self.audio = AudioBuffer(
            int(p.audio_capacity_s * p.audio_rate_hz), p.audio_channels, p.audio_rate_hz
        )
        self._audio_len = int(p.audio_window_s * p.audio_rate_hz)
        self._frames: deque[_PendingFrame] = deque()
        self.stats = {name: StreamStats() for name in ('camera', 'imu', 'audio', *p.radars)}
        self._emitted_ns: int | None = None  # stamp of the last emitted frame
        self._prev_q: rotation.Quat | None = None
        self._max_wait_ns = int(p.max_wait_s * _NS)
        self._imu_gap_ns = int(p.imu_max_gap_s * _NS)
        self._radar_age_ns = int(p.radar_max_age_s * _NS)
        self._extrapolate = p.imu_mode == 'extrapolate'
        self.extrapolation = ImuExtrapolation()
        self._unchecked: deque[tuple[int, Vec3, Vec3]] = deque(maxlen=64)
        self._camera_timeout_ns = int(p.camera_timeout_s * _NS)
        # The last camera frame (else the first input of any stream): (stamp, arrival).
        self._camera_seen: tuple[int, int] | None = None
        self.camera_less = 0  # frames emitted without a camera frame

    # -- inputs --------------------------------------------------------------------------------

    def _late(self, stream: str, stamp_ns: int, arrival_ns: int) -> bool:
        st = self.stats[stream]
        st.received += 1
        if stream == 'camera':
            self._camera_seen = (stamp_ns, arrival_ns)
        elif self._camera_seen is None:
            self._camera_seen = (stamp_ns, arrival_ns)  # the camera is awaited from here
        if self._emitted_ns is not None and stamp_ns <= self._emitted_ns:
            st.late += 1  # kept anyway: it may still serve the next frames (interpolation)
            return True
        return False

    def push_camera(self, stamp_ns: int, frame: Any, arrival_ns: int) -> None:
        """A camera frame (any payload: a view, a descriptor) stamped on the host timeline."""
        st = self.stats['camera']
        if self._late('camera', stamp_ns, arrival_ns):
            return  # a frame older than one already emitted cannot be emitted in order
        if self._frames and stamp_ns <= self._frames[-1].stamp_ns:
            st.out_of_order += 1
            return
        if len(self._frames) >= self.params.camera_queue:
            self._frames.popleft()
            st.dropped += 1
        self._frames.append(_PendingFrame(stamp_ns, frame, arrival_ns))

    def push_imu(
        self, stamp_ns: int, gyro: npt.ArrayLike, accel: npt.ArrayLike, arrival_ns: int
    ) -> None:
        """An IMU sample: angular rate [rad/s] and acceleration [m/s²]; one with a non-finite
        value is counted (``non_finite``) and dropped."""
        g = np.asarray(gyro, dtype=np.float64)
        a = np.asarray(accel, dtype=np.float64)
        if not (np.isfinite(g).all() and np.isfinite(a).all()):
            self.stats['imu'].received += 1
            self.stats['imu'].non_finite += 1
            return
        gyro, accel = g, a
        self._late('imu', stamp_ns, arrival_ns)  # readiness depends on stamps only
        last = self.imu.last_t()
        if last is not None and stamp_ns <= last:
            self.stats['imu'].out_of_order += 1
            return
        self.imu.push(stamp_ns, gyro, accel)
        while self._unchecked and self._unchecked[0][0] <= stamp_ns:
            self._check_extrapolation(*self._unchecked.popleft())

    def _check_extrapolation(self, t: int, gyro: Vec3, accel: Vec3) -> None:
        got = self.imu.at(t, self._imu_gap_ns)
        if got is None:
            return  # a gap after the frame: nothing to compare with
        ex = self.extrapolation
        eg = sum((a - b) ** 2 for a, b in zip(got[0], gyro, strict=True))
        ea = sum((a - b) ** 2 for a, b in zip(got[1], accel, strict=True))
        ex.checked += 1
        ex.gyro_sq += eg
        ex.accel_sq += ea
        ex.gyro_max = max(ex.gyro_max, eg**0.5)
        ex.accel_max = max(ex.accel_max, ea**0.5)

    def push_radar(
        self, name: str, stamp_ns: int, points: npt.NDArray[np.float64], arrival_ns: int
    ) -> None:
        """A radar scan: (N, 4) array of x, y, z [m] and radial velocity [m/s]."""
        if name not in self.radar:
            raise ParameterError('radars', self.params.radars, f'unknown radar stream {name!r}')
        self._late(name, stamp_ns, arrival_ns)
        scans = self.radar[name]
        if scans and stamp_ns <= scans[-1].stamp_ns:
            self.stats[name].out_of_order += 1
            return
        if scans:
            period = stamp_ns - scans[-1].stamp_ns
            old = self.radar_period_ns[name]
            # A slow average of the scan period, to know when the next scan is due.
            self.radar_period_ns[name] = period if old == 0 else (7 * old + period) // 8
        pts = np.asarray(points, dtype=np.float64)
        finite = np.isfinite(pts.reshape(len(pts), -1)).all(axis=1) if pts.size else None
        if finite is not None and not finite.all():  # a point with NaN/inf: dropped, counted
            self.stats[name].non_finite += int((~finite).sum())
            pts = np.ascontiguousarray(pts[finite])
        scans.append(_Scan(stamp_ns, arrival_ns, pts, line_of_sight_motion(pts)))

    def push_audio(self, stamp_ns: int, samples: npt.NDArray[Any], arrival_ns: int) -> None:
        """An audio block (frames, channels) whose first sample was taken at ``stamp_ns``; a
        floating-point block with a non-finite sample is counted and dropped."""
        if samples.dtype.kind == 'f' and not np.isfinite(samples).all():
            self.stats['audio'].received += 1
            self.stats['audio'].non_finite += 1
            return
        self._late('audio', stamp_ns, arrival_ns)
        if self.audio.total and stamp_ns < self.audio.anchor_ns:
            self.stats['audio'].out_of_order += 1
            return
        self.audio.push(stamp_ns, samples.reshape(samples.shape[0], -1))

    # -- output --------------------------------------------------------------------------------

    def _radar_choice(self, name: str, t: int) -> tuple[bool, _Scan | None]:
        """(decided, scan): the nearest scan, or not yet decidable."""
        scans = self.radar[name]
        before = after = None
        for scan in reversed(scans):
            if scan.stamp_ns <= t:
                before = scan
                break
            after = scan
        if self.params.radar_mode == 'latest':
            return True, before
        if after is not None:
            if before is None or after.stamp_ns - t < t - before.stamp_ns:
                return True, after
            return True, before
        if before is None:
            return False, None
        period = self.radar_period_ns[name]
        # The next scan is due a period after the last one; it cannot be nearer if that is
        # further from t than the scan we have.
        if period and before.stamp_ns + period - t >= t - before.stamp_ns:
            return True, before
        return False, before

    def poll(self, now_ns: int) -> list[AlignedFrame]:
        """Emits every pending frame that is complete or has waited ``max_wait``; without a
        camera for ``camera_timeout_s``, a frame per radar scan."""
        out: list[AlignedFrame] = []
        while self._frames:
            pf = self._frames[0]
            choices = {name: self._radar_choice(name, pf.stamp_ns) for name in self.radar}
            if not self._ready(pf, choices, now_ns):
                break
            self._frames.popleft()
            out.append(self._emit(pf, choices, now_ns))
        while not self._frames and self._camera_timeout_ns:
            anchored = self._radar_anchor(now_ns)
            if anchored is None:
                break
            pf, choices = anchored
            if not self._ready(pf, choices, now_ns):
                break
            self.camera_less += 1
            out.append(self._emit(pf, choices, now_ns))
        return out

    def _ready(
        self, pf: _PendingFrame, choices: dict[str, tuple[bool, _Scan | None]], now_ns: int
    ) -> bool:
        """Is every awaited modality there for ``pf``, or has it waited ``max_wait``?"""
        t = pf.stamp_ns
        if now_ns - pf.arrival_ns >= self._max_wait_ns:
            return True
        imu_last = self.imu.last_t()
        waits = self.params.waits_for
        imu_ready = not waits('imu') or (
            imu_last is not None
            and (imu_last >= t or (self._extrapolate and t - imu_last <= self._imu_gap_ns))
        )
        radar_ready = all(decided or not waits(name) for name, (decided, _) in choices.items())
        audio_ready = not waits('audio') or (self.audio.total > 0 and self.audio.end_ns() >= t)
        return imu_ready and radar_ready and audio_ready

    def _radar_anchor(
        self, now_ns: int
    ) -> tuple[_PendingFrame, dict[str, tuple[bool, _Scan | None]]] | None:
        """The next radar scan to anchor a frame on when the camera has been silent for
        ``camera_timeout_s`` in stamps and on the wall clock; None if there is none (yet)."""
        if self._camera_seen is None:
            return None
        seen_stamp, seen_arrival = self._camera_seen
        if now_ns - seen_arrival < self._camera_timeout_ns:
            return None
        floor = seen_stamp + self._camera_timeout_ns
        if self._emitted_ns is not None:
            floor = max(floor, self._emitted_ns + 1)
        best: tuple[str, _Scan] | None = None
        for name, scans in self.radar.items():
            for scan in scans:
                if scan.stamp_ns >= floor:
                    if best is None or scan.stamp_ns < best[1].stamp_ns:
                        best = (name, scan)
                    break
        if best is None:
            return None
        name, scan = best
        t = scan.stamp_ns
        choices = {
            other: (True, scan) if other == name else self._radar_choice(other, t)
            for other in self.radar
        }
        return _PendingFrame(t, None, scan.arrival_ns, camera=False), choices

    def _emit(
        self, pf: _PendingFrame, choices: dict[str, tuple[bool, _Scan | None]], now_ns: int
    ) -> AlignedFrame:
        t = pf.stamp_ns
        missing: list[str] = []
        imu = None
        got = self.imu.at(t, self._imu_gap_ns, self._extrapolate)
        if got is not None:
            gyro, accel, q = got
            imu_last = self.imu.last_t()
            extrapolated = imu_last is not None and imu_last < t
            if extrapolated:
                self.extrapolation.frames += 1
                self._unchecked.append((t, gyro, accel))
            rel = (
                rotation.IDENTITY
                if self._prev_q is None
                else rotation.mul(rotation.conj(self._prev_q), q)
            )
            samples = self.imu.count_between(self._emitted_ns, t) if self._emitted_ns else 0
            imu = ImuAtFrame(gyro, accel, rel, samples, extrapolated)
            self._prev_q = q
        else:
            missing.append('imu')
            self._prev_q = None
        radar: dict[str, RadarAtFrame | None] = {}
        for name, (_decided, scan) in choices.items():
            if scan is None or abs(t - scan.stamp_ns) > self._radar_age_ns:
                radar[name] = None
                missing.append(name)
                continue
            dt_ns = t - scan.stamp_ns
            moved = scan.points.copy()
            moved[:, :3] += scan.motion * (dt_ns * 1e-9)
            radar[name] = RadarAtFrame(scan.stamp_ns, dt_ns, moved)
        audio = self.audio.window(t, self._audio_len) if self.audio.total else None
        if audio is None:
            missing.append('audio')
        if not pf.camera:
            missing.append('camera')
        self._emitted_ns = t
        return AlignedFrame(t, pf.frame, imu, radar, audio, tuple(missing), now_ns - pf.arrival_ns)


def line_of_sight_motion(points: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """(N, 3) velocity of radar points (x, y, z, v_r) along their line of sight [m/s]."""
    xyz = points[:, :3]
    rng = np.sqrt(np.einsum('ij,ij->i', xyz, xyz))
    return xyz * (points[:, 3] / np.where(rng > 0, rng, np.inf))[:, None]


def propagate(points: npt.NDArray[np.float64], dt_ns: int) -> npt.NDArray[np.float64]:
    """Moves radar points (x, y, z, v_r) by v_r·dt along their line of sight."""
    out = points.copy()
    out[:, :3] += line_of_sight_motion(points) * (dt_ns * 1e-9)
    return out

"""radar_node: a Continental ARS408-21 radar on CAN -> RadarObjects, PointCloud2, diagnostics.

Reads CAN frames through python-can (SocketCAN ``can0`` on the vehicle; any python-can
interface: ``udp_multicast`` between processes in tests, a candump log played by
``tools/can_replay.py``), decodes them with :mod:`rt_fusion.core.protocols.ars408`, and publishes
every cycle as soon as it is complete (or flagged incomplete when the next one starts first).

At configure time it sends the RadarConfiguration (0x200) built from its parameters and checks
the sensor's echo in RadarState (0x201): with ``require_echo`` configure waits for it and fails
without it; otherwise the node streams at once and the reader checks the echo when it comes
(a warning and a diagnostics WARN when it differs or is missing after ``echo_timeout_s``).
While active it forwards the ego motion it receives on
``~/in/odometry`` as SpeedInformation (0x300) and YawRateInformation (0x301) at ``ego_rate_hz``.

Stamps: the kernel receive time of a cycle's first frame (python-can's ``timestamp``), mapped
onto the host timeline by a ClockMapper (identity up to the offset for SocketCAN; for a replayed
log it maps the recording's clock onto now). The measurement counter is kept as sequence.

Topics: ``~/out/objects`` (rt_fusion_msgs/RadarObjects), ``~/out/points``
(sensor_msgs/PointCloud2: x, y, z, v_x, v_y, rcs per target), ``/diagnostics``. The outputs are
best effort by default; ``qos_overrides.<topic>.publisher.*`` changes them (see
:mod:`rt_fusion.ros.qos`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import sys
import threading
import time
from typing import Any, ClassVar

import can
import numpy as np
from nav_msgs.msg import Odometry
from rclpy.qos import qos_profile_sensor_data
from rt_fusion_msgs.msg import RadarObject, RadarObjects
from sensor_msgs.msg import PointCloud2, PointField

from rt_fusion.core.clock import ClockMapper, ClockParams
from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.latency import DIAG_WINDOW, LatencyRecorder
from rt_fusion.core.params import param
from rt_fusion.core.protocols.ars408 import (
    Ars408Decoder,
    Ars408Error,
    RadarConfig,
    RadarCycle,
    RadarState,
    load_database,
)
from rt_fusion.ros import compat, lifecycle, parameters, radar_tracks, running
from rt_fusion.ros.conversions import ns_to_time
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics
from rt_fusion.ros.qos import OVERRIDABLE


@dataclasses.dataclass(frozen=True)
class RadarParams:
    """Parameters of radar_node."""

    interface: str = param(
        'python-can interface (socketcan, udp_multicast, virtual, ...)', default='socketcan'
    )
    channel: str = param(
        'python-can channel (can0; a multicast group for udp_multicast)', default='can0'
    )
    bitrate: int = param(
        'CAN bit rate, for interfaces that set it (SocketCAN: ip link)',
        unit='bit/s',
        default=500_000,
        low=10_000,
        high=1_000_000,
    )
    port: int = param('UDP port (udp_multicast only)', default=43113, low=1, high=65535)
    sensor_id: int = param('ARS408 sensor id (frame IDs + 0x10 * id)', default=0, low=0, high=7)
    frame_id: str = param('frame of the radar', default='radar')
    output_type: str = param(
        'what the sensor sends', default='objects', choices=('objects', 'clusters')
    )
    max_distance: float = param(
        'far end of the measurement range', unit='m', default=196.0, low=90.0, high=1000.0
    )
    rcs_threshold: str = param(
        'sensitivity', default='standard', choices=('standard', 'high_sensitivity')
    )
    send_quality: bool = param('ask for quality frames (0x60C / 0x702)', default=True)
    send_ext_info: bool = param('ask for extended frames (0x60D)', default=True)
    sort_index: int = param('0 unsorted, 1 by range, 2 by RCS', default=1, low=0, high=2)
    radar_power: int = param('transmit power reduction step (0 = full)', default=0, low=0, high=3)
    configure_sensor: bool = param(
        'send 0x200 at configure and check the 0x201 echo', default=True
    )
    require_echo: bool = param(
        'fail configure if the 0x201 echo is missing or differs (configure then waits for it; '
        'otherwise the node streams at once and checks the echo as it comes)',
        default=False,
    )
    echo_timeout_s: float = param('wait for the 0x201 echo', unit='s', default=2.0, low=0.1)
    ego_rate_hz: float = param(
        'rate of 0x300/0x301 ego motion frames (0: never send)',
        unit='Hz',
        default=50.0,
        low=0.0,
        high=100.0,
    )
    publish_points: bool = param('also publish a PointCloud2 of the targets', default=True)
    publish_tracks: bool = param(
        'also publish each cycle as radar_msgs/RadarTracks on ~/out/tracks (what third-party '
        'ARS408 drivers publish; built only while subscribed)',
        default=True,
    )
    diagnostics_period_s: float = param('diagnostics period', unit='s', default=1.0, low=0.1)


def _f(v: float) -> float:
    return float(v)


def target_to_msg(t: Any) -> RadarObject:
    """A decoded target -> RadarObject."""
    o = RadarObject()
    o.id = int(t.id)
    o.position.x, o.position.y = _f(t.x), _f(t.y)
    o.velocity.x, o.velocity.y = _f(t.vx), _f(t.vy)
    o.acceleration.x, o.acceleration.y = _f(t.ax), _f(t.ay)
    o.rcs = _f(t.rcs)
    o.dynamic_property = int(t.dyn_prop)
    o.object_class = int(t.obj_class) if t.obj_class >= 0 else RadarObject.CLASS_UNKNOWN
    o.orientation, o.length, o.width = _f(t.orientation), _f(t.length), _f(t.width)
    o.existence_probability = _f(t.prob_exist)
    o.measurement_state = int(t.meas_state) if t.meas_state >= 0 else 255
    o.position_rms_x, o.position_rms_y = _f(t.x_rms), _f(t.y_rms)
    o.velocity_rms_x, o.velocity_rms_y = _f(t.vx_rms), _f(t.vy_rms)
    o.acceleration_rms_x, o.acceleration_rms_y = _f(t.ax_rms), _f(t.ay_rms)
    o.orientation_rms = _f(t.orientation_rms)
    return o


_POINT_FIELDS = [
    PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
    for i, n in enumerate(('x', 'y', 'z', 'vx', 'vy', 'rcs'))
]


def cycle_to_cloud(cycle: RadarCycle, msg: RadarObjects) -> PointCloud2:
    """Targets of a cycle as a PointCloud2 (x, y, z, vx, vy, rcs; float32)."""
    pts = np.array(
        [(t.x, t.y, 0.0, t.vx, t.vy, t.rcs) for t in cycle.targets], dtype=np.float32
    ).reshape(-1, 6)
    cloud = PointCloud2()
    cloud.header = msg.header
    cloud.height, cloud.width = 1, pts.shape[0]
    cloud.fields = _POINT_FIELDS
    cloud.is_bigendian = False
    cloud.point_step, cloud.row_step = 24, 24 * pts.shape[0]
    cloud.data = pts.tobytes()
    cloud.is_dense = True
    return cloud


class RadarNode(lifecycle.DeviceNode):
    """ARS408 on CAN; see the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = ((RadarParams, ''),)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('radar', **kwargs)
        self.params: RadarParams | None = None
        self.bus: can.BusABC | None = None
        self.decoder: Ars408Decoder | None = None
        self.clock = ClockMapper(
            ClockParams(window_s=30.0, bin_s=0.5, lock_span_s=3.0, jump_s=1.0)
        )
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.latency = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.echo_mismatch: list[str] = []
        self._echo_pending: RadarConfig | None = None  # sent, its echo not seen yet
        self._echo_deadline = 0.0
        self._speed = self._yaw_rate = 0.0
        self._ego_stamp = 0.0
        self.published = 0
        self.bus_errors = 0

    # -- lifecycle -----------------------------------------------------------------------------

    def _on_matched(self, info: Any) -> None:
        self.get_logger().info(f'objects output matched: {info.current_count} subscriber(s)')

    PARAMS = (RadarParams,)

    @classmethod
    def preload(cls) -> None:
        """Also python-can's interfaces for a vehicle's bus and the emulated one, which
        ``can.Bus`` imports when it opens them, and the ARS408 database of sensor 0 (cached:
        0.05 s of parsing the DBC)."""
        super().preload()
        load_database(0)
        for name in ('socketcan', 'udp_multicast', 'virtual'):
            with contextlib.suppress(ImportError):
                importlib.import_module(f'can.interfaces.{name}')

    def configure(self) -> None:
        """Reads parameters, opens the bus, configures the sensor and checks its echo."""
        p = self.params = parameters.declare_params(self, RadarParams)
        self.decoder = Ars408Decoder(
            p.sensor_id, expect_quality=p.send_quality, expect_extended=p.send_ext_info
        )
        self.bus = self._open_bus(p)
        # Logged as matches come and go: a consumer (a test) waits for that line before it
        # starts the bus, instead of a fixed delay for discovery to finish on this side too.
        self.pub = self.create_lifecycle_publisher(
            RadarObjects,
            '~/out/objects',
            qos_profile_sensor_data,
            event_callbacks=compat.publisher_events(matched=self._on_matched),
            qos_overriding_options=OVERRIDABLE,
        )
        self.points_pub = self.create_lifecycle_publisher(
            PointCloud2,
            '~/out/points',
            qos_profile_sensor_data,
            qos_overriding_options=OVERRIDABLE,
        )
        self.tracks_pub = self.create_lifecycle_publisher(
            radar_tracks.RadarTracks,
            '~/out/tracks',
            qos_profile_sensor_data,
            qos_overriding_options=OVERRIDABLE,
        )
        self.diag = NodeDiagnostics(self, 'ARS408')
        self.create_subscription(
            Odometry, '~/in/odometry', self._on_odometry, qos_profile_sensor_data
        )
        if p.configure_sensor:
            self._configure_sensor(p)
        self.diag_timer = self.create_timer(p.diagnostics_period_s, self._publish_diagnostics)
        if p.ego_rate_hz > 0:
            self.ego_timer = self.create_timer(1.0 / p.ego_rate_hz, self._send_ego_motion)

    def _open_bus(self, p: RadarParams) -> can.BusABC:
        kwargs: dict[str, Any] = {'interface': p.interface, 'channel': p.channel}
        if p.interface == 'udp_multicast':
            kwargs['port'] = p.port
        elif p.interface not in ('socketcan', 'virtual'):
            kwargs['bitrate'] = p.bitrate
        try:
            return can.Bus(**kwargs)
        except (can.CanError, OSError, ValueError, ImportError) as err:
            raise RtFusionError(
                f'cannot open CAN interface {p.interface!r} channel {p.channel!r}: {err}. '
                'On the vehicle: sudo ip link set can0 up type can bitrate 500000'
            ) from err

    def _configure_sensor(self, p: RadarParams) -> None:
        assert self.bus is not None
        assert self.decoder is not None
        cfg = RadarConfig(
            p.output_type,
            p.max_distance,
            p.rcs_threshold,
            p.send_quality,
            p.send_ext_info,
            p.sensor_id,
            p.radar_power,
            p.sort_index,
        )
        frame_id, data = self.decoder.encode_config(cfg)
        self._send(frame_id, data)
        self._echo_deadline = time.monotonic() + p.echo_timeout_s
        if not p.require_echo:
            # Checked by the reader as the sensor's RadarState comes (once a second or so): a
            # restarted node streams at once instead of waiting up to a second for it.
            self._echo_pending = cfg
            return
        state: RadarState | None = None
        while time.monotonic() < self._echo_deadline and state is None:
            try:
                msg = self.bus.recv(timeout=0.1)
            except can.CanError as err:  # a datagram the bus cannot unpack: counted, not fatal
                self.bus_errors += 1
                self.get_logger().error(f'CAN receive failed: {err}', throttle_duration_sec=5.0)
                continue
            if msg is None:
                continue
            for event in self._feed(msg):
                if isinstance(event, RadarState):
                    state = event
        self._check_echo(cfg, state)

    def _echo_status(self) -> str:
        if self.params is None or not self.params.configure_sensor:
            return 'not sent'
        if self._echo_pending is not None:
            return 'pending'
        return 'differs' if self.echo_mismatch else 'confirmed'

    def _check_echo(self, cfg: RadarConfig, state: RadarState | None) -> None:
        """The sensor's echo of ``cfg`` (None: none came within echo_timeout_s): kept for the
        diagnostics, fatal with require_echo, a warning otherwise."""
        assert self.params is not None
        if state is None:
            self.echo_mismatch = ['no RadarState (0x201) within echo_timeout_s']
        else:
            self.echo_mismatch = cfg.mismatches(state)
        if self.echo_mismatch:
            text = '; '.join(self.echo_mismatch)
            if self.params.require_echo:
                raise Ars408Error(f'the radar did not take its configuration: {text}')
            self.get_logger().warning(f'radar configuration not confirmed: {text}')
        else:
            self.get_logger().info('radar configuration confirmed (0x201)')

    def activate(self) -> None:
        """Starts the CAN reader thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._read_loop, name='radar-can', daemon=True)
        self._thread.start()

    def deactivate(self) -> None:
        """Stops the reader thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def cleanup(self) -> None:
        """Closes the bus."""
        if self.bus is not None:
            self.bus.shutdown()
            self.bus = None

    # -- CAN -----------------------------------------------------------------------------------

    def _send(self, frame_id: int, data: bytes) -> None:
        assert self.bus is not None
        try:
            self.bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
        except can.CanError as err:
            self.bus_errors += 1
            self.get_logger().error(
                f'CAN send 0x{frame_id:03X} failed: {err}', throttle_duration_sec=5.0
            )

    def _feed(self, msg: can.Message) -> list[Any]:
        assert self.decoder is not None
        if msg.is_error_frame or msg.is_remote_frame:
            self.bus_errors += msg.is_error_frame
            return []
        rx_ns = round(msg.timestamp * 1e9)
        with self._lock:
            self.clock.update(rx_ns, time.time_ns())
            return self.decoder.feed(msg.arbitration_id, bytes(msg.data), rx_ns)

    def _read_loop(self) -> None:
        bus = self.bus
        assert bus is not None
        while not self._stop.is_set():
            try:
                msg = bus.recv(timeout=0.1)
            except can.CanError as err:
                self.bus_errors += 1
                self.get_logger().error(f'CAN receive failed: {err}', throttle_duration_sec=5.0)
                continue
            if msg is None:
                continue
            for event in self._feed(msg):
                if isinstance(event, RadarCycle):
                    self._publish_cycle(event)
                elif isinstance(event, RadarState) and self._echo_pending is not None:
                    self._check_echo(self._echo_pending, event)
                    self._echo_pending = None
            if self._echo_pending is not None and time.monotonic() > self._echo_deadline:
                self._check_echo(self._echo_pending, None)
                self._echo_pending = None

    def _publish_cycle(self, cycle: RadarCycle) -> None:
        assert self.params is not None
        with self._lock:
            stamp = self.clock.to_host(cycle.stamp_ns)
        msg = RadarObjects()
        msg.header.stamp = ns_to_time(stamp)
        msg.header.frame_id = self.params.frame_id
        msg.measurement_counter = cycle.meas_counter
        msg.output_type = cycle.kind
        msg.expected_targets = cycle.expected
        msg.complete = cycle.complete
        msg.cycle_duration_ns = max(0, cycle.last_ns - cycle.stamp_ns)
        msg.objects = [target_to_msg(t) for t in cycle.targets]
        self.pub.publish(msg)
        if self.params.publish_points:
            self.points_pub.publish(cycle_to_cloud(cycle, msg))
        if self.params.publish_tracks and self.tracks_pub.get_subscription_count():
            self.tracks_pub.publish(radar_tracks.objects_to_tracks(msg, self.params.sensor_id))
        self.published += 1
        # Node latency: from the last frame of the cycle arriving to the message published.
        with self._lock:
            last_host = self.clock.to_host(cycle.last_ns)
        self.latency.record(time.time_ns() - last_host)

    # -- ego motion and diagnostics ------------------------------------------------------------

    def _on_odometry(self, msg: Odometry) -> None:
        self._speed = float(msg.twist.twist.linear.x)
        self._yaw_rate = float(msg.twist.twist.angular.z)
        self._ego_stamp = time.monotonic()

    def _send_ego_motion(self) -> None:
        if self.decoder is None or self.bus is None or self._ego_stamp == 0.0:
            return  # nothing received yet: the sensor keeps its last ego motion
        self._send(*self.decoder.encode_speed(self._speed))
        self._send(*self.decoder.encode_yaw_rate(self._yaw_rate))

    def _publish_diagnostics(self) -> None:
        if self.decoder is None:
            return
        with self._lock:
            stats = dataclasses.asdict(self.decoder.stats)
            state, version = self.decoder.state, self.decoder.version
            clock = self.clock.state()
        level, message = Level.OK, 'ok'
        if state is not None and state.errors:
            level, message = Level.ERROR, 'radar reports ' + ', '.join(state.errors)
        elif self.echo_mismatch:
            level, message = Level.WARN, '; '.join(self.echo_mismatch)
        elif stats['decode_errors'] or stats['incomplete']:
            level, message = Level.WARN, 'malformed frames or incomplete cycles'
        values = {
            **{f'decoder.{k}': v for k, v in stats.items()},
            'published': self.published,
            'bus_errors': self.bus_errors,
            'echo': self._echo_status(),
            'clock.locked': clock.locked,
            'clock.skew_ppm': round(clock.skew_ppm, 2),
        }
        if state is not None:
            values |= {f'state.{k}': v for k, v in dataclasses.asdict(state).items()}
        if version is not None:
            values['version'] = f'{version.major}.{version.minor}.{version.patch}'
        summary = self.latency.summary()
        if summary.count:
            values['publish_latency_p50_us'] = round(summary.p50_us, 1)
            values['publish_latency_p99_us'] = round(summary.p99_us, 1)
        sensor = self.params.sensor_id if self.params else -1
        self.diag.publish(level, message, values, f'ARS408 sensor {sensor}')


def main(args: list[str] | None = None) -> int:
    """Entry point of ``radar_node``."""
    return running.run(RadarNode, args)


if __name__ == '__main__':
    sys.exit(main())

"""imu_node: an Xsens MTi on a serial port -> sensor_msgs/Imu stamped by its own clock.

Opens the port with pyserial and, when ``configure_device`` is set, runs the configuration
handshake: GoToConfig, SetOutputConfiguration (the items and rate of the parameters),
GoToMeasurement, each checked against its acknowledgement; a device that answers with an error
or not at all fails configure with a clear message. It then parses MTData2 messages
(:mod:`rt_fusion.core.protocols.xsens`), which resynchronises after garbage and corrupt or
truncated messages and counts them.

Stamps: SampleTimeFine (the device's 10 kHz, 32-bit counter) mapped onto the host timeline by a
ClockMapper from the host time each message was read. When the port disappears (USB unplugged)
it reports the error in diagnostics and reconnects with an exponential backoff, re-running the
handshake.

Topics: ``~/out/imu`` (sensor_msgs/Imu), ``/diagnostics``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from typing import Any, ClassVar

import serial
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu

from rt_fusion.core.clock import ClockMapper, ClockParams
from rt_fusion.core.errors import ParameterError, RtFusionError
from rt_fusion.core.latency import DIAG_WINDOW, LatencyRecorder
from rt_fusion.core.params import param
from rt_fusion.core.protocols import xsens
from rt_fusion.ros import lifecycle, parameters, running
from rt_fusion.ros.conversions import ns_to_time
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics

FORMATS = {
    'float32': xsens.FORMAT_FLOAT32,
    'fp1632': xsens.FORMAT_FP1632,
    'float64': xsens.FORMAT_FLOAT64,
}
ITEMS = (
    'packet_counter',
    'sample_time_fine',
    'quaternion',
    'rate_of_turn',
    'acceleration',
    'free_acceleration',
    'delta_q',
    'delta_v',
    'magnetic_field',
    'temperature',
    'status_word',
)


@dataclasses.dataclass(frozen=True)
class ImuParams:
    """Parameters of imu_node."""

    port: str = param('serial device of the MTi', default='/dev/ttyUSB0')
    baudrate: int = param(
        'serial baud rate', unit='bit/s', default=921_600, low=9600, high=4_000_000
    )
    frame_id: str = param('frame of the IMU', default='imu')
    rate_hz: int = param(
        'output rate asked of the device', unit='Hz', default=400, low=1, high=2000
    )
    items: tuple[str, ...] = param(
        'MTData2 items to ask for',
        default=(
            'packet_counter',
            'sample_time_fine',
            'quaternion',
            'rate_of_turn',
            'acceleration',
            'status_word',
        ),
        choices=ITEMS,
    )
    number_format: str = param('format of vector items', default='float32', choices=tuple(FORMATS))
    configure_device: bool = param('run the configuration handshake at connect', default=True)
    handshake_timeout_s: float = param(
        'wait for each acknowledgement', unit='s', default=1.0, low=0.05
    )
    orientation_covariance: tuple[float, ...] = param(
        'diagonal of the orientation covariance', unit='rad²', default=(1e-4, 1e-4, 1e-3), low=0.0
    )
    angular_velocity_covariance: tuple[float, ...] = param(
        'diagonal of the angular velocity covariance',
        unit='(rad/s)²',
        default=(1e-5, 1e-5, 1e-5),
        low=0.0,
    )
    linear_acceleration_covariance: tuple[float, ...] = param(
        'diagonal of the linear acceleration covariance',
        unit='(m/s²)²',
        default=(1e-3, 1e-3, 1e-3),
        low=0.0,
    )
    qos_depth: int = param(
        'reliable history of ~/out/imu (samples a slow subscriber may lag)', default=500, low=1
    )
    reconnect_initial_s: float = param('first reconnect delay', unit='s', default=0.2, low=0.01)
    reconnect_max_s: float = param('longest reconnect delay', unit='s', default=5.0, low=0.1)
    diagnostics_period_s: float = param('diagnostics period', unit='s', default=1.0, low=0.1)

    def check(self) -> None:
        """Cross-field rules."""
        for name in (
            'orientation_covariance',
            'angular_velocity_covariance',
            'linear_acceleration_covariance',
        ):
            if len(getattr(self, name)) != 3:
                raise ParameterError(name, getattr(self, name), 'three diagonal values')
        if 'sample_time_fine' not in self.items:
            raise ParameterError(
                'items',
                self.items,
                'sample_time_fine is the hardware clock: it must be among the items',
            )


def _diag9(diag: tuple[float, ...]) -> list[float]:
    return [diag[0], 0.0, 0.0, 0.0, diag[1], 0.0, 0.0, 0.0, diag[2]]


class ImuNode(lifecycle.DeviceNode):
    """Xsens MTi on serial; see the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = ((ImuParams, ''),)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('imu', **kwargs)
        self.params: ImuParams | None = None
        self.port: serial.Serial | None = None
        self.parser = xsens.XbusParser()
        self.clock = ClockMapper(ClockParams(tick_ns=100_000.0, counter_bits=32))
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.latency = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.published = 0
        self.non_finite = 0  # samples with NaN/inf, dropped
        self._last_stamp = 0
        self.stamps_held = 0
        self.decode_errors = 0
        self.reconnects = 0
        self.last_error = ''
        self.connected = False
        self._msg = Imu()

    # -- lifecycle -----------------------------------------------------------------------------

    PARAMS = (ImuParams,)

    def configure(self) -> None:
        """Reads parameters, opens the port and configures the device."""
        p = self.params = parameters.declare_params(self, ImuParams)
        self._msg.header.frame_id = p.frame_id
        self._msg.orientation_covariance = _diag9(p.orientation_covariance)
        self._msg.angular_velocity_covariance = _diag9(p.angular_velocity_covariance)
        self._msg.linear_acceleration_covariance = _diag9(p.linear_acceleration_covariance)
        if 'quaternion' not in p.items:
            self._msg.orientation_covariance[0] = -1.0  # REP 145: no orientation estimate
        qos = QoSProfile(depth=p.qos_depth, reliability=ReliabilityPolicy.RELIABLE)
        self.pub = self.create_lifecycle_publisher(Imu, '~/out/imu', qos)
        self.diag = NodeDiagnostics(self, 'Xsens MTi')
        self.diag_timer = self.create_timer(p.diagnostics_period_s, self._publish_diagnostics)
        self._connect()

    def _connect(self) -> None:
        p = self.params
        assert p is not None
        try:
            self.port = serial.Serial(p.port, p.baudrate, timeout=0.05)
        except (serial.SerialException, OSError) as err:
            raise RtFusionError(f'cannot open IMU serial port {p.port!r}: {err}') from err
        self.parser = xsens.XbusParser()
        if p.configure_device:
            self._handshake(p)
        self.connected = True

    def _request(self, mid: int, data: bytes, ack: int, timeout_s: float) -> bytes:
        """Sends a request and waits for its acknowledgement (skipping data messages)."""
        assert self.port is not None
        self.port.write(xsens.build_message(mid, data))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            chunk = self.port.read(self.port.in_waiting or 1)
            for got, payload in self.parser.feed(chunk):
                if got == ack:
                    return payload
                if got == xsens.MID_ERROR:
                    raise xsens.XbusError(
                        f'device refused message 0x{mid:02X}: {xsens.error_text(payload)}'
                    )
        raise xsens.XbusError(
            f'no acknowledgement 0x{ack:02X} of message 0x{mid:02X} '
            f'within {timeout_s} s: is an MTi on {self.port.port}?'
        )

    def _handshake(self, p: ImuParams) -> None:
        fmt = FORMATS[p.number_format]
        items = [
            (name, 0xFFFF if name in ('packet_counter', 'sample_time_fine') else p.rate_hz)
            for name in p.items
        ]
        config = xsens.output_configuration(items, fmt)
        self._request(xsens.MID_GOTO_CONFIG, b'', xsens.MID_GOTO_CONFIG_ACK, p.handshake_timeout_s)
        echo = self._request(
            xsens.MID_SET_OUTPUT_CONFIGURATION,
            config,
            xsens.MID_OUTPUT_CONFIGURATION,
            p.handshake_timeout_s,
        )
        if xsens.parse_output_configuration(echo) != xsens.parse_output_configuration(config):
            raise xsens.XbusError(
                f'device took another output configuration: asked '
                f'{xsens.parse_output_configuration(config)}, got '
                f'{xsens.parse_output_configuration(echo)}'
            )
        self._request(
            xsens.MID_GOTO_MEASUREMENT, b'', xsens.MID_GOTO_MEASUREMENT_ACK, p.handshake_timeout_s
        )

    def activate(self) -> None:
        """Starts the reader thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._read_loop, name='imu-serial', daemon=True)
        self._thread.start()

    def deactivate(self) -> None:
        """Stops the reader thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def cleanup(self) -> None:
        """Closes the port."""
        if self.port is not None:
            self.port.close()
            self.port = None
        self.connected = False

    # -- streaming -----------------------------------------------------------------------------

    def _read_loop(self) -> None:
        delay = self.params.reconnect_initial_s if self.params else 0.2
        while not self._stop.is_set():
            try:
                assert self.port is not None
                chunk = self.port.read(self.port.in_waiting or 1)
            except (serial.SerialException, OSError, AssertionError) as err:
                self._lost(f'serial port lost: {err}')
                if self._stop.wait(delay):
                    break
                delay = self._reconnect(delay)
                continue
            if not chunk:
                continue
            rx_ns = time.time_ns()
            for mid, payload in self.parser.feed(chunk):
                if mid == xsens.MID_MTDATA2:
                    self._on_data(payload, rx_ns)
                elif mid == xsens.MID_ERROR:
                    self.last_error = f'device error: {xsens.error_text(payload)}'

    def _lost(self, reason: str) -> None:
        if self.connected:
            self.get_logger().error(reason)
        self.last_error = reason
        self.connected = False
        if self.port is not None:
            self.port.close()
            self.port = None

    def _reconnect(self, delay: float) -> float:
        assert self.params is not None
        self.reconnects += 1
        try:
            self._connect()
        except RtFusionError as err:
            self.last_error = str(err)
            return min(delay * 2.0, self.params.reconnect_max_s)
        self.get_logger().info(f'IMU reconnected on {self.params.port}')
        return self.params.reconnect_initial_s

    def _on_data(self, payload: bytes, rx_ns: int) -> None:
        try:
            data = xsens.parse_mtdata2(payload)
        except xsens.XbusError as err:
            self.decode_errors += 1
            self.last_error = str(err)
            return
        if data.sample_time_fine is None:
            self.decode_errors += 1
            return
        values = [
            v for v in (data.quaternion, data.rate_of_turn, data.acceleration) if v is not None
        ]
        if not all(math.isfinite(float(x)) for v in values for x in v):
            self.non_finite += 1  # a sample with NaN/inf: dropped here, never published
            return
        stamp = self.clock.map(data.sample_time_fine, rx_ns)
        if stamp <= self._last_stamp:
            # The mapping moved back (a lower-delay pair arrived, mostly before lock): stamps of
            # one stream never go backwards, the correction is absorbed as time advances.
            self.stamps_held += 1
            stamp = self._last_stamp + 1
        self._last_stamp = stamp
        msg = self._msg
        msg.header.stamp = ns_to_time(stamp)
        if data.quaternion is not None:
            q = data.quaternion
            msg.orientation.w, msg.orientation.x = float(q[0]), float(q[1])
            msg.orientation.y, msg.orientation.z = float(q[2]), float(q[3])
        if data.rate_of_turn is not None:
            w = data.rate_of_turn
            msg.angular_velocity.x, msg.angular_velocity.y = float(w[0]), float(w[1])
            msg.angular_velocity.z = float(w[2])
        if data.acceleration is not None:
            a = data.acceleration
            msg.linear_acceleration.x, msg.linear_acceleration.y = float(a[0]), float(a[1])
            msg.linear_acceleration.z = float(a[2])
        self.pub.publish(msg)
        self.published += 1
        self.latency.record(time.time_ns() - rx_ns)

    def _publish_diagnostics(self) -> None:
        clock = self.clock.state()
        stats = dataclasses.asdict(self.parser.stats)
        if not self.connected:
            level, message = Level.ERROR, self.last_error or 'not connected'
        elif (
            stats['checksum_errors'] or stats['truncated'] or self.decode_errors or self.non_finite
        ):
            level, message = Level.WARN, 'corrupt messages skipped'
        else:
            level, message = Level.OK, 'streaming'
        values = {
            **{f'parser.{k}': v for k, v in stats.items()},
            'published': self.published,
            'decode_errors': self.decode_errors,
            'non_finite': self.non_finite,
            'reconnects': self.reconnects,
            'connected': self.connected,
            'clock.locked': clock.locked,
            'clock.skew_ppm': round(clock.skew_ppm, 2),
            'clock.wraps': clock.wraps,
            'stamps_held': self.stamps_held,
            'last_error': self.last_error,
        }
        summary = self.latency.summary()
        if summary.count:
            values['publish_latency_p50_us'] = round(summary.p50_us, 1)
            values['publish_latency_p99_us'] = round(summary.p99_us, 1)
        self.diag.publish(level, message, values, self.params.port if self.params else '')


def main(args: list[str] | None = None) -> int:
    """Entry point of ``imu_node``."""
    return running.run(ImuNode, args)


if __name__ == '__main__':
    sys.exit(main())

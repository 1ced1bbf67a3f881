#!/usr/bin/env python3
"""An Xsens MTi on a pseudo-terminal, fed by real IMU samples: the serial end of the test rig.

Creates a pty pair and acts as the device on its master side: it answers the configuration
handshake (GoToConfig, SetOutputConfiguration, GoToMeasurement; also ReqDID and ReqFWRev) and,
in measurement mode, streams MTData2 messages with the configured items built from a recording's
``sensor_msgs/Imu`` samples (default: the ADIS16448 of ../shared/data/imu_radar_rio, ~205 Hz).
SampleTimeFine comes from the recording's stamps (10 kHz ticks, starting ``--stf-start`` so that
it wraps when asked), the quaternion from integrating the rate of turn.

Prints ``READY {"port": "/dev/pts/N", ...}`` once the slave end can be opened, and
``SENT {"messages": n, ...}`` when done. Faults on request: ``--garbage-every N`` writes random
bytes and a corrupted message every N messages; ``--refuse`` answers SetOutputConfiguration
with an error; ``--drop-after N`` closes the port after N messages (the device unplugged) and,
with ``--reopen-after S``, opens a new pty S seconds later and prints READY again.
"""

from __future__ import annotations

import argparse
import array
import fcntl
import json
import os
import select
import sys
import termios
import time
import tty
from pathlib import Path

import numpy as np

from rt_fusion.core import rotation
from rt_fusion.core.bag import BagError, imu_samples
from rt_fusion.core.linux import stop_on_signals
from rt_fusion.core.protocols import xsens

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BAG = ROOT.parent / 'shared' / 'data' / 'imu_radar_rio' / 'ti_mmwave_rospkg_demo_ros2'


class Device:
    """The MTi's behaviour on the master side of a pty."""

    def __init__(self, args: argparse.Namespace, samples: dict[str, np.ndarray]) -> None:
        self.args = args
        self.samples = samples
        self.quat = rotation.integrate(samples['stamp'], samples['gyro'])
        self.parser = xsens.XbusParser()
        self.measuring = False
        self.started = False  # --start-file seen
        self.items: list[tuple[int, int]] = []
        self.fmt = xsens.FORMAT_FLOAT32
        self.sent = 0
        self.index = 0
        self.passes = 0  # --loop: completed passes over the samples
        self.loop_offset_ns = 0
        self.vt0 = 0  # device time of the first sample streamed
        self.rng = np.random.default_rng(args.seed)

    def open(self) -> None:
        """A new pty pair; prints READY with the slave path."""
        self.master, slave = os.openpty()
        tty.setraw(slave)
        self.slave_path = os.ttyname(slave)
        self.slave_fd = slave  # kept open so the slave exists until the client opens it
        if self.args.link is not None:  # a stable name, as udev's /dev/serial/by-id links
            tmp = self.args.link.with_suffix('.new')
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.slave_path)
            tmp.replace(self.args.link)
        print(
            'READY ' + json.dumps({'port': self.slave_path, 'samples': len(self.quat)}), flush=True
        )

    def drain(self, deadline_s: float = 10.0) -> None:
        """Waits until the client has read what was sent (the port's input queue is empty).

        A device unplugged mid-stream loses what the pty still holds (up to its 64 KiB of
        buffers): a test counting messages across a drop would measure the scheduler, not the
        node. The drop comes once the client has caught up, as an unplug between packets.
        """
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            pending = array.array('i', [0])
            fcntl.ioctl(self.slave_fd, termios.FIONREAD, pending)
            if pending[0] == 0:
                return
            time.sleep(0.01)  # paced: polling the client's progress

    def close(self) -> None:
        """The device goes away."""
        os.close(self.master)
        os.close(self.slave_fd)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            _, ready, _ = select.select([], [self.master], [], 1.0)
            if ready:
                n = os.write(self.master, view)
                view = view[n:]

    def reply(self, mid: int, data: bytes = b'') -> None:
        self.write(xsens.build_message(mid, data))

    def handle(self, mid: int, data: bytes) -> None:
        if mid == xsens.MID_GOTO_CONFIG:
            self.measuring = False
            self.reply(xsens.MID_GOTO_CONFIG_ACK)
        elif mid == xsens.MID_REQ_DID:
            self.reply(xsens.MID_DEVICE_ID, bytes.fromhex('037003e8'))
        elif mid == xsens.MID_REQ_FW_REV:
            self.reply(xsens.MID_FW_REV, bytes((1, 8, 2)))
        elif mid == xsens.MID_SET_OUTPUT_CONFIGURATION:
            if self.args.refuse:
                self.reply(xsens.MID_ERROR, bytes((0x21,)))
                return
            self.items = xsens.parse_output_configuration(data)
            fmts = {xdi & 0x3 for xdi, _ in self.items if xdi & 0xFFF0 in xsens.VECTOR_ITEMS}
            self.fmt = fmts.pop() if fmts else xsens.FORMAT_FLOAT32
            self.reply(xsens.MID_OUTPUT_CONFIGURATION, data)
        elif mid == xsens.MID_GOTO_MEASUREMENT:
            self.measuring = True
            self.reply(xsens.MID_GOTO_MEASUREMENT_ACK)
            self.t0 = time.monotonic() + self.args.stream_delay
            self.vt0 = self.vtime(self.index)
        else:
            self.reply(xsens.MID_ERROR, bytes((0x04,)))

    def vtime(self, i: int) -> int:
        """Sample ``i``'s stamp [ns] on the device's running clock: --loop passes follow each
        other one sample interval apart, so the device time never jumps back."""
        return int(self.samples['stamp'][i]) + self.loop_offset_ns

    def mtdata2(self, i: int) -> bytes:
        s, stamp0 = self.samples, int(self.samples['stamp'][0])
        values: dict[str, object] = {
            'packet_counter': (i + self.passes * len(self.quat)) & 0xFFFF,
            'sample_time_fine': self.args.stf_start + round((self.vtime(i) - stamp0) / 1e5),
            'quaternion': self.quat[i],
            'rate_of_turn': s['gyro'][i],
            'acceleration': s['accel'][i]
            if not (self.args.nan_every and i % self.args.nan_every == self.args.nan_every - 1)
            else np.array((np.nan, 0.0, np.inf)),  # a faulty sample (--nan-every)
            'free_acceleration': s['accel'][i] - (0.0, 0.0, 9.81),
            'delta_v': s['accel'][i] / 205.0,
            'delta_q': self.quat[i],
            'magnetic_field': (0.3, 0.0, -0.5),
            'temperature': 31.5,
            'status_word': 0x00000007,
        }
        names = {xdi & 0xFFF0: name for name, xdi in xsens.ITEM_XDI.items()}
        chosen = {
            names[xdi & 0xFFF0]: values[names[xdi & 0xFFF0]]
            for xdi, _ in self.items
            if xdi & 0xFFF0 in names
        }
        return xsens.build_message(xsens.MID_MTDATA2, xsens.encode_mtdata2(chosen, self.fmt))

    def run(self) -> None:
        """Serves until every sample is sent (or the port is dropped for good)."""
        total = self.args.count or len(self.quat)
        while True:
            timeout = 0.0 if self.measuring else 0.05
            readable, _, _ = select.select([self.master], [], [], timeout)
            if readable:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b''
                for mid, data in self.parser.feed(chunk):
                    self.handle(mid, data)
            if not self.measuring:
                continue
            if self.index >= total:
                if not self.args.loop or total < 2:
                    break
                st = self.samples['stamp']
                span = int(st[total - 1]) - int(st[0])
                self.loop_offset_ns += span + span // (total - 1)
                self.passes += 1
                self.index = 0
                continue
            if self.args.start_file is not None and not self.started:
                if not self.args.start_file.exists():
                    time.sleep(0.01)  # --start-file: the consumer says when it is listening
                    continue
                self.started = True
                self.t0 = time.monotonic() + self.args.stream_delay
                self.vt0 = self.vtime(self.index)
            if time.monotonic() < self.t0:
                time.sleep(0.01)  # paced: --stream-delay
                continue
            if self.args.speed > 0:
                due = self.t0 + (self.vtime(self.index) - self.vt0) / 1e9 / self.args.speed
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(min(0.002, wait))  # paced: the sample clock
                    continue
            msg = self.mtdata2(self.index)
            if self.args.garbage_every and self.sent and self.sent % self.args.garbage_every == 0:
                self.write(self.rng.integers(0, 256, 17, dtype=np.uint8).tobytes())
                bad = bytearray(msg)
                bad[-2] ^= 0x5A  # a corrupted copy: its checksum fails
                self.write(bytes(bad))
            self.write(msg)
            self.sent += 1
            self.index += 1
            if self.args.drop_after and self.sent == self.args.drop_after:
                self.drain()
                self.close()
                print('DROPPED ' + json.dumps({'after': self.sent}), flush=True)
                if self.args.reopen_after <= 0:
                    break
                time.sleep(self.args.reopen_after)  # paced: the device is away
                self.measuring = False
                self.parser = xsens.XbusParser()
                self.open()
        self.drain()
        time.sleep(self.args.linger)  # let the client read what is in flight
        print('SENT ' + json.dumps({'messages': self.sent}), flush=True)


def main(argv: list[str] | None = None) -> int:
    """Runs the emulator."""
    stop_on_signals()  # SIGINT/SIGTERM end it cleanly, even when started with SIGINT ignored
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--bag', type=Path, default=DEFAULT_BAG)
    parser.add_argument('--topic', default='/sensor_platform/imu')
    parser.add_argument('--count', type=int, default=0, help='samples to send (0: all)')
    parser.add_argument('--speed', type=float, default=1.0, help='0: as fast as possible')
    parser.add_argument('--stf-start', type=int, default=0, help='SampleTimeFine of sample 0')
    parser.add_argument('--garbage-every', type=int, default=0)
    parser.add_argument(
        '--nan-every', type=int, default=0, help='every Nth sample: NaN and inf acceleration'
    )
    parser.add_argument('--refuse', action='store_true')
    parser.add_argument('--drop-after', type=int, default=0)
    parser.add_argument('--reopen-after', type=float, default=0.0)
    parser.add_argument(
        '--stream-delay',
        type=float,
        default=0.0,
        help='seconds between GoToMeasurement and the first sample',
    )
    parser.add_argument('--linger', type=float, default=1.0)
    parser.add_argument(
        '--loop',
        action='store_true',
        help='after the last sample start again, the device clock running on (until stopped)',
    )
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--link', type=Path, help='keep a symlink to the current slave here')
    parser.add_argument(
        '--start-file',
        type=Path,
        help='stream only once this file exists (a test creates it when its listener matched)',
    )
    args = parser.parse_args(argv)
    if not args.bag.exists():
        print(f'xsens_emulator: recording not found: {args.bag}', file=sys.stderr)
        return 2
    try:
        samples = imu_samples(args.bag, args.topic, args.count)
    except BagError as err:
        raise SystemExit(f'xsens_emulator: {err}') from err
    device = Device(args, samples)
    try:
        # open() prints READY: a signal sent on that line may land before run() (a loaded CI
        # run once died of it, exit -2: SIGINT outside this try).
        device.open()
        device.run()
    except KeyboardInterrupt:  # stopped from outside (the demo's shutdown): a normal end
        print('STOPPED ' + json.dumps({'sent': device.sent}), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Feeds raw PCM into the FIFO an ALSA ``file`` PCM reads as its capture input: an emulated
microphone (tests, and vehicle.launch.py emulate:=true).

Opened read-write, so the FIFO always has a writer (PortAudio opens and closes the PCM while it
probes devices) and blocking writes pace the data by what the capture consumes. Usage:
  python tools/alsa_feeder.py FIFO RAWFILE [--stall-after BYTES --stall-s S] [--hold S]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rt_fusion.core.linux import stop_on_signals


def main() -> None:
    stop_on_signals()  # SIGINT/SIGTERM end it cleanly, even when started with SIGINT ignored
    parser = argparse.ArgumentParser()
    parser.add_argument('fifo')
    parser.add_argument('raw')
    parser.add_argument('--stall-after', type=int, default=0)
    parser.add_argument('--stall-s', type=float, default=0.0)
    parser.add_argument(
        '--hold', type=float, default=30.0, help='keep the FIFO open this long after the data [s]'
    )
    parser.add_argument(
        '--pace-bytes-per-s',
        type=float,
        default=0.0,
        help='write 4096-byte chunks at this byte rate (0: as fast as read)',
    )
    parser.add_argument('--loop', action='store_true', help='start the data again at its end')
    parser.add_argument(
        '--start-file',
        type=Path,
        help='write nothing until this file exists (the consumer says when it is listening)',
    )
    args = parser.parse_args()
    try:
        _feed(args)
    except KeyboardInterrupt:  # Ctrl-C or launch's SIGINT: a normal end
        sys.exit(0)


def _feed(args: argparse.Namespace) -> None:
    data = open(args.raw, 'rb').read()  # noqa: SIM115 - whole small file
    fd = os.open(args.fifo, os.O_RDWR)
    print('OPEN', flush=True)
    while args.start_file is not None and not args.start_file.exists():
        time.sleep(0.01)  # paced: waiting for the consumer's signal
    pos = 0
    stalled = False
    while pos < len(data):
        end = len(data)
        if args.stall_after and not stalled:
            end = min(end, args.stall_after)
        start = time.monotonic()
        first = pos
        while pos < end:
            pos += os.write(fd, data[pos : min(end, pos + 4096)])  # <= PIPE_BUF: atomic
            if args.pace_bytes_per_s:
                delay = start + (pos - first) / args.pace_bytes_per_s - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # paced: a device delivers at its sample rate
        if args.stall_after and not stalled and pos >= args.stall_after:
            print('STALL', flush=True)
            time.sleep(args.stall_s)  # paced: the device goes silent
            stalled = True
            print('RESUME', flush=True)
        if args.loop and pos >= len(data):
            pos = 0
    print(f'FED {len(data)}', flush=True)
    time.sleep(args.hold)  # paced: keep the FIFO open so the capture blocks instead of EOF
    os.close(fd)


if __name__ == '__main__':
    main()

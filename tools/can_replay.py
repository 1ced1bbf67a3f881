#!/usr/bin/env python3
"""Plays a CAN log (candump -l, .asc, .blf, ... anything python-can reads) onto a CAN bus.

At the recorded timing (``--rate`` scales it) or as fast as possible (``--rate 0``). On the
vehicle, onto SocketCAN (``-i socketcan -c can0``, or a vcan); between processes on one machine,
onto python-can's ``udp_multicast`` interface (the tests do this).

  python tools/can_replay.py ../shared/data/radar_ars408/candump-2026-06-24_154259.log \\
      -i udp_multicast -c 239.74.163.2 --port 43113

``--answer-config ID`` makes it a minimal stand-in for an ARS408 with that sensor id: before
and while playing, it answers every RadarConfiguration (0x200) it receives with a RadarState
(0x201) that echoes it (``--answer-wrong`` echoes a different maximum distance, to test the
check).

Prints ``RESULT frames=... seconds=...`` at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import can
from rich.progress import Progress

from rt_fusion.core.linux import stop_on_signals


def _answerer(bus: can.BusABC, args: argparse.Namespace) -> Callable[[float], bool]:
    """A function that answers one pending RadarConfiguration; True when it did."""
    from rt_fusion.core.protocols.ars408 import RADAR_CFG, RADAR_STATE, load_database  # noqa: PLC0415

    db = load_database(args.answer_config)
    cfg_msg = db.get_message_by_frame_id(RADAR_CFG + 0x10 * args.answer_config)
    state_msg = db.get_message_by_frame_id(RADAR_STATE + 0x10 * args.answer_config)

    def answer(timeout: float) -> bool:
        got = bus.recv(timeout=timeout)
        if got is None or got.arbitration_id != cfg_msg.frame_id:
            return False
        c = cast('dict[str, Any]', cfg_msg.decode(bytes(got.data), decode_choices=False))
        max_distance = c['RadarCfg_MaxDistance'] + (40 if args.answer_wrong else 0)
        state: dict[str, Any] = dict.fromkeys((s.name for s in state_msg.signals), 0)
        state |= {
            'RadarState_MaxDistanceCfg': max_distance,
            'RadarState_SensorID': c['RadarCfg_SensorID'],
            'RadarState_OutputTypeCfg': c['RadarCfg_OutputType'],
            'RadarState_RadarPowerCfg': c['RadarCfg_RadarPower'],
            'RadarState_SendQualityCfg': c['RadarCfg_SendQuality'],
            'RadarState_SendExtInfoCfg': c['RadarCfg_SendExtInfo'],
            'RadarState_SortIndex': c['RadarCfg_SortIndex'],
            'RadarState_RCS_Threshold': c['RadarCfg_RCS_Threshold'],
            'RadarState_NVMReadStatus': 1,
        }
        bus.send(
            can.Message(
                arbitration_id=state_msg.frame_id,
                data=state_msg.encode(state),
                is_extended_id=False,
            )
        )
        return True

    return answer


def main(argv: list[str] | None = None) -> int:
    """Entry point; Ctrl-C (or launch's SIGINT) ends the replay normally."""
    stop_on_signals()  # SIGINT/SIGTERM end it cleanly, even when started with SIGINT ignored
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 0


def _main(argv: list[str] | None = None) -> int:
    """Replays the log; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('log', type=Path)
    parser.add_argument('-i', '--interface', default='udp_multicast')
    parser.add_argument('-c', '--channel', default='239.74.163.2')
    parser.add_argument('--port', type=int, default=43113, help='udp_multicast port')
    parser.add_argument(
        '--rate',
        type=float,
        default=1.0,
        help='speed factor of the recorded timing (0: as fast as possible)',
    )
    parser.add_argument('--start-delay', type=float, default=0.0, help='wait before playing [s]')
    parser.add_argument('--limit', type=int, default=0, help='stop after this many frames')
    parser.add_argument('--quiet', action='store_true')
    parser.add_argument(
        '--loop', action='store_true', help='play the log again and again until stopped'
    )
    parser.add_argument(
        '--answer-config',
        type=int,
        metavar='SENSOR_ID',
        help='answer RadarConfiguration frames with a RadarState echo',
    )
    parser.add_argument('--answer-wrong', action='store_true')
    parser.add_argument(
        '--wait-config',
        type=float,
        default=0.0,
        help='with --answer-config: wait this long for a configuration first',
    )
    args = parser.parse_args(argv)
    if not args.log.is_file():
        parser.error(f'no such log: {args.log}')
    kwargs: dict[str, Any] = {'interface': args.interface, 'channel': args.channel}
    if args.interface == 'udp_multicast':
        kwargs['port'] = args.port
    frames = list(can.LogReader(str(args.log)))
    if args.limit:
        frames = frames[: args.limit]
    time.sleep(args.start_delay)
    with can.Bus(**kwargs) as bus, Progress(disable=args.quiet, transient=True) as progress:
        answer = _answerer(bus, args) if args.answer_config is not None else None
        if answer is not None and args.wait_config > 0:
            deadline = time.monotonic() + args.wait_config
            while time.monotonic() < deadline and not answer(0.05):
                pass
        start = time.monotonic()
        task = progress.add_task(f'replaying {args.log.name}', total=len(frames))
        t0 = frames[0].timestamp if frames else 0.0
        sent = 0
        passes = 0
        while True:
            pass_start = time.monotonic()
            for i, msg in enumerate(frames):
                if args.rate > 0:
                    due = pass_start + (msg.timestamp - t0) / args.rate
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)  # paced: the recorded timing
                bus.send(
                    can.Message(
                        arbitration_id=msg.arbitration_id,
                        data=msg.data,
                        is_extended_id=msg.is_extended_id,
                        timestamp=time.time(),
                    )
                )
                sent += 1
                if answer is not None:
                    answer(0.0)
                if i % 200 == 0:
                    progress.update(task, completed=i)
            passes += 1
            if not args.loop or not frames:
                break
            if args.rate > 0:  # the next pass one mean frame interval after the last frame
                gap = (frames[-1].timestamp - t0) / max(1, len(frames) - 1) / args.rate
                time.sleep(gap)  # paced: the recorded timing
    print(f'RESULT frames={sent} seconds={time.monotonic() - start:.3f}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Processes for the shared-memory tests: real writers and readers in separate processes.

Usage: python -m tests.core.shm_procs ROLE NAME [options]. Each prints JSON lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from rt_fusion.core.shm import Overrun, SegmentNotFoundError, ShmRingReader, ShmRingWriter


def fill_value(sequence: int) -> int:
    """Every byte of frame ``sequence`` has this value, so a mixed frame is visible."""
    return sequence % 251


def writer(args: argparse.Namespace) -> None:
    with ShmRingWriter.create(args.name, args.size, args.slots) as ring:
        print(json.dumps({'ready': True, 'epoch': ring.epoch_ns}), flush=True)
        if args.gate:
            sys.stdin.readline()  # start when the test says its readers are attached
        period = 1.0 / args.rate if args.rate > 0 else 0.0
        next_t = time.monotonic()
        for seq in range(args.count):
            ws = ring.acquire((args.size,), np.uint8, 'tensor')
            ws.array.fill(fill_value(seq))
            ring.commit(ws, stamp_ns=seq, available_ns=time.time_ns())
            if period:
                next_t += period
                time.sleep(max(0.0, next_t - time.monotonic()))
        if args.linger:
            sys.stdin.readline()  # until the test says so
    print(json.dumps({'done': True}), flush=True)


def hang(args: argparse.Namespace) -> None:
    ring = ShmRingWriter.create(args.name, args.size, args.slots)
    for seq in range(3):
        ring.write(np.full(args.size, fill_value(seq), np.uint8), 'tensor', seq, seq)
    ws = ring.acquire((args.size,), np.uint8, 'tensor')
    ws.array[: args.size // 2] = 0xEE  # half-written
    print(json.dumps({'midwrite': ws.sequence, 'epoch': ring.epoch_ns}), flush=True)
    time.sleep(3600)  # paced: hangs mid-write until the test sends SIGKILL


def attach(args: argparse.Namespace) -> None:
    with ShmRingReader.attach(args.name) as ring:
        view = ring.read_sequence(ring.commits - 1)
        ok = view is not None and not isinstance(view, Overrun)
        print(json.dumps({'attached': True, 'read': ok}), flush=True)


def follower(args: argparse.Namespace) -> None:
    """Follows the ring through the fast path, copying frames; checks each copy is uniform."""
    deadline = time.monotonic() + args.timeout
    ring = None
    while ring is None:
        try:
            ring = ShmRingReader.attach(args.name)
        except SegmentNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # paced: polling for the writer's segment to appear
    print(json.dumps({'attached': True}), flush=True)
    stats = {'delivered': 0, 'overruns': 0, 'mixed': 0, 'torn_caught': 0}
    seq = 0
    while seq < args.count and time.monotonic() < deadline:
        got = ring.wait_next(seq, 100_000_000)
        if got is None:
            continue
        if isinstance(got, Overrun):
            stats['overruns'] += 1
            seq = max(seq + 1, ring.oldest_available())
            continue
        if args.delay:
            time.sleep(args.delay)  # paced: a deliberately slow reader
        # What FrameView.copy() does, with the raw copy kept to see what the seqlock caught.
        raw = got.array.copy()
        intact = got.valid()
        uniform = bool((raw == fill_value(seq)).all())
        if intact:
            stats['delivered'] += 1
            stats['mixed'] += not uniform  # torn data passed as valid: must stay 0
        else:
            stats['overruns'] += 1
            stats['torn_caught'] += not uniform
        seq += 1
    ring.close()
    print(json.dumps(stats), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('role', choices=['writer', 'hang', 'attach', 'follower'])
    parser.add_argument('name')
    parser.add_argument('--size', type=int, default=4096)
    parser.add_argument('--slots', type=int, default=4)
    parser.add_argument('--count', type=int, default=100)
    parser.add_argument('--rate', type=float, default=0.0)
    parser.add_argument('--delay', type=float, default=0.0)
    parser.add_argument('--timeout', type=float, default=30.0)
    parser.add_argument('--linger', action='store_true')
    parser.add_argument('--gate', action='store_true')
    args = parser.parse_args()
    {'writer': writer, 'hang': hang, 'attach': attach, 'follower': follower}[args.role](args)


if __name__ == '__main__':
    main()

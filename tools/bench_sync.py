#!/usr/bin/env python3
"""Benchmark: hardware-clock mapping accuracy and per-frame alignment cost, with known truth.

Simulates a sensor suite on one true timeline: a 30 Hz camera, a 200 Hz IMU whose clock is a
32-bit 10 kHz counter (Xsens SampleTimeFine) started 5 s before it wraps, two ~13.6 Hz radars and
48 kHz audio in 1024-sample blocks. Every sensor clock drifts (±100 ppm, random) and is offset by
seconds; every sample reaches the host after a heavy-tailed delay (log-normal, median 0.3 ms,
clipped at 5 ms). Each stream is mapped with its own ClockMapper; the mapped stamps feed the
Aligner exactly as the fusion node does.

Reports, per sensor, the mapping error after lock (|mapped - true|, P50/P99/max) and the lock
time, and the aligner's cost per camera frame (the poll() that emits it). Writes
results/bench/sync.{json,png}. Final line:
  RESULT map_err_p99_us=... lock_s=... align_p99_us=...
(map error over all sensors; lock time of the slowest sensor).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
from pathlib import Path

import numpy as np

from rt_fusion.core.clock import ClockMapper, ClockParams
from rt_fusion.core.latency import summarize_ns
from rt_fusion.core.sync import Aligner, SyncParams

ROOT = Path(__file__).resolve().parents[1]
S = 1_000_000_000


@dataclasses.dataclass
class Sensor:
    """One simulated stream: its rate, its clock and what it carries."""

    name: str
    period_ns: int
    tick_ns: float  # hardware tick
    counter_bits: int
    drift: float  # hardware seconds per true second - 1
    hw_offset_ticks: int


def simulate(seconds: float, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """True times, raw hardware stamps and host receive times of every stream."""
    rng = np.random.default_rng(seed)
    host_start = 1_700_000_000 * S
    sensors = [
        Sensor('camera', S // 30, 1.0, 0, rng.uniform(-1e-4, 1e-4), int(rng.uniform(1, 9) * S)),
        Sensor('imu', S // 200, 100_000.0, 32, rng.uniform(-1e-4, 1e-4), 2**32 - 50_000),  # 5 s
        Sensor(
            'radar0',
            int(S / 13.6),
            1000.0,
            0,
            rng.uniform(-1e-4, 1e-4),
            int(rng.uniform(1, 9) * 1e6),
        ),
        Sensor(
            'radar1',
            int(S / 13.6),
            1000.0,
            0,
            rng.uniform(-1e-4, 1e-4),
            int(rng.uniform(1, 9) * 1e6),
        ),
        Sensor(
            'audio',
            1024 * S // 48_000,
            1.0,
            0,
            rng.uniform(-1e-4, 1e-4),
            int(rng.uniform(1, 9) * S),
        ),
    ]
    out = {}
    for s in sensors:
        # A device samples on its own clock: its stamps are exact multiples of its period in
        # its ticks, and the true times follow from its drift.
        period_ticks = round(s.period_ns / s.tick_ns)
        ticks = np.arange(int(seconds * S / s.period_ns), dtype=np.int64) * period_ticks
        phase = int(rng.uniform(0, s.period_ns))
        true = host_start + phase + np.round(ticks * s.tick_ns / (1.0 + s.drift)).astype(np.int64)
        raw = ticks + s.hw_offset_ticks
        if s.counter_bits:
            raw %= 1 << s.counter_bits
        delay = np.minimum(rng.lognormal(np.log(0.3e6), 1.0, true.size), 5e6).astype(np.int64)
        out[s.name] = {
            'true': true,
            'raw': raw,
            'recv': true + delay,
            'tick_ns': np.array(s.tick_ns),
            'bits': np.array(s.counter_bits),
            'drift_ppm': np.array(s.drift * 1e6),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='30 s of simulated time')
    parser.add_argument('--seconds', type=float, default=120.0)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench')
    args = parser.parse_args(argv)
    seconds = 30.0 if args.quick else args.seconds

    from rich.progress import Progress  # noqa: PLC0415

    from rt_fusion import report  # noqa: PLC0415

    streams = simulate(seconds, args.seed)
    # Interleave every sample of every stream in receive order, as the host sees them.
    events = sorted(
        (int(recv), name, k) for name, st in streams.items() for k, recv in enumerate(st['recv'])
    )
    mappers = {
        # Radars send ~14 pairs a second: wider bins so each still holds a few.
        name: ClockMapper(
            ClockParams(
                tick_ns=float(st['tick_ns']),
                counter_bits=int(st['bits']),
                window_s=40.0,
                bin_s=0.25 if 'radar' in name else 0.1,
                lock_span_s=2.0,
            )
        )
        for name, st in streams.items()
    }
    aligner = Aligner(
        SyncParams(radars=('radar0', 'radar1'), audio_rate_hz=48_000, max_wait_s=0.05)
    )
    errors: dict[str, list[int]] = {name: [] for name in streams}
    err_t: dict[str, list[float]] = {name: [] for name in streams}
    lock_ns: dict[str, int | None] = dict.fromkeys(streams)
    align_cost: list[int] = []
    start = events[0][0]
    rng = np.random.default_rng(args.seed + 1)
    radar_pts = {n: rng.normal(size=(64, 4)) * [20, 5, 1, 3] for n in ('radar0', 'radar1')}
    audio_block = rng.normal(size=(1024, 1)).astype(np.float32)
    gyro, accel = np.array([0.01, -0.02, 0.3]), np.array([0.1, 0.0, 9.81])
    emitted = 0
    # As in the nodes' real-time loops: no garbage collection inside the measured work, an
    # explicit one at a safe point (here every 2,000 events).
    gc.collect()
    gc.freeze()
    gc.disable()
    with Progress(console=report.console, transient=True) as progress:
        task = progress.add_task('replaying simulated streams', total=len(events))
        for i, (recv, name, k) in enumerate(events):
            st, mapper = streams[name], mappers[name]
            stamp = mapper.map(int(st['raw'][k]), recv)
            if mapper.locked:
                if lock_ns[name] is None:
                    lock_ns[name] = recv - start
                errors[name].append(stamp - int(st['true'][k]))
                err_t[name].append((recv - start) / S)
            if name == 'camera':
                aligner.push_camera(stamp, k, recv)
            elif name == 'imu':
                aligner.push_imu(stamp, gyro, accel, recv)
            elif name == 'audio':
                aligner.push_audio(stamp, audio_block, recv)
            else:
                aligner.push_radar(name, stamp, radar_pts[name], recv)
            t0 = time.perf_counter_ns()
            out = aligner.poll(recv)
            cost = time.perf_counter_ns() - t0
            if out and recv - start > 5 * S:  # steady state: every sensor has history
                align_cost.append(cost // len(out))
            emitted += len(out)
            if i % 2000 == 0:
                gc.collect(0)
                progress.update(task, completed=i)
    gc.enable()

    rows, table_extra, result_sensors = {}, {}, {}
    for name in streams:
        e = np.abs(np.asarray(errors[name], np.int64))
        rows[f'{name} |mapped - true|'] = summarize_ns(e)
        state = mappers[name].state()
        lock = lock_ns[name]
        table_extra[f'{name} |mapped - true|'] = {
            'lock s': f'{lock / S:.2f}' if lock is not None else 'never',
            'skew true/est ppm': f'{float(streams[name]["drift_ppm"]):+.1f}/{state.skew_ppm:+.1f}',
            'wraps': str(state.wraps),
            'resets': str(state.resets),
        }
        result_sensors[name] = {'lock_s': lock / S if lock else None, **dataclasses.asdict(state)}
    all_err = np.abs(np.concatenate([np.asarray(v, np.int64) for v in errors.values()]))
    rows['all sensors'] = summarize_ns(all_err)
    rows['aligner cost / frame'] = summarize_ns(align_cost)
    report.console.print(
        report.latency_table(
            f'clock mapping after lock and alignment cost ({seconds:g} s simulated, '
            f'{emitted} frames aligned)',
            rows,
            extra=table_extra,
        )
    )
    report.console.print(
        f'aligner counters: { {k: v.__dict__ for k, v in aligner.stats.items()} }'
    )
    report.write_json(
        args.out / 'sync.json',
        {
            'seconds': seconds,
            'sensors': result_sensors,
            'map_err': rows['all sensors'],
            'align_cost': rows['aligner cost / frame'],
            'stats': {k: v.__dict__ for k, v in aligner.stats.items()},
        },
    )
    _plot(args.out / 'sync.png', errors, err_t)
    report.console.print(f'written: {args.out / "sync.json"}, {args.out / "sync.png"}')
    locks = [v for v in lock_ns.values() if v is not None]
    report.result_line(
        map_err_p99_us=rows['all sensors'].p99_us,
        lock_s=max(locks) / S if len(locks) == len(lock_ns) else float('nan'),
        align_p99_us=rows['aligner cost / frame'].p99_us,
    )
    return 0


def _plot(path: Path, errors: dict[str, list[int]], err_t: dict[str, list[float]]) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=110)
    for name, errs in errors.items():
        ax.plot(err_t[name], np.asarray(errs) / 1e3, '.', ms=1.5, label=name)
    ax.set_xlabel('time [s]')
    ax.set_ylabel('mapped - true [µs]')
    ax.set_title('bench_sync: hardware stamps mapped onto the host timeline (after lock)')
    ax.grid(True, alpha=0.3)
    ax.legend(markerscale=6, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


if __name__ == '__main__':
    sys.exit(main())

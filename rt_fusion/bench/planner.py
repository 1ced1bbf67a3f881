"""The planner benchmark's workloads (``tools/bench_planner.py`` is its command line): seeded
traffic scenes, the brute-force reference solver, the solve-time run, the 100 Hz planning loop
in a process of its own under SCHED_FIFO or SCHED_OTHER with a load beside it, and the
scenario picture."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.bench import realtime as realtime_bench
from rt_fusion.core import realtime
from rt_fusion.core.latency import summarize_ns
from rt_fusion.core.planning import frenet, frenet_layout
from rt_fusion.core.planning.reference import ReferencePath

CAR = (4.5, 1.9)


def make_planner(jit: bool | None = None) -> frenet.FrenetPlanner:
    return frenet.FrenetPlanner(ReferencePath(np.array([[0.0, 0.0], [800.0, 0.0]])), jit=jit)


def traffic(rng: np.random.Generator, n: int = 20) -> tuple[float, list[frenet.Obstacle]]:
    """Ego speed and ``n`` vehicles on a three-lane road around the ego (not on top of it)."""
    obstacles: list[frenet.Obstacle] = []
    while len(obstacles) < n:
        lane = float(rng.choice([-3.5, 0.0, 3.5]))
        x = float(rng.uniform(-30, 150))
        if abs(x) < 10:
            continue
        heading = float(rng.normal(0, 0.03))
        speed = float(rng.uniform(0, 16))
        obstacles.append(
            frenet.Obstacle(
                x,
                lane + float(rng.normal(0, 0.3)),
                heading,
                *CAR,
                vx=speed * math.cos(heading),
                vy=speed * math.sin(heading),
                yaw_rate=float(rng.normal(0, 0.02)),
            )
        )
    return float(rng.uniform(5, 18)), obstacles


def brute_force(
    planner: frenet.FrenetPlanner, start: frenet.FrenetState, obstacles: list[frenet.Obstacle]
) -> int:
    """The textbook way: every candidate to x/y, the distance between the ego's and every
    obstacle's bounding circle at every step (candidates × obstacles × steps at once), the
    cheapest collision-free candidate. Returns its index (-1: none)."""
    p = planner.p
    x, y, ok = planner.candidate_paths(start)  # (K, T)
    ox, oy, _ = frenet.predict(obstacles, planner.t)  # (O, T)
    r = math.hypot(p.vehicle_length, p.vehicle_width) / 2 + math.hypot(*CAR) / 2 + p.safety_margin
    dx = x[:, None, :] - ox[None]
    dy = y[:, None, :] - oy[None]
    hit = ((dx * dx + dy * dy) < r * r).any(axis=(1, 2))
    cost = (
        p.w_offset * (planner.cand_d - p.preferred_offset) ** 2
        + p.w_speed * (planner.cand_v - p.desired_speed) ** 2
        + p.w_time / planner.cand_t
    )
    cost = np.where(ok & ~hit, cost, np.inf)
    i = int(np.argmin(cost))
    return i if math.isfinite(cost[i]) else -1


def bench_solve(n: int, n_brute: int, seed: int, cpu: int) -> dict[str, Any]:
    """The same scenes solved by the planner as the nodes run it (compiled by numba where it is
    installed: ``frenet.COMPILED``), by its numpy form, and (the first ``n_brute``) by brute
    force."""
    os.sched_setaffinity(0, {cpu})
    rng = np.random.default_rng(seed)
    scenes = [traffic(rng) for _ in range(n)]
    kind = frenet.warm_up()  # numba's import and cache before the clock runs
    planners = {kind: make_planner(jit=kind == 'numba')}
    if kind == 'numba':
        planners['numpy'] = make_planner(jit=False)
    for planner in planners.values():
        for v0, obs in scenes[:20]:  # warm
            planner.previous = None
            planner.plan(frenet.FrenetState(0, v0, 0, 0, 0, 0), obs)
    solve: dict[str, list[int]] = {name: [] for name in planners}
    checks, statuses = [], [0, 0, 0]
    from rich.progress import Progress  # noqa: PLC0415

    with Progress(transient=True) as progress:
        task = progress.add_task(f'{n} solves', total=n * len(planners) + n_brute)
        for name, planner in planners.items():
            for v0, obs in scenes:
                planner.previous = None
                start = frenet.FrenetState(0, v0, 0, 0, 0, 0)
                t0 = time.perf_counter_ns()
                traj = planner.plan(start, obs)
                solve[name].append(time.perf_counter_ns() - t0)
                if name == kind:
                    checks.append(traj.collision_checks)
                    statuses[traj.status] += 1
                progress.advance(task)
        brute = []
        planner = planners[kind]
        for v0, obs in scenes[:n_brute]:
            start = frenet.FrenetState(0, v0, 0, 0, 0, 0)
            t0 = time.perf_counter_ns()
            brute_force(planner, start, obs)
            brute.append(time.perf_counter_ns() - t0)
            progress.advance(task)
    return {
        'kind': kind,
        'solve_ns': solve[kind],
        'numpy_ns': solve['numpy'],
        'brute_ns': brute,
        'checks': checks,
        'statuses': statuses,
        'candidates': planner.n,
    }


def loop(mode: str, seconds: float, hz: float, cpu: int, priority: int, seed: int) -> None:
    """Runs in a child: 100 Hz planning with moving traffic; prints a JSON summary."""
    rng = np.random.default_rng(seed)
    v0, obstacles = traffic(rng)
    planner = make_planner()
    period = round(1e9 / hz)
    n = int(seconds * hz)
    monitor = realtime.DeadlineMonitor(period, capacity=n + 10)
    state = frenet.FrenetState(0, v0, 0, 0, 0, 0)
    planner.plan(state, obstacles)  # warm
    planner.previous = None
    params = realtime.RealtimeParams(
        rt_priority=priority if mode == 'fifo' else 0,
        cpus=(cpu,),
        lock_memory=mode == 'fifo',
        prefault_heap_mib=64 if mode == 'fifo' else 0,
        freeze_gc=mode == 'fifo',
    )
    report = realtime.apply(params)
    dt = 1.0 / hz
    t_scene = 0.0
    nxt = time.monotonic_ns() + period
    for _ in range(n):
        delay = nxt - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        woke = time.monotonic_ns()
        monitor.start(nxt, woke)
        t_scene += dt
        moved = [
            dataclasses.replace(o, x=o.x + o.vx * t_scene, y=o.y + o.vy * t_scene)
            for o in obstacles
        ]
        traj = planner.plan(state, moved)
        state = (
            traj.state_at(dt)
            if traj.status == frenet_layout.STATUS_OK
            else frenet.FrenetState(state.s, state.s_d, 0, state.d, 0, 0)
        )
        if state.s > 400:  # wrap the scene around before the road ends
            state = frenet.FrenetState(0, state.s_d, 0, state.d, 0, 0)
            t_scene = 0.0
        monitor.finish(time.monotonic_ns())
        if mode == 'fifo':
            realtime.collect_at_safe_point()
        nxt += period
    s = monitor.summary()
    late, run = s['lateness'], s['runtime']
    assert not isinstance(late, int)
    assert not isinstance(run, int)
    print(
        json.dumps(
            {
                'mode': mode,
                'policy': report.policy,
                'warnings': report.warnings,
                'iterations': s['iterations'],
                'misses': s['overruns'],
                'late': late.as_dict(),
                'runtime': run.as_dict(),
                'late_ns': monitor.lateness.samples_ns.tolist(),
            }
        )
    )


def run_loops(args: argparse.Namespace, cpu: int) -> dict[str, dict[str, Any]]:
    n = os.cpu_count() or 1
    stop = multiprocessing.Event()
    burners = []
    targets = [c for c in range(n) if c != cpu]
    if args.load == 'both':
        targets.append(cpu)
    if args.load != 'none':
        for c in targets:
            proc = multiprocessing.Process(target=realtime_bench.burn, args=(stop,), daemon=True)
            proc.start()
            if proc.pid is not None:
                os.sched_setaffinity(proc.pid, {c})
            burners.append(proc)
    out = {}
    from rich.console import Console  # noqa: PLC0415

    try:
        with Console().status('') as status:
            for mode in ('fifo', 'other'):
                status.update(
                    f'planning loop {mode}: {args.hz:.0f} Hz for {args.loop_s:.0f} s '
                    f'on CPU {cpu}, load on CPUs {targets}'
                )
                res = subprocess.run(
                    [
                        sys.executable,
                        '-m',
                        'rt_fusion_tools.bench_planner',
                        '--loop',
                        mode,
                        str(args.loop_s),
                        str(args.hz),
                        str(cpu),
                        str(args.priority),
                        str(args.seed),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=args.loop_s * 3 + 60,
                    check=True,
                )
                out[mode] = json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        stop.set()
        for proc in burners:
            proc.join(5)
    return out


def scenario_png(path: Path, loops: dict[str, dict[str, Any]], solve_ns: list[int]) -> None:
    """Closed loop past a stopped car with traffic in the left lane + the loop's lateness."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    planner = make_planner()
    obstacles = [
        frenet.Obstacle(45.0, 0.0, 0.0, *CAR),  # stopped in the ego lane
        frenet.Obstacle(20.0, 3.5, 0.0, *CAR, vx=13.0),  # left lane, a bit faster
        frenet.Obstacle(-15.0, -3.5, 0.0, *CAR, vx=14.0),
    ]  # right lane, from behind
    state = frenet.FrenetState(0.0, 12.0, 0.0, 0.0, 0.0, 0.0)
    fig = plt.figure(figsize=(13, 8), dpi=110)
    ax = fig.add_subplot(2, 1, 1)
    for lane in (-5.25, -1.75, 1.75, 5.25):
        ax.axhline(lane, color='0.6', lw=1.0, ls='-' if abs(lane) > 5 else '--')
    x, y, ok = planner.candidate_paths(state)
    for k in range(x.shape[0]):
        ax.plot(x[k], y[k], color='0.75' if ok[k] else '#f4b6b6', lw=0.4, zorder=1)
    cmap = plt.get_cmap('viridis')
    step, seconds = 0.1, 6.0
    ego = []
    for k in range(int(seconds / step)):
        now = k * step
        moved = [dataclasses.replace(o, x=o.x + o.vx * now, y=o.y + o.vy * now) for o in obstacles]
        traj = planner.plan(state, moved)
        if k % 5 == 0:
            ax.plot(traj.x, traj.y, color=cmap(now / seconds), lw=1.4, zorder=3)
            for o in moved:
                ax.add_patch(
                    Rectangle(
                        (o.x - o.length / 2, o.y - o.width / 2),
                        o.length,
                        o.width,
                        color=cmap(now / seconds),
                        alpha=0.35,
                        zorder=2,
                    )
                )
        ego.append((traj.x[0], traj.y[0]))
        state = traj.state_at(step)
    ex, ey = np.array(ego).T
    ax.plot(ex, ey, 'k-', lw=2.0, label='ego (follows each plan for 0.1 s)', zorder=4)
    ax.set_xlim(-20, 110)
    ax.set_ylim(-6.5, 6.5)
    ax.set_aspect('equal')
    ax.set_title(
        'Frenet planner, closed loop: candidates at t=0 (grey feasible, red infeasible), '
        'plans and obstacles every 0.5 s (colour = time, 0–6 s)',
        fontsize=9,
    )
    ax.legend(loc='lower right', fontsize=8)
    ax2 = fig.add_subplot(2, 2, 3)
    ax2.hist(np.array(solve_ns) / 1e6, bins=60, color='C0')
    s = summarize_ns(solve_ns)
    ax2.set_title(
        f'solve time, 20 obstacles × {planner.n} candidates: P50 {s.p50_us / 1e3:.2f} '
        f'ms, P99 {s.p99_us / 1e3:.2f} ms',
        fontsize=9,
    )
    ax2.set_xlabel('ms')
    ax3 = fig.add_subplot(2, 2, 4)
    for res in loops.values():
        late = np.sort(np.array(res['late_ns'], dtype=float)) / 1e3
        ax3.step(
            late,
            np.arange(1, late.size + 1) / late.size,
            where='post',
            label=f'{res["policy"]}: P99 {res["late"]["p99_us"]:.0f} µs, max '
            f'{res["late"]["max_us"]:.0f} µs, {res["misses"]} misses',
        )
    ax3.set_xscale('log')
    ax3.axhline(0.99, color='grey', lw=0.6, ls=':')
    ax3.set_xlabel('wake-up lateness [µs]')
    ax3.set_title('100 Hz planning loop under load', fontsize=9)
    ax3.legend(fontsize=8, loc='lower right')
    ax3.grid(True, which='both', alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)

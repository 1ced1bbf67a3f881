"""The pictures of a run: truth against outputs, the ego driven in a closed loop, a bird's-eye
view of a live run. matplotlib (Agg), imported when a picture is drawn."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rt_fusion.core.evaluation import Frame, box_corners, box_gap, match
from rt_fusion.core.evaluation.truth import siren_near
from rt_fusion.core.scenario.world import build_world


def plot(frames: list[Frame], metrics: dict[str, Any], title: str, path: Path) -> None:
    """Truth vs outputs over time, and the per-frame errors, as a PNG."""
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    t0 = frames[0].stamp_ns if frames else 0
    tracks: dict[int, list[tuple[float, float, float, bool]]] = {}
    ox, oy, ot = [], [], []
    err_t, err, fp_t, fp_n, fn_n = [], [], [], [], []
    for f in frames:
        t = (f.stamp_ns - t0) / 1e9
        for o in f.truth:
            tracks.setdefault(o.id, []).append((t, o.x, o.y, o.visible))
        outs = f.outputs or []
        for out in outs:
            ot.append(t)
            ox.append(out.x)
            oy.append(out.y)
        pairs = match(f.truth, outs, 2.0)
        err_t.append(t)
        err.append(float(np.mean([d for _, _, d in pairs])) if pairs else np.nan)
        fp_t.append(t)
        fp_n.append(len(outs) - len(pairs))
        hit = {i for i, _, _ in pairs}
        fn_n.append(sum(o.visible and i not in hit for i, o in enumerate(f.truth)))
    for aid, pts in sorted(tracks.items()):
        arr = np.asarray(pts, dtype=np.float64)
        line = axes[0].plot(arr[:, 0], arr[:, 1], lw=2, label=f'truth {aid}')[0]
        axes[1].plot(arr[:, 0], arr[:, 2], lw=2, color=line.get_color())
        hidden = arr[:, 3] < 0.5
        axes[0].plot(arr[hidden, 0], arr[hidden, 1], 'x', color=line.get_color(), ms=3)
    axes[0].scatter(ot, ox, s=4, c='k', label='outputs', zorder=3)
    axes[1].scatter(ot, oy, s=4, c='k', zorder=3)
    axes[0].set_ylabel('x ahead [m]')
    axes[1].set_ylabel('y left [m]')
    axes[0].legend(fontsize=7, ncol=4, loc='upper right')
    axes[2].plot(err_t, err, label='mean position error of matches [m]')
    axes[2].step(fp_t, fp_n, where='mid', label='unmatched outputs (any range)')
    axes[2].step(fp_t, fn_n, where='mid', label='missed visible truth (any range)')
    axes[2].set_xlabel('time [s]')
    axes[2].legend(fontsize=8)
    vis = metrics.get('visible', {})
    fig.suptitle(
        f'{title}: precision {vis.get("precision")}, recall {vis.get("recall")}, '
        f'MOTA {vis.get("mota")} (truth: lines, x = hidden from every sensor)'
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_drive(
    truth: dict[str, Any], scenario: Path, metrics: dict[str, Any], title: str, path: Path
) -> None:
    """Closed loop: the ego as the plans drove it against its script (speed, lane offset) and
    its gap to the nearest true actor, as a PNG."""
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    frames = truth['frames']
    t = np.array([f['t'] for f in frames])
    speed = np.array([math.hypot(f['ego']['vx'], f['ego']['vy']) for f in frames])
    offset = np.array([f['ego']['d'] for f in frames])
    script = build_world(yaml.safe_load(scenario.read_text()), float(truth['seconds'])).ego
    s_speed = [math.hypot(script.at(x)['vx'], script.at(x)['vy']) for x in t]
    s_offset = [script.at(x)['d'] for x in t]
    gap = []
    for f in frames:
        ego = f['ego']
        box = box_corners(ego['x'], ego['y'], ego['yaw'], 4.5, 1.9)
        near = [
            box_gap(box, box_corners(o['x'], o['y'], o['yaw'], *o['size'][:2]))
            for o in f['objects']
            if o['class'] != 'static' and math.hypot(o['ego_x'], o['ego_y']) < 60.0
        ]
        gap.append(min(near) if near else np.nan)
    near_siren = [siren_near(f) for f in frames]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    axes[0].plot(t, speed, label='driven by the plans')
    axes[0].plot(t, s_speed, '--', label="the scenario's script")
    axes[0].set_ylabel('ego speed [m/s]')
    axes[1].plot(t, offset, label='driven')
    axes[1].plot(t, s_offset, '--', label='script')
    axes[1].set_ylabel('offset from the lane [m]')
    axes[2].plot(t, gap, label='gap to the nearest road user (box to box)')
    axes[2].axhline(0.0, color='r', lw=0.8)
    axes[2].set_ylabel('gap [m]')
    axes[2].set_xlabel('time [s]')
    for ax in axes:
        if any(near_siren):
            ax.fill_between(
                t, 0, 1, where=near_siren, transform=ax.get_xaxis_transform(), alpha=0.12,
                color='C3', label='emergency vehicle near',
            )  # fmt: skip
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc='upper right')
    d = metrics.get('driving', {})
    fig.suptitle(
        f'{title} (closed loop): {d.get("collision_samples")} collision samples, '
        f'min gap {d.get("min_gap_m", math.nan):.2f} m, '
        f'final speed {d.get("final_speed_mps", math.nan):.2f} m/s'
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def scene_png(path: Path, objects: list[dict[str, Any]], plans: list[dict[str, Any]]) -> None:
    """Bird's-eye view of a live run: the fused objects over the run and the plans (records as
    :mod:`.runs` describes them)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(10, 5), dpi=110)
    msgs = objects
    if msgs:
        t0 = msgs[0]['stamp_ns']
        xs, ys, ts = [], [], []
        for m in msgs:
            for _id, x, y, *_rest in m['objects']:
                xs.append(x)
                ys.append(y)
                ts.append((m['stamp_ns'] - t0) / 1e9)
        sc = ax.scatter(xs, ys, c=ts, s=6, cmap='viridis', label='fused objects (base_link)')
        fig.colorbar(sc, ax=ax, label='time [s]')
    planned = [p for p in plans if p['points']]
    for p in planned[:: max(1, len(planned) // 12)]:
        pts = np.asarray(p['points'], dtype=np.float64)
        x, y = pts[:, 1], pts[:, 2]
        ax.plot(x, y, color='C3', lw=0.8, alpha=0.7)
    ax.plot([], [], color='C3', label='plans (odom frame, every n-th)')
    ax.set_xlabel('x [m]')
    ax.set_ylabel('y [m]')
    ax.set_title('rt_fusion demo: radar and camera tracks fused, and the plans')
    ax.grid(True, alpha=0.3)
    ax.legend(loc='upper right', fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def soak_png(path: Path, samples: list[dict[str, Any]], warmup_min: float) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    t = [s['minute'] for s in samples]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    ax = axes[0][0]
    for name in sorted({n for s in samples for n in s['rss_mb']}):
        ax.plot(t, [s['rss_mb'].get(name, np.nan) for s in samples], label=name)
    ax.set_ylabel('resident memory [MB]')
    ax.legend(fontsize=8)
    ax = axes[0][1]
    ax.plot(t, [s['fds'] for s in samples], label='open files (all nodes)')
    ax.plot(t, [s['shm_segments'] for s in samples], label='shm segments')
    ax.set_ylabel('count')
    ax.legend(fontsize=8)
    ax = axes[1][0]
    ax.plot(t, [s['e2e_p50_ms'] for s in samples], label='camera → trajectory P50')
    ax.plot(t, [s['e2e_p99_ms'] for s in samples], label='camera → trajectory P99')
    ax.plot(t, [s['fusion_p99_ms'] for s in samples], label='camera → fused objects P99')
    ax.set_ylabel('latency [ms]')
    ax.set_xlabel('minutes')
    ax.legend(fontsize=8)
    ax = axes[1][1]
    ax.bar(t, [s['lost'] for s in samples], width=0.6 * (t[1] - t[0]) if len(t) > 1 else 0.5)
    ax.set_ylim(0, max(1, *(s['lost'] for s in samples)) * 1.1)
    ax.set_ylabel('frames lost per sample')
    ax.set_xlabel('minutes')
    for row in axes:
        for a in row:
            a.axvspan(0, warmup_min, color='0.9', zorder=0)
            a.grid(alpha=0.3)
    fig.suptitle('rt_fusion soak: replay → fusion → planner, looped scenario (grey: warm-up)')
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def chaos_png(path: Path, rows: list[dict[str, Any]], how: str) -> None:
    """Per node: each kill's time to the new process, to ``active``, to output again."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    names = list(dict.fromkeys(r['node'] for r in rows if 'active_s' in r))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    marks = (
        ('spawned_s', 'process started', 'x'),
        ('active_s', 'active', 'o'),
        ('output_back_s', 'output again', '^'),
    )
    for key, label, marker in marks:
        xs, ys = [], []
        for i, name in enumerate(names):
            vals = [r[key] for r in rows if r['node'] == name and r.get(key) is not None]
            xs += [i + 0.08 * (k - (len(vals) - 1) / 2) for k in range(len(vals))]  # kills
            ys += vals
        ax.scatter(xs, ys, marker=marker, label=label)
    ax.axhline(1.0, color='0.5', ls='--', lw=1)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel('seconds after kill -9')
    ax.set_title(f'chaos: kill -9 and {how} (dashed: 1 s)')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

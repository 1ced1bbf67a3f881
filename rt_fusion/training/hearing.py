"""Training the hearing model (siren / horn / other), its export, and its held-out score:
``tools/train_hearing.py`` is the command line (its help says what each part does).

Data: :mod:`rt_fusion.core.scenario.audio_data` mixes generated sirens and horns with road, wind
and engine noise and with the training part of the real clips; each example is the model's
context window, labelled by its last 0.15 s. Features are the runtime's own
(:class:`rt_fusion.core.perception.hearing.LogMel`), computed in worker processes. The held-out
check runs the streaming detector exactly as the fusion node does. torch is imported where it is
used.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.core.perception import hearing as hr
from rt_fusion.core.scenario import audio_data as ad
from rt_fusion.inference import hearing as hi
from rt_fusion.training import hearing_real, sounds
from rt_fusion.training.hearing_score import MEL, WIN_SAMPLES, Streamer, hop_labels, score

# --- data -------------------------------------------------------------------------------------

_CLIPS: ad.Clips | None = None
_REAL: ad.RealPool | None = None


def _init_worker(clips_dir: str, real: bool) -> None:
    global _CLIPS, _REAL  # noqa: PLW0603 (one per worker process)
    _CLIPS = ad.Clips(Path(clips_dir))
    if real:
        _REAL = ad.RealPool.from_clips(sounds.load('train', ad.RATE, log=lambda _: None))


def _examples(job: tuple[int, int, int, str]) -> tuple[np.ndarray, np.ndarray]:
    seed, start, count, part = job
    mel = hr.LogMel(ad.RATE, MEL)
    feats = np.zeros((count, MEL.n_mels, MEL.context_frames), np.float16)
    labels = np.zeros(count, np.int64)
    for i in range(count):
        rng = np.random.default_rng([seed, start + i])
        x, y = ad.window_example(rng, WIN_SAMPLES / ad.RATE, _CLIPS, part, real=_REAL)
        f = mel.frames(x)[-MEL.context_frames :]
        if rng.random() < 0.1:  # a stream's first second: its oldest frame repeated
            k = int(rng.integers(1, MEL.context_frames - 15))
            f[:k] = f[k]
        feats[i] = hr.model_input(f)[0, 0]
        labels[i] = y
    return feats, labels


def make_data(
    seed: int, count: int, part: str, workers: int, clips_dir: Path, real: bool = True
) -> Any:
    """``count`` examples (features, labels); ``real``: with the training sources' recordings."""
    chunk = 500
    jobs = [(seed, s, min(chunk, count - s), part) for s in range(0, count, chunk)]
    parts = []
    t0 = time.monotonic()
    if real:
        sounds.load('train', ad.RATE)  # decoded once into the cache, before the workers read it
    # One BLAS thread per worker (spawned workers read the environment as they start): N
    # workers with N BLAS threads each oversubscribe the cores.
    saved = dict(os.environ)
    os.environ.update(dict.fromkeys(('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS'), '1'))
    pool = mp.get_context('spawn').Pool(workers, _init_worker, (str(clips_dir), real))
    os.environ.clear()
    os.environ.update(saved)
    with pool:
        for k, got in enumerate(pool.imap(_examples, jobs)):
            parts.append(got)
            if k % 20 == 19:
                print(
                    f'  data {part}: {(k + 1) * chunk} of {count} ({time.monotonic() - t0:.0f} s)'
                )
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


# --- model ------------------------------------------------------------------------------------


def build_model(width: float = 1.0) -> Any:
    """Five 3x3 conv blocks (strides 1-2-2-2-1), mean+max pooling over time and frequency, a
    linear head; ``width`` scales the channels (16-24-32-48-64 at 1)."""
    import torch  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    def block(cin: int, cout: int, stride: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()
        )

    ch = [1] + [round(c * width) for c in (16, 24, 32, 48, 64)]

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(
                *(block(ch[i], ch[i + 1], s) for i, s in enumerate((1, 2, 2, 2, 1)))
            )
            self.head = nn.Linear(2 * ch[-1], len(hr.AUDIO_CLASSES))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.body(x)
            pooled = torch.cat([y.mean(dim=(2, 3)), y.amax(dim=(2, 3))], dim=1)
            out: torch.Tensor = self.head(pooled)
            return out

    return Net()


def train(args: argparse.Namespace) -> None:
    import torch  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    real = not args.no_real
    if args.data is not None and args.data.is_file():  # examples made by an earlier run
        with np.load(args.data) as z:
            x, y, xv, yv = z['x'], z['y'], z['xv'], z['yv']
    else:
        x, y = make_data(
            ad.TRAIN_SEED + args.seed, args.examples, 'train', args.workers, args.clips, real
        )
        xv, yv = make_data(ad.TRAIN_SEED - 1, 3000, 'train', args.workers, args.clips, real)
        if args.data is not None:
            np.savez(args.data, x=x, y=y, xv=xv, yv=yv)
    data_s = time.monotonic() - t0
    print(f'data: {len(y)} examples in {data_s:.0f} s, classes {np.bincount(y).tolist()}')
    dev = 'cuda' if torch.cuda.is_available() else 'cpu'
    model = build_model(args.width).to(dev)
    params = sum(p.numel() for p in model.parameters())
    xt, yt = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
    xvt, yvt = torch.from_numpy(xv).to(dev).float()[:, None], torch.from_numpy(yv).to(dev)
    steps = args.epochs * math.ceil(len(y) / args.batch)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=steps)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    history = []
    t1 = time.monotonic()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(y), device=dev)
        total = 0.0
        for k in range(0, len(y), args.batch):
            idx = perm[k : k + args.batch]
            xb = xt[idx].float()[:, None]
            # gain and tilt augmentation in the normalised dB domain
            xb = xb + 0.05 * torch.randn(len(idx), 1, MEL.n_mels, 1, device=dev)
            loss = loss_fn(model(xb), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        model.eval()
        with torch.no_grad():
            acc = float((model(xvt).argmax(1) == yvt).float().mean())
        history.append({'epoch': epoch, 'loss': total / len(y), 'val_acc': acc})
        print(f'epoch {epoch}: loss {total / len(y):.4f} val acc {acc:.4f}', flush=True)
    train_s = time.monotonic() - t1
    torch.save(
        {'state_dict': model.state_dict(), 'params': params, 'args': vars(args) | {
            'clips': str(args.clips)}},
        out / 'weights.pt',
    )  # fmt: skip
    (out / 'train.json').write_text(
        json.dumps({'history': history, 'data_s': data_s, 'train_s': train_s, 'params': params})
    )
    print(f'trained {params} parameters in {train_s:.0f} s -> {out / "weights.pt"}')


def export(weights: Path, models: Path, name: str) -> Path:
    """ONNX (opset 13, IR 7) + spec (with its ``audio:`` section) into ``models``."""
    import torch  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    from rt_fusion.inference.export import export_onnx  # noqa: PLC0415
    from rt_fusion.inference.spec import sha256_file  # noqa: PLC0415

    ckpt = torch.load(weights, map_location='cpu', weights_only=False)
    model = build_model(ckpt['args'].get('width', 1.0))
    model.load_state_dict(ckpt['state_dict'])
    model.eval()
    shape = [1, 1, MEL.n_mels, MEL.context_frames]
    onnx_path = models / f'{name}.onnx'
    export_onnx(model, torch.zeros(*shape), onnx_path, 'logmel', 'logits')
    spec = {
        'name': name,
        'provenance': (
            f'tools/train_hearing.py: CNN, {ckpt["params"]} parameters, trained on generated '
            'sirens, horns and road sounds, the first part of the shared real clips and the '
            'training sources of rt_fusion/training/real_sounds.yaml (seeds [3000000, k]); '
            'see models/' + name + '.md'
        ),
        'precision': 'fp32',
        'artifacts': {'onnx': {'file': onnx_path.name, 'sha256': sha256_file(onnx_path)}},
        'inputs': [{'name': 'logmel', 'shape': shape, 'dtype': 'float32', 'layout': 'NCHW'}],
        'outputs': [{'name': 'logits', 'shape': [1, len(hr.AUDIO_CLASSES)], 'dtype': 'float32'}],
        'audio': {
            'win_s': MEL.win_s,
            'hop_s': MEL.hop_s,
            'n_mels': MEL.n_mels,
            'fmin_hz': MEL.fmin_hz,
            'fmax_hz': MEL.fmax_hz,
            'context_frames': MEL.context_frames,
            'classes': list(hr.AUDIO_CLASSES),
        },
    }
    spec_path = models / f'{name}.yaml'
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    print(f'exported {onnx_path} ({onnx_path.stat().st_size / 1e3:.0f} kB), {spec_path}')
    return spec_path


# --- held-out check ---------------------------------------------------------------------------


def _mask_events(mask: np.ndarray, cls: int) -> list[tuple[int, int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return [(int(a), int(b), cls) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def heldout(spec_path: Path, args: argparse.Namespace) -> dict[str, float]:
    model = hi.load_hearing_model(spec_path)
    clips = ad.Clips(args.clips)
    params = hr.HearingParams(
        confirm_hops=args.confirm_hops,
        siren_confirm_hops=args.siren_confirm_hops,
        on_threshold=args.on_threshold,
    )
    st = Streamer(model, params=params)
    print(f'hysteresis: {params}')
    hop = round(0.1 * ad.RATE)
    ctx = WIN_SAMPLES
    rows: dict[str, Any] = {}
    # 1. the real clips' held-out parts
    ok = total = 0
    per_clip = {}
    for key, x, mask in ad.real_streams(clips, 'heldout'):
        res = st.run(x)
        labels = hop_labels(len(x), hop, _mask_events(mask, 2), ctx)
        o, t = score(res, labels)
        per_clip[key] = (o, t)
        ok, total = ok + o, total + t
    rows['real_acc'] = ok / max(total, 1)
    rows['real_hops'] = total
    # 2. held-out generated scenes with a siren, a horn or nothing
    ok = total = 0
    delays: dict[str, list[float]] = {'siren': [], 'horn': []}
    for k, seed in enumerate(ad.seeds('heldout', args.scenes)):
        rng = np.random.default_rng(seed)
        event = ('siren', 'horn', 'none')[k % 3]
        x, onset, end = ad.scene(rng, args.scene_s, clips, 'heldout', event)
        res = st.run(x)
        cls = hr.AUDIO_CLASSES.index(event) if event != 'none' else 0
        events = [] if event == 'none' else [(round(onset * ad.RATE), round(end * ad.RATE), cls)]
        o, t = score(res, hop_labels(len(x), hop, events, ctx))
        ok, total = ok + o, total + t
        if cls:
            # the delay to the report (the hop that turned the event on), not to its onset stamp
            onsets = [e.stamp_ns for r in res for e in r.events if e.cls == event and e.active]
            delays[event].append(hr.detection_delay_s(onsets, round(onset * 1e9)))
    rows['scene_acc'] = ok / max(total, 1)
    rows['scene_hops'] = total
    for name, d in delays.items():
        arr = np.array(d)
        # in time: within 300 ms past the class's confirmation (a siren's is 0.3 s longer)
        extra = (params.siren_confirm_hops - params.confirm_hops) * params.hop_s
        bound = 0.3 + (extra if name == 'siren' else 0.0)
        rows[f'{name}_in_time'] = float(np.mean(arr <= bound)) if len(arr) else math.nan
        found = arr[np.isfinite(arr)]
        rows[f'{name}_delay_p50_ms'] = float(np.median(found) * 1e3) if len(found) else math.nan
        rows[f'{name}_delay_p90_ms'] = (
            float(np.percentile(found, 90) * 1e3) if len(found) else math.nan
        )
        rows[f'{name}_missed'] = int(np.sum(~np.isfinite(arr)))
    # 3. false events in noise: generated (held-out seeds) and the real engine and train parts
    noise_s = 0.0
    false = {'siren': 0, 'horn': 0}
    k = 0
    while noise_s < args.noise_min * 60:
        rng = np.random.default_rng([ad.HELDOUT_SEED + 1, k])
        if k % 4 == 3:
            x = np.concatenate([clips.part('engine', 'heldout'), clips.part('train', 'heldout')])
            x = x * 10 ** (rng.uniform(-12, 0) / 20)
        else:
            x, _, _ = ad.scene(rng, 60.0, clips, 'heldout', 'none')
        for r in st.run(x):
            for e in r.events:
                if e.active:
                    false[e.cls] += 1
        noise_s += len(x) / ad.RATE
        k += 1
    # 4. real recordings of held-out sources (rt_fusion/training/hearing_real.py)
    if args.real_hours > 0:
        test = sounds.load('test', ad.RATE)
        rows |= hearing_real.evaluate(st, test, args.real_conditions, args.real_hours)
    rows['noise_minutes'] = noise_s / 60
    rows['false_sirens_per_10min'] = false['siren'] / (noise_s / 600)
    rows['false_horns_per_10min'] = false['horn'] / (noise_s / 600)
    costs = np.array(st.costs_ns[10:]) / 1e6
    rows['hop_p50_ms'] = float(np.percentile(costs, 50))
    rows['hop_p99_ms'] = float(np.percentile(costs, 99))
    rows['hop_max_ms'] = float(costs.max())
    rows['hops_timed'] = len(costs)
    _print(rows, per_clip)
    return rows


def _print(rows: dict[str, Any], per_clip: dict[str, tuple[int, int]]) -> None:
    print('\nhearing model, held-out (streaming detector, ONNX Runtime, 1 thread)')
    print(f'{"measure":34s} {"value":>10s}  target')
    targets = {
        'real_acc': '>= 0.9',
        'scene_acc': '>= 0.9',
        'siren_in_time': 'all',
        'false_sirens_per_10min': '<= 1',
        'hop_p99_ms': '<= 2 ms',
    }
    targets |= {
        'real_siren_recall': '>= 0.95',
        'real_horn_recall': '>= 0.95',
        'real_false_sirens_per_hour': '<= 1',
        'real_false_horns_per_hour': '<= 2',
    }
    for key, val in rows.items():
        if isinstance(val, dict):
            continue
        text = f'{val:.3f}' if isinstance(val, float) else str(val)
        print(f'{key:34s} {text:>10s}  {targets.get(key, "")}')
    for key, (o, t) in per_clip.items():
        print(f'  shared clip {key:10s} {o}/{t} hops right')
    for key, text in rows.get('real_per_clip', {}).items():
        print(f'  real event {key:40s} found {text}')
    for label, row in rows.get('real_test_data', {}).items():
        print(f'  real test data, {label:5s}: {row}')
    keys = ['real_acc', 'scene_acc', 'siren_in_time', 'false_sirens_per_10min', 'hop_p99_ms']
    keys += [k for k in targets if k.startswith('real_') and k in rows and k != 'real_acc']
    print('RESULT ' + ' '.join(f'{k}={rows[k]:.3f}' for k in keys))

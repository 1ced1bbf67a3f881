#!/usr/bin/env python3
"""Train the default camera detector (CenterNet-style) on random rendered scenes, export it.

    python tools/train_detector.py --out /tmp/det --frames 24000 --epochs 12     # on the H200
    python tools/train_detector.py --export /tmp/det/weights.pt --models models  # ONNX + TS + spec
    python tools/train_detector.py --heldout models/rtf_centernet.yaml --scenes 150
    python tools/train_detector.py --heldout models/rtf_centernet.yaml \
        --picture docs/detector.png --video ../shared/data/camera/solidWhiteRight.mp4

Data: ``rt_fusion.core.scenario.detector_data`` draws random scenes (seeds ``[1_000_000 + k]``,
held-out ``[2_000_000 + k]``: disjoint from every evaluation seed) and renders them in worker
processes with the scenario camera (``--camera``, default 1920x1080: the vehicle camera of the
scenarios, the evaluation and the demo), resized to the network input (``--input``,
default 384x640) as the runtime does. Each visible object becomes a heatmap peak (class), a log
left/top/right/bottom box around the keypoint, a sub-pixel offset, a log depth and a (sin, cos)
heading at stride 4. Losses: CenterNet's penalty-reduced focal loss on the heatmaps, L1 on the
rest. Reproducible from ``--seed`` (the data is a pure function of the scene seeds; cuDNN picks
its own kernels, so the last digits of the weights vary between GPUs).

Outputs (``--out``): ``weights.pt`` (state dict + config), ``loss.png``, ``train.json``. The
export writes ``<name>.onnx`` (opset 13, IR 7), ``<name>.ts`` (TorchScript) and ``<name>.yaml``
(the model spec with the decoder section) into ``--models``. The held-out check decodes with the
shipped decoder and reports precision, recall (also per range bin), class accuracy and the median
depth error, on frames rendered at ``--camera`` and resized by the runtime's preprocessing.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rt_fusion.core.scenario import detector_data as dd  # noqa: E402
from rt_fusion.core.scenario import sensors as sm  # noqa: E402

INPUT_HW = (384, 640)
STRIDE = 4
OUT_HW = (INPUT_HW[0] // STRIDE, INPUT_HW[1] // STRIDE)


#: The camera the scenes are rendered by (``--camera``), resized to the input as the runtime
#: does: the scenarios' vehicle camera (sensors.VEHICLE), which the evaluation and the demo use.
#: A model trained on 640×360 renders lost precision and recall on 1080p frames (held-out P 0.72
#: / R 0.79 -> 0.62 / 0.63): train at the resolution it will see.
CAMERA_WH = (sm.VEHICLE.width, sm.VEHICLE.height)


def set_input(hw: tuple[int, int], camera: tuple[int, int] = CAMERA_WH) -> None:
    """The network's input size (``--input``) and the rendering camera (``--camera``), before
    the data is made (the forked data workers read them)."""
    global INPUT_HW, OUT_HW, CAMERA_WH  # noqa: PLW0603
    if hw[0] % 32 or hw[1] % 32:
        raise SystemExit(f'--input {hw[0]}x{hw[1]}: both sides must be multiples of 32')
    INPUT_HW = hw
    OUT_HW = (hw[0] // STRIDE, hw[1] // STRIDE)
    CAMERA_WH = camera


def render_camera() -> sm.CameraModel:
    """The scenario camera at ``CAMERA_WH`` (16:9: the lens of every resolution is the same)."""
    return sm.CameraModel.sized(*CAMERA_WH)


NC = len(dd.DETECTOR_CLASSES)
CHANNELS = NC + 4 + 2 + 1 + 2
MAX_OBJ = 64
FRAMES_PER_SCENE = 4
#: The chance that a scene gets objects in line with its posts (``--occluders``).
OCCLUDERS = 0.0
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


# --- data -------------------------------------------------------------------------------------


def _targets(
    labels: list[dd.CameraLabel], sx: float, sy: float, factor: float = 1.0
) -> dict[str, np.ndarray]:
    """Heatmap and per-object regression targets at stride 4 for one frame whose labels are in
    pixels of the rendering camera (``sx``, ``sy``: its scale to the input; ``factor``: the
    view's zoom, its labels' depths divided by it)."""
    oh, ow = OUT_HW
    heat = np.zeros((NC, oh, ow), np.float32)
    idx = np.zeros(MAX_OBJ, np.int64)
    reg = np.zeros((MAX_OBJ, 9), np.float32)
    mask = np.zeros(MAX_OBJ, np.float32)
    ys, xs = np.mgrid[0:oh, 0:ow]
    for k, lab in enumerate(sorted(labels, key=lambda lab: lab.depth)[:MAX_OBJ]):
        u0, v0, u1, v1 = lab.box[0] * sx, lab.box[1] * sy, lab.box[2] * sx, lab.box[3] * sy
        ku, kv = lab.keypoint[0] * sx, lab.keypoint[1] * sy
        cx, cy = ku / STRIDE, kv / STRIDE
        ix, iy = min(int(cx), ow - 1), min(int(cy), oh - 1)
        sgx = max(0.7, (u1 - u0) / STRIDE / 6.0)
        sgy = max(0.7, (v1 - v0) / STRIDE / 6.0)
        g = np.exp(-((xs - ix) ** 2) / (2 * sgx * sgx) - ((ys - iy) ** 2) / (2 * sgy * sgy))
        np.maximum(heat[lab.cls], g, out=heat[lab.cls])
        idx[k] = iy * ow + ix
        ltrb = np.array([ku - u0, kv - v0, u1 - ku, v1 - kv]) / STRIDE
        reg[k, :4] = np.log(np.maximum(ltrb, 0.25))
        reg[k, 4:6] = (cx - ix, cy - iy)
        reg[k, 6] = math.log(max(lab.depth, 0.5))
        reg[k, 7:9] = (math.sin(lab.heading), math.cos(lab.heading))
        # A far object's regressions weigh more (--far-weight): a pixel of its box bottom or
        # size is metres of its depth, a near one's centimetres.
        far = lab.depth * factor / FAR_WEIGHT_M if FAR_WEIGHT_M else 1.0
        mask[k] = min(max(far, 1.0), 3.0)
    return {'heat': heat.astype(np.float16), 'idx': idx, 'reg': reg, 'mask': mask}


#: The views each rendered frame is taken in (``--views``): 1 is the whole frame resized to the
#: input; a factor z > 1 is the frame's centre as the fusion node's zoomed view cuts it
#: (:class:`rt_fusion.core.perception.zoom.Zoom`), its depths divided by z (the runtime
#: multiplies them back). A detector trained on the whole frame alone has never seen a view
#: reduced less than the full one, and the zoomed view beyond 1.5 lost it precision.
VIEWS: tuple[float, ...] = (1.0,)
#: ``--far-weight``: an object farther than this [m] (its true depth, in any view) has its
#: regression losses weighted by its depth / this (at most 3); 0: every object weighs 1.
FAR_WEIGHT_M = 0.0


def set_views(views: tuple[float, ...]) -> None:
    """The views of every rendered frame (``--views``), before the data is made."""
    global VIEWS  # noqa: PLW0603
    VIEWS = views


def zoomed_labels(labels: list[dd.CameraLabel], view: Any) -> list[dd.CameraLabel]:
    """Labels of a frame in a zoomed view's crop (its own pixels, before the resize), their
    depths divided by the view's factor; objects whose keypoint is outside the crop are not in
    the view."""
    import dataclasses  # noqa: PLC0415

    x0, y0, x1, y1 = view.crop
    out = []
    for lab in labels:
        ku, kv = lab.keypoint
        if not (x0 <= ku < x1 and y0 <= kv < y1):
            continue
        u0, v0, u1, v1 = lab.box
        box = (max(u0, x0) - x0, max(v0, y0) - y0, min(u1, x1) - x0, min(v1, y1) - y0)
        out.append(
            dataclasses.replace(
                lab, box=box, keypoint=(ku - x0, kv - y0), depth=lab.depth / view.factor
            )
        )
    return out


def _scene(seed: tuple[int, int]) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    import cv2  # noqa: PLC0415

    from rt_fusion.core.perception import zoom as zm  # noqa: PLC0415

    cam = render_camera()
    out = []
    for frame, labels in dd.scene_frames(seed, FRAMES_PER_SCENE, cam, occluders=OCCLUDERS):
        for factor in VIEWS:
            view = zm.Zoom.of(factor, (cam.height, cam.width), INPUT_HW)
            part, labs = frame, labels
            if view is not None:
                x0, y0, x1, y1 = view.crop
                part, labs = frame[y0:y1, x0:x1], zoomed_labels(labels, view)
            sx, sy = INPUT_HW[1] / part.shape[1], INPUT_HW[0] / part.shape[0]
            img = cv2.resize(part, (INPUT_HW[1], INPUT_HW[0]), interpolation=cv2.INTER_LINEAR)
            out.append((img, _targets(labs, sx, sy, factor)))
    return out


def make_data(base: int, scenes: int, workers: int, first: int = 0) -> dict[str, np.ndarray]:
    """Renders ``scenes`` random scenes (seeds ``[base, first + k]``) in worker processes into
    stacked arrays (filled in place: 41,000 samples are 30 GB of images)."""
    seeds = [(base, first + k) for k in range(scenes)]
    cap = scenes * FRAMES_PER_SCENE * len(VIEWS)
    data: dict[str, np.ndarray] = {}
    n = 0
    t0 = time.monotonic()
    with mp.get_context('fork').Pool(workers) as pool:
        for k, frames in enumerate(pool.imap(_scene, seeds, chunksize=4)):
            for img, t in frames:
                if not data:
                    data = {'images': np.empty((cap, *img.shape), img.dtype)}
                    data.update({key: np.empty((cap, *v.shape), v.dtype) for key, v in t.items()})
                data['images'][n] = img
                for key, v in t.items():
                    data[key][n] = v
                n += 1
            if k % max(1, scenes // 20) == 0:
                rate = n / max(time.monotonic() - t0, 1e-6)
                print(f'  data: {k + 1}/{scenes} scenes, {n} frames, {rate:.0f} fps', flush=True)
    return {key: v[:n] for key, v in data.items()}


def cached_data(
    path: Path | None, base: int, scenes: int, workers: int, first: int = 0
) -> dict[str, np.ndarray]:
    """:func:`make_data`, kept in ``path`` (a folder of .npy files, with the scene range it
    holds): read back when it holds the same scenes made by the same code (the scenario package
    and this file), else rendered and written there. Lets one machine render the next run's data
    while this one trains."""
    import hashlib  # noqa: PLC0415

    from rt_fusion.core.scenario import generate as gen  # noqa: PLC0415

    names = ('images', 'heat', 'idx', 'reg', 'mask')
    code = hashlib.sha256()
    code.update(gen.code_digest().encode())
    code.update(Path(__file__).read_bytes())
    key = {
        'code': code.hexdigest(),
        'base': base,
        'first': first,
        'scenes': scenes,
        'views': list(VIEWS),
        'input': list(INPUT_HW),
        'camera': list(CAMERA_WH),
        'occluders': OCCLUDERS,
    }
    if path is not None and (path / 'scenes.json').exists():
        if json.loads((path / 'scenes.json').read_text()) == key:
            print(f'data: read from {path}', flush=True)
            return {n: np.load(path / f'{n}.npy', mmap_mode='r') for n in names}
        print(f'data: {path} holds other scenes; rendering', flush=True)
    data = make_data(base, scenes, workers, first)
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        for n in names:
            np.save(path / f'{n}.npy', data[n])
        (path / 'scenes.json').write_text(json.dumps(key))
    return data


# --- model ------------------------------------------------------------------------------------


#: Stages (``s8``, ``s16``, ``s32``) that may carry an extra residual block (``--extra-blocks``).
STAGES = {'s8': 64, 's16': 96, 's32': 128}


def build_model(extra: tuple[str, ...] = ()) -> Any:
    """A small encoder-decoder (stride 32 -> 4) with one 3x3 + 1x1 head: 0.82 M parameters.

    ``extra``: stages given one more residual block each (two 3x3 convolutions), its last
    batch norm's scale zeroed so that the block starts as the identity: a model grown from
    trained weights computes what they computed until training moves the new block."""
    import torch  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    def conv(cin: int, cout: int, stride: int = 1) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True)
        )

    class Residual(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            last = nn.BatchNorm2d(c)
            nn.init.zeros_(last.weight)
            self.body = nn.Sequential(conv(c, c), nn.Conv2d(c, c, 3, 1, 1, bias=False), last)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = nn.functional.relu(x + self.body(x))
            return out

    unknown = set(extra) - set(STAGES)
    if unknown:
        raise ValueError(f'--extra-blocks: no stage {sorted(unknown)} (stages: {list(STAGES)})')

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.extra = nn.ModuleDict({k: Residual(c) for k, c in STAGES.items() if k in extra})
            self.s2 = nn.Sequential(conv(3, 24, 2), conv(24, 24))
            self.s4 = nn.Sequential(conv(24, 32, 2), conv(32, 32))
            self.s8 = nn.Sequential(conv(32, 64, 2), conv(64, 64))
            self.s16 = nn.Sequential(conv(64, 96, 2), conv(96, 96))
            self.s32 = nn.Sequential(conv(96, 128, 2), conv(128, 128))
            self.u16 = conv(128 + 96, 96)
            self.u8 = conv(96 + 64, 64)
            self.u4 = conv(64 + 32, 48)
            self.head = nn.Sequential(conv(48, 48), nn.Conv2d(48, CHANNELS, 1))
            last: Any = self.head[-1]
            with torch.no_grad():
                last.bias.zero_()
                last.bias[:NC] = -2.19  # CenterNet's prior: sigmoid = 0.1

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            up = nn.functional.interpolate
            x4 = self.s4(self.s2(x))
            x8 = self._grown('s8', self.s8(x4))
            x16 = self._grown('s16', self.s16(x8))
            x32 = self._grown('s32', self.s32(x16))
            y = self.u16(torch.cat([up(x32, scale_factor=2.0, mode='nearest'), x16], 1))
            y = self.u8(torch.cat([up(y, scale_factor=2.0, mode='nearest'), x8], 1))
            y = self.u4(torch.cat([up(y, scale_factor=2.0, mode='nearest'), x4], 1))
            out: torch.Tensor = self.head(y)
            return out

        def _grown(self, stage: str, x: torch.Tensor) -> torch.Tensor:
            if stage in self.extra:
                grown: torch.Tensor = self.extra[stage](x)
                return grown
            return x

    return Net()


def _loss(out: Any, heat: Any, idx: Any, reg: Any, mask: Any) -> tuple[Any, dict[str, float]]:
    import torch  # noqa: PLC0415

    out = out.float()
    pred = torch.sigmoid(out[:, :NC]).clamp(1e-4, 1 - 1e-4)
    pos = heat.eq(1.0).float()
    neg = 1.0 - pos
    pos_l = torch.log(pred) * (1 - pred) ** 2 * pos
    neg_l = torch.log(1 - pred) * pred**2 * (1 - heat) ** 4 * neg
    n = pos.sum().clamp(min=1.0)
    focal = -(pos_l.sum() + neg_l.sum()) / n
    b, c = out.shape[:2]
    flat = out[:, NC:].reshape(b, c - NC, -1)
    got = flat.gather(2, idx[:, None, :].expand(-1, c - NC, -1)).permute(0, 2, 1)  # (B, K, 9)
    m = mask[..., None]
    denom = mask.sum().clamp(min=1.0)
    l1 = (got - reg).abs() * m
    box = l1[..., :4].sum() / denom / 4
    off = l1[..., 4:6].sum() / denom / 2
    depth = l1[..., 6].sum() / denom
    head = l1[..., 7:9].sum() / denom / 2
    total = focal + box + off + 2.0 * depth + 0.5 * head
    return total, {
        'focal': float(focal.detach()),
        'box': float(box.detach()),
        'off': float(off.detach()),
        'depth': float(depth.detach()),
        'heading': float(head.detach()),
    }


def train(args: argparse.Namespace) -> None:
    import torch  # noqa: PLC0415

    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenes = max(1, args.frames // (FRAMES_PER_SCENE * len(VIEWS)))
    t0 = time.monotonic()
    data = cached_data(args.data, dd.TRAIN_SEED_BASE, scenes, args.workers, first=args.first_scene)
    if args.data_only:
        print(f'data: {len(data["images"])} frames written to {args.data}', flush=True)
        return
    gen_s = time.monotonic() - t0
    n = len(data['images'])
    print(f'data: {n} frames in {gen_s:.0f} s', flush=True)
    dev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    images = torch.from_numpy(data['images']).to(dev)  # uint8 NHWC, BGR
    heat = torch.from_numpy(data['heat']).to(dev)
    idx = torch.from_numpy(data['idx']).to(dev)
    reg = torch.from_numpy(data['reg']).to(dev)
    mask = torch.from_numpy(data['mask']).to(dev)
    mean = torch.tensor(MEAN, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=dev).view(1, 3, 1, 1)
    model = build_model(args.extra_blocks)
    if args.init is not None:  # fine-tuning: a weights.pt, or the TorchScript of a shipped model
        # Grown (--extra-blocks): the new blocks start as the identity, all else is loaded.
        missing, unexpected = model.load_state_dict(_init_state(args.init), strict=False)
        if unexpected or any(not k.startswith('extra.') for k in missing):
            raise SystemExit(f'--init {args.init}: not this network ({missing + unexpected})')
        print(f'weights from {args.init}' + (f', new: {missing}' if missing else ''), flush=True)
    model = model.to(dev).to(memory_format=torch.channels_last)
    params = sum(p.numel() for p in model.parameters())
    steps_per_epoch = n // args.batch
    total = steps_per_epoch * args.epochs
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=total, pct_start=0.1)
    gen = torch.Generator(device='cpu').manual_seed(args.seed)
    history: list[dict[str, float]] = []
    t1 = time.monotonic()
    step = 0
    ow = OUT_HW[1]
    for epoch in range(args.epochs):
        order = torch.randperm(n, generator=gen).to(dev)
        for b in range(steps_per_epoch):
            sel = order[b * args.batch : (b + 1) * args.batch]
            x = images[sel].permute(0, 3, 1, 2).flip(1).float() / 255.0  # BGR -> RGB
            x = x * (0.75 + 0.5 * torch.rand(len(sel), 1, 1, 1, device=dev))  # exposure
            x = ((x.clamp(0, 1) - mean) / std).contiguous(memory_format=torch.channels_last)
            h, i, r, m = heat[sel].float(), idx[sel], reg[sel].clone(), mask[sel]
            flip = torch.rand(len(sel), device=dev) < 0.5
            if flip.any():  # mirror: u -> W - u, left <-> right, heading -> -heading
                x[flip] = x[flip].flip(3)
                h[flip] = h[flip].flip(3)
                iy, ix = i[flip] // ow, i[flip] % ow
                fx = ix.float() + r[flip][..., 4]  # keypoint in cells
                fx = OUT_HW[1] - fx
                nix = fx.floor().clamp(0, ow - 1).long()
                rf = r[flip]
                rf[..., 4] = fx - nix.float()
                rf[..., [0, 2]] = rf[..., [2, 0]]
                rf[..., 7] = -rf[..., 7]
                r[flip] = rf
                i[flip] = iy * ow + nix
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == 'cuda'):
                pred = model(x)
            loss, parts = _loss(pred, h, i, r, m)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
            sched.step()
            step += 1
            if args.max_train_s and time.monotonic() - t1 > args.max_train_s:
                print(f'  time budget of {args.max_train_s} s reached at step {step}', flush=True)
                break
            if step % 50 == 0 or step == total:
                parts['loss'] = float(loss)
                parts['step'] = step
                history.append(parts)
                el = time.monotonic() - t1
                print(
                    f'  epoch {epoch + 1}/{args.epochs} step {step}/{total} '
                    f'loss {float(loss):.3f} '
                    f'(focal {parts["focal"]:.3f} depth {parts["depth"]:.3f}) '
                    f'{step / el:.1f} it/s, eta {(total - step) / max(step / el, 1e-6):.0f} s',
                    flush=True,
                )
        else:
            continue
        break
    train_s = time.monotonic() - t1
    model = model.float().eval().to('cpu')
    torch.save(
        {
            'state_dict': model.state_dict(),
            'params': params,
            'history': history,
            'input_hw': list(INPUT_HW),
            'views': list(VIEWS),
            'extra_blocks': list(args.extra_blocks),
        },
        out / 'weights.pt',
    )
    summary = {
        'frames': n,
        'scenes': scenes,
        'seed_base': dd.TRAIN_SEED_BASE,
        'first_scene': args.first_scene,
        'init': str(args.init) if args.init is not None else None,
        'generate_s': round(gen_s, 1),
        'train_s': round(train_s, 1),
        'epochs': args.epochs,
        'steps': step,
        'batch': args.batch,
        'lr': args.lr,
        'parameters': params,
        'input': f'{INPUT_HW[0]}x{INPUT_HW[1]}',
        'camera': f'{CAMERA_WH[0]}x{CAMERA_WH[1]}',
        'views': ','.join(f'{v:g}' for v in VIEWS),
        'far_weight_m': FAR_WEIGHT_M,
        'occluders': OCCLUDERS,
        'extra_blocks': ','.join(args.extra_blocks),
        'device': torch.cuda.get_device_name() if dev.type == 'cuda' else 'cpu',
        'final_loss': history[-1] if history else {},
    }
    (out / 'train.json').write_text(json.dumps(summary, indent=2))
    _plot(history, out / 'loss.png')
    print('RESULT ' + ' '.join(f'{k}={v}' for k, v in summary.items() if k != 'final_loss'))


def _init_state(path: Path) -> dict[str, Any]:
    """The state dict of a ``weights.pt`` (:func:`train`'s) or of a traced TorchScript model
    (``models/<name>.ts``: tracing keeps the module's parameter names)."""
    import torch  # noqa: PLC0415

    if path.suffix == '.ts':
        return dict(torch.jit.load(str(path), map_location='cpu').state_dict())
    return dict(torch.load(path, map_location='cpu', weights_only=False)['state_dict'])


def _plot(history: list[dict[str, float]], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [h['step'] for h in history]
    for key in ('loss', 'focal', 'box', 'depth', 'heading'):
        ax.plot(steps, [h[key] for h in history], label=key)
    ax.set_yscale('log')
    ax.set_xlabel('step')
    ax.set_ylabel('loss')
    ax.set_title('rtf_centernet training')
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- export -----------------------------------------------------------------------------------


def decoder_section(score_threshold: float = 0.35) -> dict[str, Any]:
    """The decoder section of the model spec."""
    return {
        'type': 'centernet',
        'classes': list(dd.DETECTOR_CLASSES),
        'stride': STRIDE,
        'box': 'ltrb_log',
        'depth': 'log',
        'heading': True,
        'score_threshold': score_threshold,
        'top_k': 64,
    }


def export(weights: Path, models: Path, name: str) -> Path:
    """ONNX (opset 13, IR 7) + TorchScript + spec into ``models``."""
    import torch  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    from rt_fusion.inference.export import export_onnx  # noqa: PLC0415
    from rt_fusion.inference.spec import sha256_file  # noqa: PLC0415

    ckpt = torch.load(weights, map_location='cpu', weights_only=False)
    h, w = ckpt.get('input_hw', INPUT_HW)
    set_input((int(h), int(w)))
    model = build_model(tuple(ckpt.get('extra_blocks', ())))
    model.load_state_dict(ckpt['state_dict'])
    model.eval()
    x = torch.zeros(1, 3, *INPUT_HW)
    models.mkdir(parents=True, exist_ok=True)
    onnx_path, ts_path = models / f'{name}.onnx', models / f'{name}.ts'
    export_onnx(model, x, onnx_path, 'images', 'heads')
    with torch.no_grad():
        torch.jit.trace(model, x).save(str(ts_path))
    spec = {
        'name': name,
        'provenance': (
            f'tools/train_detector.py: CenterNet-style, {ckpt["params"]} parameters, trained on '
            'random rendered scenes (seeds [1000000, k]); see models/' + name + '.md'
        ),
        'precision': 'fp32',
        'artifacts': {
            'onnx': {'file': onnx_path.name, 'sha256': sha256_file(onnx_path)},
            'torchscript': {'file': ts_path.name, 'sha256': sha256_file(ts_path)},
        },
        'inputs': [
            {'name': 'images', 'shape': [1, 3, *INPUT_HW], 'dtype': 'float32', 'layout': 'NCHW'}
        ],
        'outputs': [
            {
                'name': 'heads',
                'shape': [1, CHANNELS, *OUT_HW],
                'dtype': 'float32',
                'layout': 'NCHW',
            }
        ],
        'preprocessing': {
            'resize': list(INPUT_HW),
            'channel_order': 'rgb',
            'scale': 1.0 / 255.0,
            'mean': list(MEAN),
            'std': list(STD),
        },
        'decoder': decoder_section(),
    }
    spec_path = models / f'{name}.yaml'
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    print(
        f'exported {onnx_path} ({onnx_path.stat().st_size / 1e6:.1f} MB), {ts_path}, {spec_path}'
    )
    return spec_path


# --- held-out check ---------------------------------------------------------------------------


RANGE_BINS_M = ((0.0, 30.0), (30.0, 50.0), (50.0, 80.0))


def heldout(
    spec_path: Path,
    scenes: int,
    workers: int,
    gate_m: float = 2.0,
    camera: tuple[int, int] = CAMERA_WH,
    zoom: float = 1.0,
    depth_errors: bool = False,
) -> dict[str, float]:
    """Precision, recall, class accuracy and median depth error on held-out scenes (ONNX Runtime,
    the shipped decoder and camera geometry), objects up to 80 m; recall per range bin too.

    ``depth_errors`` also prints where the misses come from: each true object paired with the
    detection nearest its bearing (within ``BEARING_PAIR_RAD``, whatever its depth), per range
    bin and per class: found on its bearing, within the gate, signed median and mean absolute
    depth error. A detection on the bearing that misses the gate is a depth error, not a miss
    of the detector.

    The frames are rendered by the scenario camera at ``camera`` (width, height; default
    1920×1080, the scenarios' vehicle camera) and resized to the model's input by the
    runtime's own preprocessing (``CpuPreprocessor``), as the fusion node sees them. ``zoom`` >
    1 adds the zoomed view of the frame's centre (:mod:`rt_fusion.core.perception.zoom`), as
    the fusion node's ``zoom`` parameter does."""
    import onnxruntime as ort  # noqa: PLC0415

    from rt_fusion.core.perception import zoom as zm  # noqa: PLC0415
    from rt_fusion.core.perception.decoders import (  # noqa: PLC0415
        CameraGeometry,
        camera_to_vehicle,
        decode,
    )
    from rt_fusion.inference.preprocess import CpuPreprocessor  # noqa: PLC0415
    from rt_fusion.inference.spec import load_spec  # noqa: PLC0415

    spec = load_spec(spec_path)
    assert spec.decoder is not None
    assert spec.preprocessing is not None
    sess = ort.InferenceSession(str(spec.artifact('onnx')), providers=['CPUExecutionProvider'])
    input_hw = (int(spec.preprocessing.resize[0]), int(spec.preprocessing.resize[1]))
    set_input(INPUT_HW, camera)  # the forked workers render by render_camera()
    cam = render_camera()
    sx, sy = input_hw[1] / cam.width, input_hw[0] / cam.height
    geo = CameraGeometry(
        cam.fx * sx,
        cam.fy * sy,
        cam.cx * sx,
        cam.cy * sy,
        sm.CAMERA_POS[0],
        sm.CAMERA_POS[2],
        d=cam.d,
    )
    pre = CpuPreprocessor(spec.preprocessing, (cam.height, cam.width, 3), 'bgr')
    x = np.empty((1, 3, *input_hw), np.float32)
    view = zm.Zoom.of(zoom, (cam.height, cam.width), input_hw)
    zoomed_pre = None
    if view is not None:
        x0, y0, x1, y1 = view.crop
        zoomed_pre = CpuPreprocessor(spec.preprocessing, (y1 - y0, x1 - x0, 3), 'bgr')
    tp = fp = fn = cls_ok = 0
    bins = {r: [0, 0] for r in RANGE_BINS_M}  # found, total
    depth_err: list[float] = []
    paired: list[tuple[float, int, float, float]] = []  # depth, class, signed error, distance
    with mp.get_context('fork').Pool(workers) as pool:
        all_frames = pool.map(
            _heldout_scene, [(dd.HELDOUT_SEED_BASE, k) for k in range(scenes)], chunksize=2
        )
    for frames in all_frames:
        for img, labels in frames:
            pre(img, x)
            dets = decode(sess.run(None, {'images': x}), spec.decoder, input_hw)
            if view is not None and zoomed_pre is not None:
                x0, y0, x1, y1 = view.crop
                zoomed_pre(img[y0:y1, x0:x1], x)
                near = decode(sess.run(None, {'images': x}), spec.decoder, input_hw)
                dets = zm.merge(dets, near, view, input_hw)
            pos = []
            for d in dets:
                p = camera_to_vehicle(d, geo)
                if p is not None:
                    pos.append((p[0], p[1], d))
            truth = [lab for lab in labels if lab.depth <= 80.0]
            if depth_errors:
                paired.extend(_bearing_pairs(truth, pos, geo.x))
            used: set[int] = set()
            for lab in truth:
                best, bd = -1, gate_m
                for j, (x_, y_, _d) in enumerate(pos):
                    dist = math.hypot(x_ - lab.x, y_ - lab.y)
                    if j not in used and dist <= bd:
                        best, bd = j, dist
                rng = next(r for r in RANGE_BINS_M if lab.depth <= r[1])
                bins[rng][1] += 1
                if best < 0:
                    fn += 1
                    continue
                bins[rng][0] += 1
                used.add(best)
                tp += 1
                det = pos[best][2]
                cls_ok += int(det.cls == lab.cls)
                depth_err.append(abs(det.depth - lab.depth) / lab.depth)
            fp += sum(1 for j, (x_, _y, _d) in enumerate(pos) if j not in used and x_ <= 85.0)
    res: dict[str, Any] = {
        'frames': sum(len(f) for f in all_frames),
        'camera': f'{cam.width}x{cam.height}',
        'input': f'{input_hw[0]}x{input_hw[1]}',
        'zoom': view.factor if view is not None else 1.0,
        'precision': tp / max(tp + fp, 1),
        'recall': tp / max(tp + fn, 1),
        'class_accuracy': cls_ok / max(tp, 1),
        'median_depth_error': float(np.median(depth_err)) if depth_err else math.nan,
    }
    for (lo, hi), (found, total) in bins.items():
        res[f'recall_{lo:.0f}_{hi:.0f}m'] = found / max(total, 1)
        res[f'objects_{lo:.0f}_{hi:.0f}m'] = total
    if depth_errors:
        _print_depth_errors(paired, gate_m)
    print(
        'RESULT '
        + ' '.join(f'{k}={v:.3f}' if isinstance(v, float) else f'{k}={v}' for k, v in res.items())
    )
    return res


#: A true object and a detection are paired by bearing within this much (0.57°), whatever
#: their depths: at 80 m, 0.8 m across.
BEARING_PAIR_RAD = 0.01
DEPTH_ERROR_BINS_M = ((0.0, 30.0), (30.0, 50.0), (50.0, 65.0), (65.0, 80.0))


def _bearing_pairs(
    truth: list[dd.CameraLabel], pos: list[tuple[float, float, Any]], camera_x: float
) -> list[tuple[float, int, float, float]]:
    """Per true object: (depth, class, detection depth - true depth, distance on the road
    plane) of the detection nearest its bearing from the camera, NaNs where none is within
    BEARING_PAIR_RAD."""
    out = []
    bearings = [math.atan2(y, x - camera_x) for x, y, _ in pos]
    for lab in truth:
        az = math.atan2(lab.y, lab.x - camera_x)
        best, best_d = -1, BEARING_PAIR_RAD
        for j, b in enumerate(bearings):
            if abs(b - az) < best_d:
                best, best_d = j, abs(b - az)
        if best < 0:
            out.append((lab.depth, lab.cls, math.nan, math.nan))
            continue
        x, y, det = pos[best]
        out.append((lab.depth, lab.cls, det.depth - lab.depth, math.hypot(x - lab.x, y - lab.y)))
    return out


def _print_depth_errors(paired: list[tuple[float, int, float, float]], gate_m: float) -> None:
    """The table of :func:`heldout`'s ``depth_errors``: per range bin, then per class beyond
    30 m."""
    if not paired:
        print('depth errors: no objects')
        return
    a = np.asarray(paired, dtype=np.float64)
    rows = [
        (f'{lo:g}-{hi:g} m', (a[:, 0] > lo) & (a[:, 0] <= hi)) for lo, hi in DEPTH_ERROR_BINS_M
    ]
    rows += [
        (f'{name} 30-80 m', (a[:, 1] == k) & (a[:, 0] > 30.0))
        for k, name in enumerate(dd.DETECTOR_CLASSES)
    ]
    print('| objects | n | on its bearing | within the gate | depth error median / MAE [m] |')
    print('|---|---|---|---|---|')
    for label, sel in rows:
        part = a[sel]
        if not len(part):
            continue
        found = ~np.isnan(part[:, 2])
        errs = part[found, 2]
        within = float(np.mean(np.nan_to_num(part[:, 3], nan=np.inf) <= gate_m))
        err = f'{np.median(errs):+.2f} / {np.mean(np.abs(errs)):.2f}' if len(errs) else '-'
        print(f'| {label} | {len(part)} | {found.mean():.2f} | {within:.2f} | {err} |')


def picture(spec_path: Path, video: Path | None, out: Path, zoom: float = 1.0) -> None:
    """Detections drawn on a held-out rendered frame and, when given, a frame of a real video,
    through the fusion node's runner with its ``zoom`` (the zoomed view's crop outlined);
    tiles of 1280×720."""
    import cv2  # noqa: PLC0415

    from rt_fusion.core.perception.zoom import decode_views  # noqa: PLC0415
    from rt_fusion.inference.runner import FrameRunner  # noqa: PLC0415

    runner = FrameRunner(spec_path, 'onnxruntime', 'cpu', threads=2, zoom=zoom)
    assert runner.spec.decoder is not None
    scenes = [dd.scene_frames((dd.HELDOUT_SEED_BASE, k), 1, sm.VEHICLE) for k in range(40)]
    busiest = max((f for f in scenes if f), key=lambda f: len(f[0][1]))  # the most labels
    frames: list[Any] = [busiest[0][0]]
    if video is not None:
        cap = cv2.VideoCapture(str(video))
        cap.set(cv2.CAP_PROP_POS_FRAMES, 100)
        ok, frame = cap.read()
        if ok:
            frames.append(cv2.resize(frame, (sm.VEHICLE.width, sm.VEHICLE.height)))
    tiles = []
    for img in frames:
        out_ = runner.run(img, 'bgr8', lambda: True)
        dets = decode_views(out_, runner.spec.decoder, runner.input_hw)
        sx, sy = img.shape[1] / runner.input_hw[1], img.shape[0] / runner.input_hw[0]
        tile = img.copy()
        view = getattr(out_, 'zoom', None)
        if view is not None:
            x0, y0, x1, y1 = view.crop
            cv2.rectangle(tile, (x0, y0), (x1, y1), (255, 255, 0), 2)
        for d in dets:
            u0, v0, u1, v1 = d.box
            p0, p1 = (int(u0 * sx), int(v0 * sy)), (int(u1 * sx), int(v1 * sy))
            cv2.rectangle(tile, p0, p1, (0, 255, 0), 2)
            label = f'{dd.DETECTOR_CLASSES[d.cls]} {d.score:.2f} {d.depth:.0f}m'
            cv2.putText(tile, label, (p0[0], p0[1] - 4), 0, 0.55, (255, 255, 255), 2)
        tiles.append(cv2.resize(tile, (1280, 720), interpolation=cv2.INTER_AREA))
    runner.release()
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), np.vstack(tiles), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    print(f'wrote {out}')


def _heldout_scene(seed: tuple[int, int]) -> list[tuple[np.ndarray, list[dd.CameraLabel]]]:
    return dd.scene_frames(seed, 2, render_camera(), occluders=OCCLUDERS)


def _views(text: str) -> tuple[float, ...]:
    views = tuple(float(v) for v in text.split(','))
    if not views or any(not v >= 1.0 for v in views):
        raise argparse.ArgumentTypeError(f'--views {text}: factors >= 1, comma-separated')
    return views


def _stages(text: str) -> tuple[str, ...]:
    stages = tuple(v for v in text.split(',') if v)
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        raise argparse.ArgumentTypeError(f'no stage {unknown} (stages: {",".join(STAGES)})')
    return stages


def _size(text: str, sep: str = 'x') -> tuple[int, int]:
    a, b = text.lower().split(sep)
    return int(a), int(b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default='/tmp/rtf_detector', help='training output folder')
    parser.add_argument('--frames', type=int, default=24000)
    parser.add_argument('--epochs', type=int, default=12)
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--lr', type=float, default=2e-3)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument(
        '--first-scene',
        type=int,
        default=0,
        help='training scenes are [1000000, first-scene + k] (fine-tuning on new scenes)',
    )
    parser.add_argument(
        '--init', type=Path, help='start from these weights (a weights.pt or a model .ts)'
    )
    parser.add_argument(
        '--far-weight',
        type=float,
        default=0.0,
        help='weigh the regressions of objects farther than this [m] by depth / this (at most '
        '3): far objects, where a pixel is metres (0: all 1)',
    )
    parser.add_argument(
        '--data',
        type=Path,
        help='keep the rendered training data in this folder (read back when it holds the '
        'same scenes)',
    )
    parser.add_argument(
        '--data-only', action='store_true', help='render the data into --data and stop'
    )
    parser.add_argument(
        '--occluders',
        type=float,
        default=0.0,
        help='the chance that a scene (training and held-out) gets 1-3 standing objects in '
        'line with a far roadside post (detector_data.add_occluders; 0: the plain generator)',
    )
    parser.add_argument('--max-train-s', type=float, default=0.0, help='stop training after')
    parser.add_argument('--workers', type=int, default=mp.cpu_count())
    parser.add_argument('--export', type=Path, help='weights.pt to export instead of training')
    parser.add_argument('--models', type=Path, default=ROOT / 'models')
    parser.add_argument('--name', default='rtf_centernet')
    parser.add_argument('--heldout', type=Path, help='a model spec to check on held-out scenes')
    parser.add_argument('--scenes', type=int, default=150, help='held-out scenes (2 frames each)')
    parser.add_argument(
        '--zoom',
        type=float,
        default=1.0,
        help="--heldout, --picture: add the zoomed view (the fusion node's zoom)",
    )
    parser.add_argument('--picture', type=Path, help='PNG of detections (with --heldout SPEC)')
    parser.add_argument(
        '--depth-errors',
        action='store_true',
        help='--heldout: also the table of depth errors, each object paired by bearing',
    )
    parser.add_argument('--video', type=Path, help='--picture: also a frame of this video')
    parser.add_argument(
        '--input', type=_size, default=INPUT_HW, help='network input HxW (default 384x640)'
    )
    parser.add_argument(
        '--camera',
        type=_size,
        default=CAMERA_WH,
        help="render the scenes at WxH (16:9; default 1920x1080, the scenarios' vehicle "
        'camera), resized to the model input',
    )
    parser.add_argument(
        '--views',
        type=_views,
        default=VIEWS,
        help='each rendered frame in these views: 1 the whole frame, z > 1 its centre zoomed z '
        'times as the fusion node cuts it (e.g. 1,1.5,3; default 1); --frames counts them all',
    )
    parser.add_argument(
        '--extra-blocks',
        type=_stages,
        default=(),
        help=f'stages ({",".join(STAGES)}) grown by one residual block each, starting as the '
        'identity (with --init: the trained network grown, then fine-tuned)',
    )
    args = parser.parse_args(argv)
    if args.data_only and args.data is None:
        parser.error('--data-only needs --data')
    set_input(args.input, args.camera)
    set_views(args.views)
    global FAR_WEIGHT_M, OCCLUDERS  # noqa: PLW0603
    FAR_WEIGHT_M = args.far_weight
    if not 0.0 <= args.occluders <= 1.0:
        parser.error(f'--occluders {args.occluders}: a chance in [0, 1]')
    OCCLUDERS = args.occluders
    if args.export:
        export(args.export, args.models, args.name)
        return 0
    if args.heldout and args.picture:
        picture(args.heldout, args.video, args.picture, args.zoom)
        return 0
    if args.heldout:
        heldout(
            args.heldout,
            args.scenes,
            args.workers,
            camera=args.camera,
            zoom=args.zoom,
            depth_errors=args.depth_errors,
        )
        return 0
    train(args)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

"""Training the default camera detector (CenterNet-style) on random rendered scenes, and its
export (ONNX, TorchScript, the model spec): ``tools/train_detector.py`` is the command line.

Data: :mod:`rt_fusion.core.scenario.detector_data` draws random scenes and renders them in
worker processes with the scenario camera (:data:`CAMERA_WH`, set with :func:`set_input`),
resized to the network input as the runtime does. Each visible object becomes a heatmap peak
(class), a log left/top/right/bottom box around the keypoint, a sub-pixel offset, a log depth
and a (sin, cos) heading at stride 4. Losses: CenterNet's penalty-reduced focal loss on the
heatmaps, L1 on the rest. torch is imported where it is used.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.core.scenario import detector_data as dd
from rt_fusion.core.scenario import sensors as sm

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


def heldout_scene(seed: tuple[int, int]) -> list[tuple[np.ndarray, list[dd.CameraLabel]]]:
    return dd.scene_frames(seed, 2, render_camera(), occluders=OCCLUDERS)

"""The inference benchmark's runs (``tools/bench_inference.py`` is its command line): one
configuration of backend, device, precision and CUDA graph timed per stage (upload,
preprocessing, network, download, decoding), the fusion node's runner path, and host-to-device
copies."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.core.latency import summarize_ns
from rt_fusion.core.perception.decoders import CenternetPeaks, decode
from rt_fusion.inference import backends
from rt_fusion.inference.device_decode import centernet_peaks
from rt_fusion.inference.preprocess import CpuPreprocessor
from rt_fusion.inference.runner import PEAKS
from rt_fusion.inference.spec import load_spec

FRAME = (1080, 1920, 3)


def _frame_source(cuda: bool) -> tuple[Any, Any]:
    """A 1080p frame: in a registered shared-memory slot on CUDA, plain memory on CPU."""
    rng = np.random.default_rng(0)
    content = rng.integers(0, 256, FRAME, dtype=np.uint8)
    if not cuda:
        return content, None
    from rt_fusion.core.shm import ShmRingWriter  # noqa: PLC0415
    from rt_fusion.inference import pinned  # noqa: PLC0415

    ring = ShmRingWriter.create(f'rt_fusion_bench_inf_{os.getpid()}', content.nbytes, 2)
    ws = ring.acquire(FRAME, np.uint8, 'rgb8')
    np.copyto(ws.array, content)
    ring.commit(ws, 0, 0)
    region = pinned.register(*ring.slot_range())
    return ws.array, (ring, region)


def run_config(
    backend: str,
    device: str,
    *,
    precision: str,
    cuda_graph: bool,
    runs: int,
    threads: int,
    model: Path,
    optimize: bool = True,
) -> dict[str, Any]:
    """Times ``runs`` iterations of one configuration."""
    spec = load_spec(model)
    assert spec.preprocessing is not None
    cuda = device.startswith('cuda')
    frame, keep = _frame_source(cuda)
    options: dict[str, Any] = {'device': device}
    if backend == 'torch':
        options |= {'precision': precision, 'cuda_graph': cuda_graph, 'optimize': optimize}
    if threads:
        options['threads'] = threads
    be: Any = backends.create(backend, spec, **options)
    out_name = spec.outputs[spec.decoder.output if spec.decoder else 0].name
    # On CUDA the fusion node reduces a centernet head to its peaks inside the graph
    # (device_decode); both ways to the objects are timed.
    on_device = bool(
        cuda and backend == 'torch' and spec.decoder and spec.decoder.type == 'centernet'
    )
    if on_device:
        assert spec.decoder is not None
        nc, top_k = len(spec.decoder.classes), spec.decoder.top_k
        be.add_postprocess(PEAKS, lambda outs: centernet_peaks(outs[out_name], nc, top_k))
    if cuda:
        from rt_fusion.inference.preprocess import TorchPreprocessor  # noqa: PLC0415

        pre: Any = TorchPreprocessor(
            spec.preprocessing,
            FRAME,
            device,
            out=be.input('images'),
            stream=be.stream,
            cuda_graph=cuda_graph,
        )
    else:
        cpu_pre = CpuPreprocessor(spec.preprocessing, FRAME)
        target = be.input('images')
        if not isinstance(target, np.ndarray):  # torch on CPU: a tensor sharing numpy memory
            target = target.numpy()
        pre = lambda f: cpu_pre(f, target)  # noqa: E731
    be.prepare(warmup=10)
    sync = be.stream.synchronize if cuda else (lambda: None)
    pre_ns = np.empty(runs, np.int64)
    inf_ns = np.empty(runs, np.int64)
    for i in range(runs + 20):
        t0 = time.perf_counter_ns()
        pre(frame)
        sync()
        t1 = time.perf_counter_ns()
        be.run()
        t2 = time.perf_counter_ns()
        if i >= 20:
            pre_ns[i - 20], inf_ns[i - 20] = t1 - t0, t2 - t1
    # The camera path as it runs: preprocessing and the model enqueued back to back on one
    # stream, one wait at the end.
    fused_ns = np.empty(runs, np.int64)
    for i in range(runs + 20):
        t0 = time.perf_counter_ns()
        pre(frame)
        be.run()
        if i >= 20:
            fused_ns[i - 20] = time.perf_counter_ns() - t0
    # The whole camera path with the model's head decoded into objects (the output copied to
    # the host; the decoder is numpy).
    decoded_ns = np.empty(runs if spec.decoder else 0, np.int64)
    decode_ns = np.empty(runs if spec.decoder else 0, np.int64)
    for i in range(len(decoded_ns) + 20 if spec.decoder else 0):
        assert spec.decoder is not None
        t0 = time.perf_counter_ns()
        pre(frame)
        if cuda:
            out = be.run_to_host(out_name)
        else:
            out = be.run()[out_name]
            out = out if isinstance(out, np.ndarray) else out.float().numpy()
        t1 = time.perf_counter_ns()
        decode(out, spec.decoder, spec.preprocessing.resize)
        if i >= 20:
            decoded_ns[i - 20] = time.perf_counter_ns() - t0
            decode_ns[i - 20] = time.perf_counter_ns() - t1
    # The same with the peaks found in the graph: a few KB copied, the rows decoded.
    peaks_ns = np.empty(runs if on_device else 0, np.int64)
    peaks_decode_ns = np.empty(runs if on_device else 0, np.int64)
    for i in range(len(peaks_ns) + 20 if on_device else 0):
        assert spec.decoder is not None
        t0 = time.perf_counter_ns()
        pre(frame)
        rows = be.run_to_host(PEAKS)
        t1 = time.perf_counter_ns()
        decode(CenternetPeaks(rows), spec.decoder, spec.preprocessing.resize)
        if i >= 20:
            peaks_ns[i - 20] = time.perf_counter_ns() - t0
            peaks_decode_ns[i - 20] = time.perf_counter_ns() - t1
    name = getattr(be, 'fallback_reason', '') or ''
    result = {
        'backend': backend,
        'device': be.device,
        'precision': precision,
        'cuda_graph': cuda_graph and cuda,
        'pre': summarize_ns(pre_ns),
        'infer': summarize_ns(inf_ns),
        'total': summarize_ns(pre_ns + inf_ns),
        'fused': summarize_ns(fused_ns),
        'decode': summarize_ns(decode_ns) if len(decode_ns) else None,
        'decoded': summarize_ns(decoded_ns) if len(decoded_ns) else None,
        'peaks_decode': summarize_ns(peaks_decode_ns) if len(peaks_ns) else None,
        'peaks': summarize_ns(peaks_ns) if len(peaks_ns) else None,
        'note': name,
    }
    be.release()
    if keep is not None:
        ring, region = keep
        region.release()
        ring.close()
    return result


def bench_runner(
    backend: str,
    device: str,
    runs: int,
    threads: int,
    model: Path,
    zoom: float,
    mirror: bool = False,
) -> dict[str, Any]:
    """The fusion node's camera path (:class:`FrameRunner` + decoding) on a 1080p frame, with
    and without the zoomed view (``zoom``): what the second pass costs; ``mirror``: also with
    both views mirrored too (``rt_fusion.core.perception.mirror``)."""
    from rt_fusion.core.perception.zoom import decode_views  # noqa: PLC0415
    from rt_fusion.inference.runner import FrameRunner  # noqa: PLC0415

    frame, keep = _frame_source(device.startswith('cuda'))
    out: dict[str, Any] = {}
    configs = [(1.0, False), (zoom, False)] + ([(zoom, True)] if mirror else [])
    for z, m in configs:
        runner = FrameRunner(model, backend, device, threads, zoom=z, mirror=m)
        assert runner.spec.decoder is not None
        times = np.empty(runs, np.int64)
        for i in range(runs + 20):
            t0 = time.perf_counter_ns()
            decode_views(
                runner.run(frame, 'bgr8', lambda: True), runner.spec.decoder, runner.input_hw
            )
            if i >= 20:
                times[i - 20] = time.perf_counter_ns() - t0
        runner.release()
        out[f'zoom {z:g}' + (', mirrored' if m else '')] = summarize_ns(times)
    if keep is not None:
        ring, region = keep
        region.release()
        ring.close()
    return out


def bench_h2d(runs: int) -> dict[str, Any]:
    """1080p host->device copy: pageable numpy vs the registered shm slot."""
    import torch  # noqa: PLC0415

    frame, keep = _frame_source(True)
    pageable = np.array(frame)
    dev = torch.empty(FRAME, dtype=torch.uint8, device='cuda')
    out = {}
    for name, src in (('pageable', pageable), ('pinned shm slot', frame)):
        host = torch.from_numpy(src)
        times = np.empty(runs, np.int64)
        for i in range(runs + 10):
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            dev.copy_(host, non_blocking=True)
            torch.cuda.synchronize()
            if i >= 10:
                times[i - 10] = time.perf_counter_ns() - t0
        out[name] = summarize_ns(times)
    ring, region = keep
    region.release()
    ring.close()
    return out

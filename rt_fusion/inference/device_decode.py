"""A centernet head reduced to its peaks where the network ran (PyTorch; CUDA-graph capturable).

The numpy decoder (:func:`rt_fusion.core.perception.decoders.centernet_peaks`) needs the whole
head on the host: 14 × 96 × 160 values (430 KB in FP16) copied back and scanned by the CPU every
frame. Here the same peaks are found on the device with fixed-shape operations only (a 3×3 max
pool, one top-K, a gather: no host synchronisation, no data-dependent shapes), so they are
captured into the model's CUDA graph and only ``[K, 4 + R]`` float32 rows (a few KB) cross to the
host; :func:`~rt_fusion.core.perception.decoders.decode_centernet_peaks` applies the threshold.

Same peaks as the numpy decoder: a cell is a peak when no neighbour is greater (ties kept), the K
strongest over all classes.
"""

from __future__ import annotations

from typing import Any


def centernet_peaks(heads: Any, classes: int, top_k: int) -> Any:
    """``heads`` ``[1, C, H, W]`` (any float dtype, any device) -> float32 rows ``[top_k, 4 + C -
    classes]``: class, row, column, heatmap logit, then the regression channels at that cell,
    strongest first (rows past the last peak have logit ``-inf``)."""
    import torch  # noqa: PLC0415 - optional accelerator
    import torch.nn.functional as F  # noqa: N812, PLC0415

    head = heads[0]  # in the network's precision: only the K rows are converted
    heat = head[:classes]
    _, h, w = heat.shape
    pooled = F.max_pool2d(heat[None], 3, stride=1, padding=1)[0]  # padding is -inf
    masked = heat.masked_fill(heat < pooled, -torch.inf)
    k = min(top_k, masked.numel())
    value, index = torch.topk(masked.reshape(-1), k)
    cls = torch.div(index, h * w, rounding_mode='floor')
    cell = index - cls * (h * w)
    ys = torch.div(cell, w, rounding_mode='floor')
    xs = cell - ys * w
    reg = head[classes:].reshape(head.shape[0] - classes, -1)[:, cell].T  # (k, R)
    rows = torch.stack([cls, ys, xs], 1).float()
    return torch.cat([rows, value.float()[:, None], reg.float()], 1)

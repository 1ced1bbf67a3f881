"""Camera frame (uint8 HWC) -> network input (NCHW, normalised), with no per-frame allocation.

- :class:`CpuPreprocessor`: resize, the per-channel affine ``(pixel * scale - mean) / std`` and
  the HWC -> CHW layout in one OpenCV call (``cv2.dnn.blobFromImageWithParams``, OpenCV >= 4.8,
  writing into the input buffer: 0.9 ms for 960x540 -> 640x384 on the dev VM, against 3.9 ms
  for resize + numpy), or resize + numpy where that call is missing.
- :class:`TorchPreprocessor`: the GPU path of the camera: the frame (a shared-memory slot,
  page-locked with :mod:`rt_fusion.inference.pinned` for DMA-speed copies) is copied to a static
  device buffer, then resize + normalisation + layout + float16 run as one CUDA graph replay
  writing straight into the model's static input tensor.
"""

from __future__ import annotations

import warnings
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from rt_fusion.inference.spec import InputMismatchError, Preprocessing


def _affine(pre: Preprocessing) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Per-channel (a, b) of out = pixel * a - b, in the network's channel order."""
    a = np.array([pre.scale / s for s in pre.std], np.float32)
    b = np.array([m / s for m, s in zip(pre.mean, pre.std, strict=True)], np.float32)
    return a, b


class CpuPreprocessor:
    """Resize + normalise + HWC->NCHW on the CPU into ``out`` (or its own buffer).

    Args:
        pre: the model's preprocessing.
        src_shape: (height, width, 3) of the frames.
        src_order: channel order of the frames ('rgb' or 'bgr').
    """

    def __init__(
        self, pre: Preprocessing, src_shape: tuple[int, ...], src_order: str = 'rgb'
    ) -> None:
        h, w = pre.resize
        self.pre = pre
        self.src_shape = tuple(src_shape)
        self._size = (w, h)
        self._resized = np.empty((h, w, 3), np.uint8)
        self._float = np.empty((h, w, 3), np.float32)
        self.out = np.empty((1, 3, h, w), np.float32)
        self._swap = src_order != pre.channel_order
        self._a, self._b = _affine(pre)
        self._blob_params: Any = None
        if hasattr(cv2.dnn, 'blobFromImageWithParams'):
            # (x - mean / scale) * (scale / std), per channel, in the network's channel order.
            std = np.asarray(pre.std, np.float64)
            mean = np.asarray(pre.mean, np.float64)
            self._blob_params = cv2.dnn.Image2BlobParams(
                scalefactor=tuple((pre.scale / std).tolist()),
                size=(w, h),
                mean=tuple((mean / pre.scale).tolist()),
                swapRB=self._swap,
                ddepth=cv2.CV_32F,
            )

    def __call__(
        self, frame: npt.NDArray[np.uint8], out: npt.NDArray[np.float32] | None = None
    ) -> npt.NDArray[np.float32]:
        """Writes the network input of ``frame`` into ``out`` and returns it."""
        if frame.shape != self.src_shape or frame.dtype != np.uint8:
            raise InputMismatchError(
                f'preprocessing expects uint8{list(self.src_shape)} frames, '
                f'got {frame.dtype}{list(frame.shape)}'
            )
        dst = self.out if out is None else out
        if self._blob_params is not None and dst.flags.c_contiguous:
            cv2.dnn.blobFromImageWithParams(frame, dst, self._blob_params)
            return dst
        cv2.resize(frame, self._size, dst=self._resized, interpolation=cv2.INTER_LINEAR)
        src = self._resized[..., ::-1] if self._swap else self._resized
        np.multiply(src, self._a, out=self._float)
        np.subtract(self._float, self._b, out=self._float)
        np.copyto(dst[0], self._float.transpose(2, 0, 1))
        return dst


class TorchPreprocessor:
    """The camera's GPU preprocessing, captured as a CUDA graph (CUDA) or run eagerly (CPU).

    Args:
        pre: the model's preprocessing.
        src_shape: (height, width, 3) of the frames.
        device: a torch device string.
        out: the tensor to write (e.g. a TorchBackend's static input); default: its own.
        dtype: output dtype when ``out`` is not given (torch.float16 / float32).
        src_order: channel order of the frames.
        stream: CUDA stream to run on (default: a new high-priority one).
        cuda_graph: capture the kernels into a CUDA graph.
        source: a device tensor (HWC uint8, e.g. a crop of another preprocessor's ``src``) to
            read instead of a frame copied from the host: :meth:`replay` then runs the kernels
            on whatever it holds (the zoomed view of a frame already uploaded).
    """

    def __init__(
        self,
        pre: Preprocessing,
        src_shape: tuple[int, ...],
        device: str,
        *,
        out: Any = None,
        dtype: Any = None,
        src_order: str = 'rgb',
        stream: Any = None,
        cuda_graph: bool = True,
        source: Any = None,
    ) -> None:
        import torch  # noqa: PLC0415 - optional accelerator
        import torch.nn.functional as func  # noqa: PLC0415

        self.torch, self.func = torch, func
        self.pre = pre
        self.src_shape = tuple(src_shape)
        h, w = pre.resize
        self.device = device
        self.src = (
            source
            if source is not None
            else torch.zeros(self.src_shape, dtype=torch.uint8, device=device)
        )
        self.out = (
            out
            if out is not None
            else torch.zeros((1, 3, h, w), dtype=dtype or torch.float32, device=device)
        )
        self._swap = src_order != pre.channel_order
        a, b = _affine(pre)
        self._a = torch.from_numpy(a).view(1, 3, 1, 1).to(device)
        self._b = torch.from_numpy(b).view(1, 3, 1, 1).to(device)
        self._host_cache: dict[int, Any] = {}
        cuda = device.startswith('cuda')
        self.stream = (
            stream
            if stream is not None or not cuda
            else torch.cuda.Stream(device=device, priority=-1)
        )
        self.graph = None
        if cuda:
            with torch.cuda.stream(self.stream):
                for _ in range(3):
                    self._kernels()
            self.stream.synchronize()
            if cuda_graph:
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph, stream=self.stream):
                    self._kernels()
                self.stream.synchronize()

    def _kernels(self) -> None:
        x = self.src.permute(2, 0, 1).unsqueeze(0).float()
        if self._swap:
            x = x.flip(1)
        y = self.func.interpolate(
            x, size=self.pre.resize, mode='bilinear', align_corners=False, antialias=False
        )
        self.out.copy_(y * self._a - self._b)

    def _host_tensor(self, frame: npt.NDArray[np.uint8]) -> Any:
        # One tensor per frame address: shared-memory slots come back again and again.
        key = frame.__array_interface__['data'][0]
        cached = self._host_cache.get(key)
        if cached is None:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore', UserWarning)  # read-only views: we only read
                cached = self.torch.from_numpy(frame)
            if len(self._host_cache) < 64:
                self._host_cache[key] = cached
        return cached

    def replay(self) -> Any:
        """Enqueues the preprocessing of what ``src`` holds now (no copy from the host; a
        ``source`` view); returns ``out``."""
        if self.stream is None:
            self._kernels()
            return self.out
        with self.torch.cuda.stream(self.stream):
            if self.graph is not None:
                self.graph.replay()
            else:
                self._kernels()
        return self.out

    def __call__(self, frame: npt.NDArray[np.uint8]) -> Any:
        """Enqueues copy + preprocessing of ``frame`` on the stream; returns ``out``.

        The caller synchronises (the model's run on the same stream, or ``stream``).
        """
        if tuple(frame.shape) != self.src_shape or frame.dtype != np.uint8:
            raise InputMismatchError(
                f'preprocessing expects uint8{list(self.src_shape)} frames, '
                f'got {frame.dtype}{list(frame.shape)}'
            )
        torch = self.torch
        host = self._host_tensor(frame)
        if self.stream is None:
            self.src.copy_(host)
            self._kernels()
            return self.out
        with torch.cuda.stream(self.stream):
            self.src.copy_(host, non_blocking=True)
            if self.graph is not None:
                self.graph.replay()
            else:
                self._kernels()
        return self.out

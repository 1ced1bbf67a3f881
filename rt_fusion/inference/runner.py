"""One object that turns camera frames into network outputs: backend, preprocessing, pinning.

The fusion node builds a :class:`FrameRunner` at configure and releases it at cleanup; what a
frame goes through (preprocessing on the CPU or on the model's CUDA stream straight into its
static input, the page-locked camera ring, the graph replay, the output copy) is decided here,
ROS-free, where it can be tested on its own.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from rt_fusion.core.perception.decoders import CenternetPeaks
from rt_fusion.core.perception.mirror import Mirrored
from rt_fusion.core.perception.zoom import Views, Zoom, ZoomError
from rt_fusion.inference import backends, pinned
from rt_fusion.inference.preprocess import CpuPreprocessor, TorchPreprocessor
from rt_fusion.inference.spec import ModelError, ModelSpec, load_spec

DEFAULT_INPUT_HW = (384, 640)  # the model input the fusion assumes without a network
PEAKS = 'centernet_peaks'  # the extra output of device_decode


class FrameRunner:
    """A loaded model and the preprocessing of the frames fed to it.

    Args:
        spec_path: the model spec YAML.
        backend: ``onnxruntime``, ``torch`` or ``tensorrt``.
        device: ``cpu``, ``cuda`` or ``cuda:N``.
        threads: CPU threads of the backend (0: its default).
        device_decode: on CUDA with the torch backend, reduce a centernet head to its peaks on
            the GPU inside the model's CUDA graph (:mod:`rt_fusion.inference.device_decode`):
            ``run`` then returns :class:`CenternetPeaks` (a few KB) instead of the whole head.
        warm: run :meth:`warm_up` now (False: the caller does, or :meth:`start_warm_up`).
        zoom: > 1: each frame also goes through the network as the zoomed view of its centre
            (:mod:`rt_fusion.core.perception.zoom`, far objects at ``zoom`` times the scale);
            ``run`` then returns :class:`Views`. Only with a decoder, and only for frames large
            enough (:attr:`zoom_note` says why a frame size has none).
        recording: the ``recorded`` backend's file of network outputs (benchmarks:
            :mod:`rt_fusion.inference.recorded_backend`; no preprocessing then).
        mirror: each view also goes through the network mirrored left to right (its input
            mirrored in place after the first pass); ``run`` then returns
            :class:`~rt_fusion.core.perception.mirror.Mirrored`, whose detections
            :func:`~rt_fusion.core.perception.zoom.decode_views` averages. Only with a decoder.

    Raises:
        ModelError: the spec, the model or its runtime cannot be loaded.
    """

    def __init__(
        self,
        spec_path: Path | str,
        backend: str,
        device: str,
        threads: int = 0,
        *,
        device_decode: bool = True,
        warm: bool = True,
        zoom: float = 1.0,
        mirror: bool = False,
        recording: str = '',
    ) -> None:
        self.spec: ModelSpec = load_spec(spec_path)
        self.mirror = mirror and self.spec.decoder is not None
        self.zoom = zoom if self.spec.decoder is not None else 1.0
        self.zoom_note = '' if self.zoom == zoom else 'no zoomed view: the model has no decoder'
        self.view: Zoom | None = None  # of the current frame size
        self._zoom_pre: CpuPreprocessor | TorchPreprocessor | None = None
        options: dict[str, Any] = {'device': device}
        if threads:
            options['threads'] = threads
        if backend == 'recorded':
            options['recording'] = recording
        # Any: the CUDA path uses members only the CUDA backends have (stream, run_to_host).
        self.model: Any = cast(Any, backends.create(backend, self.spec, **options))
        self.cuda = str(getattr(self.model, 'device', 'cpu')).startswith('cuda')
        self.input_name = self.spec.inputs[0].name
        decoder = self.spec.decoder
        self.output_name = self.spec.outputs[decoder.output if decoder else 0].name
        self.peaks = bool(
            device_decode
            and self.cuda
            and decoder is not None
            and decoder.type == 'centernet'
            and hasattr(self.model, 'add_postprocess')
        )
        if self.peaks:
            assert decoder is not None
            from rt_fusion.inference.device_decode import centernet_peaks  # noqa: PLC0415

            head, nc, top_k = self.output_name, len(decoder.classes), decoder.top_k
            self.model.add_postprocess(PEAKS, lambda outs: centernet_peaks(outs[head], nc, top_k))
        assert self.spec.preprocessing is not None
        self.input_hw: tuple[int, int] = tuple(self.spec.preprocessing.resize)  # type: ignore[assignment]
        self.pre: CpuPreprocessor | TorchPreprocessor | None = None
        self._target: Any = None
        self._order = ''
        self._pinned: dict[object, pinned.PinnedRegion | None] = {}
        self._warming: threading.Thread | None = None
        self._warm_error: BaseException | None = None
        if warm:
            self.warm_up()

    def warm_up(self) -> None:
        """The runs before the first frame: the model's warm-up, and on CUDA the preprocessing
        kernels."""
        assert self.model is not None
        # CUDA: warm kernels, then the graph capture (3 runs at least); CPU: one run allocates
        # the arena, more only steady a benchmark's timing (and lengthen a restart).
        self.model.prepare(3 if self.cuda else 1)
        if self.cuda:
            assert self.spec.preprocessing is not None
            # Load the preprocessing kernels now, not on the first frame (a cold CUDA start
            # takes long enough there to overflow the camera queue).
            h, w = self.input_hw
            warm = TorchPreprocessor(
                self.spec.preprocessing,
                (h * 2, w * 2, 3),
                self.model.device,
                out=self.model.input(self.input_name),
                stream=self.model.stream,
            )
            warm(np.zeros((h * 2, w * 2, 3), np.uint8))
            warm.stream.synchronize()

    def start_warm_up(self) -> None:
        """:meth:`warm_up` on a thread of its own, for a caller with other start-up work to do
        meanwhile (the model's runtime releases the GIL while it runs: a fusion node's start
        overlaps its 0.2-s warm-up inference with its subscriptions, publishers and real-time
        set-up). :meth:`wait_warm` ends it."""

        def warm() -> None:
            try:
                self.warm_up()
            except BaseException as err:  # noqa: BLE001  (handed to wait_warm)
                self._warm_error = err

        self._warming = threading.Thread(target=warm, name='model-warm-up', daemon=True)
        self._warming.start()

    def wait_warm(self) -> None:
        """Waits for :meth:`start_warm_up`'s runs (no-op without them).

        Raises:
            ModelError: the warm-up failed.
        """
        if self._warming is not None:
            self._warming.join()
            self._warming = None
        err, self._warm_error = self._warm_error, None
        if err is not None:
            raise ModelError(f'warm-up failed: {err}') from err

    @property
    def device(self) -> str:
        """Where the model runs."""
        return str(getattr(self.model, 'device', 'cpu'))

    def pin(self, key: object, address_range: Callable[[], tuple[int, int]]) -> str | None:
        """Page-locks a camera ring's mapping once per ``key`` (CUDA only): uploads then run at
        pinned speed straight from the slot. Returns the reason when it could not (pageable
        then: slower uploads, same results)."""
        if not self.cuda or key in self._pinned:
            return None
        try:
            self._pinned[key] = pinned.register(*address_range(), read_only=True)
        except pinned.PinnedMemoryError as err:
            self._pinned[key] = None
            return str(err)
        return None

    def run(self, image: np.ndarray, encoding: str, still_valid: Callable[[], bool]) -> Any:
        """The network's output for one frame, or False when ``still_valid()`` says the frame
        was overwritten while it was read (the input was garbage)."""
        # Channel order from the frame's encoding (cameras give bgr8 from OpenCV, rgb8 from Argus).
        order = 'bgr' if encoding.startswith('bgr') else 'rgb'
        if self.pre is None or self.pre.src_shape != tuple(image.shape) or order != self._order:
            self._order = order
            assert self.spec.preprocessing is not None
            target = self.model.input(self.input_name)
            if self.cuda:
                # Upload + resize + normalise on the model's stream, straight into its static
                # input (a CUDA graph); the model's graph replays after it on the same stream.
                self.pre = TorchPreprocessor(
                    self.spec.preprocessing,
                    image.shape,
                    self.model.device,
                    out=target,
                    src_order=order,
                    stream=self.model.stream,
                )
                self._target = None
            else:
                self.pre = CpuPreprocessor(self.spec.preprocessing, image.shape, order)
                self._target = target if isinstance(target, np.ndarray) else target.numpy()
            self._zoom_for(image.shape, order, target)
        full = self._view_out(self.pre, image, still_valid)
        if full is False:
            return False
        if self.mirror:
            full = (self._kept(full), self._kept(self._mirrored_out()))
        if self.view is None or self._zoom_pre is None:
            return Mirrored(*full) if self.mirror else full
        x0, y0, x1, y1 = self.view.crop
        # The next run writes the same output buffers (ONNX Runtime's bound outputs, the
        # page-locked host copies of the CUDA path).
        full = full if self.mirror else self._kept(full)
        zoomed = self._view_out(self._zoom_pre, image[y0:y1, x0:x1], still_valid)
        if zoomed is False:
            return False
        if not self.mirror:
            return Views(full, zoomed, self.view)
        zoomed = self._kept(zoomed)
        return Mirrored(
            Views(full[0], zoomed, self.view),
            Views(full[1], self._mirrored_out(), self.view),
        )

    def _kept(self, out: Any) -> Any:
        """A copy of a network output that the next run will not overwrite."""
        return CenternetPeaks(out.rows.copy()) if self.peaks else np.array(out, copy=True)

    def _mirrored_out(self) -> Any:
        """The network's output for its current input mirrored left to right (in place)."""
        x = self.model.input(self.input_name)
        if isinstance(x, np.ndarray):
            x[...] = x[..., ::-1].copy()
        elif self.cuda:
            import torch  # noqa: PLC0415  (a CUDA input: the torch backend)

            with torch.cuda.stream(self.model.stream):
                x.copy_(x.flip(-1))
        else:  # the torch backend's CPU tensor
            x.copy_(x.flip(-1))
        return self._network_out()

    def _zoom_for(self, shape: tuple[int, ...], order: str, target: Any) -> None:
        """The zoomed view of this frame size and its preprocessing (none when zoom is off or
        the frame is too small for it: :attr:`zoom_note` says so)."""
        self.view, self._zoom_pre = None, None
        if self.zoom <= 1.0:
            return
        assert self.spec.preprocessing is not None
        try:
            self.view = Zoom.of(self.zoom, (shape[0], shape[1]), self.input_hw)
        except ZoomError as err:
            self.zoom_note = f'no zoomed view: {err}'
            return
        assert self.view is not None
        x0, y0, x1, y1 = self.view.crop
        crop = (y1 - y0, x1 - x0, 3)
        if self.cuda:  # cut from the frame the full view uploaded: no second copy
            assert isinstance(self.pre, TorchPreprocessor)
            self._zoom_pre = TorchPreprocessor(
                self.spec.preprocessing,
                crop,
                self.model.device,
                out=target,
                src_order=order,
                stream=self.model.stream,
                source=self.pre.src[y0:y1, x0:x1],
            )
        else:
            self._zoom_pre = CpuPreprocessor(self.spec.preprocessing, crop, order)
        self.zoom_note = ''

    def _view_out(
        self,
        pre: CpuPreprocessor | TorchPreprocessor,
        image: np.ndarray,
        still_valid: Callable[[], bool],
    ) -> Any:
        """One view of a frame through preprocessing and the network (False: torn)."""
        select = getattr(self.model, 'select', None)
        if select is not None:  # recorded outputs (rt_fusion.inference.recorded_backend)
            select(image)
        if getattr(self.model, 'replays', False):  # ... replayed: no input to prepare
            return self._network_out() if still_valid() else False
        if pre is self._zoom_pre and isinstance(pre, TorchPreprocessor):
            pre.replay()  # the full view's upload of this frame, cropped on the device
        elif isinstance(pre, TorchPreprocessor):
            pre(image)  # the copy from the slot has finished when this returns
        else:
            pre(image, self._target)
        if not still_valid():
            return False
        return self._network_out()

    def _network_out(self) -> Any:
        """The network's output for its current input (on CUDA: the graph, the output copy,
        one wait; a TorchPreprocessor is the CUDA path's)."""
        if self.cuda:
            if self.peaks:
                return CenternetPeaks(self.model.run_to_host(PEAKS))
            return self.model.run_to_host(self.output_name)
        out = self.model.run()[self.output_name]
        return out if isinstance(out, np.ndarray) else out.float().cpu().numpy()

    def release(self) -> None:
        """Unpins the rings and frees the model (idempotent), after any warm-up."""
        with contextlib.suppress(ModelError):
            self.wait_warm()
        for region in self._pinned.values():
            if region is not None:
                region.release()
        self._pinned.clear()
        if self.model is not None:
            self.model.release()
            self.model = None
        self.pre = None
        self._zoom_pre = None

"""PyTorch backend: CUDA with a captured CUDA graph and static buffers, FP16, stream priority;
CPU fallback.

Loads the spec's ``torchscript`` artifact when it has one (exported from the same weights as the
ONNX), else converts the ``onnx`` artifact with onnx2torch. On CUDA the forward pass is captured
once into a CUDA graph over static input/output tensors: a run is one graph replay on the
backend's stream (high priority by default, for the camera path), with no allocation and no
Python per layer.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from rt_fusion.inference.backend import Backend, RunHandle
from rt_fusion.inference.spec import ModelLoadError, ModelSpec


def _load_module(spec: ModelSpec) -> Any:
    import torch  # noqa: PLC0415 - optional accelerator

    if 'torchscript' in spec.artifacts:
        path = spec.artifact('torchscript')
        try:
            return torch.jit.load(str(path), map_location='cpu')
        except RuntimeError as err:
            raise ModelLoadError(
                f'model {spec.name!r}: cannot load TorchScript {path}: {err}'
            ) from err
    path = spec.artifact('onnx')
    try:
        import onnx  # noqa: PLC0415
        from onnx2torch import convert  # noqa: PLC0415
    except ImportError as err:
        raise ModelLoadError(
            f'model {spec.name!r}: no TorchScript artifact and onnx2torch is not importable '
            f'({err})'
        ) from err
    return convert(onnx.load(str(path)))


def optimized(module: Any, spec: ModelSpec) -> tuple[Any, str]:
    """``module`` (on its CUDA device, in its precision) rewritten for inference, and a note
    of what was done. Channels-last (NHWC) weights and activations let cuDNN run FP16
    convolutions on the tensor cores without transposing each layer's input; a TorchScript
    module is frozen (its weights become constants: each batch norm is folded into the
    convolution before it) and ``optimize_for_inference`` fuses what is left (a convolution
    with its ReLU). Same outputs up to the precision's rounding (tested against the module as
    loaded). A model whose inputs are not images keeps its layout."""
    import torch  # noqa: PLC0415 - optional accelerator

    done = []
    if all(len(t.shape) == 4 for t in spec.inputs):
        module = module.to(memory_format=torch.channels_last)
        done.append('channels-last')
    if isinstance(module, torch.jit.ScriptModule):
        try:
            with warnings.catch_warnings():  # 2.10+: TorchScript is deprecated (still shipped)
                warnings.simplefilter('ignore', DeprecationWarning)
                module = torch.jit.optimize_for_inference(torch.jit.freeze(module))
            done.append('frozen')
        except RuntimeError as err:  # a model TorchScript cannot freeze runs as loaded
            done.append(f'not frozen ({str(err).splitlines()[0][:120]})')
    return module, ', '.join(done)


class TorchBackend(Backend):
    """PyTorch, on CUDA (CUDA graph) or CPU.

    Args:
        spec: the model spec.
        device: ``cuda`` / ``cuda:N`` or ``cpu``; ``cuda`` without a GPU falls back to CPU and
            says so in ``fallback_reason``.
        precision: ``fp32`` or ``fp16`` (CUDA only); default: the spec's.
        cuda_graph: capture the forward pass into a CUDA graph (CUDA only).
        stream_priority: CUDA stream priority (lower is more urgent; -1 is high on most GPUs).
        threads: CPU threads (0: PyTorch's default).
        optimize: on CUDA, the inference-only rewrites before capture (:func:`optimized`):
            channels-last tensors for the tensor cores, a TorchScript model frozen (batch
            norms folded into their convolutions).
    """

    name = 'torch'

    def __init__(
        self,
        spec: ModelSpec,
        device: str = 'cuda',
        *,
        precision: str | None = None,
        cuda_graph: bool = True,
        stream_priority: int = -1,
        threads: int = 0,
        optimize: bool = True,
    ) -> None:
        super().__init__(spec)
        import torch  # noqa: PLC0415 - optional accelerator

        self.torch = torch
        self.fallback_reason = ''
        if device.startswith('cuda') and not torch.cuda.is_available():
            self.fallback_reason = 'no CUDA device: running on CPU'
            device = 'cpu'
        self._device = device
        self.precision = precision or spec.precision
        if self.precision not in ('fp32', 'fp16'):
            raise ModelLoadError(f'torch backend runs fp32 or fp16, not {self.precision}')
        if self.precision == 'fp16' and device == 'cpu':
            self.fallback_reason += '; fp16 is CUDA-only: running fp32'
            self.precision = 'fp32'
        if threads and device == 'cpu':
            torch.set_num_threads(threads)
        dtype = torch.float16 if self.precision == 'fp16' else torch.float32
        self.dtype = dtype
        module = _load_module(spec).eval().to(device)
        if self.precision == 'fp16':
            module = module.half()
        self.optimized = ''  # what optimized() did ('' : nothing)
        self._channels_last = False
        if optimize and device.startswith('cuda'):
            module, self.optimized = optimized(module, spec)
            self._channels_last = 'channels-last' in self.optimized
        self.module = module
        self.stream = (
            torch.cuda.Stream(device=device, priority=stream_priority)
            if device.startswith('cuda')
            else None
        )

        def buffer(shape: tuple[int, ...], np_dtype: np.dtype[Any]) -> Any:
            tdtype = dtype if np_dtype.kind == 'f' else getattr(torch, np_dtype.name)
            t = torch.zeros(shape, dtype=tdtype, device=device)
            if self._channels_last and len(shape) == 4:  # what the model's kernels read
                t = t.contiguous(memory_format=torch.channels_last)
            return t

        self._inputs = {t.name: buffer(t.shape, t.np_dtype) for t in spec.inputs}
        self._outputs: dict[str, Any] = {}
        self._host_out: dict[str, Any] = {}  # page-locked output copies (run_to_host)
        self._host_event: Any = torch.cuda.Event() if self.stream is not None else None
        self.graph = None
        self._use_graph = cuda_graph and self.stream is not None
        # name -> fn(outputs) run after the network, inside its CUDA graph (add_postprocess)
        self._post: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._check_outputs()

    def add_postprocess(self, name: str, fn: Callable[[dict[str, Any]], Any]) -> None:
        """An extra output ``name`` = ``fn(outputs)``, computed on the device after each forward
        pass (captured into the same CUDA graph: fixed shapes, no host synchronisation).
        Before :meth:`prepare`."""
        if self.graph is not None:
            raise ModelLoadError(f'{name}: post-processing must be added before prepare()')
        self._post[name] = fn

    def _forward(self) -> dict[str, Any]:
        with self.torch.inference_mode():
            out = self.module(*[self._inputs[t.name] for t in self.spec.inputs])
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if len(outs) != len(self.spec.outputs):
            raise ModelLoadError(
                f'model {self.spec.name!r} returned {len(outs)} outputs, the '
                f'spec lists {len(self.spec.outputs)}'
            )
        named = {t.name: o for t, o in zip(self.spec.outputs, outs, strict=True)}
        with self.torch.inference_mode():
            for name, fn in self._post.items():
                named[name] = fn(named)
        return named

    def _check_outputs(self) -> None:
        outs = self._forward()
        for t in self.spec.outputs:
            shape = tuple(outs[t.name].shape)
            if shape != t.shape:
                raise ModelLoadError(
                    f'model {self.spec.name!r}: output {t.name} has shape '
                    f'{list(shape)}, the spec says {list(t.shape)}'
                )

    @property
    def device(self) -> str:
        """'cpu' or 'cuda[:N]'."""
        return self._device

    def input(self, name: str) -> Any:
        """The static input tensor (on the backend's device, in its precision)."""
        return self._inputs[name]

    def _copy_in(self, name: str, value: Any) -> None:
        src = (
            value
            if isinstance(value, self.torch.Tensor)
            else self.torch.from_numpy(np.ascontiguousarray(value))
        )
        self._inputs[name].copy_(src, non_blocking=True)

    def prepare(self, warmup: int = 3) -> None:
        """Warm-up on the stream, then capture the CUDA graph."""
        torch = self.torch
        if self.stream is None:
            super().prepare(warmup)
            return
        self.stream.wait_stream(torch.cuda.current_stream(self._device))
        with torch.cuda.stream(self.stream):
            for _ in range(max(warmup, 3)):  # graph capture wants warmed-up kernels
                self._outputs = self._forward()
        torch.cuda.current_stream(self._device).wait_stream(self.stream)
        self.stream.synchronize()
        if self._use_graph:
            self.graph = torch.cuda.CUDAGraph()
            with torch.inference_mode(), torch.cuda.graph(self.graph, stream=self.stream):
                self._outputs = self._forward()
            self.stream.synchronize()
        self.runs = 0

    def _run(self) -> dict[str, Any]:
        return self.run_async().wait()

    def run_async(self) -> RunHandle:
        """Replays the graph (or runs eagerly) on the stream; the handle waits on an event."""
        torch = self.torch
        if self.stream is None:
            outputs = self._forward()
            return RunHandle(lambda: True, lambda: outputs)
        with torch.cuda.stream(self.stream):
            self._launch()
            event = torch.cuda.Event()
            event.record(self.stream)
        outputs = self._outputs

        def wait() -> dict[str, Any]:
            event.synchronize()
            return outputs

        return RunHandle(event.query, wait)

    def run_to_host(self, name: str) -> Any:
        """Runs and returns output ``name`` as a numpy array (float32) with one wait: on CUDA
        the copy into a page-locked host buffer is queued on the stream behind the graph, so the
        whole frame costs a single synchronisation and no allocation."""
        torch = self.torch
        if self.stream is None:
            return self.run()[name].float().numpy()
        host = self._host_out.get(name)
        event = self._host_event
        assert event is not None  # made with the stream
        with torch.cuda.stream(self.stream):
            self._launch()
            out = self._outputs[name]
            if host is None:
                host = self._host_out[name] = torch.empty(
                    out.shape, dtype=out.dtype, pin_memory=True
                )
            host.copy_(out, non_blocking=True)
            event.record(self.stream)
        event.synchronize()
        self.runs += 1
        return host.numpy().astype(np.float32, copy=False)

    def _launch(self) -> None:
        """Queues one forward pass on the current stream (graph replay when captured)."""
        if self.graph is not None:
            self.graph.replay()
        else:
            self._outputs = self._forward()

    def run(self) -> dict[str, Any]:
        """Runs synchronously (graph replay + wait on CUDA)."""
        return super().run()

    def release(self) -> None:
        """Drops the graph, module and buffers."""
        self.graph = None
        self._inputs.clear()
        self._outputs = {}

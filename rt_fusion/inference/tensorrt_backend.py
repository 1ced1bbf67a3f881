"""TensorRT backend (TensorRT 10 API), for the vehicle. Small and separate on purpose.

Deserialises a plan built by ``tools/build_engine.py`` (after checking its name against this GPU
and TensorRT version, see :mod:`rt_fusion.inference.engines`), binds every named I/O tensor with
``set_tensor_address`` to device buffers, and runs ``execute_async_v3`` on a CUDA stream created
with a priority. Host buffers are page-locked (``cudaHostAlloc``), so the copies around a run are
asynchronous DMA. Dynamic input dimensions are set from the spec's shapes through the engine's
optimisation profile. Memory and streams come from cuda-python (``cuda.bindings.runtime``).

Its tests run only where ``tensorrt`` imports (the vehicle); elsewhere they say they were skipped.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.inference.backend import Backend, RunHandle
from rt_fusion.inference.engines import check_engine, parse_engine_filename
from rt_fusion.inference.spec import ModelLoadError, ModelSpec


def _check(result: Any, what: str) -> Any:
    """cuda-python returns (error, *values): raise on error, return the values."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise ModelLoadError(f'CUDA {what} failed: {err}')
    return values[0] if len(values) == 1 else values


class TensorRTBackend(Backend):
    """TensorRT 10.

    Args:
        spec: the model spec.
        engine: the engine file (default: the spec's ``tensorrt`` artifact, hash-checked).
        stream_priority: CUDA stream priority (lower is more urgent).
        profile: optimisation profile index.
        device: ``cuda`` or ``cuda:N`` (TensorRT runs on a CUDA device only).
        threads: accepted for a uniform backend interface; TensorRT has no CPU thread pool.
    """

    name = 'tensorrt'

    def __init__(
        self,
        spec: ModelSpec,
        engine: Path | str | None = None,
        stream_priority: int = -1,
        profile: int = 0,
        device: str = 'cuda',
        threads: int = 0,
    ) -> None:
        super().__init__(spec)
        if device != 'cuda' and not device.startswith('cuda:'):
            raise ModelLoadError(f'TensorRT runs on a CUDA device, not device {device!r}')
        self._device_index = int(device.partition(':')[2] or 0)
        del threads
        try:
            import tensorrt as trt  # noqa: PLC0415 - the vehicle's runtime
            from cuda.bindings import runtime as cudart  # noqa: PLC0415
        except ImportError as err:
            raise ModelLoadError(
                f'TensorRT backend needs tensorrt and cuda-python: {err}'
            ) from err
        self.trt, self.cudart = trt, cudart
        path = Path(engine) if engine is not None else spec.artifact('tensorrt')
        if not path.is_file():
            raise ModelLoadError(f'engine {path} not found')
        _check(cudart.cudaSetDevice(self._device_index), 'cudaSetDevice')
        props = _check(
            cudart.cudaGetDeviceProperties(self._device_index), 'cudaGetDeviceProperties'
        )
        gpu = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
        check_engine(
            parse_engine_filename(path.name), gpu, (props.major, props.minor), trt.__version__
        )
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(path.read_bytes())
        if self.engine is None:
            raise ModelLoadError(
                f'TensorRT could not deserialise {path} (corrupt, or built for '
                'another GPU or TensorRT version)'
            )
        self.context = self.engine.create_execution_context()
        self.stream = _check(
            cudart.cudaStreamCreateWithPriority(cudart.cudaStreamNonBlocking, stream_priority),
            'cudaStreamCreateWithPriority',
        )
        if self.engine.num_optimization_profiles > 1:
            self.context.set_optimization_profile_async(profile, self.stream)
        self._host: dict[str, np.ndarray] = {}
        self._device_ptr: dict[str, int] = {}
        self._host_ptr: dict[str, int] = {}
        self._io = [(t, True) for t in spec.inputs] + [(t, False) for t in spec.outputs]
        names = {self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)}
        for t, is_input in self._io:
            if t.name not in names:
                raise ModelLoadError(f'engine {path.name} has no tensor {t.name!r} ({names})')
            if trt.nptype(self.engine.get_tensor_dtype(t.name)) != t.np_dtype:
                raise ModelLoadError(
                    f'engine tensor {t.name} is '
                    f'{self.engine.get_tensor_dtype(t.name)}, spec {t.dtype}'
                )
            if is_input and -1 in tuple(self.engine.get_tensor_shape(t.name)):
                self.context.set_input_shape(t.name, t.shape)  # dynamic dims: the spec's
            nbytes = int(np.prod(t.shape)) * t.np_dtype.itemsize
            host = _check(
                cudart.cudaHostAlloc(nbytes, cudart.cudaHostAllocDefault), 'cudaHostAlloc'
            )
            dev = _check(cudart.cudaMalloc(nbytes), 'cudaMalloc')
            buf = (ctypes.c_byte * nbytes).from_address(int(host))
            self._host[t.name] = np.frombuffer(buf, t.np_dtype).reshape(  # type: ignore[call-overload]
                t.shape
            )
            self._host_ptr[t.name], self._device_ptr[t.name] = int(host), int(dev)
            self.context.set_tensor_address(t.name, int(dev))
        self._done_event = _check(cudart.cudaEventCreate(), 'cudaEventCreate')

    @property
    def device(self) -> str:
        """'cuda:N'."""
        return f'cuda:{self._device_index}'

    def input(self, name: str) -> np.ndarray:
        """The page-locked host buffer of an input (copied to the device at each run)."""
        return self._host[name]

    def device_pointer(self, name: str) -> int:
        """Device address of a tensor, for producers that write there directly."""
        return self._device_ptr[name]

    def _copy_in(self, name: str, value: Any) -> None:
        np.copyto(self._host[name], value)

    def run_async(self) -> RunHandle:
        """H2D copies, execute_async_v3, D2H copies, all on the stream; then an event."""
        cudart = self.cudart
        h2d, d2h = (
            cudart.cudaMemcpyKind.cudaMemcpyHostToDevice,
            cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost,
        )
        for t, is_input in self._io:
            if is_input:
                _check(
                    cudart.cudaMemcpyAsync(
                        self._device_ptr[t.name],
                        self._host_ptr[t.name],
                        self._host[t.name].nbytes,
                        h2d,
                        self.stream,
                    ),
                    'cudaMemcpyAsync',
                )
        if not self.context.execute_async_v3(self.stream):
            raise ModelLoadError('execute_async_v3 failed')
        for t, is_input in self._io:
            if not is_input:
                _check(
                    cudart.cudaMemcpyAsync(
                        self._host_ptr[t.name],
                        self._device_ptr[t.name],
                        self._host[t.name].nbytes,
                        d2h,
                        self.stream,
                    ),
                    'cudaMemcpyAsync',
                )
        _check(cudart.cudaEventRecord(self._done_event, self.stream), 'cudaEventRecord')
        outputs = {t.name: self._host[t.name] for t, is_input in self._io if not is_input}

        def done() -> bool:
            return int(cudart.cudaEventQuery(self._done_event)[0]) == 0

        def wait() -> dict[str, Any]:
            _check(cudart.cudaEventSynchronize(self._done_event), 'cudaEventSynchronize')
            return outputs

        return RunHandle(done, wait)

    def _run(self) -> dict[str, Any]:
        return self.run_async().wait()

    def release(self) -> None:
        """Frees buffers, event and stream (idempotent)."""
        cudart = self.cudart
        for ptr in self._device_ptr.values():
            cudart.cudaFree(ptr)
        for ptr in self._host_ptr.values():
            cudart.cudaFreeHost(ptr)
        self._device_ptr.clear()
        self._host_ptr.clear()
        self._host.clear()
        if getattr(self, 'stream', None) is not None:
            cudart.cudaStreamDestroy(self.stream)
            self.stream = None

"""ONNX Runtime backend: CPU (threads from parameters) or its CUDA provider where installed.

Inputs and outputs are bound once with IO binding to pre-allocated numpy buffers, so a run
allocates nothing and copies nothing on the way in or out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.inference.backend import Backend
from rt_fusion.inference.spec import ModelLoadError, ModelSpec


class OrtBackend(Backend):
    """ONNX Runtime.

    Args:
        spec: the model spec (its ``onnx`` artifact is loaded).
        device: ``cpu`` or ``cuda`` (needs onnxruntime-gpu; falls back to an error, not to CPU).
        threads: intra-op threads (0: ONNX Runtime's default).
        inter_threads: inter-op threads (0: default).
    """

    name = 'onnxruntime'

    def __init__(
        self, spec: ModelSpec, device: str = 'cpu', threads: int = 0, inter_threads: int = 0
    ) -> None:
        super().__init__(spec)
        import onnxruntime as ort  # noqa: PLC0415 - a backend loads its runtime when chosen

        path = spec.artifact('onnx')
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = inter_threads
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers = ['CPUExecutionProvider']
        if device.startswith('cuda'):
            if 'CUDAExecutionProvider' not in ort.get_available_providers():
                raise ModelLoadError(
                    'onnxruntime has no CUDAExecutionProvider here '
                    '(install onnxruntime-gpu) - use device cpu'
                )
            providers.insert(0, 'CUDAExecutionProvider')
        try:
            self.session = ort.InferenceSession(str(path), opts, providers=providers)
        except Exception as err:  # ORT raises its own untyped errors
            raise ModelLoadError(
                f'model {spec.name!r}: ONNX Runtime cannot load {path}: {err}'
            ) from err
        self._device = 'cuda' if providers[0].startswith('CUDA') else 'cpu'
        self._check_io(spec)
        self._inputs = {t.name: np.zeros(t.shape, t.np_dtype) for t in spec.inputs}
        self._outputs = {t.name: np.zeros(t.shape, t.np_dtype) for t in spec.outputs}
        self._binding = self.session.io_binding()
        for name, buf in self._inputs.items():
            self._binding.bind_cpu_input(name, buf)
        for name, buf in self._outputs.items():
            self._binding.bind_output(name, 'cpu', 0, buf.dtype, list(buf.shape), buf.ctypes.data)

    def _check_io(self, spec: ModelSpec) -> None:
        """The ONNX graph's inputs and outputs must be the spec's."""
        types = {
            'tensor(float)': 'float32',
            'tensor(float16)': 'float16',
            'tensor(uint8)': 'uint8',
            'tensor(int64)': 'int64',
            'tensor(int32)': 'int32',
        }
        graph = {i.name: i for i in self.session.get_inputs()}
        graph |= {o.name: o for o in self.session.get_outputs()}
        for t in (*spec.inputs, *spec.outputs):
            node = graph.get(t.name)
            if node is None:
                raise ModelLoadError(
                    f'model {spec.name!r}: the ONNX graph has no tensor '
                    f'{t.name!r} (it has {sorted(graph)})'
                )
            shape = tuple(d if isinstance(d, int) else -1 for d in node.shape)
            if (
                types.get(node.type) != t.dtype
                or any(g not in (-1, s) for g, s in zip(shape, t.shape, strict=False))
                or len(shape) != len(t.shape)
            ):
                raise ModelLoadError(
                    f'model {spec.name!r}: spec says {t.name} is {t.dtype}{list(t.shape)}, the '
                    f'ONNX graph says {node.type}{list(node.shape)}'
                )

    @property
    def device(self) -> str:
        """'cpu' or 'cuda'."""
        return self._device

    def input(self, name: str) -> npt.NDArray[Any]:
        """The bound input buffer."""
        return self._inputs[name]

    def _copy_in(self, name: str, value: Any) -> None:
        np.copyto(self._inputs[name], value)

    def _run(self) -> dict[str, Any]:
        self.session.run_with_iobinding(self._binding)
        return self._outputs

    def release(self) -> None:
        """Drops the session."""
        self.__dict__.pop('session', None)

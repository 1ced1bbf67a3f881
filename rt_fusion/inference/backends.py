"""The inference backends by name: :func:`create` loads one (its runtime imported only then), so
that :mod:`.backend` (the interface) and the backends that implement it do not import each
other."""

from __future__ import annotations

from typing import Any

from rt_fusion.inference.backend import BACKENDS, Backend
from rt_fusion.inference.spec import ModelLoadError, ModelSpec

__all__ = ['BACKENDS', 'ModelLoadError', 'create']


def create(kind: str, spec: ModelSpec, **options: Any) -> Backend:
    """A loaded backend of ``kind`` for ``spec`` (options: see each backend).

    Raises:
        ModelLoadError: unknown kind, the backend's runtime missing, or the model failing to load.
    """
    if kind == 'onnxruntime':
        from rt_fusion.inference.onnxruntime_backend import OrtBackend  # noqa: PLC0415

        return OrtBackend(spec, **options)
    if kind == 'torch':
        from rt_fusion.inference.torch_backend import TorchBackend  # noqa: PLC0415

        return TorchBackend(spec, **options)
    if kind == 'tensorrt':
        from rt_fusion.inference.tensorrt_backend import TensorRTBackend  # noqa: PLC0415

        return TensorRTBackend(spec, **options)
    if kind == 'recorded':
        from rt_fusion.inference.recorded_backend import RecordedBackend  # noqa: PLC0415

        return RecordedBackend(spec, **options)
    raise ModelLoadError(f'unknown inference backend {kind!r}; one of {BACKENDS}')

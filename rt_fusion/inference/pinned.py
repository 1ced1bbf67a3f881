"""Page-lock shared-memory slots for the GPU (cudaHostRegister), so host->device copies of
camera frames run at pinned speed straight from the ring, with no staging copy.

Backends, first found wins: cuda-python (``cuda.bindings.runtime``), then PyTorch's
``torch.cuda.cudart()``. Both are optional: without a CUDA device nothing here is imported.
A read-only mapping (a ring reader) is registered with ``cudaHostRegisterReadOnly``.
"""

from __future__ import annotations

import dataclasses
import mmap
from typing import Any

from rt_fusion.core.errors import RtFusionError

HOST_REGISTER_DEFAULT = 0
HOST_REGISTER_PORTABLE = 1
HOST_REGISTER_READ_ONLY = 8


class PinnedMemoryError(RtFusionError):
    """Page-locking host memory failed (no CUDA, or the driver refused)."""


def _align(address: int, nbytes: int) -> tuple[int, int]:
    """Whole pages covering [address, address + nbytes)."""
    start = address - address % mmap.PAGESIZE
    end = address + nbytes
    end += (-end) % mmap.PAGESIZE
    return start, end - start


def _cudart() -> tuple[str, Any]:
    try:
        from cuda.bindings import runtime  # noqa: PLC0415 - optional accelerator

        return 'cuda-python', runtime
    except ImportError:
        pass
    try:
        import torch  # noqa: PLC0415 - optional accelerator
    except ImportError as err:
        raise PinnedMemoryError('neither cuda-python nor torch is installed') from err
    if not torch.cuda.is_available():
        raise PinnedMemoryError('torch sees no CUDA device')
    return 'torch', torch.cuda.cudart()


@dataclasses.dataclass
class PinnedRegion:
    """A page-locked host range; :meth:`release` (or the context manager) unregisters it."""

    address: int
    nbytes: int
    backend: str
    _rt: Any
    registered: bool = True

    def release(self) -> None:
        """cudaHostUnregister (idempotent)."""
        if self.registered:
            self.registered = False
            self._rt.cudaHostUnregister(self.address)

    def __enter__(self) -> PinnedRegion:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def register(address: int, nbytes: int, *, read_only: bool = False) -> PinnedRegion:
    """Page-locks the pages covering ``[address, address + nbytes)`` for CUDA.

    Raises:
        PinnedMemoryError: no CUDA runtime, or cudaHostRegister failed (its error is named).
    """
    backend, rt = _cudart()
    start, length = _align(address, nbytes)
    flags = HOST_REGISTER_PORTABLE | (HOST_REGISTER_READ_ONLY if read_only else 0)
    err = rt.cudaHostRegister(start, length, flags)
    if backend == 'cuda-python':
        (err,) = err  # cuda-python returns a tuple of (error,)
    if int(err) != 0:
        raise PinnedMemoryError(f'cudaHostRegister({length} bytes, flags {flags}) failed: {err}')
    return PinnedRegion(start, length, backend, rt)

"""One interface for every inference backend (ONNX Runtime, PyTorch, TensorRT).

Life of a backend::

    backend = backends.create('onnxruntime', spec, device='cpu', threads=2)  # load: buffers
    backend.prepare(warmup=10)                                       # warm-up runs
    backend.input('images')[...] = frame_tensor                      # write into its buffer
    outputs = backend.run()                                          # dict name -> array
    handle = backend.run_async(); ...; outputs = handle.wait()       # or asynchronously
    backend.last_run_ns                                              # per-run timing
    backend.release()

Inputs and outputs are pre-allocated once at load (host numpy arrays, or device tensors for the
GPU backends: :meth:`Backend.input` returns what the backend reads from). :meth:`Backend.set_input`
copies an array in after checking its shape and dtype, so a wrong input fails with a clear
error instead of a crash in the runtime.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from typing import Any

from rt_fusion.inference.spec import InputMismatchError, ModelSpec, TensorSpec

BACKENDS = ('onnxruntime', 'torch', 'tensorrt', 'recorded')  # recorded: benchmarks


class RunHandle:
    """An asynchronous run: :meth:`wait` returns the outputs (raising what the run raised)."""

    def __init__(self, done: Callable[[], bool], wait: Callable[[], dict[str, Any]]) -> None:
        self._done = done
        self._wait = wait

    def done(self) -> bool:
        """True once the outputs are ready."""
        return self._done()

    def wait(self) -> dict[str, Any]:
        """Blocks until the run finishes; returns the outputs."""
        return self._wait()


class Backend(abc.ABC):
    """What every backend offers; see the module docstring."""

    name = 'abstract'

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.last_run_ns = 0
        self.runs = 0
        self._inputs_by_name: dict[str, TensorSpec] = {t.name: t for t in spec.inputs}

    @property
    @abc.abstractmethod
    def device(self) -> str:
        """Where the model runs: 'cpu', 'cuda:0', ..."""

    @abc.abstractmethod
    def input(self, name: str) -> Any:
        """The pre-allocated buffer the model reads input ``name`` from."""

    @abc.abstractmethod
    def _run(self) -> dict[str, Any]:
        """Runs once on the current input buffers; returns the output buffers."""

    def set_input(self, name: str, value: Any) -> None:
        """Copies ``value`` into input ``name`` after checking its shape and dtype."""
        spec = self._inputs_by_name.get(name)
        if spec is None:
            raise InputMismatchError(
                f'model {self.spec.name!r} has no input {name!r} (inputs: '
                f'{sorted(self._inputs_by_name)})'
            )
        spec.check(value, f'model {self.spec.name!r}')
        self._copy_in(name, value)

    @abc.abstractmethod
    def _copy_in(self, name: str, value: Any) -> None:
        """Copies a checked value into the input buffer."""

    def run(self) -> dict[str, Any]:
        """Runs synchronously; records the duration in ``last_run_ns``."""
        t0 = time.perf_counter_ns()
        out = self._run()
        self.last_run_ns = time.perf_counter_ns() - t0
        self.runs += 1
        return out

    def run_async(self) -> RunHandle:
        """Starts a run; the default runs it on a worker thread (GPU backends use streams)."""
        result: dict[str, Any] = {}
        error: list[BaseException] = []
        finished = threading.Event()

        def work() -> None:
            try:
                result.update(self.run())
            except BaseException as err:  # noqa: BLE001 - re-raised by wait()
                error.append(err)
            finally:
                finished.set()

        threading.Thread(target=work, name=f'{self.name}-run', daemon=True).start()

        def wait() -> dict[str, Any]:
            finished.wait()
            if error:
                raise error[0]
            return result

        return RunHandle(finished.is_set, wait)

    def prepare(self, warmup: int = 3) -> None:
        """Warm-up runs (allocator, kernels, autotuning) before timing matters."""
        for _ in range(warmup):
            self.run()
        self.runs = 0

    def release(self) -> None:  # noqa: B027 - optional for backends with nothing to free
        """Frees what the backend holds (idempotent)."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

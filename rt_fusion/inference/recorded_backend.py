"""Network outputs recorded once, replayed in order: the ``recorded`` backend.

A benchmark of the fusion node as deployed (``tools/bench_fusion_node.py``) needs its real
decode, tracking and publishing on real detector outputs, but not the network's cost (nor an
accelerator): :func:`record` runs a real backend on a scenario's frames in the order the node
asks for them and keeps every output; :class:`RecordedBackend` gives them back, one per run, in
that order, with no input to fill (:attr:`RecordedBackend.replays`: the runner skips the
preprocessing too). Each run is keyed by a fingerprint of the view it was made for
(:func:`fingerprint`: the runner hands each view to ``select`` first), so a frame the node does
not infer (its ``infer_period_s``, a frame behind) takes no other frame's output.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from rt_fusion.inference.backend import Backend
from rt_fusion.inference.spec import ModelLoadError, ModelSpec

KEYS = '__keys__'  # the recording's array of view fingerprints, one per run


def fingerprint(image: npt.NDArray[Any]) -> int:
    """A view's fingerprint: CRC-32 of a sparse grid of its pixels (~3,000 bytes of a 1080p
    frame, some microseconds), its shape included."""
    h, w = image.shape[:2]
    grid = np.ascontiguousarray(image[:: max(1, h // 40), :: max(1, w // 40)])
    return zlib.crc32(grid.tobytes(), zlib.crc32(repr(image.shape).encode()))


class RecordedBackend(Backend):
    """Outputs of ``recording`` (an ``.npz`` of one ``[runs, ...]`` array per output name,
    and the views' fingerprints) replayed: the run of the view given to :meth:`select`, else
    the next in order."""

    name = 'recorded'
    replays = True  # no input is read: FrameRunner leaves the preprocessing out

    def __init__(self, spec: ModelSpec, recording: str = '', **_options: Any) -> None:
        super().__init__(spec)
        if not recording:
            raise ModelLoadError('backend recorded: no recording (recorded_outputs) given')
        try:
            with np.load(Path(recording)) as data:
                self.outputs = {t.name: np.ascontiguousarray(data[t.name]) for t in spec.outputs}
                keys = data[KEYS] if KEYS in data.files else np.zeros(0, np.int64)
        except (OSError, KeyError, ValueError) as err:
            raise ModelLoadError(f'backend recorded: {recording}: {err}') from err
        self.index = {int(k): i for i, k in enumerate(keys)}
        sizes = {len(v) for v in self.outputs.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise ModelLoadError(f'backend recorded: {recording}: outputs of unequal or no runs')
        self.count = sizes.pop()
        self.next = 0
        self.missed = 0  # views selected that the recording has not: the next run in order
        self._inputs = {t.name: np.zeros(t.shape, np.float32) for t in spec.inputs}

    @property
    def device(self) -> str:
        return 'cpu'

    def input(self, name: str) -> Any:
        return self._inputs[name]

    def _copy_in(self, name: str, value: Any) -> None:
        return None  # nothing is read

    def prepare(self, warmup: int = 3) -> None:
        """No warm-up: it would take recorded runs out of their order."""
        self.runs = 0

    def select(self, view: npt.NDArray[Any]) -> None:
        """The next run gives the output recorded for ``view`` (when the recording has it)."""
        i = self.index.get(fingerprint(view))
        if i is not None:
            self.next = i
        else:
            self.missed += 1

    def _run(self) -> dict[str, Any]:
        i = self.next % self.count
        self.next += 1
        return {name: out[i] for name, out in self.outputs.items()}


class Recorder:
    """Wraps a loaded backend and keeps a copy of every output it gives, keyed by the view the
    runner selected for it (:meth:`save`)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.kept: dict[str, list[np.ndarray]] = {}
        self.keys: list[int] = []
        inner = backend._run

        def select(view: npt.NDArray[Any]) -> None:
            self.keys.append(fingerprint(view))

        backend.select = select  # type: ignore[attr-defined]

        def run() -> dict[str, Any]:
            out = inner()
            for name, value in out.items():
                array = value if isinstance(value, np.ndarray) else value.float().cpu().numpy()
                self.kept.setdefault(name, []).append(np.array(array, copy=True))
            return out

        backend._run = run  # type: ignore[method-assign]

    def save(self, path: Path) -> int:
        """Writes the outputs kept (compressed ``.npz``); how many runs."""
        runs = len(next(iter(self.kept.values()), []))
        if len(self.keys) != runs:
            raise ValueError(f'{len(self.keys)} views selected for {runs} runs')
        arrays: dict[str, Any] = {k: np.stack(v) for k, v in self.kept.items()}
        arrays[KEYS] = np.array(self.keys, np.int64)
        cast(Any, np.savez_compressed)(path, **arrays)
        return runs

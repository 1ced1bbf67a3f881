"""Model specs: the YAML beside each model in ``models/`` that says what the model expects.

Example (``models/rtf_testnet.yaml``)::

    name: rtf_testnet
    provenance: tools/make_test_model.py --seed 7 (random weights, for tests and benchmarks)
    precision: fp32            # what the backends should run: fp32 | fp16 | int8
    artifacts:                 # files beside the spec, with their SHA-256
      onnx: {file: rtf_testnet.onnx, sha256: ...}
      torchscript: {file: rtf_testnet.ts, sha256: ...}
    inputs:
      - {name: images, shape: [1, 3, 384, 640], dtype: float32, layout: NCHW}
    outputs:
      - {name: heads, shape: [1, 8, 24, 40], dtype: float32, layout: NCHW}
    preprocessing:
      resize: [384, 640]       # [height, width] of the network input
      channel_order: rgb       # of the network input; frames say theirs
      scale: 0.00392156862745098  # 1/255
      mean: [0.485, 0.456, 0.406]
      std: [0.229, 0.224, 0.225]
    decoder:                   # optional: the head's format (rt_fusion.core.perception.decoders)
      type: centernet          # centernet | yolov8 | yolox
      classes: [car, truck, pedestrian, bicycle, motorcycle, bus]
      stride: 4
      depth: log
      heading: true

A user's own detector with one of these heads drops in through its spec alone.

Every artifact's hash is checked at load, so a corrupt or swapped file fails with a clear error
instead of producing wrong outputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.perception.decoders import DecoderError, DecoderSpec

DTYPES = {'float32', 'float16', 'uint8', 'int8', 'int32', 'int64'}
PRECISIONS = ('fp32', 'fp16', 'int8')
#: PyYAML's safe loader, in C where PyYAML has libyaml (10x faster: 0.07 s of a fusion start).
SAFE_LOADER: Any = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)


class ModelError(RtFusionError):
    """A model cannot be loaded or run as its spec says."""


class ModelLoadError(ModelError):
    """Missing or corrupt model file, bad spec, or an engine built for another GPU/runtime."""


class InputMismatchError(ModelError):
    """An input of the wrong name, shape or dtype was given to run."""


@dataclasses.dataclass(frozen=True, slots=True)
class TensorSpec:
    """One input or output tensor."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    layout: str = ''

    @property
    def np_dtype(self) -> np.dtype[Any]:
        """The numpy dtype."""
        return np.dtype(self.dtype)

    def check(self, array: Any, where: str) -> None:
        """Raises InputMismatchError unless ``array`` has this shape and dtype."""
        shape = tuple(int(d) for d in array.shape)
        dtype = str(array.dtype).removeprefix('torch.')
        if shape != self.shape or dtype != self.dtype:
            raise InputMismatchError(
                f'{where}: input {self.name!r} must be {self.dtype}{list(self.shape)}, '
                f'got {dtype}{list(shape)}'
            )


@dataclasses.dataclass(frozen=True, slots=True)
class Preprocessing:
    """How a camera frame becomes the network input."""

    resize: tuple[int, int]  # (height, width)
    channel_order: str = 'rgb'
    scale: float = 1.0 / 255.0
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)


@dataclasses.dataclass(frozen=True, slots=True)
class Artifact:
    """A model file and its expected SHA-256."""

    path: Path
    sha256: str


@dataclasses.dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model's spec (see the module docstring)."""

    name: str
    path: Path  # the spec file
    precision: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    preprocessing: Preprocessing | None
    artifacts: dict[str, Artifact]
    provenance: str = ''
    decoder: DecoderSpec | None = None  # the head's format (None: raw outputs only)

    def artifact(self, kind: str) -> Path:
        """The path of artifact ``kind`` after checking its existence and hash."""
        art = self.artifacts.get(kind)
        if art is None:
            raise ModelLoadError(f'model {self.name!r}: no {kind!r} artifact in {self.path}')
        verify_file(art.path, art.sha256, self.name)
        return art.path


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with path.open('rb') as fh:
        for block in iter(lambda: fh.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: Path, sha256: str, model: str) -> None:
    """Raises ModelLoadError if ``path`` is missing or its hash differs."""
    if not path.is_file():
        raise ModelLoadError(f'model {model!r}: file {path} not found')
    actual = sha256_file(path)
    if actual != sha256:
        raise ModelLoadError(
            f'model {model!r}: {path.name} has SHA-256 {actual[:16]}..., the spec says '
            f'{sha256[:16]}... (corrupt, or replaced without updating the spec)'
        )


def _tensors(raw: Any, what: str, path: Path) -> tuple[TensorSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise ModelLoadError(f'{path}: {what} must be a non-empty list')
    out = []
    for item in raw:
        try:
            t = TensorSpec(
                str(item['name']),
                tuple(int(d) for d in item['shape']),
                str(item['dtype']),
                str(item.get('layout', '')),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ModelLoadError(f'{path}: bad {what} entry {item!r}: {err}') from err
        if t.dtype not in DTYPES:
            raise ModelLoadError(f'{path}: {what} {t.name!r} has unknown dtype {t.dtype!r}')
        out.append(t)
    return tuple(out)


def load_spec(path: Path | str) -> ModelSpec:
    """Reads and checks a model spec (not the artifacts' hashes: see ModelSpec.artifact).

    Raises:
        ModelLoadError: the file is missing, not YAML, or lacks or misstates a field.
    """
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except FileNotFoundError as err:
        raise ModelLoadError(f'model spec {path} not found') from err
    except yaml.YAMLError as err:
        raise ModelLoadError(f'model spec {path} is not valid YAML: {err}') from err
    if not isinstance(raw, dict):
        raise ModelLoadError(f'model spec {path} is not a mapping')
    for key in ('name', 'inputs', 'outputs', 'artifacts'):
        if key not in raw:
            raise ModelLoadError(f'model spec {path}: missing {key!r}')
    precision = str(raw.get('precision', 'fp32'))
    if precision not in PRECISIONS:
        raise ModelLoadError(f'model spec {path}: precision {precision!r} not in {PRECISIONS}')
    artifacts = {}
    for kind, art in dict(raw['artifacts']).items():
        try:
            artifacts[str(kind)] = Artifact(path.parent / str(art['file']), str(art['sha256']))
        except (KeyError, TypeError) as err:
            raise ModelLoadError(
                f'model spec {path}: artifact {kind!r} needs file and sha256'
            ) from err
    pre = raw.get('preprocessing')
    preprocessing = None
    if pre is not None:
        try:
            preprocessing = Preprocessing(
                resize=(int(pre['resize'][0]), int(pre['resize'][1])),
                channel_order=str(pre.get('channel_order', 'rgb')),
                scale=float(pre.get('scale', 1.0 / 255.0)),
                mean=tuple(float(v) for v in pre.get('mean', (0.0, 0.0, 0.0))),  # type: ignore[arg-type]
                std=tuple(float(v) for v in pre.get('std', (1.0, 1.0, 1.0))),  # type: ignore[arg-type]
            )
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise ModelLoadError(f'model spec {path}: bad preprocessing: {err}') from err
        if preprocessing.channel_order not in ('rgb', 'bgr'):
            raise ModelLoadError(f'model spec {path}: channel_order must be rgb or bgr')
    decoder = None
    if raw.get('decoder') is not None:
        if not isinstance(raw['decoder'], dict):
            raise ModelLoadError(f'model spec {path}: decoder must be a mapping')
        try:
            decoder = DecoderSpec.from_dict(raw['decoder'], f'model spec {path}')
        except (DecoderError, TypeError, ValueError) as err:
            raise ModelLoadError(str(err)) from err
        if decoder.output >= len(raw['outputs']):
            raise ModelLoadError(
                f'model spec {path}: decoder.output {decoder.output} out of range'
            )
    return ModelSpec(
        name=str(raw['name']),
        path=path,
        precision=precision,
        inputs=_tensors(raw['inputs'], 'inputs', path),
        outputs=_tensors(raw['outputs'], 'outputs', path),
        preprocessing=preprocessing,
        artifacts=artifacts,
        provenance=str(raw.get('provenance', '')),
        decoder=decoder,
    )

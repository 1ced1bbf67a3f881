"""Hearing models: a spec with an ``audio:`` section, run on ONNX Runtime as the detector's
``classify`` (:mod:`rt_fusion.core.perception.hearing` is the ROS- and runtime-free part)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.perception.hearing import AUDIO_CLASSES, MelConfig
from rt_fusion.inference.spec import SAFE_LOADER, ModelLoadError, ModelSpec, load_spec


@dataclasses.dataclass(frozen=True)
class HearingModel:
    """A hearing model spec: the network, its feature layout and classes."""

    spec: ModelSpec
    mel: MelConfig
    classes: tuple[str, ...]


def load_hearing_model(path: Path | str) -> HearingModel:
    """The spec (``load_spec``) plus its ``audio:`` section.

    Raises:
        ModelError: the spec or its artifacts are bad, or it has no ``audio:`` section.
    """
    import yaml  # noqa: PLC0415

    spec = load_spec(path)
    with open(path) as fh:
        raw = yaml.load(fh, Loader=SAFE_LOADER)
    audio = raw.get('audio') if isinstance(raw, dict) else None
    if not isinstance(audio, dict):
        raise ModelLoadError(f'model spec {path}: no audio: section (not a hearing model)')
    try:
        mel = MelConfig.from_dict(audio)
    except (ParameterError, TypeError) as err:
        raise ModelLoadError(f'model spec {path}: bad audio section: {err}') from err
    classes = tuple(str(c) for c in audio.get('classes', AUDIO_CLASSES))
    shape = spec.inputs[0].shape
    if tuple(shape) != (1, 1, mel.n_mels, mel.context_frames):
        raise ModelLoadError(
            f'model spec {path}: input {list(shape)} does not match the audio section '
            f'(1, 1, {mel.n_mels}, {mel.context_frames})'
        )
    return HearingModel(spec, mel, classes)


def onnx_classifier(
    model: HearingModel, threads: int = 1
) -> Callable[[npt.NDArray[np.float32]], npt.NDArray[Any]]:
    """The model on ONNX Runtime (CPU, ``threads`` threads) as a ``classify`` callable."""
    from rt_fusion.inference import backends  # noqa: PLC0415

    be = backends.create('onnxruntime', model.spec, device='cpu', threads=threads)
    be.prepare(warmup=1)  # the arena allocated; more runs only steady a benchmark's timing
    name = model.spec.inputs[0].name
    out_name = model.spec.outputs[0].name

    def classify(x: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
        be.set_input(name, x)
        return np.asarray(be.run()[out_name])

    return classify

"""TensorRT engine files: names that say what they were built for, and the check at load.

A serialised TensorRT engine runs only on the GPU architecture and TensorRT version it was built
for (unless built version- or hardware-compatible). rt_fusion puts both in the file name,

    <model>.<gpu>.sm<major><minor>.trt<major>.<minor>.<patch>.<precision>[.vc][.hc].engine

e.g. ``rtf_testnet.nvidia-jetson-agx-orin.sm87.trt10.3.0.fp16.engine``, and refuses to load an
engine whose name does not match the GPU and TensorRT it is about to run on, so a wrong engine is
never loaded silently (TensorRT itself may only fail deep inside deserialisation, or not at all
for a same-architecture GPU with different tactics).
"""

from __future__ import annotations

import dataclasses
import re

from rt_fusion.inference.spec import ModelLoadError

_NAME_RE = re.compile(
    r'^(?P<model>[A-Za-z0-9_-]+)\.(?P<gpu>[a-z0-9-]+)\.sm(?P<cc>\d+)\.trt(?P<trt>\d+\.\d+\.\d+)'
    r'\.(?P<precision>fp32|fp16|int8)(?P<vc>\.vc)?(?P<hc>\.hc)?\.engine$'
)


def gpu_slug(gpu_name: str) -> str:
    """'NVIDIA Jetson AGX Orin' -> 'nvidia-jetson-agx-orin'."""
    return re.sub(r'[^a-z0-9]+', '-', gpu_name.lower()).strip('-')


def short_version(version: str) -> str:
    """TensorRT version to major.minor.patch ('10.3.0.30' -> '10.3.0')."""
    parts = [*version.split('.'), '0', '0'][:3]
    return '.'.join(parts)


@dataclasses.dataclass(frozen=True, slots=True)
class EngineTag:
    """What an engine file was built for."""

    model: str
    gpu: str  # slug
    compute_capability: int  # e.g. 87 for sm_87
    trt_version: str  # major.minor.patch
    precision: str
    version_compatible: bool = False
    hardware_compatible: bool = False

    def filename(self) -> str:
        """The engine's file name."""
        return (
            f'{self.model}.{self.gpu}.sm{self.compute_capability}.trt{self.trt_version}.'
            f'{self.precision}{".vc" if self.version_compatible else ""}'
            f'{".hc" if self.hardware_compatible else ""}.engine'
        )


def engine_tag(
    model: str,
    gpu_name: str,
    capability: tuple[int, int],
    trt_version: str,
    precision: str,
    *,
    version_compatible: bool = False,
    hardware_compatible: bool = False,
) -> EngineTag:
    """The tag of an engine about to be built here."""
    return EngineTag(
        model,
        gpu_slug(gpu_name),
        capability[0] * 10 + capability[1],
        short_version(trt_version),
        precision,
        version_compatible,
        hardware_compatible,
    )


def parse_engine_filename(name: str) -> EngineTag:
    """The tag in an engine file name.

    Raises:
        ModelLoadError: the name does not follow the convention.
    """
    m = _NAME_RE.match(name)
    if m is None:
        raise ModelLoadError(
            f'engine file name {name!r} does not say what it was built for; expected '
            '<model>.<gpu>.sm<cc>.trt<x.y.z>.<fp32|fp16|int8>[.vc][.hc].engine '
            '(tools/build_engine.py names engines so)'
        )
    return EngineTag(
        m['model'],
        m['gpu'],
        int(m['cc']),
        m['trt'],
        m['precision'],
        m['vc'] is not None,
        m['hc'] is not None,
    )


def check_engine(
    tag: EngineTag, gpu_name: str, capability: tuple[int, int], trt_version: str
) -> None:
    """Raises ModelLoadError unless an engine of ``tag`` may run on this GPU and TensorRT.

    Version-compatible engines run on the same or a newer TensorRT major; hardware-compatible
    ones on any GPU of compute capability 8.0 or newer (Ampere+).
    """
    here_cc = capability[0] * 10 + capability[1]
    here_trt = short_version(trt_version)
    if tag.hardware_compatible:
        if here_cc < 80:
            raise ModelLoadError(
                f'engine {tag.filename()} is hardware-compatible for Ampere+ '
                f'(sm80+), this GPU is sm{here_cc}'
            )
    elif tag.gpu != gpu_slug(gpu_name) or tag.compute_capability != here_cc:
        raise ModelLoadError(
            f'engine {tag.filename()} was built for {tag.gpu} sm'
            f'{tag.compute_capability}, this GPU is {gpu_slug(gpu_name)} sm'
            f'{here_cc}: rebuild it here with tools/build_engine.py'
        )
    if tag.version_compatible:
        if int(here_trt.split('.')[0]) < int(tag.trt_version.split('.')[0]):
            raise ModelLoadError(
                f'engine {tag.filename()} needs TensorRT '
                f'{tag.trt_version.split(".")[0]}+, this is {here_trt}'
            )
    elif tag.trt_version != here_trt:
        raise ModelLoadError(
            f'engine {tag.filename()} was built with TensorRT '
            f'{tag.trt_version}, this is {here_trt}: rebuild it here'
        )

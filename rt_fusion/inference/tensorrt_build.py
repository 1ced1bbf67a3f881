"""A TensorRT engine built from a model's ONNX export by a :class:`BuildPlan` (decided, and
unit-tested, without TensorRT: ``tools/build_engine.py`` makes the plan from its command line),
with an INT8 calibrator over recorded camera frames. Runs where TensorRT 10 is installed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rt_fusion.core.errors import RtFusionError
from rt_fusion.inference.spec import ModelSpec, Preprocessing


class EngineBuildError(RtFusionError):
    """TensorRT refused the network or the build."""


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """Everything a build needs, decided before TensorRT is touched (unit-tested)."""

    spec: ModelSpec
    onnx: Path
    precision: str
    output: Path
    workspace_mib: int
    timing_cache: Path | None
    calib_bag: Path | None
    calib_topic: str
    calib_frames: int
    calib_batch: int
    calib_cache: Path | None
    version_compatible: bool
    hardware_compatible: bool
    shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


def build(plan: BuildPlan) -> None:  # pragma: no cover - runs where TensorRT is installed
    """Runs the TensorRT 10 builder for ``plan`` and writes the engine."""
    import tensorrt as trt  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(plan.onnx.read_bytes()):
        errors = '; '.join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineBuildError(f'TensorRT cannot parse {plan.onnx}: {errors}')
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, plan.workspace_mib << 20)
    if plan.precision in ('fp16', 'int8'):
        config.set_flag(trt.BuilderFlag.FP16)
    if plan.precision == 'int8':
        config.set_flag(trt.BuilderFlag.INT8)
        config.int8_calibrator = _calibrator(trt, plan)
    if plan.version_compatible:
        config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
    if plan.hardware_compatible:
        config.hardware_compatibility_level = trt.HardwareCompatibilityLevel.AMPERE_PLUS
    profile = builder.create_optimization_profile()
    for name, (lo, opt, hi) in plan.shapes.items():
        profile.set_shape(name, lo, opt, hi)
    config.add_optimization_profile(profile)
    cache_bytes = (
        plan.timing_cache.read_bytes()
        if plan.timing_cache and plan.timing_cache.is_file()
        else b''
    )
    config.set_timing_cache(config.create_timing_cache(cache_bytes), ignore_mismatch=False)

    with Progress(transient=False) as progress:

        class Monitor(trt.IProgressMonitor):  # type: ignore[misc]
            def __init__(self) -> None:
                trt.IProgressMonitor.__init__(self)
                self.tasks: dict[str, Any] = {}

            def phase_start(self, name: str, parent: str | None, steps: int) -> None:
                self.tasks[name] = progress.add_task(name, total=steps)

            def step_complete(self, name: str, step: int) -> bool:
                progress.update(self.tasks[name], completed=step + 1)
                return True

            def phase_finish(self, name: str) -> None:
                progress.remove_task(self.tasks.pop(name))

        config.progress_monitor = Monitor()
        engine = builder.build_serialized_network(network, config)
    if engine is None:
        raise EngineBuildError('TensorRT could not build the engine (see its log)')
    plan.output.write_bytes(bytes(engine))
    if plan.timing_cache is not None:
        plan.timing_cache.write_bytes(bytes(config.get_timing_cache().serialize()))
    print(f'wrote {plan.output} ({plan.output.stat().st_size / 1e6:.1f} MB)')


def _calibrator(trt: Any, plan: BuildPlan) -> Any:  # pragma: no cover - TensorRT only
    """An IInt8EntropyCalibrator2 over the calibration frames of the plan."""
    import numpy as np  # noqa: PLC0415
    from cuda.bindings import runtime as cudart  # noqa: PLC0415

    from rt_fusion.inference.calibration import CalibrationFrames  # noqa: PLC0415

    if plan.spec.preprocessing is None:
        raise EngineBuildError(f'INT8 needs preprocessing in {plan.spec.path}')
    pre: Preprocessing = plan.spec.preprocessing
    name = plan.spec.inputs[0].name

    class Calibrator(trt.IInt8EntropyCalibrator2):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.batches = (
                iter(
                    CalibrationFrames(
                        plan.calib_bag,
                        plan.calib_topic,
                        pre,
                        batch_size=plan.calib_batch,
                        max_frames=plan.calib_frames,
                    )
                )
                if plan.calib_bag
                else iter(())
            )
            h, w = pre.resize
            self.nbytes = plan.calib_batch * 3 * h * w * 4
            self.device = cudart.cudaMalloc(self.nbytes)[1]

        def get_batch_size(self) -> int:
            return plan.calib_batch

        def get_batch(self, names: list[str]) -> list[int] | None:
            batch = next(self.batches, None)
            if batch is None:
                return None
            batch = np.ascontiguousarray(batch)
            cudart.cudaMemcpy(
                self.device,
                batch.ctypes.data,
                self.nbytes,
                cudart.cudaMemcpyKind.cudaMemcpyHostToDevice,
            )
            return [int(self.device) if n == name else 0 for n in names]

        def read_calibration_cache(self) -> bytes | None:
            cache = plan.calib_cache
            return cache.read_bytes() if cache is not None and cache.is_file() else None

        def write_calibration_cache(self, cache: bytes) -> None:
            if plan.calib_cache is not None:
                plan.calib_cache.write_bytes(bytes(cache))

    return Calibrator()

#!/usr/bin/env python3
"""ONNX -> TensorRT engine, on the vehicle (TensorRT 10). Takes minutes on an Orin; shows progress.

Vehicle workflow (JetPack 6 with TensorRT 10, on the Orin itself, because an engine runs only on
the GPU and TensorRT it was built for):

  1. record a drive with the camera:   ros2 bag record -s mcap /camera/image ...
  2. build, FP16:    python3 tools/build_engine.py models/rtf_testnet.yaml --fp16
     or INT8, calibrated on the recording (cache reused next time):
                     python3 tools/build_engine.py models/rtf_testnet.yaml --int8 \\
                         --calib-bag ~/bags/drive1 --calib-topic /camera/image \\
                         --calib-frames 500 --calib-cache models/rtf_testnet.calib
  3. the engine is written beside the spec, named for what it was built for, e.g.
     models/rtf_testnet.nvidia-jetson-agx-orin.sm87.trt10.3.0.fp16.engine
     and the fusion node's `engine` parameter points at it. An engine whose name does not match
     the GPU or TensorRT version is refused at load (rebuild it there).

Options: --timing-cache FILE (faster rebuilds; saved after the build), --version-compatible
(runs on later TensorRT 10.x), --hardware-compatible (any Ampere+ GPU, slower), --workspace MiB,
--min/--opt/--max-shape for dynamic inputs (default: the spec's shape), --dry-run (print the plan
of the build and the engine name, build nothing; works without TensorRT).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rt_fusion.inference import tensorrt_build
from rt_fusion.inference.engines import EngineTag, engine_tag
from rt_fusion.inference.spec import load_spec
from rt_fusion.inference.tensorrt_build import BuildPlan
from rt_fusion.ros import graph


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """'images:1x3x384x640' -> ('images', (1, 3, 384, 640))."""
    name, _, dims = text.partition(':')
    if not name or not dims:
        raise argparse.ArgumentTypeError(f'shape {text!r}: expected NAME:DxDxD')
    try:
        return name, tuple(int(d) for d in dims.lower().split('x'))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f'shape {text!r}: dimensions must be integers') from err


def make_parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument('spec', type=Path, help='model spec YAML (its onnx artifact is built)')
    prec = p.add_mutually_exclusive_group()
    prec.add_argument('--fp16', action='store_true', help='allow FP16 kernels')
    prec.add_argument('--int8', action='store_true', help='INT8 with entropy calibration')
    p.add_argument('--output', type=Path, help='engine file (default: named, beside the spec)')
    p.add_argument('--workspace', type=int, default=2048, help='builder workspace [MiB]')
    p.add_argument('--timing-cache', type=Path, help='read and update this timing cache')
    p.add_argument('--calib-bag', type=Path, help='rosbag2 with camera frames (INT8)')
    p.add_argument(
        '--calib-topic', default=graph.bag_topic(graph.CAMERA_TOPIC), help='image topic in the bag'
    )
    p.add_argument('--calib-frames', type=int, default=500, help='frames to calibrate on')
    p.add_argument('--calib-batch', type=int, default=8, help='calibration batch size')
    p.add_argument('--calib-cache', type=Path, help='calibration cache (read if present)')
    p.add_argument('--version-compatible', action='store_true')
    p.add_argument('--hardware-compatible', action='store_true')
    for bound in ('min', 'opt', 'max'):
        p.add_argument(
            f'--{bound}-shape',
            type=parse_shape,
            action='append',
            default=[],
            metavar='NAME:DxD...',
            help=f'{bound} shape of a dynamic input',
        )
    p.add_argument('--gpu-name', help='name the engine for this GPU (default: ask CUDA)')
    p.add_argument('--compute-capability', help='e.g. 8.7 (default: ask CUDA)')
    p.add_argument('--trt-version', help='default: the installed TensorRT')
    p.add_argument('--dry-run', action='store_true', help='print the plan, build nothing')
    return p


def make_plan(args: argparse.Namespace, tag: EngineTag) -> BuildPlan:
    """Checks the arguments against the spec and decides the build."""
    spec = load_spec(args.spec)
    onnx = spec.artifact('onnx')
    precision = 'int8' if args.int8 else 'fp16' if args.fp16 else 'fp32'
    if (
        args.int8
        and args.calib_bag is None
        and (args.calib_cache is None or not args.calib_cache.is_file())
    ):
        raise SystemExit('build_engine: --int8 needs --calib-bag or an existing --calib-cache')
    shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
    by_bound = {b: dict(getattr(args, f'{b}_shape')) for b in ('min', 'opt', 'max')}
    for t in spec.inputs:
        lo = by_bound['min'].get(t.name, t.shape)
        opt = by_bound['opt'].get(t.name, t.shape)
        hi = by_bound['max'].get(t.name, t.shape)
        if not (len(lo) == len(opt) == len(hi) == len(t.shape)):
            raise SystemExit(f'build_engine: shapes of {t.name} must have {len(t.shape)} dims')
        if any(a > b for a, b in zip(lo, opt, strict=True)) or any(
            a > b for a, b in zip(opt, hi, strict=True)
        ):
            raise SystemExit(f'build_engine: {t.name}: need min <= opt <= max in every dim')
        shapes[t.name] = (lo, opt, hi)
    unknown = set().union(*by_bound.values()) - {t.name for t in spec.inputs}
    if unknown:
        raise SystemExit(f'build_engine: no input {sorted(unknown)} in {spec.name}')
    output = args.output or args.spec.parent / tag.filename()
    return BuildPlan(
        spec,
        onnx,
        precision,
        output,
        args.workspace,
        args.timing_cache,
        args.calib_bag,
        args.calib_topic,
        args.calib_frames,
        args.calib_batch,
        args.calib_cache,
        args.version_compatible,
        args.hardware_compatible,
        shapes,
    )


def _gpu(args: argparse.Namespace) -> tuple[str, tuple[int, int], str]:
    if args.gpu_name and args.compute_capability and args.trt_version:
        major, minor = (int(v) for v in args.compute_capability.split('.'))
        return args.gpu_name, (major, minor), args.trt_version
    import tensorrt as trt  # noqa: PLC0415 - the vehicle's runtime
    from cuda.bindings import runtime as cudart  # noqa: PLC0415

    err, props = cudart.cudaGetDeviceProperties(0)
    if int(err) != 0:
        raise SystemExit(f'build_engine: no CUDA device: {err}')
    name = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
    return args.gpu_name or name, (props.major, props.minor), args.trt_version or trt.__version__


def main(argv: list[str] | None = None) -> int:
    """Builds the engine (or prints the plan)."""
    args = make_parser().parse_args(argv)
    gpu, cc, trt_version = _gpu(args)
    precision = 'int8' if args.int8 else 'fp16' if args.fp16 else 'fp32'
    spec = load_spec(args.spec)
    tag = engine_tag(
        spec.name,
        gpu,
        cc,
        trt_version,
        precision,
        version_compatible=args.version_compatible,
        hardware_compatible=args.hardware_compatible,
    )
    plan = make_plan(args, tag)
    print(
        f'engine: {plan.output}\nprecision: {plan.precision}, workspace {plan.workspace_mib} '
        f'MiB, shapes {plan.shapes}'
    )
    if args.dry_run:
        return 0
    try:
        tensorrt_build.build(plan)
    except tensorrt_build.EngineBuildError as err:
        raise SystemExit(f'build_engine: {err}') from err
    return 0


if __name__ == '__main__':
    sys.exit(main())

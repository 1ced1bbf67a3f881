"""Inference: model specs, backends (ONNX Runtime, PyTorch CPU here; TensorRT where installed),
preprocessing, engine naming, the engine builder's plan and its calibration reader."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from rt_fusion.inference import backends
from rt_fusion.inference.calibration import CalibrationFrames
from rt_fusion.inference.engines import (
    check_engine,
    engine_tag,
    parse_engine_filename,
)
from rt_fusion.inference.preprocess import CpuPreprocessor
from rt_fusion.inference.spec import (
    InputMismatchError,
    ModelLoadError,
    Preprocessing,
    load_spec,
)
from tests.conftest import ROOT, shared_file

SPEC = ROOT / 'models' / 'rtf_testnet.yaml'


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A copy of models/ that a test may damage."""
    for f in (ROOT / 'models').glob('rtf_testnet.*'):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def test_spec_describes_the_test_model() -> None:
    spec = load_spec(SPEC)
    assert spec.inputs[0].shape == (1, 3, 384, 640)
    assert spec.outputs[0].shape == (1, 8, 24, 40)
    assert spec.preprocessing is not None and spec.preprocessing.resize == (384, 640)
    assert spec.artifact('onnx').is_file()


def test_missing_model_file_is_a_clear_load_error(model_dir: Path) -> None:
    (model_dir / 'rtf_testnet.onnx').unlink()
    with pytest.raises(ModelLoadError, match=r'rtf_testnet\.onnx not found'):
        backends.create('onnxruntime', load_spec(model_dir / 'rtf_testnet.yaml'))


def test_corrupt_model_file_fails_its_hash(model_dir: Path) -> None:
    path = model_dir / 'rtf_testnet.onnx'
    data = bytearray(path.read_bytes())
    data[1000] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match='SHA-256'):
        backends.create('onnxruntime', load_spec(model_dir / 'rtf_testnet.yaml'))


def test_spec_that_contradicts_the_graph_fails_at_load(model_dir: Path) -> None:
    spec_path = model_dir / 'rtf_testnet.yaml'
    raw = yaml.safe_load(spec_path.read_text())
    raw['outputs'][0]['shape'] = [1, 8, 48, 80]
    spec_path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ModelLoadError, match=r'spec says heads is float32\[1, 8, 48, 80\]'):
        backends.create('onnxruntime', load_spec(spec_path))


@pytest.mark.parametrize(
    ('text', 'match'),
    [
        ('name: x\n', "missing 'inputs'"),
        (':\n  - [', 'not valid YAML'),
        ('name: x\ninputs: []\noutputs: []\nartifacts: {}\n', 'non-empty list'),
    ],
)
def test_bad_spec_files(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / 'm.yaml'
    path.write_text(text)
    with pytest.raises(ModelLoadError, match=match):
        load_spec(path)


def test_wrong_input_shape_or_dtype_is_a_clear_run_error() -> None:
    with backends.create('onnxruntime', load_spec(SPEC), threads=1) as be:
        with pytest.raises(
            InputMismatchError,
            match=r'must be float32\[1, 3, 384, 640\], got '
            r'float32\[1, 3, 384, 641\]',
        ):
            be.set_input('images', np.zeros((1, 3, 384, 641), np.float32))
        with pytest.raises(InputMismatchError, match='got float64'):
            be.set_input('images', np.zeros((1, 3, 384, 640)))
        with pytest.raises(InputMismatchError, match="no input 'image'"):
            be.set_input('image', np.zeros((1, 3, 384, 640), np.float32))


def _input(seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(1, 3, 384, 640)).astype(np.float32)


def test_onnxruntime_runs_sync_and_async_with_timing() -> None:
    with backends.create('onnxruntime', load_spec(SPEC), threads=2) as be:
        be.prepare(warmup=1)
        be.set_input('images', _input())
        sync = be.run()['heads'].copy()
        assert sync.shape == (1, 8, 24, 40)
        assert be.last_run_ns > 0
        handle = be.run_async()
        assert np.array_equal(handle.wait()['heads'], sync)
        assert handle.done()


@pytest.mark.skipif(not _torch_available(), reason='torch not installed')
def test_backends_agree_on_the_same_input() -> None:
    spec = load_spec(SPEC)
    x = _input()
    with backends.create('onnxruntime', spec, threads=2) as ort_be:
        ort_be.set_input('images', x)
        ref = ort_be.run()['heads'].copy()
    with backends.create('torch', spec, device='cpu') as torch_be:
        torch_be.prepare(warmup=1)
        torch_be.set_input('images', x)
        out = torch_be.run()['heads'].numpy()
    assert np.abs(ref).max() > 0.1  # not a trivially zero output
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_cpu_preprocessing_matches_a_direct_computation() -> None:
    pre = Preprocessing((384, 640), 'rgb', 1 / 255, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    frame = np.random.default_rng(0).integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    out = CpuPreprocessor(pre, frame.shape, src_order='bgr')(frame)
    resized = cv2.resize(frame, (640, 384), interpolation=cv2.INTER_LINEAR)[..., ::-1]
    ref = ((resized / 255.0 - np.array(pre.mean)) / np.array(pre.std)).transpose(2, 0, 1)
    np.testing.assert_allclose(out[0], ref, atol=1e-5)


@pytest.mark.skipif(not _torch_available(), reason='torch not installed')
def test_torch_preprocessing_agrees_with_the_cpu_path() -> None:
    from rt_fusion.inference.preprocess import TorchPreprocessor  # noqa: PLC0415

    pre = load_spec(SPEC).preprocessing
    assert pre is not None
    frame = cv2.GaussianBlur(  # smooth content: interpolation rounding stays small
        np.random.default_rng(1).integers(0, 256, (540, 960, 3), dtype=np.uint8), (9, 9), 3
    )
    cpu = CpuPreprocessor(pre, frame.shape)(frame)
    gpu_path = TorchPreprocessor(pre, frame.shape, device='cpu')(frame).numpy()
    np.testing.assert_allclose(gpu_path, cpu, atol=0.03)


@pytest.mark.skipif(not _torch_available(), reason='torch not installed')
def test_a_preprocessor_on_a_crop_of_another_s_upload_preprocesses_that_crop() -> None:
    """The zoomed view on CUDA: a preprocessor whose source is a crop of the full view's
    device frame gives what one fed the cropped frame from the host gives."""
    from rt_fusion.inference.preprocess import TorchPreprocessor  # noqa: PLC0415

    pre = load_spec(SPEC).preprocessing
    assert pre is not None
    frame = np.random.default_rng(2).integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    full = TorchPreprocessor(pre, frame.shape, device='cpu', src_order='bgr')
    zoomed = TorchPreprocessor(
        pre, (720, 1280, 3), device='cpu', src_order='bgr', source=full.src[180:900, 320:1600]
    )
    full(frame)
    got = zoomed.replay().numpy().copy()
    crop = np.ascontiguousarray(frame[180:900, 320:1600])
    want = TorchPreprocessor(pre, crop.shape, device='cpu', src_order='bgr')(crop).numpy()
    np.testing.assert_array_equal(got, want)


def test_engine_names_carry_gpu_capability_and_version() -> None:
    tag = engine_tag('rtf_testnet', 'NVIDIA Jetson AGX Orin', (8, 7), '10.3.0.30', 'fp16')
    name = tag.filename()
    assert name == 'rtf_testnet.nvidia-jetson-agx-orin.sm87.trt10.3.0.fp16.engine'
    assert parse_engine_filename(name) == tag
    check_engine(tag, 'NVIDIA Jetson AGX Orin', (8, 7), '10.3.0.30')
    with pytest.raises(ModelLoadError, match='built for nvidia-jetson-agx-orin sm87'):
        check_engine(tag, 'NVIDIA H200', (9, 0), '10.3.0')
    with pytest.raises(ModelLoadError, match=r'built with TensorRT 10\.3\.0'):
        check_engine(tag, 'NVIDIA Jetson AGX Orin', (8, 7), '10.7.0')
    hc = engine_tag(
        'm',
        'NVIDIA A100',
        (8, 0),
        '10.3.0',
        'fp16',
        hardware_compatible=True,
        version_compatible=True,
    )
    check_engine(parse_engine_filename(hc.filename()), 'NVIDIA H200', (9, 0), '10.9.1')
    with pytest.raises(ModelLoadError, match='does not say what it was built for'):
        parse_engine_filename('model.engine')


def test_build_engine_plans_without_tensorrt(capsys: pytest.CaptureFixture[str]) -> None:
    from rt_fusion_tools import build_engine  # noqa: PLC0415

    common = [
        str(SPEC),
        '--gpu-name',
        'NVIDIA Jetson AGX Orin',
        '--compute-capability',
        '8.7',
        '--trt-version',
        '10.3.0.30',
        '--dry-run',
    ]
    assert build_engine.main([*common, '--fp16']) == 0
    assert (
        'rtf_testnet.nvidia-jetson-agx-orin.sm87.trt10.3.0.fp16.engine' in capsys.readouterr().out
    )
    with pytest.raises(SystemExit, match='needs --calib-bag'):
        build_engine.main([*common, '--int8'])
    with pytest.raises(SystemExit, match='min <= opt <= max'):
        build_engine.main([*common, '--min-shape', 'images:1x3x400x640'])
    with pytest.raises(SystemExit, match='no input'):
        build_engine.main([*common, '--opt-shape', 'img:1x3x384x640'])
    args = build_engine.make_parser().parse_args([*common, '--max-shape', 'images:4x3x384x640'])
    tag = engine_tag('rtf_testnet', 'x', (8, 7), '10.3.0', 'fp32')
    plan = build_engine.make_plan(args, tag)
    assert plan.shapes['images'] == ((1, 3, 384, 640), (1, 3, 384, 640), (4, 3, 384, 640))


def _write_image_bag(path: Path, frames: list[np.ndarray], compressed: bool) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: PLC0415
    from rosbags.typesys import Stores, get_typestore  # noqa: PLC0415

    ts = get_typestore(Stores.ROS2_HUMBLE)
    hdr = ts.types['std_msgs/msg/Header']
    stamp = ts.types['builtin_interfaces/msg/Time']
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        kind = 'sensor_msgs/msg/CompressedImage' if compressed else 'sensor_msgs/msg/Image'
        conn = writer.add_connection('/camera/image', kind, typestore=ts)
        for k, f in enumerate(frames):
            header = hdr(stamp=stamp(sec=k, nanosec=0), frame_id='camera')
            if compressed:
                msg = ts.types[kind](
                    header=header,
                    format='jpeg',
                    data=np.frombuffer(cv2.imencode('.jpg', f)[1], np.uint8),
                )
            else:
                msg = ts.types[kind](
                    header=header,
                    height=f.shape[0],
                    width=f.shape[1],
                    encoding='bgr8',
                    is_bigendian=0,
                    step=f.shape[1] * 3,
                    data=f.reshape(-1),
                )
            writer.write(conn, k * 10**8, ts.serialize_cdr(msg, kind))


@pytest.mark.parametrize('compressed', [False, True], ids=['Image', 'CompressedImage'])
def test_calibration_frames_come_from_a_bag(tmp_path: Path, compressed: bool) -> None:
    video = shared_file('camera/solidWhiteRight.mp4')
    cap = cv2.VideoCapture(str(video))
    frames = [cap.read()[1] for _ in range(10)]
    cap.release()
    _write_image_bag(tmp_path / 'bag', frames, compressed)
    pre = load_spec(SPEC).preprocessing
    assert pre is not None
    batches = [
        b.copy() for b in CalibrationFrames(tmp_path / 'bag', '/camera/image', pre, batch_size=4)
    ]
    assert len(batches) == 2  # 10 frames: two full batches of 4, the rest dropped
    assert batches[0].shape == (4, 3, 384, 640)
    if not compressed:
        expected = CpuPreprocessor(pre, frames[5].shape, 'bgr')(frames[5])
        np.testing.assert_array_equal(batches[1][1], expected[0])


def test_tensorrt_backend_runs_where_tensorrt_is_installed() -> None:
    trt = pytest.importorskip(
        'tensorrt',
        reason='TensorRT is not installable on this machine '
        '(it runs on the vehicle); build an engine there and rerun',
    )
    assert trt.__version__.startswith('10')


def _cuda() -> bool:
    if not _torch_available():
        return False
    import torch  # noqa: PLC0415

    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason='no CUDA device (runs on the GPU machine)')
@pytest.mark.parametrize(('precision', 'tol'), [('fp32', 2e-3), ('fp16', 5e-2)])
def test_cuda_graph_backend_agrees_with_onnxruntime(precision: str, tol: float) -> None:
    spec = load_spec(SPEC)
    x = _input()
    with backends.create('onnxruntime', spec, threads=2) as ort_be:
        ort_be.set_input('images', x)
        ref = ort_be.run()['heads'].copy()
    with backends.create('torch', spec, device='cuda', precision=precision) as be:
        be.prepare(warmup=3)
        assert be.graph is not None
        be.set_input('images', x)
        out = be.run()['heads'].float().cpu().numpy()
        handle = be.run_async()
        again = handle.wait()['heads'].float().cpu().numpy()
        host = be.run_to_host('heads')  # pinned copy queued behind the graph, one wait
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    np.testing.assert_array_equal(out, again)  # graph replays are deterministic
    assert host.dtype == np.float32
    np.testing.assert_array_equal(host, out)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason='no CUDA device (runs on the GPU machine)')
def test_gpu_preprocessing_from_a_pinned_shm_slot_matches_the_cpu_path() -> None:
    from rt_fusion.core.shm import ShmRingWriter  # noqa: PLC0415
    from rt_fusion.inference import pinned  # noqa: PLC0415
    from rt_fusion.inference.preprocess import TorchPreprocessor  # noqa: PLC0415

    pre = load_spec(SPEC).preprocessing
    assert pre is not None
    frame = cv2.GaussianBlur(
        np.random.default_rng(2).integers(0, 256, (1080, 1920, 3), dtype=np.uint8), (9, 9), 3
    )
    with ShmRingWriter.create('rtf_test_gpu_pre', frame.nbytes, 2) as ring:
        ws = ring.acquire(frame.shape, np.uint8, 'rgb8')
        np.copyto(ws.array, frame)
        ring.commit(ws, 0, 0)
        with pinned.register(*ring.slot_range()):
            tp = TorchPreprocessor(pre, frame.shape, 'cuda')
            out = tp(ws.array)
            tp.stream.synchronize()
            gpu = out.cpu().numpy()
    cpu = CpuPreprocessor(pre, frame.shape)(frame)
    np.testing.assert_allclose(gpu, cpu, atol=0.03)


@pytest.mark.parametrize('order', ['rgb', 'bgr'])
def test_cpu_preprocessing_one_opencv_call_matches_resize_and_numpy(order: str) -> None:
    from rt_fusion.inference.preprocess import CpuPreprocessor  # noqa: PLC0415

    spec = load_spec(SPEC)
    assert spec.preprocessing is not None
    frame = np.random.default_rng(3).integers(0, 256, (540, 960, 3), dtype=np.uint8)
    pre = CpuPreprocessor(spec.preprocessing, frame.shape, order)
    if pre._blob_params is None:
        pytest.skip('OpenCV without blobFromImageWithParams (< 4.8): only the numpy path exists')
    fast = pre(frame).copy()
    pre._blob_params = None
    np.testing.assert_allclose(fast, pre(frame), atol=1e-5)


@pytest.mark.parametrize(
    ('device', 'message'),
    [('cuda', 'needs tensorrt'), ('cuda:1', 'needs tensorrt'), ('cpu', 'CUDA device')],
)
def test_tensorrt_takes_the_fusion_nodes_options(device: str, message: str) -> None:
    """config/vehicle.yaml's fusion section (backend tensorrt, device cuda) failed at configure
    with ``TypeError: unexpected keyword argument 'device'``: the options every backend gets."""
    if device != 'cpu':
        try:
            import tensorrt  # noqa: F401, PLC0415
        except ImportError:
            pass
        else:
            pytest.skip('TensorRT is installed here: the engine test covers it')
    with pytest.raises(backends.ModelLoadError, match=message):
        backends.create('tensorrt', load_spec(SPEC), device=device, threads=2)


@pytest.mark.skipif(not _torch_available(), reason='torch not installed')
@pytest.mark.parametrize('model', ['rtf_testnet', 'rtf_centernet'])
def test_the_inference_rewrites_keep_the_model_s_outputs(model: str) -> None:
    """What the CUDA backend does to a model before capture (channels-last, frozen, batch norms
    folded) changes no output beyond rounding; run here on the CPU, the same rewrites."""
    import torch  # noqa: PLC0415

    from rt_fusion.inference.torch_backend import _load_module, optimized  # noqa: PLC0415

    spec = load_spec(ROOT / 'models' / f'{model}.yaml')
    x = torch.from_numpy(np.random.default_rng(3).standard_normal(spec.inputs[0].shape))
    x = x.float()
    with torch.inference_mode():
        ref = _load_module(spec).eval()(x)
        fast, note = optimized(_load_module(spec).eval(), spec)
        out = fast(x.contiguous(memory_format=torch.channels_last))
    assert note.startswith('channels-last, frozen'), note
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason='no CUDA device (runs on the GPU machine)')
def test_the_optimized_cuda_graph_agrees_with_the_model_as_loaded() -> None:
    spec = load_spec(ROOT / 'models' / 'rtf_centernet.yaml')
    x = np.random.default_rng(4).standard_normal(spec.inputs[0].shape).astype(np.float32)
    outs = {}
    for optimize in (False, True):
        with backends.create(
            'torch', spec, device='cuda', precision='fp16', optimize=optimize
        ) as be:
            be.prepare(warmup=3)
            be.set_input('images', x)
            outs[optimize] = be.run_to_host('heads').copy()
            assert ('frozen' in be.optimized) == optimize, be.optimized
    np.testing.assert_allclose(outs[True], outs[False], rtol=5e-2, atol=5e-2)

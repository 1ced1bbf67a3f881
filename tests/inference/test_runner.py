"""FrameRunner: the fusion node's whole inference path (backend, preprocessing, pinning) on its
own, on the CPU here and on a CUDA device where there is one."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from rt_fusion.inference import backends
from rt_fusion.inference.preprocess import CpuPreprocessor
from rt_fusion.inference.runner import FrameRunner
from rt_fusion.inference.spec import ModelError, load_spec
from tests.conftest import ROOT

SPEC = ROOT / 'models' / 'rtf_testnet.yaml'


def _frame(seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return cv2.GaussianBlur(rng.integers(0, 256, (540, 960, 3), dtype=np.uint8), (9, 9), 3)


def _reference(frame: np.ndarray, order: str) -> np.ndarray:
    spec = load_spec(SPEC)
    assert spec.preprocessing is not None
    x = CpuPreprocessor(spec.preprocessing, frame.shape, order)(frame)
    with backends.create('onnxruntime', spec, threads=1) as be:
        be.set_input('images', x)
        return be.run()['heads'].copy()


@pytest.mark.parametrize('encoding', ['bgr8', 'rgb8'])
def test_the_cpu_runner_gives_the_backend_s_output(encoding: str) -> None:
    frame = _frame()
    runner = FrameRunner(SPEC, 'onnxruntime', 'cpu', threads=1)
    try:
        assert not runner.cuda and runner.input_hw == (384, 640)
        out = runner.run(frame, encoding, lambda: True)
        np.testing.assert_allclose(out, _reference(frame, encoding[:3]), rtol=1e-5, atol=1e-5)
        # A slot overwritten while it was read: no output from garbage.
        assert runner.run(frame, encoding, lambda: False) is False
        assert runner.pin('ring', lambda: (0, 0)) is None  # CPU: nothing to page-lock
    finally:
        runner.release()
    runner.release()  # twice: nothing left to free
    assert runner.model is None


def test_a_warm_up_on_its_own_thread_gives_the_same_output_and_reports_its_failure() -> None:
    frame = _frame()
    runner = FrameRunner(SPEC, 'onnxruntime', 'cpu', threads=1, warm=False)
    try:
        assert runner.model is not None and runner.model.runs == 0  # not warmed yet
        runner.start_warm_up()  # the fusion node's configure overlaps it with its other work
        runner.wait_warm()
        runner.wait_warm()  # once more: nothing to wait for
        out = runner.run(frame, 'bgr8', lambda: True)
        np.testing.assert_allclose(out, _reference(frame, 'bgr'), rtol=1e-5, atol=1e-5)
    finally:
        runner.release()
    broken = FrameRunner(SPEC, 'onnxruntime', 'cpu', threads=1, warm=False)
    assert broken.model is not None

    def fail(warmup: int = 1) -> None:
        raise RuntimeError('no memory for the arena')

    broken.model.prepare = fail  # type: ignore[method-assign]
    broken.start_warm_up()
    with pytest.raises(ModelError, match='warm-up failed: no memory for the arena'):
        broken.wait_warm()
    broken.release()


def _cuda() -> bool:
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason='no CUDA device (runs on the GPU machine)')
def test_the_cuda_runner_reads_a_pinned_ring_slot_and_agrees_with_the_cpu() -> None:
    from rt_fusion.core.shm import ShmRingWriter  # noqa: PLC0415

    frame = _frame()
    runner = FrameRunner(SPEC, 'torch', 'cuda')
    try:
        assert runner.cuda and runner.device.startswith('cuda')
        with ShmRingWriter.create('rtf_test_runner_gpu', frame.nbytes, 2) as ring:
            ws = ring.acquire(frame.shape, np.uint8, 'bgr8')
            np.copyto(ws.array, frame)
            ring.commit(ws, 0, 0)
            assert runner.pin('ring', ring.slot_range) is None
            out = runner.run(ws.array, 'bgr8', lambda: True)
            assert runner.pin('ring', ring.slot_range) is None  # once per ring
        np.testing.assert_allclose(out, _reference(frame, 'bgr'), rtol=2e-2, atol=2e-2)
    finally:
        runner.release()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason='no CUDA device (runs on the GPU machine)')
def test_the_cuda_runner_decodes_peaks_in_its_graph_as_the_host_decoder_does() -> None:
    from rt_fusion.core.perception.decoders import CenternetPeaks, decode  # noqa: PLC0415

    spec_path = ROOT / 'models' / 'rtf_centernet.yaml'
    frame = _frame()
    frame[200:, :] = (90, 90, 90)  # a road: the model's scene, not only noise
    on_gpu = FrameRunner(spec_path, 'torch', 'cuda')
    whole = FrameRunner(spec_path, 'torch', 'cuda', device_decode=False)
    try:
        assert on_gpu.peaks and not whole.peaks
        decoder = on_gpu.spec.decoder
        assert decoder is not None
        peaks = on_gpu.run(frame, 'bgr8', lambda: True)
        head = whole.run(frame, 'bgr8', lambda: True)
        assert isinstance(peaks, CenternetPeaks) and isinstance(head, np.ndarray)
        assert peaks.rows.nbytes < head.nbytes / 50
        a = decode(peaks, decoder, on_gpu.input_hw)
        b = decode(head, decoder, whole.input_hw)
        assert [(d.cls, round(d.score, 3)) for d in a] == [(d.cls, round(d.score, 3)) for d in b]
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(x.box, y.box, atol=0.05)
            np.testing.assert_allclose(x.depth, y.depth, rtol=1e-3)
    finally:
        on_gpu.release()
        whole.release()


def test_the_zoomed_runner_gives_both_views_and_none_for_a_small_frame() -> None:
    """zoom 1.5: a 1080p frame's output and that of its centre's 1280x720 crop, each what the
    backend gives for that image; a frame too small for the zoom: the plain output, and why."""
    from rt_fusion.core.perception.zoom import Views  # noqa: PLC0415

    spec = ROOT / 'models' / 'rtf_centernet.yaml'
    rng = np.random.default_rng(5)
    frame = cv2.GaussianBlur(rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8), (9, 9), 3)
    runner = FrameRunner(spec, 'onnxruntime', 'cpu', threads=1, zoom=1.5)
    plain = FrameRunner(spec, 'onnxruntime', 'cpu', threads=1)
    try:
        out = runner.run(frame, 'bgr8', lambda: True)
        assert isinstance(out, Views) and out.zoom.crop == (320, 180, 1600, 900)
        crop = np.ascontiguousarray(frame[180:900, 320:1600])
        np.testing.assert_allclose(out.full, plain.run(frame, 'bgr8', lambda: True), atol=1e-4)
        np.testing.assert_allclose(out.zoomed, plain.run(crop, 'bgr8', lambda: True), atol=1e-4)
        assert runner.run(frame, 'bgr8', lambda: False) is False
        small = runner.run(frame[:360, :640], 'bgr8', lambda: True)
        assert isinstance(small, np.ndarray) and 'smaller than the 640x384' in runner.zoom_note
    finally:
        runner.release()
        plain.release()


def test_the_mirroring_runner_gives_each_view_and_its_mirror_image() -> None:
    """mirror: each view's output and that of the same view mirrored left to right, each what
    the backend gives for that image (the mirrored input is the mirrored frame's, the zoomed
    crop being centred); without zoom, the one view and its mirror."""
    from rt_fusion.core.perception.mirror import Mirrored  # noqa: PLC0415
    from rt_fusion.core.perception.zoom import Views  # noqa: PLC0415

    spec = ROOT / 'models' / 'rtf_centernet.yaml'
    rng = np.random.default_rng(6)
    frame = cv2.GaussianBlur(rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8), (9, 9), 3)
    flipped = np.ascontiguousarray(frame[:, ::-1])
    both = FrameRunner(spec, 'onnxruntime', 'cpu', threads=1, zoom=1.5, mirror=True)
    one = FrameRunner(spec, 'onnxruntime', 'cpu', threads=1, mirror=True)
    zoomed = FrameRunner(spec, 'onnxruntime', 'cpu', threads=1, zoom=1.5)
    try:
        out = both.run(frame, 'bgr8', lambda: True)
        assert isinstance(out, Mirrored)
        assert isinstance(out.plain, Views) and isinstance(out.mirrored, Views)
        plain = zoomed.run(frame, 'bgr8', lambda: True)
        np.testing.assert_allclose(out.plain.full, plain.full, atol=1e-4)
        np.testing.assert_allclose(out.plain.zoomed, plain.zoomed, atol=1e-4)
        mirrored = zoomed.run(flipped, 'bgr8', lambda: True)
        np.testing.assert_allclose(out.mirrored.full, mirrored.full, atol=1e-3)
        np.testing.assert_allclose(out.mirrored.zoomed, mirrored.zoomed, atol=1e-3)
        single = one.run(frame, 'bgr8', lambda: True)
        assert isinstance(single, Mirrored) and isinstance(single.plain, np.ndarray)
        np.testing.assert_allclose(single.plain, plain.full, atol=1e-4)
        np.testing.assert_allclose(single.mirrored, mirrored.full, atol=1e-3)
        assert both.run(frame, 'bgr8', lambda: False) is False
    finally:
        both.release()
        one.release()
        zoomed.release()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason='no CUDA device (runs on the GPU machine)')
def test_the_cuda_runner_s_zoomed_view_is_the_crop_s_own_output() -> None:
    """On CUDA the zoomed view is cut from the frame the full view uploaded: its peaks are
    those of the cropped frame run on its own."""
    from rt_fusion.core.perception.decoders import CenternetPeaks  # noqa: PLC0415
    from rt_fusion.core.perception.zoom import Views  # noqa: PLC0415

    spec_path = ROOT / 'models' / 'rtf_centernet.yaml'
    frame = cv2.resize(_frame(), (1920, 1080))
    frame[600:, :] = (90, 90, 90)
    zoomed = FrameRunner(spec_path, 'torch', 'cuda', zoom=1.5)
    plain = FrameRunner(spec_path, 'torch', 'cuda')
    try:
        out = zoomed.run(frame, 'bgr8', lambda: True)
        assert isinstance(out, Views) and isinstance(out.zoomed, CenternetPeaks)
        full = plain.run(frame, 'bgr8', lambda: True)
        np.testing.assert_allclose(out.full.rows, full.rows, atol=1e-3)
        crop = np.ascontiguousarray(frame[180:900, 320:1600])
        np.testing.assert_allclose(
            out.zoomed.rows, plain.run(crop, 'bgr8', lambda: True).rows, atol=1e-3
        )
    finally:
        zoomed.release()
        plain.release()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason='no CUDA device (runs on the GPU machine)')
def test_the_cuda_runner_mirrors_its_static_input_in_place() -> None:
    """On CUDA the mirrored pass flips the graph's static input on the model's stream: its
    peaks are those of the mirrored frame run on its own, for both views."""
    from rt_fusion.core.perception.mirror import Mirrored  # noqa: PLC0415

    spec_path = ROOT / 'models' / 'rtf_centernet.yaml'
    frame = cv2.resize(_frame(), (1920, 1080))
    frame[600:, :] = (90, 90, 90)
    flipped = np.ascontiguousarray(frame[:, ::-1])
    both = FrameRunner(spec_path, 'torch', 'cuda', zoom=1.5, mirror=True)
    zoomed = FrameRunner(spec_path, 'torch', 'cuda', zoom=1.5)
    try:
        out = both.run(frame, 'bgr8', lambda: True)
        assert isinstance(out, Mirrored)
        plain = zoomed.run(frame, 'bgr8', lambda: True)
        np.testing.assert_allclose(out.plain.full.rows, plain.full.rows, atol=1e-3)
        np.testing.assert_allclose(out.plain.zoomed.rows, plain.zoomed.rows, atol=1e-3)
        mirrored = zoomed.run(flipped, 'bgr8', lambda: True)
        np.testing.assert_allclose(out.mirrored.full.rows, mirrored.full.rows, atol=1e-2)
        np.testing.assert_allclose(out.mirrored.zoomed.rows, mirrored.zoomed.rows, atol=1e-2)
    finally:
        both.release()
        zoomed.release()

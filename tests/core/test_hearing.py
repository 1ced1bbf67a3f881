"""Hearing: log-mel features and the siren/horn detector on hand-made signals.

The signals here are written out as formulas in this file (tones, sweeps, silence, full-scale
clipping, a dropped buffer), not drawn from the training generator.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.perception import hearing as hr
from rt_fusion.inference import hearing as hi
from rt_fusion.inference.spec import ModelError

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / 'models' / 'rtf_hearing.yaml'
RATE = 48_000


def _tone(f: float, seconds: float, rate: int = RATE, amp: float = 0.3) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return amp * np.sin(2 * np.pi * f * t)


def _noise(seconds: float, dbfs: float = -45.0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 10 ** (dbfs / 20), round(seconds * RATE))


def _centres(rate: int) -> np.ndarray:
    mel = hr.LogMel(rate)
    freqs = np.arange(mel.n_fft // 2 + 1) * rate / mel.n_fft
    return freqs[np.argmax(mel.fb_t, axis=0)]


@pytest.mark.parametrize('rate', [16_000, 44_100, 48_000])
def test_the_window_is_scipy_s_periodic_hann(rate: int) -> None:
    """The features were trained with scipy.signal.get_window('hann'); the node's numpy window
    (no scipy.signal import at start-up) is the same one."""
    from scipy.signal import get_window  # noqa: PLC0415

    mel = hr.LogMel(rate)
    want = get_window('hann', mel.win, fftbins=True).astype(np.float32)
    np.testing.assert_allclose(mel.window, want, atol=1e-7)


def test_the_filterbank_has_unit_peaks_in_rising_order() -> None:
    fb = hr.mel_filterbank(RATE, 2048, 64, 60.0, 7800.0)
    assert fb.shape == (64, 1025)
    # unit triangles, sampled at the bins: the narrow low ones miss their apex by up to half a bin
    assert fb.max() <= 1.0 and np.all(fb.max(axis=1) > 0.5)
    peaks = np.argmax(fb, axis=1)
    assert np.all(np.diff(peaks) >= 0)
    with pytest.raises(ParameterError, match='fmax_hz'):
        hr.mel_filterbank(16_000, 512, 64, 60.0, 9000.0)  # above Nyquist


@pytest.mark.parametrize('rate', [16_000, 44_100, 48_000])
def test_a_pure_tone_lands_in_the_band_of_its_frequency_at_any_rate(rate: int) -> None:
    frames = hr.LogMel(rate).frames(_tone(1000.0, 0.5, rate))
    assert frames.shape[1] == 64
    assert abs(len(frames) - 48) <= 1  # 10 ms hop at every rate
    band = int(np.argmax(frames.mean(axis=0)))
    centres = _centres(rate)
    assert abs(centres[band] - 1000.0) < 80.0, (band, centres[band])


def test_streaming_frames_equal_the_whole_signal_frames_for_any_block_sizes() -> None:
    x = _tone(700.0, 2.0) + _noise(2.0, -30.0)
    whole = hr.LogMel(RATE).frames(x)
    stream = hr.LogMelStream(RATE)
    rng = np.random.default_rng(5)
    k = total = 0
    while k < len(x):
        n = int(rng.choice([1, 7, 480, 1024, 4800, 9999]))
        total += stream.push(x[k : k + n])
        k += n
    assert total == len(whole)
    assert np.allclose(stream.context(), whole[-96:], atol=1e-3)


def test_silence_full_scale_clipping_and_a_dropped_buffer_give_finite_features() -> None:
    silence = np.zeros(RATE, np.int16)
    clipped = np.where(_tone(440.0, 1.0) > 0, 32767, -32768).astype(np.int16)  # a square wave
    dropped = np.concatenate([_tone(900.0, 0.5), np.zeros(4800), _tone(900.0, 0.5)]) * 32767
    for x in (silence, clipped, dropped.astype(np.int16)):
        stream = hr.LogMelStream(RATE)
        stream.push(x)
        ctx = stream.context()
        assert np.all(np.isfinite(ctx))
        assert np.all(np.isfinite(hr.model_input(ctx)))
    assert hr.LogMel(RATE).frames(silence).min() == pytest.approx(-100.0)  # the floor, not -inf


def _fixed(logits: list[list[float]], siren_confirm_hops: int = 2) -> hr.AudioEventDetector:
    seq = iter(logits)
    return hr.AudioEventDetector(
        lambda _x: np.array(next(seq)),
        RATE,
        params=hr.HearingParams(
            confirm_hops=2, release_hops=2, siren_confirm_hops=siren_confirm_hops
        ),
    )


def test_a_siren_needs_its_longer_confirmation_a_horn_does_not() -> None:
    """Two horn hops turn the horn on; four siren hops do not turn the siren on
    (siren_confirm_hops 5), five do, at the fifth."""
    horn, siren, other = [0.0, 0.0, 5.0], [0.0, 5.0, 0.0], [5.0, 0.0, 0.0]
    det = _fixed([horn] * 2 + [other] + [siren] * 4 + [other] + [siren] * 5, siren_confirm_hops=5)
    ons = []
    for k in range(13):
        for r in det.push(k * 100_000_000, np.zeros(det.hop_samples, np.int16)):
            ons += [(k, e.cls) for e in r.events if e.active]
    assert ons == [(1, 'horn'), (12, 'siren')], ons


def test_events_turn_on_after_confirm_hops_with_the_first_hop_as_onset_and_off_after_release() -> (
    None
):
    high, low = [0.0, 5.0, 0.0], [5.0, 0.0, 0.0]  # siren ~0.99 / ~0.01
    det = _fixed([low, high, high, high, low, low, low])
    hop = det.hop_samples
    results = []
    for k in range(7):
        results += det.push(k * 100_000_000, np.zeros(hop, np.int16))
    events = [(k, e) for k, r in enumerate(results) for e in r.events]
    assert [(k, e.cls, e.active) for k, e in events] == [(2, 'siren', True), (5, 'siren', False)]
    on = events[0][1]
    assert on.onset_ns == results[1].stamp_ns < on.stamp_ns == results[2].stamp_ns
    # the stamp of a hop is its last sample's time on the host clock
    assert results[0].stamp_ns == round((hop - 1) * 1e9 / RATE)


def test_a_hop_splits_blocks_of_any_size() -> None:
    det = _fixed([[1.0, 0.0, 0.0]] * 5)
    hop = det.hop_samples
    stamps = []
    first = 1_000_000_000
    for k, n in enumerate([hop // 3, hop, hop + 17, hop - 17 - hop // 3 + hop]):
        start = sum([hop // 3, hop, hop + 17, hop - 17 - hop // 3 + hop][:k])
        stamps += [r.stamp_ns for r in det.push(first + round(start * 1e9 / RATE), np.zeros(n))]
    assert len(stamps) == 4
    assert np.allclose(np.diff(stamps), 1e8, atol=2)


def test_bad_hysteresis_fails_with_the_parameter_name() -> None:
    with pytest.raises(ParameterError, match='off_threshold'):
        hr.AudioEventDetector(
            lambda _x: np.zeros(3), RATE, params=hr.HearingParams(on_threshold=0.3)
        )


def test_a_spec_without_an_audio_section_or_with_another_shape_is_refused(tmp_path: Path) -> None:
    raw = yaml.safe_load(SPEC.read_text())
    onnx = ROOT / 'models' / 'rtf_hearing.onnx'
    (tmp_path / onnx.name).write_bytes(onnx.read_bytes())
    del raw['audio']
    (tmp_path / 'a.yaml').write_text(yaml.safe_dump(raw))
    with pytest.raises(ModelError, match='no audio'):
        hi.load_hearing_model(tmp_path / 'a.yaml')
    raw = yaml.safe_load(SPEC.read_text())
    raw['audio']['context_frames'] = 50
    (tmp_path / 'b.yaml').write_text(yaml.safe_dump(raw))
    with pytest.raises(ModelError, match='does not match'):
        hi.load_hearing_model(tmp_path / 'b.yaml')


# --- the shipped model on hand-made sounds ----------------------------------------------------


@pytest.fixture(scope='module')
def classify() -> object:
    model = hi.load_hearing_model(SPEC)
    assert model.classes == hr.AUDIO_CLASSES
    return hi.onnx_classifier(model, threads=1)


def _run(classify: object, x: np.ndarray) -> list[hr.HopResult]:
    det = hr.AudioEventDetector(classify, RATE)  # type: ignore[arg-type]
    pcm = np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)
    out = []
    for k in range(0, len(pcm), 1024):  # the microphone node's block size
        out += det.push(round(k * 1e9 / RATE), pcm[k : k + 1024])
    return out


def _yelp(seconds: float) -> np.ndarray:
    """An American yelp: 700-1500 Hz triangle sweep, 0.3 s period."""
    t = np.arange(round(seconds * RATE)) / RATE
    u = (t % 0.3) / 0.3
    f = 700 + 800 * (1 - np.abs(2 * u - 1))
    return 0.2 * np.sin(2 * np.pi * np.cumsum(f) / RATE)


def _two_tone_horn(seconds: float) -> np.ndarray:
    t = np.arange(round(seconds * RATE)) / RATE
    return 0.05 * sum(
        np.sin(2 * np.pi * f * h * t) / h for f in (405.0, 510.0) for h in range(1, 5)
    )


@pytest.mark.parametrize(('name', 'cls'), [('yelp', 'siren'), ('wail', 'siren'), ('horn', 'horn')])
def test_hand_made_sirens_and_horns_are_heard_within_300_ms_past_their_confirmation(
    classify: object, name: str, cls: str
) -> None:
    """A horn within 300 ms; a siren within 300 ms more than its longer confirmation
    (siren_confirm_hops: 0.5 s instead of 0.2 s)."""
    onset_s = 2.0
    lead = _noise(onset_s)
    if name == 'yelp':
        sound = _yelp(3.0)
    elif name == 'wail':  # 600 -> 1400 Hz in 4 s
        t = np.arange(3 * RATE) / RATE
        sound = 0.2 * np.sin(2 * np.pi * (600 * t + 100 * t**2))
    else:
        sound = _two_tone_horn(3.0)
    x = np.concatenate([lead, sound + _noise(3.0, seed=1)])
    results = _run(classify, x)
    onsets = [e.stamp_ns for r in results for e in r.events if e.active and e.cls == cls]
    delay = hr.detection_delay_s(onsets, round(onset_s * 1e9))
    p = hr.HearingParams()
    extra = (p.siren_confirm_hops - p.confirm_hops) * p.hop_s if cls == 'siren' else 0.0
    assert delay <= 0.3 + extra, (name, delay)
    wrong = [e for r in results for e in r.events if e.active and e.cls != cls]
    assert not wrong, wrong


@pytest.mark.parametrize('name', ['silence', 'noise', 'beep', 'clipped_hum'])
def test_silence_noise_a_steady_beep_and_a_clipped_hum_make_no_siren(
    classify: object, name: str
) -> None:
    seconds = 5.0
    if name == 'silence':
        x = np.zeros(round(seconds * RATE))
    elif name == 'noise':
        x = _noise(seconds, -25.0)
    elif name == 'beep':  # a reversing beeper: 1.2 kHz, 0.5 s on / 0.5 s off
        t = np.arange(round(seconds * RATE)) / RATE
        x = _tone(1200.0, seconds) * ((t % 1.0) < 0.5)
    else:  # mains-like 100 Hz hum driven into full-scale clipping
        x = np.clip(3 * _tone(100.0, seconds, amp=1.0), -1, 1)
    results = _run(classify, x)
    sirens = [e for r in results for e in r.events if e.active and e.cls == 'siren']
    assert not sirens
    assert all(math.isfinite(p) for r in results for p in r.probabilities)

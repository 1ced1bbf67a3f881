"""Hearing: siren and horn events from a microphone stream (ROS-free).

**Features** are log-mel spectrograms: 25 ms Hann frames every 10 ms, 64 mel bands (HTK scale)
from 60 Hz to 7.8 kHz, in dB. They are computed with a periodic Hann window and numpy's
real FFT and a mel filterbank matrix (:func:`mel_filterbank`). Why not librosa or torchaudio:
scipy is already a dependency of the core, while librosa pulls in numba (seconds of JIT at
start-up, a first hop hundreds of times slower than the rest) and torchaudio would tie the node
to a torch build. The frame and hop sizes follow the input's sample rate, so 16, 44.1 and 48 kHz
streams give the same features.

**Streaming**: :class:`LogMelStream` computes each 10 ms frame once, as its samples arrive, and
keeps the last ``context_frames`` (0.96 s) in a ring. Its frames equal :meth:`LogMel.frames` on
the whole signal (tested), so the training data and the node see the same numbers.

**Classifier**: a small CNN (``models/rtf_hearing``, trained by ``tools/train_hearing.py``) maps
the context window, with its mean removed (gain invariance), to ``other``/``siren``/``horn``
logits. :class:`AudioEventDetector` runs it every hop (100 ms) and turns probabilities into
events with hysteresis: a class turns on after ``confirm_hops`` hops at or above
``on_threshold`` (``siren_confirm_hops`` for a siren: 0.5 s, as a siren sounds for seconds and
most sounds that resemble one for less) and off after ``release_hops`` hops below
``off_threshold``. The onset stamp is
the host time of the end of the first hop at or above the threshold.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param

AUDIO_CLASSES = ('other', 'siren', 'horn')
EVENT_CLASSES = ('siren', 'horn')  # the classes that make events


@dataclasses.dataclass(frozen=True)
class MelConfig:
    """Feature layout; stored in the model spec (``audio:``) so that training and use agree."""

    win_s: float = 0.025
    hop_s: float = 0.010
    n_mels: int = 64
    fmin_hz: float = 60.0
    fmax_hz: float = 7800.0
    context_frames: int = 96

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> MelConfig:
        """From a spec's ``audio:`` section (unknown keys are an error)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(raw) - fields - {'classes'}
        if unknown:
            known = sorted(fields)
            raise ParameterError('audio', sorted(unknown), f'unknown keys; known: {known}')
        return cls(**{k: v for k, v in raw.items() if k in fields})


def _hz_to_mel(f: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return 2595.0 * np.log10(1.0 + np.asarray(f, dtype=np.float64) / 700.0)


def _mel_to_hz(m: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return 700.0 * (10.0 ** (np.asarray(m, dtype=np.float64) / 2595.0) - 1.0)


def mel_filterbank(
    rate_hz: int, n_fft: int, n_mels: int, fmin_hz: float, fmax_hz: float
) -> npt.NDArray[np.float32]:
    """Triangular filters on the HTK mel scale, (n_mels, n_fft // 2 + 1), unit peak each."""
    if not 0 <= fmin_hz < fmax_hz <= rate_hz / 2:
        raise ParameterError('fmax_hz', fmax_hz, f'needs 0 <= fmin < fmax <= {rate_hz / 2} Hz')
    freqs = np.arange(n_fft // 2 + 1) * rate_hz / n_fft
    edges = _mel_to_hz(np.linspace(_hz_to_mel(fmin_hz), _hz_to_mel(fmax_hz), n_mels + 2))
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None, :] - lo) / (mid - lo)
    down = (hi - freqs[None, :]) / (hi - mid)
    fb = np.maximum(0.0, np.minimum(up, down))
    return fb.astype(np.float32)


class LogMel:
    """Log-mel frames of a signal at ``rate_hz`` (see the module docstring)."""

    def __init__(self, rate_hz: int, cfg: MelConfig | None = None) -> None:
        self.cfg = cfg = cfg or MelConfig()
        self.rate_hz = rate_hz
        self.win = round(cfg.win_s * rate_hz)
        self.hop = round(cfg.hop_s * rate_hz)
        self.n_fft = 1 << (self.win - 1).bit_length()
        # The periodic Hann window (scipy.signal.get_window('hann', n), equal to 1e-15; tested):
        # importing scipy.signal for it cost 0.6-0.7 s of every fusion node's start-up.
        self.window = np.hanning(self.win + 1)[:-1].astype(np.float32)
        self.fb_t = np.ascontiguousarray(
            mel_filterbank(rate_hz, self.n_fft, cfg.n_mels, cfg.fmin_hz, cfg.fmax_hz).T
        )

    def frames(self, x: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """(n_frames, n_mels) dB for frames starting at 0, hop, 2 hop, ... that fit in ``x``.

        ``x`` is mono, float in [-1, 1] (int16 is scaled).
        """
        sig = _as_float(x)
        if len(sig) < self.win:
            return np.zeros((0, self.cfg.n_mels), np.float32)
        views = np.lib.stride_tricks.sliding_window_view(sig, self.win)[:: self.hop]
        spec = np.fft.rfft(views * self.window, n=self.n_fft, axis=1)
        power = (spec.real**2 + spec.imag**2).astype(np.float32)
        mel: npt.NDArray[np.float32] = 10.0 * np.log10(np.maximum(power @ self.fb_t, 1e-10))
        return mel


def _as_float(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Mono float32 in [-1, 1] from int16 or float samples, (frames,) or (frames, channels)."""
    a = np.asarray(x)
    f = a.astype(np.float32) / 32768.0 if a.dtype == np.int16 else a.astype(np.float32, copy=False)
    if f.ndim == 2:  # (frames, channels): the mean of the channels
        f = f.mean(axis=1)
    return f


class LogMelStream:
    """Frames of a stream, each computed once; the last ``context_frames`` kept in order."""

    def __init__(self, rate_hz: int, cfg: MelConfig | None = None) -> None:
        self.mel = LogMel(rate_hz, cfg)
        cfg = self.mel.cfg
        self._pending = np.zeros(0, np.float32)  # samples not yet consumed by a whole frame
        self._ring = np.full((cfg.context_frames, cfg.n_mels), -100.0, np.float32)
        self.total_frames = 0

    def push(self, samples: npt.ArrayLike) -> int:
        """Adds samples; returns how many new frames they completed."""
        x = np.concatenate([self._pending, _as_float(samples)])
        new = self.mel.frames(x)
        n = len(new)
        if n:
            ctx = self.mel.cfg.context_frames
            if n >= ctx:
                self._ring[:] = new[-ctx:]
            else:
                self._ring[:-n] = self._ring[n:]
                self._ring[-n:] = new
            self.total_frames += n
        self._pending = x[n * self.mel.hop :]
        return n

    def context(self) -> npt.NDArray[np.float32]:
        """The last ``context_frames`` frames, oldest first.

        In the stream's first second the frames not yet heard repeat the oldest one heard (a
        steady sound stays steady; padding with silence made every sound at start-up look like
        an onset, and a steady beep like a siren).
        """
        missing = self._ring.shape[0] - self.total_frames
        if 0 < missing < self._ring.shape[0]:
            out = self._ring.copy()
            out[:missing] = out[missing]
            return out
        return self._ring


def model_input(context_db: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The network input (1, 1, n_mels, frames): dB with the window's mean removed, / 20."""
    x = (context_db - context_db.mean()) / 20.0
    return np.ascontiguousarray(x.T[None, None], dtype=np.float32)


def softmax(logits: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """Probabilities of a logits vector."""
    z = np.asarray(logits, np.float64).reshape(-1)
    e = np.exp(z - z.max())
    out: npt.NDArray[np.float64] = e / e.sum()
    return out


@dataclasses.dataclass
class HearingParams:
    """How probabilities become events."""

    hop_s: float = param('detector period', unit='s', default=0.1, low=0.01, high=1.0)
    on_threshold: float = param(
        'probability at which an event class turns on', default=0.6, low=0.0, high=1.0
    )
    off_threshold: float = param(
        'probability under which an event class turns off', default=0.4, low=0.0, high=1.0
    )
    confirm_hops: int = param('hops at or above on_threshold to turn on', default=2, low=1)
    siren_confirm_hops: int = param(
        'hops at or above on_threshold for a siren to turn on (a siren sounds for seconds, most '
        'sounds that resemble one for less: a longer confirmation costs little)',
        default=5,
        low=1,
    )
    release_hops: int = param('hops below off_threshold to turn off', default=3, low=1)

    def check(self) -> None:
        """Cross-field rules."""
        if self.off_threshold > self.on_threshold:
            raise ParameterError(
                'off_threshold', self.off_threshold, 'must not exceed on_threshold'
            )


@dataclasses.dataclass(frozen=True)
class AudioEvent:
    """A class that turned on (``active``) or off, with its onset stamp on the host clock."""

    cls: str
    probability: float
    onset_ns: int  # end of the first hop at or above on_threshold
    stamp_ns: int  # end of the hop that decided it
    active: bool


@dataclasses.dataclass(frozen=True)
class HopResult:
    """One detector run."""

    stamp_ns: int  # host time of the hop's last sample
    probabilities: tuple[float, ...]  # per AUDIO_CLASSES
    events: tuple[AudioEvent, ...]


class _ClassState:
    def __init__(self) -> None:
        self.active = False
        self.above = 0
        self.below = 0
        self.first_above_ns = 0
        self.onset_ns = 0


class AudioEventDetector:
    """Runs ``classify`` every hop on the stream's context; see the module docstring.

    Args:
        classify: (1, 1, n_mels, frames) float32 -> logits of ``classes``.
        rate_hz: sample rate of the stream.
        cfg: feature layout (the model's).
        params: hop and hysteresis.
        classes: the model's output classes.
    """

    def __init__(
        self,
        classify: Callable[[npt.NDArray[np.float32]], npt.NDArray[Any]],
        rate_hz: int,
        cfg: MelConfig | None = None,
        params: HearingParams | None = None,
        classes: tuple[str, ...] = AUDIO_CLASSES,
    ) -> None:
        self.classify = classify
        self.stream = LogMelStream(rate_hz, cfg)
        self.params = params or HearingParams()
        self.params.check()
        self.classes = classes
        self.rate_hz = rate_hz
        self.hop_samples = max(1, round(self.params.hop_s * rate_hz))
        self._since_hop = 0
        self._state = {c: _ClassState() for c in classes if c in EVENT_CLASSES}
        self.hops = 0
        self.active: dict[str, AudioEvent] = {}

    def push(self, first_sample_ns: int, samples: npt.ArrayLike) -> list[HopResult]:
        """A block whose first sample was taken at ``first_sample_ns``; the hops it completed.

        Non-finite samples are the caller's to refuse (the node counts and drops such blocks).
        """
        x = _as_float(samples)
        out: list[HopResult] = []
        start = 0
        while start < len(x):
            take = min(len(x) - start, self.hop_samples - self._since_hop)
            self.stream.push(x[start : start + take])
            start += take
            self._since_hop += take
            if self._since_hop == self.hop_samples:
                self._since_hop = 0
                end_ns = first_sample_ns + round((start - 1) * 1e9 / self.rate_hz)
                out.append(self._hop(end_ns))
        return out

    def _hop(self, stamp_ns: int) -> HopResult:
        self.hops += 1
        probs = softmax(self.classify(model_input(self.stream.context())))
        p = self.params
        events: list[AudioEvent] = []
        for k, cls in enumerate(self.classes):
            st = self._state.get(cls)
            if st is None:
                continue
            prob = float(probs[k])
            if prob >= p.on_threshold:
                if st.above == 0:
                    st.first_above_ns = stamp_ns
                st.above += 1
                st.below = 0
            elif prob < p.off_threshold:
                st.below += 1
                st.above = 0
            else:
                st.below = 0
            need = p.siren_confirm_hops if cls == 'siren' else p.confirm_hops
            if not st.active and st.above >= need:
                st.active, st.onset_ns = True, st.first_above_ns
                ev = AudioEvent(cls, prob, st.onset_ns, stamp_ns, True)
                self.active[cls] = ev
                events.append(ev)
            elif st.active and st.below >= p.release_hops:
                st.active = False
                self.active.pop(cls, None)
                events.append(AudioEvent(cls, prob, st.onset_ns, stamp_ns, False))
        return HopResult(stamp_ns, tuple(float(v) for v in probs), tuple(events))


def detection_delay_s(onsets_ns: list[int], true_onset_ns: int) -> float:
    """Seconds from a true onset to the first detection at or after it (inf: none)."""
    later = [t for t in onsets_ns if t >= true_onset_ns]
    return (min(later) - true_onset_ns) / 1e9 if later else math.inf

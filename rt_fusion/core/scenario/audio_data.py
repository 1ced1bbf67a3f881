"""Labelled audio for the hearing model: sirens, horns and road sounds, generated and real.

Sources (all mono float at ``RATE``):

- **sirens**: wail (a slow sweep, 2-8 s period), yelp (fast, 0.15-0.4 s), hi-lo (two alternating
  tones, the European pattern), and the scenario's own 600-1200 Hz / 1 s sweep; pure or with
  odd harmonics (a horn speaker's square-ish wave), with a slow Doppler ramp;
- **horns**: two-tone car horns (300-550 Hz, ratio 1.15-1.35, decaying harmonics), single-tone
  truck horns, and the real ``car-horn.wav`` press, pitch-shifted up to +/-8 %;
- **backgrounds**: road noise (low-passed white), wind (band noise with a slow gust envelope),
  engine (a firing-frequency harmonic series with drift), the real ``car_engine.wav`` and
  ``train.wav``, single steady beeps (a tone that is neither), and mixtures, at -50..-20 dBFS;
- **confusers** taught as other: reversing beepers, steady pure tones over 700 Hz, chimes;
- **real recordings** (:class:`RealPool`, from :mod:`rt_fusion.training.sounds`: sirens, horns
  and everyday sounds of the training sources): real events, real sounds that are neither in the
  foreground, and real sounds in the background, each through :func:`augment` (Doppler,
  distance, reverberation).

The real clips are split by time: the first :data:`REAL_SPLIT` of each trains, the rest is held
out (``part='heldout'``) and never enters training. The horn clip's presses are labelled from
its level (the press is 20 dB over the rest). Scene seeds: ``[3_000_000, k]`` training,
``[4_000_000, k]`` held-out, disjoint from every other seed in the project.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.perception.hearing import AUDIO_CLASSES
from rt_fusion.core.scenario.sensors import load_clip

RATE = 48_000
TRAIN_SEED, HELDOUT_SEED = 3_000_000, 4_000_000
CLIPS = {'horn': 'car-horn.wav', 'engine': 'car_engine.wav', 'train': 'train.wav'}
# The first part of each clip trains, the rest is held out: the horn clip is cut at 2.0 s, inside
# its long press (presses at 1.3-1.55 s and 1.7-2.6 s), so that both parts hold some horn.
REAL_SPLIT = {'horn': 0.46, 'engine': 0.6, 'train': 0.6}
Signal = npt.NDArray[np.float64]


def _rms(x: Signal) -> float:
    return float(np.sqrt(np.mean(x**2))) if len(x) else 0.0


def _at_dbfs(x: Signal, dbfs: float) -> Signal:
    return x * (10 ** (dbfs / 20) / max(_rms(x), 1e-12))


class Clips:
    """The real recordings at RATE, each split into its training and held-out parts."""

    def __init__(self, clips_dir: Path) -> None:
        self.full = {k: load_clip(clips_dir, name, RATE) for k, name in CLIPS.items()}

    def part(self, key: str, part: str) -> Signal:
        """``train`` (the first REAL_SPLIT) or ``heldout`` (the rest) of a clip."""
        x = self.full[key]
        cut = int(len(x) * REAL_SPLIT[key])
        return x[:cut] if part == 'train' else x[cut:]

    def horn_mask(self, part: str, hop: int = RATE // 100) -> npt.NDArray[np.bool_]:
        """Per sample of :meth:`part`: inside a horn press (level within 10 dB of the peak)."""
        x = self.part('horn', part)
        full = self.full['horn']
        env = np.sqrt(np.convolve(full**2, np.ones(hop) / hop, 'same'))
        thr = env.max() * 10 ** (-10 / 20)
        cut = int(len(full) * REAL_SPLIT['horn'])
        mask: npt.NDArray[np.bool_] = env >= thr
        return mask[:cut] if part == 'train' else mask[cut : cut + len(x)]


@dataclasses.dataclass
class RealPool:
    """Real recordings by label at RATE; event clips cut to where their event sounds."""

    siren: list[Signal]
    horn: list[Signal]
    other: list[Signal]

    @classmethod
    def from_clips(cls, clips: Sequence[Any]) -> RealPool:
        """From clips with ``label``, ``x`` and ``mask`` (rt_fusion.training.sounds.RealClip)."""
        by: dict[str, list[Signal]] = {'siren': [], 'horn': [], 'other': []}
        for c in clips:
            x = c.x if c.label == 'other' else c.x[c.mask]
            if len(x) > RATE // 10:
                by[c.label].append(np.asarray(x, np.float64))
        return cls(by['siren'], by['horn'], by['other'])

    def segment(self, rng: np.random.Generator, label: str, n: int) -> Signal:
        """``n`` samples of a random clip of ``label`` from a random start (looped if short)."""
        pool = getattr(self, label)
        x = pool[int(rng.integers(len(pool)))]
        start = int(rng.integers(0, max(1, len(x) - n)))
        return np.resize(x[start:], n) if len(x) - start < n else x[start : start + n]


def augment(rng: np.random.Generator, x: Signal) -> Signal:
    """A recording as heard elsewhere: Doppler (a drifting 0.94-1.06 resampling factor),
    distance (air absorption: a 2-8 kHz low-pass, half the time), a recorder's band (a quarter
    of the time: through 8, 11.025 or 16 kHz sampling, as many recordings are) and
    reverberation (an exponentially decaying noise tail, RT60 0.1-0.9 s, half the time); same
    length."""
    from scipy.signal import fftconvolve, lfilter, resample_poly  # noqa: PLC0415

    n = len(x)
    rate = rng.uniform(0.94, 1.06) + rng.uniform(-0.03, 0.03) * np.linspace(0, 1, n)
    idx = np.cumsum(rate)
    idx = idx - idx[0] + rng.uniform(0, max(0.0, len(x) - 1 - idx[-1] + idx[0]))
    y = np.interp(idx % (len(x) - 1), np.arange(len(x)), x)
    if rng.random() < 0.5:
        a = 1 - math.exp(-2 * math.pi * rng.uniform(2000, 8000) / RATE)
        y = lfilter([a], [1, -(1 - a)], y)
    if rng.random() < 0.25:
        low = int(rng.choice([8000, 11025, 16000]))
        g = math.gcd(low, RATE)
        y = resample_poly(resample_poly(y, low // g, RATE // g), RATE // g, low // g)[:n]
        y = np.pad(y, (0, n - len(y)))
    if rng.random() < 0.5:
        rt60 = rng.uniform(0.1, 0.9)
        t = np.arange(int(rt60 * RATE)) / RATE
        ir = rng.normal(0, 1, len(t)) * np.exp(-6.9 * t / rt60)
        ir[0] = 0.0
        wet = fftconvolve(y, ir / max(float(np.linalg.norm(ir)), 1e-9))[:n]
        y = y + rng.uniform(0.1, 0.6) * _at_dbfs(wet, 20 * math.log10(max(_rms(y), 1e-12)))
    out: Signal = np.asarray(y, np.float64)
    return out


# --- generators (rng-driven) ------------------------------------------------------------------


def siren(rng: np.random.Generator, n: int) -> Signal:
    """One of the siren patterns, ``n`` samples, unit RMS."""
    t = np.arange(n) / RATE
    kind = rng.choice(['wail', 'yelp', 'hilo', 'scenario'], p=[0.35, 0.3, 0.2, 0.15])
    t0 = rng.uniform(0, 10)  # a random phase of the pattern
    if kind == 'scenario':
        phase = 2 * np.pi * (900.0 * t - 300.0 / (2 * np.pi) * np.cos(2 * np.pi * (t + t0)))
    else:
        if kind == 'hilo':
            lo = rng.uniform(420, 700)
            hi = lo * rng.uniform(1.25, 1.5)
            period = rng.uniform(0.8, 1.6)
            f = np.where(((t + t0) % period) < period / 2, lo, hi)
        else:
            lo = rng.uniform(450, 800)
            hi = rng.uniform(1200, 1800)
            period = rng.uniform(2.0, 8.0) if kind == 'wail' else rng.uniform(0.15, 0.4)
            u = ((t + t0) % period) / period
            shape = np.sin(np.pi * u) ** 2 if rng.random() < 0.5 else np.minimum(u / 0.8, 1.0)
            f = lo + (hi - lo) * shape
        doppler = 1.0 + rng.uniform(-0.04, 0.04) + rng.uniform(-0.03, 0.03) * t / max(t[-1], 1e-9)
        phase = 2 * np.pi * np.cumsum(f * doppler) / RATE
    sig = np.sin(phase)
    if rng.random() < 0.5:  # a speaker's square-ish wave: odd harmonics
        sig = sig + np.sin(3 * phase) / 3 + np.sin(5 * phase) / 5 * rng.uniform(0, 1)
    return _at_dbfs(sig, 0.0)


def horn(rng: np.random.Generator, n: int, clips: Clips | None, part: str) -> Signal:
    """A horn press over all ``n`` samples (a real press, a third of the time with ``clips``)."""
    if clips is not None and rng.random() < 0.35:
        x = clips.part('horn', part)[clips.horn_mask(part)]
        if len(x) > RATE // 10:
            shift = rng.uniform(0.92, 1.08)  # pitch shift by resampling
            idx = (np.arange(n) * shift) % (len(x) - 1)
            return _at_dbfs(np.interp(idx, np.arange(len(x)), x), 0.0)
    t = np.arange(n) / RATE
    f1 = rng.uniform(300, 550)
    freqs = [f1] if rng.random() < 0.25 else [f1, f1 * rng.uniform(1.15, 1.35)]
    decay = rng.uniform(0.3, 0.8)
    sig = sum(
        decay ** (h - 1) * np.sin(2 * np.pi * f * h * t + rng.uniform(0, 6.3))
        for f in freqs
        for h in range(1, 7)
    )
    return _at_dbfs(np.asarray(sig, np.float64), 0.0)


def background(
    rng: np.random.Generator,
    n: int,
    clips: Clips | None,
    part: str,
    real: RealPool | None = None,
) -> Signal:
    """Road, wind, engine, real clips or a steady beep, mixed; unit RMS. With ``real``, a third
    of the time one more part: a real sound that is neither siren nor horn."""
    from scipy.signal import lfilter  # noqa: PLC0415

    t = np.arange(n) / RATE
    parts: list[Signal] = []
    for _ in range(int(rng.integers(1, 4))):
        kind = rng.choice(
            ['road', 'wind', 'engine', 'real_engine', 'real_train', 'beep', 'hiss'],
            p=[0.22, 0.14, 0.18, 0.16 if clips else 0, 0.16 if clips else 0, 0.06, 0.08]
            if clips
            else [0.3, 0.2, 0.3, 0, 0, 0.08, 0.12],
        )
        if kind == 'road':
            a = rng.uniform(0.005, 0.08)
            x = lfilter([a], [1, -(1 - a)], rng.normal(0, 1, n))
        elif kind == 'wind':
            x = lfilter([1, 0, -1], [1, -1.6 * rng.uniform(0.8, 0.99), 0.81], rng.normal(0, 1, n))
            x = x * (1 + 0.8 * np.sin(2 * np.pi * rng.uniform(0.1, 1.0) * t + rng.uniform(0, 6)))
        elif kind == 'engine':
            f0 = rng.uniform(20, 140) * (1 + rng.uniform(-0.2, 0.2) * t / max(t[-1], 1e-9))
            ph = 2 * np.pi * np.cumsum(f0) / RATE
            x = sum(rng.uniform(0, 1) / h * np.sin(h * ph) for h in range(1, 12))
            x = np.asarray(x) + 0.3 * lfilter([0.05], [1, -0.95], rng.normal(0, 1, n))
        elif kind in ('real_engine', 'real_train'):
            assert clips is not None
            clip = clips.part(kind.removeprefix('real_'), part)
            start = int(rng.integers(0, max(1, len(clip) - n)))
            x = np.resize(clip[start:], n)
        elif kind == 'beep':  # a steady tone: neither siren nor horn
            f = rng.uniform(800, 4000)
            x = np.sin(2 * np.pi * f * t) * (((t * rng.uniform(1, 4)) % 1) < 0.5)
        else:
            x = rng.normal(0, 1, n)
        parts.append(_at_dbfs(np.asarray(x, np.float64), rng.uniform(-12, 0)))
    if real is not None and real.other and rng.random() < 0.33:
        parts.append(_at_dbfs(augment(rng, real.segment(rng, 'other', n)), rng.uniform(-12, 0)))
    return _at_dbfs(np.sum(parts, axis=0), 0.0)


def confuser(rng: np.random.Generator, n: int) -> Signal:
    """A tonal sound that is neither siren nor horn: a reversing beeper (a tone switched on and
    off, 0.5-3 Hz), a steady pure tone of 700-4000 Hz, or a chime (decaying tones); unit RMS."""
    t = np.arange(n) / RATE
    kind = rng.choice(['beeper', 'tone', 'chime'], p=[0.5, 0.3, 0.2])
    f = rng.uniform(700, 4000) if kind != 'beeper' else rng.uniform(800, 3200)
    sig = np.sin(2 * np.pi * f * t + rng.uniform(0, 6.3))
    if kind == 'beeper':
        rate, duty = rng.uniform(0.5, 3.0), rng.uniform(0.25, 0.75)
        on = ((t * rate + rng.uniform(0, 1)) % 1.0) < duty
        sig = sig * on
    elif kind == 'chime':
        period = rng.uniform(0.3, 1.5)
        sig = sig * np.exp(-((t + rng.uniform(0, period)) % period) * rng.uniform(3, 12))
    return _at_dbfs(sig, 0.0)


def window_example(
    rng: np.random.Generator,
    seconds: float,
    clips: Clips | None,
    part: str,
    min_cover_s: float = 0.15,
    real: RealPool | None = None,
    real_share: float = 0.5,
) -> tuple[Signal, int]:
    """A ``seconds`` long mixture and its label (index in AUDIO_CLASSES) for its last window.

    The event (a third of the examples have none) covers the last ``cover`` seconds of the
    signal, at least ``min_cover_s`` (so that onsets are learnt), at an SNR of -6..+24 dB
    against the background. With ``real``, ``real_share`` of the events are real recordings
    (augmented), and as many of the windows without one have a real sound that is neither in
    the foreground, starting anywhere in the window.
    """
    n = round(seconds * RATE)
    bg = _at_dbfs(background(rng, n, clips, part, real), rng.uniform(-50, -20))
    label = int(rng.choice([0, 1, 2], p=[0.4, 0.3, 0.3] if real else [0.34, 0.33, 0.33]))
    level = 20 * math.log10(max(_rms(bg), 1e-9)) + rng.uniform(-6, 24)
    if label == 0:
        u = rng.random()
        if real is not None and real.other and u < real_share:
            m = round(rng.uniform(0.1, 1.0) * n)
            fg = augment(rng, real.segment(rng, 'other', m)) * np.minimum(
                1.0, np.arange(m) / (0.005 * RATE)
            )
            start = int(rng.integers(0, n - m + 1))
            bg = bg.copy()
            bg[start : start + m] += _at_dbfs(fg, level)
            return np.clip(bg, -1, 1), 0
        if u < real_share + (1 - real_share) * 0.4:  # a tonal sound that is neither: other
            bg = np.clip(bg + _at_dbfs(confuser(rng, n), level), -1, 1)
        return bg, 0
    cover = rng.uniform(min_cover_s, seconds) if rng.random() < 0.5 else seconds
    m = round(cover * RATE)
    kind = AUDIO_CLASSES[label]
    if real is not None and getattr(real, kind) and rng.random() < real_share:
        ev = augment(rng, real.segment(rng, kind, m))
    else:
        ev = siren(rng, m) if label == 1 else horn(rng, m, clips, part)
        if real is not None and rng.random() < 0.5:  # generated events heard elsewhere too
            ev = augment(rng, ev)
    ramp = np.minimum(1.0, np.arange(m) / (0.01 * RATE))  # 10 ms attack
    out = bg.copy()
    out[n - m :] += _at_dbfs(ev, level) * ramp
    return np.clip(out, -1, 1), label


def scene(
    rng: np.random.Generator, seconds: float, clips: Clips | None, part: str, event: str
) -> tuple[Signal, float, float]:
    """A stream with one ``event`` (siren/horn/none) at a random onset: signal, onset, end [s]."""
    n = round(seconds * RATE)
    out = _at_dbfs(background(rng, n, clips, part), rng.uniform(-45, -25))
    if event == 'none':
        return out, math.nan, math.nan
    onset = rng.uniform(1.5, seconds / 2)
    end = min(seconds, onset + rng.uniform(2.0, seconds))
    i0, i1 = round(onset * RATE), round(end * RATE)
    ev = siren(rng, i1 - i0) if event == 'siren' else horn(rng, i1 - i0, clips, part)
    level = 20 * math.log10(max(_rms(out), 1e-9)) + rng.uniform(0, 20)
    out[i0:i1] += _at_dbfs(ev, level) * np.minimum(1.0, np.arange(i1 - i0) / (0.01 * RATE))
    return np.clip(out, -1, 1), onset, end


def real_streams(clips: Clips, part: str) -> list[tuple[str, Signal, npt.NDArray[np.bool_]]]:
    """The real clips' ``part`` as streams: (clip key, signal, per-sample horn-press mask)."""
    out = []
    for key in ('horn', 'engine', 'train'):
        x = clips.part(key, part)
        mask = clips.horn_mask(part) if key == 'horn' else np.zeros(len(x), bool)
        out.append((key, x, mask))
    return out


def seeds(part: str, count: int, first: int = 0) -> list[Any]:
    """Scene seeds of ``part`` (train / heldout)."""
    base = TRAIN_SEED if part == 'train' else HELDOUT_SEED
    return [[base, k] for k in range(first, first + count)]

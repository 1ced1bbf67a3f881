"""The hearing model on real recordings of held-out sources (``real_sounds.yaml``, split test).

Two kinds of streams, run through the streaming detector as the fusion node runs it:

- **event streams**: each real siren and horn clip of the test sources, ``conditions`` times, at
  an SNR of 0-20 dB (over where its event sounds) against a background of road noise and real
  everyday sounds of the test sources, 2 s before and 2 s after it. An event is found when the
  detector has that class on at a hop while it sounds (from its first sample to one hop after
  its last: the hop that ends after it still hears it), turned on there or already on. Event
  recall per class.
- **non-event streams**: the test sources' everyday sounds (engines, traffic, trains, animals,
  voices, crowds, music, machinery, alarms that are not sirens) one after another in a random
  order, each at -40..-12 dBFS with 0.2-1.5 s between them, over road noise at -55..-35 dBFS,
  until ``hours`` of audio: false siren and false horn events per hour.

Per-hop accuracy over both (hops labelled as
:func:`rt_fusion.training.hearing_score.hop_labels` does).
Seeds ``[4_100_000, k]``: disjoint from the training's and the generated held-out's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rt_fusion.core.perception import hearing as hr
from rt_fusion.core.scenario import audio_data as ad
from rt_fusion.training.hearing_score import WIN_SAMPLES, hop_labels, score
from rt_fusion.training.sounds import RealClip, summary

SEED = 4_100_000


def _level(x: ad.Signal, mask: np.ndarray | None = None) -> float:
    sel = x[mask] if mask is not None and mask.any() else x
    return 20 * math.log10(max(float(np.sqrt(np.mean(sel**2))), 1e-12))


def _road(rng: np.random.Generator, n: int) -> ad.Signal:
    return ad._at_dbfs(ad.background(rng, n, None, 'heldout'), rng.uniform(-55, -35))


def event_stream(
    rng: np.random.Generator, clip: RealClip, others: list[RealClip]
) -> tuple[ad.Signal, int, int]:
    """A stream with ``clip`` 2 s in: (signal, first and end sample of its event)."""
    pad = 2 * ad.RATE
    n = pad + len(clip.x) + pad
    bg = _road(rng, n)
    o = others[int(rng.integers(len(others)))].x
    bg = bg + ad._at_dbfs(np.resize(o, n), _level(bg) + rng.uniform(-6, 6))
    ev = clip.x * (10 ** ((_level(bg) + rng.uniform(0, 20) - _level(clip.x, clip.mask)) / 20))
    bg[pad : pad + len(ev)] += ev
    idx = np.flatnonzero(clip.mask)
    return np.clip(bg, -1, 1), pad + int(idx[0]), pad + int(idx[-1]) + 1


def quiet_stream(rng: np.random.Generator, others: list[RealClip], seconds: float) -> ad.Signal:
    """``seconds`` of the everyday sounds one after another over road noise."""
    n = round(seconds * ad.RATE)
    out = _road(rng, n)
    k = int(rng.integers(0, ad.RATE))
    order = rng.permutation(len(others))
    i = 0
    while k < n:
        x = others[order[i % len(order)]].x[: n - k]
        out[k : k + len(x)] += ad._at_dbfs(x, rng.uniform(-40, -12))
        k += len(x) + int(rng.uniform(0.2, 1.5) * ad.RATE)
        i += 1
    return np.clip(out, -1, 1)


def _heard(results: list[hr.HopResult], cls: str, a: int, b: int) -> bool:
    """Whether ``cls`` is on at a hop from sample ``a`` to one hop after ``b`` (turned on there,
    or already on: a false event just before the sound does not hide it)."""
    lo, hi = a * 1e9 / ad.RATE, (b + ad.RATE // 10) * 1e9 / ad.RATE
    on = False
    for r in results:
        for e in r.events:
            if e.cls == cls:
                on = e.active
        if on and lo <= r.stamp_ns <= hi:
            return True
    return False


def evaluate(
    streamer: Any, clips: list[RealClip], conditions: int, hours: float, log: Any = print
) -> dict[str, Any]:
    """The figures of the module docstring; ``streamer`` is a ``hearing.Streamer``."""
    hop = ad.RATE // 10
    events = [c for c in clips if c.label != 'other']
    others = [c for c in clips if c.label == 'other']
    found: dict[str, list[bool]] = {'siren': [], 'horn': []}
    wrong = {'siren': 0, 'horn': 0}
    ok = total = 0
    per_clip: dict[str, list[bool]] = {}
    for k, clip in enumerate(events):
        for j in range(conditions):
            rng = np.random.default_rng([SEED, k, j])
            x, a, b = event_stream(rng, clip, others)
            res = streamer.run(x)
            hit = _heard(res, clip.label, a, b)
            found[clip.label].append(hit)
            per_clip.setdefault(clip.key, []).append(hit)
            other_cls = 'horn' if clip.label == 'siren' else 'siren'
            wrong[other_cls] += int(_heard(res, other_cls, a, b))
            cls = hr.AUDIO_CLASSES.index(clip.label)
            o, t = score(res, hop_labels(len(x), hop, [(a, b, cls)], WIN_SAMPLES))
            ok, total = ok + o, total + t
    false = {'siren': 0, 'horn': 0}
    seconds, chunk = 0.0, 300.0
    k = 0
    while seconds < hours * 3600:
        rng = np.random.default_rng([SEED + 1, k])
        x = quiet_stream(rng, others, min(chunk, hours * 3600 - seconds))
        res = streamer.run(x)
        for r in res:
            for e in r.events:
                if e.active:
                    false[e.cls] += 1
        o, t = score(res, hop_labels(len(x), hop, [], WIN_SAMPLES))
        ok, total = ok + o, total + t
        seconds += len(x) / ad.RATE
        k += 1
        log(f'  real non-event audio: {seconds / 60:.0f} of {hours * 60:.0f} min')
    rows: dict[str, Any] = {
        'real_siren_recall': float(np.mean(found['siren'])) if found['siren'] else math.nan,
        'real_horn_recall': float(np.mean(found['horn'])) if found['horn'] else math.nan,
        'real_siren_events': len(found['siren']),
        'real_horn_events': len(found['horn']),
        'real_false_sirens_per_hour': false['siren'] / (seconds / 3600),
        'real_false_horns_per_hour': false['horn'] / (seconds / 3600),
        'real_nonevent_hours': seconds / 3600,
        'real_hop_acc': ok / max(total, 1),
        'real_hops': total,
        'real_wrong_class_events': wrong['siren'] + wrong['horn'],
    }
    rows['real_test_data'] = summary(clips, ad.RATE)
    rows['real_per_clip'] = {key: f'{sum(v)}/{len(v)}' for key, v in per_clip.items()}
    return rows

"""Real recordings for the hearing model: fetched from Debian packages, checked, split by source.

``real_sounds.yaml`` (beside this file) is the manifest: for each source package its version,
licence and split (a whole package trains or is held out, never single clips) and, for each
file, its path in the package, its label (siren / horn / other), its SHA-256 and optionally the
span in which its event sounds. :func:`fetch` downloads each package with ``apt-get download``
(the exact version), extracts only the listed files with ``dpkg-deb``, checks every checksum
and keeps the files and the package's copyright file in the cache (the ``.deb`` is deleted).
:func:`load` decodes them (soundfile: WAV, Ogg Vorbis, Opus) to mono at the hearing's rate, with
a per-sample event mask, and keeps a decoded copy per split in the cache (16 kHz int16: the
model's features stop at 7.8 kHz).

Cache: ``$RTF_SOUNDS_CACHE`` or ``~/.cache/rt_fusion/sounds``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from functools import cache
from math import gcd
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MANIFEST = Path(__file__).with_name('real_sounds.yaml')
LABELS = ('other', 'siren', 'horn')
STORE_RATE = 16_000  # the decoded cache's rate
MAX_CLIP_S = 30.0  # longer clips (ambiences) are cut: no source dominates by length
EVENT_DB = 20.0  # without a span, an event clip sounds where its level is within this of its peak


class SoundsError(RuntimeError):
    """The real sounds cannot be fetched or are not in the cache (the message says which)."""


def cache_dir() -> Path:
    env = os.environ.get('RTF_SOUNDS_CACHE')
    return Path(env) if env else Path.home() / '.cache' / 'rt_fusion' / 'sounds'


@cache
def manifest(path: Path = MANIFEST) -> dict[str, Any]:
    import yaml  # noqa: PLC0415

    data: dict[str, Any] = yaml.safe_load(path.read_text())
    for src in data['sources']:
        if src['split'] not in ('train', 'test'):
            raise SoundsError(f'{path}: {src["package"]}: split must be train or test')
        for f in src['files']:
            if f['label'] not in LABELS:
                raise SoundsError(f'{path}: {f["path"]}: label must be one of {LABELS}')
    return data


def digest(path: Path = MANIFEST) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _file(root: Path, src: dict[str, Any], f: dict[str, Any]) -> Path:
    return root / 'files' / str(src['package']) / str(f['path'])


def missing(root: Path | None = None) -> list[str]:
    """Packages whose files are not all in the cache with their checksums."""
    root = root or cache_dir()
    out = []
    for src in manifest()['sources']:
        for f in src['files']:
            p = _file(root, src, f)
            if not p.is_file() or p.stat().st_size == 0:
                out.append(src['package'])
                break
    return out


def fetch(root: Path | None = None, log: Callable[[str], None] = print) -> dict[str, int]:
    """Every listed file into the cache, checked; returns {package: files}.

    Raises:
        SoundsError: apt-get or dpkg-deb is missing or fails, a package version is not in the
            archive, or a file's SHA-256 differs from the manifest's.
    """
    root = root or cache_dir()
    if shutil.which('apt-get') is None or shutil.which('dpkg-deb') is None:
        raise SoundsError('fetching the real sounds needs apt-get and dpkg-deb (Debian/Ubuntu)')
    todo = missing(root)
    counts = {}
    updated = False
    for k, src in enumerate(manifest()['sources']):
        pkg, version = src['package'], src['version']
        counts[pkg] = len(src['files'])
        if pkg not in todo:
            log(f'[{k + 1}/{len(manifest()["sources"])}] {pkg}: in the cache')
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cmd = ['apt-get', 'download', '-q', f'{pkg}={version}']
            run = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
            if run.returncode and not updated:  # the package lists may be missing or old
                log('apt-get update (the package lists)')
                subprocess.run(['apt-get', 'update', '-q'], capture_output=True, check=False)
                updated = True
                run = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
            if run.returncode:
                raise SoundsError(f'apt-get download {pkg}={version} failed: {run.stderr.strip()}')
            deb = next(Path(tmp).glob('*.deb'))
            log(f'[{k + 1}/{len(manifest()["sources"])}] {pkg} {version}: '
                f'{deb.stat().st_size / 1e6:.0f} MB, {len(src["files"])} files')  # fmt: skip
            _extract(deb, Path(tmp) / 'x', src, root)
    return counts


def _extract(deb: Path, tmp: Path, src: dict[str, Any], root: Path) -> None:
    tmp.mkdir()
    subprocess.run(['dpkg-deb', '-x', str(deb), str(tmp)], check=True)
    for f in src['files']:
        got = tmp / f['path']
        if not got.is_file():
            raise SoundsError(f'{src["package"]}: {f["path"]} is not in the package')
        if _sha256(got) != f['sha256']:
            raise SoundsError(f'{src["package"]}: {f["path"]}: SHA-256 differs from the manifest')
        dst = _file(root, src, f)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(got, dst)
    copyright_file = tmp / 'usr/share/doc' / src['package'] / 'copyright'
    if copyright_file.is_file():
        shutil.copyfile(copyright_file, root / 'files' / src['package'] / 'copyright')


# --- decoded clips ----------------------------------------------------------------------------


@dataclasses.dataclass
class RealClip:
    source: str  # the package
    path: str
    label: str
    x: npt.NDArray[np.float64]  # mono, at the rate load() was asked for
    mask: npt.NDArray[np.bool_]  # per sample: the event sounds (all False for other)

    @property
    def key(self) -> str:
        return f'{self.source}:{Path(self.path).name}'


def _decode(path: Path) -> npt.NDArray[np.float64]:
    import soundfile as sf  # noqa: PLC0415
    from scipy.signal import resample_poly  # noqa: PLC0415

    x, rate = sf.read(str(path), always_2d=True, dtype='float64')
    mono = x.mean(axis=1)[: int(MAX_CLIP_S * rate)]
    g = gcd(STORE_RATE, rate)
    out: npt.NDArray[np.float64] = resample_poly(mono, STORE_RATE // g, rate // g)
    return out


def event_mask(x: npt.NDArray[np.float64], rate: int, span_s: list[float] | None) -> Any:
    """Where an event clip's event sounds: ``span_s`` if given, else where its 10 ms RMS is
    within :data:`EVENT_DB` of its peak (dilated by 20 ms: a honk's gaps stay inside)."""
    from scipy.ndimage import binary_closing  # noqa: PLC0415

    n = len(x)
    if span_s is not None:
        m = np.zeros(n, bool)
        m[int(span_s[0] * rate) : int(span_s[1] * rate)] = True
        return m
    hop = rate // 100
    env = np.sqrt(np.convolve(x**2, np.ones(hop) / hop, 'same'))
    m = env >= env.max() * 10 ** (-EVENT_DB / 20)
    return binary_closing(m, np.ones(2 * hop, bool))


def _decoded(split: str, root: Path, log: Callable[[str], None]) -> dict[str, Any]:
    path = root / f'decoded-{split}-{digest()}.npz'
    if path.is_file():
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    if missing(root):
        raise SoundsError(
            f'the real sounds are not in {root} (missing: {", ".join(missing(root))}): '
            'run tools/fetch_sounds.py'
        )
    chunks, starts, meta = [], [0], []
    for src in manifest()['sources']:
        if src['split'] != split:
            continue
        for f in src['files']:
            x = _decode(_file(root, src, f))
            chunks.append(np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16))
            starts.append(starts[-1] + len(x))
            meta.append((src['package'], f['path'], f['label'], f.get('span_s')))
    log(f'decoded {len(meta)} {split} clips ({starts[-1] / STORE_RATE / 60:.1f} min) -> {path}')
    out = {
        'pcm': np.concatenate(chunks),
        'starts': np.array(starts),
        'source': np.array([m[0] for m in meta]),
        'path': np.array([m[1] for m in meta]),
        'label': np.array([m[2] for m in meta]),
        'span': np.array([m[3] if m[3] else [np.nan, np.nan] for m in meta], float),
    }
    np.savez(path, allow_pickle=False, **out)
    return out


def load(
    split: str, rate: int, root: Path | None = None, log: Callable[[str], None] = print
) -> list[RealClip]:
    """The ``split`` (train / test) clips as mono float at ``rate`` with their event masks.

    Raises:
        SoundsError: the files are not in the cache (run tools/fetch_sounds.py).
    """
    from scipy.signal import resample_poly  # noqa: PLC0415

    d = _decoded(split, root or cache_dir(), log)
    g = gcd(rate, STORE_RATE)
    out = []
    for i in range(len(d['path'])):
        pcm = d['pcm'][d['starts'][i] : d['starts'][i + 1]].astype(np.float64) / 32768
        x = resample_poly(pcm, rate // g, STORE_RATE // g)
        label = str(d['label'][i])
        span = None if np.isnan(d['span'][i][0]) else [float(v) for v in d['span'][i]]
        mask = event_mask(x, rate, span) if label != 'other' else np.zeros(len(x), bool)
        out.append(RealClip(str(d['source'][i]), str(d['path'][i]), label, x, mask))
    return out


def summary(clips: list[RealClip], rate: int) -> dict[str, dict[str, float]]:
    """Per label: sources, clips and minutes (of event sound for sirens and horns)."""
    out = {}
    for label in LABELS:
        mine = [c for c in clips if c.label == label]
        secs = sum((c.mask.sum() if label != 'other' else len(c.x)) for c in mine) / rate
        out[label] = {
            'sources': len({c.source for c in mine}),
            'clips': len(mine),
            'minutes': round(float(secs) / 60, 2),
        }
    return out

"""Fast DDS's shared-memory files left by processes that died: found and removed.

Fast DDS's shared-memory transport gives each participant a segment
(``/dev/shm/fastrtps_<id>``, ``fastdds_<id>`` from Fast DDS 3, ~0.5 MB) and each port it
listens on another (``fastrtps_port<N>``, with a ``sem.fastrtps_port<N>_mutex`` semaphore).
Beside each sits ``<name>_el``, on which the owner holds an exclusive ``flock`` while it lives.
A process that ends normally removes its files; one killed (``kill -9``, a crash) leaves them,
and ``/dev/shm`` is memory: a node restarted a thousand times on the vehicle would keep half a
gigabyte of it.

:func:`sweep` removes the files whose lock nobody holds (the kernel drops a dead process's
flocks), as Fast DDS's own ``fastdds shm clean`` does. A file younger than ``min_age_s`` is
left alone: a participant being created has its lock file a moment before it locks it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

SHM = Path('/dev/shm')
PREFIXES = ('fastrtps_', 'fastdds_')


@dataclass
class Swept:
    """What :func:`sweep` removed."""

    segments: list[str] = field(default_factory=list)  # names without the _el suffix
    files: int = 0
    bytes: int = 0


def _owner_gone(lock: Path) -> bool:
    """True when nobody holds ``lock``'s flock (its owner died): taken and released here."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held: a live participant
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def dead(root: Path = SHM, min_age_s: float = 1.0) -> list[str]:
    """Names of the Fast DDS segments in ``root`` whose owner is gone."""
    now = time.time()
    out = []
    for name in names(root):
        lock = root / f'{name}_el'
        try:
            if now - lock.stat().st_mtime < min_age_s:
                continue
        except OSError:
            continue  # removed meanwhile
        if _owner_gone(lock):
            out.append(name)
    return out


def sweep(root: Path = SHM, min_age_s: float = 1.0) -> Swept:
    """Removes the files of every Fast DDS segment in ``root`` whose owner is gone."""
    swept = Swept()
    for name in dead(root, min_age_s):
        # The lock last: until it goes, the segment is still recognisable as this one's.
        for path in (root / name, root / f'sem.{name}_mutex', root / f'{name}_el'):
            with contextlib.suppress(OSError):
                size = path.stat().st_size
                path.unlink()
                swept.files += 1
                swept.bytes += size
        swept.segments.append(name)
    return swept


def held_by(pid: int, root: Path = SHM) -> list[str]:
    """The Fast DDS segments in ``root`` whose lock process ``pid`` holds (``/proc/locks``)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for line in Path('/proc/locks').read_text().splitlines():
            fields = line.split()
            # 1: FLOCK  ADVISORY  WRITE 31780 00:1b:479992 0 EOF
            if len(fields) > 5 and fields[1] == 'FLOCK' and fields[4] == str(pid):
                inodes.add(int(fields[5].rsplit(':', 1)[1]))
    out = []
    for name in names(root):
        with contextlib.suppress(OSError):
            if (root / f'{name}_el').stat().st_ino in inodes:
                out.append(name)
    return out


def names(root: Path = SHM) -> list[str]:
    """Every Fast DDS segment in ``root`` with a lock file, live or not."""
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    return sorted(
        p.name[: -len('_el')]
        for p in entries
        if p.name.endswith('_el') and p.name.startswith(PREFIXES)
    )

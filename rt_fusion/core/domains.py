"""ROS domains leased machine-wide: graphs started side by side on one machine (a test suite, an
evaluation, a demo, a benchmark) each get a domain no other holds.

Two graphs on one domain take each other's messages and, worse, each other's lifecycle
transitions: an evaluation started beside the test suite once had its fusion node configured a
second time by a test's bring-up (both graphs name it ``/fusion``) and die. A lease is an
exclusive ``flock`` on ``<tmp>/rt_fusion_domains/<domain>.lock``, held by an open file of the
process that took it, so it ends with that process however it ends. Domains 1-101 only: on
Linux, Fast DDS's ports of higher domains can collide with ephemeral ports.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import itertools
import os
import tempfile
from pathlib import Path

LEASE_DIR = Path(tempfile.gettempdir()) / 'rt_fusion_domains'
FIRST, COUNT = 1, 101
_counter = itertools.count()
_held: collections.deque[int] = collections.deque()


def lease(keep: int = 16) -> int:
    """A domain that no other process on this machine holds, leased until this process has
    taken ``keep`` more (or exits). Where every one is held, or no lock can be made: one anyway,
    unleased."""
    start = (os.getpid() * 7 + next(_counter)) % COUNT
    with contextlib.suppress(OSError):
        LEASE_DIR.mkdir(mode=0o777, exist_ok=True)
    for i in range(COUNT):
        domain = FIRST + (start + i) % COUNT
        try:
            fd = os.open(LEASE_DIR / f'{domain}.lock', os.O_CREAT | os.O_RDWR, 0o666)
        except OSError:
            return FIRST + start  # no lease directory: unleased
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # per open file: ours conflict too
        except BlockingIOError:
            os.close(fd)
            continue
        _held.append(fd)
        while len(_held) > keep:
            os.close(_held.popleft())
        return domain
    return FIRST + start


def from_env_or_lease() -> str:
    """``ROS_DOMAIN_ID`` when the user set it, else a leased domain (as text)."""
    return os.environ.get('ROS_DOMAIN_ID') or str(lease())

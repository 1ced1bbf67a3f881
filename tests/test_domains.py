"""The test domains' machine-wide leases (tests/conftest.py): two pytest runs on one machine
never hand out the same ROS domain at the same time."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from tests.conftest import LEASE_DIR, LEASES_HELD, ROOT, lease_domain


def test_a_second_process_gets_none_of_the_domains_this_one_holds() -> None:
    ours = [lease_domain() for _ in range(LEASES_HELD)]
    assert len(set(ours)) == LEASES_HELD and all(1 <= d <= 101 for d in ours)
    child = subprocess.run(
        [
            sys.executable,
            '-c',
            (
                'from tests.conftest import LEASES_HELD, lease_domain\n'
                'print(*[lease_domain() for _ in range(LEASES_HELD)])'
            ),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    theirs = [int(d) for d in child.stdout.split()]
    assert len(theirs) == LEASES_HELD
    assert not set(theirs) & set(ours), (ours, theirs)


def test_a_process_releases_its_oldest_domain_after_leases_held_more() -> None:
    taken = [lease_domain() for _ in range(LEASES_HELD + 1)]

    def free(domain: int) -> bool:  # another open file's lock: as another process would try
        fd = os.open(LEASE_DIR / f'{domain}.lock', os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
        return True

    assert free(taken[0])
    assert not any(free(d) for d in taken[1:])

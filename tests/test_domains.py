"""Machine-wide ROS domain leases (rt_fusion/core/domains.py): two pytest runs, or a test run
and a tool's graph (evaluation, demo, benchmark), never get the same domain at the same time."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from rt_fusion.core.domains import LEASE_DIR
from tests.conftest import LEASES_HELD, ROOT, lease_domain


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


def test_a_tool_s_graph_gets_a_domain_no_test_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool started without ROS_DOMAIN_ID (an evaluation beside the suite) leases its own;
    one the user set is kept."""
    from rt_fusion.ros.harness import live  # noqa: PLC0415

    ours = {lease_domain() for _ in range(LEASES_HELD)}
    monkeypatch.delenv('ROS_DOMAIN_ID', raising=False)
    code = 'from rt_fusion.ros.harness import live; print(live.graph_env()["ROS_DOMAIN_ID"])'
    child = subprocess.run(
        [sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=True,
    )  # fmt: skip
    assert int(child.stdout) not in ours and 1 <= int(child.stdout) <= 101
    monkeypatch.setenv('ROS_DOMAIN_ID', '77')
    assert live.graph_env()['ROS_DOMAIN_ID'] == '77'

"""Shared fixtures: real ROS 2 processes on an isolated domain, and the shared recordings."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rt_fusion.core import domains
from rt_fusion.ros.harness.launching import group_processes

ROOT = Path(__file__).resolve().parents[1]
# The venv the tests run in: .venv (Jazzy, the default) or .venv-kilted (ROS_DISTRO=kilted).
VENV = Path(sys.prefix)
SHARED_DATA = ROOT.parent / 'shared' / 'data'
# Each test process holds the leases of its last LEASES_HELD domains (what its current test can
# still be using).
LEASES_HELD = 16


#: Test folders that never touch ROS (the ROS-free core, the inference backends, the real-time
#: helpers): their results do not depend on the ROS 2 distribution, so CI runs them on one
#: (marked ``ros_free``; ``.ci/run``'s Kilted tier leaves them out). Fast DDS's own shared-memory
#: files differ between releases: that test of the core runs on both.
ROS_FREE_DIRS = ('core', 'inference', 'rt_kernel')
ROS_FREE_EXCEPT = ('core/test_dds_shm.py',)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the tests of ROS_FREE_DIRS ``ros_free``."""
    tests = ROOT / 'tests'
    for item in items:
        rel = item.path.relative_to(tests).as_posix()
        if rel.split('/')[0] in ROS_FREE_DIRS and rel not in ROS_FREE_EXCEPT:
            item.add_marker(pytest.mark.ros_free)


def shared_file(rel: str) -> Path:
    """A file of ../shared/data, checked against SHA256SUMS; skips the test when absent."""
    path = SHARED_DATA / rel
    if not path.is_file():
        pytest.skip(f'recording {rel} not found under {SHARED_DATA} (the shared data folder)')
    sums = {}
    for line in (SHARED_DATA / 'SHA256SUMS').read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.removeprefix('./')] = digest
    expected = sums.get(rel)
    if expected is not None:
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        assert actual == expected, f'{rel}: SHA-256 {actual} does not match SHA256SUMS'
    return path


def make_scenario(out: Path, scenario: str, seconds: float, seed: int) -> Path:
    """``tools/make_scenario.py`` at 640x360 into ``out``; returns the bag folder."""
    made = subprocess.run(
        [
            sys.executable,
            str(ROOT / 'tools' / 'make_scenario.py'),
            *('--scenario', scenario, '--seconds', f'{seconds:g}', '--seed', str(seed)),
            *('--camera', '640x360', '--out', str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    return out / 'bag'


def log_excerpt(log: str, tail: int = 4000) -> str:
    """The end of a launch log, with the head of each native crash before it: faulthandler's
    "Fatal Python error" line and the innermost frames, which the tail alone cuts off."""
    lines = log.splitlines()
    heads = []
    for i, line in enumerate(lines):
        if 'Fatal Python error' in line:
            heads.append('\n'.join(lines[max(0, i - 5) : i + 40]))
    crash = ''.join(f'--- native crash ---\n{h}\n' for h in heads[:3])
    return crash + '--- end of the log ---\n' + log[-tail:]


def wait_for(condition: Callable[[], bool], deadline_s: float = 60.0) -> bool:
    """Whether ``condition()`` holds within ``deadline_s`` (polled every 20 ms)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)  # paced: polling
    return False


def ros2_cli(
    ros2: Path, args: Sequence[str], env: dict[str, str], deadline_s: float = 90.0
) -> subprocess.CompletedProcess[str]:
    """``ros2 <args>`` (param get/set, ...) again while its own participant has not discovered
    the node yet ('Node not found'), up to ``deadline_s``: a loaded machine can take long."""
    end = time.monotonic() + deadline_s
    while True:
        out = subprocess.run(
            [str(ros2), *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        if 'Node not found' not in out.stderr or time.monotonic() > end:
            return out


def child_pids(pid: int) -> list[int]:
    """The children of process ``pid`` (from /proc)."""
    return [int(x) for x in Path(f'/proc/{pid}/task/{pid}/children').read_text().split()]


def sweep_dead_dds() -> int:
    """Removes the Fast DDS shared-memory files whose owner died (:mod:`rt_fusion.core.dds_shm`,
    what the warm keeper does on the vehicle); returns how many segments went. Tests kill
    processes (chaos, soak, lifecycle), and a killed participant leaves its port segments behind
    for the next test that gets its domain: Fast DDS 3 can crash reopening a port segment left
    mid-write (eProsima/Fast-DDS#6501, SIGSEGV in check_sanity): the likely cause, not a proven
    one, of a fusion node's SIGSEGV at start-up in a Kilted CI run."""
    from rt_fusion.core import dds_shm  # noqa: PLC0415

    try:
        return len(dds_shm.sweep().segments)
    except OSError:
        return 0


def lease_domain() -> int:
    """A ROS domain no other process on this machine holds (:func:`rt_fusion.core.domains.lease`:
    two pytest runs, or a suite and an evaluation, once shared one), its dead Fast DDS segments
    swept."""
    domain = domains.lease(LEASES_HELD)
    sweep_dead_dds()
    return domain


def ros_env(domain_id: int | None = None) -> dict[str, str]:
    """Environment for a child ROS process: its own domain (leased machine-wide), discovery on
    localhost only."""
    env = dict(os.environ)
    if domain_id is None:
        domain_id = lease_domain()
    env['ROS_DOMAIN_ID'] = str(domain_id)
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    env['PYTHONUNBUFFERED'] = '1'
    env.setdefault('RCUTILS_LOGGING_BUFFERED_STREAM', '0')
    return env


@contextlib.contextmanager
def ros_context(domain_id: int | None = None) -> Iterator[Any]:
    """An rclpy context of its own in this process (the test's ROS domain, or ``domain_id``),
    shut down at the end; skips the test where rclpy is missing."""
    rclpy = pytest.importorskip('rclpy')
    from rt_fusion.ros import compat  # noqa: PLC0415

    context = rclpy.Context()
    domain = domain_id if domain_id is not None else int(ros_env()['ROS_DOMAIN_ID'])
    rclpy.init(context=context, domain_id=domain)
    try:
        yield context
    finally:
        compat.try_shutdown(context=context)


class Proc:
    """A child process whose stdout lines are collected by a thread; waits have deadlines."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], name: str) -> None:
        self.name = name
        self.argv = list(argv)
        self.popen = subprocess.Popen(
            self.argv,
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            # Its own process group: a SIGKILL at the deadline takes its children with it (a
            # killed `ros2 launch` left its nodes running, and they loaded every later test).
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        self.leftover: list[str] = []  # processes still there at a missed stop deadline
        self._threads = [
            threading.Thread(
                target=self._pump, args=(self.popen.stdout, self.lines.put), daemon=True
            ),
            threading.Thread(
                target=self._pump, args=(self.popen.stderr, self.stderr.append), daemon=True
            ),
        ]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _pump(stream, sink) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            sink(line.rstrip('\n'))

    def read_line(self, deadline_s: float) -> str | None:
        """The next stdout line, or None when the deadline passes or the process ended."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                return self.lines.get(timeout=0.05)
            except queue.Empty:
                if self.popen.poll() is not None and self.lines.empty():
                    for thread in self._threads:
                        thread.join(timeout=1.0)
                    return self.lines.get_nowait() if not self.lines.empty() else None
        return None

    def read_until(self, prefix: str, deadline_s: float) -> tuple[list[str], str]:
        """Lines before the first one starting with ``prefix``, and that line."""
        end = time.monotonic() + deadline_s
        before: list[str] = []
        while True:
            line = self.read_line(max(0.0, end - time.monotonic()))
            if line is None:
                raise AssertionError(
                    f'{self.name}: no line starting with {prefix!r} before the deadline; '
                    f'exit={self.popen.poll()} stderr:\n' + '\n'.join(self.stderr[-30:])
                )
            if line.startswith(prefix):
                return before, line
            before.append(line)

    def messages(self, deadline_s: float = 60.0) -> tuple[list[dict], dict]:  # type: ignore[type-arg]
        """topic_echo's messages (parsed) and its summary, once it ends."""
        before, line = self.read_until('SUMMARY ', deadline_s)
        msgs = [json.loads(x.removeprefix('MSG ')) for x in before if x.startswith('MSG ')]
        return msgs, json.loads(line.removeprefix('SUMMARY '))

    def summary(self, deadline_s: float = 60.0) -> tuple[list[str], dict]:  # type: ignore[type-arg]
        """Lines printed before the node's ``SUMMARY {json}`` line, and the parsed summary."""
        before, line = self.read_until('SUMMARY ', deadline_s)
        return before, json.loads(line.removeprefix('SUMMARY '))

    def tail(self, n: int = 30) -> str:
        """The last ``n`` stdout lines not read yet and the last ``n`` stderr lines (a failed
        assertion's context: ``ros2 launch`` writes its nodes' logs to stdout)."""
        out = list(self.lines.queue)[-n:]
        return '\n'.join(['stdout:', *out, 'stderr:', *self.stderr[-n:]])

    def close_stdin(self) -> None:
        """Closes the child's stdin (processes that linger until their stdin ends then exit)."""
        if self.popen.stdin is not None and not self.popen.stdin.closed:
            self.popen.stdin.close()

    def wait_stderr(self, text: str, deadline_s: float = 30.0) -> bool:
        """Whether a stderr line (ROS logs go there) containing ``text`` arrives in time."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if any(text in line for line in list(self.stderr)):
                return True
            time.sleep(0.05)  # paced: the stderr reader thread
        return False

    def wait(self, timeout_s: float = 30.0) -> int:
        """Exit status, after at most ``timeout_s``; its stdout and stderr read to the end (a
        loaded machine's reader threads lag the exit: a test then checked a stderr without its
        last lines, the process's fatal error)."""
        status = self.popen.wait(timeout=timeout_s)
        for thread in self._threads:
            thread.join(timeout=5.0)  # until the pipes close (a child that keeps them: 5 s)
        return status

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGINT to its group (as a terminal's Ctrl-C), then SIGKILL after ``timeout_s``.

        What was still running at the deadline is kept in ``leftover`` (``ps`` lines).
        """
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGINT)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.leftover = group_processes(self.popen.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # whatever it left behind


class ProcGroup:
    """Starts processes on one isolated ROS domain and stops them all at the end of a test."""

    def __init__(self) -> None:
        self.env = ros_env()
        self.procs: list[Proc] = []

    def node(
        self,
        module: str,
        *ros_args: str,
        name: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Proc:
        """``python -m rt_fusion.nodes.<module> --ros-args <ros_args>``."""
        argv = [sys.executable, '-m', f'rt_fusion.nodes.{module}']
        if ros_args:
            argv += ['--ros-args', *ros_args]
        return self.spawn(argv, name or module, env)

    def tool(
        self, script: str, *args: str, name: str | None = None, env: dict[str, str] | None = None
    ) -> Proc:
        """``python tools/<script> <args>``."""
        return self.spawn(
            [sys.executable, str(ROOT / 'tools' / script), *args], name or script, env
        )

    def echo(self, topic: str, msg_type: str, *args: str) -> Proc:
        """tools/topic_echo.py on ``topic``; it prints READY, MSG lines, then SUMMARY."""
        proc = self.tool('topic_echo.py', topic, msg_type, *args, name=f'echo {topic}')
        proc.read_until('READY', 30)
        return proc

    def spawn(self, argv: Sequence[str], name: str, env: dict[str, str] | None = None) -> Proc:
        """Any process, in this group's environment (plus ``env``)."""
        proc = Proc(argv, {**self.env, **(env or {})}, name)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        """Stops every process of the group."""
        for proc in reversed(self.procs):
            proc.stop()


@pytest.fixture
def procs() -> Iterator[ProcGroup]:
    """Real processes on a ROS domain of their own, stopped after the test."""
    group = ProcGroup()
    try:
        yield group
    finally:
        group.stop_all()

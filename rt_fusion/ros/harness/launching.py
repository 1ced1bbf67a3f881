"""Starting a graph through its launch file, from tools and tests.

``python -m rt_fusion.ros.harness.launching FILE [name:=value ...]`` runs a launch file of the
installed package (or a path) in a ``launch.LaunchService`` in its own process, so a tool can start
the very graph ``ros2 launch`` starts, stop it with SIGINT and keep its own signal handling.
:class:`LaunchedGraph` does that from Python and forwards the graph's output lines.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.keeper import STANDBY_PREFIX, process_name


class LaunchUnavailableError(RtFusionError):
    """launch / launch_ros are not installed (make setup installs them from ../shared)."""

    def __init__(self) -> None:
        super().__init__(
            'launch/launch_ros are not installed: make setup installs them from '
            '../shared/wheels/ros2_launch (on a vehicle: the distribution apt packages)'
        )


def available() -> bool:
    """Whether launch and launch_ros import here."""
    return all(importlib.util.find_spec(m) is not None for m in ('launch', 'launch_ros'))


def ament_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this Python's prefix on AMENT_PREFIX_PATH where rt_fusion is installed there
    (the venv of ``make setup``) and not yet on the path: a tool run from a plain shell finds the
    package's launch files, configuration and executables without anything sourced."""
    out = dict(env)
    marker = Path(sys.prefix) / 'share' / 'ament_index' / 'resource_index' / 'packages'
    paths = [p for p in out.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    if (marker / 'rt_fusion').is_file() and sys.prefix not in paths:
        out['AMENT_PREFIX_PATH'] = os.pathsep.join([sys.prefix, *paths])
    return out


def resolve(launch_file: str) -> Path:
    """A launch file: a path, or a name in the installed package's share/rt_fusion/launch."""
    path = Path(launch_file)
    if path.is_file():
        return path.resolve()
    from ament_index_python.packages import get_package_share_directory  # noqa: PLC0415

    return Path(get_package_share_directory('rt_fusion')) / 'launch' / launch_file


class LaunchedGraph:
    """A launch file running in a child process; lines of its output in ``lines``."""

    def __init__(
        self,
        launch_file: str,
        arguments: Mapping[str, str],
        env: Mapping[str, str] | None = None,
        log: Path | None = None,
    ) -> None:
        if not available():
            raise LaunchUnavailableError
        argv = [sys.executable, '-m', 'rt_fusion.ros.harness.launching', launch_file]
        argv += [f'{k}:={v}' for k, v in arguments.items()]
        self.lines: queue.Queue[str] = queue.Queue()
        self.history: list[str] = []  # every line so far (wait_for_line consumes ``lines``)
        self.leftover: list[str] = []  # processes still there at a missed stop deadline
        self.log = open(log, 'w') if log is not None else None  # noqa: SIM115 (closed in stop)
        self.popen = subprocess.Popen(
            argv,
            env=ament_env({**os.environ, **(env or {})}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,  # our Ctrl-C reaches it once, through stop()
        )
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            if self.log is not None:
                self.log.write(line)
                self.log.flush()
            self.history.append(line.rstrip('\n'))
            self.lines.put(line.rstrip('\n'))

    def wait_for_line(self, needles: str | Sequence[str], deadline_s: float) -> str | None:
        """The first output line containing one of ``needles`` within ``deadline_s``, else
        None (also when the graph ended)."""
        wanted = (needles,) if isinstance(needles, str) else tuple(needles)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.popen.poll() is not None:
                    return None
                continue
            if any(n in line for n in wanted):
                return line
        return None

    def died(self) -> list[str]:
        """The processes launch reported dead (exit status other than 0), by their names, each
        with its last error line; and the launch process itself where it has ended (a launch
        file that fails to load dies before it starts any node)."""
        history = list(self.history)
        found = (re.search(r'\[([\w.-]+-\d+)\]: process has died', x) for x in history)
        names = [m.group(1) for m in found if m is not None]
        out = [f'{name} ({self.last_error(name)})' for name in names]
        code = self.popen.poll()
        if code is not None and code != 0:
            out.append(f'launch (exit {code}: {self.last_error()})')
        return out

    def last_error(self, name: str | None = None) -> str:
        """The last line of ``name``'s output (``fusion_node-2``; the whole output when None)
        that reads as an error, else its last line, else '(no output)'."""
        lines = [x for x in list(self.history) if name is None or x.startswith(f'[{name}]')]
        lines = [x for x in lines if 'process has died' not in x and x.strip()]
        errors = [x for x in lines if re.search(r'error|Error|ERROR|refused|Fatal', x)]
        chosen = errors[-1] if errors else (lines[-1] if lines else '(no output)')
        return chosen.strip()

    def finished(self, executable: str) -> bool:
        """Whether the process of ``executable`` (``replay_node``) ended, well or not."""
        return any(
            f'[{executable}-' in line
            and ('process has finished cleanly' in line or 'process has died' in line)
            for line in list(self.history)
        )

    def stop(self, timeout_s: float = 20.0) -> int:
        """Ctrl-C as a terminal sends it, SIGKILL to the group if it does not end in time.

        SIGINT goes to the whole process group: launch, seeing a SIGINT, assumes the terminal
        sent it to every process and forwards none (its children then only get SIGTERM after
        five seconds, as the end of every evaluation run showed).
        """
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGINT)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.leftover = group_processes(self.popen.pid)
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self._pump.join(timeout=5.0)
        if self.leftover and self.log is not None:
            self.log.write(f'[stop] still running after {timeout_s} s, SIGKILLed:\n')
            self.log.writelines(f'[stop]   {line}\n' for line in self.leftover)
        if self.log is not None:
            self.log.close()
        return self.popen.returncode


def _group(pgid: int) -> Iterator[tuple[Path, list[str]]]:
    """(/proc entry, stat fields after the command name) of each process of group ``pgid``."""
    for entry in Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / 'stat').read_text()
            fields = stat[stat.rindex(')') + 2 :].split()
            if int(fields[2]) != pgid:  # state, ppid, pgrp, ...
                continue
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
        yield entry, fields


def group_argv(pgid: int) -> dict[int, list[str]]:
    """pid -> command line of each process of group ``pgid`` (a launch's nodes, for tools that
    watch or kill them)."""
    return {pid: argv for pid, (argv, _parent) in _group_argv_parents(pgid).items()}


def _group_argv_parents(pgid: int) -> dict[int, tuple[list[str], int]]:
    """pid -> (command line, parent pid) of each process of group ``pgid``."""
    out: dict[int, tuple[list[str], int]] = {}
    for entry, fields in _group(pgid):
        try:
            raw = (entry / 'cmdline').read_bytes()
        except OSError:
            continue
        argv = [a.decode(errors='replace') for a in raw.split(b'\0') if a]
        out[int(entry.name)] = (argv, int(fields[1]))  # fields: state, ppid, pgrp, ...
    return out


def node_processes(pgid: int) -> dict[str, tuple[int, int]]:
    """node name (``__node:=``) -> (its process, the process launch started) in a launch's
    group. They are the same without a warm keeper (``rt_fusion.core.keeper``); with one, the
    node is the keeper's child (the other child, named ``standby-<node>``, waits)."""
    named: dict[int, tuple[str, int]] = {}  # pid -> (node, parent pid)
    for pid, (argv, parent) in _group_argv_parents(pgid).items():
        name = next((a.split(':=', 1)[1] for a in argv if a.startswith('__node:=')), None)
        if name and not process_name(pid).startswith(STANDBY_PREFIX):  # a standby is not the node
            named[pid] = (name, parent)
    out: dict[str, tuple[int, int]] = {}
    for pid, (name, parent) in named.items():
        if parent in named and named[parent][0] == name:
            out[name] = (pid, parent)  # the keeper's child
        elif name not in out:
            out[name] = (pid, pid)
    return out


def domain_process(domain: str | int, needle: str) -> int | None:
    """The pid of a process on ROS domain ``domain`` (its environment's ``ROS_DOMAIN_ID``)
    whose command line holds ``needle`` (a node of a graph another tool launched)."""
    for entry in Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / 'cmdline').read_bytes()
            env = (entry / 'environ').read_bytes().split(b'\0')
        except OSError:
            continue
        if needle.encode() in cmd and f'ROS_DOMAIN_ID={domain}'.encode() in env:
            return int(entry.name)
    return None


def group_processes(pgid: int) -> list[str]:
    """The processes of group ``pgid`` as ``pid state wchan cmdline`` lines (from /proc).

    For a stop that missed its deadline: which process held it up, and in which kernel wait.
    """
    out = []
    for entry, fields in _group(pgid):
        try:
            wchan = (entry / 'wchan').read_text().strip() or '-'
            cmd = (entry / 'cmdline').read_bytes().replace(b'\0', b' ').decode(errors='replace')
        except OSError:
            continue  # it ended meanwhile
        out.append(f'{entry.name} {fields[0]} {wchan} {cmd.strip()[:200]}')
    return sorted(out, key=lambda line: int(line.split()[0]))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rt_fusion.ros.harness.launching FILE [name:=value ...]``: LaunchService."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(__doc__)
        return 2
    if not available():
        print(f'rt_fusion: {LaunchUnavailableError()}', file=sys.stderr)
        return 2
    # Imported by name: run from the repository root, mypy would take its launch/ folder.
    launch: Any = importlib.import_module('launch')
    sources: Any = importlib.import_module('launch.launch_description_sources')

    launch_args = [tuple(a.split(':=', 1)) for a in args[1:]]
    bad = [a for a in launch_args if len(a) != 2]
    if bad:
        print(f'rt_fusion: launch arguments must be name:=value, got {bad}', file=sys.stderr)
        return 2
    # A tool started in the background (``cmd &``) inherits SIGINT ignored; launch would then
    # never stop on it, and nodes stopped by it were respawned (respawn:=true).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    service = launch.LaunchService()
    service.include_launch_description(
        launch.LaunchDescription(
            [
                launch.actions.IncludeLaunchDescription(
                    sources.PythonLaunchDescriptionSource(str(resolve(args[0]))),
                    launch_arguments=launch_args,
                )
            ]
        )
    )
    return int(service.run())


if __name__ == '__main__':
    sys.exit(main())

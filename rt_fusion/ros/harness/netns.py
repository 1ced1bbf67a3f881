"""Two hosts on one machine: network namespaces joined by a veth pair, each with a /dev/shm of
its own, so a graph split across them talks over a real network (UDP multicast discovery, no
shared memory between the hosts). Needs root (``ip netns``, ``unshare``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from rt_fusion.core.errors import RtFusionError

SUBNET = '10.201.{}.{}'


class NetnsError(RtFusionError):
    """Setting up the namespaces failed: the command and what it said."""


def sh(*cmd: str) -> None:
    """Runs a command, raising on failure (its stderr in the error)."""
    subprocess.run(cmd, check=True, capture_output=True, text=True)


class Hosts:
    """Two network namespaces and a veth pair between them (removed by :meth:`close`)."""

    def __init__(self) -> None:
        tag = os.getpid() % 10000
        self.shm: tuple[Path, ...] = ()
        self.ns = (f'rtf_sensors_{tag}', f'rtf_compute_{tag}')
        self.names = ('rtf-sensors', 'rtf-compute')
        veth = (f'rtfs{tag}', f'rtfc{tag}')
        net = tag % 250
        # Each host's /dev/shm: a folder bind-mounted there in every process of that host, so
        # its processes share it (our rings, Fast DDS's own shared-memory transport) and the
        # other host's processes do not see it.
        self.shm = tuple(Path(f'/tmp/rtf_two_hosts_{tag}') / name for name in self.names)
        for d in self.shm:
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o1777)
        try:
            for ns in self.ns:
                sh('ip', 'netns', 'add', ns)
            sh('ip', 'link', 'add', veth[0], 'type', 'veth', 'peer', 'name', veth[1])
            for i, (ns, dev) in enumerate(zip(self.ns, veth, strict=True)):
                sh('ip', 'link', 'set', dev, 'netns', ns)
                run = ('ip', 'netns', 'exec', ns)
                sh(*run, 'ip', 'addr', 'add', f'{SUBNET.format(net, i + 1)}/24', 'dev', dev)
                sh(*run, 'ip', 'link', 'set', dev, 'up', 'multicast', 'on')
                sh(*run, 'ip', 'link', 'set', 'lo', 'up')
                sh(*run, 'ip', 'route', 'add', '224.0.0.0/4', 'dev', dev)
        except subprocess.CalledProcessError as err:
            self.close()
            raise NetnsError(f'{" ".join(err.cmd)}: {err.stderr.strip()}') from err

    def argv(self, host: int, cmd: list[str]) -> list[str]:
        """``cmd`` on host 0 (sensors) or 1 (compute): its namespace, hostname and /dev/shm."""
        inner = (
            f'mount --bind {self.shm[host]} /dev/shm && hostname {self.names[host]} && exec "$@"'
        )
        return [
            *('ip', 'netns', 'exec', self.ns[host]),
            *('unshare', '--mount', '--uts', '--propagation', 'private'),
            *('bash', '-c', inner, 'host', *cmd),
        ]

    def close(self) -> None:
        import shutil  # noqa: PLC0415

        for ns in self.ns:
            subprocess.run(['ip', 'netns', 'del', ns], capture_output=True, check=False)
        if self.shm:
            shutil.rmtree(self.shm[0].parent, ignore_errors=True)

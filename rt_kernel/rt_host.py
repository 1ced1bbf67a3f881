#!/usr/bin/env python3
"""Puts a Jetson AGX Orin (JetPack 6.2 or 7.2) on PREEMPT_RT and tunes it for rt_fusion.

JetPack 6.2 is Jetson Linux r36.4 on Ubuntu 22.04 with ROS 2 Humble from apt; JetPack 7.2 is
Jetson Linux r38.4 on Ubuntu 24.04 with ROS 2 Jazzy (:data:`JETPACKS`). The release is read from
``/etc/nv_tegra_release``; ``check`` reports it with the Ubuntu release and the ROS 2 install it
expects, and refuses neither: a mismatch is a row to fix.

Standard library only: it runs with the vehicle's system Python, before any venv exists.
Every step checks first and changes only what differs; what it changes is recorded, with the
value it had, in a state file, so ``undo`` puts the machine back as it found it.

  sudo rt_kernel/rt_host.py check                  # read-only report, exit 1 if not ready
  sudo rt_kernel/rt_host.py apply --dry-run        # what apply would do
  sudo rt_kernel/rt_host.py apply                  # all steps (kernel, boot, sysctl, irq, cpufreq)
  sudo rt_kernel/rt_host.py apply --step irq       # one step
  sudo rt_kernel/rt_host.py undo                   # everything apply recorded, newest first

Steps (settings in ``rt_kernel/rt_host.conf``, or ``--config``):

kernel
    NVIDIA's real-time kernel packages for the installed L4T release (r36.x or r38.x): an apt
    source line for ``https://repo.download.nvidia.com/jetson/rt-kernel <release> main`` and
    ``nvidia-l4t-rt-kernel nvidia-l4t-rt-kernel-headers nvidia-l4t-rt-kernel-oot-modules
    nvidia-l4t-display-rt-kernel`` (the Orin set on both releases; Developer Guide, Kernel,
    Real-Time Kernel, r36.4 and r38.4). Needs a reboot. Jetson only.
boot
    Kernel arguments on the default entry of ``/boot/extlinux/extlinux.conf``:
    ``isolcpus=nohz,domain,managed_irq,<rt cpus> nohz_full=<rt cpus> rcu_nocbs=<rt cpus>
    irqaffinity=<housekeeping cpus>`` (a backup of the file is kept). Needs a reboot.
sysctl
    ``kernel.sched_rt_runtime_us`` (-1: RT throttling off, so a runaway SCHED_FIFO task is not
    cut at 95 % — the deadline monitor catches overruns instead), ``kernel.timer_migration=0``,
    ``vm.stat_interval`` (fewer vmstat wake-ups on isolated CPUs). Runtime only.
irq
    Every movable interrupt to the housekeeping CPUs, then the CAN (mttcan) and camera (VI,
    NVCSI, ISP) interrupts to the CPUs configured for them. Runtime only.
cpufreq
    The ``performance`` governor on every CPU, and ``nvpmodel -m <mode>`` + ``jetson_clocks``
    when present (fixed clocks: no frequency ramps in the middle of a planning cycle).

Runtime settings are lost at reboot: ``apply --step sysctl --step irq --step cpufreq`` from a
systemd unit re-applies them (see rt_kernel/README.md). ``--root DIR`` runs against another
file-system root (images, tests).
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
RT_PACKAGES = (
    'nvidia-l4t-rt-kernel',
    'nvidia-l4t-rt-kernel-headers',
    'nvidia-l4t-rt-kernel-oot-modules',
    'nvidia-l4t-display-rt-kernel',
)
STEPS = ('kernel', 'boot', 'sysctl', 'irq', 'cpufreq')


@dataclass(frozen=True)
class JetPack:
    """What one Jetson Linux major release brings on the AGX Orin."""

    jetpack: str
    ubuntu: str
    codename: str
    ros: str
    kernel: str


# Jetson Linux major release -> the JetPack rt_fusion supports on it.
JETPACKS = {
    36: JetPack('6.2', '22.04', 'jammy', 'humble', '5.15'),
    38: JetPack('7.2', '24.04', 'noble', 'jazzy', '6.8'),
}
SUPPORTED = ', '.join(f'r{k} (JetPack {v.jetpack})' for k, v in JETPACKS.items())
DEFAULTS = {
    'rt_cpus': '8-11',
    'housekeeping_cpus': '0-7',
    'can_irq_cpus': '7',
    'camera_irq_cpus': '6',
    'can_irq_pattern': r'mttcan|\bcan\d',
    'camera_irq_pattern': r'\bvi\b|nvcsi|isp|host1x',
    'sched_rt_runtime_us': '-1',
    'timer_migration': '0',
    'vm_stat_interval': '10',
    'governor': 'performance',
    'nvpmodel_mode': '0',
    'rt_kernel_repo': 'https://repo.download.nvidia.com/jetson/rt-kernel',
}


class HostError(Exception):
    """A step cannot be carried out (with what to do about it)."""


def parse_cpus(text: str) -> list[int]:
    """'0-3,6' -> [0, 1, 2, 3, 6] (the kernel's cpu-list format)."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(','))):
        m = re.fullmatch(r'(\d+)(?:-(\d+))?', part)
        if not m:
            raise HostError(f'bad CPU list {text!r}: expected e.g. 0-3,6')
        lo, hi = int(m[1]), int(m[2] or m[1])
        if hi < lo:
            raise HostError(f'bad CPU range {part!r} in {text!r}')
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def cpu_mask(cpus: list[int]) -> str:
    """[0, 1, 8] -> '103' (hex bitmask for /proc/irq/*/smp_affinity)."""
    return format(sum(1 << c for c in cpus), 'x')


@dataclass
class Check:
    """One line of the report."""

    name: str
    value: str
    ok: bool | None  # None: informational / not applicable here
    advice: str = ''


@dataclass
class Host:
    """The machine under ``root``, its settings and the record of what apply changed."""

    root: Path
    conf: dict[str, str]
    dry_run: bool = False
    log: list[str] = field(default_factory=list)

    # -- paths and small helpers -------------------------------------------------------------

    def path(self, p: str) -> Path:
        return self.root / p.lstrip('/')

    def read(self, p: str) -> str:
        try:
            return self.path(p).read_text().strip()
        except OSError:
            return ''

    @property
    def state_file(self) -> Path:
        return self.path('/var/lib/rt_fusion/rt_host_state.json')

    def state(self) -> list[dict[str, str]]:
        try:
            return list(json.loads(self.state_file.read_text()))
        except (OSError, ValueError):
            return []

    def record(self, entry: dict[str, str]) -> None:
        if self.dry_run:
            return
        entries = self.state()
        # Keep the first original of a setting: undo must restore what was there before rt_host.
        if any(e['kind'] == entry['kind'] and e['target'] == entry['target'] for e in entries):
            return
        entries.append(entry)
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(entries, indent=1) + '\n')

    def say(self, line: str) -> None:
        self.log.append(line)
        print(('[dry-run] ' if self.dry_run else '') + line)

    def write(self, p: str, value: str) -> None:
        if not self.dry_run:
            self.path(p).write_text(value + '\n')

    def run(self, argv: list[str]) -> None:
        self.say('$ ' + ' '.join(argv))
        if not self.dry_run:
            subprocess.run(argv, check=True)

    @property
    def rt_cpus(self) -> list[int]:
        return parse_cpus(self.conf['rt_cpus'])

    @property
    def housekeeping(self) -> list[int]:
        return parse_cpus(self.conf['housekeeping_cpus'])

    def l4t_release(self) -> str | None:
        """'r36.4' from /etc/nv_tegra_release ('# R36 (release), REVISION: 4.3, ...')."""
        m = re.search(
            r'#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+)', self.read('/etc/nv_tegra_release')
        )
        return f'r{m[1]}.{m[2]}' if m else None

    def jetpack(self) -> JetPack | None:
        """The JetPack of the installed L4T release (None: not a Jetson, or unsupported)."""
        release = self.l4t_release()
        return JETPACKS.get(int(release[1:].split('.')[0])) if release else None

    def os_codename(self) -> str:
        m = re.search(r'^VERSION_CODENAME=(\S+)', self.read('/etc/os-release'), re.M)
        return m[1].strip('"') if m else '?'

    def n_cpus(self) -> int:
        present = self.read('/sys/devices/system/cpu/present')
        return len(parse_cpus(present)) if present else (os.cpu_count() or 1)

    # -- kernel ------------------------------------------------------------------------------

    def kernel_checks(self) -> list[Check]:
        version = self.read('/proc/version')
        rt = self.read('/sys/kernel/realtime') == '1' or 'PREEMPT_RT' in version
        release = self.l4t_release()
        out = [
            Check(
                'preemption',
                'PREEMPT_RT' if rt else version.split(' (')[0] or '?',
                rt,
                '' if rt else 'apply --step kernel, then reboot into the RT kernel',
            )
        ]
        if release is None:
            out.append(Check('L4T release', 'not a Jetson (no /etc/nv_tegra_release)', None))
        else:
            installed = [p for p in RT_PACKAGES if self._dpkg_installed(p)]
            jp = self.jetpack()
            out.append(
                Check(
                    'L4T release',
                    f'{release} = JetPack {jp.jetpack}' if jp else release,
                    jp is not None,
                    f'rt_fusion supports {SUPPORTED}',
                )
            )
            if jp is not None:
                codename = self.os_codename()
                out.append(
                    Check(
                        'Ubuntu',
                        codename,
                        codename == jp.codename,
                        f'JetPack {jp.jetpack} is Ubuntu {jp.ubuntu} ({jp.codename})',
                    )
                )
                ros = self.path(f'/opt/ros/{jp.ros}/setup.bash').exists()
                out.append(
                    Check(
                        'ROS 2',
                        f'/opt/ros/{jp.ros}' + ('' if ros else ' missing'),
                        ros,
                        f'apt install ros-{jp.ros}-ros-base (README: On the vehicle)',
                    )
                )
            out.append(
                Check(
                    'RT kernel packages',
                    f'{len(installed)}/{len(RT_PACKAGES)}',
                    len(installed) == len(RT_PACKAGES),
                    'apply --step kernel',
                )
            )
        return out

    def _dpkg_installed(self, package: str) -> bool:
        status = self.read('/var/lib/dpkg/status')
        return bool(
            re.search(
                rf'^Package: {re.escape(package)}\n(?:[^\n]+\n)*?'
                r'Status: install ok installed',
                status + '\n',
                re.M,
            )
        )

    def apply_kernel(self) -> None:
        release = self.l4t_release()
        if release is None:
            raise HostError(
                'kernel: not a Jetson (no /etc/nv_tegra_release); on other hosts '
                "install your distribution's PREEMPT_RT kernel (Ubuntu Pro: "
                '`pro enable realtime-kernel`)'
            )
        if self.jetpack() is None:
            raise HostError(f'kernel: L4T {release} is not supported (supported: {SUPPORTED})')
        source = self.path('/etc/apt/sources.list.d/nvidia-l4t-rt-kernel.list')
        line = f'deb {self.conf["rt_kernel_repo"]} {release} main'
        if not source.exists() or line not in source.read_text():
            self.say(f'kernel: add apt source {line!r} to {source}')
            self.record({'kind': 'file-created', 'target': str(source), 'value': ''})
            if not self.dry_run:
                source.parent.mkdir(parents=True, exist_ok=True)
                source.write_text(line + '\n')
        missing = [p for p in RT_PACKAGES if not self._dpkg_installed(p)]
        if not missing:
            self.say('kernel: RT kernel packages already installed')
            return
        self.record({'kind': 'packages', 'target': ' '.join(missing), 'value': ''})
        self.run(['apt-get', 'update'])
        self.run(['apt-get', 'install', '-y', *missing])
        self.say('kernel: installed; reboot to run it (check: uname -v shows PREEMPT_RT)')

    # -- boot arguments ----------------------------------------------------------------------

    def boot_args(self) -> dict[str, str]:
        rt = self.conf['rt_cpus']
        return {
            'isolcpus': f'nohz,domain,managed_irq,{rt}',
            'nohz_full': rt,
            'rcu_nocbs': rt,
            'irqaffinity': self.conf['housekeeping_cpus'],
        }

    def _extlinux(self) -> tuple[Path, list[str], int]:
        """extlinux.conf, its lines and the index of the default entry's APPEND line."""
        conf = self.path('/boot/extlinux/extlinux.conf')
        if not conf.exists():
            raise HostError(
                f'boot: {conf} not found (not an L4T boot set-up); add '
                f'{" ".join(f"{k}={v}" for k, v in self.boot_args().items())} '
                'to your boot loader by hand'
            )
        lines = conf.read_text().splitlines()
        default = next(
            (
                ln.split(None, 1)[1].strip()
                for ln in lines
                if ln.strip().upper().startswith('DEFAULT ')
            ),
            None,
        )
        label_at = None
        for i, ln in enumerate(lines):
            words = ln.split(None, 1)
            if (
                words
                and words[0].upper() == 'LABEL'
                and (default is None or (len(words) > 1 and words[1].strip() == default))
            ):
                label_at = i
                break
        if label_at is None:
            raise HostError(f'boot: no LABEL {default!r} in {conf}')
        for i in range(label_at + 1, len(lines)):
            words = lines[i].split(None, 1)
            if words and words[0].upper() == 'LABEL':
                break
            if words and words[0].upper() == 'APPEND':
                return conf, lines, i
        raise HostError(f'boot: the {default!r} entry of {conf} has no APPEND line')

    def boot_checks(self) -> list[Check]:
        cmdline = self.read('/proc/cmdline').split()
        out = []
        for key, want in self.boot_args().items():
            have = next((a.split('=', 1)[1] for a in cmdline if a.startswith(key + '=')), None)
            out.append(
                Check(
                    f'boot {key}',
                    have or '(not set)',
                    have == want,
                    f'apply --step boot ({key}={want}), reboot',
                )
            )
        isolated = self.read('/sys/devices/system/cpu/isolated')
        out.append(
            Check(
                'isolated CPUs',
                isolated or '(none)',
                bool(isolated) and parse_cpus(isolated) == self.rt_cpus,
                f'expected {self.conf["rt_cpus"]}',
            )
        )
        return out

    def apply_boot(self) -> None:
        for cpu in self.rt_cpus + self.housekeeping:
            if cpu >= self.n_cpus():
                raise HostError(
                    f'boot: CPU {cpu} does not exist here ({self.n_cpus()} CPUs); '
                    'fix rt_cpus / housekeeping_cpus in the config'
                )
        if set(self.rt_cpus) & set(self.housekeeping):
            raise HostError('boot: rt_cpus and housekeeping_cpus overlap')
        conf, lines, i = self._extlinux()
        args = lines[i].split()
        want = self.boot_args()
        changed = False
        for key, value in want.items():
            new = f'{key}={value}'
            at = next((k for k, a in enumerate(args) if a.startswith(key + '=')), None)
            if at is None:
                args.append(new)
                changed = True
            elif args[at] != new:
                args[at] = new
                changed = True
        if not changed:
            self.say(f'boot: {conf} already has {" ".join(f"{k}={v}" for k, v in want.items())}')
            return
        backup = conf.with_name(conf.name + '.rt_fusion.bak')
        self.say(
            f'boot: {conf}: APPEND += {" ".join(f"{k}={v}" for k, v in want.items())} '
            f'(backup {backup.name}); reboot to take effect'
        )
        self.record({'kind': 'file-backup', 'target': str(conf), 'value': str(backup)})
        if not self.dry_run:
            if not backup.exists():
                shutil.copy2(conf, backup)
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            lines[i] = indent + ' '.join(args)
            conf.write_text('\n'.join(lines) + '\n')

    # -- sysctl ------------------------------------------------------------------------------

    def sysctls(self) -> dict[str, str]:
        return {
            '/proc/sys/kernel/sched_rt_runtime_us': self.conf['sched_rt_runtime_us'],
            '/proc/sys/kernel/timer_migration': self.conf['timer_migration'],
            '/proc/sys/vm/stat_interval': self.conf['vm_stat_interval'],
        }

    def sysctl_checks(self) -> list[Check]:
        out = []
        for p, want in self.sysctls().items():
            have = self.read(p)
            name = p.removeprefix('/proc/sys/').replace('/', '.')
            out.append(
                Check(
                    name,
                    have or '(n/a)',
                    have == want if have else None,
                    f'apply --step sysctl ({want})',
                )
            )
        return out

    def apply_sysctl(self) -> None:
        for p, want in self.sysctls().items():
            have = self.read(p)
            name = p.removeprefix('/proc/sys/').replace('/', '.')
            if not have:
                self.say(f'sysctl: {name} not available here, skipped')
            elif have == want:
                self.say(f'sysctl: {name} = {want} already')
            else:
                self.say(f'sysctl: {name} {have} -> {want}')
                self.record({'kind': 'value', 'target': p, 'value': have})
                self.write(p, want)

    # -- interrupts --------------------------------------------------------------------------

    def irqs(self) -> list[tuple[str, str]]:
        """(irq number, action names) from /proc/interrupts."""
        out = []
        for line in self.read('/proc/interrupts').splitlines()[1:]:
            head, _, rest = line.partition(':')
            if head.strip().isdigit():
                # After the per-CPU counts: controller, hwirq, trigger, then the actions.
                fields = rest.split()
                names = ' '.join(f for f in fields if not f.isdigit())
                out.append((head.strip(), names))
        return out

    def irq_targets(self) -> dict[str, list[int]]:
        """Where each interrupt should go: CAN, camera, or housekeeping."""
        can = re.compile(self.conf['can_irq_pattern'], re.I)
        cam = re.compile(self.conf['camera_irq_pattern'], re.I)
        out = {}
        for irq, names in self.irqs():
            if can.search(names):
                out[irq] = parse_cpus(self.conf['can_irq_cpus'])
            elif cam.search(names):
                out[irq] = parse_cpus(self.conf['camera_irq_cpus'])
            else:
                out[irq] = self.housekeeping
        return out

    def irq_checks(self) -> list[Check]:
        wrong, fixed = [], 0
        for irq, cpus in self.irq_targets().items():
            have = self.read(f'/proc/irq/{irq}/smp_affinity_list')
            if not have:
                continue
            if set(parse_cpus(have)) & set(self.rt_cpus) and not set(cpus) & set(self.rt_cpus):
                wrong.append(irq)
            else:
                fixed += 1
        return [
            Check(
                'IRQs off the RT CPUs',
                f'{fixed} ok, {len(wrong)} on RT CPUs'
                + (f' ({",".join(wrong[:8])}{"..." if len(wrong) > 8 else ""})' if wrong else ''),
                not wrong,
                'apply --step irq',
            )
        ]

    def apply_irq(self) -> None:
        moved = skipped = 0
        for irq, cpus in self.irq_targets().items():
            p = f'/proc/irq/{irq}/smp_affinity_list'
            have = self.read(p)
            if not have:
                continue
            if parse_cpus(have) == cpus:
                continue
            want = ','.join(map(str, cpus))
            self.record({'kind': 'value', 'target': p, 'value': have})
            try:
                self.write(p, want)
                moved += 1
            except OSError:  # per-CPU and some chained interrupts cannot move: that is fine
                skipped += 1
        self.say(f'irq: {moved} interrupts moved, {skipped} not movable')

    # -- cpufreq -----------------------------------------------------------------------------

    def governors(self) -> dict[str, str]:
        out = {}
        cpu_dir = self.path('/sys/devices/system/cpu')
        for gov in sorted(cpu_dir.glob('cpu[0-9]*/cpufreq/scaling_governor')):
            out['/' + str(gov.relative_to(self.root))] = gov.read_text().strip()
        return out

    def cpufreq_checks(self) -> list[Check]:
        govs = self.governors()
        if not govs:
            return [Check('CPU governor', '(no cpufreq here)', None)]
        want = self.conf['governor']
        off = sorted({g for g in govs.values() if g != want})
        return [
            Check(
                'CPU governor',
                want if not off else f'{", ".join(off)} on some CPUs',
                not off,
                'apply --step cpufreq',
            )
        ]

    def apply_cpufreq(self) -> None:
        want = self.conf['governor']
        for p, have in self.governors().items():
            if have != want:
                self.say(f'cpufreq: {p.split("/")[5]} {have} -> {want}')
                self.record({'kind': 'value', 'target': p, 'value': have})
                self.write(p, want)
        if shutil.which('nvpmodel') and self.root == Path('/'):
            self.run(['nvpmodel', '-m', self.conf['nvpmodel_mode']])
            if shutil.which('jetson_clocks'):
                self.run(['jetson_clocks'])
                self.record({'kind': 'command', 'target': 'jetson_clocks --restore', 'value': ''})

    # -- undo --------------------------------------------------------------------------------

    def undo(self) -> None:
        entries = self.state()
        if not entries:
            self.say('undo: nothing recorded')
            return
        for e in reversed(entries):
            kind, target, value = e['kind'], e['target'], e['value']
            if kind == 'value':
                self.say(f'undo: {target} -> {value}')
                try:
                    self.write(target, value)
                except OSError as err:
                    self.say(f'undo: {target}: {err}')
            elif kind == 'file-backup':
                self.say(f'undo: restore {target} from {value}')
                if not self.dry_run:
                    shutil.copy2(value, target)
                    Path(value).unlink()
            elif kind == 'file-created':
                self.say(f'undo: remove {target}')
                if not self.dry_run:
                    Path(target).unlink(missing_ok=True)
            elif kind == 'packages':
                self.run(['apt-get', 'remove', '-y', *target.split()])
            elif kind == 'command':
                self.run(target.split())
        if not self.dry_run:
            self.state_file.rename(self.state_file.with_suffix(f'.undone-{int(time.time())}'))

    # -- report ------------------------------------------------------------------------------

    def checks(self) -> list[Check]:
        limits = self.read('/proc/self/limits')
        rtprio = re.search(r'Max realtime priority\s+(\S+)\s+(\S+)', limits)
        memlock = re.search(r'Max locked memory\s+(\S+)\s+(\S+)', limits)
        out = self.kernel_checks() + self.boot_checks() + self.sysctl_checks()
        out += self.irq_checks() + self.cpufreq_checks()
        if rtprio:
            ok = os.geteuid() == 0 or rtprio[1] not in ('0',)
            out.append(
                Check(
                    'RLIMIT_RTPRIO (this shell)',
                    f'{rtprio[1]} / {rtprio[2]}',
                    ok,
                    'limits.d: @realtime - rtprio 98',
                )
            )
        if memlock:
            ok = os.geteuid() == 0 or memlock[1] == 'unlimited'
            out.append(
                Check(
                    'RLIMIT_MEMLOCK (this shell)',
                    f'{memlock[1]} / {memlock[2]}',
                    ok,
                    'limits.d: @realtime - memlock unlimited',
                )
            )
        return out


def load_conf(path: Path | None) -> dict[str, str]:
    conf = dict(DEFAULTS)
    path = path or HERE / 'rt_host.conf'
    if path.exists():
        parser = configparser.ConfigParser()
        parser.read(path)
        for key, value in parser['rt_host'].items() if parser.has_section('rt_host') else ():
            if key not in DEFAULTS:
                raise HostError(f'{path}: unknown setting {key!r} (known: {", ".join(DEFAULTS)})')
            conf[key] = value.strip()
    for key in ('rt_cpus', 'housekeeping_cpus', 'can_irq_cpus', 'camera_irq_cpus'):
        parse_cpus(conf[key])
    return conf


def print_table(checks: list[Check]) -> None:
    width = max(len(c.name) for c in checks)
    vwidth = min(48, max(len(c.value) for c in checks))
    for c in checks:
        verdict = {True: 'ok', False: 'FIX', None: '--'}[c.ok]
        advice = f'  -> {c.advice}' if c.ok is False and c.advice else ''
        print(f'{c.name:<{width}}  {c.value:<{vwidth}}  {verdict}{advice}')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split('\n\n', 1)[1],
    )
    parser.add_argument('command', choices=('check', 'apply', 'undo'))
    parser.add_argument(
        '--step',
        action='append',
        choices=STEPS,
        help='apply only this step (repeatable); default: all',
    )
    parser.add_argument(
        '--dry-run', action='store_true', help='say what would change, change nothing'
    )
    parser.add_argument('--config', type=Path, help='settings (default rt_kernel/rt_host.conf)')
    parser.add_argument('--root', type=Path, default=Path('/'), help='file-system root')
    args = parser.parse_args(argv)
    try:
        host = Host(args.root, load_conf(args.config), args.dry_run)
        if args.command == 'check':
            checks = host.checks()
            print_table(checks)
            bad = [c for c in checks if c.ok is False]
            print(f'\nverdict: {"ready" if not bad else f"{len(bad)} to fix"}')
            return 1 if bad else 0
        if os.geteuid() != 0 and args.root == Path('/') and not args.dry_run:
            raise HostError(f'{args.command} changes the system: run it with sudo (or --dry-run)')
        if args.command == 'undo':
            host.undo()
            return 0
        for step in args.step or STEPS:
            getattr(host, f'apply_{step}')()
        return 0
    except HostError as err:
        print(f'rt_host: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())

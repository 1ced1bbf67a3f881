"""rt_kernel/rt_host.py against Jetson AGX Orin file-system images of both supported JetPacks
(6.2: L4T r36.4, Ubuntu 22.04, Humble; 7.2: L4T r38.4, Ubuntu 24.04, Jazzy): check, apply,
idempotence and undo back to the original bytes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / 'rt_kernel' / 'rt_host.py'

EXTLINUX = """TIMEOUT 30
DEFAULT primary

MENU TITLE L4T boot options

LABEL primary
      MENU LABEL primary kernel
      LINUX /boot/Image
      INITRD /boot/initrd
      APPEND ${cbootargs} root=PARTUUID=6a3b2c61-1d5e-4a8e-9f0d-3c1e0a2b9d11 rw rootwait rootfstype=ext4 mminit_loglevel=4 console=ttyTCU0,115200 firmware_class.path=/etc/firmware fbcon=map:0 nospectre_bhb video=efifb:off console=tty0

LABEL backup
      MENU LABEL backup kernel
      LINUX /boot/Image.backup
      INITRD /boot/initrd
      APPEND ${cbootargs}
"""

INTERRUPTS = """           CPU0       CPU1       CPU2       CPU3       CPU4       CPU5       CPU6       CPU7       CPU8       CPU9       CPU10      CPU11
 11:    1234567    1200000    1100000    1000000     900000     800000     700000     600000     500000     400000     300000     200000     GICv3  30 Level     arch_timer
 14:         10          0          0          0          0          0          0          0          0          0          0          0     GICv3 104 Level     c150000.hsp
 26:      51234          0          0          0          0          0          0          0       4321          0          0          0     GICv3  72 Level     c310000.mttcan
 27:      48111          0          0          0          0          0          0          0          0       1234          0          0     GICv3  73 Level     c320000.mttcan
 31:      90001          0          0          0          0          0          0          0          0          0      77777          0     GICv3 231 Level     15c10000.vi
 32:       2000          0          0          0          0          0          0          0          0          0          0        500     GICv3 236 Level     15a00000.nvcsi
 40:     700000          0          0          0          0          0          0          0          0          0          0      99999     GICv3 253 Level     3610000.xhci
IPI0:    100000     100000     100000     100000     100000     100000     100000     100000     100000     100000     100000     100000       Rescheduling interrupts
"""


# L4T major -> (nv_tegra_release revision, Ubuntu codename, ROS 2 distribution, kernel)
RELEASES = {
    36: ('4.3', 'jammy', 'humble', '5.15.148'),
    38: ('4.0', 'noble', 'jazzy', '6.8.12'),
}


def _image(tmp_path: Path, major: int = 36, codename: str | None = None) -> Path:
    revision, expected_codename, ros, kernel = RELEASES.get(
        major, ('1.0', 'focal', 'foxy', '5.10')
    )
    root = tmp_path / 'orin'
    files = {
        'etc/nv_tegra_release': f'# R{major} (release), REVISION: {revision}, GCID: 38968081, '
        'BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025\n',
        'etc/os-release': f'NAME="Ubuntu"\nVERSION_CODENAME={codename or expected_codename}\n',
        f'opt/ros/{ros}/setup.bash': '# ROS 2\n',
        'boot/extlinux/extlinux.conf': EXTLINUX,
        'proc/version': f'Linux version {kernel}-tegra (buildbrain@mobile-u64-6336-d8000) '
        '#1 SMP PREEMPT Mon Jun 16 08:24:48 PDT 2025\n',
        'proc/cmdline': 'root=PARTUUID=6a3b2c61 rw rootwait console=ttyTCU0,115200\n',
        'proc/interrupts': INTERRUPTS,
        'proc/sys/kernel/sched_rt_runtime_us': '950000\n',
        'proc/sys/kernel/timer_migration': '1\n',
        'proc/sys/vm/stat_interval': '1\n',
        'sys/devices/system/cpu/present': '0-11\n',
        'sys/devices/system/cpu/isolated': '\n',
        'var/lib/dpkg/status': ''.join(
            f'Package: {p}\nStatus: install ok installed\nVersion: 36.4.3-20250107174145\n\n'
            for p in (
                'nvidia-l4t-rt-kernel',
                'nvidia-l4t-rt-kernel-headers',
                'nvidia-l4t-rt-kernel-oot-modules',
                'nvidia-l4t-display-rt-kernel',
            )
        ),
    }
    affinity = {
        '11': '0-11',
        '14': '0-11',
        '26': '8',
        '27': '9',
        '31': '10',
        '32': '11',
        '40': '0-11',
    }
    for irq, cpus in affinity.items():
        files[f'proc/irq/{irq}/smp_affinity_list'] = cpus + '\n'
    for cpu in range(12):
        files[f'sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor'] = 'schedutil\n'
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args, '--root', str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob('*'))
        if p.is_file() and 'var/lib/rt_fusion' not in str(p)
    }


@pytest.mark.parametrize(('major', 'jetpack'), [(36, '6.2'), (38, '7.2')])
def test_check_apply_is_idempotent_and_undo_restores_every_byte(
    tmp_path: Path, major: int, jetpack: str
) -> None:
    root = _image(tmp_path, major)
    release = f'r{major}.{RELEASES[major][0].split(".")[0]}'
    before = _snapshot(root)
    check = _run(root, 'check')
    assert check.returncode == 1, check.stdout
    assert re.search(rf'L4T release +{release} = JetPack {jetpack} +ok', check.stdout), (
        check.stdout
    )
    assert re.search(rf'Ubuntu +{RELEASES[major][1]} +ok', check.stdout), check.stdout
    assert re.search(rf'ROS 2 +/opt/ros/{RELEASES[major][2]} +ok', check.stdout), check.stdout
    assert re.search(r'RT kernel packages +4/4 +ok', check.stdout), check.stdout
    assert '7 on RT CPUs' in check.stdout  # mttcan, vi, nvcsi on 8-11; the rest spread on 0-11

    dry = _run(root, 'apply', '--dry-run')
    assert dry.returncode == 0, dry.stderr
    assert _snapshot(root) == before  # a dry run changes nothing

    applied = _run(root, 'apply')
    assert applied.returncode == 0, applied.stderr
    conf = (root / 'boot/extlinux/extlinux.conf').read_text()
    primary = conf.split('LABEL backup')[0]
    for arg in (
        'isolcpus=nohz,domain,managed_irq,8-11',
        'nohz_full=8-11',
        'rcu_nocbs=8-11',
        'irqaffinity=0-7',
    ):
        assert primary.count(arg) == 1, arg
    assert 'isolcpus' not in conf.split('LABEL backup')[1]  # the fallback entry stays stock
    apt = root / 'etc/apt/sources.list.d/nvidia-l4t-rt-kernel.list'
    assert (
        apt.read_text()
        == f'deb https://repo.download.nvidia.com/jetson/rt-kernel {release} main\n'
    )
    assert (root / 'proc/sys/kernel/sched_rt_runtime_us').read_text() == '-1\n'
    irq = {
        n: (root / f'proc/irq/{n}/smp_affinity_list').read_text().strip()
        for n in ('11', '26', '27', '31', '32', '40')
    }
    assert irq == {
        '11': '0,1,2,3,4,5,6,7',
        '26': '7',
        '27': '7',
        '31': '6',
        '32': '6',
        '40': '0,1,2,3,4,5,6,7',
    }
    assert (
        root / 'sys/devices/system/cpu/cpu11/cpufreq/scaling_governor'
    ).read_text() == 'performance\n'

    again = _run(root, 'apply')
    assert 'already has' in again.stdout and '0 interrupts moved' in again.stdout
    assert (root / 'boot/extlinux/extlinux.conf').read_text() == conf

    undone = _run(root, 'undo')
    assert undone.returncode == 0, undone.stderr
    assert _snapshot(root) == before


def test_bad_settings_fail_with_their_name(tmp_path: Path) -> None:
    root = _image(tmp_path)
    conf = tmp_path / 'bad.conf'
    conf.write_text('[rt_host]\nrt_cpus = 8-11\nhousekeeping_cpus = 0-8\n')
    r = _run(root, 'apply', '--step', 'boot', '--config', str(conf))
    assert r.returncode == 2 and 'overlap' in r.stderr
    conf.write_text('[rt_host]\nrt_cpu = 8-11\n')
    r = _run(root, 'check', '--config', str(conf))
    assert r.returncode == 2 and "unknown setting 'rt_cpu'" in r.stderr
    conf.write_text('[rt_host]\nrt_cpus = 8-x\n')
    r = _run(root, 'check', '--config', str(conf))
    assert r.returncode == 2 and 'bad CPU list' in r.stderr


@pytest.mark.parametrize('missing', ['etc/nv_tegra_release', 'boot/extlinux/extlinux.conf'])
def test_non_jetson_hosts_get_a_clear_refusal(tmp_path: Path, missing: str) -> None:
    root = _image(tmp_path)
    (root / missing).unlink()
    step = 'kernel' if 'release' in missing else 'boot'
    r = _run(root, 'apply', '--step', step)
    assert r.returncode == 2
    assert ('not a Jetson' if step == 'kernel' else 'not found') in r.stderr


def test_a_jetpack_on_the_wrong_ubuntu_or_without_its_ros_is_a_row_to_fix(tmp_path: Path) -> None:
    root = _image(tmp_path, 38, codename='jammy')
    (root / 'opt/ros/jazzy/setup.bash').unlink()
    check = _run(root, 'check')
    assert check.returncode == 1
    assert re.search(r'Ubuntu +jammy +FIX +-> JetPack 7.2 is Ubuntu 24.04', check.stdout)
    assert re.search(r'ROS 2 +/opt/ros/jazzy missing +FIX', check.stdout), check.stdout


def test_an_unsupported_l4t_release_is_named_and_refused(tmp_path: Path) -> None:
    root = _image(tmp_path, 35)
    check = _run(root, 'check')
    assert re.search(r'L4T release +r35.1 +FIX +-> rt_fusion supports r36', check.stdout)
    r = _run(root, 'apply', '--step', 'kernel')
    assert r.returncode == 2 and 'L4T r35.1 is not supported' in r.stderr
